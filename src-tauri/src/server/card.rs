//! Agent cards: built from config and the URL clients reach us at, served
//! with `Cache-Control`, `ETag` and `Last-Modified`, 304 on a match.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{AppState, Shared, base_url, rest};
use crate::a2a::Error;
use crate::a2a::card::{AgentCapabilities, AgentCard, AgentInterface, AgentProvider, AgentSkill};
use crate::config::SkillConfig;
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
    let (security_schemes, security_requirements) = security(state, agent);
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

fn security(state: &AppState, agent: &Agent) -> (serde_json::Map<String, Value>, Vec<Value>) {
    let mut schemes = serde_json::Map::new();
    let mut reqs = Vec::new();
    let creds = &state.access.for_tenant(agent.tenant()).credentials;
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
    Ok(card)
}

/// Serves a card with caching headers.
fn card_response(
    state: &AppState,
    card: &Value,
    headers: &HeaderMap,
    vary_version: bool,
) -> Response {
    let body = match serde_json::to_vec(card) {
        Ok(b) => b,
        Err(e) => {
            return rest::error_response(
                &Error::Internal(format!("cannot encode the card: {e}")),
                false,
            );
        }
    };
    let digest = Sha256::digest(&body);
    let etag = format!(
        "\"{}\"",
        digest[..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let last_modified = httpdate::fmt_http_date(
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(state.started_ms.max(0) as u64),
    );
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut resp = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    };
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("public, max-age={CARD_MAX_AGE}")) {
        h.insert(header::CACHE_CONTROL, v);
    }
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    if let Ok(v) = HeaderValue::from_str(&last_modified) {
        h.insert(header::LAST_MODIFIED, v);
    }
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

fn to_json(card: &AgentCard) -> Value {
    serde_json::to_value(card).unwrap_or(Value::Null)
}

/// `GET /.well-known/agent-card.json`: the first agent's card (see
/// [`agent_card`] for its shape).
pub async fn root_card(
    State(state): State<Shared>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    match state.engine.agents().first() {
        Some(agent) => agent_card(&state, agent, &headers, &uri),
        None => rest::error_response(&Error::NotFound("no agents are configured".into()), false),
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
    let card = public_card(state, agent, &base_url(state, headers));
    card_response(state, &merged_card(&card), headers, false)
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
    let card = public_card(state, agent, &base_url(state, headers));
    let strict = state.config.cards.compat == crate::config::CardCompat::Strict
        || matches!(
            super::requested_version(headers, uri),
            Ok(Some(super::Version::V1))
        );
    let body = if strict {
        to_json(&card)
    } else {
        merged_card(&card)
    };
    card_response(state, &body, headers, true)
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
                        if let (Some(Value::Object(entry)), Value::Object(fields)) =
                            (schemes.get_mut(&name), fields)
                        {
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
