//! Peer cards pinned on first use: a real `countersign serve` plays the peer,
//! and a small HTTP server in the test serves its card (signed with a key
//! the test controls, so it can rotate the key or tamper with the card).
//! A changed card holds the peer's decisions and new tasks until trusted.

mod common;
use common::*;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use countersign::a2a::signing::CardKey;
use reqwest::StatusCode;
use serde_json::{Value, json};

const PEER: &str = r#"
[[agents]]
id = "bot"
backend = "scripted"
[[agents.rules]]
message_id_prefix = "decision-"
steps = [{ complete = "Deploying now" }]
[[agents.rules]]
text = "(?i)^deploy"
steps = [{ status = { state = "input-required", text = "Which environment?" } }]
"#;

const LOCAL: &str = "[webhooks]\nsweep_secs = 1\n\n[[agents]]\nid = \"inbox\"\n";

/// What the card server serves.
struct Served {
    card: Value,
    jwks: Value,
}

type Shared = Arc<Mutex<Served>>;

/// Serves `/agent-card.json` and `/jwks.json` from `served` on 127.0.0.1:0.
async fn card_server(served: Shared) -> String {
    async fn card(State(s): State<Shared>) -> axum::Json<Value> {
        axum::Json(s.lock().unwrap().card.clone())
    }
    async fn jwks(State(s): State<Shared>) -> axum::Json<Value> {
        axum::Json(s.lock().unwrap().jwks.clone())
    }
    let app = axum::Router::new()
        .route("/agent-card.json", axum::routing::get(card))
        .route("/jwks.json", axum::routing::get(jwks))
        .with_state(served);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

/// `card` without its signatures, signed by `key` (key set at `base`).
fn signed(card: &Value, key: &CardKey, base: &str) -> Value {
    let mut card = card.clone();
    card.as_object_mut().unwrap().remove("signatures");
    let sig = key.sign(&card, Some(&format!("{base}/jwks.json"))).unwrap();
    card["signatures"] = json!([sig]);
    card
}

async fn wait_for(api: &Api, task: &str, state: &str) -> Value {
    for _ in 0..300 {
        let (_, d) = api
            .call(reqwest::Method::GET, &format!("/tasks/{task}"), None)
            .await;
        if d["task"]["status"]["state"] == state {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {task} never became {state}");
}

#[tokio::test]
async fn a_changed_card_holds_the_peer_until_trusted() {
    let peer = Server::start(Some(PEER));
    let original: Value = peer
        .client()
        .http
        .get(peer.url("/a2a/bot/.well-known/agent-card.json"))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let k1 = CardKey::generate().unwrap();
    let k2 = CardKey::generate().unwrap();
    let served: Shared = Arc::new(Mutex::new(Served {
        card: json!({}),
        jwks: json!({"keys": [k1.public().jwk()]}),
    }));
    let cards = card_server(served.clone()).await;
    served.lock().unwrap().card = signed(&original, &k1, &cards);

    let local = Server::start(Some(LOCAL));
    let api = Api::new(&local);
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            "/peers",
            Some(json!({"id": "bot", "url": format!("{cards}/agent-card.json")})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // Pinned on first use, with the verified key.
    let p = api.peer("bot").await;
    assert_eq!(p["pin"]["key"], json!(k1.public().kid), "{p}");
    assert_eq!(p["pin"]["skills"], json!(["bot"]));
    assert!(p["cardChange"].is_null(), "{p}");

    // A task there parks here.
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            "/peers/bot/tasks",
            Some(json!({"text": "deploy v2"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["task"]["id"].as_str().unwrap().to_owned();
    wait_for(&api, &id, "TASK_STATE_INPUT_REQUIRED").await;

    // The peer's key changes: the sweep (every second here, for the open
    // watched task) reads the card again and notices, with nobody asking.
    {
        let mut s = served.lock().unwrap();
        s.card = signed(&original, &k2, &cards);
        s.jwks = json!({"keys": [k2.public().jwk()]});
    }
    let mut p = Value::Null;
    for _ in 0..200 {
        p = api.peer("bot").await;
        if !p["cardChange"].is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let change = &p["cardChange"];
    assert_eq!(change["changed"], json!(["key"]), "{p}");
    assert_eq!(change["old"]["key"], json!(k1.public().kid));
    assert_eq!(change["new"]["key"], json!(k2.public().kid));
    assert!(local.log().contains("changed since it was trusted"));

    // Held: no new task, and the decision is recorded but not delivered.
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            "/peers/bot/tasks",
            Some(json!({"text": "deploy v3"})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("changed (key)") && msg.contains("peers trust bot"),
        "{msg}"
    );
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            &format!("/tasks/{id}/decision"),
            Some(json!({"kind": "approve", "text": "staging"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut held = false;
    for _ in 0..100 {
        let (_, o) = api.call(reqwest::Method::GET, "/outbox", None).await;
        if o.to_string().contains("held:") {
            held = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(held, "the delivery was not held");
    // Nothing reached the peer: its task still waits.
    let remote = peer.client().rpc_ok("bot", "ListTasks", json!({})).await;
    assert_eq!(remote["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(
        remote["tasks"][0]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, d) = api
        .call(reqwest::Method::GET, &format!("/tasks/{id}"), None)
        .await;
    assert_ne!(d["task"]["status"]["state"], "TASK_STATE_COMPLETED");

    // Trusting the new card releases the decision, once.
    let (status, body) = api
        .call(reqwest::Method::POST, "/peers/bot/trust", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["peer"]["cardChange"].is_null(), "{body}");
    assert_eq!(body["peer"]["pin"]["key"], json!(k2.public().kid));
    wait_for(&api, &id, "TASK_STATE_COMPLETED").await;
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            "/peers/bot/tasks",
            Some(json!({"text": "deploy v3"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // A card changed after signing is refused outright.
    {
        let mut s = served.lock().unwrap();
        s.card["name"] = json!("Someone else");
    }
    let (status, body) = api
        .call(reqwest::Method::POST, "/peers/bot/refresh", None)
        .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("does not verify"), "{msg}");
}

#[tokio::test]
async fn unsigned_cards_are_pinned_too_and_skill_changes_hold() {
    let peer = Server::start(Some(PEER));
    let mut card: Value = peer
        .client()
        .http
        .get(peer.url("/a2a/bot/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    card.as_object_mut().unwrap().remove("signatures");
    let served: Shared = Arc::new(Mutex::new(Served {
        card: card.clone(),
        jwks: json!({"keys": []}),
    }));
    let cards = card_server(served.clone()).await;
    let local = Server::start(Some(LOCAL));
    let api = Api::new(&local);
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            "/peers",
            Some(json!({"id": "bot", "url": format!("{cards}/agent-card.json")})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert!(api.peer("bot").await["pin"]["key"].is_null());

    // A new skill, noticed at the next read of the card.
    served.lock().unwrap().card["skills"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "wire-money", "name": "Wire money", "description": "x", "tags": []}));
    let (status, body) = api
        .call(reqwest::Method::POST, "/peers/bot/refresh", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["peer"]["cardChange"]["changed"], json!(["skills"]));

    // The CLI shows it and accepts it.
    let listed = run_cli_ok(&local.data_dir, &["peers", "list"], Duration::from_secs(30)).await;
    assert!(listed.contains("peer bot changed (skills)"), "{listed}");
    let out = run_cli_ok(
        &local.data_dir,
        &["peers", "trust", "bot"],
        Duration::from_secs(30),
    )
    .await;
    assert!(out.contains("trusted"), "{out}");
    assert!(api.peer("bot").await["cardChange"].is_null());
    let run = run_cli(
        &local.data_dir,
        &["peers", "trust", "nope"],
        Duration::from_secs(30),
    )
    .await;
    assert_ne!(run.code, Some(0));
}
