//! Rate limits over the real binary: a burst from one caller is refused with
//! 429 and `Retry-After` in each binding's error shape, other callers and
//! other classes of route are served, the caller is served again after the
//! wait, loopback callers are exempt by default, one address holds only so
//! many connections, and bad settings are refused.

mod common;
use common::*;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

const CI: &str = "ci-token-0123456789abcdef";
const BOT: &str = "bot-token-0123456789abcdef";

/// Tiny quotas, loopback limited: the test client is the abusive caller.
const LIMITED: &str = r#"
[rate_limits]
limit_loopback = true
a2a = { per_second = 1, burst = 3 }
webhooks = { per_second = 1, burst = 2 }
ui = { per_second = 1, burst = 2 }
cards = { per_second = 1, burst = 2 }

[[access.credentials]]
name = "ci"
bearer = "ci-token-0123456789abcdef"

[[access.credentials]]
name = "bot"
bearer = "bot-token-0123456789abcdef"

[[agents]]
id = "inbox"
"#;

fn rpc_body(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ListTasks", "params": {}})
}

fn rpc(
    http: &reqwest::Client,
    s: &Server,
    token: &str,
    id: u64,
) -> impl Future<Output = reqwest::Result<reqwest::Response>> {
    http.post(s.url("/a2a/inbox"))
        .bearer_auth(token)
        .header("A2A-Version", "1.0")
        .json(&rpc_body(id))
        .send()
}

fn retry_after(resp: &reqwest::Response) -> u64 {
    resp.headers()
        .get("retry-after")
        .unwrap_or_else(|| panic!("429 without Retry-After: {:?}", resp.headers()))
        .to_str()
        .unwrap()
        .parse()
        .expect("Retry-After in whole seconds")
}

/// Sends until refused (at most `n` times); returns how many were served and
/// the refusal.
async fn burst<F, Fut>(n: usize, mut send: F) -> (usize, reqwest::Response)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = reqwest::Result<reqwest::Response>>,
{
    for served in 0..n {
        let r = send().await.expect("request");
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            return (served, r);
        }
        assert!(
            r.status().is_success(),
            "{}: {:?}",
            r.status(),
            r.text().await
        );
    }
    panic!("{n} requests in a row were all served");
}

#[tokio::test]
async fn a_burst_from_one_credential_gets_429_in_each_bindings_shape() {
    let s = Server::start(Some(LIMITED));
    let http = reqwest::Client::new();

    // JSON-RPC: the burst is served, then 429 with a JSON-RPC error body.
    let (served, refused) = burst(20, || rpc(&http, &s, CI, 1)).await;
    assert!(served >= 3, "the burst of 3 must be served, got {served}");
    let wait = retry_after(&refused);
    assert!((1..=2).contains(&wait), "Retry-After {wait}");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], Value::Null, "the body is not read, so no id");
    assert_eq!(body["error"]["code"], -32029);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Rate limit"),
        "{body}"
    );
    assert_eq!(body["error"]["data"][0]["reason"], "RATE_LIMITED");
    assert_eq!(
        body["error"]["data"][1]["@type"],
        "type.googleapis.com/google.rpc.RetryInfo"
    );

    // HTTP+JSON shares the A2A bucket: the same credential is refused there
    // too, in the A2A HTTP error shape.
    let r = http
        .get(s.url("/a2a/inbox/tasks"))
        .bearer_auth(CI)
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(retry_after(&r) >= 1);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], 429);
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED");
    assert_eq!(body["error"]["details"][0]["reason"], "RATE_LIMITED");

    // Another credential from the same address has its own bucket.
    let r = rpc(&http, &s, BOT, 2).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    assert!(body.get("result").is_some(), "{body}");

    // So does the webhook receiver: an unknown subscription is a 404, not 429.
    let r = http
        .post(s.url("/webhooks/no-such-subscription"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // After the wait it asked for, the caller is served again.
    tokio::time::sleep(Duration::from_secs(wait)).await;
    let r = rpc(&http, &s, CI, 3).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    assert!(body.get("result").is_some(), "{body}");
}

#[tokio::test]
async fn webhooks_ui_api_and_cards_are_limited_separately_in_their_own_shapes() {
    let s = Server::start(Some(LIMITED));
    let http = reqwest::Client::new();
    let token = s.ui_token();

    // The UI API: its own JSON error shape.
    let (served, r) = burst(20, || {
        http.get(s.url("/api/queue")).bearer_auth(&token).send()
    })
    .await;
    assert!(served >= 2, "{served}");
    assert!(retry_after(&r) >= 1);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], 429, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Rate limit")
    );

    // Cards: the A2A HTTP error shape.
    let (served, r) = burst(20, || {
        http.get(s.url("/.well-known/agent-card.json")).send()
    })
    .await;
    assert!(served >= 2, "{served}");
    assert!(retry_after(&r) >= 1);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED", "{body}");

    // The webhook receiver: 404s for an unknown subscription until the
    // sender is over its quota, then 429 in the receiver's shape.
    let mut refused = None;
    for _ in 0..20 {
        let r = http
            .post(s.url("/webhooks/no-such-subscription"))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            refused = Some(r);
            break;
        }
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
    }
    let r = refused.expect("the webhook class was never limited");
    assert!(retry_after(&r) >= 1);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], 429, "{body}");

    // None of that touched the A2A class.
    let r = rpc(&http, &s, CI, 1).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn loopback_callers_are_exempt_by_default() {
    let s = Server::start(Some(
        "[rate_limits]\na2a = { per_second = 1, burst = 1 }\ncards = { per_second = 1, burst = 1 }\n",
    ));
    let c = s.client();
    for i in 0..30 {
        c.send_text("inbox", &format!("m-{i}"), "hello").await;
        let r = c
            .http
            .get(s.url("/.well-known/agent-card.json"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
}

#[tokio::test]
async fn normal_traffic_under_the_default_quotas_is_served() {
    // Loopback limited, default quotas: a client calling as fast as its
    // answers come (each call waits for the last; a few hundred a second
    // here) is not refused within the default burst.
    let s = Server::start(Some("[rate_limits]\nlimit_loopback = true\n"));
    let c = s.client();
    for i in 0..150 {
        let t = c.send_text("inbox", &format!("n-{i}"), "hello").await;
        let id = t["task"]["id"].as_str().unwrap();
        c.rpc_ok("inbox", "GetTask", json!({"id": id})).await;
    }
}

#[tokio::test]
async fn limits_turned_off_limit_nothing() {
    let s = Server::start(Some(
        "[rate_limits]\nenabled = false\nlimit_loopback = true\ncards = { per_second = 1, burst = 1 }\n",
    ));
    let http = reqwest::Client::new();
    for _ in 0..20 {
        let r = http
            .get(s.url("/.well-known/agent-card.json"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
}

#[tokio::test]
async fn one_address_holds_at_most_its_connections_and_one_more_is_told_why() {
    let s = Server::start(Some(
        "[rate_limits]\nlimit_loopback = true\nconnections = 3\n",
    ));
    let card = s.url("/.well-known/agent-card.json");
    // Each client keeps its one connection open between requests.
    let mut held = Vec::new();
    for _ in 0..3 {
        let c = reqwest::Client::new();
        let r = c.get(&card).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        r.bytes().await.unwrap();
        held.push(c);
    }
    // A fourth connection has its request refused in the shape of the route
    // it called, and is closed after that one answer.
    let fourth = reqwest::Client::new();
    let r = fourth
        .post(s.url("/a2a/inbox"))
        .json(&rpc_body(1))
        .send()
        .await
        .expect("the refusal is an answer, not a reset");
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(retry_after(&r), 1);
    assert_eq!(r.headers()["connection"], "close");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32029, "{body}");
    assert_eq!(body["error"]["data"][0]["reason"], "RATE_LIMITED", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("Too many connections from 127.0.0.1") && message.contains("at most 3"),
        "{body}"
    );
    let r = fourth.get(&card).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED", "{body}");
    // One that says nothing is closed within a second or so, not left to
    // the header timeout.
    let mut silent = tokio::net::TcpStream::connect(
        s.url("")
            .trim_start_matches("http://")
            .trim_end_matches('/'),
    )
    .await
    .unwrap();
    let mut sink = Vec::new();
    let read = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::AsyncReadExt::read_to_end(&mut silent, &mut sink),
    )
    .await;
    assert!(
        read.is_ok(),
        "a silent connection over the limit stayed open"
    );
    // The three open ones are still served, more than once each.
    for c in &held {
        let r = c.get(&card).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    // Closing one makes room (the server sees the close a moment later).
    drop(held.pop());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = reqwest::Client::new().get(&card).send().await.unwrap();
        if r.status() == StatusCode::OK {
            break;
        }
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(
            std::time::Instant::now() < deadline,
            "no room after a close"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Refused connections held nothing: with all closed, three fit again.
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut again = Vec::new();
    for _ in 0..3 {
        let c = reqwest::Client::new();
        assert_eq!(c.get(&card).send().await.unwrap().status(), StatusCode::OK);
        again.push(c);
    }
}

#[test]
fn a_zero_quota_is_refused_with_a_clear_error() {
    let err = refused_config("[rate_limits]\nui = { per_second = 0, burst = 5 }\n");
    assert!(
        err.contains("c.toml") && err.contains("rate_limits.ui") && err.contains("at least 1"),
        "{err}"
    );
    let err = refused_config("[rate_limits]\na2a = { per_second = 5 }\n");
    assert!(err.contains("c.toml:2") && err.contains("burst"), "{err}");
    let err = refused_config("[rate_limits]\nconnections = 0\n");
    assert!(
        err.contains("rate_limits.connections") && err.contains("at least 1"),
        "{err}"
    );
}
