//! The A2A client (`a2a::client`) against the real server, in both dialects
//! over both bindings, and against small local servers that misbehave in
//! one particular way each.
mod common;
use common::*;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use futures::StreamExt;
use serde_json::{Value, json};

use countersign::a2a::Error as A2aError;
use countersign::a2a::client::{
    A2aClient, Binding, ClientError, Dialect, Endpoint, EventStream, PeerAuth, PeerCard,
};
use countersign::a2a::types::{
    AuthenticationInfo, Message, Part, PartContent, Role, SendMessageConfiguration,
    SendMessageRequest, SendMessageResponse, StreamResponse, Task, TaskPushNotificationConfig,
    TaskState,
};

const BEARER: &str = "peer-token-0123456789abcdef";
const API_KEY: &str = "peer-key-0123456789abcdef";

/// The TCK agent, with cards merged (1.0 and 0.3 fields in one document).
fn merged_tck_config() -> String {
    let strict = "[cards]\ncompat = \"strict\"\n";
    assert!(TCK_CONFIG.contains(strict), "the TCK config changed");
    TCK_CONFIG.replace(strict, "")
}

/// The TCK agent behind credentials (a bearer token or an API key header).
fn locked_tck_config() -> String {
    format!(
        "[access]\nrequire_credentials = true\n\n[[access.credentials]]\nname = \"ci\"\nbearer = \"{BEARER}\"\n\n\
         [[access.credentials]]\nname = \"bot\"\napi_key = \"{API_KEY}\"\nheader = \"X-Peer-Key\"\n\n{}",
        merged_tck_config()
    )
}

fn client() -> A2aClient {
    A2aClient::new(Duration::from_secs(10)).unwrap()
}

fn no_auth() -> PeerAuth {
    PeerAuth::default()
}

/// A user message whose id starts with `scenario` (the TCK agent's switch).
fn message(scenario: &str, task: Option<&Task>) -> Message {
    Message {
        message_id: format!("{scenario}-{}", uuid::Uuid::new_v4()),
        context_id: task.map(|t| t.context_id.clone()),
        task_id: task.map(|t| t.id.clone()),
        role: Role::User,
        parts: vec![Part::text("hello")],
        metadata: None,
        extensions: Vec::new(),
        reference_task_ids: Vec::new(),
    }
}

fn request(scenario: &str, task: Option<&Task>) -> SendMessageRequest {
    SendMessageRequest {
        tenant: None,
        message: message(scenario, task),
        configuration: Some(SendMessageConfiguration {
            accepted_output_modes: vec!["text/plain".into()],
            ..SendMessageConfiguration::default()
        }),
        metadata: None,
    }
}

fn task_of(r: SendMessageResponse) -> Task {
    match r {
        SendMessageResponse::Task(t) => t,
        SendMessageResponse::Message(m) => panic!("expected a task, got message {m:?}"),
    }
}

/// Every event of a stream until it ends (at most 30 s); an error fails the test.
async fn collect(mut s: EventStream) -> Vec<StreamResponse> {
    let mut out = Vec::new();
    loop {
        let next = tokio::time::timeout(Duration::from_secs(30), s.next())
            .await
            .expect("the stream neither ended nor sent an event within 30 s");
        match next {
            Some(Ok(ev)) => out.push(ev),
            Some(Err(e)) => panic!("stream failed after {out:?}: {e}"),
            None => return out,
        }
    }
}

fn state_of(ev: &StreamResponse) -> Option<TaskState> {
    match ev {
        StreamResponse::Task(t) => Some(t.status.state),
        StreamResponse::StatusUpdate(u) => Some(u.status.state),
        _ => None,
    }
}

fn texts(task: &Task) -> Vec<String> {
    task.artifacts
        .iter()
        .flatten()
        .flat_map(|a| &a.parts)
        .filter_map(|p| match &p.content {
            PartContent::Text(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

/// Serves `router` on 127.0.0.1:0; returns its base URL.
async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}

fn endpoint(url: &str, binding: Binding, dialect: Dialect) -> Endpoint {
    Endpoint {
        url: url.parse().unwrap(),
        binding,
        dialect,
        tenant: None,
    }
}

const COMBOS: [(Binding, Dialect); 4] = [
    (Binding::JsonRpc, Dialect::V1),
    (Binding::HttpJson, Dialect::V1),
    (Binding::JsonRpc, Dialect::V03),
    (Binding::HttpJson, Dialect::V03),
];

// ------------------------------------------------------------------ discovery

#[tokio::test]
async fn discovery_from_the_agent_url_prefers_1_0_json_rpc_and_finds_all_four_endpoints() {
    let s = Server::start(Some(TCK_CONFIG));
    let card = client()
        .discover(&s.url("/a2a/tck"), &no_auth())
        .await
        .unwrap();
    assert_eq!(card.name, "Countersign TCK agent");
    assert!(card.streaming);
    assert!(card.push_notifications);
    assert_eq!(card.source, s.url("/a2a/tck/.well-known/agent-card.json"));
    assert_eq!(
        card.chosen,
        endpoint(&s.url("/a2a/tck"), Binding::JsonRpc, Dialect::V1)
    );
    for (b, d) in COMBOS {
        assert!(card.endpoint(b, d).is_some(), "{b:?} {d:?}: {card:?}");
    }
    // The strict card has no 0.3 fields: the 0.3 endpoints came from its
    // `supportedInterfaces`.
    assert!(card.card.get("url").is_none());
}

#[tokio::test]
async fn discovery_from_the_host_root_reads_the_first_agents_card() {
    let s = Server::start(Some(TCK_CONFIG));
    let card = client().discover(&s.base, &no_auth()).await.unwrap();
    assert_eq!(card.source, s.url("/.well-known/agent-card.json"));
    assert_eq!(card.chosen.url.as_str(), s.url("/a2a/tck"));
    assert_eq!(card.chosen.dialect, Dialect::V1);
}

#[tokio::test]
async fn a_merged_card_is_read_as_1_0() {
    let s = Server::start(Some(&merged_tck_config()));
    // `agent.json` is always the merged card.
    let card = client()
        .discover(&s.url("/a2a/tck/.well-known/agent.json"), &no_auth())
        .await
        .unwrap();
    assert!(card.card.get("url").is_some() && card.card.get("supportedInterfaces").is_some());
    assert_eq!(card.chosen.dialect, Dialect::V1);
    assert_eq!(card.chosen.binding, Binding::JsonRpc);
    let sent = client()
        .send_message(&card.chosen, &no_auth(), request("tck-complete-task", None))
        .await
        .unwrap();
    assert_eq!(task_of(sent).status.state, TaskState::Completed);
}

#[tokio::test]
async fn a_0_3_card_leads_to_the_0_3_dialect() {
    let s = Server::start(Some(TCK_CONFIG));
    let agent = s.url("/a2a/tck");
    let card = json!({"protocolVersion": "0.3.0", "name": "old", "description": "a 0.3 agent",
        "url": agent, "preferredTransport": "HTTP+JSON",
        "additionalInterfaces": [{"url": agent, "transport": "JSONRPC"}],
        "version": "1", "capabilities": {"streaming": true},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"], "skills": []});
    let cards = serve(Router::new().route(
        "/.well-known/agent-card.json",
        get(move || async move { axum::Json(card) }),
    ))
    .await;
    let peer = client().discover(&cards, &no_auth()).await.unwrap();
    assert_eq!(
        peer.chosen,
        endpoint(&agent, Binding::HttpJson, Dialect::V03)
    );
    assert_eq!(peer.endpoints.len(), 2);
    let sent = client()
        .send_message(&peer.chosen, &no_auth(), request("tck-artifact-text", None))
        .await
        .unwrap();
    let t = task_of(sent);
    assert_eq!(t.status.state, TaskState::Completed);
    assert_eq!(texts(&t), ["Generated text content"]);
}

#[tokio::test]
async fn discovery_falls_back_to_agent_json() {
    let card = json!({"name": "legacy", "url": "http://127.0.0.1:9/a2a"});
    let base = serve(Router::new().route(
        "/.well-known/agent.json",
        get(move || async move { axum::Json(card) }),
    ))
    .await;
    let peer = client().discover(&base, &no_auth()).await.unwrap();
    assert_eq!(peer.source, format!("{base}/.well-known/agent.json"));
    assert_eq!(peer.chosen.dialect, Dialect::V03);
}

// ------------------------------------------------------------------ the four ways to talk

/// Send, follow up, get, cancel, stream and subscribe through `ep`.
async fn converse(s: &Server, binding: Binding, dialect: Dialect) {
    let c = client();
    let auth = no_auth();
    let card = c.discover(&s.url("/a2a/tck"), &auth).await.unwrap();
    let ep = card.endpoint(binding, dialect).unwrap().clone();

    // Send → completed.
    let done = task_of(
        c.send_message(&ep, &auth, request("tck-complete-task", None))
            .await
            .unwrap(),
    );
    assert_eq!(done.status.state, TaskState::Completed, "{done:?}");
    assert_eq!(
        done.status.message.as_ref().map(Message::text).as_deref(),
        Some("Hello from TCK")
    );

    // Input required → get → the follow-up completes it.
    let asked = task_of(
        c.send_message(&ep, &auth, request("tck-input-required", None))
            .await
            .unwrap(),
    );
    assert_eq!(asked.status.state, TaskState::InputRequired);
    let got = c.get_task(&ep, &auth, &asked.id, Some(10)).await.unwrap();
    assert_eq!(got.id, asked.id);
    assert_eq!(got.status.state, TaskState::InputRequired);
    assert!(!got.history.is_empty());
    let answered = task_of(
        c.send_message(&ep, &auth, request("tck-complete-task", Some(&asked)))
            .await
            .unwrap(),
    );
    assert_eq!(answered.id, asked.id);
    assert_eq!(answered.status.state, TaskState::Completed);

    // Cancel.
    let waiting = task_of(
        c.send_message(&ep, &auth, request("tck-input-required", None))
            .await
            .unwrap(),
    );
    let canceled = c.cancel_task(&ep, &auth, &waiting.id).await.unwrap();
    assert_eq!(canceled.id, waiting.id);
    assert_eq!(canceled.status.state, TaskState::Canceled);

    // Streaming send: the task first, then its events in order, ending completed.
    let events = collect(
        c.send_streaming(&ep, &auth, request("tck-stream-001", None))
            .await
            .unwrap(),
    )
    .await;
    assert!(
        matches!(events.first(), Some(StreamResponse::Task(_))),
        "{events:?}"
    );
    let artifact = events
        .iter()
        .position(|e| matches!(e, StreamResponse::ArtifactUpdate(a) if a.artifact.parts[0] == Part::text("Stream hello from TCK")))
        .unwrap_or_else(|| panic!("no artifact in {events:?}"));
    let last = events.len() - 1;
    assert!(artifact < last);
    assert_eq!(state_of(&events[last]), Some(TaskState::Completed));
    let states: Vec<TaskState> = events.iter().filter_map(state_of).collect();
    assert!(
        states.windows(2).all(|w| w[0] != TaskState::Completed),
        "nothing after completion: {states:?}"
    );

    // Subscribe to a waiting task; the follow-up's events arrive, then the end.
    let waiting = task_of(
        c.send_message(&ep, &auth, request("tck-input-required", None))
            .await
            .unwrap(),
    );
    let mut sub = c.subscribe(&ep, &auth, &waiting.id).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(30), sub.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        matches!(&first, StreamResponse::Task(t) if t.id == waiting.id && t.status.state == TaskState::InputRequired),
        "{first:?}"
    );
    c.send_message(&ep, &auth, request("tck-complete-task", Some(&waiting)))
        .await
        .unwrap();
    let rest = collect(sub).await;
    assert_eq!(
        rest.last().and_then(state_of),
        Some(TaskState::Completed),
        "{rest:?}"
    );

    // Errors come back as A2A errors with their A2A code, whatever the binding.
    let e = c
        .get_task(&ep, &auth, "no-such-task", None)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ClientError::Remote { code: -32001, reason, .. } if reason == "TASK_NOT_FOUND"),
        "{e:?}"
    );
    assert!(matches!(e.a2a_error(), Some(A2aError::TaskNotFound(_))));
    let e = c.cancel_task(&ep, &auth, &done.id).await.unwrap_err();
    assert!(
        matches!(e, ClientError::Remote { code: -32002, .. }),
        "{e:?}"
    );
    // Push configs: a loopback webhook (allow-listed in the TCK config) is
    // stored; a private address is refused with the reason.
    let cfg = |url: &str| TaskPushNotificationConfig {
        tenant: None,
        id: None,
        task_id: Some(done.id.clone()),
        url: url.into(),
        token: Some("tok".into()),
        authentication: None,
    };
    let stored = c
        .create_push_config(&ep, &auth, cfg("http://127.0.0.1:9/a2a"))
        .await
        .unwrap();
    assert_eq!(stored.url, "http://127.0.0.1:9/a2a");
    assert!(stored.id.is_some_and(|i| !i.is_empty()));
    let e = c
        .create_push_config(&ep, &auth, cfg("http://10.1.2.3/a2a"))
        .await
        .unwrap_err();
    assert!(
        matches!(e.a2a_error(), Some(A2aError::InvalidParams(ref m)) if m.contains("private")),
        "{e:?}"
    );
}

#[tokio::test]
async fn v1_json_rpc_conversation() {
    let s = Server::start(Some(TCK_CONFIG));
    converse(&s, Binding::JsonRpc, Dialect::V1).await;
}

#[tokio::test]
async fn v1_http_json_conversation() {
    let s = Server::start(Some(TCK_CONFIG));
    converse(&s, Binding::HttpJson, Dialect::V1).await;
}

#[tokio::test]
async fn v0_3_json_rpc_conversation() {
    let s = Server::start(Some(TCK_CONFIG));
    converse(&s, Binding::JsonRpc, Dialect::V03).await;
}

#[tokio::test]
async fn v0_3_http_json_conversation() {
    let s = Server::start(Some(TCK_CONFIG));
    converse(&s, Binding::HttpJson, Dialect::V03).await;
}

/// The task that holds a message is found by listing a 1.0 peer's tasks
/// (ListTasks), page by page, over both bindings: what a send cut short
/// by a stop asks before it goes again. Not found is `None`; more pages
/// than allowed, or a 0.3 endpoint, is an error.
#[tokio::test]
async fn the_task_holding_a_message_is_found_in_a_1_0_peers_task_list() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = client();
    let auth = no_auth();
    let card = c.discover(&s.url("/a2a/tck"), &auth).await.unwrap();
    let rpc = card
        .endpoint(Binding::JsonRpc, Dialect::V1)
        .unwrap()
        .clone();
    let since = countersign::a2a::types::format_timestamp(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
            - 1_000,
    );
    // 105 tasks: ListTasks answers newest first, so the first is on page 2.
    let mut sent = Vec::new();
    for _ in 0..105 {
        let r = request("tck-input-required", None);
        let id = r.message.message_id.clone();
        let t = task_of(c.send_message(&rpc, &auth, r).await.unwrap());
        sent.push((id, t.id));
    }
    let (first_message, first_task) = &sent[0];
    let (last_message, last_task) = &sent[104];
    for binding in [Binding::JsonRpc, Binding::HttpJson] {
        let ep = card.endpoint(binding, Dialect::V1).unwrap().clone();
        let found = c
            .task_holding(&ep, &auth, first_message, &since, 2)
            .await
            .unwrap()
            .expect("the first task");
        assert_eq!(&found.id, first_task, "{binding:?}");
        let found = c
            .task_holding(&ep, &auth, last_message, &since, 1)
            .await
            .unwrap()
            .expect("the last task");
        assert_eq!(&found.id, last_task, "{binding:?}");
        let none = c
            .task_holding(&ep, &auth, "nobody-sent-this", &since, 2)
            .await
            .unwrap();
        assert!(none.is_none(), "{binding:?}: {none:?}");
        let too_many = c.task_holding(&ep, &auth, first_message, &since, 1).await;
        assert!(
            matches!(too_many, Err(ClientError::Unsupported(_))),
            "{binding:?}: {too_many:?}"
        );
        let later = countersign::a2a::types::format_timestamp(4_102_444_800_000);
        let none = c
            .task_holding(&ep, &auth, first_message, &later, 1)
            .await
            .unwrap();
        assert!(none.is_none(), "{binding:?}: changed since 2100: {none:?}");
    }
    for binding in [Binding::JsonRpc, Binding::HttpJson] {
        let ep = card.endpoint(binding, Dialect::V03).unwrap().clone();
        let old = c.task_holding(&ep, &auth, first_message, &since, 2).await;
        assert!(
            matches!(old, Err(ClientError::Unsupported(_))),
            "{binding:?}: {old:?}"
        );
    }
}

/// A server that answers every call with what it was sent (the params of a
/// JSON-RPC call, the body of anything else), so encoding and decoding can
/// be checked against each other.
async fn echo_server() -> String {
    async fn echo(body: axum::body::Bytes) -> impl IntoResponse {
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let answer = match v.get("jsonrpc") {
            Some(_) => json!({"jsonrpc": "2.0", "id": v["id"], "result": v["params"]}),
            None => v,
        };
        axum::Json(answer)
    }
    serve(Router::new().fallback(echo)).await
}

#[tokio::test]
async fn push_configs_survive_the_trip_through_every_dialect_and_binding() {
    let base = echo_server().await;
    let cfg = TaskPushNotificationConfig {
        tenant: None,
        id: Some("hook-1".into()),
        task_id: Some("task-1".into()),
        url: "https://hooks.example.com/a2a".into(),
        token: Some("tok".into()),
        authentication: Some(AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: Some("cred".into()),
        }),
    };
    for (b, d) in COMBOS {
        let ep = endpoint(&format!("{base}/a2a"), b, d);
        let back = client()
            .create_push_config(&ep, &no_auth(), cfg.clone())
            .await
            .unwrap_or_else(|e| panic!("{b:?} {d:?}: {e}"));
        assert_eq!(back, cfg, "{b:?} {d:?}");
    }
    let mut no_task = cfg;
    no_task.task_id = None;
    let ep = endpoint(&base, Binding::JsonRpc, Dialect::V1);
    assert!(matches!(
        client().create_push_config(&ep, &no_auth(), no_task).await,
        Err(ClientError::Incomplete(_))
    ));
}

// ------------------------------------------------------------------ auth

#[tokio::test]
async fn credentials_from_the_peer_config_are_sent_and_required() {
    let s = Server::start(Some(&locked_tck_config()));
    let c = client();
    // The card stays public.
    let card = c.discover(&s.url("/a2a/tck"), &no_auth()).await.unwrap();
    let bearer = PeerAuth {
        bearer: Some(BEARER.into()),
        ..PeerAuth::default()
    };
    let api_key = PeerAuth {
        api_key: Some(("X-Peer-Key".into(), API_KEY.into())),
        ..PeerAuth::default()
    };
    let wrong = PeerAuth {
        bearer: Some("not-the-token-0123456789".into()),
        ..PeerAuth::default()
    };
    for (b, d) in COMBOS {
        let ep = card.endpoint(b, d).unwrap();
        let e = c
            .send_message(ep, &no_auth(), request("tck-complete-task", None))
            .await
            .unwrap_err();
        assert!(
            matches!(e, ClientError::Unauthorized { status: 401, .. }),
            "{b:?} {d:?}: {e:?}"
        );
        let e = c.get_task(ep, &wrong, "any", None).await.unwrap_err();
        assert!(
            matches!(e, ClientError::Unauthorized { status: 401, .. }),
            "{b:?} {d:?}: {e:?}"
        );
        for auth in [&bearer, &api_key] {
            let t = task_of(
                c.send_message(ep, auth, request("tck-complete-task", None))
                    .await
                    .unwrap_or_else(|e| panic!("{b:?} {d:?} {auth:?}: {e}")),
            );
            assert_eq!(t.status.state, TaskState::Completed);
            let again = c.get_task(ep, auth, &t.id, None).await.unwrap();
            assert_eq!(again.id, t.id);
        }
    }
    // A task belongs to the credential that made it.
    let ep = card.endpoint(Binding::JsonRpc, Dialect::V1).unwrap();
    let t = task_of(
        c.send_message(ep, &bearer, request("tck-input-required", None))
            .await
            .unwrap(),
    );
    let e = c.get_task(ep, &api_key, &t.id, None).await.unwrap_err();
    assert!(
        matches!(e, ClientError::Remote { code: -32001, .. }),
        "{e:?}"
    );
}

#[tokio::test]
async fn auth_and_custom_headers_reach_the_peer_and_0_3_calls_carry_no_version() {
    let seen: Arc<std::sync::Mutex<Vec<HeaderMap>>> = Arc::default();
    let record = seen.clone();
    let base = serve(
        Router::new().fallback(move |headers: HeaderMap, body: axum::body::Bytes| {
            let record = record.clone();
            async move {
                record.lock().unwrap().push(headers);
                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let task =
                    json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}});
                axum::Json(json!({"jsonrpc": "2.0", "id": v["id"], "result": task}))
            }
        }),
    )
    .await;
    let auth = PeerAuth {
        bearer: Some("tok-1".into()),
        api_key: Some(("X-Api-Key".into(), "key-2".into())),
        headers: vec![("X-Team".into(), "blue".into())],
    };
    let c = client();
    let ep = endpoint(&base, Binding::JsonRpc, Dialect::V1);
    assert_eq!(c.get_task(&ep, &auth, "t", None).await.unwrap().id, "t");
    let h = seen.lock().unwrap().pop().unwrap();
    assert_eq!(h["authorization"], "Bearer tok-1");
    assert_eq!(h["x-api-key"], "key-2");
    assert_eq!(h["x-team"], "blue");
    assert_eq!(h["a2a-version"], "1.0");
    assert_eq!(h[header::CONTENT_TYPE], "application/json");

    let old_task =
        json!({"kind": "task", "id": "t", "contextId": "c", "status": {"state": "working"}});
    let old = serve(
        Router::new().fallback(move |headers: HeaderMap, body: axum::body::Bytes| {
            let task = old_task.clone();
            async move {
                assert!(headers.get("a2a-version").is_none(), "{headers:?}");
                assert_eq!(headers["authorization"], "Bearer tok-1");
                let v: Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(v["method"], "tasks/get");
                axum::Json(json!({"jsonrpc": "2.0", "id": v["id"], "result": task}))
            }
        }),
    )
    .await;
    let ep = endpoint(&old, Binding::JsonRpc, Dialect::V03);
    let t = c.get_task(&ep, &auth, "t", None).await.unwrap();
    assert_eq!(t.status.state, TaskState::Working);
}

// ------------------------------------------------------------------ failures

#[tokio::test]
async fn a_refused_connection_says_nothing_is_listening() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/a2a/x");
    let c = client();
    let e = c.discover(&url, &no_auth()).await.unwrap_err();
    assert!(matches!(e, ClientError::Refused(_)), "{e:?}");
    let ep = endpoint(&url, Binding::JsonRpc, Dialect::V1);
    let e = c
        .send_message(&ep, &no_auth(), request("tck-complete-task", None))
        .await
        .unwrap_err();
    assert!(matches!(&e, ClientError::Refused(u) if u == &url), "{e:?}");
    assert!(e.to_string().contains("nothing is listening"), "{e}");
}

/// A peer that accepts connections and never answers; counts them.
async fn silent_peer() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            held.push(sock);
        }
    });
    (format!("http://{addr}"), accepted)
}

#[tokio::test]
async fn a_silent_peer_times_out_and_only_reads_are_retried() {
    let (base, accepted) = silent_peer().await;
    let c = A2aClient::new(Duration::from_millis(300)).unwrap();
    let ep = endpoint(&base, Binding::JsonRpc, Dialect::V1);

    let started = Instant::now();
    let e = c
        .send_message(&ep, &no_auth(), request("tck-complete-task", None))
        .await
        .unwrap_err();
    assert!(matches!(e, ClientError::Timeout(_)), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "a send is never retried"
    );

    let e = c.get_task(&ep, &no_auth(), "t", None).await.unwrap_err();
    assert!(matches!(e, ClientError::Timeout(_)), "{e:?}");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        4,
        "a read is tried three times"
    );

    let e = c.cancel_task(&ep, &no_auth(), "t").await.unwrap_err();
    assert!(matches!(e, ClientError::Timeout(_)), "{e:?}");
    assert_eq!(accepted.load(Ordering::SeqCst), 5);

    // A stream whose answer never begins times out too.
    let e = c
        .send_streaming(&ep, &no_auth(), request("tck-stream-001", None))
        .await
        .err()
        .unwrap();
    assert!(matches!(e, ClientError::Timeout(_)), "{e:?}");

    let e = c.discover(&base, &no_auth()).await.unwrap_err();
    assert!(matches!(e, ClientError::Timeout(_)), "{e:?}");
}

#[tokio::test]
async fn reads_retry_through_brief_outages_but_sends_do_not() {
    let gets = Arc::new(AtomicUsize::new(0));
    let sends = Arc::new(AtomicUsize::new(0));
    let (g, sn) = (gets.clone(), sends.clone());
    let base = serve(
        Router::new()
            .route(
                "/a2a/tasks/{id}",
                get(move || {
                    let g = g.clone();
                    async move {
                        if g.fetch_add(1, Ordering::SeqCst) < 2 {
                            return (StatusCode::SERVICE_UNAVAILABLE, "busy").into_response();
                        }
                        axum::Json(json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}))
                            .into_response()
                    }
                }),
            )
            .route(
                "/a2a/message:send",
                post(move || {
                    let sn = sn.clone();
                    async move {
                        sn.fetch_add(1, Ordering::SeqCst);
                        (StatusCode::SERVICE_UNAVAILABLE, "busy")
                    }
                }),
            ),
    )
    .await;
    let ep = endpoint(&format!("{base}/a2a"), Binding::HttpJson, Dialect::V1);
    let c = client();
    let t = c.get_task(&ep, &no_auth(), "t", None).await.unwrap();
    assert_eq!(t.status.state, TaskState::Completed);
    assert_eq!(gets.load(Ordering::SeqCst), 3);
    let e = c
        .send_message(&ep, &no_auth(), request("tck-complete-task", None))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ClientError::Http { status: 503, body } if body == "busy"),
        "{e:?}"
    );
    assert_eq!(sends.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn bad_cards_say_what_is_wrong() {
    let base = serve(
        Router::new()
            .route(
                "/empty/.well-known/agent-card.json",
                get(|| async { axum::Json(json!({})) }),
            )
            .route(
                "/html/.well-known/agent-card.json",
                get(|| async {
                    axum::response::Html("<!doctype html><title>Welcome</title><p>Not a card</p>")
                }),
            )
            .route(
                "/grpc/.well-known/agent-card.json",
                get(|| async {
                    axum::Json(json!({"name": "g", "supportedInterfaces": [
                        {"url": "g.example:443", "protocolBinding": "GRPC", "protocolVersion": "1.0"}]}))
                }),
            ),
    )
    .await;
    let c = client();
    let reason = |e: ClientError| match e {
        ClientError::BadCard { reason, .. } => reason,
        other => panic!("{other:?}"),
    };
    let r = reason(
        c.discover(&format!("{base}/empty"), &no_auth())
            .await
            .unwrap_err(),
    );
    assert!(r.contains("supportedInterfaces"), "{r}");
    let r = reason(
        c.discover(&format!("{base}/html"), &no_auth())
            .await
            .unwrap_err(),
    );
    assert!(r.contains("not JSON") && r.contains("text/html"), "{r}");
    let r = reason(
        c.discover(&format!("{base}/grpc"), &no_auth())
            .await
            .unwrap_err(),
    );
    assert!(r.contains("no endpoint"), "{r}");
    let r = reason(
        c.discover(&format!("{base}/nothing"), &no_auth())
            .await
            .unwrap_err(),
    );
    assert!(
        r.contains("agent-card.json") && r.contains("agent.json"),
        "{r}"
    );
}

#[tokio::test]
async fn an_unknown_host_fails_fast_as_a_dns_error() {
    let c = client();
    let started = Instant::now();
    let e = c
        .discover("http://nonexistent.invalid/a2a", &no_auth())
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ClientError::Dns { host, .. } if host == "nonexistent.invalid"),
        "{e:?}"
    );
    let ep = endpoint(
        "https://nonexistent.invalid/a2a",
        Binding::HttpJson,
        Dialect::V1,
    );
    let e = c.get_task(&ep, &no_auth(), "t", None).await.unwrap_err();
    assert!(matches!(e, ClientError::Dns { .. }), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn tls_to_a_plain_http_server_is_a_tls_error() {
    let s = Server::start(Some(TCK_CONFIG));
    let url = s.url("/a2a/tck").replace("http://", "https://");
    let e = client()
        .send_message(
            &endpoint(&url, Binding::JsonRpc, Dialect::V1),
            &no_auth(),
            request("tck-complete-task", None),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, ClientError::Tls { .. }), "{e:?}");
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let base = serve(Router::new().fallback(|| async {
        (
            StatusCode::TEMPORARY_REDIRECT,
            [(header::LOCATION, "https://elsewhere.example/a2a")],
        )
    }))
    .await;
    let ep = endpoint(&base, Binding::JsonRpc, Dialect::V1);
    let e = client()
        .send_message(&ep, &no_auth(), request("tck-complete-task", None))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ClientError::Redirect { to, .. } if to == "https://elsewhere.example/a2a"),
        "{e:?}"
    );
    let e = client().discover(&base, &no_auth()).await.unwrap_err();
    assert!(matches!(e, ClientError::Redirect { .. }), "{e:?}");
}

#[tokio::test]
async fn answers_that_are_not_a2a_are_protocol_errors() {
    let base = serve(
        Router::new()
            .route(
                "/html",
                post(|| async { axum::response::Html("<html>hello</html>") }),
            )
            .route(
                "/shape",
                post(|body: axum::body::Bytes| async move {
                    let v: Value = serde_json::from_slice(&body).unwrap();
                    axum::Json(json!({"jsonrpc": "2.0", "id": v["id"], "result": {"id": "t"}}))
                }),
            )
            .route(
                "/not-sse/message:stream",
                post(|| async { axum::Json(json!({"task": {}})) }),
            ),
    )
    .await;
    let c = client();
    let send = |path: &str| {
        let ep = endpoint(&format!("{base}{path}"), Binding::JsonRpc, Dialect::V1);
        let c = c.clone();
        async move {
            c.send_message(&ep, &no_auth(), request("tck-complete-task", None))
                .await
                .unwrap_err()
        }
    };
    let e = send("/html").await;
    assert!(
        matches!(&e, ClientError::Protocol(m) if m.contains("text/html")),
        "{e:?}"
    );
    let e = send("/shape").await;
    assert!(matches!(e, ClientError::Protocol(_)), "{e:?}");
    let ep = endpoint(&format!("{base}/not-sse"), Binding::HttpJson, Dialect::V1);
    let e = c
        .send_streaming(&ep, &no_auth(), request("tck-stream-001", None))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&e, ClientError::Protocol(m) if m.contains("not an event stream")),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_v1_stream_refused_with_a_json_error_is_a_remote_error() {
    let s = Server::start(Some(TCK_CONFIG));
    let card: PeerCard = client()
        .discover(&s.url("/a2a/tck"), &no_auth())
        .await
        .unwrap();
    for (b, d) in COMBOS {
        let ep = card.endpoint(b, d).unwrap();
        let e = client().subscribe(ep, &no_auth(), "no-such-task").await;
        // 1.0 peers refuse the stream; 0.3 peers send the error as its one event.
        let e = match e {
            Err(e) => e,
            Ok(mut stream) => stream.next().await.unwrap().unwrap_err(),
        };
        assert!(
            matches!(e, ClientError::Remote { code: -32001, .. }),
            "{b:?} {d:?}: {e:?}"
        );
    }
}

#[tokio::test]
async fn streams_are_read_across_comments_and_split_lines_and_time_out_when_silent() {
    async fn stream() -> impl IntoResponse {
        // One event in two `data:` lines with CRLF endings, a keep-alive
        // comment, a second event, then silence with the connection open.
        let first = ": keep-alive\r\n\r\ndata: {\"statusUpdate\": {\"taskId\": \"t\", \"contextId\": \"c\",\r\ndata:  \"status\": {\"state\": \"TASK_STATE_WORKING\"}}}\r\n\r\n";
        let second = "data: {\"artifactUpdate\": {\"taskId\": \"t\", \"contextId\": \"c\", \"artifact\": {\"artifactId\": \"a\", \"parts\": [{\"text\": \"x\"}]}}}\n\n";
        let chunks = futures::stream::iter([first, second])
            .map(|c| Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(c)))
            .chain(futures::stream::pending());
        (
            [(header::CONTENT_TYPE, "text/event-stream")],
            axum::body::Body::from_stream(chunks),
        )
    }
    let base = serve(
        Router::new()
            .route("/a2a/tasks/{id}", get(stream))
            .route("/post-only/tasks/{id}", post(stream)),
    )
    .await;
    let c = client().with_stream_idle_timeout(Duration::from_millis(300));
    // `GET /a2a/tasks/t:subscribe` lands on `/a2a/tasks/{id}`.
    let ep = endpoint(&format!("{base}/a2a"), Binding::HttpJson, Dialect::V1);
    let mut s = c.subscribe(&ep, &no_auth(), "t").await.unwrap();
    let first = s.next().await.unwrap().unwrap();
    assert!(
        matches!(&first, StreamResponse::StatusUpdate(u) if u.status.state == TaskState::Working),
        "{first:?}"
    );
    assert!(matches!(
        s.next().await.unwrap().unwrap(),
        StreamResponse::ArtifactUpdate(_)
    ));
    let e = s.next().await.unwrap().unwrap_err();
    assert!(matches!(e, ClientError::Timeout(_)), "{e:?}");
    assert!(s.next().await.is_none(), "an error ends the stream");

    // A peer that takes only the spec text's POST answers GET with 405:
    // the subscription is asked again with POST.
    let ep = endpoint(&format!("{base}/post-only"), Binding::HttpJson, Dialect::V1);
    let mut s = c.subscribe(&ep, &no_auth(), "t").await.unwrap();
    assert!(matches!(
        s.next().await.unwrap().unwrap(),
        StreamResponse::StatusUpdate(_)
    ));
}
