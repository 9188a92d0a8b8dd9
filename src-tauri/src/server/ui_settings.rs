//! The UI's settings (`GET`/`PUT /api/settings`): bind address, public
//! webhook URL, notification preferences and theme, kept in
//! `DATA_DIR/ui-settings.json` (written to a temporary file, then renamed
//! into place). The bind address and webhook URL apply at the next start,
//! and only where neither the command line nor the config file sets them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::ui_api::ApiBody;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::ui_api::api_error;
use super::{Shared, webhook_base};
use crate::config::Config;

/// The settings file's name in the data dir.
pub const SETTINGS_FILE: &str = "ui-settings.json";

/// What the person chose on the settings screen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UiSettings {
    /// `HOST:PORT` to listen on from the next start.
    #[serde(default)]
    pub bind: Option<String>,
    /// Base URL peers reach `/webhooks/` at, from the next start.
    #[serde(default)]
    pub webhook_public_url: Option<String>,
    #[serde(default)]
    pub notifications: Notifications,
    #[serde(default)]
    pub theme: Theme,
}

/// When to tell the person that a task is waiting. A member the file or a
/// request leaves out keeps its default, so a file written before a member
/// existed still reads, with the person's other choices intact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Notifications {
    pub enabled: bool,
    pub sound: bool,
    pub only_when_hidden: bool,
    /// Agents and peers (by id) whose parked tasks raise no notification.
    pub muted_agents: Vec<String>,
}

impl Default for Notifications {
    fn default() -> Self {
        Notifications {
            enabled: true,
            sound: false,
            only_when_hidden: false,
            muted_agents: Vec::new(),
        }
    }
}

/// A newly parked task the person may be told about.
#[derive(Debug, Clone)]
pub struct Parked {
    pub task_id: String,
    /// The agent's (or peer's) id, as muted on the settings screen.
    pub agent_id: String,
    /// Its name for people.
    pub agent: String,
    /// The first line of the request.
    pub first_line: String,
}

/// Where a click on a notification takes the person.
#[derive(Debug, Clone, PartialEq)]
pub enum Opens {
    Task(String),
    Queue,
}

/// What one OS notification says.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub summary: String,
    pub body: String,
    /// What a click opens: the task, or the queue for several.
    pub opens: Opens,
    /// Play the notification service's "new message" sound.
    pub sound: bool,
}

/// Where the window is, for [`Notifications::notice`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Window<'a> {
    /// Visible and focused.
    pub focused: bool,
    /// The task the window shows.
    pub viewing: Option<&'a str>,
}

impl Notifications {
    /// The one notification for tasks that parked together, after these
    /// preferences: none when turned off, when only wanted while the window
    /// is hidden and it is focused, or when every task is from a muted agent
    /// or is the one the focused window shows. One task: the agent as title,
    /// its first line as body, and a click opens it. Several: how many, and
    /// each agent once, in the order their tasks parked; a click opens the
    /// queue.
    pub fn notice(&self, parked: &[Parked], window: Window<'_>) -> Option<Notice> {
        if !self.enabled || (self.only_when_hidden && window.focused) {
            return None;
        }
        let told: Vec<&Parked> = parked
            .iter()
            .filter(|p| {
                let looking_at_it = window.focused && window.viewing == Some(p.task_id.as_str());
                !(self.muted_agents.contains(&p.agent_id) || looking_at_it)
            })
            .collect();
        let (summary, body, opens) = match told.as_slice() {
            [] => return None,
            [one] => (
                one.agent.clone(),
                one.first_line.clone(),
                Opens::Task(one.task_id.clone()),
            ),
            many => {
                let mut agents: Vec<&str> = Vec::new();
                for p in many {
                    if !agents.contains(&p.agent.as_str()) {
                        agents.push(&p.agent);
                    }
                }
                (
                    format!("{} tasks are waiting", many.len()),
                    format!("From {}", agents.join(", ")),
                    Opens::Queue,
                )
            }
        };
        Some(Notice {
            summary,
            body,
            opens,
            sound: self.sound,
        })
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Theme {
    /// Light or dark as the OS is.
    #[default]
    System,
    Light,
    Dark,
}

impl Default for UiSettings {
    fn default() -> Self {
        UiSettings {
            bind: None,
            webhook_public_url: None,
            notifications: Notifications::default(),
            theme: Theme::System,
        }
    }
}

impl UiSettings {
    /// Refuses a bind address that is no `HOST:PORT` and a webhook URL that
    /// is no http(s) URL; empty strings mean unset.
    fn checked(mut self) -> Result<UiSettings, String> {
        let blank = |v: Option<String>| v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
        self.bind = blank(self.bind);
        self.webhook_public_url = blank(self.webhook_public_url);
        if let Some(b) = &self.bind
            && b.parse::<SocketAddr>().is_err()
        {
            return Err(format!(
                "bind address `{b}` is not HOST:PORT with an IP address (e.g. 127.0.0.1:7717)"
            ));
        }
        if let Some(u) = &self.webhook_public_url {
            match url::Url::parse(u) {
                Ok(p) if matches!(p.scheme(), "http" | "https") && p.host().is_some() => {}
                _ => return Err(format!("webhook URL `{u}` is not an http or https URL")),
            }
        }
        Ok(self)
    }
}

/// The settings file of one data dir.
#[derive(Debug, Clone)]
pub struct SettingsFile {
    path: PathBuf,
}

impl SettingsFile {
    pub fn in_dir(data_dir: &Path) -> SettingsFile {
        SettingsFile {
            path: data_dir.join(SETTINGS_FILE),
        }
    }

    /// The saved settings; defaults when there is no file. A file that
    /// cannot be read is an error (saving would overwrite it).
    pub fn read(&self) -> Result<UiSettings, String> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| format!("{} is not valid: {e}", self.path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(UiSettings::default()),
            Err(e) => Err(format!("cannot read {}: {e}", self.path.display())),
        }
    }

    /// Writes the settings whole: a temporary file, synced, then renamed,
    /// and the folder synced ([`super::ui_auth::write_private`]).
    pub fn write(&self, s: &UiSettings) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(s).map_err(std::io::Error::other)?;
        super::ui_auth::write_private(&self.path, &bytes, super::ui_auth::Replace::Yes)
    }
}

/// Fills `bind` and `[webhooks] public_url` from the saved settings where
/// the config file leaves them unset (`--bind` still wins over both). A
/// settings file that cannot be read is logged and ignored.
pub fn apply_saved(config: &mut Config, data_dir: &Path) {
    let saved = match SettingsFile::in_dir(data_dir)
        .read()
        .and_then(UiSettings::checked)
    {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("ignoring the saved UI settings: {e}");
            return;
        }
    };
    if config.bind.is_none() {
        config.bind = saved.bind;
    }
    if config.webhooks.public_url.is_none() {
        config.webhooks.public_url = saved.webhook_public_url;
    }
}

/// The routes, to be nested under `/api`.
pub fn routes() -> Router<Shared> {
    Router::new().route("/settings", get(read).put(save))
}

fn answer(state: &Shared, settings: &UiSettings) -> Response {
    axum::Json(json!({
        "settings": settings,
        "effective": {
            "bind": state.local_addr.to_string(),
            "webhookBase": webhook_base(state),
            "publicUrl": state.config.public_url,
        },
    }))
    .into_response()
}

/// `GET /api/settings`
async fn read(State(state): State<Shared>) -> Response {
    match state.ui_settings.read() {
        Ok(s) => answer(&state, &s),
        Err(e) => api_error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// `PUT /api/settings`: the whole settings object.
async fn save(State(state): State<Shared>, ApiBody(body): ApiBody) -> Response {
    let settings = match serde_json::from_slice::<UiSettings>(&body)
        .map_err(|e| format!("invalid settings: {e}"))
        .and_then(UiSettings::checked)
    {
        Ok(s) => s,
        Err(m) => return api_error(StatusCode::BAD_REQUEST, m),
    };
    let file = state.ui_settings.clone();
    let to_write = settings.clone();
    match tokio::task::spawn_blocking(move || file.write(&to_write)).await {
        Ok(Ok(())) => answer(&state, &settings),
        Ok(Err(e)) => {
            tracing::error!("cannot save the UI settings: {e}");
            api_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot save the settings; see the server log",
            )
        }
        Err(e) => api_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_missing_a_member_keeps_the_rest_of_the_choices() {
        let dir = tempfile::tempdir().unwrap();
        let file = SettingsFile::in_dir(dir.path());
        std::fs::write(
            dir.path().join(SETTINGS_FILE),
            r#"{"notifications": {"enabled": false, "mutedAgents": ["noisy"]}, "theme": "dark"}"#,
        )
        .unwrap();
        let read = file.read().unwrap();
        assert_eq!(read.theme, Theme::Dark);
        assert!(!read.notifications.enabled);
        assert_eq!(read.notifications.muted_agents, ["noisy"]);
        assert_eq!(read.notifications.sound, Notifications::default().sound);
        assert_eq!(
            read.notifications.only_when_hidden,
            Notifications::default().only_when_hidden
        );

        std::fs::write(
            dir.path().join(SETTINGS_FILE),
            r#"{"notifications": {"enabled": "yes"}}"#,
        )
        .unwrap();
        let err = file.read().unwrap_err();
        assert!(err.contains("is not valid"), "{err}");
        assert!(err.contains("invalid type"), "{err}");
    }

    #[test]
    fn settings_round_trip_through_the_file_and_apply_where_unset() {
        let dir = tempfile::tempdir().unwrap();
        let file = SettingsFile::in_dir(dir.path());
        assert_eq!(file.read().unwrap(), UiSettings::default());
        let s = UiSettings {
            bind: Some("127.0.0.1:9000".into()),
            webhook_public_url: Some("https://hooks.example.com".into()),
            theme: Theme::Dark,
            ..UiSettings::default()
        };
        file.write(&s).unwrap();
        assert_eq!(file.read().unwrap(), s);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );

        let mut config = Config::default_config();
        apply_saved(&mut config, dir.path());
        assert_eq!(config.bind.as_deref(), Some("127.0.0.1:9000"));
        assert_eq!(
            config.webhooks.public_url.as_deref(),
            Some("https://hooks.example.com")
        );
        let mut set = Config::default_config();
        set.bind = Some("127.0.0.1:7000".into());
        apply_saved(&mut set, dir.path());
        assert_eq!(
            set.bind.as_deref(),
            Some("127.0.0.1:7000"),
            "the config wins"
        );
    }

    #[test]
    fn bad_values_are_refused() {
        let with = |bind: &str, url: &str| {
            UiSettings {
                bind: Some(bind.into()),
                webhook_public_url: Some(url.into()),
                ..UiSettings::default()
            }
            .checked()
        };
        assert!(with("127.0.0.1:7717", "https://x.example").is_ok());
        assert!(with(" ", "").unwrap().bind.is_none());
        assert!(with("localhost", "").is_err());
        assert!(with("", "javascript:alert(1)").is_err());
        assert!(with("", "ftp://x.example").is_err());
    }

    fn parked(task: &str, agent_id: &str, agent: &str, line: &str) -> Parked {
        Parked {
            task_id: task.into(),
            agent_id: agent_id.into(),
            agent: agent.into(),
            first_line: line.into(),
        }
    }

    #[test]
    fn one_parked_task_is_named_and_opens_on_click() {
        let n = Notifications::default();
        let one = [parked("t1", "inbox", "Inbox", "Ship v3?")];
        assert_eq!(
            n.notice(&one, Window::default()),
            Some(Notice {
                summary: "Inbox".into(),
                body: "Ship v3?".into(),
                opens: Opens::Task("t1".into()),
                sound: false,
            })
        );
        let loud = Notifications {
            sound: true,
            ..Notifications::default()
        };
        assert!(loud.notice(&one, Window::default()).unwrap().sound);
    }

    #[test]
    fn tasks_parked_together_name_each_agent_once_in_order() {
        let n = Notifications::default();
        let many = [
            parked("t1", "ops", "Ops", "a"),
            parked("t2", "inbox", "Inbox", "b"),
            parked("t3", "ops", "Ops", "c"),
        ];
        let notice = n.notice(&many, Window::default()).unwrap();
        assert_eq!(notice.summary, "3 tasks are waiting");
        assert_eq!(notice.body, "From Ops, Inbox");
        assert_eq!(notice.opens, Opens::Queue);
    }

    #[test]
    fn muted_agents_viewed_tasks_and_preferences_hold_notices_back() {
        let many = [
            parked("t1", "ops", "Ops", "a"),
            parked("t2", "inbox", "Inbox", "b"),
        ];
        let muted = Notifications {
            muted_agents: vec!["ops".into()],
            ..Notifications::default()
        };
        // What is left after muting is one task: told as one.
        let left = muted.notice(&many, Window::default()).unwrap();
        assert_eq!(
            (left.summary.as_str(), left.opens),
            ("Inbox", Opens::Task("t2".into()))
        );
        // The task the focused window shows is not announced; an unfocused
        // window does not count as seeing it.
        let seen = Window {
            focused: true,
            viewing: Some("t2"),
        };
        assert_eq!(muted.notice(&many, seen), None);
        let behind = Window {
            focused: false,
            viewing: Some("t2"),
        };
        assert!(muted.notice(&many, behind).is_some());
        // Turned off; only while hidden with the window focused.
        let off = Notifications {
            enabled: false,
            ..Notifications::default()
        };
        assert_eq!(off.notice(&many, Window::default()), None);
        let hidden_only = Notifications {
            only_when_hidden: true,
            ..Notifications::default()
        };
        let focused = Window {
            focused: true,
            viewing: None,
        };
        assert_eq!(hidden_only.notice(&many, focused), None);
        assert!(hidden_only.notice(&many, Window::default()).is_some());
        assert_eq!(
            Notifications::default().notice(&[], Window::default()),
            None
        );
    }
}
