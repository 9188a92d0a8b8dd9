//! Echo agent on the official Rust SDK: every message gets a completed task
//! whose status message repeats the text. Usage: rust-sdk-echo PORT
use std::sync::Arc;

use a2a::{
    A2AError, AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Message, Part, Role,
    StreamResponse, Task, TaskState, TaskStatus,
};
use a2a_server::agent_card::agent_card_router;
use a2a_server::jsonrpc::jsonrpc_router;
use a2a_server::{
    AgentExecutor, DefaultRequestHandler, ExecutorContext, InMemoryTaskStore, StaticAgentCard,
};
use futures::stream::{self, BoxStream};

struct Echo;

fn task(ctx: &ExecutorContext, state: TaskState, message: Option<Message>) -> Task {
    Task {
        id: ctx.task_id.clone(),
        context_id: ctx.context_id.clone(),
        status: TaskStatus {
            state,
            message,
            timestamp: None,
        },
        artifacts: None,
        history: None,
        metadata: None,
    }
}

impl AgentExecutor for Echo {
    fn execute(
        &self,
        ctx: ExecutorContext,
    ) -> BoxStream<'static, Result<StreamResponse, A2AError>> {
        let text = ctx
            .message
            .as_ref()
            .and_then(|m| m.text())
            .unwrap_or_default()
            .to_owned();
        let reply = Message::new(Role::Agent, vec![Part::text(text)]);
        let done = task(&ctx, TaskState::Completed, Some(reply));
        Box::pin(stream::once(async move { Ok(StreamResponse::Task(done)) }))
    }

    fn cancel(&self, ctx: ExecutorContext) -> BoxStream<'static, Result<StreamResponse, A2AError>> {
        let done = task(&ctx, TaskState::Canceled, None);
        Box::pin(stream::once(async move { Ok(StreamResponse::Task(done)) }))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port: u16 = std::env::args()
        .nth(1)
        .ok_or("usage: rust-sdk-echo PORT")?
        .parse()?;
    let url = format!("http://127.0.0.1:{port}/");
    let card = AgentCard {
        name: "Echo".into(),
        description: "Echoes the text".into(),
        version: "1.0.0".into(),
        supported_interfaces: vec![AgentInterface::new(url, "JSONRPC")],
        capabilities: AgentCapabilities::default(),
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        skills: vec![AgentSkill {
            id: "echo".into(),
            name: "Echo".into(),
            description: "Repeats the text".into(),
            tags: vec!["echo".into()],
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
    let handler = Arc::new(DefaultRequestHandler::new(Echo, InMemoryTaskStore::new()));
    let app =
        jsonrpc_router(handler).merge(agent_card_router(Arc::new(StaticAgentCard::new(card))));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    axum::serve(listener, app).await?;
    Ok(())
}
