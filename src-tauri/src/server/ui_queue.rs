//! The UI API's queue, task, decision, file and history endpoints (under
//! `/api/`, behind the UI secret; see `ui_auth`). Thin: each handler parses,
//! calls the engine, and renders JSON. Agent content comes back sanitised by
//! `render`; the UI never builds HTML from agent strings.

use std::collections::HashMap;

use super::ui_api::ApiBody;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use serde_json::{Value, json};

use super::Shared;
use super::ui_api::{api_error, json_ok, store_error};
use crate::a2a::types::{Message, PartContent, Task, TaskState};
use crate::engine::decide::{DecideError, DecisionInput};
use crate::engine::queue::{QueryError, QueueQuery, TasksQuery, to_csv, to_jsonl};
use crate::render::{self, FileRef, PartOf};

/// The routes, to be nested under `/api`.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/queue", get(queue))
        .route("/tasks", get(tasks))
        .route("/tasks/{id}", get(task))
        .route("/tasks/{id}/decision", post(decide))
        .route("/tasks/{id}/files/{parent}/{parent_id}/{index}", get(file))
        .route("/archives/tasks/{id}", get(archived_task))
        .route(
            "/archives/tasks/{id}/files/{parent}/{parent_id}/{index}",
            get(archived_file),
        )
        .route("/history", get(history))
        .route("/history/export", get(export))
}

fn query_error(e: QueryError) -> Response {
    match e {
        QueryError::Invalid(m) => api_error(StatusCode::BAD_REQUEST, m),
        QueryError::NotFound(id) => api_error(
            StatusCode::NOT_FOUND,
            format!(
                "no task `{id}` here (if retention archived it, `countersign archive show {id}` prints it)"
            ),
        ),
        QueryError::Store(e) => store_error(&e),
    }
}

type Params = Query<HashMap<String, String>>;

fn param(p: &HashMap<String, String>, key: &str) -> Option<String> {
    p.get(key)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

fn limit_param(p: &HashMap<String, String>) -> Result<Option<usize>, String> {
    match param(p, "limit") {
        None => Ok(None),
        Some(l) => l
            .parse()
            .map(Some)
            .map_err(|_| format!("limit must be a number, got `{l}`")),
    }
}

/// `GET /api/queue?agent=&state=&q=&sort=oldest|newest&limit=&cursor=`
async fn queue(State(state): State<Shared>, Query(p): Params) -> Response {
    let limit = match limit_param(&p) {
        Ok(l) => l,
        Err(m) => return api_error(StatusCode::BAD_REQUEST, m),
    };
    let task_state = match state_param(&p) {
        Ok(s) => s,
        Err(resp) => return *resp,
    };
    let newest_first = match param(&p, "sort").as_deref() {
        None | Some("oldest") => false,
        Some("newest") => true,
        Some(other) => {
            return api_error(
                StatusCode::BAD_REQUEST,
                format!("sort is `oldest` or `newest`, not `{other}`"),
            );
        }
    };
    let query = QueueQuery {
        agent_id: param(&p, "agent"),
        state: task_state,
        text: param(&p, "q"),
        newest_first,
        limit,
        cursor: param(&p, "cursor"),
    };
    match state.engine.queue(query).await {
        Ok(page) => json_ok(&page),
        Err(e) => query_error(e),
    }
}

/// The `state` parameter: a task state, by its short or proto name.
fn state_param(p: &HashMap<String, String>) -> Result<Option<TaskState>, Box<Response>> {
    match param(p, "state") {
        None => Ok(None),
        Some(s) => match TaskState::parse(&s) {
            Some(st) => Ok(Some(st)),
            None => Err(Box::new(api_error(
                StatusCode::BAD_REQUEST,
                format!("unknown state `{s}`"),
            ))),
        },
    }
}

/// `GET /api/tasks?agent=&state=&q=&limit=&cursor=`: recent tasks of every
/// agent, or of one, in one state, holding the words of `q`.
async fn tasks(State(state): State<Shared>, Query(p): Params) -> Response {
    let limit = match limit_param(&p) {
        Ok(l) => l,
        Err(m) => return api_error(StatusCode::BAD_REQUEST, m),
    };
    let task_state = match state_param(&p) {
        Ok(s) => s,
        Err(resp) => return *resp,
    };
    let query = TasksQuery {
        agent_id: param(&p, "agent"),
        state: task_state,
        text: param(&p, "q"),
        limit,
        cursor: param(&p, "cursor"),
    };
    match state.engine.recent_tasks(query).await {
        Ok(page) => json_ok(&page),
        Err(e) => query_error(e),
    }
}

/// Where a task's files are served: a task here, or one in the archive.
#[derive(Clone, Copy)]
enum Kept {
    Here,
    Archived,
}

/// The API path of a raw file part, or the URL of a URL part.
fn file_url(kept: Kept, task_id: &str, f: FileRef<'_>) -> String {
    if let PartContent::Url(u) = &f.part.content {
        return u.clone();
    }
    let (kind, id) = match f.parent {
        PartOf::Message(id) => ("message", id),
        PartOf::Artifact(id) => ("artifact", id),
    };
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let base = match kept {
        Kept::Here => "/api/tasks",
        Kept::Archived => "/api/archives/tasks",
    };
    format!(
        "{base}/{}/files/{kind}/{}/{}",
        enc(task_id),
        enc(id),
        f.index
    )
}

/// The task's messages, status and artifacts, rendered safe to show.
fn rendered(task: &Task, kept: Kept) -> Value {
    let id = task.id.clone();
    let msg = |m: &Message| render::message(m, |f| file_url(kept, &id, f));
    json!({
        "history": task.history.iter().map(msg).collect::<Vec<_>>(),
        "status": {
            "state": task.status.state.short_name(),
            "timestamp": task.status.timestamp,
            "message": task.status.message.as_ref().map(msg),
        },
        "artifacts": task.artifacts.iter().flatten().map(|a| render::artifact(a, |f| file_url(kept, &id, f))).collect::<Vec<_>>(),
    })
}

/// `GET /api/tasks/{id}`: the task, its turns and decisions, rendered.
async fn task(State(state): State<Shared>, Path(id): Path<String>) -> Response {
    match state.engine.task_detail(&id).await {
        // Rendering is CPU work that grows with the task (a 1 MiB message
        // takes up to about a second): on the blocking pool, so it never
        // holds up the async workers that serve agents.
        Ok(detail) => match tokio::task::spawn_blocking(move || {
            let mut v = serde_json::to_value(&detail).unwrap_or(Value::Null);
            if let Value::Object(m) = &mut v {
                m.insert("rendered".into(), rendered(&detail.task, Kept::Here));
            }
            v
        })
        .await
        {
            Ok(v) => json_ok(&v),
            Err(e) => {
                tracing::error!(task = %id, "rendering the task failed: {e}");
                api_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("cannot render task `{id}`; see the server log"),
                )
            }
        },
        Err(e) => query_error(e),
    }
}

/// Who is deciding: the `X-Countersign-Actor` header (`ui` when absent).
fn actor(headers: &HeaderMap) -> String {
    headers
        .get("x-countersign-actor")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|a| {
            !a.is_empty()
                && a.len() <= 32
                && a.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        .unwrap_or("ui")
        .to_ascii_lowercase()
}

/// `POST /api/tasks/{id}/decision`: approve, reply, reject or continue.
async fn decide(
    State(state): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    ApiBody(body): ApiBody,
) -> Response {
    let input: DecisionInput = match serde_json::from_slice(&body) {
        Ok(i) => i,
        Err(e) => return api_error(StatusCode::BAD_REQUEST, format!("invalid decision: {e}")),
    };
    match state.engine.decide(&id, input, &actor(&headers)).await {
        Ok(d) => axum::Json(json!({"decision": d})).into_response(),
        Err(DecideError::AlreadyDecided(first)) => {
            let message = DecideError::AlreadyDecided(first.clone()).to_string();
            let body = json!({"error": {"code": 409, "message": message}, "decision": first});
            (StatusCode::CONFLICT, axum::Json(body)).into_response()
        }
        Err(e @ DecideError::NotFound(_)) => api_error(StatusCode::NOT_FOUND, e.to_string()),
        Err(e @ DecideError::NotParked(..)) => api_error(StatusCode::CONFLICT, e.to_string()),
        Err(e @ DecideError::Invalid(_)) => api_error(StatusCode::BAD_REQUEST, e.to_string()),
        Err(DecideError::Store(e)) => store_error(&e),
    }
}

/// A media type safe to put in a header, or `application/octet-stream`.
fn safe_media_type(t: Option<&str>) -> String {
    let t = t.unwrap_or("").trim();
    let valid = t.split_once('/').is_some_and(|(a, b)| {
        let token = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&c))
        };
        token(a) && token(b.split(';').next().unwrap_or("").trim())
    });
    if valid {
        crate::a2a::media_type_essence(t)
    } else {
        "application/octet-stream".into()
    }
}

/// `Content-Disposition: attachment` with an ASCII fallback name and the
/// UTF-8 name (RFC 6266 / 5987).
fn attachment(name: &str) -> String {
    let ascii: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && !"\"\\;/".contains(c) || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let encoded: String = url::form_urlencoded::byte_serialize(name.as_bytes())
        .collect::<String>()
        .replace('+', "%20");
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

/// `GET /api/tasks/{id}/files/{message|artifact}/{parent id}/{index}`: the
/// bytes of a file part, always as a download.
async fn file(
    State(state): State<Shared>,
    Path((id, parent, parent_id, index)): Path<(String, String, String, usize)>,
) -> Response {
    match state.engine.task_detail(&id).await {
        Ok(d) => file_of(&d.task, &parent, &parent_id, index),
        Err(e) => query_error(e),
    }
}

/// The task `id` as retention archived it: its whole record, and the task
/// itself read back. The archive is read from disk, off the async workers.
async fn archived(state: &Shared, id: &str) -> Result<(Value, Task), Response> {
    let not_held = || {
        api_error(
            StatusCode::NOT_FOUND,
            format!("the archive holds no task `{id}`"),
        )
    };
    let unreadable = |why: String| {
        tracing::error!(task = %id, "reading the archive failed: {why}");
        api_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot read the archive; see the server log",
        )
    };
    let Some(dir) = state.engine.archive_dir() else {
        return Err(not_held());
    };
    let wanted = id.to_owned();
    let rec = match tokio::task::spawn_blocking(move || crate::archive::find(&dir, &wanted)).await {
        Ok(Ok(Some(rec))) => rec,
        Ok(Ok(None)) => return Err(not_held()),
        Ok(Err(e)) => return Err(unreadable(e.to_string())),
        Err(e) => return Err(unreadable(e.to_string())),
    };
    let task = serde_json::from_value::<Task>(rec["task"].clone())
        .map_err(|e| unreadable(format!("its record's task cannot be read: {e}")))?;
    Ok((rec, task))
}

/// `GET /api/archives/tasks/{id}`: a task retention archived, in the shape
/// of `GET /api/tasks/{id}` (read-only: no open turn, no chain links) with
/// `archivedAt`; its files are served under `/api/archives/tasks/{id}/files/`.
async fn archived_task(State(state): State<Shared>, Path(id): Path<String>) -> Response {
    let (rec, task) = match archived(&state, &id).await {
        Ok(found) => found,
        Err(resp) => return resp,
    };
    let rendered = match tokio::task::spawn_blocking(move || rendered(&task, Kept::Archived)).await
    {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(task = %id, "rendering the archived task failed: {e}");
            return api_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot render task `{id}`; see the server log"),
            );
        }
    };
    let mut detail = json!({
        "task": rec["task"],
        "agentId": rec["agentId"],
        "dialect": rec["dialect"],
        "turns": rec.get("turns").cloned().unwrap_or_else(|| json!([])),
        "decisions": rec.get("decisions").cloned().unwrap_or_else(|| json!([])),
        "archivedAt": rec["archivedAt"],
        "rendered": rendered,
    });
    for key in ["continuedIn", "continues"] {
        if let Some(v) = rec.get(key).filter(|v| v.is_string()) {
            detail[key] = v.clone();
        }
    }
    with_chain(&state, &rec, detail)
}

/// The archived `detail` with its chain links (`chain` of `GET
/// /api/tasks/{id}`), from the hops its record `rec` holds.
fn with_chain(state: &Shared, rec: &Value, mut detail: Value) -> Response {
    let (parent, children) = match crate::store::retention::record_hops(rec) {
        Ok(hops) => hops,
        Err(e) => {
            let id = rec["task"]["id"].as_str().unwrap_or_default();
            tracing::error!(task = %id, "an archived chain hop cannot be read: {e}");
            return api_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot read the archive; see the server log",
            );
        }
    };
    match state.engine.archived_chain(parent, children) {
        Ok(links) => detail["chain"] = serde_json::to_value(links).unwrap_or_default(),
        Err(e) => return query_error(e),
    }
    json_ok(&detail)
}

/// `GET /api/archives/tasks/{id}/files/{message|artifact}/{parent id}/{index}`:
/// a file part of an archived task, as [`file`] serves one of a task here.
async fn archived_file(
    State(state): State<Shared>,
    Path((id, parent, parent_id, index)): Path<(String, String, String, usize)>,
) -> Response {
    match archived(&state, &id).await {
        Ok((_, task)) => file_of(&task, &parent, &parent_id, index),
        Err(resp) => resp,
    }
}

/// The bytes of part `index` of a message or artifact of `t`, always as a
/// download.
fn file_of(t: &Task, parent: &str, parent_id: &str, index: usize) -> Response {
    let parts = match parent {
        "message" => t
            .history
            .iter()
            .chain(t.status.message.iter())
            .find(|m| m.message_id == parent_id)
            .map(|m| &m.parts),
        "artifact" => t
            .artifacts
            .iter()
            .flatten()
            .find(|a| a.artifact_id == parent_id)
            .map(|a| &a.parts),
        _ => {
            return api_error(
                StatusCode::NOT_FOUND,
                "files belong to a `message` or an `artifact`",
            );
        }
    };
    let Some(part) = parts.and_then(|p| p.get(index)) else {
        return api_error(
            StatusCode::NOT_FOUND,
            format!("no part {index} in {parent} `{parent_id}`"),
        );
    };
    let PartContent::Raw(b64) = &part.content else {
        return api_error(
            StatusCode::NOT_FOUND,
            "this part is not a file with content",
        );
    };
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(b64.as_bytes()) else {
        return api_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "the stored file is not valid base64",
        );
    };
    let name = part
        .filename
        .clone()
        .unwrap_or_else(|| format!("file-{index}"));
    let mut resp = (StatusCode::OK, bytes).into_response();
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&safe_media_type(part.media_type.as_deref())) {
        h.insert(header::CONTENT_TYPE, v);
    }
    if let Ok(v) = HeaderValue::from_str(&attachment(&name)) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    resp
}

/// `GET /api/history?agent=&q=&limit=&cursor=`
async fn history(State(state): State<Shared>, Query(p): Params) -> Response {
    let limit = match limit_param(&p) {
        Ok(l) => l,
        Err(m) => return api_error(StatusCode::BAD_REQUEST, m),
    };
    match state
        .engine
        .history(
            param(&p, "agent"),
            param(&p, "q"),
            limit,
            param(&p, "cursor"),
        )
        .await
    {
        Ok(page) => json_ok(&page),
        Err(e) => query_error(e),
    }
}

/// `GET /api/history/export?format=jsonl|csv&agent=&q=`
async fn export(State(state): State<Shared>, Query(p): Params) -> Response {
    let format = param(&p, "format").unwrap_or_else(|| "jsonl".into());
    let (content_type, ext) = match format.as_str() {
        "jsonl" => ("application/x-ndjson", "jsonl"),
        "csv" => ("text/csv; charset=utf-8", "csv"),
        other => {
            return api_error(
                StatusCode::BAD_REQUEST,
                format!("format is `jsonl` or `csv`, not `{other}`"),
            );
        }
    };
    let items = match state
        .engine
        .history_all(param(&p, "agent"), param(&p, "q"))
        .await
    {
        Ok(i) => i,
        Err(e) => return query_error(e),
    };
    let body = if ext == "csv" {
        to_csv(&items)
    } else {
        to_jsonl(&items)
    };
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(v) = HeaderValue::from_str(&attachment(&format!("countersign-history.{ext}"))) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_and_file_names_are_made_safe_for_headers() {
        assert_eq!(
            safe_media_type(Some("text/plain; charset=utf-8")),
            "text/plain"
        );
        assert_eq!(
            safe_media_type(Some("text/html\r\nX: y")),
            "application/octet-stream"
        );
        assert_eq!(safe_media_type(None), "application/octet-stream");
        assert_eq!(
            attachment("a\"b;c.txt"),
            "attachment; filename=\"a_b_c.txt\"; filename*=UTF-8''a%22b%3Bc.txt"
        );
        assert!(attachment("résumé.pdf").contains("filename*=UTF-8''r%C3%A9sum%C3%A9.pdf"));
    }
}
