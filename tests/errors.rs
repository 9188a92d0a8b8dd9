//! Bad input always gets a clear error in the binding's own shape: never a
//! crash, never a half-written task.

mod common;
use common::*;

use reqwest::Method;
use serde_json::{Value, json};

/// Small limits so each one is easy to cross; `strict` takes only text,
/// `inbox` parks every task for a person.
const CONFIG: &str = r#"
[limits]
max_body_bytes = 2048
max_parts = 2
max_json_depth = 8
max_history = 3
max_push_configs = 2

[outbound]
allow = ["127.0.0.1"]

[[agents]]
id = "strict"
backend = "scripted"
input_modes = ["text/plain"]

[[agents.rules]]
message_id_prefix = "done"
steps = [{ complete = "done" }]

[[agents]]
id = "inbox"
"#;

const ERROR_INFO: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// A raw HTTP answer.
struct Reply {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
    text: String,
}

/// Sends `body` as is, with `content_type` (none when `None`).
async fn send_raw(
    s: &Server,
    method: Method,
    path: &str,
    content_type: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> Reply {
    let mut req = reqwest::Client::new()
        .request(method, s.url(path))
        .header("A2A-Version", "1.0")
        .body(body);
    if let Some(ct) = content_type {
        req = req.header("Content-Type", ct);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let text = resp.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        body,
        text,
    }
}

/// POSTs raw bytes to the JSON-RPC endpoint of `agent` as application/json.
async fn rpc_raw(s: &Server, agent: &str, body: impl Into<reqwest::Body>) -> Reply {
    send_raw(
        s,
        Method::POST,
        &format!("/a2a/{agent}"),
        Some("application/json"),
        body,
    )
    .await
}

/// Checks a JSON-RPC error answer and returns its message.
fn rpc_error(r: &Reply, code: i64) -> String {
    assert_eq!(
        r.body["jsonrpc"], "2.0",
        "not a JSON-RPC answer ({}): {}",
        r.status, r.text
    );
    assert!(
        r.body.get("result").is_none(),
        "should have failed: {}",
        r.text
    );
    assert!(
        r.body.get("id").is_some(),
        "a JSON-RPC error always carries `id`: {}",
        r.text
    );
    let e = &r.body["error"];
    assert_eq!(e["code"], json!(code), "wrong code: {}", r.text);
    assert_eq!(e["data"][0]["@type"], ERROR_INFO, "{}", r.text);
    assert_eq!(e["data"][0]["domain"], "a2a-protocol.org", "{}", r.text);
    let msg = e["message"].as_str().expect("error.message is a string");
    assert!(!msg.trim().is_empty(), "empty error message: {}", r.text);
    assert!(
        r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"),
        "{:?}",
        r.headers
    );
    msg.to_owned()
}

/// Checks an AIP-193 error body (`{"error":{code,status,message,details}}`)
/// and returns (message, ErrorInfo reason).
fn rest_error(status: u16, body: &Value, want: u16) -> (String, String) {
    assert_eq!(status, want, "wrong HTTP status: {body}");
    let e = &body["error"];
    assert_eq!(
        e["code"],
        json!(want),
        "error.code must repeat the HTTP status: {body}"
    );
    assert!(
        e["status"].as_str().is_some_and(|s| !s.is_empty()),
        "error.status: {body}"
    );
    let msg = e["message"].as_str().expect("error.message is a string");
    assert!(!msg.trim().is_empty(), "empty error message: {body}");
    assert_eq!(e["details"][0]["@type"], ERROR_INFO, "{body}");
    assert_eq!(e["details"][0]["domain"], "a2a-protocol.org", "{body}");
    let reason = e["details"][0]["reason"]
        .as_str()
        .expect("reason")
        .to_owned();
    (msg.to_owned(), reason)
}

/// How many tasks `agent` holds for this (unauthenticated, loopback) caller,
/// asked over both bindings.
async fn task_count(c: &Client, agent: &str) -> usize {
    let r = c.rpc_ok(agent, "ListTasks", json!({})).await;
    let n = r["tasks"].as_array().expect("tasks array").len();
    assert_eq!(r["totalSize"], json!(n), "{r}");
    let (status, body) = c.rest(Method::GET, agent, "/tasks", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["tasks"].as_array().expect("tasks array").len(),
        n,
        "bindings disagree: {body}"
    );
    n
}

fn envelope(method: &str, params: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .unwrap()
}

#[tokio::test]
async fn body_over_the_limit_is_413_on_both_bindings_and_the_server_keeps_serving() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let big = json!({"message": message("big-1", &"x".repeat(8 * 1024))});

    let r = rpc_raw(&s, "strict", envelope("SendMessage", big.clone())).await;
    assert_eq!(r.status, 413, "{}", r.text);
    let msg = rpc_error(&r, -32600);
    assert_eq!(r.body["id"], Value::Null);
    assert!(
        msg.contains("2048"),
        "the message should state the limit: {msg}"
    );
    assert_eq!(r.body["error"]["data"][0]["reason"], "PAYLOAD_TOO_LARGE");

    let r = send_raw(
        &s,
        Method::POST,
        "/a2a/strict/message:send",
        Some("application/json"),
        serde_json::to_vec(&big).unwrap(),
    )
    .await;
    let (msg, reason) = rest_error(r.status, &r.body, 413);
    assert_eq!(reason, "PAYLOAD_TOO_LARGE");
    assert_eq!(r.body["error"]["status"], "RESOURCE_EXHAUSTED");
    assert!(msg.contains("2048"), "{msg}");

    // A body without Content-Length (chunked) is cut off at the limit too.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        (0..16).map(|_| Ok(vec![b' '; 1024])).collect();
    let r = rpc_raw(
        &s,
        "strict",
        reqwest::Body::wrap_stream(futures::stream::iter(chunks)),
    )
    .await;
    assert_eq!(r.status, 413, "{}", r.text);
    rpc_error(&r, -32600);

    // Far over the limit, in one piece: still a clean 413, not a reset.
    let huge = json!({"message": message("big-2", &"y".repeat(256 * 1024))});
    let r = send_raw(
        &s,
        Method::POST,
        "/a2a/strict/message:send",
        Some("application/json"),
        serde_json::to_vec(&huge).unwrap(),
    )
    .await;
    rest_error(r.status, &r.body, 413);

    assert_eq!(
        task_count(&c, "strict").await,
        0,
        "a refused body must not create a task"
    );
    let ok = c.send_text("strict", "done-1", "small enough").await;
    assert_eq!(state(&ok["task"]), "TASK_STATE_COMPLETED");
    assert_eq!(task_count(&c, "strict").await, 1);
}

#[tokio::test]
async fn too_many_parts_is_invalid_params_on_both_bindings() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let m = json!({"messageId": "parts-1", "role": "ROLE_USER", "parts": [{"text": "a"}, {"text": "b"}, {"text": "c"}]});

    let e = c
        .rpc_err("strict", "SendMessage", json!({"message": m}))
        .await;
    assert_eq!(e["code"], -32602, "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("3 parts") && msg.contains("limit is 2"),
        "{msg}"
    );

    let (status, body) = c
        .rest(
            Method::POST,
            "strict",
            "/message:send",
            Some(json!({"message": m})),
        )
        .await;
    let (msg, reason) = rest_error(status, &body, 400);
    assert_eq!(reason, "INVALID_PARAMS");
    assert!(msg.contains("limit is 2"), "{msg}");
    assert_eq!(task_count(&c, "strict").await, 0);

    // Exactly at the limit is fine.
    let m2 = json!({"messageId": "done-2", "role": "ROLE_USER", "parts": [{"text": "a"}, {"text": "b"}]});
    let r = c
        .rpc_ok("strict", "SendMessage", json!({"message": m2}))
        .await;
    assert_eq!(state(&r["task"]), "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn json_nested_deeper_than_the_limit_is_invalid_request_on_json_rpc_and_400_on_rest() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let deep = format!("{}1{}", "[".repeat(20), "]".repeat(20));
    let msg = format!(
        r#"{{"messageId":"deep-1","role":"ROLE_USER","parts":[{{"text":"x"}}],"metadata":{{"deep":{deep}}}}}"#
    );

    let r = rpc_raw(
        &s,
        "strict",
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{msg}}}}}"#
        ),
    )
    .await;
    let m = rpc_error(&r, -32600);
    assert!(m.contains("nested deeper than 8"), "{m}");

    let r = send_raw(
        &s,
        Method::POST,
        "/a2a/strict/message:send",
        Some("application/json"),
        format!(r#"{{"message":{msg}}}"#),
    )
    .await;
    let (m, reason) = rest_error(r.status, &r.body, 400);
    assert_eq!(reason, "INVALID_REQUEST");
    assert!(m.contains("nested deeper than 8"), "{m}");

    // Brackets inside strings are not nesting.
    let text = "[".repeat(50);
    let ok = c.send_text("strict", "done-3", &text).await;
    assert_eq!(state(&ok["task"]), "TASK_STATE_COMPLETED");
    assert_eq!(task_count(&c, "strict").await, 1);
}

#[tokio::test]
async fn malformed_json_is_a_parse_error_with_a_null_id() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage",}"#,
        "not json at all",
        "",
    ] {
        let r = rpc_raw(&s, "strict", body).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let m = rpc_error(&r, -32700);
        assert_eq!(
            r.body["id"],
            Value::Null,
            "the id of an unparseable request is null: {}",
            r.text
        );
        assert_eq!(r.body["error"]["data"][0]["reason"], "JSON_PARSE");
        assert!(!m.is_empty());
    }
    let r = send_raw(
        &s,
        Method::POST,
        "/a2a/strict/message:send",
        Some("application/json"),
        r#"{"message": {"#,
    )
    .await;
    let (_, reason) = rest_error(r.status, &r.body, 400);
    assert_eq!(reason, "JSON_PARSE");
    assert_eq!(task_count(&c, "strict").await, 0);
}

#[tokio::test]
async fn invalid_utf8_body_is_a_parse_error() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let mut body = br#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"u-1","role":"ROLE_USER","parts":[{"text":""#.to_vec();
    body.extend_from_slice(&[0xff, 0xfe, 0xc3]);
    body.extend_from_slice(br#""}]}}}"#);

    let r = rpc_raw(&s, "strict", body.clone()).await;
    let m = rpc_error(&r, -32700);
    assert_eq!(r.body["id"], Value::Null);
    assert!(m.contains("UTF-8"), "{m}");

    let rest_body = body[body.iter().position(|b| *b == b'{').unwrap() + 1..].to_vec();
    let r = send_raw(
        &s,
        Method::POST,
        "/a2a/strict/message:send",
        Some("application/json"),
        [b"{\"x\":1,".as_slice(), &rest_body].concat(),
    )
    .await;
    let (m, reason) = rest_error(r.status, &r.body, 400);
    assert_eq!(reason, "JSON_PARSE");
    assert!(m.contains("UTF-8"), "{m}");
    assert_eq!(task_count(&c, "strict").await, 0);
}

#[tokio::test]
async fn wrongly_typed_send_message_params_are_refused_on_both_bindings_naming_the_problem() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let cases = [
        (
            "parts is a string",
            json!({"message": {"messageId": "w-1", "role": "ROLE_USER", "parts": "hello"}}),
            "parts",
        ),
        (
            "parts is empty",
            json!({"message": {"messageId": "w-2", "role": "ROLE_USER", "parts": []}}),
            "at least one part",
        ),
        (
            "parts missing",
            json!({"message": {"messageId": "w-3", "role": "ROLE_USER"}}),
            "parts",
        ),
        (
            "role in the 0.3 spelling",
            json!({"message": {"messageId": "w-4", "role": "user", "parts": [{"text": "x"}]}}),
            "ROLE_USER",
        ),
        (
            "role missing",
            json!({"message": {"messageId": "w-5", "parts": [{"text": "x"}]}}),
            "role",
        ),
        (
            "role of an agent",
            json!({"message": {"messageId": "w-6", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}}),
            "ROLE_USER",
        ),
        (
            "messageId empty",
            json!({"message": {"messageId": "", "role": "ROLE_USER", "parts": [{"text": "x"}]}}),
            "messageId",
        ),
        (
            "messageId missing",
            json!({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}),
            "messageId",
        ),
        (
            "messageId a number",
            json!({"message": {"messageId": 7, "role": "ROLE_USER", "parts": [{"text": "x"}]}}),
            "messageId",
        ),
        (
            "part with text and url",
            json!({"message": {"messageId": "w-7", "role": "ROLE_USER", "parts": [{"text": "x", "url": "https://example.com/a"}]}}),
            "exactly one of",
        ),
        (
            "part with no content",
            json!({"message": {"messageId": "w-8", "role": "ROLE_USER", "parts": [{"filename": "a.txt"}]}}),
            "one of `text`",
        ),
        (
            "raw that is not base64",
            json!({"message": {"messageId": "w-9", "role": "ROLE_USER", "parts": [{"raw": "not base64!!", "mediaType": "text/plain"}]}}),
            "base64",
        ),
        (
            "text that is a number",
            json!({"message": {"messageId": "w-10", "role": "ROLE_USER", "parts": [{"text": 42}]}}),
            "text",
        ),
        ("message missing", json!({}), "message"),
        (
            "message is a string",
            json!({"message": "hello"}),
            "message",
        ),
        (
            "configuration of the wrong type",
            json!({"message": message("w-11", "x"), "configuration": {"historyLength": "lots"}}),
            "historyLength",
        ),
    ];
    for (what, params, needle) in cases {
        let e = c.rpc_err("strict", "SendMessage", params.clone()).await;
        assert_eq!(e["code"], -32602, "{what}: {e}");
        assert_eq!(e["data"][0]["reason"], "INVALID_PARAMS", "{what}: {e}");
        let msg = e["message"].as_str().unwrap();
        assert!(
            msg.contains(needle),
            "{what}: the JSON-RPC error should mention `{needle}`: {msg}"
        );

        let (status, body) = c
            .rest(
                Method::POST,
                "strict",
                "/message:send",
                Some(params.clone()),
            )
            .await;
        let (msg, reason) = rest_error(status, &body, 400);
        assert_eq!(reason, "INVALID_PARAMS", "{what}: {body}");
        assert!(
            msg.contains(needle),
            "{what}: the REST error should mention `{needle}`: {msg}"
        );

        // The streaming send refuses the same way, before any stream opens.
        let e = c
            .rpc_err("strict", "SendStreamingMessage", params.clone())
            .await;
        assert_eq!(e["code"], -32602, "{what} (streaming): {e}");

        assert_eq!(
            task_count(&c, "strict").await,
            0,
            "{what}: a refused message left a task behind"
        );
    }
}

#[tokio::test]
async fn unknown_fields_are_ignored() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let body = json!({
        "jsonrpc": "2.0", "id": "x-1", "method": "SendMessage", "futureEnvelopeField": true,
        "params": {
            "message": {"messageId": "done-u", "role": "ROLE_USER", "parts": [{"text": "hi", "someday": 1}], "newField": {"a": 1}},
            "alsoUnknown": [1, 2],
        }
    });
    let r = rpc_raw(&s, "strict", serde_json::to_vec(&body).unwrap()).await;
    assert_eq!(r.status, 200);
    assert!(r.body.get("error").is_none(), "{}", r.text);
    assert_eq!(r.body["id"], "x-1");
    assert_eq!(state(&r.body["result"]["task"]), "TASK_STATE_COMPLETED");

    let (status, body) = c
        .rest(
            Method::POST,
            "strict",
            "/message:send",
            Some(json!({"message": message("done-v", "hi"), "unknownTopLevel": {"x": 1}})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(state(&body["task"]), "TASK_STATE_COMPLETED");
    assert_eq!(task_count(&c, "strict").await, 2);
}

#[tokio::test]
async fn json_rpc_envelope_errors_get_the_right_codes() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let ok_params = json!({"message": message("env-1", "x")});
    // (what, body, code, id the answer must carry)
    let cases = [
        (
            "batch",
            json!([{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}]),
            -32600,
            Value::Null,
        ),
        ("empty batch", json!([]), -32600, Value::Null),
        ("not an object", json!("SendMessage"), -32600, Value::Null),
        // Without an id the call is still answered (with a null id), so the
        // caller learns what is wrong with the rest of it.
        (
            "missing id, unknown method",
            json!({"jsonrpc": "2.0", "method": "NoSuchMethod", "params": {}}),
            -32601,
            Value::Null,
        ),
        (
            "null id, bad params",
            json!({"jsonrpc": "2.0", "id": null, "method": "SendMessage", "params": {"message": 5}}),
            -32602,
            Value::Null,
        ),
        (
            "object id",
            json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "SendMessage", "params": ok_params}),
            -32600,
            Value::Null,
        ),
        (
            "jsonrpc 1.0",
            json!({"jsonrpc": "1.0", "id": 5, "method": "SendMessage", "params": ok_params}),
            -32600,
            json!(5),
        ),
        (
            "jsonrpc missing",
            json!({"id": 6, "method": "SendMessage", "params": ok_params}),
            -32600,
            json!(6),
        ),
        (
            "jsonrpc a number",
            json!({"jsonrpc": 2.0, "id": 7, "method": "SendMessage", "params": ok_params}),
            -32600,
            json!(7),
        ),
        (
            "method missing",
            json!({"jsonrpc": "2.0", "id": 8, "params": ok_params}),
            -32600,
            json!(8),
        ),
        (
            "method a number",
            json!({"jsonrpc": "2.0", "id": 9, "method": 1, "params": ok_params}),
            -32600,
            json!(9),
        ),
        (
            "params an array",
            json!({"jsonrpc": "2.0", "id": 10, "method": "SendMessage", "params": [ok_params]}),
            -32602,
            json!(10),
        ),
        (
            "params a string",
            json!({"jsonrpc": "2.0", "id": "s", "method": "SendMessage", "params": "x"}),
            -32602,
            json!("s"),
        ),
        (
            "unknown method",
            json!({"jsonrpc": "2.0", "id": 11, "method": "Explode", "params": {}}),
            -32601,
            json!(11),
        ),
        (
            "0.3 method name",
            json!({"jsonrpc": "2.0", "id": 12, "method": "message/send", "params": ok_params}),
            -32601,
            json!(12),
        ),
        (
            "method in the wrong case",
            json!({"jsonrpc": "2.0", "id": 13, "method": "sendMessage", "params": ok_params}),
            -32601,
            json!(13),
        ),
    ];
    for (what, body, code, id) in cases {
        let r = rpc_raw(&s, "strict", serde_json::to_vec(&body).unwrap()).await;
        assert_eq!(r.status, 200, "{what}: {}", r.text);
        rpc_error(&r, code);
        assert_eq!(r.body["id"], id, "{what}: {}", r.text);
    }
    let r = rpc_raw(
        &s,
        "strict",
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 14, "method": "Explode"})).unwrap(),
    )
    .await;
    assert!(rpc_error(&r, -32601).contains("Explode"), "{}", r.text);
    assert_eq!(
        task_count(&c, "strict").await,
        0,
        "no envelope error may create a task"
    );
}

#[tokio::test]
async fn non_json_content_type_is_refused_on_both_bindings() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let body = envelope("SendMessage", json!({"message": message("ct-1", "x")}));
    for ct in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let r = send_raw(&s, Method::POST, "/a2a/strict", ct, body.clone()).await;
        let m = rpc_error(&r, -32005);
        assert_eq!(
            r.body["error"]["data"][0]["reason"],
            "CONTENT_TYPE_NOT_SUPPORTED"
        );
        assert!(m.contains("application/json"), "{ct:?}: {m}");
    }
    // Parameters on a JSON content type are fine; so is application/a2a+json.
    for ct in ["application/json; charset=utf-8", "application/a2a+json"] {
        let r = send_raw(
            &s,
            Method::POST,
            "/a2a/strict",
            Some(ct),
            envelope("ListTasks", json!({})),
        )
        .await;
        assert!(r.body.get("result").is_some(), "{ct}: {}", r.text);
    }

    let rest_body = serde_json::to_vec(&json!({"message": message("ct-2", "x")})).unwrap();
    let r = send_raw(
        &s,
        Method::POST,
        "/a2a/strict/message:send",
        Some("text/plain"),
        rest_body.clone(),
    )
    .await;
    let (m, _) = rest_error(r.status, &r.body, 415);
    assert!(m.contains("text/plain"), "{m}");
    let r = send_raw(
        &s,
        Method::POST,
        "/a2a/strict/message:send",
        None,
        rest_body,
    )
    .await;
    rest_error(r.status, &r.body, 415);
    assert_eq!(task_count(&c, "strict").await, 0);
}

#[tokio::test]
async fn unknown_agent_is_404_on_both_bindings() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let r = rpc_raw(
        &s,
        "nobody",
        envelope("SendMessage", json!({"message": message("na-1", "x")})),
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.text);
    let m = rpc_error(&r, -32601);
    assert!(m.contains("nobody"), "{m}");

    for (method, path) in [
        (Method::GET, "/tasks"),
        (Method::POST, "/message:send"),
        (Method::GET, "/.well-known/agent-card.json"),
    ] {
        let (status, body) = c
            .rest(
                method.clone(),
                "nobody",
                path,
                Some(json!({"message": message("na-2", "x")})).filter(|_| method == Method::POST),
            )
            .await;
        let (m, reason) = rest_error(status, &body, 404);
        assert_eq!(reason, "NOT_FOUND", "{path}");
        assert!(m.contains("nobody"), "{path}: {m}");
    }
    assert_eq!(task_count(&c, "strict").await, 0);
    assert_eq!(task_count(&c, "inbox").await, 0);
}

#[tokio::test]
async fn unknown_rest_routes_are_404_and_wrong_methods_405() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    for (method, path) in [
        (Method::GET, "/a2a/strict/nothing"),
        (Method::GET, "/a2a/strict/v1/tasks/abc/extra/deep"),
        (Method::POST, "/a2a/strict/tasks/abc:explode"),
        (Method::GET, "/nothing-here"),
        (Method::GET, "/a2a"),
    ] {
        let r = send_raw(&s, method, path, Some("application/json"), "{}").await;
        rest_error(r.status, &r.body, 404);
    }
    for (method, path, allowed) in [
        (Method::GET, "/message:send", "POST"),
        (Method::PUT, "/message:stream", "POST"),
        (Method::DELETE, "/tasks", "GET"),
        (Method::POST, "/tasks", "GET"),
        (Method::PATCH, "/tasks/abc", "GET"),
        (Method::GET, "/tasks/abc:cancel", "POST"),
        (Method::PUT, "/tasks/abc/pushNotificationConfigs", "POST"),
        (
            Method::POST,
            "/tasks/abc/pushNotificationConfigs/def",
            "DELETE",
        ),
        (Method::DELETE, "/extendedAgentCard", "GET"),
    ] {
        let r = send_raw(
            &s,
            method.clone(),
            &format!("/a2a/strict{path}"),
            Some("application/json"),
            "{}",
        )
        .await;
        let (m, _) = rest_error(r.status, &r.body, 405);
        assert!(m.contains(method.as_str()), "{method} {path}: {m}");
        let allow = r.headers.get("allow").unwrap_or_else(|| {
            panic!(
                "{method} {path}: a 405 must say what is allowed: {:?}",
                r.headers
            )
        });
        assert!(
            allow.to_str().unwrap().contains(allowed),
            "{method} {path}: Allow {allow:?}"
        );
    }
    // JSON-RPC takes POST only.
    let r = send_raw(&s, Method::GET, "/a2a/strict", None, "").await;
    assert_eq!(r.status, 405, "{}", r.text);
    assert_eq!(task_count(&c, "strict").await, 0);
}

#[tokio::test]
async fn media_type_the_agent_does_not_accept_is_content_type_not_supported() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let cases = [
        json!({"url": "https://example.com/report.pdf", "mediaType": "application/pdf", "filename": "report.pdf"}),
        json!({"raw": "JVBERi0xLjQK", "mediaType": "application/pdf"}),
        json!({"data": {"k": 1}}),
        json!({"text": "hello", "mediaType": "text/html"}),
    ];
    for part in cases {
        let m = json!({"messageId": "pdf-1", "role": "ROLE_USER", "parts": [{"text": "see attached"}, part]});
        let e = c
            .rpc_err("strict", "SendMessage", json!({"message": m}))
            .await;
        assert_eq!(e["code"], -32005, "{part}: {e}");
        assert_eq!(e["data"][0]["reason"], "CONTENT_TYPE_NOT_SUPPORTED", "{e}");
        assert!(
            e["message"].as_str().unwrap().contains("text/plain"),
            "the error should say what is accepted: {e}"
        );

        let (status, body) = c
            .rest(
                Method::POST,
                "strict",
                "/message:send",
                Some(json!({"message": m})),
            )
            .await;
        let (_, reason) = rest_error(status, &body, 400);
        assert_eq!(reason, "CONTENT_TYPE_NOT_SUPPORTED", "{body}");
        assert_eq!(
            task_count(&c, "strict").await,
            0,
            "{part}: a refused message left a task behind"
        );
    }
    // Plain text, with or without parameters, is accepted.
    let m = json!({"messageId": "done-pdf", "role": "ROLE_USER", "parts": [{"text": "ok", "mediaType": "text/plain; charset=utf-8"}]});
    let r = c
        .rpc_ok("strict", "SendMessage", json!({"message": m}))
        .await;
    assert_eq!(state(&r["task"]), "TASK_STATE_COMPLETED");
    // An agent accepting anything takes the PDF.
    let m = json!({"messageId": "pdf-2", "role": "ROLE_USER", "parts": [{"url": "https://example.com/r.pdf", "mediaType": "application/pdf"}]});
    let r = c
        .rpc_ok("inbox", "SendMessage", json!({"message": m}))
        .await;
    assert_eq!(state(&r["task"]), "TASK_STATE_INPUT_REQUIRED");
}

#[tokio::test]
async fn follow_ups_beyond_the_history_limit_are_refused_and_leave_the_task_unchanged() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    // The request and the agent's status message: two of three.
    let r = c.send_text("inbox", "h-1", "please review").await;
    let task = &r["task"];
    let id = task["id"].as_str().unwrap().to_owned();
    let ctx = task["contextId"].as_str().unwrap().to_owned();
    assert_eq!(state(task), "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(task["history"].as_array().unwrap().len(), 2, "{task}");

    let follow = |mid: &str| json!({"message": {"messageId": mid, "role": "ROLE_USER", "taskId": id, "contextId": ctx, "parts": [{"text": mid}]}});
    let r = c.rpc_ok("inbox", "SendMessage", follow("h-2")).await;
    assert_eq!(state(&r["task"]), "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(r["task"]["history"].as_array().unwrap().len(), 3);
    let before = c.rpc_ok("inbox", "GetTask", json!({"id": id})).await;

    let e = c.rpc_err("inbox", "SendMessage", follow("h-3")).await;
    assert_eq!(e["code"], -32602, "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains(&id) && msg.contains('3'),
        "the error should name the task and the limit: {msg}"
    );

    let (status, body) = c
        .rest(Method::POST, "inbox", "/message:send", Some(follow("h-4")))
        .await;
    let (_, reason) = rest_error(status, &body, 400);
    assert_eq!(reason, "INVALID_PARAMS");

    let e = c
        .rpc_err("inbox", "SendStreamingMessage", follow("h-5"))
        .await;
    assert_eq!(e["code"], -32602, "{e}");

    let after = c.rpc_ok("inbox", "GetTask", json!({"id": id})).await;
    assert_eq!(
        after, before,
        "a refused follow-up must not change the task"
    );
    let ids: Vec<&str> = after["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["messageId"].as_str().unwrap())
        .collect();
    assert!(
        !ids.iter().any(|m| ["h-3", "h-4", "h-5"].contains(m)),
        "{ids:?}"
    );
    assert_eq!(task_count(&c, "inbox").await, 1);
}

#[tokio::test]
async fn push_configs_beyond_the_limit_are_refused_and_leave_the_task_unchanged() {
    let s = Server::start(Some(CONFIG));
    let c = s.client();
    let r = c.send_text("inbox", "p-1", "please review").await;
    let id = r["task"]["id"].as_str().unwrap().to_owned();
    let ctx = r["task"]["contextId"].as_str().unwrap().to_owned();
    let config =
        |cfg: &str| json!({"taskId": id, "id": cfg, "url": format!("http://127.0.0.1:9/{cfg}")});
    for cfg in ["a", "b"] {
        let made = c
            .rpc_ok("inbox", "CreateTaskPushNotificationConfig", config(cfg))
            .await;
        assert_eq!(made["id"], cfg, "{made}");
    }
    let e = c
        .rpc_err("inbox", "CreateTaskPushNotificationConfig", config("c"))
        .await;
    assert_eq!(e["code"], -32602, "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains(&id) && msg.contains("2 push notification configs"),
        "the error should name the task and the limit: {msg}"
    );
    // Replacing a config the task has always fits.
    let mut moved = config("a");
    moved["url"] = json!("http://127.0.0.1:9/moved");
    let made = c
        .rpc_ok("inbox", "CreateTaskPushNotificationConfig", moved)
        .await;
    assert_eq!(made["url"], "http://127.0.0.1:9/moved");
    // The HTTP+JSON binding says the same in its own shape.
    let (status, body) = c
        .rest(
            Method::POST,
            "inbox",
            &format!("/tasks/{id}/pushNotificationConfigs"),
            Some(config("d")),
        )
        .await;
    let (_, reason) = rest_error(status, &body, 400);
    assert_eq!(reason, "INVALID_PARAMS");
    // A follow-up naming a third config inline is refused whole: neither
    // its message nor its config is kept.
    let before = c.rpc_ok("inbox", "GetTask", json!({"id": id})).await;
    let follow = json!({
        "message": {"messageId": "p-2", "role": "ROLE_USER", "taskId": id, "contextId": ctx, "parts": [{"text": "and this"}]},
        "configuration": {"taskPushNotificationConfig": {"id": "e", "url": "http://127.0.0.1:9/e"}},
    });
    let e = c.rpc_err("inbox", "SendMessage", follow).await;
    assert_eq!(e["code"], -32602, "{e}");
    assert_eq!(
        c.rpc_ok("inbox", "GetTask", json!({"id": id})).await,
        before,
        "a refused follow-up must not change the task"
    );
    let listed = c
        .rpc_ok(
            "inbox",
            "ListTaskPushNotificationConfigs",
            json!({"taskId": id}),
        )
        .await;
    let ids: Vec<&str> = listed["configs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b"], "{listed}");
    // Deleting one makes room again.
    c.rpc_ok(
        "inbox",
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": id, "id": "b"}),
    )
    .await;
    let made = c
        .rpc_ok("inbox", "CreateTaskPushNotificationConfig", config("c"))
        .await;
    assert_eq!(made["id"], "c", "{made}");
}

#[tokio::test]
async fn get_on_the_json_rpc_endpoint_is_405_with_a_json_rpc_error() {
    let s = Server::start(None);
    let resp = reqwest::get(s.url("/a2a/inbox")).await.unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    assert_eq!(resp.headers()["allow"], "POST");
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600);
}
