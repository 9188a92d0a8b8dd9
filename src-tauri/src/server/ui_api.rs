//! The UI API under `/api/`: what the browser UI (and the CLI) reads and
//! does, as JSON and one event stream. Every route sits behind
//! [`ui_auth::guard`], and every change made through it is synced to the
//! disk before it is answered ([`on_disk`]); errors are rendered only by
//! [`ApiError`]'s `IntoResponse`, as `{"error": {"code", "message"}}`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::stream::{self, Stream};
use serde::Serialize;
use serde_json::json;
use tokio::sync::broadcast;

use super::{Shared, base_url, ui_auth};
use crate::a2a::types::StreamResponse;
use crate::config::BackendKind;
use crate::engine::Event;

/// How often an idle event stream sends a comment, so proxies and the
/// browser keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The UI API routes (these and `ui_queue`'s), all guarded; nested under
/// `/api` by [`super::router`].
pub fn router(state: Shared) -> Router<Shared> {
    let body_limit = state.config.limits.max_body_bytes;
    Router::new()
        .route("/health", get(health))
        .route("/agents", get(agents))
        .route("/events", get(events))
        .route("/archives", get(archives))
        .merge(super::ui_queue::routes())
        .merge(super::ui_peers::routes())
        .merge(super::ui_dispatch::routes())
        .merge(super::ui_settings::routes())
        // Its own fallback, so unknown `/api/…` paths are guarded too and
        // answer in this API's error shape.
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(from_fn_with_state(state.clone(), on_disk))
        .layer(from_fn_with_state(state, ui_auth::guard))
}

/// A change a person made here (the UI, the CLI and the desktop app all
/// come this way) is on the disk before they are told it went through: a
/// request with a method that may change something, once it succeeded,
/// waits for [`crate::store::Store::sync`]. With the default durability a
/// commit reaches the disk at the checkpoint after it, within about 30 ms;
/// an agent whose request was lost to a power cut in between can send it
/// again, a person who saw their change go through would not think to.
async fn on_disk(State(state): State<Shared>, req: Request, next: Next) -> Response {
    let changes = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let resp = next.run(req).await;
    if changes && resp.status().is_success() {
        state.engine.store().sync().await;
    }
    resp
}

/// A UI API failure. Its `IntoResponse` is the one place that picks the
/// status and shape of a UI API error.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No token, or the wrong one (401 with `WWW-Authenticate: Bearer`).
    #[error("{0}")]
    Unauthorized(String),
    /// Not addressed to us, or not from our own pages (403).
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    /// An engine error, with the status A2A gives it.
    #[error("{0}")]
    A2a(#[from] crate::a2a::Error),
}

impl ApiError {
    /// The HTTP status this error answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::A2a(e) => {
                StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }
        }
    }
}

/// `200 OK` with `value` as JSON, for the pages the UI reads most (queue,
/// tasks, history, a task). Written into one buffer that grows by
/// doubling: axum's `Json` writes through a `BytesMut`, one small write per
/// token, which was a quarter of a queue page's work in profiles.
pub fn json_ok<T: Serialize + ?Sized>(value: &T) -> Response {
    // A queue page of 50 is about 11 KB.
    match crate::a2a::to_json_sized(value, 16 * 1024) {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            text,
        )
            .into_response(),
        Err(e) => {
            tracing::error!("cannot encode an answer: {e}");
            api_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot encode the answer; see the server log",
            )
        }
    }
}

/// `{"error": {"code", "message"}}` with that status: the one shape of
/// every UI API error.
/// A storage failure, logged, as a 500 that says what the caller may do.
pub fn store_error(e: &crate::store::Error) -> Response {
    tracing::error!("storage failure: {e}");
    api_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        crate::engine::storage_failure(e),
    )
}

pub fn api_error(status: StatusCode, message: impl Into<String>) -> Response {
    let body = json!({"error": {"code": status.as_u16(), "message": message.into()}});
    (status, Json(body)).into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut resp = api_error(status, self.to_string());
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"countersign\""),
            );
        }
        if let ApiError::A2a(e) = &self
            && let Some(s) = e.retry_after()
        {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        resp
    }
}

/// A UI API request body, read within `max_body_bytes` and
/// `body_timeout_secs`, UTF-8 and nested at most `max_json_depth` deep; too
/// large (413), too slow (408), not UTF-8 or too deep (400) is refused in
/// this API's error shape.
pub struct ApiBody(pub Bytes);

impl axum::extract::FromRequest<Shared> for ApiBody {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &Shared) -> Result<Self, ApiError> {
        let bytes = super::read_request_body(state, req.into_body(), None).await?;
        // The handlers parse it; refuse what no handler should see first.
        let text = std::str::from_utf8(&bytes)
            .map_err(|e| crate::a2a::Error::Parse(format!("the body is not valid UTF-8 ({e})")))?;
        super::check_depth(text, state.config.limits.max_json_depth)?;
        Ok(ApiBody(bytes))
    }
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::NotFound(format!("no UI API route for {}", uri.path()))
}

/// `GET /api/archives`: the archive files retention wrote (`archive list`).
async fn archives(State(state): State<Shared>) -> Result<Json<serde_json::Value>, ApiError> {
    let Some(dir) = state.engine.archive_dir() else {
        return Ok(Json(json!({"files": []})));
    };
    let files = tokio::task::spawn_blocking(move || crate::archive::list(&dir))
        .await
        .map_err(|e| crate::a2a::Error::Internal(format!("archive listing failed: {e}")))?
        .map_err(|e| {
            tracing::error!("{e}");
            crate::a2a::Error::Internal("cannot read the archive; see the server log".into())
        })?;
    Ok(Json(json!({"files": files})))
}

/// `GET /api/health`: the server is up, which version it is, and whether
/// it can store (`storage`, as [`storage_event`] words it).
async fn health(State(state): State<Shared>) -> Json<serde_json::Value> {
    let storage = storage_event(&state.engine.store().failing().borrow());
    Json(json!({"ok": true, "version": env!("CARGO_PKG_VERSION"), "storage": storage}))
}

/// Whether the store can write, as the event stream (and the desktop
/// window) carries it: `{"kind": "storage", "ok": true}`, or `"ok": false`
/// with `error` (SQLite's reason) and `sinceMs` while writes fail as a
/// whole (a full disk).
pub fn storage_event(failing: &Option<crate::store::Failing>) -> serde_json::Value {
    match failing {
        None => json!({"kind": "storage", "ok": true}),
        Some(f) => json!({"kind": "storage", "ok": false, "error": f.why, "sinceMs": f.since_ms}),
    }
}

/// One served agent, as the UI lists it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSummary {
    /// Its key: `{id}`, or `{tenant}/{id}` in a tenant (as tasks name it).
    pub id: String,
    /// Its tenant; absent in the default tenant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub name: String,
    pub description: String,
    /// `human` or `scripted`.
    pub backend: &'static str,
    pub card_url: String,
    /// The JSON-RPC (and HTTP+JSON) endpoint callers use.
    pub url: String,
}

/// `GET /api/agents`: the agents this server serves.
async fn agents(State(state): State<Shared>, headers: HeaderMap) -> Json<serde_json::Value> {
    let base = base_url(&state, &headers);
    let agents: Vec<AgentSummary> = state
        .engine
        .agents()
        .iter()
        .map(|a| {
            let url = format!("{base}/a2a/{}", a.id());
            AgentSummary {
                id: a.id().to_owned(),
                tenant: a.tenant().map(str::to_owned),
                name: a.config.name.clone().unwrap_or_else(|| a.id().to_owned()),
                description: a.config.description.clone(),
                backend: match a.config.backend {
                    BackendKind::Human => "human",
                    BackendKind::Scripted => "scripted",
                    BackendKind::Relay => "relay",
                },
                card_url: format!("{url}/.well-known/agent-card.json"),
                url,
            }
        })
        .collect();
    Json(json!({ "agents": agents }))
}

/// What the event stream says about one committed change: enough for the
/// UI to know what to re-read.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventNotice<'a> {
    pub task_id: &'a str,
    pub agent_id: &'a str,
    pub seq: i64,
    /// The task's state after the change (`TASK_STATE_…`).
    pub state: &'static str,
    /// `task`, `message`, `statusUpdate` or `artifactUpdate`.
    pub kind: &'static str,
}

impl<'a> From<&'a Event> for EventNotice<'a> {
    fn from(ev: &'a Event) -> Self {
        EventNotice {
            task_id: &ev.task_id,
            agent_id: &ev.agent_id,
            seq: ev.seq,
            state: ev.state.proto_name(),
            kind: match ev.body {
                StreamResponse::Task(_) => "task",
                StreamResponse::Message(_) => "message",
                StreamResponse::StatusUpdate(_) => "statusUpdate",
                StreamResponse::ArtifactUpdate(_) => "artifactUpdate",
            },
        }
    }
}

/// A peer notice as the event stream (and the desktop window) carries it:
/// `{"kind": "peer", "peerId", "held", "changed"}`.
pub fn peer_event(n: &crate::engine::peers::PeerNotice) -> serde_json::Value {
    serde_json::json!({"kind": "peer", "peerId": n.peer_id, "held": n.held, "changed": n.changed})
}

/// `GET /api/events`: every committed change of every task, as it commits.
/// The stream ends when the server shuts down, or when the client falls too
/// far behind (it reconnects and re-reads what it shows).
async fn events(
    State(state): State<Shared>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    // Subscribed before the response starts: nothing committed after the
    // client sees the headers is missed.
    let rx = state.engine.bus().subscribe_all();
    let peers = state.engine.peer_notices();
    let mut storage = state.engine.store().failing();
    // A client that connects while writes fail hears so first.
    if storage.borrow().is_some() {
        storage.mark_changed();
    }
    Sse::new(notices(rx, peers, storage, state.shutdown.clone()))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
}

/// Task events; `{"kind": "peer", "peerId", "held", "changed"}` when a
/// peer is held for a changed card or released; and [`storage_event`] when
/// writes start or stop failing.
fn notices(
    rx: broadcast::Receiver<Arc<Event>>,
    peers: broadcast::Receiver<crate::engine::peers::PeerNotice>,
    storage: tokio::sync::watch::Receiver<Option<crate::store::Failing>>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    stream::unfold(
        (rx, peers, storage, shutdown),
        |(mut rx, mut peers, mut storage, mut shutdown)| async move {
            if *shutdown.borrow() {
                return None;
            }
            let data = tokio::select! {
                ev = rx.recv() => {
                    let ev = ev.ok()?;
                    serde_json::to_string(&EventNotice::from(ev.as_ref())).unwrap_or_default()
                }
                p = peers.recv() => peer_event(&p.ok()?).to_string(),
                changed = storage.changed() => {
                    changed.ok()?;
                    storage_event(&storage.borrow_and_update()).to_string()
                }
                _ = shutdown.changed() => return None,
            };
            Some((
                Ok(SseEvent::default().data(data)),
                (rx, peers, storage, shutdown),
            ))
        },
    )
}
