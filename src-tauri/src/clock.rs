//! Time, as integer milliseconds since the Unix epoch (UTC) inside; RFC 3339
//! strings only at the edge (`a2a::types::format_timestamp`).

use std::sync::atomic::{AtomicI64, Ordering};

/// How far this process's clock is moved from the system's (0 in normal
/// runs; simulations of long timelines move it forward).
static OFFSET_MS: AtomicI64 = AtomicI64::new(0);

/// Now, in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis() + OFFSET_MS.load(Ordering::Relaxed)
}

/// Moves this process's clock by `delta_ms` (for simulations: retention over
/// months of load is tested by moving the clock, not by waiting).
pub fn advance_ms(delta_ms: i64) {
    OFFSET_MS.fetch_add(delta_ms, Ordering::Relaxed);
}
