//! Interop checks for Countersign with the official Rust SDK's client
//! (`a2a-client-lf`):
//!
//!     rust-sdk-client BASE_URL AGENT_PATH [--transport jsonrpc|http_json|all]
//!
//! AGENT_PATH is `interop` or a tenant's `lab/interop`; the agent is
//! tests/interop/interop-agent.toml. The SDK resolves the card from
//! BASE_URL/a2a/AGENT_PATH and builds its client from the card's interface for
//! the binding (with the tenant that interface declares). Checks per binding:
//!   discover   the card parsed, the client built on the binding asked for
//!   complete   blocking send `interop-complete-*`: completed, with the artifact
//!   stream     streaming send `interop-stream-*`: the task first, then working,
//!              the artifact, completed last; GetTask agrees
//!   cancel     `interop-input-*` parks in input-required; get; cancel; get
//!   subscribe  a parked task's stream: the task first, then its cancellation
//!   list       ListTasks of the task's context finds it
//!   push       push config create, get, list, delete, then get is an error
//!   errors     GetTask of an unknown task is TaskNotFound (-32001)
//! One line per check (PASS/FAIL); exit status 1 if any failed, 2 on bad usage.

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use a2a::{
    A2AError, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, Message, Part, PartContent, Role, SendMessageRequest, SendMessageResponse,
    StreamResponse, SubscribeToTaskRequest, Task, TaskPushNotificationConfig, TaskState,
};
use a2a_client::agent_card::AgentCardResolver;
use a2a_client::{A2AClient, A2AClientFactory, Transport};
use futures::StreamExt;

type Client = A2AClient<Box<dyn Transport>>;
type Checked<T> = Result<(T, String), String>;

const ARTIFACT_TEXT: &str = "interop artifact";
const STREAM_ARTIFACT_TEXT: &str = "interop streamed artifact";
const TIMEOUT: Duration = Duration::from_secs(20);

struct Runner {
    label: String,
    passed: u32,
    failed: u32,
}

impl Runner {
    /// Runs one check: its detail on success, its reason on failure.
    async fn check<T>(&mut self, name: &str, f: impl Future<Output = Checked<T>>) -> Option<T> {
        let outcome = match tokio::time::timeout(TIMEOUT, f).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {}s", TIMEOUT.as_secs())),
        };
        match outcome {
            Ok((value, detail)) => {
                self.passed += 1;
                println!("PASS [{}] {name}: {detail}", self.label);
                Some(value)
            }
            Err(why) => {
                self.failed += 1;
                println!("FAIL [{}] {name}: {why}", self.label);
                None
            }
        }
    }
}

fn expect(cond: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if cond { Ok(()) } else { Err(why()) }
}

fn sdk(e: A2AError) -> String {
    format!("SDK error {}: {}", e.code, e.message)
}

fn request(prefix: &str) -> SendMessageRequest {
    let message_id = format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    SendMessageRequest {
        message: Message {
            message_id,
            context_id: None,
            task_id: None,
            role: Role::User,
            parts: vec![Part::text(format!("{prefix} from the Rust SDK"))],
            metadata: None,
            extensions: None,
            reference_task_ids: None,
        },
        configuration: None,
        metadata: None,
        tenant: None,
    }
}

fn texts(parts: &[Part]) -> Vec<&str> {
    parts
        .iter()
        .filter_map(|p| match &p.content {
            PartContent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

fn artifact_texts(t: &Task) -> Vec<&str> {
    t.artifacts
        .iter()
        .flatten()
        .flat_map(|a| texts(&a.parts))
        .collect()
}

async fn send_task(c: &Client, prefix: &str) -> Result<Task, String> {
    match c.send_message(&request(prefix)).await.map_err(sdk)? {
        SendMessageResponse::Task(t) => Ok(t),
        SendMessageResponse::Message(m) => Err(format!(
            "answered a message ({}), expected a task",
            m.message_id
        )),
    }
}

async fn get(c: &Client, id: &str) -> Result<Task, String> {
    c.get_task(&GetTaskRequest {
        id: id.into(),
        history_length: None,
        tenant: None,
    })
    .await
    .map_err(sdk)
}

async fn cancel(c: &Client, id: &str) -> Result<Task, String> {
    c.cancel_task(&CancelTaskRequest {
        id: id.into(),
        metadata: None,
        tenant: None,
    })
    .await
    .map_err(sdk)
}

fn describe(ev: &StreamResponse) -> String {
    match ev {
        StreamResponse::Task(t) => format!("task({:?})", t.status.state),
        StreamResponse::Message(_) => "message".into(),
        StreamResponse::StatusUpdate(u) => format!("status({:?})", u.status.state),
        StreamResponse::ArtifactUpdate(u) => {
            format!("artifact({:?})", texts(&u.artifact.parts).join(" "))
        }
    }
}

async fn discover(base: &str, agent: &str, binding: &str) -> Checked<Client> {
    let url = format!("{}/a2a/{agent}", base.trim_end_matches('/'));
    let card = AgentCardResolver::new(None)
        .resolve(&url)
        .await
        .map_err(sdk)?;
    let (client, iface) = A2AClientFactory::builder()
        .preferred_bindings(vec![binding.to_owned()])
        .build()
        .create_from_card_with_interface(&card)
        .await
        .map_err(sdk)?;
    expect(iface.protocol_binding == binding, || {
        format!(
            "the client took {} at {}",
            iface.protocol_binding, iface.url
        )
    })?;
    let detail = format!(
        "{:?}: {} {} at {}{}",
        card.name,
        iface.protocol_binding,
        iface.protocol_version,
        iface.url,
        iface
            .tenant
            .as_deref()
            .map(|t| format!(" (tenant {t})"))
            .unwrap_or_default()
    );
    Ok((client, detail))
}

async fn complete(c: &Client) -> Checked<()> {
    let t = send_task(c, "interop-complete").await?;
    expect(t.status.state == TaskState::Completed, || {
        format!("task {} is {:?}, expected completed", t.id, t.status.state)
    })?;
    let arts = artifact_texts(&t);
    expect(arts.contains(&ARTIFACT_TEXT), || {
        format!("artifacts {arts:?}, expected {ARTIFACT_TEXT:?}")
    })?;
    Ok(((), format!("task {} completed with {arts:?}", t.id)))
}

async fn stream(c: &Client) -> Checked<()> {
    let mut s = c
        .send_streaming_message(&request("interop-stream"))
        .await
        .map_err(sdk)?;
    let mut events = Vec::new();
    while let Some(ev) = s.next().await {
        events.push(ev.map_err(sdk)?);
    }
    let seq = events.iter().map(describe).collect::<Vec<_>>().join(" -> ");
    let Some(StreamResponse::Task(first)) = events.first() else {
        return Err(format!("the first event is not the task: {seq}"));
    };
    let state = |ev: &StreamResponse| match ev {
        StreamResponse::StatusUpdate(u) => Some(u.status.state.clone()),
        _ => None,
    };
    let working = events
        .iter()
        .position(|e| state(e) == Some(TaskState::Working));
    let artifact = events.iter().position(|e| {
        matches!(e, StreamResponse::ArtifactUpdate(u) if texts(&u.artifact.parts) == [STREAM_ARTIFACT_TEXT])
    });
    let done = events
        .iter()
        .position(|e| state(e) == Some(TaskState::Completed));
    expect(
        matches!((working, artifact, done), (Some(w), Some(a), Some(d)) if w < a && a < d && d == events.len() - 1),
        || format!("want working < artifact < completed, last: {seq}"),
    )?;
    let ids_agree = events.iter().all(|e| match e {
        StreamResponse::Task(t) => t.id == first.id,
        StreamResponse::StatusUpdate(u) => u.task_id == first.id,
        StreamResponse::ArtifactUpdate(u) => u.task_id == first.id,
        StreamResponse::Message(_) => false,
    });
    expect(ids_agree, || format!("events of other tasks: {seq}"))?;
    let t = get(c, &first.id).await?;
    expect(t.status.state == TaskState::Completed, || {
        format!("GetTask after the stream: {:?}", t.status.state)
    })?;
    Ok(((), seq))
}

async fn park(c: &Client) -> Result<Task, String> {
    let t = send_task(c, "interop-input").await?;
    expect(t.status.state == TaskState::InputRequired, || {
        format!(
            "task {} is {:?}, expected input-required",
            t.id, t.status.state
        )
    })?;
    Ok(t)
}

async fn cancel_flow(c: &Client) -> Checked<Task> {
    let t = park(c).await?;
    let got = get(c, &t.id).await?;
    expect(got.status.state == TaskState::InputRequired, || {
        format!("get: {:?}", got.status.state)
    })?;
    let canceled = cancel(c, &t.id).await?;
    expect(canceled.status.state == TaskState::Canceled, || {
        format!("cancel answered {:?}", canceled.status.state)
    })?;
    let after = get(c, &t.id).await?;
    expect(after.status.state == TaskState::Canceled, || {
        format!("get after cancel: {:?}", after.status.state)
    })?;
    Ok((
        t.clone(),
        format!("task {}: input-required -> canceled", t.id),
    ))
}

async fn subscribe(c: &Client) -> Checked<()> {
    let t = park(c).await?;
    let mut s = c
        .subscribe_to_task(&SubscribeToTaskRequest {
            id: t.id.clone(),
            tenant: None,
        })
        .await
        .map_err(sdk)?;
    let first = s
        .next()
        .await
        .ok_or("the stream ended before its first event")?
        .map_err(sdk)?;
    expect(
        matches!(&first, StreamResponse::Task(ft) if ft.id == t.id && ft.status.state == TaskState::InputRequired),
        || format!("first event {}", describe(&first)),
    )?;
    cancel(c, &t.id).await?;
    let mut rest = Vec::new();
    while let Some(ev) = s.next().await {
        rest.push(ev.map_err(sdk)?);
    }
    let seq = std::iter::once(&first)
        .chain(&rest)
        .map(describe)
        .collect::<Vec<_>>()
        .join(" -> ");
    expect(
        matches!(rest.last(), Some(StreamResponse::StatusUpdate(u)) if u.status.state == TaskState::Canceled),
        || format!("the stream did not end canceled: {seq}"),
    )?;
    Ok(((), seq))
}

async fn list(c: &Client, t: &Task) -> Checked<()> {
    let page = c
        .list_tasks(&ListTasksRequest {
            context_id: Some(t.context_id.clone()),
            status: None,
            page_size: None,
            page_token: None,
            history_length: None,
            status_timestamp_after: None,
            include_artifacts: None,
            tenant: None,
        })
        .await
        .map_err(sdk)?;
    let ids: Vec<&str> = page.tasks.iter().map(|t| t.id.as_str()).collect();
    expect(ids.contains(&t.id.as_str()), || {
        format!("context {} lists {ids:?}", t.context_id)
    })?;
    Ok((
        (),
        format!(
            "context {}: {} task(s), total {}, page size {}",
            t.context_id,
            ids.len(),
            page.total_size,
            page.page_size
        ),
    ))
}

async fn push(c: &Client) -> Checked<()> {
    let t = park(c).await?;
    let url = "http://127.0.0.1:9/rust-sdk-hook".to_owned();
    let created = c
        .create_push_config(&TaskPushNotificationConfig {
            url: url.clone(),
            id: None,
            task_id: t.id.clone(),
            token: Some("rust-sdk-token".into()),
            authentication: None,
            tenant: None,
        })
        .await
        .map_err(sdk)?;
    let id = created.id.clone().ok_or("the created config has no id")?;
    expect(created.url == url && created.task_id == t.id, || {
        format!("created {created:?}")
    })?;
    let got = c
        .get_push_config(&GetTaskPushNotificationConfigRequest {
            task_id: t.id.clone(),
            id: id.clone(),
            tenant: None,
        })
        .await
        .map_err(sdk)?;
    expect(
        got.url == url && got.token.as_deref() == Some("rust-sdk-token"),
        || format!("got {got:?}"),
    )?;
    let listed = c
        .list_push_configs(&ListTaskPushNotificationConfigsRequest {
            task_id: t.id.clone(),
            page_size: None,
            page_token: None,
            tenant: None,
        })
        .await
        .map_err(sdk)?;
    expect(
        listed
            .configs
            .iter()
            .any(|c| c.id.as_deref() == Some(id.as_str())),
        || format!("list {:?}", listed.configs),
    )?;
    let which = DeleteTaskPushNotificationConfigRequest {
        task_id: t.id.clone(),
        id: id.clone(),
        tenant: None,
    };
    c.delete_push_config(&which).await.map_err(sdk)?;
    let gone = c
        .get_push_config(&GetTaskPushNotificationConfigRequest {
            task_id: t.id.clone(),
            id: id.clone(),
            tenant: None,
        })
        .await;
    let code = gone.err().map(|e| e.code);
    expect(code.is_some(), || {
        "the deleted config is still there".into()
    })?;
    cancel(c, &t.id).await?;
    Ok((
        (),
        format!(
            "config {id} on task {}: created, read, listed ({}), deleted (then error {})",
            t.id,
            listed.configs.len(),
            code.unwrap_or_default()
        ),
    ))
}

async fn errors(c: &Client) -> Checked<()> {
    match get(c, "no-such-task").await {
        Ok(t) => Err(format!("GetTask of an unknown id answered task {}", t.id)),
        Err(_) => {
            let e = c
                .get_task(&GetTaskRequest {
                    id: "no-such-task".into(),
                    history_length: None,
                    tenant: None,
                })
                .await
                .err()
                .ok_or("the error went away")?;
            expect(e.code == a2a::error_code::TASK_NOT_FOUND, || sdk(e.clone()))?;
            Ok(((), format!("TaskNotFound ({}): {}", e.code, e.message)))
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (base, agent) = match (args.first(), args.get(1)) {
        (Some(b), Some(a)) => (b.clone(), a.clone()),
        _ => {
            eprintln!(
                "usage: rust-sdk-client BASE_URL AGENT_PATH [--transport jsonrpc|http_json|all]"
            );
            return ExitCode::from(2);
        }
    };
    let transport = match args.iter().position(|a| a == "--transport") {
        Some(i) => args.get(i + 1).map(String::as_str).unwrap_or(""),
        None => "all",
    };
    let bindings: &[&str] = match transport {
        "jsonrpc" => &["JSONRPC"],
        "http_json" => &["HTTP+JSON"],
        "all" => &["JSONRPC", "HTTP+JSON"],
        other => {
            eprintln!("unknown transport {other:?}");
            return ExitCode::from(2);
        }
    };
    let (mut passed, mut failed) = (0, 0);
    for binding in bindings {
        let mut r = Runner {
            label: format!("a2a-client-lf 0.2 {binding} {agent}"),
            passed: 0,
            failed: 0,
        };
        if let Some(c) = r.check("discover", discover(&base, &agent, binding)).await {
            r.check("complete", complete(&c)).await;
            r.check("stream", stream(&c)).await;
            if let Some(t) = r.check("cancel", cancel_flow(&c)).await {
                r.check("list", list(&c, &t)).await;
            }
            r.check("subscribe", subscribe(&c)).await;
            r.check("push", push(&c)).await;
            r.check("errors", errors(&c)).await;
        }
        passed += r.passed;
        failed += r.failed;
    }
    println!("# {passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
