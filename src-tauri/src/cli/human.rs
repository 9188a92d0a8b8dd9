//! What the CLI prints for people: compact tables for lists, a readable task
//! with its conversation, turns and decisions. Agent text is printed as text
//! (control characters replaced), never interpreted.

use std::fmt::Write as _;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::Value;

use crate::a2a::types::{Message, Part, PartContent, Role, Task};

/// A turn as the UI API sends it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnView {
    pub id: String,
    pub task_id: String,
    pub agent_id: String,
    pub state: String,
    #[serde(default)]
    pub preview: String,
    pub opened_ms: i64,
    #[serde(default)]
    pub closed_ms: Option<i64>,
    #[serde(default)]
    pub outcome: Option<String>,
}

/// A decision as the UI API sends it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionView {
    pub id: String,
    pub task_id: String,
    pub kind: String,
    #[serde(default)]
    pub payload: Value,
    #[serde(default)]
    pub actor: String,
    pub created_ms: i64,
    pub delivery: String,
    #[serde(default)]
    pub delivery_error: Option<String>,
}

/// A row of `GET /api/tasks`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRow {
    pub id: String,
    pub agent_id: String,
    pub state: String,
    #[serde(default)]
    pub preview: String,
    pub updated_ms: i64,
    #[serde(default)]
    pub parked: bool,
}

/// A row of `GET /api/history`.
#[derive(Debug, Deserialize)]
pub struct HistoryRow {
    pub decision: DecisionView,
    pub turn: TurnView,
}

/// A peer as `GET /api/peers` sends it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerView {
    pub id: String,
    pub url: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub card: Option<Value>,
    #[serde(default)]
    pub card_ms: Option<i64>,
    /// Set while the peer's card has an unaccepted change.
    #[serde(default)]
    pub card_change: Option<Value>,
}

impl PeerView {
    /// The name its card gives, if any.
    fn card_name(&self) -> Option<&str> {
        self.card
            .as_ref()
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
    }
}

/// A row of `GET /api/outbox`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxView {
    pub id: String,
    pub kind: String,
    #[serde(default)]
    pub peer_id: Option<String>,
    /// The decision, task or hop it is about.
    #[serde(default)]
    pub ref_id: String,
    pub attempts: i64,
    pub status: String,
    #[serde(default)]
    pub last_error: Option<String>,
    pub created_ms: i64,
}

/// `GET /api/tasks/{id}`, the parts the CLI shows.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskDetailView {
    pub task: Task,
    pub agent_id: String,
    #[serde(default)]
    pub dialect: String,
    #[serde(default)]
    pub turns: Vec<TurnView>,
    #[serde(default)]
    pub decisions: Vec<DecisionView>,
    #[serde(default)]
    pub open_turn: Option<TurnView>,
    /// The task this one goes on in (its peer answered a decision with it).
    #[serde(default)]
    pub continued_in: Option<String>,
    /// The task this one continues.
    #[serde(default)]
    pub continues: Option<String>,
    /// Whether that task has been archived.
    #[serde(default)]
    pub continues_archived: bool,
    /// When retention archived this task, for one read from the archive.
    #[serde(default)]
    pub archived_at: Option<String>,
    /// The hop that started this task and the hops it fired.
    #[serde(default)]
    pub chain: ChainView,
}

/// `chain` of `GET /api/tasks/{id}`.
#[derive(Debug, Default, Deserialize)]
pub struct ChainView {
    #[serde(default)]
    pub parent: Option<LinkView>,
    #[serde(default)]
    pub children: Vec<LinkView>,
}

/// One hop seen from a task (see [`ChainView`]).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkView {
    pub rule_id: String,
    #[serde(default)]
    pub task_id: Option<String>,
    pub state: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub archived: bool,
}

/// How long ago `ms` was, compactly: `12s`, `3m`, `2h`, `5d`.
pub fn age(now_ms: i64, ms: i64) -> String {
    let s = (now_ms - ms).max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// Text safe for a terminal: control characters (escape sequences included)
/// become `�`, except newlines and tabs when `multiline`.
fn clean(s: &str, multiline: bool) -> String {
    s.chars()
        .map(|c| match c {
            '\n' | '\t' if multiline => c,
            '\t' => ' ',
            c if c.is_control() => '\u{FFFD}',
            c => c,
        })
        .collect()
}

/// The first line of `s`, at most `max` characters.
pub fn first_line(s: &str, max: usize) -> String {
    let line = clean(s.lines().next().unwrap_or(""), false);
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max - 1).collect();
    cut.push('…');
    cut
}

/// Aligned columns, two spaces apart; the last column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let head: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&head).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let pad = widths[i] - cell.chars().count();
                let _ = write!(line, "{cell}{}  ", " ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

const PREVIEW: usize = 60;

/// The parked tasks (`GET /api/queue`).
pub fn queue(items: &[TurnView], total: i64, filtered: bool, now: i64) -> String {
    if items.is_empty() && filtered {
        return "no task waiting for a decision matches\n".into();
    }
    if items.is_empty() {
        return "no task is waiting for a decision\n".into();
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|t| {
            vec![
                t.task_id.clone(),
                t.agent_id.clone(),
                t.state.clone(),
                age(now, t.opened_ms),
                first_line(&t.preview, PREVIEW),
            ]
        })
        .collect();
    let mut out = table(&["ID", "AGENT", "STATE", "AGE", "REQUEST"], &rows);
    if total > items.len() as i64 {
        let _ = writeln!(
            out,
            "({} of {total} shown; --limit N lists up to 500)",
            items.len()
        );
    }
    out
}

/// Recent tasks (`GET /api/tasks`); `narrowed` when a filter picked them.
pub fn tasks(items: &[TaskRow], more: bool, narrowed: bool, now: i64) -> String {
    if items.is_empty() && narrowed {
        return "no task matches\n".into();
    }
    if items.is_empty() {
        return "no tasks yet\n".into();
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|t| {
            let state = if t.parked {
                format!("{} *", t.state)
            } else {
                t.state.clone()
            };
            vec![
                t.id.clone(),
                t.agent_id.clone(),
                state,
                age(now, t.updated_ms),
                first_line(&t.preview, PREVIEW),
            ]
        })
        .collect();
    let mut out = table(&["ID", "AGENT", "STATE", "AGE", "REQUEST"], &rows);
    if items.iter().any(|t| t.parked) {
        out.push_str("* waiting for a decision\n");
    }
    if more {
        out.push_str("(older tasks not shown; --limit N lists up to 500)\n");
    }
    out
}

/// Decisions, newest first (`GET /api/history`).
pub fn history(items: &[HistoryRow], more: bool, filtered: bool, now: i64) -> String {
    if items.is_empty() && filtered {
        return "no decision matches\n".into();
    }
    if items.is_empty() {
        return "no decisions yet\n".into();
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|h| {
            let d = &h.decision;
            let decided = match d.delivery.as_str() {
                "delivered" => d.kind.clone(),
                other => format!("{} ({other})", d.kind),
            };
            vec![
                d.task_id.clone(),
                h.turn.agent_id.clone(),
                decided,
                age(now, d.created_ms),
                first_line(&h.turn.preview, PREVIEW),
            ]
        })
        .collect();
    let mut out = table(&["ID", "AGENT", "DECISION", "AGE", "REQUEST"], &rows);
    if more {
        out.push_str("(older decisions not shown; --limit N lists up to 500)\n");
    }
    out
}

/// A peer just added: `added peer deploy-bot: Deploy Bot (http://…)`.
pub fn peer_added(p: &PeerView) -> String {
    let name = p
        .card_name()
        .or(p.name.as_deref())
        .map(|n| first_line(n, PREVIEW))
        .unwrap_or_else(|| "(no card name)".into());
    format!("added peer {}: {name} ({})", p.id, clean(&p.url, false))
}

/// The peers (`GET /api/peers`).
pub fn peers(items: &[PeerView], now: i64) -> String {
    if items.is_empty() {
        return "no peers yet\n".into();
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|p| {
            vec![
                p.id.clone(),
                p.name
                    .as_deref()
                    .or(p.card_name())
                    .map(|n| first_line(n, 40))
                    .unwrap_or_else(|| "-".into()),
                clean(&p.url, false),
                p.card_ms
                    .map(|ms| age(now, ms))
                    .unwrap_or_else(|| "never".into()),
            ]
        })
        .collect();
    let mut out = table(&["ID", "NAME", "URL", "CARD AGE"], &rows);
    for p in items {
        if let Some(change) = &p.card_change {
            out.push_str(&card_change_line(&p.id, change));
        }
    }
    out
}

/// The warning for a peer whose card changed since it was trusted.
pub fn card_change_line(id: &str, change: &Value) -> String {
    let fields: Vec<&str> = change["changed"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    format!(
        "warning: the card of peer {id} changed ({}); its decisions and new tasks are held until you run `countersign peers trust {id}`\n",
        fields.join(", ")
    )
}

/// Calls owed to peers (`GET /api/outbox`).
pub fn deliveries(items: &[OutboxView], failed_only: bool, now: i64) -> String {
    if items.is_empty() {
        return if failed_only {
            "no failed deliveries\n".into()
        } else {
            "no deliveries yet\n".into()
        };
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|o| {
            vec![
                o.id.clone(),
                o.kind.clone(),
                o.peer_id.clone().unwrap_or_else(|| o.ref_id.clone()),
                o.status.clone(),
                o.attempts.to_string(),
                age(now, o.created_ms),
                o.last_error
                    .as_deref()
                    .map(|e| first_line(e, 80))
                    .unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "KIND",
            "FOR",
            "STATUS",
            "ATTEMPTS",
            "AGE",
            "LAST ERROR",
        ],
        &rows,
    )
}

/// A task's state and status message on one line: `input-required Which
/// environment?`.
pub fn status_line(task: &Task) -> String {
    let state = task.status.state.short_name();
    let text = task
        .status
        .message
        .as_ref()
        .map(Message::text)
        .unwrap_or_default();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        state.to_owned()
    } else {
        format!("{state} {}", first_line(&text, 200))
    }
}

/// One decision on one line: `approve by cli 3m ago, delivered: "ship it"`.
pub fn decision_line(d: &DecisionView, now: i64) -> String {
    format!(
        "{} by {} {} ago, {}",
        d.kind,
        d.actor,
        age(now, d.created_ms),
        decision_outcome(d)
    )
}

/// How a decision went and what it said: `delivered: "ship it" + data {…}`.
pub fn decision_outcome(d: &DecisionView) -> String {
    let mut line = d.delivery.clone();
    if let Some(e) = &d.delivery_error {
        let _ = write!(line, " ({})", first_line(e, 120));
    }
    let words = ["comment", "text", "reason"]
        .iter()
        .find_map(|k| d.payload.get(*k).and_then(Value::as_str));
    if let Some(w) = words {
        let _ = write!(line, ": \"{}\"", first_line(w, PREVIEW));
    }
    if let Some(data) = d.payload.get("data") {
        let _ = write!(line, " + data {}", first_line(&data.to_string(), PREVIEW));
    }
    if let Some(Value::Array(files)) = d.payload.get("files") {
        let names: Vec<String> = files
            .iter()
            .filter_map(|f| f["name"].as_str())
            .map(|n| first_line(n, 40))
            .collect();
        let _ = write!(line, " + file(s) {}", names.join(", "));
    }
    line
}

/// The other end of a hop and how it went: `t2 (rule to-b, delivered)`,
/// or the rule alone for a hop that started no task here.
fn chain_link(l: &LinkView) -> String {
    let mut how = format!(
        "rule {}, {}",
        clean(&l.rule_id, false),
        clean(&l.state, false)
    );
    if let Some(r) = &l.reason {
        let _ = write!(how, ": {}", first_line(r, 120));
    }
    match &l.task_id {
        Some(id) if l.archived => {
            let id = clean(id, false);
            format!("{id} ({how}; archived: `countersign archive show {id}`)")
        }
        Some(id) => format!("{} ({how})", clean(id, false)),
        None => format!("({how})"),
    }
}

/// A task as a person reads it.
pub fn show(detail: &TaskDetailView, now: i64) -> String {
    let task = &detail.task;
    let mut out = String::new();
    if let Some(at) = &detail.archived_at {
        let _ = writeln!(out, "archived {}", clean(at, false));
    }
    let _ = writeln!(out, "task     {}", task.id);
    let _ = writeln!(out, "state    {}", task.status.state.short_name());
    let dialect = if detail.dialect.is_empty() {
        String::new()
    } else {
        format!(" (dialect {})", clean(&detail.dialect, false))
    };
    let _ = writeln!(out, "agent    {}{dialect}", detail.agent_id);
    let _ = writeln!(out, "context  {}", task.context_id);
    if let Some(t) = &detail.open_turn {
        let _ = writeln!(
            out,
            "waiting  {} for {} (turn {})",
            t.state,
            age(now, t.opened_ms),
            t.id
        );
    }
    if let Some(previous) = &detail.continues {
        let previous = clean(previous, false);
        if detail.continues_archived {
            let _ = writeln!(
                out,
                "continues    {previous} (archived: `countersign archive show {previous}`)"
            );
        } else {
            let _ = writeln!(out, "continues    {previous}");
        }
    }
    if let Some(next) = &detail.continued_in {
        let _ = writeln!(
            out,
            "continued in {} (the peer answered the decision with a new task)",
            clean(next, false)
        );
    }
    if let Some(from) = &detail.chain.parent {
        let _ = writeln!(out, "chained from {}", chain_link(from));
    }
    for to in &detail.chain.children {
        let _ = writeln!(out, "chained to   {}", chain_link(to));
    }

    out.push_str("\nconversation\n");
    let mut seen = std::collections::HashSet::new();
    for m in &task.history {
        seen.insert(m.message_id.as_str());
        message(&mut out, m, "");
    }
    if let Some(m) = &task.status.message
        && !seen.contains(m.message_id.as_str())
    {
        message(&mut out, m, " (status)");
    }
    if task.history.is_empty() && task.status.message.is_none() {
        out.push_str("  (no messages)\n");
    }

    if let Some(artifacts) = task.artifacts.as_ref().filter(|a| !a.is_empty()) {
        out.push_str("\nartifacts\n");
        for a in artifacts {
            let name = a.name.as_deref().unwrap_or("(unnamed)");
            let _ = writeln!(
                out,
                "  {} [{}]",
                clean(name, false),
                clean(&a.artifact_id, false)
            );
            if let Some(d) = &a.description {
                let _ = writeln!(out, "    {}", first_line(d, 100));
            }
            for p in &a.parts {
                part(&mut out, p, "    ");
            }
        }
    }

    if !detail.turns.is_empty() {
        out.push_str("\nturns\n");
        for t in &detail.turns {
            let closed = match (t.closed_ms, &t.outcome) {
                (Some(ms), Some(o)) => format!(", {o} {} ago", age(now, ms)),
                (Some(ms), None) => format!(", closed {} ago", age(now, ms)),
                (None, _) => ", open".into(),
            };
            let _ = writeln!(
                out,
                "  {}  {} {} ago{closed}",
                t.id,
                t.state,
                age(now, t.opened_ms)
            );
        }
    }

    if !detail.decisions.is_empty() {
        out.push_str("\ndecisions\n");
        for d in &detail.decisions {
            let _ = writeln!(out, "  {}", decision_line(d, now));
        }
    }
    out
}

/// A message: its role, then each part indented under it.
fn message(out: &mut String, m: &Message, note: &str) {
    let role = match m.role {
        Role::User => "user",
        Role::Agent => "agent",
    };
    let _ = writeln!(out, "  {role}{note}:");
    for p in &m.parts {
        part(out, p, "    ");
    }
}

/// A part: text as is; data as pretty JSON; files as name, type and size.
fn part(out: &mut String, p: &Part, indent: &str) {
    let name = p
        .filename
        .as_deref()
        .map(|n| clean(n, false))
        .unwrap_or_else(|| "(unnamed)".into());
    let media = p
        .media_type
        .as_deref()
        .map(|t| clean(t, false))
        .unwrap_or_else(|| "unknown type".into());
    match &p.content {
        PartContent::Text(t) => {
            for line in clean(t, true).lines() {
                let _ = writeln!(out, "{indent}{line}");
            }
        }
        PartContent::Data(v) => {
            let _ = writeln!(out, "{indent}data:");
            let pretty = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
            for line in clean(&pretty, true).lines() {
                let _ = writeln!(out, "{indent}  {line}");
            }
        }
        PartContent::Raw(b64) => {
            let size = base64::engine::general_purpose::STANDARD
                .decode(b64.as_bytes())
                .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(b64.as_bytes()))
                .map(|b| size(b.len()))
                .unwrap_or_else(|_| "unknown size".into());
            let _ = writeln!(out, "{indent}file: {name} ({media}, {size})");
        }
        PartContent::Url(u) => {
            let _ = writeln!(out, "{indent}file: {name} ({media}) at {}", clean(u, false));
        }
    }
}

/// A byte count for people: `812 B`, `4.2 KiB`, `3.0 MiB`.
fn size(n: usize) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if f < K {
        format!("{n} B")
    } else if f < K * K {
        format!("{:.1} KiB", f / K)
    } else {
        format!("{:.1} MiB", f / (K * K))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ages_are_compact() {
        let now = 10 * 86_400_000;
        assert_eq!(age(now, now - 5_000), "5s");
        assert_eq!(age(now, now - 3 * 60_000), "3m");
        assert_eq!(age(now, now - 2 * 3_600_000), "2h");
        assert_eq!(age(now, now - 5 * 86_400_000), "5d");
        assert_eq!(age(now, now + 10_000), "0s");
    }

    #[test]
    fn tables_align_and_previews_are_one_clean_line() {
        let t = table(
            &["ID", "AGENT"],
            &[
                vec!["a".into(), "inbox".into()],
                vec!["bbbb".into(), "x".into()],
            ],
        );
        assert_eq!(t, "ID    AGENT\na     inbox\nbbbb  x\n");
        assert_eq!(first_line("one\ntwo", 10), "one");
        assert_eq!(first_line("abcdefghijkl", 5), "abcd…");
        assert_eq!(first_line("a\u{1b}[31mred", 20), "a\u{FFFD}[31mred");
    }

    #[test]
    fn peers_deliveries_and_status_lines_read_well() {
        let p: PeerView = serde_json::from_value(json!({
            "id": "deploy-bot", "url": "http://h/a2a/bot", "name": null,
            "rejectWith": "message", "card": {"name": "Deploy\u{1b}Bot"},
            "cardMs": 0, "fromConfig": false, "createdMs": 0
        }))
        .unwrap();
        assert_eq!(
            peer_added(&p),
            "added peer deploy-bot: Deploy\u{FFFD}Bot (http://h/a2a/bot)"
        );
        let listed = peers(&[p], 120_000);
        assert!(listed.starts_with("ID          NAME"), "{listed}");
        assert!(listed.contains("http://h/a2a/bot  2m"), "{listed}");
        assert_eq!(peers(&[], 0), "no peers yet\n");

        let o: OutboxView = serde_json::from_value(json!({
            "id": "o1", "kind": "decision", "refId": "d1", "peerId": "bot",
            "body": {}, "attempts": 2, "nextMs": 0, "status": "pending",
            "lastError": "connection refused\nmore", "createdMs": 0, "doneMs": null
        }))
        .unwrap();
        let out = deliveries(&[o], false, 5_000);
        assert!(
            out.lines()
                .nth(1)
                .is_some_and(|l| l.split_whitespace().collect::<Vec<_>>()
                    == [
                        "o1",
                        "decision",
                        "bot",
                        "pending",
                        "2",
                        "5s",
                        "connection",
                        "refused"
                    ]),
            "{out}"
        );
        assert_eq!(deliveries(&[], true, 0), "no failed deliveries\n");

        let t: Task = serde_json::from_value(json!({
            "id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": {
                "messageId": "m", "role": "ROLE_AGENT",
                "parts": [{"text": "Which\n  environment?"}]}}
        }))
        .unwrap();
        assert_eq!(status_line(&t), "input-required Which environment?");
        let t: Task = serde_json::from_value(
            json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}),
        )
        .unwrap();
        assert_eq!(status_line(&t), "working");
    }

    #[test]
    fn show_prints_the_conversation_parts_and_decisions() {
        let detail: TaskDetailView = serde_json::from_value(json!({
            "task": {
                "id": "t1", "contextId": "c1",
                "status": {"state": "TASK_STATE_COMPLETED",
                    "message": {"messageId": "m2", "role": "ROLE_AGENT", "parts": [
                        {"text": "Plan B"},
                        {"data": {"plan": "B"}},
                        {"raw": "aGk=", "filename": "notes.txt", "mediaType": "text/plain"}]}},
                "artifacts": [{"artifactId": "a1", "name": "decision", "parts": [{"data": {"decision": "approve"}}]}],
                "history": [{"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Which plan?\nA or B"}]}]
            },
            "agentId": "inbox", "dialect": "v1",
            "turns": [{"id": "u1", "taskId": "t1", "agentId": "inbox", "source": "served",
                "state": "input-required", "preview": "Which plan?", "openedMs": 0,
                "closedMs": 1000, "outcome": "decided"}],
            "decisions": [{"id": "d1", "turnId": "u1", "taskId": "t1", "agentId": "inbox",
                "kind": "reply", "payload": {"text": "Plan B"}, "actor": "cli",
                "createdMs": 1000, "delivery": "delivered"}],
            "rendered": {},
            "continues": "t0"
        }))
        .unwrap();
        let out = show(&detail, 61_000);
        for want in [
            "state    completed",
            "agent    inbox (dialect v1)",
            "continues    t0\n",
            "  user:\n    Which plan?\n    A or B\n",
            "  agent (status):\n    Plan B\n    data:\n      {\n        \"plan\": \"B\"\n      }\n",
            "file: notes.txt (text/plain, 2 B)",
            "  decision [a1]",
            "u1  input-required 1m ago, decided 1m ago",
            "reply by cli 1m ago, delivered: \"Plan B\"",
        ] {
            assert!(out.contains(want), "missing {want:?} in:\n{out}");
        }
    }

    /// A continued task whose predecessor was archived says where it went.
    #[test]
    fn show_names_the_archive_for_an_archived_predecessor() {
        let detail: TaskDetailView = serde_json::from_value(serde_json::json!({
            "task": {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_INPUT_REQUIRED"}},
            "agentId": "inbox",
            "continues": "t0",
            "continuesArchived": true
        }))
        .unwrap();
        let out = show(&detail, 0);
        assert!(
            out.contains("continues    t0 (archived: `countersign archive show t0`)\n"),
            "{out}"
        );
    }

    /// Chain links: where the task came from and where it went, the rule and
    /// how each hop went, and the archive for an end that was archived.
    #[test]
    fn show_prints_chain_links() {
        let detail: TaskDetailView = serde_json::from_value(serde_json::json!({
            "task": {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_COMPLETED"}},
            "agentId": "inbox",
            "chain": {
                "parent": {"hopId": "h0", "ruleId": "to-b", "taskId": "t0",
                    "state": "delivered", "archived": true},
                "children": [
                    {"hopId": "h1", "ruleId": "echo", "taskId": "t2", "state": "delivered"},
                    {"hopId": "h2", "ruleId": "again", "state": "refused",
                        "reason": "cycle: rule `again` already produced an ancestor"}
                ]
            }
        }))
        .unwrap();
        let out = show(&detail, 0);
        for want in [
            "chained from t0 (rule to-b, delivered; archived: `countersign archive show t0`)\n",
            "chained to   t2 (rule echo, delivered)\n",
            "chained to   (rule again, refused: cycle: rule `again` already produced an ancestor)\n",
        ] {
            assert!(out.contains(want), "missing {want:?} in:\n{out}");
        }
    }
}
