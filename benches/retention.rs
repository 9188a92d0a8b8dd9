//! How fast retention archives, and what it costs other writers (release
//! build):
//!
//!     cargo bench --no-default-features --bench retention [-- N]
//!
//! Fills a fresh SQLite file with N finished tasks (default 50,000; each
//! with a request, an answer and an artifact) last changed 100 days ago,
//! plus one parked task in twenty, then runs one retention pass
//! (`keep_days = 90`) while another task writes through the same single
//! writer every millisecond, and reports the pass's rate and those writes'
//! latency (`RETENTION_BATCH` sets the batch size; default the config's).
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use countersign::a2a::types::{Artifact, Message, Part, Role, TaskState, TaskStatus};
use countersign::config::{Config, RetentionConfig};
use countersign::engine::Engine;
use countersign::engine::retention::Retention;
use countersign::store::tasks::{NewTask, append_message, insert_task, put_artifact};
use countersign::store::{Durability, Store};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

fn fill(store: &Store, n: usize, rt: &tokio::runtime::Runtime) {
    let batch = 5_000;
    let base_ms = countersign::clock::now_ms() - 100 * DAY_MS;
    for start in (0..n).step_by(batch) {
        rt.block_on(store.write(move |conn| {
            for i in start..(start + batch).min(n) {
                let id = format!("task-{i:07}");
                let parked = i % 20 == 0;
                let state = if parked {
                    TaskState::InputRequired
                } else {
                    TaskState::Completed
                };
                let now = base_ms + i as i64;
                insert_task(
                    conn,
                    &NewTask {
                        id: id.clone(),
                        agent_id: "inbox".into(),
                        owner: "local".into(),
                        context_id: format!("ctx-{i}"),
                        status: TaskStatus {
                            state,
                            message: None,
                            timestamp: None,
                        },
                        metadata: None,
                        now_ms: now,
                        dialect: "v1",
                    },
                )?;
                let mut ask = Message::agent(vec![Part::text(format!(
                    "Please review change {i}: rotate the keys of service {}",
                    i % 977
                ))]);
                ask.role = Role::User;
                ask.task_id = Some(id.clone());
                append_message(conn, &id, &ask)?;
                let mut answer = Message::agent(vec![Part::text("Approved. Go ahead.")]);
                answer.task_id = Some(id.clone());
                append_message(conn, &id, &answer)?;
                let artifact: Artifact = serde_json::from_value(serde_json::json!({
                    "artifactId": "decision",
                    "parts": [{"data": {"decision": "approve", "change": i}}]
                }))
                .expect("artifact");
                put_artifact(conn, &id, &artifact, false)?;
            }
            Ok(())
        }))
        .expect("fill");
    }
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(50_000);
    // `RETENTION_BATCH=100 cargo bench …` tries another batch size.
    let batch: usize = std::env::var("RETENTION_BATCH")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(RetentionConfig::default().batch);
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("bench.db");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let cfg = Config::parse("[[agents]]\nid = \"inbox\"\n", Path::new("bench.toml")).expect("cfg");
    let store = Store::open(&db, Durability::Normal).expect("store");
    let t = Instant::now();
    fill(&store, n, &rt);
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    println!(
        "filled {n} tasks ({} parked) in {:.1} s; database {:.1} MB",
        n.div_ceil(20),
        t.elapsed().as_secs_f64(),
        size(&db) as f64 / 1e6
    );
    let engine = Engine::new(store.clone(), &cfg.agents, cfg.limits);
    let archive = dir.path().join("archive");
    engine.configure_retention(Retention::new(
        RetentionConfig {
            keep_days: 90,
            max_tasks: 0,
            interval_secs: 0,
            batch,
        },
        archive.clone(),
    ));

    // Another writer, every millisecond, for as long as the pass runs.
    let stop = Arc::new(AtomicBool::new(false));
    let probe = {
        let (store, stop) = (store.clone(), stop.clone());
        rt.spawn(async move {
            let mut lat = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                store
                    .write(|c| {
                        c.execute(
                            "UPDATE tasks SET updated_ms = updated_ms WHERE id = 'none'",
                            [],
                        )?;
                        Ok(())
                    })
                    .await
                    .expect("probe write");
                lat.push(t.elapsed());
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            lat
        })
    };
    let t = Instant::now();
    let report = rt.block_on(engine.retain()).expect("retention");
    let took = t.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut lat = rt.block_on(probe).expect("probe");
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    let archived_bytes: u64 = std::fs::read_dir(&archive)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| size(&e.path())).sum())
        .unwrap_or(0);
    println!(
        "archived {} tasks in {} batches in {:.2} s: {:.0} tasks/s; archive {:.1} MB",
        report.archived,
        report.batches,
        took.as_secs_f64(),
        report.archived as f64 / took.as_secs_f64(),
        archived_bytes as f64 / 1e6
    );
    println!(
        "a concurrent write during the pass ({} samples): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        lat.len(),
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        lat[lat.len() - 1].as_secs_f64() * 1e3
    );
    rt.block_on(store.close());
    println!(
        "database after the pass: {:.1} MB (freed pages are reused)",
        size(&db) as f64 / 1e6
    );

    // Reading one archived task back (the UI's and `show`'s fallback, and
    // `archive show`): the first task archived, the last, and one the
    // archive does not hold (the whole archive read).
    let all = countersign::archive::export(&archive, &Default::default()).expect("export");
    let id_of = |r: Option<&serde_json::Value>| {
        r.and_then(|r| r["task"]["id"].as_str())
            .unwrap_or("none")
            .to_owned()
    };
    for (what, id) in [
        ("the first archived task", id_of(all.first())),
        ("the last archived task", id_of(all.last())),
        ("a task the archive does not hold", "task-none".to_owned()),
    ] {
        let t = Instant::now();
        let found = countersign::archive::find(&archive, &id).expect("find");
        println!(
            "reading {what} back from the archive: {:.1} ms ({})",
            t.elapsed().as_secs_f64() * 1e3,
            if found.is_some() { "found" } else { "not held" }
        );
    }
}
