//! Numbered migrations. Each runs once, in order, in its own transaction;
//! `PRAGMA user_version` records how far a database has come.

use std::path::Path;

use rusqlite::Connection;

use super::{Error, Result};

/// One migration: SQL, or code for what SQL cannot say. Either runs in the
/// migration's transaction.
enum Step {
    Sql(&'static str),
    Code(fn(&Connection) -> Result<()>),
}

use Step::{Code, Sql};

impl Step {
    fn run(&self, conn: &Connection) -> Result<()> {
        match self {
            Sql(sql) => Ok(conn.execute_batch(sql)?),
            Code(step) => step(conn),
        }
    }
}

/// The migrations, oldest first. Never edit one that has shipped: add another.
const MIGRATIONS: &[Step] = &[
    // 1: tasks, their history, artifacts, push configs, and the event log that
    // lets streams and (later) push delivery replay what happened.
    Sql("CREATE TABLE tasks (
        id          TEXT PRIMARY KEY,
        agent_id    TEXT NOT NULL,
        owner       TEXT NOT NULL,
        context_id  TEXT NOT NULL,
        state       INTEGER NOT NULL,
        status      TEXT NOT NULL,
        metadata    TEXT,
        origin      TEXT NOT NULL DEFAULT 'served',
        parked      INTEGER NOT NULL DEFAULT 0,
        created_ms  INTEGER NOT NULL,
        updated_ms  INTEGER NOT NULL,
        last_seq    INTEGER NOT NULL DEFAULT 0,
        history_len INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX tasks_by_owner ON tasks(agent_id, owner, updated_ms DESC, id DESC);
    CREATE INDEX tasks_by_context ON tasks(agent_id, owner, context_id, updated_ms DESC, id DESC);
    CREATE INDEX tasks_parked ON tasks(updated_ms) WHERE parked = 1;
    CREATE TABLE messages (
        task_id     TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        seq         INTEGER NOT NULL,
        message_id  TEXT NOT NULL,
        body        TEXT NOT NULL,
        PRIMARY KEY (task_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE artifacts (
        task_id     TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        artifact_id TEXT NOT NULL,
        ord         INTEGER NOT NULL,
        body        TEXT NOT NULL,
        PRIMARY KEY (task_id, artifact_id)
    ) WITHOUT ROWID;
    CREATE TABLE push_configs (
        task_id     TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        id          TEXT NOT NULL,
        body        TEXT NOT NULL,
        created_ms  INTEGER NOT NULL,
        PRIMARY KEY (task_id, id)
    ) WITHOUT ROWID;
    CREATE TABLE events (
        task_id     TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        seq         INTEGER NOT NULL,
        body        TEXT NOT NULL,
        created_ms  INTEGER NOT NULL,
        PRIMARY KEY (task_id, seq)
    ) WITHOUT ROWID;"),
    // 2: the dialect a task was created in (`v1`, `v0.3`, `legacy`), so that
    // methods both old dialects share (`tasks/get`) answer in the right shape.
    Sql("ALTER TABLE tasks ADD COLUMN dialect TEXT NOT NULL DEFAULT 'v1';"),
    // 3: the approval queue. Each time a task is parked (enters
    // input-required or auth-required) a turn opens; a person decides a turn
    // at most once (UNIQUE turn_id). `turn_search` indexes the text people
    // search for (the request's first line, later the decision).
    Sql("CREATE TABLE turns (
        id          TEXT PRIMARY KEY,
        task_id     TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        agent_id    TEXT NOT NULL,
        source      TEXT NOT NULL,
        state       INTEGER NOT NULL,
        preview     TEXT NOT NULL,
        opened_ms   INTEGER NOT NULL,
        closed_ms   INTEGER,
        outcome     TEXT
    );
    CREATE INDEX turns_open ON turns(opened_ms) WHERE closed_ms IS NULL;
    CREATE INDEX turns_open_by_agent ON turns(agent_id, opened_ms) WHERE closed_ms IS NULL;
    CREATE INDEX turns_by_task ON turns(task_id, opened_ms);
    CREATE TABLE decisions (
        id           TEXT PRIMARY KEY,
        turn_id      TEXT NOT NULL UNIQUE REFERENCES turns(id) ON DELETE CASCADE,
        task_id      TEXT NOT NULL,
        agent_id     TEXT NOT NULL,
        kind         TEXT NOT NULL,
        payload      TEXT NOT NULL,
        actor        TEXT NOT NULL,
        created_ms   INTEGER NOT NULL,
        delivery     TEXT NOT NULL,
        delivery_error TEXT,
        delivered_ms INTEGER
    );
    CREATE INDEX decisions_by_time ON decisions(created_ms);
    CREATE INDEX decisions_by_agent ON decisions(agent_id, created_ms);
    CREATE INDEX decisions_pending ON decisions(created_ms) WHERE delivery = 'pending';
    CREATE VIRTUAL TABLE turn_search USING fts5(turn_id UNINDEXED, text);
    CREATE INDEX tasks_by_time ON tasks(updated_ms);"),
    // 4: peers (remote agents we talk to as a client), webhook subscriptions,
    // the link from a watched task to its task on the peer, and the outbox of
    // calls owed to peers (decisions to deliver).
    Sql("CREATE TABLE peers (
        id          TEXT PRIMARY KEY,
        url         TEXT NOT NULL,
        name        TEXT,
        auth        TEXT NOT NULL DEFAULT '{}',
        reject_with TEXT NOT NULL DEFAULT 'message',
        decision_format TEXT NOT NULL DEFAULT 'parts',
        card        TEXT,
        card_ms     INTEGER,
        from_config INTEGER NOT NULL DEFAULT 0,
        created_ms  INTEGER NOT NULL
    );
    CREATE TABLE subscriptions (
        id          TEXT PRIMARY KEY,
        peer_id     TEXT NOT NULL,
        token       TEXT NOT NULL,
        created_ms  INTEGER NOT NULL
    );
    ALTER TABLE tasks ADD COLUMN peer_id TEXT;
    ALTER TABLE tasks ADD COLUMN remote_id TEXT;
    ALTER TABLE tasks ADD COLUMN subscription_id TEXT;
    CREATE UNIQUE INDEX tasks_by_remote ON tasks(peer_id, remote_id) WHERE peer_id IS NOT NULL;
    CREATE INDEX tasks_linked_open ON tasks(updated_ms) WHERE peer_id IS NOT NULL AND state NOT IN (3, 4, 5, 7);
    CREATE TABLE outbox (
        id          TEXT PRIMARY KEY,
        kind        TEXT NOT NULL,
        ref_id      TEXT NOT NULL,
        peer_id     TEXT,
        body        TEXT NOT NULL,
        attempts    INTEGER NOT NULL DEFAULT 0,
        next_ms     INTEGER NOT NULL,
        status      TEXT NOT NULL,
        last_error  TEXT,
        created_ms  INTEGER NOT NULL,
        done_ms     INTEGER
    );
    CREATE INDEX outbox_due ON outbox(next_ms) WHERE status = 'pending';"),
    // 5: push notifications to callers and chain rules. A push config
    // remembers the dialect it was set in (its notifications' shape); outbox
    // items that must arrive in order share an `order_key` (one task and
    // config) and go out in rowid order; chain rules and their hops (one per
    // rule, task and state), with the link from a hop to the task it started.
    Sql("ALTER TABLE push_configs ADD COLUMN dialect TEXT NOT NULL DEFAULT 'v1';
    ALTER TABLE outbox ADD COLUMN order_key TEXT;
    CREATE INDEX outbox_order ON outbox(order_key) WHERE status = 'pending' AND order_key IS NOT NULL;
    CREATE INDEX outbox_by_time ON outbox(created_ms);
    CREATE TABLE chain_rules (
        id          TEXT PRIMARY KEY,
        source      TEXT NOT NULL,
        agent_id    TEXT,
        peer_id     TEXT,
        body        TEXT NOT NULL,
        created_ms  INTEGER NOT NULL,
        updated_ms  INTEGER NOT NULL
    );
    CREATE INDEX chain_rules_by_agent ON chain_rules(agent_id);
    CREATE INDEX chain_rules_by_peer ON chain_rules(peer_id);
    CREATE TABLE chain_hops (
        id              TEXT PRIMARY KEY,
        rule_id         TEXT NOT NULL,
        parent_task_id  TEXT NOT NULL,
        trigger_state   TEXT NOT NULL,
        child_task_id   TEXT,
        depth           INTEGER NOT NULL,
        state           TEXT NOT NULL,
        reason          TEXT,
        created_ms      INTEGER NOT NULL,
        updated_ms      INTEGER NOT NULL,
        UNIQUE (rule_id, parent_task_id, trigger_state)
    );
    CREATE INDEX chain_hops_by_parent ON chain_hops(parent_task_id);
    CREATE INDEX chain_hops_by_child ON chain_hops(child_task_id) WHERE child_task_id IS NOT NULL;
    CREATE INDEX chain_hops_by_time ON chain_hops(created_ms);"),
    // 6: retention finds what the outbox still owes on a task, and deletes
    // what it delivered, by the id the item is about.
    Sql("CREATE INDEX outbox_by_ref ON outbox(ref_id);"),
    // 7: a peer's pinned card fingerprint (identity, skills, auth schemes,
    // signing key) and, while a fetched card differs from it and nobody has
    // accepted the change, what changed (the peer's work is held meanwhile).
    Sql("ALTER TABLE peers ADD COLUMN pin TEXT;
    ALTER TABLE peers ADD COLUMN pin_change TEXT;"),
    // 8: a turn's search entry shares the turn's rowid, so a decision finds
    // its entry by rowid (`turn_id` is unindexed: it scanned the index).
    Sql("CREATE TEMP TABLE search_copy AS SELECT turn_id, text FROM turn_search;
    DELETE FROM turn_search;
    INSERT INTO turn_search (rowid, turn_id, text)
        SELECT t.rowid, c.turn_id, c.text FROM temp.search_copy c JOIN turns t ON t.id = c.turn_id;
    DROP TABLE temp.search_copy;"),
    // 9: no query reads parked tasks by time (the queue reads open turns),
    // yet every task that parks or unparks rewrote this index.
    Sql("DROP INDEX tasks_parked;"),
    // Events are counted (tasks.last_seq), not stored: nothing read this
    // log, and it was a third of what a new task wrote.
    Sql("DROP TABLE events;"),
    // 11: retention reads tasks by time only among those it may archive
    // (finished, not parked), so only those are indexed by time: a task
    // that parks or works writes no entry until it finishes. Finished is
    // written as a range (states 3, 4, 5 and 7), not an IN list: SQLite
    // builds a temporary table for the list on every insert or update of
    // a row it must test, which made a new task's insert cost more than
    // the index entry it saved. The index of open linked tasks had the
    // same list, tested on every watched task's write.
    Sql("DROP INDEX tasks_by_time;
    CREATE INDEX tasks_by_time ON tasks(updated_ms)
        WHERE state BETWEEN 3 AND 7 AND state <> 6 AND parked = 0;
    DROP INDEX tasks_linked_open;
    CREATE INDEX tasks_linked_open ON tasks(updated_ms)
        WHERE peer_id IS NOT NULL AND (state < 3 OR state = 6 OR state > 7);"),
    // 12: previews stored before they dropped markdown are stored without it
    // (they were cleaned on every read instead, and a second cleaning can
    // change text: `a \*b\* c` is stored as `a *b* c`).
    Code(plain_previews),
    // 13: recent tasks of every agent (`GET /api/tasks`, `countersign
    // tasks`) are read newest first; with no index over every task's time
    // each page scanned and sorted the whole table (14 ms at 20,000 tasks).
    // The entry costs a new task about 1% of its write.
    Sql("CREATE INDEX tasks_recent ON tasks(updated_ms);"),
    // 14: a watched task a peer answered a decision on with a new task (a
    // peer that starts a task per message) goes on in that task: it is
    // neither swept nor followed any more, and each shows the other.
    Sql("ALTER TABLE tasks ADD COLUMN continued_in TEXT;
    CREATE INDEX tasks_continuing ON tasks(continued_in) WHERE continued_in IS NOT NULL;"),
    // 15: a task that went on in a new task is done with here, though its
    // peer leaves it asking for ever, so retention archives it like a
    // finished one (it stayed for ever before): it joins the index
    // retention walks.
    Sql("DROP INDEX tasks_by_time;
    CREATE INDEX tasks_by_time ON tasks(updated_ms)
        WHERE (state BETWEEN 3 AND 7 AND state <> 6 AND parked = 0 OR continued_in IS NOT NULL);"),
    // 16: the task a peer answered with keeps the id of the task it
    // continues on its own row, so the link survives that task's archiving
    // (it was read from the old task's row, and went with it).
    Sql("ALTER TABLE tasks ADD COLUMN continues TEXT;
    UPDATE tasks SET continues =
        (SELECT o.id FROM tasks o WHERE o.continued_in = tasks.id ORDER BY o.updated_ms, o.id LIMIT 1)
        WHERE id IN (SELECT continued_in FROM tasks WHERE continued_in IS NOT NULL);"),
    // 17: each chain hop keeps the rule ids that led to its parent task, so
    // loop protection reads a task's ancestry from the hop that started it
    // alone: it walked the hops up through every ancestor, and retention,
    // deleting an archived ancestor's hops, cut the walk short (a loop
    // whose old tasks were archived ran on).
    Code(super::dispatch::backfill_lineage),
    // 18: parked turns join the full-text index in groups, not at each
    // commit (see `queue::SEARCH_BACKLOG`); those after the mark wait.
    // Every turn stored so far was indexed as it committed. The index
    // keeps no copy of its text (the turn's preview and its decision's
    // text are in `turns` and `decisions`; searches read only rowids,
    // which stay): writing it was a sixth of indexing a turn. It still
    // keeps each entry's length, which deleting an entry needs.
    Sql("CREATE TABLE search_mark (
        only       INTEGER PRIMARY KEY CHECK (only = 1),
        turn_rowid INTEGER NOT NULL
    );
    INSERT INTO search_mark (only, turn_rowid) SELECT 1, coalesce(max(rowid), 0) FROM turns;
    CREATE VIRTUAL TABLE turn_search_18 USING fts5(
        text, content = '', contentless_delete = 1);
    INSERT INTO turn_search_18 (rowid, text) SELECT rowid, text FROM turn_search;
    DROP TABLE turn_search;
    ALTER TABLE turn_search_18 RENAME TO turn_search;"),
    // 19: a page of one state's recent tasks tests each task's state on
    // the index it walks; it read every task's row for it (45 ms at
    // 100,000 tasks for a state none of them was in). A task's entry
    // moves whenever its time changes, and its state rarely changes
    // within the same millisecond, so keeping the state there costs a
    // byte an entry.
    Sql("DROP INDEX tasks_recent;
    CREATE INDEX tasks_recent ON tasks(updated_ms, state);"),
    // 20: how many turns are open, per agent and state, kept in the
    // transaction that opens, closes or deletes a turn. A queue page counted
    // the open turns' index twice (12.8 ms at 100,000), and under a stream
    // of parked tasks every commit made its counts stale: pages waited on
    // one another's counts (p50 over 200 ms with 16 readers and 16 senders
    // at 190,000 parked). Closing and deleting are counted by triggers. Opening
    // is counted by the one statement that opens turns
    // (`queue::move_turns`): a trigger on that insert made SQLite keep a
    // statement journal for it, a sixth more work for a parked task. Rows
    // whose count fell to 0 stay (a handful per agent); readers skip them.
    Sql("CREATE TABLE open_turns (
        agent_id TEXT NOT NULL,
        state    INTEGER NOT NULL,
        n        INTEGER NOT NULL,
        PRIMARY KEY (agent_id, state)
    ) WITHOUT ROWID;
    INSERT INTO open_turns (agent_id, state, n)
        SELECT agent_id, state, count(*) FROM turns WHERE closed_ms IS NULL
        GROUP BY agent_id, state;
    CREATE TRIGGER turn_leaves AFTER UPDATE OF closed_ms, agent_id, state ON turns
        WHEN OLD.closed_ms IS NULL BEGIN
        UPDATE open_turns SET n = n - 1 WHERE agent_id = OLD.agent_id AND state = OLD.state;
    END;
    CREATE TRIGGER turn_joins AFTER UPDATE OF closed_ms, agent_id, state ON turns
        WHEN NEW.closed_ms IS NULL BEGIN
        INSERT INTO open_turns (agent_id, state, n) VALUES (NEW.agent_id, NEW.state, 1)
            ON CONFLICT (agent_id, state) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER turn_goes AFTER DELETE ON turns WHEN OLD.closed_ms IS NULL BEGIN
        UPDATE open_turns SET n = n - 1 WHERE agent_id = OLD.agent_id AND state = OLD.state;
    END;"),
    // 21: a task's listing entries in ascending order. Descending, every
    // new task of an agent went to the left edge of its group, and a page
    // split there leaves both halves half full: `tasks_by_owner` took 622
    // pages at 20,000 tasks of one agent, 359 ascending, where new entries
    // append. SQLite walks an index backwards for the newest-first pages
    // at no cost (no sort), and each parked task writes 1.5% less.
    // From this version on, messages and statuses may also be stored in
    // short forms (`tasks::stored_tail`, `tasks::stored_status`) that
    // older builds cannot read; the version keeps them from opening it.
    Sql("DROP INDEX tasks_by_owner;
    CREATE INDEX tasks_by_owner ON tasks(agent_id, owner, updated_ms, id);
    DROP INDEX tasks_by_context;
    CREATE INDEX tasks_by_context ON tasks(agent_id, owner, context_id, updated_ms, id);"),
    // 22: the turns a transaction opens are counted once, just before the
    // writer commits (`queue::count_new_turns`: the open turns past
    // `count_mark`), not each by an upsert of the same row as it opens
    // (3% of a parked task's cost). The triggers leave the turns past the
    // mark alone: not counted yet, they are counted as they are then.
    Sql("CREATE TABLE count_mark (
        only       INTEGER PRIMARY KEY CHECK (only = 1),
        turn_rowid INTEGER NOT NULL
    );
    INSERT INTO count_mark (only, turn_rowid) SELECT 1, coalesce(max(rowid), 0) FROM turns;
    DROP TRIGGER turn_leaves;
    DROP TRIGGER turn_joins;
    DROP TRIGGER turn_goes;
    CREATE TRIGGER turn_leaves AFTER UPDATE OF closed_ms, agent_id, state ON turns
        WHEN OLD.closed_ms IS NULL AND OLD.rowid <= (SELECT turn_rowid FROM count_mark) BEGIN
        UPDATE open_turns SET n = n - 1 WHERE agent_id = OLD.agent_id AND state = OLD.state;
    END;
    CREATE TRIGGER turn_joins AFTER UPDATE OF closed_ms, agent_id, state ON turns
        WHEN NEW.closed_ms IS NULL AND NEW.rowid <= (SELECT turn_rowid FROM count_mark) BEGIN
        INSERT INTO open_turns (agent_id, state, n) VALUES (NEW.agent_id, NEW.state, 1)
            ON CONFLICT (agent_id, state) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER turn_goes AFTER DELETE ON turns
        WHEN OLD.closed_ms IS NULL AND OLD.rowid <= (SELECT turn_rowid FROM count_mark) BEGIN
        UPDATE open_turns SET n = n - 1 WHERE agent_id = OLD.agent_id AND state = OLD.state;
    END;"),
    // 23: a delivered re-read refers to the task it mirrored, as it does
    // from now on (`peers::delivered_with`), so retention deletes it with
    // that task; it referred to the peer's id of the task, which retention
    // never matched, so every one stayed for ever. Those whose task is
    // gone already go now.
    Sql("UPDATE outbox SET ref_id =
        (SELECT t.id FROM tasks t WHERE t.peer_id = outbox.peer_id AND t.remote_id = outbox.ref_id)
        WHERE kind = 'reread' AND status = 'delivered'
          AND EXISTS (SELECT 1 FROM tasks t WHERE t.peer_id = outbox.peer_id AND t.remote_id = outbox.ref_id);
    DELETE FROM outbox WHERE kind = 'reread' AND status = 'delivered'
        AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = outbox.ref_id);"),
    // 24: the messages a task is created with are kept in its row
    // (`tasks::head_text`); those added later go to `messages`, numbered on
    // from them. A row each, in a second b-tree, was about a tenth of a
    // durable SendMessage (the caller's message and the question asked).
    Sql("ALTER TABLE tasks ADD COLUMN head TEXT;"),
    // 25: when the message of a `start` or `chain` item last went to its
    // peer (`peers::mark_sent`): after a stop cut its answer off, the peer
    // may still be taking it until its call would have timed out, and the
    // message is not sent again before then.
    Sql("ALTER TABLE outbox ADD COLUMN sent_ms INTEGER;"),
];

/// Migration 12: each stored preview as [`super::queue::text_preview`]
/// would write it from its line.
fn plain_previews(conn: &Connection) -> Result<()> {
    let changed = {
        let mut read = conn.prepare("SELECT rowid, preview FROM turns")?;
        let rows = read.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
        let mut changed = Vec::new();
        for row in rows {
            let (rowid, stored) = row?;
            if let Some(plain) = super::queue::plain_stored_preview(&stored) {
                changed.push((rowid, plain));
            }
        }
        changed
    };
    let mut write = conn.prepare("UPDATE turns SET preview = ?2 WHERE rowid = ?1")?;
    for (rowid, plain) in changed {
        write.execute(rusqlite::params![rowid, plain])?;
    }
    Ok(())
}

/// Brings the database up to the newest schema.
pub fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    let current: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let known = MIGRATIONS.len() as i64;
    if current > known {
        return Err(Error::TooNew(path.to_path_buf(), current, known));
    }
    for (i, step) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let tx = conn.transaction()?;
        step.run(&tx)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}

/// Open turns per agent and state, as kept in `open_turns` (`kept`) or
/// counted from the turns: `(agent, state, count)` above 0, in order.
#[cfg(test)]
pub(super) fn open_turn_counts(conn: &Connection, kept: bool) -> Vec<(String, i64, i64)> {
    let sql = if kept {
        "SELECT agent_id, state, n FROM open_turns WHERE n > 0 ORDER BY 1, 2"
    } else {
        "SELECT agent_id, state, count(*) FROM turns WHERE closed_ms IS NULL
             GROUP BY 1, 2 ORDER BY 1, 2"
    };
    conn.prepare(sql)
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// A database file with every migration applied, for tests (it lives as
/// long as the returned directory).
#[cfg(test)]
pub(super) fn migrated() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let mut conn = Connection::open(&path).unwrap();
    migrate(&mut conn, &path).unwrap();
    (dir, conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database file migrated up to `version` (the data dir stays alive
    /// with the returned guard).
    fn at_version(version: usize) -> (tempfile::TempDir, std::path::PathBuf, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let c = Connection::open(&path).unwrap();
        for step in &MIGRATIONS[..version] {
            step.run(&c).unwrap();
        }
        c.pragma_update(None, "user_version", version as i64)
            .unwrap();
        (dir, path, c)
    }

    /// Migration 8 moves each search entry to its turn's rowid, keeping
    /// every entry and its text.
    #[test]
    fn search_entries_move_to_their_turns_rowids() {
        let (_dir, _path, c) = at_version(7);
        c.execute_batch(
            "INSERT INTO tasks (id, agent_id, owner, context_id, state, status, created_ms, updated_ms)
                 VALUES ('t', 'a', 'o', 'c', 6, '{}', 1, 1);
             INSERT INTO turns (id, task_id, agent_id, source, state, preview, opened_ms)
                 VALUES ('u1', 't', 'a', 'served', 6, 'pay the invoice', 1),
                        ('u2', 't', 'a', 'served', 6, 'restart servers', 2);
             -- Out of step with the turns, as the index used to be.
             INSERT INTO turn_search (rowid, turn_id, text)
                 VALUES (40, 'u2', 'restart servers approved'), (41, 'u1', 'pay the invoice');",
        )
        .unwrap();
        MIGRATIONS[7].run(&c).unwrap();
        let rows: Vec<(String, String, bool)> = c
            .prepare(
                "SELECT s.turn_id, s.text, s.rowid = t.rowid FROM turn_search s
                 JOIN turns t ON t.id = s.turn_id ORDER BY s.turn_id",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            rows,
            [
                ("u1".to_owned(), "pay the invoice".to_owned(), true),
                ("u2".to_owned(), "restart servers approved".to_owned(), true),
            ]
        );
        let hit: String = c
            .query_row(
                "SELECT turn_id FROM turn_search WHERE turn_search MATCH 'approved'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(hit, "u2");
    }

    #[test]
    fn the_event_log_goes_and_tasks_stay() {
        let (_dir, path, mut c) = at_version(9);
        c.execute_batch(
            "INSERT INTO tasks (id, agent_id, owner, context_id, state, status, created_ms, updated_ms, last_seq)
                 VALUES ('t', 'a', 'o', 'c', 6, '{}', 1, 1, 2);
             INSERT INTO events (task_id, seq, body, created_ms) VALUES ('t', 1, '{}', 1), ('t', 2, '{}', 1);",
        )
        .unwrap();
        migrate(&mut c, &path).unwrap();
        let events: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'events'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(events, 0);
        let seq: i64 = c
            .query_row("SELECT last_seq FROM tasks WHERE id = 't'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(seq, 2, "the task keeps counting its events");
    }

    /// Migration 12 stores each preview without the markdown it was
    /// stored with, and leaves the rest as they were.
    #[test]
    fn stored_previews_lose_their_markdown() {
        let (_dir, path, mut c) = at_version(11);
        // Turns alone, without their tasks.
        c.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        let long = format!("**{}**", "x".repeat(300));
        let cases = [
            ("u1", "# Release plan", "Release plan".to_owned()),
            ("u2", "> - Rotate the keys?", "Rotate the keys?".to_owned()),
            ("u3", "Plain already", "Plain already".to_owned()),
            ("u4", "(file part)", "(file part)".to_owned()),
            ("u5", "```", "```".to_owned()),
            ("u6", "Ship **v3**?", "Ship v3?".to_owned()),
            ("u7", &long, "x".repeat(200)),
        ];
        for (id, stored, _) in &cases {
            c.execute(
                "INSERT INTO turns (id, task_id, agent_id, source, state, preview, opened_ms)
                 VALUES (?1, 't', 'inbox', 'served', 6, ?2, 1)",
                [id, stored],
            )
            .unwrap();
        }
        migrate(&mut c, &path).unwrap();
        for (id, stored, plain) in &cases {
            let read = super::super::queue::turn(&c, id).unwrap().unwrap().preview;
            assert_eq!(&read, plain, "{stored:?}");
        }
    }

    /// Migration 16 gives each task a peer answered with the id of the
    /// task it continues, read from that task's `continued_in`.
    #[test]
    fn continuations_keep_their_link_on_their_own_row() {
        let (_dir, path, mut c) = at_version(15);
        c.execute_batch(
            "INSERT INTO tasks (id, agent_id, owner, context_id, state, status, created_ms,
                                updated_ms, continued_in)
                 VALUES ('old', 'a', 'o', 'c', 6, '{}', 1, 1, 'new'),
                        ('new', 'a', 'o', 'c', 6, '{}', 2, 2, NULL),
                        ('alone', 'a', 'o', 'c', 3, '{}', 3, 3, NULL);",
        )
        .unwrap();
        migrate(&mut c, &path).unwrap();
        let continues: Vec<(String, Option<String>)> = c
            .prepare("SELECT id, continues FROM tasks ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let want = [("alone", None), ("new", Some("old")), ("old", None)]
            .map(|(id, c)| (id.to_owned(), c.map(str::to_owned)));
        assert_eq!(continues, want);
    }

    /// Migration 17 gives each chain hop the rules that led to its parent
    /// task, nearest first, walked up the hops stored before it.
    #[test]
    fn chain_hops_get_their_lineage() {
        let (_dir, path, mut c) = at_version(16);
        c.execute_batch(
            "INSERT INTO chain_hops (id, rule_id, parent_task_id, trigger_state, child_task_id,
                                     depth, state, created_ms, updated_ms)
                 VALUES ('h1', 'r1', 't1', 'completed', 't2', 1, 'delivered', 1, 1),
                        ('h2', 'r2', 't2', 'completed', 't3', 2, 'delivered', 2, 2),
                        ('h3', 'r3', 't3', 'completed', NULL, 3, 'refused', 3, 3),
                        ('h4', 'r4', 't9', 'completed', NULL, 1, 'delivered', 4, 4);",
        )
        .unwrap();
        migrate(&mut c, &path).unwrap();
        let lineages: Vec<(String, String)> = c
            .prepare("SELECT id, lineage FROM chain_hops ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let want = [
            ("h1", "[]"),
            ("h2", r#"["r1"]"#),
            ("h3", r#"["r2","r1"]"#),
            ("h4", "[]"),
        ]
        .map(|(id, l)| (id.to_owned(), l.to_owned()));
        assert_eq!(lineages, want);
    }

    /// The plan SQLite picks for `sql` (bound to dummy values), one step a
    /// line.
    fn plan<T: rusqlite::ToSql>(conn: &Connection, sql: &str, args: &[T]) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args), |r| r.get::<_, String>(3))
            .unwrap();
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .unwrap()
            .join("\n")
    }

    /// Each partial index serves the query written for it: retention and
    /// the open linked tasks walk their index instead of every task, and
    /// only while their conditions stay the index's, word for word.
    #[test]
    fn partial_indexes_serve_their_queries() {
        let (_dir, path, mut c) = at_version(0);
        migrate(&mut c, &path).unwrap();
        let cases = [
            (
                super::super::retention::aged_sql(),
                vec![1, 10],
                "tasks_by_time",
            ),
            (
                super::super::retention::oldest_sql(),
                vec![10],
                "tasks_by_time",
            ),
            (
                super::super::peers::OPEN_WATCHED.to_owned(),
                vec![],
                "tasks_linked_open",
            ),
        ];
        for (sql, args, index) in cases {
            let plan = plan(&c, &sql, &args);
            let outer = plan.lines().next().unwrap_or_default();
            assert!(
                outer.contains(&format!("USING INDEX {index}")),
                "{index} is not used:\n{plan}"
            );
        }
    }

    /// A page of recent tasks walks an index newest first, from its cursor,
    /// rather than sorting every task.
    #[test]
    fn recent_tasks_walk_an_index_without_sorting() {
        let (_dir, path, mut c) = at_version(0);
        migrate(&mut c, &path).unwrap();
        // Every agent's, one agent's, one state's, both.
        for [agent, state] in [
            [None, None],
            [Some(7), None],
            [None, Some(3)],
            [Some(7), Some(3)],
        ] {
            let args = [Some(10), Some(10), Some(51), agent, state, Some(6)];
            let plan = plan(&c, super::super::queue::RECENT_TASKS, &args);
            assert!(plan.contains("USING INDEX tasks_recent"), "{plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{plan}");
            // The row is read only once the index entry passed the
            // filters the index can test (the time and the state).
            let program: Vec<String> = c
                .prepare(&format!("EXPLAIN {}", super::super::queue::RECENT_TASKS))
                .unwrap()
                .query_map(rusqlite::params_from_iter(args.iter()), |r| r.get(1))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            assert!(program.iter().any(|op| op == "DeferredSeek"), "{program:?}");
        }
    }

    /// Migration 18 keeps every entry findable by its words (decisions'
    /// text included) in the index that keeps no text, and marks every
    /// turn there as indexed.
    #[test]
    fn search_entries_move_to_an_index_without_text_and_none_waits() {
        let (_dir, path, mut c) = at_version(17);
        c.execute_batch(
            "INSERT INTO tasks (id, agent_id, owner, context_id, state, status, created_ms, updated_ms)
                 VALUES ('t', 'a', 'o', 'c', 6, '{}', 1, 1);
             INSERT INTO turns (id, task_id, agent_id, source, state, preview, opened_ms)
                 VALUES ('u1', 't', 'a', 'served', 6, 'pay the invoice', 1),
                        ('u2', 't', 'a', 'served', 6, 'restart servers', 2);
             INSERT INTO turn_search (rowid, turn_id, text)
                 SELECT rowid, id, preview || CASE id WHEN 'u2' THEN ' approved' ELSE '' END
                 FROM turns;",
        )
        .unwrap();
        migrate(&mut c, &path).unwrap();
        let find = |q: &str| -> Vec<String> {
            c.prepare(
                "SELECT id FROM turns WHERE rowid IN
                     (SELECT rowid FROM turn_search WHERE turn_search MATCH ?1) ORDER BY id",
            )
            .unwrap()
            .query_map([q], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
        };
        assert_eq!(find("approved"), ["u2"]);
        assert_eq!(find("invoice"), ["u1"]);
        assert_eq!(find("s*"), ["u2"]);
        assert!(!super::super::queue::search_backlog_waits(&c).unwrap());
        let text: Option<String> = c
            .query_row("SELECT text FROM turn_search WHERE rowid = 1", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(text, None, "no copy of the text is kept");
    }

    /// Search reads a match's turn by rowid (the entry shares it, migration
    /// 8). SQLite says VACUUM may renumber the rowids of a table without an
    /// INTEGER PRIMARY KEY, as `turns` is; the bundled SQLite keeps them,
    /// gaps included, and this holds it to that: a person's `VACUUM` on
    /// the store must not point searches at other turns.
    #[test]
    fn vacuum_keeps_turns_and_their_search_entries_in_step() {
        let (_dir, c) = migrated();
        c.execute_batch(
            "INSERT INTO tasks (id, agent_id, owner, context_id, state, status, created_ms, updated_ms)
                 VALUES ('t', 'a', 'o', 'c', 6, '{}', 1, 1);",
        )
        .unwrap();
        for i in 0..300 {
            c.execute(
                "INSERT INTO turns (id, task_id, agent_id, source, state, preview, opened_ms)
                     VALUES (?1, 't', 'a', 'served', 6, ?2, ?3)",
                rusqlite::params![format!("u{i}"), format!("word{i} common"), i],
            )
            .unwrap();
            c.execute(
                "INSERT INTO turn_search (rowid, text)
                     SELECT rowid, preview FROM turns WHERE id = ?1",
                [format!("u{i}")],
            )
            .unwrap();
        }
        // Gaps, so that a renumbering would show.
        c.execute_batch(
            "DELETE FROM turn_search WHERE rowid IN (SELECT rowid FROM turns WHERE opened_ms % 3 = 0);
             DELETE FROM turns WHERE opened_ms % 3 = 0;
             VACUUM;",
        )
        .unwrap();
        // Each surviving turn's own word finds it, and it alone.
        let mut find = c
            .prepare(
                "SELECT id FROM turns WHERE rowid IN
                     (SELECT rowid FROM turn_search WHERE turn_search MATCH ?1)",
            )
            .unwrap();
        for i in (0..300).filter(|i| i % 3 != 0) {
            let hits: Vec<String> = find
                .query_map([format!("word{i}")], |r| r.get(0))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            assert_eq!(hits, [format!("u{i}")]);
        }
    }

    /// An agent with few tasks has its page picked from its own index
    /// entries, counted first on the same entries: neither reads every task.
    #[test]
    fn an_agents_few_tasks_are_read_from_its_own_entries() {
        let (_dir, c) = migrated();
        let count = plan(
            &c,
            super::super::queue::AGENT_TASKS_UP_TO,
            &[Some(7), Some(10)],
        );
        assert!(
            count.contains("USING COVERING INDEX tasks_by_owner (agent_id=?)"),
            "{count}"
        );
        for state in [None, Some(3)] {
            let args = [Some(10), Some(10), Some(51), Some(7), state, Some(6)];
            let page = plan(&c, super::super::queue::RECENT_TASKS_OF_FEW, &args);
            assert!(page.contains("INDEX tasks_by_owner (agent_id=?)"), "{page}");
            assert!(
                page.contains("USING INTEGER PRIMARY KEY (rowid=?)"),
                "{page}"
            );
            assert!(!page.contains("SCAN"), "{page}");
        }
    }

    /// Every ListTasks page walks its listing index backwards from the
    /// cursor, newest first, without sorting: whichever filters it has.
    #[test]
    fn task_list_pages_walk_their_index_without_sorting() {
        use super::super::tasks::{ListFilter, encode_page_token, list_queries};
        use crate::a2a::types::TaskState;
        let (_dir, c) = migrated();
        for context in [None, Some("ctx")] {
            for state in [None, Some(TaskState::InputRequired)] {
                for after in [None, Some(5)] {
                    for token in [None, Some(encode_page_token(9, "t"))] {
                        let f = ListFilter {
                            agent_id: "a".into(),
                            owner: "o".into(),
                            context_id: context.map(str::to_owned),
                            state,
                            updated_after_ms: after,
                            page_size: 10,
                            page_token: token.clone(),
                            history: None,
                            include_artifacts: false,
                        };
                        let q = list_queries(&f).unwrap();
                        let index = match context {
                            Some(_) => {
                                "INDEX tasks_by_context (agent_id=? AND owner=? AND context_id=?"
                            }
                            None => "INDEX tasks_by_owner (agent_id=? AND owner=?",
                        };
                        let page = plan(&c, &q.page, &q.args);
                        assert!(page.contains(index), "{page}");
                        assert!(!page.contains("TEMP B-TREE"), "{page}");
                        let count = plan(&c, &q.count, &q.args[..q.count_args]);
                        // Either index serves a count of one state.
                        assert!(count.contains("(agent_id=? AND owner=?"), "{count}");
                        assert!(!count.contains("SCAN"), "{count}");
                    }
                }
            }
        }
    }

    /// Writing a task tests the partial indexes' conditions; none of them
    /// may need a temporary table (an IN list) to do it.
    #[test]
    fn writing_a_task_builds_no_temporary_table() {
        let (_dir, path, mut c) = at_version(0);
        migrate(&mut c, &path).unwrap();
        for sql in [
            "INSERT INTO tasks (id, agent_id, owner, context_id, state, status, parked,
                                created_ms, updated_ms, peer_id)
             VALUES (?1, ?1, ?1, ?1, ?2, ?1, ?2, ?2, ?2, ?1)",
            "UPDATE tasks SET state = ?2, parked = ?2, updated_ms = ?2 WHERE id = ?1",
        ] {
            let mut stmt = c.prepare(&format!("EXPLAIN {sql}")).unwrap();
            let ops = stmt
                .query_map(["1", "2"], |r| r.get::<_, String>(1))
                .unwrap()
                .collect::<rusqlite::Result<Vec<_>>>()
                .unwrap();
            assert!(
                !ops.iter().any(|op| op == "OpenEphemeral"),
                "{sql} builds a temporary table: {ops:?}"
            );
        }
    }

    /// Migration 20 counts the turns open before it, and its triggers keep
    /// counting after it.
    #[test]
    fn open_turns_are_counted_from_before_the_migration() {
        let (_dir, path, mut c) = at_version(19);
        c.execute_batch(
            "INSERT INTO tasks (id, agent_id, owner, context_id, state, status, created_ms, updated_ms)
                 VALUES ('t', 'a', 'o', 'c', 6, '{}', 1, 1), ('u', 'b', 'o', 'c', 8, '{}', 1, 1);
             INSERT INTO turns (id, task_id, agent_id, source, state, preview, opened_ms, closed_ms)
                 VALUES ('1', 't', 'a', 'served', 6, '', 1, 2), ('2', 't', 'a', 'served', 6, '', 2, NULL),
                        ('3', 'u', 'b', 'served', 8, '', 1, NULL), ('4', 'u', 'b', 'served', 6, '', 1, NULL);",
        )
        .unwrap();
        migrate(&mut c, &path).unwrap();
        let kept = |c: &Connection| open_turn_counts(c, true);
        assert_eq!(
            kept(&c),
            [
                ("a".to_owned(), 6, 1),
                ("b".to_owned(), 6, 1),
                ("b".to_owned(), 8, 1)
            ]
        );
        c.execute("UPDATE turns SET closed_ms = 5 WHERE id = '3'", [])
            .unwrap();
        assert_eq!(kept(&c), [("a".to_owned(), 6, 1), ("b".to_owned(), 6, 1)]);
    }

    /// Migration 23 points each delivered re-read at the task it
    /// mirrored, and drops those whose task is gone; the others stay.
    #[test]
    fn delivered_re_reads_come_to_refer_to_their_tasks() {
        let (_dir, path, mut c) = at_version(22);
        c.execute_batch(
            "INSERT INTO tasks (id, agent_id, owner, context_id, state, status, created_ms,
                                updated_ms, peer_id, remote_id)
                 VALUES ('ours', 'p', 'o', 'c', 6, '{}', 1, 1, 'p', 'theirs');
             INSERT INTO outbox (id, kind, ref_id, peer_id, body, attempts, next_ms, status, created_ms)
                 VALUES ('r1', 'reread', 'theirs', 'p', '{}', 1, 1, 'delivered', 1),
                        ('r2', 'reread', 'archived', 'p', '{}', 1, 1, 'delivered', 1),
                        ('r3', 'reread', 'unknown', 'p', '{}', 8, 1, 'failed', 1),
                        ('r4', 'reread', 'theirs', 'p', '{}', 0, 1, 'pending', 1),
                        ('d1', 'decision', 'a-decision', 'p', '{}', 1, 1, 'delivered', 1);",
        )
        .unwrap();
        migrate(&mut c, &path).unwrap();
        let rows: Vec<(String, String)> = c
            .prepare("SELECT id, ref_id FROM outbox ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        assert_eq!(
            rows,
            [
                pair("d1", "a-decision"),
                pair("r1", "ours"),
                pair("r3", "unknown"),
                pair("r4", "theirs"),
            ]
        );
    }

    #[test]
    fn migrations_are_idempotent_and_refuse_newer_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let mut c = Connection::open(&path).unwrap();
        migrate(&mut c, &path).unwrap();
        migrate(&mut c, &path).unwrap();
        let v: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, MIGRATIONS.len() as i64);
        c.pragma_update(None, "user_version", 999).unwrap();
        assert!(matches!(migrate(&mut c, &path), Err(Error::TooNew(..))));
    }
}
