//! The A2A v1.0 wire model (ProtoJSON of `a2a.proto`): the one internal model.
//!
//! Field names are camelCase, enums travel by their proto names, empty
//! repeated fields and unset optionals are omitted. Shapes the proto forbids
//! (a part with two contents, a message without parts) fail at
//! deserialisation with a precise message, not deep inside the engine.

use base64::Engine as _;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// A JSON object (`google.protobuf.Struct`).
pub type Metadata = Map<String, Value>;

/// Lifecycle state of a task (`TaskState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskState {
    Submitted,
    Working,
    Completed,
    Failed,
    Canceled,
    InputRequired,
    Rejected,
    AuthRequired,
}

impl TaskState {
    pub const ALL: [TaskState; 8] = [
        TaskState::Submitted,
        TaskState::Working,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::InputRequired,
        TaskState::Rejected,
        TaskState::AuthRequired,
    ];

    /// The proto enum name, e.g. `TASK_STATE_COMPLETED`.
    pub fn proto_name(self) -> &'static str {
        match self {
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
            TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        }
    }

    /// The proto enum number, used as the stored form.
    pub fn number(self) -> i64 {
        match self {
            TaskState::Submitted => 1,
            TaskState::Working => 2,
            TaskState::Completed => 3,
            TaskState::Failed => 4,
            TaskState::Canceled => 5,
            TaskState::InputRequired => 6,
            TaskState::Rejected => 7,
            TaskState::AuthRequired => 8,
        }
    }

    pub fn from_number(n: i64) -> Option<TaskState> {
        TaskState::ALL.into_iter().find(|s| s.number() == n)
    }

    /// Parses the proto name; also accepts the short lowercase form
    /// (`completed`, `input-required`) people type on a command line.
    pub fn parse(s: &str) -> Option<TaskState> {
        let t = s.trim();
        TaskState::ALL.into_iter().find(|st| {
            st.proto_name() == t
                || st.short_name() == t
                || st
                    .proto_name()
                    .trim_start_matches("TASK_STATE_")
                    .eq_ignore_ascii_case(t)
        })
    }

    /// The short, human name: `input-required`.
    pub fn short_name(self) -> &'static str {
        match self {
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Canceled => "canceled",
            TaskState::InputRequired => "input-required",
            TaskState::Rejected => "rejected",
            TaskState::AuthRequired => "auth-required",
        }
    }

    /// Completed, failed, canceled, rejected: nothing moves a task out of these.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// Input-required and auth-required: the task waits for someone.
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }
}

impl Serialize for TaskState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.proto_name())
    }
}

impl<'de> Deserialize<'de> for TaskState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => TaskState::ALL
                .into_iter()
                .find(|st| st.proto_name() == s)
                .ok_or_else(|| D::Error::custom(format!("unknown task state `{s}`"))),
            Value::Number(n) => n
                .as_i64()
                .and_then(TaskState::from_number)
                .ok_or_else(|| D::Error::custom(format!("unknown task state number {n}"))),
            other => Err(D::Error::custom(format!(
                "task state must be a string, got {other}"
            ))),
        }
    }
}

/// Who sent a message (`Role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Agent,
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            Role::User => "ROLE_USER",
            Role::Agent => "ROLE_AGENT",
        })
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) if s == "ROLE_USER" => Ok(Role::User),
            Value::String(s) if s == "ROLE_AGENT" => Ok(Role::Agent),
            Value::Number(n) if n.as_i64() == Some(1) => Ok(Role::User),
            Value::Number(n) if n.as_i64() == Some(2) => Ok(Role::Agent),
            other => Err(D::Error::custom(format!(
                "role must be ROLE_USER or ROLE_AGENT, got {other}"
            ))),
        }
    }
}

/// The names of a part's content members, in the order of `PartContent`'s
/// variants: a part's reader and writer both index this.
const CONTENT_KEYS: [&str; 4] = ["text", "raw", "url", "data"];

/// The content of a part: exactly one of `text`, `raw`, `url`, `data`.
#[derive(Debug, Clone, PartialEq)]
pub enum PartContent {
    Text(String),
    /// Base64 as on the wire; checked to decode when parsed.
    Raw(String),
    Url(String),
    Data(Value),
}

/// A piece of a message or artifact (`Part`).
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub content: PartContent,
    pub metadata: Option<Metadata>,
    pub filename: Option<String>,
    pub media_type: Option<String>,
}

impl Part {
    pub fn text(t: impl Into<String>) -> Part {
        Part {
            content: PartContent::Text(t.into()),
            metadata: None,
            filename: None,
            media_type: None,
        }
    }

    pub fn data(v: Value) -> Part {
        Part {
            content: PartContent::Data(v),
            metadata: None,
            filename: None,
            media_type: None,
        }
    }

    /// `text`, `raw`, `url` or `data`: the name of the content member.
    pub fn kind(&self) -> &'static str {
        CONTENT_KEYS[match self.content {
            PartContent::Text(_) => 0,
            PartContent::Raw(_) => 1,
            PartContent::Url(_) => 2,
            PartContent::Data(_) => 3,
        }]
    }
}

impl Serialize for Part {
    /// Written member by member (content, metadata, filename, mediaType):
    /// building a map first cost a copy of every string in profiles.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let len = 1
            + usize::from(self.metadata.is_some())
            + usize::from(self.filename.is_some())
            + usize::from(self.media_type.is_some());
        let mut m = s.serialize_map(Some(len))?;
        match &self.content {
            PartContent::Text(s) | PartContent::Raw(s) | PartContent::Url(s) => {
                m.serialize_entry(self.kind(), s)?
            }
            PartContent::Data(d) => m.serialize_entry(self.kind(), d)?,
        }
        if let Some(md) = &self.metadata {
            m.serialize_entry("metadata", md)?;
        }
        if let Some(f) = &self.filename {
            m.serialize_entry("filename", f)?;
        }
        if let Some(t) = &self.media_type {
            m.serialize_entry("mediaType", t)?;
        }
        m.end()
    }
}

/// Whether `s` is base64 (standard or URL-safe alphabet), as the bytes of a
/// `raw` part must be in every dialect.
pub fn is_base64(s: &str) -> bool {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    STANDARD.decode(s.as_bytes()).is_ok() || URL_SAFE.decode(s.as_bytes()).is_ok()
}

/// A part's members as read, before they are checked. A member given twice
/// keeps its last value, as a JSON object read into a map would.
#[derive(Default)]
struct PartMembers {
    /// Indexed as `CONTENT_KEYS`.
    content: [Option<Value>; 4],
    metadata: Option<Value>,
    filename: Option<Value>,
    media_type: Option<Value>,
    media_type_snake: Option<Value>,
}

impl<'de> serde::de::Visitor<'de> for PartMembers {
    type Value = PartMembers;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a part (an object)")
    }

    /// Read member by member into their slots: reading the object into a
    /// map first showed in profiles of GetTask (every stored message's
    /// parts are read back).
    fn visit_map<A: serde::de::MapAccess<'de>>(mut self, mut map: A) -> Result<Self, A::Error> {
        while let Some(key) = map.next_key::<PartKey>()? {
            let slot = match key {
                PartKey::Content(i) => &mut self.content[i],
                PartKey::Metadata => &mut self.metadata,
                PartKey::Filename => &mut self.filename,
                PartKey::MediaType => &mut self.media_type,
                PartKey::MediaTypeSnake => &mut self.media_type_snake,
                PartKey::Other => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    continue;
                }
            };
            *slot = Some(map.next_value()?);
        }
        Ok(self)
    }
}

/// A member name of a part.
enum PartKey {
    /// An index into `CONTENT_KEYS`.
    Content(usize),
    Metadata,
    Filename,
    MediaType,
    MediaTypeSnake,
    Other,
}

impl<'de> Deserialize<'de> for PartKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Name;
        impl serde::de::Visitor<'_> for Name {
            type Value = PartKey;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<PartKey, E> {
                if let Some(i) = CONTENT_KEYS.iter().position(|k| *k == name) {
                    return Ok(PartKey::Content(i));
                }
                Ok(match name {
                    "metadata" => PartKey::Metadata,
                    "filename" => PartKey::Filename,
                    "mediaType" => PartKey::MediaType,
                    "media_type" => PartKey::MediaTypeSnake,
                    _ => PartKey::Other,
                })
            }
        }
        d.deserialize_identifier(Name)
    }
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = d.deserialize_map(PartMembers::default())?;
        let mut content = None;
        for (i, v) in m.content.into_iter().enumerate() {
            let Some(v) = v else { continue };
            if content.is_some() {
                return Err(D::Error::custom(
                    "a part must have exactly one of `text`, `raw`, `url`, `data`",
                ));
            }
            content = Some(match i {
                0 => PartContent::Text(string_field::<D>(v, CONTENT_KEYS[i])?),
                1 => {
                    let r = string_field::<D>(v, CONTENT_KEYS[i])?;
                    if !is_base64(&r) {
                        return Err(D::Error::custom("part `raw` must be base64"));
                    }
                    PartContent::Raw(r)
                }
                2 => PartContent::Url(string_field::<D>(v, CONTENT_KEYS[i])?),
                _ => PartContent::Data(v),
            });
        }
        let content = content.ok_or_else(|| {
            D::Error::custom("a part must have one of `text`, `raw`, `url`, `data`")
        })?;
        let metadata = match m.metadata {
            None | Some(Value::Null) => None,
            Some(Value::Object(o)) => Some(o),
            Some(_) => return Err(D::Error::custom("part `metadata` must be an object")),
        };
        let opt_str = |v: Option<Value>, k: &str| -> Result<Option<String>, D::Error> {
            match v {
                None | Some(Value::Null) => Ok(None),
                Some(v) => string_field::<D>(v, k).map(Some),
            }
        };
        let filename = opt_str(m.filename, "filename")?;
        let media_type = match opt_str(m.media_type, "mediaType")? {
            Some(t) => Some(t),
            None => opt_str(m.media_type_snake, "media_type")?,
        };
        Ok(Part {
            content,
            metadata,
            filename,
            media_type,
        })
    }
}

fn string_field<'de, D: Deserializer<'de>>(v: Value, name: &str) -> Result<String, D::Error> {
    match v {
        Value::String(s) => Ok(s),
        _ => Err(D::Error::custom(format!("part `{name}` must be a string"))),
    }
}

fn non_empty<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    let v = Vec::<T>::deserialize(d)?;
    if v.is_empty() {
        return Err(D::Error::custom("`parts` must contain at least one part"));
    }
    Ok(v)
}

fn required_id<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if s.trim().is_empty() {
        return Err(D::Error::custom("identifier must not be empty"));
    }
    Ok(s)
}

/// One unit of communication (`Message`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    #[serde(deserialize_with = "required_id")]
    #[serde(alias = "message_id")]
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "context_id")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "task_id")]
    pub task_id: Option<String>,
    pub role: Role,
    #[serde(deserialize_with = "non_empty")]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[serde(alias = "reference_task_ids")]
    pub reference_task_ids: Vec<String>,
}

impl Message {
    /// A new agent message with a fresh id.
    pub fn agent(parts: Vec<Part>) -> Message {
        Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            context_id: None,
            task_id: None,
            role: Role::Agent,
            parts,
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        }
    }

    /// A new user message with the given id.
    pub fn user(message_id: impl Into<String>, parts: Vec<Part>) -> Message {
        Message {
            message_id: message_id.into(),
            role: Role::User,
            ..Message::agent(parts)
        }
    }

    /// The concatenated text parts, for matching and previews.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for p in &self.parts {
            if let PartContent::Text(t) = &p.content {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(t);
            }
        }
        out
    }
}

/// A task's status (`TaskStatus`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// A task output (`Artifact`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    #[serde(deserialize_with = "required_id")]
    #[serde(alias = "artifact_id")]
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(deserialize_with = "non_empty")]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// The core unit of work (`Task`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    #[serde(default)]
    #[serde(alias = "context_id")]
    pub context_id: String,
    pub status: TaskStatus,
    /// `None` when the field is to be left out (ListTasks without
    /// `includeArtifacts`); `Some(vec![])` is sent as an empty array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<Artifact>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// A status change of a task (`TaskStatusUpdateEvent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(alias = "context_id")]
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// An artifact produced or extended (`TaskArtifactUpdateEvent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(alias = "context_id")]
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[serde(alias = "last_chunk")]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// One event of a stream or push (`StreamResponse`): the member name is the kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// What SendMessage answers (`SendMessageResponse`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    Task(Task),
    Message(Message),
}

/// Credentials the server sends with push notifications (`AuthenticationInfo`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationInfo {
    pub scheme: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

/// A caller's webhook for a task (`TaskPushNotificationConfig`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "task_id")]
    pub task_id: Option<String>,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo>,
}

/// Options of a SendMessage call (`SendMessageConfiguration`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[serde(alias = "accepted_output_modes")]
    pub accepted_output_modes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "task_push_notification_config")]
    pub task_push_notification_config: Option<TaskPushNotificationConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "history_length")]
    pub history_length: Option<i32>,
    #[serde(default)]
    #[serde(alias = "return_immediately")]
    pub return_immediately: bool,
}

/// `SendMessageRequest` (also the body of SendStreamingMessage).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `GetTaskRequest`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequest {
    #[serde(default)]
    pub tenant: Option<String>,
    #[serde(deserialize_with = "required_id")]
    pub id: String,
    #[serde(default)]
    #[serde(alias = "history_length")]
    pub history_length: Option<i32>,
}

/// `ListTasksRequest`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    #[serde(default)]
    pub tenant: Option<String>,
    #[serde(default)]
    #[serde(alias = "context_id")]
    pub context_id: Option<String>,
    #[serde(default)]
    pub status: Option<TaskState>,
    #[serde(default)]
    #[serde(alias = "page_size")]
    pub page_size: Option<i32>,
    #[serde(default)]
    #[serde(alias = "page_token")]
    pub page_token: Option<String>,
    #[serde(default)]
    #[serde(alias = "history_length")]
    pub history_length: Option<i32>,
    #[serde(default)]
    #[serde(alias = "status_timestamp_after")]
    pub status_timestamp_after: Option<String>,
    #[serde(default)]
    #[serde(alias = "include_artifacts")]
    pub include_artifacts: Option<bool>,
}

/// `ListTasksResponse`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse {
    pub tasks: Vec<Task>,
    pub next_page_token: String,
    #[serde(alias = "page_size")]
    pub page_size: i32,
    pub total_size: i32,
}

/// `CancelTaskRequest` and `SubscribeToTaskRequest` (same fields that matter).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdRequest {
    #[serde(default)]
    pub tenant: Option<String>,
    #[serde(deserialize_with = "required_id")]
    pub id: String,
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

/// `GetTaskPushNotificationConfigRequest` / `DeleteTaskPushNotificationConfigRequest`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushConfigRef {
    #[serde(default)]
    pub tenant: Option<String>,
    #[serde(deserialize_with = "required_id")]
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(deserialize_with = "required_id")]
    pub id: String,
}

/// `ListTaskPushNotificationConfigsRequest`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPushConfigsRequest {
    #[serde(default)]
    pub tenant: Option<String>,
    #[serde(deserialize_with = "required_id")]
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(default)]
    #[serde(alias = "page_size")]
    pub page_size: Option<i32>,
    #[serde(default)]
    #[serde(alias = "page_token")]
    pub page_token: Option<String>,
}

/// `ListTaskPushNotificationConfigsResponse`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPushConfigsResponse {
    pub configs: Vec<TaskPushNotificationConfig>,
    pub next_page_token: String,
}

/// RFC 3339 UTC with milliseconds, the one timestamp form on the wire.
pub fn format_timestamp(ms: i64) -> String {
    // The same text as `format("%Y-%m-%dT%H:%M:%S%.3fZ")`, without parsing
    // a format string on every call (1.6% of a durable SendMessage).
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Parses an ISO 8601 / RFC 3339 timestamp into milliseconds since the epoch.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(s.trim())
        .ok()
        .map(|d| d.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn part_needs_exactly_one_content() {
        assert!(serde_json::from_value::<Part>(json!({"text":"a","url":"b"})).is_err());
        assert!(serde_json::from_value::<Part>(json!({"filename":"x"})).is_err());
        assert!(serde_json::from_value::<Part>(json!({"raw":"not base64!"})).is_err());
        let p: Part = serde_json::from_value(json!({"data": null})).unwrap();
        assert_eq!(p.content, PartContent::Data(Value::Null));
        assert_eq!(serde_json::to_value(&p).unwrap(), json!({"data": null}));
    }

    /// Every member of a part is written, in one order, and read back; the
    /// snake_case `media_type` is read too, and a member of the wrong type
    /// is refused by name.
    #[test]
    fn a_part_is_written_member_by_member_and_read_back() {
        let p: Part = serde_json::from_value(json!({
            "media_type": "text/csv", "filename": "a.csv", "metadata": {"k": [1]}, "raw": "YQ=="
        }))
        .unwrap();
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(
            text,
            r#"{"raw":"YQ==","metadata":{"k":[1]},"filename":"a.csv","mediaType":"text/csv"}"#
        );
        assert_eq!(serde_json::from_str::<Part>(&text).unwrap(), p);
        // A member given twice keeps its last value; others are ignored.
        let p: Part = serde_json::from_str(r#"{"text":"a","kind":"x","text":"b"}"#).unwrap();
        assert_eq!(p, Part::text("b"));
        let e = serde_json::from_str::<Part>(r#""text""#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected a part"), "{e}");
        for (wire, name) in [
            (json!({"text": 1}), "text"),
            (json!({"url": ["x"]}), "url"),
            (json!({"text": "a", "filename": 2}), "filename"),
            (json!({"text": "a", "metadata": "m"}), "metadata"),
        ] {
            let e = serde_json::from_value::<Part>(wire)
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("part `{name}`")), "{e}");
        }
    }

    #[test]
    fn message_round_trips_in_proto_json() {
        let wire = json!({"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi","mediaType":"text/plain"}],"taskId":"t"});
        let m: Message = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(m.role, Role::User);
        assert_eq!(serde_json::to_value(&m).unwrap(), wire);
    }

    #[test]
    fn message_without_parts_or_id_is_refused() {
        let e = serde_json::from_value::<Message>(
            json!({"messageId":"m","role":"ROLE_USER","parts":[]}),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("at least one part"), "{e}");
        assert!(
            serde_json::from_value::<Message>(
                json!({"messageId":"","role":"ROLE_USER","parts":[{"text":"x"}]})
            )
            .is_err()
        );
        assert!(
            serde_json::from_value::<Message>(
                json!({"messageId":"m","role":"user","parts":[{"text":"x"}]})
            )
            .is_err()
        );
    }

    #[test]
    fn stream_response_uses_member_name_as_kind() {
        let ev = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Working,
                message: None,
                timestamp: None,
            },
            metadata: None,
        });
        assert_eq!(
            serde_json::to_value(&ev).unwrap(),
            json!({"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}})
        );
    }

    #[test]
    fn states_parse_by_proto_name_number_and_short_name() {
        assert_eq!(
            serde_json::from_value::<TaskState>(json!(6)).unwrap(),
            TaskState::InputRequired
        );
        assert_eq!(
            TaskState::parse("input-required"),
            Some(TaskState::InputRequired)
        );
        assert_eq!(
            TaskState::parse("TASK_STATE_WORKING"),
            Some(TaskState::Working)
        );
        assert!(serde_json::from_value::<TaskState>(json!("TASK_STATE_RUNNING")).is_err());
    }

    #[test]
    fn timestamps_are_utc_with_milliseconds() {
        assert_eq!(format_timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_timestamp(1_795_606_523_475),
            "2026-11-25T11:35:23.475Z"
        );
        assert_eq!(
            format_timestamp(1_795_606_523_000),
            "2026-11-25T11:35:23.000Z"
        );
        assert_eq!(
            parse_timestamp("2025-11-09T10:30:00Z"),
            Some(1_762_684_200_000)
        );
        assert_eq!(
            parse_timestamp("2025-11-09T10:30:00.000+00:00"),
            Some(1_762_684_200_000)
        );
    }
}
