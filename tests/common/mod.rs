//! Shared test harness: starts the real `countersign` binary on 127.0.0.1:0
//! with a real data dir, and speaks HTTP to it.
#![allow(dead_code)]

pub mod powercut;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The scripted agent that follows the TCK scenario contract.
pub const TCK_CONFIG: &str = include_str!("../conformance/tck-agent.toml");

/// Asserts that a database is sound: `PRAGMA integrity_check` passes, and
/// no row refers to a row that is not there (foreign keys are declared but
/// not enforced, so nothing else would notice).
pub fn assert_sound(conn: &rusqlite::Connection) {
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    let orphans: Vec<(String, String)> = conn
        .prepare("PRAGMA foreign_key_check")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(2)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert!(
        orphans.is_empty(),
        "{} rows without their parent (table, parent), such as {:?}",
        orphans.len(),
        &orphans[..orphans.len().min(3)]
    );
}

/// Runs `countersign serve` with `config` (written to `c.toml` in a fresh
/// data dir), expects it to refuse to start, and returns what it said.
pub fn refused_config(config: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.toml");
    std::fs::write(&path, config).expect("write the config");
    let out = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .arg("--config")
        .arg(&path)
        .output()
        .expect("run countersign serve");
    assert!(!out.status.success(), "{config} should be refused");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `countersign`, run with files of at most `kib` KiB (`RLIMIT_FSIZE`,
/// with `SIGXFSZ` ignored): a write past that fails as on a full disk.
pub fn limited_command(kib: u64) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(r#"trap '' XFSZ; ulimit -S -f "$1"; shift; exec "$@""#)
        .arg("bash")
        .arg(kib.to_string())
        .arg(env!("CARGO_BIN_EXE_countersign"));
    cmd
}

/// A load worker's HTTP client: one keep-alive connection, and requests
/// that give up after 20 s (a server killed mid-request never answers).
pub fn worker_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("an HTTP client")
}

/// A running server process.
pub struct Server {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub data_dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
}

impl Server {
    /// Starts a server with `config` (TOML) in a fresh data dir.
    pub fn start(config: Option<&str>) -> Server {
        Server::start_fresh(Command::new(env!("CARGO_BIN_EXE_countersign")), config)
    }

    /// Runs `cmd serve …` in a fresh data dir, removed when the server is.
    fn start_fresh(cmd: Command, config: Option<&str>) -> Server {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut s = Server::spawn(cmd, tmp.path(), config, &[]);
        s._tmp = Some(tmp);
        s
    }

    /// Starts a server on an existing data dir (to test restarts).
    pub fn start_in(dir: &Path, config: Option<&str>, extra: &[&str]) -> Server {
        Server::spawn(
            Command::new(env!("CARGO_BIN_EXE_countersign")),
            dir,
            config,
            extra,
        )
    }

    /// Runs `cmd serve …` (the binary, with what `cmd` adds: environment,
    /// limits) on an existing data dir.
    pub fn start_cmd_in(cmd: Command, dir: &Path, config: Option<&str>) -> Server {
        Server::spawn(cmd, dir, config, &[])
    }

    /// Starts a server in a fresh data dir that may write files of at most
    /// `kib` KiB (`RLIMIT_FSIZE`, with `SIGXFSZ` ignored): a write past that
    /// fails as it would on a full disk. [`Server::lift_file_limit`] gives
    /// it room again.
    pub fn start_with_file_limit(config: Option<&str>, kib: u64) -> Server {
        Server::limited(config, kib, false)
    }

    /// [`Server::start_with_file_limit`], with the log (stderr,
    /// `server.log`) already as large as a file may be: every log line the
    /// server writes fails.
    pub fn start_with_full_log(config: Option<&str>, kib: u64) -> Server {
        Server::limited(config, kib, true)
    }

    fn limited(config: Option<&str>, kib: u64, full_log: bool) -> Server {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        if full_log {
            let size = usize::try_from(kib * 1024).unwrap();
            std::fs::write(dir.join("server.log"), vec![b'.'; size]).unwrap();
        }
        let mut s = Server::spawn(limited_command(kib), &dir, config, &[]);
        s._tmp = Some(tmp);
        s
    }

    /// Starts a server in a fresh data dir whose limit on open files is
    /// `soft` (`RLIMIT_NOFILE`), with `hard` as the most it may raise it to.
    pub fn start_with_open_files(config: Option<&str>, soft: u64, hard: u64) -> Server {
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(r#"ulimit -S -n "$1" && ulimit -H -n "$2" && shift 2 && exec "$@""#)
            .arg("bash")
            .arg(soft.to_string())
            .arg(hard.to_string())
            .arg(env!("CARGO_BIN_EXE_countersign"));
        Server::start_fresh(cmd, config)
    }

    /// Lifts the limit of [`Server::start_with_file_limit`].
    pub fn lift_file_limit(&self) {
        let st = Command::new("prlimit")
            .arg("--pid")
            .arg(self.pid().to_string())
            .arg("--fsize=unlimited:")
            .status()
            .expect("run prlimit");
        assert!(st.success(), "prlimit failed");
    }

    fn spawn(mut cmd: Command, dir: &Path, config: Option<&str>, extra: &[&str]) -> Server {
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(dir)
            .arg("--bind")
            .arg("127.0.0.1:0");
        if let Some(c) = config {
            let path = dir.join("config.toml");
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(&path, c).unwrap();
            cmd.arg("--config").arg(path);
        }
        cmd.args(extra);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("server.log"))
            .unwrap();
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .env("RUST_LOG", "countersign=debug");
        let mut child = cmd.spawn().expect("spawn countersign");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| {
                panic!(
                    "server did not announce itself; log: {}",
                    std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
                )
            });
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| {
                panic!(
                    "unexpected first line {line:?}; log: {}",
                    std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
                )
            })
            .to_owned();
        Server {
            child: Some(child),
            base,
            data_dir: dir.to_path_buf(),
            _tmp: None,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then wait (at most 20 s) for the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut c = self.child.take().expect("running");
        Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                panic!("server did not stop within 20 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("server.log")).unwrap_or_default()
    }

    /// An HTTP client for this server.
    pub fn client(&self) -> Client {
        Client {
            http: reqwest::Client::new(),
            base: self.base.clone(),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A thin HTTP client speaking both bindings.
#[derive(Clone)]
pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Client {
    /// A JSON-RPC call; returns the whole response body (`result` or `error`).
    pub async fn rpc(&self, agent: &str, method: &str, params: Value) -> Value {
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let resp = self
            .http
            .post(format!("{}/a2a/{agent}", self.base))
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .send()
            .await
            .expect("request");
        let body: Value = resp.json().await.expect("JSON body");
        assert_eq!(body["id"], json!(id), "id must echo: {body}");
        body
    }

    /// A JSON-RPC call that must succeed; returns `result`.
    pub async fn rpc_ok(&self, agent: &str, method: &str, params: Value) -> Value {
        let body = self.rpc(agent, method, params).await;
        assert!(body.get("error").is_none(), "{method} failed: {body}");
        body["result"].clone()
    }

    /// A JSON-RPC call that must fail; returns `error`.
    pub async fn rpc_err(&self, agent: &str, method: &str, params: Value) -> Value {
        let body = self.rpc(agent, method, params).await;
        assert!(body.get("result").is_none(), "{method} should fail: {body}");
        body["error"].clone()
    }

    /// Sends a text message (JSON-RPC SendMessage) and returns the result.
    pub async fn send_text(&self, agent: &str, message_id: &str, text: &str) -> Value {
        self.rpc_ok(
            agent,
            "SendMessage",
            json!({"message": message(message_id, text)}),
        )
        .await
    }

    /// A REST request under `/a2a/{agent}`; returns (status, body as JSON or Null).
    pub async fn rest(
        &self,
        method: reqwest::Method,
        agent: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}/a2a/{agent}{path}", self.base))
            .header("A2A-Version", "1.0");
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Opens an SSE stream (JSON-RPC) and collects every event until it closes.
    pub async fn rpc_stream(&self, agent: &str, method: &str, params: Value) -> Vec<Value> {
        let resp = self
            .http
            .post(format!("{}/a2a/{agent}", self.base))
            .header("A2A-Version", "1.0")
            .header("Accept", "text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
            .send()
            .await
            .expect("request");
        collect_sse(resp).await
    }
}

/// A user message with one text part.
pub fn message(message_id: &str, text: &str) -> Value {
    json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]})
}

/// Reads an SSE response to its end (at most 30 s) and parses each `data:`.
pub async fn collect_sse(resp: reqwest::Response) -> Vec<Value> {
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"),
        "not an event stream: {:?}",
        resp.headers()
    );
    let text = tokio::time::timeout(Duration::from_secs(30), resp.text())
        .await
        .expect("stream did not close within 30 s")
        .expect("stream body");
    parse_sse(&text)
}

/// Parses SSE text into the JSON of each event's data.
pub fn parse_sse(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|block| {
            let data: Vec<&str> = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            (!data.is_empty())
                .then(|| serde_json::from_str(&data.join("\n")).expect("event data is JSON"))
        })
        .collect()
}

/// The state string of a task JSON.
pub fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or("")
}

/// An SSE response read event by event, for tests that act while a stream
/// is open (subscribe, then send a follow-up).
pub struct SseStream {
    resp: reqwest::Response,
    buf: Vec<u8>,
    closed: bool,
}

impl SseStream {
    /// Wraps an SSE response (checks its content type).
    pub fn new(resp: reqwest::Response) -> SseStream {
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream"),
            "not an event stream: {:?}",
            resp.headers()
        );
        SseStream {
            resp,
            buf: Vec::new(),
            closed: false,
        }
    }

    /// The next event's data as JSON, or `None` once the stream has closed.
    /// Panics if nothing arrives within 30 s.
    pub async fn next(&mut self) -> Option<Value> {
        tokio::time::timeout(Duration::from_secs(30), self.next_event())
            .await
            .expect("no SSE event and no close within 30 s")
    }

    /// The next event, without a time limit (wrap in a timeout).
    pub async fn next_event(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..end + 2).collect();
                if let Some(v) = parse_sse(&String::from_utf8_lossy(&block))
                    .into_iter()
                    .next()
                {
                    return Some(v);
                }
                continue;
            }
            if self.closed {
                return None;
            }
            match self.resp.chunk().await.expect("stream body") {
                Some(bytes) => self.buf.extend_from_slice(&bytes),
                None => self.closed = true,
            }
        }
    }

    /// Every remaining event until the stream closes (at most 30 s).
    pub async fn rest(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(v) = self.next().await {
            out.push(v);
        }
        out
    }
}

impl Server {
    /// Sends `signal` (a `kill` name such as `INT` or `TERM`), then waits (at
    /// most 20 s) for the exit status.
    pub fn stop_with(&mut self, signal: &str) -> ExitStatus {
        let mut c = self.child.take().expect("running");
        Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(c.id().to_string())
            .status()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                panic!("server did not stop within 20 s of SIG{signal}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Server {
    /// The UI API token of this server's data dir (`ui-token`).
    pub fn ui_token(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("ui-token"))
            .expect("ui-token in the data dir")
            .trim()
            .to_owned()
    }
}

/// What a finished CLI run printed.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `countersign ARGS… --data-dir DIR` to its end, at most `limit`.
pub async fn run_cli(dir: &Path, args: &[&str], limit: Duration) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_countersign"));
    cmd.args(args)
        .arg("--data-dir")
        .arg(dir)
        .env_remove("COUNTERSIGN_CONFIG")
        .env_remove("COUNTERSIGN_DATA_DIR");
    let what = format!("countersign {args:?}");
    let out = tokio::time::timeout(limit, tokio::task::spawn_blocking(move || cmd.output()))
        .await
        .unwrap_or_else(|_| panic!("{what} did not exit within {limit:?}"))
        .unwrap()
        .expect("run countersign");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs a CLI command that must succeed, at most `limit`; returns its stdout.
pub async fn run_cli_ok(dir: &Path, args: &[&str], limit: Duration) -> String {
    let r = run_cli(dir, args, limit).await;
    assert_eq!(r.code, Some(0), "countersign {args:?} failed: {r:?}");
    r.stdout
}

/// The UI API of a server, with its token.
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    pub fn new(s: &Server) -> Api {
        Api {
            http: reqwest::Client::new(),
            base: s.base.clone(),
            token: s.ui_token(),
        }
    }
    /// `method` on `/api{path}`: the status and the JSON body (null if none).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (reqwest::StatusCode, Value) {
        let mut req = self
            .http
            .request(method, format!("{}/api{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }
    /// The peer `id` as `GET /api/peers` lists it.
    pub async fn peer(&self, id: &str) -> Value {
        let (_, list) = self.call(reqwest::Method::GET, "/peers", None).await;
        list["peers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == id)
            .cloned()
            .unwrap()
    }
}

/// A webhook receiver on 127.0.0.1 that records every notification it
/// accepts: its `A2A-Notification-Id` and its body. While down it answers
/// 503 and records nothing.
#[derive(Clone)]
pub struct Hook {
    /// `http://127.0.0.1:PORT/hook`
    pub url: String,
    got: std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Hook {
    pub async fn start() -> Hook {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let hook = Hook {
            url: format!("http://{}/hook", listener.local_addr().unwrap()),
            got: Default::default(),
            up: std::sync::Arc::new(true.into()),
        };
        let h = hook.clone();
        let app = axum::Router::new().fallback(
            async move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                if !h.up.load(std::sync::atomic::Ordering::SeqCst) {
                    return axum::http::StatusCode::SERVICE_UNAVAILABLE;
                }
                let id = headers
                    .get("a2a-notification-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                h.got.lock().unwrap().push((id, v));
                axum::http::StatusCode::OK
            },
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        hook
    }

    /// Answers 2xx (`true`) or 503.
    pub fn set_up(&self, up: bool) {
        self.up.store(up, std::sync::atomic::Ordering::SeqCst);
    }

    /// The notifications accepted so far, in arrival order.
    pub fn accepted(&self) -> Vec<(String, Value)> {
        self.got.lock().unwrap().clone()
    }
}

/// Asserts that no task of `s` holds a message twice (by `messageId`):
/// nothing sent to it at least once was applied more than once. Returns how
/// many tasks it checked.
pub async fn assert_each_message_once(s: &Server) -> usize {
    let api = Api::new(s);
    let (status, listed) = api
        .call(reqwest::Method::GET, "/tasks?limit=500", None)
        .await;
    assert_eq!(status, 200, "{listed}");
    let items = listed["items"].as_array().cloned().unwrap_or_default();
    for t in &items {
        let id = t["id"].as_str().expect("a listed task has an id");
        let (status, d) = api
            .call(reqwest::Method::GET, &format!("/tasks/{id}"), None)
            .await;
        assert_eq!(status, 200, "{d}");
        let mut ids: Vec<&str> = d["task"]["history"]
            .as_array()
            .map(|h| h.iter().filter_map(|m| m["messageId"].as_str()).collect())
            .unwrap_or_default();
        let n = ids.len();
        assert!(n > 0, "a task without messages: {d}");
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n, "a message applied twice: {d}");
    }
    items.len()
}

/// Sends a request received by a test's proxy on to `base`: the same
/// method, path, query, headers (but `Host` and `Content-Length`) and
/// `body`.
pub async fn send_on(
    http: &reqwest::Client,
    base: &str,
    parts: &axum::http::request::Parts,
    body: axum::body::Bytes,
) -> reqwest::Result<reqwest::Response> {
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut out = http
        .request(parts.method.clone(), format!("{base}{path}"))
        .body(body);
    for (name, value) in &parts.headers {
        if name != reqwest::header::HOST && name != reqwest::header::CONTENT_LENGTH {
            out = out.header(name, value);
        }
    }
    out.send().await
}
