//! The shapes of the A2A 0.3 HTTP+JSON binding (`/v1/...` routes): the JSON
//! form of the 0.3 protobuf, which differs from 0.3 JSON-RPC — `content`
//! instead of `parts` in messages, `ROLE_USER`, `TASK_STATE_CANCELLED`,
//! `{"file": {"fileWithBytes"…}}`, `{"data": {"data": …}}`, and
//! `{"task"|"message"|"statusUpdate"|"artifactUpdate": …}` wrappers.
//!
//! Clients of this binding parse answers strictly, so only fields of the 0.3
//! proto are ever written. `Rest` and `RestEvent` write answers straight from
//! their types, spelled as the caller spelled its request (`Names`); the
//! `encode_*` functions are those writers read into a `Value`.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value, json};

use super::Error;
use super::types::{
    Artifact, AuthenticationInfo, Message, Part, PartContent, Role, SendMessageConfiguration,
    SendMessageRequest, SendMessageResponse, StreamResponse, Task, TaskArtifactUpdateEvent,
    TaskPushNotificationConfig, TaskState, TaskStatus, TaskStatusUpdateEvent, is_base64,
};
use super::v0_3::to_value;

fn invalid(msg: impl Into<String>) -> Error {
    Error::InvalidParams(msg.into())
}

fn obj<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, Error> {
    v.as_object()
        .ok_or_else(|| invalid(format!("{what} must be an object")))
}

/// A field by its JSON name, or by its proto field name (`message_id`):
/// ProtoJSON readers accept both, and some 0.3 clients send the latter.
fn get<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    m.get(key).or_else(|| m.get(&proto_name(key)))
}

/// The proto field name of a JSON name: `contextId` → `context_id`.
pub fn proto_name(json_name: &str) -> String {
    let mut out = String::with_capacity(json_name.len() + 4);
    for c in json_name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn opt_str(m: &Map<String, Value>, key: &str, what: &str) -> Result<Option<String>, Error> {
    match get(m, key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(format!("{what}.{key} must be a string"))),
    }
}

/// A required id: one of only blanks is none, as 1.0 reads its ids
/// (`types::required_id`).
fn req_id(m: &Map<String, Value>, key: &str, what: &str) -> Result<String, Error> {
    super::v0_3::required(opt_str(m, key, what)?, key, what)
}

fn opt_obj(
    m: &Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<Option<Map<String, Value>>, Error> {
    match get(m, key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o.clone())),
        Some(_) => Err(invalid(format!("{what}.{key} must be an object"))),
    }
}

fn strings(m: &Map<String, Value>, key: &str, what: &str) -> Result<Vec<String>, Error> {
    match get(m, key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| invalid(format!("{what}.{key} must hold strings")))
            })
            .collect(),
        Some(_) => Err(invalid(format!("{what}.{key} must be an array"))),
    }
}

fn list<'a>(m: &'a Map<String, Value>, key: &str, what: &str) -> Result<&'a [Value], Error> {
    match get(m, key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(invalid(format!("{what}.{key} must be an array"))),
    }
}

/// The 0.3 proto name of a state (`TASK_STATE_CANCELLED` with two Ls).
pub fn state_name(s: TaskState) -> &'static str {
    match s {
        TaskState::Canceled => "TASK_STATE_CANCELLED",
        other => other.proto_name(),
    }
}

fn parse_state(v: Option<&Value>) -> Result<TaskState, Error> {
    let s = v.and_then(Value::as_str).unwrap_or("");
    TaskState::ALL
        .into_iter()
        .find(|st| state_name(*st) == s)
        .ok_or_else(|| invalid(format!("unknown task state `{s}`")))
}

fn decode_part(v: &Value) -> Result<Part, Error> {
    let m = obj(v, "part")?;
    let metadata = opt_obj(m, "metadata", "part")?;
    if let Some(t) = m.get("text") {
        let t = t
            .as_str()
            .ok_or_else(|| invalid("part.text must be a string"))?;
        return Ok(Part {
            content: PartContent::Text(t.to_owned()),
            metadata,
            filename: None,
            media_type: None,
        });
    }
    if let Some(f) = m.get("file") {
        let f = obj(f, "part.file")?;
        let content = match (
            opt_str(f, "fileWithBytes", "part.file")?,
            opt_str(f, "fileWithUri", "part.file")?,
        ) {
            (Some(b), None) if is_base64(&b) => PartContent::Raw(b),
            (Some(_), None) => return Err(invalid("part.file.fileWithBytes must be base64")),
            (None, Some(u)) => PartContent::Url(u),
            _ => {
                return Err(invalid(
                    "part.file needs exactly one of fileWithBytes or fileWithUri",
                ));
            }
        };
        return Ok(Part {
            content,
            metadata,
            filename: opt_str(f, "name", "part.file")?,
            media_type: opt_str(f, "mimeType", "part.file")?,
        });
    }
    if let Some(d) = m.get("data") {
        let d = obj(d, "part.data")?;
        let data = d.get("data").cloned().unwrap_or_else(|| json!({}));
        return Ok(Part {
            content: PartContent::Data(data),
            metadata,
            filename: None,
            media_type: None,
        });
    }
    Err(invalid("a part needs one of text, file, data"))
}

fn decode_message(v: &Value) -> Result<Message, Error> {
    let m = obj(v, "message")?;
    let parts: Vec<Part> = list(m, "content", "message")?
        .iter()
        .map(decode_part)
        .collect::<Result<_, _>>()?;
    if parts.is_empty() {
        return Err(invalid("message.content must contain at least one part"));
    }
    let role = match m.get("role").and_then(Value::as_str) {
        Some("ROLE_USER") => Role::User,
        Some("ROLE_AGENT") => Role::Agent,
        _ => return Err(invalid("message.role must be ROLE_USER or ROLE_AGENT")),
    };
    Ok(Message {
        message_id: req_id(m, "messageId", "message")?,
        context_id: opt_str(m, "contextId", "message")?,
        task_id: opt_str(m, "taskId", "message")?,
        role,
        parts,
        metadata: opt_obj(m, "metadata", "message")?,
        extensions: strings(m, "extensions", "message")?,
        reference_task_ids: Vec::new(),
    })
}

fn decode_status(v: &Value) -> Result<TaskStatus, Error> {
    let m = obj(v, "status")?;
    Ok(TaskStatus {
        state: parse_state(m.get("state"))?,
        message: m
            .get("message")
            .or_else(|| m.get("update"))
            .filter(|v| !v.is_null())
            .map(decode_message)
            .transpose()?,
        timestamp: opt_str(m, "timestamp", "status")?,
    })
}

fn decode_artifact(v: &Value) -> Result<Artifact, Error> {
    let m = obj(v, "artifact")?;
    // At least one part, as the JSON-RPC binding and 1.0 read an artifact.
    let parts = list(m, "parts", "artifact")?;
    if parts.is_empty() {
        return Err(invalid("artifact.parts must contain at least one part"));
    }
    Ok(Artifact {
        artifact_id: req_id(m, "artifactId", "artifact")?,
        name: opt_str(m, "name", "artifact")?,
        description: opt_str(m, "description", "artifact")?,
        parts: parts.iter().map(decode_part).collect::<Result<_, _>>()?,
        metadata: opt_obj(m, "metadata", "artifact")?,
        extensions: strings(m, "extensions", "artifact")?,
    })
}

/// Decodes a task in 0.3 proto JSON.
pub fn decode_task(v: &Value) -> Result<Task, Error> {
    let m = obj(v, "task")?;
    Ok(Task {
        id: req_id(m, "id", "task")?,
        context_id: opt_str(m, "contextId", "task")?.unwrap_or_default(),
        status: decode_status(m.get("status").unwrap_or(&Value::Null))?,
        // In proto JSON an empty repeated field is the same as an absent
        // one (and `encode_task` writes neither): both are no artifacts.
        artifacts: match get(m, "artifacts") {
            None | Some(Value::Null) => None,
            Some(_) => Some(
                list(m, "artifacts", "task")?
                    .iter()
                    .map(decode_artifact)
                    .collect::<Result<Vec<_>, _>>()?,
            )
            .filter(|a| !a.is_empty()),
        },
        history: list(m, "history", "task")?
            .iter()
            .map(decode_message)
            .collect::<Result<_, _>>()?,
        metadata: opt_obj(m, "metadata", "task")?,
    })
}

// ---------------------------------------------------------------- writers

/// How the members of an answer are spelled: by their JSON names
/// (`messageId`), or by their proto field names (`message_id`) for a caller
/// whose request used those. The contents of `metadata` and of data parts
/// are the caller's own and keep their keys either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    Json,
    Proto,
}

impl Names {
    /// A member's name, as `self` spells it.
    fn of(self, json_name: &'static str) -> Cow<'static, str> {
        if self == Names::Proto && json_name.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(proto_name(json_name))
        } else {
            Cow::Borrowed(json_name)
        }
    }
}

/// A value written in the shapes of this binding, straight from its type:
/// a part, message, status, artifact, task or SendMessage answer.
pub struct Rest<'a, T>(pub &'a T, pub Names);

/// A stream event in this binding's shape; `.1` marks the last status
/// update (`final`).
pub struct RestEvent<'a>(pub &'a StreamResponse, pub bool, pub Names);

/// A page of tasks: `{"tasks": [...], "nextPageToken": ...}`.
pub struct RestTasks<'a>(pub &'a [Task], pub &'a str, pub Names);

/// Items written one after another as a JSON array.
struct Each<'a, T>(&'a [T], Names);

impl<T> Serialize for Each<'_, T>
where
    for<'b> Rest<'b, T>: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|x| Rest(x, self.1)))
    }
}

/// A data part's value: a `google.protobuf.Struct`, so anything but an
/// object is wrapped as `{"value": …}`.
struct DataStruct<'a>(&'a Value);

impl Serialize for DataStruct<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        match self.0 {
            Value::Object(_) => m.serialize_entry("data", self.0)?,
            other => m.serialize_entry("data", &serde_json::json!({ "value": other }))?,
        }
        m.end()
    }
}

/// A file part's `file` member.
struct FileOf<'a>(&'a Part, Names);

impl Serialize for FileOf<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (p, n) = (self.0, self.1);
        let mut m = s.serialize_map(None)?;
        match &p.content {
            PartContent::Raw(b) => m.serialize_entry(&n.of("fileWithBytes"), b)?,
            PartContent::Url(u) => m.serialize_entry(&n.of("fileWithUri"), u)?,
            PartContent::Text(_) | PartContent::Data(_) => {}
        }
        if let Some(t) = &p.media_type {
            m.serialize_entry(&n.of("mimeType"), t)?;
        }
        if let Some(name) = &p.filename {
            m.serialize_entry("name", name)?;
        }
        m.end()
    }
}

impl Serialize for Rest<'_, Part> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (p, n) = (self.0, self.1);
        let mut m = s.serialize_map(None)?;
        match &p.content {
            PartContent::Text(t) => m.serialize_entry("text", t)?,
            PartContent::Data(d) => m.serialize_entry("data", &DataStruct(d))?,
            PartContent::Raw(_) | PartContent::Url(_) => {
                m.serialize_entry("file", &FileOf(p, n))?
            }
        }
        if let Some(md) = &p.metadata {
            m.serialize_entry("metadata", md)?;
        }
        m.end()
    }
}

impl Serialize for Rest<'_, Message> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (msg, n) = (self.0, self.1);
        let mut m = s.serialize_map(None)?;
        m.serialize_entry(&n.of("messageId"), &msg.message_id)?;
        if let Some(c) = &msg.context_id {
            m.serialize_entry(&n.of("contextId"), c)?;
        }
        if let Some(t) = &msg.task_id {
            m.serialize_entry(&n.of("taskId"), t)?;
        }
        let role = if msg.role == Role::User {
            "ROLE_USER"
        } else {
            "ROLE_AGENT"
        };
        m.serialize_entry("role", role)?;
        m.serialize_entry("content", &Each(&msg.parts, n))?;
        if let Some(md) = &msg.metadata {
            m.serialize_entry("metadata", md)?;
        }
        if !msg.extensions.is_empty() {
            m.serialize_entry("extensions", &msg.extensions)?;
        }
        m.end()
    }
}

impl Serialize for Rest<'_, TaskStatus> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (st, n) = (self.0, self.1);
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("state", state_name(st.state))?;
        if let Some(msg) = &st.message {
            m.serialize_entry("message", &Rest(msg, n))?;
        }
        if let Some(t) = &st.timestamp {
            m.serialize_entry("timestamp", t)?;
        }
        m.end()
    }
}

impl Serialize for Rest<'_, Artifact> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (a, n) = (self.0, self.1);
        let mut m = s.serialize_map(None)?;
        m.serialize_entry(&n.of("artifactId"), &a.artifact_id)?;
        if let Some(name) = &a.name {
            m.serialize_entry("name", name)?;
        }
        if let Some(d) = &a.description {
            m.serialize_entry("description", d)?;
        }
        m.serialize_entry("parts", &Each(&a.parts, n))?;
        if let Some(md) = &a.metadata {
            m.serialize_entry("metadata", md)?;
        }
        if !a.extensions.is_empty() {
            m.serialize_entry("extensions", &a.extensions)?;
        }
        m.end()
    }
}

impl Serialize for Rest<'_, Task> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (t, n) = (self.0, self.1);
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("id", &t.id)?;
        m.serialize_entry(&n.of("contextId"), &t.context_id)?;
        m.serialize_entry("status", &Rest(&t.status, n))?;
        if let Some(a) = t.artifacts.as_ref().filter(|a| !a.is_empty()) {
            m.serialize_entry("artifacts", &Each(a, n))?;
        }
        if !t.history.is_empty() {
            m.serialize_entry("history", &Each(&t.history, n))?;
        }
        if let Some(md) = &t.metadata {
            m.serialize_entry("metadata", md)?;
        }
        m.end()
    }
}

impl Serialize for Rest<'_, SendMessageResponse> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        match self.0 {
            SendMessageResponse::Task(t) => m.serialize_entry("task", &Rest(t, self.1))?,
            SendMessageResponse::Message(msg) => {
                m.serialize_entry("message", &Rest(msg, self.1))?
            }
        }
        m.end()
    }
}

/// The inside of a `statusUpdate` or `artifactUpdate` event.
struct Update<'a>(&'a StreamResponse, bool, Names);

impl Serialize for Update<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let n = self.2;
        let mut m = s.serialize_map(None)?;
        let metadata = match self.0 {
            StreamResponse::StatusUpdate(u) => {
                m.serialize_entry(&n.of("taskId"), &u.task_id)?;
                m.serialize_entry(&n.of("contextId"), &u.context_id)?;
                m.serialize_entry("status", &Rest(&u.status, n))?;
                m.serialize_entry("final", &self.1)?;
                &u.metadata
            }
            StreamResponse::ArtifactUpdate(u) => {
                m.serialize_entry(&n.of("taskId"), &u.task_id)?;
                m.serialize_entry(&n.of("contextId"), &u.context_id)?;
                m.serialize_entry("artifact", &Rest(&u.artifact, n))?;
                m.serialize_entry("append", &u.append)?;
                m.serialize_entry(&n.of("lastChunk"), &u.last_chunk)?;
                &u.metadata
            }
            StreamResponse::Task(_) | StreamResponse::Message(_) => &None,
        };
        if let Some(md) = metadata {
            m.serialize_entry("metadata", md)?;
        }
        m.end()
    }
}

impl Serialize for RestEvent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let RestEvent(ev, is_final, n) = *self;
        let mut m = s.serialize_map(Some(1))?;
        match ev {
            StreamResponse::Task(t) => m.serialize_entry("task", &Rest(t, n))?,
            StreamResponse::Message(msg) => m.serialize_entry("message", &Rest(msg, n))?,
            StreamResponse::StatusUpdate(_) => {
                m.serialize_entry(&n.of("statusUpdate"), &Update(ev, is_final, n))?
            }
            StreamResponse::ArtifactUpdate(_) => {
                m.serialize_entry(&n.of("artifactUpdate"), &Update(ev, is_final, n))?
            }
        }
        m.end()
    }
}

impl Serialize for RestTasks<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let RestTasks(tasks, token, n) = *self;
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("tasks", &Each(tasks, n))?;
        m.serialize_entry(&n.of("nextPageToken"), token)?;
        m.end()
    }
}

fn encode_message(m: &Message) -> Value {
    to_value(&Rest(m, Names::Json))
}

/// A task in 0.3 proto JSON.
pub fn encode_task(t: &Task) -> Value {
    to_value(&Rest(t, Names::Json))
}

/// A SendMessage answer: `{"task": …}` or `{"message": …}`.
pub fn encode_send_response(r: &SendMessageResponse) -> Value {
    to_value(&Rest(r, Names::Json))
}

/// A stream event; `is_final` marks the last status update.
pub fn encode_event(ev: &StreamResponse, is_final: bool) -> Value {
    to_value(&RestEvent(ev, is_final, Names::Json))
}

/// Decodes a stream event in 0.3 proto JSON.
pub fn decode_event(v: &Value) -> Result<StreamResponse, Error> {
    let m = obj(v, "event")?;
    if let Some(t) = m.get("task") {
        return Ok(StreamResponse::Task(decode_task(t)?));
    }
    if let Some(msg) = m.get("message").or_else(|| m.get("msg")) {
        return Ok(StreamResponse::Message(decode_message(msg)?));
    }
    if let Some(u) = get(m, "statusUpdate") {
        let u = obj(u, "statusUpdate")?;
        return Ok(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: opt_str(u, "taskId", "statusUpdate")?.unwrap_or_default(),
            context_id: opt_str(u, "contextId", "statusUpdate")?.unwrap_or_default(),
            status: decode_status(u.get("status").unwrap_or(&Value::Null))?,
            metadata: opt_obj(u, "metadata", "statusUpdate")?,
        }));
    }
    if let Some(u) = get(m, "artifactUpdate") {
        let u = obj(u, "artifactUpdate")?;
        return Ok(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: opt_str(u, "taskId", "artifactUpdate")?.unwrap_or_default(),
            context_id: opt_str(u, "contextId", "artifactUpdate")?.unwrap_or_default(),
            artifact: decode_artifact(u.get("artifact").unwrap_or(&Value::Null))?,
            append: u.get("append").and_then(Value::as_bool).unwrap_or(false),
            last_chunk: get(u, "lastChunk")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            metadata: opt_obj(u, "metadata", "artifactUpdate")?,
        }));
    }
    Err(invalid(
        "an event needs one of task, message, statusUpdate, artifactUpdate",
    ))
}

/// Decodes a 0.3 `PushNotificationConfig`. `task_id` is the task of the URL
/// path; a config inside a send body has none yet (as in the JSON-RPC binding).
fn decode_push_body(v: &Value, task_id: Option<&str>) -> Result<TaskPushNotificationConfig, Error> {
    let c = obj(v, "pushNotificationConfig")?;
    // An empty `authentication` (what proto-JSON writers send for an unset
    // message) means none; credentials without a scheme are a bearer token.
    let authentication = match opt_obj(c, "authentication", "pushNotificationConfig")? {
        None => None,
        Some(a) => {
            let scheme = strings(&a, "schemes", "pushNotificationConfig.authentication")?
                .into_iter()
                .find(|s| !s.trim().is_empty());
            let credentials = opt_str(&a, "credentials", "pushNotificationConfig.authentication")?;
            match (scheme, credentials) {
                (None, None) => None,
                (scheme, credentials) => Some(AuthenticationInfo {
                    scheme: scheme.unwrap_or_else(|| "Bearer".into()),
                    credentials,
                }),
            }
        }
    };
    Ok(TaskPushNotificationConfig {
        tenant: None,
        id: opt_str(c, "id", "pushNotificationConfig")?,
        task_id: task_id.map(str::to_owned),
        url: opt_str(c, "url", "pushNotificationConfig")?
            .ok_or_else(|| invalid("pushNotificationConfig.url is required"))?,
        token: opt_str(c, "token", "pushNotificationConfig")?,
        authentication,
    })
}

/// Decodes a `SendMessageRequest` body. A send blocks unless
/// `configuration.blocking` is `false`.
pub fn decode_send(v: &Value) -> Result<SendMessageRequest, Error> {
    let m = obj(v, "body")?;
    // `message` is the JSON name of the proto field `request`.
    let message = m
        .get("message")
        .or_else(|| m.get("request"))
        .ok_or_else(|| invalid("message is required"))?;
    let message = decode_message(message)?;
    let mut configuration = SendMessageConfiguration::default();
    if let Some(c) = opt_obj(m, "configuration", "body")? {
        configuration.accepted_output_modes = strings(&c, "acceptedOutputModes", "configuration")?;
        configuration.history_length = match get(&c, "historyLength") {
            None | Some(Value::Null) => None,
            Some(n) => Some(
                n.as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| invalid("configuration.historyLength must be an integer"))?,
            ),
        }
        .filter(|n| *n != 0);
        configuration.return_immediately =
            c.get("blocking").and_then(Value::as_bool) == Some(false);
        if let Some(p) = get(&c, "pushNotification").filter(|p| !p.is_null()) {
            configuration.task_push_notification_config = Some(decode_push_body(p, None)?);
        }
    }
    Ok(SendMessageRequest {
        tenant: None,
        message,
        configuration: Some(configuration),
        metadata: opt_obj(m, "metadata", "body")?,
    })
}

/// Decodes the body of `POST /v1/tasks/{id}/pushNotificationConfigs`: the
/// proto's `CreateTaskPushNotificationConfigRequest` (`{parent, configId,
/// config: {name, pushNotificationConfig}}`, what the official SDKs send),
/// a bare `TaskPushNotificationConfig`, or just the inner
/// `PushNotificationConfig`.
pub fn decode_push_config(v: &Value, task_id: &str) -> Result<TaskPushNotificationConfig, Error> {
    let m = obj(v, "body")?;
    if let Some(config) = get(m, "config").filter(|c| c.is_object()) {
        let mut decoded = decode_push_config(config, task_id)?;
        if decoded.id.is_none() {
            decoded.id = opt_str(m, "configId", "body")?;
        }
        return Ok(decoded);
    }
    match get(m, "pushNotificationConfig") {
        Some(inner) => decode_push_body(inner, Some(task_id)),
        None => decode_push_body(v, Some(task_id)),
    }
}

/// A config as a 0.3 `TaskPushNotificationConfig` with its resource name.
pub fn encode_push_config(c: &TaskPushNotificationConfig) -> Value {
    let task = c.task_id.clone().unwrap_or_default();
    let id = c.id.clone().unwrap_or_default();
    let mut inner = Map::new();
    inner.insert("id".into(), json!(id));
    super::v0_3::encode_push_fields(c, &mut inner);
    json!({"name": format!("tasks/{task}/pushNotificationConfigs/{id}"), "pushNotificationConfig": inner})
}

/// A send as a 0.3 `SendMessageRequest` body (what a client of a 0.3 peer
/// posts to `/v1/message:send` and `/v1/message:stream`). The inverse of
/// [`decode_send`] for everything the 0.3 proto can express.
pub fn encode_send(req: &SendMessageRequest) -> Value {
    let mut out = Map::new();
    out.insert("message".into(), encode_message(&req.message));
    if let Some(c) = &req.configuration {
        let mut cfg = Map::new();
        if !c.accepted_output_modes.is_empty() {
            cfg.insert("acceptedOutputModes".into(), json!(c.accepted_output_modes));
        }
        if let Some(p) = &c.task_push_notification_config {
            let mut inner = Map::new();
            if let Some(id) = &p.id {
                inner.insert("id".into(), json!(id));
            }
            super::v0_3::encode_push_fields(p, &mut inner);
            cfg.insert("pushNotification".into(), Value::Object(inner));
        }
        if let Some(n) = c.history_length {
            cfg.insert("historyLength".into(), json!(n));
        }
        cfg.insert("blocking".into(), json!(!c.return_immediately));
        out.insert("configuration".into(), Value::Object(cfg));
    }
    if let Some(md) = &req.metadata {
        out.insert("metadata".into(), Value::Object(md.clone()));
    }
    Value::Object(out)
}

/// Decodes a SendMessage answer: `{"task": …}` or `{"message": …}`.
pub fn decode_send_response(v: &Value) -> Result<SendMessageResponse, Error> {
    match decode_event(v)? {
        StreamResponse::Task(t) => Ok(SendMessageResponse::Task(t)),
        StreamResponse::Message(m) => Ok(SendMessageResponse::Message(m)),
        _ => Err(invalid("a send answer needs one of task, message")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        serde_json::from_value(json!({
            "id": "t1", "contextId": "c1",
            "status": {"state": "TASK_STATE_CANCELED", "timestamp": "2025-11-09T10:30:00.000Z",
                "message": {"messageId": "a1", "contextId": "c1", "taskId": "t1", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}},
            "artifacts": [{"artifactId": "x", "name": "plan", "parts": [
                {"raw": "dGNr", "filename": "a.txt", "mediaType": "text/plain"},
                {"url": "https://example.com/b.pdf", "mediaType": "application/pdf"},
                {"data": {"k": [1, 2]}}]}],
            "history": [{"messageId": "u1", "contextId": "c1", "taskId": "t1", "role": "ROLE_USER", "parts": [{"text": "Plan a trip"}]}]
        }))
        .unwrap()
    }

    #[test]
    fn tasks_use_proto_json_shapes_and_round_trip() {
        let t = task();
        let wire = encode_task(&t);
        assert_eq!(wire["status"]["state"], "TASK_STATE_CANCELLED");
        assert_eq!(wire["history"][0]["content"][0]["text"], "Plan a trip");
        assert_eq!(
            wire["artifacts"][0]["parts"][0]["file"]["fileWithBytes"],
            "dGNr"
        );
        assert_eq!(
            wire["artifacts"][0]["parts"][2]["data"]["data"]["k"],
            json!([1, 2])
        );
        assert_eq!(decode_task(&wire).unwrap(), t);
    }

    /// What this binding takes reads back as 1.0 (found by fuzzing,
    /// `rest_bodies` and `codec_v0_3`): a message id of blanks was taken,
    /// which 1.0 refuses, so every required id is read as 1.0 reads it.
    #[test]
    fn what_1_0_refuses_is_refused_here() {
        let e = decode_message(&json!({"messageId": " \t", "role": "ROLE_USER",
            "content": [{"text": "x"}]}))
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("message.messageId is required and must not be blank"),
            "{e}"
        );
        let task = |id: &str, artifact: &str| {
            decode_task(&json!({"id": id, "contextId": "c",
                "status": {"state": "TASK_STATE_COMPLETED"},
                "artifacts": [{"artifactId": artifact, "parts": [{"text": "x"}]}]}))
        };
        assert!(task("t", "a").is_ok());
        assert!(task(" ", "a").unwrap_err().to_string().contains("task.id"));
        // Found the same way: an artifact with no parts, which 1.0 and the
        // JSON-RPC binding refuse.
        let no_parts = json!({"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": []}]});
        let e = decode_task(&no_parts).unwrap_err();
        assert!(
            e.to_string()
                .contains("artifact.parts must contain at least one part"),
            "{e}"
        );
        assert!(
            task("t", "  ")
                .unwrap_err()
                .to_string()
                .contains("artifact.artifactId")
        );
    }

    /// Found by fuzzing: `"artifacts": []` decoded as an empty list, which
    /// the writer leaves out, so the task read back had none (`None`).
    #[test]
    fn an_empty_artifact_list_is_no_artifacts_and_round_trips() {
        let wire = json!({"id": "t1", "contextId": "c1",
            "status": {"state": "TASK_STATE_COMPLETED"}, "artifacts": []});
        let t = decode_task(&wire).unwrap();
        assert_eq!(t.artifacts, None);
        assert_eq!(decode_task(&encode_task(&t)).unwrap(), t);
    }

    /// Tasks and events in this binding's text, member for member, in both
    /// spellings; the keys of metadata and of data parts are the caller's.
    #[test]
    fn answers_are_written_member_for_member_in_either_spelling() {
        let mut t = task();
        t.metadata = json!({"someKey": {"innerKey": 1}}).as_object().cloned();
        t.artifacts.as_mut().unwrap()[0].parts[2].content =
            PartContent::Data(json!({"camelCase": {"data": 1}}));
        t.artifacts.as_mut().unwrap()[0].parts.push(Part {
            content: PartContent::Data(json!([1])),
            metadata: json!({"mediaType": "x"}).as_object().cloned(),
            filename: None,
            media_type: None,
        });
        let json = serde_json::to_string(&Rest(&t, Names::Json)).unwrap();
        assert_eq!(
            json,
            concat!(
                r#"{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_CANCELLED","#,
                r#""message":{"messageId":"a1","contextId":"c1","taskId":"t1","role":"ROLE_AGENT","#,
                r#""content":[{"text":"ok"}]},"timestamp":"2025-11-09T10:30:00.000Z"},"#,
                r#""artifacts":[{"artifactId":"x","name":"plan","parts":["#,
                r#"{"file":{"fileWithBytes":"dGNr","mimeType":"text/plain","name":"a.txt"}},"#,
                r#"{"file":{"fileWithUri":"https://example.com/b.pdf","mimeType":"application/pdf"}},"#,
                r#"{"data":{"data":{"camelCase":{"data":1}}}},"#,
                r#"{"data":{"data":{"value":[1]}},"metadata":{"mediaType":"x"}}]}],"#,
                r#""history":[{"messageId":"u1","contextId":"c1","taskId":"t1","role":"ROLE_USER","#,
                r#""content":[{"text":"Plan a trip"}]}],"metadata":{"someKey":{"innerKey":1}}}"#
            )
        );
        let proto = serde_json::to_string(&Rest(&t, Names::Proto)).unwrap();
        let renamed = [
            "contextId",
            "messageId",
            "taskId",
            "artifactId",
            "fileWithBytes",
        ]
        .into_iter()
        .chain(["fileWithUri", "mimeType"])
        .fold(json.clone(), |text, k| {
            text.replace(&format!("\"{k}\""), &format!("\"{}\"", proto_name(k)))
        });
        assert_eq!(proto, renamed);
        assert!(proto.contains(r#""camelCase""#) && proto.contains(r#""someKey""#));
        assert_eq!(
            encode_task(&t),
            serde_json::from_str::<Value>(&json).unwrap()
        );

        let update = StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: "t1".into(),
            context_id: "c1".into(),
            artifact: Artifact {
                artifact_id: "x".into(),
                name: None,
                description: None,
                parts: vec![Part::text("a")],
                metadata: None,
                extensions: vec!["e".into()],
            },
            append: true,
            last_chunk: false,
            metadata: json!({"lastChunk": 1}).as_object().cloned(),
        });
        assert_eq!(
            serde_json::to_string(&RestEvent(&update, false, Names::Proto)).unwrap(),
            concat!(
                r#"{"artifact_update":{"task_id":"t1","context_id":"c1","artifact":{"artifact_id":"x","#,
                r#""parts":[{"text":"a"}],"extensions":["e"]},"append":true,"last_chunk":false,"#,
                r#""metadata":{"lastChunk":1}}}"#
            )
        );
        let status = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t1".into(),
            context_id: "c1".into(),
            status: TaskStatus {
                state: TaskState::Completed,
                message: None,
                timestamp: None,
            },
            metadata: None,
        });
        assert_eq!(
            serde_json::to_string(&RestEvent(&status, true, Names::Json)).unwrap(),
            r#"{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"},"final":true}}"#
        );
        assert_eq!(
            serde_json::to_string(&RestTasks(&[], "n", Names::Proto)).unwrap(),
            r#"{"tasks":[],"next_page_token":"n"}"#
        );
    }

    #[test]
    fn proto_field_names_are_accepted() {
        let body = json!({"request": {"message_id": "m", "role": "ROLE_USER", "content": [
            {"file": {"file_with_bytes": "dGNr", "mime_type": "text/plain"}}]},
            "configuration": {"history_length": 3}});
        let req = decode_send(&body).unwrap();
        assert_eq!(req.message.message_id, "m");
        assert_eq!(
            req.message.parts[0].media_type.as_deref(),
            Some("text/plain")
        );
        assert_eq!(req.configuration.unwrap().history_length, Some(3));
    }

    #[test]
    fn send_bodies_decode() {
        let body = json!({"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"text": "hi"}]},
                          "configuration": {"blocking": false, "acceptedOutputModes": ["text/plain"]}});
        let req = decode_send(&body).unwrap();
        assert_eq!(req.message.text(), "hi");
        assert!(req.configuration.unwrap().return_immediately);
        assert!(
            decode_send(
                &json!({"message": {"messageId": "m", "role": "ROLE_USER", "content": []}})
            )
            .is_err()
        );
    }

    #[test]
    fn send_bodies_round_trip() {
        let req: SendMessageRequest = serde_json::from_value(json!({
            "message": {"messageId": "m1", "contextId": "c1", "taskId": "t1", "role": "ROLE_USER",
                        "parts": [{"text": "hi"}, {"raw": "dGNr", "filename": "a.txt", "mediaType": "text/plain"}]},
            "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 3, "returnImmediately": true,
                "taskPushNotificationConfig": {"url": "https://hook.example.com", "token": "tok",
                    "authentication": {"scheme": "Bearer"}}},
            "metadata": {"k": "v"}
        }))
        .unwrap();
        let wire = encode_send(&req);
        assert_eq!(wire["message"]["content"][0]["text"], "hi");
        assert_eq!(wire["configuration"]["blocking"], false);
        assert!(
            wire["configuration"]["pushNotification"]
                .get("id")
                .is_none()
        );
        assert_eq!(decode_send(&wire).unwrap(), req);
        let t = task();
        let answer = encode_send_response(&SendMessageResponse::Task(t.clone()));
        assert_eq!(
            decode_send_response(&answer).unwrap(),
            SendMessageResponse::Task(t)
        );
        assert!(decode_send_response(&json!({"statusUpdate": {}})).is_err());
        assert!(decode_send_response(&json!([])).is_err());
    }

    #[test]
    fn events_round_trip() {
        let t = task();
        let ev = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t1".into(),
            context_id: "c1".into(),
            status: t.status.clone(),
            metadata: None,
        });
        let wire = encode_event(&ev, true);
        assert_eq!(wire["statusUpdate"]["final"], true);
        assert_eq!(decode_event(&wire).unwrap(), ev);
        let ev = StreamResponse::Task(t);
        assert_eq!(decode_event(&encode_event(&ev, false)).unwrap(), ev);
    }

    #[test]
    fn push_config_bodies_are_read_in_every_shape_sdks_send() {
        let inner = json!({"url": "https://h.example/x", "token": "t"});
        for body in [
            json!({"parent": "tasks/t1", "config": {"name": "tasks/t1/pushNotificationConfigs/c", "pushNotificationConfig": inner}}),
            json!({"parent": "tasks/t1", "config": {"push_notification_config": inner}}),
            json!({"pushNotificationConfig": inner}),
            inner.clone(),
        ] {
            let c = decode_push_config(&body, "t1").unwrap();
            assert_eq!(c.url, "https://h.example/x", "{body}");
            assert_eq!(c.token.as_deref(), Some("t"));
            assert_eq!(c.task_id.as_deref(), Some("t1"));
        }
        let with_id = json!({"configId": "c9", "config": {"pushNotificationConfig": inner}});
        assert_eq!(
            decode_push_config(&with_id, "t1").unwrap().id.as_deref(),
            Some("c9")
        );
    }
}
