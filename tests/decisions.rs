//! The approval queue and decisions through the engine, on a real SQLite
//! file: parking opens a turn, exactly one decision per turn, the caller sees
//! the outcome, and a restart between parking and deciding loses nothing.
use std::path::Path;
use std::sync::Arc;

use countersign::a2a::types::{SendMessageRequest, SendMessageResponse, TaskState};
use countersign::a2a::v0_3::Dialect;
use countersign::config::Config;
use countersign::engine::Engine;
use countersign::engine::decide::{DecideError, DecisionInput, DecisionKind};
use countersign::engine::queue::{QueueQuery, to_csv, to_jsonl};
use countersign::store::{Durability, Store};
use serde_json::{Value, json};

const CONFIG: &str = r#"
[[agents]]
id = "inbox"
[[agents]]
id = "ops"
[[agents]]
id = "bot"
backend = "scripted"
[[agents.rules]]
message_id_prefix = "ask"
steps = [{ status = { state = "input-required", text = "Which environment?" } }]
[[agents.rules]]
text = "^again"
steps = [{ status = { state = "input-required", text = "And which version?" } }]
[[agents.rules]]
message_id_prefix = "decision-"
steps = [{ complete = "Thanks, carrying on" }]
"#;

fn engine_at(db: &Path) -> Engine {
    engine_with(db, Durability::Normal)
}

fn engine_with(db: &Path, durability: Durability) -> Engine {
    let cfg = Config::parse(CONFIG, Path::new("test.toml")).unwrap();
    Engine::new(
        Store::open(db, durability).unwrap(),
        &cfg.agents,
        cfg.limits,
    )
}

async fn park(engine: &Engine, agent: &str, message_id: &str, text: &str) -> String {
    let agent = engine.agent(agent).unwrap().clone();
    let req: SendMessageRequest = serde_json::from_value(json!({
        "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    }))
    .unwrap();
    let mut started = engine
        .send(&agent, "local", req, Dialect::V1)
        .await
        .unwrap();
    engine
        .wait_settled(&mut started, std::time::Duration::from_secs(5))
        .await;
    match started.reply {
        SendMessageResponse::Task(t) => t.id,
        other => panic!("expected a task: {other:?}"),
    }
}

/// Waits (2 s at most) for the task's run to complete it.
async fn until_completed(engine: &Engine, id: &str) {
    let mut state = TaskState::InputRequired;
    for _ in 0..200 {
        state = engine.task_detail(id).await.unwrap().task.status.state;
        if state == TaskState::Completed {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(state, TaskState::Completed);
}

fn input(kind: DecisionKind, text: Option<&str>) -> DecisionInput {
    serde_json::from_value(json!({"kind": kind, "text": text})).unwrap()
}

#[tokio::test]
async fn parking_opens_a_turn_and_approving_completes_a_human_task() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("db"));
    let id = park(&engine, "inbox", "m1", "May I deploy v2?\nDetails follow.").await;
    let q = engine.queue(QueueQuery::default()).await.unwrap();
    assert_eq!(q.total, 1);
    assert_eq!(q.items[0].task_id, id);
    assert_eq!(q.items[0].preview, "May I deploy v2?");
    assert_eq!(q.counts["inbox"], 1);

    let d = engine
        .decide(&id, input(DecisionKind::Approve, Some("ship it")), "test")
        .await
        .unwrap();
    assert_eq!(d.delivery, "delivered", "{d:?}");
    let detail = engine.task_detail(&id).await.unwrap();
    assert_eq!(detail.task.status.state, TaskState::Completed);
    let artifact = &detail.task.artifacts.as_ref().unwrap()[0];
    assert_eq!(
        serde_json::to_value(&artifact.parts[0]).unwrap(),
        json!({"data": {"decision": "approve", "comment": "ship it"}})
    );
    assert_eq!(
        detail.task.status.message.as_ref().unwrap().text(),
        "Approved. ship it"
    );
    assert_eq!(detail.turns[0].outcome.as_deref(), Some("decided"));
    assert_eq!(engine.queue(QueueQuery::default()).await.unwrap().total, 0);
}

#[tokio::test]
async fn reply_and_reject_finish_human_tasks_as_the_design_says() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("db"));
    let a = park(&engine, "inbox", "m1", "Which plan?").await;
    let b = park(&engine, "inbox", "m2", "Delete the database?").await;
    let reply: DecisionInput = serde_json::from_value(
        json!({"kind": "reply", "text": "Plan B", "data": {"plan": "B"},
            "files": [{"name": "notes.txt", "mediaType": "text/plain", "bytes": "aGk="}]}),
    )
    .unwrap();
    engine.decide(&a, reply, "test").await.unwrap();
    let t = engine.task_detail(&a).await.unwrap().task;
    assert_eq!(t.status.state, TaskState::Completed);
    let parts = serde_json::to_value(&t.status.message.unwrap().parts).unwrap();
    assert_eq!(
        parts,
        json!([{"text": "Plan B"}, {"data": {"plan": "B"}}, {"raw": "aGk=", "filename": "notes.txt", "mediaType": "text/plain"}])
    );
    engine
        .decide(&b, input(DecisionKind::Reject, Some("too risky")), "test")
        .await
        .unwrap();
    let t = engine.task_detail(&b).await.unwrap().task;
    assert_eq!(t.status.state, TaskState::Rejected);
    assert_eq!(t.status.message.unwrap().text(), "Rejected. too risky");
}

#[tokio::test]
async fn fifty_concurrent_approvals_make_exactly_one_decision() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("db"));
    let id = park(&engine, "inbox", "m1", "Approve?").await;
    let engine = Arc::new(engine);
    let mut handles = Vec::new();
    for i in 0..50 {
        let (engine, id) = (engine.clone(), id.clone());
        handles.push(tokio::spawn(async move {
            engine
                .decide(
                    &id,
                    input(DecisionKind::Approve, Some(&format!("click {i}"))),
                    "test",
                )
                .await
        }));
    }
    let mut ok = Vec::new();
    let mut already = 0;
    for h in handles {
        match h.await.unwrap() {
            Ok(d) => ok.push(d),
            Err(DecideError::AlreadyDecided(first)) => {
                already += 1;
                assert_eq!(first.kind, "approve");
            }
            Err(e) => panic!("unexpected: {e}"),
        }
    }
    assert_eq!(ok.len(), 1);
    assert_eq!(already, 49);
    let detail = engine.task_detail(&id).await.unwrap();
    assert_eq!(detail.decisions.len(), 1);
    assert_eq!(detail.decisions[0].id, ok[0].id);
}

#[tokio::test]
async fn a_restart_between_parking_and_deciding_keeps_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let engine = engine_at(&db);
    let id = park(&engine, "ops", "m1", "Rotate the keys?").await;
    engine.store().close().await;
    drop(engine);
    let engine = engine_at(&db);
    engine
        .recover(std::time::Duration::from_secs(30))
        .await
        .unwrap();
    let q = engine.queue(QueueQuery::default()).await.unwrap();
    assert_eq!(q.items.len(), 1);
    assert_eq!(q.items[0].task_id, id);
    engine
        .decide(&id, input(DecisionKind::Approve, None), "test")
        .await
        .unwrap();
    assert_eq!(
        engine.task_detail(&id).await.unwrap().task.status.state,
        TaskState::Completed
    );
}

#[tokio::test]
async fn a_decision_on_a_scripted_task_is_its_next_message() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("db"));
    let id = park(&engine, "bot", "ask-1", "deploy").await;
    let q = engine
        .queue(QueueQuery {
            agent_id: Some("bot".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(q.items.len(), 1);
    engine
        .decide(&id, input(DecisionKind::Reply, Some("staging")), "test")
        .await
        .unwrap();
    // The agent's run is asynchronous: wait (bounded) for it to finish.
    until_completed(&engine, &id).await;
    let t = engine.task_detail(&id).await.unwrap().task;
    assert!(
        t.history.iter().any(|m| m.text() == "staging"),
        "the reply reached the agent as a message"
    );
}

#[tokio::test]
async fn an_agent_that_asks_again_at_once_opens_a_new_turn() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("db"));
    let id = park(&engine, "bot", "ask-1", "deploy").await;
    let first = engine.task_detail(&id).await.unwrap().open_turn.unwrap();
    // The reply makes the agent ask again, input-required to input-required.
    engine
        .decide(
            &id,
            input(DecisionKind::Reply, Some("again, staging")),
            "test",
        )
        .await
        .unwrap();
    let mut detail = engine.task_detail(&id).await.unwrap();
    for _ in 0..200 {
        if detail.open_turn.as_ref().is_some_and(|t| t.id != first.id) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        detail = engine.task_detail(&id).await.unwrap();
    }
    let second = detail.open_turn.clone().expect("the new question waits");
    assert_ne!(second.id, first.id, "a new turn: {:?}", detail.turns);
    assert_eq!(detail.task.status.state, TaskState::InputRequired);
    let closed = detail.turns.iter().find(|t| t.id == first.id).unwrap();
    assert_eq!(closed.outcome.as_deref(), Some("decided"));
    let q = engine
        .queue(QueueQuery {
            agent_id: Some("bot".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(q.items.len(), 1);
    assert_eq!(q.items[0].id, second.id);
    // The new question takes its own decision.
    engine
        .decide(&id, input(DecisionKind::Reply, Some("v2")), "test")
        .await
        .unwrap();
    until_completed(&engine, &id).await;
}

#[tokio::test]
async fn bad_decisions_are_refused_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("db"));
    let id = park(&engine, "inbox", "m1", "Approve?").await;
    let e = engine
        .decide(&id, input(DecisionKind::Reply, Some("  ")), "t")
        .await
        .unwrap_err();
    assert!(matches!(e, DecideError::Invalid(_)), "{e}");
    let e = engine
        .decide(&id, input(DecisionKind::Continue, None), "t")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("auth-required"), "{e}");
    let e = engine
        .decide("nope", input(DecisionKind::Approve, None), "t")
        .await
        .unwrap_err();
    assert!(matches!(e, DecideError::NotFound(_)));
    engine
        .decide(&id, input(DecisionKind::Approve, None), "t")
        .await
        .unwrap();
    let e = engine
        .decide(&id, input(DecisionKind::Reject, None), "t")
        .await
        .unwrap_err();
    assert!(matches!(e, DecideError::AlreadyDecided(_)), "{e}");
}

#[tokio::test]
async fn queue_filters_sorts_pages_and_searches() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("db"));
    let mut ids = Vec::new();
    for i in 0..7 {
        let agent = if i % 2 == 0 { "inbox" } else { "ops" };
        ids.push(
            park(
                &engine,
                agent,
                &format!("m{i}"),
                &format!("request number {i} about deploys"),
            )
            .await,
        );
    }
    park(&engine, "inbox", "x", "Rotate credentials").await;
    let q = engine
        .queue(QueueQuery {
            text: Some("rotate cred".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(q.total, 1);
    assert_eq!(q.items[0].preview, "Rotate credentials");
    let q = engine
        .queue(QueueQuery {
            agent_id: Some("ops".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(q.total, 3);
    assert_eq!(q.counts["inbox"], 5);
    // Oldest first, three at a time: every turn once, in order.
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = engine
            .queue(QueueQuery {
                limit: Some(3),
                cursor: cursor.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        seen.extend(page.items.iter().map(|t| t.task_id.clone()));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen.len(), 8);
    assert_eq!(&seen[..7], &ids[..]);
    let newest = engine
        .queue(QueueQuery {
            newest_first: true,
            limit: Some(1),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(newest.items[0].preview, "Rotate credentials");
    assert!(
        engine
            .queue(QueueQuery {
                state: Some(TaskState::Completed),
                ..Default::default()
            })
            .await
            .is_err()
    );
    assert!(
        engine
            .queue(QueueQuery {
                cursor: Some("garbage".into()),
                ..Default::default()
            })
            .await
            .is_err()
    );
}

#[tokio::test]
async fn history_is_searchable_and_exports_to_jsonl_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("db"));
    let a = park(&engine, "inbox", "m1", "Pay invoice 42?").await;
    let b = park(&engine, "ops", "m2", "Restart, the \"api\"?").await;
    engine
        .decide(&a, input(DecisionKind::Approve, Some("=SUM(A1)")), "ui")
        .await
        .unwrap();
    engine
        .decide(&b, input(DecisionKind::Reject, Some("not now")), "cli")
        .await
        .unwrap();
    let h = engine.history(None, None, None, None).await.unwrap();
    assert_eq!(h.items.len(), 2);
    assert_eq!(h.items[0].decision.task_id, b, "newest first");
    let h = engine
        .history(None, Some("invoice".into()), None, None)
        .await
        .unwrap();
    assert_eq!(h.items.len(), 1);
    let h = engine
        .history(None, Some("now".into()), None, None)
        .await
        .unwrap();
    assert_eq!(h.items.len(), 1, "decision text is searchable too");
    let all = engine.history_all(None, None).await.unwrap();
    let jsonl = to_jsonl(&all);
    let lines: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["decision"]["payload"]["comment"], "=SUM(A1)");
    let csv = to_csv(&all);
    let rows: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(rows.len(), 3);
    assert!(rows[0].starts_with("decision_id,decided_at,kind"));
    assert!(csv.contains("\"Restart, the \"\"api\"\"?\""), "{csv}");
}

/// A decision is on the disk before the person is told it was recorded,
/// with the default durability too, where other commits reach the disk at
/// the checkpoint after them; a task parking is such another commit. With
/// `durability = "full"` every commit is synced by SQLite, and none extra.
#[tokio::test]
async fn a_decision_reaches_the_disk_before_it_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("db"));
    let id = park(&engine, "inbox", "m1", "May I deploy v2?").await;
    let other = park(&engine, "inbox", "m2", "And v3?").await;
    assert_eq!(engine.store().synced(), 0, "parking is not synced");
    let d = engine
        .decide(&id, input(DecisionKind::Approve, None), "test")
        .await
        .unwrap();
    assert_eq!(d.delivery, "delivered", "{d:?}");
    assert_eq!(engine.store().synced(), 1);
    // A decision refused (the turn is decided already) writes nothing new,
    // but its write asked for the disk all the same.
    let again = engine
        .decide(&id, input(DecisionKind::Reject, None), "test")
        .await;
    assert!(
        matches!(again, Err(DecideError::AlreadyDecided(_))),
        "{again:?}"
    );
    engine
        .decide(&other, input(DecisionKind::Reject, Some("no")), "test")
        .await
        .unwrap();
    assert_eq!(engine.store().synced(), 3);

    let full_dir = tempfile::tempdir().unwrap();
    let full = engine_with(&full_dir.path().join("db"), Durability::Full);
    let id = park(&full, "inbox", "m1", "May I deploy v2?").await;
    full.decide(&id, input(DecisionKind::Approve, None), "test")
        .await
        .unwrap();
    assert_eq!(full.store().synced(), 0, "SQLite synced it at the commit");
}
