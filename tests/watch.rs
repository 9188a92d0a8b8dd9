//! Watching tasks on a peer: a second `countersign serve` plays the peer.
//! Tasks started there are mirrored here, parked in the same queue, and the
//! person's decision is delivered back through the outbox exactly once.
mod common;
use common::powercut::{self, Cut};
use common::*;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

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
[[agents.rules]]
text = "(?i)^slow"
steps = [{ status = { state = "working" } }, { delay_ms = 1500 }, { status = { state = "input-required", text = "Which environment?" } }]
[[agents.rules]]
text = "(?i)^quick"
steps = [{ status = { state = "working" } }, { delay_ms = 200 }, { status = { state = "input-required", text = "Which environment?" } }]
[[agents.rules]]
text = "(?i)^eu-west"
steps = [{ complete = "Deploying to eu-west" }]
[[agents.rules]]
text = "(?i)^staging"
steps = [{ status = { state = "working" } }, { delay_ms = 60000 }, { complete = "Deployed to staging" }]
[[agents.rules]]
text = "(?i)^sign"
steps = [{ status = { state = "auth-required", text = "Please sign in at https://example.com/login" } }]
"#;

fn local_config(peer: &Server) -> String {
    config_sweeping_every(peer, 1)
}

/// Us, watching `peer` as `bot`, re-reading its open tasks every
/// `sweep_secs` (0: never).
fn config_sweeping_every(peer: &Server, sweep_secs: u64) -> String {
    format!(
        "[webhooks]\nsweep_secs = {sweep_secs}\n\n[[agents]]\nid = \"inbox\"\n\n[[peers]]\nid = \"bot\"\nurl = \"{}/a2a/bot\"\n",
        peer.base
    )
}

/// A task started on the peer by another tool, and a push subscription
/// here: (the remote task's id, the subscription's URL and token).
async fn started_elsewhere(peer: &Server, api: &Api, text: &str) -> (String, String, String) {
    let remote = peer.client().send_text("bot", "other-tool", text).await;
    let remote_id = remote["task"]["id"].as_str().unwrap().to_owned();
    let (status, sub) = api
        .call(reqwest::Method::POST, "/peers/bot/subscriptions", None)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sub}");
    let url = sub["url"].as_str().unwrap().to_owned();
    let token = sub["token"].as_str().unwrap().to_owned();
    (remote_id, url, token)
}

/// Starts a watched task on the peer `bot` through the UI API: our id of it,
/// and the state the peer answered with.
async fn start_task(api: &Api, text: &str) -> (String, String) {
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            "/peers/bot/tasks",
            Some(json!({ "text": text })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let task = &body["task"];
    let id = task["id"].as_str().unwrap().to_owned();
    (
        id,
        task["status"]["state"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// Decides task `id`; the decision must be taken.
async fn decide(api: &Api, id: &str, decision: Value) {
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            &format!("/tasks/{id}/decision"),
            Some(decision),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

async fn wait_for(api: &Api, task: &str, state: &str) -> Value {
    for _ in 0..300 {
        let d = detail(api, task).await;
        if d["task"]["status"]["state"] == state {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {task} never became {state}");
}

#[tokio::test]
async fn a_peer_task_is_parked_here_and_the_decision_resumes_it_once() {
    let peer = Server::start(Some(PEER));
    let local = Server::start(Some(&local_config(&peer)));
    let api = Api::new(&local);
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            "/peers/bot/tasks",
            Some(json!({"text": "deploy v2"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["task"]["id"].as_str().unwrap().to_owned();
    let detail = wait_for(&api, &id, "TASK_STATE_INPUT_REQUIRED").await;
    assert_eq!(detail["agentId"], "bot");
    let q = queue(&api).await;
    assert_eq!(q["items"][0]["taskId"], id.as_str(), "{q}");
    assert_eq!(q["items"][0]["source"], "watched");
    assert_eq!(q["items"][0]["preview"], "deploy v2");

    let (status, body) = api
        .call(
            reqwest::Method::POST,
            &format!("/tasks/{id}/decision"),
            Some(json!({"kind": "approve", "text": "staging"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let decision_id = body["decision"]["id"].as_str().unwrap().to_owned();
    let done = wait_for(&api, &id, "TASK_STATE_COMPLETED").await;
    assert_eq!(
        done["task"]["status"]["message"]["parts"][0]["text"],
        "Deploying now"
    );
    // The decision reached the peer's task exactly once, as its next message.
    let peer_tasks = peer
        .client()
        .rpc_ok("bot", "ListTasks", json!({"historyLength": 10}))
        .await;
    let remote = &peer_tasks["tasks"][0];
    let decision_messages: Vec<&Value> = remote["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            m["messageId"]
                .as_str()
                .is_some_and(|i| i.starts_with("decision-"))
        })
        .collect();
    assert_eq!(decision_messages.len(), 1, "{remote}");
    assert_eq!(
        decision_messages[0]["messageId"],
        format!("decision-{decision_id}")
    );
    assert_eq!(
        decision_messages[0]["parts"][1]["data"],
        json!({"decision": "approve", "comment": "staging"})
    );
    // Delivery status is visible.
    for _ in 0..100 {
        let (_, h) = api.call(reqwest::Method::GET, "/history", None).await;
        if h["items"][0]["decision"]["delivery"] == "delivered" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the decision was never marked delivered");
}

#[tokio::test]
async fn pushes_need_a_known_subscription_and_its_token_and_are_re_read_from_the_peer() {
    let peer = Server::start(Some(PEER));
    let local = Server::start(Some(&config_sweeping_every(&peer, 0)));
    let api = Api::new(&local);
    let (remote_id, url, token) = started_elsewhere(&peer, &api, "deploy the docs").await;
    assert!(
        url.starts_with(&local.base) && url.contains("/webhooks/"),
        "{url}"
    );
    let http = reqwest::Client::new();
    let update = json!({"statusUpdate": {"taskId": remote_id, "contextId": "c", "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}});
    // Forged: wrong token, wrong subscription.
    let r = http
        .post(&url)
        .header("X-A2A-Notification-Token", "wrong")
        .json(&update)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = http
        .post(format!("{}/webhooks/nope", local.base))
        .header("X-A2A-Notification-Token", &token)
        .json(&update)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let q = queue(&api).await;
    assert_eq!(q["total"], 0, "forged pushes park nothing");
    // Genuine (the token in the 1.0 header), twice: parked once.
    for header in ["A2A-Notification-Token", "X-A2A-Notification-Token"] {
        let r = http
            .post(&url)
            .header(header, &token)
            .json(&update)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
    }
    let q = queue(&api).await;
    assert_eq!(q["total"], 1, "{q}");
    assert_eq!(q["items"][0]["preview"], "deploy the docs");
    // A 0.3-shaped push (the Task itself) for the same task changes nothing new.
    let r = http
        .post(&url)
        .header("Authorization", format!("Bearer {token}"))
        .json(&json!({"kind": "task", "id": remote_id, "contextId": "c", "status": {"state": "input-required"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let q = queue(&api).await;
    assert_eq!(q["total"], 1);
    // Once its peer is removed, the subscription (read by every push
    // above) is gone too.
    let (status, _) = api.call(reqwest::Method::DELETE, "/peers/bot", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = push(&url, &token, &remote_id).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_task_first_seen_through_a_push_is_mirrored_as_it_stands_on_the_peer() {
    let peer = Server::start(Some(PEER));
    let local = Server::start(Some(&config_sweeping_every(&peer, 0)));
    let api = Api::new(&local);
    let (remote_id, url, token) = started_elsewhere(&peer, &api, "deploy the site").await;
    let mut seen = Vec::new();
    for _ in 0..2 {
        let (status, _) = push(&url, &token, &remote_id).await;
        assert_eq!(status, StatusCode::OK);
        let q = queue(&api).await;
        assert_eq!(q["total"], 1, "{q}");
        let id = q["items"][0]["taskId"].as_str().unwrap().to_owned();
        seen.push(detail(&api, &id).await);
    }
    // The peer's history, each message once and in its order, with the
    // status (and its question) as the peer has them.
    let theirs = peer
        .client()
        .rpc_ok("bot", "GetTask", json!({"id": remote_id}))
        .await;
    let ids = |t: &Value| -> Vec<Value> {
        t["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["messageId"].clone())
            .collect()
    };
    let mut expected = ids(&theirs);
    let question = theirs["status"]["message"]["messageId"].clone();
    if !expected.contains(&question) {
        expected.push(question);
    }
    let mirror = &seen[0]["task"];
    assert_eq!(ids(mirror), expected, "{mirror}");
    assert_eq!(mirror["history"][0]["parts"][0]["text"], "deploy the site");
    assert_eq!(mirror["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(
        mirror["status"]["message"]["parts"][0]["text"],
        "Which environment?"
    );
    let id = mirror["id"].clone();
    assert!(
        mirror["history"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["taskId"] == id),
        "messages are filed under the mirror: {mirror}"
    );
    // The second push found nothing new.
    assert_eq!(seen[0], seen[1]);
}

#[tokio::test]
async fn the_sweep_finds_what_a_lost_push_did_not_say() {
    let peer = Server::start(Some(PEER));
    let local = Server::start(Some(&local_config(&peer)));
    let api = Api::new(&local);
    let (_, body) = api
        .call(
            reqwest::Method::POST,
            "/peers/bot/tasks",
            Some(json!({"text": "deploy v3"})),
        )
        .await;
    let id = body["task"]["id"].as_str().unwrap().to_owned();
    wait_for(&api, &id, "TASK_STATE_INPUT_REQUIRED").await;
    // The peer's task moves on without telling us (no push): cancel it there.
    let remote = peer.client().rpc_ok("bot", "ListTasks", json!({})).await;
    let remote_id = remote["tasks"][0]["id"].clone();
    peer.client()
        .rpc_ok("bot", "CancelTask", json!({"id": remote_id}))
        .await;
    wait_for(&api, &id, "TASK_STATE_CANCELED").await;
    let q = queue(&api).await;
    assert_eq!(q["total"], 0, "the turn closed: {q}");
}

#[tokio::test]
async fn peers_are_added_listed_and_removed_with_clear_errors() {
    let peer = Server::start(Some(PEER));
    let local = Server::start(Some("[[agents]]\nid = \"inbox\"\n"));
    let api = Api::new(&local);
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            "/peers",
            Some(json!({"url": format!("{}/a2a/bot", peer.base), "name": "Deploy Bot"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["peer"]["id"], "deploy-bot");
    let (_, list) = api.call(reqwest::Method::GET, "/peers", None).await;
    assert_eq!(list["peers"].as_array().unwrap().len(), 1);
    assert!(list["peers"][0]["card"]["name"].is_string());
    assert!(
        list["peers"][0].get("auth").is_none(),
        "credentials are never shown"
    );
    // Unreachable peer: a clear 502 naming the problem.
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            "/peers",
            Some(json!({"id": "gone", "url": "http://127.0.0.1:9/x"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("peer"),
        "{body}"
    );
    let (status, _) = api
        .call(reqwest::Method::DELETE, "/peers/deploy-bot", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = api
        .call(reqwest::Method::DELETE, "/peers/deploy-bot", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = api
        .call(
            reqwest::Method::POST,
            "/peers/nope/tasks",
            Some(json!({"text": "x"})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn auth_required_on_a_peer_is_parked_and_continue_resumes_it() {
    let peer = Server::start(Some(PEER));
    let local = Server::start(Some(&local_config(&peer)));
    let api = Api::new(&local);
    let (_, body) = api
        .call(
            reqwest::Method::POST,
            "/peers/bot/tasks",
            Some(json!({"text": "sign the release"})),
        )
        .await;
    let id = body["task"]["id"].as_str().unwrap().to_owned();
    wait_for(&api, &id, "TASK_STATE_AUTH_REQUIRED").await;
    let (_, q) = api
        .call(reqwest::Method::GET, "/queue?state=auth-required", None)
        .await;
    assert_eq!(q["total"], 1, "{q}");
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            &format!("/tasks/{id}/decision"),
            Some(json!({"kind": "continue"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let done = wait_for(&api, &id, "TASK_STATE_COMPLETED").await;
    assert_eq!(done["decisions"][0]["kind"], "continue");
}

#[tokio::test]
async fn reject_reaches_the_peer_as_a_message_or_as_cancel() {
    let peer = Server::start(Some(PEER));
    // By message (the default): the peer's task gets the decision parts.
    let local = Server::start(Some(&local_config(&peer)));
    let api = Api::new(&local);
    let (_, body) = api
        .call(
            reqwest::Method::POST,
            "/peers/bot/tasks",
            Some(json!({"text": "deploy v4"})),
        )
        .await;
    let id = body["task"]["id"].as_str().unwrap().to_owned();
    wait_for(&api, &id, "TASK_STATE_INPUT_REQUIRED").await;
    api.call(
        reqwest::Method::POST,
        &format!("/tasks/{id}/decision"),
        Some(json!({"kind": "reject", "text": "freeze"})),
    )
    .await;
    wait_for(&api, &id, "TASK_STATE_COMPLETED").await;
    // By cancel.
    let local2 = Server::start(Some(&format!(
        "[webhooks]\nsweep_secs = 1\n\n[[agents]]\nid = \"inbox\"\n\n[[peers]]\nid = \"bot\"\nurl = \"{}/a2a/bot\"\nreject_with = \"cancel\"\n",
        peer.base
    )));
    let api2 = Api::new(&local2);
    let (_, body) = api2
        .call(
            reqwest::Method::POST,
            "/peers/bot/tasks",
            Some(json!({"text": "deploy v5"})),
        )
        .await;
    let id2 = body["task"]["id"].as_str().unwrap().to_owned();
    wait_for(&api2, &id2, "TASK_STATE_INPUT_REQUIRED").await;
    api2.call(
        reqwest::Method::POST,
        &format!("/tasks/{id2}/decision"),
        Some(json!({"kind": "reject", "text": "freeze"})),
    )
    .await;
    wait_for(&api2, &id2, "TASK_STATE_CANCELED").await;
}

#[tokio::test]
async fn a_decision_recorded_before_a_crash_is_delivered_once_after_it() {
    let peer = Server::start(Some(PEER));
    let mut local = Server::start(Some(&local_config(&peer)));
    let api = Api::new(&local);
    let (_, body) = api
        .call(
            reqwest::Method::POST,
            "/peers/bot/tasks",
            Some(json!({"text": "deploy v6"})),
        )
        .await;
    let id = body["task"]["id"].as_str().unwrap().to_owned();
    wait_for(&api, &id, "TASK_STATE_INPUT_REQUIRED").await;
    let dir = local.data_dir.clone();
    // Stop the peer so the decision cannot be delivered, decide, then crash.
    let peer_dir = peer.data_dir.clone();
    let mut peer = peer;
    peer.kill9();
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            &format!("/tasks/{id}/decision"),
            Some(json!({"kind": "approve"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"]["delivery"], "pending");
    local.kill9();
    // The peer comes back on a new port: point the local config at it.
    let peer = Server::start_in(&peer_dir, Some(PEER), &[]);
    let local = Server::start_in(&dir, Some(&local_config(&peer)), &[]);
    let api = Api::new(&local);
    // The peer's card is cached with the old URL; refresh it.
    api.call(reqwest::Method::POST, "/peers/bot/refresh", None)
        .await;
    let done = wait_for(&api, &id, "TASK_STATE_COMPLETED").await;
    assert_eq!(done["decisions"].as_array().unwrap().len(), 1);
    let peer_tasks = peer
        .client()
        .rpc_ok("bot", "ListTasks", json!({"historyLength": 20}))
        .await;
    let copies = peer_tasks["tasks"][0]["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            m["messageId"]
                .as_str()
                .is_some_and(|i| i.starts_with("decision-"))
        })
        .count();
    assert_eq!(copies, 1, "delivered exactly once");
}

#[tokio::test]
async fn a_question_asked_later_without_a_push_is_parked_by_the_sweep() {
    // The peer (a Countersign) sends no pushes: only the sweep can notice.
    let peer = Server::start(Some(PEER));
    let local = Server::start(Some(&local_config(&peer)));
    let api = Api::new(&local);
    let (_, body) = api
        .call(
            reqwest::Method::POST,
            "/peers/bot/tasks",
            Some(json!({"text": "slow deploy"})),
        )
        .await;
    let id = body["task"]["id"].as_str().unwrap().to_owned();
    let state = body["task"]["status"]["state"].as_str().unwrap();
    assert!(
        state == "TASK_STATE_WORKING" || state == "TASK_STATE_SUBMITTED",
        "{body}"
    );
    wait_for(&api, &id, "TASK_STATE_INPUT_REQUIRED").await;
    let q = queue(&api).await;
    assert_eq!(q["items"][0]["taskId"], id.as_str());
}

#[tokio::test]
async fn a_task_on_a_peer_that_sends_no_pushes_is_followed_until_it_parks_and_ends() {
    // The peer (a Countersign) refuses our loopback webhook, and the sweep
    // is off: only following the task can see it park, and then end.
    let peer = Server::start(Some(PEER));
    let local = Server::start(Some(&config_sweeping_every(&peer, 0)));
    let api = Api::new(&local);
    let (id, state) = start_task(&api, "slow deploy").await;
    assert_ne!(state, "TASK_STATE_INPUT_REQUIRED");
    // Asked 1.5 s after the start; read within 2 s of that.
    let parked = wait_for(&api, &id, "TASK_STATE_INPUT_REQUIRED").await;
    assert_eq!(
        parked["task"]["status"]["message"]["parts"][0]["text"],
        "Which environment?"
    );
    decide(&api, &id, json!({"kind": "reply", "text": "staging"})).await;
    let done = wait_for(&api, &id, "TASK_STATE_COMPLETED").await;
    assert_eq!(
        done["task"]["status"]["message"]["parts"][0]["text"],
        "Deploying now"
    );
}

/// A peer that asks a second question the moment the first is answered.
const ASKS_TWICE: &str = r#"
[[agents]]
id = "bot"
backend = "scripted"
[[agents.rules]]
text = "(?i)^v[0-9]"
steps = [{ complete = "Deploying now" }]
[[agents.rules]]
text = "(?i)^staging"
steps = [{ status = { state = "input-required", text = "Which version?" } }]
[[agents.rules]]
text = "(?i)^deploy"
steps = [{ status = { state = "input-required", text = "Which environment?" } }]
"#;

#[tokio::test]
async fn a_second_question_asked_right_after_an_answer_is_parked_again() {
    // The peer answers our reply already asking again: we never see it
    // working in between, yet the new question is a new turn to decide.
    for sweep in [0, 1] {
        let peer = Server::start(Some(ASKS_TWICE));
        let local = Server::start(Some(&config_sweeping_every(&peer, sweep)));
        let api = Api::new(&local);
        let (id, _) = start_task(&api, "deploy v2").await;
        wait_for(&api, &id, "TASK_STATE_INPUT_REQUIRED").await;
        decide(&api, &id, json!({"kind": "reply", "text": "staging"})).await;
        let mut asked = Value::Null;
        for _ in 0..300 {
            let q = queue(&api).await;
            let d = detail(&api, &id).await;
            let turns = d["turns"].as_array().unwrap();
            let open = turns.iter().filter(|t| t["closedMs"].is_null()).count();
            if q["total"] == 1 && turns.len() == 2 && open == 1 {
                asked = d;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            asked["task"]["status"]["message"]["parts"][0]["text"], "Which version?",
            "sweep {sweep}: the second question is parked: {asked}"
        );
        assert_eq!(asked["turns"][0]["outcome"], "decided", "{asked}");
        // The new turn takes a decision of its own.
        decide(&api, &id, json!({"kind": "reply", "text": "v2"})).await;
        let done = wait_for(&api, &id, "TASK_STATE_COMPLETED").await;
        assert_eq!(
            done["task"]["status"]["message"]["parts"][0]["text"],
            "Deploying now"
        );
    }
}

#[tokio::test]
async fn a_peer_can_be_sent_decisions_as_text_only() {
    let peer = Server::start(Some(PEER));
    let local = Server::start(Some(&format!(
        "[webhooks]\nsweep_secs = 1\n\n[[agents]]\nid = \"inbox\"\n\n[[peers]]\nid = \"bot\"\nurl = \"{}/a2a/bot\"\ndecision_format = \"text\"\n",
        peer.base
    )));
    let api = Api::new(&local);
    let (_, body) = api
        .call(
            reqwest::Method::POST,
            "/peers/bot/tasks",
            Some(json!({"text": "deploy v7"})),
        )
        .await;
    let id = body["task"]["id"].as_str().unwrap().to_owned();
    wait_for(&api, &id, "TASK_STATE_INPUT_REQUIRED").await;
    api.call(
        reqwest::Method::POST,
        &format!("/tasks/{id}/decision"),
        Some(json!({"kind": "approve", "text": "go"})),
    )
    .await;
    wait_for(&api, &id, "TASK_STATE_COMPLETED").await;
    let remote = peer
        .client()
        .rpc_ok("bot", "ListTasks", json!({"historyLength": 10}))
        .await;
    let decision = remote["tasks"][0]["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| {
            m["messageId"]
                .as_str()
                .is_some_and(|i| i.starts_with("decision-"))
        })
        .cloned()
        .unwrap();
    assert_eq!(decision["parts"], json!([{"text": "Approved. go"}]));
}

#[derive(Clone)]
struct ProxyState {
    upstream: Arc<OnceLock<String>>,
    /// GetTask calls get 503, as from a peer that is down for a moment.
    fail: Arc<AtomicBool>,
    /// Every call gets 503, as from a peer that is down.
    down: Arc<AtomicBool>,
    /// The peer's card says it sends no push notifications (and goes
    /// unsigned: the signature covered the claim it made).
    no_pushes: Arc<AtomicBool>,
    /// How long the answers to the next GetTask calls are held back, in
    /// milliseconds, one entry per call (the peer has answered; the answer
    /// is late, as from a busy peer or a slow network).
    delays: Arc<Mutex<VecDeque<u64>>>,
    /// How long the answers to the next SendMessage calls are held back,
    /// in milliseconds, one entry per call.
    send_delays: Arc<Mutex<VecDeque<u64>>>,
    /// How long the next SendMessage calls wait before they reach the
    /// peer, in milliseconds, one entry per call; each reaches it even if
    /// its sender hangs up meanwhile, as a message does whose peer's agent
    /// is slow to make its task.
    slow_starts: Arc<Mutex<VecDeque<u64>>>,
    /// SendMessage calls that reached the proxy.
    sends_in: Arc<AtomicUsize>,
    /// How many of the next SendMessage calls get 503 without reaching
    /// the peer.
    failed_sends: Arc<AtomicUsize>,
    /// Messages to the peer about one of its tasks (decisions, a relay's
    /// caller's answers) lose their `taskId`, so the peer answers each with
    /// a new task, as a peer that starts a task per message (FastA2A) does.
    new_task_per_reply: Arc<AtomicBool>,
    /// GetTask calls the peer answered (the proxy may still hold the answer).
    read: Arc<AtomicUsize>,
    /// Each SendMessage the peer answered, and its answer, as it came
    /// (before any hold).
    sent: Arc<Mutex<Vec<(Value, Value)>>>,
    /// GetTask answers the proxy passed on.
    answered: Arc<AtomicUsize>,
    /// ListTasks calls get JSON-RPC's "method not found", as from a peer
    /// that does not have the method.
    no_list: Arc<AtomicBool>,
    /// ListTasks calls that reached the proxy.
    listed: Arc<AtomicUsize>,
    http: reqwest::Client,
}

/// An HTTP proxy on 127.0.0.1 in front of a peer (`countersign serve`
/// advertising the proxy's address as its `public_url`), which fails or
/// delays the peer's GetTask answers on demand.
struct Proxy {
    base: String,
    state: ProxyState,
}

impl Proxy {
    async fn start() -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state = ProxyState {
            upstream: Arc::default(),
            fail: Arc::default(),
            down: Arc::default(),
            no_pushes: Arc::default(),
            delays: Arc::default(),
            send_delays: Arc::default(),
            slow_starts: Arc::default(),
            sends_in: Arc::default(),
            failed_sends: Arc::default(),
            new_task_per_reply: Arc::default(),
            read: Arc::default(),
            sent: Arc::default(),
            answered: Arc::default(),
            no_list: Arc::default(),
            listed: Arc::default(),
            http: reqwest::Client::new(),
        };
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(state.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Proxy { base, state }
    }

    /// The peer, `Server::start`ed with [`Proxy::peer_config`].
    fn peer_config(&self) -> String {
        format!("public_url = \"{}\"\n{PEER}", self.base)
    }

    /// [`Proxy::peer_config`] for a peer that pushes to us (on 127.0.0.1).
    fn pushing_peer_config(&self) -> String {
        format!(
            "public_url = \"{}\"\n[outbound]\nallow = [\"127.0.0.1\"]\n{PEER}",
            self.base
        )
    }

    fn to(&self, peer: &Server) {
        self.state.upstream.set(peer.base.clone()).unwrap();
    }

    fn fail_reads(&self, fail: bool) {
        self.state.fail.store(fail, Ordering::SeqCst);
    }

    fn hide_pushes(&self) {
        self.state.no_pushes.store(true, Ordering::SeqCst);
    }

    fn refuse_lists(&self) {
        self.state.no_list.store(true, Ordering::SeqCst);
    }

    fn listed(&self) -> usize {
        self.state.listed.load(Ordering::SeqCst)
    }

    fn go_down(&self, down: bool) {
        self.state.down.store(down, Ordering::SeqCst);
    }

    fn delay_reads(&self, ms: &[u64]) {
        self.state.delays.lock().unwrap().extend(ms);
    }

    fn delay_sends(&self, ms: &[u64]) {
        self.state.send_delays.lock().unwrap().extend(ms);
    }

    fn slow_starts(&self, ms: &[u64]) {
        self.state.slow_starts.lock().unwrap().extend(ms);
    }

    fn sends_in(&self) -> usize {
        self.state.sends_in.load(Ordering::SeqCst)
    }

    fn fail_sends(&self, n: usize) {
        self.state.failed_sends.store(n, Ordering::SeqCst);
    }

    fn new_task_per_reply(&self) {
        self.state.new_task_per_reply.store(true, Ordering::SeqCst);
    }

    fn read(&self) -> usize {
        self.state.read.load(Ordering::SeqCst)
    }

    fn answered(&self) -> usize {
        self.state.answered.load(Ordering::SeqCst)
    }

    fn sent(&self) -> Vec<(Value, Value)> {
        self.state.sent.lock().unwrap().clone()
    }
}

/// How the peer behind a [`Proxy`] treats our webhook.
#[derive(Clone, Copy, PartialEq)]
enum Pushes {
    /// Its card offers pushes, but it refuses our loopback webhook (its
    /// outbound policy), so each task is sent again without it.
    Refused,
    /// It pushes to us (it may reach 127.0.0.1).
    Sent,
    /// Its card, as the proxy passes it on, offers none.
    NotOffered,
}

/// A proxy with the peer (`countersign serve` with [`PEER`]'s agents)
/// behind it.
async fn proxied_peer(pushes: Pushes) -> (Proxy, Server) {
    let proxy = Proxy::start().await;
    if pushes == Pushes::NotOffered {
        proxy.hide_pushes();
    }
    let config = match pushes {
        Pushes::Sent => proxy.pushing_peer_config(),
        Pushes::Refused | Pushes::NotOffered => proxy.peer_config(),
    };
    let peer = Server::start(Some(&config));
    proxy.to(&peer);
    (proxy, peer)
}

/// [`proxied_peer`], whose ListTasks calls are refused unless `lists`.
async fn proxied_peer_listing(pushes: Pushes, lists: bool) -> (Proxy, Server) {
    let (proxy, peer) = proxied_peer(pushes).await;
    if !lists {
        proxy.refuse_lists();
    }
    (proxy, peer)
}

async fn forward(
    axum::extract::State(s): axum::extract::State<ProxyState>,
    req: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 16 << 20).await.unwrap();
    let text = String::from_utf8_lossy(&body);
    let is_send = text.contains("\"SendMessage\"");
    let is_read = text.contains("\"GetTask\"")
        || text.contains("\"tasks/get\"")
        || (parts.method == reqwest::Method::GET && parts.uri.path().contains("/tasks/"));
    if s.down.load(Ordering::SeqCst) || (is_read && s.fail.load(Ordering::SeqCst)) {
        return (StatusCode::SERVICE_UNAVAILABLE, "down for maintenance").into_response();
    }
    if text.contains("\"ListTasks\"") {
        s.listed.fetch_add(1, Ordering::SeqCst);
        if s.no_list.load(Ordering::SeqCst) {
            let rpc: Value = serde_json::from_slice(&body).unwrap();
            let refused = json!({"jsonrpc": "2.0", "id": rpc["id"],
                "error": {"code": -32601, "message": "Method not found"}});
            return axum::Json(refused).into_response();
        }
    }
    if is_send {
        s.sends_in.fetch_add(1, Ordering::SeqCst);
        let failed = s
            .failed_sends
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if failed.is_ok() {
            return (StatusCode::SERVICE_UNAVAILABLE, "busy").into_response();
        }
        let slow = s.slow_starts.lock().unwrap().pop_front().unwrap_or(0);
        if slow > 0 {
            // On a task of its own, which our side hanging up does not end.
            let on = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(slow)).await;
                pass_on(s, parts, body, is_send, is_read).await
            });
            return on.await.unwrap();
        }
    }
    pass_on(s, parts, body, is_send, is_read).await
}

/// [`forward`]'s passing of a call on to the peer, and of its answer back.
async fn pass_on(
    s: ProxyState,
    parts: axum::http::request::Parts,
    body: axum::body::Bytes,
    is_send: bool,
    is_read: bool,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let body = if is_send && s.new_task_per_reply.load(Ordering::SeqCst) {
        let mut rpc: Value = serde_json::from_slice(&body).unwrap();
        rpc["params"]["message"]
            .as_object_mut()
            .unwrap()
            .remove("taskId");
        axum::body::Bytes::from(serde_json::to_vec(&rpc).unwrap())
    } else {
        body
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let answer = send_on(&s.http, s.upstream.get().unwrap(), &parts, body.clone())
        .await
        .unwrap();
    let status = answer.status();
    let headers = answer.headers().clone();
    let mut bytes = answer.bytes().await.unwrap();
    if path.ends_with("agent-card.json") && s.no_pushes.load(Ordering::SeqCst) {
        let mut card: Value = serde_json::from_slice(&bytes).unwrap();
        card["capabilities"]["pushNotifications"] = json!(false);
        card.as_object_mut().unwrap().remove("signatures");
        bytes = axum::body::Bytes::from(serde_json::to_vec(&card).unwrap());
    }
    if is_send {
        let request = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let answer = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        s.sent.lock().unwrap().push((request, answer));
        let delay = s.send_delays.lock().unwrap().pop_front().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    if is_read {
        s.read.fetch_add(1, Ordering::SeqCst);
        let delay = s.delays.lock().unwrap().pop_front().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        s.answered.fetch_add(1, Ordering::SeqCst);
    }
    let mut resp = (status, bytes).into_response();
    if let Some(ct) = headers.get(reqwest::header::CONTENT_TYPE) {
        resp.headers_mut()
            .insert(reqwest::header::CONTENT_TYPE, ct.clone());
    }
    resp
}

/// Us, watching the peer behind `proxy`, with `extra` TOML in `[webhooks]`.
fn config_behind(proxy: &Proxy, extra: &str) -> String {
    format!(
        "[webhooks]\nsweep_secs = 0\n{extra}\n\n[dispatch]\nmax_backoff_secs = 1\n\n[[agents]]\nid = \"inbox\"\n\n[[peers]]\nid = \"bot\"\nurl = \"{}/a2a/bot\"\n",
        proxy.base
    )
}

/// Us, serving one agent (`agent`: the keys of its `[[agents]]` entry) and
/// watching the peer behind `proxy` as `bot`, sweeping every `sweep_secs`
/// (0: never).
fn watching_behind(proxy: &Proxy, sweep_secs: u64, agent: &str) -> String {
    format!(
        "[webhooks]\nsweep_secs = {sweep_secs}\n\n[[agents]]\n{agent}\n\n[[peers]]\nid = \"bot\"\nurl = \"{}/a2a/bot\"\n",
        proxy.base
    )
}

/// A relay in front of `bot`.
const RELAY: &str = "id = \"gate\"\nbackend = \"relay\"\nupstream = \"bot\"";

async fn push(url: &str, token: &str, remote_id: &str) -> (StatusCode, Value) {
    let r = reqwest::Client::new()
        .post(url)
        .header("A2A-Notification-Token", token)
        .json(&json!({"statusUpdate": {"taskId": remote_id, "contextId": "c", "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}}))
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The outbox's items of one `kind`, newest first.
async fn outbox_items(api: &Api, kind: &str) -> Vec<Value> {
    let (status, o) = api.call(reqwest::Method::GET, "/outbox", None).await;
    assert_eq!(status, StatusCode::OK, "{o}");
    o["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == kind)
        .cloned()
        .collect()
}

/// Our detail of task `id` (`GET /api/tasks/{id}`).
async fn detail(api: &Api, id: &str) -> Value {
    let (status, d) = api
        .call(reqwest::Method::GET, &format!("/tasks/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{d}");
    d
}

/// The queue's first page (`GET /api/queue`).
async fn queue(api: &Api) -> Value {
    let (status, q) = api.call(reqwest::Method::GET, "/queue", None).await;
    assert_eq!(status, StatusCode::OK, "{q}");
    q
}

/// The queue's first page once it holds "deploy the docs", alone, which
/// must be within `secs` of `since`.
async fn the_docs_parked_within(api: &Api, since: std::time::Instant, secs: u64) -> Value {
    let q = wait_for_queue(api, 1).await;
    assert_eq!(q["items"][0]["preview"], "deploy the docs", "{q}");
    let took = since.elapsed();
    assert!(took < Duration::from_secs(secs), "parked after {took:?}");
    q
}

/// Waits (at most 15 s) for the queue to hold `n` tasks.
async fn wait_for_queue(api: &Api, n: u64) -> Value {
    for _ in 0..300 {
        let q = queue(api).await;
        if q["total"] == n {
            return q;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the queue never held {n} tasks");
}

#[tokio::test]
async fn a_push_whose_peer_fails_the_re_read_is_kept_and_re_read_after_a_crash() {
    let (proxy, peer) = proxied_peer(Pushes::Refused).await;
    let dir = tempfile::tempdir().unwrap();
    let config = config_behind(&proxy, "");
    let mut local = Server::start_in(dir.path(), Some(&config), &[]);
    let api = Api::new(&local);
    let (remote_id, url, token) = started_elsewhere(&peer, &api, "deploy the docs").await;
    proxy.fail_reads(true);
    let (status, body) = push(&url, &token, &remote_id).await;
    // Received, and owed: the re-read waits in the durable outbox.
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["ok"], true);
    assert!(
        body["reason"].as_str().unwrap().contains("503"),
        "the sender is told why: {body}"
    );
    let items = outbox_items(&api, "reread").await;
    assert_eq!(items.len(), 1, "{items:?}");
    let item = &items[0];
    assert_eq!(item["id"], body["queued"]);
    assert_eq!(item["status"], "pending");
    assert_eq!(item["peerId"], "bot");
    assert_eq!(item["refId"], remote_id.as_str());
    assert!(item["attempts"].as_i64().unwrap() >= 1, "{item}");
    assert!(
        item["lastError"].as_str().unwrap().contains("503"),
        "{item}"
    );
    let q = queue(&api).await;
    assert_eq!(q["total"], 0, "nothing parked before the peer says so");
    // The process dies; the peer comes back; the restarted server re-reads.
    local.kill9();
    proxy.fail_reads(false);
    let local = Server::start_in(dir.path(), Some(&config), &[]);
    let api = Api::new(&local);
    let q = wait_for_queue(&api, 1).await;
    assert_eq!(q["items"][0]["preview"], "deploy the docs");
    let items = outbox_items(&api, "reread").await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["status"], "delivered", "{items:?}");
    // Delivered, it refers to our task, and goes when that is archived.
    assert_eq!(items[0]["refId"], q["items"][0]["taskId"], "{items:?}");
    // A push now is re-read at once, and parks nothing twice.
    let url = url.replace(&url[..url.find("/webhooks/").unwrap()], &local.base);
    let (status, body) = push(&url, &token, &remote_id).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let q = queue(&api).await;
    assert_eq!(q["total"], 1, "{q}");
}

#[tokio::test]
async fn a_push_is_answered_without_waiting_out_a_slow_peer() {
    let (proxy, peer) = proxied_peer(Pushes::Refused).await;
    let local = Server::start(Some(&config_behind(&proxy, "reread_wait_ms = 200")));
    let api = Api::new(&local);
    let (remote_id, url, token) = started_elsewhere(&peer, &api, "deploy the site").await;
    // A peer whose answer to GetTask comes 2 s late (a busy one, or one
    // that cannot serve while its own push is in flight).
    proxy.delay_reads(&[2000]);
    let (status, body) = push(&url, &token, &remote_id).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(
        proxy.answered(),
        0,
        "answered before the peer answered the re-read"
    );
    assert!(
        body["reason"].as_str().unwrap().contains("within 200 ms"),
        "{body}"
    );
    // The outbox's re-read waits for the peer, and parks the task.
    let q = wait_for_queue(&api, 1).await;
    assert_eq!(q["items"][0]["preview"], "deploy the site");
    assert!(proxy.answered() >= 1);
    let items = outbox_items(&api, "reread").await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["status"], "delivered", "{items:?}");
}

#[tokio::test]
async fn with_no_wait_every_push_is_acknowledged_first_and_re_read_after() {
    let (proxy, peer) = proxied_peer(Pushes::Refused).await;
    let local = Server::start(Some(&config_behind(&proxy, "reread_wait_ms = 0")));
    let api = Api::new(&local);
    let (remote_id, url, token) = started_elsewhere(&peer, &api, "deploy the app").await;
    let reads_before = proxy.answered();
    let (status, body) = push(&url, &token, &remote_id).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["reason"], "re-read after the answer");
    let q = wait_for_queue(&api, 1).await;
    assert_eq!(q["items"][0]["preview"], "deploy the app");
    assert_eq!(proxy.answered(), reads_before + 1, "one push, one re-read");
    let items = outbox_items(&api, "reread").await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["status"], "delivered");
    assert_eq!(items[0]["attempts"], 1, "{items:?}");
}

#[tokio::test]
async fn a_late_answer_to_an_earlier_re_read_never_turns_the_mirror_back() {
    let (proxy, peer) = proxied_peer(Pushes::Refused).await;
    let local = Server::start(Some(&config_behind(&proxy, "reread_wait_ms = 1000")));
    let api = Api::new(&local);
    let (remote_id, url, token) = started_elsewhere(&peer, &api, "deploy the docs").await;
    let (status, body) = push(&url, &token, &remote_id).await;
    assert!(status.is_success(), "{body}");
    let q = wait_for_queue(&api, 1).await;
    let id = q["items"][0]["taskId"].as_str().unwrap().to_owned();
    // A push whose re-read the peer answers (input-required) but whose
    // answer arrives 3 s late; the push is answered 202 after 1 s and the
    // outbox reads again, with its answer 3 s late as well.
    proxy.delay_reads(&[3000, 3000]);
    let read_before = proxy.read();
    let (status, body) = push(&url, &token, &remote_id).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    for _ in 0..400 {
        if proxy.read() >= read_before + 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        proxy.read() >= read_before + 2,
        "the outbox's re-read reached the peer"
    );
    // While that answer is on its way, the question is answered on the peer
    // (by another tool), and the peer pushes again.
    let q = queue(&api).await;
    assert_eq!(q["total"], 1, "{q}");
    let answered = peer
        .client()
        .rpc_ok(
            "bot",
            "SendMessage",
            json!({"message": {"messageId": "other-tool-2", "role": "ROLE_USER", "taskId": remote_id,
                               "parts": [{"text": "staging"}]},
                   "configuration": {"returnImmediately": true}}),
        )
        .await;
    assert!(answered.get("task").is_some(), "{answered}");
    for _ in 0..200 {
        let theirs = peer
            .client()
            .rpc_ok("bot", "GetTask", json!({"id": remote_id}))
            .await;
        if theirs["status"]["state"] == "TASK_STATE_WORKING" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    push(&url, &token, &remote_id).await;
    // Every re-read done: the late answers are in, and so is the last read.
    wait_for(&api, &id, "TASK_STATE_WORKING").await;
    for _ in 0..400 {
        let items = outbox_items(&api, "reread").await;
        if !items.is_empty() && items.iter().all(|i| i["status"] == "delivered") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let items = outbox_items(&api, "reread").await;
    assert!(
        items.iter().all(|i| i["status"] == "delivered"),
        "{items:?}"
    );
    let d = detail(&api, &id).await;
    assert_eq!(
        d["task"]["status"]["state"], "TASK_STATE_WORKING",
        "the late input-required answer turned the mirror back: {d}"
    );
    let q = queue(&api).await;
    assert_eq!(
        q["total"], 0,
        "the answered question is not parked again: {q}"
    );
}

#[tokio::test]
async fn a_push_that_overtakes_the_answer_starting_its_task_is_not_turned_back() {
    let (proxy, _peer) = proxied_peer(Pushes::Sent).await;
    let local = Server::start(Some(&config_behind(&proxy, "")));
    let api = Api::new(&local);
    // The peer answers the start at once (working) and asks its question
    // 200 ms later. Its pushes reach us directly; its answer to the start
    // is held 1.5 s on the way, so both pushes come before it.
    proxy.delay_sends(&[1500]);
    let (id, _) = start_task(&api, "quick deploy").await;
    let d = wait_for(&api, &id, "TASK_STATE_INPUT_REQUIRED").await;
    assert_eq!(
        d["task"]["status"]["message"]["parts"][0]["text"],
        "Which environment?"
    );
    // Nothing later turns it back: no sweep, no other push.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let d = detail(&api, &id).await;
    assert_eq!(
        d["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{d}"
    );
    let q = queue(&api).await;
    assert_eq!(q["total"], 1, "{q}");
    assert_eq!(q["items"][0]["taskId"], id.as_str(), "{q}");
}

/// Sends "deploy the docs" to `bot` through `local`'s UI API with the
/// peer's answer held on the way back, and waits until the peer has it:
/// the SendMessage the peer answered, its answer, and the send (still
/// waiting for that answer).
async fn send_held(
    proxy: &Proxy,
    local: &Server,
) -> (Value, Value, tokio::task::JoinHandle<(StatusCode, Value)>) {
    proxy.delay_sends(&[30_000]);
    let sending = send_deploy_the_docs(local);
    let (request, answer) = loop {
        if let Some(sent) = proxy.sent().pop() {
            break sent;
        }
        assert!(!sending.is_finished(), "answered before the peer had it");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    (request, answer, sending)
}

/// Sends "deploy the docs" to the peer `bot` through `local`'s UI API, in
/// the background.
fn send_deploy_the_docs(local: &Server) -> tokio::task::JoinHandle<(StatusCode, Value)> {
    let api = Api::new(local);
    tokio::spawn(async move {
        api.call(
            reqwest::Method::POST,
            "/peers/bot/tasks",
            Some(json!({ "text": "deploy the docs" })),
        )
        .await
    })
}

/// Us on `dir` (`store`'s) with `config`; with the checkpoint's syncs
/// stalled when the test will `cut` the `power` (so nothing else puts our
/// commits on the disk).
fn start_cuttable(
    dir: &std::path::Path,
    store: &powercut::Store,
    config: &str,
    power: bool,
) -> Server {
    if power {
        let mut cmd = store.command();
        cmd.env("POWERCUT_STALL", "store-checkpoint");
        Server::start_cmd_in(cmd, dir, Some(config))
    } else {
        Server::start_in(dir, Some(config), &[])
    }
}

/// The one `start` item of a send, delivered and referring to our task
/// `id`, the task it started.
async fn the_start_delivered(api: &Api, id: &str) -> Value {
    let items = outbox_items(api, "start").await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["status"], "delivered", "{items:?}");
    assert_eq!(
        items[0]["refId"], id,
        "refers to the task it started: {items:?}"
    );
    items[0].clone()
}

/// The push the peer would send about the task it answered `request` with
/// (`answer`), to the webhook `request` carried, sent to `local` (started
/// again, on a new port).
async fn push_again(request: &Value, answer: &Value, local: &Server) -> (StatusCode, Value) {
    let webhook = &request["params"]["configuration"]["taskPushNotificationConfig"];
    let url = webhook["url"].as_str().unwrap();
    let url = url.replace(&url[..url.find("/webhooks/").unwrap()], &local.base);
    let remote_id = answer["result"]["task"]["id"].as_str().unwrap();
    push(&url, webhook["token"].as_str().unwrap(), remote_id).await
}

/// A task sent to a peer is the peer's the moment the peer has it. If the
/// power goes before the peer's answer reaches us (the checkpoint's syncs
/// stalled, so nothing else puts our commits on the disk), the push
/// subscription the task carried is still on our disk, and the peer's
/// next push about the task brings it here. The send itself was kept on
/// the disk too, but it waits for that push before it goes out again, and
/// the push settles it: the peer is not sent a second copy.
///
/// A peer that lists its tasks need not push: right after the restart it
/// is asked (ListTasks) for the task that holds the message, which settles
/// the send as the push would, long before `resend_wait_secs`.
#[tokio::test]
async fn a_task_sent_to_a_peer_is_found_by_its_pushes_or_its_task_list_after_a_power_cut_mid_send()
{
    for lists in [false, true] {
        let (proxy, _peer) = proxied_peer_listing(Pushes::Sent, lists).await;
        let dir = tempfile::tempdir().unwrap();
        let store = powercut::Store::in_dir(dir.path());
        let mut cmd = store.command();
        cmd.env("POWERCUT_STALL", "store-checkpoint");
        let config = config_behind(&proxy, "");
        let mut local = Server::start_cmd_in(cmd, dir.path(), Some(&config));
        // The peer's answer is held on the way back until the power is gone.
        let (request, answer, sending) = send_held(&proxy, &local).await;
        local.kill9();
        let (undone, _) = store.cut(Cut::Unsynced);
        eprintln!("undid {undone} writes");
        sending.abort();

        let local = Server::start_in(dir.path(), Some(&config), &[]);
        let api = Api::new(&local);
        if !lists {
            let (status, body) = push_again(&request, &answer, &local).await;
            assert_eq!(
                status,
                StatusCode::OK,
                "the peer's push after the cut: {body}"
            );
        }
        let q = wait_for_queue(&api, 1).await;
        assert_eq!(q["items"][0]["preview"], "deploy the docs", "{q}");
        let items = outbox_items(&api, "start").await;
        assert_eq!(items.len(), 1, "{items:?}");
        assert_eq!(
            items[0]["status"], "delivered",
            "settled by the push or the list: {items:?}"
        );
        assert_eq!(items[0]["refId"], q["items"][0]["taskId"], "{items:?}");
        assert_eq!(tasks_started(&proxy).len(), 1, "sent once");
        assert!(proxy.listed() >= 1, "the peer was not asked");
    }
}

/// The SendMessage calls the peer answered with a task: (the message's
/// id, the task's context id there).
fn tasks_started(proxy: &Proxy) -> Vec<(String, String)> {
    proxy
        .sent()
        .iter()
        .filter_map(|(request, answer)| {
            let context = answer["result"]["task"]["contextId"].as_str()?;
            let message = request["params"]["message"]["messageId"].as_str()?;
            Some((message.to_owned(), context.to_owned()))
        })
        .collect()
}

/// Starts us again on `dir` and waits for "deploy the docs", sent as
/// `message_id` before the stop, to be parked here. A peer that `lists`
/// its tasks was asked for the task that holds the message and not sent
/// it again; one that cannot was sent it a second time, as the same
/// message. The server, its API, the queue, and the tasks the peer
/// started (message id, context id).
async fn started_again(
    dir: &std::path::Path,
    config: &str,
    proxy: &Proxy,
    message_id: &str,
    lists: bool,
) -> (Server, Api, Value, Vec<(String, String)>) {
    let local = Server::start_in(dir, Some(config), &[]);
    let api = Api::new(&local);
    let q = wait_for_queue(&api, 1).await;
    assert_eq!(q["items"][0]["preview"], "deploy the docs", "{q}");
    let started = tasks_started(proxy);
    assert!(proxy.listed() >= 1, "the peer was not asked");
    if lists {
        assert_eq!(started.len(), 1, "sent again: {started:?}");
    } else {
        assert_eq!(started.len(), 2, "{started:?}");
        assert_eq!(started[1].0, message_id, "sent again as the same message");
    }
    (local, api, q, started)
}

/// A task sent to a peer that sends no pushes, and Countersign killed, or
/// its power cut (the checkpoint's syncs stalled, so nothing else puts our
/// commits on the disk), after the peer took the task but before its
/// answer arrived: nothing on the peer's side would ever bring the task
/// here. The send was kept on the disk, so after the restart the peer is
/// asked (ListTasks) for a task that holds the message, and that task is
/// mirrored and parked: the peer does not get the message twice. A peer
/// that cannot list its tasks is sent the message again, with the same
/// id, and the task it answers with is mirrored and parked.
#[tokio::test]
async fn a_task_sent_to_a_peer_without_pushes_is_found_or_sent_again_after_a_crash_mid_send() {
    for (power_cut, lists) in [(false, true), (true, true), (true, false)] {
        let (proxy, _peer) = proxied_peer_listing(Pushes::NotOffered, lists).await;
        let dir = tempfile::tempdir().unwrap();
        let config = config_behind(&proxy, "");
        let store = powercut::Store::in_dir(dir.path());
        let mut local = start_cuttable(dir.path(), &store, &config, power_cut);
        let (request, answer, sending) = send_held(&proxy, &local).await;
        assert!(
            request["params"]["configuration"]["taskPushNotificationConfig"].is_null(),
            "sent with a webhook: {request}"
        );
        let message_id = request["params"]["message"]["messageId"].as_str().unwrap();
        let first = answer["result"]["task"]["contextId"].as_str().unwrap();
        assert_eq!(proxy.listed(), 0, "a first send asks nothing");
        local.kill9();
        if power_cut {
            let (undone, _) = store.cut(Cut::Unsynced);
            eprintln!("undid {undone} writes");
        }
        sending.abort();

        let (_local, api, q, started) =
            started_again(dir.path(), &config, &proxy, message_id, lists).await;
        let id = q["items"][0]["taskId"].as_str().unwrap();
        let d = detail(&api, id).await;
        if lists {
            // The peer's one task, from the first send.
            assert_eq!(d["task"]["contextId"], first, "{d}");
        } else {
            // The peer started a second task for it (it does not drop
            // repeated messages); that one is mirrored here.
            let again = &started[1].1;
            assert_ne!(again, first);
            assert_eq!(d["task"]["contextId"], again.as_str(), "{d}");
        }
        the_start_delivered(&api, id).await;
        let q = queue(&api).await;
        assert_eq!(q["items"].as_array().unwrap().len(), 1, "{q}");
    }
}

/// A task sent to a peer whose agent is slow to make it (the message
/// reaches the peer's task list seconds after it went), and Countersign
/// killed, or its power cut, meanwhile. After the restart the peer lists
/// no task holding the message yet, but the call the stop cut off would
/// not have timed out: the message is not sent again. The peer is asked
/// again until its task shows, which is mirrored and parked; the peer
/// got the message once.
#[tokio::test]
async fn a_send_cut_off_while_the_peer_is_still_taking_it_is_not_sent_twice() {
    for power_cut in [false, true] {
        let (proxy, _peer) = proxied_peer_listing(Pushes::NotOffered, true).await;
        let dir = tempfile::tempdir().unwrap();
        let config = config_behind(&proxy, "");
        let store = powercut::Store::in_dir(dir.path());
        let mut local = start_cuttable(dir.path(), &store, &config, power_cut);
        proxy.slow_starts(&[4_000]);
        let sending = send_deploy_the_docs(&local);
        while proxy.sends_in() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        local.kill9();
        if power_cut {
            let (undone, _) = store.cut(Cut::Unsynced);
            eprintln!("undid {undone} writes");
        }
        sending.abort();

        let restarted = std::time::Instant::now();
        let local = Server::start_in(dir.path(), Some(&config), &[]);
        let api = Api::new(&local);
        // Found as it showed, not after the call's timeout (16 s).
        let q = the_docs_parked_within(&api, restarted, 12).await;
        let started = tasks_started(&proxy);
        assert_eq!(started.len(), 1, "sent again: {started:?}");
        assert_eq!(proxy.sends_in(), 1, "sent again");
        assert!(proxy.listed() >= 2, "asked {} time(s)", proxy.listed());
        let id = q["items"][0]["taskId"].as_str().unwrap();
        let d = detail(&api, id).await;
        assert_eq!(d["task"]["contextId"], started[0].1.as_str(), "{d}");
        let item = the_start_delivered(&api, id).await;
        assert!(item["sentMs"].as_i64().is_some(), "{item}");
        // The waits while the peer was taking it were no attempts.
        assert_eq!(item["attempts"], 1, "{item}");
    }
}

/// A task sent to a peer that takes it but answers too late (after the
/// call's 15 s): the person is told (504) that the peer may have the
/// message and that it is kept. The outbox then asks the peer, finds the
/// task that holds the message, and parks it here: the peer got the
/// message once, and nothing is lost.
#[tokio::test]
async fn a_send_the_peer_answers_too_late_is_kept_and_its_task_found() {
    let (proxy, _peer) = proxied_peer_listing(Pushes::NotOffered, true).await;
    let dir = tempfile::tempdir().unwrap();
    let local = Server::start_in(dir.path(), Some(&config_behind(&proxy, "")), &[]);
    let api = Api::new(&local);
    proxy.delay_sends(&[20_000]);
    let (status, body) = send_deploy_the_docs(&local).await.unwrap();
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    let said = body["error"]["message"].as_str().unwrap();
    assert!(said.contains("did not answer in time"), "{said}");
    assert!(said.contains("so it is kept (delivery start:"), "{said}");
    let told = std::time::Instant::now();
    let q = the_docs_parked_within(&api, told, 10).await;
    assert_eq!(proxy.sends_in(), 1, "sent again");
    let started = tasks_started(&proxy);
    let id = q["items"][0]["taskId"].as_str().unwrap();
    let d = detail(&api, id).await;
    assert_eq!(d["task"]["contextId"], started[0].1.as_str(), "{d}");
    let item = the_start_delivered(&api, id).await;
    assert_eq!(item["attempts"], 1, "{item}");
}

/// Us, with a scripted agent `auto` whose every task completes at once
/// and is chained on to `bot`, behind `proxy`, as "deploy <its text>".
fn chaining_behind(proxy: &Proxy) -> String {
    format!(
        r#"[webhooks]
sweep_secs = 0

[dispatch]
max_backoff_secs = 1

[[agents]]
id = "auto"
backend = "scripted"
fallback = [{{ complete = "done" }}]

[[peers]]
id = "bot"
url = "{}/a2a/bot"

[[chains]]
id = "on"
trigger = {{ agent = "auto" }}
action = {{ kind = "send", peer = "bot", template = "deploy {{{{request.text}}}}" }}
"#,
        proxy.base
    )
}

/// A chain hop whose message the peer answers with an error (HTTP 503)
/// is tried again after its backoff (1 s here), not held back as one the
/// peer may still be taking (until the call would have timed out, 16 s):
/// the peer answered, so it is taking nothing.
#[tokio::test]
async fn a_hop_the_peer_answered_with_an_error_is_tried_again_without_waiting_out_the_call() {
    let (proxy, _peer) = proxied_peer_listing(Pushes::NotOffered, true).await;
    let dir = tempfile::tempdir().unwrap();
    let local = Server::start_in(dir.path(), Some(&chaining_behind(&proxy)), &[]);
    let api = Api::new(&local);
    proxy.fail_sends(1);
    let began = std::time::Instant::now();
    local.client().send_text("auto", "m-1", "the docs").await;
    the_docs_parked_within(&api, began, 10).await;
    assert_eq!(proxy.sends_in(), 2, "refused once, then sent");
    assert_eq!(tasks_started(&proxy).len(), 1);
    // Asked first, as a hop tried before.
    assert!(proxy.listed() >= 1);
    // Recorded as the attempt ends, just after its task is parked.
    let mut hop = hop_item(&api).await;
    for _ in 0..100 {
        if hop["status"] == "delivered" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        hop = hop_item(&api).await;
    }
    assert_eq!(hop["status"], "delivered", "{hop}");
    assert_eq!(hop["attempts"], 2, "{hop}");
    assert!(hop["sentMs"].as_i64().is_some(), "{hop}");
}

/// The outbox item of the one chain hop.
async fn hop_item(api: &Api) -> Value {
    outbox_items(api, "chain").await.remove(0)
}

/// A chain hop to a peer that pushes, and Countersign killed after the
/// peer took the hop's task but before its answer arrived. After the
/// restart the hop waits for the peer's push about the task (replayed
/// here), which brings the task, links it to the hop and settles the hop:
/// the peer is not sent it twice. A peer that lists its tasks is asked
/// for it at once instead, with the same outcome and no push.
#[tokio::test]
async fn a_chain_hop_cut_short_is_settled_by_the_peers_push_or_task_list() {
    for lists in [false, true] {
        let (proxy, _peer) = proxied_peer_listing(Pushes::Sent, lists).await;
        let dir = tempfile::tempdir().unwrap();
        let config = chaining_behind(&proxy);
        let mut local = Server::start_in(dir.path(), Some(&config), &[]);
        proxy.delay_sends(&[30_000]);
        let done = local.client().send_text("auto", "m-1", "the docs").await;
        let task_id = done["task"]["id"].as_str().unwrap().to_owned();
        let (request, answer) = loop {
            if let Some(sent) = proxy.sent().pop() {
                break sent;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        local.kill9();

        let local = Server::start_in(dir.path(), Some(&config), &[]);
        let api = Api::new(&local);
        if !lists {
            // The hop waits for the push (`resend_wait_secs`, 30 s by default).
            let hop_item = hop_item(&api).await;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64;
            assert_eq!(hop_item["status"], "pending", "{hop_item}");
            assert!(
                hop_item["nextMs"].as_i64().unwrap() > now + 20_000,
                "not held for the push: {hop_item}"
            );
            let (status, body) = push_again(&request, &answer, &local).await;
            assert_eq!(status, StatusCode::OK, "{body}");
        }
        let q = wait_for_queue(&api, 1).await;
        assert_eq!(q["items"][0]["preview"], "deploy the docs", "{q}");
        let d = detail(&api, &task_id).await;
        let hops = d["chain"]["children"].as_array().unwrap();
        assert_eq!(hops.len(), 1, "{d}");
        assert_eq!(hops[0]["taskId"], q["items"][0]["taskId"], "{d}");
        assert_eq!(hops[0]["state"], "delivered", "{d}");
        let child = detail(&api, q["items"][0]["taskId"].as_str().unwrap()).await;
        assert_eq!(
            child["chain"]["parent"]["taskId"],
            task_id.as_str(),
            "{child}"
        );
        assert_eq!(tasks_started(&proxy).len(), 1, "sent once");
    }
}

/// A chain hop that sends a task to a peer with no pushes, and the power
/// cut (the checkpoint's syncs stalled) after the peer took it but before
/// its answer arrived. The task that fired the hop, and the hop, were
/// synced before it went: after the restart both are here, and the peer is
/// asked for the task that holds the hop's message, which is linked to the
/// hop; a peer that cannot list its tasks is sent the hop again, with the
/// same message id.
#[tokio::test]
async fn a_chain_hop_cut_off_by_a_power_cut_is_found_or_sent_again_and_its_task_kept() {
    for lists in [true, false] {
        let (proxy, _peer) = proxied_peer_listing(Pushes::NotOffered, lists).await;
        let dir = tempfile::tempdir().unwrap();
        let config = chaining_behind(&proxy);
        let store = powercut::Store::in_dir(dir.path());
        let mut cmd = store.command();
        cmd.env("POWERCUT_STALL", "store-checkpoint");
        let mut local = Server::start_cmd_in(cmd, dir.path(), Some(&config));
        proxy.delay_sends(&[30_000]);
        let done = local.client().send_text("auto", "m-1", "the docs").await;
        let task_id = done["task"]["id"].as_str().unwrap().to_owned();
        assert_eq!(
            done["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{done}"
        );
        let (message_id, first) = loop {
            if let Some(started) = tasks_started(&proxy).pop() {
                break started;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        assert_eq!(proxy.listed(), 0, "a first send asks nothing");
        local.kill9();
        let (undone, _) = store.cut(Cut::Unsynced);
        eprintln!("undid {undone} writes");

        let (_local, api, q, _) =
            started_again(dir.path(), &config, &proxy, &message_id, lists).await;
        // The hop is recorded delivered as its attempt ends, just after
        // its task is parked.
        let mut d = detail(&api, &task_id).await;
        for _ in 0..100 {
            if d["chain"]["children"][0]["state"] == "delivered" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            d = detail(&api, &task_id).await;
        }
        assert_eq!(d["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{d}");
        let hops = d["chain"]["children"].as_array().unwrap();
        assert_eq!(hops.len(), 1, "{d}");
        assert_eq!(hops[0]["taskId"], q["items"][0]["taskId"], "{d}");
        assert_eq!(hops[0]["state"], "delivered", "{d}");
        let child = detail(&api, q["items"][0]["taskId"].as_str().unwrap()).await;
        if lists {
            assert_eq!(child["task"]["contextId"], first.as_str(), "{child}");
        }
        assert_eq!(
            child["chain"]["parent"]["taskId"],
            task_id.as_str(),
            "{child}"
        );
    }
}

/// A caller that goes away mid-send (its connection closed, as when a
/// CLI is stopped with Ctrl-C) does not stop the send: the peer's task is
/// mirrored and parked here, and nothing is left owed to go out again.
#[tokio::test]
async fn a_send_goes_on_when_its_caller_goes_away() {
    let (proxy, _peer) = proxied_peer(Pushes::NotOffered).await;
    let local = Server::start(Some(&config_behind(&proxy, "")));
    proxy.delay_sends(&[1_000]);
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let gave_up = impatient
        .post(local.url("/api/peers/bot/tasks"))
        .bearer_auth(local.ui_token())
        .json(&json!({ "text": "deploy the docs" }))
        .send()
        .await;
    assert!(
        gave_up.is_err(),
        "answered before the peer did: {gave_up:?}"
    );
    let api = Api::new(&local);
    let q = wait_for_queue(&api, 1).await;
    assert_eq!(q["items"][0]["preview"], "deploy the docs", "{q}");
    let items = outbox_items(&api, "start").await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["status"], "delivered", "{items:?}");
    assert_eq!(tasks_started(&proxy).len(), 1);
}

/// A send the caller hears the outcome of keeps nothing owed: one that
/// worked is marked delivered with its mirror, one that failed is
/// dropped, and neither goes out again after a restart.
#[tokio::test]
async fn a_send_whose_caller_heard_how_it_went_is_not_sent_again() {
    let (proxy, _peer) = proxied_peer(Pushes::Refused).await;
    let dir = tempfile::tempdir().unwrap();
    let config = config_behind(&proxy, "");
    let mut local = Server::start_in(dir.path(), Some(&config), &[]);
    let api = Api::new(&local);
    let (id, state) = start_task(&api, "deploy the docs").await;
    assert_eq!(state, "TASK_STATE_INPUT_REQUIRED");
    let items = outbox_items(&api, "start").await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["status"], "delivered", "{items:?}");
    assert_eq!(items[0]["attempts"], 1, "{items:?}");

    // The peer is down: the card cannot be read, and the caller is told.
    proxy.go_down(true);
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            "/peers/bot/tasks",
            Some(json!({ "text": "deploy the blog" })),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    assert_eq!(
        outbox_items(&api, "start").await.len(),
        1,
        "the failed send left an item"
    );
    proxy.go_down(false);

    local.kill9();
    let local = Server::start_in(dir.path(), Some(&config), &[]);
    let api = Api::new(&local);
    // A send made after the restart goes out after anything the outbox
    // was owed at start-up (the runner starts at once; sends are few).
    let (_, later) = start_task(&api, "deploy the wiki").await;
    wait_for_queue(&api, 2).await;
    let texts: Vec<String> = proxy
        .sent()
        .iter()
        .filter(|(_, answer)| answer["result"]["task"].is_object())
        .filter_map(|(request, _)| {
            request["params"]["message"]["parts"][0]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(texts, ["deploy the docs", "deploy the wiki"], "{texts:?}");
    assert_ne!(id, later);
}

#[tokio::test]
async fn a_push_that_overtakes_a_relays_first_answer_reaches_the_relays_task() {
    let (proxy, _peer) = proxied_peer(Pushes::Sent).await;
    let local = Server::start(Some(&watching_behind(&proxy, 0, RELAY)));
    let api = Api::new(&local);
    // The upstream's pushes about its new task come before its answer.
    proxy.delay_sends(&[1500]);
    let c = local.client();
    let sent = c
        .rpc_ok(
            "gate",
            "SendMessage",
            json!({"message": message("m-quick", "quick deploy"),
                   "configuration": {"returnImmediately": true}}),
        )
        .await;
    let id = sent["task"]["id"].as_str().unwrap().to_owned();
    let d = wait_for(&api, &id, "TASK_STATE_INPUT_REQUIRED").await;
    assert_eq!(
        d["task"]["status"]["message"]["parts"][0]["text"],
        "Which environment?"
    );
    // One task waits for the person: the relay's, not a second copy of
    // the upstream's task made by its push.
    let q = queue(&api).await;
    assert_eq!(q["total"], 1, "{q}");
    assert_eq!(q["items"][0]["taskId"], id.as_str(), "{q}");
    assert_eq!(q["items"][0]["agentId"], "gate", "{q}");
}

#[tokio::test]
async fn a_peer_that_answers_a_decision_with_a_new_task_continues_the_old_one_in_it() {
    let (proxy, peer) = proxied_peer(Pushes::Refused).await;
    // Sweeping every second: a task left open would be read again each time.
    let config = watching_behind(&proxy, 1, "id = \"inbox\"");
    let dir = tempfile::tempdir().unwrap();
    let mut local = Server::start_in(dir.path(), Some(&config), &[]);
    let api = Api::new(&local);
    proxy.new_task_per_reply();
    let (id, _) = start_task(&api, "deploy the site").await;
    wait_for(&api, &id, "TASK_STATE_INPUT_REQUIRED").await;
    decide(&api, &id, json!({"kind": "reply", "text": "staging"})).await;
    let mut next = String::new();
    for _ in 0..300 {
        let d = detail(&api, &id).await;
        if let Some(n) = d["continuedIn"].as_str() {
            next = n.to_owned();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !next.is_empty(),
        "the old task never named its continuation"
    );
    let d = wait_for(&api, &next, "TASK_STATE_COMPLETED").await;
    assert_eq!(d["continues"], id.as_str(), "{d}");
    assert!(d.get("continuesArchived").is_none(), "{d}");
    assert_eq!(
        d["task"]["status"]["message"]["parts"][0]["text"],
        "Deploying now"
    );
    // The old task stays as its peer has it, its question answered and
    // closed: nothing waits on the person, and nobody reads it again.
    let old = detail(&api, &id).await;
    assert_eq!(old["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert!(old.get("openTurn").is_none(), "{old}");
    assert_eq!(old["turns"][0]["outcome"], "decided", "{old}");
    let q = queue(&api).await;
    assert_eq!(q["total"], 0, "{q}");
    let reads = proxy.read();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(proxy.read(), reads, "a continued task is not swept");
    let remote = peer.client().rpc_ok("bot", "ListTasks", json!({})).await;
    assert_eq!(
        remote["tasks"].as_array().unwrap().len(),
        2,
        "the decision reached the peer once: {remote}"
    );
    // Keeping one task, the old task goes first: done with here, though
    // still asking on its peer, and archived with its link on.
    local.terminate();
    let config = format!("{config}\n[retention]\nmax_tasks = 1\ninterval_secs = 1\n");
    let local = Server::start_in(dir.path(), Some(&config), &[]);
    let api = Api::new(&local);
    let mut archived = Vec::new();
    for _ in 0..100 {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_countersign"))
            .args(["archive", "export", "--data-dir"])
            .arg(&local.data_dir)
            .output()
            .unwrap();
        archived = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect();
        if !archived.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(archived.len(), 1, "{archived:?}");
    assert_eq!(archived[0]["task"]["id"], id.as_str());
    assert_eq!(archived[0]["state"], "input-required", "{:?}", archived[0]);
    assert_eq!(
        archived[0]["continuedIn"],
        next.as_str(),
        "{:?}",
        archived[0]
    );
    // Its rows go once its record is safe in the archive (the same pass,
    // just after); the task it went on in stays, and still names it, as
    // archived.
    let mut status = reqwest::StatusCode::OK;
    for _ in 0..100 {
        (status, _) = api
            .call(reqwest::Method::GET, &format!("/tasks/{id}"), None)
            .await;
        if status == reqwest::StatusCode::NOT_FOUND {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 404);
    let d = detail(&api, &next).await;
    assert_eq!(d["continues"], id.as_str(), "{d}");
    assert_eq!(d["continuesArchived"], true, "{d}");
    let shown = std::process::Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["show", &next, "--data-dir"])
        .arg(&local.data_dir)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains(&format!(
            "continues    {id} (archived: `countersign archive show {id}`)"
        )),
        "{shown}"
    );
}

#[tokio::test]
async fn a_relay_goes_on_with_an_upstream_that_answers_each_message_with_a_new_task() {
    let (proxy, _peer) = proxied_peer(Pushes::Refused).await;
    let local = Server::start(Some(&watching_behind(&proxy, 0, RELAY)));
    let api = Api::new(&local);
    proxy.new_task_per_reply();
    let c = local.client();
    let sent = c.send_text("gate", "m-deploy", "deploy the site").await;
    let id = sent["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        sent["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{sent}"
    );
    // The caller answers; the upstream takes the answer up in a new task.
    let mut answer = message("m-answer", "eu-west");
    answer["taskId"] = json!(id);
    c.rpc_ok(
        "gate",
        "SendMessage",
        json!({"message": answer, "configuration": {"returnImmediately": true}}),
    )
    .await;
    let d = wait_for(&api, &id, "TASK_STATE_COMPLETED").await;
    assert_eq!(
        d["task"]["status"]["message"]["parts"][0]["text"], "Deploying to eu-west",
        "{d}"
    );
    // The caller's task is the only one here: no copy of the upstream's
    // second task waits for the person.
    let q = queue(&api).await;
    assert_eq!(q["total"], 0, "{q}");
    let (_, all) = api.call(reqwest::Method::GET, "/tasks", None).await;
    assert_eq!(all["items"].as_array().unwrap().len(), 1, "{all}");
}

/// A task sent to a peer is on the disk, with its push subscription and
/// its `start` item, before the peer has it; the two go in one sync, and so
/// does the send to a peer that takes no pushes (its item alone). Counted
/// on the engine itself: a process shows its syncs only mixed with the
/// checkpoint's.
#[tokio::test]
async fn a_send_to_a_peer_reaches_the_disk_in_one_sync() {
    use countersign::a2a::types::Part;
    use countersign::config::Config;
    use countersign::engine::Engine;
    use countersign::store::peers::{PeerAuthRecord, message_subscription};
    use countersign::store::{Durability, Store};

    let peer = Server::start(Some(PEER));
    for pushes in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = Config::parse(
            "[[agents]]\nid = \"inbox\"\n",
            std::path::Path::new("t.toml"),
        )
        .unwrap();
        let store = Store::open(&dir.path().join("db"), Durability::Normal).unwrap();
        let engine = Engine::new(store, &cfg.agents, cfg.limits);
        if pushes {
            // Where the peer would push to; nothing need answer there.
            engine.set_webhook_base("http://127.0.0.1:9".into());
        }
        let url = format!("{}/a2a/bot", peer.base);
        engine
            .add_peer("bot", &url, None, PeerAuthRecord::default())
            .await
            .unwrap();
        let before = engine.store().synced();
        let task = engine
            .send_to_peer("bot", vec![Part::text("deploy the docs")])
            .await
            .unwrap();
        assert_eq!(
            engine.store().synced() - before,
            1,
            "pushes: {pushes}: {task:?}"
        );
        let message_id = &task.history[0].message_id;
        let sub = engine
            .subscription(&message_subscription(message_id))
            .await
            .unwrap();
        assert_eq!(sub.is_some(), pushes, "{sub:?}");
    }
}

/// A push acknowledged is kept through a power cut right after its answer
/// (the checkpoint's syncs stalled, so nothing else puts our commits on the
/// disk, and every other sync slow, so an answer that went before its sync
/// returned meets the cut): its sender pushes no more, and no sweep would
/// find a task first seen through it. Answered 200, its mirror was synced;
/// answered 202 (`reread_wait_ms = 0`), its queued re-read was, and runs
/// after the restart.
#[tokio::test]
async fn a_push_acknowledged_is_kept_through_a_power_cut() {
    let peer = Server::start(Some(PEER));
    for (wait, answered) in [
        ("", StatusCode::OK),
        ("reread_wait_ms = 0\n", StatusCode::ACCEPTED),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = powercut::Store::in_dir(dir.path());
        let mut cmd = store.command();
        cmd.env("POWERCUT_STALL", "store-checkpoint");
        cmd.env("POWERCUT_SLOW_MS", "50");
        let config = config_sweeping_every(&peer, 0).replacen(
            "[webhooks]\n",
            &format!("[webhooks]\n{wait}"),
            1,
        );
        let mut local = Server::start_cmd_in(cmd, dir.path(), Some(&config));
        let api = Api::new(&local);
        let (remote_id, url, token) = started_elsewhere(&peer, &api, "deploy the docs").await;
        let (status, body) = push(&url, &token, &remote_id).await;
        assert_eq!(status, answered, "{body}");
        local.kill9();
        let (undone, _) = store.cut(Cut::Unsynced);
        eprintln!("{wait:?}: undid {undone} writes");

        let local = Server::start_in(dir.path(), Some(&config), &[]);
        let api = Api::new(&local);
        let q = wait_for_queue(&api, 1).await;
        assert_eq!(q["items"][0]["preview"], "deploy the docs", "{wait:?}: {q}");
    }
}
