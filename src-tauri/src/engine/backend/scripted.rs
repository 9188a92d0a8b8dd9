//! The `scripted` backend: rules from config pick the steps for a message.
//! Used for demos, the conformance kit and tests; a real backend.

use std::time::Duration;

use base64::Engine as _;
use regex::Regex;

use super::{Backend, Plan, Step};
use crate::a2a::types::{Artifact, Message, Part, PartContent, TaskState};
use crate::config::{AgentConfig, PartConfig, RuleConfig, StepConfig};

struct Rule {
    message_id_prefix: Option<String>,
    text: Option<Regex>,
    part_kind: Option<String>,
    steps: Vec<StepConfig>,
}

/// Rule-driven agent: first matching rule wins; `fallback` (or completing
/// with an echo of the text) when none matches.
pub struct Scripted {
    rules: Vec<Rule>,
    fallback: Option<Vec<StepConfig>>,
}

impl Scripted {
    pub fn new(cfg: &AgentConfig) -> Scripted {
        Scripted {
            rules: cfg.rules.iter().filter_map(compile).collect(),
            fallback: cfg.fallback.clone(),
        }
    }
}

fn compile(r: &RuleConfig) -> Option<Rule> {
    let text = match &r.text {
        // Config loading has checked every expression already.
        Some(t) => Some(Regex::new(t.get_ref()).ok()?),
        None => None,
    };
    Some(Rule {
        message_id_prefix: r.message_id_prefix.clone(),
        text,
        part_kind: r.part_kind.clone(),
        steps: r.steps.clone(),
    })
}

impl Rule {
    fn matches(&self, m: &Message) -> bool {
        if let Some(p) = &self.message_id_prefix
            && !m.message_id.starts_with(p.as_str())
        {
            return false;
        }
        if let Some(re) = &self.text
            && !re.is_match(&m.text())
        {
            return false;
        }
        if let Some(kind) = &self.part_kind {
            let hit = m.parts.iter().any(|p| match kind.as_str() {
                "file" => matches!(p.content, PartContent::Raw(_) | PartContent::Url(_)),
                k => p.kind() == k,
            });
            if !hit {
                return false;
            }
        }
        true
    }
}

impl Backend for Scripted {
    fn plan(&self, message: &Message, continuing: bool) -> Plan {
        let steps = match self.rules.iter().find(|r| r.matches(message)) {
            Some(r) => r.steps.clone(),
            None => match &self.fallback {
                Some(f) => f.clone(),
                None => vec![StepConfig::Complete(format!(
                    "Received: {}",
                    message.text()
                ))],
            },
        };
        if let [StepConfig::Reply(text)] = steps.as_slice() {
            let mut reply = Message::agent(vec![Part::text(text.clone())]);
            reply.context_id = message.context_id.clone();
            if continuing {
                reply.task_id = message.task_id.clone();
            }
            return Plan::Reply(reply);
        }
        Plan::Run(steps.iter().map(to_step).collect())
    }
}

fn agent_text(text: &str) -> Message {
    Message::agent(vec![Part::text(text)])
}

fn to_step(s: &StepConfig) -> Step {
    match s {
        StepConfig::Status { state, text } => Step::Status(
            // Checked when the config was loaded.
            TaskState::parse(state).unwrap_or(TaskState::Working),
            text.as_deref().map(agent_text),
        ),
        StepConfig::Message(text) | StepConfig::Reply(text) => {
            Step::Status(TaskState::Working, Some(agent_text(text)))
        }
        StepConfig::DelayMs(ms) => Step::Delay(Duration::from_millis(*ms)),
        StepConfig::Complete(text) => Step::Status(TaskState::Completed, Some(agent_text(text))),
        StepConfig::Reject(text) => Step::Status(TaskState::Rejected, Some(agent_text(text))),
        StepConfig::Fail(text) => Step::Status(TaskState::Failed, Some(agent_text(text))),
        StepConfig::Artifact(a) => Step::Artifact {
            artifact: Artifact {
                artifact_id: a
                    .artifact_id
                    .clone()
                    .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
                name: a.name.clone(),
                description: a.description.clone(),
                parts: a.parts.iter().map(to_part).collect(),
                metadata: None,
                extensions: Vec::new(),
            },
            append: a.append,
            last_chunk: a.last_chunk,
            id_given: a.artifact_id.is_some(),
        },
    }
}

fn to_part(p: &PartConfig) -> Part {
    let content = if let Some(t) = &p.text {
        PartContent::Text(t.clone())
    } else if let Some(r) = &p.raw {
        PartContent::Raw(r.clone())
    } else if let Some(t) = &p.raw_text {
        PartContent::Raw(base64::engine::general_purpose::STANDARD.encode(t.as_bytes()))
    } else if let Some(u) = &p.url {
        PartContent::Url(u.clone())
    } else {
        PartContent::Data(p.data.clone().unwrap_or(serde_json::Value::Null))
    };
    Part {
        content,
        metadata: None,
        filename: p.filename.clone(),
        media_type: p.media_type.clone(),
    }
}
