//! Peers and the work that crosses to them: registering peers (config and
//! runtime), starting tasks on them with a webhook subscription, re-reading
//! watched tasks (on a push, in the sweep, after a restart), and the durable
//! outbox that delivers decisions with retries.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;

use super::peer_cache::KnownPeer;
use super::watch::Along;
use super::{Engine, new_id};
use crate::a2a::client::{ClientError, PeerAuth, PeerCard};
use crate::a2a::types::{
    Message, Part, SendMessageConfiguration, SendMessageRequest, SendMessageResponse, Task,
    TaskPushNotificationConfig, format_timestamp,
};
use crate::clock::now_ms;
use crate::config::{PeerConfig, RejectWith};
use crate::store::peers::{self as p, OutboxItem, PeerAuthRecord, PeerRecord, Subscription};

/// A peer's held state changed: its card changed since it was trusted
/// (`held`), or a person accepted it. Published after the commit.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerNotice {
    pub peer_id: String,
    pub held: bool,
    pub changed: Vec<String>,
}

/// Why a peer operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("no peer `{0}`")]
    UnknownPeer(String),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("storage failure: {0}")]
    Store(#[from] crate::store::Error),
    /// The work panicked (a bug; logged where it happened).
    #[error("{0}")]
    Bug(String),
    /// The peer's card changed since it was trusted; nothing goes to it
    /// until a person accepts the change. (The message starts with
    /// [`p::HELD_PREFIX`]: accepting re-queues the dead letters it caused.)
    #[error(
        "held: the agent card of peer `{peer}` changed ({changed}) since it was trusted; review it and accept it (countersign peers trust {peer})"
    )]
    Held { peer: String, changed: String },
    /// A message sent before a stop cut its answer off, which the peer does
    /// not list yet but may still be taking: not sent again before its call
    /// would have timed out; the peer is asked again at `ask_at`.
    #[error(
        "the peer may still be taking message {message_id}, sent before a stop cut its answer off, and lists no task holding it yet; asking again before sending it again"
    )]
    StillSending { message_id: String, ask_at: i64 },
    /// A message went to the peer, which did not answer (in time, or at
    /// all): the peer may have it, so its outbox item is kept (even when
    /// the caller waited on the send), and the outbox asks the peer for the
    /// task it may have started before it sends the message again.
    #[error(
        "{cause}; the peer may have taken the message, so it is kept (delivery {item}): Countersign asks the peer for the task that holds it, mirrors that task when found, and sends the message again only if the peer has none"
    )]
    Unanswered { item: String, cause: ClientError },
}

impl PeerError {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            PeerError::Client(c) => c.is_transient(),
            // Retried until accepted (accepting also wakes the retries).
            PeerError::Store(_)
            | PeerError::Held { .. }
            | PeerError::StillSending { .. }
            | PeerError::Unanswered { .. } => true,
            PeerError::UnknownPeer(_) | PeerError::Invalid(_) | PeerError::Bug(_) => false,
        }
    }
}

pub(super) fn auth_of(r: &PeerAuthRecord) -> PeerAuth {
    PeerAuth {
        bearer: r.bearer.clone(),
        api_key: r.api_key.clone().map(|k| {
            (
                r.api_key_header
                    .clone()
                    .unwrap_or_else(|| "X-API-Key".into()),
                k,
            )
        }),
        headers: r.headers.clone(),
    }
}

fn random_token() -> String {
    let mut b = [0u8; 24];
    if getrandom::fill(&mut b).is_err() {
        // Never reached on a supported OS; a v4 uuid is still unguessable.
        return uuid::Uuid::new_v4().simple().to_string();
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

/// Keeps the parts of a decision a peer's `decision_format` asks for; a
/// reply's own parts (files, data) always go.
fn shaped(parts: Vec<Part>, format: &str) -> Vec<Part> {
    let keep = |kind: &str| match format {
        "text" => kind == "text",
        "data" => kind == "data",
        _ => true,
    };
    let kept: Vec<Part> = parts
        .iter()
        .filter(|p| keep(p.kind()) || matches!(p.kind(), "raw" | "url"))
        .cloned()
        .collect();
    if kept.is_empty() { parts } else { kept }
}

/// How long one call to a peer may take.
pub(super) const PEER_TIMEOUT: Duration = Duration::from_secs(15);

/// How long a send the person waits on keeps its `start` item from the
/// outbox runner: far longer than the calls it makes can take (each gives
/// up after [`PEER_TIMEOUT`]).
const START_LEASE_MS: i64 = 5 * 60 * 1000;

/// Asking a peer whether it has a message sent before a stop, the tasks
/// it changed from this long before the send on are listed: its clock may
/// be behind ours.
const CLOCK_MARGIN_MS: i64 = 10 * 60 * 1000;

/// At most this many pages of 100 tasks are read looking for such a
/// message; a peer that changed more since is sent it again.
const HELD_PAGES: usize = 10;

/// How long after a message went a peer may still be taking it: its call
/// gives up after [`PEER_TIMEOUT`], and a second behind that.
const IN_HANDS_MS: i64 = PEER_TIMEOUT.as_millis() as i64 + 1000;

/// While a peer may still be taking a message sent before a stop, it is
/// asked again this often whether it holds it.
const ASK_AGAIN_MS: i64 = 2000;

/// Whether a call that failed with `c` may have left its message with the
/// peer: it went, and no answer came back (in time, or at all).
fn unanswered(c: &ClientError) -> bool {
    matches!(c, ClientError::Timeout(_) | ClientError::Connect { .. })
}

/// The outbox item whose message [`Engine::start_on_peer`] sends.
pub(super) struct Outgoing<'a> {
    /// Its id: marked sent ([`p::mark_sent`]), on the disk, right before
    /// the message goes.
    pub item: &'a str,
    /// When the message may have reached the peer already (a send that a
    /// stop cut short, or one whose attempt failed), since when.
    pub sent_before: Option<i64>,
    /// When it last went, if it did.
    pub sent_ms: Option<i64>,
}

/// What a peer says of a message sent before a stop ([`Engine::held_by_peer`]).
enum Held {
    /// This task of the peer's holds it.
    By(Box<Task>),
    /// The peer listed its tasks, and none holds it.
    Nowhere,
    /// The peer cannot list its tasks (A2A 0.3, the method missing, too
    /// many since the send) or did not answer.
    CannotSay,
}

impl Engine {
    pub(super) fn client(&self) -> Result<&crate::a2a::client::A2aClient, PeerError> {
        if let Some(c) = self.inner.client.get() {
            return Ok(c);
        }
        let made = crate::a2a::client::A2aClient::new(PEER_TIMEOUT)?;
        Ok(self.inner.client.get_or_init(|| made))
    }

    /// Registers the peers named in the config (their cards are fetched on
    /// first use).
    pub async fn register_config_peers(&self, peers: &[PeerConfig]) -> Result<(), PeerError> {
        for c in peers {
            let rec = PeerRecord {
                id: c.id.get_ref().clone(),
                url: c.url.clone(),
                name: c.name.clone(),
                auth: PeerAuthRecord {
                    bearer: c.bearer.clone(),
                    api_key: c.api_key.clone(),
                    api_key_header: c.api_key_header.clone(),
                    headers: c
                        .headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                },
                reject_with: match c.reject_with {
                    RejectWith::Message => "message".into(),
                    RejectWith::Cancel => "cancel".into(),
                },
                decision_format: c.decision_format.name().into(),
                card: None,
                card_ms: None,
                from_config: true,
                created_ms: now_ms(),
                pin: None,
                card_change: None,
            };
            self.write_peers(move |conn| p::put_peer(conn, &rec))
                .await?;
        }
        Ok(())
    }

    /// Reads a would-be peer's card without storing anything: what the
    /// person sees before adding it.
    pub async fn preview_peer(
        &self,
        url: &str,
        auth: &PeerAuthRecord,
    ) -> Result<serde_json::Value, PeerError> {
        Ok(self.client()?.discover(url, &auth_of(auth)).await?.card)
    }

    /// Adds a peer at runtime: its card is fetched (and must be readable)
    /// before it is stored.
    pub async fn add_peer(
        &self,
        id: &str,
        url: &str,
        name: Option<String>,
        auth: PeerAuthRecord,
    ) -> Result<PeerRecord, PeerError> {
        if !crate::config::is_slug(id) {
            return Err(PeerError::Invalid(format!(
                "`{id}` is not a slug (lowercase letters, digits and `-`)"
            )));
        }
        if self.agent(id).is_some() {
            return Err(PeerError::Invalid(format!(
                "`{id}` is the id of a local agent"
            )));
        }
        let card = self.client()?.discover(url, &auth_of(&auth)).await?;
        let rec = PeerRecord {
            id: id.to_owned(),
            url: url.to_owned(),
            name: name.or_else(|| Some(card.name.clone())),
            auth,
            reject_with: "message".into(),
            decision_format: "parts".into(),
            card: Some(card.card.clone()),
            card_ms: Some(now_ms()),
            from_config: false,
            created_ms: now_ms(),
            pin: None,
            card_change: None,
        };
        let stored = rec.clone();
        let card_json = card.card.clone();
        let pin = card.pin();
        self.write_peers(move |conn| {
            p::put_peer(conn, &stored)?;
            p::set_card(conn, &stored.id, &card_json, now_ms())?;
            p::check_pin(conn, &stored.id, &pin, now_ms())
        })
        .await?;
        self.peer_record(id).await
    }

    /// Accepts a peer's changed card (`card_change`): it becomes the pinned
    /// one and the peer's held calls go out now.
    pub async fn trust_peer(&self, id: &str) -> Result<PeerRecord, PeerError> {
        self.peer_record(id).await?;
        let pid = id.to_owned();
        let accepted = self
            .write_peers(move |conn| p::trust(conn, &pid, now_ms()))
            .await?;
        if accepted {
            tracing::info!(peer = %id, "the peer's changed card was accepted");
            self.inner.outbox_ready.notify_one();
            // Nobody listening is fine.
            let _ = self.inner.peer_notices.send(PeerNotice {
                peer_id: id.to_owned(),
                held: false,
                changed: Vec::new(),
            });
        }
        self.peer_record(id).await
    }

    /// Refuses to send a peer anything while its card has an unaccepted
    /// change.
    fn ensure_trusted(rec: &PeerRecord) -> Result<(), PeerError> {
        match &rec.card_change {
            None => Ok(()),
            Some(change) => Err(PeerError::Held {
                peer: rec.id.clone(),
                changed: change["changed"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default(),
            }),
        }
    }

    /// Notices of peers held or released, from now on.
    pub fn peer_notices(&self) -> tokio::sync::broadcast::Receiver<PeerNotice> {
        self.inner.peer_notices.subscribe()
    }

    /// Every peer.
    pub async fn peers(&self) -> Result<Vec<PeerRecord>, PeerError> {
        Ok(self.inner.store.read(p::peers).await?)
    }

    /// Removes a peer (its watched tasks stay, read-only).
    pub async fn remove_peer(&self, id: &str) -> Result<(), PeerError> {
        let pid = id.to_owned();
        if self
            .write_peers(move |conn| p::remove_peer(conn, &pid))
            .await?
        {
            Ok(())
        } else {
            Err(PeerError::UnknownPeer(id.to_owned()))
        }
    }

    /// Writes to the peers or subscriptions tables: the in-memory copies
    /// of both are dropped as the write commits.
    async fn write_peers<R, F>(&self, f: F) -> Result<R, crate::store::Error>
    where
        R: Send + 'static,
        F: FnOnce(&rusqlite::Connection) -> crate::store::Result<R> + Send + 'static,
    {
        self.inner
            .store
            .write_then(f, self.drops_peer_cache())
            .await
    }

    /// What a write to the peers or subscriptions tables runs as it
    /// commits: the in-memory copies of both are dropped.
    fn drops_peer_cache<R>(&self) -> impl FnOnce(&R) + Send + 'static {
        let engine = self.clone();
        move |_| engine.inner.peer_cache.invalidate()
    }

    async fn peer_record(&self, id: &str) -> Result<PeerRecord, PeerError> {
        self.inner
            .store
            .read_point(|conn| p::peer(conn, id))?
            .ok_or_else(|| PeerError::UnknownPeer(id.to_owned()))
    }

    /// The peer's record and card: the card as stored, fetched if missing
    /// or `refresh`.
    pub async fn peer_card(&self, id: &str, refresh: bool) -> Result<KnownPeer, PeerError> {
        let cache = &self.inner.peer_cache;
        if !refresh && let Some(known) = cache.peer(id) {
            return Ok(known);
        }
        let ticket = cache.ticket();
        let rec = self.peer_record(id).await?;
        if !refresh
            && let Some(card) = &rec.card
            && let Ok(parsed) = PeerCard::from_json(&rec.url, card.clone())
        {
            let known = Arc::new((rec, parsed));
            cache.keep_peer(ticket, &known);
            return Ok(known);
        }
        let card = self
            .client()?
            .discover(&rec.url, &auth_of(&rec.auth))
            .await?;
        let (pid, json, pin) = (rec.id.clone(), card.card.clone(), card.pin());
        let change = self
            .write_peers(move |conn| {
                p::set_card(conn, &pid, &json, now_ms())?;
                p::check_pin(conn, &pid, &pin, now_ms())
            })
            .await?;
        if let Some(change) = change {
            let _ = self.inner.peer_notices.send(PeerNotice {
                peer_id: id.to_owned(),
                held: true,
                changed: change["changed"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
            });
            tracing::warn!(
                peer = %id,
                changed = %change["changed"],
                "the peer's agent card changed since it was trusted; its decisions and new tasks are held until the change is accepted (countersign peers trust {id})"
            );
        }
        Ok(Arc::new((self.peer_record(id).await?, card)))
    }

    /// A new webhook subscription for a peer's pushes.
    /// It is on the disk when this returns: its URL is for the person to
    /// give a peer.
    pub async fn create_subscription(&self, peer_id: &str) -> Result<Subscription, PeerError> {
        let sub = self.subscription_named(peer_id, new_id()).await?;
        self.inner.store.sync_now().await?;
        Ok(sub)
    }

    /// The webhook subscription `id` for a peer's pushes, made now unless
    /// it was made before (then it keeps its token).
    async fn subscription_named(
        &self,
        peer_id: &str,
        id: String,
    ) -> Result<Subscription, PeerError> {
        self.peer_record(peer_id).await?;
        let sub = Subscription {
            id,
            peer_id: peer_id.to_owned(),
            token: random_token(),
            created_ms: now_ms(),
        };
        // The caller puts it on the disk before any peer hears of it
        // (`Store::sync_now`): a task sent with it is the peer's from the
        // moment the peer has it, and if the power goes before the peer's
        // answer reaches us, the peer's pushes about that task must still
        // find their subscription here, or the task is one we never learn
        // of. One sync then covers what else the send depends on.
        Ok(self
            .inner
            .store
            .write_then(
                move |conn| p::ensure_subscription(conn, &sub),
                self.drops_peer_cache(),
            )
            .await?)
    }

    /// A subscription by id.
    pub async fn subscription(
        &self,
        id: &str,
    ) -> Result<Option<Subscription>, crate::store::Error> {
        let cache = &self.inner.peer_cache;
        if let Some(sub) = cache.subscription(id) {
            return Ok(Some(sub));
        }
        let ticket = cache.ticket();
        let sub = self
            .inner
            .store
            .read_point(|conn| p::subscription(conn, id))?;
        if let Some(sub) = &sub {
            cache.keep_subscription(ticket, sub);
        }
        Ok(sub)
    }

    /// When the peer offers push notifications and we know where it reaches
    /// us, creates a subscription (named `named`, when given: the same name
    /// finds the same subscription) and puts it in `configuration` as the
    /// new task's push config (its token also as a Bearer credential).
    /// Returns the subscription's id.
    pub(super) async fn watch_by_push(
        &self,
        peer_id: &str,
        card: &PeerCard,
        configuration: &mut SendMessageConfiguration,
        named: Option<String>,
    ) -> Result<Option<String>, PeerError> {
        let Some(base) = self
            .inner
            .webhook_base
            .get()
            .filter(|_| card.push_notifications)
        else {
            return Ok(None);
        };
        let id = named.unwrap_or_else(new_id);
        let sub = self.subscription_named(peer_id, id).await?;
        configuration.task_push_notification_config = Some(TaskPushNotificationConfig {
            tenant: None,
            id: None,
            task_id: None,
            url: format!("{}/webhooks/{}", base.trim_end_matches('/'), sub.id),
            token: Some(sub.token.clone()),
            authentication: Some(crate::a2a::types::AuthenticationInfo {
                scheme: "Bearer".into(),
                credentials: Some(sub.token.clone()),
            }),
        });
        Ok(Some(sub.id))
    }

    /// Sends a message whose configuration may carry our webhook (`sub_id`
    /// set). A peer may refuse the webhook (its own outbound policy keeps it
    /// from reaching us, say): then the message goes again without it,
    /// `sub_id` is cleared, and the task is watched by the sweep alone.
    ///
    /// `item`: the outbox item the message belongs to, marked sent again
    /// before the message goes a second time (not synced for that: the
    /// first mark, on the disk, is at most a refusal's time older).
    pub(super) async fn send_watched(
        &self,
        peer_id: &str,
        card: &PeerCard,
        auth: &PeerAuth,
        mut req: SendMessageRequest,
        sub_id: &mut Option<String>,
        item: Option<&str>,
    ) -> Result<SendMessageResponse, PeerError> {
        let sent = self
            .client()?
            .send_message(&card.chosen, auth, req.clone())
            .await;
        let refused_webhook = |e: &ClientError| {
            matches!(
                e.a2a_error(),
                Some(
                    crate::a2a::Error::InvalidParams(_)
                        | crate::a2a::Error::PushNotificationNotSupported
                )
            )
        };
        match sent {
            Err(e) if sub_id.is_some() && refused_webhook(&e) => {
                tracing::warn!(peer = %peer_id, "the peer refused our webhook ({e}); watching its task by polling");
                if let Some(c) = req.configuration.as_mut() {
                    c.task_push_notification_config = None;
                }
                *sub_id = None;
                if let Some(item) = item {
                    self.mark_sent(item, false).await?;
                }
                Ok(self.client()?.send_message(&card.chosen, auth, req).await?)
            }
            other => Ok(other?),
        }
    }

    /// Starts a task on a peer with `parts`, and watches it (by push when
    /// the peer offers it; the sweep in any case). Returns our mirror.
    ///
    /// The message is the peer's from the moment the peer has it, before
    /// its answer reaches us. So it is first kept in the outbox as a
    /// `start` item, on the disk, which the mirror marks delivered as it
    /// commits. If Countersign stops in between (a crash, a power cut), the
    /// item is left. After the restart the peer's push about the task, if
    /// it took it, settles the item; without one (by `resend_wait_secs`,
    /// or at once when the send carried no subscription) the outbox asks
    /// the peer for the task that holds the message, and sends it again,
    /// with the same `messageId`, only when the peer lists none or cannot
    /// list its tasks: at least once, as decisions go.
    /// A send that fails while the caller waits is reported to the caller,
    /// and its item is dropped; unless the message went and the peer did
    /// not answer (a timeout, a lost connection): the peer may have it,
    /// so the item is kept for the outbox, which asks the peer first
    /// ([`PeerError::Unanswered`]).
    ///
    /// A caller that goes away (a closed connection, a CLI stopped with
    /// Ctrl-C) does not stop the send: it runs to the end on its own, so
    /// the peer's task is mirrored here and the item marked delivered
    /// (dropped, the send would leave both undone until a restart).
    pub async fn send_to_peer(&self, peer_id: &str, parts: Vec<Part>) -> Result<Task, PeerError> {
        let (engine, peer) = (self.clone(), peer_id.to_owned());
        let send = tokio::spawn(async move {
            crate::unwind::caught("a send to a peer", engine.send_and_mirror(&peer, parts)).await
        });
        match send.await {
            Ok(Ok(sent)) => sent,
            Ok(Err(panic)) => Err(PeerError::Bug(format!(
                "the send to peer `{peer_id}` failed on a bug: {panic}"
            ))),
            Err(e) => Err(PeerError::Bug(format!(
                "the send to peer `{peer_id}` was stopped: {e}"
            ))),
        }
    }

    /// [`Engine::send_to_peer`], on the caller's task.
    async fn send_and_mirror(&self, peer_id: &str, parts: Vec<Part>) -> Result<Task, PeerError> {
        // An unknown peer is refused before anything is kept.
        self.peer_record(peer_id).await?;
        let message = Message::user(new_id(), parts);
        let now = now_ms();
        let mut item = OutboxItem::due_now(
            format!("start:{}", message.message_id),
            "start",
            message.message_id.clone(),
            serde_json::json!({ "message": message }),
            now,
        );
        item.peer_id = Some(peer_id.to_owned());
        // Not the runner's while this call makes the attempt: a restart
        // (`Engine::recover`) makes what is left due.
        item.next_ms = now + START_LEASE_MS;
        let item_id = item.id.clone();
        // On the disk before the peer has the message: `start_on_peer`
        // syncs it with the subscription it makes.
        self.inner
            .store
            .write(move |conn| p::enqueue(conn, &item))
            .await?;
        let along = Along {
            delivered: Some(item_id.clone()),
            ..Along::default()
        };
        let out = Outgoing {
            item: &item_id,
            sent_before: None,
            sent_ms: None,
        };
        let started = self.start_on_peer(peer_id, message, along, out).await;
        if let Err(e @ PeerError::Unanswered { .. }) = &started {
            self.keep_unanswered(peer_id, &item_id, e).await;
        } else if let Err(e) = &started {
            let id = item_id.clone();
            let dropped = self
                .inner
                .store
                .write_to_disk(move |conn| p::drop_untried(conn, &id))
                .await;
            if let Err(store) = dropped {
                tracing::error!(item = %item_id, "a send to peer `{peer_id}` failed ({e}) and its outbox item cannot be dropped ({store}); it may be sent again after a restart");
            }
        }
        let id = started?;
        self.task_detail(&id)
            .await
            .map(|d| d.task)
            .map_err(|e| PeerError::Invalid(e.to_string()))
    }

    /// A send the caller waited on whose message the peer did not answer
    /// (`unanswered`): its item is kept and made due, so the outbox asks
    /// the peer for the task it may have started (waiting while the peer
    /// may still be taking it) and sends the message again only if none
    /// shows. The caller hears that from the error.
    async fn keep_unanswered(&self, peer_id: &str, item: &str, unanswered: &PeerError) {
        let (id, why) = (item.to_owned(), unanswered.to_string());
        let kept = self
            .inner
            .store
            .write(move |conn| p::postpone(conn, &id, Some(&why), now_ms()))
            .await;
        match kept {
            Ok(()) => {
                tracing::warn!(peer = %peer_id, item = %item, "the peer did not answer a send; asking it for the task before sending again");
                self.inner.outbox_ready.notify_one();
            }
            // Left to its lease: the outbox takes it in five minutes.
            Err(e) => {
                tracing::warn!(peer = %peer_id, item = %item, "a send the peer did not answer cannot be made due now ({e})")
            }
        }
    }

    /// Sends a `start` outbox item: a task sent to a peer that Countersign
    /// stopped in the middle of (see [`Engine::send_to_peer`]). Its
    /// delivery is recorded with the mirror, in one transaction.
    pub(super) async fn deliver_start(&self, item: &OutboxItem) -> Result<(), PeerError> {
        let peer_id = item
            .peer_id
            .as_deref()
            .ok_or_else(|| PeerError::Invalid("a task to start without a peer".into()))?;
        let message: Message = serde_json::from_value(item.body["message"].clone())
            .map_err(|e| PeerError::Invalid(format!("the stored message is unreadable: {e}")))?;
        let along = Along {
            delivered: Some(item.id.clone()),
            ..Along::default()
        };
        // Every `start` the outbox sends is one a stop cut short, which
        // the peer may have.
        let out = Outgoing {
            item: &item.id,
            sent_before: Some(item.created_ms),
            sent_ms: item.sent_ms,
        };
        self.start_on_peer(peer_id, message, along, out)
            .await
            .map(|_| ())
    }

    /// Records that the message of outbox item `item` goes to its peer now
    /// ([`p::mark_sent`]); `to_disk`: on the disk, with everything committed
    /// before.
    async fn mark_sent(&self, item: &str, to_disk: bool) -> Result<(), PeerError> {
        let (item, now) = (item.to_owned(), now_ms());
        let mark = move |conn: &rusqlite::Connection| p::mark_sent(conn, &item, Some(now));
        if to_disk {
            self.inner.store.write_to_disk(mark).await?;
        } else {
            self.inner.store.write(mark).await?;
        }
        Ok(())
    }

    /// Starts a task on a peer with `message` and watches it; what `along`
    /// names (the chain hop that starts it, the outbox item it delivers)
    /// is recorded in the transaction that creates our mirror. Returns our
    /// mirror's id.
    ///
    /// When the message may have reached the peer already (`out.sent_before`:
    /// a send that a stop cut short, or one whose attempt failed), the peer
    /// is asked first, with ListTasks, whether one of its tasks holds the
    /// message; if one does, that task is mirrored rather than the message
    /// sent again, so a peer that does not drop a repeated `messageId` is
    /// not left holding two tasks. While none does but the peer may still
    /// be taking the message (its call, cut off by the stop, would not have
    /// timed out yet: a peer makes the task when its agent first answers),
    /// this fails with [`PeerError::StillSending`], and the outbox asks
    /// again. A peer that cannot list its tasks (A2A 0.3, or the method
    /// missing) is sent it again, as before.
    pub(super) async fn start_on_peer(
        &self,
        peer_id: &str,
        message: Message,
        along: Along,
        out: Outgoing<'_>,
    ) -> Result<String, PeerError> {
        // A fresh card: a new task goes only to the agent the person trusted.
        let peer = self.peer_card(peer_id, true).await?;
        let (rec, card) = &*peer;
        Self::ensure_trusted(rec)?;
        let auth = auth_of(&rec.auth);
        if let Some(since) = out.sent_before {
            let held = self
                .held_by_peer(peer_id, card, &auth, &message.message_id, since)
                .await;
            match held {
                Held::By(task) => {
                    // Its subscription goes with it, if the first send made one.
                    let named = p::message_subscription(&message.message_id);
                    let sub = self.subscription(&named).await?.map(|s| s.id);
                    return self
                        .mirror_and_follow(peer_id, sub.as_deref(), *task, along)
                        .await;
                }
                Held::Nowhere => {
                    // A clock set back past the send ends the wait: it is
                    // never longer than the call's timeout.
                    let now = now_ms();
                    if let Some(sent) = out.sent_ms
                        && (sent..sent + IN_HANDS_MS).contains(&now)
                    {
                        return Err(PeerError::StillSending {
                            message_id: message.message_id,
                            ask_at: (sent + IN_HANDS_MS).min(now + ASK_AGAIN_MS),
                        });
                    }
                }
                Held::CannotSay => {}
            }
            tracing::info!(peer = %peer_id, "sending message {} again, with the same id", message.message_id);
        }
        let mut configuration = SendMessageConfiguration {
            return_immediately: true,
            ..Default::default()
        };
        // Named after the message: sent again, it goes with the same
        // subscription, and a push about the first copy, should a stop cut
        // this send short, shows the peer has it (see `mirror_linked`).
        let named = p::message_subscription(&message.message_id);
        let mut sub_id = self
            .watch_by_push(peer_id, card, &mut configuration, Some(named))
            .await?;
        // The peer acts on the message the moment it has it. What this
        // start depends on goes to the disk first, in one sync: the
        // subscription its pushes will come to, the `start` item that
        // sends it again should we stop before the answer, or the chain
        // hop that fires it and the task change that fired the hop; and
        // when the message goes (which holds it back from being sent
        // again while the peer may still be taking it).
        self.mark_sent(out.item, true).await?;
        let req = SendMessageRequest {
            tenant: None,
            message,
            configuration: Some(configuration),
            metadata: None,
        };
        // A push about the new task can overtake the peer's answer: it
        // waits for this start (see `Starts`), so what it reads is newer
        // than the answer and lands after it.
        let _starting = self.starting(peer_id);
        let sent = self
            .send_watched(peer_id, card, &auth, req, &mut sub_id, Some(out.item))
            .await;
        let sent = match sent {
            // The message went and no answer came: the peer may have it.
            Err(PeerError::Client(cause)) if unanswered(&cause) => Err(PeerError::Unanswered {
                item: out.item.to_owned(),
                cause,
            }),
            Err(e @ PeerError::Client(_)) => {
                // The peer answered, with an error, or nothing listened
                // there: it is not taking the message, and a retry need
                // not wait.
                let item = out.item.to_owned();
                self.inner
                    .store
                    .write(move |conn| p::mark_sent(conn, &item, None))
                    .await?;
                Err(e)
            }
            other => other,
        };
        let task = match sent? {
            SendMessageResponse::Task(t) => t,
            SendMessageResponse::Message(m) => {
                return Err(PeerError::Invalid(format!(
                    "the peer answered with a message, not a task: {}",
                    m.text()
                )));
            }
        };
        self.mirror_and_follow(peer_id, sub_id.as_deref(), task, along)
            .await
    }

    /// After a restart, asks the peers of the sends a stop cut short, which
    /// wait `resend_wait_secs` for the peer's push about their task (see
    /// [`Engine::recover`]), whether they have them: a task a peer lists as
    /// holding the message is mirrored now, as its push would have it,
    /// which settles the send. The others keep waiting for the push, and
    /// are asked again before they go out. In the background: start-up
    /// does not wait for peers.
    pub(super) fn ask_about_cut_sends(&self) {
        let engine = self.clone();
        tokio::spawn(async move {
            let cut = match engine.inner.store.read(p::cut_sends).await {
                Ok(cut) => cut,
                Err(e) => {
                    tracing::warn!("cannot read the sends the last stop cut off: {e}");
                    return;
                }
            };
            for send in cut {
                if let Err(e) = engine.settle_if_held(&send).await {
                    tracing::info!(peer = %send.peer_id, "cannot ask the peer about message {} now ({e}); waiting for its push", send.message_id);
                }
            }
        });
    }

    /// Mirrors the peer's task that holds the message of `send`, if the
    /// peer lists one, through the subscription named after the message.
    async fn settle_if_held(&self, send: &p::CutSend) -> Result<(), PeerError> {
        let peer = self.peer_card(&send.peer_id, false).await?;
        let (rec, card) = &*peer;
        Self::ensure_trusted(rec)?;
        let auth = auth_of(&rec.auth);
        let held = self
            .held_by_peer(
                &send.peer_id,
                card,
                &auth,
                &send.message_id,
                send.created_ms,
            )
            .await;
        let Held::By(task) = held else {
            return Ok(());
        };
        let _one_at_a_time = self.reading(&send.peer_id, &task.id).await;
        self.mirror(&send.peer_id, Some(&send.subscription), *task)
            .await?;
        Ok(())
    }

    /// The task of `peer_id`'s that holds the message `message_id`, sent
    /// at `since_ms` or later, if the peer lists one. Asked with a margin
    /// for the peer's clock; a peer that cannot say is logged.
    async fn held_by_peer(
        &self,
        peer_id: &str,
        card: &PeerCard,
        auth: &PeerAuth,
        message_id: &str,
        since_ms: i64,
    ) -> Held {
        let since = format_timestamp(since_ms.saturating_sub(CLOCK_MARGIN_MS));
        let client = match self.client() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(peer = %peer_id, "cannot ask the peer whether it has message {message_id}: {e}");
                return Held::CannotSay;
            }
        };
        match client
            .task_holding(&card.chosen, auth, message_id, &since, HELD_PAGES)
            .await
        {
            Ok(Some(task)) => {
                tracing::info!(peer = %peer_id, task = %task.id, "the peer has message {message_id} from before the stop: its task is mirrored, and the message is not sent again");
                Held::By(Box::new(task))
            }
            Ok(None) => {
                tracing::info!(peer = %peer_id, "the peer lists no task holding message {message_id}");
                Held::Nowhere
            }
            Err(e) => {
                tracing::info!(peer = %peer_id, "cannot ask the peer whether it has message {message_id}: {e}");
                Held::CannotSay
            }
        }
    }

    /// Mirrors `task`, a task just started on `peer_id` (the peer's
    /// answer, or the task it lists as holding a message sent before a
    /// stop), with `along`, and follows it by polling when no push will
    /// come about it (`subscription` is `None`); returns our id.
    async fn mirror_and_follow(
        &self,
        peer_id: &str,
        subscription: Option<&str>,
        task: Task,
        along: Along,
    ) -> Result<String, PeerError> {
        let remote_id = task.id.clone();
        let id = self
            .mirror_started(peer_id, subscription, task, along)
            .await?;
        if subscription.is_none() {
            self.follow_unpushed(peer_id, &remote_id, &id);
        }
        Ok(id)
    }

    /// Mirrors `answer`, the peer's answer to the call that started task
    /// `answer.id` there, with `along`; returns our id. A push about the new
    /// task waits for the start (see `Starts`), but not forever: one that
    /// waited out `START_WAIT` has been mirrored from a read newer than the
    /// answer. Then the task is read again, so the answer cannot turn that
    /// mirror back; if that read fails, the answer is mirrored, and the
    /// next push or sweep corrects it.
    async fn mirror_started(
        &self,
        peer_id: &str,
        subscription: Option<&str>,
        answer: Task,
        along: Along,
    ) -> Result<String, PeerError> {
        let _one_at_a_time = self.reading(peer_id, &answer.id).await;
        let overtaken = self
            .inner
            .store
            .read_point(|conn| p::watched_task(conn, peer_id, &answer.id))?
            .is_some();
        let task = if overtaken {
            match self.read_remote(peer_id, &answer.id).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::debug!(peer = %peer_id, task = %answer.id, "a push overtook the answer that started this task and it cannot be read again ({e}); mirroring the answer");
                    answer
                }
            }
        } else {
            answer
        };
        Ok(self
            .mirror_linked(peer_id, subscription, task, along)
            .await?)
    }

    /// GetTask of `remote_id` on `peer_id`.
    async fn read_remote(&self, peer_id: &str, remote_id: &str) -> Result<Task, PeerError> {
        let peer = self.peer_card(peer_id, false).await?;
        let (rec, card) = &*peer;
        Ok(self
            .client()?
            .get_task(&card.chosen, &auth_of(&rec.auth), remote_id, None)
            .await?)
    }

    /// Re-reads a peer's task (the truth) and mirrors it; returns our id.
    pub async fn refresh_watched(
        &self,
        peer_id: &str,
        subscription: Option<&str>,
        remote_id: &str,
    ) -> Result<String, PeerError> {
        self.refresh_along(peer_id, subscription, remote_id, Along::default())
            .await
    }

    /// [`Engine::refresh_watched`] for a push: the mirror is on the disk
    /// when this returns, so the push may be acknowledged. Its sender does
    /// not push again once it is, and a task first seen through it would
    /// otherwise be one a power cut leaves us knowing nothing of.
    pub async fn refresh_pushed(
        &self,
        peer_id: &str,
        subscription: &str,
        remote_id: &str,
    ) -> Result<String, PeerError> {
        let along = Along {
            on_disk: true,
            ..Along::default()
        };
        self.refresh_along(peer_id, Some(subscription), remote_id, along)
            .await
    }

    /// [`Engine::refresh_watched`], recording `along` with the mirror.
    async fn refresh_along(
        &self,
        peer_id: &str,
        subscription: Option<&str>,
        remote_id: &str,
        along: Along,
    ) -> Result<String, PeerError> {
        // A task being started there is mirrored by that start.
        self.await_starts(peer_id, remote_id).await;
        let _one_at_a_time = self.reading(peer_id, remote_id).await;
        let task = self.read_remote(peer_id, remote_id).await?;
        Ok(self
            .mirror_linked(peer_id, subscription, task, along)
            .await?)
    }

    /// Leaves the re-read of a pushed task to the durable outbox, for a push
    /// that could not wait for it (the peer failed, or was slower than
    /// `[webhooks] reread_wait_ms`). `tried` is why the re-read made while
    /// the push waited did not land, if one was made: it counts as the first
    /// attempt, and the next follows after the first backoff. Once this
    /// returns, the push may be acknowledged: the re-read is retried with
    /// backoff until it lands, or it is dead-lettered where a person sees it.
    /// Returns the outbox item's id.
    pub async fn queue_reread(
        &self,
        peer_id: &str,
        subscription: Option<&str>,
        remote_id: &str,
        tried: Option<String>,
    ) -> Result<String, crate::store::Error> {
        let now = now_ms();
        let mut item = OutboxItem::due_now(
            format!("reread:{}", new_id()),
            "reread",
            remote_id.to_owned(),
            serde_json::json!({"remoteTaskId": remote_id, "subscription": subscription}),
            now,
        );
        item.peer_id = Some(peer_id.to_owned());
        // One task's re-reads run one at a time, in the order pushed.
        item.order_key = Some(format!("reread:{peer_id}:{remote_id}"));
        if let Some(error) = tried {
            item.attempts = 1;
            item.last_error = Some(error);
            item.next_ms =
                now + super::dispatch::backoff_ms(0, self.dispatch().config.max_backoff_secs);
        }
        let id = item.id.clone();
        self.inner
            .store
            .write_to_disk(move |conn| p::enqueue(conn, &item))
            .await?;
        self.inner.outbox_ready.notify_one();
        Ok(id)
    }

    /// Delivers a `reread` outbox item: the re-read a push left behind.
    /// Its delivery is recorded with the mirror, in one transaction.
    pub(super) async fn reread(&self, item: &OutboxItem) -> Result<(), PeerError> {
        let peer_id = item
            .peer_id
            .as_deref()
            .ok_or_else(|| PeerError::Invalid("re-read without a peer".into()))?;
        let remote_id = item.body["remoteTaskId"]
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| PeerError::Invalid("re-read without a task id".into()))?;
        let subscription = item.body["subscription"].as_str();
        let along = Along {
            delivered: Some(item.id.clone()),
            ..Along::default()
        };
        self.refresh_along(peer_id, subscription, remote_id, along)
            .await
            .map(|_| ())
    }

    /// Re-reads every open watched task once (at start-up and periodically),
    /// so a lost push or a restart loses nothing. Returns how many were read.
    pub async fn sweep(&self) -> usize {
        let open = match self.open_watched().await {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!("sweep: {e}");
                return 0;
            }
        };
        // Each peer's card is read again once per sweep: a changed card is
        // noticed (and its peer held) even when nobody sends anything.
        let mut peers: Vec<&str> = open.iter().map(|(_, peer, _)| peer.as_str()).collect();
        peers.sort_unstable();
        peers.dedup();
        for peer in peers {
            if let Err(e) = self.peer_card(peer, true).await {
                tracing::debug!(peer = %peer, "sweep could not re-read the card: {e}");
            }
        }
        let mut n = 0;
        for (id, peer, remote) in open {
            match self.refresh_watched(&peer, None, &remote).await {
                Ok(_) => n += 1,
                Err(e) => tracing::debug!(task = %id, "sweep could not re-read it: {e}"),
            }
        }
        n
    }

    /// Sends one outbox call to its peer, then mirrors what the peer answers.
    pub(super) async fn deliver_to_peer(&self, item: &OutboxItem) -> Result<(), PeerError> {
        let peer_id = item
            .peer_id
            .clone()
            .ok_or_else(|| PeerError::Invalid("outbox item without a peer".into()))?;
        let peer = self.peer_card(&peer_id, false).await?;
        let (rec, card) = &*peer;
        Self::ensure_trusted(rec)?;
        let auth = auth_of(&rec.auth);
        let b = &item.body;
        let remote_id = b["remoteTaskId"].as_str().unwrap_or_default().to_owned();
        // A peer that starts a task per message answers with a new task,
        // which pushes about it must not overtake (see `start_on_peer`).
        let _starting = self.starting(&peer_id);
        // The peer's answer is a read of the task too: no re-read (a push's,
        // the sweep's, a follow's) may land between it and its mirror, or
        // this older snapshot would turn back what that read saw, say a
        // question the peer asked right after taking the decision.
        let one_at_a_time = self.reading(&peer_id, &remote_id).await;
        let task = if b["kind"] == "reject" && rec.reject_with == "cancel" {
            self.client()?
                .cancel_task(&card.chosen, &auth, &remote_id)
                .await?
        } else {
            let parts: Vec<Part> = serde_json::from_value(b["parts"].clone())
                .map_err(|e| PeerError::Invalid(e.to_string()))?;
            let parts = shaped(parts, &rec.decision_format);
            // Derived from the decision: a retry is never a second decision.
            let mut message = Message::user(
                b["messageId"].as_str().unwrap_or_default().to_owned(),
                parts,
            );
            message.context_id = b["contextId"]
                .as_str()
                .filter(|c| !c.is_empty())
                .map(str::to_owned);
            message.task_id = Some(remote_id.clone());
            let config = SendMessageConfiguration {
                return_immediately: true,
                ..Default::default()
            };
            let req = SendMessageRequest {
                tenant: None,
                message,
                configuration: Some(config),
                metadata: None,
            };
            match self
                .client()?
                .send_message(&card.chosen, &auth, req)
                .await?
            {
                SendMessageResponse::Task(t) => t,
                SendMessageResponse::Message(_) => {
                    self.client()?
                        .get_task(&card.chosen, &auth, &remote_id, None)
                        .await?
                }
            }
        };
        // The task the peer answered with: the same one, going on, or (for
        // a peer that starts a task per message) a new one in its context.
        let answered = task.id.clone();
        let id = if answered == remote_id {
            let id = self.mirror(&peer_id, None, task).await?;
            drop(one_at_a_time);
            id
        } else {
            drop(one_at_a_time);
            let along = Along {
                continues: Some(remote_id.clone()),
                ..Along::default()
            };
            self.mirror_started(&peer_id, None, task, along).await?
        };
        let pushed = self
            .inner
            .store
            .read_point(|conn| crate::store::peers::pushed(conn, &id))?;
        if !pushed {
            self.follow_unpushed(&peer_id, &answered, &id);
        }
        Ok(())
    }
}
