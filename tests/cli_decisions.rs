//! Deciding from the command line: `countersign tasks/show/approve/reply/
//! reject/history` against a real running instance (found through its data
//! dir), as seen by the A2A caller whose task was parked.

mod common;
use common::*;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Runs `countersign ARGS… --data-dir DIR` to its end (at most 30 s).
async fn cs(dir: &Path, args: &[&str]) -> Run {
    run_cli(dir, args, Duration::from_secs(30)).await
}

/// Runs a CLI command that must succeed (at most 30 s); returns its stdout.
async fn cs_ok(dir: &Path, args: &[&str]) -> String {
    run_cli_ok(dir, args, Duration::from_secs(30)).await
}

/// Parks a task at the `human` agent `inbox` (a blocking SendMessage, which
/// a human agent answers at once with input-required); returns its id.
async fn park(c: &Client, message_id: &str, text: &str) -> String {
    let r = c.send_text("inbox", message_id, text).await;
    assert_eq!(state(&r["task"]), "TASK_STATE_INPUT_REQUIRED", "{r}");
    r["task"]["id"].as_str().unwrap().to_owned()
}

/// The task as its caller sees it (GetTask).
async fn get_task(c: &Client, id: &str) -> Value {
    c.rpc_ok("inbox", "GetTask", json!({"id": id})).await
}

#[tokio::test]
async fn approve_from_the_cli_completes_the_callers_task_once() {
    let s = Server::start(None);
    let c = s.client();
    let dir = s.data_dir.as_path();
    let id = park(
        &c,
        "m-approve",
        "May I deploy v2 to production?\nDetails: …",
    )
    .await;

    let listed = cs_ok(dir, &["tasks", "--parked"]).await;
    let row = listed
        .lines()
        .find(|l| l.contains(&id))
        .unwrap_or_else(|| panic!("{id} not listed:\n{listed}"));
    assert!(row.contains("inbox"), "{row}");
    assert!(row.contains("input-required"), "{row}");
    assert!(row.contains("May I deploy v2 to production?"), "{row}");
    assert!(!row.contains("Details"), "only the first line: {row}");

    let shown = cs_ok(dir, &["show", &id]).await;
    assert!(shown.contains("input-required"), "{shown}");
    assert!(shown.contains("inbox"), "{shown}");
    assert!(shown.contains("user:"), "{shown}");
    assert!(shown.contains("May I deploy v2 to production?"), "{shown}");
    let as_json: Value = serde_json::from_str(&cs_ok(dir, &["show", &id, "--json"]).await).unwrap();
    assert_eq!(as_json["task"]["id"], json!(id));
    assert_eq!(as_json["openTurn"]["taskId"], json!(id));

    let approved = cs_ok(dir, &["approve", &id, "--comment", "ship it"]).await;
    assert_eq!(approved.trim(), format!("approved {id} (delivered)"));

    let t = get_task(&c, &id).await;
    assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{t}");
    assert_eq!(
        t["artifacts"][0]["parts"][0]["data"],
        json!({"decision": "approve", "comment": "ship it"}),
        "{t}"
    );
    assert_eq!(
        t["status"]["message"]["parts"][0]["text"],
        "Approved. ship it"
    );

    let decided: Value = serde_json::from_str(&cs_ok(dir, &["show", &id, "--json"]).await).unwrap();
    let first = decided["decisions"][0]["id"]
        .as_str()
        .expect("a decision")
        .to_owned();
    let again = cs(dir, &["reject", &id, "--reason", "changed my mind"]).await;
    assert_eq!(again.code, Some(1), "{again:?}");
    assert!(again.stderr.contains("already decided"), "{again:?}");
    for want in ["approve by cli", first.as_str(), "delivered", "ship it"] {
        assert!(
            again.stderr.contains(want),
            "the first decision ({want}): {again:?}"
        );
    }
    assert_eq!(
        again.stderr.trim().lines().count(),
        1,
        "one line: {again:?}"
    );

    let parked = cs_ok(dir, &["tasks", "--parked"]).await;
    assert!(!parked.contains(&id), "no longer parked:\n{parked}");
    let recent = cs_ok(dir, &["tasks"]).await;
    assert!(
        recent
            .lines()
            .any(|l| l.contains(&id) && l.contains("completed")),
        "{recent}"
    );
    let shown = cs_ok(dir, &["show", &id]).await;
    assert!(shown.contains("completed"), "{shown}");
    assert!(shown.contains("approve by cli"), "{shown}");
    assert!(shown.contains("Approved. ship it"), "{shown}");
}

#[tokio::test]
async fn reply_from_the_cli_sends_text_data_and_a_file() {
    let s = Server::start(None);
    let c = s.client();
    let dir = s.data_dir.as_path();
    let id = park(&c, "m-reply", "Which plan?").await;
    let file = s.data_dir.join("notes.txt");
    std::fs::write(&file, "hi").unwrap();

    let out = cs_ok(
        dir,
        &[
            "reply",
            &id,
            "Plan B",
            "--data",
            r#"{"a":1}"#,
            "--file",
            file.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(out.trim(), format!("replied to {id} (delivered)"));

    let t = get_task(&c, &id).await;
    assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{t}");
    assert_eq!(
        t["status"]["message"]["parts"],
        json!([
            {"text": "Plan B"},
            {"data": {"a": 1}},
            {"raw": "aGk=", "filename": "notes.txt", "mediaType": "text/plain"}
        ]),
        "{t}"
    );
    let shown = cs_ok(dir, &["show", &id]).await;
    assert!(shown.contains("Plan B"), "{shown}");
    assert!(shown.contains("\"a\": 1"), "data as JSON: {shown}");
    assert!(shown.contains("notes.txt (text/plain, 2 B)"), "{shown}");
}

#[tokio::test]
async fn reject_from_the_cli_rejects_the_task_with_the_reason() {
    let s = Server::start(None);
    let c = s.client();
    let dir = s.data_dir.as_path();
    let id = park(&c, "m-reject", "Delete the database?").await;
    let out = cs_ok(dir, &["reject", &id, "--reason", "too risky"]).await;
    assert_eq!(out.trim(), format!("rejected {id} (delivered)"));
    let t = get_task(&c, &id).await;
    assert_eq!(state(&t), "TASK_STATE_REJECTED", "{t}");
    assert_eq!(
        t["status"]["message"]["parts"][0]["text"],
        "Rejected. too risky"
    );
}

#[tokio::test]
async fn refusals_exit_1_and_usage_errors_exit_2() {
    let s = Server::start(None);
    let c = s.client();
    let dir = s.data_dir.as_path();

    let unknown = cs(dir, &["approve", "no-such-task"]).await;
    assert_eq!(unknown.code, Some(1), "{unknown:?}");
    assert!(unknown.stderr.contains("no-such-task"), "{unknown:?}");
    let unknown = cs(dir, &["show", "no-such-task"]).await;
    assert_eq!(unknown.code, Some(1), "{unknown:?}");

    let id = park(&c, "m-usage", "Anything?").await;
    let bad = cs(dir, &["reply", &id, "x", "--data", "{bad"]).await;
    assert_eq!(bad.code, Some(2), "{bad:?}");
    assert!(bad.stderr.contains("--data"), "{bad:?}");
    let missing = s.data_dir.join("no-such-file.txt");
    let bad = cs(
        dir,
        &["reply", &id, "x", "--file", missing.to_str().unwrap()],
    )
    .await;
    assert_eq!(bad.code, Some(2), "{bad:?}");
    let bad = cs(dir, &["approve"]).await;
    assert_eq!(bad.code, Some(2), "a missing id: {bad:?}");

    let empty = cs(dir, &["reply", &id, ""]).await;
    assert_eq!(empty.code, Some(1), "an empty reply is refused: {empty:?}");

    // Nothing of that reached the task.
    assert_eq!(state(&get_task(&c, &id).await), "TASK_STATE_INPUT_REQUIRED");
}

#[tokio::test]
async fn without_a_running_instance_the_cli_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        &["tasks", "--parked"][..],
        &["show", "x"],
        &["approve", "x"],
        &["history"],
    ] {
        let r = cs(tmp.path(), args).await;
        assert_eq!(r.code, Some(1), "{args:?}: {r:?}");
        assert!(
            r.stderr.contains("no Countersign server is running"),
            "{args:?}: {r:?}"
        );
    }
}

/// The ids in the first column of a CLI table (its header and notes left out).
fn listed(table: &str) -> Vec<&str> {
    table
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with(['(', '*']))
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

#[tokio::test]
async fn tasks_and_history_narrow_by_agent_state_and_words_and_take_a_limit() {
    let s = Server::start(Some(
        "[[agents]]\nid = \"inbox\"\n[[agents]]\nid = \"ops\"\n",
    ));
    let c = s.client();
    let dir = s.data_dir.as_path();
    let park_at = async |agent: &str, mid: &str, text: &str| {
        let r = c.send_text(agent, mid, text).await;
        assert_eq!(state(&r["task"]), "TASK_STATE_INPUT_REQUIRED", "{r}");
        r["task"]["id"].as_str().unwrap().to_owned()
    };
    let invoice = park_at("inbox", "m-f1", "Pay the invoice from Acme?").await;
    let deploy = park_at("ops", "m-f2", "Deploy v2 to production?").await;
    let restart = park_at("ops", "m-f3", "Restart the invoice service?").await;

    let parked = |args: &'static [&'static str]| {
        let mut all = vec!["tasks", "--parked"];
        all.extend_from_slice(args);
        all
    };
    let out = cs_ok(dir, &parked(&["--agent", "ops"])).await;
    assert_eq!(listed(&out), [deploy.as_str(), restart.as_str()], "{out}");
    let out = cs_ok(dir, &parked(&["--search", "invoi"])).await;
    assert_eq!(listed(&out), [invoice.as_str(), restart.as_str()], "{out}");
    let out = cs_ok(dir, &parked(&["--agent", "ops", "--search", "invoice"])).await;
    assert_eq!(listed(&out), [restart.as_str()], "{out}");
    let out = cs_ok(dir, &parked(&["--state", "auth-required"])).await;
    assert_eq!(out, "no task waiting for a decision matches\n");
    let out = cs_ok(dir, &parked(&["--state", "input-required", "--limit", "1"])).await;
    assert_eq!(listed(&out), [invoice.as_str()], "{out}");
    assert!(
        out.contains("(1 of 3 shown; --limit N lists up to 500)"),
        "{out}"
    );
    let out = cs_ok(dir, &["tasks", "--limit", "2"]).await;
    assert_eq!(listed(&out), [restart.as_str(), deploy.as_str()], "{out}");
    assert!(out.contains("(older tasks not shown"), "{out}");
    // Recent tasks (any state) narrow by agent too, and page on.
    let out = cs_ok(dir, &["tasks", "--agent", "inbox"]).await;
    assert_eq!(listed(&out), [invoice.as_str()], "{out}");
    let out = cs_ok(dir, &["tasks", "--agent", "ops", "--limit", "1"]).await;
    assert_eq!(listed(&out), [restart.as_str()], "{out}");
    assert!(out.contains("(older tasks not shown"), "{out}");
    let out = cs_ok(dir, &["tasks", "--agent", "nobody"]).await;
    assert_eq!(out, "no task matches\n");
    let api = Api::new(&s);
    let (_, first) = api
        .call(reqwest::Method::GET, "/tasks?agent=ops&limit=1", None)
        .await;
    let cursor = first["nextCursor"].as_str().unwrap();
    let (_, next) = api
        .call(
            reqwest::Method::GET,
            &format!("/tasks?agent=ops&limit=1&cursor={cursor}"),
            None,
        )
        .await;
    assert_eq!(next["items"][0]["id"], deploy.as_str(), "{next}");
    assert!(next.get("nextCursor").is_none(), "{next}");
    // A cursor of the older form (time and rowid, without the state the
    // list is ordered by since migration 19) is refused, not misread.
    use base64::Engine as _;
    let older = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("1800000000000:2");
    let (status, body) = api
        .call(
            reqwest::Method::GET,
            &format!("/tasks?agent=ops&limit=1&cursor={older}"),
            None,
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.to_string().contains("is not one this server issued"),
        "{body}"
    );
    let page: Value =
        serde_json::from_str(&cs_ok(dir, &parked(&["--agent", "inbox", "--json"])).await).unwrap();
    assert_eq!(page["total"], 1, "{page}");

    cs_ok(dir, &["approve", &invoice]).await;
    cs_ok(dir, &["reject", &deploy, "--reason", "not on a Friday"]).await;
    cs_ok(dir, &["approve", &restart, "--comment", "quietly"]).await;
    let out = cs_ok(dir, &["history", "--agent", "ops"]).await;
    assert_eq!(listed(&out), [restart.as_str(), deploy.as_str()], "{out}");
    // Recent tasks by the state they ended in.
    let out = cs_ok(dir, &["tasks", "--state", "rejected"]).await;
    assert_eq!(listed(&out), [deploy.as_str()], "{out}");
    let out = cs_ok(dir, &["tasks", "--state", "completed", "--agent", "ops"]).await;
    assert_eq!(listed(&out), [restart.as_str()], "{out}");
    let out = cs_ok(dir, &["tasks", "--state", "input-required"]).await;
    assert_eq!(out, "no task matches\n");
    let (status, body) = api
        .call(reqwest::Method::GET, "/tasks?state=done", None)
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["message"], "unknown state `done`");
    // Recent tasks, any state, by the words of their request (or id),
    // without case, newest change first.
    let out = cs_ok(dir, &["tasks", "--search", "INVOICE"]).await;
    assert_eq!(listed(&out), [restart.as_str(), invoice.as_str()], "{out}");
    let out = cs_ok(dir, &["tasks", "--search", "acme invoice"]).await;
    assert_eq!(listed(&out), [invoice.as_str()], "{out}");
    let out = cs_ok(dir, &["tasks", "--search", "invoice", "--agent", "ops"]).await;
    assert_eq!(listed(&out), [restart.as_str()], "{out}");
    let out = cs_ok(dir, &["tasks", "--search", &deploy[deploy.len() - 12..]]).await;
    assert_eq!(listed(&out), [deploy.as_str()], "by its id: {out}");
    let out = cs_ok(
        dir,
        &["tasks", "--search", "invoice", "--state", "rejected"],
    )
    .await;
    assert_eq!(out, "no task matches\n");
    let (status, page) = api
        .call(reqwest::Method::GET, "/tasks?q=invoice&limit=1", None)
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["items"][0]["id"], restart.as_str(), "{page}");
    assert_eq!(
        page["searched"], 1,
        "the page stopped at its first match: {page}"
    );
    let cursor = page["nextCursor"].as_str().expect("a cursor to read on");
    let (_, next) = api
        .call(
            reqwest::Method::GET,
            &format!("/tasks?q=invoice&limit=1&cursor={cursor}"),
            None,
        )
        .await;
    assert_eq!(next["items"][0]["id"], invoice.as_str(), "{next}");
    assert_eq!(next["searched"], 2, "deploy, then invoice: {next}");
    // Every search has the same bounds: the queue's and the history's
    // walk the index once per word.
    for screen in ["tasks", "queue", "history"] {
        for (words, want) in [(32, 200), (33, 400)] {
            let query = format!("/{screen}?q={}", vec!["w"; words].join("+"));
            let (status, body) = api.call(reqwest::Method::GET, &query, None).await;
            assert_eq!(status, want, "{screen}, {words} words: {body}");
            if want == 400 {
                assert_eq!(
                    body["error"]["message"],
                    "a search takes at most 32 words and 1,000 characters"
                );
            }
        }
        // Characters are counted, not bytes: 1,000 of three bytes each pass.
        for (chars, want) in [(1_000, 200), (1_001, 400)] {
            let query = format!("/{screen}?q={}", "請".repeat(chars));
            let (status, body) = api.call(reqwest::Method::GET, &query, None).await;
            assert_eq!(status, want, "{screen}, {chars} characters: {body}");
            if want == 200 {
                assert_eq!(body["items"], serde_json::json!([]), "{screen}: {body}");
            }
        }
    }
    let out = cs(dir, &["history", "--search", &vec!["w"; 33].join(" ")]).await;
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr.contains("at most 32 words"),
        "the CLI says why: {out:?}"
    );
    let out = cs_ok(dir, &["history", "--search", "friday"]).await;
    assert_eq!(listed(&out), [deploy.as_str()], "{out}");
    let out = cs_ok(dir, &["history", "--search", "nothing-like-it"]).await;
    assert_eq!(out, "no decision matches\n");
    let out = cs_ok(dir, &["history", "--limit", "1"]).await;
    assert_eq!(listed(&out), [restart.as_str()], "{out}");
    assert!(out.contains("(older decisions not shown"), "{out}");

    // Usage errors, before anything is asked of the server.
    for args in [
        &["tasks", "--state", "done"][..],
        &["tasks", "--parked", "--state", "completed"],
        &["tasks", "--limit", "0"],
        &["tasks", "--limit", "501"],
        &["history", "--limit", "many"],
        &["tasks", "--parked", "--state", "working"],
    ] {
        let r = cs(dir, args).await;
        assert_eq!(r.code, Some(2), "{args:?}: {r:?}");
    }
}

#[tokio::test]
async fn history_lists_the_decisions_taken() {
    let s = Server::start(None);
    let c = s.client();
    let dir = s.data_dir.as_path();
    let a = park(&c, "m-h1", "First request").await;
    let b = park(&c, "m-h2", "Second request").await;
    cs_ok(dir, &["approve", &a]).await;
    cs_ok(dir, &["reject", &b, "--reason", "no"]).await;

    let page: Value = serde_json::from_str(&cs_ok(dir, &["history", "--json"]).await).unwrap();
    let items = page["items"].as_array().expect("items");
    let got: Vec<(&str, &str, &str)> = items
        .iter()
        .map(|i| {
            (
                i["decision"]["taskId"].as_str().unwrap(),
                i["decision"]["kind"].as_str().unwrap(),
                i["decision"]["actor"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (b.as_str(), "reject", "cli"),
            (a.as_str(), "approve", "cli")
        ]
    );

    let table = cs_ok(dir, &["history"]).await;
    assert!(
        table
            .lines()
            .any(|l| l.contains(&a) && l.contains("approve") && l.contains("First request")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.contains(&b) && l.contains("reject")),
        "{table}"
    );
}

#[tokio::test]
async fn callers_waiting_by_blocking_streaming_or_polling_all_see_the_decision() {
    let s = Server::start(None);
    let c = s.client();
    let dir = s.data_dir.as_path();

    // Blocking: a human agent parks at once, so a blocking send returns.
    let started = Instant::now();
    let r = c
        .rpc_ok(
            "inbox",
            "SendMessage",
            json!({"message": message("m-wait", "Proceed?"),
                   "configuration": {"returnImmediately": false}}),
        )
        .await;
    assert_eq!(state(&r["task"]), "TASK_STATE_INPUT_REQUIRED", "{r}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "blocked {:?}",
        started.elapsed()
    );
    let id = r["task"]["id"].as_str().unwrap().to_owned();

    // Streaming: a subscription opened before the decision.
    let resp = c
        .http
        .post(format!("{}/a2a/inbox", c.base))
        .header("A2A-Version", "1.0")
        .header("Accept", "text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": "sub", "method": "SubscribeToTask", "params": {"id": id}}))
        .send()
        .await
        .unwrap();
    let mut sub = SseStream::new(resp);
    let first = sub.next().await.expect("the task first");
    assert_eq!(
        state(&first["result"]["task"]),
        "TASK_STATE_INPUT_REQUIRED",
        "{first}"
    );

    cs_ok(dir, &["approve", &id, "--comment", "go"]).await;

    let rest = sub.rest().await;
    let last = rest.last().expect("events after the decision");
    assert_eq!(
        last["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{rest:?}"
    );

    // Polling: GetTask sees the final state.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let t = get_task(&c, &id).await;
        if state(&t) == "TASK_STATE_COMPLETED" {
            assert_eq!(t["status"]["message"]["parts"][0]["text"], "Approved. go");
            break;
        }
        assert!(Instant::now() < deadline, "still {t}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
