//! Queries on the approval queue: turns (one per parking of a task) and the
//! decisions people make on them.

use std::borrow::Cow;

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

use super::{Error, Result, push_keyset};
use crate::a2a::types::{Message, Role, TaskState};

/// One parking of a task: open until the task moves on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    pub id: String,
    pub task_id: String,
    pub agent_id: String,
    /// The tenant of its agent; absent in the default tenant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// `served` (our agent) or `watched` (a peer's task).
    pub source: String,
    #[serde(serialize_with = "short_state")]
    pub state: TaskState,
    /// The first line of the request the task is parked on.
    pub preview: String,
    pub opened_ms: i64,
    pub closed_ms: Option<i64>,
    /// How it closed: `decided`, `answered` (the caller or agent moved on),
    /// `canceled`, `superseded` (parked again in another state).
    pub outcome: Option<String>,
}

fn short_state<S: serde::Serializer>(
    s: &TaskState,
    ser: S,
) -> std::result::Result<S::Ok, S::Error> {
    ser.serialize_str(s.short_name())
}

/// A person's decision on a turn, as recorded before it is applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionRecord {
    pub id: String,
    pub turn_id: String,
    pub task_id: String,
    pub agent_id: String,
    /// `approve`, `reply`, `reject` or `continue`.
    pub kind: String,
    pub payload: Value,
    /// Who decided through what: `ui`, `cli`, …
    pub actor: String,
    pub created_ms: i64,
    /// `pending`, `delivered` or `failed`.
    pub delivery: String,
    pub delivery_error: Option<String>,
    pub delivered_ms: Option<i64>,
}

const TURN_COLUMNS: &str =
    "id, task_id, agent_id, source, state, preview, opened_ms, closed_ms, outcome";
const DECISION_COLUMNS: &str = "id, turn_id, task_id, agent_id, kind, payload, actor, created_ms, delivery, delivery_error, delivered_ms";

fn turn_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(Turn, i64)> {
    Ok((
        Turn {
            id: r.get(0)?,
            task_id: r.get(1)?,
            agent_id: r.get(2)?,
            tenant: None,
            source: r.get(3)?,
            state: TaskState::InputRequired,
            preview: r.get(5)?,
            opened_ms: r.get(6)?,
            closed_ms: r.get(7)?,
            outcome: r.get(8)?,
        },
        r.get(4)?,
    ))
}

fn finish_turn((mut t, state): (Turn, i64)) -> Result<Turn> {
    t.tenant = crate::config::tenant_of(&t.agent_id).map(str::to_owned);
    t.state = TaskState::from_number(state)
        .ok_or_else(|| Error::Corrupt(format!("unknown stored state {state}")))?;
    Ok(t)
}

fn decision_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(DecisionRecord, String)> {
    Ok((
        DecisionRecord {
            id: r.get(0)?,
            turn_id: r.get(1)?,
            task_id: r.get(2)?,
            agent_id: r.get(3)?,
            kind: r.get(4)?,
            payload: Value::Null,
            actor: r.get(6)?,
            created_ms: r.get(7)?,
            delivery: r.get(8)?,
            delivery_error: r.get(9)?,
            delivered_ms: r.get(10)?,
        },
        r.get(5)?,
    ))
}

fn finish_decision((mut d, payload): (DecisionRecord, String)) -> Result<DecisionRecord> {
    d.payload = serde_json::from_str(&payload)
        .map_err(|e| Error::Corrupt(format!("decision payload: {e}")))?;
    Ok(d)
}

/// The first line of the request a task is parked on: its latest message
/// from the caller (at most 200 characters).
pub fn request_preview(conn: &Connection, task_id: &str) -> Result<String> {
    preview_in(conn, task_id, true)
}

/// The first line of what a task was first asked: the first message from
/// its caller (at most 200 characters).
pub fn first_request_preview(conn: &Connection, task_id: &str) -> Result<String> {
    preview_in(conn, task_id, false)
}

/// The preview of the first caller's message in `task_id`'s history, read
/// newest first or oldest first.
fn preview_in(conn: &Connection, task_id: &str, newest_first: bool) -> Result<String> {
    for body in super::tasks::history_bodies(conn, task_id, newest_first)? {
        let Ok(m) = serde_json::from_str::<Message>(&body) else {
            continue;
        };
        if let Some(preview) = preview_of(&m) {
            return Ok(preview);
        }
    }
    Ok(String::new())
}

/// [`request_preview`] of a history held in memory, newest message first.
pub fn preview_of_newest_first<'a>(history: impl IntoIterator<Item = &'a Message>) -> String {
    history.into_iter().find_map(preview_of).unwrap_or_default()
}

/// The preview a caller's message gives (`None` for anyone else's): its
/// first non-blank line, or the kind of its first part.
fn preview_of(m: &Message) -> Option<String> {
    if m.role != Role::User {
        return None;
    }
    let mut preview = text_preview(&m.text());
    if preview.is_empty() {
        preview = m
            .parts
            .first()
            .map(|p| format!("({} part)", p.kind()))
            .unwrap_or_default();
    }
    Some(preview)
}

/// The preview of a message's text: its first line with something to
/// show, as text (at most 200 characters, no line break); empty if none.
pub fn text_preview(text: &str) -> String {
    let first = text.lines().find_map(preview_line).unwrap_or_default();
    first.chars().take(200).collect()
}

/// A preview stored before previews dropped markdown, as
/// [`text_preview`] writes it now; `None` if it reads the same (a stored
/// preview is one line).
pub(super) fn plain_stored_preview(stored: &str) -> Option<String> {
    let plain = preview_line(stored)?;
    (plain != stored).then(|| plain.chars().take(200).collect())
}

/// A line of text as a preview shows it: [`plain_line`], then without
/// inline markdown either (`**Ship** [v3](…)?` reads `Ship v3?`).
fn preview_line(line: &str) -> Option<Cow<'_, str>> {
    plain_line(line).map(plain_inline)
}

/// How much of a line [`plain_inline`] reads.
const PREVIEW_PARSE_BYTES: usize = 4096;

/// The text a line of markdown shows: emphasis, code spans, links and
/// inline HTML tags reduced to their text, escapes and entities resolved.
/// A line that is not a plain paragraph (`1. numbered`, an HTML block)
/// stays as it is.
fn plain_inline(line: &str) -> Cow<'_, str> {
    // Most requests hold no markup; they are not parsed.
    if !line.contains(['*', '_', '`', '[', '<', '&', '\\', '~', '!']) {
        return Cow::Borrowed(line);
    }
    // A preview shows 200 characters: a line of a megabyte is read no
    // further than its first few kilobytes.
    let mut end = line.len().min(PREVIEW_PARSE_BYTES);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    let mut events = Parser::new_ext(&line[..end], Options::ENABLE_STRIKETHROUGH);
    if !matches!(events.next(), Some(Event::Start(Tag::Paragraph))) {
        return Cow::Borrowed(line);
    }
    let mut plain = String::with_capacity(end);
    for event in events {
        match event {
            // A character reference can spell a line break (`&#10;`).
            Event::Text(t) | Event::Code(t) => plain.extend(
                t.chars()
                    .map(|c| if matches!(c, '\n' | '\r') { ' ' } else { c }),
            ),
            Event::SoftBreak | Event::HardBreak => plain.push(' '),
            Event::End(TagEnd::Paragraph) => break,
            _ => {}
        }
    }
    let plain = plain.trim();
    if plain.is_empty() || plain == line {
        Cow::Borrowed(line)
    } else {
        Cow::Owned(plain.to_owned())
    }
}

/// A line of text without the markdown that only marks up the block
/// (heading `#`s, quote `>`s, a bullet), trimmed; `None` for a line that
/// holds nothing else (blank, a rule, a code fence: the preview is then the
/// code's first line).
fn plain_line(line: &str) -> Option<&str> {
    let mut l = line.trim();
    loop {
        let before = l;
        if let Some(rest) = l.strip_prefix('>') {
            l = rest.trim_start();
        }
        let hashes = l.len() - l.trim_start_matches('#').len();
        if (1..=6).contains(&hashes) && l[hashes..].chars().next().is_none_or(char::is_whitespace) {
            l = l[hashes..].trim();
            // A closing sequence of an ATX heading (`## Title ##`).
            let unclosed = l.trim_end_matches('#');
            if unclosed.is_empty() || unclosed.ends_with(char::is_whitespace) {
                l = unclosed.trim_end();
            }
        }
        for bullet in ["- ", "* ", "+ "] {
            if let Some(rest) = l.strip_prefix(bullet) {
                l = rest.trim_start();
            }
        }
        if l == before {
            break;
        }
    }
    // A code fence, with or without its info string.
    if l.starts_with("```") || l.starts_with("~~~") {
        return None;
    }
    let markup_only = l
        .chars()
        .all(|c| c.is_whitespace() || matches!(c, '`' | '~' | '-' | '*' | '_' | '=' | '#' | '>'));
    (!markup_only).then_some(l)
}

/// The open turn of a task, if it is parked.
pub fn open_turn(conn: &Connection, task_id: &str) -> Result<Option<Turn>> {
    conn.prepare_cached(&format!(
        "SELECT {TURN_COLUMNS} FROM turns WHERE task_id = ?1 AND closed_ms IS NULL ORDER BY opened_ms DESC, rowid DESC LIMIT 1"
    ))?
    .query_row([task_id], turn_row)
    .optional()?
    .map(finish_turn)
    .transpose()
}

/// The most recent turn of a task, open or closed.
pub fn latest_turn(conn: &Connection, task_id: &str) -> Result<Option<Turn>> {
    conn.prepare_cached(&format!("SELECT {TURN_COLUMNS} FROM turns WHERE task_id = ?1 ORDER BY opened_ms DESC, rowid DESC LIMIT 1"))?
        .query_row([task_id], turn_row)
        .optional()?
        .map(finish_turn)
        .transpose()
}

/// A turn by id.
pub fn turn(conn: &Connection, id: &str) -> Result<Option<Turn>> {
    conn.prepare_cached(&format!("SELECT {TURN_COLUMNS} FROM turns WHERE id = ?1"))?
        .query_row([id], turn_row)
        .optional()?
        .map(finish_turn)
        .transpose()
}

/// Every turn of a task, oldest first.
pub fn turns_of_task(conn: &Connection, task_id: &str) -> Result<Vec<Turn>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {TURN_COLUMNS} FROM turns WHERE task_id = ?1 ORDER BY opened_ms, id"
    ))?;
    let rows = stmt.query_map([task_id], turn_row)?;
    rows.map(|r| finish_turn(r?)).collect()
}

/// Keeps turns in step with a task's state change, inside the transaction
/// that makes the change: parking opens a turn, leaving the parked state
/// closes it, moving between the two parked states does both.
pub fn sync_turn(
    conn: &Connection,
    task_id: &str,
    agent_id: &str,
    from: TaskState,
    to: TaskState,
    now_ms: i64,
) -> Result<()> {
    sync_turn_with(conn, task_id, agent_id, from, to, now_ms, None)
}

/// The turn a task's creator opens, as the creator knows it: what it
/// asks, and where the task came from ([`super::tasks::SERVED`] or
/// [`super::tasks::WATCHED`]), so that opening it reads neither back.
pub struct Opening {
    pub preview: String,
    pub source: &'static str,
}

impl Opening {
    /// The first turn of a task asked of an agent served here.
    pub fn served(preview: String) -> Opening {
        Opening {
            preview,
            source: super::tasks::SERVED,
        }
    }
}

/// [`sync_turn`] for a task's creator, which has its history and origin
/// at hand (`None`: read from the stored task).
pub fn sync_turn_with(
    conn: &Connection,
    task_id: &str,
    agent_id: &str,
    from: TaskState,
    to: TaskState,
    now_ms: i64,
    opening: Option<Opening>,
) -> Result<()> {
    if from == to {
        return Ok(());
    }
    move_turns(
        conn,
        task_id,
        agent_id,
        from.is_interrupted(),
        to,
        now_ms,
        opening,
    )
}

/// [`sync_turn`] for a status that may carry a new question
/// (`new_question`). A task that was waiting, and whose question the person
/// answered, may wait again in the same state with a new one (an agent that
/// asks again at once, never seen working in between): the answered turn
/// closes (`decided`) and a new one opens, so the new question is decided
/// on its own. A question nobody has answered yet stays the same turn,
/// however reworded.
pub fn sync_turn_asking(
    conn: &Connection,
    task_id: &str,
    agent_id: &str,
    from: TaskState,
    to: TaskState,
    now_ms: i64,
    new_question: bool,
) -> Result<()> {
    if from == to && new_question && to.is_interrupted() && answered_turn_open(conn, task_id)? {
        return move_turns(conn, task_id, agent_id, true, to, now_ms, None);
    }
    sync_turn(conn, task_id, agent_id, from, to, now_ms)
}

/// Whether the task's open turn already has the person's decision (the
/// task has not taken it up yet).
pub fn answered_turn_open(conn: &Connection, task_id: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM turns t JOIN decisions d ON d.turn_id = t.id
                            WHERE t.task_id = ?1 AND t.closed_ms IS NULL)",
        )?
        .query_row([task_id], |r| r.get(0))?)
}

/// Closes the task's open turn if it has the person's decision (outcome
/// `decided`): the decision was taken up, though the task stays as it was
/// (its peer went on in a new task).
pub fn close_answered_turn(conn: &Connection, task_id: &str, now_ms: i64) -> Result<()> {
    conn.prepare_cached(
        "UPDATE turns SET closed_ms = ?2, outcome = 'decided'
         WHERE task_id = ?1 AND closed_ms IS NULL
           AND EXISTS (SELECT 1 FROM decisions d WHERE d.turn_id = turns.id)",
    )?
    .execute(params![task_id, now_ms])?;
    Ok(())
}

/// Closes the task's open turn (`closes`), then opens one if `to` waits.
fn move_turns(
    conn: &Connection,
    task_id: &str,
    agent_id: &str,
    closes: bool,
    to: TaskState,
    now_ms: i64,
    opening: Option<Opening>,
) -> Result<()> {
    if closes {
        let outcome = if to.is_interrupted() {
            "superseded"
        } else if to == TaskState::Canceled {
            "canceled"
        } else {
            "answered"
        };
        // A decided turn keeps the outcome `decided`.
        conn.prepare_cached(
            "UPDATE turns SET closed_ms = ?2,
                    outcome = CASE WHEN EXISTS (SELECT 1 FROM decisions d WHERE d.turn_id = turns.id)
                                   THEN 'decided' ELSE ?3 END
             WHERE task_id = ?1 AND closed_ms IS NULL",
        )?
        .execute(params![task_id, now_ms, outcome])?;
    }
    if to.is_interrupted() {
        let id = uuid::Uuid::now_v7().to_string();
        let (preview, source) = match opening {
            Some(o) => (o.preview, Some(o.source)),
            None => (request_preview(conn, task_id)?, None),
        };
        // The task's origin is looked up only when the caller did not say
        // it (`coalesce` evaluates its second argument only then): for a
        // new task, the lookup was 2% of its cost.
        conn.prepare_cached(
            "INSERT INTO turns (id, task_id, agent_id, source, state, preview, opened_ms)
             VALUES (?1, ?2, ?3, coalesce(?7, (SELECT origin FROM tasks WHERE id = ?2)), ?4, ?5, ?6)",
        )?
        .execute(params![id, task_id, agent_id, to.number(), preview, now_ms, source])?;
        // Counted before the commit, with the others the transaction opens
        // (`count_new_turns`); indexed for search later, with others
        // (`index_search_when_due`).
    }
    Ok(())
}

/// Counts the open turns past the mark in the kept counts (migration
/// 22), and moves the mark past them: what the writer does in every
/// transaction just before it commits, so that a commit's counts are
/// whole. Turns opened and closed or deleted before it are not counted at
/// all, and a turn moved to another agent or state is counted as it is
/// now; a transaction that misses it leaves its turns to the next one.
pub fn count_new_turns(conn: &Connection) -> rusqlite::Result<()> {
    let (mark, newest): (i64, i64) = conn
        .prepare_cached(
            "SELECT turn_rowid, (SELECT coalesce(max(rowid), 0) FROM turns) FROM count_mark",
        )?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    if newest <= mark {
        return Ok(());
    }
    // Added up here: SQLite's `INSERT … SELECT … GROUP BY` (a sorter and
    // a statement journal) cost four times as much for a batch's turns,
    // which are nearly always one agent's in one state.
    let mut opened: Vec<(String, i64, i64)> = Vec::new();
    {
        let mut stmt = conn.prepare_cached(
            "SELECT agent_id, state FROM turns
             WHERE rowid > ?1 AND rowid <= ?2 AND closed_ms IS NULL",
        )?;
        let mut rows = stmt.query([mark, newest])?;
        while let Some(row) = rows.next()? {
            let (agent, state): (String, i64) = (row.get(0)?, row.get(1)?);
            match opened
                .iter_mut()
                .find(|(a, s, _)| *a == agent && *s == state)
            {
                Some(seen) => seen.2 += 1,
                None => opened.push((agent, state, 1)),
            }
        }
    }
    for (agent, state, n) in opened {
        conn.prepare_cached(
            "INSERT INTO open_turns (agent_id, state, n) VALUES (?1, ?2, ?3)
                 ON CONFLICT (agent_id, state) DO UPDATE SET n = n + excluded.n",
        )?
        .execute(params![agent, state, n])?;
    }
    conn.prepare_cached("UPDATE count_mark SET turn_rowid = ?1")?
        .execute([newest])?;
    Ok(())
}

/// Before a batch commits: counts the turns it opened, and adds the
/// waiting turns to the full-text index when due. Returns whether some
/// still wait for the index.
pub fn before_commit(conn: &Connection) -> rusqlite::Result<bool> {
    count_new_turns(conn)?;
    index_search_when_due(conn)
}

/// The decision on a turn, if one was made.
pub fn decision_of_turn(conn: &Connection, turn_id: &str) -> Result<Option<DecisionRecord>> {
    conn.prepare_cached(&format!(
        "SELECT {DECISION_COLUMNS} FROM decisions WHERE turn_id = ?1"
    ))?
    .query_row([turn_id], decision_row)
    .optional()?
    .map(finish_decision)
    .transpose()
}

/// Every decision on a task, oldest first.
pub fn decisions_of_task(conn: &Connection, task_id: &str) -> Result<Vec<DecisionRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {DECISION_COLUMNS} FROM decisions WHERE task_id = ?1 ORDER BY created_ms, id"
    ))?;
    let rows = stmt.query_map([task_id], decision_row)?;
    rows.map(|r| finish_decision(r?)).collect()
}

/// Records a decision (its turn must not have one: the UNIQUE constraint
/// backs that up) and adds its text to the turn's search entry.
pub fn insert_decision(conn: &Connection, d: &DecisionRecord, search_text: &str) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO decisions (id, turn_id, task_id, agent_id, kind, payload, actor, created_ms, delivery)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        d.id,
        d.turn_id,
        d.task_id,
        d.agent_id,
        d.kind,
        d.payload.to_string(),
        d.actor,
        d.created_ms,
        d.delivery
    ])?;
    if !search_text.is_empty() {
        // The turn's entry must exist to take the decision's text.
        index_search_backlog(conn)?;
        // The index keeps no text: the entry is written again whole (a
        // turn is decided once).
        conn.prepare_cached(
            "UPDATE turn_search SET text = (SELECT preview FROM turns WHERE id = ?1) || ' ' || ?2
             WHERE rowid = (SELECT rowid FROM turns WHERE id = ?1)",
        )?
        .execute(params![d.turn_id, search_text])?;
    }
    Ok(())
}

/// Records how delivering a decision went.
pub fn set_delivery(
    conn: &Connection,
    id: &str,
    delivery: &str,
    error: Option<&str>,
    now_ms: i64,
) -> Result<()> {
    conn.prepare_cached(
        "UPDATE decisions SET delivery = ?2, delivery_error = ?3, delivered_ms = ?4 WHERE id = ?1",
    )?
    .execute(params![id, delivery, error, now_ms])?;
    Ok(())
}

/// Decisions recorded but not yet applied (after a crash), oldest first.
pub fn pending_decisions(conn: &Connection) -> Result<Vec<DecisionRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {DECISION_COLUMNS} FROM decisions WHERE delivery = 'pending' ORDER BY created_ms, id"
    ))?;
    let rows = stmt.query_map([], decision_row)?;
    rows.map(|r| finish_decision(r?)).collect()
}

/// Parked turns wait to be added to the full-text index until this many
/// are waiting, or the writer has nothing else to do, or a search or a
/// decision needs them. FTS5 writes a new segment of its index at every
/// commit that added to it, and merges segments as they pile up: indexed
/// at each commit (about ten turns at a time under load), that was a
/// tenth of a parked SendMessage's work. Larger groups save no more:
/// 256 did about the same work per request.
pub const SEARCH_BACKLOG: i64 = 64;

/// The turns waiting for the full-text index: those after the mark (a
/// turn's rowid; turns are appended), up to the newest. The backlog lives
/// in the turns themselves, so a crash loses none of it.
fn search_backlog(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
    conn.prepare_cached(
        "SELECT turn_rowid, (SELECT coalesce(max(rowid), 0) FROM turns) FROM search_mark",
    )?
    .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
}

/// Whether turns wait for the full-text index (a read).
pub fn search_backlog_waits(conn: &Connection) -> Result<bool> {
    let (mark, newest) = search_backlog(conn)?;
    Ok(newest > mark)
}

fn index_turns(conn: &Connection, mark: i64, newest: i64) -> rusqlite::Result<()> {
    // A turn's search entry shares its rowid.
    conn.prepare_cached(
        "INSERT INTO turn_search (rowid, text)
             SELECT rowid, preview FROM turns WHERE rowid > ?1 AND rowid <= ?2",
    )?
    .execute(params![mark, newest])?;
    conn.prepare_cached("UPDATE search_mark SET turn_rowid = ?1")?
        .execute([newest])?;
    Ok(())
}

/// Adds every waiting turn to the full-text index (in the caller's
/// transaction). Returns whether any waited.
pub fn index_search_backlog(conn: &Connection) -> rusqlite::Result<bool> {
    let (mark, newest) = search_backlog(conn)?;
    if newest > mark {
        index_turns(conn, mark, newest)?;
    }
    Ok(newest > mark)
}

/// Before a batch commits: adds the waiting turns to the full-text index
/// once [`SEARCH_BACKLOG`] of them wait. Returns whether some still wait.
pub fn index_search_when_due(conn: &Connection) -> rusqlite::Result<bool> {
    let (mark, newest) = search_backlog(conn)?;
    if newest - mark >= SEARCH_BACKLOG {
        index_turns(conn, mark, newest)?;
        return Ok(false);
    }
    Ok(newest > mark)
}

/// After turns were deleted: the search index's and the counts' marks go
/// back to the newest turn left, if they were past it, so that a new turn
/// given a deleted turn's rowid (SQLite reuses the largest) is still seen
/// as waiting for both.
pub fn marks_after_delete(conn: &Connection) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE search_mark SET turn_rowid =
             min(turn_rowid, (SELECT coalesce(max(rowid), 0) FROM turns))",
    )?
    .execute([])?;
    conn.prepare_cached(
        "UPDATE count_mark SET turn_rowid =
             min(turn_rowid, (SELECT coalesce(max(rowid), 0) FROM turns))",
    )?
    .execute([])?;
    Ok(())
}

/// Turns a person's search words into an FTS5 query: every word must
/// appear; the last may be a prefix. Quotes keep FTS syntax out. A word
/// given twice (the index ignores case) is asked for once: FTS5 would walk
/// its entries once per copy, and a word also given earlier is asked for
/// whole, which its prefix adds nothing to.
pub fn fts_query(q: &str) -> Option<String> {
    let given: Vec<&str> = q.split_whitespace().collect();
    let (last, earlier) = given.split_last()?;
    let quoted = |w: &str| format!("\"{}\"", w.replace('"', "\"\""));
    let mut seen = std::collections::HashSet::new();
    let mut words: Vec<String> = earlier
        .iter()
        .filter(|w| seen.insert(w.to_lowercase()))
        .map(|w| quoted(w))
        .collect();
    if seen.insert(last.to_lowercase()) {
        words.push(format!("{}*", quoted(last)));
    }
    Some(words.join(" "))
}

/// What the queue is filtered and ordered by.
#[derive(Debug, Clone, Default)]
pub struct QueueFilter {
    pub agent_id: Option<String>,
    pub state: Option<TaskState>,
    pub text: Option<String>,
    pub newest_first: bool,
    pub limit: usize,
    /// `(opened_ms, rowid)` of the last item of the previous page.
    pub after: Option<(i64, i64)>,
}

/// A page of open turns.
pub struct QueuePage {
    /// Each turn with its position key (`rowid`, the insertion order).
    pub turns: Vec<(Turn, i64)>,
    /// Open turns matching the filter (all pages).
    pub total: i64,
    /// Open turns per agent (ignoring the filter), for the sidebar.
    pub counts: Vec<(String, i64)>,
    pub more: bool,
}

/// How many open turns match a filter, and how many each agent has.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueCounts {
    /// Open turns matching the filter (all pages).
    pub total: i64,
    /// Open turns per agent (ignoring the filter), for the sidebar.
    pub counts: Vec<(String, i64)>,
}

/// The `WHERE` clause (on `turns`) of a queue filter, and its arguments.
fn queue_where(f: &QueueFilter) -> (String, Vec<rusqlite::types::Value>) {
    let mut where_sql = String::from("closed_ms IS NULL");
    let mut args: Vec<rusqlite::types::Value> = Vec::new();
    if let Some(a) = &f.agent_id {
        args.push(a.clone().into());
        where_sql.push_str(&format!(" AND agent_id = ?{}", args.len()));
    }
    if let Some(s) = f.state {
        args.push(s.number().into());
        where_sql.push_str(&format!(" AND state = ?{}", args.len()));
    }
    if let Some(q) = f.text.as_deref().and_then(fts_query) {
        args.push(q.into());
        where_sql.push_str(&format!(
            " AND rowid IN (SELECT rowid FROM turn_search WHERE turn_search MATCH ?{})",
            args.len()
        ));
    }
    (where_sql, args)
}

/// The counts a queue page shows, in its read's snapshot. Open turns per
/// agent and state are kept as turns open and close (migration 20), so
/// these are a few rows' read; only a search's total is counted, on the
/// search index (callers cache it between commits: [`counts_are_kept`]).
pub fn queue_counts(conn: &Connection, f: &QueueFilter) -> Result<QueueCounts> {
    let total: i64 = if counts_are_kept(f) {
        conn.prepare_cached(
            "SELECT coalesce(sum(n), 0) FROM open_turns
                 WHERE (?1 IS NULL OR agent_id = ?1) AND (?2 IS NULL OR state = ?2)",
        )?
        .query_row(
            rusqlite::params![f.agent_id, f.state.map(|s| s.number())],
            |r| r.get(0),
        )?
    } else {
        let (where_sql, args) = queue_where(f);
        conn.prepare_cached(&format!("SELECT COUNT(*) FROM turns WHERE {where_sql}"))?
            .query_row(rusqlite::params_from_iter(args.iter()), |r| r.get(0))?
    };
    let mut stmt = conn.prepare_cached(
        "SELECT agent_id, sum(n) FROM open_turns
             GROUP BY agent_id HAVING sum(n) > 0 ORDER BY agent_id",
    )?;
    let counts = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(QueueCounts { total, counts })
}

/// Whether `f`'s counts are read from the kept counts (no search narrows
/// it): cheap enough to read with every page, so not worth caching.
pub fn counts_are_kept(f: &QueueFilter) -> bool {
    f.text.as_deref().and_then(fts_query).is_none()
}

/// One page of the queue: open turns, keyset-paged on the partial index;
/// with `counts` when the caller has them for this filter, else counted.
pub fn list_queue(
    conn: &Connection,
    f: &QueueFilter,
    counts: Option<QueueCounts>,
) -> Result<QueuePage> {
    let (mut page_sql, mut args) = queue_where(f);
    let (cmp, order) = if f.newest_first {
        ("<", "DESC")
    } else {
        (">", "ASC")
    };
    if let Some((ms, rowid)) = f.after {
        push_keyset(
            &mut page_sql,
            &mut args,
            ("opened_ms", "rowid", cmp),
            ms,
            rowid.into(),
        );
    }
    args.push(((f.limit + 1) as i64).into());
    let sql = format!(
        "SELECT {TURN_COLUMNS}, rowid FROM turns WHERE {page_sql} ORDER BY opened_ms {order}, rowid {order} LIMIT ?{}",
        args.len()
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(args.iter()), |r| {
        Ok((turn_row(r)?, r.get::<_, i64>(9)?))
    })?;
    let mut turns = Vec::new();
    for row in rows {
        let (t, rowid) = row?;
        turns.push((finish_turn(t)?, rowid));
    }
    let more = turns.len() > f.limit;
    turns.truncate(f.limit);
    let QueueCounts { total, counts } = match counts {
        Some(c) => c,
        None => queue_counts(conn, f)?,
    };
    Ok(QueuePage {
        turns,
        total,
        counts,
        more,
    })
}

/// A decision, its turn, and its position key (`rowid`).
pub type HistoryRow = (DecisionRecord, Turn, i64);

/// A task as listed for the person: every agent, every caller.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSummary {
    pub id: String,
    pub agent_id: String,
    #[serde(serialize_with = "short_state")]
    pub state: TaskState,
    pub preview: String,
    pub updated_ms: i64,
    pub parked: bool,
}

/// A page of recent tasks after the cursor `(?1, ?6, ?2)` (time, state,
/// rowid), `?3` rows, on the index of every task's time and state
/// (migration 19): ties in time are ordered by state, then rowid, as the
/// index holds them. A state filter is tested on the index entry, so the
/// walk reads only the rows it lists and, with an agent filter, that
/// state's rows.
pub(super) const RECENT_TASKS: &str =
    "SELECT id, agent_id, state, updated_ms, parked, rowid FROM tasks
         WHERE updated_ms <= ?1
           AND (updated_ms < ?1 OR state < ?6 OR (state = ?6 AND rowid < ?2))
           AND (?5 IS NULL OR state = ?5)
           AND (?4 IS NULL OR agent_id = ?4)
         ORDER BY updated_ms DESC, state DESC, rowid DESC LIMIT ?3";

/// The same page of agent `?4`'s tasks, picked from its own entries in
/// `tasks_by_owner` (which hold each task's time and rowid) and sorted:
/// for an agent with few tasks, which the walk above would find only by
/// reading past every other task.
pub(super) const RECENT_TASKS_OF_FEW: &str =
    "SELECT id, agent_id, state, updated_ms, parked, rowid FROM tasks
         WHERE rowid IN (
             SELECT rowid FROM tasks INDEXED BY tasks_by_owner
                 WHERE agent_id = ?4
                   AND updated_ms <= ?1
                   AND (updated_ms < ?1 OR state < ?6 OR (state = ?6 AND rowid < ?2))
                   AND (?5 IS NULL OR state = ?5)
                 ORDER BY updated_ms DESC, state DESC, rowid DESC LIMIT ?3)
         ORDER BY updated_ms DESC, state DESC, rowid DESC";

/// How many tasks agent `?1` has, counted up to `?2`.
pub(super) const AGENT_TASKS_UP_TO: &str = "SELECT count(*) FROM
    (SELECT 1 FROM tasks INDEXED BY tasks_by_owner WHERE agent_id = ?1 LIMIT ?2)";

/// Up to this many tasks, an agent's recent tasks are read from its own
/// entries ([`RECENT_TASKS_OF_FEW`]): at most this many, sorted. Above it,
/// from the walk over every task by time ([`RECENT_TASKS`]), which reads
/// about `limit × all tasks ÷ the agent's` rows a page: 5,000 at 100,000
/// tasks, where an agent with none made it read all 100,000 (45 ms).
pub const FEW_TASKS: i64 = 1_000;

/// Where a task stands among recent tasks: its time, its state's number and
/// its rowid, the order of the index they are read from.
pub type RecentPosition = (i64, i64, i64);

/// Recent tasks of every agent (or of `agent` alone, in `state` alone),
/// newest status first, keyset-paged on `(updated_ms, state, rowid)`;
/// each with its rowid. One state's tasks, and those of an agent with more
/// than [`FEW_TASKS`], are picked out of the walk over every task by time,
/// which reads past the others (their index entries, and for an agent
/// their rows): the price of not indexing each new task once more.
pub fn recent_tasks(
    conn: &Connection,
    limit: usize,
    before: Option<RecentPosition>,
    agent: Option<&str>,
    state: Option<TaskState>,
) -> Result<(Vec<(TaskSummary, i64)>, bool)> {
    let sql = recent_sql(conn, agent)?;
    let mut out = recent_rows(conn, sql, limit + 1, before, agent, state)?;
    let more = out.len() > limit;
    out.truncate(limit);
    for (t, _) in &mut out {
        t.preview = request_preview(conn, &t.id)?;
    }
    Ok((out, more))
}

/// Which statement lists `agent`'s recent tasks (every agent's for none):
/// [`RECENT_TASKS_OF_FEW`] for an agent with few, else [`RECENT_TASKS`].
fn recent_sql(conn: &Connection, agent: Option<&str>) -> Result<&'static str> {
    Ok(match agent {
        Some(agent) if has_few_tasks(conn, agent)? => RECENT_TASKS_OF_FEW,
        _ => RECENT_TASKS,
    })
}

/// Up to `limit` recent tasks after `before`, read with `sql` (from
/// [`recent_sql`]), without their previews.
fn recent_rows(
    conn: &Connection,
    sql: &str,
    limit: usize,
    before: Option<RecentPosition>,
    agent: Option<&str>,
    state: Option<TaskState>,
) -> Result<Vec<(TaskSummary, i64)>> {
    let (ms, at_state, pos) = before.unwrap_or((i64::MAX, i64::MAX, i64::MAX));
    let mut stmt = conn.prepare_cached(sql)?;
    let state = state.map(TaskState::number);
    let rows = stmt.query_map(
        params![ms, pos, limit as i64, agent, state, at_state],
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, bool>(4)?,
                r.get::<_, i64>(5)?,
            ))
        },
    )?;
    let mut out = Vec::new();
    for row in rows {
        let (id, agent_id, state, updated_ms, parked, rowid) = row?;
        let state = TaskState::from_number(state)
            .ok_or_else(|| Error::Corrupt(format!("unknown stored state {state}")))?;
        out.push((
            TaskSummary {
                preview: String::new(),
                id,
                agent_id,
                state,
                updated_ms,
                parked,
            },
            rowid,
        ));
    }
    Ok(out)
}

/// Where `t` (with its rowid) stands among recent tasks.
pub fn recent_position(t: &TaskSummary, rowid: i64) -> RecentPosition {
    (t.updated_ms, t.state.number(), rowid)
}

/// How many tasks one page of a search of recent tasks reads at most: a
/// page that reads this many answers with what it found, and a cursor to
/// read on from.
pub const SEARCH_READS: usize = 5_000;

/// What a page of a search of recent tasks found.
#[derive(Debug)]
pub struct RecentMatches {
    /// The tasks that hold every word, newest first, with their rowids.
    pub tasks: Vec<(TaskSummary, i64)>,
    /// How many tasks the page read.
    pub read: usize,
    /// Where the next page reads on from; `None` once every task was read.
    pub resume: Option<RecentPosition>,
}

/// Recent tasks (of `agent`, in `state`) after `before` whose request's
/// first line or id holds every one of `words` (lowercase; compared
/// without case), newest first, up to `limit` of them. Tasks hold no
/// search index of their own (every new task would pay for its entry), so
/// this walks them in the order of the list, reading each one's request,
/// and stops after `reads` tasks with what it found by then.
pub fn search_recent_tasks(
    conn: &Connection,
    limit: usize,
    before: Option<RecentPosition>,
    agent: Option<&str>,
    state: Option<TaskState>,
    words: &[String],
    reads: usize,
) -> Result<RecentMatches> {
    const CHUNK: usize = 256;
    // Counted once for the whole walk, not once per chunk.
    let sql = recent_sql(conn, agent)?;
    let mut found = RecentMatches {
        tasks: Vec::new(),
        read: 0,
        resume: before,
    };
    loop {
        let rows = recent_rows(conn, sql, CHUNK, found.resume, agent, state)?;
        let last_chunk = rows.len() < CHUNK;
        let mut rows = rows.into_iter();
        while let Some((mut t, rowid)) = rows.next() {
            found.resume = Some(recent_position(&t, rowid));
            found.read += 1;
            if matches_after_reading(conn, &mut t, words)? {
                found.tasks.push((t, rowid));
            }
            if found.tasks.len() == limit || found.read >= reads {
                // The oldest tasks are in hand: a cursor is handed out only
                // if one of them matches, so that no page comes back empty.
                if last_chunk && !any_holds_every_word(conn, rows, words)? {
                    found.resume = None;
                }
                return Ok(found);
            }
        }
        if last_chunk {
            found.resume = None;
            return Ok(found);
        }
    }
}

/// Whether any of `rest` (the last rows of a walk) holds every word.
fn any_holds_every_word(
    conn: &Connection,
    rest: impl Iterator<Item = (TaskSummary, i64)>,
    words: &[String],
) -> Result<bool> {
    for (mut t, _) in rest {
        if matches_after_reading(conn, &mut t, words)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Reads the task's request line into its preview, then whether it holds
/// every word.
fn matches_after_reading(conn: &Connection, t: &mut TaskSummary, words: &[String]) -> Result<bool> {
    t.preview = request_preview(conn, &t.id)?;
    Ok(holds_every_word(t, words))
}

/// Whether the task's request line or id holds every word, without case.
fn holds_every_word(t: &TaskSummary, words: &[String]) -> bool {
    let preview = t.preview.to_lowercase();
    let id = t.id.to_lowercase();
    words
        .iter()
        .all(|w| preview.contains(w.as_str()) || id.contains(w.as_str()))
}

/// Whether `agent` has at most [`FEW_TASKS`] tasks (read from its index
/// entries, at most one more than that).
fn has_few_tasks(conn: &Connection, agent: &str) -> Result<bool> {
    let n: i64 = conn
        .prepare_cached(AGENT_TASKS_UP_TO)?
        .query_row(params![agent, FEW_TASKS + 1], |r| r.get(0))?;
    Ok(n <= FEW_TASKS)
}

/// What history is filtered by.
#[derive(Debug, Clone, Default)]
pub struct HistoryFilter {
    pub agent_id: Option<String>,
    pub text: Option<String>,
    pub limit: usize,
    /// `(created_ms, rowid)` of the last item of the previous page.
    pub before: Option<(i64, i64)>,
}

/// Decisions with their turns and position keys (`rowid`), newest first.
pub fn list_history(conn: &Connection, f: &HistoryFilter) -> Result<(Vec<HistoryRow>, bool)> {
    let mut where_sql = String::from("1 = 1");
    let mut args: Vec<rusqlite::types::Value> = Vec::new();
    if let Some(a) = &f.agent_id {
        args.push(a.clone().into());
        where_sql.push_str(&format!(" AND d.agent_id = ?{}", args.len()));
    }
    if let Some(q) = f.text.as_deref().and_then(fts_query) {
        args.push(q.into());
        where_sql.push_str(&format!(
            " AND t.rowid IN (SELECT rowid FROM turn_search WHERE turn_search MATCH ?{})",
            args.len()
        ));
    }
    if let Some((ms, rowid)) = f.before {
        push_keyset(
            &mut where_sql,
            &mut args,
            ("d.created_ms", "d.rowid", "<"),
            ms,
            rowid.into(),
        );
    }
    args.push(((f.limit + 1) as i64).into());
    let cols = DECISION_COLUMNS
        .split(", ")
        .map(|c| format!("d.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let tcols = TURN_COLUMNS
        .split(", ")
        .map(|c| format!("t.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT {cols}, {tcols}, d.rowid FROM decisions d JOIN turns t ON t.id = d.turn_id
         WHERE {where_sql} ORDER BY d.created_ms DESC, d.rowid DESC LIMIT ?{}",
        args.len()
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(args.iter()), |r| {
        let d = decision_row(r)?;
        let t = (
            Turn {
                id: r.get(11)?,
                task_id: r.get(12)?,
                agent_id: r.get(13)?,
                tenant: None,
                source: r.get(14)?,
                state: TaskState::InputRequired,
                preview: r.get(16)?,
                opened_ms: r.get(17)?,
                closed_ms: r.get(18)?,
                outcome: r.get(19)?,
            },
            r.get::<_, i64>(15)?,
        );
        Ok((d, t, r.get::<_, i64>(20)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (d, t, pos) = row?;
        out.push((finish_decision(d)?, finish_turn(t)?, pos));
    }
    let more = out.len() > f.limit;
    out.truncate(f.limit);
    Ok((out, more))
}

#[cfg(test)]
mod tests {
    use super::Opening;
    use super::count_new_turns;
    use super::{
        DecisionRecord, FEW_TASKS, QueueFilter, SEARCH_BACKLOG, fts_query, has_few_tasks,
        index_search_backlog, index_search_when_due, insert_decision, marks_after_delete,
        plain_line, preview_line, queue_counts, recent_tasks, search_backlog_waits,
        search_recent_tasks, sync_turn, sync_turn_asking, sync_turn_with,
    };
    use crate::a2a::types::TaskState;
    use crate::store::schema::{migrated, open_turn_counts};
    use crate::store::{Durability, Store};
    use rusqlite::Connection;

    /// Parks task `t{i}` with the request `word{i} common`; returns its
    /// turn's rowid.
    fn park(c: &Connection, i: i64) -> i64 {
        c.execute(
            "INSERT INTO tasks (id, agent_id, owner, context_id, state, status, created_ms, updated_ms)
                 VALUES (?1, 'a', 'o', 'c', 6, '{}', ?2, ?2)",
            rusqlite::params![format!("t{i}"), i],
        )
        .unwrap();
        sync_turn_with(
            c,
            &format!("t{i}"),
            "a",
            TaskState::Submitted,
            TaskState::InputRequired,
            i,
            Some(Opening::served(format!("word{i} common"))),
        )
        .unwrap();
        c.query_row(
            "SELECT rowid FROM turns WHERE task_id = ?1",
            [format!("t{i}")],
            |r| r.get(0),
        )
        .unwrap()
    }

    /// Entries in the index (every parked request says `common`).
    fn entries(c: &Connection) -> i64 {
        c.query_row(
            "SELECT count(*) FROM turn_search WHERE turn_search MATCH 'common'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    }

    /// The tasks whose turns a full-text query finds.
    fn found(c: &Connection, q: &str) -> Vec<String> {
        let mut stmt = c
            .prepare(
                "SELECT t.task_id FROM turns t WHERE t.rowid IN
                     (SELECT rowid FROM turn_search WHERE turn_search MATCH ?1)
                 ORDER BY t.rowid",
            )
            .unwrap();
        stmt.query_map([q], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    /// Parked turns wait for the full-text index until [`SEARCH_BACKLOG`]
    /// of them do, or until something asks; a decision on a waiting turn
    /// indexes it first, so its text joins the turn's; and a turn given
    /// the rowid of a deleted one (SQLite reuses the largest) still waits.
    #[test]
    fn parked_turns_join_the_search_index_in_groups_and_none_is_missed() {
        let (_dir, c) = migrated();
        for i in 0..3 {
            park(&c, i);
        }
        assert!(index_search_when_due(&c).unwrap(), "three wait");
        assert_eq!(entries(&c), 0);
        assert!(search_backlog_waits(&c).unwrap());
        index_search_backlog(&c).unwrap();
        assert_eq!(entries(&c), 3);
        assert!(!search_backlog_waits(&c).unwrap());
        assert_eq!(found(&c, "word1"), ["t1"]);

        for i in 3..(3 + SEARCH_BACKLOG - 1) {
            park(&c, i);
        }
        assert!(index_search_when_due(&c).unwrap(), "not yet due");
        assert_eq!(entries(&c), 3);
        park(&c, 3 + SEARCH_BACKLOG - 1);
        assert!(!index_search_when_due(&c).unwrap(), "due: all indexed");
        assert_eq!(entries(&c), 3 + SEARCH_BACKLOG);
        assert_eq!(found(&c, "common").len() as i64, 3 + SEARCH_BACKLOG);

        // A decision on a turn still waiting.
        let n = 3 + SEARCH_BACKLOG;
        park(&c, n);
        let turn: String = c
            .query_row(
                "SELECT id FROM turns WHERE task_id = ?1",
                [format!("t{n}")],
                |r| r.get(0),
            )
            .unwrap();
        let decision = DecisionRecord {
            id: "d".into(),
            turn_id: turn,
            task_id: format!("t{n}"),
            agent_id: "a".into(),
            kind: "reject".into(),
            payload: serde_json::json!({}),
            actor: "ui".into(),
            created_ms: 1,
            delivery: "pending".into(),
            delivery_error: None,
            delivered_ms: None,
        };
        insert_decision(&c, &decision, "peak hours").unwrap();
        assert_eq!(found(&c, "peak"), [format!("t{n}")]);
        assert_eq!(found(&c, &format!("word{n} hours")), [format!("t{n}")]);

        // Delete the two newest turns (as archiving does), then park again.
        let mark: i64 = c
            .query_row("SELECT turn_rowid FROM search_mark", [], |r| r.get(0))
            .unwrap();
        c.execute_batch(
            "DELETE FROM turn_search WHERE rowid >= (SELECT max(rowid) - 1 FROM turns);
             DELETE FROM turns WHERE rowid >= (SELECT max(rowid) - 1 FROM turns);",
        )
        .unwrap();
        marks_after_delete(&c).unwrap();
        let reused = park(&c, n + 1);
        assert!(reused <= mark, "the new turn took a deleted turn's rowid");
        assert!(search_backlog_waits(&c).unwrap());
        index_search_backlog(&c).unwrap();
        assert_eq!(
            found(&c, &format!("word{}", n + 1)),
            [format!("t{}", n + 1)]
        );
        assert!(
            found(&c, "peak").is_empty(),
            "the deleted turn's entry went"
        );
    }

    async fn store_entries(store: &Store) -> i64 {
        store.read(|c| Ok(entries(c))).await.unwrap()
    }

    /// Turns left waiting when the server stopped (or crashed: they are
    /// committed, their entries are not) are indexed by the next writer
    /// once it has nothing else to do, or at once for a search; turns
    /// parked under no load are indexed once the writer is idle.
    #[tokio::test]
    async fn waiting_turns_are_indexed_when_idle_after_a_restart_or_for_a_search() {
        let (dir, c) = migrated();
        for i in 0..5 {
            park(&c, i);
        }
        drop(c);
        let path = dir.path().join("db.sqlite");
        let store = Store::open(&path, Durability::Normal).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while store_entries(&store).await < 5 {
            assert!(std::time::Instant::now() < deadline, "never indexed");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        store.write(|c| Ok(park(c, 5))).await.unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while store_entries(&store).await < 6 {
            assert!(std::time::Instant::now() < deadline, "never indexed");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        store.close().await;

        // Waiting turns are indexed before a search reads.
        let (dir, c) = migrated();
        for i in 0..5 {
            park(&c, i);
        }
        drop(c);
        let store = Store::open(&dir.path().join("db.sqlite"), Durability::Normal).unwrap();
        store.index_search().await.unwrap();
        assert_eq!(store_entries(&store).await, 5);
        let hits = store.read(|c| Ok(found(c, "word3"))).await.unwrap();
        assert_eq!(hits, ["t3"]);
        store.close().await;

        // With nothing waiting, the idle pass commits nothing (a commit
        // would drop the queue's cached counts for no change).
        let (dir, c) = migrated();
        drop(c);
        let store = Store::open(&dir.path().join("db.sqlite"), Durability::Normal).unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(800)).await;
        assert_eq!(store.commits(), 0);
    }

    /// The counts of open turns follow every way a turn opens, closes or
    /// goes, and a page's counts are read from them. Turns opened are
    /// counted where the writer would commit (`count_new_turns`).
    #[test]
    fn open_turns_are_counted_as_they_open_close_and_go() {
        let (_dir, c) = migrated();
        for i in 0..6 {
            park(&c, i);
        }
        c.execute_batch(
            "INSERT INTO tasks (id, agent_id, owner, context_id, state, status, created_ms, updated_ms)
                 VALUES ('b1', 'b', 'o', 'c', 8, '{}', 1, 1), ('b2', 'b', 'o', 'c', 6, '{}', 1, 1);",
        )
        .unwrap();
        sync_turn_with(
            &c,
            "b1",
            "b",
            TaskState::Working,
            TaskState::AuthRequired,
            7,
            Some(Opening::served("sign in".into())),
        )
        .unwrap();
        sync_turn_with(
            &c,
            "b2",
            "b",
            TaskState::Working,
            TaskState::InputRequired,
            8,
            Some(Opening::served("which one".into())),
        )
        .unwrap();
        assert!(
            open_turn_counts(&c, true).is_empty(),
            "counted at the commit"
        );
        count_new_turns(&c).unwrap();
        let expect = |v: &[(&str, i64, i64)]| {
            v.iter()
                .map(|(a, s, n)| ((*a).to_owned(), *s, *n))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            open_turn_counts(&c, true),
            expect(&[("a", 6, 6), ("b", 6, 1), ("b", 8, 1)])
        );
        // Answered, asked again (the old turn closes, a new one opens),
        // superseded by auth, deleted with its task, deleted on its own.
        sync_turn(
            &c,
            "t0",
            "a",
            TaskState::InputRequired,
            TaskState::Working,
            9,
        )
        .unwrap();
        sync_turn(
            &c,
            "t1",
            "a",
            TaskState::InputRequired,
            TaskState::InputRequired,
            9,
        )
        .unwrap();
        sync_turn_asking(
            &c,
            "t2",
            "a",
            TaskState::InputRequired,
            TaskState::InputRequired,
            9,
            true,
        )
        .unwrap();
        sync_turn(
            &c,
            "t3",
            "a",
            TaskState::InputRequired,
            TaskState::AuthRequired,
            9,
        )
        .unwrap();
        c.execute("DELETE FROM tasks WHERE id = 't4'", []).unwrap();
        c.execute("DELETE FROM turns WHERE task_id = 'b1'", [])
            .unwrap();
        // Closed turns going change nothing.
        c.execute("DELETE FROM turns WHERE task_id = 't0'", [])
            .unwrap();
        count_new_turns(&c).unwrap();
        assert_eq!(open_turn_counts(&c, true), open_turn_counts(&c, false));
        assert_eq!(
            open_turn_counts(&c, true),
            expect(&[("a", 6, 3), ("a", 8, 1), ("b", 6, 1)])
        );
        // A turn inserted already closed is not counted.
        c.execute(
            "INSERT INTO turns (id, task_id, agent_id, source, state, preview, opened_ms, closed_ms)
                 VALUES ('old', 't5', 'a', 'served', 6, '', 1, 2)",
            [],
        )
        .unwrap();
        assert_eq!(open_turn_counts(&c, true), open_turn_counts(&c, false));

        let filter = |agent: Option<&str>, state: Option<TaskState>| QueueFilter {
            agent_id: agent.map(str::to_owned),
            state,
            limit: 50,
            ..QueueFilter::default()
        };
        let counts = queue_counts(&c, &filter(None, None)).unwrap();
        assert_eq!(counts.total, 5);
        assert_eq!(counts.counts, [("a".to_owned(), 4), ("b".to_owned(), 1)]);
        assert_eq!(queue_counts(&c, &filter(Some("a"), None)).unwrap().total, 4);
        assert_eq!(
            queue_counts(&c, &filter(Some("a"), Some(TaskState::AuthRequired)))
                .unwrap()
                .total,
            1
        );
        assert_eq!(
            queue_counts(&c, &filter(None, Some(TaskState::InputRequired)))
                .unwrap()
                .total,
            4
        );
        assert_eq!(
            queue_counts(&c, &filter(Some("nobody"), None))
                .unwrap()
                .total,
            0
        );
        // An agent whose turns all closed is not listed.
        sync_turn(
            &c,
            "b2",
            "b",
            TaskState::InputRequired,
            TaskState::Completed,
            10,
        )
        .unwrap();
        let counts = queue_counts(&c, &filter(None, None)).unwrap();
        assert_eq!(counts.counts, [("a".to_owned(), 4)]);
        assert_eq!(open_turn_counts(&c, true), open_turn_counts(&c, false));
    }

    /// A turn opened and then closed, deleted or moved before the commit
    /// counts as it is at the commit; one given the rowid of a deleted
    /// turn is still counted; and a commit that missed counting leaves its
    /// turns to the next.
    #[test]
    fn turns_are_counted_as_the_commit_finds_them() {
        let (_dir, c) = migrated();
        let counted = |c: &Connection| {
            count_new_turns(c).unwrap();
            let kept = open_turn_counts(c, true);
            assert_eq!(kept, open_turn_counts(c, false));
            kept
        };
        park(&c, 0);
        park(&c, 1);
        assert_eq!(counted(&c), [("a".to_owned(), 6, 2)]);
        // Opened in the next transaction, and before its commit: t2
        // answered, t3's task deleted, t4 moved to another agent and state.
        for i in 2..5 {
            park(&c, i);
        }
        sync_turn(
            &c,
            "t2",
            "a",
            TaskState::InputRequired,
            TaskState::Working,
            9,
        )
        .unwrap();
        c.execute("DELETE FROM tasks WHERE id = 't3'", []).unwrap();
        c.execute(
            "UPDATE turns SET agent_id = 'z', state = 8 WHERE task_id = 't4'",
            [],
        )
        .unwrap();
        assert_eq!(
            counted(&c),
            [("a".to_owned(), 6, 2), ("z".to_owned(), 8, 1)]
        );
        // The newest turn goes; the next turn takes its rowid.
        let newest = park(&c, 5);
        count_new_turns(&c).unwrap();
        c.execute("DELETE FROM turns WHERE rowid = ?1", [newest])
            .unwrap();
        marks_after_delete(&c).unwrap();
        assert_eq!(park(&c, 6), newest, "the rowid is reused");
        assert_eq!(
            counted(&c),
            [("a".to_owned(), 6, 3), ("z".to_owned(), 8, 1)]
        );
        // Two transactions' turns, the first not counted at its commit.
        park(&c, 7);
        park(&c, 8);
        assert_eq!(
            counted(&c),
            [("a".to_owned(), 6, 5), ("z".to_owned(), 8, 1)]
        );
    }

    /// Recent tasks page in one order, newest first with ties in time
    /// broken by state, then rowid, whether an agent's are read from its
    /// own index entries (up to [`FEW_TASKS`]) or picked out of the walk
    /// over every task, and every agent's from that walk: with and without
    /// a state filter (one that no task is in among them), two owners
    /// interleaved in the agent's entries, and an agent with none.
    #[test]
    fn an_agents_recent_tasks_page_alike_from_either_index() {
        let (_dir, conn) = migrated();
        // (id, agent, state, updated_ms), rowid = position + 1.
        let mut tasks = Vec::new();
        let mut insert = conn
            .prepare(
                "INSERT INTO tasks (id, agent_id, owner, context_id, state, status,
                                    created_ms, updated_ms)
                 VALUES (?1, ?2, ?3, 'c', ?4, '{}', ?5, ?5)",
            )
            .unwrap();
        for i in 0..(2 * FEW_TASKS + 1) {
            let agent = if i % 2 == 0 { "many" } else { "few" };
            let state = if i % 3 == 0 {
                TaskState::Completed
            } else {
                TaskState::InputRequired
            };
            // Times out of rowid order, about four tasks to each.
            let ms = (i * 7_919) % 500;
            let owner = if i % 5 == 0 { "o2" } else { "o1" };
            let id = format!("t{i}");
            insert
                .execute(rusqlite::params![id, agent, owner, state.number(), ms])
                .unwrap();
            tasks.push((id, agent, state, ms));
        }
        assert!(has_few_tasks(&conn, "few").unwrap());
        assert!(!has_few_tasks(&conn, "many").unwrap());
        assert!(has_few_tasks(&conn, "nobody").unwrap());
        for agent in [Some("many"), Some("few"), Some("nobody"), None] {
            for state in [
                None,
                Some(TaskState::Completed),
                Some(TaskState::InputRequired),
                Some(TaskState::Failed),
            ] {
                let mut expected: Vec<(i64, usize, &str)> = tasks
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| {
                        agent.is_none_or(|a| t.1 == a) && state.is_none_or(|s| t.2 == s)
                    })
                    .map(|(i, t)| (t.3, i, t.0.as_str()))
                    .collect();
                expected.sort_by_key(|e| std::cmp::Reverse((e.0, tasks[e.1].2.number(), e.1)));
                let expected: Vec<&str> = expected.into_iter().map(|e| e.2).collect();
                let mut listed = Vec::new();
                let mut before = None;
                loop {
                    let (page, more) = recent_tasks(&conn, 7, before, agent, state).unwrap();
                    assert!(page.len() == 7 || !more, "{agent:?} {state:?}");
                    for (t, _) in &page {
                        assert!(agent.is_none_or(|a| t.agent_id == a));
                        listed.push(t.id.clone());
                    }
                    match page.last() {
                        Some((t, rowid)) if more => {
                            before = Some((t.updated_ms, t.state.number(), *rowid))
                        }
                        _ => break,
                    }
                }
                assert_eq!(listed, expected, "{agent:?} {state:?}");
            }
        }
    }

    /// A search of recent tasks lists, page after page, exactly the tasks
    /// whose request's first line or id holds every word (without case),
    /// in the order of the list, whether each page stops at its limit or
    /// at its reads; with agent and state filters too.
    #[test]
    fn a_search_of_recent_tasks_pages_through_every_match_in_order() {
        use crate::a2a::types::{Message, Part, Role, TaskStatus};
        use crate::store::tasks::{NewTask, append_message, insert_task};
        let (_dir, conn) = migrated();
        // (id, agent, state, request), newest last: more than a few of
        // the search's chunks of rows.
        let mut tasks = Vec::new();
        for i in 0..1_300_i64 {
            let agent = if i % 2 == 0 { "ops" } else { "inbox" };
            let state = if i % 5 == 0 {
                TaskState::Completed
            } else {
                TaskState::InputRequired
            };
            let request = match i % 3 {
                0 => format!("Rotate the API key of service {i}"),
                1 => format!("Deploy build {i} to staging"),
                _ => format!("# Rotate\n\nsecond line {i}"),
            };
            let id = if i == 777 {
                "task-Special".to_owned()
            } else {
                format!("t{i}")
            };
            insert_task(
                &conn,
                &NewTask {
                    id: id.clone(),
                    agent_id: agent.into(),
                    owner: "o".into(),
                    context_id: format!("c{i}"),
                    status: TaskStatus {
                        state,
                        message: None,
                        timestamp: None,
                    },
                    metadata: None,
                    now_ms: 1_000 + i,
                    dialect: "v1",
                },
            )
            .unwrap();
            let mut m = Message::agent(vec![Part::text(request.clone())]);
            m.role = Role::User;
            append_message(&conn, &id, &m).unwrap();
            tasks.push((id, agent, state, request));
        }
        // Every page of a search, read on from each one's resume point.
        let search = |agent: Option<&str>, state, words: &[&str], limit, reads| {
            let words: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
            let (mut listed, mut pages, mut before) = (Vec::new(), 0, None);
            loop {
                let found =
                    search_recent_tasks(&conn, limit, before, agent, state, &words, reads).unwrap();
                assert!(found.tasks.len() <= limit && found.read <= reads);
                assert!(
                    found.tasks.len() == limit || found.read == reads || found.resume.is_none(),
                    "a page stops at its limit, its reads, or the last task"
                );
                assert!(
                    pages == 0 || reads < tasks.len() || !found.tasks.is_empty(),
                    "a cursor never leads to an empty page"
                );
                pages += 1;
                listed.extend(found.tasks.into_iter().map(|(t, _)| t.id));
                match found.resume {
                    Some(p) => before = Some(p),
                    None => return (listed, pages),
                }
            }
        };
        // Each word in the request's first line or in the id.
        let expected = |agent: Option<&str>, state: Option<TaskState>, words: &[&str]| {
            tasks
                .iter()
                .rev()
                .filter(|t| agent.is_none_or(|a| t.1 == a) && state.is_none_or(|s| t.2 == s))
                .filter(|t| {
                    let first = t.3.lines().next().unwrap_or_default().to_lowercase();
                    words
                        .iter()
                        .all(|w| first.contains(w) || t.0.to_lowercase().contains(w))
                })
                .map(|t| t.0.clone())
                .collect::<Vec<_>>()
        };
        // The first line only: "second line" is not in a request's preview.
        let rotate = expected(None, None, &["rotate"]);
        assert_eq!(rotate.len(), 867);
        let (listed, pages) = search(None, None, &["ROTATE"], 50, 100_000);
        assert_eq!(listed, rotate);
        assert_eq!(pages, 18, "17 full pages of 50, then the rest");
        // A page filled by the oldest task (t0 matches) hands out no
        // cursor, nor does one whose older tasks all fail to match (t0
        // does not hold "deploy").
        assert_eq!(
            search(None, None, &["rotate"], 289, 100_000),
            (rotate.clone(), 3)
        );
        let deploy = expected(None, None, &["deploy"]);
        assert_eq!(deploy.last().map(String::as_str), Some("t1"));
        assert_eq!(
            search(None, None, &["deploy"], deploy.len(), 100_000),
            (deploy, 1)
        );
        // The same found when each page reads at most 100 tasks.
        let (listed, pages) = search(None, None, &["rotate"], 50, 100);
        assert_eq!(listed, rotate);
        assert!(pages >= 13, "{pages}");
        assert!(
            search(None, None, &["second", "line"], 50, 100_000)
                .0
                .is_empty()
        );
        // Every word, in the request or the id.
        let both = expected(None, None, &["deploy", "12"]);
        assert!(!both.is_empty());
        assert_eq!(search(None, None, &["deploy", "12"], 7, 300).0, both);
        assert_eq!(
            search(None, None, &["special"], 50, 100_000).0,
            ["task-Special"]
        );
        // With an agent and a state.
        for (agent, state) in [
            (Some("ops"), None),
            (None, Some(TaskState::Completed)),
            (Some("inbox"), Some(TaskState::InputRequired)),
            (Some("nobody"), None),
        ] {
            let want = expected(agent, state, &["rotate"]);
            assert_eq!(
                search(agent, state, &["rotate"], 20, 250).0,
                want,
                "{agent:?} {state:?}"
            );
        }
    }

    #[test]
    fn a_preview_line_drops_block_markdown_and_skips_lines_of_markup_only() {
        assert_eq!(plain_line("# Release plan"), Some("Release plan"));
        assert_eq!(plain_line("  ## Deploy v2 ##  "), Some("Deploy v2"));
        assert_eq!(plain_line("> > - quoted item"), Some("quoted item"));
        assert_eq!(
            plain_line("* Approve the invoice?"),
            Some("Approve the invoice?")
        );
        assert_eq!(plain_line("#hashtag stays"), Some("#hashtag stays"));
        assert_eq!(
            plain_line("####### seven is not a heading"),
            Some("####### seven is not a heading")
        );
        assert_eq!(plain_line("C# ## notes #"), Some("C# ## notes #"));
        assert_eq!(plain_line("1. numbered stays"), Some("1. numbered stays"));
        assert_eq!(plain_line("Is 2 * 3 = 6?"), Some("Is 2 * 3 = 6?"));
        for markup in ["", "   ", "---", "```sh", "***", "#", "> ", "~~~"] {
            assert_eq!(plain_line(markup), None, "{markup:?}");
        }
    }

    #[test]
    fn a_preview_line_reads_as_text_without_inline_markdown() {
        for (line, shown) in [
            (
                "May I send the report to **all customers**?",
                "May I send the report to all customers?",
            ),
            ("## Ship `v3` to _production_?", "Ship v3 to production?"),
            (
                "See [the plan](https://example.com/plan) and ![chart](c.png)",
                "See the plan and chart",
            ),
            (
                "Approve <b>this</b> ~~not that~~?",
                "Approve this not that?",
            ),
            (
                "Tom &amp; Jerry \\*not emphasis\\*",
                "Tom & Jerry *not emphasis*",
            ),
            ("Open <https://example.com>", "Open https://example.com"),
            ("one&#10;*line*&#13;only", "one line only"),
            // Unchanged: plain text, text that only looks like markup, and
            // a line that is not a paragraph.
            (
                "Is 2 * 3 = 6? Q&A [draft] snake_case",
                "Is 2 * 3 = 6? Q&A [draft] snake_case",
            ),
            ("1. **numbered** stays", "1. **numbered** stays"),
            ("<div>an HTML block</div>", "<div>an HTML block</div>"),
            ("hello 42", "hello 42"),
        ] {
            assert_eq!(preview_line(line).as_deref(), Some(shown), "{line:?}");
        }
        // A long line is read only as far as a preview can show.
        let long = format!("**Ship** {}", "é".repeat(100_000));
        let shown = preview_line(&long).unwrap();
        assert!(shown.starts_with("Ship éé"), "{}", &shown[..20]);
        assert!(shown.len() < 4096, "{}", shown.len());
        // Markup around nothing keeps the line rather than show nothing.
        assert_eq!(preview_line("<b></b>").as_deref(), Some("<b></b>"));
        assert_eq!(preview_line("```sh"), None);
    }

    #[test]
    fn search_words_are_quoted_and_the_last_is_a_prefix() {
        assert_eq!(
            fts_query("deploy prod").as_deref(),
            Some("\"deploy\" \"prod\"*")
        );
        assert_eq!(fts_query("a\"b OR").as_deref(), Some("\"a\"\"b\" \"OR\"*"));
        assert_eq!(fts_query("   "), None);
        // A word given again is asked for once; a last word given before
        // is asked for whole (its prefix would add nothing).
        assert_eq!(
            fts_query("Pay pay invoice PAY").as_deref(),
            Some("\"Pay\" \"invoice\"")
        );
        assert_eq!(
            fts_query("ship ship it").as_deref(),
            Some("\"ship\" \"it\"*")
        );
    }
}
