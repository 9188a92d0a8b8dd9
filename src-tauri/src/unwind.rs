//! Keeping a bug to the work it hit.
//!
//! A panic in a spawned tokio task ends that task quietly, and whatever it
//! was in charge of stays as it was: an outbox key "in flight" (so every
//! later delivery to that webhook waits until a restart), a task "working"
//! that nothing moves on, an HTTP connection dropped without an answer.
//! The places that own such work run it through [`caught`] and put things
//! right themselves when it panics. Nothing here expects a panic; it is
//! for the bug nobody has found yet.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt as _;

/// What a panic said (its `&str` or `String` payload).
pub fn said(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

/// Runs `work`; when it panics, logs that `what` failed on a bug and returns
/// the panic's message instead.
///
/// Nothing `work` shares is left half-changed in a way this could see: the
/// callers own what the work was doing (a slot, a task's state) and settle it
/// from the error, hence the `AssertUnwindSafe`.
pub async fn caught<F: Future>(what: &str, work: F) -> Result<F::Output, String> {
    match AssertUnwindSafe(work).catch_unwind().await {
        Ok(out) => Ok(out),
        Err(panic) => {
            let message = said(&*panic).to_owned();
            tracing::error!("{what} failed on a bug: {message}");
            Err(message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_its_message_and_other_work_its_output() {
        assert_eq!(caught("adding", async { 1 + 1 }).await, Ok(2));
        let boom = caught("a test", async {
            if std::hint::black_box(true) {
                panic!("boom {}", 7);
            }
            0
        })
        .await;
        assert_eq!(boom, Err("boom 7".to_owned()));
        let fixed = caught("a test", async {
            if std::hint::black_box(true) {
                panic!("fixed");
            }
        })
        .await;
        assert_eq!(fixed, Err("fixed".to_owned()));
    }
}
