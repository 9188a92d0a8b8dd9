//! Queries on tasks, their history, artifacts, events and push configs.

use base64::Engine as _;
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::value::RawValue;

use super::{Error, Result, push_keyset};
use crate::a2a::types::{
    Artifact, Message, Metadata, Task, TaskPushNotificationConfig, TaskState, TaskStatus,
};

/// The columns of a task that decisions are made on, without its bodies.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskHead {
    pub id: String,
    pub agent_id: String,
    pub owner: String,
    pub context_id: String,
    pub state: TaskState,
    pub last_seq: i64,
    pub history_len: i64,
    pub parked: bool,
    /// When the task last changed.
    pub updated_ms: i64,
    /// The dialect the task was created in: `v1`, `v0.3` or `legacy`.
    pub dialect: String,
}

/// Where a task came from (`tasks.origin`, and each of its turns'
/// `source`): asked of an agent served here, or mirrored from a watched
/// peer.
pub const SERVED: &str = "served";
pub const WATCHED: &str = "watched";

/// A task about to be created.
pub struct NewTask {
    pub id: String,
    pub agent_id: String,
    pub owner: String,
    pub context_id: String,
    pub status: TaskStatus,
    pub metadata: Option<Metadata>,
    pub now_ms: i64,
    pub dialect: &'static str,
}

#[cfg(test)]
impl NewTask {
    /// A task of `agent_id` owned by `owner`, in dialect v1 with no
    /// metadata, for tests.
    pub(crate) fn for_test(
        (id, agent_id, owner, context_id): (&str, &str, &str, &str),
        status: TaskStatus,
        now_ms: i64,
    ) -> Self {
        Self {
            id: id.into(),
            agent_id: agent_id.into(),
            owner: owner.into(),
            context_id: context_id.into(),
            status,
            metadata: None,
            now_ms,
            dialect: "v1",
        }
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String> {
    // Stored statuses and messages are a few hundred bytes.
    crate::a2a::to_json_sized(v, 384).map_err(|e| Error::Corrupt(format!("cannot encode: {e}")))
}

fn from_json<T: serde::de::DeserializeOwned>(s: &str) -> Result<T> {
    serde_json::from_str(s).map_err(|e| Error::Corrupt(format!("cannot decode stored JSON: {e}")))
}

fn state_of(n: i64) -> Result<TaskState> {
    TaskState::from_number(n).ok_or_else(|| Error::Corrupt(format!("unknown stored state {n}")))
}

/// Inserts a new task row, without history or events; returns its head.
///
/// A task counts its events (`last_seq`: the bus and the streams number
/// them, and push deliveries are named after them) but does not store them:
/// what an event says is in the task's row, history and artifacts, and what
/// it owes is queued with it in the outbox. Migration 10 dropped the log
/// they were once copied to, which nothing read.
pub fn insert_task(conn: &Connection, t: &NewTask) -> Result<TaskHead> {
    Ok(insert_row(conn, t, 0, 0, None, None, None)?.0)
}

/// A watched task's place on its peer: the peer, the task's id there, and
/// the subscription its pushes come by.
pub struct Mirrored<'a> {
    pub peer_id: &'a str,
    pub remote_id: &'a str,
    pub subscription: Option<&'a str>,
}

/// Inserts the row of a task that will hold `messages` messages and
/// `events` events; a watched task's row is linked to its peer's task.
/// `last` is the JSON of the last of those messages, which its status may
/// name instead of holding a copy (see [`stored_status`]). Returns its
/// head, and the JSON of its status and metadata (as [`load_stored`] reads
/// them back).
fn insert_row(
    conn: &Connection,
    t: &NewTask,
    messages: i64,
    events: i64,
    link: Option<&Mirrored<'_>>,
    last: Option<&EncodedMessage<'_>>,
    head: Option<&str>,
) -> Result<(TaskHead, String, Option<String>)> {
    let metadata = t.metadata.as_ref().map(to_json).transpose()?;
    let status = match last {
        Some(m)
            if t.status
                .message
                .as_ref()
                .is_some_and(|s| std::ptr::eq(s, m.message)) =>
        {
            status_with(&t.status, &m.body)?
        }
        _ => to_json(&t.status)?,
    };
    let stored = last.and_then(|m| stored_status(&status, Some(messages), &m.body));
    conn.prepare_cached(
        "INSERT INTO tasks (id, agent_id, owner, context_id, state, status, metadata,
                            parked, created_ms, updated_ms, dialect, history_len, last_seq,
                            peer_id, remote_id, subscription_id, origin, head)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    )?
    .execute(params![
        t.id,
        t.agent_id,
        t.owner,
        t.context_id,
        t.status.state.number(),
        stored.as_deref().unwrap_or(&status),
        metadata,
        t.status.state.is_interrupted(),
        t.now_ms,
        t.dialect,
        messages,
        events,
        link.map(|l| l.peer_id),
        link.map(|l| l.remote_id),
        link.and_then(|l| l.subscription),
        if link.is_some() { WATCHED } else { SERVED },
        head,
    ])?;
    Ok((new_head(t, messages, events), status, metadata))
}

/// `status`'s JSON, as [`to_json`] writes it, around `message`: the JSON
/// of its message, already written for the history (writing it again was
/// 2% of a durable SendMessage).
fn status_with(status: &TaskStatus, message: &str) -> Result<String> {
    let state = to_json(&status.state)?;
    let timestamp = status.timestamp.as_ref().map(to_json).transpose()?;
    let mut out = String::with_capacity(message.len() + 64);
    out.push_str("{\"state\":");
    out.push_str(&state);
    out.push_str(",\"message\":");
    out.push_str(message);
    if let Some(ts) = timestamp {
        out.push_str(",\"timestamp\":");
        out.push_str(&ts);
    }
    out.push('}');
    Ok(out)
}

/// The head of the task `t` once it holds `messages` messages and `events`
/// events.
fn new_head(t: &NewTask, messages: i64, events: i64) -> TaskHead {
    TaskHead {
        id: t.id.clone(),
        agent_id: t.agent_id.clone(),
        owner: t.owner.clone(),
        context_id: t.context_id.clone(),
        state: t.status.state,
        last_seq: events,
        history_len: messages,
        parked: t.status.state.is_interrupted(),
        updated_ms: t.now_ms,
        dialect: t.dialect.to_owned(),
    }
}

/// Creates a task with its first message and its first event (sequence
/// number 1 of each), in one statement: the message is kept in the row
/// (see [`head_text`]). Returns the new task's head.
pub fn create(conn: &Connection, t: &NewTask, first: &Message) -> Result<TaskHead> {
    let first = EncodedMessage::new(first)?;
    let text = head_text(t, std::slice::from_ref(&first));
    let (head, ..) = insert_row(conn, t, 1, 1, None, None, Some(&text))?;
    Ok(head)
}

/// The messages a task is created with, as its row keeps them (`head`):
/// for each, its id and its body as a `messages` row stores it
/// ([`stored_tail`]), each after its length in bytes and a colon. Its
/// history goes on in `messages`, numbered on from them.
fn head_text(t: &NewTask, messages: &[EncodedMessage<'_>]) -> String {
    use std::fmt::Write;
    let mut text = String::with_capacity(messages.iter().map(|m| m.body.len() + 64).sum());
    for m in messages {
        let id = &m.message.message_id;
        let stored = stored_tail(&m.body, id, &t.id, &t.context_id).unwrap_or(&m.body);
        // Writing to a String cannot fail.
        let _ = write!(text, "{}:{id}{}:", id.len(), stored.len());
        text.push_str(stored);
    }
    text
}

/// One field of a row's `head`: its length, a colon and the field; and
/// what follows it.
fn head_field(rest: &str) -> Option<(&str, &str)> {
    let (len, after) = rest.split_once(':')?;
    let len: usize = len.parse().ok()?;
    Some((after.get(..len)?, after.get(len..)?))
}

/// The messages of a row's `head` ([`head_text`]), oldest first: each
/// one's id and stored body.
fn head_messages(text: &str) -> Result<Vec<(&str, &str)>> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let Some((id, stored, after)) = head_field(rest)
            .and_then(|(id, r)| head_field(r).map(|(stored, after)| (id, stored, after)))
        else {
            return Err(Error::Corrupt(format!("a task's first messages: {text}")));
        };
        out.push((id, stored));
        rest = after;
    }
    Ok(out)
}

/// Creates a task that already holds `history` (sequence numbers 1…, in
/// order) and `events` events: a mirror seen for the first time is stored
/// in one statement per row, where creating it empty and then catching up
/// took an update of the new row per message and one more for its status.
pub fn create_with_history(
    conn: &Connection,
    t: &NewTask,
    history: &[&Message],
    events: i64,
) -> Result<(TaskHead, CreatedBodies)> {
    create_rows(conn, t, history.iter().copied(), events, None)
}

/// The JSON a task was created with: its status, metadata and history, as
/// stored (see [`CreatedTask`]).
#[derive(Clone)]
pub struct CreatedBodies {
    status: String,
    metadata: Option<String>,
    history: Vec<String>,
}

/// A task as it was created, in the JSON it was stored as: what
/// [`load_stored`] would read right after (with an empty list of
/// artifacts), without reading it. An answer written from it is the one
/// GetTask would write then, and writing it costs copies of text where
/// writing the task's types took a tenth of a parked SendMessage. The text
/// is written as it is, unchecked: serde_json wrote it moments before.
#[derive(Clone)]
pub struct CreatedTask {
    id: String,
    context_id: String,
    bodies: CreatedBodies,
}

impl CreatedTask {
    pub fn new(id: String, context_id: String, bodies: CreatedBodies) -> Self {
        Self {
            id,
            context_id,
            bodies,
        }
    }

    /// Keeps the last `n` messages of the history.
    pub fn keep_history(&mut self, n: usize) {
        let h = &mut self.bodies.history;
        h.drain(..h.len().saturating_sub(n));
    }

    /// Writes the task as [`Task`]'s v1.0 JSON: its members in `Task`'s
    /// order, `artifacts` empty, `history` left out when empty and
    /// `metadata` when absent.
    pub fn write_v1(&self, out: &mut String) -> Result<()> {
        out.push_str("{\"id\":");
        out.push_str(&to_json(&self.id)?);
        out.push_str(",\"contextId\":");
        out.push_str(&to_json(&self.context_id)?);
        out.push_str(",\"status\":");
        out.push_str(&self.bodies.status);
        out.push_str(",\"artifacts\":[]");
        if !self.bodies.history.is_empty() {
            out.push_str(",\"history\":[");
            for (i, m) in self.bodies.history.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(m);
            }
            out.push(']');
        }
        if let Some(m) = &self.bodies.metadata {
            out.push_str(",\"metadata\":");
            out.push_str(m);
        }
        out.push('}');
        Ok(())
    }

    /// The task, parsed (for the dialects that reshape it).
    pub fn parse(&self) -> Result<Task> {
        task_of(
            &self.id,
            &self.context_id,
            &self.bodies.status,
            Some(std::iter::empty()),
            self.bodies.history.iter().map(String::as_str),
            self.bodies.metadata.as_deref(),
        )
    }
}

/// Like [`create_with_history`], for a watched task mirrored from `link`:
/// the row is inserted linked, not updated after.
pub fn create_mirror(
    conn: &Connection,
    t: &NewTask,
    history: &[Message],
    events: i64,
    link: &Mirrored<'_>,
) -> Result<TaskHead> {
    Ok(create_rows(conn, t, history.iter(), events, Some(link))?.0)
}

fn create_rows<'m>(
    conn: &Connection,
    t: &NewTask,
    history: impl ExactSizeIterator<Item = &'m Message>,
    events: i64,
    link: Option<&Mirrored<'_>>,
) -> Result<(TaskHead, CreatedBodies)> {
    let n = i64::try_from(history.len()).unwrap_or(i64::MAX);
    let encoded = history
        .map(EncodedMessage::new)
        .collect::<Result<Vec<_>>>()?;
    let text = (!encoded.is_empty()).then(|| head_text(t, &encoded));
    let (head, status, metadata) =
        insert_row(conn, t, n, events, link, encoded.last(), text.as_deref())?;
    let bodies = encoded.into_iter().map(|m| m.body).collect();
    Ok((
        head,
        CreatedBodies {
            status,
            metadata,
            history: bodies,
        },
    ))
}

/// The head's columns, in the order [`head_row`] reads them.
const HEAD_COLUMNS: &str =
    "id, agent_id, owner, context_id, state, last_seq, history_len, parked, dialect, updated_ms";

fn head_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, TaskHead)> {
    Ok((
        r.get::<_, i64>(4)?,
        TaskHead {
            id: r.get(0)?,
            agent_id: r.get(1)?,
            owner: r.get(2)?,
            context_id: r.get(3)?,
            state: TaskState::Submitted,
            last_seq: r.get(5)?,
            history_len: r.get(6)?,
            parked: r.get(7)?,
            dialect: r.get(8)?,
            updated_ms: r.get(9)?,
        },
    ))
}

fn finish_head((state, mut head): (i64, TaskHead)) -> Result<TaskHead> {
    head.state = state_of(state)?;
    Ok(head)
}

/// The head of a task, if it exists.
pub fn head(conn: &Connection, id: &str) -> Result<Option<TaskHead>> {
    conn.prepare_cached(&format!("SELECT {HEAD_COLUMNS} FROM tasks WHERE id = ?1"))?
        .query_row([id], head_row)
        .optional()?
        .map(finish_head)
        .transpose()
}

/// Replaces the status of the task `h` heads and appends `message` (if any)
/// to its history, with one update of the task's row. A task is parked
/// exactly while it is interrupted. Returns the sequence number of the
/// event that reports the change.
pub fn record_status(
    conn: &Connection,
    h: &TaskHead,
    status: &TaskStatus,
    message: Option<&Message>,
    now_ms: i64,
) -> Result<i64> {
    // Setting `updated_ms` rewrites the four indexes that hold it, even to
    // the same value: a task created and parked in one millisecond (every
    // human task) leaves it alone.
    let same_ms = now_ms == h.updated_ms;
    // A status that names the message it appends (see [`stored_status`])
    // is stored as `?3` naming `history_len + 1`, the message's number,
    // which only the row knows for sure.
    let sql = if same_ms {
        "UPDATE tasks SET state = ?2, parked = ?4,
                status = CASE WHEN ?6 THEN '@' || (history_len + 1) || ?3 ELSE ?3 END,
                history_len = history_len + ?5, last_seq = last_seq + 1
         WHERE id = ?1 RETURNING history_len, last_seq"
    } else {
        "UPDATE tasks SET state = ?2, parked = ?4,
                status = CASE WHEN ?6 THEN '@' || (history_len + 1) || ?3 ELSE ?3 END,
                history_len = history_len + ?5, last_seq = last_seq + 1, updated_ms = ?7
         WHERE id = ?1 RETURNING history_len, last_seq"
    };
    let id = &h.id;
    let encoded = message.map(EncodedMessage::new).transpose()?;
    let status_json = to_json(status)?;
    let named = encoded
        .as_ref()
        .and_then(|m| stored_status(&status_json, None, &m.body));
    let (state, parked) = (status.state.number(), status.state.is_interrupted());
    let added = i64::from(message.is_some());
    let stored = named.as_deref().unwrap_or(&status_json);
    let names = named.is_some();
    let all: [&dyn rusqlite::ToSql; 7] = [id, &state, &stored, &parked, &added, &names, &now_ms];
    let args = if same_ms { &all[..6] } else { &all[..] };
    let (history_len, seq): (i64, i64) = conn
        .prepare_cached(sql)?
        .query_row(args, |r| Ok((r.get(0)?, r.get(1)?)))?;
    if let Some(m) = &encoded {
        insert_encoded(conn, id, &h.context_id, history_len, m)?;
    }
    Ok(seq)
}

/// Served tasks still submitted or working: (id, agent id).
pub fn active_served(conn: &Connection) -> Result<Vec<(String, String)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, agent_id FROM tasks WHERE state IN (1, 2) AND origin = 'served'",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
    let mut out = Vec::new();
    for row in rows {
        out.push(row?);
    }
    Ok(out)
}

/// Whether a task's history holds the message `message_id`.
pub fn has_message(conn: &Connection, task_id: &str, message_id: &str) -> Result<bool> {
    let row: Option<(Option<i64>, Option<String>)> = conn
        .prepare_cached(
            "SELECT (SELECT 1 FROM messages WHERE task_id = ?1 AND message_id = ?2 LIMIT 1), head
             FROM tasks WHERE id = ?1",
        )?
        .query_row(params![task_id, message_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((in_rows, head)) = row else {
        return Ok(false);
    };
    if in_rows.is_some() {
        return Ok(true);
    }
    Ok(head_messages(head.as_deref().unwrap_or_default())?
        .iter()
        .any(|(id, _)| *id == message_id))
}

/// A message with the JSON it is stored as, encoded once for both the retry
/// check ([`holds_message`]) and the append ([`append_encoded`]).
pub struct EncodedMessage<'a> {
    message: &'a Message,
    body: String,
}

impl<'a> EncodedMessage<'a> {
    pub fn new(message: &'a Message) -> Result<Self> {
        Ok(Self {
            message,
            body: to_json(message)?,
        })
    }
}

/// Whether a task's history holds this very message: its id with the same
/// content, as stored by [`append_message`].
pub fn holds_message(conn: &Connection, task_id: &str, m: &EncodedMessage) -> Result<bool> {
    let id = &m.message.message_id;
    let mut stmt = conn.prepare_cached(
        "SELECT m.body, t.context_id FROM messages m JOIN tasks t ON t.id = m.task_id
         WHERE m.task_id = ?1 AND m.message_id = ?2",
    )?;
    let mut rows = stmt.query(params![task_id, id])?;
    while let Some(r) = rows.next()? {
        let (body, context_id): (String, String) = (r.get(0)?, r.get(1)?);
        if body == m.body || stored_tail(&m.body, id, task_id, &context_id) == Some(&body) {
            return Ok(true);
        }
    }
    let row: Option<(Option<String>, String)> = conn
        .prepare_cached("SELECT head, context_id FROM tasks WHERE id = ?1")?
        .query_row([task_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((head, context_id)) = row else {
        return Ok(false);
    };
    Ok(head_messages(head.as_deref().unwrap_or_default())?
        .iter()
        .any(|&(held, body)| {
            held == id
                && (body == m.body || stored_tail(&m.body, id, task_id, &context_id) == Some(body))
        }))
}

/// Every message of a task's history, as JSON: oldest first, or newest.
pub fn history_bodies(conn: &Connection, task_id: &str, newest_first: bool) -> Result<Vec<String>> {
    let Some((head, context_id)) = conn
        .prepare_cached("SELECT head, context_id FROM tasks WHERE id = ?1")?
        .query_row([task_id], |r| {
            Ok((r.get::<_, Option<String>>(0)?, r.get::<_, String>(1)?))
        })
        .optional()?
    else {
        return Ok(Vec::new());
    };
    let mut bodies: Vec<String> = head_messages(head.as_deref().unwrap_or_default())?
        .into_iter()
        .map(|(message_id, stored)| message_body(stored, message_id, task_id, &context_id))
        .collect();
    let mut stmt = conn
        .prepare_cached("SELECT message_id, body FROM messages WHERE task_id = ?1 ORDER BY seq")?;
    let rows = stmt.query_map([task_id], |r| {
        let text = |i| r.get_ref(i)?.as_str().map_err(rusqlite::Error::from);
        Ok(message_body(text(1)?, text(0)?, task_id, &context_id))
    })?;
    for body in rows {
        bodies.push(body?);
    }
    if newest_first {
        bodies.reverse();
    }
    Ok(bodies)
}

/// Appends a message to a task's history.
pub fn append_message(conn: &Connection, task_id: &str, m: &Message) -> Result<()> {
    append_encoded(conn, task_id, &EncodedMessage::new(m)?)
}

/// [`append_message`] for a message already encoded.
pub fn append_encoded(conn: &Connection, task_id: &str, m: &EncodedMessage) -> Result<()> {
    let (seq, context_id): (i64, String) = conn
        .prepare_cached(
            "UPDATE tasks SET history_len = history_len + 1 WHERE id = ?1
             RETURNING history_len, context_id",
        )?
        .query_row([task_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    insert_encoded(conn, task_id, &context_id, seq, m)
}

fn insert_encoded(
    conn: &Connection,
    task_id: &str,
    context_id: &str,
    seq: i64,
    m: &EncodedMessage,
) -> Result<()> {
    let id = &m.message.message_id;
    let body = stored_tail(&m.body, id, task_id, context_id).unwrap_or(&m.body);
    conn.prepare_cached(
        "INSERT INTO messages (task_id, seq, message_id, body) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![task_id, seq, id, body])?;
    Ok(())
}

/// A status whose message is also the task's history message `seq` (the
/// question a parked task asks is both) names that message rather than
/// holding a second copy of it: its JSON `pre` + the message + `post` is
/// stored as `@{seq}:{pre's length}:{pre}{post}`, and [`load_stored`] puts
/// the message back. `None` when the status does not hold `message` (JSON
/// as written) as its message. Without `seq`, the `@{seq}` in front is
/// left to the caller (an UPDATE that reads the number from the row).
fn stored_status(status: &str, seq: Option<i64>, message: &str) -> Option<String> {
    use std::fmt::Write;
    // `{"state":"…","message":…`: the state's name holds no comma.
    let comma = status.bytes().position(|b| b == b',')?;
    let at = comma + r#","message":"#.len();
    let named =
        status.get(comma..at)? == r#","message":"# && status.get(at..)?.starts_with(message);
    if !named {
        return None;
    }
    let (pre, post) = (&status[..at], &status[at + message.len()..]);
    let mut stored = String::with_capacity(pre.len() + post.len() + 16);
    if let Some(seq) = seq {
        write!(stored, "@{seq}").ok()?;
    }
    write!(stored, ":{}:", pre.len()).ok()?;
    stored.push_str(pre);
    stored.push_str(post);
    Some(stored)
}

/// What a status stored as [`stored_status`] names: the message's number,
/// and the JSON before and after it.
/// `pre` is `stored[start..end]`, and `post` the rest after it.
fn named_message(stored: &str) -> Option<(i64, usize, usize)> {
    let field = |from: usize| -> Option<(&str, usize)> {
        let len = stored.get(from..)?.bytes().position(|b| b == b':')?;
        Some((&stored[from..from + len], from + len + 1))
    };
    let (seq, next) = field(stored.strip_prefix('@').map(|_| 1)?)?;
    let (pre_len, start) = field(next)?;
    let end = start.checked_add(pre_len.parse().ok()?)?;
    stored.get(start..end)?;
    Some((seq.parse().ok()?, start, end))
}

/// A message is stored without the ids its row already holds. Written for
/// its task, its JSON starts `{"messageId":"…","contextId":"…","taskId":"…",`
/// (the message's, its context's and its task's ids), about a third of a
/// short message; it is stored from the comma after them, and
/// [`message_body`] writes them back in front. A body that starts any other
/// way (a message of another context, an id JSON escapes, or a row written
/// before) is stored whole.
fn stored_tail<'b>(
    body: &'b str,
    message_id: &str,
    task_id: &str,
    context_id: &str,
) -> Option<&'b str> {
    let tail = body
        .strip_prefix(r#"{"messageId":""#)?
        .strip_prefix(message_id)?
        .strip_prefix(r#"","contextId":""#)?
        .strip_prefix(context_id)?
        .strip_prefix(r#"","taskId":""#)?
        .strip_prefix(task_id)?
        .strip_prefix('"')?;
    // An id JSON escapes cannot match: JSON writes a quote or a control
    // character as a backslash first, and a run of backslashes twice over,
    // so what follows the raw id is still inside the JSON string, never the
    // `"` matched next. (A test stores such ids.)
    tail.starts_with(',').then_some(tail)
}

/// A message's JSON from its stored body (see [`stored_tail`]).
pub(super) fn message_body(
    stored: &str,
    message_id: &str,
    task_id: &str,
    context_id: &str,
) -> String {
    if !stored.starts_with(',') {
        return stored.to_owned();
    }
    let parts = [
        r#"{"messageId":""#,
        message_id,
        r#"","contextId":""#,
        context_id,
        r#"","taskId":""#,
        task_id,
        "\"",
        stored,
    ];
    // Exactly its length: the body becomes a boxed `str` as it is.
    let mut body = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        body.push_str(p);
    }
    body
}

/// Stores an artifact: a new id is added at the end; an existing id is
/// replaced, or with `append` extended by the new parts. Returns what is
/// stored now.
pub fn put_artifact(
    conn: &Connection,
    task_id: &str,
    a: &Artifact,
    append: bool,
) -> Result<Artifact> {
    let existing: Option<String> = conn
        .prepare_cached("SELECT body FROM artifacts WHERE task_id = ?1 AND artifact_id = ?2")?
        .query_row(params![task_id, a.artifact_id], |r| r.get(0))
        .optional()?;
    let merged = match (existing, append) {
        (Some(body), true) => {
            let mut old: Artifact = from_json(&body)?;
            old.parts.extend(a.parts.iter().cloned());
            if a.name.is_some() {
                old.name = a.name.clone();
            }
            if a.description.is_some() {
                old.description = a.description.clone();
            }
            if a.metadata.is_some() {
                old.metadata = a.metadata.clone();
            }
            old
        }
        _ => a.clone(),
    };
    conn.prepare_cached(
        "INSERT INTO artifacts (task_id, artifact_id, ord, body)
         VALUES (?1, ?2, (SELECT COALESCE(MAX(ord), 0) + 1 FROM artifacts WHERE task_id = ?1), ?3)
         ON CONFLICT (task_id, artifact_id) DO UPDATE SET body = excluded.body",
    )?
    .execute(params![task_id, merged.artifact_id, to_json(&merged)?])?;
    Ok(merged)
}

/// Takes the task's next event sequence number (for an event that changes
/// nothing else in its row).
pub fn next_seq(conn: &Connection, task_id: &str) -> Result<i64> {
    Ok(conn
        .prepare_cached(
            "UPDATE tasks SET last_seq = last_seq + 1 WHERE id = ?1 RETURNING last_seq",
        )?
        .query_row([task_id], |r| r.get(0))?)
}

/// Whether the task `id` is in the live database (not archived, not
/// unknown).
pub fn kept(conn: &Connection, id: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM tasks WHERE id = ?1")?
        .exists([id])?)
}

/// Loads a whole task. `history`: `None` = all, `Some(n)` = the last n.
pub fn load(
    conn: &Connection,
    id: &str,
    history: Option<usize>,
    include_artifacts: bool,
) -> Result<Option<(TaskHead, Task)>> {
    let Some((head, bodies)) = load_bodies(conn, id, history, include_artifacts)? else {
        return Ok(None);
    };
    let task = task_of(
        &head.id,
        &head.context_id,
        &bodies.status,
        bodies
            .artifacts
            .as_ref()
            .map(|a| a.iter().map(String::as_str)),
        bodies.history.iter().map(String::as_str),
        bodies.metadata.as_deref(),
    )?;
    Ok(Some((head, task)))
}

/// A task with its status, history, artifacts and metadata left in the
/// JSON they were stored as (checked to be well-formed, not read into
/// types). GetTask answers a v1.0 caller with it: reading the stored JSON
/// into a [`Task`] and writing it out again was a third of a GetTask.
///
/// The members are [`Task`]'s, in its order and with its rules for leaving
/// one out, and each stored body was written by the type `Task` holds: so
/// this writes the text the parsed `Task` would.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredTask {
    pub id: String,
    pub context_id: String,
    pub status: Box<RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<Box<RawValue>>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Box<RawValue>>,
}

impl StoredTask {
    /// The task, parsed (for the dialects that reshape it).
    pub fn parse(&self) -> Result<Task> {
        task_of(
            &self.id,
            &self.context_id,
            self.status.get(),
            self.artifacts.as_ref().map(|a| a.iter().map(|b| b.get())),
            self.history.iter().map(|b| b.get()),
            self.metadata.as_deref().map(RawValue::get),
        )
    }
}

/// Parses a task's stored bodies into a [`Task`].
fn task_of<'a>(
    id: &str,
    context_id: &str,
    status: &str,
    artifacts: Option<impl Iterator<Item = &'a str>>,
    history: impl Iterator<Item = &'a str>,
    metadata: Option<&str>,
) -> Result<Task> {
    Ok(Task {
        id: id.to_owned(),
        context_id: context_id.to_owned(),
        status: from_json(status)?,
        artifacts: artifacts
            .map(|a| a.map(from_json).collect::<Result<_>>())
            .transpose()?,
        history: history.map(from_json).collect::<Result<_>>()?,
        metadata: metadata.map(from_json).transpose()?,
    })
}

/// A whole task, its JSON as stored: see [`StoredTask`]. `history`:
/// `None` = all, `Some(n)` = the last n.
pub fn load_stored(
    conn: &Connection,
    id: &str,
    history: Option<usize>,
    include_artifacts: bool,
) -> Result<Option<(TaskHead, StoredTask)>> {
    let Some((head, bodies)) = load_bodies(conn, id, history, include_artifacts)? else {
        return Ok(None);
    };
    let task = StoredTask {
        id: head.id.clone(),
        context_id: head.context_id.clone(),
        status: raw_json(bodies.status)?,
        artifacts: bodies
            .artifacts
            .map(|a| a.into_iter().map(raw_json).collect::<Result<_>>())
            .transpose()?,
        history: bodies
            .history
            .into_iter()
            .map(raw_json)
            .collect::<Result<_>>()?,
        metadata: bodies.metadata.map(raw_json).transpose()?,
    };
    Ok(Some((head, task)))
}

/// A task's stored JSON bodies, as read: [`load`] parses them,
/// [`load_stored`] checks and keeps them. One reader for both, so neither
/// pays for the other's reading.
struct Bodies {
    status: String,
    metadata: Option<String>,
    /// Oldest first.
    history: Vec<String>,
    artifacts: Option<Vec<String>>,
}

fn load_bodies(
    conn: &Connection,
    id: &str,
    history: Option<usize>,
    include_artifacts: bool,
) -> Result<Option<(TaskHead, Bodies)>> {
    let row = conn
        .prepare_cached(&format!(
            "SELECT {HEAD_COLUMNS}, status, metadata, head FROM tasks WHERE id = ?1"
        ))?
        .query_row([id], |r| {
            Ok((
                head_row(r)?,
                r.get::<_, String>(10)?,
                r.get::<_, Option<String>>(11)?,
                r.get::<_, Option<String>>(12)?,
            ))
        })
        .optional()?;
    let Some((head, status, metadata, first)) = row else {
        return Ok(None);
    };
    let head = finish_head(head)?;
    let first = head_messages(first.as_deref().unwrap_or_default())?;
    // Messages after the first ones are rows of their own (a task stored
    // before migration 24 has only those).
    let rows_from = first.len() as i64 + 1;
    let named_parts = named_message(&status);
    let named = named_parts.map(|(seq, ..)| seq);
    // Where the message the status names is among those read (newest first).
    let mut named_at = None;
    let mut history = match history {
        Some(0) => Vec::new(),
        limit => {
            let wanted = limit.unwrap_or(usize::MAX);
            let mut msgs = Vec::new();
            if head.history_len >= rows_from || first.is_empty() {
                let mut stmt = conn.prepare_cached(
                    "SELECT seq, message_id, body FROM messages WHERE task_id = ?1
                     ORDER BY seq DESC LIMIT ?2",
                )?;
                let limit = limit.map_or(-1, |n| n as i64);
                let mut rows = stmt.query(params![id, limit])?;
                while let Some(r) = rows.next()? {
                    if named.is_some() && named == Some(r.get(0)?) {
                        named_at = Some(msgs.len());
                    }
                    let text = |i| r.get_ref(i)?.as_str().map_err(rusqlite::Error::from);
                    msgs.push(message_body(text(2)?, text(1)?, id, &head.context_id));
                }
            }
            for (i, (message_id, stored)) in first.iter().enumerate().rev() {
                if msgs.len() >= wanted {
                    break;
                }
                if named == Some(i as i64 + 1) {
                    named_at = Some(msgs.len());
                }
                msgs.push(message_body(stored, message_id, id, &head.context_id));
            }
            msgs
        }
    };
    let status = match named_parts {
        None if status.starts_with('@') => {
            return Err(Error::Corrupt(format!("status of task `{id}`: {status}")));
        }
        None => status,
        Some((seq, start, end)) => {
            let (pre, post) = (&status[start..end], &status[end..]);
            let read;
            let message = match named_at {
                Some(i) => &history[i],
                None if seq >= 1 && seq < rows_from => {
                    let (message_id, stored) = first[(seq - 1) as usize];
                    read = message_body(stored, message_id, id, &head.context_id);
                    &read
                }
                None => {
                    read = conn
                        .prepare_cached(
                            "SELECT message_id, body FROM messages WHERE task_id = ?1 AND seq = ?2",
                        )?
                        .query_row(params![id, seq], |r| {
                            let text = |i| r.get_ref(i)?.as_str().map_err(rusqlite::Error::from);
                            Ok(message_body(text(1)?, text(0)?, id, &head.context_id))
                        })
                        .optional()?
                        .ok_or_else(|| {
                            Error::Corrupt(format!(
                                "status of task `{id}` names message {seq}, which it lacks"
                            ))
                        })?;
                    &read
                }
            };
            [pre, message.as_str(), post].concat()
        }
    };
    history.reverse();
    let artifacts = if include_artifacts {
        let mut stmt =
            conn.prepare_cached("SELECT body FROM artifacts WHERE task_id = ?1 ORDER BY ord")?;
        let rows = stmt
            .query_map([id], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Some(rows)
    } else {
        None
    };
    Ok(Some((
        head,
        Bodies {
            status,
            metadata,
            history,
            artifacts,
        },
    )))
}

fn raw_json(s: String) -> Result<Box<RawValue>> {
    RawValue::from_string(s).map_err(|e| Error::Corrupt(format!("cannot decode stored JSON: {e}")))
}

/// What ListTasks filters on; `agent_id` and `owner` always apply.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub agent_id: String,
    pub owner: String,
    pub context_id: Option<String>,
    pub state: Option<TaskState>,
    pub updated_after_ms: Option<i64>,
    pub page_size: usize,
    pub page_token: Option<String>,
    pub history: Option<usize>,
    pub include_artifacts: bool,
}

/// A page of tasks, newest status first.
pub struct TaskPage {
    pub tasks: Vec<Task>,
    pub next_page_token: String,
    pub total_size: i64,
}

/// Decodes a page token into its (updated_ms, id) cursor.
pub fn decode_page_token(token: &str) -> Option<(i64, String)> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()?;
    let s = String::from_utf8(raw).ok()?;
    let (ms, id) = s.split_once(':')?;
    Some((ms.parse().ok()?, id.to_owned()))
}

pub(super) fn encode_page_token(ms: i64, id: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{ms}:{id}"))
}

/// One page of tasks by the filter (keyset pagination on the index).
pub fn list(conn: &Connection, f: &ListFilter) -> Result<TaskPage> {
    let q = list_queries(f)?;
    let total_size: i64 = conn
        .prepare_cached(&q.count)?
        .query_row(rusqlite::params_from_iter(&q.args[..q.count_args]), |r| {
            r.get(0)
        })?;
    let mut stmt = conn.prepare_cached(&q.page)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(q.args.iter()), |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })?;
    let mut ids = Vec::new();
    for row in rows {
        ids.push(row?);
    }
    let more = ids.len() > f.page_size;
    ids.truncate(f.page_size);
    let next_page_token = match (more, ids.last()) {
        (true, Some((id, ms))) => encode_page_token(*ms, id),
        _ => String::new(),
    };
    let mut tasks = Vec::with_capacity(ids.len());
    for (id, _) in &ids {
        if let Some((_, t)) = load(conn, id, f.history, f.include_artifacts)? {
            tasks.push(t);
        }
    }
    Ok(TaskPage {
        tasks,
        next_page_token,
        total_size,
    })
}

/// The statements of a [`list`] page: the count of every task the filter
/// takes, and the page itself, newest first, walking `tasks_by_owner` or
/// `tasks_by_context` backwards from the cursor.
pub(super) struct ListQueries {
    pub count: String,
    pub page: String,
    /// The count's arguments (the first `count_args`), then the page's.
    pub args: Vec<rusqlite::types::Value>,
    pub count_args: usize,
}

pub(super) fn list_queries(f: &ListFilter) -> Result<ListQueries> {
    let mut where_sql = String::from("agent_id = ?1 AND owner = ?2");
    let mut args: Vec<rusqlite::types::Value> =
        vec![f.agent_id.clone().into(), f.owner.clone().into()];
    if let Some(c) = &f.context_id {
        args.push(c.clone().into());
        where_sql.push_str(&format!(" AND context_id = ?{}", args.len()));
    }
    if let Some(s) = f.state {
        args.push(s.number().into());
        where_sql.push_str(&format!(" AND state = ?{}", args.len()));
    }
    if let Some(ms) = f.updated_after_ms {
        args.push(ms.into());
        // Inclusive, as `statusTimestampAfter` is defined in the proto.
        where_sql.push_str(&format!(" AND updated_ms >= ?{}", args.len()));
    }
    let count = format!("SELECT COUNT(*) FROM tasks WHERE {where_sql}");
    let count_args = args.len();
    let mut page_sql = where_sql;
    if let Some(tok) = &f.page_token {
        let (ms, id) =
            decode_page_token(tok).ok_or_else(|| Error::Corrupt("invalid page token".into()))?;
        push_keyset(
            &mut page_sql,
            &mut args,
            ("updated_ms", "id", "<"),
            ms,
            id.into(),
        );
    }
    args.push(((f.page_size + 1) as i64).into());
    let page = format!(
        "SELECT id, updated_ms FROM tasks WHERE {page_sql} ORDER BY updated_ms DESC, id DESC LIMIT ?{}",
        args.len()
    );
    Ok(ListQueries {
        count,
        page,
        args,
        count_args,
    })
}

/// Creates or replaces a push config of a task.
/// `dialect` (`v1`, `v0.3`, `legacy`) is the shape its notifications take.
pub fn put_push_config(
    conn: &Connection,
    cfg: &TaskPushNotificationConfig,
    dialect: &str,
    now_ms: i64,
) -> Result<()> {
    let task_id = cfg.task_id.clone().unwrap_or_default();
    let id = cfg.id.clone().unwrap_or_default();
    conn.prepare_cached(
        "INSERT INTO push_configs (task_id, id, body, dialect, created_ms) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (task_id, id) DO UPDATE SET body = excluded.body, dialect = excluded.dialect",
    )?
    .execute(params![task_id, id, to_json(cfg)?, dialect, now_ms])?;
    Ok(())
}

/// Whether config `id` of `task_id` can be stored with the task keeping at
/// most `max` configs: one that replaces a config of the same id always
/// can.
pub fn push_config_fits(conn: &Connection, task_id: &str, id: &str, max: usize) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM push_configs WHERE task_id = ?1 AND id = ?2)
                 OR (SELECT count(*) FROM push_configs WHERE task_id = ?1) < ?3",
        )?
        .query_row(params![task_id, id, max as i64], |r| r.get(0))?)
}

/// One push config of a task.
pub fn get_push_config(
    conn: &Connection,
    task_id: &str,
    id: &str,
) -> Result<Option<TaskPushNotificationConfig>> {
    conn.prepare_cached("SELECT body FROM push_configs WHERE task_id = ?1 AND id = ?2")?
        .query_row(params![task_id, id], |r| r.get::<_, String>(0))
        .optional()?
        .map(|b| from_json(&b))
        .transpose()
}

/// Push configs of a task in creation order, after the config id `after`.
pub fn list_push_configs(
    conn: &Connection,
    task_id: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<TaskPushNotificationConfig>> {
    let mut stmt = conn.prepare_cached(
        "SELECT body FROM push_configs WHERE task_id = ?1
           AND (?2 IS NULL OR (created_ms, id) > (SELECT created_ms, id FROM push_configs WHERE task_id = ?1 AND id = ?2))
         ORDER BY created_ms, id LIMIT ?3",
    )?;
    let rows = stmt.query_map(params![task_id, after, limit as i64], |r| {
        r.get::<_, String>(0)
    })?;
    let mut out = Vec::new();
    for b in rows {
        out.push(from_json(&b?)?);
    }
    Ok(out)
}

/// Deletes a push config; deleting one that is not there is not an error.
pub fn delete_push_config(conn: &Connection, task_id: &str, id: &str) -> Result<()> {
    conn.prepare_cached("DELETE FROM push_configs WHERE task_id = ?1 AND id = ?2")?
        .execute(params![task_id, id])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(v: serde_json::Value) -> Message {
        serde_json::from_value(v).unwrap()
    }

    use super::super::schema::migrated;

    /// A task's stored JSON, written as is, is the text its parsed form
    /// writes: for every history length and with or without artifacts.
    #[test]
    fn a_stored_task_writes_what_its_parsed_task_writes() {
        let (_dir, conn) = migrated();

        let first = message(json!({
            "messageId": "m1", "role": "ROLE_USER",
            "parts": [
                {"text": "Deploy \"all\" regions?\n<b>now</b> é ✓", "mediaType": "text/markdown"},
                {"data": {"b": [1, 2.5, null, true], "a": {"z": "y"}}},
                {"raw": "aGVsbG8=", "filename": "hi.txt", "mediaType": "text/plain",
                 "metadata": {"k": "v"}},
                {"url": "https://example.com/f.pdf", "filename": "f.pdf"}
            ],
            "metadata": {"priority": 2}, "extensions": ["urn:x"]
        }));
        let asked = message(json!({
            "messageId": "m2", "role": "ROLE_AGENT", "taskId": "t1", "contextId": "c1",
            "parts": [{"text": "Approve?"}]
        }));
        let submitted = TaskStatus {
            state: TaskState::Submitted,
            message: None,
            timestamp: Some("2026-11-27T06:00:00.000Z".into()),
        };
        let mut new = NewTask::for_test(("t1", "a", "o", "c1"), submitted, 1);
        new.metadata = json!({"source": "test", "n": 1}).as_object().cloned();
        let head = create(&conn, &new, &first).unwrap();
        let parked = TaskStatus {
            state: TaskState::InputRequired,
            message: Some(asked.clone()),
            timestamp: Some("2026-11-27T06:00:01.000Z".into()),
        };
        record_status(&conn, &head, &parked, Some(&asked), 2).unwrap();
        let artifact: Artifact = serde_json::from_value(json!({
            "artifactId": "r1", "name": "Report",
            "parts": [{"text": "# Title"}, {"data": [1, 2]}]
        }))
        .unwrap();
        put_artifact(&conn, "t1", &artifact, false).unwrap();

        for history in [None, Some(0), Some(1), Some(5)] {
            for artifacts in [true, false] {
                let (h1, typed) = load(&conn, "t1", history, artifacts).unwrap().unwrap();
                let (h2, stored) = load_stored(&conn, "t1", history, artifacts)
                    .unwrap()
                    .unwrap();
                assert_eq!(h1, h2);
                assert_eq!(
                    serde_json::to_string(&stored).unwrap(),
                    serde_json::to_string(&typed).unwrap(),
                    "history {history:?}, artifacts {artifacts}"
                );
                assert_eq!(stored.parse().unwrap(), typed);
            }
        }
        let (_, all) = load(&conn, "t1", None, true).unwrap().unwrap();
        assert_eq!(all.history, vec![first, asked]);
        assert_eq!(all.artifacts.as_deref(), Some(&[artifact][..]));
        assert!(load_stored(&conn, "nope", None, true).unwrap().is_none());
    }

    /// A task written from the JSON it was created with is, to the byte,
    /// what GetTask writes from the stored task right after, and what its
    /// parsed form writes: for every history length, with and without
    /// metadata, with ids and text that JSON escapes.
    #[test]
    fn a_created_task_writes_what_get_task_writes() {
        let (_dir, conn) = migrated();
        let first = message(json!({
            "messageId": "m1", "role": "ROLE_USER", "taskId": "t\"1", "contextId": "c\\1",
            "parts": [
                {"text": "Deploy \"all\" regions?\n<b>now</b> é ✓ \u{1F600}"},
                {"data": {"b": [1, 2.5, null, true], "a": {"z": "y"}}}
            ],
            "metadata": {"priority": 2}
        }));
        let asked = message(json!({
            "messageId": "m2", "role": "ROLE_AGENT", "taskId": "t\"1", "contextId": "c\\1",
            "parts": [{"text": "Approve?"}]
        }));
        let metadatas = [None, Some(json!({"source": "test", "n": [1, {"x": null}]}))];
        // The history's last message is the status's own (its JSON is
        // reused), or an equal copy.
        for (metadata, shared) in metadatas
            .into_iter()
            .flat_map(|m| [(m.clone(), true), (m, false)])
        {
            let id = format!("t\"1{}{shared}", metadata.is_some());
            let asking = TaskStatus {
                state: TaskState::InputRequired,
                message: Some(asked.clone()),
                timestamp: Some("2026-11-27T06:00:01.000Z".into()),
            };
            let mut new = NewTask::for_test((&id, "a", "o", "c\\1"), asking, 1);
            new.metadata = metadata.map(|m| m.as_object().unwrap().clone());
            let last = match &new.status.message {
                Some(own) if shared => own,
                _ => &asked,
            };
            let (_, bodies) = create_with_history(&conn, &new, &[&first, last], 2).unwrap();
            let created = CreatedTask::new(id.clone(), "c\\1".into(), bodies);
            for history in [None, Some(0), Some(1), Some(5)] {
                let mut kept = created.clone();
                if let Some(n) = history {
                    kept.keep_history(n);
                }
                let mut written = String::new();
                kept.write_v1(&mut written).unwrap();
                let (_, stored) = load_stored(&conn, &id, history, true).unwrap().unwrap();
                assert_eq!(
                    written,
                    serde_json::to_string(&stored).unwrap(),
                    "history {history:?}"
                );
                assert_eq!(
                    written,
                    serde_json::to_string(&kept.parse().unwrap()).unwrap()
                );
            }
        }
    }

    /// A task stored before its first messages were kept in its row has
    /// every message in rows, and reads as it did; one created since reads
    /// its first messages from its row and the rest from rows, in any
    /// window, with its status naming a message of either.
    #[test]
    fn first_messages_in_the_row_and_the_rest_in_rows_read_as_one_history() {
        let (_dir, conn) = migrated();
        let msg = |id: &str, role: &str| {
            message(json!({"messageId": id, "role": role, "parts": [{"text": id}]}))
        };
        let asking = |m: &Message| TaskStatus {
            state: TaskState::InputRequired,
            message: Some(m.clone()),
            timestamp: None,
        };
        let (m1, m2, m3, m4) = (
            msg("m1", "ROLE_USER"),
            msg("m2", "ROLE_AGENT"),
            msg("m3", "ROLE_USER"),
            msg("m4", "ROLE_AGENT"),
        );
        // Before: a row, then each message appended (the status names the
        // second).
        let old = NewTask::for_test(("old", "a", "o", "c"), asking(&m2), 1);
        let head = insert_task(&conn, &old).unwrap();
        append_message(&conn, "old", &m1).unwrap();
        record_status(&conn, &head, &asking(&m2), Some(&m2), 1).unwrap();
        append_message(&conn, "old", &m3).unwrap();
        append_message(&conn, "old", &m4).unwrap();
        // Since: two in the row, two after (the status names the last).
        let new = NewTask::for_test(("new", "a", "o", "c"), asking(&m2), 1);
        let own = new.status.message.as_ref().unwrap();
        let (head, _) = create_with_history(&conn, &new, &[&m1, own], 2).unwrap();
        append_message(&conn, "new", &m3).unwrap();
        record_status(&conn, &head, &asking(&m4), Some(&m4), 1).unwrap();
        // The same, its status still naming the second (in the row).
        let fresh = NewTask::for_test(("fresh", "a", "o", "c"), asking(&m2), 1);
        let own = fresh.status.message.as_ref().unwrap();
        create_with_history(&conn, &fresh, &[&m1, own], 2).unwrap();
        append_message(&conn, "fresh", &m3).unwrap();
        append_message(&conn, "fresh", &m4).unwrap();
        let rows = |id: &str| -> i64 {
            conn.query_row(
                "SELECT count(*) FROM messages WHERE task_id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!((rows("old"), rows("new")), (4, 2));
        let all = [&m1, &m2, &m3, &m4];
        for (id, named) in [("old", &m2), ("new", &m4), ("fresh", &m2)] {
            for window in [None, Some(0), Some(1), Some(2), Some(3), Some(9)] {
                let (_, task) = load(&conn, id, window, false).unwrap().unwrap();
                let n = window.unwrap_or(4).min(4);
                let want: Vec<Message> = all[4 - n..].iter().map(|m| (*m).clone()).collect();
                assert_eq!(task.history, want, "{id} {window:?}");
                assert_eq!(task.status.message.as_ref(), Some(named), "{id} {window:?}");
                let (_, stored) = load_stored(&conn, id, window, false).unwrap().unwrap();
                assert_eq!(
                    serde_json::to_string(&stored).unwrap(),
                    serde_json::to_string(&task).unwrap()
                );
            }
            let newest: Vec<String> = history_bodies(&conn, id, true).unwrap();
            let want: Vec<String> = all.iter().rev().map(|m| to_json(m).unwrap()).collect();
            assert_eq!(newest, want, "{id}");
        }
        assert!(history_bodies(&conn, "nope", false).unwrap().is_empty());
    }

    /// A row's first messages that are not as written are refused plainly.
    #[test]
    fn first_messages_cut_short_are_refused() {
        for text in ["5:{}", "x:{}", "1:a2:{}3", "2{}", "1:a", "1:a2:{}1"] {
            assert!(
                matches!(head_messages(text), Err(Error::Corrupt(_))),
                "{text}"
            );
        }
        assert_eq!(
            head_messages("1:a2:{}0:3:[1]").unwrap(),
            [("a", "{}"), ("", "[1]")]
        );
        assert!(head_messages("").unwrap().is_empty());
    }

    /// A status written around its message's JSON is what serde writes.
    #[test]
    fn a_status_written_around_its_message_is_what_serde_writes() {
        let asked = message(json!({
            "messageId": "m\"2", "role": "ROLE_AGENT", "taskId": "t", "contextId": "c",
            "parts": [{"text": "Approve \"it\"?\n é ✓ \u{1F600}"}, {"data": {"a": [1, null]}}],
            "metadata": {"k": "v"}
        }));
        for (state, timestamp) in [
            (TaskState::InputRequired, Some("2026-11-27T06:00:01.000Z")),
            (TaskState::AuthRequired, None),
            (TaskState::Completed, Some("x\"y")),
        ] {
            let status = TaskStatus {
                state,
                message: Some(asked.clone()),
                timestamp: timestamp.map(str::to_owned),
            };
            let around = status_with(&status, &to_json(&asked).unwrap()).unwrap();
            assert_eq!(around, to_json(&status).unwrap());
        }
    }

    /// A message of its task is stored without the ids its row holds, and
    /// every reader gets it back whole, byte for byte; any other message
    /// (no ids, another context, an id JSON escapes, a row stored whole
    /// before) is stored and read as it is.
    #[test]
    fn messages_are_stored_without_their_rows_ids_and_read_back_whole() {
        let (_dir, conn) = migrated();
        let ours = |id: &str, text: &str| {
            message(json!({
                "messageId": id, "role": "ROLE_USER", "taskId": "t", "contextId": "c",
                "parts": [{"text": text}], "metadata": {"k": ["v"]}
            }))
        };
        let first = ours("m1", "first line\nsecond");
        let submitted = TaskStatus {
            state: TaskState::Submitted,
            message: None,
            timestamp: None,
        };
        let new = NewTask::for_test(("t", "a", "o", "c"), submitted, 1);
        create(&conn, &new, &first).unwrap();
        let others = [
            message(
                json!({"messageId": "m2", "role": "ROLE_AGENT", "parts": [{"text": "no ids"}]}),
            ),
            message(json!({
                "messageId": "m3", "role": "ROLE_USER", "taskId": "t", "contextId": "other",
                "parts": [{"text": "another context"}]
            })),
            ours("m\"4", "an id with a quote"),
            ours("m4\\\\", "an id that ends in backslashes"),
            message(
                json!({"messageId": "m5", "role": "ROLE_USER", "taskId": "t", "parts": [{"text": "no context"}]}),
            ),
        ];
        for m in &others {
            append_message(&conn, "t", m).unwrap();
        }
        let last = ours("m6", "last request");
        append_message(&conn, "t", &last).unwrap();
        // A row stored whole, as before this form.
        let old = ours("m7", "stored whole");
        conn.execute(
            "INSERT INTO messages (task_id, seq, message_id, body) VALUES ('t', 9, 'm7', ?1)",
            [to_json(&old).unwrap()],
        )
        .unwrap();
        conn.execute("UPDATE tasks SET history_len = 9 WHERE id = 't'", [])
            .unwrap();

        let all: Vec<&Message> = [&first]
            .into_iter()
            .chain(&others)
            .chain([&last, &old])
            .collect();
        let stored: Vec<String> = conn
            .prepare("SELECT body FROM messages WHERE task_id = 't' ORDER BY seq")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        // The first message is kept in the task's row, without its ids
        // too; the rest in rows.
        assert_eq!(stored.len(), all.len() - 1);
        let head: String = conn
            .query_row("SELECT head FROM tasks WHERE id = 't'", [], |r| r.get(0))
            .unwrap();
        let whole = to_json(&first).unwrap();
        let tail = &whole[whole.find(",\"role\":").unwrap()..];
        assert_eq!(head, format!("2:m1{}:{tail}", tail.len()));
        for (m, body) in all[1..].iter().zip(&stored) {
            let whole = to_json(m).unwrap();
            if m.message_id == "m6" {
                assert!(body.starts_with(",\"role\":"), "{body}");
                assert!(whole.ends_with(body.as_str()), "{body}");
            } else {
                assert_eq!(body, &whole);
            }
        }

        let (_, read) = load_stored(&conn, "t", None, false).unwrap().unwrap();
        let read: Vec<String> = read.history.iter().map(|m| m.get().to_owned()).collect();
        let whole: Vec<String> = all.iter().map(|m| to_json(m).unwrap()).collect();
        assert_eq!(read, whole);
        let (_, typed) = load(&conn, "t", Some(3), false).unwrap().unwrap();
        assert_eq!(
            typed.history,
            vec![others[4].clone(), last.clone(), old.clone()]
        );

        for m in &all {
            assert!(holds_message(&conn, "t", &EncodedMessage::new(m).unwrap()).unwrap());
        }
        let changed = ours("m1", "other text");
        assert!(!holds_message(&conn, "t", &EncodedMessage::new(&changed).unwrap()).unwrap());
        for m in &all {
            assert!(
                has_message(&conn, "t", &m.message_id).unwrap(),
                "{}",
                m.message_id
            );
        }
        for id in ["m", "m8", "\"m1", ""] {
            assert!(!has_message(&conn, "t", id).unwrap(), "{id}");
        }
        assert!(!has_message(&conn, "nope", "m1").unwrap());

        assert_eq!(
            super::super::queue::first_request_preview(&conn, "t").unwrap(),
            "first line"
        );
        assert_eq!(
            super::super::queue::request_preview(&conn, "t").unwrap(),
            "stored whole"
        );
        conn.execute("DELETE FROM messages WHERE seq > 7", [])
            .unwrap();
        assert_eq!(
            super::super::queue::request_preview(&conn, "t").unwrap(),
            "last request"
        );
    }

    /// A status whose message is the one it adds to the history names that
    /// message instead of holding a copy; every reader gets the status back
    /// whole, however much of the history it reads and however the history
    /// grew since. A status with another message holds it whole.
    #[test]
    fn a_status_names_the_message_it_shares_with_the_history() {
        let (_dir, conn) = migrated();
        let said = |id: &str, role: &str, text: &str| {
            message(json!({
                "messageId": id, "role": role, "taskId": "t", "contextId": "c",
                "parts": [{"text": text}]
            }))
        };
        let (request, asked) = (
            said("m1", "ROLE_USER", "deploy?"),
            said("m2", "ROLE_AGENT", "sure?"),
        );
        let status = |message: &Message, at: &str| TaskStatus {
            state: TaskState::InputRequired,
            message: Some(message.clone()),
            timestamp: Some(at.into()),
        };
        let asking = status(&asked, "2026-11-28T00:00:00.000Z");
        let new = NewTask::for_test(("t", "a", "o", "c"), asking, 1);
        let (head, _) = create_with_history(&conn, &new, &[&request, &asked], 2).unwrap();
        let stored_status = || -> String {
            conn.query_row("SELECT status FROM tasks WHERE id = 't'", [], |r| r.get(0))
                .unwrap()
        };
        let read_status = |history: Option<usize>| {
            let (_, t) = load_stored(&conn, "t", history, false).unwrap().unwrap();
            let (_, typed) = load(&conn, "t", history, false).unwrap().unwrap();
            let whole = to_json(&typed.status).unwrap();
            assert_eq!(t.status.get(), whole, "history {history:?}");
            whole
        };
        assert!(stored_status().starts_with("@2:"), "{}", stored_status());
        assert!(!stored_status().contains("sure?"));
        for history in [None, Some(0), Some(1), Some(2)] {
            assert_eq!(read_status(history), to_json(&new.status).unwrap());
        }

        // The person answers, the agent asks again: the status names the
        // new question, message 4, wherever the history is cut.
        append_message(&conn, "t", &said("m3", "ROLE_USER", "yes")).unwrap();
        let again = said("m4", "ROLE_AGENT", "really?");
        let head = TaskHead {
            history_len: 3,
            ..head
        };
        let asking = status(&again, "2026-11-28T00:00:01.000Z");
        record_status(&conn, &head, &asking, Some(&again), 1).unwrap();
        assert!(stored_status().starts_with("@4:"), "{}", stored_status());
        for history in [None, Some(0), Some(1), Some(3)] {
            assert_eq!(read_status(history), to_json(&asking).unwrap());
        }
        // A message added after it leaves the status naming message 4.
        append_message(&conn, "t", &said("m5", "ROLE_USER", "hm")).unwrap();
        for history in [None, Some(0), Some(1)] {
            assert_eq!(read_status(history), to_json(&asking).unwrap());
        }

        // A status whose message is not the one added is held whole.
        let other = status(
            &said("m6", "ROLE_AGENT", "other"),
            "2026-11-28T00:00:02.000Z",
        );
        record_status(
            &conn,
            &head,
            &other,
            Some(&said("m7", "ROLE_AGENT", "x")),
            1,
        )
        .unwrap();
        assert_eq!(stored_status(), to_json(&other).unwrap());
        record_status(&conn, &head, &asking, None, 1).unwrap();
        assert_eq!(stored_status(), to_json(&asking).unwrap());
        assert_eq!(read_status(None), to_json(&asking).unwrap());

        // A status naming a message the task lacks, or that names nothing
        // readable, is corrupt.
        for bad in ["@9:10:{\"state\":\"x\"}", "@x", "@1:999:{}"] {
            conn.execute("UPDATE tasks SET status = ?1 WHERE id = 't'", [bad])
                .unwrap();
            for history in [None, Some(0)] {
                assert!(
                    matches!(
                        load_stored(&conn, "t", history, false),
                        Err(Error::Corrupt(_))
                    ),
                    "{bad}"
                );
                assert!(matches!(
                    load(&conn, "t", history, false),
                    Err(Error::Corrupt(_))
                ));
            }
        }
    }

    mod stored_forms {
        use super::*;
        use proptest::prelude::*;

        /// Ids as clients send them, and ones JSON escapes.
        fn id() -> impl Strategy<Value = String> {
            prop_oneof![
                "[a-z0-9-]{1,12}",
                "[a-z\"\\\\\u{1}\n\u{e9}\u{1F600}]{1,6}",
                Just("t".to_owned()),
                Just("c".to_owned()),
            ]
        }

        fn message(
            message_id: String,
            task_id: Option<String>,
            context_id: Option<String>,
            text: String,
        ) -> Message {
            let mut m = serde_json::from_value::<Message>(json!({
                "messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": text}]
            }))
            .unwrap();
            m.message_id = message_id;
            m.task_id = task_id;
            m.context_id = context_id;
            m
        }

        proptest! {
            /// Whatever a message's ids, the task's and its context's, a
            /// body cut by `stored_tail` comes back whole from
            /// `message_body`, and one left whole is read as it is.
            #[test]
            fn a_message_body_comes_back_whole(
                message_id in id(),
                own in id(),
                task_id in id(),
                context_id in id(),
                (own_task, own_context) in (any::<bool>(), any::<bool>()),
                text in ".{0,20}",
            ) {
                let m = message(
                    message_id.clone(),
                    Some(if own_task { task_id.clone() } else { own.clone() }),
                    Some(if own_context { context_id.clone() } else { own }),
                    text,
                );
                let body = to_json(&m).unwrap();
                let stored = stored_tail(&body, &message_id, &task_id, &context_id);
                if let Some(tail) = stored {
                    prop_assert!(tail.len() < body.len());
                }
                let stored = stored.unwrap_or(&body);
                prop_assert_eq!(
                    message_body(stored, &message_id, &task_id, &context_id),
                    body
                );
            }

            /// A status that names its message comes back whole from its
            /// name and that message; `stored_status` names only the
            /// message the status holds.
            #[test]
            fn a_named_status_comes_back_whole(
                seq in 0i64..1_000_000,
                (same, with_time) in (any::<bool>(), any::<bool>()),
                text in ".{0,20}",
                other in ".{0,20}",
            ) {
                let held = message("m".into(), Some("t".into()), Some("c".into()), text);
                let added = if same {
                    held.clone()
                } else {
                    message("m".into(), Some("t".into()), Some("c".into()), other)
                };
                let status = TaskStatus {
                    state: TaskState::InputRequired,
                    message: Some(held.clone()),
                    timestamp: with_time.then(|| "2026-11-29T00:00:00.000Z".to_owned()),
                };
                let (json, added) = (to_json(&status).unwrap(), to_json(&added).unwrap());
                match stored_status(&json, Some(seq), &added) {
                    Some(stored) => {
                        prop_assert!(added == to_json(&held).unwrap());
                        let (named, start, end) = named_message(&stored).unwrap();
                        prop_assert_eq!(named, seq);
                        let back = [&stored[start..end], added.as_str(), &stored[end..]].concat();
                        prop_assert_eq!(back, json);
                    }
                    None => prop_assert!(added != to_json(&held).unwrap()),
                }
            }
        }
    }

    /// A stored body that is not JSON is reported as corrupt, not written
    /// into an answer.
    #[test]
    fn a_stored_body_that_is_not_json_is_corrupt() {
        let (_dir, conn) = migrated();
        conn.execute_batch(
            "INSERT INTO tasks (id, agent_id, owner, context_id, state, status, created_ms, updated_ms)
                 VALUES ('t', 'a', 'o', 'c', 2, '{\"state\":\"TASK_STATE_WORKING\"', 1, 1);",
        )
        .unwrap();
        match load_stored(&conn, "t", None, true) {
            Err(Error::Corrupt(m)) => assert!(m.contains("stored JSON"), "{m}"),
            other => panic!("expected corrupt, got {other:?}"),
        }
        match load(&conn, "t", None, true) {
            Err(Error::Corrupt(m)) => assert!(m.contains("stored JSON"), "{m}"),
            other => panic!("expected corrupt, got {other:?}"),
        }
    }

    #[test]
    fn a_stored_message_that_is_not_json_is_corrupt_in_both_readers() {
        let (_dir, conn) = migrated();
        conn.execute_batch(
            "INSERT INTO tasks (id, agent_id, owner, context_id, state, status, created_ms, updated_ms)
                 VALUES ('t', 'a', 'o', 'c', 2, '{\"state\":\"TASK_STATE_WORKING\"}', 1, 1);
             INSERT INTO messages (task_id, seq, message_id, body) VALUES ('t', 1, 'm', '{\"role\":');",
        )
        .unwrap();
        assert!(matches!(
            load_stored(&conn, "t", Some(0), false),
            Ok(Some(_))
        ));
        assert!(matches!(load(&conn, "t", Some(0), false), Ok(Some(_))));
        assert!(matches!(
            load_stored(&conn, "t", None, false),
            Err(Error::Corrupt(_))
        ));
        assert!(matches!(
            load(&conn, "t", None, false),
            Err(Error::Corrupt(_))
        ));
    }
}
