//! How the approval queue pages at 100,000 parked tasks (release build):
//!
//!     cargo bench --no-default-features --bench queue [-- N]
//!
//! Fills a fresh SQLite file with N parked tasks (default 100,000) across
//! three agents (and two with 0.5% and 1.1% of them), then times queue
//! pages: first page each way, a page deep in the queue (by cursor), an
//! agent filter, a text search, recent tasks of every agent, of one
//! agent each and of one state, a decision, and the first page right
//! after a write.
use std::path::Path;
use std::time::{Duration, Instant};

use countersign::a2a::types::{Message, Part, TaskState, TaskStatus, format_timestamp};
use countersign::config::Config;
use countersign::engine::Engine;
use countersign::engine::decide::DecisionInput;
use countersign::engine::queue::{QueueQuery, TasksQuery};
use countersign::store::queue::sync_turn;
use countersign::store::tasks::{NewTask, append_message, insert_task};
use countersign::store::{Durability, Store};

const AGENTS: [&str; 3] = ["inbox", "ops", "finance"];
const WORDS: [&str; 8] = [
    "deploy", "invoice", "refund", "rotate", "delete", "publish", "merge", "approve",
];

fn fill(store: &Store, n: usize, rt: &tokio::runtime::Runtime) {
    let batch = 5_000;
    let base_ms = countersign::clock::now_ms() - n as i64 * 10;
    for start in (0..n).step_by(batch) {
        rt.block_on(store.write(move |conn| {
            for i in start..(start + batch).min(n) {
                let id = format!("task-{i:07}");
                // Besides the three agents, two with few tasks: 500, read
                // from their own index entries, and 1,112, just over
                // FEW_TASKS, picked out of the walk over every task.
                let agent = match i {
                    _ if i % 200 == 0 => "few",
                    _ if i % 90 == 1 => "scarce",
                    _ => AGENTS[i % AGENTS.len()],
                };
                let now = base_ms + i as i64 * 10;
                let mut m = Message::agent(vec![Part::text(format!(
                    "Please {} item {i} for customer {}",
                    WORDS[i % WORDS.len()],
                    i % 977
                ))]);
                m.role = countersign::a2a::types::Role::User;
                m.task_id = Some(id.clone());
                insert_task(
                    conn,
                    &NewTask {
                        id: id.clone(),
                        agent_id: agent.into(),
                        owner: "local".into(),
                        context_id: format!("ctx-{i}"),
                        status: TaskStatus {
                            state: TaskState::Submitted,
                            message: None,
                            timestamp: Some(format_timestamp(now)),
                        },
                        metadata: None,
                        now_ms: now,
                        dialect: "v1",
                    },
                )?;
                append_message(conn, &id, &m)?;
                sync_turn(
                    conn,
                    &id,
                    agent,
                    TaskState::Submitted,
                    TaskState::InputRequired,
                    now,
                )?;
            }
            Ok(())
        }))
        .expect("fill");
    }
}

fn time<F: FnMut()>(runs: usize, mut f: F) -> (Duration, Duration) {
    p50_p99(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

/// The median and the 99th percentile of `samples`.
fn p50_p99(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let runs = samples.len();
    (samples[runs / 2], samples[runs * 99 / 100])
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("bench.db");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let cfg = Config::parse(
        "[[agents]]\nid = \"inbox\"\n[[agents]]\nid = \"ops\"\n[[agents]]\nid = \"finance\"\n",
        Path::new("bench.toml"),
    )
    .expect("config");
    let store = Store::open(&db, Durability::Normal).expect("store");
    let t = Instant::now();
    fill(&store, n, &rt);
    println!(
        "filled {n} parked tasks in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let engine = Engine::new(store, &cfg.agents, cfg.limits);

    let deep_cursor = {
        let mut cursor = None;
        for _ in 0..20 {
            let page = rt
                .block_on(engine.queue(QueueQuery {
                    limit: Some(500),
                    cursor: cursor.clone(),
                    ..Default::default()
                }))
                .expect("page");
            cursor = page.next_cursor;
        }
        cursor
    };
    let cases: Vec<(&str, QueueQuery)> = vec![
        ("first page, oldest first (50)", QueueQuery::default()),
        (
            "first page, newest first (50)",
            QueueQuery {
                newest_first: true,
                ..Default::default()
            },
        ),
        (
            "page 10,000 items deep (50)",
            QueueQuery {
                cursor: deep_cursor,
                ..Default::default()
            },
        ),
        (
            "one agent (50)",
            QueueQuery {
                agent_id: Some("ops".into()),
                ..Default::default()
            },
        ),
        (
            "text search `refund cust` (50)",
            QueueQuery {
                text: Some("refund cust".into()),
                ..Default::default()
            },
        ),
    ];
    println!("{:<36} {:>10} {:>10}", "queue query", "p50 ms", "p99 ms");
    for (name, q) in cases {
        let (p50, p99) = time(200, || {
            rt.block_on(engine.queue(q.clone())).expect("queue");
        });
        println!(
            "{name:<36} {:>10.2} {:>10.2}",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    }
    let recent = |name: &str, query: TasksQuery, runs: usize| {
        let (p50, p99) = time(runs, || {
            rt.block_on(engine.recent_tasks(query.clone()))
                .expect("recent tasks");
        });
        println!(
            "{name:<36} {:>10.2} {:>10.2}",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    };
    // Recent tasks (`countersign tasks`): every agent's, one agent's (a
    // third of them), an agent's with few (500, 1,112) and with none; one
    // state's (every task's, and one no task is in), alone and with an
    // agent.
    for (name, agent, state) in [
        ("recent tasks (50)", None, None),
        ("recent tasks, one agent (50)", Some("ops"), None),
        ("recent tasks, agent with 1,112 (50)", Some("scarce"), None),
        ("recent tasks, agent with 500 (50)", Some("few"), None),
        ("recent tasks, an agent with none", Some("nobody"), None),
        // The tasks are stored as submitted (their turns are opened
        // directly): every task is in that state.
        (
            "recent tasks, submitted (50)",
            None,
            Some(TaskState::Submitted),
        ),
        (
            "recent tasks, a state with none",
            None,
            Some(TaskState::Failed),
        ),
        (
            "recent tasks, one agent, state none",
            Some("ops"),
            Some(TaskState::Failed),
        ),
    ] {
        let query = TasksQuery {
            agent_id: agent.map(str::to_owned),
            state,
            ..Default::default()
        };
        recent(name, query, 50);
    }
    // A search of recent tasks (`GET /api/tasks?q=`): tasks hold no
    // search index, so a page reads requests in order until it has 50
    // matches or has read SEARCH_READS tasks. A word every eighth task
    // holds; two words few tasks hold (customer 976's, and any whose item
    // number holds 976); a word none holds.
    for (name, words) in [
        ("recent tasks, search: common (50)", "refund"),
        ("recent tasks, search: rare", "customer 976"),
        ("recent tasks, search: no match", "nothing-holds-this"),
    ] {
        let query = TasksQuery {
            text: Some(words.to_owned()),
            ..Default::default()
        };
        recent(name, query, 20);
    }
    let mut i = 0;
    let (p50, p99) = time(200, || {
        let input: DecisionInput =
            serde_json::from_value(serde_json::json!({"kind": "approve"})).expect("input");
        rt.block_on(engine.decide(&format!("task-{:07}", i * 7), input, "bench"))
            .expect("decide");
        i += 1;
    });
    println!(
        "{:<36} {:>10.2} {:>10.2}",
        "decide (approve, applied)",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    // The first page right after a write (a decision, untimed), as a
    // window reads it while tasks keep arriving: nothing cached holds.
    let (p50, p99) = p50_p99(
        (0..200)
            .map(|_| {
                let input: DecisionInput =
                    serde_json::from_value(serde_json::json!({"kind": "approve"})).expect("input");
                rt.block_on(engine.decide(&format!("task-{:07}", i * 7), input, "bench"))
                    .expect("decide");
                i += 1;
                let t = Instant::now();
                rt.block_on(engine.queue(QueueQuery::default()))
                    .expect("queue");
                t.elapsed()
            })
            .collect(),
    );
    println!(
        "{:<36} {:>10.2} {:>10.2}",
        "first page after a write (50)",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
}
