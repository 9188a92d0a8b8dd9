//! The `relay` backend: a local agent in front of an upstream peer.
//!
//! Callers talk to Countersign; each of their messages is forwarded to the
//! upstream peer, whose task is mirrored onto the caller's task (our ids; the
//! link kept on the task). When the upstream asks a question
//! (`input-required`/`auth-required`) the caller sees it, and the person sees
//! it parked in the queue: whoever answers first wins — the caller's answer
//! claims the turn like a decision, so the other gets a clear "already
//! answered".

use std::sync::Arc;

use super::peers::PeerError;
use super::{Agent, Engine, new_id};
use crate::a2a::Error;
use crate::a2a::types::{
    Message, SendMessageConfiguration, SendMessageRequest, SendMessageResponse, TaskState,
};
use crate::clock::now_ms;
use crate::store::queue::{self as q, DecisionRecord};
use crate::store::{peers, tasks};

impl Engine {
    /// Where peers reach this server's `/webhooks/` (set once the server is bound).
    pub fn set_webhook_base(&self, base: String) {
        let _ = self.inner.webhook_base.set(base);
    }

    /// A caller's answer to a parked relay task claims its open turn, so a
    /// person's later decision is "already decided" — or, if the person was
    /// first, the caller hears that the question is already answered.
    pub(super) async fn claim_for_caller(&self, task_id: &str, msg: &Message) -> Result<(), Error> {
        let (tid, text) = (task_id.to_owned(), msg.text());
        self.inner
            .store
            .write(move |conn| {
                let Some(turn) = q::open_turn(conn, &tid)? else {
                    return Ok(Ok(()));
                };
                if let Some(first) = q::decision_of_turn(conn, &turn.id)? {
                    return Ok(Err(Error::UnsupportedOperation(format!(
                        "a person already answered this question ({} by {}); the task goes on with that answer",
                        first.kind, first.actor
                    ))));
                }
                let Some(head) = tasks::head(conn, &tid)? else {
                    return Ok(Ok(()));
                };
                let record = DecisionRecord {
                    id: new_id(),
                    turn_id: turn.id,
                    task_id: tid.clone(),
                    agent_id: head.agent_id,
                    kind: "reply".into(),
                    payload: serde_json::json!({"text": text, "by": "caller"}),
                    actor: "caller".into(),
                    created_ms: now_ms(),
                    delivery: "delivered".into(),
                    delivery_error: None,
                    delivered_ms: Some(now_ms()),
                };
                q::insert_decision(conn, &record, &format!("reply {text}"))?;
                Ok(Ok(()))
            })
            .await?
    }

    /// Forwards a caller's message to the relay's upstream peer and follows
    /// the upstream task until it settles, mirroring it onto `task_id`.
    pub(super) async fn relay(&self, agent: Arc<Agent>, task_id: String, message: Message) {
        if let Err(e) = self.forward(&agent, &task_id, message).await {
            tracing::warn!(task = %task_id, "relay to the upstream agent failed: {e}");
            let note = Message::agent(vec![crate::a2a::types::Part::text(format!(
                "The upstream agent could not be reached: {e}"
            ))]);
            let step = super::backend::Step::Status(TaskState::Failed, Some(note));
            let _ = self.apply(&task_id, step).await;
        }
    }

    async fn forward(
        &self,
        agent: &Agent,
        task_id: &str,
        mut message: Message,
    ) -> Result<(), PeerError> {
        let upstream = agent
            .config
            .upstream
            .clone()
            .ok_or_else(|| PeerError::Invalid("relay without an upstream".into()))?;
        let peer = self.peer_card(&upstream, false).await?;
        let (rec, card) = &*peer;
        let auth = super::peers::auth_of(&rec.auth);
        let link = self
            .inner
            .store
            .read_point(|conn| peers::remote_of(conn, task_id))?;
        let mut configuration = SendMessageConfiguration {
            return_immediately: true,
            ..Default::default()
        };
        message.context_id = None;
        message.task_id = link.as_ref().map(|(_, remote_id)| remote_id.clone());
        let mut sub_id = match link {
            Some(_) => None,
            None => {
                let sub = self
                    .watch_by_push(&upstream, card, &mut configuration, None)
                    .await?;
                if sub.is_some() {
                    // On the disk before the upstream hears of it.
                    self.inner.store.sync_now().await?;
                }
                sub
            }
        };
        let req = SendMessageRequest {
            tenant: None,
            message,
            configuration: Some(configuration),
            metadata: None,
        };
        // A push about a new upstream task waits until it is linked to
        // ours (or it would be mirrored as a task of its own), and a push
        // about a known one waits until this answer is mirrored (or the
        // answer, older than what that push reads, would turn it back).
        // Any message may start a new task there: an upstream that starts
        // one per message (FastA2A) answers a follow-up with a new task.
        let starting = self.starting(&upstream);
        let mut one_at_a_time = match &link {
            Some((_, remote_id)) => Some(self.reading(&upstream, remote_id).await),
            None => None,
        };
        let remote = match self
            .send_watched(&upstream, card, &auth, req, &mut sub_id, None)
            .await?
        {
            SendMessageResponse::Task(t) => t,
            SendMessageResponse::Message(m) => {
                // The upstream answered directly: that answer completes the task.
                let step = super::backend::Step::Status(
                    TaskState::Completed,
                    Some(Message {
                        message_id: new_id(),
                        ..m
                    }),
                );
                self.apply(task_id, step)
                    .await
                    .map_err(|e| PeerError::Invalid(e.to_string()))?;
                return Ok(());
            }
        };
        // The upstream's task this answer is about: the linked one going
        // on, or a new one, which our task follows from now on (the caller
        // talks to one task here, whatever the upstream does).
        let new_upstream_task = link.as_ref().is_none_or(|(_, r)| *r != remote.id);
        if new_upstream_task {
            drop(one_at_a_time.take());
            one_at_a_time = Some(self.reading(&upstream, &remote.id).await);
            // Only a push that waited out a start longer than any answer
            // can take has mirrored the new task on its own.
            let rid = remote.id.clone();
            let stray = self
                .inner
                .store
                .read_point(|conn| peers::watched_task(conn, &upstream, &rid))?;
            if let Some(stray) = stray {
                return Err(PeerError::Invalid(format!(
                    "the upstream answered so late that its push about the task ({rid}) came first; it is watched as task {stray}"
                )));
            }
            let (tid, peer, rid, sub) = (
                task_id.to_owned(),
                upstream.clone(),
                remote.id.clone(),
                sub_id.clone(),
            );
            self.inner
                .store
                .write(move |conn| peers::link_remote(conn, &tid, &peer, &rid, sub.as_deref()))
                .await?;
        }
        let remote_id = remote.id.clone();
        self.mirror(&upstream, sub_id.as_deref(), remote).await?;
        drop(one_at_a_time);
        drop(starting);
        // Follow until the upstream task settles (pushes and the sweep also
        // update it; mirroring is idempotent).
        self.follow(&upstream, &remote_id, task_id).await
    }
}
