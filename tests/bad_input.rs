//! The bad-input table: every surface of the running server (JSON-RPC in
//! both dialects, 1.0 HTTP+JSON, 0.3 HTTP+JSON, the webhook receiver, the UI
//! API) gets truncated, oversized, too deeply nested, wrongly typed, non-UTF-8
//! and wrongly labelled bodies, and clients that send slowly. Each row names
//! the exact status and error it must get; afterwards the server still
//! answers and the tasks stored before are unchanged. `errors.rs` covers the
//! finer points of each binding's error mapping.
mod common;
use common::*;

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Small limits, so each is easy to cross, and short timeouts, so the slow
/// clients are cut off quickly. The peer is never reached: it only lets a
/// webhook subscription exist.
const CONFIG: &str = r#"
[limits]
max_body_bytes = 4096
max_json_depth = 8
header_timeout_secs = 1
body_timeout_secs = 1

[webhooks]
sweep_secs = 0
max_body_bytes = 2048

[[agents]]
id = "inbox"

[[peers]]
id = "bot"
url = "http://127.0.0.1:9/a2a/bot"
"#;

const ERROR_INFO: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// What a row must be answered with.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// A JSON-RPC error object with this code, under this HTTP status.
    Rpc(u16, i64),
    /// A `google.rpc.Status` body with this status and `ErrorInfo` reason.
    Rest(u16, &'static str),
    /// `{"error": {"code", "message"}}` (webhooks and the UI API).
    Plain(u16),
}

/// One surface: where requests go and how a good body looks there.
struct Surface {
    name: &'static str,
    path: String,
    headers: Vec<(&'static str, String)>,
    /// A body this surface accepts (its parse passes), as a template.
    good: Value,
    /// The same with a field of the wrong type.
    wrong_type: Value,
    /// What the answers to a wrongly typed field, to a JSON array and to a
    /// text/plain body say.
    wrong_type_says: &'static str,
    array_says: &'static str,
    media_says: &'static str,
}

struct Row {
    surface: usize,
    case: &'static str,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    want: Want,
    /// Part of the error message.
    says: &'static str,
}

fn rpc(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
}

fn deep(levels: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..levels {
        v = json!([v]);
    }
    v
}

/// `body` with its serialised form cut in half.
fn truncated(body: &Value) -> Vec<u8> {
    let s = serde_json::to_vec(body).unwrap();
    s[..s.len() / 2].to_vec()
}

/// `good` with a `padding` field that takes it past `limit` bytes.
fn huge(good: &Value, limit: usize) -> Vec<u8> {
    let mut v = good.clone();
    v["padding"] = json!("x".repeat(limit + 1));
    serde_json::to_vec(&v).unwrap()
}

/// `good` with a nested `extra` field deeper than the depth limit (8).
fn nested(good: &Value) -> Vec<u8> {
    let mut v = good.clone();
    v["extra"] = deep(20);
    serde_json::to_vec(&v).unwrap()
}

/// A body that is JSON but for one byte that is not UTF-8.
fn not_utf8(good: &Value) -> Vec<u8> {
    let s = serde_json::to_string(good).unwrap();
    let cut = s.len() - 1;
    let mut b = s.as_bytes()[..cut].to_vec();
    b.extend_from_slice(b",\"x\":\"\xff\xfe\"}");
    b
}

fn check(reply_status: u16, text: &str, want: Want, what: &str) {
    let body: Value = serde_json::from_str(text)
        .unwrap_or_else(|_| panic!("{what}: the answer is not JSON ({reply_status}): {text:?}"));
    match want {
        Want::Rpc(status, code) => {
            assert_eq!(reply_status, status, "{what}: HTTP status: {text}");
            assert_eq!(body["jsonrpc"], "2.0", "{what}: {text}");
            assert!(body.get("result").is_none(), "{what}: {text}");
            assert!(body.get("id").is_some(), "{what}: no id: {text}");
            assert_eq!(body["error"]["code"], json!(code), "{what}: code: {text}");
            assert_eq!(body["error"]["data"][0]["@type"], ERROR_INFO, "{what}");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| !m.is_empty()),
                "{what}: {text}"
            );
        }
        Want::Rest(status, reason) => {
            assert_eq!(reply_status, status, "{what}: HTTP status: {text}");
            let e = &body["error"];
            assert_eq!(e["code"], json!(status), "{what}: {text}");
            assert!(e["status"].as_str().is_some_and(|s| !s.is_empty()));
            assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()));
            assert_eq!(e["details"][0]["@type"], ERROR_INFO, "{what}: {text}");
            assert_eq!(e["details"][0]["reason"], reason, "{what}: {text}");
        }
        Want::Plain(status) => {
            assert_eq!(reply_status, status, "{what}: HTTP status: {text}");
            assert_eq!(body["error"]["code"], json!(status), "{what}: {text}");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| !m.is_empty()),
                "{what}: {text}"
            );
        }
    }
}

/// Parks a task on `inbox` and returns it as GetTask shows it.
async fn park(c: &Client, n: usize) -> Value {
    let r = c
        .send_text("inbox", &format!("before-{n}"), &format!("keep me {n}"))
        .await;
    let id = r["task"]["id"].as_str().expect("a task").to_owned();
    c.rpc_ok("inbox", "GetTask", json!({"id": id})).await
}

/// A subscription on the (unreachable) peer: its webhook URL and token.
async fn subscription(s: &Server) -> (String, String) {
    let r = reqwest::Client::new()
        .post(s.url("/api/peers/bot/subscriptions"))
        .bearer_auth(s.ui_token())
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 201);
    let sub: Value = r.json().await.expect("json");
    let url = sub["url"].as_str().expect("url").to_owned();
    let path = url
        .strip_prefix(&s.base)
        .unwrap_or_else(|| panic!("{url} is on this server"))
        .to_owned();
    (path, sub["token"].as_str().expect("token").to_owned())
}

fn surfaces(hook_path: &str, hook_token: &str, ui_token: &str, parked: &str) -> Vec<Surface> {
    let msg = json!({"messageId": "bad-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
    let msg03 = json!({"messageId": "bad-1", "role": "user", "kind": "message", "parts": [{"kind": "text", "text": "hi"}]});
    let rest03 = json!({"messageId": "bad-1", "role": "ROLE_USER", "content": [{"text": "hi"}]});
    let v1 = vec![("A2A-Version", "1.0".to_owned())];
    vec![
        Surface {
            name: "JSON-RPC 1.0 SendMessage",
            path: "/a2a/inbox".into(),
            headers: v1.clone(),
            good: rpc("SendMessage", json!({"message": msg})),
            wrong_type: rpc(
                "SendMessage",
                json!({"message": {"messageId": "bad-1", "role": "ROLE_USER", "parts": "hi"}}),
            ),
            wrong_type_says: "message.parts: invalid type",
            array_says: "batch requests are not supported",
            media_says: "must be application/json",
        },
        Surface {
            name: "JSON-RPC 0.3 message/send",
            path: "/a2a/inbox".into(),
            headers: vec![("A2A-Version", "0.3".to_owned())],
            good: rpc("message/send", json!({"message": msg03})),
            wrong_type: rpc(
                "message/send",
                json!({"message": {"messageId": "bad-1", "role": "user", "kind": "message", "parts": [{"kind": "text", "text": 5}]}}),
            ),
            wrong_type_says: "text",
            array_says: "batch requests are not supported",
            media_says: "must be application/json",
        },
        Surface {
            name: "HTTP+JSON 1.0 message:send",
            path: "/a2a/inbox/message:send".into(),
            headers: v1,
            good: json!({"message": msg}),
            wrong_type: json!({"message": {"messageId": "bad-1", "role": "ROLE_USER", "parts": {"text": "hi"}}}),
            wrong_type_says: "message.parts: invalid type",
            array_says: "must be a JSON object",
            media_says: "must be application/json",
        },
        Surface {
            name: "HTTP+JSON 0.3 /v1/message:send",
            path: "/a2a/inbox/v1/message:send".into(),
            headers: vec![],
            good: json!({"message": rest03}),
            wrong_type: json!({"message": {"messageId": "bad-1", "role": "ROLE_USER", "content": "hi"}}),
            wrong_type_says: "message.content must be an array",
            array_says: "must be a JSON object",
            media_says: "must be application/json",
        },
        Surface {
            name: "webhook receiver",
            path: hook_path.to_owned(),
            headers: vec![("X-A2A-Notification-Token", hook_token.to_owned())],
            good: json!({"statusUpdate": {"taskId": "remote-1", "status": {"state": "TASK_STATE_WORKING"}}}),
            wrong_type: json!({"statusUpdate": {"taskId": 5, "status": {"state": "TASK_STATE_WORKING"}}}),
            wrong_type_says: "invalid type: integer `5`, expected a string",
            array_says: "not a JSON object",
            media_says: "not acceptable JSON",
        },
        Surface {
            name: "UI API decision",
            path: format!("/api/tasks/{parked}/decision"),
            headers: vec![("Authorization", format!("Bearer {ui_token}"))],
            good: json!({"kind": "approve"}),
            wrong_type: json!({"kind": 5}),
            wrong_type_says: "invalid decision",
            array_says: "invalid decision",
            media_says: "invalid decision",
        },
    ]
}

/// A bad body: its name, content type and bytes, the answer it must get
/// from JSON-RPC, HTTP+JSON and the plain-shaped surfaces, and part of the
/// error message.
type Case = (
    &'static str,
    Option<&'static str>,
    Vec<u8>,
    Want,
    Want,
    Want,
    &'static str,
);

/// The rows: every bad body on every surface, with the answer it must get.
fn rows(surfaces: &[Surface]) -> Vec<Row> {
    const JSON: Option<&str> = Some("application/json");
    let mut rows = Vec::new();
    for (i, s) in surfaces.iter().enumerate() {
        let limit = if s.name == "webhook receiver" {
            2048
        } else {
            4096
        };
        // (case, content type, body, JSON-RPC, HTTP+JSON, plain, message)
        let cases: Vec<Case> = vec![
            (
                "truncated JSON",
                JSON,
                truncated(&s.good),
                Want::Rpc(200, -32700),
                Want::Rest(400, "JSON_PARSE"),
                Want::Plain(400),
                "EOF while parsing",
            ),
            (
                "body over the limit",
                JSON,
                huge(&s.good, limit),
                Want::Rpc(413, -32600),
                Want::Rest(413, "PAYLOAD_TOO_LARGE"),
                Want::Plain(413),
                "too large",
            ),
            (
                "nesting past max_json_depth",
                JSON,
                nested(&s.good),
                Want::Rpc(200, -32600),
                Want::Rest(400, "INVALID_REQUEST"),
                Want::Plain(400),
                "nested deeper than 8 levels",
            ),
            (
                "a field of the wrong type",
                JSON,
                serde_json::to_vec(&s.wrong_type).unwrap(),
                Want::Rpc(200, -32602),
                Want::Rest(400, "INVALID_PARAMS"),
                Want::Plain(400),
                s.wrong_type_says,
            ),
            (
                "a JSON array instead of an object",
                JSON,
                b"[1, 2, 3]".to_vec(),
                Want::Rpc(200, -32600),
                Want::Rest(400, "INVALID_PARAMS"),
                Want::Plain(400),
                s.array_says,
            ),
            (
                "invalid UTF-8",
                JSON,
                not_utf8(&s.good),
                Want::Rpc(200, -32700),
                Want::Rest(400, "JSON_PARSE"),
                Want::Plain(400),
                "not valid UTF-8",
            ),
            (
                "not JSON, labelled text/plain",
                Some("text/plain"),
                b"approve, please".to_vec(),
                Want::Rpc(200, -32005),
                Want::Rest(415, "CONTENT_TYPE_NOT_SUPPORTED"),
                Want::Plain(400),
                s.media_says,
            ),
        ];
        for (case, content_type, body, rpc, rest, plain, says) in cases {
            let want = if s.path == "/a2a/inbox" {
                rpc
            } else if s.path.starts_with("/a2a/") {
                rest
            } else {
                plain
            };
            rows.push(Row {
                surface: i,
                case,
                content_type,
                body,
                want,
                says,
            });
        }
    }
    rows
}

#[tokio::test]
async fn every_surface_refuses_bad_bodies_exactly_and_loses_nothing() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let before: Vec<Value> = {
        let mut v = Vec::new();
        for n in 0..3 {
            v.push(park(&c, n).await);
        }
        v
    };
    let parked = before[0]["id"].as_str().unwrap().to_owned();
    let (hook_path, hook_token) = subscription(&s).await;
    let surfaces = surfaces(&hook_path, &hook_token, &s.ui_token(), &parked);
    let rows = rows(&surfaces);
    assert_eq!(rows.len(), 42);
    let http = reqwest::Client::new();
    for row in &rows {
        let surface = &surfaces[row.surface];
        let what = format!("{} / {}", surface.name, row.case);
        let mut req = http
            .request(Method::POST, s.url(&surface.path))
            .body(row.body.clone());
        for (k, v) in &surface.headers {
            req = req.header(*k, v);
        }
        if let Some(ct) = row.content_type {
            req = req.header("Content-Type", ct);
        }
        let resp = req.send().await.unwrap_or_else(|e| panic!("{what}: {e}"));
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        check(status, &text, row.want, &what);
        assert!(
            text.contains(row.says),
            "{what}: the answer does not say {:?}: {text}",
            row.says
        );
    }
    // Still serving, and what was stored before is exactly as it was.
    for task in &before {
        let now = c
            .rpc_ok("inbox", "GetTask", json!({"id": task["id"]}))
            .await;
        assert_eq!(&now, task, "a stored task changed");
    }
    let list = c.rpc_ok("inbox", "ListTasks", json!({})).await;
    assert_eq!(list["totalSize"], 3, "no bad row created a task: {list}");
    let queue = http
        .get(s.url("/api/queue"))
        .bearer_auth(s.ui_token())
        .send()
        .await
        .unwrap();
    let queue: Value = queue.json().await.unwrap();
    assert_eq!(queue["total"], 3, "every turn is still open: {queue}");
}

/// Reads what the server sends until it closes the connection (or `limit`
/// passes): the bytes, and whether it closed.
async fn read_until_closed(
    conn: &mut tokio::net::tcp::OwnedReadHalf,
    limit: Duration,
) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let deadline = Instant::now() + limit;
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, conn.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (got, true),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => return (got, false),
        }
    }
}

/// Writes `head` at once, then `trickle` one byte every 200 ms until the
/// server stops taking them (or 15 s pass).
fn slow_writer(
    mut w: tokio::net::tcp::OwnedWriteHalf,
    head: Vec<u8>,
    trickle: Vec<u8>,
) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        if w.write_all(&head).await.is_err() {
            return 0;
        }
        let mut sent = 0;
        for b in trickle.iter().cycle().take(75) {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if w.write_all(&[*b]).await.is_err() {
                break;
            }
            sent += 1;
        }
        sent
    })
}

/// A desktop session's soft limit on open files is often 1,024. The server
/// raises it to the hard limit as it starts, so it holds more connections
/// at once than the soft limit it was started with would allow.
#[tokio::test]
async fn more_connections_than_the_soft_open_files_limit_are_all_served() {
    let s = Server::start_with_open_files(None, 256, 4096);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", s.pid())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[3..5], ["4096", "4096"], "soft and hard: {line}");
    let addr = s.base.trim_start_matches("http://").to_owned();
    let request =
        format!("GET /a2a/inbox/.well-known/agent-card.json HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    // Each connection stays open, answered, while the next ones come.
    let mut open = Vec::new();
    for n in 0..600 {
        let mut c = TcpStream::connect(&addr).await.unwrap();
        c.write_all(request.as_bytes()).await.unwrap();
        let mut head = [0u8; 12];
        tokio::time::timeout(Duration::from_secs(10), c.read_exact(&mut head))
            .await
            .unwrap_or_else(|_| panic!("connection {n} got no answer"))
            .unwrap();
        assert_eq!(&head, b"HTTP/1.1 200", "connection {n}");
        open.push(c);
    }
    assert_eq!(open.len(), 600);
}

#[tokio::test]
async fn a_client_trickling_its_headers_is_disconnected() {
    let s = Server::start(Some(CONFIG));
    let addr = s.base.trim_start_matches("http://").to_owned();
    let conn = TcpStream::connect(&addr).await.expect("connect");
    let (mut r, w) = conn.into_split();
    let started = Instant::now();
    let writer = slow_writer(
        w,
        b"POST /a2a/inbox HTTP/1.1\r\nHost: 127.0.0.1\r\n".to_vec(),
        b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".to_vec(),
    );
    let (_, closed) = read_until_closed(&mut r, Duration::from_secs(10)).await;
    assert!(closed, "the server held a slow-header connection for 10 s");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "closed only after {took:?} (header_timeout_secs = 1)"
    );
    writer.abort();
    // Everyone else is still served.
    let list = s.client().rpc_ok("inbox", "ListTasks", json!({})).await;
    assert_eq!(list["totalSize"], 0);
}

/// A connection that sends nothing has not picked a protocol yet, and HTTP/2
/// has no header timeout of its own: both are closed once they have gone the
/// header timeout without a request.
#[tokio::test]
async fn connections_that_never_complete_a_request_are_closed_in_either_protocol() {
    let s = Server::start(Some(CONFIG));
    let addr = s.base.trim_start_matches("http://").to_owned();

    let (mut r, _w) = TcpStream::connect(&addr)
        .await
        .expect("connect")
        .into_split();
    let started = Instant::now();
    let (got, closed) = read_until_closed(&mut r, Duration::from_secs(10)).await;
    assert!(closed, "the server held a silent connection for 10 s");
    assert!(got.is_empty(), "{got:?}");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "closed only after {took:?}");

    // HTTP/2 with prior knowledge: the preface, an empty SETTINGS frame, then
    // a HEADERS frame (stream 1, 64 bytes announced, not the end of the
    // headers) whose bytes trickle in one every 200 ms.
    let (mut r, w) = TcpStream::connect(&addr)
        .await
        .expect("connect")
        .into_split();
    let mut head = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    head.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]);
    head.extend_from_slice(&[0, 0, 64, 0x1, 0, 0, 0, 0, 1]);
    let started = Instant::now();
    let writer = slow_writer(w, head, vec![0x82]);
    let (got, closed) = read_until_closed(&mut r, Duration::from_secs(10)).await;
    assert!(
        closed,
        "the server held a trickling HTTP/2 connection for 10 s"
    );
    // It spoke HTTP/2: its first frame is its SETTINGS.
    assert_eq!(got.get(3), Some(&0x4), "{got:?}");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "closed only after {took:?}");
    writer.abort();

    // Everyone else is still served.
    let list = s.client().rpc_ok("inbox", "ListTasks", json!({})).await;
    assert_eq!(list["totalSize"], 0);
}

#[tokio::test]
async fn a_client_trickling_its_body_gets_408_on_every_surface_and_is_disconnected() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let kept = park(&c, 0).await;
    let parked = kept["id"].as_str().unwrap().to_owned();
    let (hook_path, hook_token) = subscription(&s).await;
    let surfaces = surfaces(&hook_path, &hook_token, &s.ui_token(), &parked);
    let addr = s.base.trim_start_matches("http://").to_owned();
    for surface in &surfaces {
        let body = serde_json::to_vec(&surface.good).unwrap();
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            surface.path,
            body.len()
        );
        for (k, v) in &surface.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let conn = TcpStream::connect(&addr).await.expect("connect");
        let (mut r, w) = conn.into_split();
        let started = Instant::now();
        let writer = slow_writer(w, head.into_bytes(), body);
        let (got, closed) = read_until_closed(&mut r, Duration::from_secs(10)).await;
        let took = started.elapsed();
        writer.abort();
        let text = String::from_utf8_lossy(&got).into_owned();
        assert!(
            closed,
            "{}: the connection stayed open: {text}",
            surface.name
        );
        assert!(
            took < Duration::from_secs(5),
            "{}: closed only after {took:?}",
            surface.name
        );
        let (head, body) = text
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("{}: no HTTP answer: {text:?}", surface.name));
        let status: u16 = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let want = if surface.path == "/a2a/inbox" {
            Want::Rpc(408, -32600)
        } else if surface.path.starts_with("/a2a/") {
            Want::Rest(408, "REQUEST_TIMEOUT")
        } else {
            Want::Plain(408)
        };
        check(status, body, want, surface.name);
    }
    let now = c.rpc_ok("inbox", "GetTask", json!({"id": parked})).await;
    assert_eq!(now, kept, "the parked task changed");
    let list = c.rpc_ok("inbox", "ListTasks", json!({})).await;
    assert_eq!(list["totalSize"], 1, "{list}");
}

/// Sends a message to the 0.3 HTTP+JSON send (`rest03`, the body) and to
/// 0.3 JSON-RPC (`rpc03`, the `message/send` params): both are refused as
/// invalid params, saying `why`.
async fn refused_by_0_3(s: &Server, rest03: Value, rpc03: Value, why: &str) {
    let http = reqwest::Client::new();
    let r = http
        .post(s.url("/a2a/inbox/v1/message:send"))
        .json(&rest03)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    check(
        status,
        &text,
        Want::Rest(400, "INVALID_PARAMS"),
        "0.3 HTTP+JSON",
    );
    assert!(text.contains(why), "0.3 HTTP+JSON: {text}");
    let r = http
        .post(s.url("/a2a/inbox"))
        .json(&rpc("message/send", rpc03))
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    check(200, &text, Want::Rpc(200, -32602), "0.3 JSON-RPC");
    assert!(text.contains(why), "0.3 JSON-RPC: {text}");
}

/// A message id of blanks is no id, in every dialect, as 1.0 reads it. The
/// 0.3 codecs took one (found by fuzzing `rest_bodies`: the request they
/// made did not read back as 1.0).
#[tokio::test]
async fn a_blank_message_id_is_refused_in_every_dialect() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let blank = " \t ";
    refused_by_0_3(
        &s,
        json!({"message": {"messageId": blank, "role": "ROLE_USER",
            "content": [{"text": "x"}]}}),
        json!({"message": {"messageId": blank, "role": "user", "kind": "message",
            "parts": [{"kind": "text", "text": "x"}]}}),
        "messageId is required and must not be blank",
    )
    .await;
    let r = c
        .rpc_err(
            "inbox",
            "SendMessage",
            json!({"message": message(blank, "x")}),
        )
        .await;
    assert_eq!(r["code"], -32602, "1.0 JSON-RPC: {r}");
    let (status, body) = c
        .rest(
            reqwest::Method::POST,
            "inbox",
            "/message:send",
            Some(json!({"message": message(blank, "x")})),
        )
        .await;
    assert_eq!(status, 400, "1.0 HTTP+JSON: {body}");
    let list = c.rpc_ok("inbox", "ListTasks", json!({})).await;
    assert_eq!(list["totalSize"], 0, "nothing was stored: {list}");
}

/// Found by the `rest_bodies` fuzz target: the 0.3 HTTP+JSON binding took
/// `fileWithBytes` that is not base64 and stored a part the 1.0 model itself
/// refuses to read. Now every dialect checks the bytes of a file part alike.
#[tokio::test]
async fn file_bytes_that_are_not_base64_are_refused_in_every_dialect() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let bad = "iVBORw0KGgoAAAANSUhEUb6c8d6";
    let http = reqwest::Client::new();
    refused_by_0_3(
        &s,
        json!({"message": {"messageId": "b64-1", "role": "ROLE_USER", "content": [
            {"text": "look"}, {"file": {"fileWithBytes": bad, "mimeType": "image/png"}}]}}),
        json!({"message": {"messageId": "b64-2", "role": "user", "kind": "message", "parts": [
            {"kind": "file", "file": {"bytes": bad, "mimeType": "image/png"}}]}}),
        "must be base64",
    )
    .await;
    let list = c.rpc_ok("inbox", "ListTasks", json!({})).await;
    assert_eq!(list["totalSize"], 0, "nothing was stored: {list}");
    // URL-safe base64 is base64 in every dialect, as it is in 1.0.
    let url_safe = "_-8=";
    let r = http
        .post(s.url("/a2a/inbox/v1/message:send"))
        .json(
            &json!({"message": {"messageId": "b64-3", "role": "ROLE_USER", "content": [
            {"file": {"fileWithBytes": url_safe, "mimeType": "application/octet-stream"}}]}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let list = c
        .rpc_ok("inbox", "ListTasks", json!({"historyLength": 10}))
        .await;
    let history = list["tasks"][0]["history"].as_array().expect("history");
    let user = history
        .iter()
        .find(|m| m["messageId"] == "b64-3")
        .unwrap_or_else(|| panic!("the message is stored: {list}"));
    assert_eq!(user["parts"][0]["raw"], url_safe, "{list}");
}
