//! A full disk: a write that cannot be stored is refused with an error that
//! says nothing was stored; nothing acknowledged is lost, nothing refused is
//! stored, a decision is never half made, and once there is room again the
//! server carries on without a restart.
mod common;
use common::*;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CONFIG: &str = "[[agents]]\nid = \"inbox\"\nbackend = \"human\"\n";

/// Files of at most 2 MiB: the database and its write-ahead log fill after
/// a few hundred of the tasks below.
const FILE_LIMIT_KIB: u64 = 2048;

/// Parked tasks decided on while the disk is full.
const DECISIONS: usize = 6;

async fn send(c: &Client, n: usize, text: &str) -> Value {
    c.rpc(
        "inbox",
        "SendMessage",
        json!({"message": message(&format!("full-{n}"), text)}),
    )
    .await
}

async fn decide(s: &Server, task: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(s.url(&format!("/api/tasks/{task}/decision")))
        .bearer_auth(s.ui_token())
        .json(&json!({"kind": "approve"}))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// The next `n` storage notices of the UI's event stream (task events
/// between them are passed over).
async fn storage_notices(events: &mut SseStream, n: usize) -> Vec<Value> {
    let mut told = Vec::new();
    while told.len() < n {
        let ev = events.next().await.expect("the event stream ended");
        if ev["kind"] == "storage" {
            told.push(ev);
        }
    }
    told
}

#[tokio::test]
async fn a_full_disk_refuses_writes_loses_nothing_and_recovers() {
    let mut s = Server::start_with_file_limit(Some(CONFIG), FILE_LIMIT_KIB);
    let c = s.client();
    let api = Api::new(&s);
    let (_, health) = api.call(reqwest::Method::GET, "/health", None).await;
    assert_eq!(health["storage"], json!({"kind": "storage", "ok": true}));
    // The UI's event stream, open from the start.
    let events = reqwest::Client::new()
        .get(s.url("/api/events"))
        .bearer_auth(s.ui_token())
        .send()
        .await
        .unwrap();
    let mut events = SseStream::new(events);
    let text = "a request that takes room ".repeat(240);
    let mut stored: Vec<String> = Vec::new();
    let mut refused = 0;
    let mut said_nothing_stored = 0;
    for n in 0..3000 {
        let v = send(&c, n, &text).await;
        if let Some(id) = v["result"]["task"]["id"].as_str() {
            assert_eq!(
                v["result"]["task"]["status"]["state"],
                "TASK_STATE_INPUT_REQUIRED"
            );
            stored.push(id.to_owned());
            continue;
        }
        let e = &v["error"];
        assert_eq!(
            e["code"], -32603,
            "a refused write is an internal error: {v}"
        );
        let m = e["message"].as_str().unwrap_or_default();
        assert!(m.contains("storage failure"), "{m}");
        said_nothing_stored += usize::from(m.contains("nothing was stored"));
        refused += 1;
        if refused >= 25 {
            // The last write failed: the health check says so.
            let (_, health) = api.call(reqwest::Method::GET, "/health", None).await;
            let storage = &health["storage"];
            assert_eq!(storage["ok"], false, "{health}");
            assert!(
                storage["sinceMs"].as_i64().is_some_and(|ms| ms > 0),
                "{health}"
            );
            let why = storage["error"].as_str().unwrap_or_default();
            assert!(
                why.contains("commit failed") || why.contains("could not begin"),
                "{why}"
            );
            break;
        }
    }
    // Decisions while the disk is full: each refused with nothing of it
    // kept, or kept and not applied yet (it is tried again); never given
    // up on.
    let decided = &stored[..DECISIONS];
    let mut refused_decisions = Vec::new();
    for task in decided {
        let (status, body) = decide(&s, task).await;
        match status {
            500 => {
                let m = body["error"]["message"].as_str().unwrap_or_default();
                assert!(m.contains("storage failure"), "{body}");
                refused_decisions.push(task.clone());
            }
            200 => assert_ne!(body["decision"]["delivery"], "failed", "{body}"),
            _ => panic!("{status} {body}"),
        }
    }
    assert!(
        refused >= 25,
        "the disk never filled: {} stored",
        stored.len()
    );
    assert!(stored.len() > 10, "only {} stored", stored.len());
    assert!(
        said_nothing_stored > 0,
        "no refusal said that nothing was stored"
    );
    // Reads still work while the disk is full.
    let got = c
        .rpc_ok("inbox", "GetTask", json!({"id": stored[stored.len() - 1]}))
        .await;
    assert_eq!(got["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    // The first notice on the event stream said writes fail.
    let told = storage_notices(&mut events, 1).await;
    assert_eq!(told[0]["ok"], false, "{told:?}");

    // Room again: the same server takes writes, without a restart.
    s.lift_file_limit();
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let v = send(&c, 100_000, "after the disk had room again").await;
        if let Some(id) = v["result"]["task"]["id"].as_str() {
            break id.to_owned();
        }
        assert!(Instant::now() < deadline, "no write succeeded after: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (_, health) = api.call(reqwest::Method::GET, "/health", None).await;
    assert_eq!(health["storage"], json!({"kind": "storage", "ok": true}));
    // And the stream said so (after any flips while the disk was nearly
    // full: a small write may fit where a large one does not).
    loop {
        let told = storage_notices(&mut events, 1).await;
        if told[0]["ok"] == true {
            assert_eq!(told[0], json!({"kind": "storage", "ok": true}));
            break;
        }
    }
    for task in decided {
        let (status, body) = decide(&s, task).await;
        if refused_decisions.contains(task) {
            assert_eq!(status, 200, "{body}");
        } else {
            assert_eq!(status, 409, "the first decision stands: {body}");
        }
    }
    // Each decision is applied: at once, or by its next try.
    let deadline = Instant::now() + Duration::from_secs(30);
    for task in decided {
        loop {
            let t = c.rpc_ok("inbox", "GetTask", json!({"id": task})).await;
            if t["status"]["state"] == "TASK_STATE_COMPLETED" {
                let artifacts = t["artifacts"].as_array().cloned().unwrap_or_default();
                assert_eq!(artifacts.len(), 1, "one decision artifact: {t}");
                break;
            }
            assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{t}");
            assert!(Instant::now() < deadline, "a decision was never applied");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    // Every acknowledged task is there, and nothing refused is.
    assert!(s.terminate().success());
    let db = rusqlite::Connection::open(s.data_dir.join("countersign.db")).unwrap();
    let ids: HashSet<String> = db
        .prepare("SELECT id FROM tasks")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let want: HashSet<String> = stored.iter().cloned().chain([after]).collect();
    assert_eq!(ids, want, "stored tasks differ from the acknowledged ones");
    assert_sound(&db);
    for task in decided {
        let deliveries: Vec<String> = db
            .prepare(
                "SELECT d.delivery FROM decisions d JOIN turns t ON t.id = d.turn_id
                 WHERE t.task_id = ?1",
            )
            .unwrap()
            .query_map([task], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(deliveries, ["delivered"], "one decision, made once");
    }
    drop(db);

    // And the server opens the data dir as usual.
    let s = Server::start_in(&s.data_dir.clone(), Some(CONFIG), &[]);
    let t = s
        .client()
        .rpc_ok("inbox", "GetTask", json!({"id": decided[0]}))
        .await;
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
}

/// A: the parking inbox, a scripted agent that completes at once (its
/// completions are pushed to a webhook), and peer B, watched by push.
fn config_watching(b: &Server) -> String {
    format!(
        r#"[outbound]
allow = ["127.0.0.1"]
[dispatch]
max_backoff_secs = 1
[webhooks]
sweep_secs = 1

[[agents]]
id = "inbox"
backend = "human"

[[agents]]
id = "flow"
backend = "scripted"
[[agents.rules]]
message_id_prefix = "flow"
steps = [{{ complete = "Done." }}]
[[agents.rules]]
message_id_prefix = "slow"
steps = [{{ status = {{ state = "working" }} }}, {{ delay_ms = {SLOW_MS} }}, {{ complete = "Done." }}]

[[peers]]
id = "b"
url = "{}"
"#,
        b.url("/a2a/inbox")
    )
}

/// How long the slow runs wait before they complete: past the time the
/// disk takes to fill.
const SLOW_MS: u64 = 4000;

/// B pushes to A on loopback, and keeps trying while A cannot store.
const PEER_B: &str = "[outbound]\nallow = [\"127.0.0.1\"]\n[dispatch]\nmax_backoff_secs = 1\nmax_attempts = 1000\n\n[[agents]]\nid = \"inbox\"\n";

/// The outbox of `api`'s server once nothing in it is pending (at most
/// `limit`).
async fn drained(api: &Api, limit: Duration) -> Vec<Value> {
    let deadline = Instant::now() + limit;
    loop {
        let (_, out) = api.call(reqwest::Method::GET, "/outbox", None).await;
        let items = out["items"].as_array().cloned().unwrap_or_default();
        if items.iter().all(|i| i["status"] != "pending") {
            return items;
        }
        assert!(
            Instant::now() < deadline,
            "deliveries still pending: {items:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_holds_pushes_and_deliveries_until_there_is_room() {
    let hook = Hook::start().await;
    let b = Server::start(Some(PEER_B));
    let s = Server::start_with_file_limit(Some(&config_watching(&b)), FILE_LIMIT_KIB);
    let c = s.client();
    let api = Api::new(&s);
    let bc = b.client();

    // Tasks started on B from here, parked there and watched here.
    let mut watched = Vec::new();
    for n in 0..DECISIONS {
        let (status, v) = api
            .call(
                reqwest::Method::POST,
                "/peers/b/tasks",
                Some(json!({"text": format!("Peer task {n}")})),
            )
            .await;
        assert_eq!(status, 201, "{v}");
        watched.push(v["task"]["id"].as_str().unwrap().to_owned());
    }
    for id in &watched {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (_, d) = api
                .call(reqwest::Method::GET, &format!("/tasks/{id}"), None)
                .await;
            if d["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" {
                break;
            }
            assert!(Instant::now() < deadline, "never parked here: {d}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // A webhook for tasks B is sent directly, which only its pushes tell of.
    let (status, sub) = api
        .call(reqwest::Method::POST, "/peers/b/subscriptions", None)
        .await;
    assert_eq!(status, 201, "{sub}");
    let pushed_to_us = json!({"url": sub["url"], "token": sub["token"]});
    let mut pushed = Vec::new();
    let mut push_from_b = async |n: usize| {
        let t = bc
            .rpc_ok(
                "inbox",
                "SendMessage",
                json!({"message": message(&format!("direct-{n}"), "Approve this?"),
                       "configuration": {"taskPushNotificationConfig": pushed_to_us,
                                         "returnImmediately": true}}),
            )
            .await;
        pushed.push(t["task"]["id"].as_str().unwrap().to_owned());
    };

    // A reader holds a snapshot, so the write-ahead log cannot start over:
    // once it reaches the limit every write fails, updates included.
    let reader = rusqlite::Connection::open(s.data_dir.join("countersign.db")).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let _: i64 = reader
        .query_row("SELECT count(*) FROM tasks", [], |r| r.get(0))
        .unwrap();

    // Runs that will try to complete while the disk is full.
    let slow_sent = Instant::now();
    let mut slow = Vec::new();
    for n in 0..3 {
        let t = c
            .rpc_ok(
                "flow",
                "SendMessage",
                json!({"message": message(&format!("slow-{n}"), "run"),
                       "configuration": {"returnImmediately": true}}),
            )
            .await;
        slow.push(t["task"]["id"].as_str().unwrap().to_owned());
    }

    // Fill the disk: parked sends take the room; completed flows owe a
    // push each, to a webhook that is down for now.
    hook.set_up(false);
    let text = "a request that takes room ".repeat(240);
    let mut flows = Vec::new();
    let mut refused = 0;
    for n in 0..3000 {
        if n % 20 == 0 {
            push_from_b(n).await;
        }
        let v = if n % 2 == 0 {
            c.rpc(
                "flow",
                "SendMessage",
                json!({"message": message(&format!("flow-{n}"), "run"),
                       "configuration": {"taskPushNotificationConfig": {"url": hook.url, "token": "t"}}}),
            )
            .await
        } else {
            send(&c, n, &text).await
        };
        match v["result"]["task"]["id"].as_str() {
            Some(id) if n % 2 == 0 => {
                assert_eq!(
                    v["result"]["task"]["status"]["state"],
                    "TASK_STATE_COMPLETED"
                );
                flows.push(id.to_owned());
            }
            Some(_) => {}
            None => {
                assert_eq!(v["error"]["code"], -32603, "{v}");
                refused += 1;
                if refused >= 25 {
                    break;
                }
            }
        }
    }
    assert!(refused >= 25, "the disk never filled");
    assert!(flows.len() > 5, "only {} flows stored", flows.len());

    // While it is full: B pushes new tasks, decisions go to B, and the
    // webhook comes up, so owed pushes are delivered but cannot be marked.
    for n in 0..5 {
        push_from_b(10_000 + n).await;
    }
    let mut refused_decisions = Vec::new();
    for task in &watched {
        let (status, body) = decide(&s, task).await;
        match status {
            500 => refused_decisions.push(task.clone()),
            200 => assert_ne!(body["decision"]["delivery"], "failed", "{body}"),
            _ => panic!("{status} {body}"),
        }
    }
    hook.set_up(true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let while_full = hook.accepted().len();
    // The slow runs came to their last step meanwhile: it was not stored.
    let due = slow_sent + Duration::from_millis(SLOW_MS + 500);
    tokio::time::sleep(due.saturating_duration_since(Instant::now())).await;
    for id in &slow {
        let t = c.rpc_ok("flow", "GetTask", json!({"id": id})).await;
        assert_eq!(t["status"]["state"], "TASK_STATE_WORKING", "{t}");
    }

    // Room again.
    reader.execute_batch("COMMIT").unwrap();
    drop(reader);
    s.lift_file_limit();
    for task in &refused_decisions {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (status, body) = decide(&s, task).await;
            if status == 200 {
                break;
            }
            assert!(Instant::now() < deadline, "{status} {body}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let items = drained(&api, Duration::from_secs(60)).await;
    let failed: Vec<&Value> = items.iter().filter(|i| i["status"] == "failed").collect();
    assert!(failed.is_empty(), "dead letters: {failed:#?}");
    drained(&Api::new(&b), Duration::from_secs(60)).await;

    // The slow runs completed once there was room, without a restart.
    for id in &slow {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let t = c.rpc_ok("flow", "GetTask", json!({"id": id})).await;
            if t["status"]["state"] == "TASK_STATE_COMPLETED" {
                break;
            }
            assert_eq!(t["status"]["state"], "TASK_STATE_WORKING", "{t}");
            assert!(Instant::now() < deadline, "a run never completed: {t}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    // Every completion owed reached the webhook; a delivery that could not
    // be marked was sent again only with backoff, not in a loop.
    let got = hook.accepted();
    let mut per_id: std::collections::HashMap<&str, usize> = Default::default();
    for (id, _) in &got {
        *per_id.entry(id).or_default() += 1;
    }
    let most = per_id.values().copied().max().unwrap_or(0);
    assert!(
        most <= 4,
        "a notification was sent {most} times ({} in all, {while_full} while the disk was full)",
        got.len()
    );
    let completed: HashSet<&str> = got
        .iter()
        .filter(|(_, v)| v["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED")
        .filter_map(|(_, v)| v["statusUpdate"]["taskId"].as_str())
        .collect();
    for id in &flows {
        assert!(completed.contains(id.as_str()), "completion of {id} lost");
    }

    // Every decision reached B once; every task B pushed is watched here.
    for task in &watched {
        let (_, d) = api
            .call(reqwest::Method::GET, &format!("/tasks/{task}"), None)
            .await;
        let deliveries: Vec<&Value> = d["decisions"]
            .as_array()
            .map(|a| a.iter().map(|x| &x["delivery"]).collect())
            .unwrap_or_default();
        assert_eq!(deliveries, [&json!("delivered")], "{d}");
    }
    assert!(assert_each_message_once(&b).await >= watched.len() + pushed.len());
    let mut s = s;
    assert!(s.terminate().success());
    let db = rusqlite::Connection::open(s.data_dir.join("countersign.db")).unwrap();
    let remote: HashSet<String> = db
        .prepare("SELECT remote_id FROM tasks WHERE peer_id = 'b'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for id in &pushed {
        assert!(
            remote.contains(id),
            "B's task {id} was pushed but never kept"
        );
    }
    assert_sound(&db);
    eprintln!(
        "disk_full: {} flows, {} pushed by B, {} decisions ({} refused while full), {} notifications ({while_full} while full)",
        flows.len(),
        pushed.len(),
        watched.len(),
        refused_decisions.len(),
        got.len()
    );
}

/// A log that cannot be written (it is on the full disk) loses log lines,
/// and nothing else: the server starts, refuses what it cannot store, and
/// stores again once there is room; no thread that logged has stopped.
#[tokio::test]
async fn a_log_that_cannot_be_written_stops_nothing() {
    const KIB: u64 = FILE_LIMIT_KIB;
    let s = Server::start_with_full_log(Some(CONFIG), KIB);
    let c = s.client();
    let text = "a request that takes room ".repeat(240);
    let mut stored = 0;
    let mut refused = 0;
    for n in 0..2000 {
        let v = send(&c, n, &text).await;
        if v["result"]["task"]["id"].is_string() {
            stored += 1;
            continue;
        }
        // Logged by the database writer, and by the request's task.
        assert_eq!(v["error"]["code"], -32603, "{v}");
        refused += 1;
        if refused >= 5 {
            break;
        }
    }
    assert!(
        stored > 0 && refused >= 5,
        "{stored} stored, {refused} refused"
    );
    assert_eq!(
        s.log().len() as u64,
        KIB * 1024,
        "the log grew past its limit"
    );
    s.lift_file_limit();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = send(&c, 100_000, "after the disk had room again").await;
        if v["result"]["task"]["id"].is_string() {
            break;
        }
        assert!(Instant::now() < deadline, "no write succeeded after: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// With no room for even an empty database, the server does not start,
/// and says which file it could not write.
#[test]
fn no_room_to_start_is_said_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let out = limited_command(64)
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .arg("--bind")
        .arg("127.0.0.1:0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let db = dir.path().join("countersign.db");
    let said = format!(
        "countersign: cannot open the database at {}: ",
        db.display()
    );
    assert!(stderr.contains(&said), "{stderr}");
    // Each cause once, not the same words three times over.
    assert!(stderr.matches("disk I/O error").count() <= 2, "{stderr}");
}
