//! The A2A 1.0 operations over the HTTP+JSON binding (`/a2a/{agent}/…`),
//! and the agent cards, against the real binary and the scripted TCK agent.
mod common;
use common::*;

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

/// Three agents: no extended card, a declared one without content, a real one.
const EXTENDED_CONFIG: &str = r#"
[[agents]]
id = "plain"
name = "Plain agent"
backend = "scripted"
fallback = [{ complete = "ok" }]

[[agents]]
id = "declared"
backend = "scripted"
extended_agent_card = true
fallback = [{ complete = "ok" }]

[[agents]]
id = "extended"
description = "The public description"
backend = "scripted"
fallback = [{ complete = "ok" }]

[agents.extended_card]
description = "The extended description"

[[agents.extended_card.skills]]
id = "secret-skill"
name = "Secret skill"
description = "Only on the extended card"
"#;

fn tck() -> Server {
    Server::start(Some(TCK_CONFIG))
}

/// A request under `/a2a/tck` with `A2A-Version: 1.0`.
fn req(c: &Client, method: Method, path: &str) -> reqwest::RequestBuilder {
    c.http
        .request(method, format!("{}/a2a/tck{path}", c.base))
        .header("A2A-Version", "1.0")
}

/// Sends and returns (status, content type, JSON body or Null).
async fn call(rb: reqwest::RequestBuilder) -> (u16, String, Value) {
    let resp = rb.send().await.expect("request");
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = resp.text().await.unwrap_or_default();
    (
        status,
        ct,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

/// POST /message:send; returns the body (must be 200).
async fn send(c: &Client, body: Value) -> Value {
    let (status, b) = c
        .rest(Method::POST, "tck", "/message:send", Some(body))
        .await;
    assert_eq!(status, 200, "{b}");
    b
}

/// Sends a text message and returns the task.
async fn send_task(c: &Client, message_id: &str) -> Value {
    let b = send(c, json!({"message": message(message_id, "hello")})).await;
    assert!(b.get("task").is_some(), "expected a task: {b}");
    b["task"].clone()
}

fn follow_up(message_id: &str, task_id: &Value) -> Value {
    let mut m = message(message_id, "more input");
    m["taskId"] = task_id.clone();
    m
}

/// Asserts an AIP-193 error body with an A2A ErrorInfo.
fn assert_aip193(http: u16, body: &Value, want_http: u16, grpc: &str, reason: &str) {
    assert_eq!(http, want_http, "{body}");
    let e = &body["error"];
    assert_eq!(
        e["code"],
        json!(want_http),
        "error.code is the HTTP status: {body}"
    );
    assert_eq!(e["status"], grpc, "{body}");
    assert!(
        e["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    let info = &e["details"][0];
    assert_eq!(
        info["@type"], "type.googleapis.com/google.rpc.ErrorInfo",
        "{body}"
    );
    assert_eq!(info["reason"], reason, "{body}");
    assert_eq!(info["domain"], "a2a-protocol.org", "{body}");
}

fn texts(parts: &Value) -> Vec<&str> {
    parts
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect()
}

fn kind(ev: &Value) -> &str {
    ev.as_object()
        .and_then(|o| o.keys().next())
        .map(String::as_str)
        .unwrap_or("")
}

fn ids(list: &Value) -> Vec<Value> {
    list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].clone())
        .collect()
}

// ---------------------------------------------------------------- message:send

#[tokio::test]
async fn send_returns_the_completed_task_as_json() {
    let s = tck();
    let c = s.client();
    let (status, ct, b) = call(req(&c, Method::POST, "/message:send").json(&json!({
        "message": message("tck-complete-task-1", "hello")
    })))
    .await;
    assert_eq!(status, 200, "{b}");
    assert!(ct.starts_with("application/json"), "{ct}");
    let t = &b["task"];
    assert_eq!(state(t), "TASK_STATE_COMPLETED");
    assert_eq!(texts(&t["status"]["message"]["parts"]), ["Hello from TCK"]);
    assert_eq!(t["history"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a2a_json_is_accepted_and_answered_when_asked_for() {
    let s = tck();
    let c = s.client();
    let body = json!({"message": message("tck-complete-task-1", "hello")}).to_string();
    let (status, ct, b) = call(
        req(&c, Method::POST, "/message:send")
            .header("Content-Type", "application/a2a+json")
            .header("Accept", "application/a2a+json")
            .body(body),
    )
    .await;
    assert_eq!(status, 200, "{b}");
    assert!(ct.starts_with("application/a2a+json"), "{ct}");
    assert_eq!(state(&b["task"]), "TASK_STATE_COMPLETED");
    // Errors too.
    let (status, ct, b) = call(
        req(&c, Method::GET, "/tasks/no-such-task")
            .header("Accept", "application/a2a+json, application/json"),
    )
    .await;
    assert_aip193(status, &b, 404, "NOT_FOUND", "TASK_NOT_FOUND");
    assert!(ct.starts_with("application/a2a+json"), "{ct}");
}

#[tokio::test]
async fn send_returns_at_input_required_and_a_follow_up_completes_the_task() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-input-required-1").await;
    assert_eq!(state(&t), "TASK_STATE_INPUT_REQUIRED");
    let b = send(
        &c,
        json!({"message": follow_up("tck-complete-task-2", &t["id"])}),
    )
    .await;
    assert_eq!(b["task"]["id"], t["id"]);
    assert_eq!(b["task"]["contextId"], t["contextId"]);
    assert_eq!(state(&b["task"]), "TASK_STATE_COMPLETED");
    // Now terminal: a further message is refused with 400.
    let (status, b) = c
        .rest(
            Method::POST,
            "tck",
            "/message:send",
            Some(json!({"message": follow_up("tck-complete-task-3", &t["id"])})),
        )
        .await;
    assert_aip193(
        status,
        &b,
        400,
        "FAILED_PRECONDITION",
        "UNSUPPORTED_OPERATION",
    );
}

#[tokio::test]
async fn send_with_unknown_task_id_is_404_task_not_found() {
    let s = tck();
    let c = s.client();
    let (status, b) = c
        .rest(
            Method::POST,
            "tck",
            "/message:send",
            Some(json!({"message": follow_up("tck-complete-task-1", &json!("nope"))})),
        )
        .await;
    assert_aip193(status, &b, 404, "NOT_FOUND", "TASK_NOT_FOUND");
}

#[tokio::test]
async fn send_with_mismatched_context_is_400_invalid_params() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-input-required-1").await;
    let mut m = follow_up("tck-complete-task-2", &t["id"]);
    m["contextId"] = json!("another-context");
    let (status, b) = c
        .rest(
            Method::POST,
            "tck",
            "/message:send",
            Some(json!({"message": m})),
        )
        .await;
    assert_eq!(status, 400, "{b}");
    assert_eq!(b["error"]["code"], 400);
    assert_eq!(b["error"]["status"], "INVALID_ARGUMENT");
}

#[tokio::test]
async fn send_message_response_returns_a_message() {
    let s = tck();
    let c = s.client();
    let b = send(
        &c,
        json!({"message": message("tck-message-response-1", "hi")}),
    )
    .await;
    assert!(b.get("task").is_none(), "{b}");
    assert_eq!(texts(&b["message"]["parts"]), ["Direct message response"]);
    assert!(
        b["message"]["contextId"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
}

#[tokio::test]
async fn send_with_return_immediately_answers_then_the_task_settles() {
    let cfg = format!(
        "{TCK_CONFIG}\n[[agents]]\nid = \"slow\"\nbackend = \"scripted\"\n\
         fallback = [{{ status = {{ state = \"working\" }} }}, {{ delay_ms = 1500 }}, {{ complete = \"done\" }}]\n"
    );
    let s = Server::start(Some(&cfg));
    let c = s.client();
    let (status, b) = c
        .rest(
            Method::POST,
            "slow",
            "/message:send",
            Some(json!({"message": message("slow-1", "x"), "configuration": {"returnImmediately": true}})),
        )
        .await;
    assert_eq!(status, 200, "{b}");
    assert!(
        matches!(
            state(&b["task"]),
            "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING"
        ),
        "{b}"
    );
    let id = b["task"]["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, t) = c
            .rest(Method::GET, "slow", &format!("/tasks/{id}"), None)
            .await;
        assert_eq!(status, 200);
        if state(&t) == "TASK_STATE_COMPLETED" {
            break;
        }
        assert!(Instant::now() < deadline, "never completed: {t}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn send_artifact_scenarios_carry_the_configured_parts() {
    let s = tck();
    let c = s.client();
    let cases = [
        (
            "tck-artifact-text-1",
            "text-artifact",
            json!([{"text": "Generated text content"}]),
        ),
        (
            "tck-artifact-file-1",
            "file-artifact",
            json!([{"raw": "dGNr", "filename": "output.txt", "mediaType": "text/plain"}]),
        ),
        (
            "tck-artifact-file-url-1",
            "file-url-artifact",
            json!([{"url": "https://example.com/output.txt", "filename": "output.txt", "mediaType": "text/plain"}]),
        ),
        (
            "tck-artifact-data-1",
            "data-artifact",
            json!([{"data": {"key": "value", "count": 42}}]),
        ),
    ];
    for (mid, name, parts) in cases {
        let t = send_task(&c, mid).await;
        assert_eq!(state(&t), "TASK_STATE_COMPLETED");
        let a = &t["artifacts"];
        assert_eq!(a.as_array().unwrap().len(), 1, "{t}");
        assert_eq!(a[0]["name"], name);
        assert_eq!(a[0]["parts"], parts, "{mid}");
    }
}

#[tokio::test]
async fn send_history_length_trims_the_answer() {
    let s = tck();
    let c = s.client();
    let b = send(&c, json!({"message": message("tck-complete-task-1", "x"), "configuration": {"historyLength": 0}})).await;
    assert!(b["task"].get("history").is_none(), "{b}");
    let b = send(&c, json!({"message": message("tck-complete-task-2", "x"), "configuration": {"historyLength": 1}})).await;
    assert_eq!(b["task"]["history"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn text_plain_body_is_415() {
    let s = tck();
    let c = s.client();
    let (status, ct, b) = call(
        req(&c, Method::POST, "/message:send")
            .header("Content-Type", "text/plain")
            .body("hello there"),
    )
    .await;
    assert_aip193(
        status,
        &b,
        415,
        "INVALID_ARGUMENT",
        "CONTENT_TYPE_NOT_SUPPORTED",
    );
    assert!(ct.starts_with("application/json"), "{ct}");
    let list = c.rest(Method::GET, "tck", "/tasks", None).await.1;
    assert_eq!(list["totalSize"], 0);
}

#[tokio::test]
async fn wrong_method_is_405() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-complete-task-1").await;
    let id = t["id"].as_str().unwrap();
    for (method, path) in [
        (Method::GET, "/message:send".to_owned()),
        (Method::PUT, "/message:stream".to_owned()),
        (Method::DELETE, format!("/tasks/{id}")),
        (Method::POST, "/tasks".to_owned()),
        (Method::GET, format!("/tasks/{id}:cancel")),
        (Method::POST, "/extendedAgentCard".to_owned()),
    ] {
        let resp = req(&c, method.clone(), &path).send().await.unwrap();
        assert_eq!(resp.status(), 405, "{method} {path}");
        assert!(
            resp.headers().get("allow").is_some(),
            "{method} {path}: 405 names the allowed methods"
        );
        let b: Value = resp.json().await.unwrap();
        assert_eq!(b["error"]["code"], 405, "{b}");
    }
    // The task is untouched.
    let got = c
        .rest(Method::GET, "tck", &format!("/tasks/{id}"), None)
        .await
        .1;
    assert_eq!(state(&got), "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn unknown_routes_and_agents_are_404() {
    let s = tck();
    let c = s.client();
    let (status, b) = c
        .rest(Method::GET, "tck", "/nothing/here/at/all", None)
        .await;
    assert_eq!(status, 404, "{b}");
    assert_eq!(b["error"]["code"], 404);
    let (status, b) = c.rest(Method::GET, "tck", "/tasks/abc:explode", None).await;
    assert_eq!(status, 404, "{b}");
    let (status, b) = c.rest(Method::GET, "nobody", "/tasks", None).await;
    assert_eq!(status, 404, "{b}");
    assert_eq!(b["error"]["status"], "NOT_FOUND");
}

#[tokio::test]
async fn version_negotiation_on_1_0_routes() {
    let s = tck();
    let c = s.client();
    // No header: 0.3 has no such route, so it is answered as 1.0.
    let (status, _, b) = call(c.http.get(format!("{}/a2a/tck/tasks", c.base))).await;
    assert_eq!(status, 200, "{b}");
    // Asking for 0.3 on a 1.0 route points at the 0.3 routes.
    let (status, _, b) = call(
        c.http
            .get(format!("{}/a2a/tck/tasks", c.base))
            .header("A2A-Version", "0.3"),
    )
    .await;
    assert_aip193(
        status,
        &b,
        400,
        "FAILED_PRECONDITION",
        "VERSION_NOT_SUPPORTED",
    );
    assert!(
        b["error"]["message"].as_str().unwrap().contains("/v1/"),
        "{b}"
    );
    let (status, _, b) = call(
        c.http
            .get(format!("{}/a2a/tck/tasks", c.base))
            .header("A2A-Version", "99.0"),
    )
    .await;
    assert_aip193(
        status,
        &b,
        400,
        "FAILED_PRECONDITION",
        "VERSION_NOT_SUPPORTED",
    );
    let (status, _, b) = call(
        c.http
            .get(format!("{}/a2a/tck/tasks?A2A-Version=1.0", c.base)),
    )
    .await;
    assert_eq!(status, 200, "{b}");
    assert_eq!(b["tasks"], json!([]));
}

// ----------------------------------------------------------------- GET /tasks/{id}

#[tokio::test]
async fn get_task_honours_history_length() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-complete-task-1").await;
    let id = t["id"].as_str().unwrap();
    let (status, ct, all) = call(req(&c, Method::GET, &format!("/tasks/{id}"))).await;
    assert_eq!(status, 200);
    assert!(ct.starts_with("application/json"), "{ct}");
    assert_eq!(all["id"], t["id"]);
    assert_eq!(all["history"].as_array().unwrap().len(), 2);
    let none = c
        .rest(
            Method::GET,
            "tck",
            &format!("/tasks/{id}?historyLength=0"),
            None,
        )
        .await
        .1;
    assert!(none.get("history").is_none(), "{none}");
    let one = c
        .rest(
            Method::GET,
            "tck",
            &format!("/tasks/{id}?historyLength=1"),
            None,
        )
        .await
        .1;
    assert_eq!(one["history"].as_array().unwrap().len(), 1);
    assert_eq!(one["history"][0], all["history"][1]);
}

#[tokio::test]
async fn get_task_bad_query_values_are_400() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-complete-task-1").await;
    let id = t["id"].as_str().unwrap();
    for q in ["historyLength=abc", "historyLength=1.5", "historyLength=-1"] {
        let (status, b) = c
            .rest(Method::GET, "tck", &format!("/tasks/{id}?{q}"), None)
            .await;
        assert_eq!(status, 400, "{q}: {b}");
        assert_eq!(b["error"]["code"], 400);
        assert_eq!(b["error"]["status"], "INVALID_ARGUMENT");
    }
}

#[tokio::test]
async fn get_unknown_task_is_404_with_error_info() {
    let s = tck();
    let c = s.client();
    let (status, ct, b) = call(req(&c, Method::GET, "/tasks/no-such-task")).await;
    assert_aip193(status, &b, 404, "NOT_FOUND", "TASK_NOT_FOUND");
    assert!(ct.starts_with("application/json"), "{ct}");
    assert_eq!(
        b["error"]["details"][0]["metadata"]["taskId"],
        "no-such-task"
    );
}

// ----------------------------------------------------------------- GET /tasks

#[tokio::test]
async fn list_tasks_filters_by_context_and_status() {
    let s = tck();
    let c = s.client();
    let a = send_task(&c, "tck-complete-task-1").await;
    let mut m = message("tck-input-required-2", "x");
    m["contextId"] = a["contextId"].clone();
    let b = send(&c, json!({"message": m})).await["task"].clone();
    send_task(&c, "tck-complete-task-3").await;
    let ctx = a["contextId"].as_str().unwrap();
    let (status, list) = c
        .rest(Method::GET, "tck", &format!("/tasks?contextId={ctx}"), None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(list["totalSize"], 2);
    let got = ids(&list);
    assert!(got.contains(&a["id"]) && got.contains(&b["id"]));
    let list = c
        .rest(
            Method::GET,
            "tck",
            "/tasks?status=TASK_STATE_INPUT_REQUIRED",
            None,
        )
        .await
        .1;
    assert_eq!(ids(&list), [b["id"].clone()]);
    let list = c
        .rest(
            Method::GET,
            "tck",
            &format!("/tasks?contextId={ctx}&status=TASK_STATE_COMPLETED"),
            None,
        )
        .await
        .1;
    assert_eq!(ids(&list), [a["id"].clone()]);
    let (status, b) = c
        .rest(Method::GET, "tck", "/tasks?status=TASK_STATE_RUNNING", None)
        .await;
    assert_eq!(status, 400, "{b}");
}

#[tokio::test]
async fn list_tasks_pages_with_page_size_and_page_token() {
    let s = tck();
    let c = s.client();
    for i in 0..5 {
        send_task(&c, &format!("tck-complete-task-{i}")).await;
    }
    let mut seen = Vec::new();
    let mut path = "/tasks?pageSize=2".to_owned();
    let mut pages = 0;
    loop {
        let (status, page) = c.rest(Method::GET, "tck", &path, None).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(page["totalSize"], 5);
        assert_eq!(page["pageSize"], 2);
        seen.extend(ids(&page));
        pages += 1;
        assert!(pages <= 5, "pagination does not end");
        let next = page["nextPageToken"].as_str().unwrap();
        if next.is_empty() {
            break;
        }
        path = format!("/tasks?pageSize=2&pageToken={next}");
    }
    assert_eq!(pages, 3);
    let mut uniq: Vec<String> = seen
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    uniq.sort();
    uniq.dedup();
    assert_eq!(uniq.len(), 5, "{seen:?}");
}

#[tokio::test]
async fn list_tasks_bad_query_values_are_400() {
    let s = tck();
    let c = s.client();
    for q in [
        "pageSize=0",
        "pageSize=101",
        "pageSize=ten",
        "historyLength=x",
        "includeArtifacts=maybe",
        "pageToken=%25%25bad",
        "statusTimestampAfter=yesterday",
    ] {
        let (status, b) = c
            .rest(Method::GET, "tck", &format!("/tasks?{q}"), None)
            .await;
        assert_eq!(status, 400, "{q}: {b}");
        assert_eq!(b["error"]["code"], 400, "{q}");
        assert_eq!(b["error"]["status"], "INVALID_ARGUMENT", "{q}");
    }
}

#[tokio::test]
async fn list_tasks_include_artifacts_true_and_false() {
    let s = tck();
    let c = s.client();
    send_task(&c, "tck-artifact-data-1").await;
    for q in ["", "?includeArtifacts=false"] {
        let list = c
            .rest(Method::GET, "tck", &format!("/tasks{q}"), None)
            .await
            .1;
        assert_eq!(list["tasks"].as_array().unwrap().len(), 1);
        assert!(list["tasks"][0].get("artifacts").is_none(), "{q}: {list}");
    }
    let list = c
        .rest(Method::GET, "tck", "/tasks?includeArtifacts=true", None)
        .await
        .1;
    assert_eq!(
        list["tasks"][0]["artifacts"][0]["parts"],
        json!([{"data": {"key": "value", "count": 42}}])
    );
}

#[tokio::test]
async fn list_tasks_history_length_and_status_timestamp_after() {
    let s = tck();
    let c = s.client();
    let a = send_task(&c, "tck-complete-task-1").await;
    let list = c
        .rest(Method::GET, "tck", "/tasks?historyLength=1", None)
        .await
        .1;
    assert_eq!(list["tasks"][0]["history"].as_array().unwrap().len(), 1);
    let ts = a["status"]["timestamp"].as_str().unwrap();
    let (status, list) = c
        .rest(
            Method::GET,
            "tck",
            &format!("/tasks?statusTimestampAfter={ts}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(ids(&list), [a["id"].clone()]);
    let list = c
        .rest(
            Method::GET,
            "tck",
            "/tasks?statusTimestampAfter=2999-01-01T00:00:00Z",
            None,
        )
        .await
        .1;
    assert_eq!(list["tasks"], json!([]));
    assert_eq!(list["nextPageToken"], "");
}

// --------------------------------------------------------- POST /tasks/{id}:cancel

#[tokio::test]
async fn cancel_input_required_task_then_completed_and_unknown() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-input-required-1").await;
    let id = t["id"].as_str().unwrap();
    let (status, ct, b) = call(req(&c, Method::POST, &format!("/tasks/{id}:cancel"))).await;
    assert_eq!(status, 200, "{b}");
    assert!(ct.starts_with("application/json"));
    assert_eq!(state(&b), "TASK_STATE_CANCELED");
    let (status, b) = c
        .rest(
            Method::POST,
            "tck",
            &format!("/tasks/{id}:cancel"),
            Some(json!({})),
        )
        .await;
    assert_aip193(
        status,
        &b,
        400,
        "FAILED_PRECONDITION",
        "TASK_NOT_CANCELABLE",
    );
    let done = send_task(&c, "tck-complete-task-2").await;
    let (status, b) = c
        .rest(
            Method::POST,
            "tck",
            &format!("/tasks/{}:cancel", done["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_aip193(
        status,
        &b,
        400,
        "FAILED_PRECONDITION",
        "TASK_NOT_CANCELABLE",
    );
    let (status, b) = c
        .rest(Method::POST, "tck", "/tasks/no-such-task:cancel", None)
        .await;
    assert_aip193(status, &b, 404, "NOT_FOUND", "TASK_NOT_FOUND");
}

// ----------------------------------------------------------- /tasks/{id}:subscribe

async fn open_subscription(c: &Client, method: Method, id: &str) -> SseStream {
    let resp = req(c, method, &format!("/tasks/{id}:subscribe"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    SseStream::new(resp)
}

#[tokio::test]
async fn subscribe_by_get_or_post_streams_bare_events_until_terminal() {
    let s = tck();
    let c = s.client();
    for method in [Method::GET, Method::POST] {
        let t = send_task(&c, "tck-input-required-1").await;
        let id = t["id"].as_str().unwrap();
        let mut sub = open_subscription(&c, method.clone(), id).await;
        let first = sub.next().await.unwrap();
        assert!(
            first.get("jsonrpc").is_none(),
            "REST events are bare: {first}"
        );
        assert_eq!(first["task"]["id"], t["id"], "{method}");
        assert_eq!(state(&first["task"]), "TASK_STATE_INPUT_REQUIRED");
        let idle = tokio::time::timeout(Duration::from_millis(200), sub.next_event()).await;
        assert!(idle.is_err(), "open while input-required");
        send(
            &c,
            json!({"message": follow_up("tck-stream-001-x", &t["id"])}),
        )
        .await;
        let rest = sub.rest().await;
        let kinds: Vec<&str> = rest.iter().map(kind).collect();
        assert_eq!(
            kinds,
            ["statusUpdate", "artifactUpdate", "statusUpdate"],
            "{method}: {rest:?}"
        );
        assert_eq!(
            rest[2]["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
    }
}

#[tokio::test]
async fn subscribe_to_a_terminal_task_is_a_400_json_error() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-complete-task-1").await;
    let id = t["id"].as_str().unwrap();
    for method in [Method::GET, Method::POST] {
        let (status, ct, b) = call(req(&c, method, &format!("/tasks/{id}:subscribe"))).await;
        assert_aip193(
            status,
            &b,
            400,
            "FAILED_PRECONDITION",
            "UNSUPPORTED_OPERATION",
        );
        assert!(ct.starts_with("application/json"), "{ct}");
    }
    let (status, b) = c
        .rest(Method::GET, "tck", "/tasks/no-such-task:subscribe", None)
        .await;
    assert_aip193(status, &b, 404, "NOT_FOUND", "TASK_NOT_FOUND");
}

// ----------------------------------------------------------------- message:stream

async fn stream(c: &Client, message_id: &str) -> Vec<Value> {
    let resp = req(c, Method::POST, "/message:stream")
        .header("Accept", "text/event-stream")
        .json(&json!({"message": message(message_id, "stream please")}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    collect_sse(resp).await
}

#[tokio::test]
async fn stream_data_lines_are_bare_stream_responses() {
    let s = tck();
    let c = s.client();
    let ev = stream(&c, "tck-stream-001").await;
    let kinds: Vec<&str> = ev.iter().map(kind).collect();
    assert_eq!(
        kinds,
        ["task", "statusUpdate", "artifactUpdate", "statusUpdate"],
        "{ev:?}"
    );
    for e in &ev {
        assert_eq!(
            e.as_object().unwrap().len(),
            1,
            "one member per StreamResponse: {e}"
        );
    }
    assert_eq!(
        ev[1]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert_eq!(
        ev[2]["artifactUpdate"]["artifact"]["parts"],
        json!([{"text": "Stream hello from TCK"}])
    );
    assert_eq!(
        ev[3]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let id = &ev[0]["task"]["id"];
    assert!(
        ev[1..]
            .iter()
            .all(|e| e.as_object().unwrap().values().next().unwrap()["taskId"] == *id)
    );
}

#[tokio::test]
async fn stream_of_chunked_artifact_appends_into_one_artifact() {
    let s = tck();
    let c = s.client();
    let ev = stream(&c, "tck-stream-artifact-chunked-1").await;
    let chunks: Vec<&Value> = ev.iter().filter_map(|e| e.get("artifactUpdate")).collect();
    assert_eq!(chunks.len(), 2, "{ev:?}");
    assert_eq!(chunks[0]["append"], true);
    assert_eq!(chunks[1]["append"], true);
    assert_eq!(chunks[1]["lastChunk"], true);
    let id = ev[0]["task"]["id"].as_str().unwrap();
    let t = c
        .rest(Method::GET, "tck", &format!("/tasks/{id}"), None)
        .await
        .1;
    assert_eq!(t["artifacts"].as_array().unwrap().len(), 1, "{t}");
    assert_eq!(texts(&t["artifacts"][0]["parts"]), ["chunk-1 ", "chunk-2"]);
}

#[tokio::test]
async fn stream_of_a_message_response_is_one_message() {
    let s = tck();
    let c = s.client();
    let ev = stream(&c, "tck-message-response-1").await;
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(
        texts(&ev[0]["message"]["parts"]),
        ["Direct message response"]
    );
}

#[tokio::test]
async fn stream_with_a_text_plain_body_is_415_not_sse() {
    let s = tck();
    let c = s.client();
    let (status, ct, b) = call(
        req(&c, Method::POST, "/message:stream")
            .header("Content-Type", "text/plain")
            .body("hi"),
    )
    .await;
    assert_aip193(
        status,
        &b,
        415,
        "INVALID_ARGUMENT",
        "CONTENT_TYPE_NOT_SUPPORTED",
    );
    assert!(ct.starts_with("application/json"), "{ct}");
}

// ------------------------------------------------------ pushNotificationConfigs

#[tokio::test]
async fn push_config_routes_create_get_list_and_delete() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-input-required-1").await;
    let id = t["id"].as_str().unwrap().to_owned();
    let base = format!("/tasks/{id}/pushNotificationConfigs");
    let (status, made) = c
        .rest(
            Method::POST,
            "tck",
            &base,
            Some(json!({"url": "http://127.0.0.1:9/hook", "token": "tk"})),
        )
        .await;
    assert_eq!(status, 200, "{made}");
    let cfg = made["id"].as_str().unwrap().to_owned();
    assert_eq!(made["taskId"], id.as_str());
    let (status, got) = c
        .rest(Method::GET, "tck", &format!("{base}/{cfg}"), None)
        .await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["token"], "tk");
    let (status, listed) = c.rest(Method::GET, "tck", &base, None).await;
    assert_eq!(status, 200);
    assert_eq!(listed["configs"].as_array().unwrap().len(), 1);
    let (status, _) = c
        .rest(Method::DELETE, "tck", &format!("{base}/{cfg}"), None)
        .await;
    assert_eq!(status, 200);
    let (status, b) = c
        .rest(Method::GET, "tck", &format!("{base}/{cfg}"), None)
        .await;
    assert_aip193(status, &b, 404, "NOT_FOUND", "TASK_NOT_FOUND");
    let (status, b) = c
        .rest(
            Method::POST,
            "tck",
            &base,
            Some(json!({"url": "http://169.254.169.254/latest"})),
        )
        .await;
    assert_aip193(status, &b, 400, "INVALID_ARGUMENT", "INVALID_PARAMS");
    let (status, b) = c
        .rest(
            Method::GET,
            "tck",
            "/tasks/no-such-task/pushNotificationConfigs",
            None,
        )
        .await;
    assert_aip193(status, &b, 404, "NOT_FOUND", "TASK_NOT_FOUND");
}

// ------------------------------------------------------------- extendedAgentCard

#[tokio::test]
async fn extended_agent_card_route_follows_the_configuration() {
    let s = Server::start(Some(EXTENDED_CONFIG));
    let c = s.client();
    let (status, b) = c
        .rest(Method::GET, "plain", "/extendedAgentCard", None)
        .await;
    assert_aip193(
        status,
        &b,
        400,
        "FAILED_PRECONDITION",
        "UNSUPPORTED_OPERATION",
    );
    let (status, b) = c
        .rest(Method::GET, "declared", "/extendedAgentCard", None)
        .await;
    assert_aip193(
        status,
        &b,
        400,
        "FAILED_PRECONDITION",
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    );
    let (status, card) = c
        .rest(Method::GET, "extended", "/extendedAgentCard", None)
        .await;
    assert_eq!(status, 200, "{card}");
    assert_eq!(card["description"], "The extended description");
    assert!(
        card["skills"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == "secret-skill"),
        "{card}"
    );
    let (status, card) = c
        .rest(Method::GET, "extended", "/acme/extendedAgentCard", None)
        .await;
    assert_eq!(status, 200, "tenant form: {card}");
    assert_eq!(card["description"], "The extended description");
}

// ------------------------------------------------------------------ tenant prefix

#[tokio::test]
async fn tenant_prefixed_routes_reach_the_same_operations() {
    let s = tck();
    let c = s.client();
    let (status, b) = c
        .rest(
            Method::POST,
            "tck",
            "/acme/message:send",
            Some(json!({"message": message("tck-input-required-1", "x")})),
        )
        .await;
    assert_eq!(status, 200, "{b}");
    let id = b["task"]["id"].as_str().unwrap().to_owned();
    let (status, t) = c
        .rest(
            Method::GET,
            "tck",
            &format!("/acme/tasks/{id}?historyLength=1"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{t}");
    assert_eq!(t["id"], b["task"]["id"]);
    assert_eq!(t["history"].as_array().unwrap().len(), 1);
    let (status, list) = c.rest(Method::GET, "tck", "/acme/tasks", None).await;
    assert_eq!(status, 200);
    assert_eq!(ids(&list), [b["task"]["id"].clone()]);
    let resp = req(&c, Method::POST, &format!("/acme/tasks/{id}:subscribe"))
        .send()
        .await
        .unwrap();
    let mut sub = SseStream::new(resp);
    assert_eq!(sub.next().await.unwrap()["task"]["id"], b["task"]["id"]);
    let (status, t) = c
        .rest(
            Method::POST,
            "tck",
            &format!("/acme/tasks/{id}:cancel"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{t}");
    assert_eq!(state(&t), "TASK_STATE_CANCELED");
    let rest = sub.rest().await;
    assert_eq!(
        rest.last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    let (status, b) = c
        .rest(Method::GET, "tck", "/acme/tasks/no-such-task", None)
        .await;
    assert_aip193(status, &b, 404, "NOT_FOUND", "TASK_NOT_FOUND");
    let resp = req(&c, Method::POST, "/acme/message:stream")
        .json(&json!({"message": message("tck-stream-002", "x")}))
        .send()
        .await
        .unwrap();
    let ev = collect_sse(resp).await;
    assert_eq!(kind(&ev[0]), "task");
    assert_eq!(
        ev.last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

// --------------------------------------------------------------------- agent cards

/// Checks the fields every card needs and the interfaces built from `host`.
fn assert_card(card: &Value, agent: &str, host: &str) {
    for field in ["name", "description", "version"] {
        assert!(
            card[field].as_str().is_some_and(|s| !s.is_empty()),
            "{field}: {card}"
        );
    }
    for field in [
        "defaultInputModes",
        "defaultOutputModes",
        "skills",
        "supportedInterfaces",
    ] {
        assert!(
            card[field].as_array().is_some_and(|a| !a.is_empty()),
            "{field}: {card}"
        );
    }
    assert!(card["capabilities"].is_object(), "{card}");
    assert_eq!(card["capabilities"]["pushNotifications"], true);
    assert_eq!(card["capabilities"]["streaming"], true);
    for skill in card["skills"].as_array().unwrap() {
        for f in ["id", "name", "description"] {
            assert!(skill[f].is_string(), "{skill}");
        }
        assert!(skill["tags"].is_array(), "{skill}");
    }
    let ifaces = card["supportedInterfaces"].as_array().unwrap();
    let url = format!("http://{host}/a2a/{agent}");
    for binding in ["JSONRPC", "HTTP+JSON"] {
        let i = ifaces
            .iter()
            .find(|i| i["protocolBinding"] == binding)
            .unwrap_or_else(|| panic!("no {binding} interface: {card}"));
        assert_eq!(i["protocolVersion"], "1.0");
        assert_eq!(i["url"], url.as_str(), "{card}");
    }
}

async fn get_card(c: &Client, path: &str, host: Option<&str>) -> reqwest::Response {
    let mut rb = c.http.get(format!("{}{path}", c.base));
    if let Some(h) = host {
        rb = rb.header("Host", h);
    }
    rb.send().await.unwrap()
}

#[tokio::test]
async fn agent_card_of_an_agent_is_complete_and_cacheable() {
    let s = tck();
    let c = s.client();
    let host = c.base.strip_prefix("http://").unwrap().to_owned();
    let resp = get_card(&c, "/a2a/tck/.well-known/agent-card.json", None).await;
    assert_eq!(resp.status(), 200);
    let h = resp.headers().clone();
    assert!(
        h["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let cc = h["cache-control"].to_str().unwrap();
    assert!(cc.contains("max-age="), "{cc}");
    let etag = h["etag"].to_str().unwrap().to_owned();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    let lm = h["last-modified"].to_str().unwrap();
    assert!(lm.ends_with("GMT"), "{lm}");
    let card: Value = resp.json().await.unwrap();
    assert_card(&card, "tck", &host);
    assert_eq!(card["name"], "Countersign TCK agent");
    assert_eq!(card["skills"][0]["id"], "tck");
    // A conditional request with the ETag: 304, no body.
    let resp = c
        .http
        .get(format!("{}/a2a/tck/.well-known/agent-card.json", c.base))
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 304);
    assert_eq!(resp.headers()["etag"].to_str().unwrap(), etag);
    assert!(resp.bytes().await.unwrap().is_empty());
    // Another ETag: the card again.
    let resp = c
        .http
        .get(format!("{}/a2a/tck/.well-known/agent-card.json", c.base))
        .header("If-None-Match", "\"something-else\"")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn root_agent_card_is_the_first_agent() {
    let s = Server::start(Some(EXTENDED_CONFIG));
    let c = s.client();
    let host = c.base.strip_prefix("http://").unwrap().to_owned();
    let resp = get_card(&c, "/.well-known/agent-card.json", None).await;
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("max-age=")
    );
    let etag = resp.headers()["etag"].to_str().unwrap().to_owned();
    assert!(resp.headers().get("last-modified").is_some());
    let card: Value = resp.json().await.unwrap();
    assert_card(&card, "plain", &host);
    assert_eq!(card["name"], "Plain agent");
    let resp = c
        .http
        .get(format!("{}/.well-known/agent-card.json", c.base))
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 304);
}

#[tokio::test]
async fn card_urls_follow_the_request_host() {
    let s = tck();
    let c = s.client();
    for path in [
        "/.well-known/agent-card.json",
        "/a2a/tck/.well-known/agent-card.json",
    ] {
        // Cards are cached per host: each host, asked again, gets its own.
        for _ in 0..2 {
            for host in ["agents.example.test:8443", "other.example.test"] {
                let resp = get_card(&c, path, Some(host)).await;
                assert_eq!(resp.status(), 200, "{path}");
                let card: Value = resp.json().await.unwrap();
                assert_card(&card, "tck", host);
            }
        }
    }
}

#[tokio::test]
async fn card_of_an_unknown_agent_is_404() {
    let s = tck();
    let c = s.client();
    let resp = get_card(&c, "/a2a/nobody/.well-known/agent-card.json", None).await;
    assert_eq!(resp.status(), 404);
    let b: Value = resp.json().await.unwrap();
    assert_eq!(b["error"]["code"], 404);
}

#[tokio::test]
async fn card_routes_take_get_only() {
    let s = tck();
    let c = s.client();
    for path in [
        "/a2a/tck/.well-known/agent-card.json",
        "/.well-known/agent-card.json",
    ] {
        for method in [Method::POST, Method::DELETE] {
            let resp = c
                .http
                .request(method.clone(), format!("{}{path}", c.base))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 405, "{method} {path}");
            let allow = resp.headers()["allow"].to_str().unwrap().to_owned();
            assert!(allow.contains("GET"), "{method} {path}: {allow}");
        }
        let resp = c
            .http
            .head(format!("{}{path}", c.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "HEAD {path}");
    }
}
