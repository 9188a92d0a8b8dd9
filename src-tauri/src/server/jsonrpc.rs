//! The JSON-RPC 2.0 binding: `POST /a2a/{agent}` (with or without a trailing
//! slash). Errors are JSON-RPC error objects with `ErrorInfo` details;
//! streams are SSE whose `data:` lines are JSON-RPC responses.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::ops::{self, Op, Outcome};
use super::{
    AppState, Shared, base_url, check_version, is_json_content_type, parse_json, read_body,
};
use crate::a2a::Error;
use crate::engine::Agent;

/// The JSON-RPC error object for an A2A error (the one mapping for this binding).
pub fn error_body(id: &Value, e: &Error) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": e.code(),
            "message": e.to_string(),
            "data": [e.error_info()],
        }
    })
}

fn error_response(id: &Value, e: &Error, challenge: Option<String>) -> Response {
    // JSON-RPC answers with 200 and the error in the body, except where HTTP
    // itself has a word for it: authentication, size, unknown agent.
    let status = match e {
        Error::Unauthenticated(_) | Error::PayloadTooLarge(_) => {
            StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::BAD_REQUEST)
        }
        Error::NotFound(_) => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    };
    let mut resp = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        error_body(id, e).to_string(),
    )
        .into_response();
    if let (Some(c), Error::Unauthenticated(_)) = (challenge, e)
        && let Ok(v) = HeaderValue::from_str(&c)
    {
        resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    resp
}

fn params<T: DeserializeOwned>(p: Value) -> Result<T, Error> {
    // The error names the field it is about: `message.parts: invalid type…`.
    serde_path_to_error::deserialize(p).map_err(|e| Error::InvalidParams(e.to_string()))
}

/// Maps a method name and its params to an operation.
fn to_op(method: &str, p: Value) -> Result<Op, Error> {
    Ok(match method {
        "SendMessage" => Op::SendMessage(params(p)?),
        "SendStreamingMessage" => Op::SendStreamingMessage(params(p)?),
        "GetTask" => Op::GetTask(params(p)?),
        "ListTasks" => Op::ListTasks(params(p)?),
        "CancelTask" => Op::CancelTask(params(p)?),
        "SubscribeToTask" => Op::SubscribeToTask(params(p)?),
        "CreateTaskPushNotificationConfig" => Op::CreatePushConfig(params(p)?),
        "GetTaskPushNotificationConfig" => Op::GetPushConfig(params(p)?),
        "ListTaskPushNotificationConfigs" => Op::ListPushConfigs(params(p)?),
        "DeleteTaskPushNotificationConfig" => Op::DeletePushConfig(params(p)?),
        "GetExtendedAgentCard" => Op::GetExtendedAgentCard,
        other => {
            return Err(Error::MethodNotFound(format!(
                "`{other}` is not an A2A 1.0 method"
            )));
        }
    })
}

/// `POST /a2a/{agent}`.
pub async fn handle(
    State(state): State<Shared>,
    Path(agent_id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if method != Method::POST {
        let e = Error::InvalidRequest(format!("JSON-RPC requests are POSTed; got {method}"));
        let mut resp = error_response(&Value::Null, &e, None);
        *resp.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        resp.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return resp;
    }
    let Some(agent) = state.engine.agent(&agent_id).cloned() else {
        return error_response(
            &Value::Null,
            &Error::NotFound(format!("no agent `{agent_id}` is served here")),
            None,
        );
    };
    let owner = match state.access.authenticate(&headers) {
        Ok(o) => o,
        Err(e) => return error_response(&Value::Null, &e, Some(state.access.challenge())),
    };
    let bytes = match read_body(body, state.config.limits.max_body_bytes).await {
        Ok(b) => b,
        Err(e) => return error_response(&Value::Null, &e, None),
    };
    if !is_json_content_type(&headers) {
        let got = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none");
        return error_response(
            &Value::Null,
            &Error::UnsupportedMediaType(format!(
                "JSON-RPC requests must be application/json, got `{got}`"
            )),
            None,
        );
    }
    let req = match parse_json(&bytes, state.config.limits.max_json_depth) {
        Ok(v) => v,
        Err(e) => return error_response(&Value::Null, &e, None),
    };
    let (id, method, p) = match envelope(req) {
        Ok(x) => x,
        Err((id, e)) => return error_response(&id, &e, None),
    };
    if let Err(e) = check_version(&headers, &uri) {
        return error_response(&id, &e, None);
    }
    let op = match to_op(&method, p) {
        Ok(op) => op,
        Err(e) => return error_response(&id, &e, None),
    };
    let base = base_url(&state, &headers);
    respond(&state, &agent, &owner, op, &base, id).await
}

/// Checks the JSON-RPC envelope: returns (id, method, params).
fn envelope(req: Value) -> Result<(Value, String, Value), (Value, Error)> {
    let Value::Object(mut obj) = req else {
        let what = if req.is_array() {
            "batch requests are not supported"
        } else {
            "the request must be a JSON object"
        };
        return Err((Value::Null, Error::InvalidRequest(what.into())));
    };
    let id = match obj.remove("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id,
        Some(Value::Null) | None => {
            return Err((
                Value::Null,
                Error::InvalidRequest(
                    "`id` must be a string or number; notifications are not supported".into(),
                ),
            ));
        }
        Some(_) => {
            return Err((
                Value::Null,
                Error::InvalidRequest("`id` must be a string or number".into()),
            ));
        }
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((
            id,
            Error::InvalidRequest("`jsonrpc` must be \"2.0\"".into()),
        ));
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        _ => {
            return Err((
                id,
                Error::InvalidRequest("`method` must be a string".into()),
            ));
        }
    };
    let p = match obj.remove("params") {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(p @ Value::Object(_)) => p,
        Some(_) => {
            return Err((
                id,
                Error::InvalidParams("`params` must be an object".into()),
            ));
        }
    };
    Ok((id, method, p))
}

async fn respond(
    state: &Arc<AppState>,
    agent: &Arc<Agent>,
    owner: &str,
    op: Op,
    base: &str,
    id: Value,
) -> Response {
    match ops::execute(state, agent, owner, op, base).await {
        Ok(Outcome::Json(result)) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
        )
            .into_response(),
        Ok(Outcome::Stream(events)) => {
            let stream = events.map(move |ev| {
                let data = json!({"jsonrpc": "2.0", "id": id, "result": ev}).to_string();
                Ok::<_, std::convert::Infallible>(SseEvent::default().data(data))
            });
            Sse::new(stream)
                .keep_alive(KeepAlive::default())
                .into_response()
        }
        Err(e) => error_response(&id, &e, None),
    }
}
