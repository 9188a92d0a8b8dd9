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
