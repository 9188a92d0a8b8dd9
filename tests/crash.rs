//! Crash safety: what a caller was told is committed survives kill -9.
mod common;
use common::*;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::sync::Mutex;

const SENDS: usize = 1000;
const CONNECTIONS: usize = 32;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_answered_send_survives_kill_minus_nine() {
    let mut server = Server::start(Some(TCK_CONFIG));
    let dir = server.data_dir.clone();
    let base = server.base.clone();
    let started = Arc::new(AtomicUsize::new(0));
    let answered: Arc<Mutex<HashMap<String, (String, String)>>> = Arc::default();
    let mut workers = Vec::new();
    for w in 0..CONNECTIONS {
        let (started, answered, base) = (started.clone(), answered.clone(), base.clone());
        workers.push(tokio::spawn(async move {
            let http = worker_client();
            loop {
                let n = started.fetch_add(1, Ordering::SeqCst);
                if n >= SENDS {
                    return;
                }
                let prefix = if n % 2 == 0 {
                    "tck-complete-task"
                } else {
                    "tck-input-required"
                };
                let message_id = format!("{prefix}-{w}-{n}");
                let body = json!({"jsonrpc": "2.0", "id": n, "method": "SendMessage",
                    "params": {"message": message(&message_id, &format!("crash test {n}"))}});
                let resp = http
                    .post(format!("{base}/a2a/tck"))
                    .header("A2A-Version", "1.0")
                    .json(&body)
                    .send()
                    .await;
                let Ok(resp) = resp else { return };
                let Ok(v) = resp.json::<Value>().await else {
                    return;
                };
                let task = &v["result"]["task"];
                if let Some(id) = task["id"].as_str() {
                    answered
                        .lock()
                        .await
                        .insert(id.to_owned(), (message_id, state(task).to_owned()));
                }
            }
        }));
    }
    // Kill the server in the middle of the load.
    loop {
        let done = answered.lock().await.len();
        if done >= SENDS / 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    server.kill9();
    for w in workers {
        w.await.unwrap();
    }
    let answered = answered.lock().await.clone();
    assert!(
        answered.len() >= SENDS / 3 && answered.len() < SENDS,
        "killed mid-load: {} answered",
        answered.len()
    );

    let restarted = Server::start_in(&dir, Some(TCK_CONFIG), &[]);
    let c = restarted.client();
    for (id, (message_id, answered_state)) in &answered {
        let task = c.rpc_ok("tck", "GetTask", json!({"id": id})).await;
        assert_eq!(
            state(&task),
            answered_state,
            "task {id} changed state across the crash"
        );
        let history = task["history"].as_array().expect("history");
        assert_eq!(
            history[0]["messageId"],
            json!(message_id),
            "task {id} lost its request"
        );
        assert_eq!(
            history[0]["parts"][0]["text"]
                .as_str()
                .unwrap_or("")
                .split(' ')
                .next(),
            Some("crash")
        );
        if answered_state == "TASK_STATE_COMPLETED" {
            assert_eq!(
                task["status"]["message"]["parts"][0]["text"],
                "Hello from TCK"
            );
        }
    }
    // The restarted server still takes work.
    let r = c
        .send_text("tck", "tck-complete-task-after", "after the crash")
        .await;
    assert_eq!(state(&r["task"]), "TASK_STATE_COMPLETED");
}
