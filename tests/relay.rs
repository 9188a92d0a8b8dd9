//! The relay backend: caller ⇄ Countersign ⇄ upstream agent (a second
//! `countersign serve`), with the person or the caller answering the
//! upstream's question — the first answer wins.
mod common;
use common::*;

use std::time::Duration;

use serde_json::{Value, json};

const UPSTREAM: &str = r#"
[[agents]]
id = "bot"
backend = "scripted"
[[agents.rules]]
text = "(?i)^deploy"
steps = [{ status = { state = "input-required", text = "Which environment?" } }]
[[agents.rules]]
text = "(?i)^hello"
steps = [
  { artifact = { name = "greeting", parts = [{ text = "Hi there" }] } },
  { complete = "Greeted" },
]
[[agents.rules]]
text = "(?i)(staging|prod|approved)"
steps = [{ complete = "Deploying" }]
"#;

fn gateway_config(upstream: &Server) -> String {
    gateway_config_for(&upstream.base)
}

fn gateway_config_for(upstream_base: &str) -> String {
    format!(
        "[webhooks]\nsweep_secs = 1\n\n[[agents]]\nid = \"gate\"\nbackend = \"relay\"\nupstream = \"bot\"\n\n[[peers]]\nid = \"bot\"\nurl = \"{}/a2a/bot\"\n",
        upstream_base
    )
}

async fn get(c: &Client, id: &Value) -> Value {
    c.rpc_ok("gate", "GetTask", json!({"id": id})).await
}

async fn wait_state(c: &Client, id: &Value, state: &str) -> Value {
    for _ in 0..300 {
        let t = get(c, id).await;
        if t["status"]["state"] == state {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {id} never became {state}: {}", get(c, id).await);
}

#[tokio::test]
async fn a_relayed_task_mirrors_the_upstream_result_under_our_ids() {
    let upstream = Server::start(Some(UPSTREAM));
    let gate = Server::start(Some(&gateway_config(&upstream)));
    let c = gate.client();
    let r = c.send_text("gate", "m-hello", "hello there").await;
    let t = &r["task"];
    assert_eq!(
        t["status"]["state"], "TASK_STATE_COMPLETED",
        "a blocking send waits for the upstream: {r}"
    );
    assert_eq!(t["artifacts"][0]["parts"][0]["text"], "Hi there");
    let upstream_tasks = upstream
        .client()
        .rpc_ok("bot", "ListTasks", json!({}))
        .await;
    assert_ne!(upstream_tasks["tasks"][0]["id"], t["id"], "our own ids");
}

#[tokio::test]
async fn the_caller_may_answer_the_upstream_question_and_then_the_person_is_too_late() {
    let upstream = Server::start(Some(UPSTREAM));
    let gate = Server::start(Some(&gateway_config(&upstream)));
    let c = gate.client();
    let r = c.send_text("gate", "m-deploy", "deploy the site").await;
    let id = r["task"]["id"].clone();
    assert_eq!(
        r["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{r}"
    );
    assert_eq!(
        r["task"]["status"]["message"]["parts"][0]["text"],
        "Which environment?"
    );
    // The person sees it parked too.
    let token = gate.ui_token();
    let http = reqwest::Client::new();
    let q: Value = http
        .get(gate.url("/api/queue"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(q["items"][0]["taskId"], id, "{q}");
    assert_eq!(q["items"][0]["agentId"], "gate");
    // The caller answers first.
    let mut answer = message("m-answer", "staging");
    answer["taskId"] = id.clone();
    c.rpc_ok("gate", "SendMessage", json!({"message": answer}))
        .await;
    let t = wait_state(&c, &id, "TASK_STATE_COMPLETED").await;
    assert_eq!(t["status"]["message"]["parts"][0]["text"], "Deploying");
    // The person is too late.
    let resp = http
        .post(gate.url(&format!("/api/tasks/{}/decision", id.as_str().unwrap())))
        .bearer_auth(&token)
        .json(&json!({"kind": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 409);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["decision"]["actor"], "caller", "{body}");
}

#[tokio::test]
async fn the_person_may_answer_and_then_the_caller_hears_it_is_answered() {
    let upstream = Server::start(Some(UPSTREAM));
    let gate = Server::start(Some(&gateway_config(&upstream)));
    let c = gate.client();
    let r = c.send_text("gate", "m-deploy2", "deploy the api").await;
    let id = r["task"]["id"].clone();
    let token = gate.ui_token();
    let http = reqwest::Client::new();
    let resp = http
        .post(gate.url(&format!("/api/tasks/{}/decision", id.as_str().unwrap())))
        .bearer_auth(&token)
        .json(&json!({"kind": "approve", "text": "approved for prod"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    // The caller's own answer now is refused, clearly.
    let mut late = message("m-late", "staging");
    late["taskId"] = id.clone();
    let err = c
        .rpc_err("gate", "SendMessage", json!({"message": late}))
        .await;
    assert_eq!(err["code"], -32004, "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("already answered"),
        "{err}"
    );
    // The person's answer reached the upstream, and the caller sees the result.
    let t = wait_state(&c, &id, "TASK_STATE_COMPLETED").await;
    assert!(
        t["history"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["messageId"]
                .as_str()
                .is_some_and(|i| i.starts_with("decision-"))),
        "the caller sees the person's answer in the history: {t}"
    );
}

#[tokio::test]
async fn an_unreachable_upstream_fails_the_task_with_a_reason() {
    // A port held bound but never listened on refuses every connection, and
    // no other server can take it meanwhile — unlike the port of a killed
    // server, which a test running alongside may be given next.
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let dead = format!("http://{}", held.local_addr().unwrap());
    let gate = Server::start(Some(&gateway_config_for(&dead)));
    let c = gate.client();
    let r = c.send_text("gate", "m-x", "hello?").await;
    let t = &r["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_FAILED", "{r}");
    assert!(
        t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("upstream"),
        "{r}"
    );
}

#[test]
fn a_relay_needs_a_configured_upstream() {
    use countersign::config::Config;
    use std::path::Path;
    let e = Config::parse(
        "[[agents]]\nid = \"gate\"\nbackend = \"relay\"\n",
        Path::new("c.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("upstream"), "{e}");
    let e = Config::parse(
        "[[agents]]\nid = \"gate\"\nbackend = \"relay\"\nupstream = \"nope\"\n",
        Path::new("c.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("nope"), "{e}");
}
