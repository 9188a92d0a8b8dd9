//! Peers from the command line: `countersign peers add/list/remove`, `send
//! --watch`, `subscribe` and `deliveries` against a real running instance,
//! with a second `countersign serve` playing the peer.

mod common;
use common::*;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The peer: a scripted agent `bot` that asks before deploying and
/// completes once the decision arrives.
const PEER: &str = r#"
[[agents]]
id = "bot"
backend = "scripted"
[[agents.rules]]
text = "(?i)^deploy"
steps = [{ status = { state = "input-required", text = "Which environment?" } }]
[[agents.rules]]
message_id_prefix = "decision-"
steps = [{ complete = "Deploying now" }]
"#;

/// Here: no peer configured (the CLI adds it), a fast sweep.
const LOCAL: &str = "[webhooks]\nsweep_secs = 1\n\n[[agents]]\nid = \"inbox\"\n";

/// Runs `countersign ARGS… --data-dir DIR` to its end (at most 60 s).
async fn cs(dir: &Path, args: &[&str]) -> Run {
    run_cli(dir, args, Duration::from_secs(60)).await
}

/// Runs a CLI command that must succeed (at most 60 s); returns its stdout.
async fn cs_ok(dir: &Path, args: &[&str]) -> String {
    run_cli_ok(dir, args, Duration::from_secs(60)).await
}

/// Polls until `check` holds for a CLI command's stdout (at most 10 s).
async fn until(dir: &Path, args: &[&str], check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = cs_ok(dir, args).await;
        if check(&out) {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "countersign {args:?} never got there:\n{out}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_peer_added_from_the_cli_runs_a_watched_task_to_a_decision() {
    let peer = Server::start(Some(PEER));
    let local = Server::start(Some(LOCAL));
    let dir = local.data_dir.as_path();
    let url = format!("{}/a2a/bot", peer.base);

    let added = cs_ok(
        dir,
        &[
            "peers",
            "add",
            &url,
            "--name",
            "Deploy Bot",
            "--header",
            "X-Team: blue",
        ],
    )
    .await;
    let added = added.trim();
    assert!(added.starts_with("added peer deploy-bot: "), "{added}");
    assert!(added.ends_with(&format!("({url})")), "{added}");

    let listed = cs_ok(dir, &["peers", "list"]).await;
    assert!(listed.starts_with("ID"), "{listed}");
    for column in ["NAME", "URL", "CARD AGE"] {
        assert!(listed.lines().next().unwrap().contains(column), "{listed}");
    }
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("deploy-bot") && l.contains("Deploy Bot") && l.contains(&url)),
        "{listed}"
    );
    let as_json: Value = serde_json::from_str(&cs_ok(dir, &["peers", "list", "--json"]).await)
        .expect("--json prints JSON");
    assert_eq!(as_json["peers"][0]["id"], "deploy-bot");
    assert!(as_json["peers"][0]["card"]["name"].is_string(), "{as_json}");

    // Start a task and watch it park.
    let watched = cs(dir, &["send", "deploy-bot", "deploy x", "--watch"]).await;
    assert_eq!(watched.code, Some(0), "{watched:?}");
    let first = watched.stdout.lines().next().unwrap_or_default();
    let id = first
        .strip_prefix("started task ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("no start line: {watched:?}"))
        .to_owned();
    assert!(first.contains(" on deploy-bot: "), "{watched:?}");
    assert!(
        watched
            .stdout
            .lines()
            .any(|l| l == "input-required Which environment?"),
        "{watched:?}"
    );
    assert_eq!(
        watched.stdout.lines().last(),
        Some(format!("parked: decide with countersign approve|reply|reject {id}").as_str()),
        "{watched:?}"
    );
    let parked = cs_ok(dir, &["tasks", "--parked"]).await;
    assert!(
        parked
            .lines()
            .any(|l| l.contains(&id) && l.contains("deploy-bot")),
        "{parked}"
    );

    // Decide with the existing command; the peer's task completes.
    let approved = cs_ok(dir, &["approve", &id, "--comment", "staging"]).await;
    assert!(
        approved.starts_with(&format!("approved {id} (")),
        "{approved}"
    );
    until(dir, &["show", &id], |s| s.contains("state    completed")).await;
    let shown: Value = serde_json::from_str(&cs_ok(dir, &["show", &id, "--json"]).await).unwrap();
    let decision = shown["decisions"][0]["id"]
        .as_str()
        .expect("a decision")
        .to_owned();

    // Its delivery shows in the outbox.
    let page = until(dir, &["deliveries", "--json"], |out| {
        serde_json::from_str::<Value>(out).is_ok_and(|v| {
            v["items"].as_array().is_some_and(|items| {
                items
                    .iter()
                    .any(|i| i["refId"] == decision.as_str() && i["status"] == "delivered")
            })
        })
    })
    .await;
    let page: Value = serde_json::from_str(&page).unwrap();
    let item = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["refId"] == decision.as_str())
        .unwrap();
    assert_eq!(item["kind"], "decision");
    assert_eq!(item["peerId"], "deploy-bot");
    let table = cs_ok(dir, &["deliveries"]).await;
    let header = table.lines().next().unwrap_or_default();
    for column in [
        "ID",
        "KIND",
        "FOR",
        "STATUS",
        "ATTEMPTS",
        "AGE",
        "LAST ERROR",
    ] {
        assert!(header.contains(column), "{table}");
    }
    let row = table
        .lines()
        .find(|l| l.starts_with(item["id"].as_str().unwrap()))
        .unwrap_or_else(|| panic!("{item} not listed:\n{table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells[1..4],
        ["decision", "deploy-bot", "delivered"],
        "{row}"
    );
    let failed = cs_ok(dir, &["deliveries", "--failed"]).await;
    assert_eq!(failed.trim(), "no failed deliveries");

    // A subscription for another tool's push config.
    let sub = cs_ok(dir, &["subscribe", "deploy-bot"]).await;
    let lines: Vec<&str> = sub.lines().collect();
    assert_eq!(lines.len(), 2, "{sub}");
    let hook = lines[0].strip_prefix("url: ").expect("url line");
    let token = lines[1].strip_prefix("token: ").expect("token line");
    assert!(
        hook.starts_with(&local.base) && hook.contains("/webhooks/"),
        "{sub}"
    );
    assert!(!token.is_empty(), "{sub}");
    let pushed = reqwest::Client::new()
        .post(hook)
        .header("X-A2A-Notification-Token", token)
        .json(&json!({"task": {"id": "nope"}}))
        .send()
        .await
        .unwrap();
    let status = pushed.status().as_u16();
    assert!(
        status != 401 && status != 404,
        "the URL and token are accepted (the peer has no such task): {status}"
    );

    // Removed once; the second time there is nothing to remove.
    let removed = cs_ok(dir, &["peers", "remove", "deploy-bot"]).await;
    assert_eq!(removed.trim(), "removed peer deploy-bot");
    let again = cs(dir, &["peers", "remove", "deploy-bot"]).await;
    assert_eq!(again.code, Some(1), "{again:?}");
    let listed = cs_ok(dir, &["peers", "list"]).await;
    assert_eq!(listed.trim(), "no peers yet");
}

#[tokio::test]
async fn send_without_watch_prints_the_start_and_files_travel() {
    let peer = Server::start(Some(PEER));
    let local = Server::start(Some(LOCAL));
    let dir = local.data_dir.as_path();
    let url = format!("{}/a2a/bot", peer.base);
    cs_ok(dir, &["peers", "add", &url, "--id", "bot"]).await;
    let file = local.data_dir.join("plan.md");
    std::fs::write(&file, "# plan").unwrap();

    let out = cs_ok(
        dir,
        &[
            "send",
            "bot",
            "deploy the docs",
            "--file",
            file.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(out.lines().count(), 1, "{out}");
    let id = out
        .strip_prefix("started task ")
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("{out}"))
        .to_owned();
    assert!(out.contains(" on bot: "), "{out}");
    let shown: Value = serde_json::from_str(&cs_ok(dir, &["show", &id, "--json"]).await).unwrap();
    assert_eq!(shown["agentId"], "bot", "{shown}");
    let parts = &shown["task"]["history"][0]["parts"];
    assert_eq!(parts[0]["text"], "deploy the docs", "{shown}");
    assert_eq!(parts[1]["filename"], "plan.md", "{shown}");
    assert_eq!(parts[1]["mediaType"], "text/markdown", "{shown}");
    assert_eq!(parts[1]["raw"], "IyBwbGFu", "{shown}");
}

#[tokio::test]
async fn peer_commands_refuse_with_1_and_misuse_exits_2() {
    let local = Server::start(Some(LOCAL));
    let dir = local.data_dir.as_path();

    let gone = cs(
        dir,
        &["peers", "add", "http://127.0.0.1:9/", "--id", "gone"],
    )
    .await;
    assert_eq!(gone.code, Some(1), "{gone:?}");
    assert!(gone.stderr.contains("peer"), "{gone:?}");
    assert_eq!(gone.stderr.trim().lines().count(), 1, "one line: {gone:?}");
    assert!(
        !gone.stderr.contains("the instance failed"),
        "the peer failed, not the instance: {gone:?}"
    );

    let bad = cs(
        dir,
        &["peers", "add", "http://127.0.0.1:9/", "--header", "bad"],
    )
    .await;
    assert_eq!(bad.code, Some(2), "{bad:?}");
    assert!(bad.stderr.contains("--header"), "{bad:?}");
    let bad = cs(
        dir,
        &[
            "peers",
            "add",
            "http://127.0.0.1:9/",
            "--api-key-header",
            "X-Key",
        ],
    )
    .await;
    assert_eq!(
        bad.code,
        Some(2),
        "--api-key-header needs --api-key: {bad:?}"
    );
    let bad = cs(dir, &["send", "nope"]).await;
    assert_eq!(bad.code, Some(2), "a missing text: {bad:?}");

    let unknown = cs(dir, &["send", "nope", "deploy x", "--watch"]).await;
    assert_eq!(unknown.code, Some(1), "{unknown:?}");
    assert!(unknown.stderr.contains("nope"), "{unknown:?}");
    assert!(unknown.stdout.is_empty(), "{unknown:?}");
    let unknown = cs(dir, &["subscribe", "nope"]).await;
    assert_eq!(unknown.code, Some(1), "{unknown:?}");
    let unknown = cs(dir, &["peers", "remove", "nope"]).await;
    assert_eq!(unknown.code, Some(1), "{unknown:?}");

    let listed = cs_ok(dir, &["peers", "list"]).await;
    assert_eq!(listed.trim(), "no peers yet", "nothing was added");
    let none = cs_ok(dir, &["deliveries"]).await;
    assert_eq!(none.trim(), "no deliveries yet");
}

#[tokio::test]
async fn without_a_running_instance_the_peer_commands_say_so() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        &["peers", "list"][..],
        &["peers", "add", "http://127.0.0.1:9/"],
        &["peers", "remove", "x"],
        &["send", "x", "hi"],
        &["subscribe", "x"],
        &["deliveries"],
    ] {
        let r = cs(tmp.path(), args).await;
        assert_eq!(r.code, Some(1), "{args:?}: {r:?}");
        assert!(
            r.stderr.contains("no Countersign server is running"),
            "{args:?}: {r:?}"
        );
    }
}

/// `send` whose instance stops before it answers says so, and that a send
/// the instance had begun goes out when it starts again; after the
/// restart, `deliveries` shows it owed.
#[tokio::test]
async fn a_send_cut_off_by_a_stop_says_what_becomes_of_it() {
    // A peer that takes its time over its card: the send waits on it. It
    // says when it is asked (the send is under way by then).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peer_url = format!("http://{}/", listener.local_addr().unwrap());
    let asked = std::sync::Arc::new(tokio::sync::Notify::new());
    let slow = axum::Router::new().fallback({
        let asked = asked.clone();
        move || async move {
            asked.notify_one();
            tokio::time::sleep(Duration::from_secs(30)).await;
            "late"
        }
    });
    tokio::spawn(async move { axum::serve(listener, slow).await.unwrap() });
    let config = format!("{LOCAL}\n[[peers]]\nid = \"slow\"\nurl = \"{peer_url}\"\n");
    let dir = tempfile::tempdir().unwrap();
    let mut local = Server::start_in(dir.path(), Some(&config), &[]);
    let sending = tokio::spawn({
        let dir = dir.path().to_path_buf();
        async move { cs(&dir, &["send", "slow", "deploy the docs"]).await }
    });
    tokio::time::timeout(Duration::from_secs(30), asked.notified())
        .await
        .expect("the send reached the peer");
    local.kill9();
    let cut = sending.await.unwrap();
    assert_eq!(cut.code, Some(1), "{cut:?}");
    assert!(cut.stderr.contains("stopped answering"), "{cut:?}");
    assert!(cut.stderr.contains("countersign deliveries"), "{cut:?}");
    assert_eq!(cut.stderr.trim().lines().count(), 1, "one line: {cut:?}");

    let _local = Server::start_in(dir.path(), Some(&config), &[]);
    let owed: Value =
        serde_json::from_str(&cs_ok(dir.path(), &["deliveries", "--json"]).await).unwrap();
    let items = owed["items"].as_array().unwrap();
    assert!(
        items
            .iter()
            .any(|i| i["kind"] == "start" && i["status"] == "pending"),
        "{owed}"
    );
}
