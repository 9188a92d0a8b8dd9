//! Countersign: an approval inbox for AI agents that speak A2A.
//!
//! The core (wire model, store, engine, server) builds without Tauri; the
//! desktop shell is behind the `desktop` feature. See ARCHITECTURE.md.

// No unsafe code here: memory safety is the compiler's to prove, so the fuzz
// targets run without AddressSanitizer.
#![forbid(unsafe_code)]

pub mod a2a;
pub mod archive;
pub mod cli;
pub mod clock;
pub mod config;
#[cfg(feature = "desktop")]
pub mod desktop;
pub mod dispatch;
pub mod durable_fs;
pub mod engine;
pub mod link;
pub mod render;
pub mod server;
pub mod store;
pub mod unwind;

/// `e` and its causes, as one line for a person: each cause is added
/// after a colon unless the text so far already says it (our errors often
/// quote their source, and `{:#}` would then say it twice).
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let said = cause.to_string();
        if text.is_empty() {
            text = said;
        } else if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_text;

    #[test]
    fn error_text_says_each_cause_once() {
        let io = std::io::Error::other("database or disk is full");
        let quoted = anyhow::Error::new(io).context("database error: database or disk is full");
        assert_eq!(
            error_text(&quoted),
            "database error: database or disk is full"
        );
        let io = std::io::Error::other("permission denied");
        let chained = anyhow::Error::new(io).context("cannot open /x");
        assert_eq!(error_text(&chained), "cannot open /x: permission denied");
    }
}
