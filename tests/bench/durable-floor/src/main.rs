//! The floor of a durable A2A server: JSON-RPC `SendMessage` stores a
//! completed echo task (its row and two messages) and answers once the
//! transaction holding it has committed; `GetTask` reads it back. One
//! writer thread groups whatever requests are waiting into one commit,
//! after giving its core back once so that more of them are, and wakes
//! their callers in one go.
//! Usage: durable-floor PORT DB_PATH
use std::sync::{Arc, Mutex, mpsc};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Value, json};
use tokio::sync::oneshot;

const SCHEMA: &str = "PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY, context_id TEXT NOT NULL, state INTEGER NOT NULL,
    status TEXT NOT NULL, created_ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS tasks_by_context ON tasks(context_id);
CREATE TABLE IF NOT EXISTS messages (
    task_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)) WITHOUT ROWID;";

/// A task to store, and where to say it is stored.
struct Job {
    id: String,
    context_id: String,
    status: String,
    messages: [String; 2],
    done: oneshot::Sender<Result<(), String>>,
}

struct App {
    writer: mpsc::Sender<Job>,
    reader: Mutex<Connection>,
}

fn open(path: &str) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.execute_batch(SCHEMA)?;
    Ok(conn)
}

fn write_batch(conn: &mut Connection, batch: &[Job], now: i64) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut task = tx.prepare_cached(
            "INSERT INTO tasks (id, context_id, state, status, created_ms) VALUES (?1, ?2, 3, ?3, ?4)",
        )?;
        let mut message =
            tx.prepare_cached("INSERT INTO messages (task_id, seq, body) VALUES (?1, ?2, ?3)")?;
        for job in batch {
            task.execute(params![job.id, job.context_id, job.status, now])?;
            for (seq, body) in (1..).zip(&job.messages) {
                message.execute(params![job.id, seq, body])?;
            }
        }
    }
    tx.commit()
}

fn writer(mut conn: Connection, jobs: mpsc::Receiver<Job>, runtime: tokio::runtime::Handle) {
    while let Ok(first) = jobs.recv() {
        // As Countersign's writer does: the core back once, so that the
        // requests its HTTP worker has read join this commit.
        std::thread::yield_now();
        let mut batch = vec![first];
        batch.extend(jobs.try_iter());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let result = write_batch(&mut conn, &batch, now).map_err(|e| e.to_string());
        // As Countersign's writer does: the callers are woken by one task on
        // the runtime, so its worker wakes once a batch, not once a caller.
        runtime.spawn(async move {
            for job in batch {
                let _ = job.done.send(result.clone());
            }
        });
    }
}

fn answer(body: Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn error(id: &Value, code: i64, message: &str) -> Response {
    answer(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

async fn rpc(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let Ok(req) = serde_json::from_slice::<Value>(&body) else {
        return error(&Value::Null, -32700, "invalid JSON");
    };
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    match req["method"].as_str() {
        Some("SendMessage") => send(&app, &id, &req["params"]).await,
        Some("GetTask") => get_task(&app, &id, &req["params"]),
        _ => error(&id, -32601, "method not found"),
    }
}

async fn send(app: &App, rpc_id: &Value, params: &Value) -> Response {
    let mut message = params["message"].clone();
    if !message.is_object() {
        return error(rpc_id, -32602, "params.message is required");
    }
    let id = uuid::Uuid::now_v7().to_string();
    let context_id = match message["contextId"].as_str() {
        Some(c) => c.to_owned(),
        None => uuid::Uuid::now_v7().to_string(),
    };
    message["taskId"] = json!(id);
    message["contextId"] = json!(context_id);
    let text: String = message["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect();
    let status = json!({
        "state": "TASK_STATE_COMPLETED",
        "message": {"messageId": uuid::Uuid::now_v7().to_string(), "role": "ROLE_AGENT",
                    "taskId": id, "contextId": context_id, "parts": [{"text": text}]},
    });
    let (done, stored) = oneshot::channel();
    let job = Job {
        id: id.clone(),
        context_id: context_id.clone(),
        status: status.to_string(),
        messages: [message.to_string(), status["message"].to_string()],
        done,
    };
    if app.writer.send(job).is_err() {
        return error(rpc_id, -32603, "the writer stopped");
    }
    match stored.await {
        Ok(Ok(())) => answer(json!({"jsonrpc": "2.0", "id": rpc_id, "result": {"task": {
            "id": id, "contextId": context_id, "status": status, "history": [message],
        }}})),
        Ok(Err(e)) => error(rpc_id, -32603, &e),
        Err(_) => error(rpc_id, -32603, "the writer stopped"),
    }
}

fn get_task(app: &App, rpc_id: &Value, params: &Value) -> Response {
    let Some(id) = params["id"].as_str() else {
        return error(rpc_id, -32602, "params.id is required");
    };
    let Ok(conn) = app.reader.lock() else {
        return error(rpc_id, -32603, "the reader is poisoned");
    };
    let row = conn
        .prepare_cached("SELECT context_id, status FROM tasks WHERE id = ?1")
        .and_then(|mut s| {
            s.query_row([id], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .optional()
        });
    match row {
        Ok(Some((context_id, status))) => {
            let status: Value = serde_json::from_str(&status).unwrap_or(Value::Null);
            answer(json!({"jsonrpc": "2.0", "id": rpc_id, "result": {
                "id": id, "contextId": context_id, "status": status,
            }}))
        }
        Ok(None) => error(rpc_id, -32001, "task not found"),
        Err(e) => error(rpc_id, -32603, &e.to_string()),
    }
}

async fn card() -> Response {
    answer(json!({
        "name": "Durable floor", "description": "Stores and echoes", "version": "0.1.0",
        "supportedInterfaces": [{"url": "/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"], "skills": [],
    }))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(port), Some(path)) = (args.next(), args.next()) else {
        return Err("usage: durable-floor PORT DB_PATH".into());
    };
    let (tx, rx) = mpsc::channel();
    let conn = open(&path)?;
    let runtime = tokio::runtime::Handle::current();
    std::thread::spawn(move || writer(conn, rx, runtime));
    let app = Arc::new(App {
        writer: tx,
        reader: Mutex::new(open(&path)?),
    });
    let router = Router::new()
        .route("/", post(rpc))
        .route("/.well-known/agent-card.json", get(card))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
    axum::serve(listener, router).await?;
    Ok(())
}
