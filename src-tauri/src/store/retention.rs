//! Queries for retention: which finished tasks may leave the live database,
//! everything about one of them as one archive record, and their removal.
//!
//! A task may go only when nothing is still owed on it: it is in a terminal
//! state and not parked, has no open turn, no decision waiting to be
//! delivered, no pending outbox item (push, decision or chain hop) and no
//! chain hop still gated or pending, as parent or child. The same condition
//! is checked again in the transaction that deletes it.

use rusqlite::{Connection, params};
use serde_json::{Value, json};

use super::{Result, dispatch, queue, tasks};
use crate::a2a::types::{TaskState, format_timestamp};

/// The SQL condition (on `t`, a row of `tasks`) under which a task may be
/// archived.
const ARCHIVABLE: &str = "
    t.state IN (3, 4, 5, 7) AND t.parked = 0
    AND NOT EXISTS (SELECT 1 FROM turns u WHERE u.task_id = t.id AND u.closed_ms IS NULL)
    AND NOT EXISTS (SELECT 1 FROM decisions d WHERE d.task_id = t.id AND d.delivery = 'pending')
    AND NOT EXISTS (SELECT 1 FROM chain_hops h
                    WHERE (h.parent_task_id = t.id OR h.child_task_id = t.id)
                      AND h.state IN ('gated', 'pending'))
    AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.status = 'pending' AND (
            o.ref_id = t.id
            OR o.ref_id IN (SELECT d.id FROM decisions d WHERE d.task_id = t.id)
            OR o.ref_id IN (SELECT h.id FROM chain_hops h WHERE h.parent_task_id = t.id)))";

/// How many tasks the database holds.
pub fn task_count(conn: &Connection) -> Result<u64> {
    let n: i64 = conn.query_row("SELECT COUNT(*) FROM tasks", [], |r| r.get(0))?;
    Ok(n.max(0) as u64)
}

/// Up to `limit` archivable tasks, oldest first: those last changed before
/// `cutoff_ms`, and beyond them (when `extra` > 0) up to `extra` more of the
/// oldest, whatever their age, to bring the database under its bound.
pub fn candidates(
    conn: &Connection,
    cutoff_ms: Option<i64>,
    extra: u64,
    limit: usize,
) -> Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT t.id, t.updated_ms FROM tasks t WHERE {ARCHIVABLE}
         ORDER BY t.updated_ms, t.id LIMIT ?1"
    ))?;
    let cutoff = cutoff_ms.unwrap_or(i64::MIN);
    let mut out = Vec::new();
    let mut extra = extra;
    let mut rows = stmt.query([limit as i64])?;
    while let Some(r) = rows.next()? {
        let (id, updated): (String, i64) = (r.get(0)?, r.get(1)?);
        if updated < cutoff {
            out.push(id);
        } else if extra > 0 {
            extra -= 1;
            out.push(id);
        } else {
            break;
        }
    }
    Ok(out)
}

/// Everything stored about a task, as one archive record; `None` when it is
/// gone. `updated_ms` comes back beside it (the record's time).
pub fn record(conn: &Connection, id: &str, now_ms: i64) -> Result<Option<(i64, Value)>> {
    let Some((head, task)) = tasks::load(conn, id, None, true)? else {
        return Ok(None);
    };
    let (origin, created_ms, updated_ms, peer_id, remote_id): (
        String,
        i64,
        i64,
        Option<String>,
        Option<String>,
    ) = conn
        .prepare_cached(
            "SELECT origin, created_ms, updated_ms, peer_id, remote_id FROM tasks WHERE id = ?1",
        )?
        .query_row([id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?;
    let turns = queue::turns_of_task(conn, id)?;
    let decisions = queue::decisions_of_task(conn, id)?;
    let (parent_hop, hops) = dispatch::links(conn, id)?;
    let push_configs = tasks::list_push_configs(conn, id, None, 1000)?;
    let state: TaskState = head.state;
    let rec = json!({
        "task": task,
        "agentId": head.agent_id,
        "owner": head.owner,
        "state": state.short_name(),
        "dialect": head.dialect,
        "origin": origin,
        "peerId": peer_id,
        "remoteId": remote_id,
        "createdAt": format_timestamp(created_ms),
        "updatedAt": format_timestamp(updated_ms),
        "archivedAt": format_timestamp(now_ms),
        "turns": turns,
        "decisions": decisions,
        "startedBy": parent_hop,
        "hops": hops,
        "pushConfigs": push_configs,
    });
    Ok(Some((updated_ms, rec)))
}

/// Deletes the tasks of `ids` that are still archivable, with everything
/// that hangs off them; returns the ids actually deleted.
pub fn delete(conn: &Connection, ids: &[String]) -> Result<Vec<String>> {
    let mut still = conn.prepare_cached(&format!(
        "SELECT 1 FROM tasks t WHERE t.id = ?1 AND {ARCHIVABLE}"
    ))?;
    let mut deleted = Vec::new();
    for id in ids {
        if !still.exists([id])? {
            continue;
        }
        conn.prepare_cached(
            "DELETE FROM turn_search WHERE turn_id IN (SELECT id FROM turns WHERE task_id = ?1)",
        )?
        .execute([id])?;
        conn.prepare_cached(
            "DELETE FROM outbox WHERE status != 'pending' AND (
                 ref_id = ?1
                 OR ref_id IN (SELECT id FROM decisions WHERE task_id = ?1)
                 OR ref_id IN (SELECT id FROM chain_hops WHERE parent_task_id = ?1))",
        )?
        .execute([id])?;
        conn.prepare_cached("DELETE FROM decisions WHERE task_id = ?1")?
            .execute([id])?;
        conn.prepare_cached("DELETE FROM chain_hops WHERE parent_task_id = ?1")?
            .execute([id])?;
        // Messages, artifacts, events, push configs and turns cascade.
        conn.prepare_cached("DELETE FROM tasks WHERE id = ?1")?
            .execute(params![id])?;
        deleted.push(id.clone());
    }
    Ok(deleted)
}
