//! Backends: how a local agent does its work. A backend looks at each
//! incoming message and returns a [`Plan`]; the engine carries it out, so a
//! backend never touches the store or the bus itself.

mod human;
mod scripted;

pub use human::Human;
pub use scripted::Scripted;

use std::time::Duration;

use crate::a2a::types::{Artifact, Message, TaskState};
use crate::config::{AgentConfig, BackendKind};

/// What to do with a message.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Answer with this message; no task is created.
    Reply(Message),
    /// Create (or continue) the task and run these steps in order.
    Run(Vec<Step>),
}

/// One thing a running task does.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Move to `state`, with an optional agent status message.
    Status(TaskState, Option<Message>),
    /// Add or extend an artifact. An `append` chunk without its own id
    /// extends the artifact produced last in this run.
    Artifact {
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
        id_given: bool,
    },
    /// Wait.
    Delay(Duration),
}

/// A backend's decision procedure.
pub trait Backend: Send + Sync {
    /// The plan for `message`; `continuing` is true for a follow-up on an
    /// existing task.
    fn plan(&self, message: &Message, continuing: bool) -> Plan;
}

/// The relay's plan: no local steps; the engine forwards the message.
struct Forward;

impl Backend for Forward {
    fn plan(&self, _message: &Message, _continuing: bool) -> Plan {
        Plan::Run(Vec::new())
    }
}

/// Builds the backend an agent's config asks for.
pub fn from_config(cfg: &AgentConfig) -> Box<dyn Backend> {
    match cfg.backend {
        BackendKind::Human => Box::new(Human::new(cfg.park_message.clone())),
        BackendKind::Scripted => Box::new(Scripted::new(cfg)),
        // The engine forwards a relay's messages itself (engine::relay).
        BackendKind::Relay => Box::new(Forward),
    }
}
