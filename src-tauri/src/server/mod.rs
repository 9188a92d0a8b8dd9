//! The HTTP server: one axum router for agent cards, the A2A JSON-RPC and
//! HTTP+JSON bindings (with SSE), and their shared operation dispatch, plus
//! the UI API under `/api/`. Handlers only extract, call [`ops::execute`]
//! (or the engine) and render.

pub mod access;
pub mod card;
mod conn;
pub mod instance;
pub mod jsonrpc;
pub mod ops;
pub mod rate_limit;
pub mod rest;
pub mod rest_v0_3;
pub mod run;
pub mod sse;
pub mod ui_api;
pub mod ui_auth;
pub mod ui_dispatch;
pub mod ui_peers;
pub mod ui_queue;
pub mod ui_settings;
pub mod ui_static;
pub mod webhooks;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, Uri};
use axum::routing::{any, get};
use tokio::sync::watch;

use crate::a2a::Error;
use crate::config::Config;
use crate::engine::Engine;
pub use access::AccessPolicy;

/// Everything a handler needs.
pub struct AppState {
    pub engine: Engine,
    pub config: Config,
    pub access: AccessPolicy,
    /// The address actually bound, for URLs when a request has no `Host`.
    pub local_addr: SocketAddr,
    /// When the configuration was loaded: the cards' `Last-Modified`.
    pub started_ms: i64,
    /// Turns true when the server shuts down; open streams end then.
    pub shutdown: watch::Receiver<bool>,
    /// The per-install secret the UI API asks for.
    pub ui_secret: ui_auth::UiSecret,
    /// The hosts and origins the UI API answers (built once: it was a
    /// tenth of a queue page's work when built per request).
    pub ui_hosts: ui_auth::AllowedHosts,
    /// Where the built UI is read from.
    pub ui_files: ui_static::UiFiles,
    /// Where the UI's settings are kept.
    pub ui_settings: ui_settings::SettingsFile,
    /// Per-caller rate limits.
    pub rate_limits: rate_limit::RateLimits,
    /// Signs the agent cards served.
    pub card_key: crate::a2a::signing::CardKey,
    /// Agent cards as last sent, by agent, base URL and shape.
    pub card_cache: card::CardCache,
}

pub type Shared = Arc<AppState>;

/// The router for a running server.
pub fn router(state: Shared) -> Router {
    Router::new()
        .route("/.well-known/agent-card.json", get(card::root_card))
        .route("/.well-known/agent.json", get(card::root_legacy_card))
        .route("/.well-known/jwks.json", get(card::jwks))
        .route("/a2a/agents", get(card::directory))
        .route("/a2a/{agent}", any(jsonrpc::handle))
        .route("/a2a/{agent}/", any(jsonrpc::handle))
        .route(
            "/a2a/{agent}/.well-known/agent-card.json",
            any(card::agent_card_route),
        )
        .route("/a2a/{agent}/{*rest}", any(rest::handle))
        .route(
            "/webhooks/{subscription}",
            axum::routing::post(webhooks::receive),
        )
        .nest("/api", ui_api::router(state.clone()))
        // The UI's files; anything else is a 404 in the A2A error shape.
        .fallback(ui_static::serve)
        // Bodies are read by `read_body`, which enforces the configured limit
        // and answers in the binding's own error shape.
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}

/// The agent `id` of `tenant` (`None`: the default tenant). Any other agent,
/// in particular one of another tenant, is "not found".
pub(crate) fn find_agent(
    state: &AppState,
    tenant: Option<&str>,
    id: &str,
) -> Result<Arc<crate::engine::Agent>, Error> {
    if let Some(a) = state.engine.agent_in(tenant, id) {
        return Ok(a.clone());
    }
    Err(Error::NotFound(match tenant {
        Some(t) => format!("tenant `{t}` has no agent `{id}`"),
        None if state.config.tenant(id).is_some() => {
            format!("`{id}` is a tenant; its agents are at /a2a/{id}/{{agent}}")
        }
        None => format!("no agent or tenant `{id}` is served here"),
    }))
}

/// The 404 for a path no route and no UI file answers.
pub(crate) async fn not_found(uri: Uri) -> axum::response::Response {
    rest::error_response(
        &Error::NotFound(format!("no route for {}", uri.path())),
        false,
    )
}

/// After refusing an oversized body, at most this much more of it is read
/// and thrown away (for at most [`DRAIN_MAX_TIME`]), so that a client still
/// sending gets the 413 instead of a connection reset.
const DRAIN_MAX_BYTES: usize = 4 << 20;
const DRAIN_MAX_TIME: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads a request body up to `limit` bytes, within `timeout` (a client
/// trickling its body is answered 408 rather than held forever).
pub async fn read_body(
    body: Body,
    limit: usize,
    timeout: std::time::Duration,
) -> Result<Bytes, Error> {
    use http_body_util::BodyExt;
    let read_error =
        |e: axum::Error| Error::InvalidRequest(format!("cannot read the request body: {e}"));
    let mut body = body;
    let mut buf = Vec::new();
    let read = tokio::time::timeout(timeout, async {
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame.map_err(read_error)?.into_data() else {
                continue;
            };
            if buf.len() + data.len() > limit {
                return Ok(false);
            }
            buf.extend_from_slice(&data);
        }
        Ok::<_, Error>(true)
    })
    .await;
    match read {
        Ok(Ok(true)) => Ok(Bytes::from(buf)),
        Ok(Ok(false)) => {
            drain(body).await;
            Err(Error::PayloadTooLarge(limit))
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Error::RequestTimeout(timeout.as_secs())),
    }
}

/// [`read_body`] with the configured limits: `max_body_bytes` (or `limit`
/// when given) and `body_timeout_secs`.
pub async fn read_request_body(
    state: &AppState,
    body: Body,
    limit: Option<usize>,
) -> Result<Bytes, Error> {
    let limits = &state.config.limits;
    read_body(
        body,
        limit.unwrap_or(limits.max_body_bytes),
        std::time::Duration::from_secs(limits.body_timeout_secs),
    )
    .await
}

/// Reads and discards what is left of a refused body, within bounds.
async fn drain(mut body: Body) {
    use http_body_util::BodyExt;
    let _ = tokio::time::timeout(DRAIN_MAX_TIME, async {
        let mut n = 0usize;
        while n < DRAIN_MAX_BYTES {
            match body.frame().await {
                Some(Ok(f)) => n += f.data_ref().map_or(0, |d| d.len()),
                _ => break,
            }
        }
    })
    .await;
}

/// Parses a JSON body: valid UTF-8, nesting within `max_depth`, then JSON.
pub fn parse_json(bytes: &[u8], max_depth: usize) -> Result<serde_json::Value, Error> {
    parse_text(checked_text(bytes, max_depth)?)
}

/// The body as text, if it is valid UTF-8 nested no deeper than `max_depth`:
/// the checks [`parse_json`] makes before it parses.
pub(crate) fn checked_text(bytes: &[u8], max_depth: usize) -> Result<&str, Error> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Error::Parse(format!("the body is not valid UTF-8 ({e})")))?;
    check_depth(text, max_depth)?;
    Ok(text)
}

/// Parses text that [`checked_text`] has passed.
pub(crate) fn parse_text(text: &str) -> Result<serde_json::Value, Error> {
    serde_json::from_str(text).map_err(|e| Error::Parse(e.to_string()))
}

/// Refuses JSON nested deeper than `max`, before parsing it. Strings are
/// skipped whole, to their closing quote (`memchr2` finds it, or an escape,
/// many bytes at a time): brackets in them do not count.
pub(crate) fn check_depth(text: &str, max: usize) -> Result<(), Error> {
    let bytes = text.as_bytes();
    let (mut depth, mut at) = (0usize, 0usize);
    while let Some(&b) = bytes.get(at) {
        at += 1;
        match b {
            b'"' => loop {
                // An unterminated string is the parser's to refuse.
                let Some(rest) = bytes.get(at..) else {
                    return Ok(());
                };
                match memchr::memchr2(b'"', b'\\', rest) {
                    None => return Ok(()),
                    Some(i) if rest[i] == b'\\' => at += i + 2,
                    Some(i) => {
                        at += i + 1;
                        break;
                    }
                }
            },
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return Err(Error::InvalidRequest(format!(
                        "JSON is nested deeper than {max} levels"
                    )));
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// A protocol version this server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V03,
}

/// The A2A version a request asks for (`A2A-Version` header, or the query
/// parameter): `None` when it gives none. Only `Major.Minor` counts; 1.0 and
/// 0.3 are served, anything else is VersionNotSupportedError.
pub fn requested_version(headers: &HeaderMap, uri: &Uri) -> Result<Option<Version>, Error> {
    let from_header = headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_owned());
    let from_query = || {
        uri.query().and_then(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k.eq_ignore_ascii_case("a2a-version"))
                .map(|(_, v)| v.trim().to_owned())
        })
    };
    let v = from_header
        .filter(|s| !s.is_empty())
        .or_else(from_query)
        .unwrap_or_default();
    if v.is_empty() {
        return Ok(None);
    }
    let mut parts = v.split('.');
    match (parts.next(), parts.next()) {
        (Some("1"), Some("0") | None) => Ok(Some(Version::V1)),
        (Some("0"), Some("3")) => Ok(Some(Version::V03)),
        _ => Err(Error::VersionNotSupported(format!(
            "this server speaks A2A 1.0 and 0.3; the request asks for {v}"
        ))),
    }
}

/// The base URL peers reach `/webhooks/` at: `[webhooks] public_url`, else
/// `public_url`, else the bound address.
pub fn webhook_base(state: &AppState) -> String {
    match (&state.config.webhooks.public_url, &state.config.public_url) {
        (Some(u), _) | (None, Some(u)) => u.trim_end_matches('/').to_owned(),
        (None, None) => format!("http://{}", state.local_addr),
    }
}

/// The base URL clients reach this server at: `public_url` from the config,
/// or the request's `Host`.
pub fn base_url(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(u) = &state.config.public_url {
        return u.trim_end_matches('/').to_owned();
    }
    let host = origin(state, headers);
    if host.is_empty() {
        format!("http://{}", state.local_addr)
    } else {
        format!("http://{host}")
    }
}

/// What [`base_url`] is made from, without allocating: the configured
/// public URL, else the request's `Host` when it is a plausible host name
/// (or `""` for none: the bound address is used).
pub fn origin<'a>(state: &'a AppState, headers: &'a HeaderMap) -> &'a str {
    if let Some(u) = &state.config.public_url {
        return u;
    }
    headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        })
        .unwrap_or("")
}

/// A 200 whose body is `text`, as `application/json`.
pub fn json_text_ok(text: String) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        axum::http::StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        text,
    )
        .into_response()
}

/// Whether a content type names JSON (`application/json`, `application/a2a+json`).
pub fn is_json_content_type(headers: &HeaderMap) -> bool {
    is_json_media_type(headers.get(axum::http::header::CONTENT_TYPE))
}

/// Whether a `Content-Type` value names JSON.
pub fn is_json_media_type(content_type: Option<&axum::http::HeaderValue>) -> bool {
    content_type
        .and_then(|v| v.to_str().ok())
        .map(crate::a2a::media_type_essence)
        .is_some_and(|t| t == "application/json" || t == "application/a2a+json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_check_ignores_brackets_in_strings() {
        assert!(check_depth(r#"{"a":"[[[[[[[[[[[[[["}"#, 3).is_ok());
        assert!(check_depth("[[[[1]]]]", 3).is_err());
        assert!(check_depth(r#"{"a":"\"[[[["}"#, 2).is_ok());
        assert!(check_depth(r#"{"a":"\\"}"#, 1).is_ok());
        assert!(check_depth(r#"{"a":"\\",[[["#, 2).is_err());
        assert!(check_depth(r#"["\"#, 1).is_ok(), "an escape at the end");
    }

    /// The depth a byte at a time, as the check once counted it.
    fn depth_bytewise(text: &str, max: usize) -> bool {
        let (mut depth, mut in_str, mut escaped) = (0usize, false, false);
        for b in text.bytes() {
            if in_str {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_str = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_str = true,
                b'{' | b'[' => {
                    depth += 1;
                    if depth > max {
                        return false;
                    }
                }
                b'}' | b']' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        true
    }

    proptest::proptest! {
        #[test]
        fn depth_check_skips_strings_as_a_bytewise_scan_does(
            text in r#"[\[\]{}"\\a,:é]{0,64}"#,
            max in 0usize..6,
        ) {
            proptest::prop_assert_eq!(check_depth(&text, max).is_ok(), depth_bytewise(&text, max));
        }
    }

    #[test]
    fn version_negotiation() {
        let uri: Uri = "/a2a/x".parse().unwrap();
        let mut h = HeaderMap::new();
        assert_eq!(requested_version(&h, &uri).unwrap(), None);
        h.insert("A2A-Version", "1.0".parse().unwrap());
        assert_eq!(requested_version(&h, &uri).unwrap(), Some(Version::V1));
        h.insert("A2A-Version", "0.3".parse().unwrap());
        assert_eq!(requested_version(&h, &uri).unwrap(), Some(Version::V03));
        h.insert("A2A-Version", "99.0".parse().unwrap());
        assert!(matches!(
            requested_version(&h, &uri),
            Err(Error::VersionNotSupported(_))
        ));
        let q: Uri = "/a2a/x/tasks?A2A-Version=1.0".parse().unwrap();
        assert_eq!(
            requested_version(&HeaderMap::new(), &q).unwrap(),
            Some(Version::V1)
        );
    }
}
