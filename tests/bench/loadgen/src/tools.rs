//! The other jobs of the harness: a stub A2A peer, the push → parked latency
//! probe, the push → OS notification probe (the desktop app), the startup
//! timer and the machine's stall probe.
use std::convert::Infallible;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};

pub type Res<T> = Result<T, String>;

fn rt() -> Res<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))
}

/// `stub-peer PORT`: a 1.0 JSON-RPC peer whose every task is waiting for
/// input. Its card offers push notifications; GetTask answers any id.
pub fn stub_peer(port: u16) -> Res<()> {
    let rt = rt()?;
    rt.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| format!("bind: {e}"))?;
        loop {
            let (stream, _) = listener
                .accept()
                .await
                .map_err(|e| format!("accept: {e}"))?;
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| peer_answer(req, port));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    })
}

async fn peer_answer(
    req: Request<Incoming>,
    port: u16,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = if req.method() == hyper::Method::GET {
        json!({
            "name": "Stub peer",
            "description": "Every task waits for input",
            "version": "1.0.0",
            "supportedInterfaces": [{
                "url": format!("http://127.0.0.1:{port}/"),
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0"
            }],
            "capabilities": {"pushNotifications": true, "streaming": false},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": []
        })
    } else {
        let bytes = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let call: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let id = call.get("id").cloned().unwrap_or(Value::Null);
        match call["method"].as_str() {
            Some("GetTask") => {
                let task = call["params"]["id"].as_str().unwrap_or("unknown");
                json!({"jsonrpc": "2.0", "id": id, "result": {
                    "id": task,
                    "contextId": format!("ctx-{task}"),
                    "status": {
                        "state": "TASK_STATE_INPUT_REQUIRED",
                        "message": {"messageId": format!("q-{task}"), "role": "ROLE_AGENT",
                                    "parts": [{"text": "Which environment?"}]}
                    },
                    "history": [{"messageId": format!("m-{task}"), "role": "ROLE_USER",
                                 "parts": [{"text": format!("deploy build {task}")}]}]
                }})
            }
            _ => json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32601, "message": "method not found"}}),
        }
    };
    let mut resp = Response::new(Full::new(Bytes::from(body.to_string())));
    resp.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

async fn connect(url: &hyper::Uri) -> Res<hyper::client::conn::http1::SendRequest<Full<Bytes>>> {
    let host = url.host().unwrap_or("127.0.0.1").to_owned();
    let port = url.port_u16().unwrap_or(80);
    let stream = TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("connect {url}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::task::spawn_local(conn);
    Ok(send)
}

fn request(method: &str, url: &hyper::Uri, body: Bytes) -> Res<Request<Full<Bytes>>> {
    let host = format!(
        "{}:{}",
        url.host().unwrap_or("127.0.0.1"),
        url.port_u16().unwrap_or(80)
    );
    Request::builder()
        .method(method)
        .uri(url.path_and_query().map(|p| p.as_str()).unwrap_or("/"))
        .header("host", host)
        .header("content-type", "application/json")
        .body(Full::new(body))
        .map_err(|e| format!("request: {e}"))
}

/// `push-latency WEBHOOK_URL TOKEN EVENTS_URL COUNT`: sends COUNT pushes, one
/// at a time, each for a new task of the stub peer, and times each from the
/// push leaving to its `TASK_STATE_INPUT_REQUIRED` notice on the UI event
/// stream (what the desktop notifier listens to).
pub fn push_latency(webhook: &str, token: &str, events: &str, count: usize) -> Res<()> {
    let webhook: hyper::Uri = webhook.parse().map_err(|e| format!("webhook URL: {e}"))?;
    let events: hyper::Uri = events.parse().map_err(|e| format!("events URL: {e}"))?;
    let rt = rt()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
        let mut ev = connect(&events).await?;
        let mut req = request("GET", &events, Bytes::new())?;
        req.headers_mut()
            .insert("accept", hyper::header::HeaderValue::from_static("text/event-stream"));
        let resp = ev.send_request(req).await.map_err(|e| format!("events: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("events: HTTP {}", resp.status()));
        }
        tokio::task::spawn_local(async move {
            let mut body = resp.into_body();
            let mut pending = String::new();
            while let Some(Ok(frame)) = body.frame().await {
                if let Ok(data) = frame.into_data() {
                    pending.push_str(&String::from_utf8_lossy(&data));
                    while let Some(end) = pending.find('\n') {
                        let line: String = pending.drain(..=end).collect();
                        if line.starts_with("data:") && line.contains("TASK_STATE_INPUT_REQUIRED") {
                            let _ = tx.send(Instant::now());
                        }
                    }
                }
            }
        });
        let mut push = connect(&webhook).await?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let mut lat = Vec::new();
        let mut http = Vec::new();
        for i in 0..count {
            let task = format!("peer-{stamp}-{i}");
            let body = json!({"statusUpdate": {"taskId": task, "contextId": format!("ctx-{task}"),
                              "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}});
            let mut req = request("POST", &webhook, Bytes::from(body.to_string()))?;
            req.headers_mut().insert(
                "a2a-notification-token",
                token.parse().map_err(|e| format!("token: {e}"))?,
            );
            while rx.try_recv().is_ok() {}
            let sent = Instant::now();
            let resp = push.send_request(req).await.map_err(|e| format!("push: {e}"))?;
            let status = resp.status();
            let _ = resp.into_body().collect().await;
            http.push(sent.elapsed());
            if !status.is_success() {
                return Err(format!("push {i}: HTTP {status}"));
            }
            match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
                Ok(Some(at)) => lat.push(at.duration_since(sent)),
                _ => return Err(format!("push {i}: no notice within 5 s")),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        lat.sort_unstable();
        http.sort_unstable();
        let ms = |v: &[Duration], p: f64| {
            let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
            v[i].as_secs_f64() * 1000.0
        };
        println!(
            "{{\"pushes\":{},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3},\"http_p50_ms\":{:.3},\"http_p99_ms\":{:.3}}}",
            lat.len(),
            ms(&lat, 0.5),
            ms(&lat, 0.99),
            ms(&lat, 1.0),
            ms(&http, 0.5),
            ms(&http, 0.99)
        );
        Ok(())
    })
}

/// `startup URL -- CMD ARGS…`: spawns CMD and times it until URL answers 200;
/// prints `{"startup_ms":…,"pid":…}` and leaves CMD running.
pub fn startup(url: &str, cmd: &[String]) -> Res<()> {
    let url: hyper::Uri = url.parse().map_err(|e| format!("URL: {e}"))?;
    let (prog, args) = cmd.split_first().ok_or("startup needs a command")?;
    let rt = rt()?;
    let local = tokio::task::LocalSet::new();
    let started = Instant::now();
    let mut child = std::process::Command::new(prog)
        .args(args)
        .spawn()
        .map_err(|e| format!("spawn {prog}: {e}"))?;
    local.block_on(&rt, async move {
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("{prog} exited before answering: {status}"));
            }
            if started.elapsed() > Duration::from_secs(60) {
                return Err("no answer within 60 s".to_owned());
            }
            if let Ok(mut send) = connect(&url).await {
                if let Ok(req) = request("GET", &url, Bytes::new()) {
                    if let Ok(resp) = send.send_request(req).await {
                        if resp.status().is_success() {
                            let _ = resp.into_body().collect().await;
                            break;
                        }
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        println!(
            "{{\"startup_ms\":{:.1},\"pid\":{}}}",
            started.elapsed().as_secs_f64() * 1000.0,
            child.id()
        );
        Ok(())
    })
}

/// `stalls SECONDS`: how much the machine holds up a thread that only
/// computes. Runs slices of the same arithmetic (2^20 multiply-adds, 1.5 ms
/// here on 2 Dec), back to back, for SECONDS, and
/// prints how long they took:
/// `{"slices":…,"p50_ms":…,"p99_ms":…,"p999_ms":…,"max_ms":…,"over_2x":…}`
/// (`over_2x`: slices that took more than twice the median). On an idle,
/// dedicated core every slice takes the same time; on a shared VM the host
/// preempts it, and every server's p99 on that core carries those stalls.
/// The work is fixed, so the median also shows how fast the core ran.
pub fn stalls(seconds: u64) -> Res<()> {
    const SLICE: u64 = 1 << 20;
    let slice = |x: &mut u64| {
        for i in 0..SLICE {
            *x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i);
            std::hint::black_box(*x);
        }
    };
    let mut x = 1;
    let mut took = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(seconds) {
        let t = Instant::now();
        slice(&mut x);
        took.push(t.elapsed());
    }
    took.sort_unstable();
    let ms = |p: f64| {
        let i = ((took.len() as f64 * p).ceil() as usize).clamp(1, took.len()) - 1;
        took[i].as_secs_f64() * 1000.0
    };
    let median = took[(took.len() - 1) / 2];
    println!(
        "{{\"slices\":{},\"p50_ms\":{:.2},\"p99_ms\":{:.2},\"p999_ms\":{:.2},\"max_ms\":{:.2},\"over_2x\":{}}}",
        took.len(),
        ms(0.5),
        ms(0.99),
        ms(0.999),
        ms(1.0),
        took.iter().filter(|&&d| d > median * 2).count()
    );
    Ok(())
}

/// Nanoseconds since the Unix epoch (the clock the notification service
/// stamps its records with).
fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Reads the whole lines appended to a JSON Lines file since `offset`.
struct Tail {
    path: std::path::PathBuf,
    offset: u64,
    partial: String,
}

impl Tail {
    /// Starts at the file's current end (or its start, if it is not there yet).
    fn at_end(path: &str) -> Tail {
        let offset = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        Tail {
            path: path.into(),
            offset,
            partial: String::new(),
        }
    }

    fn lines(&mut self) -> Res<Vec<String>> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("{}: {e}", self.path.display())),
        };
        f.seek(SeekFrom::Start(self.offset))
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)
            .map_err(|e| format!("{}: {e}", self.path.display()))?;
        self.offset += buf.len() as u64;
        self.partial.push_str(&String::from_utf8_lossy(&buf));
        let mut out = Vec::new();
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            if !line.trim().is_empty() {
                out.push(line.trim().to_owned());
            }
        }
        Ok(out)
    }
}

/// `push-notify WEBHOOK_URL TOKEN RECORD_FILE SUMMARY [COUNT] [GAP_MS]`: sends
/// COUNT webhook pushes (default 100), one at a time and GAP_MS apart (default
/// 600, longer than the desktop's 400 ms grouping window), each for a new task
/// of the stub peer, and times each from the wall clock just before its POST
/// to the `time_ns` of the OS notification the stand-in notification service
/// recorded for it in RECORD_FILE (JSON Lines). Every notification must be
/// the one for that push — summary SUMMARY (the peer's name), body the
/// task's request line (`deploy build TASK`, from the stub peer) — and must
/// arrive within 5 s.
pub fn push_notify(
    webhook: &str,
    token: &str,
    record: &str,
    summary: &str,
    count: usize,
    gap: Duration,
) -> Res<()> {
    let webhook: hyper::Uri = webhook.parse().map_err(|e| format!("webhook URL: {e}"))?;
    let token: hyper::header::HeaderValue = token.parse().map_err(|e| format!("token: {e}"))?;
    if count == 0 {
        return Err("COUNT must be at least 1".to_owned());
    }
    let rt = rt()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let mut tail = Tail::at_end(record);
        let mut push = connect(&webhook).await?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let mut lat = Vec::with_capacity(count);
        let mut http = Vec::with_capacity(count);
        for i in 0..count {
            let task = format!("notify-{stamp}-{i}");
            let body = json!({"statusUpdate": {"taskId": task, "contextId": format!("ctx-{task}"),
                              "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}});
            let mut req = request("POST", &webhook, Bytes::from(body.to_string()))?;
            req.headers_mut()
                .insert("a2a-notification-token", token.clone());
            let next = Instant::now() + gap;
            let sent_ns = now_ns();
            let sent = Instant::now();
            let resp = push
                .send_request(req)
                .await
                .map_err(|e| format!("push {i}: {e}"))?;
            let status = resp.status();
            let _ = resp.into_body().collect().await;
            http.push(sent.elapsed());
            if !status.is_success() {
                return Err(format!("push {i}: HTTP {status}"));
            }
            let want_body = format!("deploy build {task}");
            let deadline = sent + Duration::from_secs(5);
            let shown = loop {
                if let Some(line) = tail.lines()?.into_iter().next() {
                    break line;
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "push {i} (task {task}): no notification recorded in {record} within 5 s"
                    ));
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            };
            let n: Value = serde_json::from_str(&shown)
                .map_err(|e| format!("push {i}: record line {shown:?}: {e}"))?;
            if n["summary"] != summary || n["body"] != want_body.as_str() {
                return Err(format!(
                    "push {i}: expected summary {summary:?} and body {want_body:?}, the notification was {shown}"
                ));
            }
            let at = n["time_ns"]
                .as_u64()
                .ok_or_else(|| format!("push {i}: no time_ns in {shown}"))?;
            let ns = u128::from(at)
                .checked_sub(sent_ns)
                .ok_or_else(|| format!("push {i}: notified before it was sent ({shown})"))?;
            lat.push(Duration::from_nanos(ns as u64));
            tokio::time::sleep_until(next.into()).await;
            // Nothing else may have been shown meanwhile (a grouped or repeated one).
            if let Some(extra) = tail.lines()?.into_iter().next() {
                return Err(format!("push {i}: an unexpected second notification: {extra}"));
            }
        }
        lat.sort_unstable();
        http.sort_unstable();
        let ms = |v: &[Duration], p: f64| {
            let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
            v[i].as_secs_f64() * 1000.0
        };
        println!(
            "{{\"pushes\":{},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3},\"http_p50_ms\":{:.3},\"http_p99_ms\":{:.3}}}",
            lat.len(),
            ms(&lat, 0.5),
            ms(&lat, 0.99),
            ms(&lat, 1.0),
            ms(&http, 0.5),
            ms(&http, 0.99)
        );
        Ok(())
    })
}
