//! The UI API's peer endpoints: add, list, remove and refresh peers, create
//! webhook subscriptions and start watched tasks.

use std::collections::BTreeMap;

use super::ui_api::ApiBody;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::json;

use super::ui_api::{api_error, store_error};
use super::{Shared, webhook_base};
use crate::a2a::types::{Part, PartContent};
use crate::engine::decide::AttachedFile;
use crate::engine::peers::PeerError;
use crate::store::peers::PeerAuthRecord;

/// The routes, to be nested under `/api`.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/peers", get(list).post(add))
        .route("/peers/preview", post(preview))
        .route("/peers/{id}", axum::routing::delete(remove))
        .route("/peers/{id}/refresh", post(refresh))
        .route("/peers/{id}/trust", post(trust))
        .route("/peers/{id}/subscriptions", post(subscribe))
        .route("/peers/{id}/tasks", post(send))
}

fn peer_error(e: PeerError) -> Response {
    match e {
        PeerError::UnknownPeer(_) => api_error(StatusCode::NOT_FOUND, e.to_string()),
        PeerError::Invalid(_) => api_error(StatusCode::BAD_REQUEST, e.to_string()),
        PeerError::Held { .. } => api_error(StatusCode::CONFLICT, e.to_string()),
        PeerError::StillSending { .. } => api_error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        PeerError::Client(c) => api_error(StatusCode::BAD_GATEWAY, format!("the peer: {c}")),
        PeerError::Unanswered { .. } => {
            api_error(StatusCode::GATEWAY_TIMEOUT, format!("the peer: {e}"))
        }
        PeerError::Store(s) => store_error(&s),
        PeerError::Bug(_) => api_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

fn parse<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("invalid request: {e}"))
}

/// `GET /api/peers`
async fn list(State(state): State<Shared>) -> Response {
    match state.engine.peers().await {
        Ok(peers) => axum::Json(json!({"peers": peers})).into_response(),
        Err(e) => peer_error(e),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewPeer {
    #[serde(default)]
    id: Option<String>,
    url: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    bearer: Option<String>,
    #[serde(default)]
    api_key: Option<String>,
    #[serde(default)]
    api_key_header: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// A slug for a peer from its name or host: `Deploy Bot` → `deploy-bot`.
fn slug_of(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').chars().take(64).collect()
}

/// `POST /api/peers`: the card is fetched before the peer is stored.
async fn add(State(state): State<Shared>, ApiBody(body): ApiBody) -> Response {
    let p: NewPeer = match parse(&body) {
        Ok(p) => p,
        Err(m) => return api_error(StatusCode::BAD_REQUEST, m),
    };
    let id = match p.id.clone().filter(|i| !i.is_empty()) {
        Some(id) => id,
        None => {
            let from = p.name.clone().unwrap_or_else(|| {
                url::Url::parse(&p.url)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_owned))
                    .unwrap_or_default()
            });
            slug_of(&from)
        }
    };
    let auth = PeerAuthRecord {
        bearer: p.bearer,
        api_key: p.api_key,
        api_key_header: p.api_key_header,
        headers: p.headers.into_iter().collect(),
    };
    match state.engine.add_peer(&id, &p.url, p.name, auth).await {
        Ok(peer) => (StatusCode::CREATED, axum::Json(json!({"peer": peer}))).into_response(),
        Err(e) => peer_error(e),
    }
}

/// `POST /api/peers/preview`: the card of a peer as it would be added
/// (same body as adding it), read now and not stored.
async fn preview(State(state): State<Shared>, ApiBody(body): ApiBody) -> Response {
    let p: NewPeer = match parse(&body) {
        Ok(p) => p,
        Err(m) => return api_error(StatusCode::BAD_REQUEST, m),
    };
    let auth = PeerAuthRecord {
        bearer: p.bearer,
        api_key: p.api_key,
        api_key_header: p.api_key_header,
        headers: p.headers.into_iter().collect(),
    };
    match state.engine.preview_peer(&p.url, &auth).await {
        Ok(card) => axum::Json(json!({ "card": card })).into_response(),
        Err(e) => peer_error(e),
    }
}

/// `DELETE /api/peers/{id}`
async fn remove(State(state): State<Shared>, Path(id): Path<String>) -> Response {
    match state.engine.remove_peer(&id).await {
        Ok(()) => axum::Json(json!({"removed": id})).into_response(),
        Err(e) => peer_error(e),
    }
}

/// `POST /api/peers/{id}/refresh`: fetch the card again.
async fn refresh(State(state): State<Shared>, Path(id): Path<String>) -> Response {
    match state.engine.peer_card(&id, true).await {
        Ok(known) => axum::Json(json!({"peer": known.0, "card": known.1.card})).into_response(),
        Err(e) => peer_error(e),
    }
}

/// `POST /api/peers/{id}/trust`: accepts the peer's changed card (its
/// `cardChange`); held decisions and new tasks go out again. Answers the
/// peer; accepting when nothing changed is a no-op.
async fn trust(State(state): State<Shared>, Path(id): Path<String>) -> Response {
    match state.engine.trust_peer(&id).await {
        Ok(peer) => axum::Json(json!({"peer": peer})).into_response(),
        Err(e) => peer_error(e),
    }
}

/// `POST /api/peers/{id}/subscriptions`: a webhook URL and token to put in
/// another tool's push config for tasks on this peer.
async fn subscribe(State(state): State<Shared>, Path(id): Path<String>) -> Response {
    match state.engine.create_subscription(&id).await {
        Ok(sub) => {
            let url = format!("{}/webhooks/{}", webhook_base(&state), sub.id);
            (
                StatusCode::CREATED,
                axum::Json(
                    json!({"id": sub.id, "peerId": sub.peer_id, "url": url, "token": sub.token}),
                ),
            )
                .into_response()
        }
        Err(e) => peer_error(e),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NewTask {
    text: String,
    #[serde(default)]
    files: Vec<AttachedFile>,
}

/// `POST /api/peers/{id}/tasks`: start a task on the peer and watch it.
async fn send(
    State(state): State<Shared>,
    Path(id): Path<String>,
    ApiBody(body): ApiBody,
) -> Response {
    let t: NewTask = match parse(&body) {
        Ok(t) => t,
        Err(m) => return api_error(StatusCode::BAD_REQUEST, m),
    };
    let mut parts = Vec::new();
    if !t.text.trim().is_empty() {
        parts.push(Part::text(t.text));
    }
    for f in t.files {
        if base64::engine::general_purpose::STANDARD
            .decode(f.bytes.as_bytes())
            .is_err()
        {
            return api_error(
                StatusCode::BAD_REQUEST,
                format!("file `{}` is not valid base64", f.name),
            );
        }
        parts.push(Part {
            content: PartContent::Raw(f.bytes),
            metadata: None,
            filename: Some(f.name),
            media_type: f.media_type,
        });
    }
    if parts.is_empty() {
        return api_error(StatusCode::BAD_REQUEST, "a task needs text or a file");
    }
    match state.engine.send_to_peer(&id, parts).await {
        Ok(task) => (StatusCode::CREATED, axum::Json(json!({"task": task}))).into_response(),
        Err(e) => peer_error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::slug_of;

    #[test]
    fn peer_ids_are_slugs_of_names() {
        assert_eq!(slug_of("Deploy Bot"), "deploy-bot");
        assert_eq!(slug_of("127.0.0.1"), "127-0-0-1");
        assert_eq!(slug_of("--x--"), "x");
    }
}
