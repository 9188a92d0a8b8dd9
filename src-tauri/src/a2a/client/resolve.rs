//! Host name resolution for peer calls: the system resolver, except that
//! `.invalid` names fail at once (RFC 6761 §6.4: they never resolve, so no
//! query leaves the machine), and every failure is a [`DnsFailure`] that
//! the error mapping recognises by type rather than by message.

use std::net::SocketAddr;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Why a host name did not resolve.
#[derive(Debug, thiserror::Error)]
#[error("cannot resolve `{host}`: {reason}")]
pub(crate) struct DnsFailure {
    pub host: String,
    pub reason: String,
}

/// The resolver of [`super::A2aClient`].
pub(crate) struct PeerResolver;

impl Resolve for PeerResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let fail = |reason: String| -> Box<dyn std::error::Error + Send + Sync> {
                Box::new(DnsFailure {
                    host: host.clone(),
                    reason,
                })
            };
            if is_special_invalid(&host) {
                return Err(fail(
                    "names under `.invalid` never resolve (RFC 6761)".into(),
                ));
            }
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map_err(|e| fail(e.to_string()))?
                .collect();
            if addrs.is_empty() {
                return Err(fail("the name has no addresses".into()));
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// `invalid` and names under it (case-insensitive, with or without the root dot).
fn is_special_invalid(host: &str) -> bool {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    h == "invalid" || h.ends_with(".invalid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_invalid_names_are_refused_up_front() {
        assert!(is_special_invalid("nonexistent.invalid"));
        assert!(is_special_invalid("A.INVALID."));
        assert!(!is_special_invalid("invalid.example.com"));
        assert!(!is_special_invalid("localhost"));
    }
}
