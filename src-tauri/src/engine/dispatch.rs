//! The outbox runner and what it delivers: decisions to peers, push
//! notifications to callers' webhooks, chain hops (a task pushed to a URL,
//! or sent to a peer as a new, linked, watched task), and the re-reads of
//! pushed tasks that the webhook receiver could not wait for.
//!
//! Guarantee: at least once. An item is marked delivered only after the
//! receiver answered 2xx, so a crash in between sends it again after the
//! restart, with the same `A2A-Notification-Id` (push) or the same
//! `messageId` (chain send, decision) so the receiver can tell. A chain
//! send that carried a push subscription waits `resend_wait_secs` after
//! the restart for the peer's push about its task first: that push shows
//! the peer has it, and settles the hop (see `watch::mirror_linked`). A
//! chain send that may have reached the peer asks the peer for its task
//! before it goes again (see `Engine::start_on_peer`).
//! Items that share an order key (one task's notifications to one webhook)
//! go out one at a time, in the order they were queued; a failing one holds
//! the ones behind it until it is delivered or dead-lettered.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Engine;
use crate::a2a::types::{Message, Part, StreamResponse, Task, TaskPushNotificationConfig};
use crate::clock::now_ms;
use crate::config::DispatchConfig;
use crate::dispatch::chains::{Action, ChainRule, ContextMode, render_template};
use crate::dispatch::push::{self, Failure, Target};
use crate::dispatch::ssrf::OutboundPolicy;
use crate::store::dispatch as d;
use crate::store::peers::{self as p, OutboxItem};
use crate::store::queue as q;
use crate::store::tasks;

/// How many due items one look at the outbox reads, per delivery in flight
/// allowed (`[dispatch] concurrency`).
const LOOK_FACTOR: usize = 8;

/// How long the items one look read are started from before the outbox is
/// read again: items that fall due meanwhile wait at most this long.
const LOOK_FOR: Duration = Duration::from_millis(100);

/// Items whose last attempt could not be recorded, because our storage
/// refused the write (a full disk) or the attempt panicked (a bug): the
/// store still has them due as they were, so without a hold they would be
/// sent again at once, over and over.
/// Each waits [`super::STORE_RETRY_FIRST`], doubling up to
/// [`super::STORE_RETRY_MAX`]; a restart forgets the holds.
#[derive(Default)]
struct Holds(HashMap<String, (Instant, Duration)>);

impl Holds {
    /// Holds `id` after an attempt that could not be recorded.
    fn hold(&mut self, id: &str) {
        let wait = match self.0.get(id) {
            Some((_, last)) => (*last * 2).min(super::STORE_RETRY_MAX),
            None => super::STORE_RETRY_FIRST,
        };
        self.0.insert(id.to_owned(), (Instant::now() + wait, wait));
    }

    /// Until when `id` is held, if it is.
    fn until(&self, id: &str) -> Option<Instant> {
        self.0
            .get(id)
            .map(|(until, _)| *until)
            .filter(|until| *until > Instant::now())
    }
}

/// How outbound deliveries behave, and the client they use.
pub struct Dispatch {
    pub config: DispatchConfig,
    pub policy: OutboundPolicy,
    http: std::sync::OnceLock<reqwest::Client>,
}

impl Dispatch {
    pub fn new(config: DispatchConfig, policy: OutboundPolicy) -> Dispatch {
        Dispatch {
            config,
            policy,
            http: std::sync::OnceLock::new(),
        }
    }

    fn http(&self) -> Result<&reqwest::Client, Failure> {
        if let Some(c) = self.http.get() {
            return Ok(c);
        }
        let made = self
            .policy
            .client(Duration::from_secs(self.config.timeout_secs))
            .map_err(Failure::transient)?;
        Ok(self.http.get_or_init(|| made))
    }
}

impl Default for Dispatch {
    fn default() -> Self {
        Dispatch::new(
            DispatchConfig::default(),
            OutboundPolicy::new(&Default::default())
                .unwrap_or_else(|_| OutboundPolicy::allow_all()),
        )
    }
}

impl From<super::peers::PeerError> for Failure {
    fn from(e: super::peers::PeerError) -> Failure {
        match e {
            super::peers::PeerError::Store(s) => Failure::storage(&s),
            e @ super::peers::PeerError::StillSending { ask_at, .. } => {
                Failure::not_before(e.to_string(), ask_at)
            }
            e if e.is_transient() => Failure::transient(e.to_string()),
            e => Failure::permanent(e.to_string()),
        }
    }
}

/// Why a chain-rule or hop operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("no chain rule `{0}`")]
    UnknownRule(String),
    #[error("no chain hop `{0}`")]
    UnknownHop(String),
    #[error("rule `{0}` comes from the config file; change it there")]
    FromConfig(String),
    #[error("a rule with id `{0}` already exists")]
    Exists(String),
    #[error("{0}")]
    Invalid(String),
    #[error("storage failure: {0}")]
    Store(#[from] crate::store::Error),
}

/// How an item ended, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Done {
    Delivered,
    /// Delivered, and recorded as such in the transaction of its effect.
    Recorded,
    /// Nothing left to deliver to (its push config was deleted).
    Canceled,
}

impl Engine {
    /// Sets how deliveries behave, once, at start-up, before anything reads
    /// them (reading first fixes the defaults: that is a bug, and logged).
    pub fn configure_dispatch(&self, dispatch: Dispatch) {
        if self.inner.dispatch.set(dispatch).is_err() {
            tracing::error!(
                "delivery settings were read before they were configured; the defaults stay"
            );
        }
    }

    pub(super) fn dispatch(&self) -> &Dispatch {
        self.inner.dispatch.get_or_init(Dispatch::default)
    }

    /// The limit on chain length, for the transactions that fan events out.
    pub(super) fn max_chain_depth(&self) -> i64 {
        self.dispatch().config.max_chain_depth
    }

    /// Delivers due outbox items, several at once (never two with the same
    /// order key), then waits for the next to fall due, for an attempt to
    /// end, or for a commit that queued items. Runs for the life of the server.
    ///
    /// One look at the outbox reads up to [`LOOK_FACTOR`] × the concurrency
    /// of due items; an attempt that ends starts the next of them, without
    /// another look, for up to [`LOOK_FOR`]. (A look per attempt was 8% of
    /// the server's time while a backlog drained.) Each attempt checks that
    /// its item is still pending and untried first, so an item a look read
    /// and then saw delivered is skipped.
    ///
    /// Items queued while a look's items are still in hand do not make
    /// another look: those are left only while every slot is busy, and the
    /// new items are due after them. (A look per commit that queued items
    /// was 14% of the server's time under webhook pushes acknowledged
    /// first, 128 items read and parsed to start a few.) A call made due at
    /// once (a retry, a peer trusted again) waits at most [`LOOK_FOR`] then.
    pub async fn run_outbox(&self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        let in_flight: Arc<Mutex<HashSet<String>>> = Arc::default();
        let holds: Arc<Mutex<Holds>> = Arc::default();
        let ended: Arc<tokio::sync::Notify> = Arc::default();
        let limit = self.dispatch().config.concurrency;
        // The items of the last look not started yet, and when it was.
        let mut due: VecDeque<OutboxItem> = VecDeque::new();
        let mut looked_at = Instant::now();
        loop {
            if due.is_empty() || looked_at.elapsed() > LOOK_FOR {
                due = self
                    .inner
                    .store
                    .read(move |conn| p::due(conn, now_ms(), limit * LOOK_FACTOR))
                    .await
                    .unwrap_or_default()
                    .into();
                looked_at = Instant::now();
            }
            // The first hold to end, of the items this pass left held.
            let mut held_until: Option<Instant> = None;
            while let Some(item) = due.pop_front() {
                let held = holds.lock().ok().and_then(|h| h.until(&item.id));
                if let Some(until) = held {
                    held_until = Some(held_until.map_or(until, |t| t.min(until)));
                    continue;
                }
                let key = item.order_key.clone().unwrap_or_else(|| item.id.clone());
                {
                    let Ok(mut set) = in_flight.lock() else { break };
                    if set.len() >= limit {
                        // Started when a slot frees.
                        due.push_front(item);
                        break;
                    }
                    if !set.insert(key.clone()) {
                        // In flight already (it, or one before it with
                        // its order key): a later look finds it again.
                        continue;
                    }
                }
                let (engine, in_flight, ended, holds) = (
                    self.clone(),
                    in_flight.clone(),
                    ended.clone(),
                    holds.clone(),
                );
                tokio::spawn(async move {
                    // An attempt that panics (a bug) is held like one
                    // whose outcome could not be recorded, and its order
                    // key freed: the deliveries behind it go on.
                    let recorded =
                        crate::unwind::caught("an outbox attempt", engine.attempt(&item))
                            .await
                            .unwrap_or(false);
                    if let Ok(mut h) = holds.lock() {
                        if recorded {
                            h.0.remove(&item.id);
                        } else {
                            h.hold(&item.id);
                        }
                    }
                    if let Ok(mut set) = in_flight.lock() {
                        set.remove(&key);
                    }
                    ended.notify_one();
                });
            }
            let busy =
                !due.is_empty() || in_flight.lock().map(|set| !set.is_empty()).unwrap_or(false);
            let wait = if busy {
                // Woken when an attempt ends.
                Duration::from_secs(1)
            } else {
                let next = match self.inner.store.read(p::next_due).await.ok().flatten() {
                    Some(ms) => Duration::from_millis((ms - now_ms()).clamp(10, 60_000) as u64),
                    None => Duration::from_secs(60),
                };
                // The earliest due item may be a held one: look again when
                // the first hold ends, or in a second, whichever is sooner.
                match held_until {
                    Some(until) => next.max(
                        until
                            .saturating_duration_since(Instant::now())
                            .min(Duration::from_secs(1)),
                    ),
                    None => next,
                }
            };
            // A list left in hand is read again once it is LOOK_FOR old, and
            // none is left when nothing is busy: every wake below that finds
            // slots free looks again.
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = ended.notified() => {}
                _ = self.inner.outbox_ready.notified() => {}
                // A commit during the look above left a permit: no item
                // queued after the look waits for the timer.
                _ = self.inner.store.outbox_queued().notified() => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Makes one attempt at `item` and records how it went. Returns
    /// whether that record (or the check before it) could be stored and
    /// read: when not, the item is still due as it was.
    async fn attempt(&self, item: &OutboxItem) -> bool {
        // The list this item came from may predate the end of its previous
        // attempt (read, then that attempt committed and left the in-flight
        // set): go only if it is still pending and untried since.
        let current = self
            .inner
            .store
            .read_point(|conn| p::outbox_item(conn, &item.id));
        match current {
            Ok(Some(now))
                if now.status == "pending"
                    && now.attempts == item.attempts
                    && now.next_ms <= now_ms() => {}
            Ok(_) => return true,
            Err(e) => {
                tracing::warn!(item = %item.id, "cannot re-read an outbox item: {e}");
                return false;
            }
        }
        let result = match item.kind.as_str() {
            "decision" => self
                .deliver_to_peer(item)
                .await
                .map(|()| Done::Delivered)
                .map_err(Failure::from),
            "push" => self.deliver_push(item).await,
            "reread" => self
                .reread(item)
                .await
                .map(|()| Done::Recorded)
                .map_err(Failure::from),
            "chain" => self.deliver_hop(item).await.map(|()| Done::Delivered),
            "start" => self
                .deliver_start(item)
                .await
                .map(|()| Done::Recorded)
                .map_err(Failure::from),
            other => Err(Failure::permanent(format!("unknown outbox kind `{other}`"))),
        };
        let cfg = &self.dispatch().config;
        let now = now_ms();
        let (status, error, next) = match &result {
            Ok(Done::Recorded) => return true,
            Ok(Done::Delivered) => ("delivered", None, now),
            Ok(Done::Canceled) => (
                "canceled",
                Some("its push notification config was deleted".to_owned()),
                now,
            ),
            Err(f) if gives_up(f, item.attempts + 1, cfg.max_attempts) => {
                ("failed", Some(f.message.clone()), now)
            }
            Err(f) => (
                "pending",
                Some(f.message.clone()),
                f.not_before
                    .unwrap_or_else(|| now + backoff_ms(item.attempts, cfg.max_backoff_secs)),
            ),
        };
        // A wait (a failure with `not_before`) is no attempt: it neither
        // counts towards giving up nor lengthens the backoff.
        let waits = matches!(&result, Err(f) if f.not_before.is_some());
        let (id, err, kind, ref_id) = (
            item.id.clone(),
            error.clone(),
            item.kind.clone(),
            item.ref_id.clone(),
        );
        let stored = self
            .inner
            .store
            .write(move |conn| {
                if waits {
                    return p::postpone(conn, &id, err.as_deref(), next);
                }
                p::record_attempt(conn, &id, status, err.as_deref(), next, now)?;
                match (kind.as_str(), status) {
                    (_, "pending") => {}
                    ("decision", _) => q::set_delivery(conn, &ref_id, status, err.as_deref(), now)?,
                    ("chain", "delivered") => d::set_hop(conn, &ref_id, "delivered", None, now)?,
                    ("chain", _) => d::set_hop(conn, &ref_id, "failed", err.as_deref(), now)?,
                    _ => {}
                }
                Ok(())
            })
            .await;
        if let Err(e) = stored {
            tracing::error!(item = %item.id, "cannot record an outbox attempt: {e}");
            return false;
        }
        if waits {
            tracing::debug!(item = %item.id, kind = %item.kind, "waiting: {}", error.unwrap_or_default());
            return true;
        }
        // A receiver that stays down for hours is retried dozens of times
        // per item: its first failure, its recovery and giving up are news,
        // the retries in between are debug.
        let (id, kind, tries) = (&item.id, &item.kind, item.attempts + 1);
        match (status, &error) {
            ("failed", Some(e)) => {
                tracing::warn!(item = %id, kind = %kind, "gave up delivering after {tries} attempt(s): {e}")
            }
            ("pending", Some(e)) if tries == 1 => {
                tracing::info!(item = %id, kind = %kind, "delivery failed, will retry: {e}")
            }
            ("pending", Some(e)) => {
                tracing::debug!(item = %id, kind = %kind, "delivery failed again (attempt {tries}), will retry: {e}")
            }
            ("delivered", _) if tries > 1 => {
                tracing::info!(item = %id, kind = %kind, "delivered on attempt {tries}")
            }
            _ => {}
        }
        true
    }

    /// POSTs one push notification to its config's webhook.
    async fn deliver_push(&self, item: &OutboxItem) -> Result<Done, Failure> {
        let b = &item.body;
        let field = |k: &str| b[k].as_str().unwrap_or_default().to_owned();
        let (task_id, config_id, dialect) = (field("taskId"), field("configId"), field("dialect"));
        let payload: StreamResponse = serde_json::from_value(b["payload"].clone())
            .map_err(|e| Failure::permanent(format!("stored notification is unreadable: {e}")))?;
        let config: Option<TaskPushNotificationConfig> = self
            .inner
            .store
            .read_point(move |conn| tasks::get_push_config(conn, &task_id, &config_id))
            .map_err(|e| Failure::storage(&e))?;
        let Some(config) = config else {
            return Ok(Done::Canceled);
        };
        let dispatch = self.dispatch();
        let url = self.outbound_url(&config.url)?;
        let target = Target {
            url: &url,
            authentication: config.authentication.as_ref(),
            token: config.token.as_deref(),
            dialect: &dialect,
        };
        push::post(
            dispatch.http()?,
            &target,
            push::body(&dialect, &payload),
            &item.id,
            Duration::from_secs(dispatch.config.timeout_secs),
        )
        .await
        .map(|()| Done::Delivered)
    }

    /// A URL a caller or a rule supplied, checked by the outbound policy
    /// (names are checked again as they resolve, by the client).
    fn outbound_url(&self, raw: &str) -> Result<url::Url, Failure> {
        let url = url::Url::parse(raw)
            .map_err(|e| Failure::permanent(format!("`{raw}` is not a valid URL: {e}")))?;
        self.dispatch()
            .policy
            .check_literal(&url)
            .map_err(|r| Failure::permanent(r.to_string()))?;
        Ok(url)
    }

    /// Carries out one chain hop.
    async fn deliver_hop(&self, item: &OutboxItem) -> Result<(), Failure> {
        let hop_id = item.ref_id.clone();
        let found = self
            .inner
            .store
            .read(move |conn| {
                let Some(hop) = d::hop(conn, &hop_id)? else {
                    return Ok(None);
                };
                let rule = d::rule(conn, &hop.rule_id)?;
                let task = tasks::load(conn, &hop.parent_task_id, None, true)?;
                Ok(Some((hop, rule, task)))
            })
            .await
            .map_err(|e| Failure::storage(&e))?;
        let Some((hop, rule, task)) = found else {
            return Err(Failure::permanent("the hop is gone"));
        };
        if hop.state != "pending" {
            return Ok(());
        }
        let rule = rule.ok_or_else(|| {
            Failure::permanent(format!(
                "rule `{}` was removed before the hop ran",
                hop.rule_id
            ))
        })?;
        let (head, task) = task
            .ok_or_else(|| Failure::permanent(format!("task `{}` is gone", hop.parent_task_id)))?;
        // The receiver acts on a hop the moment it has it, so the commit
        // that fired the hop (a task's change, and the hop with it) goes to
        // the disk first. A power cut could otherwise take it while the
        // receiver has the hop: the hop is then never recorded here, or
        // the change is made again (a caller's resent message, a peer's
        // task re-read) and fires a hop with a new id, which no receiver
        // can tell from a new one. A hop sent to a peer is synced by
        // `start_on_peer`, with the subscription it makes.
        match &rule.action {
            Action::Push {
                url,
                auth_scheme,
                credentials,
                token,
            } => {
                self.inner
                    .store
                    .sync_now()
                    .await
                    .map_err(|e| Failure::storage(&e))?;
                let url = self.outbound_url(url)?;
                let auth = credentials
                    .as_ref()
                    .map(|c| crate::a2a::types::AuthenticationInfo {
                        scheme: auth_scheme.clone().unwrap_or_else(|| "Bearer".into()),
                        credentials: Some(c.clone()),
                    });
                let target = Target {
                    url: &url,
                    authentication: auth.as_ref(),
                    token: token.as_deref(),
                    dialect: "v1",
                };
                let dispatch = self.dispatch();
                push::post(
                    dispatch.http()?,
                    &target,
                    push::body("v1", &StreamResponse::Task(task)),
                    &item.id,
                    Duration::from_secs(dispatch.config.timeout_secs),
                )
                .await
            }
            Action::Send { peer, .. } => {
                let message = hop_message(&rule, &task, &head.agent_id, &hop.id);
                let along = super::watch::Along {
                    hop: Some(hop.id.clone()),
                    ..Default::default()
                };
                // Tried before, or queued before this run began (the last
                // run may have been sending it when it stopped): the peer
                // may have it.
                let sent_before = (item.attempts > 0 || item.created_ms < self.inner.started_ms)
                    .then_some(item.created_ms);
                let out = super::peers::Outgoing {
                    item: &item.id,
                    sent_before,
                    sent_ms: item.sent_ms,
                };
                self.start_on_peer(peer, message, along, out)
                    .await
                    .map(|_| ())
                    .map_err(Failure::from)
            }
        }
    }

    /// The chain rules, config rules first.
    pub async fn chain_rules(&self) -> Result<Vec<ChainRule>, crate::store::Error> {
        self.inner.store.read(d::rules).await
    }

    /// Makes the config file's rules the stored config rules; a rule that
    /// names an unknown peer is an error naming it.
    pub async fn register_config_chains(&self, rules: &[ChainRule]) -> Result<(), String> {
        let peers: Vec<String> = self
            .peers()
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|p| p.id)
            .collect();
        for r in rules {
            let named = [
                r.trigger.peer.as_deref(),
                match &r.action {
                    Action::Send { peer, .. } => Some(peer.as_str()),
                    Action::Push { .. } => None,
                },
            ];
            for peer in named.into_iter().flatten() {
                if !peers.iter().any(|p| p == peer) {
                    return Err(format!(
                        "chain rule `{}` names peer `{peer}`, which is neither in [[peers]] nor added with `countersign peers add`",
                        r.id
                    ));
                }
            }
        }
        let rules = rules.to_vec();
        self.inner
            .store
            .write(move |conn| d::sync_config_rules(conn, &rules, now_ms()))
            .await
            .map_err(|e| e.to_string())
    }

    /// Checks a rule against the agents and peers there are.
    async fn checked_rule(&self, mut rule: ChainRule) -> Result<ChainRule, ChainError> {
        let peers: Vec<String> = self
            .peers()
            .await
            .map_err(|e| ChainError::Invalid(e.to_string()))?
            .into_iter()
            .map(|p| p.id)
            .collect();
        rule.source = "api".into();
        rule.check(
            |a| self.agent(a).is_some(),
            |p| peers.iter().any(|x| x == p),
        )
        .map_err(ChainError::Invalid)?;
        if let Action::Push { url, .. } = &rule.action {
            self.dispatch()
                .policy
                .check_url(url)
                .await
                .map_err(|r| ChainError::Invalid(format!("action.url: {r}")))?;
        }
        Ok(rule)
    }

    /// Adds a rule (from the UI or the CLI).
    pub async fn add_chain_rule(&self, rule: ChainRule) -> Result<ChainRule, ChainError> {
        let rule = self.checked_rule(rule).await?;
        let stored = rule.clone();
        self.inner
            .store
            .write(move |conn| {
                if d::rule(conn, &stored.id)?.is_some() {
                    return Ok(Err(ChainError::Exists(stored.id.clone())));
                }
                d::put_rule(conn, &stored, now_ms())?;
                Ok(Ok(()))
            })
            .await??;
        Ok(rule)
    }

    /// Replaces a rule added at run time; config rules are read-only.
    pub async fn update_chain_rule(
        &self,
        id: &str,
        mut rule: ChainRule,
    ) -> Result<ChainRule, ChainError> {
        rule.id = id.to_owned();
        let rule = self.checked_rule(rule).await?;
        let stored = rule.clone();
        self.inner
            .store
            .write(move |conn| {
                match d::rule(conn, &stored.id)? {
                    None => return Ok(Err(ChainError::UnknownRule(stored.id.clone()))),
                    Some(r) if r.source == "config" => {
                        return Ok(Err(ChainError::FromConfig(stored.id.clone())));
                    }
                    Some(_) => {}
                }
                d::put_rule(conn, &stored, now_ms())?;
                Ok(Ok(()))
            })
            .await??;
        Ok(rule)
    }

    /// Removes a rule added at run time; its past hops stay.
    pub async fn remove_chain_rule(&self, id: &str) -> Result<(), ChainError> {
        let id = id.to_owned();
        self.inner
            .store
            .write(move |conn| {
                match d::rule(conn, &id)? {
                    None => return Ok(Err(ChainError::UnknownRule(id))),
                    Some(r) if r.source == "config" => return Ok(Err(ChainError::FromConfig(id))),
                    Some(_) => {}
                }
                d::delete_rule(conn, &id)?;
                Ok(Ok(()))
            })
            .await?
    }

    /// The newest chain hops.
    pub async fn chain_hops(&self, limit: usize) -> Result<Vec<d::ListedHop>, crate::store::Error> {
        self.inner
            .store
            .read(move |conn| d::hops(conn, limit.clamp(1, 500)))
            .await
    }

    /// The hop that started a task and the hops it fired.
    pub async fn chain_links(
        &self,
        task_id: &str,
    ) -> Result<(Option<d::Hop>, Vec<d::Hop>), crate::store::Error> {
        let id = task_id.to_owned();
        self.inner.store.read(move |conn| d::links(conn, &id)).await
    }

    /// The person's answer to a gated hop: release it or drop it. Answering
    /// a hop that is no longer gated changes nothing and returns it as it is.
    pub async fn answer_gate(&self, hop_id: &str, release: bool) -> Result<d::Hop, ChainError> {
        let id = hop_id.to_owned();
        let hop = self
            .inner
            .store
            .write(move |conn| {
                d::answer_gate(conn, &id, release, now_ms())?;
                d::hop(conn, &id)
            })
            .await?
            .ok_or_else(|| ChainError::UnknownHop(hop_id.to_owned()))?;
        if release {
            self.inner.outbox_ready.notify_one();
        }
        Ok(hop)
    }

    /// Outbox items, newest first (`failed_only`: the dead letters).
    pub async fn outbox(&self, failed_only: bool) -> Result<Vec<OutboxItem>, crate::store::Error> {
        self.inner
            .store
            .read(move |conn| p::outbox(conn, failed_only, 500))
            .await
    }

    /// Puts a dead letter back in line. Returns false when `id` is not a
    /// failed item.
    pub async fn retry_delivery(&self, id: &str) -> Result<bool, crate::store::Error> {
        let id = id.to_owned();
        let retried = self
            .inner
            .store
            .write(move |conn| {
                let Some(item) = p::outbox_item(conn, &id)? else {
                    return Ok(false);
                };
                if !p::retry(conn, &id, now_ms())? {
                    return Ok(false);
                }
                match item.kind.as_str() {
                    "decision" => q::set_delivery(conn, &item.ref_id, "pending", None, now_ms())?,
                    "chain" => d::set_hop(conn, &item.ref_id, "pending", None, now_ms())?,
                    _ => {}
                }
                Ok(true)
            })
            .await?;
        if retried {
            self.inner.outbox_ready.notify_one();
        }
        Ok(retried)
    }
}

/// The message a `send` hop carries: the template's text, then the task's
/// artifact parts (when the rule passes them on). Its id is derived from
/// the hop, so a retry is recognisably the same message.
fn hop_message(rule: &ChainRule, task: &Task, agent: &str, hop_id: &str) -> Message {
    let Action::Send {
        template,
        context,
        artifacts,
        ..
    } = &rule.action
    else {
        return Message::user(format!("{}{hop_id}", d::HOP_MESSAGE_PREFIX), Vec::new());
    };
    let mut parts = Vec::new();
    let text = render_template(template, task, agent);
    if !text.trim().is_empty() {
        parts.push(Part::text(text));
    }
    if *artifacts {
        parts.extend(
            task.artifacts
                .iter()
                .flatten()
                .flat_map(|a| a.parts.iter().cloned()),
        );
    }
    if parts.is_empty() {
        parts.push(Part::text(format!(
            "Task {} is {}.",
            task.id,
            task.status.state.short_name()
        )));
    }
    let mut m = Message::user(format!("{}{hop_id}", d::HOP_MESSAGE_PREFIX), parts);
    if *context == ContextMode::Same {
        m.context_id = Some(task.context_id.clone());
    }
    m
}

/// Whether `f`, after `attempts` attempts, ends its item as a dead letter:
/// a permanent failure at once, a transient one of the receiver's after
/// `max_attempts`; our own storage failing, or a wait, never.
fn gives_up(f: &Failure, attempts: i64, max_attempts: i64) -> bool {
    !f.transient || (attempts >= max_attempts && !f.ours && f.not_before.is_none())
}

/// Exponential backoff with jitter: 1 s, 2 s, 4 s … (±50 %), at most `max_secs`.
pub(super) fn backoff_ms(attempts: i64, max_secs: u64) -> i64 {
    let base = 1000i64
        .saturating_mul(1 << attempts.clamp(0, 20))
        .min(max_secs.saturating_mul(1000) as i64)
        .max(1);
    let jitter = (uuid::Uuid::new_v4().as_u128() % 1000) as i64;
    base / 2 + base * jitter / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_receiver_failing_uses_up_attempts() {
        let full = crate::store::Error::NotStored("the commit failed (disk full)".into());
        assert!(!gives_up(&Failure::storage(&full), 1_000, 8));
        assert!(!gives_up(&Failure::transient("HTTP 503"), 7, 8));
        assert!(gives_up(&Failure::transient("HTTP 503"), 8, 8));
        assert!(gives_up(&Failure::permanent("HTTP 404"), 1, 8));
        let peer = super::super::peers::PeerError::Store(full);
        assert!(Failure::from(peer).ours);
        // A message the peer may still be taking waits, for as long as it
        // takes, until the time it names.
        let taking = super::super::peers::PeerError::StillSending {
            message_id: "m-1".into(),
            ask_at: 12_345,
        };
        let f = Failure::from(taking);
        assert_eq!(f.not_before, Some(12_345));
        assert!(!gives_up(&f, 1_000, 8));
        assert!(f.message.contains("m-1"), "{}", f.message);
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        for attempts in 0..30 {
            let b = backoff_ms(attempts, 300);
            let base = (1000i64 << attempts.min(20)).min(300_000);
            assert!(b >= base / 2 && b <= base * 3 / 2, "{attempts}: {b}");
        }
    }
}
