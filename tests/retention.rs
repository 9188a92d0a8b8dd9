//! Retention in the real binary: the background job keeps the database at
//! `max_tasks` by archiving the oldest finished tasks (never the parked one
//! nor one with a push notification still owed), and `countersign archive list|export` and `GET /api/archives` read
//! the archive.

mod common;
use common::*;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CONFIG: &str = r#"
[outbound]
allow = ["127.0.0.1"]

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
    // The oldest finished task has a push notification still owed (its
    // webhook refuses connections, so the delivery waits to be retried).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hook = format!("http://{}/hook", closed.local_addr().unwrap());
    drop(closed);
    let owed = c
        .rpc_ok(
            "auto",
            "SendMessage",
            json!({"message": message("owed-1", "notify me"),
                   "configuration": {"taskPushNotificationConfig": {"url": hook, "token": "t"}}}),
        )
        .await;
    assert_eq!(owed["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let owed = owed["task"]["id"].as_str().unwrap().to_owned();
    let mut done = Vec::new();
    for i in 0..30 {
        let t = c
            .send_text("auto", &format!("m-{i}"), &format!("job {i}"))
            .await;
        assert_eq!(t["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
        done.push(t["task"]["id"].as_str().unwrap().to_owned());
    }

    // 32 tasks, at most 10 kept, the parked one and the one with a push
    // owed never archived: the 22 oldest of the others go, the newest 8 stay.
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
        if n == 22 {
            break;
        }
        assert!(n < 22, "archived too many: {list}");
        assert!(
            Instant::now() < deadline,
            "the job did not archive in 30 s: {list}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let gone = c.rpc_err("auto", "GetTask", json!({"id": done[0]})).await;
    assert_eq!(gone["code"], -32001);
    // `show` reads an archived task from the archive, through the running
    // server, and `archive show` from the files, with no server; both say
    // when it left.
    for args in [
        &["show", done[0].as_str()][..],
        &["archive", "show", done[0].as_str()],
    ] {
        let shown = stdout_ok(&cli(&s, args));
        assert!(shown.starts_with("archived 20"), "{shown}");
        for want in [
            format!("task     {}", done[0]),
            "state    completed".to_owned(),
            "agent    auto".to_owned(),
            "job 0".to_owned(),
        ] {
            assert!(
                shown.contains(&want),
                "{args:?}: missing {want:?} in:\n{shown}"
            );
        }
    }
    // An id in neither: the API's 404 says where archived tasks are.
    let shown = cli(&s, &["show", "no-such-task"]);
    assert_eq!(shown.status.code(), Some(1));
    let why = String::from_utf8_lossy(&shown.stderr);
    assert!(
        why.contains("countersign archive show no-such-task"),
        "{why}"
    );
    let record: Value = serde_json::from_str(&stdout_ok(&cli(
        &s,
        &["archive", "show", done[0].as_str(), "--json"],
    )))
    .unwrap();
    assert_eq!(record["task"]["id"], done[0].as_str());
    assert_eq!(record["state"], "completed");
    // A task the archive does not hold (one still here) is refused by name.
    let missing = cli(&s, &["archive", "show", done[29].as_str()]);
    assert_eq!(missing.status.code(), Some(1));
    let why = String::from_utf8_lossy(&missing.stderr);
    assert!(
        why.contains(done[29].as_str()) && why.contains("holds no task"),
        "{why}"
    );
    let kept = c.rpc_ok("auto", "GetTask", json!({"id": done[29]})).await;
    assert_eq!(kept["id"], done[29].as_str());
    let p = c.rpc_ok("inbox", "GetTask", json!({"id": parked})).await;
    assert_eq!(p["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let o = c.rpc_ok("auto", "GetTask", json!({"id": owed})).await;
    assert_eq!(o["status"]["state"], "TASK_STATE_COMPLETED");
    let live = c.rpc_ok("auto", "ListTasks", json!({})).await;
    assert_eq!(live["totalSize"], 9, "8 finished and the one owed: {live}");

    // The human listing names the file, its count and the total.
    let text = stdout_ok(&cli(&s, &["archive", "list"]));
    assert!(
        text.contains("tasks-") && text.contains(".jsonl.gz"),
        "{text}"
    );
    assert!(text.contains("22 task(s)"), "{text}");

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
    // The 22 oldest (tasks finished in the same millisecond are ordered by
    // id, so the 22nd may be its neighbour).
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 22, "each task once");
    assert!(done[..21].iter().all(|d| ids.contains(&d.as_str())));
    assert!(ids.iter().all(|i| done[..23].iter().any(|d| d == i)));
    assert!(!ids.contains(&owed.as_str()) && !ids.contains(&parked.as_str()));
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
    assert!(msg.contains("exported 22 task(s)"), "{msg}");
    let csv = std::fs::read_to_string(&out).unwrap();
    assert_eq!(csv.lines().count(), 23, "{csv}");
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
    assert_eq!(body["files"][0]["tasks"], 22, "{body}");
}

/// The UI reads a task retention archived from the archive: the task, its
/// turns and decisions, rendered, and its files; an id the archive does not
/// hold is a 404.
#[tokio::test]
async fn an_archived_task_and_its_files_are_read_back_over_the_ui_api() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let api = Api::new(&s);
    let with_file = c
        .rpc_ok(
            "auto",
            "SendMessage",
            json!({"message": {"messageId": "m-file", "role": "ROLE_USER", "parts": [
                {"text": "the **notes**"},
                {"raw": "aGVsbG8gYXJjaGl2ZQ==", "filename": "notes.txt", "mediaType": "text/plain"}]}}),
        )
        .await;
    let id = with_file["task"]["id"].as_str().unwrap().to_owned();
    let mut newest = String::new();
    for i in 0..10 {
        let t = c
            .send_text("auto", &format!("m-{i}"), &format!("job {i}"))
            .await;
        newest = t["task"]["id"].as_str().unwrap().to_owned();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while api
        .call(reqwest::Method::GET, &format!("/tasks/{id}"), None)
        .await
        .0
        != 404
    {
        assert!(
            Instant::now() < deadline,
            "the task was not archived in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let (status, d) = api
        .call(reqwest::Method::GET, &format!("/archives/tasks/{id}"), None)
        .await;
    assert_eq!(status, 200, "{d}");
    assert_eq!(d["task"]["id"], id.as_str());
    assert_eq!(d["agentId"], "auto");
    assert_eq!(d["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(
        d["archivedAt"]
            .as_str()
            .is_some_and(|t| t.starts_with("20")),
        "{d}"
    );
    let parts = &d["rendered"]["history"][0]["parts"];
    assert_eq!(
        parts[0]["html"], "<p>the <strong>notes</strong></p>\n",
        "{d}"
    );
    let url = parts[1]["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("/api/archives/tasks/{id}/files/message/m-file/")),
        "{url}"
    );
    let r = c
        .http
        .get(s.url(url))
        .bearer_auth(s.ui_token())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let disposition = r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(disposition.starts_with("attachment;") && disposition.contains("notes.txt"));
    assert_eq!(r.text().await.unwrap(), "hello archive");

    // Not archived (still here), never here, a part that is not there, and no token.
    for (path, want) in [
        (format!("/archives/tasks/{newest}"), 404),
        ("/archives/tasks/no-such-task".to_owned(), 404),
        (format!("/archives/tasks/{id}/files/message/m-file/7"), 404),
        (format!("/archives/tasks/{id}/files/status/m-file/1"), 404),
    ] {
        let (status, body) = api.call(reqwest::Method::GET, &path, None).await;
        assert_eq!(status, want, "{path}: {body}");
        assert!(body["error"]["message"].is_string(), "{path}: {body}");
    }
    let (_, body) = api
        .call(reqwest::Method::GET, "/archives/tasks/no-such-task", None)
        .await;
    assert_eq!(
        body["error"]["message"],
        "the archive holds no task `no-such-task`"
    );
    let anonymous = c
        .http
        .get(s.url(&format!("/api/archives/tasks/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);

    // A damaged record (its task unreadable) is a 500 that says so, and the
    // server goes on serving the rest of the archive.
    let damaged = s.data_dir.join("archive").join("tasks-2020-01.jsonl.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&damaged).unwrap(),
        flate2::Compression::default(),
    );
    let task =
        |id: &str| json!({"id": id, "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}});
    let lines = [
        json!({"task": {"id": "damaged"}}),
        // Its task reads, one of its chain hops does not.
        json!({"task": task("bad-hop"), "agentId": "auto", "hops": [{"id": 7}]}),
        // From before records kept chain links: none.
        json!({"task": task("no-hops"), "agentId": "auto", "archivedAt": "2020-01-31T00:00:00.000Z"}),
    ];
    for line in lines {
        std::io::Write::write_all(&mut gz, format!("{line}\n").as_bytes()).unwrap();
    }
    gz.finish().unwrap();
    for id in ["damaged", "bad-hop"] {
        let (status, body) = api
            .call(reqwest::Method::GET, &format!("/archives/tasks/{id}"), None)
            .await;
        assert_eq!(status, 500, "{id}: {body}");
        assert_eq!(
            body["error"]["message"],
            "cannot read the archive; see the server log"
        );
    }
    let (status, body) = api
        .call(reqwest::Method::GET, "/archives/tasks/no-hops", None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["chain"], json!({"parent": null, "children": []}));
    let (status, _) = api
        .call(reqwest::Method::GET, &format!("/archives/tasks/{id}"), None)
        .await;
    assert_eq!(status, 200);
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
