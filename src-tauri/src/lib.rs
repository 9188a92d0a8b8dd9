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
pub mod engine;
pub mod link;
pub mod render;
pub mod server;
pub mod store;
