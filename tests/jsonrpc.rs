//! Every A2A 1.0 operation over the JSON-RPC binding (`POST /a2a/{agent}`),
//! against the real binary and the scripted TCK agent.
mod common;
use common::*;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The TCK agent plus `slow`, whose run takes a while (for returnImmediately).
fn tck_and_slow() -> String {
    format!(
        "{TCK_CONFIG}\n\
         [[agents]]\n\
         id = \"slow\"\n\
         backend = \"scripted\"\n\
         fallback = [{{ status = {{ state = \"working\" }} }}, {{ delay_ms = 1500 }}, {{ complete = \"Slow and steady\" }}]\n"
    )
}

/// Three agents: no extended card, a declared one without content, a real one.
const EXTENDED_CONFIG: &str = r#"
[[agents]]
id = "plain"
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

[[agents.skills]]
id = "public-skill"
name = "Public skill"
description = "Everyone sees this"

[agents.extended_card]
description = "The extended description"

[[agents.extended_card.skills]]
id = "secret-skill"
name = "Secret skill"
description = "Only on the extended card"
tags = ["extended"]
"#;

fn tck() -> Server {
    Server::start(Some(TCK_CONFIG))
}

/// SendMessage with a configuration object.
async fn send_with(c: &Client, agent: &str, msg: Value, configuration: Value) -> Value {
    c.rpc_ok(
        agent,
        "SendMessage",
        json!({"message": msg, "configuration": configuration}),
    )
    .await
}

/// SendMessage of a text message; returns the task.
async fn send_task(c: &Client, message_id: &str) -> Value {
    let r = c.send_text("tck", message_id, "hello").await;
    assert!(r.get("task").is_some(), "expected a task: {r}");
    r["task"].clone()
}

/// A follow-up message on a task.
fn follow_up(message_id: &str, task_id: &Value) -> Value {
    let mut m = message(message_id, "more input");
    m["taskId"] = task_id.clone();
    m
}

/// Asserts a JSON-RPC error object: code, message, and ErrorInfo in data[0].
fn assert_error(err: &Value, code: i64, reason: &str) {
    assert_eq!(err["code"], json!(code), "{err}");
    assert!(
        err["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{err}"
    );
    let info = &err["data"][0];
    assert_eq!(
        info["@type"], "type.googleapis.com/google.rpc.ErrorInfo",
        "{err}"
    );
    assert_eq!(info["reason"], reason, "{err}");
    assert_eq!(info["domain"], "a2a-protocol.org", "{err}");
}

/// Polls GetTask until the task is in `want` (at most 30 s).
async fn wait_for_state(c: &Client, agent: &str, id: &Value, want: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let t = c.rpc_ok(agent, "GetTask", json!({"id": id})).await;
        if state(&t) == want {
            return t;
        }
        assert!(Instant::now() < deadline, "task never reached {want}: {t}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A raw JSON-RPC POST with the given URL and extra headers.
async fn post_raw(
    c: &Client,
    url: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> reqwest::Response {
    let mut req = c.http.post(url).json(&body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.expect("request")
}

/// Opens a SubscribeToTask stream (JSON-RPC).
async fn subscribe(c: &Client, agent: &str, task_id: &Value) -> SseStream {
    let resp = post_raw(
        c,
        &format!("{}/a2a/{agent}", c.base),
        &[("A2A-Version", "1.0"), ("Accept", "text/event-stream")],
        json!({"jsonrpc": "2.0", "id": "sub", "method": "SubscribeToTask", "params": {"id": task_id}}),
    )
    .await;
    SseStream::new(resp)
}

fn texts(parts: &Value) -> Vec<&str> {
    parts
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect()
}

/// The `result` of each JSON-RPC event, checking the envelope.
fn results(events: &[Value], id: &Value) -> Vec<Value> {
    events
        .iter()
        .map(|e| {
            assert_eq!(e["jsonrpc"], "2.0", "{e}");
            assert_eq!(&e["id"], id, "{e}");
            assert!(e.get("error").is_none(), "{e}");
            e["result"].clone()
        })
        .collect()
}

fn kind(ev: &Value) -> &str {
    ev.as_object()
        .and_then(|o| o.keys().next())
        .map(String::as_str)
        .unwrap_or("")
}

// ---------------------------------------------------------------- SendMessage

#[tokio::test]
async fn blocking_send_returns_the_completed_task() {
    let s = tck();
    let c = s.client();
    let r = c.send_text("tck", "tck-complete-task-1", "hello").await;
    let t = &r["task"];
    assert_eq!(state(t), "TASK_STATE_COMPLETED");
    assert!(t["id"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(t["contextId"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(
        t["status"]["timestamp"]
            .as_str()
            .is_some_and(|s| s.ends_with('Z')),
        "{t}"
    );
    assert_eq!(t["status"]["message"]["role"], "ROLE_AGENT");
    assert_eq!(texts(&t["status"]["message"]["parts"]), ["Hello from TCK"]);
    let history = t["history"].as_array().unwrap();
    assert_eq!(history.len(), 2, "{t}");
    assert_eq!(history[0]["messageId"], "tck-complete-task-1");
    assert_eq!(history[0]["taskId"], t["id"]);
    assert_eq!(history[0]["contextId"], t["contextId"]);
    assert_eq!(history[1]["role"], "ROLE_AGENT");
}

/// A task the backend settles at once is answered from the transaction that
/// created it; that answer must be the stored task, to the byte.
#[tokio::test]
async fn a_task_settled_with_its_creation_answers_as_get_task_does() {
    let config = r#"
[[agents]]
id = "inbox"
backend = "human"

[[agents]]
id = "steps"
backend = "scripted"
fallback = [{ status = { state = "working", text = "on it" } }, { message = "halfway" }, { complete = "done" }]

[[agents]]
id = "settles"
backend = "scripted"
fallback = [{ status = { state = "working" } }]
"#;
    let s = Server::start(Some(config));
    let c = s.client();
    for (agent, want, history) in [
        ("inbox", "TASK_STATE_INPUT_REQUIRED", 2),
        ("steps", "TASK_STATE_COMPLETED", 4),
        // The run's end completes a task its steps leave working.
        ("settles", "TASK_STATE_COMPLETED", 1),
    ] {
        let sent = send_with(&c, agent, message(&format!("{agent}-1"), "hi"), json!({})).await;
        let t = &sent["task"];
        assert_eq!(state(t), want, "{agent}: {t}");
        assert_eq!(
            t["history"].as_array().map(Vec::len),
            Some(history),
            "{agent}: {t}"
        );
        let got = c.rpc_ok(agent, "GetTask", json!({"id": t["id"]})).await;
        assert_eq!(t, &got, "{agent}: the answer differs from the stored task");
        let trimmed = send_with(
            &c,
            agent,
            message(&format!("{agent}-2"), "hi"),
            json!({"historyLength": 1}),
        )
        .await;
        let got = c
            .rpc_ok(
                agent,
                "GetTask",
                json!({"id": trimmed["task"]["id"], "historyLength": 1}),
            )
            .await;
        assert_eq!(trimmed["task"], got, "{agent}: trimmed answer differs");
    }
    // With the request's metadata (the task's), the message's own, and
    // text that JSON escapes, every history length.
    for history_length in [json!(null), json!(0), json!(1), json!(2), json!(5)] {
        let mut msg = message("meta-1", "quote \" tab \t é \u{1F600} </script>");
        msg["metadata"] = json!({"from": "ops", "n": [1, 2.5, null]});
        msg["messageId"] = json!(format!("meta-{history_length}"));
        let sent = c
            .rpc_ok(
                "inbox",
                "SendMessage",
                json!({
                    "message": msg,
                    "configuration": {"historyLength": history_length},
                    "metadata": {"ticket": "T-1", "nested": {"deep": true}},
                }),
            )
            .await;
        let t = &sent["task"];
        assert_eq!(t["metadata"]["ticket"], "T-1", "{t}");
        let got = c
            .rpc_ok(
                "inbox",
                "GetTask",
                json!({"id": t["id"], "historyLength": history_length}),
            )
            .await;
        assert_eq!(t, &got, "historyLength {history_length}");
    }
}

#[tokio::test]
async fn blocking_send_returns_at_input_required() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-input-required-1").await;
    assert_eq!(state(&t), "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(
        texts(&t["status"]["message"]["parts"]),
        ["Please provide more input."]
    );
}

#[tokio::test]
async fn return_immediately_answers_before_the_task_settles() {
    let s = Server::start(Some(&tck_and_slow()));
    let c = s.client();
    let r = send_with(
        &c,
        "slow",
        message("slow-1", "take your time"),
        json!({"returnImmediately": true}),
    )
    .await;
    let t = &r["task"];
    assert!(
        matches!(state(t), "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING"),
        "returnImmediately must not wait for the run: {t}"
    );
    let done = wait_for_state(&c, "slow", &t["id"], "TASK_STATE_COMPLETED").await;
    assert_eq!(
        texts(&done["status"]["message"]["parts"]),
        ["Slow and steady"]
    );
    // Without it, the same agent's send waits for the end.
    let blocking = send_with(
        &c,
        "slow",
        message("slow-2", "again"),
        json!({"returnImmediately": false}),
    )
    .await;
    assert_eq!(state(&blocking["task"]), "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn message_response_returns_a_message_with_a_context_id() {
    let s = tck();
    let c = s.client();
    let r = c.send_text("tck", "tck-message-response-1", "hi").await;
    assert!(r.get("task").is_none(), "{r}");
    let m = &r["message"];
    assert_eq!(m["role"], "ROLE_AGENT");
    assert_eq!(texts(&m["parts"]), ["Direct message response"]);
    assert!(m["messageId"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(
        m["contextId"].as_str().is_some_and(|s| !s.is_empty()),
        "{m}"
    );
    assert!(m.get("taskId").is_none(), "{m}");
    // A given context is kept.
    let mut msg = message("tck-message-response-2", "hi");
    msg["contextId"] = json!("my-context");
    let r = c
        .rpc_ok("tck", "SendMessage", json!({"message": msg}))
        .await;
    assert_eq!(r["message"]["contextId"], "my-context");
    // No task was created.
    let list = c.rpc_ok("tck", "ListTasks", json!({})).await;
    assert_eq!(list["totalSize"], 0, "{list}");
}

/// The single artifact of a completed TCK artifact scenario.
async fn artifact_of(message_id: &str) -> Value {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, message_id).await;
    assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{t}");
    let artifacts = t["artifacts"].as_array().expect("artifacts");
    assert_eq!(artifacts.len(), 1, "{t}");
    let a = artifacts[0].clone();
    assert!(
        a["artifactId"].as_str().is_some_and(|s| !s.is_empty()),
        "{a}"
    );
    assert_eq!(
        texts(&t["status"]["message"]["parts"]),
        ["Artifact generated"]
    );
    // GetTask shows the same artifact.
    let got = c.rpc_ok("tck", "GetTask", json!({"id": t["id"]})).await;
    assert_eq!(got["artifacts"], t["artifacts"]);
    a
}

#[tokio::test]
async fn text_artifact_scenario_produces_a_text_part() {
    let a = artifact_of("tck-artifact-text-1").await;
    assert_eq!(a["name"], "text-artifact");
    assert_eq!(a["parts"], json!([{"text": "Generated text content"}]));
}

#[tokio::test]
async fn file_artifact_scenario_produces_a_base64_raw_part() {
    let a = artifact_of("tck-artifact-file-1").await;
    assert_eq!(a["name"], "file-artifact");
    // "tck" in base64.
    assert_eq!(
        a["parts"],
        json!([{"raw": "dGNr", "filename": "output.txt", "mediaType": "text/plain"}])
    );
}

#[tokio::test]
async fn file_url_artifact_scenario_produces_a_url_part() {
    let a = artifact_of("tck-artifact-file-url-1").await;
    assert_eq!(a["name"], "file-url-artifact");
    assert_eq!(
        a["parts"],
        json!([{"url": "https://example.com/output.txt", "filename": "output.txt", "mediaType": "text/plain"}])
    );
}

#[tokio::test]
async fn data_artifact_scenario_produces_a_data_part() {
    let a = artifact_of("tck-artifact-data-1").await;
    assert_eq!(a["name"], "data-artifact");
    assert_eq!(a["parts"], json!([{"data": {"key": "value", "count": 42}}]));
}

#[tokio::test]
async fn history_length_in_the_send_configuration_trims_history() {
    let s = tck();
    let c = s.client();
    let full = send_with(&c, "tck", message("tck-complete-task-a", "x"), json!({})).await;
    assert_eq!(full["task"]["history"].as_array().unwrap().len(), 2);
    let none = send_with(
        &c,
        "tck",
        message("tck-complete-task-b", "x"),
        json!({"historyLength": 0}),
    )
    .await;
    assert!(
        none["task"].get("history").is_none(),
        "historyLength 0 omits history: {none}"
    );
    let one = send_with(
        &c,
        "tck",
        message("tck-complete-task-c", "x"),
        json!({"historyLength": 1}),
    )
    .await;
    let h = one["task"]["history"].as_array().unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!(
        h[0]["role"], "ROLE_AGENT",
        "the most recent message is kept: {one}"
    );
    // Trimming is of the answer only: the task keeps its whole history.
    let got = c
        .rpc_ok("tck", "GetTask", json!({"id": one["task"]["id"]}))
        .await;
    assert_eq!(got["history"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn negative_history_length_in_send_is_refused_before_any_task_is_created() {
    let s = tck();
    let c = s.client();
    let err = c
        .rpc_err(
            "tck",
            "SendMessage",
            json!({"message": message("tck-complete-task-neg", "x"), "configuration": {"historyLength": -1}}),
        )
        .await;
    assert_eq!(err["code"], -32602, "{err}");
    let list = c.rpc_ok("tck", "ListTasks", json!({})).await;
    assert_eq!(
        list["totalSize"], 0,
        "a refused request must not create a task: {list}"
    );
}

// ----------------------------------------------------------------- Multi-turn

#[tokio::test]
async fn follow_up_with_task_id_only_infers_the_context() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-input-required-1").await;
    assert_eq!(state(&t), "TASK_STATE_INPUT_REQUIRED");
    let r = c
        .rpc_ok(
            "tck",
            "SendMessage",
            json!({"message": follow_up("tck-complete-task-2", &t["id"])}),
        )
        .await;
    let done = &r["task"];
    assert_eq!(done["id"], t["id"]);
    assert_eq!(done["contextId"], t["contextId"]);
    assert_eq!(state(done), "TASK_STATE_COMPLETED");
    let history = done["history"].as_array().unwrap();
    let mine = history
        .iter()
        .find(|m| m["messageId"] == "tck-complete-task-2")
        .expect("follow-up in history");
    assert_eq!(
        mine["contextId"], t["contextId"],
        "the context is inferred from the task"
    );
    assert_eq!(mine["taskId"], t["id"]);
    assert_eq!(
        history.len(),
        4,
        "question, ask, answer, completion: {done}"
    );
}

#[tokio::test]
async fn follow_up_with_matching_task_and_context_is_accepted() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-input-required-1").await;
    let mut m = follow_up("tck-complete-task-2", &t["id"]);
    m["contextId"] = t["contextId"].clone();
    let r = c.rpc_ok("tck", "SendMessage", json!({"message": m})).await;
    assert_eq!(state(&r["task"]), "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn context_id_alone_starts_a_new_task_in_the_same_context() {
    let s = tck();
    let c = s.client();
    let first = send_task(&c, "tck-complete-task-1").await;
    let mut m = message("tck-complete-task-2", "again");
    m["contextId"] = first["contextId"].clone();
    let r = c.rpc_ok("tck", "SendMessage", json!({"message": m})).await;
    let second = &r["task"];
    assert_ne!(second["id"], first["id"]);
    assert_eq!(second["contextId"], first["contextId"]);
    assert_eq!(state(second), "TASK_STATE_COMPLETED");
    let list = c
        .rpc_ok("tck", "ListTasks", json!({"contextId": first["contextId"]}))
        .await;
    assert_eq!(list["totalSize"], 2, "{list}");
}

#[tokio::test]
async fn mismatched_context_id_is_rejected() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-input-required-1").await;
    let mut m = follow_up("tck-complete-task-2", &t["id"]);
    m["contextId"] = json!("some-other-context");
    let err = c.rpc_err("tck", "SendMessage", json!({"message": m})).await;
    assert_eq!(err["code"], -32602, "{err}");
    let got = c.rpc_ok("tck", "GetTask", json!({"id": t["id"]})).await;
    assert_eq!(
        state(&got),
        "TASK_STATE_INPUT_REQUIRED",
        "the task is untouched"
    );
    assert_eq!(got["history"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn message_with_unknown_task_id_is_task_not_found() {
    let s = tck();
    let c = s.client();
    let err = c
        .rpc_err(
            "tck",
            "SendMessage",
            json!({"message": follow_up("tck-complete-task-1", &json!("no-such-task"))}),
        )
        .await;
    assert_error(&err, -32001, "TASK_NOT_FOUND");
}

#[tokio::test]
async fn message_to_a_completed_task_is_unsupported_operation() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-complete-task-1").await;
    let err = c
        .rpc_err(
            "tck",
            "SendMessage",
            json!({"message": follow_up("tck-complete-task-2", &t["id"])}),
        )
        .await;
    assert_error(&err, -32004, "UNSUPPORTED_OPERATION");
}

#[tokio::test]
async fn human_agent_parks_tasks_and_keeps_them_parked_after_follow_ups() {
    let s = Server::start(None);
    let c = s.client();
    let r = c.send_text("inbox", "m-1", "may I deploy?").await;
    let t = &r["task"];
    assert_eq!(state(t), "TASK_STATE_INPUT_REQUIRED");
    assert!(
        t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    let r = c
        .rpc_ok(
            "inbox",
            "SendMessage",
            json!({"message": follow_up("m-2", &t["id"])}),
        )
        .await;
    assert_eq!(state(&r["task"]), "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(r["task"]["history"].as_array().unwrap().len(), 3, "{r}");
}

// -------------------------------------------------------------------- GetTask

#[tokio::test]
async fn get_task_honours_history_length() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-complete-task-1").await;
    let all = c.rpc_ok("tck", "GetTask", json!({"id": t["id"]})).await;
    assert_eq!(all["history"].as_array().unwrap().len(), 2);
    assert_eq!(all["status"], t["status"]);
    let none = c
        .rpc_ok("tck", "GetTask", json!({"id": t["id"], "historyLength": 0}))
        .await;
    assert!(none.get("history").is_none(), "{none}");
    let one = c
        .rpc_ok("tck", "GetTask", json!({"id": t["id"], "historyLength": 1}))
        .await;
    let h = one["history"].as_array().unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0], all["history"][1], "the most recent message");
    let snake = c
        .rpc_ok(
            "tck",
            "GetTask",
            json!({"id": t["id"], "history_length": 1}),
        )
        .await;
    assert_eq!(snake["history"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn get_task_unknown_id_is_task_not_found_with_error_info() {
    let s = tck();
    let c = s.client();
    let err = c
        .rpc_err("tck", "GetTask", json!({"id": "no-such-task"}))
        .await;
    assert_error(&err, -32001, "TASK_NOT_FOUND");
    assert_eq!(
        err["data"][0]["metadata"]["taskId"], "no-such-task",
        "{err}"
    );
}

#[tokio::test]
async fn get_task_negative_history_length_is_invalid_params() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-complete-task-1").await;
    let err = c
        .rpc_err(
            "tck",
            "GetTask",
            json!({"id": t["id"], "historyLength": -1}),
        )
        .await;
    assert_eq!(err["code"], -32602, "{err}");
}

#[tokio::test]
async fn tasks_of_one_agent_are_not_visible_through_another() {
    let s = Server::start(Some(&tck_and_slow()));
    let c = s.client();
    let t = send_task(&c, "tck-complete-task-1").await;
    let err = c.rpc_err("slow", "GetTask", json!({"id": t["id"]})).await;
    assert_error(&err, -32001, "TASK_NOT_FOUND");
}

// ------------------------------------------------------------------ ListTasks

#[tokio::test]
async fn list_tasks_filters_by_context_and_status() {
    let s = tck();
    let c = s.client();
    let a = send_task(&c, "tck-complete-task-1").await;
    let mut m = message("tck-input-required-2", "x");
    m["contextId"] = a["contextId"].clone();
    let b = c.rpc_ok("tck", "SendMessage", json!({"message": m})).await["task"].clone();
    let other = send_task(&c, "tck-complete-task-3").await;
    assert_ne!(other["contextId"], a["contextId"]);

    let all = c.rpc_ok("tck", "ListTasks", json!({})).await;
    assert_eq!(all["totalSize"], 3);
    assert_eq!(all["tasks"].as_array().unwrap().len(), 3);
    assert_eq!(all["nextPageToken"], "");

    let ctx = c
        .rpc_ok("tck", "ListTasks", json!({"contextId": a["contextId"]}))
        .await;
    let ids: Vec<&Value> = ctx["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["id"])
        .collect();
    assert_eq!(ctx["totalSize"], 2);
    assert!(ids.contains(&&a["id"]) && ids.contains(&&b["id"]), "{ctx}");

    let done = c
        .rpc_ok(
            "tck",
            "ListTasks",
            json!({"status": "TASK_STATE_COMPLETED"}),
        )
        .await;
    assert_eq!(done["totalSize"], 2);
    assert!(
        done["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| state(t) == "TASK_STATE_COMPLETED")
    );

    let both = c
        .rpc_ok(
            "tck",
            "ListTasks",
            json!({"contextId": a["contextId"], "status": "TASK_STATE_INPUT_REQUIRED"}),
        )
        .await;
    assert_eq!(both["totalSize"], 1);
    assert_eq!(both["tasks"][0]["id"], b["id"]);
}

#[tokio::test]
async fn list_tasks_page_size_must_be_between_1_and_100() {
    let s = tck();
    let c = s.client();
    send_task(&c, "tck-complete-task-1").await;
    for bad in [0, 101, -1] {
        let err = c
            .rpc_err("tck", "ListTasks", json!({"pageSize": bad}))
            .await;
        assert_eq!(err["code"], -32602, "pageSize {bad}: {err}");
    }
    for ok in [1, 100] {
        let r = c.rpc_ok("tck", "ListTasks", json!({"pageSize": ok})).await;
        assert_eq!(r["pageSize"], ok);
        assert_eq!(r["tasks"].as_array().unwrap().len(), 1);
    }
    let default = c.rpc_ok("tck", "ListTasks", json!({})).await;
    assert_eq!(default["pageSize"], 50);
}

#[tokio::test]
async fn list_tasks_cursor_pagination_visits_each_task_exactly_once() {
    let s = tck();
    let c = s.client();
    let mut created = Vec::new();
    for i in 0..7 {
        created.push(send_task(&c, &format!("tck-complete-task-{i}")).await["id"].clone());
    }
    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    let mut token = Value::Null;
    let mut timestamps = Vec::new();
    for _ in 0..10 {
        let mut params = json!({"pageSize": 3});
        if !token.is_null() {
            params["pageToken"] = token.clone();
        }
        let page = c.rpc_ok("tck", "ListTasks", params).await;
        assert_eq!(page["totalSize"], 7, "{page}");
        assert_eq!(page["pageSize"], 3);
        let tasks = page["tasks"].as_array().unwrap();
        sizes.push(tasks.len());
        for t in tasks {
            seen.push(t["id"].clone());
            timestamps.push(t["status"]["timestamp"].as_str().unwrap().to_owned());
        }
        let next = page["nextPageToken"]
            .as_str()
            .expect("nextPageToken is always present");
        if next.is_empty() {
            token = Value::Null;
            break;
        }
        token = json!(next);
    }
    assert!(token.is_null(), "pagination did not end");
    assert_eq!(sizes, [3, 3, 1]);
    let mut sorted_seen: Vec<String> = seen
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    sorted_seen.sort();
    sorted_seen.dedup();
    assert_eq!(sorted_seen.len(), 7, "each task exactly once: {seen:?}");
    let mut expected: Vec<String> = created
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    expected.sort();
    assert_eq!(sorted_seen, expected);
    assert!(
        timestamps.windows(2).all(|w| w[0] >= w[1]),
        "newest status first across pages: {timestamps:?}"
    );
}

#[tokio::test]
async fn list_tasks_are_sorted_by_status_timestamp_descending() {
    let s = tck();
    let c = s.client();
    let first = send_task(&c, "tck-input-required-1").await;
    send_task(&c, "tck-complete-task-2").await;
    send_task(&c, "tck-artifact-text-3").await;
    // Updating the oldest task moves it to the front.
    let r = c
        .rpc_ok(
            "tck",
            "SendMessage",
            json!({"message": follow_up("tck-complete-task-4", &first["id"])}),
        )
        .await;
    let updated = r["task"]["status"]["timestamp"].as_str().unwrap();
    let list = c.rpc_ok("tck", "ListTasks", json!({})).await;
    let tasks = list["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 3);
    let ts: Vec<&str> = tasks
        .iter()
        .map(|t| t["status"]["timestamp"].as_str().unwrap())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] >= w[1]), "{ts:?}");
    // First, or tied with the first within the same millisecond.
    assert_eq!(ts[0], updated, "{list}");
    let pos = tasks.iter().position(|t| t["id"] == first["id"]).unwrap();
    assert_eq!(ts[pos], updated, "{list}");
}

#[tokio::test]
async fn list_tasks_omits_artifacts_unless_include_artifacts() {
    let s = tck();
    let c = s.client();
    send_task(&c, "tck-artifact-text-1").await;
    send_task(&c, "tck-complete-task-2").await;
    for params in [json!({}), json!({"includeArtifacts": false})] {
        let list = c.rpc_ok("tck", "ListTasks", params).await;
        for t in list["tasks"].as_array().unwrap() {
            assert!(
                t.get("artifacts").is_none(),
                "artifacts must be omitted entirely: {t}"
            );
        }
    }
    let list = c
        .rpc_ok("tck", "ListTasks", json!({"includeArtifacts": true}))
        .await;
    let tasks = list["tasks"].as_array().unwrap();
    let with: Vec<&Value> = tasks
        .iter()
        .filter(|t| t["artifacts"].as_array().is_some_and(|a| !a.is_empty()))
        .collect();
    assert_eq!(with.len(), 1, "{list}");
    assert_eq!(with[0]["artifacts"][0]["name"], "text-artifact");
    assert!(
        tasks.iter().all(|t| t["artifacts"].is_array()),
        "present (maybe empty) when asked for: {list}"
    );
}

#[tokio::test]
async fn list_tasks_status_timestamp_after_filters_by_status_time() {
    let s = tck();
    let c = s.client();
    let a = send_task(&c, "tck-complete-task-1").await;
    let ts_a = a["status"]["timestamp"].as_str().unwrap().to_owned();
    // Make sure the next task's status is strictly later.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut n = 0;
    let b = loop {
        n += 1;
        let b = send_task(&c, &format!("tck-complete-task-{n}")).await;
        if b["status"]["timestamp"].as_str().unwrap() > ts_a.as_str() {
            break b;
        }
        assert!(Instant::now() < deadline);
    };
    let ts_b = b["status"]["timestamp"].as_str().unwrap().to_owned();
    // Inclusive: a task whose status time equals the bound is listed.
    let from_a = c
        .rpc_ok("tck", "ListTasks", json!({"statusTimestampAfter": ts_a}))
        .await;
    let ids: Vec<&Value> = from_a["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["id"])
        .collect();
    assert!(
        ids.contains(&&a["id"]) && ids.contains(&&b["id"]),
        "{from_a}"
    );
    let from_b = c
        .rpc_ok("tck", "ListTasks", json!({"statusTimestampAfter": ts_b}))
        .await;
    let ids: Vec<&Value> = from_b["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["id"])
        .collect();
    assert!(
        ids.contains(&&b["id"]) && !ids.contains(&&a["id"]),
        "{from_b}"
    );
    let future = c
        .rpc_ok(
            "tck",
            "ListTasks",
            json!({"statusTimestampAfter": "2999-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(future["totalSize"], 0);
    assert_eq!(future["tasks"], json!([]));
    let err = c
        .rpc_err(
            "tck",
            "ListTasks",
            json!({"statusTimestampAfter": "yesterday"}),
        )
        .await;
    assert_eq!(err["code"], -32602);
}

#[tokio::test]
async fn list_tasks_bad_page_token_is_invalid_params() {
    let s = tck();
    let c = s.client();
    send_task(&c, "tck-complete-task-1").await;
    for bad in ["%%%not-a-token", "bm8tY29sb24"] {
        let err = c
            .rpc_err("tck", "ListTasks", json!({"pageToken": bad}))
            .await;
        assert_eq!(err["code"], -32602, "{bad}: {err}");
    }
}

#[tokio::test]
async fn list_tasks_accepts_snake_case_param_names() {
    let s = tck();
    let c = s.client();
    let a = send_task(&c, "tck-artifact-text-1").await;
    send_task(&c, "tck-complete-task-2").await;
    send_task(&c, "tck-complete-task-3").await;
    let r = c.rpc_ok("tck", "ListTasks", json!({"page_size": 2})).await;
    assert_eq!(r["tasks"].as_array().unwrap().len(), 2);
    let token = r["nextPageToken"].clone();
    let r = c
        .rpc_ok(
            "tck",
            "ListTasks",
            json!({"page_size": 2, "page_token": token}),
        )
        .await;
    assert_eq!(r["tasks"].as_array().unwrap().len(), 1);
    let r = c
        .rpc_ok(
            "tck",
            "ListTasks",
            json!({"context_id": a["contextId"], "include_artifacts": true}),
        )
        .await;
    assert_eq!(r["totalSize"], 1);
    assert_eq!(r["tasks"][0]["artifacts"][0]["name"], "text-artifact");
    let r = c
        .rpc_ok(
            "tck",
            "ListTasks",
            json!({"context_id": a["contextId"], "history_length": 0}),
        )
        .await;
    assert!(r["tasks"][0].get("history").is_none(), "{r}");
}

// ----------------------------------------------------------------- CancelTask

#[tokio::test]
async fn cancel_of_an_input_required_task_cancels_it() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-input-required-1").await;
    let canceled = c.rpc_ok("tck", "CancelTask", json!({"id": t["id"]})).await;
    assert_eq!(canceled["id"], t["id"]);
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
    let got = c.rpc_ok("tck", "GetTask", json!({"id": t["id"]})).await;
    assert_eq!(state(&got), "TASK_STATE_CANCELED");
    // Canceling again: the task is terminal now.
    let err = c.rpc_err("tck", "CancelTask", json!({"id": t["id"]})).await;
    assert_error(&err, -32002, "TASK_NOT_CANCELABLE");
}

#[tokio::test]
async fn cancel_of_a_completed_task_is_not_cancelable() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-complete-task-1").await;
    let err = c.rpc_err("tck", "CancelTask", json!({"id": t["id"]})).await;
    assert_error(&err, -32002, "TASK_NOT_CANCELABLE");
    let got = c.rpc_ok("tck", "GetTask", json!({"id": t["id"]})).await;
    assert_eq!(state(&got), "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn cancel_of_an_unknown_task_is_task_not_found() {
    let s = tck();
    let c = s.client();
    let err = c
        .rpc_err("tck", "CancelTask", json!({"id": "no-such-task"}))
        .await;
    assert_error(&err, -32001, "TASK_NOT_FOUND");
}

// ------------------------------------------------------------ SubscribeToTask

#[tokio::test]
async fn subscribe_starts_with_the_task_and_closes_when_a_follow_up_completes_it() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-input-required-1").await;
    let mut sub = subscribe(&c, "tck", &t["id"]).await;
    let first = sub.next().await.expect("first event");
    assert_eq!(first["jsonrpc"], "2.0");
    assert_eq!(first["id"], "sub");
    let task = &first["result"]["task"];
    assert_eq!(task["id"], t["id"]);
    assert_eq!(state(task), "TASK_STATE_INPUT_REQUIRED");
    // While the task waits for input, the stream stays open.
    let idle = tokio::time::timeout(Duration::from_millis(300), sub.next_event()).await;
    assert!(
        idle.is_err(),
        "the stream must stay open while input-required: {idle:?}"
    );
    let r = c
        .rpc_ok(
            "tck",
            "SendMessage",
            json!({"message": follow_up("tck-complete-task-2", &t["id"])}),
        )
        .await;
    assert_eq!(state(&r["task"]), "TASK_STATE_COMPLETED");
    let rest = results(&sub.rest().await, &json!("sub"));
    let last = rest.last().expect("events after the follow-up");
    assert_eq!(kind(last), "statusUpdate", "{rest:?}");
    assert_eq!(last["statusUpdate"]["taskId"], t["id"]);
    assert_eq!(last["statusUpdate"]["contextId"], t["contextId"]);
    assert_eq!(
        last["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[tokio::test]
async fn concurrent_subscribers_get_identical_events() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-input-required-1").await;
    let mut a = subscribe(&c, "tck", &t["id"]).await;
    let mut b = subscribe(&c, "tck", &t["id"]).await;
    let a0 = a.next().await.unwrap();
    let b0 = b.next().await.unwrap();
    c.rpc_ok(
        "tck",
        "SendMessage",
        json!({"message": follow_up("tck-stream-001-x", &t["id"])}),
    )
    .await;
    let mut ea = vec![a0];
    ea.extend(a.rest().await);
    let mut eb = vec![b0];
    eb.extend(b.rest().await);
    assert_eq!(ea, eb);
    let kinds: Vec<&str> = ea.iter().map(|e| kind(&e["result"])).collect();
    assert_eq!(
        kinds,
        ["task", "statusUpdate", "artifactUpdate", "statusUpdate"],
        "{ea:?}"
    );
    assert_eq!(
        ea.last().unwrap()["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[tokio::test]
async fn cancel_closes_an_open_subscription() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-input-required-1").await;
    let mut sub = subscribe(&c, "tck", &t["id"]).await;
    sub.next().await.unwrap();
    c.rpc_ok("tck", "CancelTask", json!({"id": t["id"]})).await;
    let rest = sub.rest().await;
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(
        rest[0]["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
}

#[tokio::test]
async fn subscribe_to_a_completed_task_is_a_json_error_not_sse() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-complete-task-1").await;
    let resp = post_raw(
        &c,
        &format!("{}/a2a/tck", c.base),
        &[("A2A-Version", "1.0"), ("Accept", "text/event-stream")],
        json!({"jsonrpc": "2.0", "id": 5, "method": "SubscribeToTask", "params": {"id": t["id"]}}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ct.starts_with("application/json"), "{ct}");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["id"], 5);
    assert_error(&body["error"], -32004, "UNSUPPORTED_OPERATION");
}

#[tokio::test]
async fn subscribe_to_an_unknown_task_is_task_not_found() {
    let s = tck();
    let c = s.client();
    let err = c
        .rpc_err("tck", "SubscribeToTask", json!({"id": "no-such-task"}))
        .await;
    assert_error(&err, -32001, "TASK_NOT_FOUND");
}

// ------------------------------------------------------- SendStreamingMessage

#[tokio::test]
async fn streaming_send_emits_task_working_artifact_completed_then_closes() {
    let s = tck();
    let c = s.client();
    let resp = post_raw(
        &c,
        &format!("{}/a2a/tck", c.base),
        &[("A2A-Version", "1.0"), ("Accept", "text/event-stream")],
        json!({"jsonrpc": "2.0", "id": "stream-1", "method": "SendStreamingMessage",
               "params": {"message": message("tck-stream-001", "stream please")}}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let events = collect_sse(resp).await;
    let ev = results(&events, &json!("stream-1"));
    let kinds: Vec<&str> = ev.iter().map(kind).collect();
    assert_eq!(
        kinds,
        ["task", "statusUpdate", "artifactUpdate", "statusUpdate"],
        "{ev:?}"
    );
    let task = &ev[0]["task"];
    assert_eq!(state(task), "TASK_STATE_SUBMITTED");
    assert_eq!(
        ev[1]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert_eq!(ev[2]["artifactUpdate"]["artifact"]["name"], "stream");
    assert_eq!(
        ev[2]["artifactUpdate"]["artifact"]["parts"],
        json!([{"text": "Stream hello from TCK"}])
    );
    assert_eq!(ev[2]["artifactUpdate"]["lastChunk"], true);
    assert_eq!(
        ev[3]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    for e in &ev[1..] {
        let body = e.as_object().unwrap().values().next().unwrap();
        assert_eq!(body["taskId"], task["id"], "{e}");
        assert_eq!(body["contextId"], task["contextId"], "{e}");
    }
    let got = c.rpc_ok("tck", "GetTask", json!({"id": task["id"]})).await;
    assert_eq!(state(&got), "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn streaming_data_lines_are_each_a_whole_json_rpc_response() {
    let s = tck();
    let c = s.client();
    let resp = post_raw(
        &c,
        &format!("{}/a2a/tck", c.base),
        &[("A2A-Version", "1.0")],
        json!({"jsonrpc": "2.0", "id": 99, "method": "SendStreamingMessage",
               "params": {"message": message("tck-stream-003", "x")}}),
    )
    .await;
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = resp.text().await.unwrap();
    let data: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .collect();
    assert_eq!(data.len(), 4, "{text}");
    for d in data {
        let v: Value = serde_json::from_str(d.trim()).expect("each data line is JSON on its own");
        assert_eq!(v["jsonrpc"], "2.0");
        assert_eq!(v["id"], 99);
        assert!(v["result"].is_object(), "{v}");
    }
}

#[tokio::test]
async fn chunked_artifact_stream_appends_into_one_artifact() {
    let s = tck();
    let c = s.client();
    let events = c
        .rpc_stream(
            "tck",
            "SendStreamingMessage",
            json!({"message": message("tck-stream-artifact-chunked-1", "x")}),
        )
        .await;
    let ev = results(&events, &json!(7));
    let chunks: Vec<&Value> = ev.iter().filter_map(|e| e.get("artifactUpdate")).collect();
    assert_eq!(chunks.len(), 2, "{ev:?}");
    assert_eq!(chunks[0]["append"], true);
    assert!(
        chunks[0].get("lastChunk").is_none_or(|v| v == false),
        "{:?}",
        chunks[0]
    );
    assert_eq!(chunks[1]["append"], true);
    assert_eq!(chunks[1]["lastChunk"], true);
    assert_eq!(
        chunks[0]["artifact"]["artifactId"],
        chunks[1]["artifact"]["artifactId"]
    );
    assert_eq!(kind(ev.last().unwrap()), "statusUpdate");
    assert_eq!(
        ev.last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let task_id = &ev[0]["task"]["id"];
    let got = c.rpc_ok("tck", "GetTask", json!({"id": task_id})).await;
    let artifacts = got["artifacts"].as_array().unwrap();
    assert_eq!(artifacts.len(), 1, "{got}");
    assert_eq!(artifacts[0]["name"], "chunked");
    assert_eq!(
        artifacts[0]["artifactId"],
        chunks[0]["artifact"]["artifactId"]
    );
    assert_eq!(texts(&artifacts[0]["parts"]), ["chunk-1 ", "chunk-2"]);
}

#[tokio::test]
async fn message_response_stream_is_exactly_one_message() {
    let s = tck();
    let c = s.client();
    let events = c
        .rpc_stream(
            "tck",
            "SendStreamingMessage",
            json!({"message": message("tck-message-response-1", "x")}),
        )
        .await;
    let ev = results(&events, &json!(7));
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(kind(&ev[0]), "message");
    assert_eq!(
        texts(&ev[0]["message"]["parts"]),
        ["Direct message response"]
    );
}

#[tokio::test]
async fn stream_of_an_input_required_task_ends_at_the_interruption() {
    let s = tck();
    let c = s.client();
    let events = c
        .rpc_stream(
            "tck",
            "SendStreamingMessage",
            json!({"message": message("tck-input-required-1", "x")}),
        )
        .await;
    let ev = results(&events, &json!(7));
    let kinds: Vec<&str> = ev.iter().map(kind).collect();
    assert_eq!(kinds, ["task", "statusUpdate"], "{ev:?}");
    assert_eq!(
        ev[1]["statusUpdate"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
}

#[tokio::test]
async fn streaming_follow_up_on_a_task_streams_its_completion() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-input-required-1").await;
    let events = c
        .rpc_stream(
            "tck",
            "SendStreamingMessage",
            json!({"message": follow_up("tck-stream-002-x", &t["id"])}),
        )
        .await;
    let ev = results(&events, &json!(7));
    assert_eq!(ev[0]["task"]["id"], t["id"]);
    assert_eq!(
        ev.last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED",
        "{ev:?}"
    );
}

// ------------------------------------------------------------- Push configs

#[tokio::test]
async fn push_config_methods_create_get_list_and_delete() {
    let s = tck();
    let c = s.client();
    let t = send_task(&c, "tck-input-required-1").await;
    let id = t["id"].clone();
    let made = c
        .rpc_ok(
            "tck",
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "id": "cfg-1", "url": "http://127.0.0.1:9/hook", "token": "tk",
                   "authentication": {"scheme": "Bearer", "credentials": "c"}}),
        )
        .await;
    assert_eq!(made["id"], "cfg-1");
    assert_eq!(made["taskId"], id);
    let got = c
        .rpc_ok(
            "tck",
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": "cfg-1"}),
        )
        .await;
    assert_eq!(got["authentication"]["scheme"], "Bearer");
    let listed = c
        .rpc_ok(
            "tck",
            "ListTaskPushNotificationConfigs",
            json!({"taskId": id}),
        )
        .await;
    assert_eq!(listed["configs"].as_array().unwrap().len(), 1);
    c.rpc_ok(
        "tck",
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": id, "id": "cfg-1"}),
    )
    .await;
    // Deleting is idempotent; reading a deleted config is "not found".
    c.rpc_ok(
        "tck",
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": id, "id": "cfg-1"}),
    )
    .await;
    let err = c
        .rpc_err(
            "tck",
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": "cfg-1"}),
        )
        .await;
    assert_error(&err, -32001, "TASK_NOT_FOUND");
    let err = c
        .rpc_err(
            "tck",
            "ListTaskPushNotificationConfigs",
            json!({"taskId": "no-such-task"}),
        )
        .await;
    assert_error(&err, -32001, "TASK_NOT_FOUND");
    // Inline in a send: stored with the task, named after it.
    let sent = c
        .rpc_ok(
            "tck",
            "SendMessage",
            json!({"message": message("tck-input-required-p", "x"),
                   "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}}}),
        )
        .await;
    let tid = sent["task"]["id"].clone();
    let listed = c
        .rpc_ok(
            "tck",
            "ListTaskPushNotificationConfigs",
            json!({"taskId": tid}),
        )
        .await;
    assert_eq!(listed["configs"][0]["id"], tid, "{listed}");
    // A refused URL creates nothing.
    let err = c
        .rpc_err(
            "tck",
            "SendMessage",
            json!({"message": message("tck-complete-task-p", "x"),
                   "configuration": {"taskPushNotificationConfig": {"url": "http://192.168.0.9/hook"}}}),
        )
        .await;
    assert_error(&err, -32602, "INVALID_PARAMS");
    let list = c.rpc_ok("tck", "ListTasks", json!({})).await;
    assert_eq!(list["totalSize"], 2);
}

// ------------------------------------------------------- GetExtendedAgentCard

#[tokio::test]
async fn extended_card_not_declared_is_unsupported_operation() {
    let s = Server::start(Some(EXTENDED_CONFIG));
    let c = s.client();
    let err = c.rpc_err("plain", "GetExtendedAgentCard", json!({})).await;
    assert_error(&err, -32004, "UNSUPPORTED_OPERATION");
    let card: Value = c
        .http
        .get(format!("{}/a2a/plain/.well-known/agent-card.json", c.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_ne!(card["capabilities"]["extendedAgentCard"], true);
}

#[tokio::test]
async fn extended_card_declared_without_content_is_not_configured() {
    let s = Server::start(Some(EXTENDED_CONFIG));
    let c = s.client();
    let err = c
        .rpc_err("declared", "GetExtendedAgentCard", json!({}))
        .await;
    assert_error(&err, -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED");
}

#[tokio::test]
async fn extended_card_comes_from_the_extended_card_table() {
    let s = Server::start(Some(EXTENDED_CONFIG));
    let c = s.client();
    let card = c
        .rpc_ok("extended", "GetExtendedAgentCard", json!({}))
        .await;
    assert_eq!(card["description"], "The extended description");
    let skills: Vec<&str> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(skills, ["public-skill", "secret-skill"]);
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
    let public: Value = c
        .http
        .get(format!(
            "{}/a2a/extended/.well-known/agent-card.json",
            c.base
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(public["description"], "The public description");
    assert_eq!(public["skills"].as_array().unwrap().len(), 1);
    assert_eq!(public["capabilities"]["extendedAgentCard"], true);
}

// ------------------------------------------------- Endpoint and versioning

#[tokio::test]
async fn trailing_slash_endpoint_serves_json_rpc_too() {
    let s = tck();
    let c = s.client();
    let resp = post_raw(
        &c,
        &format!("{}/a2a/tck/", c.base),
        &[("A2A-Version", "1.0")],
        json!({"jsonrpc": "2.0", "id": "slash", "method": "SendMessage",
               "params": {"message": message("tck-complete-task-1", "x")}}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["id"], "slash");
    assert_eq!(
        state(&body["result"]["task"]),
        "TASK_STATE_COMPLETED",
        "{body}"
    );
}

#[tokio::test]
async fn a_1_0_method_without_a2a_version_is_answered_as_1_0() {
    // The spec reads a missing header as 0.3, but 0.3 has no PascalCase
    // methods: the method name decides.
    let s = tck();
    let c = s.client();
    let resp = post_raw(
        &c,
        &format!("{}/a2a/tck", c.base),
        &[],
        json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}),
    )
    .await;
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["id"], 1);
    assert_eq!(body["result"]["totalSize"], 0, "{body}");
}

#[tokio::test]
async fn unsupported_or_contradicting_a2a_version_is_refused_and_does_nothing() {
    let s = tck();
    let c = s.client();
    for (v, code, reason) in [
        ("99.0", -32009, "VERSION_NOT_SUPPORTED"),
        ("0.3", -32601, "METHOD_NOT_FOUND"),
    ] {
        let resp = post_raw(
            &c,
            &format!("{}/a2a/tck", c.base),
            &[("A2A-Version", v)],
            json!({"jsonrpc": "2.0", "id": 2, "method": "SendMessage",
                   "params": {"message": message("tck-complete-task-1", "x")}}),
        )
        .await;
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], json!(code), "{v}: {body}");
        assert_eq!(body["error"]["data"][0]["reason"], reason, "{v}: {body}");
    }
    // Nothing was done.
    let list = c.rpc_ok("tck", "ListTasks", json!({})).await;
    assert_eq!(list["totalSize"], 0);
}

#[tokio::test]
async fn a2a_version_query_parameter_is_accepted() {
    let s = tck();
    let c = s.client();
    let resp = post_raw(
        &c,
        &format!("{}/a2a/tck?A2A-Version=1.0", c.base),
        &[],
        json!({"jsonrpc": "2.0", "id": 3, "method": "SendMessage",
               "params": {"message": message("tck-complete-task-1", "x")}}),
    )
    .await;
    let body: Value = resp.json().await.unwrap();
    assert!(body.get("error").is_none(), "{body}");
    assert_eq!(state(&body["result"]["task"]), "TASK_STATE_COMPLETED");
}
