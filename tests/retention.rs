//! Retention in the real binary: the background job keeps the database at
//! `max_tasks` by archiving the oldest finished tasks (never the parked
//! one), and `countersign archive list|export` and `GET /api/archives` read
//! the archive.

mod common;
use common::*;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CONFIG: &str = r#"
[retention]
max_tasks = 10
interval_secs = 1

[[agents]]
id = "auto"
backend = "scripted"
fallback = [ { complete = "done" } ]

[[agents]]
id = "inbox"
"#;

fn cli(s: &Server, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(args)
        .arg("--data-dir")
        .arg(&s.data_dir)
        .output()
        .unwrap()
}

fn stdout_ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[tokio::test]
async fn the_background_job_keeps_max_tasks_and_the_cli_reads_the_archive() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let parked = c.send_text("inbox", "p-1", "approve me").await["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut done = Vec::new();
    for i in 0..30 {
        let t = c
            .send_text("auto", &format!("m-{i}"), &format!("job {i}"))
            .await;
        assert_eq!(t["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
        done.push(t["task"]["id"].as_str().unwrap().to_owned());
    }

    // 31 tasks, at most 10 kept, the parked one never archived: the 21
    // oldest finished ones go, the newest 9 stay.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let list: Value =
            serde_json::from_str(&stdout_ok(&cli(&s, &["archive", "list", "--json"]))).unwrap();
        let n: u64 = list
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["tasks"].as_u64().unwrap())
            .sum();
        if n == 21 {
            break;
        }
        assert!(n < 21, "archived too many: {list}");
        assert!(
            Instant::now() < deadline,
            "the job did not archive in 30 s: {list}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let gone = c.rpc_err("auto", "GetTask", json!({"id": done[0]})).await;
    assert_eq!(gone["code"], -32001);
    let kept = c.rpc_ok("auto", "GetTask", json!({"id": done[29]})).await;
    assert_eq!(kept["id"], done[29].as_str());
    let p = c.rpc_ok("inbox", "GetTask", json!({"id": parked})).await;
    assert_eq!(p["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let live = c.rpc_ok("auto", "ListTasks", json!({})).await;
    assert_eq!(live["totalSize"], 9, "{live}");

    // The human listing names the file, its count and the total.
    let text = stdout_ok(&cli(&s, &["archive", "list"]));
    assert!(
        text.contains("tasks-") && text.contains(".jsonl.gz"),
        "{text}"
    );
    assert!(text.contains("21 task(s)"), "{text}");

    // JSON Lines export: every archived task once, oldest first, whole.
    let lines: Vec<Value> = stdout_ok(&cli(&s, &["archive", "export"]))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut ids: Vec<&str> = lines
        .iter()
        .map(|r| r["task"]["id"].as_str().unwrap())
        .collect();
    let times: Vec<&str> = lines
        .iter()
        .map(|r| r["updatedAt"].as_str().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    // The 21 oldest (tasks finished in the same millisecond are ordered by
    // id, so the 21st may be its neighbour).
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 21, "each task once");
    assert!(done[..20].iter().all(|d| ids.contains(&d.as_str())));
    assert!(ids.iter().all(|i| done[..22].iter().any(|d| d == i)));
    let first = lines
        .iter()
        .find(|r| r["task"]["id"] == done[0].as_str())
        .unwrap();
    assert_eq!(first["task"]["history"][0]["parts"][0]["text"], "job 0");
    assert_eq!(first["agentId"], "auto");
    assert_eq!(first["state"], "completed");

    // CSV into a file, and the filters.
    let out = s.data_dir.join("export.csv");
    let msg = stdout_ok(&cli(
        &s,
        &[
            "archive",
            "export",
            "--format",
            "csv",
            "-o",
            out.to_str().unwrap(),
        ],
    ));
    assert!(msg.contains("exported 21 task(s)"), "{msg}");
    let csv = std::fs::read_to_string(&out).unwrap();
    assert_eq!(csv.lines().count(), 22, "{csv}");
    assert!(csv.starts_with("id,agent,owner,context,state,"), "{csv}");
    let none = stdout_ok(&cli(&s, &["archive", "export", "--agent", "inbox"]));
    assert_eq!(none, "");
    let future = stdout_ok(&cli(&s, &["archive", "export", "--since", "2999-01-01"]));
    assert_eq!(future, "");
    let bad = cli(&s, &["archive", "export", "--since", "last tuesday"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a date"));

    // The UI API lists the same files.
    let r = c
        .http
        .get(s.url("/api/archives"))
        .bearer_auth(s.ui_token())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["files"][0]["tasks"], 21, "{body}");
}

#[test]
fn an_empty_archive_is_listed_as_empty() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["archive", "list", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("No archived tasks"));
}
