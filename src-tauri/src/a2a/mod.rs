//! The A2A wire model and its errors. Inside Countersign everything speaks
//! v1.0 shapes; other dialects are translated at the edge.

pub mod card;
pub mod client;
pub mod error;
pub mod signing;
pub mod types;
pub mod v0_3;
pub mod v0_3_rest;

pub use error::Error;

/// The protocol version this build serves.
pub const PROTOCOL_VERSION: &str = "1.0";

/// The essence of a media type: without parameters, trimmed, lowercased
/// (`Text/Plain; charset=utf-8` → `text/plain`).
pub fn media_type_essence(media_type: &str) -> String {
    media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// `v` read as a `T`; when it does not fit, the error names the member it
/// is about (`message.parts: invalid type…`). Tracking that path costs a
/// tenth of a parse or more, so it is done only for a value that fails, by
/// reading it again: the same input fails the same way.
pub fn from_value_traced<T: serde::de::DeserializeOwned>(
    v: serde_json::Value,
) -> Result<T, serde_path_to_error::Error<serde_json::Error>> {
    match T::deserialize(&v) {
        Ok(t) => Ok(t),
        Err(_) => serde_path_to_error::deserialize(v),
    }
}

/// [`from_value_traced`] for JSON text: read straight into a `T`, and
/// again with the path tracked only when that fails.
pub fn from_str_traced<T: serde::de::DeserializeOwned>(
    text: &str,
) -> Result<T, serde_path_to_error::Error<serde_json::Error>> {
    match serde_json::from_str(text) {
        Ok(t) => Ok(t),
        Err(_) => serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text)),
    }
}

/// `value` as JSON text, written into a buffer of `capacity` bytes to start
/// with: sized for what is written, it spares the growth from serde_json's
/// 128 bytes (an answered task is about a kilobyte).
pub fn to_json_sized<T: serde::Serialize + ?Sized>(
    value: &T,
    capacity: usize,
) -> serde_json::Result<String> {
    let mut text = Vec::with_capacity(capacity);
    serde_json::to_writer(&mut text, value)?;
    String::from_utf8(text).map_err(<serde_json::Error as serde::ser::Error>::custom)
}
