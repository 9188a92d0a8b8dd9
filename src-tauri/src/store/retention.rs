//! Queries for retention: which finished tasks may leave the live database,
//! everything about one of them as one archive record, and their removal.
//!
//! A task may go only when nothing is still owed on it: it is in a terminal
//! state and not parked, or went on in a new task (see
//! [`super::peers::continue_in`]); it has no open turn, no decision waiting
//! to be delivered, no pending outbox item (push, decision or chain hop) and
//! no chain hop still gated or pending, as parent or child. A task another
//! task went on in waits for that one to go first, so that no link points
//! at a task that is gone; and a task that went on in a task still waiting
//! for the person stays while it waits, so that the person answering sees
//! what came before. The same condition is checked again in the
//! transaction that deletes it.

use rusqlite::{Connection, params_from_iter};
use serde_json::{Value, json};

use super::{Result, dispatch, queue, tasks};
use crate::a2a::types::{TaskState, format_timestamp};

/// The SQL condition (on `t`, a row of `tasks`) under which a task may be
/// archived. Its first line is the condition of the partial index
/// `tasks_by_time`, word for word, so that SQLite may walk that index.
const ARCHIVABLE: &str = "
    (t.state BETWEEN 3 AND 7 AND t.state <> 6 AND t.parked = 0 OR t.continued_in IS NOT NULL)
    AND NOT EXISTS (SELECT 1 FROM tasks c WHERE c.continued_in = t.id)
    AND NOT EXISTS (SELECT 1 FROM tasks n WHERE n.id = t.continued_in
                    AND n.parked = 1 AND n.continued_in IS NULL)
    AND NOT EXISTS (SELECT 1 FROM turns u WHERE u.task_id = t.id AND u.closed_ms IS NULL)
    AND NOT EXISTS (SELECT 1 FROM turns u JOIN decisions d ON d.turn_id = u.id
                    WHERE u.task_id = t.id AND d.delivery = 'pending')
    AND NOT EXISTS (SELECT 1 FROM chain_hops h WHERE h.parent_task_id = t.id
                    AND h.state IN ('gated', 'pending'))
    AND NOT EXISTS (SELECT 1 FROM chain_hops h WHERE h.child_task_id = t.id
                    AND h.state IN ('gated', 'pending'))
    AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.ref_id = t.id AND o.status = 'pending')
    AND NOT EXISTS (SELECT 1 FROM turns u JOIN decisions d ON d.turn_id = u.id
                    JOIN outbox o ON o.ref_id = d.id
                    WHERE u.task_id = t.id AND o.status = 'pending')
    AND NOT EXISTS (SELECT 1 FROM chain_hops h JOIN outbox o ON o.ref_id = h.id
                    WHERE h.parent_task_id = t.id AND o.status = 'pending')";

/// Archivable tasks last changed before `?1`, oldest first, at most `?2`.
/// Both this and [`oldest_sql`] repeat the condition of the partial index
/// `tasks_by_time`, so they walk it instead of the table.
pub(super) fn aged_sql() -> String {
    format!(
        "SELECT t.id, t.updated_ms FROM tasks t
         WHERE t.updated_ms < ?1 AND {ARCHIVABLE}
         ORDER BY t.updated_ms, t.id LIMIT ?2"
    )
}

/// The oldest archivable tasks, at most `?1`.
pub(super) fn oldest_sql() -> String {
    format!(
        "SELECT t.id, t.updated_ms FROM tasks t WHERE {ARCHIVABLE}
         ORDER BY t.updated_ms, t.id LIMIT ?1"
    )
}

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
    let ids = |sql: &str, args: &[i64]| -> Result<Vec<(String, i64)>> {
        let mut stmt = conn.prepare_cached(sql)?;
        let rows = stmt.query_map(params_from_iter(args), |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    };
    if extra == 0 {
        // Only age counts: the index on `updated_ms` stops the scan at the
        // cutoff, however many newer or parked tasks there are.
        let Some(cutoff) = cutoff_ms else {
            return Ok(Vec::new());
        };
        let rows = ids(&aged_sql(), &[cutoff, limit as i64])?;
        return Ok(rows.into_iter().map(|(id, _)| id).collect());
    }
    // Over the bound: the oldest archivable tasks, past the cutoff or not.
    let rows = ids(&oldest_sql(), &[limit as i64])?;
    let cutoff = cutoff_ms.unwrap_or(i64::MIN);
    let mut extra = extra;
    let mut out = Vec::new();
    for (id, updated) in rows {
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
    let super::peers::Continuation {
        continued_in,
        continues,
        ..
    } = super::peers::continuation(conn, id)?;
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
        "continuedIn": continued_in,
        "continues": continues,
    });
    Ok(Some((updated_ms, rec)))
}

/// The hops a [`record`] holds: the one that started its task and those the
/// task fired (none in a record from before records held them).
pub fn record_hops(rec: &Value) -> serde_json::Result<(Option<dispatch::Hop>, Vec<dispatch::Hop>)> {
    let field = |key: &str| rec.get(key).cloned().unwrap_or(Value::Null);
    let parent = serde_json::from_value(field("startedBy"))?;
    let children = match field("hops") {
        Value::Null => Vec::new(),
        hops => serde_json::from_value(hops)?,
    };
    Ok((parent, children))
}

/// Deletes the tasks of `ids` that are still archivable, with everything
/// that hangs off them; returns the ids actually deleted.
pub fn delete(conn: &Connection, ids: &[String]) -> Result<Vec<String>> {
    let mut still = conn.prepare_cached(&format!(
        "SELECT 1 FROM tasks t WHERE t.id = ?1 AND {ARCHIVABLE}"
    ))?;
    let mut deleted = Vec::new();
    for id in ids {
        if still.exists([id])? {
            deleted.push(id.clone());
        }
    }
    if deleted.is_empty() {
        return Ok(deleted);
    }
    // A turn's search entry shares its rowid.
    let marks = vec!["?"; deleted.len()].join(",");
    conn.prepare(&format!(
        "DELETE FROM turn_search WHERE rowid IN
             (SELECT rowid FROM turns WHERE task_id IN ({marks}))"
    ))?
    .execute(params_from_iter(deleted.iter()))?;
    for id in &deleted {
        // What was delivered (or given up) for it, by push, decision or hop.
        conn.prepare_cached("DELETE FROM outbox WHERE ref_id = ?1 AND status != 'pending'")?
            .execute([id])?;
        conn.prepare_cached(
            "DELETE FROM outbox WHERE status != 'pending' AND ref_id IN (
                 SELECT d.id FROM turns u JOIN decisions d ON d.turn_id = u.id WHERE u.task_id = ?1
                 UNION ALL SELECT h.id FROM chain_hops h WHERE h.parent_task_id = ?1)",
        )?
        .execute([id])?;
        // With what hangs off it: foreign keys are not enforced, so
        // nothing cascades (see `open_connection`).
        for sql in [
            "DELETE FROM decisions WHERE turn_id IN (SELECT id FROM turns WHERE task_id = ?1)",
            "DELETE FROM turns WHERE task_id = ?1",
            "DELETE FROM messages WHERE task_id = ?1",
            "DELETE FROM artifacts WHERE task_id = ?1",
            "DELETE FROM push_configs WHERE task_id = ?1",
            "DELETE FROM tasks WHERE id = ?1",
        ] {
            conn.prepare_cached(sql)?.execute([id])?;
        }
        // Its hops go once no task here is left on either end: while the
        // other end stays, the hop is its link to this task (in the
        // archive now) and, for a child, the lineage loop protection
        // reads.
        conn.prepare_cached(
            "DELETE FROM chain_hops
             WHERE (parent_task_id = ?1
                    AND (child_task_id IS NULL
                         OR NOT EXISTS (SELECT 1 FROM tasks c WHERE c.id = child_task_id)))
                OR (child_task_id = ?1
                    AND NOT EXISTS (SELECT 1 FROM tasks p WHERE p.id = parent_task_id))",
        )?
        .execute([id])?;
    }
    super::queue::marks_after_delete(conn)?;
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::super::schema::migrated;
    use super::*;
    use rusqlite::params;

    fn task(c: &Connection, id: &str, state: i64, updated_ms: i64, continued_in: Option<&str>) {
        c.execute(
            "INSERT INTO tasks (id, agent_id, owner, context_id, state, status, parked,
                                created_ms, updated_ms, continued_in)
             VALUES (?1, 'a', 'o', 'ctx', ?2, '{}', ?3, 1, ?4, ?5)",
            params![id, state, matches!(state, 6 | 8), updated_ms, continued_in],
        )
        .unwrap();
    }

    /// A hop outlives its archived end while a task here is on its other
    /// end: a child keeps its link to its parent, and its lineage, so loop
    /// protection still sees the rules that led to it. Once neither end is
    /// here, the hop goes.
    #[test]
    fn hops_stay_while_one_end_is_here() {
        let (_dir, c) = migrated();
        for (id, at) in [("t1", 10), ("t2", 20), ("t3", 30)] {
            task(&c, id, 3, at, None);
        }
        c.execute_batch(
            "INSERT INTO chain_hops (id, rule_id, parent_task_id, trigger_state, child_task_id,
                                     depth, state, created_ms, updated_ms, lineage)
                 VALUES ('h1', 'r1', 't1', 'completed', 't2', 1, 'delivered', 1, 1, '[]'),
                        ('h2', 'r2', 't2', 'completed', 't3', 2, 'delivered', 2, 2, '[\"r1\"]'),
                        ('push', 'p', 't1', 'completed', NULL, 1, 'delivered', 3, 3, '[]');",
        )
        .unwrap();
        let hops = |c: &Connection| -> Vec<String> {
            c.prepare("SELECT id FROM chain_hops ORDER BY id")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
        };
        // The middle task goes: both its hops link tasks still here.
        assert_eq!(delete(&c, &["t2".to_owned()]).unwrap(), ["t2"]);
        assert_eq!(hops(&c), ["h1", "h2", "push"]);
        // The first goes too: its push hop and the hop between the two
        // archived tasks go; the last task keeps the hop that started it.
        assert_eq!(delete(&c, &["t1".to_owned()]).unwrap(), ["t1"]);
        assert_eq!(hops(&c), ["h2"]);
        let (parent, _) = dispatch::links(&c, "t3").unwrap();
        assert_eq!(parent.unwrap().parent_task_id, "t2");
        assert_eq!(dispatch::ancestry(&c, "t3").unwrap(), ["r2", "r1"]);
        // The last one goes: nothing links anything here any more.
        assert_eq!(delete(&c, &["t3".to_owned()]).unwrap(), ["t3"]);
        assert!(hops(&c).is_empty());
    }

    /// Foreign keys are not enforced, so nothing cascades: a deleted task
    /// takes its messages, artifacts, push configs, turns and their
    /// decisions with it, and leaves every other task's alone.
    #[test]
    fn a_deleted_task_leaves_nothing_behind() {
        let (_dir, c) = migrated();
        // As the store's connections are (SQLite here enforces them unless
        // told not to).
        c.pragma_update(None, "foreign_keys", false).unwrap();
        for (id, at) in [("gone", 10), ("kept", 20)] {
            task(&c, id, 3, at, None);
            c.execute_batch(&format!(
                "INSERT INTO messages (task_id, seq, message_id, body) VALUES ('{id}', 1, 'm', '{{}}');
                 INSERT INTO artifacts (task_id, artifact_id, ord, body) VALUES ('{id}', 'a', 0, '{{}}');
                 INSERT INTO push_configs (task_id, id, body, created_ms) VALUES ('{id}', 'p', '{{}}', 1);
                 INSERT INTO turns (id, task_id, agent_id, source, state, preview, opened_ms, closed_ms)
                     VALUES ('u-{id}', '{id}', 'a', 'served', 6, 'ask', 1, 2);
                 INSERT INTO decisions (id, turn_id, task_id, agent_id, kind, payload, actor,
                                        created_ms, delivery)
                     VALUES ('d-{id}', 'u-{id}', '{id}', 'a', 'approve', '{{}}', 'me', 2, 'delivered');"
            ))
            .unwrap();
        }
        assert_eq!(delete(&c, &["gone".to_owned()]).unwrap(), ["gone"]);
        for table in [
            "tasks",
            "messages",
            "artifacts",
            "push_configs",
            "turns",
            "decisions",
        ] {
            let tasks: Vec<String> = c
                .prepare(&format!(
                    "SELECT {} FROM {table}",
                    if table == "tasks" { "id" } else { "task_id" }
                ))
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            assert_eq!(tasks, ["kept"], "{table}");
        }
        let orphans = c
            .prepare("PRAGMA foreign_key_check")
            .unwrap()
            .query_map([], |r| r.get::<_, String>(0))
            .unwrap()
            .count();
        assert_eq!(orphans, 0);
    }

    /// A re-read or a send that a task's mirror delivered refers to that
    /// task from then on, and goes with it; a dead letter stays.
    #[test]
    fn what_a_mirror_delivered_goes_with_it() {
        use crate::store::peers::{self, OutboxItem};
        let (_dir, c) = migrated();
        task(&c, "t1", 3, 10, None);
        for (id, kind, about) in [
            ("reread:1", "reread", "remote-1"),
            ("start:1", "start", "message-1"),
            ("reread:2", "reread", "remote-2"),
        ] {
            let item = OutboxItem::due_now(id.into(), kind, about.into(), Value::Null, 1);
            peers::enqueue(&c, &item).unwrap();
        }
        peers::delivered_with(&c, "reread:1", "t1", 5).unwrap();
        peers::delivered_with(&c, "start:1", "t1", 6).unwrap();
        peers::record_attempt(&c, "reread:2", "failed", Some("gone"), 7, 7).unwrap();
        assert_eq!(delete(&c, &["t1".to_owned()]).unwrap(), ["t1"]);
        let left: Vec<String> = c
            .prepare("SELECT id FROM outbox ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(left, ["reread:2"]);
    }

    /// A task its peer left asking but that went on in a new task is
    /// archived like a finished one, and always before the task it went
    /// on in, even when that one is older.
    #[test]
    fn a_continued_task_is_archived_and_before_its_continuation() {
        let (_dir, c) = migrated();
        task(&c, "next", 3, 10, None);
        task(&c, "asked", 6, 20, Some("next"));
        task(&c, "waiting", 6, 5, None);
        let ids = |c: &Connection| candidates(c, Some(100), 0, 10).unwrap();
        assert_eq!(ids(&c), ["asked"]);
        // Over the bound, the oldest first: still not the continuation.
        assert_eq!(candidates(&c, None, 3, 10).unwrap(), ["asked"]);
        // Asked in the other order, the deletion keeps the same rule.
        let gone = delete(&c, &["next".to_owned(), "asked".to_owned()]).unwrap();
        assert_eq!(gone, ["asked"]);
        assert_eq!(ids(&c), ["next"]);
        assert_eq!(delete(&c, &ids(&c)).unwrap(), ["next"]);
        // A task asking, not continued, stays.
        assert!(ids(&c).is_empty());
        assert_eq!(task_count(&c).unwrap(), 1);
    }

    /// While the task it went on in waits for the person, a continued task
    /// stays (the person answering reads what came before); once that one
    /// is answered, or goes on in turn, it may go.
    #[test]
    fn a_continued_task_stays_while_its_continuation_waits() {
        let (_dir, c) = migrated();
        task(&c, "first", 6, 10, Some("second"));
        task(&c, "second", 6, 20, None);
        let ids = |c: &Connection| candidates(c, Some(100), 0, 10).unwrap();
        assert!(ids(&c).is_empty());
        assert!(candidates(&c, None, 2, 10).unwrap().is_empty());
        // The second goes on in a third, which waits in its turn.
        task(&c, "third", 6, 30, None);
        c.execute(
            "UPDATE tasks SET continued_in = 'third' WHERE id = 'second'",
            [],
        )
        .unwrap();
        assert_eq!(ids(&c), ["first"]);
        assert_eq!(delete(&c, &ids(&c)).unwrap(), ["first"]);
        assert!(ids(&c).is_empty(), "the second stays while the third waits");
        c.execute(
            "UPDATE tasks SET state = 3, parked = 0 WHERE id = 'third'",
            [],
        )
        .unwrap();
        assert_eq!(ids(&c), ["second"]);
    }
}
