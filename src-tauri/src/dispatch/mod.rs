//! What leaves Countersign on its own initiative: push notifications to
//! callers' webhooks and chain hops, and the policy every outbound URL a
//! caller or a rule supplies must pass.

pub mod chains;
pub mod push;
pub mod ssrf;
