//! Queries on peers (remote agents), their webhook subscriptions, the tasks
//! we watch on them, and the outbox of calls owed to them.

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::Result;

/// How Countersign authenticates to a peer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerAuthRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_header: Option<String>,
    /// Extra headers sent with every call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
}

/// A remote A2A agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerRecord {
    pub id: String,
    pub url: String,
    pub name: Option<String>,
    #[serde(skip_serializing)]
    pub auth: PeerAuthRecord,
    /// `message` (reject is sent as a message) or `cancel` (CancelTask).
    pub reject_with: String,
    /// How decisions are sent: `parts` (text + data), `text`, or `data`.
    pub decision_format: String,
    /// The card as last fetched.
    pub card: Option<serde_json::Value>,
    pub card_ms: Option<i64>,
    pub from_config: bool,
    pub created_ms: i64,
    /// The card fingerprint trusted on first use (or accepted since).
    pub pin: Option<serde_json::Value>,
    /// Set while the last fetched card differs from `pin` and nobody has
    /// accepted it: `{"changed": [field…], "old": pin, "new": pin, "atMs"}`.
    /// Decisions and new tasks for the peer are held meanwhile.
    pub card_change: Option<serde_json::Value>,
}

const PEER_COLUMNS: &str = "id, url, name, auth, reject_with, card, card_ms, from_config, created_ms, decision_format, pin, pin_change";

fn peer_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PeerRecord> {
    let auth: String = r.get(3)?;
    let card: Option<String> = r.get(5)?;
    Ok(PeerRecord {
        id: r.get(0)?,
        url: r.get(1)?,
        name: r.get(2)?,
        auth: serde_json::from_str(&auth).unwrap_or_default(),
        reject_with: r.get(4)?,
        card: card.and_then(|c| serde_json::from_str(&c).ok()),
        card_ms: r.get(6)?,
        from_config: r.get(7)?,
        created_ms: r.get(8)?,
        decision_format: r.get(9)?,
        pin: r
            .get::<_, Option<String>>(10)?
            .and_then(|c| serde_json::from_str(&c).ok()),
        card_change: r
            .get::<_, Option<String>>(11)?
            .and_then(|c| serde_json::from_str(&c).ok()),
    })
}

/// Creates or replaces a peer (keeping its cached card when the URL is unchanged).
pub fn put_peer(conn: &Connection, p: &PeerRecord) -> Result<()> {
    let auth = serde_json::to_string(&p.auth).unwrap_or_else(|_| "{}".into());
    conn.prepare_cached(
        "INSERT INTO peers (id, url, name, auth, reject_with, from_config, created_ms, decision_format)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (id) DO UPDATE SET
            card = CASE WHEN peers.url = excluded.url THEN peers.card ELSE NULL END,
            card_ms = CASE WHEN peers.url = excluded.url THEN peers.card_ms ELSE NULL END,
            pin = CASE WHEN peers.url = excluded.url THEN peers.pin ELSE NULL END,
            pin_change = CASE WHEN peers.url = excluded.url THEN peers.pin_change ELSE NULL END,
            url = excluded.url, name = excluded.name, auth = excluded.auth,
            reject_with = excluded.reject_with, from_config = excluded.from_config,
            decision_format = excluded.decision_format",
    )?
    .execute(params![
        p.id,
        p.url,
        p.name,
        auth,
        p.reject_with,
        p.from_config,
        p.created_ms,
        p.decision_format
    ])?;
    Ok(())
}

/// Stores a freshly fetched card.
pub fn set_card(conn: &Connection, id: &str, card: &serde_json::Value, now_ms: i64) -> Result<()> {
    conn.prepare_cached("UPDATE peers SET card = ?2, card_ms = ?3 WHERE id = ?1")?
        .execute(params![id, card.to_string(), now_ms])?;
    Ok(())
}

/// Compares a freshly fetched card's fingerprint with the pinned one:
/// pins it when there is none; records a change (returned) when it differs
/// and that exact change is not already recorded. An unchanged card leaves
/// a recorded change alone: only a person clears it.
pub fn check_pin(
    conn: &Connection,
    id: &str,
    pin: &serde_json::Value,
    now_ms: i64,
) -> Result<Option<serde_json::Value>> {
    let Some(rec) = peer(conn, id)? else {
        return Ok(None);
    };
    let Some(old) = rec.pin else {
        conn.prepare_cached("UPDATE peers SET pin = ?2 WHERE id = ?1")?
            .execute(params![id, pin.to_string()])?;
        return Ok(None);
    };
    if &old == pin
        || rec
            .card_change
            .as_ref()
            .is_some_and(|c| c.get("new") == Some(pin))
    {
        return Ok(None);
    }
    let changed: Vec<&str> = ["identity", "skills", "auth", "key"]
        .into_iter()
        .filter(|k| old.get(k) != pin.get(k))
        .collect();
    let change = serde_json::json!({"changed": changed, "old": old, "new": pin, "atMs": now_ms});
    conn.prepare_cached("UPDATE peers SET pin_change = ?2 WHERE id = ?1")?
        .execute(params![id, change.to_string()])?;
    Ok(Some(change))
}

/// Accepts a peer's changed card: its fingerprint becomes the pin, and the
/// calls held for it are due now (dead letters it caused included).
/// Returns false when no change was waiting.
pub fn trust(conn: &Connection, id: &str, now_ms: i64) -> Result<bool> {
    let accepted = conn
        .prepare_cached(
            "UPDATE peers SET pin = json_extract(pin_change, '$.new'), pin_change = NULL
             WHERE id = ?1 AND pin_change IS NOT NULL",
        )?
        .execute([id])?
        == 1;
    if accepted {
        conn.prepare_cached(
            "UPDATE outbox SET next_ms = ?2,
                    attempts = CASE WHEN status = 'failed' THEN 0 ELSE attempts END,
                    status = 'pending', done_ms = NULL
             WHERE peer_id = ?1 AND (status = 'pending'
                   OR (status = 'failed' AND last_error LIKE ?3))",
        )?
        .execute(params![id, now_ms, format!("{HELD_PREFIX}%")])?;
    }
    Ok(accepted)
}

/// How the error of a call held for an unaccepted card change begins.
pub const HELD_PREFIX: &str = "held:";

/// A peer by id.
pub fn peer(conn: &Connection, id: &str) -> Result<Option<PeerRecord>> {
    Ok(conn
        .prepare_cached(&format!("SELECT {PEER_COLUMNS} FROM peers WHERE id = ?1"))?
        .query_row([id], peer_row)
        .optional()?)
}

/// Every peer, by id.
pub fn peers(conn: &Connection) -> Result<Vec<PeerRecord>> {
    let mut stmt = conn.prepare_cached(&format!("SELECT {PEER_COLUMNS} FROM peers ORDER BY id"))?;
    let rows = stmt.query_map([], peer_row)?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Removes a peer and its subscriptions; its watched tasks stay (history).
pub fn remove_peer(conn: &Connection, id: &str) -> Result<bool> {
    conn.prepare_cached("DELETE FROM subscriptions WHERE peer_id = ?1")?
        .execute([id])?;
    Ok(conn
        .prepare_cached("DELETE FROM peers WHERE id = ?1")?
        .execute([id])?
        > 0)
}

/// A webhook subscription: pushes for a peer's tasks arrive at
/// `/webhooks/{id}` carrying `token`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Subscription {
    pub id: String,
    pub peer_id: String,
    pub token: String,
    pub created_ms: i64,
}

/// The subscription with `s`'s id, recorded as `s` unless it already is
/// (a task sent again keeps the subscription, and token, it first went
/// with). Refused when that id belongs to another peer.
pub fn ensure_subscription(conn: &Connection, s: &Subscription) -> Result<Subscription> {
    conn.prepare_cached(
        "INSERT OR IGNORE INTO subscriptions (id, peer_id, token, created_ms) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![s.id, s.peer_id, s.token, s.created_ms])?;
    match subscription(conn, &s.id)? {
        Some(kept) if kept.peer_id == s.peer_id => Ok(kept),
        _ => Err(crate::store::Error::Corrupt(format!(
            "subscription {} belongs to another peer",
            s.id
        ))),
    }
}

/// A `start` item still owed whose task the peer has after all: its push,
/// to the subscription named after the item's message, brought the task
/// (`task_id`) here first. Marked delivered with it, as
/// [`delivered_with`] does. Returns whether there was one.
pub fn started_by_push(
    conn: &Connection,
    subscription: &str,
    task_id: &str,
    now_ms: i64,
) -> Result<bool> {
    let Some(message_id) = subscription.strip_prefix(MESSAGE_SUBSCRIPTION) else {
        return Ok(false);
    };
    // Looked up first: an UPDATE that finds its rows through the index on
    // the column it changes collects them in a temporary table first
    // (five times the cost of the lookup, even when no row matches).
    let owed: Option<String> = conn
        .prepare_cached(OWED_START)?
        .query_row([message_id], |r| r.get(0))
        .optional()?;
    match owed {
        Some(id) => {
            delivered_with(conn, &id, task_id, now_ms)?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// A subscription by id.
pub fn subscription(conn: &Connection, id: &str) -> Result<Option<Subscription>> {
    Ok(conn
        .prepare_cached("SELECT id, peer_id, token, created_ms FROM subscriptions WHERE id = ?1")?
        .query_row([id], |r| {
            Ok(Subscription {
                id: r.get(0)?,
                peer_id: r.get(1)?,
                token: r.get(2)?,
                created_ms: r.get(3)?,
            })
        })
        .optional()?)
}

/// Our id of the task `remote_id` on `peer_id`, if we watch it.
pub fn watched_task(conn: &Connection, peer_id: &str, remote_id: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT id FROM tasks WHERE peer_id = ?1 AND remote_id = ?2")?
        .query_row(params![peer_id, remote_id], |r| r.get(0))
        .optional()?)
}

/// Records that the peer answered a decision on its task `remote_id` with
/// its task mirrored here as `next_id`: our copy of `remote_id` goes on in
/// that one. Its answered turn closes (the answer was taken up), and it is
/// no longer read again. Nothing if `remote_id` is not mirrored here.
pub fn continue_in(
    conn: &Connection,
    peer_id: &str,
    remote_id: &str,
    next_id: &str,
    now_ms: i64,
) -> Result<()> {
    let Some(task_id) = watched_task(conn, peer_id, remote_id)? else {
        return Ok(());
    };
    if task_id == next_id {
        return Ok(());
    }
    conn.prepare_cached("UPDATE tasks SET continued_in = ?2 WHERE id = ?1")?
        .execute(params![task_id, next_id])?;
    // The first task it continues stays its link (a peer that answered two
    // questions with one task is not expected, but would not move it).
    conn.prepare_cached("UPDATE tasks SET continues = COALESCE(continues, ?2) WHERE id = ?1")?
        .execute(params![next_id, task_id])?;
    super::queue::close_answered_turn(conn, &task_id, now_ms)
}

/// Where a task stands in a continuation (see [`continue_in`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Continuation {
    /// The task it goes on in, if a peer answered a decision on it with a
    /// new task.
    pub continued_in: Option<String>,
    /// The task it continues, if it is such a task: kept after that task
    /// is archived.
    pub continues: Option<String>,
    /// Whether the task it continues has been archived (is no longer here).
    pub continues_archived: bool,
}

/// The continuation links of `task_id` (all empty for a task not here).
pub fn continuation(conn: &Connection, task_id: &str) -> Result<Continuation> {
    Ok(conn
        .prepare_cached(
            "SELECT t.continued_in, t.continues,
                    t.continues IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tasks o WHERE o.id = t.continues)
             FROM tasks t WHERE t.id = ?1",
        )?
        .query_row([task_id], |r| {
            Ok(Continuation {
                continued_in: r.get(0)?,
                continues: r.get(1)?,
                continues_archived: r.get(2)?,
            })
        })
        .optional()?
        .unwrap_or_default())
}

/// The task `task_id` goes on in, if any (see [`continue_in`]).
pub fn continued_in(conn: &Connection, task_id: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT continued_in FROM tasks WHERE id = ?1")?
        .query_row([task_id], |r| r.get(0))
        .optional()?
        .flatten())
}

/// The peer and remote id of a watched task.
pub fn remote_of(conn: &Connection, task_id: &str) -> Result<Option<(String, String)>> {
    Ok(conn
        .prepare_cached(
            "SELECT peer_id, remote_id FROM tasks WHERE id = ?1 AND peer_id IS NOT NULL",
        )?
        .query_row([task_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

/// Whether the peer of watched task `task_id` pushes its changes to us: we
/// registered a webhook subscription with the task, or it was first seen
/// through a push.
pub fn pushed(conn: &Connection, task_id: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT subscription_id IS NOT NULL FROM tasks WHERE id = ?1")?
        .query_row([task_id], |r| r.get(0))
        .optional()?
        .unwrap_or(false))
}

/// Links a relay's task to `remote_id` on `peer_id`; the task stays served
/// (its caller is here). A watched task is inserted linked instead
/// ([`super::tasks::create_mirror`]).
pub fn link_remote(
    conn: &Connection,
    task_id: &str,
    peer_id: &str,
    remote_id: &str,
    subscription: Option<&str>,
) -> Result<()> {
    conn.prepare_cached(
        "UPDATE tasks SET peer_id = ?2, remote_id = ?3, subscription_id = ?4 WHERE id = ?1",
    )?
    .execute(params![task_id, peer_id, remote_id, subscription])?;
    Ok(())
}

/// The query of [`open_watched`]; its condition is the one of the partial
/// index `tasks_linked_open`, word for word, so that SQLite walks it.
pub(super) const OPEN_WATCHED: &str = "SELECT id, peer_id, remote_id FROM tasks
     WHERE peer_id IS NOT NULL AND (state < 3 OR state = 6 OR state > 7)
     AND continued_in IS NULL ORDER BY updated_ms";

/// Tasks linked to a peer's task (watched, or a relay's) that are not
/// finished nor continued in another: (our id, peer id, remote id).
pub fn open_watched(conn: &Connection) -> Result<Vec<(String, String, String)>> {
    let mut stmt = conn.prepare_cached(OPEN_WATCHED)?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// One call owed to a peer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxItem {
    pub id: String,
    /// `decision` (to a peer), `push` (a push notification to a caller's
    /// webhook), `chain` (a chain hop), `reread` (a pushed task to read
    /// from its peer, when the push could not wait for it) or `start` (a
    /// task sent to a peer from the UI API, kept until the peer's answer is
    /// mirrored).
    pub kind: String,
    /// What it is about (the decision, task or hop id; for a `reread`, the
    /// task's id on the peer, and for a `start`, the message's id, until
    /// delivered: then our task's id).
    pub ref_id: String,
    pub peer_id: Option<String>,
    pub body: serde_json::Value,
    pub attempts: i64,
    pub next_ms: i64,
    /// `pending`, `delivered`, `failed` (dead letter) or `canceled` (its
    /// push config was deleted first).
    pub status: String,
    pub last_error: Option<String>,
    pub created_ms: i64,
    pub done_ms: Option<i64>,
    /// Items with the same key are delivered one at a time, in the order
    /// they were queued (a task's notifications to one webhook).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_key: Option<String>,
    /// When the message of a `start` or `chain` item last went to its
    /// peer ([`mark_sent`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent_ms: Option<i64>,
}

impl OutboxItem {
    /// A call due now.
    pub fn due_now(
        id: String,
        kind: &str,
        ref_id: String,
        body: serde_json::Value,
        now_ms: i64,
    ) -> OutboxItem {
        OutboxItem {
            id,
            kind: kind.into(),
            ref_id,
            peer_id: None,
            body,
            attempts: 0,
            next_ms: now_ms,
            status: "pending".into(),
            last_error: None,
            created_ms: now_ms,
            done_ms: None,
            order_key: None,
            sent_ms: None,
        }
    }
}

const OUTBOX_COLUMNS: &str = "id, kind, ref_id, peer_id, body, attempts, next_ms, status, last_error, created_ms, done_ms, order_key, sent_ms";

fn outbox_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<OutboxItem> {
    let body: String = r.get(4)?;
    Ok(OutboxItem {
        id: r.get(0)?,
        kind: r.get(1)?,
        ref_id: r.get(2)?,
        peer_id: r.get(3)?,
        body: serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
        attempts: r.get(5)?,
        next_ms: r.get(6)?,
        status: r.get(7)?,
        last_error: r.get(8)?,
        created_ms: r.get(9)?,
        done_ms: r.get(10)?,
        order_key: r.get(11)?,
        sent_ms: r.get(12)?,
    })
}

/// Outbox items queued by this process (counted as they are written, before
/// their commit): the writer wakes the outbox runner after a commit only
/// when this has moved (see [`super::Store::outbox_queued`]).
static QUEUED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// See [`QUEUED`].
pub fn queued_count() -> u64 {
    QUEUED.load(std::sync::atomic::Ordering::Acquire)
}

/// Queues a call, due at its `next_ms`, with the attempts (and last error)
/// already made elsewhere; an item with the same id already queued wins.
pub fn enqueue(conn: &Connection, item: &OutboxItem) -> Result<()> {
    QUEUED.fetch_add(1, std::sync::atomic::Ordering::Release);
    conn.prepare_cached(
        "INSERT OR IGNORE INTO outbox (id, kind, ref_id, peer_id, body, attempts, next_ms, status, last_error, created_ms, order_key)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8, ?9, ?10)",
    )?
    .execute(params![
        item.id,
        item.kind,
        item.ref_id,
        item.peer_id,
        item.body.to_string(),
        item.attempts,
        item.next_ms,
        item.last_error,
        item.created_ms,
        item.order_key
    ])?;
    Ok(())
}

/// Pending calls due by `now_ms`, oldest first; of items sharing an order
/// key only the first pending one (the others wait for it).
pub fn due(conn: &Connection, now_ms: i64, limit: usize) -> Result<Vec<OutboxItem>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {OUTBOX_COLUMNS} FROM outbox o WHERE status = 'pending' AND next_ms <= ?1
           AND (order_key IS NULL OR NOT EXISTS (
               SELECT 1 FROM outbox e WHERE e.order_key = o.order_key AND e.status = 'pending'
                 AND e.rowid < o.rowid))
         ORDER BY next_ms, rowid LIMIT ?2"
    ))?;
    let rows = stmt.query_map(params![now_ms, limit as i64], outbox_row)?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// The earliest time a pending call is due, if any.
pub fn next_due(conn: &Connection) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT MIN(next_ms) FROM outbox WHERE status = 'pending'")?
        .query_row([], |r| r.get(0))?)
}

/// Records an attempt: done (`delivered`/`failed`) or retried at `next_ms`.
pub fn record_attempt(
    conn: &Connection,
    id: &str,
    status: &str,
    error: Option<&str>,
    next_ms: i64,
    now_ms: i64,
) -> Result<()> {
    conn.prepare_cached(
        "UPDATE outbox SET attempts = attempts + 1, status = ?2, last_error = ?3, next_ms = ?4,
                done_ms = CASE WHEN ?2 = 'pending' THEN NULL ELSE ?5 END
         WHERE id = ?1",
    )?
    .execute(params![id, status, error, next_ms, now_ms])?;
    Ok(())
}

/// Records that the message of item `id` (a `start` or a `chain` hop's)
/// goes to its peer at `at_ms`; written to the disk before it goes. After
/// a stop cut its answer off, the peer may still be taking it until the
/// call would have timed out, and it is not sent again before then. `None`
/// when the peer is not taking it (it answered with an error, or nothing
/// listened at its address).
pub fn mark_sent(conn: &Connection, id: &str, at_ms: Option<i64>) -> Result<()> {
    conn.prepare_cached("UPDATE outbox SET sent_ms = ?2 WHERE id = ?1")?
        .execute(params![id, at_ms])?;
    Ok(())
}

/// Puts a pending item off until `next_ms`, with why, without counting an
/// attempt (a message its peer may still be taking).
pub fn postpone(conn: &Connection, id: &str, why: Option<&str>, next_ms: i64) -> Result<()> {
    conn.prepare_cached(
        "UPDATE outbox SET last_error = ?2, next_ms = ?3 WHERE id = ?1 AND status = 'pending'",
    )?
    .execute(params![id, why, next_ms])?;
    Ok(())
}

/// The `start` item owed for a message (see [`started_by_push`]).
const OWED_START: &str =
    "SELECT id FROM outbox WHERE ref_id = ?1 AND kind = 'start' AND status = 'pending'";

/// See [`delivered_with`]: found by id, so changing `ref_id` needs no
/// temporary table.
const DELIVERED_WITH: &str =
    "UPDATE outbox SET attempts = attempts + 1, status = 'delivered', last_error = NULL,
            next_ms = ?3, done_ms = ?3, ref_id = ?2
     WHERE id = ?1 AND status <> 'delivered'";

/// Records an item delivered by the mirror of our task `task_id` (a
/// re-read, a task sent to a peer), in the mirror's transaction, unless
/// that transaction settled it already ([`started_by_push`]). From now on
/// the item is about that task: retention deletes it with the task, as it
/// does a decision's or a hop's.
pub fn delivered_with(conn: &Connection, id: &str, task_id: &str, now_ms: i64) -> Result<()> {
    conn.prepare_cached(DELIVERED_WITH)?
        .execute(params![id, task_id, now_ms])?;
    Ok(())
}

/// Drops an item nobody has attempted yet (a send whose caller was told
/// it failed). Returns whether there was one.
pub fn drop_untried(conn: &Connection, id: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached("DELETE FROM outbox WHERE id = ?1 AND status = 'pending' AND attempts = 0")?
        .execute([id])?
        == 1)
}

/// Makes every pending `start` item due: at start-up, before anything is
/// served, each is a send that the last run stopped in the middle of, no
/// longer one a caller is making. One whose push subscription was made
/// (named after its message) may have reached the peer, whose push about
/// the task then brings it here and settles the item
/// ([`started_by_push`]): it is due only `grace_ms` after `now_ms`, and
/// sent again then if no push came (even one that was due already: the
/// last run may have been sending it again when it stopped). The others
/// are due at once. Returns how many items there are.
///
/// A pending chain hop whose subscription exists (named after the hop's
/// message) waits the same way; the others keep their time.
pub fn release_cut_sends(conn: &Connection, now_ms: i64, grace_ms: i64) -> Result<usize> {
    let starts = conn
        .prepare_cached(
            "UPDATE outbox SET next_ms = CASE
                 WHEN EXISTS (SELECT 1 FROM subscriptions s WHERE s.id = ?3 || outbox.ref_id)
                 THEN ?1 + ?2
                 ELSE min(next_ms, ?1) END
             WHERE kind = 'start' AND status = 'pending'",
        )?
        .execute(params![now_ms, grace_ms, MESSAGE_SUBSCRIPTION])?;
    let hop = message_subscription(super::dispatch::HOP_MESSAGE_PREFIX);
    conn.prepare_cached(
        "UPDATE outbox SET next_ms = ?1 + ?2
         WHERE kind = 'chain' AND status = 'pending'
           AND EXISTS (SELECT 1 FROM subscriptions s WHERE s.id = ?3 || outbox.ref_id)",
    )?
    .execute(params![now_ms, grace_ms, hop])?;
    Ok(starts)
}

/// A send that a stop cut short and that waits for the peer's push (see
/// [`release_cut_sends`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutSend {
    /// The message that went (a hop's is named after the hop).
    pub message_id: String,
    /// The push subscription named after it, and its peer.
    pub subscription: String,
    pub peer_id: String,
    pub created_ms: i64,
}

/// The pending `start` items and chain hops whose push subscription was
/// made (named after their message): sends that may have reached the peer
/// before a stop cut them short, oldest first.
pub fn cut_sends(conn: &Connection) -> Result<Vec<CutSend>> {
    let hop_prefix = super::dispatch::HOP_MESSAGE_PREFIX;
    let mut stmt = conn.prepare_cached(
        "SELECT o.ref_id, s.id, s.peer_id, o.created_ms
           FROM outbox o JOIN subscriptions s ON s.id = ?1 || o.ref_id
          WHERE o.kind = 'start' AND o.status = 'pending'
         UNION ALL
         SELECT ?2 || o.ref_id, s.id, s.peer_id, o.created_ms
           FROM outbox o JOIN subscriptions s ON s.id = ?1 || ?2 || o.ref_id
          WHERE o.kind = 'chain' AND o.status = 'pending'
         ORDER BY 4, 1",
    )?;
    let rows = stmt.query_map(params![MESSAGE_SUBSCRIPTION, hop_prefix], |r| {
        Ok(CutSend {
            message_id: r.get(0)?,
            subscription: r.get(1)?,
            peer_id: r.get(2)?,
            created_ms: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// What the id of a push subscription named after a message starts with
/// (the message's id follows): every task started on a peer carries one.
pub const MESSAGE_SUBSCRIPTION: &str = "m-";

/// The id of the push subscription named after the message `message_id`.
pub fn message_subscription(message_id: &str) -> String {
    format!("{MESSAGE_SUBSCRIPTION}{message_id}")
}

/// Puts a dead letter back in line, due now, with its attempts reset.
/// Returns false when there is no failed item with that id.
pub fn retry(conn: &Connection, id: &str, now_ms: i64) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "UPDATE outbox SET status = 'pending', attempts = 0, next_ms = ?2, done_ms = NULL
             WHERE id = ?1 AND status = 'failed'",
        )?
        .execute(params![id, now_ms])?
        == 1)
}

/// One outbox item.
pub fn outbox_item(conn: &Connection, id: &str) -> Result<Option<OutboxItem>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE id = ?1"
        ))?
        .query_row([id], outbox_row)
        .optional()?)
}

/// Outbox items, newest first (`failed_only` for the dead letters).
pub fn outbox(conn: &Connection, failed_only: bool, limit: usize) -> Result<Vec<OutboxItem>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE (?1 = 0 OR status = 'failed') ORDER BY created_ms DESC, rowid DESC LIMIT ?2"
    ))?;
    let rows = stmt.query_map(params![failed_only, limit as i64], outbox_row)?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use super::super::schema::migrated;

    /// What every push's new mirror runs to settle a send builds no
    /// temporary table; an UPDATE that searched the index on `ref_id`
    /// while changing it did (15,000 instructions a push).
    #[test]
    fn settling_a_send_builds_no_temporary_table() {
        let (_dir, c) = migrated();
        let ephemeral = |sql: &str| {
            let mut stmt = c.prepare(&format!("EXPLAIN {sql}")).unwrap();
            let n = stmt.parameter_count();
            let args: Vec<&str> = vec!["1"; n];
            stmt.query_map(rusqlite::params_from_iter(args), |r| r.get::<_, String>(1))
                .unwrap()
                .collect::<rusqlite::Result<Vec<_>>>()
                .unwrap()
                .iter()
                .any(|op| op == "OpenEphemeral")
        };
        assert!(!ephemeral(OWED_START));
        assert!(!ephemeral(DELIVERED_WITH));
        assert!(ephemeral(
            "UPDATE outbox SET status = 'delivered', ref_id = ?2
             WHERE ref_id = ?1 AND kind = 'start' AND status = 'pending'"
        ));
    }

    /// When a message last went is kept with its item, and read back with
    /// it by every reader (the runner's `due`, a single item, the list).
    #[test]
    fn the_time_a_message_went_is_kept_with_its_item() {
        let (_dir, c) = migrated();
        let item = OutboxItem::due_now("start:a".into(), "start", "a".into(), json!({}), 10);
        enqueue(&c, &item).unwrap();
        assert_eq!(outbox_item(&c, "start:a").unwrap().unwrap().sent_ms, None);
        mark_sent(&c, "start:a", Some(20)).unwrap();
        mark_sent(&c, "start:a", Some(30)).unwrap();
        // An unknown item is no error: nothing is marked.
        mark_sent(&c, "start:b", Some(40)).unwrap();
        assert_eq!(
            outbox_item(&c, "start:a").unwrap().unwrap().sent_ms,
            Some(30)
        );
        assert_eq!(due(&c, 10, 10).unwrap()[0].sent_ms, Some(30));
        assert_eq!(outbox(&c, false, 10).unwrap()[0].sent_ms, Some(30));
        mark_sent(&c, "start:a", None).unwrap();
        assert_eq!(outbox_item(&c, "start:a").unwrap().unwrap().sent_ms, None);
        // Put off, it keeps its attempts and says why.
        postpone(&c, "start:a", Some("still taking it"), 99).unwrap();
        let a = outbox_item(&c, "start:a").unwrap().unwrap();
        assert_eq!((a.attempts, a.next_ms), (0, 99));
        assert_eq!(a.last_error.as_deref(), Some("still taking it"));
        assert!(due(&c, 98, 10).unwrap().is_empty());
    }

    /// At start-up a send cut short is due at once, unless its push
    /// subscription was made: then it waits out the grace for the peer's
    /// push, which settles it (and only a pending `start` item).
    #[test]
    fn sends_cut_short_wait_for_a_push_only_when_one_can_come() {
        let (_dir, c) = migrated();
        // Two kept from the runner by their caller, and two the last run's
        // runner was sending again (due already).
        for (id, about, next) in [
            ("start:a", "a", 300_000),
            ("start:b", "b", 300_000),
            ("start:c", "c", 500),
            ("start:d", "d", 500),
        ] {
            let mut item = OutboxItem::due_now(id.into(), "start", about.into(), json!({}), 0);
            item.next_ms = next;
            enqueue(&c, &item).unwrap();
        }
        let sub = Subscription {
            id: message_subscription("b"),
            peer_id: "p".into(),
            token: "t".into(),
            created_ms: 0,
        };
        assert_eq!(ensure_subscription(&c, &sub).unwrap(), sub);
        // Made again, it is the same subscription, token and all.
        let again = Subscription {
            token: "other".into(),
            ..sub.clone()
        };
        assert_eq!(ensure_subscription(&c, &again).unwrap(), sub);
        let elsewhere = Subscription {
            peer_id: "q".into(),
            ..sub.clone()
        };
        assert!(ensure_subscription(&c, &elsewhere).is_err());
        let d = Subscription {
            id: message_subscription("d"),
            ..sub.clone()
        };
        ensure_subscription(&c, &d).unwrap();

        // Two chain hops due, one of them cut short after its
        // subscription was made.
        for hop in ["h1", "h2"] {
            let item =
                OutboxItem::due_now(format!("chain:{hop}"), "chain", hop.into(), json!({}), 400);
            enqueue(&c, &item).unwrap();
        }
        let h1 = Subscription {
            id: message_subscription(&format!("{}h1", super::super::dispatch::HOP_MESSAGE_PREFIX)),
            ..sub.clone()
        };
        ensure_subscription(&c, &h1).unwrap();

        assert_eq!(release_cut_sends(&c, 1_000, 30_000).unwrap(), 4);
        let due = |id: &str| outbox_item(&c, id).unwrap().unwrap().next_ms;
        let dues = ["a", "b", "c", "d"].map(|x| due(&format!("start:{x}")));
        assert_eq!(dues, [1_000, 31_000, 500, 31_000]);
        assert_eq!((due("chain:h1"), due("chain:h2")), (31_000, 400));
        // Those that wait for a push, to ask their peers about meanwhile.
        let cut: Vec<(String, String, i64)> = cut_sends(&c)
            .unwrap()
            .into_iter()
            .map(|c| {
                assert_eq!(c.peer_id, "p");
                (c.message_id, c.subscription, c.created_ms)
            })
            .collect();
        let hop_message = format!("{}h1", super::super::dispatch::HOP_MESSAGE_PREFIX);
        assert_eq!(
            cut,
            [
                ("b".into(), message_subscription("b"), 0),
                ("d".into(), message_subscription("d"), 0),
                (hop_message.clone(), message_subscription(&hop_message), 400),
            ]
        );

        assert!(started_by_push(&c, &message_subscription("b"), "mirror", 2_000).unwrap());
        let b = outbox_item(&c, "start:b").unwrap().unwrap();
        assert_eq!(
            (b.status.as_str(), b.ref_id.as_str()),
            ("delivered", "mirror")
        );
        assert!(
            !started_by_push(&c, &message_subscription("b"), "mirror", 3_000).unwrap(),
            "settled once"
        );
        assert!(!started_by_push(&c, &message_subscription("e"), "mirror", 3_000).unwrap());
        assert_eq!(cut_sends(&c).unwrap().len(), 2, "b is settled");
        // Only a subscription named after a message settles one: `a` is
        // still owed, yet a subscription that is merely called `a` is not
        // its message's.
        assert!(!started_by_push(&c, "a", "mirror", 3_000).unwrap());
        assert_eq!(
            outbox_item(&c, "start:a").unwrap().unwrap().status,
            "pending"
        );
    }

    fn peer_rec(url: &str) -> PeerRecord {
        PeerRecord {
            id: "p".into(),
            url: url.into(),
            name: None,
            auth: PeerAuthRecord::default(),
            reject_with: "message".into(),
            decision_format: "parts".into(),
            card: None,
            card_ms: None,
            from_config: false,
            created_ms: 1,
            pin: None,
            card_change: None,
        }
    }

    fn item(id: &str) -> OutboxItem {
        let mut i = OutboxItem::due_now(id.into(), "decision", id.into(), json!({}), 1);
        i.peer_id = Some("p".into());
        i
    }

    #[test]
    fn pins_on_first_use_records_a_change_once_and_trust_requeues_what_it_held() {
        let (_d, c) = migrated();
        put_peer(&c, &peer_rec("http://127.0.0.1:1/a")).unwrap();
        let v1 = json!({"identity": {"name": "A"}, "skills": ["x"], "auth": [], "key": "k1"});
        let v2 = json!({"identity": {"name": "A"}, "skills": ["x", "y"], "auth": [], "key": "k2"});
        assert_eq!(check_pin(&c, "p", &v1, 10).unwrap(), None);
        assert_eq!(peer(&c, "p").unwrap().unwrap().pin, Some(v1.clone()));
        assert_eq!(check_pin(&c, "p", &v1, 11).unwrap(), None);
        let change = check_pin(&c, "p", &v2, 12).unwrap().unwrap();
        assert_eq!(change["changed"], json!(["skills", "key"]));
        // The same change again is not news; the pin stays until trusted.
        assert_eq!(check_pin(&c, "p", &v2, 13).unwrap(), None);
        // Going back to the pinned card does not clear it either: only a person does.
        assert_eq!(check_pin(&c, "p", &v1, 14).unwrap(), None);
        let rec = peer(&c, "p").unwrap().unwrap();
        assert_eq!(rec.pin, Some(v1.clone()));
        assert_eq!(rec.card_change.unwrap()["atMs"], 12);

        // Held calls: one pending, one dead for being held, one dead for another reason.
        for id in ["a", "b", "c"] {
            enqueue(&c, &item(id)).unwrap();
        }
        record_attempt(&c, "a", "pending", Some("held: x"), 1_000_000, 20).unwrap();
        record_attempt(&c, "b", "failed", Some("held: x"), 20, 20).unwrap();
        record_attempt(
            &c,
            "c",
            "failed",
            Some("the peer answered HTTP 400"),
            20,
            20,
        )
        .unwrap();
        assert!(trust(&c, "p", 30).unwrap());
        let rec = peer(&c, "p").unwrap().unwrap();
        assert_eq!(rec.pin, Some(v2));
        assert_eq!(rec.card_change, None);
        let st = |id: &str| outbox_item(&c, id).unwrap().unwrap();
        assert_eq!((st("a").status.as_str(), st("a").next_ms), ("pending", 30));
        assert_eq!((st("b").status.as_str(), st("b").attempts), ("pending", 0));
        assert_eq!(st("c").status, "failed");
        // Nothing waiting: nothing to accept.
        assert!(!trust(&c, "p", 40).unwrap());

        // A new URL (the person edited the peer) starts over: no pin.
        put_peer(&c, &peer_rec("http://127.0.0.1:2/b")).unwrap();
        assert_eq!(peer(&c, "p").unwrap().unwrap().pin, None);
    }

    /// Each task of a continuation links to the other, and the new task
    /// keeps its link to the old one once that one is archived.
    #[test]
    fn a_continuation_links_both_ways_and_outlives_the_old_task() {
        let (_d, c) = migrated();
        c.execute_batch(
            "INSERT INTO tasks (id, agent_id, owner, context_id, state, status, parked,
                                created_ms, updated_ms, peer_id, remote_id)
             VALUES ('old', 'a', 'o', 'ctx', 6, '{}', 1, 1, 1, 'p', 'r-old'),
                    ('new', 'a', 'o', 'ctx', 6, '{}', 1, 2, 2, 'p', 'r-new'),
                    ('other', 'a', 'o', 'ctx', 6, '{}', 1, 3, 3, 'p', 'r-other');",
        )
        .unwrap();
        continue_in(&c, "p", "r-old", "new", 5).unwrap();
        // A second task answered with the same one does not move its link.
        continue_in(&c, "p", "r-other", "new", 6).unwrap();
        let old = continuation(&c, "old").unwrap();
        assert_eq!(old.continued_in.as_deref(), Some("new"));
        assert_eq!((old.continues, old.continues_archived), (None, false));
        let new = continuation(&c, "new").unwrap();
        assert_eq!(new.continues.as_deref(), Some("old"));
        assert!(!new.continues_archived);
        assert_eq!(new.continued_in, None);

        c.execute("DELETE FROM tasks WHERE id = 'old'", []).unwrap();
        let new = continuation(&c, "new").unwrap();
        assert_eq!(new.continues.as_deref(), Some("old"));
        assert!(new.continues_archived);
        // A task not here has no links.
        assert_eq!(continuation(&c, "old").unwrap(), Continuation::default());
    }
}
