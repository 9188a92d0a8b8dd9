//! Who is calling: credentials from the config, checked in constant time.
//!
//! Bound to loopback, A2A calls are open and belong to the `local` owner; a
//! credential, when presented, must be valid and then names the owner. Bound
//! elsewhere, every A2A call needs a credential (the card stays public).
//!
//! Each tenant has its own credentials: a request to a tenant's agent is
//! checked against that tenant's credentials only, so a credential of one
//! tenant (or of the default tenant) is refused everywhere else.

use axum::http::HeaderMap;
use subtle::ConstantTimeEq;

use std::collections::HashMap;
use std::sync::LazyLock;

use crate::a2a::Error;
use crate::config::{Config, Credential};

static CLOSED: LazyLock<AccessPolicy> = LazyLock::new(|| AccessPolicy {
    credentials: Vec::new(),
    open: false,
    tenants: HashMap::new(),
    key_headers: Vec::new(),
});

/// The owner of tasks created without credentials on a loopback server.
pub const LOCAL_OWNER: &str = "local";

/// The access policy of a running server.
#[derive(Debug, Clone)]
pub struct AccessPolicy {
    /// The default tenant's credentials (`[[access.credentials]]`).
    pub credentials: Vec<Credential>,
    /// Calls without credentials are allowed (loopback bind, or `--insecure`).
    pub open: bool,
    /// Each tenant's own policy, by tenant id.
    pub tenants: HashMap<String, AccessPolicy>,
    /// Every header any tenant takes an API key in: a key presented in one
    /// of them is a credential, refused where it is not valid (rather than
    /// ignored, which on an open bind would let the call in anonymously).
    pub key_headers: Vec<String>,
}

impl AccessPolicy {
    /// The policy for the server's `[access]` and `[[tenants]]`; `open` is
    /// the server's (a tenant that requires credentials is never open).
    pub fn from_config(config: &Config, open: bool) -> AccessPolicy {
        let mut key_headers: Vec<String> = config
            .access
            .credentials
            .iter()
            .chain(config.tenants.iter().flat_map(|t| &t.credentials))
            .filter(|c| c.api_key.is_some())
            .map(|c| {
                c.header
                    .as_deref()
                    .unwrap_or("X-API-Key")
                    .to_ascii_lowercase()
            })
            .collect();
        key_headers.sort_unstable();
        key_headers.dedup();
        AccessPolicy {
            credentials: config.access.credentials.clone(),
            open,
            key_headers: key_headers.clone(),
            tenants: config
                .tenants
                .iter()
                .map(|t| {
                    let policy = AccessPolicy {
                        credentials: t.credentials.clone(),
                        open: open && !t.require_credentials,
                        tenants: HashMap::new(),
                        key_headers: key_headers.clone(),
                    };
                    (t.id.get_ref().clone(), policy)
                })
                .collect(),
        }
    }

    /// The policy requests to an agent of `tenant` are checked against.
    pub fn for_tenant(&self, tenant: Option<&str>) -> &AccessPolicy {
        match tenant {
            None => self,
            // Every served tenant has an entry; an unknown one admits no one.
            Some(t) => self.tenants.get(t).unwrap_or(&CLOSED),
        }
    }

    /// The owner a request acts as, or why it may not act at all.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<String, Error> {
        let bearer = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, rest) = v.trim().split_once(' ')?;
                scheme
                    .eq_ignore_ascii_case("bearer")
                    .then(|| rest.trim().to_owned())
            });
        let mut presented = bearer.is_some()
            || self
                .key_headers
                .iter()
                .any(|h| headers.contains_key(h.as_str()));
        for c in &self.credentials {
            if let (Some(expected), Some(got)) = (&c.bearer, &bearer)
                && bool::from(expected.as_bytes().ct_eq(got.as_bytes()))
            {
                return Ok(c.name.clone());
            }
            if let Some(expected) = &c.api_key {
                let header = c.header.as_deref().unwrap_or("X-API-Key");
                if let Some(got) = headers.get(header) {
                    presented = true;
                    if bool::from(expected.as_bytes().ct_eq(got.as_bytes())) {
                        return Ok(c.name.clone());
                    }
                }
            }
        }
        if presented {
            return Err(Error::Unauthenticated(
                "the credential presented is not valid".into(),
            ));
        }
        if self.open {
            return Ok(LOCAL_OWNER.to_owned());
        }
        Err(Error::Unauthenticated(
            "this server requires a bearer token or API key; see securitySchemes in the agent card"
                .into(),
        ))
    }

    /// `WWW-Authenticate` challenge naming the accepted schemes.
    pub fn challenge(&self) -> String {
        let mut schemes = Vec::new();
        if self.credentials.is_empty() || self.credentials.iter().any(|c| c.bearer.is_some()) {
            schemes.push("Bearer realm=\"countersign\"");
        }
        if self.credentials.iter().any(|c| c.api_key.is_some()) {
            schemes.push("ApiKey realm=\"countersign\"");
        }
        schemes.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(open: bool) -> AccessPolicy {
        AccessPolicy {
            open,
            tenants: HashMap::new(),
            key_headers: vec!["x-api-key".into()],
            credentials: vec![
                Credential {
                    name: "ci".into(),
                    bearer: Some("0123456789abcdef".into()),
                    api_key: None,
                    header: None,
                },
                Credential {
                    name: "bot".into(),
                    bearer: None,
                    api_key: Some("key-0123456789ab".into()),
                    header: None,
                },
            ],
        }
    }

    #[test]
    fn credentials_name_the_owner() {
        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer 0123456789abcdef".parse().unwrap());
        assert_eq!(policy(false).authenticate(&h).unwrap(), "ci");
        let mut h = HeaderMap::new();
        h.insert("x-api-key", "key-0123456789ab".parse().unwrap());
        assert_eq!(policy(false).authenticate(&h).unwrap(), "bot");
    }

    #[test]
    fn wrong_or_missing_credentials_are_refused() {
        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer nope".parse().unwrap());
        assert!(policy(true).authenticate(&h).is_err());
        assert!(policy(false).authenticate(&HeaderMap::new()).is_err());
        assert_eq!(
            policy(true).authenticate(&HeaderMap::new()).unwrap(),
            LOCAL_OWNER
        );
    }
}
