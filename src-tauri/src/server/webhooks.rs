//! The push-notification receiver: `POST /webhooks/{subscription}`.
//!
//! A push proves nothing by itself: it must carry the subscription's token
//! (`X-A2A-Notification-Token`, `A2A-Notification-Token`, or
//! `Authorization: Bearer`), compared in constant time, and even then it is
//! only a hint — the engine re-reads the task from the peer before changing
//! anything. The answer is 200 once that change is committed and on the
//! disk; when the re-read fails or takes longer than `[webhooks]
//! reread_wait_ms`, it is 202 once the re-read is queued in the durable
//! outbox (on the disk too), which retries it. Either way a 2xx means
//! nothing the push announced can be lost, even to a power cut: a sender
//! does not push again what we acknowledged.

use std::borrow::Cow;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use subtle::ConstantTimeEq;

use super::{Shared, read_request_body};

fn answer(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {"code": status.as_u16(), "message": message}})),
    )
        .into_response()
}

/// 429 for a sender over its rate limit (or its address over its limit of
/// connections), in this receiver's error shape.
pub(super) fn rate_limited(e: &crate::a2a::Error) -> Response {
    let retry_after_secs = e.retry_after().unwrap_or(1);
    let mut resp = answer(
        StatusCode::TOO_MANY_REQUESTS,
        &lowercase_first(&e.to_string()),
    );
    resp.headers_mut().insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from(retry_after_secs),
    );
    resp
}

/// "Rate limit exceeded" as this receiver's messages read: "rate limit …".
fn lowercase_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The token a push carries, from any of the headers senders use.
fn presented_token(headers: &HeaderMap) -> Option<String> {
    for name in ["x-a2a-notification-token", "a2a-notification-token"] {
        if let Some(v) = headers.get(name).and_then(|v| v.to_str().ok()) {
            return Some(v.trim().to_owned());
        }
    }
    let auth = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, rest) = auth.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| rest.trim().to_owned())
}

/// What a push body says about its task: a 1.0 `StreamResponse`
/// (`{"task": {"id"}}`, `{"statusUpdate": {"taskId"}}`, …) or a 0.3 body (a
/// `Task` with `kind`/`id`, or a 0.3 event with `taskId`). Everything else
/// in it is skipped unread: only the task id matters, since the task itself
/// is re-read from the peer.
#[derive(Deserialize)]
struct PushBody<'a> {
    #[serde(borrow)]
    task: Option<Ids<'a>>,
    #[serde(borrow, rename = "statusUpdate", alias = "status_update")]
    status_update: Option<Ids<'a>>,
    #[serde(borrow, rename = "artifactUpdate", alias = "artifact_update")]
    artifact_update: Option<Ids<'a>>,
    #[serde(borrow)]
    message: Option<Ids<'a>>,
    #[serde(borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, rename = "taskId")]
    task_id: Option<Cow<'a, str>>,
}

/// The ids in an object of a push body.
#[derive(Deserialize)]
struct Ids<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, rename = "taskId", alias = "task_id")]
    task_id: Option<Cow<'a, str>>,
}

impl PushBody<'_> {
    /// The peer's task id it names, if any.
    fn task_id(self) -> Option<String> {
        let named = |s: Option<Cow<'_, str>>| s.filter(|s| !s.is_empty()).map(Cow::into_owned);
        if let Some(t) = self.task {
            return named(t.id);
        }
        if let Some(u) = self.status_update.or(self.artifact_update).or(self.message) {
            return named(u.task_id);
        }
        match self.kind.as_deref() {
            Some("status-update" | "artifact-update") => named(self.task_id),
            _ => named(self.id).or_else(|| named(self.task_id)),
        }
    }
}

/// The peer's task id in a push body, or why the body is refused: not
/// UTF-8 JSON, nested deeper than `max_depth`, of the wrong shape, or naming
/// no task. Pure (no HTTP, no store), so it can be fuzzed.
pub fn parse_push(bytes: &[u8], max_depth: usize) -> Result<String, String> {
    let unfit = |e: String| format!("the push body is not acceptable JSON: {e}");
    let text = super::checked_text(bytes, max_depth).map_err(|e| unfit(e.to_string()))?;
    // (Read as a struct, an array would be taken member by member.)
    if !text.trim_start().starts_with('{') {
        return Err(match serde_json::from_str::<serde::de::IgnoredAny>(text) {
            Ok(_) => "the push body is not a JSON object".to_owned(),
            Err(e) => unfit(e.to_string()),
        });
    }
    let body: PushBody = serde_json::from_str(text).map_err(|e| unfit(e.to_string()))?;
    body.task_id()
        .ok_or_else(|| "the push names no task".to_owned())
}

/// `POST /webhooks/{subscription}`.
pub async fn receive(
    State(state): State<Shared>,
    Path(sub_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let sub = match state.engine.subscription(&sub_id).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            tracing::warn!(subscription = %sub_id, "push for an unknown subscription refused");
            return answer(StatusCode::NOT_FOUND, "no such subscription");
        }
        Err(e) => {
            tracing::error!("storage failure: {e}");
            return answer(
                StatusCode::SERVICE_UNAVAILABLE,
                "storage failure; try again",
            );
        }
    };
    let ok = presented_token(&headers)
        .is_some_and(|t| bool::from(t.as_bytes().ct_eq(sub.token.as_bytes())));
    if !ok {
        tracing::warn!(subscription = %sub_id, "push with a missing or wrong token refused");
        return answer(
            StatusCode::UNAUTHORIZED,
            "missing or wrong notification token",
        );
    }
    let bytes =
        match read_request_body(&state, body, Some(state.config.webhooks.max_body_bytes)).await {
            Ok(b) => b,
            Err(e) => {
                return answer(
                    StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::BAD_REQUEST),
                    &e.to_string(),
                );
            }
        };
    let remote_id = match parse_push(&bytes, state.config.limits.max_json_depth) {
        Ok(id) => id,
        Err(message) => return answer(StatusCode::BAD_REQUEST, &message),
    };
    let wait = state.config.webhooks.reread_wait_ms;
    let tried = if wait == 0 {
        None
    } else {
        let reread = state
            .engine
            .refresh_pushed(&sub.peer_id, &sub.id, &remote_id);
        match tokio::time::timeout(Duration::from_millis(wait), reread).await {
            Ok(Ok(id)) => {
                return (
                    StatusCode::OK,
                    axum::Json(json!({"ok": true, "taskId": id})),
                )
                    .into_response();
            }
            // Read, but not kept: the outbox retries the whole re-read.
            Ok(Err(e @ crate::engine::peers::PeerError::Store(_))) => Some(e.to_string()),
            Ok(Err(e)) => Some(format!("cannot re-read the task from the peer: {e}")),
            Err(_) => Some(format!(
                "the peer did not answer the re-read within {wait} ms"
            )),
        }
    };
    if let Some(why) = &tried {
        tracing::info!(subscription = %sub_id, "pushed task {remote_id}: {why}; the outbox retries");
    }
    // Received: from here the outbox owns the re-read, durably.
    match state
        .engine
        .queue_reread(&sub.peer_id, Some(&sub.id), &remote_id, tried.clone())
        .await
    {
        Ok(item) => (
            StatusCode::ACCEPTED,
            axum::Json(json!({
                "ok": true,
                "queued": item,
                "reason": tried.unwrap_or_else(|| "re-read after the answer".into()),
            })),
        )
            .into_response(),
        Err(e) => {
            tracing::error!(subscription = %sub_id, "cannot queue the re-read of pushed task {remote_id}: {e}");
            // Nothing kept: let the peer try again (the sweep also catches
            // a task already known).
            answer(
                StatusCode::SERVICE_UNAVAILABLE,
                "storage failure; try again",
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_come_from_every_push_shape() {
        let id = |body: &str| parse_push(body.as_bytes(), 32);
        assert_eq!(
            id(r#"{"task": {"id": "t1", "status": {"state": "x"}}}"#).as_deref(),
            Ok("t1")
        );
        assert_eq!(
            id(r#"{"statusUpdate": {"taskId": "t2"}}"#).as_deref(),
            Ok("t2")
        );
        assert_eq!(
            id(r#"{"artifact_update": {"task_id": "t2b"}}"#).as_deref(),
            Ok("t2b")
        );
        assert_eq!(
            id(r#"{"message": {"taskId": "t2c", "parts": []}}"#).as_deref(),
            Ok("t2c")
        );
        assert_eq!(
            id(r#"{"kind": "task", "id": "t3", "status": {}}"#).as_deref(),
            Ok("t3")
        );
        assert_eq!(
            id(r#"{"kind": "status-update", "taskId": "t4", "id": "x"}"#).as_deref(),
            Ok("t4")
        );
        assert_eq!(id(r#"{"taskId": "t\u0035"}"#).as_deref(), Ok("t5"));
        assert_eq!(id(r#"{"hello": 1}"#), Err("the push names no task".into()));
        // A task object without an id names no task, whatever else says one.
        assert_eq!(
            id(r#"{"task": {"id": ""}, "id": "t6"}"#),
            Err("the push names no task".into())
        );
        for bad in [
            r#"{"task": {"id": 5}}"#,
            r#"{"id": "a", "id": "b"}"#,
            "{",
            "{}x",
            "",
            "hello",
        ] {
            let e = id(bad).unwrap_err();
            assert!(
                e.starts_with("the push body is not acceptable JSON: "),
                "{bad}: {e}"
            );
        }
        for not_object in [
            r#"[null, null, null, null, null, "t7", null]"#,
            "\"t\"",
            " 5",
        ] {
            let e = id(not_object).unwrap_err();
            assert_eq!(e, "the push body is not a JSON object", "{not_object}");
        }
        // Found by fuzzing: a number out of f64's range is JSON, and is
        // skipped like the rest of what the push says.
        assert_eq!(
            id(r#"{"taskId": "t8", "x": {"y": [37.77e11059, -1e-99999]}}"#).as_deref(),
            Ok("t8")
        );
        let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
        assert!(id(&deep).unwrap_err().contains("nested deeper than 32"));
        assert!(
            parse_push(b"{\"id\": \"\xff\"}", 32)
                .unwrap_err()
                .contains("UTF-8")
        );
    }

    #[test]
    fn tokens_are_read_from_every_header_senders_use() {
        let mut h = HeaderMap::new();
        h.insert("X-A2A-Notification-Token", "a".parse().unwrap());
        assert_eq!(presented_token(&h).as_deref(), Some("a"));
        let mut h = HeaderMap::new();
        h.insert("A2A-Notification-Token", "b".parse().unwrap());
        assert_eq!(presented_token(&h).as_deref(), Some("b"));
        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer c".parse().unwrap());
        assert_eq!(presented_token(&h).as_deref(), Some("c"));
    }
}
