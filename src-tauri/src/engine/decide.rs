//! Decisions: a person approves, answers or rejects a parked task.
//!
//! A decision is committed first (one per turn, whatever races: a double
//! click, two windows, the CLI and the UI at once) and applied second, so a
//! crash in between loses nothing: pending decisions are applied again at
//! start-up. A decision the store cannot apply for now (a full disk) stays
//! pending and is tried again. How a decision is applied depends on where
//! the task lives — see [`Engine::apply_decision`].

use std::sync::Arc;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use super::backend::Step;
use super::{Engine, new_id};
use crate::a2a::types::{Artifact, Message, Part, PartContent, SendMessageRequest, TaskState};
use crate::a2a::v0_3::Dialect;
use crate::clock::now_ms;
use crate::config::BackendKind;
use crate::store::queue::{self as q, DecisionRecord};
use crate::store::tasks;

/// How applying a decision went, short of failing.
enum Delivery {
    /// Applied now.
    Done,
    /// Queued in the outbox for a peer.
    Queued,
}

/// Why a decision was not applied.
enum Failure {
    /// For good: the task moved on or is gone, or its agent is no longer
    /// served.
    Final(String),
    /// For now: the store failed (a full disk, say). The decision stays
    /// pending and is tried again.
    Transient(String),
}

impl From<super::Error> for Failure {
    fn from(e: super::Error) -> Self {
        match e {
            super::Error::Storage(_) => Failure::Transient(e.to_string()),
            _ => Failure::Final(e.to_string()),
        }
    }
}

impl From<crate::store::Error> for Failure {
    fn from(e: crate::store::Error) -> Self {
        Failure::Transient(super::Error::from(e).to_string())
    }
}

use super::{STORE_RETRY_FIRST as RETRY_FIRST, STORE_RETRY_MAX as RETRY_MAX};

/// What a person decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionKind {
    /// Go ahead (optional comment).
    Approve,
    /// An answer: text, optionally a JSON data part and files.
    Reply,
    /// No (optional reason).
    Reject,
    /// For `auth-required`: the person has signed in; carry on.
    Continue,
}

impl DecisionKind {
    pub fn name(self) -> &'static str {
        match self {
            DecisionKind::Approve => "approve",
            DecisionKind::Reply => "reply",
            DecisionKind::Reject => "reject",
            DecisionKind::Continue => "continue",
        }
    }
}

/// A file attached to a reply.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachedFile {
    pub name: String,
    #[serde(default)]
    pub media_type: Option<String>,
    /// The content, base64.
    pub bytes: String,
}

/// A decision as a person makes it (UI, CLI).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecisionInput {
    pub kind: DecisionKind,
    /// Approve: the comment. Reply: the text. Reject: the reason.
    #[serde(default)]
    pub text: Option<String>,
    /// Reply: a JSON value sent as a data part.
    #[serde(default)]
    pub data: Option<Value>,
    /// Reply: files sent as file parts.
    #[serde(default)]
    pub files: Vec<AttachedFile>,
    /// The turn decided; the task's open turn when absent.
    #[serde(default)]
    pub turn_id: Option<String>,
}

/// Why a decision was not taken.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error("no task `{0}`")]
    NotFound(String),
    #[error("task `{0}` is not waiting for a decision (it is {1})")]
    NotParked(String, &'static str),
    #[error("already decided: {} by {} ({})", .0.kind, .0.actor, crate::a2a::types::format_timestamp(.0.created_ms))]
    AlreadyDecided(Box<DecisionRecord>),
    #[error("{0}")]
    Invalid(String),
    #[error("storage failure: {0}")]
    Store(#[from] crate::store::Error),
}

impl DecisionInput {
    fn check(&self, state: TaskState) -> Result<(), DecideError> {
        let invalid = |m: &str| Err(DecideError::Invalid(m.to_owned()));
        match self.kind {
            DecisionKind::Reply
                if self.text.as_deref().is_none_or(|t| t.trim().is_empty())
                    && self.data.is_none()
                    && self.files.is_empty() =>
            {
                return invalid("a reply needs text, data or a file");
            }
            DecisionKind::Continue if state != TaskState::AuthRequired => {
                return invalid(
                    "`continue` is for tasks waiting for a sign-in (auth-required); approve, reply or reject instead",
                );
            }
            _ => {}
        }
        if self.kind != DecisionKind::Reply && (self.data.is_some() || !self.files.is_empty()) {
            return invalid("data and files go with a reply");
        }
        for f in &self.files {
            if f.name.trim().is_empty() {
                return invalid("every file needs a name");
            }
            if base64::engine::general_purpose::STANDARD
                .decode(f.bytes.as_bytes())
                .is_err()
            {
                return Err(DecideError::Invalid(format!(
                    "file `{}` is not valid base64",
                    f.name
                )));
            }
        }
        Ok(())
    }

    /// The payload kept in the audit record.
    fn payload(&self) -> Value {
        let mut p = serde_json::Map::new();
        if let Some(t) = &self.text {
            let key = match self.kind {
                DecisionKind::Approve | DecisionKind::Continue => "comment",
                DecisionKind::Reply => "text",
                DecisionKind::Reject => "reason",
            };
            p.insert(key.into(), json!(t));
        }
        if let Some(d) = &self.data {
            p.insert("data".into(), d.clone());
        }
        if !self.files.is_empty() {
            p.insert("files".into(), json!(self.files));
        }
        Value::Object(p)
    }
}

fn text_of(payload: &Value, key: &str) -> Option<String> {
    payload
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(str::to_owned)
}

/// The parts a decision is sent as: the person's words, and a data part
/// `{"decision": …, "comment"|"reason": …}` for approve/reject/continue (the
/// reply's own data and files for a reply).
fn decision_parts(d: &DecisionRecord) -> Vec<Part> {
    let p = &d.payload;
    match d.kind.as_str() {
        "reply" => {
            let mut parts = Vec::new();
            if let Some(t) = text_of(p, "text") {
                parts.push(Part::text(t));
            }
            if let Some(data) = p.get("data") {
                parts.push(Part::data(data.clone()));
            }
            if let Some(Value::Array(files)) = p.get("files") {
                for f in files {
                    parts.push(Part {
                        content: PartContent::Raw(
                            f["bytes"].as_str().unwrap_or_default().to_owned(),
                        ),
                        metadata: None,
                        filename: f["name"].as_str().map(str::to_owned),
                        media_type: f["mediaType"].as_str().map(str::to_owned),
                    });
                }
            }
            parts
        }
        kind => {
            let (key, words) = match kind {
                "approve" => ("comment", "Approved."),
                "reject" => ("reason", "Rejected."),
                _ => ("comment", "Signed in; please continue."),
            };
            let note = text_of(p, key);
            let text = match &note {
                Some(n) => format!("{words} {n}"),
                None => words.to_owned(),
            };
            let mut data = serde_json::Map::new();
            data.insert("decision".into(), json!(kind));
            if let Some(n) = note {
                data.insert(key.into(), json!(n));
            }
            vec![Part::text(text), Part::data(Value::Object(data))]
        }
    }
}

impl Engine {
    /// Records a person's decision on a parked task. Exactly one decision is
    /// taken per turn: a second one gets [`DecideError::AlreadyDecided`] with
    /// the first. The decision is committed before this returns and applied
    /// right after.
    pub async fn decide(
        &self,
        task_id: &str,
        input: DecisionInput,
        actor: &str,
    ) -> Result<DecisionRecord, DecideError> {
        let tid = task_id.to_owned();
        let actor = actor.to_owned();
        // On the disk before the person hears it was recorded: a decision
        // cannot be sent again by whoever made it, as a caller's request can.
        let record = self
            .inner
            .store
            .write_to_disk(move |conn| {
                let Some(head) = tasks::head(conn, &tid)? else {
                    return Ok(Err(DecideError::NotFound(tid)));
                };
                // Without a turn id, the task's latest turn: open, or already
                // decided (a retry of the same decision).
                let turn = match &input.turn_id {
                    Some(id) => q::turn(conn, id)?.filter(|t| t.task_id == tid),
                    None => q::latest_turn(conn, &tid)?,
                };
                let Some(turn) = turn else {
                    return Ok(Err(DecideError::NotParked(tid, head.state.short_name())));
                };
                if let Some(first) = q::decision_of_turn(conn, &turn.id)? {
                    return Ok(Err(DecideError::AlreadyDecided(Box::new(first))));
                }
                if turn.closed_ms.is_some() {
                    return Ok(Err(DecideError::NotParked(tid, head.state.short_name())));
                }
                if let Err(e) = input.check(turn.state) {
                    return Ok(Err(e));
                }
                let payload = input.payload();
                let record = DecisionRecord {
                    id: new_id(),
                    turn_id: turn.id,
                    task_id: tid,
                    agent_id: head.agent_id,
                    kind: input.kind.name().to_owned(),
                    payload,
                    actor,
                    created_ms: now_ms(),
                    delivery: "pending".into(),
                    delivery_error: None,
                    delivered_ms: None,
                };
                let words = [
                    text_of(&record.payload, "comment"),
                    text_of(&record.payload, "text"),
                    text_of(&record.payload, "reason"),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" ");
                q::insert_decision(conn, &record, &format!("{} {words}", record.kind))?;
                Ok(Ok(record))
            })
            .await??;
        Ok(self.apply_decision(record).await)
    }

    /// Applies a recorded decision and records how that went.
    ///
    /// A task of a `human` agent is finished by the decision itself: approve
    /// completes it with the decision as an artifact and an agent message;
    /// a reply completes it with the reply as the agent message; reject
    /// rejects it. A task of any other local agent gets the decision as the
    /// next user message, as if its caller had answered. (Tasks of peers are
    /// delivered through the outbox.)
    ///
    /// A decision the store could not take for now (a full disk, say) stays
    /// pending and is tried again, after 1 s, then twice as long each time
    /// up to a minute, and at the next start; a task of a `human` agent may
    /// meanwhile hold the decision's artifact, which the next try writes
    /// again under the same id.
    pub async fn apply_decision(&self, d: DecisionRecord) -> DecisionRecord {
        self.try_decision(d, RETRY_FIRST).await
    }

    async fn try_decision(
        &self,
        mut d: DecisionRecord,
        wait: std::time::Duration,
    ) -> DecisionRecord {
        let outcome = self.deliver(&d).await;
        let (delivery, error) = match outcome {
            Ok(Delivery::Done) => ("delivered", None),
            // The outbox delivers it to the peer and records how that went.
            Ok(Delivery::Queued) => return d,
            Err(Failure::Final(e)) => ("failed", Some(e)),
            Err(Failure::Transient(e)) => {
                tracing::warn!(decision = %d.id, "the decision is not applied yet ({e}); trying again in {wait:?}");
                self.retry_decision(d.clone(), wait);
                // Shown as "being retried: …".
                ("pending", Some(e))
            }
        };
        let (id, err) = (d.id.clone(), error.clone());
        let now = now_ms();
        let stored = self
            .inner
            .store
            .write(move |conn| q::set_delivery(conn, &id, delivery, err.as_deref(), now))
            .await;
        if let Err(e) = stored {
            tracing::error!(decision = %d.id, "cannot record the delivery of a decision: {e}");
        }
        d.delivery = delivery.into();
        d.delivery_error = error;
        d.delivered_ms = Some(now);
        d
    }

    /// Tries `d` again after `wait`, off the caller's path.
    fn retry_decision(&self, d: DecisionRecord, wait: std::time::Duration) {
        let engine = self.clone();
        let next = (wait * 2).min(RETRY_MAX);
        let again: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
            Box::pin(async move {
                tokio::time::sleep(wait).await;
                engine.try_decision(d, next).await;
            });
        tokio::spawn(again);
    }

    async fn deliver(&self, d: &DecisionRecord) -> Result<Delivery, Failure> {
        let head = self
            .inner
            .store
            .read_point(|conn| tasks::head(conn, &d.task_id))?
            .ok_or_else(|| Failure::Final(format!("task `{}` is gone", d.task_id)))?;
        if !head.state.is_interrupted() {
            return Err(Failure::Final(format!(
                "task is {} now; the decision came too late",
                head.state.short_name()
            )));
        }
        // A watched task lives on a peer: the decision becomes a call in the
        // durable outbox (keyed by the decision, so queuing twice is a no-op).
        if let Some((peer_id, remote_id)) = self.remote_of(&d.task_id).await? {
            let mut item = crate::store::peers::OutboxItem::due_now(
                d.id.clone(),
                "decision",
                d.id.clone(),
                json!({
                    "kind": d.kind,
                    "taskId": d.task_id,
                    "remoteTaskId": remote_id,
                    // A relay's task has our own context; the upstream infers
                    // its own from the task id. A watched task shares the peer's.
                    "contextId": if self.agent(&head.agent_id).is_some() { String::new() } else { head.context_id.clone() },
                    "messageId": format!("decision-{}", d.id),
                    "parts": decision_parts(d),
                }),
                now_ms(),
            );
            item.peer_id = Some(peer_id);
            self.inner
                .store
                .write(move |conn| crate::store::peers::enqueue(conn, &item))
                .await?;
            self.inner.outbox_ready.notify_one();
            return Ok(Delivery::Queued);
        }
        let agent: Arc<super::Agent> = self.agent(&head.agent_id).cloned().ok_or_else(|| {
            Failure::Final(format!("agent `{}` is no longer served", head.agent_id))
        })?;
        let parts = decision_parts(d);
        if agent.config.backend == BackendKind::Human {
            let message = Message::agent(parts);
            let steps = match d.kind.as_str() {
                "approve" | "continue" => vec![
                    Step::Artifact {
                        artifact: Artifact {
                            artifact_id: format!("decision-{}", d.id),
                            name: Some("decision".into()),
                            description: Some("The person's decision".into()),
                            parts: message
                                .parts
                                .iter()
                                .filter(|p| p.kind() == "data")
                                .cloned()
                                .collect(),
                            metadata: None,
                            extensions: Vec::new(),
                        },
                        append: false,
                        last_chunk: true,
                        id_given: true,
                    },
                    Step::Status(TaskState::Completed, Some(message)),
                ],
                "reply" => vec![Step::Status(TaskState::Completed, Some(message))],
                _ => vec![Step::Status(TaskState::Rejected, Some(message))],
            };
            for step in steps {
                self.apply(&d.task_id, step).await?;
            }
            return Ok(Delivery::Done);
        }
        // Any other local agent: the decision is the next user message.
        let mut message = Message::user(format!("decision-{}", d.id), parts);
        message.task_id = Some(d.task_id.clone());
        let req = SendMessageRequest {
            tenant: None,
            message,
            configuration: None,
            metadata: None,
        };
        self.send(&agent, &head.owner, req, Dialect::V1)
            .await
            .map(|_| Delivery::Done)
            .map_err(Failure::from)
    }

    /// After a restart: applies decisions that were recorded but not yet
    /// applied when the process stopped.
    pub async fn resume_decisions(&self) -> Result<usize, crate::store::Error> {
        let pending = self.inner.store.read(q::pending_decisions).await?;
        let n = pending.len();
        for d in pending {
            self.apply_decision(d).await;
        }
        Ok(n)
    }
}
