//! Push notification configs in the engine: stored, checked (including the
//! outbound policy), paged, and durable in a real SQLite file.
use std::path::Path;

use countersign::a2a::Error;
use countersign::a2a::types::{AuthenticationInfo, SendMessageRequest, TaskPushNotificationConfig};
use countersign::a2a::v0_3::Dialect;
use countersign::config::Config;
use countersign::dispatch::ssrf::{OutboundConfig, OutboundPolicy};
use countersign::engine::Engine;
use countersign::engine::dispatch::Dispatch;
use countersign::store::{Durability, Store};
use serde_json::json;

fn engine_at(db: &Path) -> Engine {
    let cfg = Config::parse("", Path::new("test.toml")).unwrap();
    let store = Store::open(db, Durability::Normal).unwrap();
    let engine = Engine::new(store, &cfg.agents, cfg.limits);
    let outbound: OutboundConfig = toml::from_str("allow = [\"127.0.0.1\"]").unwrap();
    engine.configure_dispatch(Dispatch::new(
        cfg.dispatch,
        OutboundPolicy::new(&outbound).unwrap(),
    ));
    engine
}

fn config(task: &str, id: Option<&str>, url: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        tenant: None,
        id: id.map(str::to_owned),
        task_id: Some(task.to_owned()),
        url: url.to_owned(),
        token: Some("secret-token".into()),
        authentication: Some(AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: Some("abc".into()),
        }),
    }
}

async fn new_task(engine: &Engine) -> String {
    let agent = engine.agent("inbox").unwrap().clone();
    let req: SendMessageRequest = serde_json::from_value(json!({
        "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "approve?"}]}
    }))
    .unwrap();
    let started = engine
        .send(&agent, "local", req, countersign::a2a::v0_3::Dialect::V1)
        .await
        .unwrap();
    match started.reply {
        countersign::a2a::types::SendMessageResponse::Task(t) => t.id,
        other => panic!("expected a task, got {other:?}"),
    }
}

#[tokio::test]
async fn push_configs_are_stored_paged_deleted_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.sqlite");
    let engine = engine_at(&db);
    let agent = engine.agent("inbox").unwrap().clone();
    let task = new_task(&engine).await;

    let created = engine
        .create_push_config(
            &agent,
            "local",
            config(&task, None, "http://127.0.0.1:9/a"),
            Dialect::V1,
        )
        .await
        .unwrap();
    let generated = created.id.clone().expect("an id is generated");
    for i in 0..4 {
        engine
            .create_push_config(
                &agent,
                "local",
                config(&task, Some(&format!("cfg-{i}")), "http://127.0.0.1:9/b"),
                Dialect::V1,
            )
            .await
            .unwrap();
    }
    let got = engine
        .get_push_config(&agent, "local", &task, &generated)
        .await
        .unwrap();
    assert_eq!(got.url, "http://127.0.0.1:9/a");
    assert_eq!(got.authentication.unwrap().scheme, "Bearer");

    // Paging visits every config once.
    let mut seen = Vec::new();
    let mut token = None;
    loop {
        let page = engine
            .list_push_configs(&agent, "local", &task, Some(2), token.clone())
            .await
            .unwrap();
        assert!(page.configs.len() <= 2);
        seen.extend(page.configs.into_iter().filter_map(|c| c.id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = Some(page.next_page_token);
    }
    seen.sort();
    assert_eq!(seen.len(), 5);
    seen.dedup();
    assert_eq!(seen.len(), 5);

    // Delete is idempotent.
    engine
        .delete_push_config(&agent, "local", &task, "cfg-0")
        .await
        .unwrap();
    engine
        .delete_push_config(&agent, "local", &task, "cfg-0")
        .await
        .unwrap();
    assert!(matches!(
        engine
            .get_push_config(&agent, "local", &task, "cfg-0")
            .await,
        Err(Error::TaskNotFound(_))
    ));
    engine.store().close().await;
    drop(engine);

    let engine = engine_at(&db);
    let agent = engine.agent("inbox").unwrap().clone();
    let page = engine
        .list_push_configs(&agent, "local", &task, None, None)
        .await
        .unwrap();
    assert_eq!(page.configs.len(), 4);
}

#[tokio::test]
async fn bad_push_configs_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("db.sqlite"));
    let agent = engine.agent("inbox").unwrap().clone();
    let task = new_task(&engine).await;
    for url in ["not a url", "ftp://example.com/x", "/relative"] {
        let e = engine
            .create_push_config(&agent, "local", config(&task, None, url), Dialect::V1)
            .await
            .unwrap_err();
        assert!(
            matches!(e, Error::InvalidParams(ref m) if m.contains("url")),
            "{url}: {e}"
        );
    }
    let e = engine
        .create_push_config(
            &agent,
            "local",
            config("no-such-task", None, "http://127.0.0.1:9/"),
            Dialect::V1,
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::TaskNotFound(_)));
    // Another owner cannot see the task.
    let e = engine
        .create_push_config(
            &agent,
            "someone-else",
            config(&task, None, "http://127.0.0.1:9/"),
            Dialect::V1,
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::TaskNotFound(_)));
}
