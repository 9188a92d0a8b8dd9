//! What a task event owes the outside world, decided in the transaction that
//! records the event: one outbox item per push config of the task, and one
//! hop per chain rule the new state fires. So a committed event can never
//! lose its notifications or its chain, whatever happens next.
//!
//! Also every statement for chain rules and hops.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use super::peers::{OutboxItem, enqueue};
use super::{Error, Result, tasks};
use crate::a2a::types::{Metadata, StreamResponse, TaskState};
use crate::dispatch::chains::ChainRule;

fn to_json<T: Serialize>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::Corrupt(format!("cannot encode: {e}")))
}

fn rule_of(body: &str) -> Result<ChainRule> {
    serde_json::from_str(body).map_err(|e| Error::Corrupt(format!("stored chain rule: {e}")))
}

/// Records what an event owes: push notifications to the task's configs,
/// and (when the event moved the task to `entered`) the hops of the chain
/// rules that state fires. Returns how many outbox items were queued.
/// Every event stored is passed here, in the transaction that stores it.
pub fn fan_out(
    conn: &Connection,
    task_id: &str,
    seq: i64,
    ev: &StreamResponse,
    entered: Option<TaskState>,
    max_depth: i64,
    now_ms: i64,
) -> Result<usize> {
    let mut queued = queue_pushes(conn, task_id, seq, ev, now_ms)?;
    if let Some(state) = entered {
        queued += fire_rules(conn, task_id, state, max_depth, now_ms)?;
    }
    Ok(queued)
}

fn queue_pushes(
    conn: &Connection,
    task_id: &str,
    seq: i64,
    ev: &StreamResponse,
    now_ms: i64,
) -> Result<usize> {
    let configs: Vec<(String, String)> = {
        let mut stmt =
            conn.prepare_cached("SELECT id, dialect FROM push_configs WHERE task_id = ?1")?;
        let rows = stmt.query_map([task_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    if configs.is_empty() {
        return Ok(0);
    }
    // Older dialects get the whole task as it is after this event.
    let snapshot = if configs.iter().any(|(_, d)| d != "v1") {
        tasks::load(conn, task_id, None, true)?.map(|(_, t)| StreamResponse::Task(t))
    } else {
        None
    };
    for (config_id, dialect) in &configs {
        let payload = match (dialect.as_str(), &snapshot) {
            ("v1", _) | (_, None) => ev,
            (_, Some(s)) => s,
        };
        let body = serde_json::json!({
            "taskId": task_id,
            "configId": config_id,
            "dialect": dialect,
            "seq": seq,
            "payload": payload,
        });
        // The id is stable: a retry or a replay names the same event.
        let mut item = OutboxItem::due_now(
            format!("push:{task_id}:{config_id}:{seq}"),
            "push",
            task_id.to_owned(),
            body,
            now_ms,
        );
        item.order_key = Some(format!("push:{task_id}:{config_id}"));
        enqueue(conn, &item)?;
    }
    Ok(configs.len())
}

/// The rule ids of the hops that led to a task, nearest first: the rule of
/// the hop that started it, then that hop's lineage (what led to its
/// parent, stored with the hop when it fired). Read from that one hop, so
/// loop protection holds after retention archived the task's ancestors.
pub(super) fn ancestry(conn: &Connection, task_id: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT rule_id, lineage FROM chain_hops WHERE child_task_id = ?1 ORDER BY created_ms, id",
    )?;
    let rows = stmt.query_map([task_id], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
    })?;
    let mut rules = Vec::new();
    for row in rows {
        let (rule, lineage) = row?;
        rules.push(rule);
        rules.extend(parse_lineage(&lineage)?);
    }
    Ok(rules)
}

/// A hop's stored lineage: the rule ids that led to its parent task.
fn parse_lineage(text: &str) -> Result<Vec<String>> {
    serde_json::from_str(text)
        .map_err(|e| Error::Corrupt(format!("a chain hop's lineage `{text}`: {e}")))
}

/// Migration 17: each hop's lineage, from the hops still stored (nearest
/// first, as [`ancestry`] reads it).
pub(super) fn backfill_lineage(conn: &Connection) -> Result<()> {
    conn.execute_batch("ALTER TABLE chain_hops ADD COLUMN lineage TEXT NOT NULL DEFAULT '[]';")?;
    let lineages = {
        let mut hops = conn.prepare("SELECT id, parent_task_id FROM chain_hops")?;
        let mut up = conn.prepare(
            "WITH RECURSIVE up(task_id, rule_id, depth) AS (
                 SELECT parent_task_id, rule_id, 1 FROM chain_hops WHERE child_task_id = ?1
                 UNION ALL
                 SELECT h.parent_task_id, h.rule_id, up.depth + 1
                 FROM chain_hops h JOIN up ON h.child_task_id = up.task_id
                 WHERE up.depth < 256
             )
             SELECT rule_id FROM up ORDER BY depth",
        )?;
        let rows = hops.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, parent) = row?;
            let rules = up
                .query_map([&parent], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<String>>>()?;
            if !rules.is_empty() {
                out.push((id, serde_json::Value::from(rules).to_string()));
            }
        }
        out
    };
    let mut write = conn.prepare("UPDATE chain_hops SET lineage = ?2 WHERE id = ?1")?;
    for (id, lineage) in lineages {
        write.execute(params![id, lineage])?;
    }
    Ok(())
}

/// `fan_out` for the events of a task created in this same transaction,
/// with `metadata`, whose chain rules are `rules`, and with no push config
/// stored with it (a config names a stored task, so only the write that
/// creates it could have added one: a served task created with a config
/// sent inline does not come here, and a watched task's first sight adds
/// none). Only the chain rules of the state it `entered` are looked at,
/// and its row is not read back.
pub fn fan_out_created(
    conn: &Connection,
    task_id: &str,
    rules: RulesOf<'_>,
    metadata: Option<&Metadata>,
    entered: Option<TaskState>,
    max_depth: i64,
    now_ms: i64,
) -> Result<usize> {
    let Some(state) = entered else { return Ok(0) };
    let bodies = rule_bodies(conn, rules)?;
    fire(conn, task_id, &bodies, state, metadata, max_depth, now_ms)
}

/// Whose chain rules a task's changes can fire.
#[derive(Debug, Clone, Copy)]
pub enum RulesOf<'a> {
    /// A local agent's, for its tasks.
    Agent(&'a str),
    /// A watched peer's, for the mirrors of its tasks.
    Peer(&'a str),
}

/// The stored bodies of `rules`.
fn rule_bodies(conn: &Connection, rules: RulesOf<'_>) -> Result<Vec<String>> {
    let (sql, key) = match rules {
        RulesOf::Agent(id) => ("SELECT body FROM chain_rules WHERE agent_id = ?1", id),
        RulesOf::Peer(id) => ("SELECT body FROM chain_rules WHERE peer_id = ?1", id),
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map([key], |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn fire_rules(
    conn: &Connection,
    task_id: &str,
    state: TaskState,
    max_depth: i64,
    now_ms: i64,
) -> Result<usize> {
    let row: Option<(String, String, Option<String>, Option<String>)> = conn
        .prepare_cached("SELECT agent_id, origin, peer_id, metadata FROM tasks WHERE id = ?1")?
        .query_row([task_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()?;
    let Some((agent_id, origin, peer_id, metadata)) = row else {
        return Ok(0);
    };
    let bodies = if origin == "watched" {
        let Some(peer) = peer_id else { return Ok(0) };
        rule_bodies(conn, RulesOf::Peer(&peer))?
    } else {
        rule_bodies(conn, RulesOf::Agent(&agent_id))?
    };
    if bodies.is_empty() {
        return Ok(0);
    }
    let metadata: Option<Metadata> = metadata.and_then(|m| serde_json::from_str(&m).ok());
    fire(
        conn,
        task_id,
        &bodies,
        state,
        metadata.as_ref(),
        max_depth,
        now_ms,
    )
}

/// Records a hop for each of the rules in `bodies` that a task entering
/// `state` fires; returns how many were queued to run.
fn fire(
    conn: &Connection,
    task_id: &str,
    bodies: &[String],
    state: TaskState,
    metadata: Option<&Metadata>,
    max_depth: i64,
    now_ms: i64,
) -> Result<usize> {
    let mut firing = Vec::new();
    for body in bodies {
        let rule = rule_of(body)?;
        if rule.fires_on(state, metadata) {
            firing.push(rule);
        }
    }
    if firing.is_empty() {
        return Ok(0);
    }
    let ancestors = ancestry(conn, task_id)?;
    let depth = ancestors.len() as i64 + 1;
    let lineage = serde_json::Value::from(ancestors.as_slice()).to_string();
    let mut queued = 0;
    for rule in firing {
        let (hop_state, reason) = if ancestors.contains(&rule.id) {
            (
                "refused",
                Some(format!(
                    "cycle: rule `{}` already produced an ancestor of this task (rules, nearest first: {})",
                    rule.id,
                    ancestors.join(" ← ")
                )),
            )
        } else if depth > max_depth {
            (
                "refused",
                Some(format!(
                    "too deep: this hop would be number {depth} in one chain; the limit is {max_depth} ([dispatch] max_chain_depth)"
                )),
            )
        } else if rule.gate {
            ("gated", None)
        } else {
            ("pending", None)
        };
        let hop_id = uuid::Uuid::new_v4().to_string();
        let inserted = conn
            .prepare_cached(
                "INSERT OR IGNORE INTO chain_hops
                   (id, rule_id, parent_task_id, trigger_state, depth, state, reason, created_ms, updated_ms, lineage)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9)",
            )?
            .execute(params![
                hop_id,
                rule.id,
                task_id,
                state.short_name(),
                depth,
                hop_state,
                reason,
                now_ms,
                lineage
            ])?;
        if inserted == 1 && hop_state == "pending" {
            queue_hop(conn, &hop_id, now_ms)?;
            queued += 1;
        }
    }
    Ok(queued)
}

fn queue_hop(conn: &Connection, hop_id: &str, now_ms: i64) -> Result<()> {
    let item = OutboxItem::due_now(
        format!("hop:{hop_id}"),
        "chain",
        hop_id.to_owned(),
        serde_json::json!({ "hopId": hop_id }),
        now_ms,
    );
    enqueue(conn, &item)
}

/// Creates or replaces a rule.
pub fn put_rule(conn: &Connection, rule: &ChainRule, now_ms: i64) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO chain_rules (id, source, agent_id, peer_id, body, created_ms, updated_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
         ON CONFLICT (id) DO UPDATE SET source = excluded.source, agent_id = excluded.agent_id,
             peer_id = excluded.peer_id, body = excluded.body, updated_ms = excluded.updated_ms",
    )?
    .execute(params![
        rule.id,
        rule.source,
        rule.trigger.agent,
        rule.trigger.peer,
        to_json(rule)?,
        now_ms
    ])?;
    Ok(())
}

/// One rule.
pub fn rule(conn: &Connection, id: &str) -> Result<Option<ChainRule>> {
    conn.prepare_cached("SELECT body FROM chain_rules WHERE id = ?1")?
        .query_row([id], |r| r.get::<_, String>(0))
        .optional()?
        .map(|b| rule_of(&b))
        .transpose()
}

/// Every rule, config rules first, then by id.
pub fn rules(conn: &Connection) -> Result<Vec<ChainRule>> {
    let mut stmt = conn.prepare_cached(
        "SELECT body FROM chain_rules ORDER BY source = 'config' DESC, created_ms, id",
    )?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    let mut out = Vec::new();
    for b in rows {
        out.push(rule_of(&b?)?);
    }
    Ok(out)
}

/// Deletes a rule; its past hops stay as history.
pub fn delete_rule(conn: &Connection, id: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached("DELETE FROM chain_rules WHERE id = ?1")?
        .execute([id])?
        == 1)
}

/// Makes the config file's rules the stored `config` rules.
pub fn sync_config_rules(conn: &Connection, rules: &[ChainRule], now_ms: i64) -> Result<()> {
    let ids: Vec<&str> = rules.iter().map(|r| r.id.as_str()).collect();
    let stale: Vec<String> = {
        let mut stmt = conn.prepare_cached("SELECT id FROM chain_rules WHERE source = 'config'")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()?
            .into_iter()
            .filter(|id| !ids.contains(&id.as_str()))
            .collect()
    };
    for id in stale {
        delete_rule(conn, &id)?;
    }
    for r in rules {
        put_rule(conn, r, now_ms)?;
    }
    Ok(())
}

/// One hop of a chain: a rule fired by a task. Archive records hold it as
/// it serialises, and are read back into it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hop {
    pub id: String,
    pub rule_id: String,
    pub parent_task_id: String,
    pub trigger_state: String,
    pub child_task_id: Option<String>,
    pub depth: i64,
    /// `gated` (waits for the person), `pending`, `delivered`, `failed`,
    /// `refused` (loop protection) or `dropped` (the person said no).
    pub state: String,
    pub reason: Option<String>,
    #[serde(skip)]
    pub created_ms: i64,
    #[serde(skip)]
    pub updated_ms: i64,
    pub created_at: String,
    pub updated_at: String,
}

const HOP_COLUMNS: &str = "id, rule_id, parent_task_id, trigger_state, child_task_id, depth, state, reason, created_ms, updated_ms";

fn hop_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Hop> {
    let created_ms: i64 = r.get(8)?;
    let updated_ms: i64 = r.get(9)?;
    Ok(Hop {
        id: r.get(0)?,
        rule_id: r.get(1)?,
        parent_task_id: r.get(2)?,
        trigger_state: r.get(3)?,
        child_task_id: r.get(4)?,
        depth: r.get(5)?,
        state: r.get(6)?,
        reason: r.get(7)?,
        created_ms,
        updated_ms,
        created_at: crate::a2a::types::format_timestamp(created_ms),
        updated_at: crate::a2a::types::format_timestamp(updated_ms),
    })
}

/// One hop.
pub fn hop(conn: &Connection, id: &str) -> Result<Option<Hop>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {HOP_COLUMNS} FROM chain_hops WHERE id = ?1"
        ))?
        .query_row([id], hop_row)
        .optional()?)
}

/// A hop as the list of recent hops shows it: with whose tasks it links
/// and what they were about, so a person can tell hops apart without
/// opening each task.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedHop {
    #[serde(flatten)]
    pub hop: Hop,
    /// The task that fired the hop (`None` once retention archived it).
    pub parent: Option<TaskLabel>,
    /// The task the hop started, if it started one and it is still here
    /// (not archived).
    pub child: Option<TaskLabel>,
}

/// Who a task belongs to and the first line of what it was asked.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskLabel {
    pub agent_id: String,
    pub preview: String,
}

/// The newest hops, each with its tasks' labels.
pub fn hops(conn: &Connection, limit: usize) -> Result<Vec<ListedHop>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {HOP_COLUMNS} FROM chain_hops ORDER BY created_ms DESC, id LIMIT ?1"
    ))?;
    let rows = stmt.query_map([limit as i64], hop_row)?;
    let hops = rows.collect::<rusqlite::Result<Vec<Hop>>>()?;
    hops.into_iter()
        .map(|hop| {
            let parent = task_label(conn, &hop.parent_task_id)?;
            let child = match &hop.child_task_id {
                Some(id) => task_label(conn, id)?,
                None => None,
            };
            Ok(ListedHop { hop, parent, child })
        })
        .collect()
}

/// The label of a task: its agent (or peer) and the first line of the
/// first message its caller sent.
fn task_label(conn: &Connection, task_id: &str) -> Result<Option<TaskLabel>> {
    let Some(agent_id) = conn
        .prepare_cached("SELECT agent_id FROM tasks WHERE id = ?1")?
        .query_row([task_id], |r| r.get::<_, String>(0))
        .optional()?
    else {
        return Ok(None);
    };
    let preview = super::queue::first_request_preview(conn, task_id)?;
    Ok(Some(TaskLabel { agent_id, preview }))
}

/// The hop that started a task, and the hops a task fired.
pub fn links(conn: &Connection, task_id: &str) -> Result<(Option<Hop>, Vec<Hop>)> {
    let parent = conn
        .prepare_cached(&format!(
            "SELECT {HOP_COLUMNS} FROM chain_hops WHERE child_task_id = ?1"
        ))?
        .query_row([task_id], hop_row)
        .optional()?;
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {HOP_COLUMNS} FROM chain_hops WHERE parent_task_id = ?1 ORDER BY created_ms, id"
    ))?;
    let children = stmt
        .query_map([task_id], hop_row)?
        .collect::<rusqlite::Result<_>>()?;
    Ok((parent, children))
}

/// Moves a hop to `state` (with a reason); `delivered` may name the child.
pub fn set_hop(
    conn: &Connection,
    id: &str,
    state: &str,
    reason: Option<&str>,
    now_ms: i64,
) -> Result<()> {
    conn.prepare_cached(
        "UPDATE chain_hops SET state = ?2, reason = ?3, updated_ms = ?4 WHERE id = ?1",
    )?
    .execute(params![id, state, reason, now_ms])?;
    Ok(())
}

/// What a chain hop's message id starts with (the hop's id follows).
pub const HOP_MESSAGE_PREFIX: &str = "hop-";

/// The hop still owed whose message carried the push subscription
/// `subscription` (named after the message): a hop that a stop cut short,
/// whose task the peer's push now brings here.
pub fn hop_cut_short(conn: &Connection, subscription: &str) -> Result<Option<String>> {
    let Some(hop_id) = subscription
        .strip_prefix(super::peers::MESSAGE_SUBSCRIPTION)
        .and_then(|message| message.strip_prefix(HOP_MESSAGE_PREFIX))
    else {
        return Ok(None);
    };
    Ok(conn
        .prepare_cached(
            "SELECT ref_id FROM outbox WHERE ref_id = ?1 AND kind = 'chain' AND status = 'pending'",
        )?
        .query_row([hop_id], |r| r.get(0))
        .optional()?)
}

/// Records the hop `hop_id` delivered, and its outbox item, as the peer's
/// push about its task shows it was (see [`hop_cut_short`]).
pub fn hop_settled_by_push(conn: &Connection, hop_id: &str, now_ms: i64) -> Result<()> {
    conn.prepare_cached(
        "UPDATE outbox SET attempts = attempts + 1, status = 'delivered', last_error = NULL,
                next_ms = ?2, done_ms = ?2
         WHERE ref_id = ?1 AND kind = 'chain' AND status = 'pending'",
    )?
    .execute(params![hop_id, now_ms])?;
    set_hop(conn, hop_id, "delivered", None, now_ms)
}

/// Links a hop to the task it started (in the transaction that creates it,
/// so the child's own events already see its ancestry).
pub fn link_child(conn: &Connection, hop_id: &str, child_task_id: &str) -> Result<()> {
    conn.prepare_cached("UPDATE chain_hops SET child_task_id = ?2 WHERE id = ?1")?
        .execute(params![hop_id, child_task_id])?;
    Ok(())
}

/// A person's answer to a gated hop: release it (queued for delivery) or
/// drop it. Returns the hop as it was, or None when there is no such hop.
pub fn answer_gate(conn: &Connection, id: &str, release: bool, now_ms: i64) -> Result<Option<Hop>> {
    let Some(h) = hop(conn, id)? else {
        return Ok(None);
    };
    if h.state == "gated" {
        if release {
            set_hop(conn, id, "pending", None, now_ms)?;
            queue_hop(conn, id, now_ms)?;
        } else {
            set_hop(conn, id, "dropped", Some("dropped by the person"), now_ms)?;
        }
    }
    Ok(Some(h))
}
