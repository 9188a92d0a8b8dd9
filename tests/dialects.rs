//! The v0.3 and pre-0.3 JSON-RPC dialects on the same endpoints as v1.0,
//! and tasks moving between dialects.
mod common;
use common::*;

use serde_json::{Value, json};

/// A JSON-RPC call with no A2A-Version header (as v0.3 clients send them).
async fn rpc03(c: &Client, method: &str, params: Value) -> Value {
    c.http
        .post(format!("{}/a2a/tck", c.base))
        .json(&json!({"jsonrpc": "2.0", "id": "r-1", "method": method, "params": params}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn msg03(message_id: &str, text: &str) -> Value {
    json!({"kind": "message", "messageId": message_id, "role": "user", "parts": [{"kind": "text", "text": text}]})
}

#[tokio::test]
async fn message_send_answers_a_v0_3_task() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    let r = rpc03(
        &c,
        "message/send",
        json!({"message": msg03("tck-artifact-file-1", "hi")}),
    )
    .await;
    let t = &r["result"];
    assert_eq!(t["kind"], "task", "{r}");
    assert_eq!(t["status"]["state"], "completed");
    assert_eq!(t["status"]["message"]["role"], "agent");
    assert_eq!(t["status"]["message"]["kind"], "message");
    let part = &t["artifacts"][0]["parts"][0];
    assert_eq!(
        part,
        &json!({"kind": "file", "file": {"name": "output.txt", "mimeType": "text/plain", "bytes": "dGNr"}})
    );
    assert_eq!(t["history"][0]["parts"][0]["kind"], "text");
    // No v1.0 spellings leak into a v0.3 answer.
    let text = r.to_string();
    assert!(
        !text.contains("TASK_STATE_") && !text.contains("ROLE_"),
        "{text}"
    );
}

#[tokio::test]
async fn message_send_with_blocking_false_returns_at_once() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    let r = rpc03(
        &c,
        "message/send",
        json!({"message": msg03("test-resubscribe-message-id-1", "slow"), "configuration": {"blocking": false}}),
    )
    .await;
    let state = r["result"]["status"]["state"].as_str().unwrap();
    assert!(state == "submitted" || state == "working", "{r}");
}

#[tokio::test]
async fn message_stream_events_have_kinds_and_the_last_is_final() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    let resp = c
        .http
        .post(format!("{}/a2a/tck", c.base))
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "message/stream", "params": {"message": msg03("tck-stream-001-a", "go")}}))
        .send()
        .await
        .unwrap();
    let events = collect_sse(resp).await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["result"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["task", "status-update", "artifact-update", "status-update"]
    );
    assert!(events.iter().all(|e| e["id"] == 9 && e["jsonrpc"] == "2.0"));
    let last = &events[3]["result"];
    assert_eq!(last["status"]["state"], "completed");
    assert_eq!(last["final"], true);
    assert_eq!(events[1]["result"]["final"], false);
}

#[tokio::test]
async fn tasks_get_cancel_and_resubscribe_in_v0_3() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    let r = rpc03(
        &c,
        "message/send",
        json!({"message": msg03("tck-input-required-1", "wait")}),
    )
    .await;
    let id = r["result"]["id"].clone();
    assert_eq!(r["result"]["status"]["state"], "input-required");
    let got = rpc03(&c, "tasks/get", json!({"id": id, "historyLength": 1})).await;
    assert_eq!(got["result"]["kind"], "task");
    assert_eq!(got["result"]["history"].as_array().unwrap().len(), 1);

    // A resubscription sees the snapshot, then the cancel, then ends.
    let resp = c
        .http
        .post(format!("{}/a2a/tck", c.base))
        .json(&json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/resubscribe", "params": {"id": id}}))
        .send()
        .await
        .unwrap();
    let mut sub = SseStream::new(resp);
    let first = sub.next().await.unwrap();
    assert_eq!(first["result"]["kind"], "task");
    let canceled = rpc03(&c, "tasks/cancel", json!({"id": id})).await;
    assert_eq!(
        canceled["result"]["status"]["state"], "canceled",
        "{canceled}"
    );
    let events = sub.rest().await;
    let last = &events.last().unwrap()["result"];
    assert_eq!(last["status"]["state"], "canceled", "{events:?}");
    assert_eq!(last["final"], true);

    let again = rpc03(&c, "tasks/cancel", json!({"id": id})).await;
    assert_eq!(again["error"]["code"], -32002, "{again}");
    let missing = rpc03(&c, "tasks/get", json!({"id": "nope"})).await;
    assert_eq!(missing["error"]["code"], -32001);
}

#[tokio::test]
async fn v0_3_follow_up_continues_an_input_required_task() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    let r = rpc03(
        &c,
        "message/send",
        json!({"message": msg03("tck-input-required-2", "wait")}),
    )
    .await;
    let (id, ctx) = (r["result"]["id"].clone(), r["result"]["contextId"].clone());
    let mut follow = msg03("tck-complete-task-2", "done");
    follow["taskId"] = id.clone();
    follow["contextId"] = ctx;
    let r = rpc03(&c, "message/send", json!({"message": follow})).await;
    assert_eq!(r["result"]["id"], id);
    assert_eq!(r["result"]["status"]["state"], "completed");
}

#[tokio::test]
async fn a_task_created_in_one_dialect_is_read_streamed_and_canceled_in_the_other() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    // v0.3 → v1.0
    let r = rpc03(
        &c,
        "message/send",
        json!({"message": msg03("tck-input-required-3", "wait")}),
    )
    .await;
    let id = r["result"]["id"].clone();
    let v1 = c.rpc_ok("tck", "GetTask", json!({"id": id})).await;
    assert_eq!(v1["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(v1["history"][0]["role"], "ROLE_USER");
    let canceled = c.rpc_ok("tck", "CancelTask", json!({"id": id})).await;
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
    // v1.0 → v0.3
    let r = c.send_text("tck", "tck-input-required-4", "wait").await;
    let id = r["task"]["id"].clone();
    let got = rpc03(&c, "tasks/get", json!({"id": id})).await;
    assert_eq!(got["result"]["status"]["state"], "input-required");
    assert_eq!(got["result"]["kind"], "task");
    let resp = c
        .http
        .post(format!("{}/a2a/tck", c.base))
        .json(&json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/resubscribe", "params": {"id": id}}))
        .send()
        .await
        .unwrap();
    let mut sub = SseStream::new(resp);
    assert_eq!(sub.next().await.unwrap()["result"]["kind"], "task");
    let follow = follow_up(&id, "tck-complete-task-5", "finish");
    c.rpc_ok("tck", "SendMessage", json!({"message": follow}))
        .await;
    let events = sub.rest().await;
    assert_eq!(
        events.last().unwrap()["result"]["status"]["state"],
        "completed"
    );
}

#[tokio::test]
async fn v0_3_push_config_methods_work_in_0_3_shapes() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    let task = rpc03(
        &c,
        "message/send",
        json!({"message": msg03("tck-input-required-p", "x")}),
    )
    .await;
    let id = task["result"]["id"].as_str().unwrap().to_owned();
    let set = rpc03(
        &c,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {"id": "p", "url": "http://127.0.0.1:9/h", "token": "tk"}}),
    )
    .await;
    assert_eq!(set["result"]["taskId"], id.as_str(), "{set}");
    assert_eq!(
        set["result"]["pushNotificationConfig"]["url"],
        "http://127.0.0.1:9/h"
    );
    let got = rpc03(
        &c,
        "tasks/pushNotificationConfig/get",
        json!({"id": id, "pushNotificationConfigId": "p"}),
    )
    .await;
    assert_eq!(
        got["result"]["pushNotificationConfig"]["token"], "tk",
        "{got}"
    );
    let listed = rpc03(&c, "tasks/pushNotificationConfig/list", json!({"id": id})).await;
    assert_eq!(listed["result"].as_array().unwrap().len(), 1, "{listed}");
    let deleted = rpc03(
        &c,
        "tasks/pushNotificationConfig/delete",
        json!({"id": id, "pushNotificationConfigId": "p"}),
    )
    .await;
    assert!(
        deleted["result"].is_null() && deleted.get("error").is_none(),
        "{deleted}"
    );
    // Unnamed: a fresh id; a get by task id alone finds the task's only config.
    let unnamed = rpc03(
        &c,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {"url": "http://127.0.0.1:9/u"}}),
    )
    .await;
    let unnamed_id = unnamed["result"]["pushNotificationConfig"]["id"]
        .as_str()
        .unwrap();
    assert!(!unnamed_id.is_empty() && unnamed_id != id, "{unnamed}");
    let by_task = rpc03(&c, "tasks/pushNotificationConfig/get", json!({"id": id})).await;
    assert_eq!(
        by_task["result"]["pushNotificationConfig"]["url"], "http://127.0.0.1:9/u",
        "{by_task}"
    );
    let missing = rpc03(
        &c,
        "tasks/pushNotificationConfig/list",
        json!({"id": "no-such-task"}),
    )
    .await;
    assert_eq!(missing["error"]["code"], -32001, "{missing}");
    // A private webhook is refused with the reason, in the 0.3 error shape.
    let refused = rpc03(
        &c,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {"url": "http://10.9.9.9/h"}}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

#[tokio::test]
async fn v0_3_errors_and_dialect_mismatches_are_clear() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    let r = rpc03(&c, "message/send", json!({"message": {"kind": "message", "messageId": "m", "role": "robot", "parts": [{"kind": "text", "text": "x"}]}})).await;
    assert_eq!(r["error"]["code"], -32602);
    assert!(
        r["error"]["message"].as_str().unwrap().contains("role"),
        "{r}"
    );
    let r = rpc03(&c, "message/send", json!({"message": {"kind": "message", "role": "user", "parts": [{"kind": "text", "text": "x"}]}})).await;
    assert_eq!(
        r["error"]["code"], -32602,
        "messageId is required in 0.3: {r}"
    );
    // A 0.3 method under an explicit 1.0 header is refused with the 1.0 name.
    let r = c
        .rpc("tck", "message/send", json!({"message": msg03("x", "y")}))
        .await;
    assert_eq!(r["error"]["code"], -32601);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("SendMessage"),
        "{r}"
    );
    let r = rpc03(&c, "agent/getAuthenticatedExtendedCard", json!({})).await;
    assert_eq!(r["error"]["code"], -32004, "{r}");
}

#[tokio::test]
async fn legacy_tasks_send_uses_the_client_task_id_and_session() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    let r = rpc03(
        &c,
        "tasks/send",
        json!({"id": "client-task-7", "sessionId": "session-7",
               "message": {"role": "user", "parts": [{"type": "text", "text": "please wait"}]}}),
    )
    .await;
    let t = &r["result"];
    assert_eq!(t["id"], "client-task-7", "{r}");
    assert_eq!(t["sessionId"], "session-7");
    assert_eq!(t["status"]["state"], "completed");
    assert!(
        t.get("kind").is_none() && t.get("contextId").is_none(),
        "{t}"
    );
    assert_eq!(t["history"][0]["parts"][0]["type"], "text");
    // tasks/get answers a legacy task in legacy shapes.
    let got = rpc03(&c, "tasks/get", json!({"id": "client-task-7"})).await;
    assert_eq!(got["result"]["sessionId"], "session-7", "{got}");
    // The same id again continues the task, which is finished now.
    let again = rpc03(&c, "tasks/send", json!({"id": "client-task-7", "message": {"role": "user", "parts": [{"type": "text", "text": "more"}]}})).await;
    assert_eq!(again["error"]["code"], -32004, "{again}");
    // A bad client id is refused.
    let bad = rpc03(&c, "tasks/send", json!({"id": "has space", "message": {"role": "user", "parts": [{"type": "text", "text": "x"}]}})).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}

#[tokio::test]
async fn legacy_send_subscribe_streams_updates_with_final() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    let resp = c
        .http
        .post(format!("{}/a2a/tck", c.base))
        .json(&json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/sendSubscribe",
                      "params": {"id": "legacy-stream-1", "sessionId": "s",
                                 "message": {"role": "user", "parts": [{"type": "text", "text": "hi"}]}}}))
        .send()
        .await
        .unwrap();
    let events = collect_sse(resp).await;
    assert!(
        events
            .iter()
            .all(|e| e["result"]["id"] == "legacy-stream-1"),
        "{events:?}"
    );
    assert!(events.iter().all(|e| e["result"].get("kind").is_none()));
    let last = &events.last().unwrap()["result"];
    assert_eq!(last["status"]["state"], "completed");
    assert_eq!(last["final"], true);
}

// ------------------------------------------------------------ v0.3 HTTP+JSON

fn rest03_message(message_id: &str, text: &str) -> Value {
    json!({"messageId": message_id, "role": "ROLE_USER", "content": [{"text": text}]})
}

#[tokio::test]
async fn v0_3_rest_send_get_and_cancel_use_proto_json() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    let url = |p: &str| format!("{}/a2a/tck/v1{p}", c.base);
    let r: Value = c
        .http
        .post(url("/message:send"))
        .json(&json!({"message": rest03_message("tck-artifact-data-1", "hi"), "configuration": {"blocking": true}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let t = &r["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert_eq!(t["status"]["message"]["role"], "ROLE_AGENT");
    assert!(t["status"]["message"]["content"].is_array(), "{r}");
    assert_eq!(
        t["artifacts"][0]["parts"][0]["data"]["data"],
        json!({"key": "value", "count": 42})
    );
    // The proto field names (`request`, `message_id`) are accepted too.
    let r: Value = c
        .http
        .post(url("/message:send"))
        .json(&json!({"request": {"message_id": "tck-input-required-9", "role": "ROLE_USER", "content": [{"text": "wait"}]}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = r["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    // ... and the answer spells them the caller's way.
    assert!(r["task"]["context_id"].is_string(), "{r}");
    assert!(r["task"].get("contextId").is_none(), "{r}");
    assert!(
        r["task"]["status"]["message"]["message_id"].is_string(),
        "{r}"
    );
    let got: Value = c
        .http
        .get(url(&format!("/tasks/{id}?historyLength=1")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["id"], json!(id));
    assert_eq!(got["history"].as_array().unwrap().len(), 1);
    let canceled: Value = c
        .http
        .post(url(&format!("/tasks/{id}:cancel")))
        .json(&json!({"name": format!("tasks/{id}")}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELLED");
    let resp = c.http.get(url("/tasks/nope")).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 404);
}

#[tokio::test]
async fn v0_3_rest_stream_marks_the_last_update_final() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    let resp = c
        .http
        .post(format!("{}/a2a/tck/v1/message:stream", c.base))
        .json(&json!({"message": rest03_message("tck-stream-001-r", "go")}))
        .send()
        .await
        .unwrap();
    let events = collect_sse(resp).await;
    let keys: Vec<&str> = events
        .iter()
        .map(|e| e.as_object().unwrap().keys().next().unwrap().as_str())
        .collect();
    assert_eq!(
        keys,
        ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
    );
    assert_eq!(events[3]["statusUpdate"]["final"], true);
    assert_eq!(
        events[3]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[tokio::test]
async fn v1_as_a_tenant_is_used_when_the_caller_says_1_0() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    let (status, body) = c
        .rest(
            reqwest::Method::POST,
            "tck",
            "/v1/message:send",
            Some(json!({"message": message("tck-complete-task-t", "x")})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["task"]["status"]["state"], "TASK_STATE_COMPLETED");
}

// ------------------------------------------------------------ cards

#[tokio::test]
async fn cards_are_merged_for_headerless_callers_and_strict_for_1_0_or_by_config() {
    let s = Server::start(Some("[[agents]]\nid = \"tck\"\n"));
    let c = s.client();
    let get = |path: &str, v1: bool| {
        let mut req = c.http.get(format!("{}{path}", c.base));
        if v1 {
            req = req.header("A2A-Version", "1.0");
        }
        async move { req.send().await.unwrap() }
    };
    // A header-less caller may be a 0.3 client: it gets the merged card.
    let root: Value = get("/.well-known/agent-card.json", false)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(root["url"], format!("{}/a2a/tck", c.base));
    assert_eq!(root["preferredTransport"], "JSONRPC");
    assert_eq!(root["protocolVersion"], "0.3.0");
    let versions: Vec<&str> = root["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["protocolVersion"].as_str().unwrap())
        .collect();
    assert_eq!(
        versions,
        ["1.0", "1.0", "0.3", "0.3"],
        "1.0 interfaces come first"
    );
    // A 1.0 caller gets the strict card.
    for path in [
        "/.well-known/agent-card.json",
        "/a2a/tck/.well-known/agent-card.json",
    ] {
        let resp = get(path, true).await;
        assert!(
            resp.headers()["vary"]
                .to_str()
                .unwrap()
                .contains("A2A-Version")
        );
        let strict: Value = resp.json().await.unwrap();
        for k in [
            "url",
            "preferredTransport",
            "protocolVersion",
            "additionalInterfaces",
        ] {
            assert!(strict.get(k).is_none(), "{path}: the strict card has {k}");
        }
    }
    let merged: Value = get("/a2a/tck/.well-known/agent-card.json", false)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(merged["url"], format!("{}/a2a/tck", c.base));
    // `[cards] compat = "strict"` (the 1.0 TCK config) serves the strict card to
    // everyone; agent.json stays merged.
    let strict_server = Server::start(Some(TCK_CONFIG));
    let sc = strict_server.client();
    let root: Value = sc
        .http
        .get(format!("{}/.well-known/agent-card.json", sc.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(root.get("url").is_none());
    for path in ["/.well-known/agent.json", "/a2a/tck/.well-known/agent.json"] {
        let legacy: Value = sc
            .http
            .get(format!("{}{path}", sc.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(legacy["url"], format!("{}/a2a/tck", sc.base), "{path}");
    }
}

#[tokio::test]
async fn merged_card_carries_both_security_shapes() {
    let config = r#"
[access]
[[access.credentials]]
name = "ci"
bearer = "0123456789abcdef0123"
[[agents]]
id = "inbox"
"#;
    let s = Server::start(Some(config));
    let c = s.client();
    let merged: Value = c
        .http
        .get(format!("{}/a2a/inbox/.well-known/agent-card.json", c.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let scheme = &merged["securitySchemes"]["bearer"];
    assert_eq!(
        scheme["httpAuthSecurityScheme"]["scheme"], "Bearer",
        "{merged}"
    );
    assert_eq!(scheme["type"], "http");
    assert_eq!(merged["security"], json!([{"bearer": []}]));
    assert_eq!(
        merged["securityRequirements"][0]["schemes"]["bearer"],
        json!({"list": []})
    );
}

#[tokio::test]
async fn a_retried_follow_up_is_answered_but_not_acted_on_twice() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    let r = c.send_text("tck", "tck-input-required-r", "wait").await;
    let id = r["task"]["id"].clone();
    let follow = follow_up(&id, "tck-complete-task-r", "finish");
    let first = c
        .rpc_ok("tck", "SendMessage", json!({"message": follow.clone()}))
        .await;
    assert_eq!(first["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    // The same message again (a retry): the task as it is, no error, no second copy.
    let again = c
        .rpc_ok("tck", "SendMessage", json!({"message": follow}))
        .await;
    assert_eq!(again["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let t = c.rpc_ok("tck", "GetTask", json!({"id": id})).await;
    let copies = t["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["messageId"] == "tck-complete-task-r")
        .count();
    assert_eq!(copies, 1);
}

#[tokio::test]
async fn an_id_reused_for_other_content_is_another_message_not_a_retry() {
    // Some clients (the A2A TCK among them) give every message of a
    // conversation one id: each must still reach the task, in order.
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    let r = c.send_text("tck", "tck-input-required-same", "start").await;
    let id = r["task"]["id"].clone();
    for text in ["history 1", "history 2"] {
        let follow = follow_up(&id, "tck-input-required-same", text);
        let r = c
            .rpc_ok("tck", "SendMessage", json!({"message": follow}))
            .await;
        assert_eq!(r["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    }
    let last = follow_up(&id, "tck-complete-task-same", "done");
    let done = c
        .rpc_ok("tck", "SendMessage", json!({"message": last}))
        .await;
    assert_eq!(done["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let t = c
        .rpc_ok("tck", "GetTask", json!({"id": id, "historyLength": 10}))
        .await;
    let users: Vec<&str> = t["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "ROLE_USER")
        .map(|m| m["parts"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["start", "history 1", "history 2", "done"]);
}

/// A 1.0 message continuing the task `task_id`.
fn follow_up(task_id: &Value, message_id: &str, text: &str) -> Value {
    let mut m = message(message_id, text);
    m["taskId"] = task_id.clone();
    m
}
