//! Access control: configured credentials name the owner of each task; with
//! `require_credentials` nothing but the card is served without one.

mod common;
use common::*;

use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

const BEARER: &str = "ci-token-0123456789abcdef";
const API_KEY: &str = "bot-key-0123456789abcdef";
const KEY_HEADER: &str = "X-Countersign-Key";

const LOCKED: &str = r#"
[access]
require_credentials = true

[[access.credentials]]
name = "ci"
bearer = "ci-token-0123456789abcdef"

[[access.credentials]]
name = "bot"
api_key = "bot-key-0123456789abcdef"
header = "X-Countersign-Key"

[[agents]]
id = "inbox"
"#;

/// The same credentials, but calls without one are allowed (loopback).
const OPEN: &str = r#"
[[access.credentials]]
name = "ci"
bearer = "ci-token-0123456789abcdef"

[[access.credentials]]
name = "bot"
api_key = "bot-key-0123456789abcdef"

[[agents]]
id = "inbox"
"#;

/// A client that sends `headers` on every request.
fn client_with(s: &Server, headers: &[(&str, &str)]) -> Client {
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.insert(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    Client {
        http: reqwest::Client::builder()
            .default_headers(h)
            .build()
            .unwrap(),
        base: s.base.clone(),
    }
}

fn bearer(s: &Server) -> Client {
    client_with(s, &[("Authorization", &format!("Bearer {BEARER}"))])
}

fn api_key(s: &Server) -> Client {
    client_with(s, &[(KEY_HEADER, API_KEY)])
}

/// Status, `WWW-Authenticate` and JSON body of a JSON-RPC call.
async fn rpc_raw(c: &Client, method: &str, params: Value) -> (u16, Option<String>, Value) {
    let resp = c
        .http
        .post(format!("{}/a2a/inbox", c.base))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("request");
    let status = resp.status().as_u16();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, challenge, resp.json().await.expect("JSON body"))
}

/// Status, `WWW-Authenticate` and JSON body of a REST call.
async fn rest_raw(
    c: &Client,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Option<String>, Value) {
    let mut req = c
        .http
        .request(method, format!("{}/a2a/inbox{path}", c.base))
        .header("A2A-Version", "1.0");
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, challenge, resp.json().await.expect("JSON body"))
}

/// Checks that a JSON-RPC call was refused as unauthenticated.
async fn assert_rpc_refused(c: &Client, what: &str) {
    let (status, challenge, body) = rpc_raw(c, "ListTasks", json!({})).await;
    assert_eq!(status, 401, "{what}: {body}");
    let challenge = challenge.unwrap_or_else(|| panic!("{what}: 401 without WWW-Authenticate"));
    assert!(challenge.starts_with("Bearer"), "{what}: {challenge}");
    assert_eq!(body["jsonrpc"], "2.0", "{what}: {body}");
    assert!(body.get("result").is_none(), "{what}: {body}");
    assert!(body["error"]["code"].is_i64(), "{what}: {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{what}: {body}"
    );
    assert_eq!(
        body["error"]["data"][0]["reason"], "UNAUTHENTICATED",
        "{what}: {body}"
    );
    let (status, _, body) = rpc_raw(
        c,
        "SendMessage",
        json!({"message": message("refused", "let me in")}),
    )
    .await;
    assert_eq!(status, 401, "{what}: {body}");
}

/// Checks that REST calls were refused as unauthenticated.
async fn assert_rest_refused(c: &Client, what: &str) {
    for (method, path, body) in [
        (Method::GET, "/tasks", None),
        (
            Method::POST,
            "/message:send",
            Some(json!({"message": message("refused", "let me in")})),
        ),
        (Method::GET, "/tasks/some-task", None),
    ] {
        let (status, challenge, body) = rest_raw(c, method, path, body).await;
        assert_eq!(status, 401, "{what} {path}: {body}");
        assert!(
            challenge.is_some_and(|c| c.starts_with("Bearer")),
            "{what} {path}: 401 without WWW-Authenticate"
        );
        assert_eq!(body["error"]["code"], 401, "{what} {path}: {body}");
        assert_eq!(
            body["error"]["status"], "UNAUTHENTICATED",
            "{what} {path}: {body}"
        );
        assert_eq!(
            body["error"]["details"][0]["reason"], "UNAUTHENTICATED",
            "{what} {path}: {body}"
        );
    }
}

#[tokio::test]
async fn without_a_credential_every_a2a_call_is_401_with_a_challenge_on_both_bindings() {
    let s = Server::start(Some(LOCKED));
    let anon = s.client();
    assert_rpc_refused(&anon, "no credential").await;
    assert_rest_refused(&anon, "no credential").await;
}

#[tokio::test]
async fn a_wrong_credential_is_401() {
    let s = Server::start(Some(LOCKED));
    let cases = [
        (
            "wrong bearer",
            ("Authorization", "Bearer not-the-right-token-at-all"),
        ),
        (
            "bearer prefix of the token",
            ("Authorization", "Bearer ci-token-0123456789abcde"),
        ),
        (
            "API key sent as a bearer token",
            ("Authorization", "Bearer bot-key-0123456789abcdef"),
        ),
        ("wrong API key", (KEY_HEADER, "bot-key-0123456789abcdeX")),
        ("bearer token sent as an API key", (KEY_HEADER, BEARER)),
        ("API key in the default header", ("X-API-Key", API_KEY)),
        (
            "token under another scheme",
            (
                "Authorization",
                "Basic Y2ktdG9rZW4tMDEyMzQ1Njc4OWFiY2RlZg==",
            ),
        ),
    ];
    for (what, header) in cases {
        let c = client_with(&s, &[header]);
        assert_rpc_refused(&c, what).await;
        assert_rest_refused(&c, what).await;
    }
}

#[tokio::test]
async fn the_right_bearer_token_or_api_key_works_on_both_bindings() {
    let s = Server::start(Some(LOCKED));
    for (what, c) in [
        ("bearer", bearer(&s)),
        (
            "lower-case scheme",
            client_with(&s, &[("Authorization", &format!("bearer {BEARER}"))]),
        ),
        ("api key", api_key(&s)),
        (
            "api key, header in lower case",
            client_with(&s, &[("x-countersign-key", API_KEY)]),
        ),
    ] {
        let r = c.send_text("inbox", &format!("ok-{what}"), "hello").await;
        assert_eq!(
            state(&r["task"]),
            "TASK_STATE_INPUT_REQUIRED",
            "{what}: {r}"
        );
        let id = r["task"]["id"].as_str().unwrap().to_owned();
        let got = c.rpc_ok("inbox", "GetTask", json!({"id": id})).await;
        assert_eq!(got["id"], json!(id), "{what}");

        let (status, body) = c
            .rest(
                Method::POST,
                "inbox",
                "/message:send",
                Some(json!({"message": message(&format!("rest-{what}"), "hello")})),
            )
            .await;
        assert_eq!(status, 200, "{what}: {body}");
        assert_eq!(state(&body["task"]), "TASK_STATE_INPUT_REQUIRED");
        let (status, body) = c
            .rest(Method::GET, "inbox", &format!("/tasks/{id}"), None)
            .await;
        assert_eq!(status, 200, "{what}: {body}");
        assert_eq!(body["id"], json!(id));
    }
}

#[tokio::test]
async fn the_agent_card_stays_public_and_declares_how_to_authenticate() {
    let s = Server::start(Some(LOCKED));
    let http = reqwest::Client::new();
    for path in [
        "/.well-known/agent-card.json",
        "/a2a/inbox/.well-known/agent-card.json",
    ] {
        let resp = http.get(s.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        let card: Value = resp.json().await.unwrap();
        let schemes = card["securitySchemes"]
            .as_object()
            .unwrap_or_else(|| panic!("{path}: no securitySchemes: {card}"));
        let http_auth = schemes
            .values()
            .find_map(|s| s.get("httpAuthSecurityScheme"))
            .unwrap_or_else(|| panic!("{path}: no bearer scheme: {card}"));
        assert!(
            http_auth["scheme"]
                .as_str()
                .unwrap()
                .eq_ignore_ascii_case("bearer"),
            "{card}"
        );
        let api = schemes
            .values()
            .find_map(|s| s.get("apiKeySecurityScheme"))
            .unwrap_or_else(|| panic!("{path}: no API key scheme: {card}"));
        assert_eq!(api["location"], "header", "{card}");
        assert_eq!(api["name"], KEY_HEADER, "{card}");

        let reqs = card["securityRequirements"]
            .as_array()
            .unwrap_or_else(|| panic!("{path}: no securityRequirements: {card}"));
        assert!(!reqs.is_empty());
        for r in reqs {
            for name in r["schemes"].as_object().expect("schemes map").keys() {
                assert!(
                    schemes.contains_key(name),
                    "{path}: requirement names unknown scheme {name}"
                );
            }
        }
        let text = card.to_string();
        assert!(
            !text.contains(BEARER) && !text.contains(API_KEY),
            "the card must not carry secrets"
        );
    }
}

#[tokio::test]
async fn tasks_of_one_credential_are_invisible_to_another() {
    let s = Server::start(Some(LOCKED));
    let (ci, bot) = (bearer(&s), api_key(&s));
    let r = ci.send_text("inbox", "mine-1", "private").await;
    let id = r["task"]["id"].as_str().unwrap().to_owned();
    let ctx = r["task"]["contextId"].as_str().unwrap().to_owned();
    assert_eq!(state(&r["task"]), "TASK_STATE_INPUT_REQUIRED");
    let before = ci.rpc_ok("inbox", "GetTask", json!({"id": id})).await;

    // The other credential cannot see, list, cancel, continue or subscribe to it.
    let e = bot.rpc_err("inbox", "GetTask", json!({"id": id})).await;
    assert_eq!(e["code"], -32001, "{e}");
    let list = bot.rpc_ok("inbox", "ListTasks", json!({})).await;
    assert_eq!(list["tasks"], json!([]), "{list}");
    assert_eq!(list["totalSize"], 0, "{list}");
    let list = bot
        .rpc_ok("inbox", "ListTasks", json!({"contextId": ctx}))
        .await;
    assert_eq!(list["tasks"], json!([]), "{list}");
    let e = bot.rpc_err("inbox", "CancelTask", json!({"id": id})).await;
    assert_eq!(e["code"], -32001, "{e}");
    let follow = json!({"message": {"messageId": "theirs-1", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "hijack"}]}});
    let e = bot.rpc_err("inbox", "SendMessage", follow.clone()).await;
    assert_eq!(e["code"], -32001, "{e}");
    let e = bot
        .rpc_err("inbox", "SubscribeToTask", json!({"id": id}))
        .await;
    assert_eq!(e["code"], -32001, "{e}");

    let (status, body) = bot
        .rest(Method::GET, "inbox", &format!("/tasks/{id}"), None)
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
    let (status, body) = bot.rest(Method::GET, "inbox", "/tasks", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tasks"], json!([]), "{body}");
    let (status, body) = bot
        .rest(
            Method::POST,
            "inbox",
            &format!("/tasks/{id}:cancel"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
    let (status, body) = bot
        .rest(Method::POST, "inbox", "/message:send", Some(follow))
        .await;
    assert_eq!(status, 404, "{body}");

    // "Not yours" looks exactly like "does not exist".
    let e_missing = bot
        .rpc_err("inbox", "GetTask", json!({"id": "no-such-task"}))
        .await;
    assert_eq!(e_missing["code"], -32001);

    // The owner's task is untouched and still theirs.
    let after = ci.rpc_ok("inbox", "GetTask", json!({"id": id})).await;
    assert_eq!(
        after, before,
        "the other credential's attempts changed the task"
    );
    let list = ci.rpc_ok("inbox", "ListTasks", json!({})).await;
    assert_eq!(list["tasks"].as_array().unwrap().len(), 1, "{list}");
    let canceled = ci.rpc_ok("inbox", "CancelTask", json!({"id": id})).await;
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED");
}

#[tokio::test]
async fn on_loopback_without_require_credentials_anonymous_calls_work_but_a_wrong_credential_is_refused()
 {
    let s = Server::start(Some(OPEN));
    let anon = s.client();
    let r = anon.send_text("inbox", "anon-1", "hello").await;
    assert_eq!(state(&r["task"]), "TASK_STATE_INPUT_REQUIRED");
    let anon_id = r["task"]["id"].as_str().unwrap().to_owned();
    let (status, body) = anon.rest(Method::GET, "inbox", "/tasks", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tasks"].as_array().unwrap().len(), 1);

    for header in [
        ("Authorization", "Bearer wrong-token-0123456789"),
        ("X-API-Key", "wrong-key-0123456789abc"),
    ] {
        let c = client_with(&s, &[header]);
        let (status, challenge, body) = rpc_raw(&c, "ListTasks", json!({})).await;
        assert_eq!(status, 401, "{header:?}: {body}");
        assert!(challenge.is_some(), "{header:?}");
        assert_eq!(body["error"]["data"][0]["reason"], "UNAUTHENTICATED");
        let (status, _, body) = rest_raw(&c, Method::GET, "/tasks", None).await;
        assert_eq!(status, 401, "{header:?}: {body}");
    }

    // A valid credential still names its owner: anonymous tasks are not its.
    let ci = bearer(&s);
    let e = ci.rpc_err("inbox", "GetTask", json!({"id": anon_id})).await;
    assert_eq!(e["code"], -32001, "{e}");
    let r = ci.send_text("inbox", "ci-1", "hello").await;
    let ci_id = r["task"]["id"].as_str().unwrap().to_owned();
    let e = anon.rpc_err("inbox", "GetTask", json!({"id": ci_id})).await;
    assert_eq!(e["code"], -32001, "{e}");
    let list = anon.rpc_ok("inbox", "ListTasks", json!({})).await;
    assert_eq!(list["tasks"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["tasks"][0]["id"], json!(anon_id));
}

#[tokio::test]
async fn with_no_credentials_configured_any_presented_credential_is_refused() {
    let s = Server::start(None);
    let c = client_with(&s, &[("Authorization", "Bearer whatever-0123456789abcdef")]);
    let (status, _, body) = rpc_raw(&c, "ListTasks", json!({})).await;
    assert_eq!(status, 401, "{body}");
    let anon = s.client();
    let list = anon.rpc_ok("inbox", "ListTasks", json!({})).await;
    assert_eq!(list["tasks"], json!([]));
}
