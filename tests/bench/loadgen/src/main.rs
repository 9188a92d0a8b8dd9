//! loadgen URL [options]: keeps `--conns` HTTP/1.1 keep-alive connections busy
//! (one request in flight each, a closed loop) for `--warmup` seconds, then
//! measures for `--duration` seconds and prints one line of JSON:
//! `{"requests":…,"rps":…,"p50_ms":…,"p99_ms":…,"errors":…,"ok_total":…}`
//! (`ok_total`: successes in all, warm-up included).
//!
//! Options: `--method GET|POST`, `--body TEXT` (every `{n}` becomes a number
//! unique to the request, so message ids never repeat), `--header "K: V"`
//! (repeatable), `--rpc-errors` (a 200 whose body holds `"error":` counts as an
//! error, for JSON-RPC), `--conns N`, `--duration S`, `--warmup S`, `--limit N`
//! (stop after N requests, all counted: to fill a store).
//!
//! Requests go out through the lean client in `raw.rs`.
//!
//! Other jobs: `stub-peer`, `push-latency`, `push-notify`, `startup`, `stalls` (see
//! `tools.rs`).
use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use hyper::Method;
use tokio::net::TcpStream;

mod raw;
mod tools;

struct Opts {
    url: hyper::Uri,
    method: Method,
    body: Option<String>,
    headers: Vec<(String, String)>,
    rpc_errors: bool,
    conns: usize,
    duration: Duration,
    warmup: Duration,
    /// Stop after this many requests (to fill a store) instead of timing.
    limit: Option<u64>,
}

fn parse() -> Result<Opts, String> {
    let mut args = std::env::args().skip(1);
    let mut url = None;
    let mut o = Opts {
        url: hyper::Uri::from_static("http://127.0.0.1/"),
        method: Method::GET,
        body: None,
        headers: Vec::new(),
        rpc_errors: false,
        conns: 32,
        duration: Duration::from_secs(10),
        warmup: Duration::from_secs(3),
        limit: None,
    };
    while let Some(a) = args.next() {
        let mut val = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--method" => {
                o.method = val("--method")?
                    .parse()
                    .map_err(|e| format!("--method: {e}"))?
            }
            "--body" => o.body = Some(val("--body")?),
            "--header" => {
                let h = val("--header")?;
                let (k, v) = h.split_once(':').ok_or("--header needs K: V")?;
                o.headers.push((k.trim().to_owned(), v.trim().to_owned()));
            }
            "--rpc-errors" => o.rpc_errors = true,
            "--limit" => {
                o.limit = Some(
                    val("--limit")?
                        .parse()
                        .map_err(|e| format!("--limit: {e}"))?,
                )
            }
            "--conns" => {
                o.conns = val("--conns")?
                    .parse()
                    .map_err(|e| format!("--conns: {e}"))?
            }
            "--duration" => {
                o.duration = Duration::from_secs_f64(
                    val("--duration")?
                        .parse()
                        .map_err(|e| format!("--duration: {e}"))?,
                )
            }
            "--warmup" => {
                o.warmup = Duration::from_secs_f64(
                    val("--warmup")?
                        .parse()
                        .map_err(|e| format!("--warmup: {e}"))?,
                )
            }
            _ if url.is_none() && !a.starts_with("--") => {
                url = Some(a.parse().map_err(|e| format!("URL: {e}"))?)
            }
            _ => return Err(format!("unknown argument {a}")),
        }
    }
    o.url = url.ok_or("usage: loadgen URL [--method M] [--body B] [--header H] ...")?;
    Ok(o)
}

#[derive(Default)]
struct Tally {
    /// Latencies in microseconds of the measured requests.
    lat: Vec<u32>,
    errors: u64,
    first_error: Option<String>,
    /// Requests answered with success in any phase, warm-up included (what
    /// the server acknowledged in all).
    ok_total: u64,
}

/// Where the run is: warming up, measuring, or over.
fn phase(start: Instant, o: &Opts) -> u8 {
    let e = start.elapsed();
    if e < o.warmup {
        0
    } else if e < o.warmup + o.duration {
        1
    } else {
        2
    }
}

async fn connection(o: Rc<Opts>, counter: Rc<Cell<u64>>, start: Instant) -> Tally {
    let mut t = Tally::default();
    let host = o.url.host().unwrap_or("127.0.0.1").to_owned();
    let port = o.url.port_u16().unwrap_or(80);
    let head = request_head(&o, &format!("{host}:{port}"));
    let mut req = Vec::new();
    let mut client = raw::Conn::default();
    'reconnect: loop {
        if phase(start, &o) == 2 {
            return t;
        }
        let mut stream = match TcpStream::connect((host.as_str(), port)).await {
            Ok(s) => s,
            Err(e) => {
                t.errors += 1;
                t.first_error.get_or_insert(format!("connect: {e}"));
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        client.reset();
        loop {
            let p = phase(start, &o);
            if p == 2 {
                return t;
            }
            let n = counter.get();
            if o.limit.is_some_and(|l| n >= l) {
                return t;
            }
            counter.set(n + 1);
            req.clear();
            req.extend_from_slice(head.as_bytes());
            if let Some(b) = &o.body {
                let body = b.replace("{n}", &n.to_string());
                req.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
                req.extend_from_slice(body.as_bytes());
            } else {
                req.extend_from_slice(b"\r\n");
            }
            let sent = Instant::now();
            let answer = client.exchange(&mut stream, &req).await;
            let micros = u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX);
            let (outcome, broken) = match answer {
                Ok(r) => {
                    let body = client.body(&r);
                    let outcome = if !(200..300).contains(&r.status) {
                        Err(format!(
                            "HTTP {}: {}",
                            r.status,
                            String::from_utf8_lossy(body)
                        ))
                    } else if o.rpc_errors && raw::find(body, b"\"error\":").is_some() {
                        Err(format!("JSON-RPC error: {}", String::from_utf8_lossy(body)))
                    } else {
                        Ok(())
                    };
                    (outcome, r.close)
                }
                Err(e) => (Err(e), true),
            };
            if outcome.is_ok() {
                t.ok_total += 1;
            }
            if o.limit.is_some() || (phase(start, &o) == 1 && p == 1) {
                match outcome {
                    Ok(()) => t.lat.push(micros),
                    Err(e) => {
                        t.errors += 1;
                        t.first_error.get_or_insert(e);
                    }
                }
            }
            if broken {
                continue 'reconnect;
            }
        }
    }
}

/// The request line and headers every request of the run shares, up to the
/// body's length (or the blank line of a request without one).
fn request_head(o: &Opts, authority: &str) -> String {
    let path = o.url.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut head = format!("{} {path} HTTP/1.1\r\nhost: {authority}\r\n", o.method);
    if o.body.is_some() {
        head.push_str("content-type: application/json\r\n");
    }
    for (k, v) in &o.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head
}

fn pct(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    f64::from(sorted[i]) / 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let tool = match args.get(1).map(String::as_str) {
        Some("stub-peer") => Some(
            args.get(2)
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| "usage: loadgen stub-peer PORT".to_owned())
                .and_then(tools::stub_peer),
        ),
        Some("push-latency") => Some(match &args[2..] {
            [hook, token, events, n] => n
                .parse()
                .map_err(|e| format!("COUNT: {e}"))
                .and_then(|n| tools::push_latency(hook, token, events, n)),
            _ => Err("usage: loadgen push-latency WEBHOOK TOKEN EVENTS_URL COUNT".to_owned()),
        }),
        Some("push-notify") => Some(match &args[2..] {
            [hook, token, record, summary, rest @ ..] if rest.len() <= 2 => {
                let count = rest.first().map_or(Ok(100), |n| n.parse());
                let gap = rest.get(1).map_or(Ok(600), |n| n.parse());
                match (count, gap) {
                    (Ok(n), Ok(gap)) => tools::push_notify(
                        hook,
                        token,
                        record,
                        summary,
                        n,
                        std::time::Duration::from_millis(gap),
                    ),
                    (Err(e), _) => Err(format!("COUNT: {e}")),
                    (_, Err(e)) => Err(format!("GAP_MS: {e}")),
                }
            }
            _ => Err(
                "usage: loadgen push-notify WEBHOOK TOKEN RECORD_FILE SUMMARY [COUNT] [GAP_MS]"
                    .to_owned(),
            ),
        }),
        Some("startup") => Some(match &args[2..] {
            [url, dash, cmd @ ..] if dash == "--" => tools::startup(url, cmd),
            _ => Err("usage: loadgen startup URL -- CMD ARGS...".to_owned()),
        }),
        Some("stalls") => Some(match &args[2..] {
            [secs] => secs
                .parse()
                .map_err(|e| format!("SECONDS: {e}"))
                .and_then(tools::stalls),
            _ => Err("usage: loadgen stalls SECONDS".to_owned()),
        }),
        _ => None,
    };
    if let Some(r) = tool {
        if let Err(e) = r {
            eprintln!("{e}");
            std::process::exit(1);
        }
        return;
    }
    let o = match parse() {
        Ok(o) => Rc::new(o),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime: {e}");
            std::process::exit(2);
        }
    };
    let local = tokio::task::LocalSet::new();
    let tallies = local.block_on(&rt, async {
        let start = Instant::now();
        let counter = Rc::new(Cell::new(0u64));
        let tasks: Vec<_> = (0..o.conns)
            .map(|_| tokio::task::spawn_local(connection(o.clone(), counter.clone(), start)))
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            if let Ok(t) = t.await {
                out.push(t);
            }
        }
        out
    });
    let mut lat = Vec::new();
    let mut errors = 0;
    let mut ok_total = 0;
    let mut first_error = None;
    for t in tallies {
        lat.extend(t.lat);
        errors += t.errors;
        ok_total += t.ok_total;
        if first_error.is_none() {
            first_error = t.first_error;
        }
    }
    lat.sort_unstable();
    let rps = if o.limit.is_some() {
        0.0
    } else {
        lat.len() as f64 / o.duration.as_secs_f64()
    };
    if let Some(e) = first_error {
        let e: String = e.chars().take(300).collect();
        eprintln!("first error: {e}");
    }
    println!(
        "{{\"requests\":{},\"rps\":{:.1},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3},\"errors\":{},\"ok_total\":{}}}",
        lat.len(),
        rps,
        pct(&lat, 0.50),
        pct(&lat, 0.99),
        pct(&lat, 1.0),
        errors,
        ok_total
    );
}
