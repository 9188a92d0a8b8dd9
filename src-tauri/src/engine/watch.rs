//! Watched tasks: tasks that live on a peer, mirrored here so they reach the
//! same queue, decisions and renderer as served ones.
//!
//! A push from a peer is only a hint: whoever learns that a watched task may
//! have changed re-reads it from the peer (GetTask) and hands the result to
//! [`Engine::mirror`], which is idempotent, so duplicate and out-of-order
//! pushes, the periodic sweep and a restart all converge on the peer's truth.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::{Engine, Event, new_id};
use crate::a2a::types::{
    Message, StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use crate::clock::now_ms;
use crate::store::queue::{Opening, sync_turn_asking, sync_turn_with};
use crate::store::{NewTask, TaskHead, dispatch, peers, tasks};

/// The owner recorded on watched tasks (they belong to the person).
pub const WATCHED_OWNER: &str = "peer";

/// The longest a push about a task we do not mirror yet waits for starts on
/// its peer: longer than a start's send can take (two calls, the second
/// without our webhook if the peer refused it, each within the client's
/// timeout), so the start finishes first. A push that waits longer than
/// `[webhooks] reread_wait_ms` is answered 202 and its re-read waits in
/// the outbox.
const START_WAIT: Duration = Duration::from_secs(2 * super::peers::PEER_TIMEOUT.as_secs() + 5);

/// How long [`Engine::follow`] reads a peer's task again, at most.
const FOLLOW_FOR: Duration = Duration::from_secs(600);

/// The first pause of [`Engine::follow`], which doubles up to [`FOLLOW_MAX`].
const FOLLOW_FIRST: Duration = Duration::from_millis(100);

/// The longest pause of [`Engine::follow`].
const FOLLOW_MAX: Duration = Duration::from_secs(2);

/// Tasks being started on peers (by the person, a chain hop, a relay, or a
/// decision that a peer answers with a new task), by peer. A push from the
/// peer about the new task can arrive before the peer's answer does, so a
/// push about a task we do not mirror yet waits for the peer's starts to
/// finish: its re-read is then newer than the answer and lands after it,
/// a relay's task is linked before the push could mirror it as a task of
/// its own, and a hop is linked in the transaction that stores the mirror
/// (loop protection reads that link from the mirror's first event on).
#[derive(Default)]
pub(super) struct Starts {
    by_peer: Mutex<HashMap<String, usize>>,
    finished: Notify,
}

impl Starts {
    fn count(&self, peer_id: &str) -> usize {
        self.by_peer
            .lock()
            .map(|m| m.get(peer_id).copied().unwrap_or(0))
            .unwrap_or(0)
    }
}

/// A hop being started on a peer, until dropped.
pub(super) struct Starting {
    engine: Engine,
    peer_id: String,
}

impl Drop for Starting {
    fn drop(&mut self) {
        let starts = &self.engine.inner.starts;
        if let Ok(mut m) = starts.by_peer.lock()
            && let Some(n) = m.get_mut(&self.peer_id)
        {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.peer_id);
            }
        }
        starts.finished.notify_waiters();
    }
}

/// Re-reads in progress, by peer task: each task's re-reads (a push's, the
/// outbox's, the sweep's, a relay's follow) run one at a time, so the read
/// the peer answered last is the one mirrored last. Without this, a slow
/// answer to an earlier read (a busy peer, a retried re-read) could land
/// after a later one and turn the mirror back: park a question the person
/// had already answered, say.
#[derive(Default)]
pub(super) struct Reads {
    by_task: Mutex<HashMap<PeerTask, Arc<tokio::sync::Mutex<()>>>>,
}

/// A task on a peer: (peer id, the peer's task id).
type PeerTask = (String, String);

/// The right to re-read and mirror one peer task, until dropped.
pub(super) struct Reading {
    engine: Engine,
    key: PeerTask,
    lock: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for Reading {
    fn drop(&mut self) {
        let mutex = self.lock.take().map(|g| {
            let m = tokio::sync::OwnedMutexGuard::mutex(&g).clone();
            drop(g);
            m
        });
        if let (Some(mutex), Ok(mut map)) = (mutex, self.engine.inner.reads.by_task.lock()) {
            // Only the map and this guard still hold it: nobody waits.
            if Arc::strong_count(&mutex) == 2 {
                map.remove(&self.key);
            }
        }
    }
}

impl Engine {
    /// Waits until no other re-read of `remote_id` on `peer_id` is in
    /// progress, and holds off new ones until the result is dropped (see
    /// [`Reads`]).
    pub(super) async fn reading(&self, peer_id: &str, remote_id: &str) -> Reading {
        let key = (peer_id.to_owned(), remote_id.to_owned());
        let mutex = match self.inner.reads.by_task.lock() {
            Ok(mut map) => Some(map.entry(key.clone()).or_default().clone()),
            Err(_) => None,
        };
        let lock = match mutex {
            Some(m) => Some(m.lock_owned().await),
            None => None,
        };
        Reading {
            engine: self.clone(),
            key,
            lock,
        }
    }

    /// Reads the task `remote_id` on `peer_id` again and again (100 ms
    /// apart, doubling up to 2 s) while our copy `task_id` is under way
    /// (see [`under_way`]), for up to ten minutes, and mirrors each read.
    /// For a task whose changes no push will tell us about, and for a
    /// relay, whose caller waits on the upstream: without it such a task
    /// would move here only at the next sweep (every minute by default).
    /// Stops at the first read that fails; the sweep goes on from there.
    pub(super) async fn follow(
        &self,
        peer_id: &str,
        remote_id: &str,
        task_id: &str,
    ) -> Result<(), super::peers::PeerError> {
        let deadline = tokio::time::Instant::now() + FOLLOW_FOR;
        let mut pause = FOLLOW_FIRST;
        loop {
            let going = self
                .inner
                .store
                .read_point(|conn| under_way(conn, task_id))?;
            if !going || tokio::time::Instant::now() > deadline {
                return Ok(());
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(FOLLOW_MAX);
            self.refresh_watched(peer_id, None, remote_id).await?;
        }
    }

    /// [`Engine::follow`] on a task of its own, for a watched task whose
    /// peer does not push to us (it offers no push notifications, or
    /// refused our webhook): the person sees its question, or its result,
    /// within a couple of seconds.
    pub(super) fn follow_unpushed(&self, peer_id: &str, remote_id: &str, task_id: &str) {
        let engine = self.clone();
        let (peer_id, remote_id, task_id) =
            (peer_id.to_owned(), remote_id.to_owned(), task_id.to_owned());
        tokio::spawn(async move {
            if let Err(e) = engine.follow(&peer_id, &remote_id, &task_id).await {
                tracing::debug!(task = %task_id, "stopped following it on its peer ({e}); the sweep watches it");
            }
        });
    }

    /// Marks a task as being started on `peer_id` until the result is
    /// dropped (see [`Starts`]).
    pub(super) fn starting(&self, peer_id: &str) -> Starting {
        if let Ok(mut m) = self.inner.starts.by_peer.lock() {
            *m.entry(peer_id.to_owned()).or_default() += 1;
        }
        Starting {
            engine: self.clone(),
            peer_id: peer_id.to_owned(),
        }
    }

    /// Waits (at most [`START_WAIT`]) until no task is being started on
    /// `peer_id` or we mirror its task `remote_id`.
    pub(super) async fn await_starts(&self, peer_id: &str, remote_id: &str) {
        let starts = &self.inner.starts;
        let deadline = tokio::time::Instant::now() + START_WAIT;
        loop {
            let finished = starts.finished.notified();
            if starts.count(peer_id) == 0 {
                return;
            }
            let mirrored = self
                .inner
                .store
                .read_point(|conn| peers::watched_task(conn, peer_id, remote_id));
            if !matches!(mirrored, Ok(None)) {
                return;
            }
            if tokio::time::timeout_at(deadline, finished).await.is_err() {
                tracing::debug!(peer = %peer_id, "a push waited {START_WAIT:?} for starts on its peer; mirroring it now");
                return;
            }
        }
    }

    /// Brings our mirror of `remote` (a task on `peer_id`) up to date, creating
    /// it the first time, and returns our id for it. Parking and unparking
    /// follow from the state, exactly as for served tasks. A mirror that is
    /// already terminal is left alone.
    pub async fn mirror(
        &self,
        peer_id: &str,
        subscription: Option<&str>,
        remote: Task,
    ) -> Result<String, crate::store::Error> {
        self.mirror_linked(peer_id, subscription, remote, Along::default())
            .await
    }

    /// [`Engine::mirror`], recording `along` in the same transaction.
    pub(super) async fn mirror_linked(
        &self,
        peer_id: &str,
        subscription: Option<&str>,
        remote: Task,
        along: Along,
    ) -> Result<String, crate::store::Error> {
        let Along {
            hop,
            delivered,
            continues,
            on_disk,
        } = along;
        let max_depth = self.max_chain_depth();
        let peer_id = peer_id.to_owned();
        let subscription = subscription.map(str::to_owned);
        let engine = self.clone();
        // No savepoint: every step that can fail here is a statement on the
        // database or the read of a row it holds (a damaged row, a task
        // that vanished); the peer's task itself cannot make a write fail.
        // A mirror runs for every push, and the savepoint's page copies
        // were an eighth of its instructions.
        let mirror = move |conn: &rusqlite::Connection| {
            let now = now_ms();
            let mirrored = 'mirror: {
                let Some(id) = peers::watched_task(conn, &peer_id, &remote.id)? else {
                    // A push about a task sent from here that a stop
                    // cut short (read now, or by the outbox's re-read
                    // it left), through the subscription named after
                    // its message: the peer has it, and what owes it
                    // is settled rather than sent again. A hop's task
                    // is linked to the hop first, as its answer
                    // would have linked it, so its events know their
                    // ancestry. (The answer to a send settles its own
                    // `start` item here too.)
                    let cut_hop = match (&hop, &subscription) {
                        (None, Some(sub)) => dispatch::hop_cut_short(conn, sub)?,
                        _ => None,
                    };
                    let first = FirstSight {
                        peer_id: &peer_id,
                        subscription: subscription.as_deref(),
                        hop: hop.as_deref().or(cut_hop.as_deref()),
                        max_depth,
                        now,
                    };
                    let stored = first.store(conn, &remote)?;
                    if let Some(sub) = &subscription {
                        peers::started_by_push(conn, sub, &stored.0, now)?;
                    }
                    if let Some(h) = &cut_hop {
                        dispatch::hop_settled_by_push(conn, h, now)?;
                    }
                    break 'mirror stored;
                };
                let head = tasks::head(conn, &id)?.ok_or_else(|| {
                    crate::store::Error::Corrupt(format!("watched task {id} vanished"))
                })?;
                let old_state = head.state;
                // The peer's push about the new task may have created
                // the mirror before the answer that started it arrived:
                // the hop is linked to the mirror either way.
                if let Some(h) = &hop {
                    dispatch::link_child(conn, h, &id)?;
                }
                if old_state.is_terminal() {
                    break 'mirror (id, None);
                }
                for m in &remote.history {
                    if !tasks::has_message(conn, &id, &m.message_id)? {
                        let mut m = m.clone();
                        m.task_id = Some(id.clone());
                        tasks::append_message(conn, &id, &m)?;
                    }
                }
                if let Some(m) = &remote.status.message
                    && !tasks::has_message(conn, &id, &m.message_id)?
                {
                    let mut m = m.clone();
                    m.task_id = Some(id.clone());
                    tasks::append_message(conn, &id, &m)?;
                }
                for a in remote.artifacts.iter().flatten() {
                    tasks::put_artifact(conn, &id, a, false)?;
                }
                let (_, current) = tasks::load(conn, &id, Some(0), false)?.ok_or_else(|| {
                    crate::store::Error::Corrupt(format!("watched task {id} vanished"))
                })?;
                let status = status_of(&remote, &id);
                if current.status == status && old_state == status.state {
                    break 'mirror (id, None);
                }
                // The status's message is in the history already (above).
                let seq = tasks::record_status(conn, &head, &status, None, now)?;
                // A new status message is a new question when it waits.
                let new_question = current.status.message.as_ref().map(|m| &m.message_id)
                    != status.message.as_ref().map(|m| &m.message_id);
                sync_turn_asking(
                    conn,
                    &id,
                    &head.agent_id,
                    old_state,
                    status.state,
                    now,
                    new_question,
                )?;
                let ev = status_event(&head, &remote, status, seq);
                let entered = (old_state != ev.state).then_some(ev.state);
                dispatch::fan_out(conn, &id, seq, &ev.body, entered, max_depth, now)?;
                (id, Some(ev))
            };
            if let Some(remote_id) = &continues {
                peers::continue_in(conn, &peer_id, remote_id, &mirrored.0, now)?;
            }
            if let Some(item) = &delivered {
                peers::delivered_with(conn, item, &mirrored.0, now)?;
            }
            Ok(mirrored)
        };
        let publish = move |(_, ev): &(String, Option<Event>)| {
            if let Some(ev) = ev {
                engine.inner.bus.publish(ev.clone());
            }
        };
        let (id, _) = self
            .inner
            .store
            .write_unguarded(on_disk, mirror, publish)
            .await?;
        Ok(id)
    }

    /// The peer and remote id of a watched task (`None` for served tasks).
    pub async fn remote_of(
        &self,
        task_id: &str,
    ) -> Result<Option<(String, String)>, crate::store::Error> {
        self.inner
            .store
            .read_point(|conn| peers::remote_of(conn, task_id))
    }

    /// Watched tasks not yet finished: (our id, peer id, remote id).
    pub async fn open_watched(&self) -> Result<Vec<(String, String, String)>, crate::store::Error> {
        self.inner.store.read(peers::open_watched).await
    }
}

/// Whether the task `task_id` is still under way on its peer as far as we
/// know: submitted or working, or still asking a question the person has
/// already answered (the peer has not taken the answer up yet). Not once
/// it has ended, asks a question nobody has answered, or goes on in
/// another task.
fn under_way(conn: &rusqlite::Connection, task_id: &str) -> Result<bool, crate::store::Error> {
    let Some(head) = tasks::head(conn, task_id)? else {
        return Ok(false);
    };
    if head.state.is_terminal() || peers::continued_in(conn, task_id)?.is_some() {
        return Ok(false);
    }
    if !head.state.is_interrupted() {
        return Ok(true);
    }
    crate::store::queue::answered_turn_open(conn, task_id)
}

/// What the transaction that mirrors a peer's task records with it.
#[derive(Debug, Default)]
pub(super) struct Along {
    /// The chain hop that started the task: a new mirror is linked to it,
    /// so the mirror's first events already know their ancestry (loop
    /// protection depends on it).
    pub hop: Option<String>,
    /// The outbox item this mirror delivers (a re-read, or a task sent to
    /// the peer): marked delivered with it, one commit fewer than
    /// recording the attempt after, and no window between the two; it
    /// then refers to the mirror, and goes when retention archives it.
    pub delivered: Option<String>,
    /// The peer's id of the task this one continues: the peer answered a
    /// decision on that task with this new one (as a peer that starts a
    /// task per message does). That task is marked continued in this one.
    pub continues: Option<String>,
    /// The mirror is on the disk before the call returns, whatever
    /// `[store] durability` says: for a push, which its sender does not
    /// send again once it is acknowledged.
    pub on_disk: bool,
}

/// `remote`'s status, its message filed under our id `id`.
fn status_of(remote: &Task, id: &str) -> TaskStatus {
    let mut status = remote.status.clone();
    if let Some(m) = status.message.as_mut() {
        m.task_id = Some(id.to_owned());
    }
    status
}

/// The event that announces the status change of the mirror `head` to
/// `status` (event `seq`).
fn status_event(head: &TaskHead, remote: &Task, status: TaskStatus, seq: i64) -> Event {
    let state = status.state;
    Event {
        task_id: head.id.clone(),
        agent_id: head.agent_id.clone(),
        owner: head.owner.clone(),
        seq,
        state,
        body: StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: head.id.clone(),
            context_id: remote.context_id.clone(),
            status,
            metadata: None,
        }),
    }
}

/// A peer's task seen for the first time: its mirror is created as it
/// stands (status, history, artifacts) rather than created submitted and
/// then caught up, which cost an update of the new row per message and
/// one more for the status.
struct FirstSight<'a> {
    peer_id: &'a str,
    subscription: Option<&'a str>,
    hop: Option<&'a str>,
    max_depth: i64,
    now: i64,
}

impl FirstSight<'_> {
    fn store(
        &self,
        conn: &rusqlite::Connection,
        remote: &Task,
    ) -> Result<(String, Option<Event>), crate::store::Error> {
        let id = new_id();
        let status = status_of(remote, &id);
        // Catching up from `submitted` reported a change unless the peer's
        // task was exactly that: the same here.
        let placeholder = TaskStatus {
            state: TaskState::Submitted,
            message: None,
            timestamp: remote.status.timestamp.clone(),
        };
        let changed = status != placeholder;
        // The history, then the status's message, each message once.
        let mut history: Vec<Message> = Vec::with_capacity(remote.history.len() + 1);
        for m in remote.history.iter().chain(remote.status.message.as_ref()) {
            if !history.iter().any(|h| h.message_id == m.message_id) {
                let mut m = m.clone();
                m.task_id = Some(id.clone());
                history.push(m);
            }
        }
        let head = tasks::create_mirror(
            conn,
            &NewTask {
                id: id.clone(),
                agent_id: self.peer_id.to_owned(),
                owner: WATCHED_OWNER.into(),
                context_id: remote.context_id.clone(),
                status: if changed { status.clone() } else { placeholder },
                metadata: remote.metadata.clone(),
                now_ms: self.now,
                dialect: "v1",
            },
            &history,
            i64::from(changed),
            &tasks::Mirrored {
                peer_id: self.peer_id,
                remote_id: &remote.id,
                subscription: self.subscription,
            },
        )?;
        if let Some(h) = self.hop {
            dispatch::link_child(conn, h, &id)?;
        }
        for a in remote.artifacts.iter().flatten() {
            tasks::put_artifact(conn, &id, a, false)?;
        }
        if !changed {
            return Ok((id, None));
        }
        let from = TaskState::Submitted;
        let preview = crate::store::queue::preview_of_newest_first(history.iter().rev());
        let to = status.state;
        let opening = Opening {
            preview,
            source: tasks::WATCHED,
        };
        sync_turn_with(conn, &id, &head.agent_id, from, to, self.now, Some(opening))?;
        // Only this write can have stored anything with the mirror: it has
        // no push config, and its peer's chain rules are all it can fire.
        dispatch::fan_out_created(
            conn,
            &id,
            dispatch::RulesOf::Peer(self.peer_id),
            remote.metadata.as_ref(),
            (from != to).then_some(to),
            self.max_depth,
            self.now,
        )?;
        Ok((id, Some(status_event(&head, remote, status, 1))))
    }
}
