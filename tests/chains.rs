//! Chain rules across two real servers: a task approved on A completes and
//! its result arrives at peer B (a second `countersign serve`) as a new,
//! linked, watched task; a gated hop waits for the person; a rule that would
//! loop is refused with the reason. Rules are managed by CLI and UI API.
mod common;

use std::path::Path;
use std::time::Duration;

use common::{Server, message, run_cli, run_cli_ok};
use serde_json::{Value, json};

/// B: a human inbox that may push to A on loopback.
const PEER_B: &str = "[outbound]\nallow = [\"127.0.0.1\"]\n\n[[agents]]\nid = \"inbox\"\n";

fn config_a(b: &Server) -> String {
    format!(
        r#"[webhooks]
sweep_secs = 1

[[agents]]
id = "inbox"

[[agents]]
id = "review"

[[peers]]
id = "b"
url = "{b}"

# Approved on A ⇒ on to B.
[[chains]]
id = "to-b"
trigger = {{ agent = "inbox" }}
action = {{ kind = "send", peer = "b", template = "Approved on A: {{{{request.text}}}} ({{{{task.id}}}})" }}

# B's tasks that complete go back to B: a loop, refused on its second turn.
[[chains]]
id = "echo"
trigger = {{ peer = "b", states = ["completed"] }}
action = {{ kind = "send", peer = "b", template = "again: {{{{status.text}}}}" }}

# Reviews pass to B only when the person says so.
[[chains]]
id = "gated"
gate = true
trigger = {{ agent = "review" }}
action = {{ kind = "send", peer = "b", template = "Reviewed: {{{{request.text}}}}", context = "same" }}
"#,
        b = b.url("/a2a/inbox")
    )
}

async fn cli_json(dir: &Path, args: &[&str]) -> Value {
    let mut all: Vec<&str> = args.to_vec();
    all.push("--json");
    let out = run_cli_ok(dir, &all, Duration::from_secs(30)).await;
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// Parked tasks of an instance, oldest first: (task id, request preview).
async fn parked(dir: &Path) -> Vec<(String, String)> {
    let q = cli_json(dir, &["tasks", "--parked"]).await;
    let mut items: Vec<(String, String)> = q["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["taskId"].as_str().unwrap_or("").to_owned(),
                i["preview"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    items.reverse();
    items
}

/// Polls (at most 20 s) until `check` holds for what `read` returns.
async fn eventually<T: std::fmt::Debug>(
    what: &str,
    mut read: impl AsyncFnMut() -> T,
    check: impl Fn(&T) -> bool,
) -> T {
    let mut last = None;
    for _ in 0..200 {
        let v = read().await;
        if check(&v) {
            return v;
        }
        last = Some(v);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: never happened; last seen {last:#?}");
}

/// Sends `text` to `a`'s inbox and approves the task from the CLI, as the
/// person would; returns the task's id.
async fn approved(a: &Server, message_id: &str, text: &str) -> String {
    let sent = a
        .client()
        .rpc_ok(
            "inbox",
            "SendMessage",
            json!({"message": message(message_id, text)}),
        )
        .await;
    let id = sent["task"]["id"].as_str().unwrap().to_owned();
    run_cli_ok(&a.data_dir, &["approve", &id], Duration::from_secs(30)).await;
    id
}

/// The hops of an instance, once one was refused.
async fn once_refused(dir: &Path) -> Vec<Value> {
    eventually(
        "the loop is refused",
        || hops(dir),
        |h| h.iter().any(|h| h["state"] == "refused"),
    )
    .await
}

async fn hops(dir: &Path) -> Vec<Value> {
    cli_json(dir, &["chains", "hops"]).await["hops"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn an_approved_task_chains_to_a_peer_gates_wait_and_loops_are_refused() {
    let b = Server::start(Some(PEER_B));
    let a = Server::start(Some(&config_a(&b)));
    let (da, db) = (a.data_dir.clone(), b.data_dir.clone());

    // The rules from the config are listed, read-only.
    let listed = run_cli_ok(&da, &["chains", "list"], Duration::from_secs(30)).await;
    for id in ["to-b", "echo", "gated"] {
        assert!(listed.contains(id), "{listed}");
    }
    let refused = run_cli(&da, &["chains", "remove", "to-b"], Duration::from_secs(30)).await;
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(refused.stderr.contains("config file"), "{refused:?}");

    // A caller asks A's inbox; the person approves; the result goes to B.
    let parent = approved(&a, "m-ship", "Ship v2?").await;
    let c = a.client();
    let on_b = eventually("the hop arrives at B", || parked(&db), |p| p.len() == 1).await;
    assert!(
        on_b[0].1.contains("Approved on A: Ship v2?") && on_b[0].1.contains(&parent),
        "{on_b:?}"
    );

    // Parent and child are linked both ways; the child is watched on A. B
    // parks the task before it answers A, so A may record the delivery a
    // moment after B's queue shows it.
    let detail = eventually(
        "A records the hop as delivered",
        async || cli_json(&da, &["show", &parent]).await,
        |d| d["chain"]["children"][0]["state"] == "delivered",
    )
    .await;
    let children = detail["chain"]["children"].as_array().unwrap().clone();
    assert_eq!(children.len(), 1, "{detail}");
    assert_eq!(children[0]["ruleId"], "to-b");
    assert_eq!(children[0]["state"], "delivered");
    let child = children[0]["taskId"].as_str().unwrap().to_owned();
    let child_detail = cli_json(&da, &["show", &child]).await;
    assert_eq!(child_detail["chain"]["parent"]["taskId"], parent.as_str());
    assert_eq!(child_detail["agentId"], "b");
    // The list of hops says whose tasks the hop links and what they asked.
    let listed = hops(&da).await;
    let hop = listed
        .iter()
        .find(|h| h["childTaskId"] == child.as_str())
        .unwrap();
    assert_eq!(
        hop["parent"],
        json!({"agentId": "inbox", "preview": "Ship v2?"})
    );
    assert_eq!(hop["child"]["agentId"], "b");
    assert!(
        hop["child"]["preview"]
            .as_str()
            .unwrap()
            .starts_with("Approved on A: Ship v2?"),
        "{hop}"
    );

    // B's person approves: the child completes, which fires `echo` (B's
    // task completed ⇒ to B again) once…
    run_cli_ok(&db, &["approve", &on_b[0].0], Duration::from_secs(30)).await;
    let on_b = eventually("echo arrives at B", || parked(&db), |p| p.len() == 1).await;
    assert!(on_b[0].1.starts_with("again:"), "{on_b:?}");
    // …and, when that one completes too, `echo` would fire a second time in
    // the same chain: refused as a cycle.
    run_cli_ok(&db, &["approve", &on_b[0].0], Duration::from_secs(30)).await;
    let all = once_refused(&da).await;
    let refused: Vec<&Value> = all.iter().filter(|h| h["state"] == "refused").collect();
    assert_eq!(refused.len(), 1, "{all:#?}");
    assert_eq!(refused[0]["ruleId"], "echo");
    assert!(
        refused[0]["reason"].as_str().unwrap().contains("cycle"),
        "{refused:?}"
    );
    assert!(parked(&db).await.is_empty(), "nothing more reached B");

    // A gated rule parks the hop; B sees nothing until it is released.
    let review = c
        .rpc_ok(
            "review",
            "SendMessage",
            json!({"message": message("m-review", "Review the plan")}),
        )
        .await;
    let review_id = review["task"]["id"].as_str().unwrap().to_owned();
    let review_ctx = review["task"]["contextId"].as_str().unwrap().to_owned();
    run_cli_ok(&da, &["approve", &review_id], Duration::from_secs(30)).await;
    let gated = eventually(
        "the gated hop waits",
        || hops(&da),
        |h| h.iter().any(|h| h["ruleId"] == "gated"),
    )
    .await;
    let gated = gated.iter().find(|h| h["ruleId"] == "gated").unwrap();
    assert_eq!(gated["state"], "gated");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(parked(&db).await.is_empty(), "a gated hop is not sent");
    let hop_id = gated["id"].as_str().unwrap().to_owned();
    let out = run_cli_ok(
        &da,
        &["chains", "release", &hop_id],
        Duration::from_secs(30),
    )
    .await;
    assert!(
        out.contains("pending") || out.contains("delivered"),
        "{out}"
    );
    let on_b = eventually("the released hop arrives", || parked(&db), |p| p.len() == 1).await;
    assert!(on_b[0].1.contains("Reviewed: Review the plan"), "{on_b:?}");
    // `context = "same"`: B's task joined the parent's context.
    let b_task = cli_json(&db, &["show", &on_b[0].0]).await;
    assert_eq!(b_task["task"]["contextId"], review_ctx.as_str());
    // Releasing twice changes nothing and says so.
    let again = run_cli(
        &da,
        &["chains", "release", &hop_id],
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(again.code, Some(1), "{again:?}");
    assert!(again.stderr.contains("no longer waits"), "{again:?}");
}

/// Whether `show` of `id` on an instance reads it from the archive.
async fn archived(dir: &Path, id: &str) -> Value {
    eventually(
        &format!("retention archives {id}"),
        async || cli_json(dir, &["show", id]).await,
        |d| d["archivedAt"].is_string(),
    )
    .await
}

/// Retention archives a chain's finished tasks while the chain goes on
/// (here every finished task, at once): the task left keeps its link to
/// the archived one, which reads back from the archive with its own links,
/// and a loop is still refused on its second turn though the tasks before
/// it were archived (it ran on when archiving took the hops with them).
#[tokio::test]
async fn chain_links_and_loop_protection_outlive_retention() {
    let b = Server::start(Some(PEER_B));
    let config = format!(
        "[retention]\nmax_tasks = 1\ninterval_secs = 1\n\n{}",
        config_a(&b)
    );
    let a = Server::start(Some(&config));
    let (da, db) = (a.data_dir.clone(), b.data_dir.clone());
    let parent = approved(&a, "m-keep", "Keep the links?").await;
    let on_b = eventually("the hop arrives at B", || parked(&db), |p| p.len() == 1).await;

    // The approved task is archived; the task it chained to still links
    // to it, marked archived, and the archive's copy links back.
    let gone = archived(&da, &parent).await;
    let to = &gone["chain"]["children"][0];
    assert_eq!(to["ruleId"], "to-b", "{gone}");
    assert_eq!(to["state"], "delivered", "{gone}");
    let child = to["taskId"].as_str().unwrap().to_owned();
    assert!(to.get("archived").is_none(), "the child is here: {gone}");
    let listed = run_cli_ok(&da, &["chains", "hops"], Duration::from_secs(30)).await;
    let row = listed
        .lines()
        .find(|l| l.contains(&child))
        .unwrap_or_default();
    assert!(row.contains("(archived)"), "{listed}");
    // The archive files alone (no server asked) print the same link.
    let offline = run_cli_ok(&da, &["archive", "show", &parent], Duration::from_secs(30)).await;
    assert!(
        offline.contains(&format!("chained to   {child} (rule to-b, delivered)\n")),
        "{offline}"
    );
    let here = cli_json(&da, &["show", &child]).await;
    assert!(here["archivedAt"].is_null(), "{here}");
    let from = &here["chain"]["parent"];
    assert_eq!(from["taskId"], parent.as_str(), "{here}");
    assert_eq!(from["archived"], true, "{here}");
    let shown = run_cli_ok(&da, &["show", &child], Duration::from_secs(30)).await;
    assert!(
        shown.contains(&format!(
            "chained from {parent} (rule to-b, delivered; archived: `countersign archive show {parent}`)"
        )),
        "{shown}"
    );

    // B's person approves: the child completes and `echo` sends it on; the
    // child is archived in its turn.
    run_cli_ok(&db, &["approve", &on_b[0].0], Duration::from_secs(30)).await;
    let on_b = eventually("echo arrives at B", || parked(&db), |p| p.len() == 1).await;
    assert!(on_b[0].1.starts_with("again:"), "{on_b:?}");
    let gone = archived(&da, &child).await;
    assert_eq!(gone["chain"]["parent"]["taskId"], parent.as_str(), "{gone}");
    assert_eq!(gone["chain"]["parent"]["archived"], true, "{gone}");
    let echo = gone["chain"]["children"][0]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let here = cli_json(&da, &["show", &echo]).await;
    assert_eq!(here["chain"]["parent"]["taskId"], child.as_str(), "{here}");
    assert_eq!(here["chain"]["parent"]["archived"], true, "{here}");

    // When that one completes, `echo` would fire a second time in the same
    // chain: refused as a cycle, its archived ancestors notwithstanding.
    run_cli_ok(&db, &["approve", &on_b[0].0], Duration::from_secs(30)).await;
    let all = once_refused(&da).await;
    let refused: Vec<&Value> = all.iter().filter(|h| h["state"] == "refused").collect();
    assert_eq!(refused[0]["ruleId"], "echo", "{all:#?}");
    assert!(
        refused[0]["reason"]
            .as_str()
            .unwrap()
            .contains("rules, nearest first: echo ← to-b"),
        "{refused:?}"
    );
    assert!(parked(&db).await.is_empty(), "nothing more reached B");
}

#[tokio::test]
async fn rules_are_added_and_removed_by_cli_and_bad_ones_refused() {
    let b = Server::start(Some(PEER_B));
    let a = Server::start(Some(&format!(
        "[outbound]\nallow = [\"127.0.0.1\"]\n\n[[agents]]\nid = \"inbox\"\n\n[[peers]]\nid = \"b\"\nurl = \"{}\"\n",
        b.url("/a2a/inbox")
    )));
    let da = a.data_dir.clone();
    let out = run_cli_ok(
        &da,
        &[
            "chains",
            "add",
            "--on-agent",
            "inbox",
            "--state",
            "completed",
            "--state",
            "rejected",
            "--send",
            "b",
            "--template",
            "{{task.state}}: {{request.text}}",
            "--id",
            "fwd",
        ],
        Duration::from_secs(30),
    )
    .await;
    assert!(out.contains("added chain rule fwd"), "{out}");
    let rules = cli_json(&da, &["chains", "list"]).await;
    assert_eq!(
        rules["rules"][0]["trigger"]["states"],
        json!(["completed", "rejected"])
    );
    assert_eq!(rules["rules"][0]["source"], "api");

    // A rejected task fires it too.
    let c = a.client();
    let t = c.send_text("inbox", "m-1", "Delete prod?").await;
    let id = t["task"]["id"].as_str().unwrap().to_owned();
    run_cli_ok(
        &da,
        &["reject", &id, "--reason", "no"],
        Duration::from_secs(30),
    )
    .await;
    let on_b = eventually(
        "rejection forwarded",
        || parked(&b.data_dir),
        |p| p.len() == 1,
    )
    .await;
    assert!(on_b[0].1.starts_with("rejected: Delete prod?"), "{on_b:?}");

    for (args, want) in [
        (
            vec!["chains", "add", "--on-agent", "nope", "--send", "b"],
            "no served agent",
        ),
        (
            vec!["chains", "add", "--on-agent", "inbox", "--send", "zz"],
            "no peer",
        ),
        (
            vec![
                "chains",
                "add",
                "--on-agent",
                "inbox",
                "--push",
                "http://10.0.0.1/x",
            ],
            "private",
        ),
        (
            vec![
                "chains",
                "add",
                "--on-agent",
                "inbox",
                "--send",
                "b",
                "--template",
                "{{nope}}",
            ],
            "unknown placeholder",
        ),
        (
            vec![
                "chains",
                "add",
                "--on-agent",
                "inbox",
                "--send",
                "b",
                "--id",
                "fwd",
            ],
            "already exists",
        ),
    ] {
        let r = run_cli(&da, &args, Duration::from_secs(30)).await;
        assert_eq!(r.code, Some(1), "{args:?}: {r:?}");
        assert!(r.stderr.contains(want), "{args:?}: {r:?}");
    }
    let usage = run_cli(
        &da,
        &["chains", "add", "--send", "b"],
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(usage.code, Some(2), "{usage:?}");

    run_cli_ok(&da, &["chains", "remove", "fwd"], Duration::from_secs(30)).await;
    let rules = cli_json(&da, &["chains", "list"]).await;
    assert_eq!(rules["rules"], json!([]));
    let gone = run_cli(&da, &["chains", "remove", "fwd"], Duration::from_secs(30)).await;
    assert_eq!(gone.code, Some(1));
    assert!(gone.stderr.contains("no chain rule"), "{gone:?}");
}

/// What a webhook receiver was sent: (Authorization header, JSON body).
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(Option<String>, Value)>>>;

/// A webhook receiver on 127.0.0.1 that records every POST and answers 204.
async fn receiver() -> (std::net::SocketAddr, Seen) {
    let got: Seen = Seen::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let sink = got.clone();
    let app = axum::Router::new().fallback(
        async move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let auth = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            sink.lock()
                .unwrap()
                .push((auth, serde_json::from_slice(&body).unwrap_or(Value::Null)));
            axum::http::StatusCode::NO_CONTENT
        },
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, got)
}

#[tokio::test]
async fn a_push_rule_posts_the_finished_task_with_its_auth() {
    let (addr, got) = receiver().await;
    let a = Server::start(Some(&format!(
        r#"[outbound]
allow = ["127.0.0.1"]

[[agents]]
id = "inbox"

[[chains]]
trigger = {{ agent = "inbox" }}
action = {{ kind = "push", url = "http://{addr}/done", auth_scheme = "Bearer", credentials = "s3cret" }}
"#
    )));
    let c = a.client();
    let t = c.send_text("inbox", "m-p", "Approve the invoice?").await;
    let id = t["task"]["id"].as_str().unwrap().to_owned();
    run_cli_ok(
        &a.data_dir,
        &["approve", &id, "--comment", "fine"],
        Duration::from_secs(30),
    )
    .await;
    let seen = eventually(
        "the push arrives",
        || {
            let g = got.clone();
            async move { g.lock().unwrap().clone() }
        },
        |g| !g.is_empty(),
    )
    .await;
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0.as_deref(), Some("Bearer s3cret"));
    assert_eq!(seen[0].1["task"]["id"], id.as_str());
    assert_eq!(seen[0].1["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    // The receiver has the push before A hears its 2xx and records it.
    let h = eventually(
        "A records the push hop as delivered",
        async || hops(&a.data_dir).await,
        |h| h.first().is_some_and(|h| h["state"] == "delivered"),
    )
    .await;
    assert_eq!(h[0]["ruleId"], "chain-1");
    assert_eq!(
        h[0]["parent"],
        json!({"agentId": "inbox", "preview": "Approve the invoice?"})
    );
    assert_eq!(h[0]["child"], Value::Null, "a push starts no task");
    let table = run_cli_ok(&a.data_dir, &["chains", "hops"], Duration::from_secs(30)).await;
    assert!(table.contains("ABOUT"), "{table}");
    assert!(table.contains("inbox: Approve the invoice?"), "{table}");
}

/// A scripted agent's tasks complete as they are created, in one write: the
/// rules of that state fire there, and a skill filter reads the metadata the
/// request gave the task.
#[tokio::test]
async fn a_task_completed_as_it_is_created_fires_the_rules_its_metadata_names() {
    let (addr, got) = receiver().await;
    let a = Server::start(Some(&format!(
        r#"[outbound]
allow = ["127.0.0.1"]

[[agents]]
id = "echo"
backend = "scripted"
fallback = [{{ complete = "done" }}]

[[chains]]
id = "deploys"
trigger = {{ agent = "echo", states = ["completed"], skill = "deploy" }}
action = {{ kind = "push", url = "http://{addr}/done" }}
"#
    )));
    let c = a.client();
    let plain = c.send_text("echo", "m-plain", "hello").await;
    assert_eq!(plain["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let tagged = c
        .rpc_ok(
            "echo",
            "SendMessage",
            json!({"message": message("m-deploy", "ship it"), "metadata": {"skillId": "deploy"}}),
        )
        .await;
    assert_eq!(tagged["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let id = tagged["task"]["id"].as_str().unwrap();
    let h = eventually(
        "the hop of the tagged task is delivered",
        async || hops(&a.data_dir).await,
        |h| h.iter().any(|h| h["state"] == "delivered"),
    )
    .await;
    assert_eq!(h.len(), 1, "only the tagged task fires the rule: {h:#?}");
    assert_eq!(h[0]["ruleId"], "deploys");
    let seen = got.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].1["task"]["id"], id);
    assert_eq!(seen[0].1["task"]["status"]["state"], "TASK_STATE_COMPLETED");
}

/// A peer that pushes before it answers: on SendMessage it parks a new task,
/// sends the caller's webhook a push about it, and answers 300 ms later.
/// GetTask returns the task. Serves its card at the root.
async fn eager_pusher() -> String {
    use std::sync::{Arc, Mutex};
    type Tasks = Arc<Mutex<Vec<Value>>>;

    async fn rpc(
        axum::extract::State(tasks): axum::extract::State<Tasks>,
        axum::Json(req): axum::Json<Value>,
    ) -> axum::Json<Value> {
        let p = &req["params"];
        let result = match req["method"].as_str() {
            Some("SendMessage") => {
                let task = {
                    let mut all = tasks.lock().unwrap();
                    let n = all.len() + 1;
                    let task = json!({
                        "id": format!("p-{n}"),
                        "contextId": format!("c-{n}"),
                        "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": {
                            "messageId": format!("ask-{n}"), "role": "ROLE_AGENT",
                            "parts": [{"text": "which one?"}]}},
                        "history": [p["message"]],
                    });
                    all.push(task.clone());
                    task
                };
                let hook = &p["configuration"]["taskPushNotificationConfig"];
                let (url, token) = (hook["url"].as_str(), hook["token"].as_str());
                if let (Some(url), Some(token)) = (url, token) {
                    let (url, token, body) =
                        (url.to_owned(), token.to_owned(), json!({"task": task}));
                    tokio::spawn(async move {
                        let _ = reqwest::Client::new()
                            .post(url)
                            .header("A2A-Notification-Token", token)
                            .json(&body)
                            .send()
                            .await;
                    });
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
                json!({"task": task})
            }
            Some("GetTask") => {
                let all = tasks.lock().unwrap();
                let found = all.iter().find(|t| t["id"] == p["id"]).cloned();
                match found {
                    Some(t) => t,
                    None => {
                        return axum::Json(json!({"jsonrpc": "2.0", "id": req["id"],
                            "error": {"code": -32001, "message": "no such task"}}));
                    }
                }
            }
            _ => {
                return axum::Json(json!({"jsonrpc": "2.0", "id": req["id"],
                    "error": {"code": -32601, "message": "not here"}}));
            }
        };
        axum::Json(json!({"jsonrpc": "2.0", "id": req["id"], "result": result}))
    }

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let card = json!({
        "name": "eager", "description": "pushes before it answers", "version": "1",
        "supportedInterfaces": [{"url": format!("{base}/rpc"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"pushNotifications": true, "streaming": false},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "any", "name": "any", "description": "anything", "tags": ["any"]}],
    });
    let tasks: Tasks = Arc::default();
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            axum::routing::get(move || async move { axum::Json(card) }),
        )
        .route("/rpc", axum::routing::post(rpc))
        .with_state(tasks);
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// Loop protection reads a started task's ancestry from its mirror's first
/// event. A peer that pushes about the new task before answering must not
/// get that event recorded without the hop that started it: the push waits
/// for the start, so the rule that would loop is refused on its second turn.
#[tokio::test]
async fn a_peer_pushing_before_it_answers_does_not_escape_loop_protection() {
    let peer = eager_pusher().await;
    let a = Server::start(Some(&format!(
        r#"[webhooks]
sweep_secs = 0

[[agents]]
id = "inbox"

[[peers]]
id = "p"
url = "{peer}"

[[chains]]
id = "to-p"
trigger = {{ agent = "inbox" }}
action = {{ kind = "send", peer = "p", template = "go" }}

# The peer's parked tasks go to it again: a loop.
[[chains]]
id = "again"
trigger = {{ peer = "p", states = ["input-required"] }}
action = {{ kind = "send", peer = "p", template = "again" }}
"#
    )));
    let da = a.data_dir.clone();
    approved(&a, "m-1", "start").await;
    // The peer pushes before it answers, so the loop can be refused while
    // the hop that went through is still being sent: wait for both.
    let all = eventually(
        "the loop is refused and the first hop delivered",
        || hops(&da),
        |h| {
            let again = |state: &str| {
                h.iter()
                    .any(|h| h["ruleId"] == "again" && h["state"] == state)
            };
            again("refused") && again("delivered")
        },
    )
    .await;
    let again: Vec<&Value> = all.iter().filter(|h| h["ruleId"] == "again").collect();
    assert_eq!(again.len(), 2, "{all:#?}");
    let first = again
        .iter()
        .find(|h| h["state"] == "delivered")
        .unwrap_or_else(|| panic!("{all:#?}"));
    assert_eq!(
        first["depth"], 2,
        "its ancestry holds the hop `to-p`: {all:#?}"
    );
    let refused = again
        .iter()
        .find(|h| h["state"] == "refused")
        .unwrap_or_else(|| panic!("{all:#?}"));
    assert!(
        refused["reason"].as_str().unwrap_or("").contains("cycle"),
        "{refused}"
    );
}
