//! Each client operation on the wire of each endpoint (binding × dialect):
//! the HTTP request it becomes, and how its answer turns back into the
//! internal v1.0 types. Pure functions; [`super::A2aClient`] does the I/O.

use std::sync::atomic::{AtomicU64, Ordering};

use reqwest::Method;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use url::Url;

use super::{Binding, ClientError, Endpoint, error};
use crate::a2a::types::{
    SendMessageRequest, SendMessageResponse, StreamResponse, Task, TaskPushNotificationConfig,
};
use crate::a2a::{v0_3, v0_3::Dialect, v0_3_rest};

/// One call to a peer, independent of how it travels.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Operation<'a> {
    Send(&'a SendMessageRequest),
    Stream(&'a SendMessageRequest),
    GetTask {
        id: &'a str,
        history_length: Option<i32>,
    },
    Cancel {
        id: &'a str,
    },
    CreatePushConfig {
        task_id: &'a str,
        config: &'a TaskPushNotificationConfig,
    },
    Subscribe {
        id: &'a str,
    },
    /// ListTasks (1.0 only): one page of the tasks whose status changed at
    /// or after `since` (RFC 3339), newest first.
    ListTasks {
        since: Option<&'a str>,
        page_size: i32,
        page_token: Option<&'a str>,
    },
}

impl Operation<'_> {
    /// Whether the answer is an event stream.
    pub(crate) fn streams(&self) -> bool {
        matches!(self, Operation::Stream(_) | Operation::Subscribe { .. })
    }

    /// The JSON-RPC method name in `dialect`.
    fn method(&self, dialect: Dialect) -> &'static str {
        let v1 = dialect == Dialect::V1;
        match self {
            Operation::Send(_) if v1 => "SendMessage",
            Operation::Send(_) => "message/send",
            Operation::Stream(_) if v1 => "SendStreamingMessage",
            Operation::Stream(_) => "message/stream",
            Operation::GetTask { .. } if v1 => "GetTask",
            Operation::GetTask { .. } => "tasks/get",
            Operation::Cancel { .. } if v1 => "CancelTask",
            Operation::Cancel { .. } => "tasks/cancel",
            Operation::CreatePushConfig { .. } if v1 => "CreateTaskPushNotificationConfig",
            Operation::CreatePushConfig { .. } => "tasks/pushNotificationConfig/set",
            Operation::Subscribe { .. } if v1 => "SubscribeToTask",
            Operation::Subscribe { .. } => "tasks/resubscribe",
            // 0.3 lists tasks over gRPC and HTTP+JSON only; `build` refuses.
            Operation::ListTasks { .. } => "ListTasks",
        }
    }
}

/// An HTTP request ready to send.
#[derive(Debug, Clone)]
pub(crate) struct HttpCall {
    pub method: Method,
    pub url: Url,
    pub body: Option<Value>,
    /// Send `A2A-Version: 1.0` (every 1.0 request; 0.3 peers get none).
    pub v1: bool,
    /// The JSON-RPC id the answer must echo.
    pub rpc_id: Option<Value>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The request `op` becomes on `ep`.
pub(crate) fn build(op: &Operation, ep: &Endpoint) -> Result<HttpCall, ClientError> {
    if !matches!(ep.dialect, Dialect::V1 | Dialect::V03) {
        return Err(ClientError::Unsupported(
            "the pre-0.3 dialect (`tasks/send`) is not spoken to peers; use an A2A 1.0 or 0.3 endpoint"
                .into(),
        ));
    }
    if matches!(op, Operation::ListTasks { .. }) && ep.dialect != Dialect::V1 {
        return Err(ClientError::Unsupported(
            "an A2A 0.3 endpoint cannot be asked to list its tasks".into(),
        ));
    }
    let url = ep.url.clone();
    let v1 = ep.dialect == Dialect::V1;
    match ep.binding {
        Binding::JsonRpc => {
            let id = json!(format!(
                "countersign-{}",
                NEXT_ID.fetch_add(1, Ordering::Relaxed)
            ));
            let params = if v1 {
                v1_params(op, ep.tenant.as_deref())?
            } else {
                v0_3_params(op)
            };
            Ok(HttpCall {
                method: Method::POST,
                url,
                body: Some(
                    json!({"jsonrpc": "2.0", "id": id, "method": op.method(ep.dialect), "params": params}),
                ),
                v1,
                rpc_id: Some(id),
            })
        }
        Binding::HttpJson => rest_call(op, ep, url),
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<Value, ClientError> {
    serde_json::to_value(v).map_err(|e| ClientError::Protocol(format!("cannot encode: {e}")))
}

fn with_tenant(mut v: Value, tenant: Option<&str>) -> Value {
    if let (Value::Object(m), Some(t)) = (&mut v, tenant) {
        m.insert("tenant".into(), json!(t));
    }
    v
}

fn v1_params(op: &Operation, tenant: Option<&str>) -> Result<Value, ClientError> {
    let v = match op {
        Operation::Send(req) | Operation::Stream(req) => to_json(req)?,
        Operation::GetTask { id, history_length } => {
            let mut m = Map::new();
            m.insert("id".into(), json!(id));
            if let Some(n) = history_length {
                m.insert("historyLength".into(), json!(n));
            }
            Value::Object(m)
        }
        Operation::Cancel { id } | Operation::Subscribe { id } => json!({ "id": id }),
        Operation::CreatePushConfig { task_id, config } => {
            let mut v = to_json(config)?;
            v["taskId"] = json!(task_id);
            v
        }
        Operation::ListTasks {
            since,
            page_size,
            page_token,
        } => {
            let mut m = Map::new();
            m.insert("pageSize".into(), json!(page_size));
            if let Some(s) = since {
                m.insert("statusTimestampAfter".into(), json!(s));
            }
            if let Some(t) = page_token {
                m.insert("pageToken".into(), json!(t));
            }
            Value::Object(m)
        }
    };
    Ok(with_tenant(v, tenant))
}

fn v0_3_params(op: &Operation) -> Value {
    match op {
        Operation::Send(req) | Operation::Stream(req) => v0_3::encode_send_params(req),
        Operation::GetTask { id, history_length } => match history_length {
            Some(n) => json!({"id": id, "historyLength": n}),
            None => json!({ "id": id }),
        },
        Operation::Cancel { id } | Operation::Subscribe { id } => json!({ "id": id }),
        Operation::CreatePushConfig { task_id, config } => {
            let mut c = (*config).clone();
            c.task_id = Some((*task_id).to_owned());
            v0_3::encode_push_config(&c)
        }
        Operation::ListTasks { .. } => json!({}),
    }
}

/// The HTTP+JSON request: 1.0 routes under the interface URL (after the
/// tenant, if any), 0.3 routes under `{url}/v1`.
fn rest_call(op: &Operation, ep: &Endpoint, mut url: Url) -> Result<HttpCall, ClientError> {
    let v1 = ep.dialect == Dialect::V1;
    let tenant = if v1 { ep.tenant.as_deref() } else { None };
    let (method, tail, body): (Method, Vec<String>, Option<Value>) = match op {
        Operation::Send(req) | Operation::Stream(req) => {
            let body = if v1 {
                with_tenant(to_json(req)?, tenant)
            } else {
                v0_3_rest::encode_send(req)
            };
            let path = if op.streams() {
                "message:stream"
            } else {
                "message:send"
            };
            (Method::POST, vec![path.into()], Some(body))
        }
        Operation::GetTask { id, .. } => (Method::GET, vec!["tasks".into(), (*id).into()], None),
        Operation::Cancel { id } => {
            let body = if v1 {
                with_tenant(json!({ "id": id }), tenant)
            } else {
                json!({ "name": format!("tasks/{id}") })
            };
            (
                Method::POST,
                vec!["tasks".into(), format!("{id}:cancel")],
                Some(body),
            )
        }
        Operation::CreatePushConfig { task_id, config } => {
            let mut c = (*config).clone();
            c.task_id = Some((*task_id).to_owned());
            let body = if v1 {
                with_tenant(to_json(&c)?, tenant)
            } else {
                v0_3_rest::encode_push_config(&c)
            };
            (
                Method::POST,
                vec![
                    "tasks".into(),
                    (*task_id).into(),
                    "pushNotificationConfigs".into(),
                ],
                Some(body),
            )
        }
        // GET: the proto's HTTP rule in both generations (and the only verb
        // 0.3 servers take); see `subscribe_fallback` for POST-only peers.
        Operation::Subscribe { id } => (
            Method::GET,
            vec!["tasks".into(), format!("{id}:subscribe")],
            None,
        ),
        Operation::ListTasks { .. } => (Method::GET, vec!["tasks".into()], None),
    };
    {
        let mut segs = url
            .path_segments_mut()
            .map_err(|_| ClientError::InvalidUrl {
                url: ep.url.to_string(),
                reason: "it cannot have a path".into(),
            })?;
        segs.pop_if_empty();
        if !v1 {
            segs.push("v1");
        }
        if let Some(t) = tenant {
            segs.push(t);
        }
        segs.extend(tail.iter());
    }
    if let Operation::GetTask {
        history_length: Some(n),
        ..
    } = op
    {
        url.query_pairs_mut()
            .append_pair("historyLength", &n.to_string());
    }
    if let Operation::ListTasks {
        since,
        page_size,
        page_token,
    } = op
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("pageSize", &page_size.to_string());
        if let Some(s) = since {
            q.append_pair("statusTimestampAfter", s);
        }
        if let Some(t) = page_token {
            q.append_pair("pageToken", t);
        }
    }
    Ok(HttpCall {
        method,
        url,
        body,
        v1,
        rpc_id: None,
    })
}

/// A subscribe call again with POST, for peers that take only the verb of
/// the 1.0 spec's text (`POST /tasks/{id}:subscribe`) and answer GET with 405.
pub(crate) fn subscribe_fallback(call: &HttpCall) -> Option<HttpCall> {
    (call.method == Method::GET && call.rpc_id.is_none()).then(|| HttpCall {
        method: Method::POST,
        body: Some(json!({})),
        ..call.clone()
    })
}

/// A unary call's answer: the JSON-RPC `result`, or the HTTP+JSON body.
/// Kept as text, so that a 1.0 answer is read straight into its type.
pub(crate) type Answer = Box<RawValue>;

/// The members of a JSON-RPC answer that the client reads.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    /// `Some` whenever the member is there, `null` included.
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

/// A member that is there, even as `null`.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// The `result` of a JSON-RPC answer's text, as [`rpc_result`] reads it
/// from a `Value`: an answer with an `error`, or one that is not a plain
/// object, is read by it, so that every error is the same. `shown` names
/// the peer in the error for text that is not JSON.
pub(crate) fn rpc_answer(bytes: &[u8], id: &Value, shown: &str) -> Result<Answer, ClientError> {
    rpc_text(bytes, Some(id), |e| not_json(shown, e))
}

/// The `result` of a JSON-RPC stream event's data (its id is not checked).
pub(crate) fn rpc_event(data: &str) -> Result<Answer, ClientError> {
    rpc_text(data.as_bytes(), None, event_not_json)
}

/// An HTTP+JSON stream event's data, which may also be an error in its
/// status-body shape (read by [`error::remote_error`]).
pub(crate) fn rest_event(data: &str) -> Result<Answer, ClientError> {
    #[derive(Deserialize)]
    struct Members<'a> {
        #[serde(default, borrow)]
        error: Option<&'a RawValue>,
    }
    let plain = is_object(data.as_bytes())
        && serde_json::from_str::<Members>(data)
            .is_ok_and(|m| m.error.is_none_or(|e| e.get() == "null"));
    if plain {
        return RawValue::from_string(data.to_owned()).map_err(event_not_json);
    }
    let v: Value = serde_json::from_str(data).map_err(event_not_json)?;
    if let Some(e) = error::remote_error(&v) {
        return Err(e);
    }
    serde_json::value::to_raw_value(&v).map_err(event_not_json)
}

/// Text that starts as a JSON object (a derived struct also reads an array).
fn is_object(bytes: &[u8]) -> bool {
    bytes.trim_ascii_start().first() == Some(&b'{')
}

/// [`rpc_answer`] and [`rpc_event`]: `id` is what the answer must echo,
/// `not_json` words the error for text that is not JSON.
fn rpc_text(
    bytes: &[u8],
    id: Option<&Value>,
    not_json: impl Fn(serde_json::Error) -> ClientError,
) -> Result<Answer, ClientError> {
    let plain = is_object(bytes)
        .then(|| serde_json::from_slice::<Envelope>(bytes).ok())
        .flatten()
        .filter(|e| e.error.is_none_or(|e| e.get() == "null"));
    let Some(answer) = plain else {
        let v = serde_json::from_slice(bytes).map_err(&not_json)?;
        let result = rpc_result(v, id)?;
        return serde_json::value::to_raw_value(&result).map_err(not_json);
    };
    if let (Some(id), Some(got)) = (id, &answer.id)
        && got != id
    {
        return Err(ClientError::Protocol(format!(
            "the JSON-RPC answer is for request {got}, not {id}"
        )));
    }
    answer.result.map(RawValue::to_owned).ok_or_else(|| {
        ClientError::Protocol("the JSON-RPC answer has neither `result` nor `error`".into())
    })
}

/// An HTTP+JSON answer's body.
pub(crate) fn body_answer(bytes: &[u8], shown: &str) -> Result<Answer, ClientError> {
    serde_json::from_slice(bytes).map_err(|e| not_json(shown, e))
}

fn not_json(shown: &str, e: serde_json::Error) -> ClientError {
    ClientError::Protocol(format!("the answer from {shown} is not JSON ({e})"))
}

fn event_not_json(e: serde_json::Error) -> ClientError {
    ClientError::Protocol(format!("an event is not JSON: {e}"))
}

/// The payload of a JSON-RPC answer: its `result`, or its `error` as
/// [`ClientError::Remote`]. `id` is what the answer must echo (`None` for
/// stream events, whose ids are not checked).
pub(crate) fn rpc_result(answer: Value, id: Option<&Value>) -> Result<Value, ClientError> {
    if let Some(e) = error::remote_error(&answer) {
        return Err(e);
    }
    let Value::Object(mut m) = answer else {
        return Err(ClientError::Protocol(
            "a JSON-RPC answer must be an object".into(),
        ));
    };
    if let (Some(want), Some(got)) = (id, m.get("id"))
        && want != got
    {
        return Err(ClientError::Protocol(format!(
            "the JSON-RPC answer is for request {got}, not {want}"
        )));
    }
    m.remove("result").ok_or_else(|| {
        ClientError::Protocol("the JSON-RPC answer has neither `result` nor `error`".into())
    })
}

fn shape(what: &str, e: impl std::fmt::Display) -> ClientError {
    ClientError::Protocol(format!("unexpected {what}: {e}"))
}

/// A 1.0 answer, read from its text into its type.
fn v1_answer<T: DeserializeOwned>(a: &RawValue, what: &str) -> Result<T, ClientError> {
    crate::a2a::from_str_traced(a.get()).map_err(|e| shape(what, e))
}

/// An older dialect's answer as a `Value`, for its decoders.
fn old_answer(a: &RawValue, what: &str) -> Result<Value, ClientError> {
    serde_json::from_str(a.get()).map_err(|e| shape(what, e))
}

/// A SendMessage answer (the JSON-RPC `result` or the HTTP+JSON body).
pub(crate) fn decode_send(a: Answer, ep: &Endpoint) -> Result<SendMessageResponse, ClientError> {
    const WHAT: &str = "send answer";
    if ep.dialect == Dialect::V1 {
        return v1_answer(&a, WHAT);
    }
    let v = old_answer(&a, WHAT)?;
    match ep.binding {
        Binding::JsonRpc => match v0_3::decode_event(&v).map_err(|e| shape(WHAT, e))? {
            StreamResponse::Task(t) => Ok(SendMessageResponse::Task(t)),
            StreamResponse::Message(m) => Ok(SendMessageResponse::Message(m)),
            _ => Err(shape(WHAT, "it is neither a task nor a message")),
        },
        Binding::HttpJson => v0_3_rest::decode_send_response(&v).map_err(|e| shape(WHAT, e)),
    }
}

/// A Task answer (GetTask, CancelTask).
pub(crate) fn decode_task(a: Answer, ep: &Endpoint) -> Result<Task, ClientError> {
    const WHAT: &str = "task";
    if ep.dialect == Dialect::V1 {
        return v1_answer(&a, WHAT);
    }
    let v = old_answer(&a, WHAT)?;
    match ep.binding {
        Binding::JsonRpc => v0_3::decode_task(&v).map_err(|e| shape(WHAT, e)),
        Binding::HttpJson => v0_3_rest::decode_task(&v).map_err(|e| shape(WHAT, e)),
    }
}

/// One page of a ListTasks answer: its tasks and the token of the next
/// page (empty or absent on the last; proto JSON leaves empty strings out).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TaskPage {
    #[serde(default)]
    pub tasks: Vec<Task>,
    #[serde(default)]
    pub next_page_token: String,
}

/// A ListTasks answer (1.0 only).
pub(crate) fn decode_task_page(a: Answer) -> Result<TaskPage, ClientError> {
    v1_answer(&a, "task list")
}

/// A push config answer; 0.3 REST bodies name the task only in `name`, so
/// the task id of the request fills it in.
pub(crate) fn decode_push_config(
    a: Answer,
    ep: &Endpoint,
    task_id: &str,
) -> Result<TaskPushNotificationConfig, ClientError> {
    const WHAT: &str = "push notification config";
    let mut c: TaskPushNotificationConfig = if ep.dialect == Dialect::V1 {
        v1_answer(&a, WHAT)?
    } else {
        let v = old_answer(&a, WHAT)?;
        match ep.binding {
            Binding::JsonRpc => v0_3::decode_push_config(&v).map_err(|e| shape(WHAT, e))?,
            Binding::HttpJson => {
                v0_3_rest::decode_push_config(&v, task_id).map_err(|e| shape(WHAT, e))?
            }
        }
    };
    if c.task_id.is_none() {
        c.task_id = Some(task_id.to_owned());
    }
    Ok(c)
}

/// One stream event's data (already unwrapped from its JSON-RPC envelope),
/// and whether it is the last (0.3 `final: true`; 1.0 ends by closing).
pub(crate) fn decode_event(
    a: Answer,
    ep: &Endpoint,
) -> Result<(StreamResponse, bool), ClientError> {
    const WHAT: &str = "stream event";
    if ep.dialect == Dialect::V1 {
        return Ok((v1_answer(&a, WHAT)?, false));
    }
    let v = old_answer(&a, WHAT)?;
    match (ep.dialect, ep.binding) {
        (_, Binding::JsonRpc) => {
            let last = v.get("final").and_then(Value::as_bool) == Some(true);
            Ok((v0_3::decode_event(&v).map_err(|e| shape(WHAT, e))?, last))
        }
        (_, Binding::HttpJson) => {
            let last = v
                .get("statusUpdate")
                .and_then(|u| u.get("final"))
                .and_then(Value::as_bool)
                == Some(true);
            Ok((
                v0_3_rest::decode_event(&v).map_err(|e| shape(WHAT, e))?,
                last,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::types::{Message, Part, Role};

    fn ep(binding: Binding, dialect: Dialect, tenant: Option<&str>) -> Endpoint {
        Endpoint {
            url: Url::parse("http://h/a2a/x").unwrap(),
            binding,
            dialect,
            tenant: tenant.map(str::to_owned),
        }
    }

    fn req() -> SendMessageRequest {
        SendMessageRequest {
            tenant: None,
            message: Message {
                message_id: "m1".into(),
                context_id: None,
                task_id: Some("t 1".into()),
                role: Role::User,
                parts: vec![Part::text("hi")],
                metadata: None,
                extensions: Vec::new(),
                reference_task_ids: Vec::new(),
            },
            configuration: None,
            metadata: None,
        }
    }

    #[test]
    fn jsonrpc_calls_use_each_dialects_method_and_shapes() {
        let r = req();
        let call = build(
            &Operation::Send(&r),
            &ep(Binding::JsonRpc, Dialect::V1, Some("acme")),
        )
        .unwrap();
        let body = call.body.unwrap();
        assert_eq!(body["method"], "SendMessage");
        assert_eq!(body["params"]["message"]["role"], "ROLE_USER");
        assert_eq!(body["params"]["tenant"], "acme");
        assert_eq!(Some(&body["id"]), call.rpc_id.as_ref());
        assert!(call.v1);
        let call = build(
            &Operation::Send(&r),
            &ep(Binding::JsonRpc, Dialect::V03, None),
        )
        .unwrap();
        let body = call.body.unwrap();
        assert_eq!(body["method"], "message/send");
        assert_eq!(body["params"]["message"]["kind"], "message");
        assert!(!call.v1);
        let cfg = TaskPushNotificationConfig {
            tenant: None,
            id: None,
            task_id: None,
            url: "https://hook.example".into(),
            token: None,
            authentication: None,
        };
        let op = Operation::CreatePushConfig {
            task_id: "t1",
            config: &cfg,
        };
        let body = build(&op, &ep(Binding::JsonRpc, Dialect::V03, None))
            .unwrap()
            .body
            .unwrap();
        assert_eq!(body["method"], "tasks/pushNotificationConfig/set");
        assert_eq!(body["params"]["taskId"], "t1");
        assert_eq!(
            body["params"]["pushNotificationConfig"]["url"],
            "https://hook.example"
        );
    }

    #[test]
    fn rest_paths_per_dialect_with_tenant_and_escaped_ids() {
        let get = Operation::GetTask {
            id: "a/b",
            history_length: Some(2),
        };
        let call = build(&get, &ep(Binding::HttpJson, Dialect::V1, Some("acme"))).unwrap();
        assert_eq!(call.method, Method::GET);
        assert_eq!(
            call.url.as_str(),
            "http://h/a2a/x/acme/tasks/a%2Fb?historyLength=2"
        );
        let call = build(
            &Operation::Cancel { id: "t1" },
            &ep(Binding::HttpJson, Dialect::V03, Some("ignored")),
        )
        .unwrap();
        assert_eq!(call.url.as_str(), "http://h/a2a/x/v1/tasks/t1:cancel");
        let r = req();
        let call = build(
            &Operation::Stream(&r),
            &ep(Binding::HttpJson, Dialect::V03, None),
        )
        .unwrap();
        assert_eq!(call.url.as_str(), "http://h/a2a/x/v1/message:stream");
        assert_eq!(call.body.unwrap()["message"]["content"][0]["text"], "hi");
        let sub = build(
            &Operation::Subscribe { id: "t1" },
            &ep(Binding::HttpJson, Dialect::V1, None),
        )
        .unwrap();
        assert_eq!(sub.url.as_str(), "http://h/a2a/x/tasks/t1:subscribe");
        assert_eq!(subscribe_fallback(&sub).unwrap().method, Method::POST);
    }

    #[test]
    fn task_lists_go_to_1_0_endpoints_only() {
        let list = Operation::ListTasks {
            since: Some("2026-12-06T10:00:00.000Z"),
            page_size: 100,
            page_token: Some("p 2"),
        };
        let call = build(&list, &ep(Binding::JsonRpc, Dialect::V1, Some("acme"))).unwrap();
        let body = call.body.unwrap();
        assert_eq!(body["method"], "ListTasks");
        assert_eq!(
            body["params"],
            json!({"pageSize": 100, "statusTimestampAfter": "2026-12-06T10:00:00.000Z",
                   "pageToken": "p 2", "tenant": "acme"})
        );
        let call = build(&list, &ep(Binding::HttpJson, Dialect::V1, Some("acme"))).unwrap();
        assert_eq!(call.method, Method::GET);
        assert_eq!(
            call.url.as_str(),
            "http://h/a2a/x/acme/tasks?pageSize=100&statusTimestampAfter=2026-12-06T10%3A00%3A00.000Z&pageToken=p+2"
        );
        assert!(call.body.is_none());
        for binding in [Binding::JsonRpc, Binding::HttpJson] {
            assert!(matches!(
                build(&list, &ep(binding, Dialect::V03, None)),
                Err(ClientError::Unsupported(_))
            ));
        }
        let first = Operation::ListTasks {
            since: None,
            page_size: 5,
            page_token: None,
        };
        let call = build(&first, &ep(Binding::JsonRpc, Dialect::V1, None)).unwrap();
        assert_eq!(call.body.unwrap()["params"], json!({"pageSize": 5}));
    }

    /// A page without its token (proto JSON leaves an empty string out)
    /// is the last one.
    #[test]
    fn a_task_page_without_a_token_is_the_last() {
        let a = RawValue::from_string(
            r#"{"tasks": [{"id": "t1", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED"}}]}"#
                .into(),
        )
        .unwrap();
        let page = decode_task_page(a).unwrap();
        assert_eq!(page.tasks.len(), 1);
        assert!(page.next_page_token.is_empty());
        let a = RawValue::from_string(r#"{"tasks": "none"}"#.into()).unwrap();
        assert!(matches!(decode_task_page(a), Err(ClientError::Protocol(_))));
    }

    #[test]
    fn the_pre_0_3_dialect_is_refused() {
        let r = req();
        assert!(matches!(
            build(
                &Operation::Send(&r),
                &ep(Binding::JsonRpc, Dialect::Legacy, None)
            ),
            Err(ClientError::Unsupported(_))
        ));
    }

    /// The text reader gives every answer what the `Value` reader gives.
    #[test]
    fn rpc_answer_texts_unwrap_as_their_values_do() {
        let id = json!("countersign-1");
        let answers = [
            r#"{"jsonrpc":"2.0","id":"countersign-1","result":{"x":1,"y":[true,null]}}"#,
            r#"{"result":{"x":1},"id":"countersign-1","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":"countersign-1","result":null}"#,
            r#"{"jsonrpc":"2.0","result":{"no":"id"}}"#,
            r#"{"jsonrpc":"2.0","id":"countersign-1","error":null,"result":{"x":1}}"#,
            r#"{"jsonrpc":"2.0","id":"countersign-1","error":"odd","result":{"x":1}}"#,
            r#"{"jsonrpc":"2.0","id":"other","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"countersign-1","error":{"code":-32001,"message":"nope"}}"#,
            r#"{"jsonrpc":"2.0","id":"countersign-1","error":{"code":-32001,"message":"nope"},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"countersign-1"}"#,
            r#"{"error":{"code":-32001,"message":"nope"},"jsonrpc":null}"#,
            r#"{"jsonrpc":"2.0","id":"countersign-1","result":1,"result":2}"#,
            r#"[1,2]"#,
            r#""text""#,
        ];
        for text in answers {
            let by_value = rpc_result(serde_json::from_str(text).unwrap(), Some(&id));
            let by_text = rpc_answer(text.as_bytes(), &id, "peer")
                .map(|a| serde_json::from_str::<Value>(a.get()).unwrap());
            assert_eq!(format!("{by_text:?}"), format!("{by_value:?}"), "{text}");
        }
        for text in ["", "{", "{\"result\":1} x", "nope"] {
            match rpc_answer(text.as_bytes(), &id, "http://peer/") {
                Err(ClientError::Protocol(m)) => {
                    assert!(
                        m.starts_with("the answer from http://peer/ is not JSON"),
                        "{m}"
                    )
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    /// Answers made of every kind of member, in any order, some twice:
    /// the text reader and the `Value` reader give the same result.
    mod answers {
        use super::*;
        use proptest::prelude::*;

        fn member() -> impl Strategy<Value = (String, String)> {
            let value = prop_oneof![
                Just("null"),
                Just("\"countersign-1\""),
                Just("\"other\""),
                Just("7"),
                Just("[1,{\"a\":null}]"),
                Just("{\"x\":\"\\u00e9\\n\"}"),
                Just("{\"code\":-32001,\"message\":\"nope\"}"),
                Just("{\"message\":\"no code\",\"details\":[]}"),
            ];
            let key = prop_oneof![
                Just("jsonrpc"),
                Just("id"),
                Just("result"),
                Just("error"),
                Just("extra"),
            ];
            (key, value).prop_map(|(k, v)| (k.to_owned(), v.to_owned()))
        }

        proptest! {
            #[test]
            fn text_and_value_readers_agree(
                members in prop::collection::vec(member(), 0..6),
                spaced in any::<bool>(),
            ) {
                let sep = if spaced { " ,\n " } else { "," };
                let body = members
                    .iter()
                    .map(|(k, v)| format!("\"{k}\":{v}"))
                    .collect::<Vec<_>>()
                    .join(sep);
                let text = if spaced { format!(" {{ {body} }} ") } else { format!("{{{body}}}") };
                let id = json!("countersign-1");
                let by_value = rpc_result(serde_json::from_str(&text).unwrap(), Some(&id));
                let by_text = rpc_answer(text.as_bytes(), &id, "peer")
                    .map(|a| serde_json::from_str::<Value>(a.get()).unwrap());
                prop_assert_eq!(format!("{by_text:?}"), format!("{by_value:?}"), "{}", text);
            }
        }
    }

    #[test]
    fn a_1_0_answer_that_does_not_fit_names_the_member() {
        let v1 = ep(Binding::JsonRpc, Dialect::V1, None);
        let good = r#"{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"},"history":[{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}]}"#;
        let task = decode_task(RawValue::from_string(good.into()).unwrap(), &v1).unwrap();
        assert_eq!(task.history[0].parts.len(), 1);
        let bad = good.replace(r#"[{"text":"hi"}]"#, r#""oops""#);
        match decode_task(RawValue::from_string(bad).unwrap(), &v1) {
            Err(ClientError::Protocol(m)) => {
                assert!(m.starts_with("unexpected task: history[0].parts: "), "{m}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rpc_answers_unwrap_or_fail() {
        let id = json!("countersign-1");
        assert_eq!(
            rpc_result(
                json!({"jsonrpc": "2.0", "id": "countersign-1", "result": {"x": 1}}),
                Some(&id)
            )
            .unwrap(),
            json!({"x": 1})
        );
        assert!(matches!(
            rpc_result(
                json!({"jsonrpc": "2.0", "id": "other", "result": {}}),
                Some(&id)
            ),
            Err(ClientError::Protocol(_))
        ));
        assert!(matches!(
            rpc_result(
                json!({"jsonrpc": "2.0", "id": "countersign-1", "error": {"code": -32001, "message": "nope"}}),
                Some(&id)
            ),
            Err(ClientError::Remote { code: -32001, .. })
        ));
        assert!(matches!(
            rpc_result(json!({"jsonrpc": "2.0", "id": "countersign-1"}), Some(&id)),
            Err(ClientError::Protocol(_))
        ));
    }

    fn raw(v: Value) -> Answer {
        serde_json::value::to_raw_value(&v).unwrap()
    }

    #[test]
    fn events_decode_per_dialect_and_see_the_0_3_final_flag() {
        let v03 = json!({"kind": "status-update", "taskId": "t", "contextId": "c",
                         "status": {"state": "completed"}, "final": true});
        let (ev, last) = decode_event(raw(v03), &ep(Binding::JsonRpc, Dialect::V03, None)).unwrap();
        assert!(last);
        assert!(matches!(ev, StreamResponse::StatusUpdate(_)));
        let rest = json!({"statusUpdate": {"taskId": "t", "contextId": "c",
                          "status": {"state": "TASK_STATE_WORKING"}, "final": false}});
        let (_, last) =
            decode_event(raw(rest), &ep(Binding::HttpJson, Dialect::V03, None)).unwrap();
        assert!(!last);
        let v1 = json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}});
        assert!(decode_event(raw(v1), &ep(Binding::JsonRpc, Dialect::V1, None)).is_ok());
        let e = decode_event(
            raw(json!({"bogus": 1})),
            &ep(Binding::JsonRpc, Dialect::V1, None),
        )
        .unwrap_err();
        assert!(matches!(e, ClientError::Protocol(_)), "{e}");
    }

    /// A stream event read as text decodes as it did when read into a
    /// `Value` first (kept here as the reference), for every binding and
    /// dialect: events, errors in both bindings' shapes, and data that is
    /// not JSON or not an event.
    #[test]
    fn stream_event_texts_decode_as_their_values_did() {
        fn by_value(data: &str, ep: &Endpoint) -> Result<(StreamResponse, bool), ClientError> {
            let v: Value = serde_json::from_str(data)
                .map_err(|e| ClientError::Protocol(format!("an event is not JSON: {e}")))?;
            let v = match ep.binding {
                Binding::JsonRpc => rpc_result(v, None)?,
                Binding::HttpJson => match error::remote_error(&v) {
                    Some(e) => return Err(e),
                    None => v,
                },
            };
            if ep.dialect == Dialect::V1 {
                let ev = crate::a2a::from_value_traced(v).map_err(|e| shape("stream event", e))?;
                return Ok((ev, false));
            }
            decode_event(raw(v), ep)
        }
        fn by_text(data: &str, ep: &Endpoint) -> Result<(StreamResponse, bool), ClientError> {
            let answer = match ep.binding {
                Binding::JsonRpc => rpc_event(data)?,
                Binding::HttpJson => rest_event(data)?,
            };
            decode_event(answer, ep)
        }
        let v1 = r#"{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}"#;
        let v1_task = r#"{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_SUBMITTED"},"history":[{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi é"}]}]}}"#;
        let v03 = r#"{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"completed"},"final":true}"#;
        let v03_rest = r#"{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"},"final":true}}"#;
        let rpc_error = r#"{"code":-32001,"message":"Task not found"}"#;
        let status_error = r#"{"code":404,"status":"NOT_FOUND","message":"no task","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org"}]}"#;
        let mut texts = Vec::new();
        for result in [
            v1,
            v1_task,
            v03,
            v03_rest,
            r#"{"bogus":1}"#,
            "null",
            "[1]",
            "7",
        ] {
            texts.push(result.to_owned());
            texts.push(format!(r#"{{"jsonrpc":"2.0","id":3,"result":{result}}}"#));
            texts.push(format!(
                r#"{{"result":{result},"jsonrpc":"2.0","id":"x","error":null}}"#
            ));
        }
        for error in [
            rpc_error,
            status_error,
            "null",
            "5",
            r#"{"message":"no code"}"#,
        ] {
            texts.push(format!(r#"{{"jsonrpc":"2.0","id":3,"error":{error}}}"#));
            texts.push(format!(r#"{{"error":{error}}}"#));
            texts.push(format!(r#"{{"error":{error},"statusUpdate":{{"taskId":"t","contextId":"c","status":{{"state":"TASK_STATE_WORKING"}}}}}}"#));
        }
        texts.extend(
            [
                "",
                "{",
                "nope",
                r#"{"result":1} x"#,
                r#"{"jsonrpc":"2.0","result":{},"result":{}}"#,
                r#"{"error":null,"error":{"code":1}}"#,
            ]
            .map(str::to_owned),
        );
        let mut decoded = 0;
        for binding in [Binding::JsonRpc, Binding::HttpJson] {
            for dialect in [Dialect::V1, Dialect::V03] {
                let ep = ep(binding, dialect, None);
                for text in &texts {
                    let got = by_text(text, &ep);
                    let want = by_value(text, &ep);
                    decoded += usize::from(got.is_ok());
                    // A 1.0 event that does not fit its type is refused by
                    // both, in serde's words for text or for a value.
                    let unfit = |r: &Result<_, ClientError>| {
                        matches!(r, Err(ClientError::Protocol(m))
                            if m.starts_with("unexpected stream event: "))
                    };
                    if dialect == Dialect::V1 && unfit(&want) {
                        assert!(unfit(&got), "{binding:?}: {text}: {got:?}");
                        continue;
                    }
                    assert_eq!(
                        format!("{got:?}"),
                        format!("{want:?}"),
                        "{binding:?} {dialect:?}: {text}"
                    );
                }
            }
        }
        // Each binding and dialect decodes some of them.
        assert!(decoded >= 8, "{decoded}");
    }
}
