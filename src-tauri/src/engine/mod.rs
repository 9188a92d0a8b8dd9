//! The engine: the only place that changes task state. A2A handlers, the UI
//! API, the desktop shell and the CLI are thin adapters over it.
//!
//! Every change is written through the store's single writer and published
//! on the [`Bus`] right after its commit, so what a subscriber sees is always
//! already durable, in the order it was stored.

pub mod backend;
pub mod decide;
pub mod dispatch;
pub mod events;
pub mod lifecycle;
pub mod peer_cache;
pub mod peers;
pub mod queue;
pub mod relay;
pub mod retention;
pub mod watch;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::a2a::Error;
use crate::a2a::types::{
    ListPushConfigsResponse, ListTasksRequest, ListTasksResponse, Message, PartContent,
    SendMessageRequest, SendMessageResponse, StreamResponse, Task, TaskArtifactUpdateEvent,
    TaskPushNotificationConfig, TaskState, TaskStatus, TaskStatusUpdateEvent, format_timestamp,
    parse_timestamp,
};
use crate::a2a::v0_3::Dialect;
use crate::clock::now_ms;
use crate::config::{AgentConfig, Limits};
use crate::dispatch::ssrf::Refused;
use crate::store::{self, ListFilter, NewTask, Store, TaskHead, tasks};
use backend::{Backend, Plan, Step};
pub use events::{Bus, Event, Subscription};

/// A local agent: its configuration and its backend.
pub struct Agent {
    pub config: AgentConfig,
    /// `{id}`, or `{tenant}/{id}` in a tenant: the key its tasks are stored
    /// under. `/` is never in a slug, so no two tenants share a key, and
    /// every task lookup (which filters by it) stays within one tenant.
    key: String,
    backend: Box<dyn Backend>,
}

impl Agent {
    /// The agent's key: its id, prefixed `{tenant}/` in a tenant. This is
    /// also its path under `/a2a/`.
    pub fn id(&self) -> &str {
        &self.key
    }

    /// Its tenant; `None` for the default tenant.
    pub fn tenant(&self) -> Option<&str> {
        self.config.tenant.as_deref()
    }
}

/// The result of accepting a message: the first answer, and for a task the
/// live events that follow it.
pub struct Started {
    /// The Message reply, or the Task as it stood right after the message
    /// was committed.
    pub reply: SendMessageResponse,
    /// Sequence number of the last event the snapshot includes.
    pub seq: i64,
    /// Events of the task after the snapshot.
    pub events: Option<Subscription>,
    /// The run the message started, if any.
    pub run: Option<JoinHandle<()>>,
    /// For [`Engine::send_settled`]: the steps the backend could take at
    /// once settled the task (terminal or interrupted), and `reply` is the
    /// task as it stands after them. The caller can answer with it as is.
    pub settled: bool,
    /// For a v1.0 caller, when the task was settled by the one status
    /// stored with it: `reply` as stored (the JSON written then), which
    /// the answer is written from instead of writing `reply` again.
    pub stored: Option<tasks::CreatedTask>,
}

/// The engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    bus: Bus,
    /// Woken when a call is queued in the outbox.
    outbox_ready: tokio::sync::Notify,
    /// A peer's card changed or was accepted (after the commit).
    peer_notices: tokio::sync::broadcast::Sender<peers::PeerNotice>,
    /// The A2A client for peers, made on first use.
    client: std::sync::OnceLock<crate::a2a::client::A2aClient>,
    /// Where peers reach our `/webhooks/` (known once the server is bound).
    webhook_base: std::sync::OnceLock<String>,
    dispatch: std::sync::OnceLock<dispatch::Dispatch>,
    retention: std::sync::OnceLock<Arc<retention::Retention>>,
    agents: Vec<Arc<Agent>>,
    limits: Limits,
    /// Counts of recent queue pages (see [`queue::CountsCache`]).
    queue_counts: queue::CountsCache,
    /// Chain hops being started on peers (see [`watch::Starts`]).
    starts: watch::Starts,
    /// Re-reads of peer tasks in progress (see [`watch::Reads`]).
    reads: watch::Reads,
    /// Peers and subscriptions as last read (see [`peer_cache`]).
    peer_cache: peer_cache::PeerCache,
    /// When this engine was made: outbox items older than that may have
    /// been in flight when the last run stopped.
    started_ms: i64,
}

impl From<store::Error> for Error {
    fn from(e: store::Error) -> Self {
        tracing::error!("storage failure: {e}");
        Error::Storage(storage_failure(&e))
    }
}

/// What a caller is told of a storage failure (the failure itself goes to
/// the log). A write that failed as a whole, as on a full disk, changed
/// nothing, and the caller is told so: it is safe to send again.
pub fn storage_failure(e: &store::Error) -> String {
    match e {
        store::Error::NotStored(why) => {
            format!("storage failure, nothing was stored: {why}; see the server log")
        }
        store::Error::Sqlite(rusqlite::Error::SqliteFailure(f, _))
            if f.code == rusqlite::ErrorCode::DiskFull =>
        {
            "storage failure, nothing was stored: the disk is full; see the server log".into()
        }
        _ => "storage failure; see the server log".into(),
    }
}

/// Applies one step to the task `h` heads, in the caller's transaction:
/// checks the move, stores it with its event and what the event owes.
/// `Ok(Err(_))` refuses the step (nothing written); `Ok(Ok(None))` is a step
/// with nothing to store.
fn apply_step(
    conn: &rusqlite::Connection,
    h: &TaskHead,
    step: Step,
    max_depth: i64,
    now: i64,
) -> Result<Result<Option<Event>, Error>, store::Error> {
    let tid = &h.id;
    let (state, body, seq) = match step {
        Step::Status(state, message) => {
            if !lifecycle::can_move(h.state, state) {
                return Ok(Err(Error::UnsupportedOperation(format!(
                    "task `{tid}` cannot move from {} to {}",
                    h.state.short_name(),
                    state.short_name()
                ))));
            }
            let (status, body) = status_change(tid, &h.context_id, state, message, now);
            let seq = tasks::record_status(conn, h, &status, status.message.as_ref(), now)?;
            // A status step is the agent speaking: waiting again in the
            // same state after the person answered is a new question.
            crate::store::queue::sync_turn_asking(
                conn,
                tid,
                &h.agent_id,
                h.state,
                state,
                now,
                true,
            )?;
            (state, body, seq)
        }
        Step::Artifact {
            artifact,
            append,
            last_chunk,
            ..
        } => {
            if h.state.is_terminal() {
                return Ok(Err(Error::UnsupportedOperation(format!(
                    "task `{tid}` is {}; no more artifacts",
                    h.state.short_name()
                ))));
            }
            tasks::put_artifact(conn, tid, &artifact, append)?;
            let body = StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: tid.clone(),
                context_id: h.context_id.clone(),
                artifact,
                append,
                last_chunk,
                metadata: None,
            });
            let seq = tasks::next_seq(conn, tid)?;
            (h.state, body, seq)
        }
        Step::Delay(_) => return Ok(Ok(None)),
    };
    let entered = (state != h.state).then_some(state);
    store::dispatch::fan_out(conn, tid, seq, &body, entered, max_depth, now)?;
    Ok(Ok(Some(Event {
        task_id: tid.clone(),
        agent_id: h.agent_id.clone(),
        owner: h.owner.clone(),
        seq,
        state,
        body,
    })))
}

/// The status a step sets on the task `task_id` (its message tagged with
/// the task) and the event that reports it.
fn status_change(
    task_id: &str,
    context_id: &str,
    state: TaskState,
    message: Option<Message>,
    now: i64,
) -> (TaskStatus, StreamResponse) {
    let message = message.map(|mut m| {
        m.task_id = Some(task_id.to_owned());
        m.context_id = Some(context_id.to_owned());
        m
    });
    let status = TaskStatus {
        state,
        message,
        timestamp: Some(format_timestamp(now)),
    };
    let body = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: task_id.to_owned(),
        context_id: context_id.to_owned(),
        status: status.clone(),
        metadata: None,
    });
    (status, body)
}

/// The first wait before work our own storage refused (a full disk) is
/// tried again; each later wait doubles, up to [`STORE_RETRY_MAX`].
pub(crate) const STORE_RETRY_FIRST: Duration = Duration::from_secs(1);
pub(crate) const STORE_RETRY_MAX: Duration = Duration::from_secs(60);

/// The step that ends a run: a task still submitted or working completes.
const SETTLE: Step = Step::Status(TaskState::Completed, None);

/// What the transaction that created a task applied with it.
struct Applied {
    /// The last event's sequence number.
    seq: i64,
    /// The events of the steps applied, in order (shared with the bus
    /// once committed: copying each took 1% of a durable SendMessage).
    events: Vec<Arc<Event>>,
    /// A step was refused: the run ends there.
    stopped: bool,
}

impl Applied {
    /// Applies `step` to the task `head` heads and keeps its event; false
    /// when the step was refused (the run would have stopped there too).
    fn take(
        &mut self,
        conn: &rusqlite::Connection,
        head: &mut TaskHead,
        step: Step,
        max_depth: i64,
        now: i64,
    ) -> Result<bool, store::Error> {
        match apply_step(conn, head, step, max_depth, now)? {
            Ok(Some(ev)) => {
                head.state = ev.state;
                head.last_seq = ev.seq;
                head.updated_ms = now;
                self.seq = ev.seq;
                self.events.push(Arc::new(ev));
            }
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(task = %head.id, "run stopped: {e}");
                self.stopped = true;
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Creates a task already moved by its first status step: the row holds
/// that status, the history the caller's message (the first of `task`'s)
/// and the step's, and the turn it opens takes its preview from them. Both
/// events (the task, then the status change) are fanned out as if the step
/// had been applied after the creation, and the second is kept in
/// `applied`. Returns the head and the first event, which holds `task`.
fn create_with_status(
    conn: &rusqlite::Connection,
    mut new: NewTask,
    task: Task,
    (state, message): (TaskState, Option<Message>),
    applied: &mut Applied,
    max_depth: i64,
) -> Result<(TaskHead, StreamResponse, tasks::CreatedBodies), store::Error> {
    let now = new.now_ms;
    let (status, body) = status_change(&new.id, &new.context_id, state, message, now);
    new.status = status;
    let history: Vec<&Message> = task.history.iter().chain(&new.status.message).collect();
    let preview = store::queue::preview_of_newest_first(history.iter().rev().copied());
    let (head, bodies) = tasks::create_with_history(conn, &new, &history, 2)?;
    let first = StreamResponse::Task(task);
    let from = TaskState::Submitted;
    store::queue::sync_turn_with(
        conn,
        &head.id,
        &head.agent_id,
        from,
        state,
        now,
        Some(store::queue::Opening::served(preview)),
    )?;
    // A task this write creates owes no push notification (it has no
    // config: this path is not taken with one sent inline), only hops.
    let entered = (state != from).then_some(state);
    store::dispatch::fan_out_created(
        conn,
        &head.id,
        store::dispatch::RulesOf::Agent(&head.agent_id),
        new.metadata.as_ref(),
        entered,
        max_depth,
        now,
    )?;
    applied.seq = 2;
    applied.events.push(Arc::new(Event {
        task_id: head.id.clone(),
        agent_id: head.agent_id.clone(),
        owner: head.owner.clone(),
        seq: 2,
        state,
        body,
    }));
    Ok((head, first, bodies))
}

/// An `append` chunk without its own id extends the artifact produced last
/// in the run; `last` tracks that artifact.
fn carry_artifact_id(step: &mut Step, last: &mut Option<String>) {
    if let Step::Artifact {
        artifact,
        append,
        id_given,
        ..
    } = step
    {
        if *append
            && !*id_given
            && let Some(id) = last
        {
            artifact.artifact_id = id.clone();
        }
        *last = Some(artifact.artifact_id.clone());
    }
}

/// The task after `events` (status changes only) were applied to `task`,
/// and true, if they settled it (terminal or interrupted); otherwise `task`
/// as it was, and false. Not settled either when an artifact changed: its
/// stored form (appends merged) is read back instead.
fn settled_task(mut task: Task, events: &[Arc<Event>]) -> (Task, bool) {
    let settles = events
        .last()
        .is_some_and(|last| last.state.is_terminal() || last.state.is_interrupted());
    let statuses = events
        .iter()
        .all(|ev| matches!(ev.body, StreamResponse::StatusUpdate(_)));
    if !(settles && statuses) {
        return (task, false);
    }
    for ev in events {
        if let StreamResponse::StatusUpdate(u) = &ev.body {
            if let Some(m) = &u.status.message {
                task.history.push(m.clone());
            }
            task.status = u.status.clone();
        }
    }
    task.artifacts = Some(Vec::new());
    (task, true)
}

fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

impl Engine {
    /// Builds the engine over an open store, one [`Agent`] per configured agent.
    pub fn new(store: Store, agents: &[AgentConfig], limits: Limits) -> Engine {
        let agents = agents
            .iter()
            .map(|c| {
                Arc::new(Agent {
                    key: crate::config::agent_key(c.tenant.as_deref(), c.id.get_ref()),
                    config: c.clone(),
                    backend: backend::from_config(c),
                })
            })
            .collect();
        Engine {
            inner: Arc::new(Inner {
                store,
                bus: Bus::default(),
                outbox_ready: tokio::sync::Notify::new(),
                peer_notices: tokio::sync::broadcast::channel(64).0,
                client: std::sync::OnceLock::new(),
                webhook_base: std::sync::OnceLock::new(),
                dispatch: std::sync::OnceLock::new(),
                retention: std::sync::OnceLock::new(),
                agents,
                limits,
                queue_counts: queue::CountsCache::default(),
                starts: watch::Starts::default(),
                reads: watch::Reads::default(),
                peer_cache: peer_cache::PeerCache::default(),
                started_ms: now_ms(),
            }),
        }
    }

    pub fn agents(&self) -> &[Arc<Agent>] {
        &self.inner.agents
    }

    /// The agent with this key (`{id}`, or `{tenant}/{id}` in a tenant).
    pub fn agent(&self, id: &str) -> Option<&Arc<Agent>> {
        self.inner.agents.iter().find(|a| a.id() == id)
    }

    /// The agent `id` of `tenant` (`None`: the default tenant), and no other.
    pub fn agent_in(&self, tenant: Option<&str>, id: &str) -> Option<&Arc<Agent>> {
        self.inner
            .agents
            .iter()
            .find(|a| a.tenant() == tenant && a.config.id.get_ref() == id)
    }

    pub fn bus(&self) -> &Bus {
        &self.inner.bus
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// After a restart: runs of scripted agents that were cut off mid-way
    /// cannot resume, so their tasks fail with a message saying why rather
    /// than hang in `working` for ever; parked tasks are untouched;
    /// decisions recorded but not yet applied are applied now; and tasks
    /// sent to peers whose answers the stop cut off go out again, at once,
    /// or after `resend_wait` when the peer's push may yet show it has
    /// them (see [`store::peers::release_cut_sends`]); those the peer
    /// lists meanwhile are settled at once ([`Engine::ask_about_cut_sends`]),
    /// and any is asked about again before it goes.
    pub async fn recover(&self, resend_wait: Duration) -> Result<usize, Error> {
        let scripted: Vec<String> = self
            .agents()
            .iter()
            .filter(|a| a.config.backend == crate::config::BackendKind::Scripted)
            .map(|a| a.id().to_owned())
            .collect();
        let stuck: Vec<String> = self
            .inner
            .store
            .read(tasks::active_served)
            .await?
            .into_iter()
            .filter(|(_, agent)| scripted.contains(agent))
            .map(|(id, _)| id)
            .collect();
        for id in &stuck {
            let msg = Message::agent(vec![crate::a2a::types::Part::text(
                "Countersign restarted while this task was running; it cannot resume.",
            )]);
            self.apply(id, Step::Status(TaskState::Failed, Some(msg)))
                .await?;
        }
        // Tasks sent to peers that the stop cut short go out again, now or
        // once the peer's push had time to show it has them.
        match self
            .inner
            .store
            .write(move |conn| {
                let wait = i64::try_from(resend_wait.as_millis()).unwrap_or(i64::MAX / 2);
                store::peers::release_cut_sends(conn, now_ms(), wait)
            })
            .await
        {
            Ok(n) => {
                if n > 0 {
                    tracing::info!(
                        "the last stop cut off {n} task(s) sent to peers; each goes out again unless the peer shows it has it"
                    );
                }
                // Those waiting for a push may be settled at once.
                self.ask_about_cut_sends();
            }
            // They go out when their lease ends instead.
            Err(e) => tracing::warn!("cannot make the sends cut off by the last stop due: {e}"),
        }
        // Decisions recorded before the stop but not yet applied.
        let resumed = self.resume_decisions().await?;
        if resumed > 0 {
            tracing::info!("applied {resumed} decision(s) recorded before the last stop");
        }
        Ok(stuck.len())
    }

    fn check_message(&self, agent: &Agent, m: &Message) -> Result<(), Error> {
        if m.role != crate::a2a::types::Role::User {
            return Err(Error::InvalidParams(
                "message.role must be ROLE_USER".into(),
            ));
        }
        let limits = &self.inner.limits;
        if m.parts.len() > limits.max_parts {
            return Err(Error::InvalidParams(format!(
                "message has {} parts; the limit is {}",
                m.parts.len(),
                limits.max_parts
            )));
        }
        for p in &m.parts {
            let media = match (&p.media_type, &p.content) {
                (Some(t), _) if !t.is_empty() => t.as_str(),
                (_, PartContent::Text(_)) => "text/plain",
                (_, PartContent::Data(_)) => "application/json",
                _ => continue,
            };
            if !accepts(&agent.config.input_modes, media) {
                return Err(Error::ContentTypeNotSupported(format!(
                    "agent `{}` does not accept `{media}`; it accepts {}",
                    agent.id(),
                    agent.config.input_modes.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// Accepts a message for `agent` from `owner`: creates or continues a
    /// task (committed before this returns) and starts its run. `dialect` is
    /// the one the request came in; pre-0.3 clients name new tasks themselves.
    pub async fn send(
        &self,
        agent: &Arc<Agent>,
        owner: &str,
        req: SendMessageRequest,
        dialect: Dialect,
    ) -> Result<Started, Error> {
        self.send_with(agent, owner, req, dialect, false).await
    }

    /// Like [`Engine::send`], for a caller that answers once the task
    /// settles (blocking SendMessage): the steps a new task's backend takes
    /// at once (up to its first delay) are committed in the transaction that
    /// creates the task, so a task that settles at once costs one commit and
    /// no read, and [`Started::settled`] holds it.
    pub async fn send_settled(
        &self,
        agent: &Arc<Agent>,
        owner: &str,
        req: SendMessageRequest,
        dialect: Dialect,
    ) -> Result<Started, Error> {
        self.send_with(agent, owner, req, dialect, true).await
    }

    async fn send_with(
        &self,
        agent: &Arc<Agent>,
        owner: &str,
        req: SendMessageRequest,
        dialect: Dialect,
        inline: bool,
    ) -> Result<Started, Error> {
        let mut msg = req.message;
        self.check_message(agent, &msg)?;
        // Checked before anything is stored, not when the answer is built.
        history_arg(req.configuration.as_ref().and_then(|c| c.history_length))?;
        // A push config set with the message is checked now (the caller
        // hears of a refused URL at once) and stored with the task.
        let inline_push = match req
            .configuration
            .as_ref()
            .and_then(|c| c.task_push_notification_config.clone())
        {
            Some(cfg) => Some(self.check_push_config(cfg).await?),
            None => None,
        };
        let push_dialect = dialect_name(dialect);
        let max_depth = self.max_chain_depth();
        // A pre-0.3 client picks the id of a new task itself: an unknown id
        // creates the task, a known one continues it.
        let mut chosen_id = None;
        if dialect == Dialect::Legacy
            && let Some(tid) = msg.task_id.clone()
            && self
                .inner
                .store
                .read_point(|conn| tasks::head(conn, &tid))?
                .is_none()
        {
            check_client_task_id(&tid)?;
            msg.task_id = None;
            chosen_id = Some(tid);
        }
        let continuing = msg.task_id.is_some();
        let relay = agent.config.backend == crate::config::BackendKind::Relay;
        if relay && let Some(tid) = &msg.task_id {
            // Ownership is checked below; a claim on someone else's task is
            // impossible because it has no open turn we would find for them.
            self.owned_head(agent, owner, tid).await?;
            self.claim_for_caller(tid, &msg).await?;
        }
        let forwarded = relay.then(|| msg.clone());
        let plan = agent.backend.plan(&msg, continuing);
        let steps = match plan {
            Plan::Reply(mut reply) => {
                if let Some(task_id) = &msg.task_id {
                    let head = self.owned_head(agent, owner, task_id).await?;
                    reply.context_id = Some(head.context_id);
                    reply.task_id = Some(head.id);
                } else {
                    reply.context_id = Some(msg.context_id.clone().unwrap_or_else(new_id));
                }
                return Ok(Started {
                    reply: SendMessageResponse::Message(reply),
                    seq: 0,
                    events: None,
                    run: None,
                    settled: false,
                    stored: None,
                });
            }
            Plan::Run(steps) => steps,
        };
        let agent_id = agent.id().to_owned();
        let owner_s = owner.to_owned();
        let mut steps = steps;
        let mut last_artifact = None;
        let (task_id, rx, seq, snapshot, settled, stored) = if let Some(task_id) =
            msg.task_id.clone()
        {
            let max_history = self.inner.limits.max_history as i64;
            let max_push_configs = self.inner.limits.max_push_configs;
            let (aid, own, tid) = (agent_id.clone(), owner_s.clone(), task_id.clone());
            let fresh = self
                .inner
                .store
                .write(move |conn| {
                    let Some(h) = tasks::head(conn, &tid)?.filter(|h| h.agent_id == aid && h.owner == own) else {
                        return Ok(Err(Error::TaskNotFound(tid)));
                    };
                    if let Some(c) = &msg.context_id
                        && *c != h.context_id
                    {
                        return Ok(Err(Error::InvalidParams(format!(
                            "message.contextId `{c}` does not match the context `{}` of task `{tid}`",
                            h.context_id
                        ))));
                    }
                    msg.context_id = Some(h.context_id.clone());
                    // A message this task already has, the same id with the
                    // same content, is a retry (the caller did not hear our
                    // answer): answer with the task as it is, and do not act
                    // on it twice. An id reused for other content is another
                    // message (some clients, the A2A TCK among them, reuse
                    // one id for a whole conversation).
                    let encoded = tasks::EncodedMessage::new(&msg)?;
                    if tasks::holds_message(conn, &tid, &encoded)? {
                        return Ok(Ok(false));
                    }
                    if h.state.is_terminal() {
                        return Ok(Err(Error::UnsupportedOperation(format!(
                            "task `{tid}` is {} and cannot accept further messages",
                            h.state.short_name()
                        ))));
                    }
                    if h.history_len >= max_history {
                        return Ok(Err(Error::InvalidParams(format!(
                            "task `{tid}` already holds {max_history} messages, the most one task may keep"
                        ))));
                    }
                    if let Some(mut cfg) = inline_push {
                        cfg.task_id = Some(tid.clone());
                        let id = cfg.id.get_or_insert_with(|| tid.clone());
                        if !tasks::push_config_fits(conn, &tid, id, max_push_configs)? {
                            return Ok(Err(too_many_push_configs(&tid, max_push_configs)));
                        }
                        tasks::put_push_config(conn, &cfg, push_dialect, now_ms())?;
                    }
                    tasks::append_encoded(conn, &tid, &encoded)?;
                    Ok(Ok(true))
                })
                .await??;
            let rx = self.inner.bus.subscribe_task(&task_id);
            let (head, task) = self.load_owned(agent, owner, &task_id, None).await?;
            if !fresh {
                return Ok(Started {
                    reply: SendMessageResponse::Task(task),
                    seq: head.last_seq,
                    events: Some(rx),
                    run: None,
                    settled: false,
                    stored: None,
                });
            }
            (task_id, Some(rx), head.last_seq, task, false, None)
        } else {
            let id = chosen_id.unwrap_or_else(new_id);
            let context_id = msg.context_id.clone().unwrap_or_else(new_id);
            msg.task_id = Some(id.clone());
            msg.context_id = Some(context_id.clone());
            let now = now_ms();
            let task = Task {
                id: id.clone(),
                context_id: context_id.clone(),
                status: TaskStatus {
                    state: TaskState::Submitted,
                    message: None,
                    timestamp: Some(format_timestamp(now)),
                },
                artifacts: None,
                history: vec![msg],
                metadata: req.metadata.clone(),
            };
            let new = NewTask {
                id: id.clone(),
                agent_id: agent_id.clone(),
                owner: owner_s.clone(),
                context_id,
                status: task.status.clone(),
                metadata: req.metadata,
                now_ms: now,
                dialect: dialect_name(dialect),
            };
            // The steps taken with the creation: up to the first delay.
            let now_steps: Vec<Step> = if inline && forwarded.is_none() {
                let n = steps
                    .iter()
                    .position(|s| matches!(s, Step::Delay(_)))
                    .unwrap_or(steps.len());
                let mut taken: Vec<Step> = steps.drain(..n).collect();
                for step in &mut taken {
                    carry_artifact_id(step, &mut last_artifact);
                }
                taken
            } else {
                Vec::new()
            };
            let rest_empty = steps.is_empty();
            let engine = self.clone();
            // Every step of this job that can fail is a statement on the
            // database (or a read of a row it wrote), so it needs no
            // savepoint of its own: the most frequent job skips that copy.
            let (created, first, bodies) = self
                .inner
                .store
                .write_then_unguarded(
                    move |conn| {
                        let mut now_steps = now_steps.into_iter().peekable();
                        let mut applied = Applied {
                            seq: 1,
                            events: Vec::new(),
                            stopped: false,
                        };
                        // The first status step is stored with the task, one
                        // row write instead of an insert and an update. Not
                        // with a push config: an older dialect's notification
                        // of the first event carries the task as stored then.
                        let fused = match now_steps.peek() {
                            Some(Step::Status(state, _))
                                if inline_push.is_none()
                                    && lifecycle::can_move(TaskState::Submitted, *state) =>
                            {
                                now_steps.next()
                            }
                            _ => None,
                        };
                        let took_first = fused.is_some();
                        let (mut head, first, bodies) =
                            if let Some(Step::Status(state, message)) = fused {
                                let (head, first, bodies) = create_with_status(
                                    conn,
                                    new,
                                    task,
                                    (state, message),
                                    &mut applied,
                                    max_depth,
                                )?;
                                (head, first, Some(bodies))
                            } else {
                                let head = tasks::create(conn, &new, &task.history[0])?;
                                let first = StreamResponse::Task(task);
                                // Stored before the first event goes out: it is
                                // owed that event too.
                                if let Some(mut cfg) = inline_push {
                                    cfg.task_id = Some(new.id.clone());
                                    cfg.id.get_or_insert_with(|| new.id.clone());
                                    tasks::put_push_config(conn, &cfg, push_dialect, now)?;
                                }
                                store::dispatch::fan_out(
                                    conn,
                                    &new.id,
                                    head.last_seq,
                                    &first,
                                    None,
                                    max_depth,
                                    now,
                                )?;
                                (head, first, None)
                            };
                        if now_steps.peek().is_none() && !took_first {
                            return Ok((applied, first, bodies));
                        }
                        for step in now_steps {
                            if !applied.take(conn, &mut head, step, max_depth, now)? {
                                return Ok((applied, first, bodies));
                            }
                        }
                        // All of them now: settle as the run would at its end.
                        if rest_empty
                            && matches!(head.state, TaskState::Submitted | TaskState::Working)
                        {
                            applied.take(conn, &mut head, SETTLE, max_depth, now)?;
                        }
                        Ok((applied, first, bodies))
                    },
                    move |(applied, ..): &(
                        Applied,
                        StreamResponse,
                        Option<tasks::CreatedBodies>,
                    )| {
                        for ev in &applied.events {
                            engine.inner.bus.publish(ev.clone());
                        }
                    },
                )
                .await?;
            if created.stopped {
                steps.clear();
            }
            // The task as created comes back in its first event, not copied.
            let StreamResponse::Task(snapshot) = first else {
                return Err(Error::Internal(format!(
                    "task `{id}` was created with an event that is not the task"
                )));
            };
            let (snapshot, settled) = settled_task(snapshot, &created.events);
            // Stored as it stands when nothing moved it after the status it
            // was created with.
            let stored = match bodies {
                Some(b) if settled && created.events.len() == 1 && dialect == Dialect::V1 => Some(
                    tasks::CreatedTask::new(snapshot.id.clone(), snapshot.context_id.clone(), b),
                ),
                _ => None,
            };
            // A settled task's caller answers at once: it needs no events
            // (and a channel is a sizeable allocation).
            let rx = (!settled).then(|| self.inner.bus.subscribe_task(&id));
            (id, rx, created.seq, snapshot, settled, stored)
        };
        let run = if let Some(message) = forwarded {
            let (engine, agent) = (self.clone(), agent.clone());
            Some(tokio::spawn(async move {
                let id = task_id.clone();
                engine
                    .fail_on_panic(&id, engine.relay(agent, task_id, message))
                    .await
            }))
        } else {
            (!steps.is_empty()).then(|| {
                let engine = self.clone();
                tokio::spawn(async move {
                    let id = task_id.clone();
                    engine
                        .fail_on_panic(&id, engine.run(task_id, steps, last_artifact))
                        .await
                })
            })
        };
        Ok(Started {
            reply: SendMessageResponse::Task(snapshot),
            seq,
            events: rx,
            run,
            settled,
            stored,
        })
    }

    /// Carries out a backend's steps on a task, then settles it: a run that
    /// ends with the task still submitted or working completes it.
    async fn run(&self, task_id: String, steps: Vec<Step>, mut last_artifact: Option<String>) {
        for mut step in steps {
            if let Step::Delay(d) = step {
                tokio::time::sleep(d).await;
                continue;
            }
            carry_artifact_id(&mut step, &mut last_artifact);
            let applied = self
                .until_stored(&task_id, || self.apply(&task_id, step.clone()))
                .await;
            if let Err(e) = applied {
                tracing::debug!(task = %task_id, "run stopped: {e}");
                return;
            }
        }
        let settled = self
            .until_stored(&task_id, || {
                self.apply_if(&task_id, SETTLE, |s| {
                    matches!(s, TaskState::Submitted | TaskState::Working)
                })
            })
            .await;
        if let Err(e) = settled {
            tracing::debug!(task = %task_id, "settling stopped: {e}");
        }
    }

    /// Runs the work that moves a task on (a backend's steps, a relay);
    /// should it panic (a bug), the task fails with a note saying so rather
    /// than stay working, with nothing to move it on, until the next start.
    /// A task the work left parked, or ended, is left as it is.
    async fn fail_on_panic(&self, task_id: &str, work: impl std::future::Future<Output = ()>) {
        let Err(why) = crate::unwind::caught("a task's run", work).await else {
            return;
        };
        let note = Message::agent(vec![crate::a2a::types::Part::text(format!(
            "The agent stopped on an internal error ({why}); see the server log."
        ))]);
        let failed = self
            .until_stored(task_id, || {
                let step = Step::Status(TaskState::Failed, Some(note.clone()));
                self.apply_if(task_id, step, |s| {
                    matches!(s, TaskState::Submitted | TaskState::Working)
                })
            })
            .await;
        if let Err(e) = failed {
            tracing::warn!(task = %task_id, "cannot fail the task whose run panicked: {e}");
        }
    }

    /// Runs `write` until it is not refused by our storage (a full disk):
    /// such a write stored nothing, so a run's step is tried again after
    /// [`STORE_RETRY_FIRST`], doubling up to [`STORE_RETRY_MAX`], rather
    /// than leaving its task working until the next start.
    async fn until_stored<T, F>(
        &self,
        task_id: &str,
        mut write: impl FnMut() -> F,
    ) -> Result<T, Error>
    where
        F: std::future::Future<Output = Result<T, Error>>,
    {
        let mut wait = STORE_RETRY_FIRST;
        loop {
            match write().await {
                Err(Error::Storage(e)) => {
                    tracing::warn!(task = %task_id, "a step of the run is not stored yet ({e}); trying again in {wait:?}");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(STORE_RETRY_MAX);
                }
                done => return done,
            }
        }
    }

    /// Applies one step to a task: checks the move, commits it with its
    /// event, publishes the event.
    pub async fn apply(&self, task_id: &str, step: Step) -> Result<Option<Arc<Event>>, Error> {
        self.apply_if(task_id, step, |_| true).await
    }

    async fn apply_if(
        &self,
        task_id: &str,
        step: Step,
        when: impl FnOnce(TaskState) -> bool + Send + 'static,
    ) -> Result<Option<Arc<Event>>, Error> {
        let engine = self.clone();
        let max_depth = self.max_chain_depth();
        let tid = task_id.to_owned();
        let outcome = self
            .inner
            .store
            .write_then(
                move |conn| {
                    let Some(h) = tasks::head(conn, &tid)? else {
                        return Ok(Err(Error::TaskNotFound(tid)));
                    };
                    if !when(h.state) {
                        return Ok(Ok(None));
                    }
                    apply_step(conn, &h, step, max_depth, now_ms())
                },
                move |out: &Result<Option<Event>, Error>| {
                    if let Ok(Some(ev)) = out {
                        engine.inner.bus.publish(ev.clone());
                    }
                },
            )
            .await??;
        Ok(outcome.map(Arc::new))
    }

    /// Waits until a started task settles (terminal or interrupted) or its run
    /// ends, at most `limit`. Used by blocking SendMessage.
    pub async fn wait_settled(&self, started: &mut Started, limit: Duration) {
        let Some(rx) = started.events.as_mut() else {
            return;
        };
        // Without a run, nothing will change the task on this message's behalf.
        let Some(mut run) = started.run.take() else {
            return;
        };
        let deadline = tokio::time::sleep(limit);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(ev) if ev.seq > started.seq && (ev.state.is_terminal() || ev.state.is_interrupted()) => break,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                // The run has finished: its events are all published.
                _ = &mut run => break,
                _ = &mut deadline => break,
            }
        }
        // Dropping the handle leaves the run going on in the background.
    }

    async fn owned_head(
        &self,
        agent: &Agent,
        owner: &str,
        task_id: &str,
    ) -> Result<TaskHead, Error> {
        let head = self
            .inner
            .store
            .read_point(|conn| tasks::head(conn, task_id))?;
        head.filter(|h| owns(h, agent, owner))
            .ok_or_else(|| Error::TaskNotFound(task_id.to_owned()))
    }

    /// A task with its head (owner-checked), for callers that need to know
    /// e.g. the dialect it was created in.
    pub async fn task_with_head(
        &self,
        agent: &Agent,
        owner: &str,
        id: &str,
        history_length: Option<i32>,
    ) -> Result<(TaskHead, Task), Error> {
        let history = history_arg(history_length)?;
        self.load_owned(agent, owner, id, history).await
    }

    /// [`Self::task_with_head`] with the task's JSON as stored, for an
    /// answer in the dialect it is stored in (v1.0).
    pub async fn stored_task_with_head(
        &self,
        agent: &Agent,
        owner: &str,
        id: &str,
        history_length: Option<i32>,
    ) -> Result<(TaskHead, tasks::StoredTask), Error> {
        let history = history_arg(history_length)?;
        let found = self
            .inner
            .store
            .read_point(|conn| tasks::load_stored(conn, id, history, true))?;
        owned(found, agent, owner, id)
    }

    async fn load_owned(
        &self,
        agent: &Agent,
        owner: &str,
        task_id: &str,
        history: Option<usize>,
    ) -> Result<(TaskHead, Task), Error> {
        let found = self
            .inner
            .store
            .read_point(|conn| tasks::load(conn, task_id, history, true))?;
        owned(found, agent, owner, task_id)
    }

    /// GetTask.
    pub async fn get_task(
        &self,
        agent: &Agent,
        owner: &str,
        id: &str,
        history_length: Option<i32>,
    ) -> Result<Task, Error> {
        let history = history_arg(history_length)?;
        Ok(self.load_owned(agent, owner, id, history).await?.1)
    }

    /// ListTasks.
    pub async fn list_tasks(
        &self,
        agent: &Agent,
        owner: &str,
        req: ListTasksRequest,
    ) -> Result<ListTasksResponse, Error> {
        let page_size = match req.page_size {
            None => 50,
            Some(n) if (1..=100).contains(&n) => n as usize,
            Some(n) => {
                return Err(Error::InvalidParams(format!(
                    "pageSize must be between 1 and 100 inclusive, got {n}"
                )));
            }
        };
        let history = history_arg(req.history_length)?;
        let updated_after_ms = match req
            .status_timestamp_after
            .as_deref()
            .filter(|s| !s.is_empty())
        {
            None => None,
            Some(s) => Some(parse_timestamp(s).ok_or_else(|| {
                Error::InvalidParams(format!(
                    "statusTimestampAfter `{s}` is not an ISO 8601 timestamp"
                ))
            })?),
        };
        let page_token = req.page_token.filter(|t| !t.is_empty());
        if let Some(t) = &page_token
            && tasks::decode_page_token(t).is_none()
        {
            return Err(Error::InvalidParams(format!(
                "pageToken `{t}` is not a token this server issued"
            )));
        }
        let filter = ListFilter {
            agent_id: agent.id().to_owned(),
            owner: owner.to_owned(),
            context_id: req.context_id.filter(|c| !c.is_empty()),
            state: req.status,
            updated_after_ms,
            page_size,
            page_token,
            history,
            include_artifacts: req.include_artifacts.unwrap_or(false),
        };
        let page = self
            .inner
            .store
            .read(move |conn| tasks::list(conn, &filter))
            .await?;
        Ok(ListTasksResponse {
            tasks: page.tasks,
            next_page_token: page.next_page_token,
            page_size: page_size as i32,
            total_size: page.total_size as i32,
        })
    }

    /// CancelTask: the canceled task, with its head.
    pub async fn cancel(
        &self,
        agent: &Agent,
        owner: &str,
        id: &str,
    ) -> Result<(TaskHead, Task), Error> {
        let head = self.owned_head(agent, owner, id).await?;
        if head.state.is_terminal() {
            return Err(Error::TaskNotCancelable(format!(
                "task `{id}` is already {}",
                head.state.short_name()
            )));
        }
        match self
            .apply(id, Step::Status(TaskState::Canceled, None))
            .await
        {
            Ok(_) => {}
            // Finished between the check and the write.
            Err(Error::UnsupportedOperation(_)) => {
                return Err(Error::TaskNotCancelable(format!(
                    "task `{id}` has already finished"
                )));
            }
            Err(e) => return Err(e),
        }
        self.task_with_head(agent, owner, id, None).await
    }

    /// SubscribeToTask: the task now, and its events from then on.
    pub async fn subscribe(
        &self,
        agent: &Agent,
        owner: &str,
        id: &str,
    ) -> Result<(Task, i64, Subscription), Error> {
        // Subscribe first, then read: events committed after the read are in
        // the channel; those before it are in the snapshot (skipped by seq).
        let rx = self.inner.bus.subscribe_task(id);
        let (head, task) = self.load_owned(agent, owner, id, None).await?;
        if head.state.is_terminal() {
            return Err(Error::UnsupportedOperation(format!(
                "task `{id}` is {}; a finished task has no updates to subscribe to",
                head.state.short_name()
            )));
        }
        Ok((task, head.last_seq, rx))
    }

    /// CreateTaskPushNotificationConfig: checks and stores the config;
    /// `dialect` (the request's) is the shape its notifications will take.
    pub async fn create_push_config(
        &self,
        agent: &Agent,
        owner: &str,
        cfg: TaskPushNotificationConfig,
        dialect: Dialect,
    ) -> Result<TaskPushNotificationConfig, Error> {
        let task_id = cfg
            .task_id
            .clone()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Error::InvalidParams("taskId is required".into()))?;
        self.owned_head(agent, owner, &task_id).await?;
        let mut cfg = self.check_push_config(cfg).await?;
        // A fresh id, so a second unnamed config never replaces the first
        // (a 0.3 get by task id still finds a task's only config: see ops).
        if cfg.id.is_none() {
            cfg.id = Some(new_id());
        }
        let stored = cfg.clone();
        let max = self.inner.limits.max_push_configs;
        self.inner
            .store
            .write(move |conn| {
                let id = stored.id.as_deref().unwrap_or_default();
                if !tasks::push_config_fits(conn, &task_id, id, max)? {
                    return Ok(Err(too_many_push_configs(&task_id, max)));
                }
                tasks::put_push_config(conn, &stored, dialect_name(dialect), now_ms())?;
                Ok(Ok(()))
            })
            .await??;
        Ok(cfg)
    }

    /// A caller's push config as it may be stored: an http(s) URL the
    /// outbound policy lets us reach (resolved now, and again at each
    /// delivery), and a scheme when authentication is given.
    async fn check_push_config(
        &self,
        mut cfg: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, Error> {
        match self.dispatch().policy.check_url(&cfg.url).await {
            Ok(_) => {}
            // A name that does not resolve now may later (DNS down, a name
            // not yet published); each delivery checks it again as it
            // resolves. Names under `.invalid` never will.
            Err(Refused::Unresolvable { host, .. })
                if !host
                    .trim_end_matches('.')
                    .to_ascii_lowercase()
                    .ends_with(".invalid") =>
            {
                tracing::debug!(%host, "push config for a name that does not resolve yet");
            }
            Err(r) => {
                return Err(Error::InvalidParams(format!(
                    "push notification config: {r}"
                )));
            }
        }
        if let Some(a) = &cfg.authentication
            && a.scheme.trim().is_empty()
        {
            return Err(Error::InvalidParams(
                "authentication.scheme must not be empty".into(),
            ));
        }
        cfg.id = cfg.id.filter(|i| !i.is_empty());
        Ok(cfg)
    }

    /// GetTaskPushNotificationConfig.
    pub async fn get_push_config(
        &self,
        agent: &Agent,
        owner: &str,
        task_id: &str,
        id: &str,
    ) -> Result<TaskPushNotificationConfig, Error> {
        self.owned_head(agent, owner, task_id).await?;
        self.inner
            .store
            .read_point(|conn| tasks::get_push_config(conn, task_id, id))?
            .ok_or_else(|| {
                Error::TaskNotFound(format!("{task_id} (no push notification config `{id}`)"))
            })
    }

    /// ListTaskPushNotificationConfigs.
    pub async fn list_push_configs(
        &self,
        agent: &Agent,
        owner: &str,
        task_id: &str,
        page_size: Option<i32>,
        page_token: Option<String>,
    ) -> Result<ListPushConfigsResponse, Error> {
        self.owned_head(agent, owner, task_id).await?;
        let size = match page_size {
            None | Some(0) => 100,
            Some(n) if (1..=100).contains(&n) => n as usize,
            Some(n) => {
                return Err(Error::InvalidParams(format!(
                    "pageSize must be between 1 and 100 inclusive, got {n}"
                )));
            }
        };
        let t = task_id.to_owned();
        let after = page_token.filter(|p| !p.is_empty());
        let mut configs = self
            .inner
            .store
            .read(move |conn| tasks::list_push_configs(conn, &t, after.as_deref(), size + 1))
            .await?;
        let next_page_token = if configs.len() > size {
            configs.truncate(size);
            configs
                .last()
                .and_then(|c| c.id.clone())
                .unwrap_or_default()
        } else {
            String::new()
        };
        Ok(ListPushConfigsResponse {
            configs,
            next_page_token,
        })
    }

    /// DeleteTaskPushNotificationConfig (idempotent).
    pub async fn delete_push_config(
        &self,
        agent: &Agent,
        owner: &str,
        task_id: &str,
        id: &str,
    ) -> Result<(), Error> {
        self.owned_head(agent, owner, task_id).await?;
        let (t, i) = (task_id.to_owned(), id.to_owned());
        self.inner
            .store
            .write(move |conn| tasks::delete_push_config(conn, &t, &i))
            .await?;
        Ok(())
    }
}

/// The refusal of a push config past `[limits] max_push_configs`.
fn too_many_push_configs(task_id: &str, max: usize) -> Error {
    Error::InvalidParams(format!(
        "task `{task_id}` already has {max} push notification configs, the most one task may keep; \
         delete one, or set one with the id of an existing config to replace it"
    ))
}

/// How a dialect is recorded on a task.
fn dialect_name(d: Dialect) -> &'static str {
    match d {
        Dialect::V1 => "v1",
        Dialect::V03 => "v0.3",
        Dialect::Legacy => "legacy",
    }
}

/// A client-chosen task id (pre-0.3 dialect): 1 to 128 printable ASCII
/// characters without spaces or slashes, so it is safe in URLs and logs.
fn check_client_task_id(id: &str) -> Result<(), Error> {
    let ok =
        !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_graphic() && b != b'/');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidParams(format!(
            "task id `{id}` must be 1 to 128 printable characters without spaces or `/`"
        )))
    }
}

/// A loaded task, if it is `agent`'s and `owner`'s: another's is not found.
fn owned<T>(
    found: Option<(TaskHead, T)>,
    agent: &Agent,
    owner: &str,
    task_id: &str,
) -> Result<(TaskHead, T), Error> {
    found
        .filter(|(h, _)| owns(h, agent, owner))
        .ok_or_else(|| Error::TaskNotFound(task_id.to_owned()))
}

/// Whether a task is `agent`'s and `owner`'s: the one rule every read and
/// change of a task by id checks.
fn owns(head: &TaskHead, agent: &Agent, owner: &str) -> bool {
    head.agent_id == agent.id() && head.owner == owner
}

fn history_arg(h: Option<i32>) -> Result<Option<usize>, Error> {
    match h {
        None => Ok(None),
        Some(n) if n >= 0 => Ok(Some(n as usize)),
        Some(n) => Err(Error::InvalidParams(format!(
            "historyLength must be zero or more, got {n}"
        ))),
    }
}

/// Whether a media type is accepted by a list of modes (`type/*`, `*/*`).
fn accepts(modes: &[String], media: &str) -> bool {
    let media = crate::a2a::media_type_essence(media);
    modes.iter().any(|m| {
        let m = m.trim().to_ascii_lowercase();
        m == "*/*"
            || m == media
            || m.strip_suffix("/*")
                .is_some_and(|prefix| media.split('/').next() == Some(prefix))
    })
}

#[cfg(test)]
mod tests {
    use super::accepts;

    #[test]
    fn media_type_matching() {
        let modes = vec!["text/plain".to_string(), "image/*".to_string()];
        assert!(accepts(&modes, "text/plain; charset=utf-8"));
        assert!(accepts(&modes, "image/png"));
        assert!(!accepts(&modes, "application/x-unsupported-tck-type"));
        assert!(accepts(&["*/*".to_string()], "application/pdf"));
    }
}
