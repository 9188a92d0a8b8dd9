//! The A2A operations, once for both bindings. A binding parses its request
//! into an [`Op`], calls [`execute`], and renders the [`Outcome`] its way.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use serde_json::Value;

use super::{AppState, sse};
use crate::a2a::Error;
use crate::a2a::types::{
    GetTaskRequest, ListPushConfigsRequest, ListTasksRequest, PushConfigRef, SendMessageRequest,
    SendMessageResponse, StreamResponse, TaskIdRequest, TaskPushNotificationConfig,
};
use crate::engine::Agent;

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

/// What an operation answers.
pub enum Outcome {
    /// One JSON result.
    Json(Value),
    /// A stream of events (SSE).
    Stream(BoxStream<'static, StreamResponse>),
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, Error> {
    serde_json::to_value(v).map_err(|e| Error::Internal(format!("cannot encode the result: {e}")))
}

/// Whether push notifications are offered. Delivery of push notifications is
/// not part of this build yet, so the card says `pushNotifications: false`
/// and, as the spec requires, the push-config operations answer
/// PushNotificationNotSupportedError (the engine already stores and checks
/// configs for when delivery lands).
pub fn push_supported(_agent: &Agent) -> bool {
    false
}

/// Runs one operation for `owner` on `agent`.
pub async fn execute(
    state: &Arc<AppState>,
    agent: &Arc<Agent>,
    owner: &str,
    op: Op,
    base_url: &str,
) -> Result<Outcome, Error> {
    let engine = &state.engine;
    match op {
        Op::SendMessage(req) => {
            let cfg = req.configuration.clone().unwrap_or_default();
            let mut started = engine
                .send(agent, owner, req, crate::a2a::v0_3::Dialect::V1)
                .await?;
            let task_id = match &started.reply {
                SendMessageResponse::Message(_) => {
                    return Ok(Outcome::Json(to_value(&started.reply)?));
                }
                SendMessageResponse::Task(t) => t.id.clone(),
            };
            if !cfg.return_immediately {
                let limit = Duration::from_secs(engine.limits().max_blocking_wait_secs);
                engine.wait_settled(&mut started, limit).await;
            }
            let task = engine
                .current(agent, owner, &task_id, cfg.history_length)
                .await?;
            Ok(Outcome::Json(to_value(&SendMessageResponse::Task(task))?))
        }
        Op::SendStreamingMessage(req) => {
            require_streaming(agent)?;
            let history = req.configuration.as_ref().and_then(|c| c.history_length);
            let started = engine
                .send(agent, owner, req, crate::a2a::v0_3::Dialect::V1)
                .await?;
            Ok(Outcome::Stream(sse::send_stream(
                started,
                history,
                state.shutdown.clone(),
            )))
        }
        Op::GetTask(req) => Ok(Outcome::Json(to_value(
            &engine
                .get_task(agent, owner, &req.id, req.history_length)
                .await?,
        )?)),
        Op::ListTasks(req) => Ok(Outcome::Json(to_value(
            &engine.list_tasks(agent, owner, req).await?,
        )?)),
        Op::CancelTask(req) => Ok(Outcome::Json(to_value(
            &engine.cancel(agent, owner, &req.id).await?,
        )?)),
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
            Ok(Outcome::Json(to_value(
                &engine.create_push_config(agent, owner, cfg).await?,
            )?))
        }
        Op::GetPushConfig(r) => {
            require_push(agent)?;
            Ok(Outcome::Json(to_value(
                &engine
                    .get_push_config(agent, owner, &r.task_id, &r.id)
                    .await?,
            )?))
        }
        Op::ListPushConfigs(r) => {
            require_push(agent)?;
            let list = engine
                .list_push_configs(agent, owner, &r.task_id, r.page_size, r.page_token)
                .await?;
            Ok(Outcome::Json(to_value(&list)?))
        }
        Op::DeletePushConfig(r) => {
            require_push(agent)?;
            engine
                .delete_push_config(agent, owner, &r.task_id, &r.id)
                .await?;
            Ok(Outcome::Json(Value::Object(Default::default())))
        }
        Op::GetExtendedAgentCard => {
            let card = super::card::extended_card(state, agent, base_url)?;
            Ok(Outcome::Json(to_value(&card)?))
        }
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
