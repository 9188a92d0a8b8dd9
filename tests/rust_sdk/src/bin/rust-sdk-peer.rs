//! A peer agent on the official Rust SDK's server (`a2a-server-lf`, in-memory
//! task store, its own push sender), for Countersign's watch tests:
//!
//!     rust-sdk-peer [--log PATH] [--binding jsonrpc|http_json]
//!
//! Binds 127.0.0.1 on a free port; the first stdout line is exactly
//! `listening on http://127.0.0.1:PORT/`. The card lists the JSON-RPC and
//! HTTP+JSON interfaces (both served at the root), or only the one
//! `--binding` names. By the first word of a task's first message:
//!   slow ... -> working for 2 s, then input-required "Which environment
//!               should I deploy to?"
//!   ask ...  -> input-required at once
//!   other    -> completed "Done: <text>"
//! A follow-up on an input-required task completes it: "Deploying to
//! <text>". Cancel -> canceled. A message whose id the task has already seen
//! is not applied again (the answer is the task as it is). Every message is
//! appended to --log as one JSON line: task_id, message_id, duplicate, text.
//! Push notifications go to every config of the task (inline in the send,
//! or set after), with URL screening off: the webhooks are on loopback.

use std::collections::HashSet;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a::{
    A2AError, AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Message, Part, Role,
    StreamResponse, TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use a2a_server::agent_card::agent_card_router;
use a2a_server::jsonrpc::jsonrpc_router;
use a2a_server::rest::rest_router;
use a2a_server::{
    AgentExecutor, DefaultRequestHandler, ExecutorContext, HttpPushSender, HttpPushSenderConfig,
    InMemoryPushConfigStore, InMemoryTaskStore, StaticAgentCard,
};
use futures::stream::{self, BoxStream, StreamExt};

const ASK_PROMPT: &str = "Which environment should I deploy to?";
const SLOW: Duration = Duration::from_secs(2);

struct Peer {
    /// (task id, message id) of every message applied.
    seen: Mutex<HashSet<(String, String)>>,
    log: Option<Mutex<std::fs::File>>,
}

type Events = BoxStream<'static, Result<StreamResponse, A2AError>>;

fn status(ctx: &ExecutorContext, state: TaskState, text: Option<String>) -> StreamResponse {
    let message = text.map(|t| {
        let mut m = Message::new(Role::Agent, vec![Part::text(t)]);
        m.task_id = Some(ctx.task_id.clone());
        m.context_id = Some(ctx.context_id.clone());
        m
    });
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: ctx.task_id.clone(),
        context_id: ctx.context_id.clone(),
        status: TaskStatus {
            state,
            message,
            timestamp: None,
        },
        metadata: None,
    })
}

fn once(ev: StreamResponse) -> Events {
    stream::once(async move { Ok(ev) }).boxed()
}

impl Peer {
    fn record(&self, ctx: &ExecutorContext, message_id: &str, duplicate: bool, text: &str) {
        let Some(log) = &self.log else { return };
        let line = serde_json::json!({
            "task_id": ctx.task_id,
            "context_id": ctx.context_id,
            "message_id": message_id,
            "duplicate": duplicate,
            "text": text,
        });
        if let Ok(mut f) = log.lock() {
            let _ = writeln!(f, "{line}");
        }
    }
}

impl AgentExecutor for Peer {
    fn execute(&self, ctx: ExecutorContext) -> Events {
        let (message_id, text) = match &ctx.message {
            Some(m) => (
                m.message_id.clone(),
                m.text().unwrap_or_default().to_owned(),
            ),
            None => (String::new(), String::new()),
        };
        let fresh = self
            .seen
            .lock()
            .map(|mut s| s.insert((ctx.task_id.clone(), message_id.clone())))
            .unwrap_or(true);
        self.record(&ctx, &message_id, !fresh, &text);
        let state = ctx
            .stored_task
            .as_ref()
            .map(|t| t.status.state.clone())
            .unwrap_or(TaskState::Submitted);
        if !fresh {
            // Already applied: the task as it is.
            return match ctx.stored_task.clone() {
                Some(t) => once(StreamResponse::Task(t)),
                None => stream::empty().boxed(),
            };
        }
        if state == TaskState::InputRequired {
            return once(status(
                &ctx,
                TaskState::Completed,
                Some(format!("Deploying to {text}")),
            ));
        }
        let first = text.split_whitespace().next().unwrap_or("").to_lowercase();
        match first.as_str() {
            "slow" => {
                let working = status(&ctx, TaskState::Working, None);
                let asked = status(&ctx, TaskState::InputRequired, Some(ASK_PROMPT.into()));
                stream::once(async move { Ok(working) })
                    .chain(stream::once(async move {
                        tokio::time::sleep(SLOW).await;
                        Ok(asked)
                    }))
                    .boxed()
            }
            "ask" => once(status(
                &ctx,
                TaskState::InputRequired,
                Some(ASK_PROMPT.into()),
            )),
            _ => once(status(
                &ctx,
                TaskState::Completed,
                Some(format!("Done: {text}")),
            )),
        }
    }

    fn cancel(&self, ctx: ExecutorContext) -> Events {
        once(status(&ctx, TaskState::Canceled, None))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let bindings: &[&str] = match flag("--binding").as_deref() {
        None => &["JSONRPC", "HTTP+JSON"],
        Some("jsonrpc") => &["JSONRPC"],
        Some("http_json") => &["HTTP+JSON"],
        Some(other) => return Err(format!("unknown binding {other:?}").into()),
    };
    let log = match flag("--log") {
        Some(path) => Some(Mutex::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?,
        )),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let url = format!("http://{}/", listener.local_addr()?);
    let card = AgentCard {
        name: "Rust SDK peer".into(),
        description: "Deploys after asking where (a2a-server-lf)".into(),
        version: "1.0.0".into(),
        supported_interfaces: bindings
            .iter()
            .map(|b| AgentInterface::new(url.clone(), *b))
            .collect(),
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(true),
            extensions: None,
            extended_agent_card: None,
        },
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        skills: vec![AgentSkill {
            id: "deploy".into(),
            name: "Deploy".into(),
            description: "Asks where, then deploys".into(),
            tags: vec!["deploy".into()],
            examples: None,
            input_modes: None,
            output_modes: None,
            security_requirements: None,
        }],
        provider: None,
        documentation_url: None,
        icon_url: None,
        security_schemes: None,
        security_requirements: None,
        signatures: None,
    };
    let peer = Peer {
        seen: Mutex::new(HashSet::new()),
        log,
    };
    let sender = HttpPushSender::new(Some(HttpPushSenderConfig {
        timeout: Duration::from_secs(10),
        fail_on_error: false,
        validate_urls: false,
    }));
    let handler = Arc::new(
        DefaultRequestHandler::new(peer, InMemoryTaskStore::new())
            .with_push_notifications(InMemoryPushConfigStore::new(), sender),
    );
    let app = jsonrpc_router(handler.clone())
        .merge(rest_router(handler))
        .merge(agent_card_router(Arc::new(StaticAgentCard::new(card))));
    println!("listening on {url}");
    std::io::stdout().flush()?;
    axum::serve(listener, app).await?;
    Ok(())
}
