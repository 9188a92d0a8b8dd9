//! Push notifications for served tasks, end to end: a real webhook receiver
//! (an HTTP server on 127.0.0.1 in this process) gets every event of a task
//! that goes working → input-required → completed, in order, with the
//! headers and body of the config's dialect; a receiver that is down is
//! retried; pending deliveries survive kill -9; the outbound policy refuses
//! loopback, private, metadata … addresses and never follows a redirect.
mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use common::{Server, message, run_cli, run_cli_ok};
use serde_json::{Value, json};

/// What the receiver does with the next request.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Ok,
    Down,
    Redirect,
}

#[derive(Clone, Debug)]
struct Received {
    headers: HeaderMap,
    body: Value,
    /// Whether we answered 2xx.
    accepted: bool,
    path: String,
}

#[derive(Clone)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    mode: Arc<Mutex<Mode>>,
    addr: SocketAddr,
}

impl Receiver {
    async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let r = Receiver {
            got: Arc::default(),
            mode: Arc::new(Mutex::new(Mode::Ok)),
            addr,
        };
        let app = axum::Router::new()
            .fallback(
                async |State(r): State<Receiver>,
                       uri: axum::http::Uri,
                       headers: HeaderMap,
                       body: axum::body::Bytes| {
                    let mode = *r.mode.lock().unwrap();
                    let accepted = mode == Mode::Ok;
                    r.got.lock().unwrap().push(Received {
                        headers,
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                        accepted,
                        path: uri.path().to_owned(),
                    });
                    match mode {
                        Mode::Ok => StatusCode::OK.into_response(),
                        Mode::Down => StatusCode::SERVICE_UNAVAILABLE.into_response(),
                        Mode::Redirect => (
                            StatusCode::FOUND,
                            [("location", format!("http://{}/elsewhere", r.addr))],
                        )
                            .into_response(),
                    }
                },
            )
            .with_state(r.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        r
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    fn accepted(&self) -> Vec<Received> {
        self.got
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.accepted)
            .cloned()
            .collect()
    }

    fn all(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// Waits (at most 20 s) until `n` notifications were accepted.
    async fn wait_accepted(&self, n: usize) -> Vec<Received> {
        for _ in 0..400 {
            let got = self.accepted();
            if got.len() >= n {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("expected {n} accepted notifications, got {:#?}", self.all());
    }
}

/// A scripted agent: `flow…` works, then asks; `answer…` completes.
fn config(extra: &str) -> String {
    format!(
        r#"{extra}

[[agents]]
id = "flow"
backend = "scripted"
[[agents.rules]]
message_id_prefix = "answer"
steps = [{{ complete = "Done." }}]
[[agents.rules]]
message_id_prefix = "flow"
steps = [{{ status = {{ state = "working" }} }}, {{ status = {{ state = "input-required", text = "Which environment?" }} }}]
"#
    )
}

const ALLOW_LOOPBACK: &str =
    "[outbound]\nallow = [\"127.0.0.1\"]\n[dispatch]\nmax_backoff_secs = 1\n";

fn header<'a>(r: &'a Received, name: &str) -> &'a str {
    r.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// The state a v1.0 notification (StreamResponse) reports.
fn v1_state(body: &Value) -> String {
    if let Some(t) = body.get("task") {
        return t["status"]["state"].as_str().unwrap_or("").to_owned();
    }
    body["statusUpdate"]["status"]["state"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// Runs a v1.0 task to completion with a push config set in SendMessage.
async fn v1_task(s: &Server, r: &Receiver, token: &str) -> String {
    let c = s.client();
    let task = c
        .rpc_ok(
            "flow",
            "SendMessage",
            json!({
                "message": message("flow-1", "deploy?"),
                "configuration": {"taskPushNotificationConfig": {
                    "url": r.url("/hook"), "token": token,
                    "authentication": {"scheme": "Bearer", "credentials": "cred-1"}
                }}
            }),
        )
        .await;
    let id = task["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(task["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let mut answer = message("answer-1", "production");
    answer["taskId"] = id.clone().into();
    let done = c
        .rpc_ok("flow", "SendMessage", json!({"message": answer}))
        .await;
    assert_eq!(done["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    id
}

#[tokio::test]
async fn v1_receiver_gets_every_event_in_order_with_auth_and_tokens() {
    let r = Receiver::start().await;
    let s = Server::start(Some(&config(ALLOW_LOOPBACK)));
    let id = v1_task(&s, &r, "tok-1").await;
    let got = r.wait_accepted(4).await;
    let states: Vec<String> = got.iter().map(|g| v1_state(&g.body)).collect();
    assert_eq!(
        states,
        [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_COMPLETED"
        ],
        "{got:#?}"
    );
    assert_eq!(got[0].body["task"]["id"], id.as_str());
    assert_eq!(got[3].body["statusUpdate"]["taskId"], id.as_str());
    let mut ids = Vec::new();
    for g in &got {
        assert_eq!(g.path, "/hook");
        assert_eq!(header(g, "authorization"), "Bearer cred-1");
        assert_eq!(header(g, "a2a-notification-token"), "tok-1");
        assert_eq!(header(g, "x-a2a-notification-token"), "tok-1");
        assert_eq!(header(g, "content-type"), "application/a2a+json");
        ids.push(header(g, "a2a-notification-id").to_owned());
    }
    ids.dedup();
    assert_eq!(ids.len(), 4, "each event has its own id: {ids:?}");
    // Nothing more arrives, and the outbox shows them delivered.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(r.all().len(), 4);
    let out = run_cli_ok(
        &s.data_dir,
        &["deliveries", "--json"],
        Duration::from_secs(30),
    )
    .await;
    let out: Value = serde_json::from_str(&out).unwrap();
    let pushes: Vec<&Value> = out["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "push")
        .collect();
    assert_eq!(pushes.len(), 4);
    assert!(pushes.iter().all(|i| i["status"] == "delivered"), "{out}");
}

#[tokio::test]
async fn v0_3_receiver_gets_the_task_in_its_dialect() {
    let r = Receiver::start().await;
    let s = Server::start(Some(&config(ALLOW_LOOPBACK)));
    let http = reqwest::Client::new();
    let call = async |method: &str, params: Value| -> Value {
        let body: Value = http
            .post(s.url("/a2a/flow"))
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(body.get("error").is_none(), "{body}");
        body["result"].clone()
    };
    let msg = |id: &str, task: Option<&str>| {
        let mut m = json!({"kind": "message", "messageId": id, "role": "user",
                           "parts": [{"kind": "text", "text": "go"}]});
        if let Some(t) = task {
            m["taskId"] = t.into();
        }
        m
    };
    let task = call(
        "message/send",
        json!({"message": msg("flow-03", None), "configuration": {"pushNotificationConfig": {
            "url": r.url("/v03"), "token": "tok-03",
            "authentication": {"schemes": ["Bearer"], "credentials": "c-03"}}}}),
    )
    .await;
    assert_eq!(task["status"]["state"], "input-required", "{task}");
    let id = task["id"].as_str().unwrap().to_owned();
    let done = call(
        "message/send",
        json!({"message": msg("answer-03", Some(&id))}),
    )
    .await;
    assert_eq!(done["status"]["state"], "completed");
    let got = r.wait_accepted(4).await;
    let states: Vec<&str> = got
        .iter()
        .map(|g| g.body["status"]["state"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        states,
        ["submitted", "working", "input-required", "completed"]
    );
    for g in &got {
        assert_eq!(g.body["kind"], "task");
        assert_eq!(g.body["id"], id.as_str());
        assert_eq!(header(g, "x-a2a-notification-token"), "tok-03");
        assert_eq!(header(g, "content-type"), "application/json");
    }
    // The last snapshot carries the whole task: history and artifacts.
    assert!(
        got[3].body["history"]
            .as_array()
            .is_some_and(|h| h.len() >= 2)
    );
    // Configs set later with the 0.3 method are answered in 0.3 shapes.
    let listed = call("tasks/pushNotificationConfig/list", json!({"id": id})).await;
    assert_eq!(listed[0]["pushNotificationConfig"]["url"], r.url("/v03"));
}

#[tokio::test]
async fn a_receiver_that_is_down_is_retried_and_gets_everything_in_order() {
    let r = Receiver::start().await;
    r.set(Mode::Down);
    let s = Server::start(Some(&config(ALLOW_LOOPBACK)));
    v1_task(&s, &r, "tok-down").await;
    // Attempts fail; the first event is retried, the others wait behind it.
    for _ in 0..100 {
        if r.all().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let tried = r.all();
    assert!(tried.len() >= 2, "{tried:#?}");
    assert!(
        tried
            .iter()
            .all(|t| v1_state(&t.body) == "TASK_STATE_SUBMITTED"),
        "only the head of the line is tried while it fails: {tried:#?}"
    );
    r.set(Mode::Ok);
    let got = r.wait_accepted(4).await;
    let states: Vec<String> = got.iter().map(|g| v1_state(&g.body)).collect();
    assert_eq!(
        states,
        [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_COMPLETED"
        ]
    );
    let failed_tries = r.all().iter().filter(|g| !g.accepted).count();
    assert!(failed_tries >= 2);
    // The log says when the receiver went down and when it came back, not
    // every retry in between.
    let log = s.log();
    let lines = |needle: &str| log.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(lines("delivery failed, will retry"), 1, "{log}");
    assert!(
        log.lines()
            .filter(|l| l.contains("delivery failed again"))
            .all(|l| l.contains("DEBUG")),
        "retries are debug: {log}"
    );
    assert_eq!(lines("delivered on attempt"), 1, "{log}");
}

#[tokio::test]
async fn pending_deliveries_survive_kill_9_and_each_event_is_accepted_once() {
    let r = Receiver::start().await;
    r.set(Mode::Down);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(ALLOW_LOOPBACK);
    let mut s = Server::start_in(dir.path(), Some(&cfg), &[]);
    v1_task(&s, &r, "tok-crash").await;
    for _ in 0..100 {
        if !r.all().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.kill9();
    r.set(Mode::Ok);
    let _s = Server::start_in(dir.path(), Some(&cfg), &[]);
    let got = r.wait_accepted(4).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got_after = r.accepted();
    assert_eq!(got_after.len(), got.len(), "no extra deliveries");
    let mut ids: Vec<String> = got_after
        .iter()
        .map(|g| header(g, "a2a-notification-id").to_owned())
        .collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "an event accepted twice: {ids:?}");
    assert_eq!(n, 4);
    let states: Vec<String> = got_after.iter().map(|g| v1_state(&g.body)).collect();
    assert_eq!(
        states.last().map(String::as_str),
        Some("TASK_STATE_COMPLETED")
    );
}

#[tokio::test]
async fn the_outbound_policy_refuses_private_addresses_at_config_time() {
    // No allow-list: every non-public address is refused, with the reason.
    let s = Server::start(Some(&config("")));
    let c = s.client();
    let task = c.send_text("flow", "flow-ssrf", "go").await;
    let id = task["task"]["id"].as_str().unwrap().to_owned();
    let cases = [
        ("http://127.0.0.1:9/h", "loopback"),
        ("http://localhost:9/h", "loopback"),
        ("http://[::1]:9/h", "loopback"),
        ("http://10.1.2.3/h", "private"),
        ("http://192.168.1.20/h", "private"),
        ("http://172.16.0.1/h", "private"),
        ("http://169.254.169.254/latest/meta-data", "metadata"),
        ("http://metadata.google.internal/x", "metadata"),
        ("http://169.254.10.10/h", "link-local"),
        ("http://100.64.0.1/h", "CGNAT"),
        ("http://224.0.0.1/h", "multicast"),
        ("http://0.0.0.0/h", "unspecified"),
        ("http://[::ffff:127.0.0.1]/h", "loopback"),
        ("http://no-such-host.invalid/h", "does not resolve"),
        ("ftp://example.com/h", "ftp"),
    ];
    for (url, why) in cases {
        let e = c
            .rpc_err(
                "flow",
                "CreateTaskPushNotificationConfig",
                json!({"taskId": id, "url": url}),
            )
            .await;
        assert_eq!(e["code"], -32602, "{url}: {e}");
        let m = e["message"].as_str().unwrap_or("");
        assert!(m.contains(why), "{url}: {m}");
    }
    // Set inline with a message: refused before the task is created.
    let e = c
        .rpc_err(
            "flow",
            "SendMessage",
            json!({"message": message("flow-inline", "go"),
                   "configuration": {"taskPushNotificationConfig": {"url": "http://10.0.0.7/x"}}}),
        )
        .await;
    assert_eq!(e["code"], -32602, "{e}");
    let listed = c.rpc_ok("flow", "ListTasks", json!({})).await;
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 1, "{listed}");
}

#[tokio::test]
async fn a_redirect_is_not_followed_but_dead_lettered_and_retryable() {
    let r = Receiver::start().await;
    r.set(Mode::Redirect);
    let s = Server::start(Some(&config(ALLOW_LOOPBACK)));
    let c = s.client();
    let task = c
        .rpc_ok(
            "flow",
            "SendMessage",
            json!({"message": message("flow-r", "go"),
                   "configuration": {"taskPushNotificationConfig": {"url": r.url("/moved"), "token": "t"}}}),
        )
        .await;
    assert_eq!(task["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    // The first event gets a 302 and is given up at once (redirects are not
    // retried); the ones queued behind it follow, each refused the same way.
    let dir = s.data_dir.clone();
    let mut failed = Value::Null;
    for _ in 0..200 {
        let out = run_cli_ok(
            &dir,
            &["deliveries", "--failed", "--json"],
            Duration::from_secs(30),
        )
        .await;
        failed = serde_json::from_str(&out).unwrap();
        if failed["items"].as_array().is_some_and(|a| a.len() == 3) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let items = failed["items"].as_array().unwrap();
    assert_eq!(items.len(), 3, "{failed}");
    for i in items {
        assert!(
            i["lastError"].as_str().unwrap_or("").contains("redirect"),
            "{i}"
        );
        assert_eq!(i["attempts"], 1);
    }
    assert!(
        r.all().iter().all(|g| g.path == "/moved"),
        "the redirect target is never called"
    );
    let table = run_cli_ok(&dir, &["deliveries", "--failed"], Duration::from_secs(30)).await;
    assert!(
        table.contains("failed") && table.contains("redirect"),
        "{table}"
    );
    // Fixed on the receiver's side: a person retries one by hand.
    r.set(Mode::Ok);
    let first = items.last().unwrap()["id"].as_str().unwrap().to_owned();
    let out = run_cli_ok(
        &dir,
        &["deliveries", "retry", &first],
        Duration::from_secs(30),
    )
    .await;
    assert!(out.contains("queued again"), "{out}");
    let got = r.wait_accepted(1).await;
    assert_eq!(header(&got[0], "a2a-notification-id"), first);
    // Retrying something that did not fail is refused plainly.
    let again = run_cli(
        &dir,
        &["deliveries", "retry", &first],
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(again.code, Some(1), "{again:?}");
    assert!(again.stderr.contains("no failed delivery"), "{again:?}");
}
