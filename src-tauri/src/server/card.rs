//! Agent cards: built from config and the URL clients reach us at, signed
//! (spec §8.4, key in [`load_key`]), served with `Cache-Control`, `ETag` and
//! `Last-Modified`, 304 on a match. Also the agent directory (`/a2a/agents`),
//! the gateway root card and the JWKS that verifies the signatures.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{AppState, Shared, base_url, rest};
use crate::a2a::Error;
use crate::a2a::card::{AgentCapabilities, AgentCard, AgentInterface, AgentProvider, AgentSkill};
use crate::a2a::signing::CardKey;
use crate::config::{RootCard, SkillConfig};
use crate::engine::Agent;

/// How long clients may cache a card, in seconds.
const CARD_MAX_AGE: u32 = 300;

fn skill(s: &SkillConfig) -> AgentSkill {
    AgentSkill {
        id: s.id.clone(),
        name: s.name.clone(),
        description: s.description.clone(),
        tags: s.tags.clone(),
        examples: s.examples.clone(),
        input_modes: s.input_modes.clone(),
        output_modes: s.output_modes.clone(),
    }
}

/// The public card of `agent`, with interfaces under `base`.
pub fn public_card(state: &AppState, agent: &Agent, base: &str) -> AgentCard {
    let c = &agent.config;
    let url = format!("{base}/a2a/{}", agent.id());
    let mut skills: Vec<AgentSkill> = c.skills.iter().map(skill).collect();
    if skills.is_empty() {
        skills.push(AgentSkill {
            id: agent.id().to_owned(),
            name: c.name.clone().unwrap_or_else(|| agent.id().to_owned()),
            description: if c.description.is_empty() {
                "Handles any request.".into()
            } else {
                c.description.clone()
            },
            tags: vec![format!("{:?}", c.backend).to_ascii_lowercase()],
            examples: Vec::new(),
            input_modes: Vec::new(),
            output_modes: Vec::new(),
        });
    }
    let (security_schemes, security_requirements) = security(state, agent.tenant());
    // In a tenant, the 1.0 interfaces name it: clients send it as `tenant`.
    let tenant = agent.tenant().map(str::to_owned);
    AgentCard {
        name: c.name.clone().unwrap_or_else(|| agent.id().to_owned()),
        description: if c.description.is_empty() {
            format!("Countersign agent `{}`", agent.id())
        } else {
            c.description.clone()
        },
        supported_interfaces: vec![
            AgentInterface {
                url: url.clone(),
                protocol_binding: "JSONRPC".into(),
                tenant: tenant.clone(),
                protocol_version: crate::a2a::PROTOCOL_VERSION.into(),
            },
            AgentInterface {
                url: url.clone(),
                protocol_binding: "HTTP+JSON".into(),
                tenant,
                protocol_version: crate::a2a::PROTOCOL_VERSION.into(),
            },
            // The same endpoints speak 0.3 (JSON-RPC by method name, HTTP+JSON
            // under `/v1/`). Listed after the 1.0 entries: clients take the
            // first entry of a binding they support, or prefer 1.0.
            AgentInterface {
                url: url.clone(),
                protocol_binding: "JSONRPC".into(),
                tenant: None,
                protocol_version: "0.3".into(),
            },
            AgentInterface {
                url,
                protocol_binding: "HTTP+JSON".into(),
                tenant: None,
                protocol_version: "0.3".into(),
            },
        ],
        provider: c.provider.as_ref().map(|p| AgentProvider {
            url: p.url.clone(),
            organization: p.organization.clone(),
        }),
        version: c.version.clone(),
        documentation_url: c.documentation_url.clone(),
        capabilities: AgentCapabilities {
            streaming: Some(c.streaming),
            push_notifications: Some(super::ops::push_supported(agent)),
            extensions: Vec::new(),
            extended_agent_card: Some(c.extended_agent_card || c.extended_card.is_some()),
        },
        security_schemes,
        security_requirements,
        default_input_modes: c.input_modes.clone(),
        default_output_modes: c.output_modes.clone(),
        skills,
        signatures: Vec::new(),
        icon_url: c.icon_url.clone(),
    }
}

/// The security schemes of a tenant's agents (`None`: the default tenant,
/// which the gateway card speaks for).
fn security(
    state: &AppState,
    tenant: Option<&str>,
) -> (serde_json::Map<String, Value>, Vec<Value>) {
    let mut schemes = serde_json::Map::new();
    let mut reqs = Vec::new();
    let creds = &state.access.for_tenant(tenant).credentials;
    if creds.iter().any(|c| c.bearer.is_some()) {
        schemes.insert("bearer".into(), json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "A token from the Countersign configuration"}}));
        reqs.push(json!({"schemes": {"bearer": {"list": []}}}));
    }
    let mut headers: Vec<&str> = creds
        .iter()
        .filter(|c| c.api_key.is_some())
        .map(|c| c.header.as_deref().unwrap_or("X-API-Key"))
        .collect();
    headers.sort_unstable();
    headers.dedup();
    for (i, h) in headers.iter().enumerate() {
        let name = if i == 0 {
            "apiKey".to_owned()
        } else {
            format!("apiKey{}", i + 1)
        };
        schemes.insert(
            name.clone(),
            json!({"apiKeySecurityScheme": {"location": "header", "name": h}}),
        );
        reqs.push(json!({"schemes": {name: {"list": []}}}));
    }
    (schemes, reqs)
}

/// The authenticated extended card (GetExtendedAgentCard).
pub fn extended_card(state: &AppState, agent: &Agent, base: &str) -> Result<AgentCard, Error> {
    let c = &agent.config;
    if !(c.extended_agent_card || c.extended_card.is_some()) {
        return Err(Error::UnsupportedOperation(format!(
            "agent `{}` does not offer an extended agent card",
            agent.id()
        )));
    }
    let Some(ext) = &c.extended_card else {
        return Err(Error::ExtendedAgentCardNotConfigured);
    };
    let mut card = public_card(state, agent, base);
    if let Some(d) = &ext.description {
        card.description = d.clone();
    }
    card.skills.extend(ext.skills.iter().map(skill));
    card.signatures = sign(state, &to_json(&card), base).into_iter().collect();
    Ok(card)
}

/// A card (or the directory, or the JWKS) as sent: its bytes and the values
/// of its caching headers, made once so that a GET only copies them.
pub struct Encoded {
    body: axum::body::Bytes,
    /// The quoted ETag, for `If-None-Match`.
    etag: String,
    etag_header: HeaderValue,
    last_modified: HeaderValue,
}

/// `Cache-Control` of every card.
const CACHE_CONTROL: HeaderValue = HeaderValue::from_static("public, max-age=300");
const _: () = assert!(CARD_MAX_AGE == 300, "keep CACHE_CONTROL in step");

fn encode(state: &AppState, card: &Value) -> Result<Encoded, Error> {
    let body = serde_json::to_vec(card)
        .map_err(|e| Error::Internal(format!("cannot encode the card: {e}")))?;
    let digest = Sha256::digest(&body);
    let mut etag = String::with_capacity(26);
    etag.push('"');
    for b in &digest[..12] {
        use std::fmt::Write as _;
        let _ = write!(etag, "{b:02x}");
    }
    etag.push('"');
    // Hex digits and quotes, and an HTTP date: both always valid values.
    let etag_header = HeaderValue::from_str(&etag)
        .map_err(|e| Error::Internal(format!("cannot encode the card's ETag: {e}")))?;
    let last_modified = HeaderValue::from_str(&httpdate::fmt_http_date(
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(state.started_ms.max(0) as u64),
    ))
    .map_err(|e| Error::Internal(format!("cannot encode Last-Modified: {e}")))?;
    Ok(Encoded {
        body: body.into(),
        etag,
        etag_header,
        last_modified,
    })
}

/// Agent cards as last encoded, by shape, agent and the origin clients
/// reach us at (see [`origin`]). A card depends only on the configuration
/// (fixed while serving), that origin and the shape asked for, so a GET is
/// a lookup that allocates nothing; the map is emptied when it grows past a
/// bound (clients cycling `Host` headers).
#[derive(Default)]
pub struct CardCache(std::sync::Mutex<CardMap>);

/// Shape (strict, merged) → agent → origin → card.
type CardMap = [HashMap<String, HashMap<String, Arc<Encoded>>>; 2];

const MAX_CACHED_CARDS: usize = 256;

impl CardCache {
    fn get_or(
        &self,
        (agent, origin, shape): (&str, &str, Shape),
        make: impl FnOnce() -> Result<Encoded, Error>,
    ) -> Result<Arc<Encoded>, Error> {
        let i = shape as usize;
        let hit = self
            .0
            .lock()
            .ok()
            .and_then(|m| m[i].get(agent)?.get(origin).cloned());
        if let Some(hit) = hit {
            return Ok(hit);
        }
        let made = Arc::new(make()?);
        if let Ok(mut m) = self.0.lock() {
            let cached: usize = m.iter().flat_map(|s| s.values()).map(HashMap::len).sum();
            if cached >= MAX_CACHED_CARDS {
                *m = CardMap::default();
            }
            m[i].entry(agent.to_owned())
                .or_default()
                .insert(origin.to_owned(), made.clone());
        }
        Ok(made)
    }
}

fn card_response(
    state: &AppState,
    card: &Value,
    headers: &HeaderMap,
    vary_version: bool,
) -> Response {
    match encode(state, card) {
        Ok(enc) => encoded_response(&enc, headers, vary_version),
        Err(e) => rest::error_response(&e, false),
    }
}

fn encoded_response(enc: &Encoded, headers: &HeaderMap, vary_version: bool) -> Response {
    let matches = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| if_none_match(v, &enc.etag));
    let mut resp = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            enc.body.clone(),
        )
            .into_response()
    };
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, CACHE_CONTROL);
    h.insert(header::ETAG, enc.etag_header.clone());
    h.insert(header::LAST_MODIFIED, enc.last_modified.clone());
    h.insert(
        header::VARY,
        HeaderValue::from_static(if vary_version {
            "Host, A2A-Version"
        } else {
            "Host"
        }),
    );
    resp
}

/// Whether an `If-None-Match` value matches `etag` (RFC 9110 §13.1.2: `*`,
/// or a comma list compared weakly, so `W/"x"` matches `"x"`).
fn if_none_match(value: &str, etag: &str) -> bool {
    value
        .split(',')
        .map(str::trim)
        .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == etag)
}

fn to_json(card: &AgentCard) -> Value {
    serde_json::to_value(card).unwrap_or(Value::Null)
}

/// `GET /.well-known/agent-card.json`: the first agent's card (see
/// [`agent_card`] for its shape), or the gateway card.
pub async fn root_card(
    State(state): State<Shared>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    if state.config.cards.root == RootCard::Gateway {
        // Always the 1.0 shape: the 0.3 fields would present the directory
        // as a JSON-RPC endpoint (`url` + `preferredTransport`).
        let base = base_url(&state, &headers);
        let body = served(&state, &gateway_card(&state, &base), Shape::Strict, &base);
        return card_response(&state, &body, &headers, false);
    }
    match state.engine.agents().first() {
        Some(agent) => agent_card(&state, agent, &headers, &uri),
        None => rest::error_response(&Error::NotFound("no agents are configured".into()), false),
    }
}

/// The custom binding of the gateway card's one interface: a JSON list of
/// the served agents' cards, not an A2A endpoint (clients skip bindings
/// they do not know).
pub const DIRECTORY_BINDING: &str = "urn:countersign:agent-directory";

/// The card of the whole server (`[cards] root = "gateway"`): one skill per
/// agent, and one interface, the directory.
pub fn gateway_card(state: &AppState, base: &str) -> AgentCard {
    let cfg = &state.config.cards;
    let agents = state.engine.agents();
    let skills = agents
        .iter()
        .map(|a| AgentSkill {
            id: a.id().to_owned(),
            name: a.config.name.clone().unwrap_or_else(|| a.id().to_owned()),
            description: if a.config.description.is_empty() {
                format!("Countersign agent `{}`", a.id())
            } else {
                a.config.description.clone()
            },
            tags: vec!["agent".into()],
            examples: Vec::new(),
            input_modes: Vec::new(),
            output_modes: Vec::new(),
        })
        .collect();
    let (security_schemes, security_requirements) = security(state, None);
    AgentCard {
        name: cfg.gateway_name.clone().unwrap_or_else(|| "Countersign".into()),
        description: cfg.gateway_description.clone().unwrap_or_else(|| {
            format!(
                "A Countersign server with {} agent(s); their cards are listed at {base}/a2a/agents",
                agents.len()
            )
        }),
        supported_interfaces: vec![AgentInterface {
            url: format!("{base}/a2a/agents"),
            protocol_binding: DIRECTORY_BINDING.into(),
            tenant: None,
            protocol_version: crate::a2a::PROTOCOL_VERSION.into(),
        }],
        provider: None,
        version: env!("CARGO_PKG_VERSION").into(),
        documentation_url: None,
        capabilities: AgentCapabilities::default(),
        security_schemes,
        security_requirements,
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        skills,
        signatures: Vec::new(),
        icon_url: None,
    }
}

/// `GET /a2a/agents`: every served agent's card, in configuration order,
/// each in the shape and with the signatures its own URL serves:
/// `{"agents": [card, ...], "total": n}`.
pub async fn directory(
    State(state): State<Shared>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let base = base_url(&state, &headers);
    let shape = shape(&state, &headers, &uri);
    let agents: Vec<Value> = state
        .engine
        .agents()
        .iter()
        .map(|a| served(&state, &public_card(&state, a, &base), shape, &base))
        .collect();
    let body = json!({"total": agents.len(), "agents": agents});
    card_response(&state, &body, &headers, true)
}

/// `GET /.well-known/jwks.json`: the public key that verifies our cards
/// (the `jku` of their signatures).
pub async fn jwks(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let body = json!({"keys": [state.card_key.public().jwk()]});
    card_response(&state, &body, &headers, false)
}

/// Which card shape a request gets: strict 1.0 when it says `A2A-Version:
/// 1.x` or `[cards] compat = "strict"`, else merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    Strict,
    Merged,
}

fn shape(state: &AppState, headers: &HeaderMap, uri: &axum::http::Uri) -> Shape {
    let strict = state.config.cards.compat == crate::config::CardCompat::Strict
        || matches!(
            super::requested_version(headers, uri),
            Ok(Some(super::Version::V1))
        );
    if strict { Shape::Strict } else { Shape::Merged }
}

/// The URL of our JWKS under `base`.
pub fn jwks_url(base: &str) -> String {
    format!("{base}/.well-known/jwks.json")
}

/// A signature of `body` by our card key, or none (logged) if it cannot be
/// made: an unsigned card is still a card.
fn sign(state: &AppState, body: &Value, base: &str) -> Option<Value> {
    match state.card_key.sign(body, Some(&jwks_url(base))) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!("cannot sign the agent card: {e}");
            None
        }
    }
}

/// `card` in `shape`, signed. The strict card carries one signature; the
/// merged card two: one over its 1.0 fields (what a 1.0 SDK keeps when it
/// parses the card, then verifies) and one over exactly the JSON served.
fn served(state: &AppState, card: &AgentCard, shape: Shape, base: &str) -> Value {
    let strict = to_json(card);
    let mut body = match shape {
        Shape::Strict => strict.clone(),
        Shape::Merged => merged_card(card),
    };
    let mut sigs: Vec<Value> = sign(state, &strict, base).into_iter().collect();
    if shape == Shape::Merged {
        sigs.extend(sign(state, &body, base));
    }
    if let (Value::Object(o), false) = (&mut body, sigs.is_empty()) {
        o.insert("signatures".into(), Value::Array(sigs));
    }
    body
}

/// The file in the data dir that holds the generated card key.
pub const KEY_FILE: &str = "card-key.pem";

/// Why the card key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read the card signing key {0}: {1}")]
    Read(std::path::PathBuf, std::io::Error),
    #[error("the card signing key {0} is unusable: {1}")]
    Bad(std::path::PathBuf, crate::a2a::signing::SignError),
    #[error("cannot write the card signing key {0}: {1}")]
    Write(std::path::PathBuf, std::io::Error),
}

/// The key that signs our cards: `[cards] signing_key` if set, else the
/// data dir's `card-key.pem`, made (0600) on first start.
pub fn load_key(
    configured: Option<&std::path::Path>,
    data_dir: &std::path::Path,
) -> Result<CardKey, KeyError> {
    let read = |path: &std::path::Path| -> Result<CardKey, KeyError> {
        let pem =
            std::fs::read_to_string(path).map_err(|e| KeyError::Read(path.to_path_buf(), e))?;
        CardKey::from_pem(&pem).map_err(|e| KeyError::Bad(path.to_path_buf(), e))
    };
    if let Some(path) = configured {
        return read(path);
    }
    let path = data_dir.join(KEY_FILE);
    match std::fs::symlink_metadata(&path) {
        Ok(_) => read(&path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = CardKey::generate().map_err(|e| KeyError::Bad(path.clone(), e))?;
            let pem = key.to_pem().map_err(|e| KeyError::Bad(path.clone(), e))?;
            let placed =
                super::ui_auth::write_private(&path, pem.as_bytes(), super::ui_auth::Replace::No);
            match placed {
                Ok(()) => Ok(key),
                // Another process made a key first: use that.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(&path),
                Err(e) => Err(KeyError::Write(path.clone(), e)),
            }
        }
        Err(e) => Err(KeyError::Read(path, e)),
    }
}

/// `GET /.well-known/agent.json` (and `/a2a/{agent}/.well-known/agent.json`):
/// the card under its pre-0.3 name, always merged (see [`merged_card`]).
pub async fn root_legacy_card(State(state): State<Shared>, headers: HeaderMap) -> Response {
    match state.engine.agents().first() {
        Some(agent) => legacy_card(&state, agent, &headers),
        None => rest::error_response(&Error::NotFound("no agents are configured".into()), false),
    }
}

/// The merged card of `agent`, for the `agent.json` paths.
pub fn legacy_card(state: &Arc<AppState>, agent: &Agent, headers: &HeaderMap) -> Response {
    let base = base_url(state, headers);
    let card = public_card(state, agent, &base);
    card_response(
        state,
        &served(state, &card, Shape::Merged, &base),
        headers,
        false,
    )
}

/// The route of `/a2a/{agent}/.well-known/agent-card.json`, the most
/// requested URL: a GET of a default-tenant agent's card goes straight to
/// [`agent_card`]; anything else (another method, a tenant's name in the
/// agent's place) takes the general HTTP+JSON route, which answers it.
pub async fn agent_card_route(
    State(state): State<Shared>,
    axum::extract::Path(first): axum::extract::Path<String>,
    req: axum::extract::Request,
) -> Response {
    let direct = matches!(
        *req.method(),
        axum::http::Method::GET | axum::http::Method::HEAD
    ) && state.config.tenant(&first).is_none();
    if direct && let Some(agent) = state.engine.agent_in(None, &first) {
        return agent_card(&state, agent, req.headers(), req.uri());
    }
    let rest = ".well-known/agent-card.json".to_owned();
    let (parts, body) = req.into_parts();
    // Boxed: the REST handler's future is kilobytes, and every card GET
    // would otherwise move one that size.
    Box::pin(rest::handle(
        State(state),
        axum::extract::Path((first, rest)),
        parts.method,
        parts.uri,
        parts.headers,
        body,
    ))
    .await
}

/// `GET /a2a/{agent}/.well-known/agent-card.json`: the strict 1.0 card when
/// the request says `A2A-Version: 1.x` or `[cards] compat = "strict"`;
/// otherwise the merged card that 0.3 clients can read too (no header tells
/// a 0.3 client from a strict 1.0 validator: both send none).
pub fn agent_card(
    state: &Arc<AppState>,
    agent: &Agent,
    headers: &HeaderMap,
    uri: &axum::http::Uri,
) -> Response {
    let shape = shape(state, headers, uri);
    let key = (agent.id(), super::origin(state, headers), shape);
    match state.card_cache.get_or(key, || {
        let base = base_url(state, headers);
        encode(
            state,
            &served(state, &public_card(state, agent, &base), shape, &base),
        )
    }) {
        Ok(enc) => encoded_response(&enc, headers, true),
        Err(e) => rest::error_response(&e, false),
    }
}

/// The 1.0 card plus the 0.3 fields (`url`, `preferredTransport`,
/// `protocolVersion`, `additionalInterfaces`, `supportsAuthenticatedExtendedCard`,
/// 0.3-style `security` and scheme `type`s). Clients of either generation
/// ignore the other's fields, so one document serves both.
pub fn merged_card(card: &AgentCard) -> Value {
    let mut v1 = to_json(card);
    let old = v0_3_card(card);
    let (Value::Object(out), Value::Object(old)) = (&mut v1, old) else {
        return v1;
    };
    for (k, v) in old {
        match (k.as_str(), out.get_mut(&k)) {
            ("securitySchemes", Some(Value::Object(schemes))) => {
                if let Value::Object(old_schemes) = v {
                    for (name, fields) in old_schemes {
                        if let (Some(Value::Object(entry)), Value::Object(mut fields)) =
                            (schemes.get_mut(&name), fields)
                        {
                            // The 0.3 `scheme` keeps the 1.0 spelling (auth
                            // scheme names are case-insensitive): a 1.0 SDK
                            // that rebuilds the 1.0 scheme from the 0.3 fields
                            // then verifies the card's signature.
                            if let Some(s) = entry
                                .get("httpAuthSecurityScheme")
                                .and_then(|h| h.get("scheme"))
                            {
                                fields.insert("scheme".into(), s.clone());
                            }
                            entry.extend(fields);
                        }
                    }
                }
            }
            ("capabilities", Some(Value::Object(caps))) => {
                if let Value::Object(old_caps) = v {
                    for (ck, cv) in old_caps {
                        caps.entry(ck).or_insert(cv);
                    }
                }
            }
            (_, None) => {
                out.insert(k, v);
            }
            _ => {}
        }
    }
    v1
}

/// The same card in v0.3 shape: `url` + `preferredTransport` (the JSON-RPC
/// interface), `additionalInterfaces`, top-level `protocolVersion`,
/// OpenAPI-style `securitySchemes`, `supportsAuthenticatedExtendedCard`.
pub fn v0_3_card(card: &AgentCard) -> Value {
    let transport = |binding: &str| -> &str {
        match binding {
            "HTTP+JSON" => "HTTP+JSON",
            "GRPC" => "GRPC",
            _ => "JSONRPC",
        }
    };
    // The interfaces declared for 0.3, or all of them if none is.
    let old: Vec<&AgentInterface> = card
        .supported_interfaces
        .iter()
        .filter(|i| i.protocol_version == "0.3")
        .collect();
    let interfaces: Vec<&AgentInterface> = if old.is_empty() {
        card.supported_interfaces.iter().collect()
    } else {
        old
    };
    let preferred = interfaces
        .iter()
        .find(|i| i.protocol_binding == "JSONRPC")
        .or(interfaces.first());
    let additional: Vec<Value> = interfaces
        .iter()
        .map(|i| json!({"url": i.url, "transport": transport(&i.protocol_binding)}))
        .collect();
    let mut schemes = serde_json::Map::new();
    for (name, s) in &card.security_schemes {
        let converted = if let Some(h) = s.get("httpAuthSecurityScheme") {
            json!({"type": "http", "scheme": h["scheme"].as_str().unwrap_or("bearer").to_ascii_lowercase(),
                   "description": h.get("description").cloned().unwrap_or(Value::Null)})
        } else if let Some(k) = s.get("apiKeySecurityScheme") {
            json!({"type": "apiKey", "in": k["location"], "name": k["name"]})
        } else {
            continue;
        };
        let cleaned: serde_json::Map<String, Value> = converted
            .as_object()
            .map(|o| {
                o.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        schemes.insert(name.clone(), Value::Object(cleaned));
    }
    let security: Vec<Value> = card
        .security_requirements
        .iter()
        .filter_map(|r| r.get("schemes").and_then(Value::as_object))
        .map(|m| Value::Object(m.keys().map(|k| (k.clone(), json!([]))).collect()))
        .collect();
    let mut out = json!({
        "protocolVersion": "0.3.0",
        "name": card.name,
        "description": card.description,
        "url": preferred.map(|i| i.url.clone()).unwrap_or_default(),
        "preferredTransport": preferred.map(|i| transport(&i.protocol_binding)).unwrap_or("JSONRPC"),
        "additionalInterfaces": additional,
        "version": card.version,
        "capabilities": {
            "streaming": card.capabilities.streaming.unwrap_or(false),
            "pushNotifications": card.capabilities.push_notifications.unwrap_or(false),
            "stateTransitionHistory": false,
        },
        "defaultInputModes": card.default_input_modes,
        "defaultOutputModes": card.default_output_modes,
        "skills": card.skills,
        "supportsAuthenticatedExtendedCard": card.capabilities.extended_agent_card.unwrap_or(false),
    });
    if let Value::Object(o) = &mut out {
        if let Some(p) = &card.provider {
            o.insert(
                "provider".into(),
                json!({"organization": p.organization, "url": p.url}),
            );
        }
        if let Some(d) = &card.documentation_url {
            o.insert("documentationUrl".into(), json!(d));
        }
        if let Some(i) = &card.icon_url {
            o.insert("iconUrl".into(), json!(i));
        }
        if !schemes.is_empty() {
            o.insert("securitySchemes".into(), Value::Object(schemes));
            o.insert("security".into(), Value::Array(security));
        }
    }
    out
}
