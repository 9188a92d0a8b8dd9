//! A peer's agent card as this client reads it: where the card lives, and
//! which endpoints (URL × binding × dialect) it offers, best first.
//!
//! Cards are read leniently — only the fields that say how to talk to the
//! agent have to be right — because a peer with an imperfect card is still
//! worth talking to. A 1.0 card lists `supportedInterfaces`; a 0.3 card has
//! `url` + `preferredTransport` + `additionalInterfaces`; a merged card has
//! both, and then its 1.0 entries win.

use serde_json::Value;
use url::Url;

use super::ClientError;
use crate::a2a::v0_3::Dialect;

/// How requests travel to an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Binding {
    /// JSON-RPC 2.0 over HTTP POST (`JSONRPC`).
    JsonRpc,
    /// Resource-style HTTP with JSON bodies (`HTTP+JSON`).
    HttpJson,
}

impl Binding {
    /// The name cards use: `JSONRPC`, `HTTP+JSON`.
    pub fn wire_name(self) -> &'static str {
        match self {
            Binding::JsonRpc => "JSONRPC",
            Binding::HttpJson => "HTTP+JSON",
        }
    }

    /// Reads a card's binding or transport name; gRPC and custom bindings
    /// are not spoken here.
    pub fn parse(name: &str) -> Option<Binding> {
        match name.trim().to_ascii_uppercase().as_str() {
            "JSONRPC" | "JSON-RPC" => Some(Binding::JsonRpc),
            "HTTP+JSON" | "HTTP_JSON" | "REST" => Some(Binding::HttpJson),
            _ => None,
        }
    }
}

/// One way to reach a peer: every call names the endpoint it uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The interface URL from the card (JSON-RPC posts here; HTTP+JSON
    /// routes hang below it), parsed once when the card is read.
    pub url: Url,
    pub binding: Binding,
    /// `V1` or `V03` (the pre-0.3 dialect is not spoken as a client).
    pub dialect: Dialect,
    /// The 1.0 interface's tenant, sent with every request (spec §8.3.2).
    pub tenant: Option<String>,
}

/// What discovery learned about a peer.
#[derive(Debug, Clone)]
pub struct PeerCard {
    /// The URL the card was read from.
    pub source: String,
    /// The card exactly as served.
    pub card: Value,
    pub name: String,
    pub description: String,
    pub streaming: bool,
    pub push_notifications: bool,
    /// Every endpoint this client can use, in order of preference.
    pub endpoints: Vec<Endpoint>,
    /// The endpoint to use: the first of `endpoints`.
    pub chosen: Endpoint,
    /// The RFC 7638 thumbprint of the key whose signature on the card verified (set by
    /// discovery; `None` for an unsigned card).
    pub signing_key: Option<String>,
}

impl PeerCard {
    /// Reads a card served at `source`. Endpoints come in this order: the
    /// 1.0 `supportedInterfaces` entries of major version 1, in the card's
    /// order (the spec's rule: earlier entries are preferred); then its 0.3
    /// entries; then the 0.3 `url` with its `preferredTransport`; then
    /// `additionalInterfaces`. Relative URLs are taken relative to `source`.
    pub fn from_json(source: &str, card: Value) -> Result<PeerCard, ClientError> {
        let bad = |reason: &str| ClientError::BadCard {
            url: source.to_owned(),
            reason: reason.to_owned(),
        };
        let Some(obj) = card.as_object() else {
            return Err(bad("the card is not a JSON object"));
        };
        let base = Url::parse(source).ok();
        let absolute = |u: &str| -> Option<Url> {
            let joined = match &base {
                Some(b) => b.join(u).ok()?,
                None => Url::parse(u).ok()?,
            };
            matches!(joined.scheme(), "http" | "https").then_some(joined)
        };
        let mut v1 = Vec::new();
        let mut v03 = Vec::new();
        for i in obj
            .get("supportedInterfaces")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(url), Some(binding)) = (
                i.get("url").and_then(Value::as_str).and_then(absolute),
                i.get("protocolBinding")
                    .and_then(Value::as_str)
                    .and_then(Binding::parse),
            ) else {
                continue;
            };
            let version = i
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("1.0");
            let tenant = i
                .get("tenant")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            let endpoint = |dialect| Endpoint {
                url: url.clone(),
                binding,
                dialect,
                tenant: tenant.clone(),
            };
            match version.trim().split('.').next() {
                Some("1") => v1.push(endpoint(Dialect::V1)),
                _ if is_v0_3(version) => v03.push(endpoint(Dialect::V03)),
                _ => {}
            }
        }
        let old = |url: Option<&Value>, transport: Option<&Value>| {
            let url = url.and_then(Value::as_str).and_then(absolute)?;
            let binding = match transport.and_then(Value::as_str) {
                // 0.3: `preferredTransport` defaults to JSON-RPC.
                None => Binding::JsonRpc,
                Some(t) => Binding::parse(t)?,
            };
            Some(Endpoint {
                url,
                binding,
                dialect: Dialect::V03,
                tenant: None,
            })
        };
        v03.extend(old(obj.get("url"), obj.get("preferredTransport")));
        for i in obj
            .get("additionalInterfaces")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            v03.extend(old(i.get("url"), i.get("transport")));
        }
        let mut endpoints: Vec<Endpoint> = Vec::new();
        for e in v1.into_iter().chain(v03) {
            if !endpoints.contains(&e) {
                endpoints.push(e);
            }
        }
        let Some(chosen) = endpoints.first().cloned() else {
            let has_any = obj.contains_key("supportedInterfaces") || obj.contains_key("url");
            return Err(bad(if has_any {
                "it offers no endpoint this client speaks (JSON-RPC or HTTP+JSON, A2A 1.0 or 0.3, over http or https)"
            } else {
                "it has neither `supportedInterfaces` (A2A 1.0) nor `url` (A2A 0.3)"
            }));
        };
        let Some(name) = obj.get("name").and_then(Value::as_str) else {
            return Err(bad("it has no `name`"));
        };
        let caps = obj.get("capabilities");
        let flag = |k: &str| {
            caps.and_then(|c| c.get(k))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        Ok(PeerCard {
            source: source.to_owned(),
            name: name.to_owned(),
            description: obj
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            streaming: flag("streaming"),
            push_notifications: flag("pushNotifications"),
            endpoints,
            chosen,
            card,
            signing_key: None,
        })
    }

    /// What a person trusts when they first use a peer, and what must not
    /// change behind their back: identity (name, endpoint URL), skill ids,
    /// auth scheme names and kinds, and the signing key.
    pub fn pin(&self) -> Value {
        let mut skills: Vec<&str> = self
            .card
            .get("skills")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|s| s.get("id")?.as_str()).collect())
            .unwrap_or_default();
        skills.sort_unstable();
        skills.dedup();
        let mut auth: Vec<String> = self
            .card
            .get("securitySchemes")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(name, s)| {
                        // The 1.0 oneof wrapper's key, else the 0.3 `type`.
                        let kind = s
                            .as_object()
                            .and_then(|o| o.keys().find(|k| k.ends_with("SecurityScheme")))
                            .map(String::as_str)
                            .or_else(|| s.get("type").and_then(Value::as_str))
                            .unwrap_or("unknown");
                        format!("{name}:{kind}")
                    })
                    .collect()
            })
            .unwrap_or_default();
        auth.sort_unstable();
        serde_json::json!({
            "identity": {"name": self.name, "url": self.chosen.url},
            "skills": skills,
            "auth": auth,
            "key": self.signing_key,
        })
    }

    /// The first endpoint with this binding and dialect, to force one.
    pub fn endpoint(&self, binding: Binding, dialect: Dialect) -> Option<&Endpoint> {
        self.endpoints
            .iter()
            .find(|e| e.binding == binding && e.dialect == dialect)
    }
}

/// `0.3`, `0.3.0`, and the 0.2.x generation that 0.3 clients also reach
/// (same methods, `agent.json`).
fn is_v0_3(version: &str) -> bool {
    let mut parts = version.trim().split('.');
    matches!((parts.next(), parts.next()), (Some("0"), Some("2" | "3")))
}

/// Where to look for the card of `url`: the URL itself when it names a
/// `.json` document, else `{url}/.well-known/agent-card.json` then the
/// pre-0.3 `{url}/.well-known/agent.json`.
pub(crate) fn card_urls(url: &str) -> Result<Vec<Url>, ClientError> {
    let invalid = |reason: String| ClientError::InvalidUrl {
        url: url.to_owned(),
        reason,
    };
    let parsed = Url::parse(url.trim()).map_err(|e| invalid(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid(format!(
            "the scheme must be http or https, not `{}`",
            parsed.scheme()
        )));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(invalid("it names no host".into()));
    }
    if parsed.path().ends_with(".json") {
        return Ok(vec![parsed]);
    }
    let well_known = |file: &str| -> Result<Url, ClientError> {
        let mut u = parsed.clone();
        u.set_query(None);
        u.set_fragment(None);
        u.path_segments_mut()
            .map_err(|_| invalid("it cannot have a path".into()))?
            .pop_if_empty()
            .extend([".well-known", file]);
        Ok(u)
    };
    Ok(vec![
        well_known("agent-card.json")?,
        well_known("agent.json")?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v1(url: &str, binding: &str, version: &str) -> Value {
        json!({"url": url, "protocolBinding": binding, "protocolVersion": version})
    }

    #[test]
    fn a_1_0_card_lists_its_interfaces_in_order() {
        let card = json!({"name": "a", "description": "d", "capabilities": {"streaming": true},
        "supportedInterfaces": [
            v1("grpc.example.com:443", "GRPC", "1.0"),
            v1("https://a.example/rest", "HTTP+JSON", "1.0"),
            v1("https://a.example/rpc", "JSONRPC", "1.0"),
            v1("https://a.example/rpc", "JSONRPC", "0.3"),
            v1("https://a.example/future", "JSONRPC", "2.0"),
        ]});
        let p = PeerCard::from_json("https://a.example/.well-known/agent-card.json", card).unwrap();
        assert_eq!(p.name, "a");
        assert!(p.streaming && !p.push_notifications);
        let got: Vec<(&str, Binding, Dialect)> = p
            .endpoints
            .iter()
            .map(|e| (e.url.as_str(), e.binding, e.dialect))
            .collect();
        assert_eq!(
            got,
            [
                ("https://a.example/rest", Binding::HttpJson, Dialect::V1),
                ("https://a.example/rpc", Binding::JsonRpc, Dialect::V1),
                ("https://a.example/rpc", Binding::JsonRpc, Dialect::V03),
            ]
        );
        assert_eq!(p.chosen, p.endpoints[0]);
    }

    #[test]
    fn a_0_3_card_uses_url_preferred_transport_then_additional_interfaces() {
        let card = json!({"name": "old", "protocolVersion": "0.3.0", "url": "http://h/rest",
            "preferredTransport": "HTTP+JSON",
            "additionalInterfaces": [{"url": "http://h/rest", "transport": "HTTP+JSON"},
                                     {"url": "/rpc", "transport": "JSONRPC"},
                                     {"url": "h:50051", "transport": "GRPC"}]});
        let p = PeerCard::from_json("http://h/.well-known/agent-card.json", card).unwrap();
        let got: Vec<(&str, Binding, Dialect)> = p
            .endpoints
            .iter()
            .map(|e| (e.url.as_str(), e.binding, e.dialect))
            .collect();
        assert_eq!(
            got,
            [
                ("http://h/rest", Binding::HttpJson, Dialect::V03),
                ("http://h/rpc", Binding::JsonRpc, Dialect::V03),
            ]
        );
        // Without `preferredTransport`, the `url` speaks JSON-RPC.
        let p = PeerCard::from_json(
            "http://h/x.json",
            json!({"name": "n", "url": "http://h/a2a"}),
        )
        .unwrap();
        assert_eq!(p.chosen.binding, Binding::JsonRpc);
    }

    #[test]
    fn a_merged_card_prefers_1_0_and_keeps_the_tenant() {
        let card = json!({"name": "m", "url": "http://h/a2a", "preferredTransport": "JSONRPC",
            "supportedInterfaces": [{"url": "http://h/a2a", "protocolBinding": "JSONRPC",
                                     "protocolVersion": "1.0", "tenant": "acme"}]});
        let p = PeerCard::from_json("http://h/.well-known/agent.json", card).unwrap();
        assert_eq!(p.chosen.dialect, Dialect::V1);
        assert_eq!(p.chosen.tenant.as_deref(), Some("acme"));
        assert_eq!(p.endpoints.len(), 2);
        assert!(p.endpoint(Binding::JsonRpc, Dialect::V03).is_some());
        assert!(p.endpoint(Binding::HttpJson, Dialect::V03).is_none());
    }

    #[test]
    fn unusable_cards_say_why() {
        let reason = |card: Value| match PeerCard::from_json("http://h/c.json", card) {
            Err(ClientError::BadCard { reason, .. }) => reason,
            other => panic!("{other:?}"),
        };
        assert!(reason(json!({})).contains("supportedInterfaces"));
        assert!(reason(json!([])).contains("not a JSON object"));
        assert!(
            reason(json!({"name": "g", "supportedInterfaces": [v1("h:1", "GRPC", "1.0")]}))
                .contains("no endpoint")
        );
        assert!(reason(json!({"url": "http://h/a2a"})).contains("name"));
    }

    #[test]
    fn card_locations() {
        let urls = |u: &str| -> Vec<String> {
            card_urls(u)
                .unwrap()
                .into_iter()
                .map(|u| u.to_string())
                .collect()
        };
        assert_eq!(
            urls("http://127.0.0.1:9/a2a/tck/"),
            [
                "http://127.0.0.1:9/a2a/tck/.well-known/agent-card.json",
                "http://127.0.0.1:9/a2a/tck/.well-known/agent.json"
            ]
        );
        assert_eq!(
            urls("https://h"),
            [
                "https://h/.well-known/agent-card.json",
                "https://h/.well-known/agent.json"
            ]
        );
        assert_eq!(urls("https://h/cards/x.json"), ["https://h/cards/x.json"]);
        assert!(matches!(
            card_urls("ftp://h/"),
            Err(ClientError::InvalidUrl { .. })
        ));
        assert!(card_urls("not a url").is_err());
    }
}
