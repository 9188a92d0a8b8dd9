//! Tenants over the real binary: agents at `/a2a/{tenant}/{agent}`, each
//! tenant with its own credentials, and tasks that no other tenant can see
//! or touch through any operation, binding or dialect.

mod common;
use common::*;

use std::time::Duration;

use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

/// Three tenants with an agent of the same id, and credentials of the same
/// name: isolation may not lean on either being unique.
const CONFIG: &str = r#"
[outbound]
allow = ["127.0.0.1"]

[[access.credentials]]
name = "ci"
bearer = "default-token-0123456789"

[[agents]]
id = "inbox"

[[tenants]]
id = "acme"
name = "Acme Corp"
require_credentials = true

[[tenants.credentials]]
name = "ci"
bearer = "acme-token-0123456789abcd"

[[tenants.agents]]
id = "inbox"

[[tenants]]
id = "globex"
require_credentials = true

[[tenants.credentials]]
name = "ci"
api_key = "globex-key-0123456789abcd"

[[tenants.agents]]
id = "inbox"

[[tenants.agents]]
id = "desk"
"#;

const DEFAULT_AUTH: (&str, &str) = ("Authorization", "Bearer default-token-0123456789");
const ACME_AUTH: (&str, &str) = ("Authorization", "Bearer acme-token-0123456789abcd");
const GLOBEX_AUTH: (&str, &str) = ("X-API-Key", "globex-key-0123456789abcd");

/// One agent as its tenant's caller reaches it.
struct Endpoint {
    /// The path under `/a2a/`.
    path: &'static str,
    auth: (&'static str, &'static str),
}

const DEFAULT: Endpoint = Endpoint {
    path: "inbox",
    auth: DEFAULT_AUTH,
};
const ACME: Endpoint = Endpoint {
    path: "acme/inbox",
    auth: ACME_AUTH,
};
const GLOBEX: Endpoint = Endpoint {
    path: "globex/inbox",
    auth: GLOBEX_AUTH,
};
/// Another agent of globex: a tenant's agents do not share tasks either.
const GLOBEX_DESK: Endpoint = Endpoint {
    path: "globex/desk",
    auth: GLOBEX_AUTH,
};

/// What a request answered: status and body (JSON, or the raw text in a
/// string; `"<open stream>"` when an event stream stayed open).
#[derive(Debug)]
struct Answer {
    status: u16,
    body: Value,
}

async fn call(
    s: &Server,
    auth: (&str, &str),
    method: Method,
    path: &str,
    version: Option<&str>,
    body: Option<Value>,
) -> Answer {
    let mut headers = HeaderMap::new();
    headers.insert(
        HeaderName::from_bytes(auth.0.as_bytes()).unwrap(),
        HeaderValue::from_str(auth.1).unwrap(),
    );
    if let Some(v) = version {
        headers.insert("A2A-Version", HeaderValue::from_str(v).unwrap());
    }
    let mut req = reqwest::Client::new()
        .request(method, s.url(path))
        .headers(headers);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("request");
    let status = resp.status().as_u16();
    // A stream that was opened stays open: that is an answer too.
    let body = match tokio::time::timeout(Duration::from_secs(3), resp.text()).await {
        Ok(Ok(text)) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        Ok(Err(e)) => Value::String(format!("<unreadable: {e}>")),
        Err(_) => Value::String("<open stream>".into()),
    };
    Answer { status, body }
}

async fn rpc(s: &Server, ep: &Endpoint, version: Option<&str>, method: &str, p: Value) -> Answer {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": p});
    call(
        s,
        ep.auth,
        Method::POST,
        &format!("/a2a/{}", ep.path),
        version,
        Some(body),
    )
    .await
}

async fn rest(
    s: &Server,
    ep: &Endpoint,
    version: &str,
    method: Method,
    sub: &str,
    body: Option<Value>,
) -> Answer {
    let path = format!("/a2a/{}{sub}", ep.path);
    call(s, ep.auth, method, &path, Some(version), body).await
}

/// Creates a parked task at `ep` with a push config `cfg`; returns its id.
async fn parked_task(s: &Server, ep: &Endpoint, cfg: &str) -> String {
    let a = rpc(
        s,
        ep,
        Some("1.0"),
        "SendMessage",
        json!({"message": message(&format!("m-{}", ep.path), "please approve")}),
    )
    .await;
    let id = a.body["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("send at {}: {a:?}", ep.path))
        .to_owned();
    let a = rpc(
        s,
        ep,
        Some("1.0"),
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "id": cfg, "url": "http://127.0.0.1:9/hook"}),
    )
    .await;
    assert_eq!(
        a.body["result"]["id"], cfg,
        "push config at {}: {a:?}",
        ep.path
    );
    id
}

/// Every operation on task `id` (and its push config `cfg`), in both
/// bindings of 1.0 and 0.3, from `ep`. Each entry is (what, answer).
async fn every_operation(s: &Server, ep: &Endpoint, id: &str, cfg: &str) -> Vec<(String, Answer)> {
    let mut out = Vec::new();
    let v1 = Some("1.0");
    // A2A 1.0, JSON-RPC.
    for (method, p) in [
        ("GetTask", json!({"id": id})),
        ("CancelTask", json!({"id": id})),
        ("SubscribeToTask", json!({"id": id})),
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "id": "intruder", "url": "http://127.0.0.1:9/x"}),
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": cfg}),
        ),
        ("ListTaskPushNotificationConfigs", json!({"taskId": id})),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": id, "id": cfg}),
        ),
        (
            "SendMessage",
            json!({"message": {"messageId": "m-follow", "role": "ROLE_USER",
                               "taskId": id, "parts": [{"text": "approve it"}]}}),
        ),
    ] {
        out.push((
            format!("1.0 JSON-RPC {method}"),
            rpc(s, ep, v1, method, p).await,
        ));
    }
    // A2A 1.0, HTTP+JSON.
    let push = format!("/tasks/{id}/pushNotificationConfigs");
    for (method, sub, body) in [
        (Method::GET, format!("/tasks/{id}"), None),
        (Method::POST, format!("/tasks/{id}:cancel"), Some(json!({}))),
        (Method::GET, format!("/tasks/{id}:subscribe"), None),
        (
            Method::POST,
            push.clone(),
            Some(json!({"id": "intruder", "url": "http://127.0.0.1:9/x"})),
        ),
        (Method::GET, format!("{push}/{cfg}"), None),
        (Method::GET, push.clone(), None),
        (Method::DELETE, format!("{push}/{cfg}"), None),
        (
            Method::POST,
            "/message:send".into(),
            Some(
                json!({"message": {"messageId": "m-follow-r", "role": "ROLE_USER",
                                   "taskId": id, "parts": [{"text": "approve it"}]}}),
            ),
        ),
    ] {
        let what = format!("1.0 HTTP+JSON {method} {sub}");
        out.push((what, rest(s, ep, "1.0", method, &sub, body).await));
    }
    // A2A 0.3, JSON-RPC (the dialect is picked by method name).
    for (method, p) in [
        ("tasks/get", json!({"id": id})),
        ("tasks/cancel", json!({"id": id})),
        ("tasks/resubscribe", json!({"id": id})),
        (
            "tasks/pushNotificationConfig/set",
            json!({"taskId": id, "pushNotificationConfig": {"id": "intruder", "url": "http://127.0.0.1:9/x"}}),
        ),
        (
            "tasks/pushNotificationConfig/get",
            json!({"id": id, "pushNotificationConfigId": cfg}),
        ),
        ("tasks/pushNotificationConfig/list", json!({"id": id})),
        (
            "tasks/pushNotificationConfig/delete",
            json!({"id": id, "pushNotificationConfigId": cfg}),
        ),
        (
            "message/send",
            json!({"message": {"kind": "message", "messageId": "m-follow-03", "role": "user",
                               "taskId": id, "parts": [{"kind": "text", "text": "approve it"}]}}),
        ),
    ] {
        out.push((
            format!("0.3 JSON-RPC {method}"),
            rpc(s, ep, None, method, p).await,
        ));
    }
    // A2A 0.3, HTTP+JSON under `/v1/`.
    let push = format!("/v1/tasks/{id}/pushNotificationConfigs");
    for (method, sub, body) in [
        (Method::GET, format!("/v1/tasks/{id}"), None),
        (
            Method::POST,
            format!("/v1/tasks/{id}:cancel"),
            Some(json!({})),
        ),
        (Method::GET, format!("/v1/tasks/{id}:subscribe"), None),
        (
            Method::POST,
            push.clone(),
            Some(
                json!({"pushNotificationConfig": {"id": "intruder", "url": "http://127.0.0.1:9/x"}}),
            ),
        ),
        (Method::GET, format!("{push}/{cfg}"), None),
        (Method::GET, push.clone(), None),
        (Method::DELETE, format!("{push}/{cfg}"), None),
        (
            Method::POST,
            "/v1/message:send".into(),
            Some(
                json!({"message": {"messageId": "m-follow-r03", "role": "ROLE_USER",
                                   "taskId": id, "content": [{"text": "approve it"}]}}),
            ),
        ),
    ] {
        let what = format!("0.3 HTTP+JSON {method} {sub}");
        out.push((what, rest(s, ep, "0.3", method, &sub, body).await));
    }
    out
}

/// Whether an answer is "not found" in its binding's shape (a stream that
/// answers with one error event counts), with nothing of the task in it.
fn is_not_found(what: &str, a: &Answer) -> bool {
    let body = match a.body.as_str() {
        Some(text) => parse_sse(text).into_iter().next().unwrap_or(Value::Null),
        None => a.body.clone(),
    };
    let shaped = if what.contains("JSON-RPC") {
        body["error"]["code"] == -32001 && body.get("result").is_none()
    } else {
        a.status == 404 && body["error"]["status"] == "NOT_FOUND"
    };
    // The id is echoed; no state, history or config is.
    let text = a.body.to_string();
    shaped
        && !text.contains("please approve")
        && !text.contains("127.0.0.1:9/hook")
        && !text.contains("INPUT_REQUIRED")
}

/// The task ids `ep` lists (1.0 ListTasks over JSON-RPC and HTTP+JSON, and
/// 0.3 HTTP+JSON).
async fn listed(s: &Server, ep: &Endpoint) -> Vec<String> {
    let mut ids = Vec::new();
    let a = rpc(s, ep, Some("1.0"), "ListTasks", json!({})).await;
    let b = rest(s, ep, "1.0", Method::GET, "/tasks", None).await;
    let c = rest(s, ep, "0.3", Method::GET, "/v1/tasks", None).await;
    for tasks in [
        &a.body["result"]["tasks"],
        &b.body["tasks"],
        &c.body["tasks"],
    ] {
        let tasks = tasks
            .as_array()
            .unwrap_or_else(|| panic!("ListTasks at {}: {a:?} {b:?} {c:?}", ep.path));
        ids.extend(
            tasks
                .iter()
                .filter_map(|t| t["id"].as_str().map(str::to_owned)),
        );
    }
    ids
}

#[tokio::test]
async fn a_tenants_task_is_not_found_by_every_other_tenant_through_every_operation() {
    let s = Server::start(Some(CONFIG));
    let endpoints = [DEFAULT, ACME, GLOBEX, GLOBEX_DESK];
    let mut tasks = Vec::new();
    for ep in &endpoints {
        tasks.push(parked_task(&s, ep, "own-hook").await);
    }
    // The control: each owner's own endpoint finds its task, its push config
    // and its stream, so "not found" below is about the tenant alone.
    for (ep, id) in endpoints.iter().zip(&tasks) {
        let a = rpc(&s, ep, Some("1.0"), "GetTask", json!({"id": id})).await;
        assert_eq!(a.body["result"]["id"], id.as_str(), "{}: {a:?}", ep.path);
        let a = rest(
            &s,
            ep,
            "1.0",
            Method::GET,
            &format!("/tasks/{id}/pushNotificationConfigs/own-hook"),
            None,
        )
        .await;
        assert_eq!(a.status, 200, "{}: {a:?}", ep.path);
        let a = rest(&s, ep, "0.3", Method::GET, &format!("/v1/tasks/{id}"), None).await;
        assert_eq!(a.status, 200, "{}: {a:?}", ep.path);
        let a = rest(
            &s,
            ep,
            "1.0",
            Method::GET,
            &format!("/tasks/{id}:subscribe"),
            None,
        )
        .await;
        assert_eq!(a.body, "<open stream>", "{}: own subscribe: {a:?}", ep.path);
        assert_eq!(listed(&s, ep).await.iter().filter(|t| *t == id).count(), 3);
    }
    // Every operation from every other endpoint: not found, every time.
    let mut failures = Vec::new();
    let mut checked = 0;
    for (owner, id) in endpoints.iter().zip(&tasks) {
        for other in endpoints.iter().filter(|e| e.path != owner.path) {
            for (what, a) in every_operation(&s, other, id, "own-hook").await {
                checked += 1;
                if !is_not_found(&what, &a) {
                    failures.push(format!(
                        "{what} at {} on {}'s task: {} {}",
                        other.path, owner.path, a.status, a.body
                    ));
                }
            }
            assert!(
                !listed(&s, other).await.contains(id),
                "{} lists {}'s task",
                other.path,
                owner.path
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} leaks:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(checked, 4 * 3 * 32, "every operation was tried");
    // Nothing those attempts did reached the task: still parked, its
    // config still there and alone, no follow-up message in its history.
    for (ep, id) in endpoints.iter().zip(&tasks) {
        let a = rpc(&s, ep, Some("1.0"), "GetTask", json!({"id": id})).await;
        let task = &a.body["result"];
        assert_eq!(
            state(task),
            "TASK_STATE_INPUT_REQUIRED",
            "{}: {a:?}",
            ep.path
        );
        assert!(
            !task.to_string().contains("approve it"),
            "{}: {task}",
            ep.path
        );
        let a = rpc(
            &s,
            ep,
            Some("1.0"),
            "ListTaskPushNotificationConfigs",
            json!({"taskId": id}),
        )
        .await;
        let configs = a.body["result"]["configs"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(configs.len(), 1, "{}: {a:?}", ep.path);
        assert_eq!(configs[0]["id"], "own-hook");
    }
}

#[tokio::test]
async fn a_tenants_credentials_work_only_for_its_own_agents() {
    let s = Server::start(Some(CONFIG));
    let send = |n: &str| json!({"message": message(n, "x")});
    // Each credential at each tenant: only the matching pair is let in.
    for (auth, own) in [
        (DEFAULT_AUTH, "inbox"),
        (ACME_AUTH, "acme/inbox"),
        (GLOBEX_AUTH, "globex/inbox"),
    ] {
        for path in ["inbox", "acme/inbox", "globex/inbox"] {
            let ep = Endpoint {
                path: Box::leak(path.to_owned().into_boxed_str()),
                auth,
            };
            let a = rpc(&s, &ep, Some("1.0"), "SendMessage", send("m-cred")).await;
            let r = rest(&s, &ep, "1.0", Method::GET, "/tasks", None).await;
            if path == own {
                assert_eq!(a.status, 200, "{auth:?} at {path}: {a:?}");
                assert!(a.body["result"]["task"]["id"].is_string(), "{a:?}");
                assert_eq!(r.status, 200, "{auth:?} at {path}: {r:?}");
            } else {
                assert_eq!(a.status, 401, "{auth:?} at {path}: {a:?}");
                assert_eq!(a.body["error"]["code"], -32000, "{a:?}");
                assert_eq!(r.status, 401, "{auth:?} at {path}: {r:?}");
            }
        }
    }
    // A tenant that requires credentials refuses calls without one, while
    // the default tenant on a loopback bind stays open.
    let none = ("X-Nothing", "x");
    let a = call(
        &s,
        none,
        Method::POST,
        "/a2a/acme/inbox",
        Some("1.0"),
        Some(json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})),
    )
    .await;
    assert_eq!(a.status, 401, "{a:?}");
    let a = call(
        &s,
        none,
        Method::GET,
        "/a2a/acme/inbox/tasks",
        Some("1.0"),
        None,
    )
    .await;
    assert_eq!(a.status, 401, "{a:?}");
    let a = call(&s, none, Method::GET, "/a2a/inbox/tasks", Some("1.0"), None).await;
    assert_eq!(a.status, 200, "{a:?}");
}

#[tokio::test]
async fn tenant_fields_and_path_segments_must_name_the_endpoints_tenant() {
    let s = Server::start(Some(CONFIG));
    let id = parked_task(&s, &ACME, "h").await;
    // The tenant a card declares, in the body or as the path segment, works.
    let a = rpc(
        &s,
        &ACME,
        Some("1.0"),
        "GetTask",
        json!({"tenant": "acme", "id": id}),
    )
    .await;
    assert_eq!(a.body["result"]["id"], id.as_str(), "{a:?}");
    let a = rest(
        &s,
        &ACME,
        "1.0",
        Method::GET,
        &format!("/acme/tasks/{id}"),
        None,
    )
    .await;
    assert_eq!(a.status, 200, "{a:?}");
    let a = rest(
        &s,
        &ACME,
        "1.0",
        Method::POST,
        "/acme/message:send",
        Some(json!({"tenant": "acme", "message": message("m-t", "x")})),
    )
    .await;
    assert_eq!(a.status, 200, "{a:?}");
    // Another tenant's name is refused with a message saying which is which.
    for (what, a) in [
        (
            "JSON-RPC body",
            rpc(
                &s,
                &ACME,
                Some("1.0"),
                "GetTask",
                json!({"tenant": "globex", "id": id}),
            )
            .await,
        ),
        (
            "JSON-RPC send",
            rpc(
                &s,
                &ACME,
                Some("1.0"),
                "SendMessage",
                json!({"tenant": "globex", "message": message("m-x", "x")}),
            )
            .await,
        ),
    ] {
        assert_eq!(a.body["error"]["code"], -32602, "{what}: {a:?}");
        let m = a.body["error"]["message"].as_str().unwrap_or_default();
        assert!(m.contains("globex") && m.contains("acme"), "{what}: {m}");
    }
    for (what, a) in [
        (
            "REST path",
            rest(
                &s,
                &ACME,
                "1.0",
                Method::GET,
                &format!("/globex/tasks/{id}"),
                None,
            )
            .await,
        ),
        (
            "REST body",
            rest(
                &s,
                &ACME,
                "1.0",
                Method::POST,
                "/message:send",
                Some(json!({"tenant": "globex", "message": message("m-y", "x")})),
            )
            .await,
        ),
        (
            "REST path, default agent",
            rest(&s, &DEFAULT, "1.0", Method::GET, "/acme/tasks", None).await,
        ),
    ] {
        assert_eq!(a.status, 400, "{what}: {a:?}");
        assert_eq!(
            a.body["error"]["status"], "INVALID_ARGUMENT",
            "{what}: {a:?}"
        );
    }
    // At a default-tenant agent, a configured tenant's name is a wrong
    // address; an opaque value no tenant has stays accepted, as before.
    let a = rpc(
        &s,
        &DEFAULT,
        Some("1.0"),
        "ListTasks",
        json!({"tenant": "acme"}),
    )
    .await;
    assert_eq!(a.body["error"]["code"], -32602, "{a:?}");
    let a = rpc(
        &s,
        &DEFAULT,
        Some("1.0"),
        "ListTasks",
        json!({"tenant": "anything"}),
    )
    .await;
    assert!(a.body["result"]["tasks"].is_array(), "{a:?}");
    let a = rest(&s, &DEFAULT, "1.0", Method::GET, "/anything/tasks", None).await;
    assert_eq!(a.status, 200, "{a:?}");
    // None of this created a task anywhere it should not have.
    assert_eq!(listed(&s, &GLOBEX).await.len(), 0);
}

#[tokio::test]
async fn unknown_tenants_and_agents_are_404_in_each_binding() {
    let s = Server::start(Some(CONFIG));
    let rpc_body = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}});
    for path in [
        "/a2a/nosuch/inbox",
        "/a2a/acme/nosuch",
        "/a2a/acme",
        "/a2a/acme/desk",
        "/a2a/globex/inbox/extra/deep/path",
    ] {
        let a = call(
            &s,
            ACME_AUTH,
            Method::POST,
            path,
            Some("1.0"),
            Some(rpc_body.clone()),
        )
        .await;
        assert_eq!(a.status, 404, "{path}: {a:?}");
    }
    for path in [
        "/a2a/nosuch/inbox/tasks",
        "/a2a/nosuch/inbox/message:send",
        "/a2a/acme/nosuch/tasks",
        "/a2a/acme/desk/tasks",
        "/a2a/nosuch/inbox/.well-known/agent-card.json",
        "/a2a/acme/nosuch/.well-known/agent-card.json",
        // A tenant has no card of its own, and an unknown agent none.
        "/a2a/acme/.well-known/agent-card.json",
        "/a2a/nosuch/.well-known/agent-card.json",
        // A tenant's agent is not reachable by its key as a default agent.
        "/a2a/acme%2Finbox/tasks",
    ] {
        let a = call(&s, ACME_AUTH, Method::GET, path, Some("1.0"), None).await;
        assert_eq!(a.status, 404, "{path}: {a:?}");
        assert_eq!(a.body["error"]["status"], "NOT_FOUND", "{path}: {a:?}");
    }
    let a = call(
        &s,
        ACME_AUTH,
        Method::POST,
        "/a2a/acme",
        Some("1.0"),
        Some(rpc_body),
    )
    .await;
    let m = a.body["error"]["message"].as_str().unwrap_or_default();
    assert!(m.contains("tenant"), "a bare tenant says what it is: {m}");
}

#[tokio::test]
async fn cards_of_tenant_agents_advertise_the_tenant_and_its_credentials() {
    let s = Server::start(Some(CONFIG));
    let none = ("X-Nothing", "x");
    let card = |p: &'static str| {
        let s = &s;
        async move {
            let a = call(s, none, Method::GET, p, Some("1.0"), None).await;
            assert_eq!(a.status, 200, "{p}: {a:?}");
            a.body
        }
    };
    let acme = card("/a2a/acme/inbox/.well-known/agent-card.json").await;
    let interfaces = acme["supportedInterfaces"].as_array().unwrap();
    for i in interfaces {
        assert_eq!(i["url"], s.url("/a2a/acme/inbox"), "{i}");
        if i["protocolVersion"] == "1.0" {
            assert_eq!(i["tenant"], "acme", "{i}");
        }
    }
    assert!(
        interfaces
            .iter()
            .any(|i| i["protocolBinding"] == "HTTP+JSON" && i["tenant"] == "acme")
    );
    assert!(acme["securitySchemes"]["bearer"].is_object(), "{acme}");
    assert!(acme["securitySchemes"].get("apiKey").is_none(), "{acme}");
    let globex = card("/a2a/globex/inbox/.well-known/agent-card.json").await;
    assert_eq!(globex["supportedInterfaces"][0]["tenant"], "globex");
    assert!(globex["securitySchemes"]["apiKey"].is_object(), "{globex}");
    assert!(
        globex["securitySchemes"].get("bearer").is_none(),
        "{globex}"
    );
    let default = card("/a2a/inbox/.well-known/agent-card.json").await;
    assert!(
        default["supportedInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i.get("tenant").is_none()),
        "{default}"
    );
    // A client doing what the card says (HTTP+JSON: `{url}/{tenant}/…`;
    // JSON-RPC: `tenant` in the params) reaches the agent.
    let url = globex["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["protocolBinding"] == "HTTP+JSON")
        .map(|i| i["url"].as_str().unwrap().to_owned())
        .unwrap();
    let path = url.strip_prefix(&s.base).unwrap();
    let a = call(
        &s,
        GLOBEX_AUTH,
        Method::POST,
        &format!("{path}/globex/message:send"),
        Some("1.0"),
        Some(json!({"tenant": "globex", "message": message("m-card", "x")})),
    )
    .await;
    assert_eq!(a.status, 200, "{a:?}");
    let a = rpc(
        &s,
        &GLOBEX,
        Some("1.0"),
        "GetTask",
        json!({"tenant": "globex", "id": a.body["task"]["id"]}),
    )
    .await;
    assert_eq!(
        state(&a.body["result"]),
        "TASK_STATE_INPUT_REQUIRED",
        "{a:?}"
    );
}

#[tokio::test]
async fn the_person_sees_every_tenants_parked_tasks_with_their_tenant() {
    let s = Server::start(Some(CONFIG));
    let d = parked_task(&s, &DEFAULT, "h").await;
    let a = parked_task(&s, &ACME, "h").await;
    let g = parked_task(&s, &GLOBEX, "h").await;
    let http = reqwest::Client::new();
    let token = s.ui_token();
    let get = |p: String| {
        let http = http.clone();
        let token = token.clone();
        let url = s.url(&p);
        async move {
            let r = http.get(url).bearer_auth(token).send().await.unwrap();
            assert_eq!(r.status(), 200);
            r.json::<Value>().await.unwrap()
        }
    };
    let q = get("/api/queue".into()).await;
    let items = q["items"].as_array().unwrap();
    assert_eq!(items.len(), 3, "{q}");
    for (id, agent, tenant) in [
        (&d, "inbox", None),
        (&a, "acme/inbox", Some("acme")),
        (&g, "globex/inbox", Some("globex")),
    ] {
        let item = items
            .iter()
            .find(|i| i["taskId"] == id.as_str())
            .unwrap_or_else(|| panic!("{id} in {q}"));
        assert_eq!(item["agentId"], agent, "{item}");
        assert_eq!(item.get("tenant").and_then(Value::as_str), tenant, "{item}");
        let detail = get(format!("/api/tasks/{id}")).await;
        assert_eq!(
            detail.get("tenant").and_then(Value::as_str),
            tenant,
            "{detail}"
        );
    }
    let agents = get("/api/agents".into()).await;
    let listed: Vec<(String, Option<String>)> = agents["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["id"].as_str().unwrap().to_owned(),
                a["tenant"].as_str().map(str::to_owned),
            )
        })
        .collect();
    assert!(
        listed.contains(&("acme/inbox".into(), Some("acme".into()))),
        "{agents}"
    );
    assert!(listed.contains(&("inbox".into(), None)), "{agents}");
    // The person's decision reaches the tenant's caller, in its tenant.
    let r = http
        .post(s.url(&format!("/api/tasks/{a}/decision")))
        .bearer_auth(&token)
        .json(&json!({"kind": "approve"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);
    let t = rpc(&s, &ACME, Some("1.0"), "GetTask", json!({"id": a})).await;
    assert_eq!(state(&t.body["result"]), "TASK_STATE_COMPLETED", "{t:?}");
}

#[test]
fn tenant_configs_that_would_be_ambiguous_are_refused() {
    let check = |config: &str, needle: &str| {
        let err = refused_config(config);
        assert!(err.contains(needle), "{config}: {err}");
    };
    let agent = "\n[[tenants.agents]]\nid = \"inbox\"\n";
    check(
        &format!("[[agents]]\nid = \"acme\"\n[[tenants]]\nid = \"acme\"{agent}"),
        "ambiguous",
    );
    check(&format!("[[tenants]]\nid = \"agents\"{agent}"), "reserved");
    check(&format!("[[tenants]]\nid = \"v1\"{agent}"), "reserved");
    check(
        "[[tenants]]\nid = \"t\"\n[[tenants.agents]]\nid = \"tasks\"\n",
        "reserved",
    );
    check(
        &format!("[[tenants]]\nid = \"Acme\"{agent}"),
        "tenants[0].id",
    );
    check(
        &format!("[[tenants]]\nid = \"a\"{agent}[[tenants]]\nid = \"a\"{agent}"),
        "two tenants",
    );
    check("[[tenants]]\nid = \"a\"\nagents = []\n", "at least one");
    check(
        &format!(
            "[[tenants]]\nid = \"a\"\n[[tenants.credentials]]\nname = \"x\"\nbearer = \"short\"{agent}"
        ),
        "tenants[0].credentials[0]",
    );
}

#[tokio::test]
async fn the_projects_a2a_client_reaches_a_tenant_agent_through_its_card() {
    use countersign::a2a::client::{A2aClient, Binding, Dialect, PeerAuth};
    use countersign::a2a::types::{
        Message, Part, Role, SendMessageRequest, SendMessageResponse, TaskState,
    };
    let s = Server::start(Some(CONFIG));
    let c = A2aClient::new(Duration::from_secs(10)).unwrap();
    let acme = PeerAuth {
        bearer: Some(ACME_AUTH.1.trim_start_matches("Bearer ").into()),
        ..PeerAuth::default()
    };
    let card = c.discover(&s.url("/a2a/acme/inbox"), &acme).await.unwrap();
    let v1 = card.endpoint(Binding::JsonRpc, Dialect::V1).unwrap();
    assert_eq!(v1.tenant.as_deref(), Some("acme"), "{v1:?}");
    for (i, (b, d)) in [
        (Binding::JsonRpc, Dialect::V1),
        (Binding::HttpJson, Dialect::V1),
        (Binding::JsonRpc, Dialect::V03),
        (Binding::HttpJson, Dialect::V03),
    ]
    .into_iter()
    .enumerate()
    {
        let ep = card.endpoint(b, d).unwrap();
        let req = SendMessageRequest {
            tenant: None,
            message: Message {
                message_id: format!("m-client-{i}"),
                context_id: None,
                task_id: None,
                role: Role::User,
                parts: vec![Part::text("from the client")],
                metadata: None,
                extensions: Vec::new(),
                reference_task_ids: Vec::new(),
            },
            configuration: None,
            metadata: None,
        };
        let task = match c.send_message(ep, &acme, req).await {
            Ok(SendMessageResponse::Task(t)) => t,
            other => panic!("{b:?} {d:?}: {other:?}"),
        };
        assert_eq!(task.status.state, TaskState::InputRequired, "{b:?} {d:?}");
        let got = c.get_task(ep, &acme, &task.id, None).await.unwrap();
        assert_eq!(got.id, task.id, "{b:?} {d:?}");
        // The same client with another tenant's credential is refused.
        let globex = PeerAuth {
            api_key: Some((GLOBEX_AUTH.0.into(), GLOBEX_AUTH.1.into())),
            ..PeerAuth::default()
        };
        assert!(
            c.get_task(ep, &globex, &task.id, None).await.is_err(),
            "{b:?} {d:?}"
        );
    }
    // The tasks are acme's, and only acme's.
    assert_eq!(listed(&s, &ACME).await.len(), 3 * 4);
    assert_eq!(listed(&s, &GLOBEX).await.len(), 0);
    assert_eq!(listed(&s, &DEFAULT).await.len(), 0);
}
