//! Time, as integer milliseconds since the Unix epoch (UTC) inside; RFC 3339
//! strings only at the edge (`a2a::types::format_timestamp`).

/// Now, in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
