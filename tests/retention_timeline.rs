//! Retention over a simulated 120-day timeline, in-process on a real router
//! bound to 127.0.0.1:0 and a real SQLite file: the clock is moved a day at
//! a time (alone in this test binary, since it moves the whole process's
//! clock), a steady load of finished tasks arrives each day, retention runs,
//! and the live database stays bounded while parked and undelivered work is
//! kept and everything else is in the archive exactly once.

mod common;
use common::assert_sound;

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

use countersign::config::Config;
use countersign::server::run::{ServeOptions, serve_until};
use serde_json::{Value, json};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;
const DAYS: i64 = 120;
const PER_DAY: usize = 25;
/// Of each day's tasks, this many are parked for a person and decided.
const DECIDED_PER_DAY: usize = 5;
/// Days of tasks still live after the last pass: a task leaves once it is
/// older than `keep_days` (30), so after day 119's pass days 91 to 119 remain.
const LIVE_DAYS: usize = 29;

const CONFIG: &str = r#"
[retention]
keep_days = 30
max_tasks = 0
interval_secs = 0
batch = 40

[[agents]]
id = "auto"
backend = "scripted"
fallback = [ { complete = "done" } ]

[[agents]]
id = "inbox"

[[agents]]
id = "gatekeep"
backend = "scripted"
fallback = [ { complete = "done" } ]

[[chains]]
id = "hold"
gate = true
trigger = { agent = "gatekeep", states = ["completed"] }
action = { kind = "push", url = "https://hooks.example.com/after-review" }
"#;

async fn rpc(
    http: &reqwest::Client,
    base: &str,
    agent: &str,
    method: &str,
    params: Value,
) -> Value {
    http.post(format!("{base}/a2a/{agent}"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("JSON")
}

async fn send(http: &reqwest::Client, base: &str, agent: &str, text: &str) -> String {
    let msg = json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                     "parts": [{"text": text}]});
    let r = rpc(http, base, agent, "SendMessage", json!({"message": msg})).await;
    r["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {r}"))
        .to_owned()
}

fn db_bytes(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("countersign.db")).map_or(0, |m| m.len())
}

/// Frames in the WAL now, as a checkpoint of our own counts them (once the
/// server's checkpoint, which keeps ours from running, is done).
fn wal_frames(dir: &Path) -> i64 {
    let conn = rusqlite::Connection::open(dir.join("countersign.db")).unwrap();
    for _ in 0..200 {
        let (busy, frames): (i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        if busy == 0 && frames >= 0 {
            return frames;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the WAL could not be checkpointed for 2 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_120_day_timeline_stays_bounded_and_archives_each_task_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let config = Config::parse(CONFIG, Path::new("timeline.toml")).unwrap();
    // Day 0 is 120 days ago.
    countersign::clock::advance_ms(-DAYS * DAY_MS);
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = serve_until(
        ServeOptions {
            config,
            bind: "127.0.0.1:0".parse().unwrap(),
            data_dir: dir.clone(),
            open: true,
        },
        move |s| {
            let _ = ready_tx.send(s);
        },
        async move {
            let _ = stop_rx.await;
        },
    );
    // The server future is not Send (it holds stdout while announcing), so
    // it runs beside the load rather than on its own task.
    let load_dir = dir.clone();
    let load = async move {
        let state = ready_rx.await.expect("server started");
        let base = format!("http://{}", state.local_addr);
        let http = reqwest::Client::new();

        // Work that must survive: a task parked for a person, and a finished
        // task whose chain hop waits (gated) to be sent on.
        let parked = send(&http, &base, "inbox", "please approve").await;
        let gated = send(&http, &base, "gatekeep", "deploy").await;

        let mut all = Vec::new();
        let mut decided = Vec::new();
        let mut sizes = Vec::new();
        for day in 0..DAYS {
            let sends = (0..PER_DAY).map(|i| {
                let (http, base) = (http.clone(), base.clone());
                async move { send(&http, &base, "auto", &format!("day {day} task {i}")).await }
            });
            all.extend(futures::future::join_all(sends).await);
            // A few a day wait for a person, who approves them (turns, decisions
            // and their search rows must leave with the task too).
            for i in 0..DECIDED_PER_DAY {
                let id = send(&http, &base, "inbox", &format!("day {day} approval {i}")).await;
                let r = http
                    .post(format!("{base}/api/tasks/{id}/decision"))
                    .bearer_auth(state.ui_secret.as_str())
                    .json(&json!({"kind": "approve"}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200, "{:?}", r.text().await);
                decided.push(id);
            }
            countersign::clock::advance_ms(DAY_MS);
            let report = state.engine.retain().await.expect("retention pass");
            if day > 31 {
                assert_eq!(
                    report.archived,
                    PER_DAY + DECIDED_PER_DAY,
                    "day {day}: a day's worth of tasks leaves each day"
                );
            }
            sizes.push(db_bytes(&load_dir));
        }

        // The live database holds the last days and the kept work only.
        let live: Value = rpc(&http, &base, "auto", "ListTasks", json!({"pageSize": 1})).await;
        let live_auto = live["result"]["totalSize"].as_i64().unwrap();
        assert_eq!(live_auto, (LIVE_DAYS * PER_DAY) as i64, "{live}");

        // An old task is gone from the live database: GetTask says not found.
        let old = rpc(&http, &base, "auto", "GetTask", json!({"id": all[0]})).await;
        assert_eq!(old["error"]["code"], -32001, "{old}");
        let recent = rpc(
            &http,
            &base,
            "auto",
            "GetTask",
            json!({"id": all.last().unwrap()}),
        )
        .await;
        assert!(recent.get("result").is_some(), "{recent}");

        // Parked and undelivered work is kept, 120 days on.
        let p = rpc(&http, &base, "inbox", "GetTask", json!({"id": parked})).await;
        assert_eq!(
            p["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{p}"
        );
        let g = rpc(&http, &base, "gatekeep", "GetTask", json!({"id": gated})).await;
        assert_eq!(
            g["result"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{g}"
        );

        // Bounded: once retention is in steady state (after the first 30 days),
        // the database stops growing; months two, three and four end the same.
        let (m2, m3, m4) = (sizes[59], sizes[89], sizes[119]);
        eprintln!(
            "database bytes at day 30/60/90/120: {} {m2} {m3} {m4}",
            sizes[29]
        );
        let bound = m2 + m2 / 5;
        assert!(m3 <= bound && m4 <= bound, "grew past {bound}: {sizes:?}");
        // And the WAL starts over once the writes pause: nothing keeps an
        // old snapshot open. (Its file keeps its largest size, which depends
        // on how long the writer never paused, so that is not compared.)
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        send(&http, &base, "auto", "after a pause").await;
        let frames = wal_frames(&load_dir);
        assert!(frames < 200, "the WAL did not start over: {frames} frames");

        drop(state);
        let _ = stop_tx.send(());
        (all, decided, parked, gated)
    };
    let (served, (all, decided, parked, gated)) = tokio::join!(server, load);
    served.expect("clean shutdown");

    // The archive has every task that left, exactly once (the CLI reads the
    // files; the server is stopped).
    let out = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["archive", "export", "--data-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let archived: Vec<&str> = lines
        .iter()
        .map(|r| r["task"]["id"].as_str().unwrap())
        .collect();
    let unique: HashSet<&str> = archived.iter().copied().collect();
    assert_eq!(unique.len(), archived.len(), "a task exported twice");
    let expected: HashSet<&str> = all[..all.len() - LIVE_DAYS * PER_DAY]
        .iter()
        .chain(&decided[..decided.len() - LIVE_DAYS * DECIDED_PER_DAY])
        .map(String::as_str)
        .collect();
    assert_eq!(unique, expected);
    assert!(!unique.contains(parked.as_str()) && !unique.contains(gated.as_str()));
    // Each line is the whole task: its history and its final state.
    let first = lines[0]["task"]["history"][0]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(first.starts_with("day 0 task "), "{first}");
    assert_eq!(lines[0]["state"], "completed");
    // A decided task carries its turn and its decision.
    let d = lines
        .iter()
        .find(|r| r["task"]["id"] == decided[0].as_str())
        .unwrap();
    assert_eq!(d["turns"].as_array().unwrap().len(), 1, "{d}");
    assert_eq!(d["decisions"][0]["kind"], "approve", "{d}");
    assert_eq!(d["state"], "completed");

    let conn = rusqlite::Connection::open(dir.join("countersign.db")).unwrap();
    assert_sound(&conn);
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM tasks", [], |r| r.get(0))
        .unwrap();
    // And the parked task, the gated one and the one sent after the pause.
    assert_eq!(n, (LIVE_DAYS * (PER_DAY + DECIDED_PER_DAY)) as i64 + 3);
    let orphans: i64 = conn
        .query_row(
            "SELECT (SELECT COUNT(*) FROM messages WHERE task_id NOT IN (SELECT id FROM tasks))
                  + (SELECT COUNT(*) FROM turns WHERE task_id NOT IN (SELECT id FROM tasks))
                  + (SELECT COUNT(*) FROM decisions WHERE task_id NOT IN (SELECT id FROM tasks))
                  + (SELECT COUNT(*) FROM turn_search_docsize WHERE id NOT IN (SELECT rowid FROM turns))
                  + (SELECT COUNT(*) FROM chain_hops WHERE parent_task_id NOT IN (SELECT id FROM tasks))
                  + (SELECT COUNT(*) FROM outbox WHERE kind = 'decision'
                       AND ref_id NOT IN (SELECT id FROM decisions))",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(orphans, 0);
}
