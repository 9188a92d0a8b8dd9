//! The A2A 0.3 HTTP+JSON binding: `/a2a/{agent}/v1/...`, in the JSON form
//! of the 0.3 protobuf (`a2a::v0_3_rest`). Operations are the same as for
//! every other binding (`ops::execute`); errors use the same
//! `google.rpc.Status` body as the 1.0 routes.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Uri, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};

use super::ops::{self, Op, Outcome};
use super::rest::{
    Route, error_event, error_response, from, json_body, method_not_allowed, query_object, route,
    takes_body, with,
};
use super::{AppState, base_url, requested_version};
use crate::a2a::Error;
use crate::a2a::types::{PushConfigRef, TaskIdRequest};
use crate::a2a::v0_3::Dialect;
use crate::a2a::v0_3_rest as wire;
use crate::engine::Agent;

/// Serves one `/v1/...` request; `rest` is the path after `v1/`.
pub async fn handle(
    state: &Arc<AppState>,
    agent: &Arc<Agent>,
    rest: &str,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Body,
) -> Response {
    let access = state.access.for_tenant(agent.tenant());
    let owner = match access.authenticate(headers) {
        Ok(o) => o,
        Err(e) => {
            let mut resp = error_response(&e, false);
            if let Ok(v) = HeaderValue::from_str(&access.challenge()) {
                resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
            }
            return resp;
        }
    };
    if let Err(e) = requested_version(headers, uri) {
        return error_response(&e, false);
    }
    let parsed = if rest.trim_end_matches('/') == "card" {
        Some(Route::ExtendedCard)
    } else {
        route(rest)
    };
    let Some(route) = parsed.filter(|r| !matches!(r, Route::Card | Route::LegacyCard)) else {
        return error_response(
            &Error::NotFound(format!("no A2A 0.3 route `{}`", uri.path())),
            false,
        );
    };
    let allowed = route.allowed();
    let (op, proto_names) = match to_op(state, route, method, uri, headers, body).await {
        Ok(x) => x,
        Err(e) if e == Error::MethodNotFound(String::new()) => {
            return method_not_allowed(method, uri, allowed, false);
        }
        Err(e) => return error_response(&e, false),
    };
    let base = base_url(state, headers);
    let outcome = match ops::execute(state, agent, &owner, op, &base, Dialect::V03).await {
        Ok(o) => o,
        Err(e) => return error_response(&e, false),
    };
    let names = if proto_names {
        wire::Names::Proto
    } else {
        wire::Names::Json
    };
    // Tasks, messages and events are written straight from their types;
    // the colder answers are built as values and renamed.
    let text = match outcome {
        Outcome::Stream(events) => {
            let stream = events.map(move |item| {
                let data = ops::json_text(None, &wire::RestEvent(&item.event, item.last, names))
                    .unwrap_or_else(|e| error_event(&e));
                Ok::<_, std::convert::Infallible>(SseEvent::default().data(data))
            });
            return Sse::new(stream)
                .keep_alive(KeepAlive::default())
                .into_response();
        }
        Outcome::Sent(r) => ops::json_text(None, &wire::Rest(&r, names)),
        Outcome::SentStored(t) => match t.parse() {
            Ok(t) => ops::json_text(
                None,
                &wire::Rest(&crate::a2a::types::SendMessageResponse::Task(t), names),
            ),
            Err(e) => Err(e.into()),
        },
        Outcome::Task(t, _) => ops::json_text(None, &wire::Rest(&t, names)),
        Outcome::StoredTask(t, _) => match t.parse() {
            Ok(t) => ops::json_text(None, &wire::Rest(&t, names)),
            Err(e) => Err(e.into()),
        },
        Outcome::Tasks(l) => {
            ops::json_text(None, &wire::RestTasks(&l.tasks, &l.next_page_token, names))
        }
        Outcome::PushConfig(c) => Ok(styled(wire::encode_push_config(&c), proto_names).to_string()),
        Outcome::PushConfigs(l) => Ok(styled(
            json!({
                "configs": l.configs.iter().map(wire::encode_push_config).collect::<Vec<_>>(),
                "nextPageToken": l.next_page_token,
            }),
            proto_names,
        )
        .to_string()),
        Outcome::Deleted => Ok("{}".to_owned()),
        Outcome::Card(c) => Ok(styled(super::card::v0_3_card(&c), proto_names).to_string()),
    };
    match text {
        Ok(text) => super::json_text_ok(text),
        Err(e) => error_response(&e, false),
    }
}

/// Whether a request spells fields by their proto names (`message_id`)
/// rather than their JSON names (`messageId`). ProtoJSON allows both; we
/// answer in the caller's spelling, since some 0.3 clients read only one.
fn uses_proto_names(v: &Value) -> bool {
    match v {
        Value::Object(m) => {
            m.contains_key("request")
                || m.keys().any(|k| k.contains('_'))
                || ["message", "configuration"]
                    .iter()
                    .any(|k| m.get(*k).is_some_and(uses_proto_names))
        }
        _ => false,
    }
}

/// Renames JSON names to proto names (`contextId` → `context_id`) when the
/// caller used them, leaving the contents of `metadata` and data parts alone.
fn styled(v: Value, proto_names: bool) -> Value {
    if proto_names { to_proto_names(v) } else { v }
}

fn to_proto_names(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("metadata", v) => v,
                        // A DataPart: `{"data": {"data": <caller's JSON>}}`.
                        ("data", Value::Object(inner))
                            if inner.len() == 1 && inner.contains_key("data") =>
                        {
                            Value::Object(inner)
                        }
                        (_, v) => to_proto_names(v),
                    };
                    (wire::proto_name(&k), v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(to_proto_names).collect()),
        other => other,
    }
}

fn empty() -> Value {
    Value::Object(Default::default())
}

async fn to_op(
    state: &Arc<AppState>,
    route: Route,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Op, bool), Error> {
    let body = if takes_body(&route, method) {
        json_body(state, headers, body).await?
    } else {
        empty()
    };
    build_op(route, method, uri, body)
}

/// The operation for a 0.3 route (the path after `v1/`, parsed by
/// [`super::rest::route`]), method, query and decoded body, and whether the
/// caller spells fields by their proto names. Pure (no HTTP, no store), so it
/// can be fuzzed. A method the route does not take comes back as
/// `MethodNotFound("")`.
pub fn build_op(
    route: Route,
    method: &Method,
    uri: &Uri,
    body: Value,
) -> Result<(Op, bool), Error> {
    let id_req = |id: String| TaskIdRequest {
        tenant: None,
        id,
        metadata: None,
    };
    let query_proto_names = uri.query().is_some_and(|q| {
        q.split('&')
            .any(|kv| kv.split('=').next().is_some_and(|k| k.contains('_')))
    });
    let op = match (route, method.clone()) {
        (route @ (Route::Send | Route::Stream), Method::POST) => {
            let req = wire::decode_send(&body)?;
            let op = if route == Route::Stream {
                Op::SendStreamingMessage(req)
            } else {
                Op::SendMessage(req)
            };
            return Ok((op, uses_proto_names(&body)));
        }
        (Route::ListTasks, Method::GET) => Op::ListTasks(from(query_object(uri)?)?),
        (Route::Task(id), Method::GET) => Op::GetTask(from(with(query_object(uri)?, "id", &id))?),
        // The body, if any, only repeats the name (`{"name": "tasks/…"}`).
        (Route::Cancel(id), Method::POST) => Op::CancelTask(id_req(id)),
        (Route::Subscribe(id), Method::GET | Method::POST) => Op::SubscribeToTask(id_req(id)),
        (Route::PushConfigs(id), Method::POST) => {
            Op::CreatePushConfig(wire::decode_push_config(&body, &id)?)
        }
        (Route::PushConfigs(id), Method::GET) => {
            Op::ListPushConfigs(from(with(query_object(uri)?, "taskId", &id))?)
        }
        (Route::PushConfig(task_id, id), Method::GET) => Op::GetPushConfig(from::<PushConfigRef>(
            with(with(empty(), "taskId", &task_id), "id", &id),
        )?),
        (Route::PushConfig(task_id, id), Method::DELETE) => {
            Op::DeletePushConfig(from::<PushConfigRef>(with(
                with(empty(), "taskId", &task_id),
                "id",
                &id,
            ))?)
        }
        (Route::ExtendedCard, Method::GET) => Op::GetExtendedAgentCard,
        _ => return Err(Error::MethodNotFound(String::new())),
    };
    Ok((op, query_proto_names))
}
