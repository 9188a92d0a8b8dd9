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
    AppState, Shared, Version, base_url, is_json_content_type, parse_json, read_request_body,
    requested_version,
};
use crate::a2a::Error;
use crate::a2a::types::{GetTaskRequest, ListPushConfigsRequest, PushConfigRef, TaskIdRequest};
use crate::a2a::v0_3::{self, Dialect};
use crate::engine::Agent;

/// The JSON-RPC error object for an A2A error (the one mapping for this binding).
pub fn error_body(id: &Value, e: &Error) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": e.code(),
            "message": e.to_string(),
            "data": e.details(),
        }
    })
}

pub(super) fn error_response(id: &Value, e: &Error, challenge: Option<String>) -> Response {
    // JSON-RPC answers with 200 and the error in the body, except where HTTP
    // itself has a word for it: authentication, size, rate, time, unknown agent.
    let status = match e {
        Error::Unauthenticated(_)
        | Error::PayloadTooLarge(_)
        | Error::RateLimited(_)
        | Error::TooManyConnections(..)
        | Error::RequestTimeout(_) => {
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
    if let Some(s) = e.retry_after() {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    resp
}

/// A request's params: the parsed value, or (on the fast path of
/// [`parse_call`]) their text.
enum Params<'a> {
    Value(Value),
    Raw(&'a str),
}

fn params<T: DeserializeOwned>(p: Params<'_>) -> Result<T, Error> {
    // As `from_value_traced`: the error names the field it is about, and
    // the path is tracked only when reading the params again after a failure.
    let parsed = match p {
        Params::Value(v) => crate::a2a::from_value_traced(v),
        Params::Raw(text) => match T::deserialize(&mut serde_json::Deserializer::from_str(text)) {
            Ok(t) => return Ok(t),
            Err(_) => {
                serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text))
            }
        },
    };
    parsed.map_err(|e| Error::InvalidParams(e.to_string()))
}

/// The A2A 1.0 method names.
const V1_METHODS: &[&str] = &[
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
];

/// The A2A 0.3 method names (`tasks/get`, `tasks/cancel` and
/// `tasks/resubscribe` are shared with the pre-0.3 dialect).
const V03_METHODS: &[&str] = &[
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/resubscribe",
    "tasks/pushNotificationConfig/set",
    "tasks/pushNotificationConfig/get",
    "tasks/pushNotificationConfig/list",
    "tasks/pushNotificationConfig/delete",
    "agent/getAuthenticatedExtendedCard",
];

/// Methods only the pre-0.3 dialect has.
const LEGACY_METHODS: &[&str] = &[
    "tasks/send",
    "tasks/sendSubscribe",
    "tasks/pushNotification/set",
    "tasks/pushNotification/get",
];

/// Picks the dialect of a call from its method name and requested version.
///
/// The method name decides, because the generations never share a name with
/// different meanings: a PascalCase method is A2A 1.0 even without an
/// `A2A-Version` header (the spec reads an absent header as 0.3, but 0.3 has
/// no such method, so answering it as 1.0 is the only useful reading), and a
/// slash method is 0.3 (or pre-0.3). A version that contradicts the method
/// is refused as "method not found" with the name to use instead.
fn dialect(method: &str, version: Option<Version>) -> Result<Dialect, Error> {
    if V1_METHODS.contains(&method) {
        return match version {
            Some(Version::V03) => Err(Error::MethodNotFound(format!(
                "`{method}` is an A2A 1.0 method, but the request asks for A2A 0.3; send `A2A-Version: 1.0`"
            ))),
            _ => Ok(Dialect::V1),
        };
    }
    let legacy = LEGACY_METHODS.contains(&method);
    if legacy || V03_METHODS.contains(&method) {
        return match version {
            Some(Version::V1) => Err(Error::MethodNotFound(format!(
                "`{method}` is an A2A 0.3 method, but the request asks for A2A 1.0; use the 1.0 name (e.g. `SendMessage`) or drop the A2A-Version header"
            ))),
            _ if legacy => Ok(Dialect::Legacy),
            _ => Ok(Dialect::V03),
        };
    }
    Err(Error::MethodNotFound(format!(
        "`{method}` is not an A2A method"
    )))
}

/// Maps an A2A 1.0 method name and its params to an operation.
fn to_v1_op(method: &str, p: Params<'_>) -> Result<Op, Error> {
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
        _ => Op::GetExtendedAgentCard,
    })
}

/// Maps a method name and its params to an operation, in `dialect`.
fn to_op(method: &str, p: Value, dialect: Dialect) -> Result<Op, Error> {
    if dialect == Dialect::V1 {
        return to_v1_op(method, Params::Value(p));
    }
    Ok(match method {
        "message/send" | "tasks/send" => Op::SendMessage(v0_3::decode_send_params(&p, dialect)?),
        "message/stream" | "tasks/sendSubscribe" => {
            Op::SendStreamingMessage(v0_3::decode_send_params(&p, dialect)?)
        }
        "tasks/get" | "tasks/cancel" | "tasks/resubscribe" => {
            task_call(method, v0_3::decode_task_query(&p)?)
                .ok_or_else(|| Error::MethodNotFound(method.to_owned()))?
        }
        "tasks/pushNotificationConfig/set" | "tasks/pushNotification/set" => {
            Op::CreatePushConfig(v0_3::decode_push_config(&p)?)
        }
        "tasks/pushNotificationConfig/get" | "tasks/pushNotification/get" => {
            let (task_id, id) = v0_3::decode_push_config_ref(&p, false)?;
            Op::GetPushConfig(PushConfigRef {
                tenant: None,
                task_id,
                id,
            })
        }
        "tasks/pushNotificationConfig/list" => Op::ListPushConfigs(ListPushConfigsRequest {
            tenant: None,
            task_id: v0_3::decode_task_query(&p)?.0,
            page_size: None,
            page_token: None,
        }),
        "tasks/pushNotificationConfig/delete" => {
            let (task_id, id) = v0_3::decode_push_config_ref(&p, true)?;
            Op::DeletePushConfig(PushConfigRef {
                tenant: None,
                task_id,
                id,
            })
        }
        _ => Op::GetExtendedAgentCard,
    })
}

/// `POST /a2a/{agent}`: an agent of the default tenant.
pub async fn handle(
    State(state): State<Shared>,
    Path(agent_id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    serve(state, None, &agent_id, method, uri, headers, body).await
}

/// A JSON-RPC request to the agent `agent_id` of `tenant` (`None`: the
/// default tenant; `POST /a2a/{tenant}/{agent}` otherwise).
pub(super) async fn serve(
    state: Shared,
    tenant: Option<&str>,
    agent_id: &str,
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
    let agent = match super::find_agent(&state, tenant, agent_id) {
        Ok(a) => a,
        Err(e) => return error_response(&Value::Null, &e, None),
    };
    let access = state.access.for_tenant(agent.tenant());
    let owner = match access.authenticate(&headers) {
        Ok(o) => o,
        Err(e) => return error_response(&Value::Null, &e, Some(access.challenge())),
    };
    let bytes = match read_request_body(&state, body, None).await {
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
    let version = match requested_version(&headers, &uri) {
        Ok(v) => v,
        // A bad body is reported first; a bad version under the body's id.
        Err(e) => {
            return match parse_envelope(&bytes, state.config.limits.max_json_depth) {
                Ok((id, _, _)) => error_response(&id, &e, None),
                Err((id, bad_body)) => error_response(&id, &bad_body, None),
            };
        }
    };
    let (id, dialect, op) = match parse_call(&bytes, state.config.limits.max_json_depth, version) {
        Ok(x) => x,
        Err((id, e)) => return error_response(&id, &e, None),
    };
    let base = base_url(&state, &headers);
    respond(&state, &agent, &owner, op, &base, id, dialect).await
}

/// Parses a request body into (id, dialect, operation), or the error with
/// the id to answer it under: [`parse_envelope`] then [`to_call`], with the
/// same result for every input. Pure, so it can be fuzzed.
///
/// An A2A 1.0 request whose envelope is plain (`"jsonrpc": "2.0"`, a string
/// or number id, an unescaped method, params an object, no key twice) takes
/// a fast path: its params are read straight into their typed form, not
/// into a generic value first (which cost as much as the typed read again:
/// a map per object). So do a 0.3 client's sends and task reads in the form
/// 0.3 clients write them ([`fast_v03_op`]). Anything else, errors included,
/// takes the general path, so messages and the handling of odd input stay
/// as they are.
pub fn parse_call(
    bytes: &[u8],
    max_depth: usize,
    version: Option<Version>,
) -> Result<(Value, Dialect, Op), (Value, Error)> {
    let text = super::checked_text(bytes, max_depth).map_err(|e| (Value::Null, e))?;
    if !escapes_a_surrogate(text)
        && let Some(call) = fast_call(text, version)
    {
        return Ok(call);
    }
    let req = super::parse_text(text).map_err(|e| (Value::Null, e))?;
    let (id, method, p) = envelope(req)?;
    match to_call(&method, p, version) {
        Ok((dialect, op)) => Ok((id, dialect, op)),
        Err(e) => Err((id, e)),
    }
}

/// Whether the text may hold a `\uD800`–`\uDFFF` escape (a `\\` before the
/// `u` counts too: such text only loses the fast path). serde_json checks
/// that a surrogate escape is paired when it reads a string, but not when
/// it skips one, so the fast path, which skips unknown fields, took a lone
/// surrogate there that the general path refuses (found by fuzzing).
fn escapes_a_surrogate(text: &str) -> bool {
    text.match_indices("\\u").any(|(i, _)| {
        let hex = text.as_bytes().get(i + 2..i + 4);
        matches!(
            hex,
            Some([b'd' | b'D', b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F'])
        )
    })
}

/// The fast path of [`parse_call`], for text that has passed
/// [`super::checked_text`]; `None` sends the request down the general path.
fn fast_call(text: &str, version: Option<Version>) -> Option<(Value, Dialect, Op)> {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        jsonrpc: &'a str,
        #[serde(default)]
        id: Option<Value>,
        method: &'a str,
        #[serde(borrow)]
        params: &'a serde_json::value::RawValue,
    }
    let env: Envelope<'_> = serde_json::from_str(text).ok()?;
    let id = match env.id {
        None => Value::Null,
        Some(id @ (Value::String(_) | Value::Number(_))) => id,
        Some(_) => return None,
    };
    let raw = env.params.get();
    if env.jsonrpc != "2.0" || !raw.starts_with('{') {
        return None;
    }
    let d = dialect(env.method, version).ok()?;
    let op = match d {
        Dialect::V1 => to_v1_op(env.method, Params::Raw(raw)).ok()?,
        Dialect::V03 => fast_v03_op(env.method, raw)?,
        Dialect::Legacy => return None,
    };
    Some((id, d, op))
}

/// The 0.3 calls clients make most, read by [`v0_3::fast_send_params`] and
/// [`v0_3::fast_task_query`]; `None` for any other call or text.
fn fast_v03_op(method: &str, raw: &str) -> Option<Op> {
    Some(match method {
        "message/send" => Op::SendMessage(v0_3::fast_send_params(raw)?),
        "message/stream" => Op::SendStreamingMessage(v0_3::fast_send_params(raw)?),
        "tasks/get" | "tasks/cancel" | "tasks/resubscribe" => {
            return task_call(method, v0_3::fast_task_query(raw)?);
        }
        _ => return None,
    })
}

/// A 0.3 task call (`tasks/get`, `tasks/cancel`, `tasks/resubscribe`) from
/// its params' `id` and `historyLength`, for both paths of [`parse_call`];
/// `None` for any other method.
fn task_call(method: &str, (id, history_length): (String, Option<i32>)) -> Option<Op> {
    let request = |id| TaskIdRequest {
        tenant: None,
        id,
        metadata: None,
    };
    Some(match method {
        "tasks/get" => Op::GetTask(GetTaskRequest {
            tenant: None,
            id,
            history_length,
        }),
        "tasks/cancel" => Op::CancelTask(request(id)),
        "tasks/resubscribe" => Op::SubscribeToTask(request(id)),
        _ => return None,
    })
}

/// Parses a request body and checks its JSON-RPC envelope: returns (id,
/// method, params), or the error with the id to answer it under. Pure (no
/// HTTP, no store), so it can be fuzzed.
pub fn parse_envelope(
    bytes: &[u8],
    max_depth: usize,
) -> Result<(Value, String, Value), (Value, Error)> {
    let req = parse_json(bytes, max_depth).map_err(|e| (Value::Null, e))?;
    envelope(req)
}

/// Picks the dialect of a call from its method and the requested version,
/// and translates its params into an operation. Pure, like [`parse_envelope`].
pub fn to_call(
    method: &str,
    params: Value,
    version: Option<Version>,
) -> Result<(Dialect, Op), Error> {
    let d = dialect(method, version)?;
    Ok((d, to_op(method, params, d)?))
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
        // Without an id JSON-RPC would call this a notification and answer
        // nothing; A2A has no notifications, and callers are better served by
        // an answer (with a null id) than by silence.
        Some(Value::Null) | None => Value::Null,
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
    dialect: Dialect,
) -> Response {
    let streaming = matches!(op, Op::SendStreamingMessage(_) | Op::SubscribeToTask(_));
    let outcome = match ops::execute(state, agent, owner, op, base, dialect).await {
        Ok(o) => o,
        Err(e) => {
            // A 0.3 client that asked for a stream of an unknown task gets
            // the error as the stream's one event (what 0.3 clients and the 0.3
            // conformance kit read); 1.0 callers get a plain JSON error.
            if streaming && dialect != Dialect::V1 && matches!(e, Error::TaskNotFound(_)) {
                let data = error_body(&id, &e).to_string();
                let one = futures::stream::once(async move {
                    Ok::<_, std::convert::Infallible>(SseEvent::default().data(data))
                });
                return Sse::new(one).into_response();
            }
            return error_response(&id, &e, None);
        }
    };
    if let Outcome::Stream(events) = outcome {
        let stream = events.map(move |item| {
            let data = item
                .to_json(dialect, Some(&id))
                .unwrap_or_else(|e| error_body(&id, &e).to_string());
            Ok::<_, std::convert::Infallible>(SseEvent::default().data(data))
        });
        return Sse::new(stream)
            .keep_alive(KeepAlive::default())
            .into_response();
    }
    let text = match dialect {
        Dialect::V1 => outcome.to_v1_json(Some(&id)),
        old => outcome.to_old_json(old, Some(&id)),
    };
    match text {
        Ok(text) => super::json_text_ok(text),
        Err(e) => error_response(&id, &e, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The general path alone: what [`parse_call`] must answer.
    fn general(bytes: &[u8], version: Option<Version>) -> String {
        let call = parse_envelope(bytes, 32).and_then(|(id, method, p)| {
            to_call(&method, p, version)
                .map(|(d, op)| (id.clone(), d, op))
                .map_err(|e| (id, e))
        });
        format!("{call:?}")
    }

    const SEND: &str = r#"{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hi \u00e9\n"},{"data":{"a":[1,2.5,null]}}],"metadata":{"k":"v"}},"configuration":{"historyLength":3,"returnImmediately":true}}}"#;

    /// Plain 1.0 requests and a 0.3 client's plain sends and task reads
    /// take the fast path, and every request gets the general path's
    /// answer, whichever path it takes.
    #[test]
    fn the_fast_path_answers_as_the_general_one() {
        let fast = [
            SEND,
            r#"{"jsonrpc":"2.0","id":"x","method":"GetTask","params":{"id":"t","historyLength":2}}"#,
            r#"{"method":"ListTasks","params":{},"jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"CancelTask","params":{"id":"t"},"extra":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{}}"#,
            // A 0.3 client's sends and task reads.
            r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"x"},{"kind":"data","data":{"a":1},"metadata":{"mediaType":"application/json"}}]},"configuration":{"blocking":false,"historyLength":1}}}"#,
            r#"{"jsonrpc":"2.0","id":"s","method":"message/stream","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}],"contextId":"c"},"metadata":{"k":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"a","historyLength":0}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":"a"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/resubscribe","params":{"id":"a"}}"#,
        ];
        let general_only = [
            // Params missing, null or not an object.
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}"#,
            // A key twice: the general path keeps the last.
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a","id":"b"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"GetTask","params":{"id":"a"}}"#,
            // Escapes in the envelope's strings.
            r#"{"jsonrpc":"2\u002e0","id":1,"method":"Get\u0054ask","params":{"id":"a"}}"#,
            // Bad envelopes, bad params, other dialects.
            r#"{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{"id":"a"}}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"GetTask","params":{"id":"a"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":5}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"parts":"no"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"Nope","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"message":{"messageId":"m","role":"user","parts":[{"type":"text","text":"x"}]}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":""}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":" "}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":" \t","role":"user","parts":[{"kind":"text","text":"x"}]}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/list","params":{"id":"a"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"file","file":{"uri":"http://x/f"}}]}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"text":"x"}]}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]},"configuration":{"pushNotificationConfig":{"url":"http://127.0.0.1:1/h"}}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m","role":"system","parts":[{"kind":"text","text":"x"}]}}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a"}}]"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a"}} x"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}"#,
        ];
        for version in [None, Some(Version::V1), Some(Version::V03)] {
            for body in fast.iter().chain(&general_only) {
                let got = format!("{:?}", parse_call(body.as_bytes(), 32, version));
                assert_eq!(
                    got,
                    general(body.as_bytes(), version),
                    "{body} ({version:?})"
                );
            }
            for body in general_only {
                assert!(
                    fast_call(body, version).is_none(),
                    "took the fast path: {body}"
                );
            }
        }
        for body in fast {
            assert!(
                fast_call(body, None).is_some(),
                "missed the fast path: {body}"
            );
        }
        // A 0.3 call under `A2A-Version: 1.0` is refused the general way.
        assert!(fast_call(fast[5], Some(Version::V1)).is_none());
        // The one known difference (found by fuzzing): a number beyond
        // f64's range in an unknown field. The fast path skips the field, as
        // it skips any unknown field; the general path cannot hold the
        // number as a JSON value and refuses the body. In a field that is
        // read, both refuse it.
        let huge = r#"{"jsonrpc":"2.0","id":3,"method":"ListTasks","params":{"x":5E666}}"#;
        assert!(matches!(
            parse_call(huge.as_bytes(), 32, None),
            Ok((_, Dialect::V1, Op::ListTasks(_)))
        ));
        assert!(general(huge.as_bytes(), None).contains("number out of range"));
        let read = r#"{"jsonrpc":"2.0","id":3,"method":"ListTasks","params":{"pageSize":5E666}}"#;
        assert_eq!(
            format!("{:?}", parse_call(read.as_bytes(), 32, None)),
            general(read.as_bytes(), None)
        );
        // A lone surrogate escape in a field the fast path would skip
        // (found by fuzzing): refused as the general path refuses it. A
        // pair in the same place is taken by both.
        for (body, refused) in [
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"a","x":"\udacb"}}"#,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"a","x":"\uD83D\uDE00"}}"#,
                false,
            ),
        ] {
            let got = format!("{:?}", parse_call(body.as_bytes(), 32, None));
            assert_eq!(got, general(body.as_bytes(), None), "{body}");
            assert_eq!(got.starts_with("Err("), refused, "{got}");
        }
        assert!(escapes_a_surrogate(r#"{"a":"\udacb"}"#));
        assert!(!escapes_a_surrogate(r#"{"a":"\u00e9 \u0064"}"#));
        let bad_utf8 =
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"\xff\"}}";
        assert_eq!(
            format!("{:?}", parse_call(bad_utf8, 32, None)),
            general(bad_utf8, None)
        );
    }
}
