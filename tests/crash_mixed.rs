//! Crash safety under mixed load: 32 connections send tasks (parked ones,
//! scripted ones with push configs, watched ones started on a peer — whose
//! pushes come back to our webhook receiver) and decide parked tasks, while
//! the server is killed with SIGKILL and restarted on the same data dir, five
//! times; then again with `durability = "full"` and a power cut after each
//! kill (`common::powercut`). Afterwards every acknowledged task and
//! decision is there, every owed delivery went out, every task the peer
//! took from us is known here and none reached it twice, no decision
//! reached the peer twice, the database passes `PRAGMA integrity_check`
//! and `foreign_key_check`, and the queue's counts match its open turns.
mod common;
use common::powercut::{self, Cut};
use common::*;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CONNECTIONS: usize = 32;
const ROUNDS: usize = 5;
/// Acknowledged operations per round before the kill.
const PER_ROUND: usize = 300;

/// A: two local agents and peer B; pushes to a receiver on loopback. B
/// reaches A's webhooks through `front` (A listens on a new port each
/// start).
fn config_a(b: &Server, front: &Front) -> String {
    format!(
        r#"[outbound]
allow = ["127.0.0.1"]
[dispatch]
max_backoff_secs = 1
[webhooks]
sweep_secs = 1
public_url = "{}"
# The peer retries a push we missed within a second or so; a loaded
# machine gets room.
resend_wait_secs = 10

[[agents]]
id = "inbox"

[[agents]]
id = "flow"
backend = "scripted"
[[agents.rules]]
message_id_prefix = "flow"
steps = [{{ status = {{ state = "working" }} }}, {{ complete = "Done." }}]

[[peers]]
id = "b"
url = "{}"
"#,
        front.base,
        b.url("/a2a/inbox")
    )
}

/// A fixed address on 127.0.0.1 in front of whichever A is running: what
/// a machine's fixed port is to the peer. While no A runs, or the one set
/// is gone, it answers 503 (the peer tries again).
struct Front {
    base: String,
    to: Arc<Mutex<Option<String>>>,
}

impl Front {
    async fn start() -> Front {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let to: Arc<Mutex<Option<String>>> = Arc::default();
        let upstream = to.clone();
        let http = reqwest::Client::new();
        let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let (upstream, http) = (upstream.clone(), http.clone());
            async move {
                use axum::response::IntoResponse;
                let unavailable = || axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response();
                let Some(base) = upstream.lock().unwrap().clone() else {
                    return unavailable();
                };
                let (parts, body) = req.into_parts();
                let Ok(body) = axum::body::to_bytes(body, 16 << 20).await else {
                    return unavailable();
                };
                let Ok(answer) = send_on(&http, &base, &parts, body).await else {
                    return unavailable();
                };
                let status = answer.status();
                match answer.bytes().await {
                    Ok(bytes) => (status, bytes).into_response(),
                    Err(_) => unavailable(),
                }
            }
        });
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Front { base, to }
    }

    fn to(&self, a: Option<&Server>) {
        *self.to.lock().unwrap() = a.map(|a| a.base.clone());
    }
}

/// B may push to A on loopback, and retries a push A missed while down
/// within a second.
const PEER_B: &str = "[outbound]\nallow = [\"127.0.0.1\"]\n[dispatch]\nmax_backoff_secs = 1\n\n[[agents]]\nid = \"inbox\"\n";

#[derive(Default)]
struct Ledger {
    /// Acknowledged tasks: id → the agent they went to.
    tasks: HashMap<String, &'static str>,
    /// Scripted tasks acknowledged as completed (their completion is owed
    /// to the receiver).
    completed_flows: HashSet<String>,
    /// Parked tasks not yet decided (served and watched).
    parked: Vec<String>,
    /// Acknowledged decisions (task ids).
    decided: HashSet<String>,
}

/// One round of load against `base` until `PER_ROUND` operations are
/// acknowledged or the server stops answering.
async fn load(base: String, token: String, hook: String, ledger: Arc<Mutex<Ledger>>) -> usize {
    let acked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for w in 0..CONNECTIONS {
        let (base, token, hook, ledger, acked, counter) = (
            base.clone(),
            token.clone(),
            hook.clone(),
            ledger.clone(),
            acked.clone(),
            counter.clone(),
        );
        workers.push(tokio::spawn(async move {
            let http = worker_client();
            loop {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                let ok = match n % 4 {
                    0 => {
                        let body = json!({"jsonrpc": "2.0", "id": n, "method": "SendMessage",
                            "params": {"message": message(&format!("park-{w}-{n}"), &format!("Approve {n}?")),
                                       "configuration": {"returnImmediately": true}}});
                        match post(&http, &format!("{base}/a2a/inbox"), &body, None).await {
                            Some(v) => match v["result"]["task"]["id"].as_str() {
                                Some(id) => {
                                    let mut l = ledger.lock().unwrap();
                                    l.tasks.insert(id.to_owned(), "inbox");
                                    l.parked.push(id.to_owned());
                                    true
                                }
                                None => false,
                            },
                            None => false,
                        }
                    }
                    1 => {
                        let body = json!({"jsonrpc": "2.0", "id": n, "method": "SendMessage",
                            "params": {"message": message(&format!("flow-{w}-{n}"), "run"),
                                       "configuration": {"taskPushNotificationConfig": {"url": hook, "token": "t"}}}});
                        match post(&http, &format!("{base}/a2a/flow"), &body, None).await {
                            Some(v) => match v["result"]["task"]["id"].as_str() {
                                Some(id) => {
                                    let mut l = ledger.lock().unwrap();
                                    l.tasks.insert(id.to_owned(), "flow");
                                    if state(&v["result"]["task"]) == "TASK_STATE_COMPLETED" {
                                        l.completed_flows.insert(id.to_owned());
                                    }
                                    true
                                }
                                None => false,
                            },
                            None => false,
                        }
                    }
                    2 if n % 16 == 2 => {
                        // A task started on the peer, watched here.
                        let body = json!({"text": format!("Peer task {n}")});
                        match post(&http, &format!("{base}/api/peers/b/tasks"), &body, Some(&token)).await {
                            Some(v) => match v["task"]["id"].as_str() {
                                Some(id) => {
                                    let mut l = ledger.lock().unwrap();
                                    l.tasks.insert(id.to_owned(), "b");
                                    l.parked.push(id.to_owned());
                                    true
                                }
                                None => false,
                            },
                            None => false,
                        }
                    }
                    _ => {
                        let next = ledger.lock().unwrap().parked.pop();
                        match next {
                            None => true,
                            Some(id) => {
                                let url = format!("{base}/api/tasks/{id}/decision");
                                let body = json!({"kind": "approve", "text": format!("ok {n}")});
                                match decide(&http, &url, &body, &token).await {
                                    Some(true) => {
                                        ledger.lock().unwrap().decided.insert(id);
                                        true
                                    }
                                    // Not parked (yet): try it again later.
                                    Some(false) => {
                                        ledger.lock().unwrap().parked.insert(0, id);
                                        true
                                    }
                                    None => {
                                        // Unanswered: it may or may not have been taken.
                                        ledger.lock().unwrap().parked.insert(0, id);
                                        false
                                    }
                                }
                            }
                        }
                    }
                };
                if ok {
                    if acked.fetch_add(1, Ordering::SeqCst) + 1 >= PER_ROUND {
                        return;
                    }
                } else if http.get(format!("{base}/api/health")).send().await.is_err() {
                    return; // the server is gone
                }
            }
        }));
    }
    // Workers end at the round's budget, or when the server is killed.
    futures::future::join_all(workers).await;
    acked.load(Ordering::SeqCst)
}

async fn post(
    http: &reqwest::Client,
    url: &str,
    body: &Value,
    token: Option<&str>,
) -> Option<Value> {
    let mut req = http.post(url).header("A2A-Version", "1.0").json(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    resp.json().await.ok()
}

/// A decision: Some(true) recorded now or before (409 with the decision),
/// Some(false) when the task is not parked, None when unanswered.
async fn decide(http: &reqwest::Client, url: &str, body: &Value, token: &str) -> Option<bool> {
    let resp = http
        .post(url)
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .ok()?;
    match resp.status().as_u16() {
        200 => Some(true),
        409 => {
            let v: Value = resp.json().await.ok()?;
            Some(v.get("decision").is_some())
        }
        _ => Some(false),
    }
}

async fn get(http: &reqwest::Client, url: &str, token: &str) -> Value {
    http.get(url)
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// How each round ends.
#[derive(Clone, Copy, PartialEq)]
enum End {
    /// SIGKILL: what the server wrote stays in the operating system's
    /// cache.
    Kill,
    /// SIGKILL, then what was written since the last sync of the database
    /// or its WAL is undone (`common::powercut`), on a store with
    /// `durability = "full"`.
    PowerCut,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mixed_load_survives_five_kills() {
    mixed_load(End::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_full_durability_mixed_load_survives_five_power_cuts() {
    mixed_load(End::PowerCut).await;
}

async fn mixed_load(end: End) {
    let hook = Hook::start().await;
    let b = Server::start(Some(PEER_B));
    let dir = tempfile::tempdir().unwrap();
    let front = Front::start().await;
    let mut cfg = config_a(&b, &front);
    if end == End::PowerCut {
        cfg = format!("[store]\ndurability = \"full\"\n{cfg}");
    }
    let store = powercut::Store::in_dir(dir.path());
    let ledger: Arc<Mutex<Ledger>> = Arc::default();
    let mut kills = 0;
    for round in 0..ROUNDS {
        let mut a = match end {
            End::Kill => Server::start_in(dir.path(), Some(&cfg), &[]),
            End::PowerCut => Server::start_cmd_in(store.command(), dir.path(), Some(&cfg)),
        };
        front.to(Some(&a));
        let token = a.ui_token();
        let work = tokio::spawn(load(
            a.base.clone(),
            token,
            hook.url.clone(),
            ledger.clone(),
        ));
        // Kill in the middle of the round.
        let progress = |l: &Ledger| l.tasks.len() + l.decided.len();
        let at_start = progress(&ledger.lock().unwrap());
        let started = Instant::now();
        while progress(&ledger.lock().unwrap()) < at_start + PER_ROUND / 2
            && started.elapsed() < Duration::from_secs(30)
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        a.kill9();
        front.to(None);
        kills += 1;
        let acked = work.await.unwrap();
        eprintln!(
            "round {kills}: {acked} acknowledged, killed after {:?}",
            started.elapsed()
        );
        if end == End::PowerCut {
            let seed = 0xc0ffee + round as u64;
            let cut = match round % 3 {
                0 => Cut::Unsynced,
                1 => Cut::Torn(seed),
                _ => Cut::Scattered(seed),
            };
            let (undone, torn) = store.cut(cut);
            eprintln!("  {cut:?}: undid {undone} writes (torn: {torn})");
        }
    }

    // Last start: let it finish what is owed, and the peer too (its pushes
    // to us while we were down).
    let mut a = Server::start_in(dir.path(), Some(&cfg), &[]);
    front.to(Some(&a));
    let token = a.ui_token();
    let http = reqwest::Client::new();
    for (server, token) in [(&a, &token), (&b, &b.ui_token())] {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let out = get(&http, &server.url("/api/outbox"), token).await;
            let items = out["items"].as_array().cloned().unwrap_or_default();
            let pending = items.iter().filter(|i| i["status"] == "pending").count();
            if pending == 0 {
                let failed: Vec<&Value> =
                    items.iter().filter(|i| i["status"] == "failed").collect();
                assert!(failed.is_empty(), "dead letters: {failed:#?}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{pending} deliveries still pending"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    let ledger = std::mem::take(&mut *ledger.lock().unwrap());
    assert!(
        ledger.tasks.len() >= ROUNDS * PER_ROUND / 4,
        "load too light: {}",
        ledger.tasks.len()
    );
    // Every acknowledged task is there; every acknowledged decision once.
    for (id, agent) in &ledger.tasks {
        let d = get(&http, &a.url(&format!("/api/tasks/{id}")), &token).await;
        assert_eq!(
            d["task"]["id"],
            id.as_str(),
            "acknowledged task {id} ({agent}) lost: {d}"
        );
        let decisions = d["decisions"].as_array().map(Vec::len).unwrap_or(0);
        if ledger.decided.contains(id) {
            assert_eq!(decisions, 1, "decision on {id}: {d}");
        } else {
            assert!(decisions <= 1, "{id}: {d}");
        }
        if *agent == "inbox" && ledger.decided.contains(id) {
            assert_eq!(d["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{d}");
        }
        if ledger.completed_flows.contains(id) {
            assert_eq!(d["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{d}");
        }
    }
    // Every completion owed to the receiver arrived.
    let received = hook.accepted();
    let completed_seen: HashSet<String> = received
        .iter()
        .filter(|(_, v)| v["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED")
        .filter_map(|(_, v)| v["statusUpdate"]["taskId"].as_str().map(str::to_owned))
        .collect();
    for id in &ledger.completed_flows {
        assert!(
            completed_seen.contains(id),
            "completion of {id} never delivered"
        );
    }
    // At least once: a repeat only for a delivery cut by a kill.
    let mut seen = HashSet::new();
    let repeats = received
        .iter()
        .filter(|(id, _)| !seen.insert(id.clone()))
        .count();
    assert!(
        repeats <= kills * 16,
        "{repeats} repeated notifications after {kills} kills"
    );
    // No decision reached the peer twice.
    assert!(assert_each_message_once(&b).await > 0);
    eprintln!(
        "crash_mixed: {} tasks, {} decisions, {} notifications ({} repeats) over {kills} kills",
        ledger.tasks.len(),
        ledger.decided.len(),
        received.len(),
        repeats
    );
    // The queue's counts, as a person sees them.
    let (status, page) = Api::new(&a)
        .call(reqwest::Method::GET, "/queue?limit=1", None)
        .await;
    assert_eq!(status, 200, "{page}");
    // The database is sound.
    a.terminate();
    let conn = rusqlite::Connection::open(&store.db).unwrap();
    assert_sound(&conn);
    // Every task the peer took from us is known here: those whose answer a
    // kill or a power cut kept from us too (their pushes, or the send made
    // again after the restart, brought them).
    let column = |conn: &rusqlite::Connection, sql: &str| -> Vec<String> {
        conn.prepare(sql)
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    };
    let ours: HashSet<String> = column(&conn, "SELECT remote_id FROM tasks WHERE peer_id = 'b'")
        .into_iter()
        .collect();
    let on_b = rusqlite::Connection::open_with_flags(
        b.data_dir.join("countersign.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let theirs = column(&on_b, "SELECT id FROM tasks");
    assert!(!theirs.is_empty(), "no task reached the peer");
    let unknown: Vec<&String> = theirs.iter().filter(|t| !ours.contains(*t)).collect();
    assert!(
        unknown.is_empty(),
        "{} of the peer's {} tasks are unknown here: {unknown:?}",
        unknown.len(),
        theirs.len()
    );
    // And none twice: a send cut short waits for the peer's push about
    // the task before it goes out again, and the push settles it.
    let firsts = column(
        &on_b,
        "SELECT (SELECT m.message_id FROM messages m WHERE m.task_id = t.id ORDER BY m.seq LIMIT 1)
         FROM tasks t",
    );
    let distinct: HashSet<&String> = firsts.iter().collect();
    assert_eq!(
        distinct.len(),
        firsts.len(),
        "a message reached the peer as two tasks: {firsts:?}"
    );
    eprintln!(
        "crash_mixed: the peer holds {} tasks, every one mirrored, none twice",
        theirs.len()
    );
    // The queue counted the open turns there are.
    let mut open = serde_json::Map::new();
    let mut stmt = conn
        .prepare("SELECT agent_id, count(*) FROM turns WHERE closed_ms IS NULL GROUP BY agent_id")
        .unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .unwrap();
    for row in rows {
        let (agent, n) = row.unwrap();
        open.insert(agent, n.into());
    }
    assert!(!open.is_empty(), "some tasks are still parked");
    let total: i64 = open.values().filter_map(Value::as_i64).sum();
    assert_eq!(page["counts"], Value::Object(open), "{page}");
    assert_eq!(page["total"], total, "{page}");
}
