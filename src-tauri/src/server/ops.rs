//! The A2A operations, once for both bindings. A binding parses its request
//! into an [`Op`], calls [`execute`], and renders the [`Outcome`] its way.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use serde_json::Value;

use super::{AppState, sse};
use crate::a2a::card::AgentCard;
use crate::a2a::types::{
    GetTaskRequest, ListPushConfigsRequest, ListPushConfigsResponse, ListTasksRequest,
    ListTasksResponse, PushConfigRef, SendMessageRequest, SendMessageResponse, StreamResponse,
    Task, TaskIdRequest, TaskPushNotificationConfig,
};
use crate::a2a::v0_3::{self, Dialect};
use crate::a2a::{Error, to_json_sized};
use crate::engine::Agent;
use crate::store::tasks::{CreatedTask, StoredTask};

/// One A2A operation with its parameters.
#[derive(Debug)]
pub enum Op {
    SendMessage(SendMessageRequest),
    SendStreamingMessage(SendMessageRequest),
    GetTask(GetTaskRequest),
    ListTasks(ListTasksRequest),
    CancelTask(TaskIdRequest),
    SubscribeToTask(TaskIdRequest),
    CreatePushConfig(TaskPushNotificationConfig),
    GetPushConfig(PushConfigRef),
    ListPushConfigs(ListPushConfigsRequest),
    DeletePushConfig(PushConfigRef),
    GetExtendedAgentCard,
}

/// What an operation answers, before a binding renders it.
pub enum Outcome {
    Sent(SendMessageResponse),
    /// A task sent to, as stored (v1.0 JSON, not read into types): a
    /// SendMessage answered to a v1.0 caller with the task as it was
    /// created (see [`crate::engine::Started::stored`]).
    SentStored(CreatedTask),
    /// A task, with the dialect it was created in.
    Task(Task, Dialect),
    /// A task as stored (v1.0 JSON, not read into types), with the dialect
    /// it was created in: GetTask's answer to a v1.0 request.
    StoredTask(StoredTask, Dialect),
    Tasks(ListTasksResponse),
    PushConfig(TaskPushNotificationConfig),
    PushConfigs(ListPushConfigsResponse),
    Deleted,
    Card(AgentCard),
    /// A stream of events (SSE).
    Stream(BoxStream<'static, StreamItem>),
}

/// A JSON-RPC success response.
#[derive(serde::Serialize)]
struct RpcResult<'a, T> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: T,
}

/// `result` as JSON text; `id` given: wrapped in a JSON-RPC response with
/// that id. Written straight into one buffer: `json!` around a `Value`
/// copies it whole first (a third of a 0.3 GetTask), and `Value`'s
/// `to_string` writes through a formatter.
pub(super) fn json_text<T: serde::Serialize>(
    id: Option<&Value>,
    result: &T,
) -> Result<String, Error> {
    // A task answered is about a kilobyte.
    match id {
        Some(id) => to_json_sized(
            &RpcResult {
                jsonrpc: "2.0",
                id,
                result,
            },
            1024,
        ),
        None => to_json_sized(result, 1024),
    }
    .map_err(|e| Error::Internal(format!("cannot encode the result: {e}")))
}

/// A SendMessage answer (`{"task": …}`) written from the task's stored JSON;
/// `id` given: wrapped in a JSON-RPC response with that id, as
/// [`json_text`] wraps.
fn sent_stored_json(id: Option<&Value>, t: &CreatedTask) -> Result<String, Error> {
    let encode = |e: crate::store::Error| Error::Internal(format!("cannot encode the result: {e}"));
    let mut out = String::with_capacity(1024);
    if let Some(id) = id {
        out.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
        let id = serde_json::to_string(id)
            .map_err(|e| Error::Internal(format!("cannot encode the id: {e}")))?;
        out.push_str(&id);
        out.push_str(",\"result\":");
    }
    out.push_str("{\"task\":");
    t.write_v1(&mut out).map_err(encode)?;
    out.push('}');
    if id.is_some() {
        out.push('}');
    }
    Ok(out)
}

/// A ListTasks result in an older dialect.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct OldTasks<'a> {
    tasks: Vec<v0_3::Old<'a, Task>>,
    next_page_token: &'a str,
    page_size: i32,
    total_size: i32,
}

/// An outcome's v1.0 result, serialised as the type it holds.
struct V1<'a>(&'a Outcome);

impl serde::Serialize for V1<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error as _, SerializeMap};
        match self.0 {
            Outcome::Sent(r) => r.serialize(s),
            Outcome::SentStored(t) => {
                let t = t.parse().map_err(S::Error::custom)?;
                SendMessageResponse::Task(t).serialize(s)
            }
            Outcome::Task(t, _) => t.serialize(s),
            Outcome::StoredTask(t, _) => t.serialize(s),
            Outcome::Tasks(l) => l.serialize(s),
            Outcome::PushConfig(c) => c.serialize(s),
            Outcome::PushConfigs(l) => l.serialize(s),
            Outcome::Deleted => s.serialize_map(Some(0))?.end(),
            Outcome::Card(c) => c.serialize(s),
            Outcome::Stream(_) => Err(S::Error::custom("a stream has no single result")),
        }
    }
}

/// The dialect a task created in `origin` is answered in to a request in
/// `asked`: a pre-0.3 client's tasks keep its shapes.
fn task_dialect(origin: Dialect, asked: Dialect) -> Dialect {
    if origin == Dialect::Legacy {
        Dialect::Legacy
    } else {
        asked
    }
}

/// The dialect a task was recorded in.
pub fn stored_dialect(name: &str) -> Dialect {
    match name {
        "v0.3" => Dialect::V03,
        "legacy" => Dialect::Legacy,
        _ => Dialect::V1,
    }
}

impl Outcome {
    /// The result as v1.0 ProtoJSON text (streams are rendered event by
    /// event); `id` given: wrapped in a JSON-RPC response with that id.
    /// Written straight from the typed value: building a `Value` first
    /// showed in profiles of GetTask.
    pub fn to_v1_json(&self, id: Option<&Value>) -> Result<String, Error> {
        match self {
            Outcome::Stream(_) => Err(Error::Internal("a stream has no single result".into())),
            Outcome::SentStored(t) => sent_stored_json(id, t),
            _ => json_text(id, &V1(self)),
        }
    }

    /// The result in an older dialect's JSON-RPC shapes, as text; `id`
    /// given: wrapped in a JSON-RPC response with that id. Tasks created by
    /// a pre-0.3 client are answered in its shapes even on shared methods.
    /// Tasks and messages are written straight from their types
    /// ([`v0_3::Old`]).
    pub fn to_old_json(&self, dialect: Dialect, id: Option<&Value>) -> Result<String, Error> {
        use v0_3::Old;
        match self {
            Outcome::Sent(SendMessageResponse::Task(t)) => json_text(id, &Old(t, dialect)),
            Outcome::Sent(SendMessageResponse::Message(m)) => json_text(id, &Old(m, dialect)),
            Outcome::SentStored(t) => json_text(id, &Old(&t.parse()?, dialect)),
            Outcome::Task(t, origin) => json_text(id, &Old(t, task_dialect(*origin, dialect))),
            Outcome::StoredTask(t, origin) => {
                json_text(id, &Old(&t.parse()?, task_dialect(*origin, dialect)))
            }
            Outcome::Tasks(l) => json_text(
                id,
                &OldTasks {
                    tasks: l.tasks.iter().map(|t| Old(t, dialect)).collect(),
                    next_page_token: &l.next_page_token,
                    page_size: l.page_size,
                    total_size: l.total_size,
                },
            ),
            Outcome::PushConfig(c) => json_text(id, &v0_3::encode_push_config(c)),
            Outcome::PushConfigs(l) => json_text(
                id,
                &l.configs
                    .iter()
                    .map(v0_3::encode_push_config)
                    .collect::<Vec<_>>(),
            ),
            Outcome::Deleted => json_text(id, &Value::Null),
            Outcome::Card(c) => json_text(id, &super::card::v0_3_card(c)),
            Outcome::Stream(_) => Err(Error::Internal("a stream has no single result".into())),
        }
    }
}

/// One event of a stream, and whether it is the last before the stream
/// closes (v0.3 marks that event `final`).
pub struct StreamItem {
    pub event: StreamResponse,
    pub last: bool,
}

impl StreamItem {
    /// The event in `dialect` as text; `id` given: wrapped in a JSON-RPC
    /// response with that id. Written from its type in every dialect.
    pub fn to_json(&self, dialect: Dialect, id: Option<&Value>) -> Result<String, Error> {
        match (dialect, &self.event) {
            (Dialect::V1, ev) => json_text(id, ev),
            // A pre-0.3 stream carries only update events, so its opening
            // task snapshot becomes a status update.
            (Dialect::Legacy, StreamResponse::Task(t)) => {
                let update =
                    StreamResponse::StatusUpdate(crate::a2a::types::TaskStatusUpdateEvent {
                        task_id: t.id.clone(),
                        context_id: t.context_id.clone(),
                        status: t.status.clone(),
                        metadata: None,
                    });
                json_text(id, &v0_3::OldEvent(&update, dialect, self.last))
            }
            (d, ev) => json_text(id, &v0_3::OldEvent(ev, d, self.last)),
        }
    }
}

/// Whether push notifications are offered: every agent delivers them
/// (through the durable outbox, see `engine::dispatch`).
pub fn push_supported(_agent: &Agent) -> bool {
    true
}

impl Op {
    /// The `tenant` the request carries, if any.
    fn tenant(&self) -> Option<&str> {
        match self {
            Op::SendMessage(r) | Op::SendStreamingMessage(r) => r.tenant.as_deref(),
            Op::GetTask(r) => r.tenant.as_deref(),
            Op::ListTasks(r) => r.tenant.as_deref(),
            Op::CancelTask(r) | Op::SubscribeToTask(r) => r.tenant.as_deref(),
            Op::CreatePushConfig(r) => r.tenant.as_deref(),
            Op::GetPushConfig(r) | Op::DeletePushConfig(r) => r.tenant.as_deref(),
            Op::ListPushConfigs(r) => r.tenant.as_deref(),
            Op::GetExtendedAgentCard => None,
        }
    }
}

/// Checks the tenant a request names (its `tenant` field, or the `/{tenant}`
/// path segment of HTTP+JSON) against the agent's. An agent in a tenant
/// takes only its own tenant's name (or none). An agent of the default
/// tenant takes none, or a name that is no configured tenant (clients may
/// send any opaque value where the card declares none); naming a configured
/// tenant there is a wrong address, refused rather than quietly served.
pub fn check_tenant(state: &AppState, agent: &Agent, named: Option<&str>) -> Result<(), Error> {
    let Some(named) = named.filter(|t| !t.is_empty()) else {
        return Ok(());
    };
    match agent.tenant() {
        Some(t) if t == named => Ok(()),
        Some(t) => Err(Error::InvalidParams(format!(
            "the request names tenant `{named}`, but /a2a/{} belongs to tenant `{t}`",
            agent.id()
        ))),
        None if state.config.tenant(named).is_some() => Err(Error::InvalidParams(format!(
            "the request names tenant `{named}`, but /a2a/{} belongs to the default tenant; tenant `{named}`'s agents are at /a2a/{named}/{{agent}}",
            agent.id()
        ))),
        None => Ok(()),
    }
}

/// Runs one operation for `owner` on `agent`; `dialect` is the request's.
pub async fn execute(
    state: &Arc<AppState>,
    agent: &Arc<Agent>,
    owner: &str,
    op: Op,
    base_url: &str,
    dialect: Dialect,
) -> Result<Outcome, Error> {
    check_tenant(state, agent, op.tenant())?;
    let engine = &state.engine;
    match op {
        Op::SendMessage(req) => {
            let cfg = req.configuration.clone().unwrap_or_default();
            // Boxed, as is `send` below: the send's future was most of this
            // one's size, and every request through here moves this one (a
            // copy of kilobytes): 4% of a durable SendMessage.
            let mut started = Box::pin(engine.send_settled(agent, owner, req, dialect)).await?;
            let task_id = match &started.reply {
                SendMessageResponse::Task(t) if !started.settled => t.id.clone(),
                // A message, or a task settled in the transaction that
                // created it: nothing to wait for or read back.
                _ => {
                    if let Some(mut stored) = started.stored.take() {
                        if let Some(n) = cfg.history_length {
                            stored.keep_history(usize::try_from(n).unwrap_or(0));
                        }
                        return Ok(Outcome::SentStored(stored));
                    }
                    let reply = match started.reply {
                        SendMessageResponse::Task(task) => {
                            SendMessageResponse::Task(sse::trim_history(task, cfg.history_length))
                        }
                        message => message,
                    };
                    return Ok(Outcome::Sent(reply));
                }
            };
            if !cfg.return_immediately {
                let limit = Duration::from_secs(engine.limits().max_blocking_wait_secs);
                engine.wait_settled(&mut started, limit).await;
            }
            let task = engine
                .get_task(agent, owner, &task_id, cfg.history_length)
                .await?;
            Ok(Outcome::Sent(SendMessageResponse::Task(task)))
        }
        Op::SendStreamingMessage(req) => {
            require_streaming(agent)?;
            let history = req.configuration.as_ref().and_then(|c| c.history_length);
            let started = Box::pin(engine.send(agent, owner, req, dialect)).await?;
            Ok(Outcome::Stream(sse::send_stream(
                started,
                history,
                state.shutdown.clone(),
            )))
        }
        // A v1.0 answer is written from the JSON as stored; the older
        // dialects reshape the task, so they read it into types.
        Op::GetTask(req) if dialect == Dialect::V1 => {
            let (head, task) = engine
                .stored_task_with_head(agent, owner, &req.id, req.history_length)
                .await?;
            Ok(Outcome::StoredTask(task, stored_dialect(&head.dialect)))
        }
        Op::GetTask(req) => {
            let (head, task) = engine
                .task_with_head(agent, owner, &req.id, req.history_length)
                .await?;
            Ok(Outcome::Task(task, stored_dialect(&head.dialect)))
        }
        Op::ListTasks(req) => Ok(Outcome::Tasks(engine.list_tasks(agent, owner, req).await?)),
        Op::CancelTask(req) => {
            let (head, task) = engine.cancel(agent, owner, &req.id).await?;
            Ok(Outcome::Task(task, stored_dialect(&head.dialect)))
        }
        Op::SubscribeToTask(req) => {
            require_streaming(agent)?;
            let (task, seq, rx) = engine.subscribe(agent, owner, &req.id).await?;
            Ok(Outcome::Stream(sse::subscribe_stream(
                task,
                seq,
                rx,
                state.shutdown.clone(),
            )))
        }
        Op::CreatePushConfig(cfg) => {
            require_push(agent)?;
            Ok(Outcome::PushConfig(
                engine
                    .create_push_config(agent, owner, cfg, dialect)
                    .await?,
            ))
        }
        Op::GetPushConfig(r) => {
            require_push(agent)?;
            match engine
                .get_push_config(agent, owner, &r.task_id, &r.id)
                .await
            {
                Ok(c) => Ok(Outcome::PushConfig(c)),
                // 0.3 servers (the reference SDK among them) answer a get
                // with the task's config whatever id it names; a 0.3 client
                // may rely on that when the task has just the one.
                Err(Error::TaskNotFound(m)) if dialect != Dialect::V1 => {
                    let all = engine
                        .list_push_configs(agent, owner, &r.task_id, Some(2), None)
                        .await?;
                    match <[_; 1]>::try_from(all.configs) {
                        Ok([only]) => Ok(Outcome::PushConfig(only)),
                        Err(_) => Err(Error::TaskNotFound(m)),
                    }
                }
                Err(e) => Err(e),
            }
        }
        Op::ListPushConfigs(r) => {
            require_push(agent)?;
            Ok(Outcome::PushConfigs(
                engine
                    .list_push_configs(agent, owner, &r.task_id, r.page_size, r.page_token)
                    .await?,
            ))
        }
        Op::DeletePushConfig(r) => {
            require_push(agent)?;
            engine
                .delete_push_config(agent, owner, &r.task_id, &r.id)
                .await?;
            Ok(Outcome::Deleted)
        }
        Op::GetExtendedAgentCard => Ok(Outcome::Card(super::card::extended_card(
            state, agent, base_url,
        )?)),
    }
}

fn require_streaming(agent: &Agent) -> Result<(), Error> {
    if agent.config.streaming {
        Ok(())
    } else {
        Err(Error::UnsupportedOperation(format!(
            "agent `{}` does not support streaming",
            agent.id()
        )))
    }
}

fn require_push(agent: &Agent) -> Result<(), Error> {
    if push_supported(agent) {
        Ok(())
    } else {
        Err(Error::PushNotificationNotSupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_dialect_answers_are_jsonrpc_responses_in_that_dialect() {
        let task: Task = serde_json::from_value(serde_json::json!({
            "id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}
        }))
        .unwrap();
        let list = Outcome::Tasks(ListTasksResponse {
            tasks: vec![task.clone()],
            next_page_token: "n".into(),
            page_size: 1,
            total_size: 2,
        });
        assert_eq!(
            list.to_old_json(Dialect::V03, Some(&serde_json::json!(7)))
                .unwrap(),
            r#"{"jsonrpc":"2.0","id":7,"result":{"tasks":[{"id":"t","contextId":"c","status":{"state":"working"},"kind":"task"}],"nextPageToken":"n","pageSize":1,"totalSize":2}}"#
        );
        // A task a pre-0.3 client created keeps that client's shapes.
        let legacy = Outcome::Task(task, Dialect::Legacy);
        assert_eq!(
            legacy.to_old_json(Dialect::V03, None).unwrap(),
            r#"{"id":"t","sessionId":"c","status":{"state":"working"}}"#
        );
        assert_eq!(
            Outcome::Deleted
                .to_old_json(Dialect::V03, Some(&serde_json::json!("x")))
                .unwrap(),
            r#"{"jsonrpc":"2.0","id":"x","result":null}"#
        );
    }
}
