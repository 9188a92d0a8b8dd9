//! The CLI commands that talk to a running instance through its UI API:
//! list parked and recent tasks, show one, approve, reply, reject, and read
//! the history; add, list and remove peers, start and watch tasks on them,
//! create webhook subscriptions, read the outbox and retry its dead
//! letters; list, add and remove chain rules and answer gated hops. Each command is a thin
//! client call: the instance decides, the CLI only asks and prints.

mod archive;
mod chains;
mod client;
mod human;
mod peers;

pub use archive::{ExportFormat, archive_export, archive_list, archive_show, parse_time};
pub use chains::{
    chains_add, chains_gate, chains_hops, chains_list, chains_remove, deliveries_retry,
};
pub use peers::{
    PeerAuth, deliveries, peers_add, peers_list, peers_remove, peers_trust, send, subscribe,
};

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::a2a::types::TaskState;
use crate::clock::now_ms;
use crate::server::instance::InstanceError;
use client::Api;
use human::{DecisionView, HistoryRow, TaskDetailView, TaskRow, TurnView};

/// What a command prints on stdout when it succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub text: String,
}

impl Output {
    fn new(text: impl Into<String>) -> Output {
        let mut text = text.into();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        Output { text }
    }

    /// The API's JSON as it came, pretty-printed.
    fn json(v: &Value) -> Output {
        Output::new(serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()))
    }
}

/// Why a command did not do what was asked. [`CliError::exit_code`] says
/// whether it was refused (1) or asked wrongly (2).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// No instance serves this data dir, or its files cannot be read.
    #[error(transparent)]
    NoInstance(#[from] InstanceError),
    /// The instance the data dir names does not answer.
    #[error(
        "no Countersign server answers at {url} for the data dir {} (start one with `countersign serve`)",
        .data_dir.display()
    )]
    Unreachable { url: String, data_dir: PathBuf },
    /// The instance refused the token.
    #[error("{0}")]
    Unauthorized(String),
    /// Unknown task.
    #[error("{0}")]
    NotFound(String),
    /// The task was decided before: `first` is that decision.
    #[error("{message}: decision {}", first_decision(first))]
    AlreadyDecided { message: String, first: Box<Value> },
    /// The instance refused the request (an invalid decision, a task not
    /// waiting for one).
    #[error("refused: {0}")]
    Invalid(String),
    /// The decision was recorded but could not be delivered to the task.
    #[error("{0}")]
    Undelivered(String),
    /// A peer could not be reached or read (the instance answered 502).
    #[error("{0}")]
    Peer(String),
    /// A watched task did not finish or park in the time allowed.
    #[error("{0}")]
    StillRunning(String),
    /// The instance failed, or answered something unreadable.
    #[error("the instance failed: {0}")]
    Server(String),
    /// The connection broke before the instance answered (it stopped,
    /// say); `then` says what becomes of the request.
    #[error("the instance at {url} stopped answering ({reason}){then}")]
    Cut {
        url: String,
        reason: String,
        then: String,
    },
    /// The command line itself is wrong (bad `--data`, unreadable `--file`,
    /// a `--header` without `:`).
    #[error("{0}")]
    Usage(String),
}

impl CliError {
    /// 2 for a usage error, 1 for everything the instance (or its absence)
    /// refused.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            _ => 1,
        }
    }
}

fn first_decision(v: &Value) -> String {
    match serde_json::from_value::<DecisionView>(v.clone()) {
        Ok(d) => format!("{}, {}", d.id, human::decision_outcome(&d)),
        Err(_) => v.to_string(),
    }
}

fn unreadable(what: &str, e: serde_json::Error) -> CliError {
    CliError::Server(format!("cannot read the {what} the instance sent: {e}"))
}

/// A task state to list (`tasks --state`; with `--parked`, one of the two a
/// parked task waits in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StateArg {
    /// Received, not started.
    Submitted,
    /// Being worked on.
    Working,
    /// Waiting for an answer or an approval.
    InputRequired,
    /// Waiting for the person to sign in somewhere.
    AuthRequired,
    /// Done.
    Completed,
    /// Ended in an error.
    Failed,
    /// Refused (by the agent, or by you).
    Rejected,
    /// Called off.
    Canceled,
}

impl From<StateArg> for TaskState {
    fn from(s: StateArg) -> TaskState {
        match s {
            StateArg::Submitted => TaskState::Submitted,
            StateArg::Working => TaskState::Working,
            StateArg::InputRequired => TaskState::InputRequired,
            StateArg::AuthRequired => TaskState::AuthRequired,
            StateArg::Completed => TaskState::Completed,
            StateArg::Failed => TaskState::Failed,
            StateArg::Rejected => TaskState::Rejected,
            StateArg::Canceled => TaskState::Canceled,
        }
    }
}

/// What `tasks` and `history` narrow their list to.
#[derive(Debug, Default)]
pub struct Filter {
    pub agent: Option<String>,
    pub state: Option<StateArg>,
    pub search: Option<String>,
    pub limit: Option<usize>,
}

impl Filter {
    /// The query of the UI API's list endpoints.
    fn query(&self) -> Vec<(&'static str, String)> {
        let state = self
            .state
            .map(|s| TaskState::from(s).short_name().to_owned());
        [
            ("agent", self.agent.clone()),
            ("state", state),
            ("q", self.search.clone()),
            ("limit", self.limit.map(|n| n.to_string())),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect()
    }

    /// `GET /api/<list>` narrowed by this filter.
    async fn list(&self, api: &Api, list: &str) -> Result<Value, CliError> {
        let query = self.query();
        let query: Vec<(&str, &str)> = query.iter().map(|(k, v)| (*k, v.as_str())).collect();
        api.get(&[list], &query).await
    }

    /// Whether anything narrows the list (so an empty one says "matches").
    fn narrows(&self) -> bool {
        self.agent.is_some() || self.state.is_some() || self.search.is_some()
    }
}

/// `countersign tasks [--agent A] [--state S] [--parked] [--search W] [--limit N]`:
/// recent tasks, or those waiting for a decision.
pub async fn tasks(
    data_dir: &Path,
    parked: bool,
    filter: &Filter,
    json: bool,
) -> Result<Output, CliError> {
    if let Some(s) = filter.state.map(TaskState::from)
        && parked
        && !s.is_interrupted()
    {
        let s = s.short_name();
        return Err(CliError::Usage(format!(
            "a parked task waits in input-required or auth-required, not {s}: leave out --parked to list {s} tasks"
        )));
    }
    let api = Api::connect(data_dir)?;
    if parked {
        let page = filter.list(&api, "queue").await?;
        if json {
            return Ok(Output::json(&page));
        }
        let items: Vec<TurnView> =
            serde_json::from_value(page["items"].clone()).map_err(|e| unreadable("queue", e))?;
        let total = page["total"].as_i64().unwrap_or(items.len() as i64);
        return Ok(Output::new(human::queue(
            &items,
            total,
            filter.narrows(),
            now_ms(),
        )));
    }
    let page = filter.list(&api, "tasks").await?;
    if json {
        return Ok(Output::json(&page));
    }
    let items: Vec<TaskRow> =
        serde_json::from_value(page["items"].clone()).map_err(|e| unreadable("tasks", e))?;
    let more = page.get("nextCursor").is_some_and(Value::is_string);
    Ok(Output::new(human::tasks(
        &items,
        more,
        filter.narrows(),
        now_ms(),
    )))
}

/// `countersign show ID`: the task, its conversation, turns and decisions;
/// a task retention archived is read from the archive (and says so).
pub async fn show(data_dir: &Path, id: &str, json: bool) -> Result<Output, CliError> {
    let api = Api::connect(data_dir)?;
    let detail = match api.get(&["tasks", id], &[]).await {
        Err(CliError::NotFound(here)) => match api.get(&["archives", "tasks", id], &[]).await {
            Ok(archived) => archived,
            Err(CliError::NotFound(_)) => return Err(CliError::NotFound(here)),
            Err(e) => return Err(e),
        },
        other => other?,
    };
    if json {
        return Ok(Output::json(&detail));
    }
    let view: TaskDetailView = serde_json::from_value(detail).map_err(|e| unreadable("task", e))?;
    Ok(Output::new(human::show(&view, now_ms())))
}

/// `countersign history [--agent A] [--search W] [--limit N]`: decisions,
/// newest first.
pub async fn history(data_dir: &Path, filter: &Filter, json: bool) -> Result<Output, CliError> {
    let api = Api::connect(data_dir)?;
    let page = filter.list(&api, "history").await?;
    if json {
        return Ok(Output::json(&page));
    }
    let items: Vec<HistoryRow> =
        serde_json::from_value(page["items"].clone()).map_err(|e| unreadable("history", e))?;
    let more = page.get("nextCursor").is_some_and(Value::is_string);
    Ok(Output::new(human::history(
        &items,
        more,
        filter.narrows(),
        now_ms(),
    )))
}

/// `countersign approve ID [--comment TEXT]`.
pub async fn approve(
    data_dir: &Path,
    id: &str,
    comment: Option<String>,
) -> Result<Output, CliError> {
    let mut body = json!({"kind": "approve"});
    if let Some(c) = comment {
        body["text"] = json!(c);
    }
    decide(data_dir, id, body, "approved").await
}

/// `countersign reject ID [--reason TEXT]`.
pub async fn reject(data_dir: &Path, id: &str, reason: Option<String>) -> Result<Output, CliError> {
    let mut body = json!({"kind": "reject"});
    if let Some(r) = reason {
        body["text"] = json!(r);
    }
    decide(data_dir, id, body, "rejected").await
}

/// `countersign reply ID TEXT [--data JSON] [--file PATH]…`. The data and
/// files are checked before the instance is asked anything.
pub async fn reply(
    data_dir: &Path,
    id: &str,
    text: String,
    data: Option<&str>,
    files: &[PathBuf],
) -> Result<Output, CliError> {
    let mut body = json!({"kind": "reply", "text": text});
    if let Some(d) = data {
        let v: Value = serde_json::from_str(d)
            .map_err(|e| CliError::Usage(format!("--data is not valid JSON: {e}")))?;
        body["data"] = v;
    }
    if !files.is_empty() {
        let attached = files
            .iter()
            .map(|p| attach(p))
            .collect::<Result<Vec<_>, _>>()?;
        body["files"] = Value::Array(attached);
    }
    decide(data_dir, id, body, "replied to").await
}

/// Posts a decision; prints `approved ID (delivered)`. A decision recorded
/// but not delivered is reported as a refusal, with why.
async fn decide(data_dir: &Path, id: &str, body: Value, done: &str) -> Result<Output, CliError> {
    let api = Api::connect(data_dir)?;
    let answer = api.post(&["tasks", id, "decision"], &body).await?;
    let d: DecisionView = serde_json::from_value(answer["decision"].clone())
        .map_err(|e| unreadable("decision", e))?;
    match (d.delivery.as_str(), &d.delivery_error) {
        ("failed", error) => Err(CliError::Undelivered(format!(
            "{done} {} but the decision could not be delivered: {}",
            d.task_id,
            error.as_deref().unwrap_or("no reason given")
        ))),
        (delivery, _) => Ok(Output::new(format!("{done} {} ({delivery})", d.task_id))),
    }
}

/// A file for a reply: `{"name", "mediaType", "bytes": base64}`.
fn attach(path: &Path) -> Result<Value, CliError> {
    let bytes = std::fs::read(path)
        .map_err(|e| CliError::Usage(format!("cannot read --file {}: {e}", path.display())))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| CliError::Usage(format!("--file {} names no file", path.display())))?;
    Ok(json!({
        "name": name,
        "mediaType": media_type(path),
        "bytes": base64::engine::general_purpose::STANDARD.encode(bytes),
    }))
}

/// The media type a file's extension suggests; `application/octet-stream`
/// when it suggests none.
fn media_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match ext.as_str() {
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "xml" => "application/xml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_follow_the_extension() {
        assert_eq!(media_type(Path::new("a/notes.TXT")), "text/plain");
        assert_eq!(media_type(Path::new("plan.json")), "application/json");
        assert_eq!(media_type(Path::new("shot.jpeg")), "image/jpeg");
        assert_eq!(media_type(Path::new("blob")), "application/octet-stream");
        assert_eq!(media_type(Path::new("x.weird")), "application/octet-stream");
    }

    #[tokio::test]
    async fn a_bad_reply_is_a_usage_error_before_any_instance_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let bad_data = reply(dir.path(), "t", "x".into(), Some("{bad"), &[]).await;
        assert!(
            matches!(&bad_data, Err(e) if e.exit_code() == 2),
            "{bad_data:?}"
        );
        let missing = dir.path().join("missing.txt");
        let bad_file = reply(dir.path(), "t", "x".into(), None, &[missing]).await;
        assert!(
            matches!(&bad_file, Err(e) if e.exit_code() == 2),
            "{bad_file:?}"
        );
        let no_instance = approve(dir.path(), "t", None).await;
        assert!(
            matches!(&no_instance, Err(e @ CliError::NoInstance(_)) if e.exit_code() == 1),
            "{no_instance:?}"
        );
    }

    #[test]
    fn attached_files_are_named_typed_and_base64() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("notes.txt");
        std::fs::write(&p, "hi").unwrap();
        assert_eq!(
            attach(&p).unwrap(),
            json!({"name": "notes.txt", "mediaType": "text/plain", "bytes": "aGk="})
        );
    }
}
