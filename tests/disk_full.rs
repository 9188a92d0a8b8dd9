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

#[tokio::test]
async fn a_full_disk_refuses_writes_loses_nothing_and_recovers() {
    let mut s = Server::start_with_file_limit(Some(CONFIG), FILE_LIMIT_KIB);
    let c = s.client();
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
    let check: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
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
