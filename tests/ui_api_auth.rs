//! The UI API's gate: the per-install token, Host and Origin checks, the
//! `ui …` announcement line and the instance file the CLI finds us by.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Server, SseStream};
use serde_json::{Value, json};

/// `HOST:PORT` of a server's base URL.
fn authority(s: &Server) -> String {
    s.base.trim_start_matches("http://").to_owned()
}

fn port(s: &Server) -> u16 {
    authority(s).rsplit(':').next().unwrap().parse().unwrap()
}

/// A GET under `/api` with the given headers; (status, headers, JSON body or Null).
async fn api_get(
    s: &Server,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut req = reqwest::Client::new().get(s.url(path));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let h = resp.headers().clone();
    let text = resp.text().await.unwrap_or_default();
    (
        status,
        h,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

fn bearer(s: &Server) -> String {
    format!("Bearer {}", s.ui_token())
}

fn assert_error(status: u16, body: &Value, expected: u16) {
    assert_eq!(status, expected, "{body}");
    assert_eq!(body["error"]["code"], json!(expected), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

#[tokio::test]
async fn api_answers_only_with_the_right_bearer_token() {
    let s = Server::start(None);
    let (st, h, body) = api_get(&s, "/api/health", &[]).await;
    assert_error(st, &body, 401);
    assert!(
        h["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer"),
        "{h:?}"
    );
    assert_eq!(h["cache-control"], "no-store");
    assert_eq!(h["x-content-type-options"], "nosniff");

    let wrong = format!("Bearer {}", "0".repeat(64));
    let (st, _, body) = api_get(&s, "/api/health", &[("authorization", &wrong)]).await;
    assert_error(st, &body, 401);

    let (st, h, body) = api_get(&s, "/api/health", &[("authorization", &bearer(&s))]).await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["ok"], json!(true));
    assert_eq!(body["version"], json!(env!("CARGO_PKG_VERSION")));
    assert_eq!(h["cache-control"], "no-store");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert!(
        h["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
}

#[tokio::test]
async fn unknown_api_paths_are_guarded_too() {
    let s = Server::start(None);
    let (st, _, body) = api_get(&s, "/api/nope", &[]).await;
    assert_error(st, &body, 401);
    let (st, _, body) = api_get(&s, "/api/nope", &[("authorization", &bearer(&s))]).await;
    assert_error(st, &body, 404);
}

#[tokio::test]
async fn a_foreign_host_is_refused_even_with_the_token() {
    let s = Server::start(None);
    let evil = format!("evil.example:{}", port(&s));
    let (st, h, body) = api_get(
        &s,
        "/api/health",
        &[("host", &evil), ("authorization", &bearer(&s))],
    )
    .await;
    assert_error(st, &body, 403);
    assert_eq!(h["cache-control"], "no-store");
    // Without the token too: a rebinding page learns nothing about it.
    let (st, _, body) = api_get(&s, "/api/health", &[("host", &evil)]).await;
    assert_error(st, &body, 403);
    // The loopback names on our port are us.
    for host in [format!("localhost:{}", port(&s)), authority(&s)] {
        let (st, _, body) = api_get(
            &s,
            "/api/health",
            &[("host", &host), ("authorization", &bearer(&s))],
        )
        .await;
        assert_eq!(st, 200, "{host}: {body}");
    }
    // The A2A side is not affected by the UI gate.
    let resp = reqwest::Client::new()
        .get(s.url("/.well-known/agent-card.json"))
        .header("host", &evil)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn a_foreign_origin_is_refused_and_our_own_accepted() {
    let s = Server::start(None);
    let token = bearer(&s);
    for origin in [
        "http://evil.example",
        &format!("http://localhost:{}", port(&s) ^ 1),
        "null",
    ] {
        let (st, _, body) = api_get(
            &s,
            "/api/health",
            &[("origin", origin), ("authorization", &token)],
        )
        .await;
        assert_error(st, &body, 403);
    }
    for origin in [s.base.clone(), format!("http://localhost:{}", port(&s))] {
        let (st, _, body) = api_get(
            &s,
            "/api/health",
            &[("origin", &origin), ("authorization", &token)],
        )
        .await;
        assert_eq!(st, 200, "{origin}: {body}");
    }
    let (st, _, body) = api_get(
        &s,
        "/api/health",
        &[("sec-fetch-site", "cross-site"), ("authorization", &token)],
    )
    .await;
    assert_error(st, &body, 403);
    let (st, _, _) = api_get(
        &s,
        "/api/health",
        &[("sec-fetch-site", "same-origin"), ("authorization", &token)],
    )
    .await;
    assert_eq!(st, 200);
}

#[tokio::test]
async fn public_url_host_and_origin_are_accepted() {
    let s = Server::start(Some(
        "public_url = \"https://inbox.example.com\"\n[[agents]]\nid = \"inbox\"\n",
    ));
    let (st, _, body) = api_get(
        &s,
        "/api/health",
        &[
            ("host", "inbox.example.com"),
            ("origin", "https://inbox.example.com"),
            ("authorization", &bearer(&s)),
        ],
    )
    .await;
    assert_eq!(st, 200, "{body}");
}

#[tokio::test]
async fn query_token_is_accepted_on_the_event_stream_only() {
    let s = Server::start(None);
    let q = format!("?token={}", s.ui_token());
    let (st, _, body) = api_get(&s, &format!("/api/health{q}"), &[]).await;
    assert_error(st, &body, 401);
    let (st, _, body) = api_get(&s, "/api/events?token=wrong", &[]).await;
    assert_error(st, &body, 401);

    let resp = reqwest::get(s.url(&format!("/api/events{q}")))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    let mut events = SseStream::new(resp);
    let task = s.client().send_text("inbox", "m-1", "approve this?").await;
    let id = task["task"]["id"].as_str().expect("a task").to_owned();
    let first = events.next().await.expect("an event for the new task");
    assert_eq!(first["taskId"], json!(id), "{first}");
    assert_eq!(first["agentId"], json!("inbox"), "{first}");
    assert!(first["seq"].as_i64().is_some_and(|n| n >= 1), "{first}");
    assert!(
        first["state"]
            .as_str()
            .is_some_and(|st| st.starts_with("TASK_STATE_")),
        "{first}"
    );
    assert!(first["kind"].is_string(), "{first}");
}

#[tokio::test]
async fn event_stream_ends_when_the_server_stops() {
    let mut s = Server::start(None);
    let resp = reqwest::Client::new()
        .get(s.url("/api/events"))
        .header("authorization", bearer(&s))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut events = SseStream::new(resp);
    let st = s.terminate();
    assert!(st.success(), "{st:?}");
    assert_eq!(events.next().await, None);
}

#[tokio::test]
async fn agents_lists_what_is_served_with_card_and_endpoint_urls() {
    let s = Server::start(None);
    let (st, _, body) = api_get(&s, "/api/agents", &[("authorization", &bearer(&s))]).await;
    assert_eq!(st, 200, "{body}");
    let agents = body["agents"].as_array().expect("agents");
    assert_eq!(agents.len(), 1, "{body}");
    let a = &agents[0];
    assert_eq!(a["id"], json!("inbox"));
    assert_eq!(a["name"], json!("Inbox"));
    assert_eq!(a["backend"], json!("human"));
    assert_eq!(a["url"], json!(s.url("/a2a/inbox")));
    let card_url = a["cardUrl"].as_str().unwrap();
    assert_eq!(card_url, s.url("/a2a/inbox/.well-known/agent-card.json"));
    let card: Value = reqwest::get(card_url).await.unwrap().json().await.unwrap();
    assert_eq!(card["name"], json!("Inbox"));
}

#[cfg(unix)]
#[test]
fn token_file_is_private_and_kept_across_restarts() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mut s = Server::start_in(dir.path(), None, &[]);
    let token = s.ui_token();
    assert_eq!(token.len(), 64);
    let mode = std::fs::metadata(dir.path().join("ui-token"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(s.terminate().success());
    let s = Server::start_in(dir.path(), None, &[]);
    assert_eq!(s.ui_token(), token);
}

#[test]
fn instance_file_exists_while_serving_and_goes_on_sigterm() {
    let mut s = Server::start(None);
    let path = s.data_dir.join("instance.json");
    let info: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(info["url"], json!(s.base));
    assert_eq!(info["pid"], json!(s.pid()));
    assert_eq!(info["version"], json!(env!("CARGO_PKG_VERSION")));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let found = countersign::server::instance::read_instance(&s.data_dir).unwrap();
    assert_eq!(found.info.url, s.base);
    assert_eq!(found.token.as_str(), s.ui_token());

    let st = s.terminate();
    assert!(st.success(), "{st:?}");
    assert!(!path.exists(), "instance.json must go on a clean shutdown");
    let e = countersign::server::instance::read_instance(&s.data_dir).unwrap_err();
    assert!(
        e.to_string().contains("no Countersign server is running"),
        "{e}"
    );
    // The secret stays: the next start uses it again.
    assert!(s.data_dir.join("ui-token").exists());
}

/// Kills a spawned server when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn serve_prints_the_ui_url_with_the_token_as_second_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Killed(
        Command::new(env!("CARGO_BIN_EXE_countersign"))
            .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        for _ in 0..2 {
            let mut line = String::new();
            let _ = r.read_line(&mut line);
            let _ = tx.send(line);
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let second = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    let addr = first
        .strip_prefix("listening on http://")
        .and_then(|l| l.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
    let token = std::fs::read_to_string(dir.path().join("ui-token")).unwrap();
    assert_eq!(
        second,
        format!("ui http://{addr}/#token={}\n", token.trim()),
        "second line"
    );
    // The printed token opens the API.
    let resp = reqwest::Client::new()
        .get(format!("http://{addr}/api/health"))
        .bearer_auth(token.trim())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}
