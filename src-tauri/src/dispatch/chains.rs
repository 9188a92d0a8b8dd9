//! Chain rules: "when a task of agent A (or peer B) reaches one of these
//! states, push it to a URL or send it to a peer as a new task". One type
//! serves the config file (snake_case), the UI API (camelCase) and the store
//! (JSON), so a rule means the same everywhere.

use serde::{Deserialize, Serialize};

use crate::a2a::types::{Metadata, Part, PartContent, Task, TaskState};

/// One chain rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChainRule {
    /// A slug; chosen from the action when a rule is added without one.
    #[serde(default)]
    pub id: String,
    /// `config` for rules from the config file (read-only at run time),
    /// `api` for rules added through the UI or the CLI.
    #[serde(default = "api_source")]
    pub source: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Park each hop for the person before it is sent.
    #[serde(default)]
    pub gate: bool,
    pub trigger: Trigger,
    pub action: Action,
}

/// Which tasks fire a rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Trigger {
    /// A served agent's id.
    #[serde(default)]
    pub agent: Option<String>,
    /// A peer's id (its watched tasks).
    #[serde(default)]
    pub peer: Option<String>,
    /// Short state names (`completed`, `input-required`, …); `completed` when empty.
    #[serde(default)]
    pub states: Vec<String>,
    /// Only tasks whose metadata names this skill (`skill` or `skillId`).
    #[serde(default)]
    pub skill: Option<String>,
}

/// What a rule does with a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum Action {
    /// POST the task (an A2A v1.0 `StreamResponse` with the task) to `url`,
    /// as a push notification.
    Push {
        url: String,
        #[serde(default, alias = "auth_scheme")]
        auth_scheme: Option<String>,
        #[serde(default)]
        credentials: Option<String>,
        #[serde(default)]
        token: Option<String>,
    },
    /// SendMessage to a peer: the template's text, then (with `artifacts`)
    /// the task's artifact parts; in the task's context or a new one.
    Send {
        peer: String,
        #[serde(default = "default_template")]
        template: String,
        #[serde(default)]
        context: ContextMode,
        #[serde(default = "yes")]
        artifacts: bool,
    },
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContextMode {
    /// The child task starts a new context.
    #[default]
    New,
    /// The child task joins the parent task's context id.
    Same,
}

fn api_source() -> String {
    "api".into()
}

fn yes() -> bool {
    true
}

fn default_template() -> String {
    "{{artifacts.text}}".into()
}

/// The placeholders a template may use.
pub const PLACEHOLDERS: [&str; 7] = [
    "task.id",
    "task.contextId",
    "task.state",
    "task.agent",
    "status.text",
    "request.text",
    "artifacts.text",
];

impl ChainRule {
    /// The trigger states, `completed` by default.
    pub fn states(&self) -> Vec<TaskState> {
        if self.trigger.states.is_empty() {
            return vec![TaskState::Completed];
        }
        self.trigger
            .states
            .iter()
            .filter_map(|s| TaskState::parse(s))
            .collect()
    }

    /// Checks the rule on its own and fills in defaults (the id, the states'
    /// short names). `agent_known`/`peer_known` say whether an id exists.
    pub fn check(
        &mut self,
        agent_known: impl Fn(&str) -> bool,
        peer_known: impl Fn(&str) -> bool,
    ) -> Result<(), String> {
        let t = &mut self.trigger;
        t.agent = t.agent.take().filter(|a| !a.trim().is_empty());
        t.peer = t.peer.take().filter(|p| !p.trim().is_empty());
        t.skill = t.skill.take().filter(|s| !s.trim().is_empty());
        match (&t.agent, &t.peer) {
            (Some(_), Some(_)) | (None, None) => {
                return Err("trigger needs exactly one of `agent` and `peer`".into());
            }
            (Some(a), None) if !agent_known(a) => {
                return Err(format!("trigger.agent: no served agent `{a}`"));
            }
            (None, Some(p)) if !peer_known(p) => {
                return Err(format!("trigger.peer: no peer `{p}`"));
            }
            _ => {}
        }
        let mut states = Vec::new();
        for s in &t.states {
            let Some(st) = TaskState::parse(s) else {
                return Err(format!(
                    "trigger.states: `{s}` is not a task state (completed, failed, canceled, rejected, input-required, auth-required, working)"
                ));
            };
            if st == TaskState::Submitted {
                return Err("trigger.states: `submitted` never fires (tasks start in it)".into());
            }
            states.push(st.short_name().to_owned());
        }
        if states.is_empty() {
            states.push("completed".into());
        }
        states.dedup();
        t.states = states;
        match &mut self.action {
            Action::Push { url, .. } => {
                let parsed = url::Url::parse(url.trim())
                    .map_err(|e| format!("action.url `{url}` is not a valid URL: {e}"))?;
                if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
                    return Err(format!(
                        "action.url `{url}` must be an http or https URL with a host"
                    ));
                }
            }
            Action::Send { peer, template, .. } => {
                if !peer_known(peer) {
                    return Err(format!("action.peer: no peer `{peer}`"));
                }
                check_template(template)?;
            }
        }
        if self.id.trim().is_empty() {
            self.id = self.default_id();
        }
        check_id(&self.id)
    }

    fn default_id(&self) -> String {
        let from = self
            .trigger
            .agent
            .as_deref()
            .or(self.trigger.peer.as_deref())
            .unwrap_or("task");
        let to = match &self.action {
            Action::Push { url, .. } => url::Url::parse(url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned))
                .unwrap_or_else(|| "url".into()),
            Action::Send { peer, .. } => peer.clone(),
        };
        let raw = format!("{from}-to-{to}");
        let slug: String = raw
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        let short = &uuid::Uuid::new_v4().simple().to_string()[..6];
        format!("{}-{short}", slug.trim_matches('-'))
    }

    /// Whether a task in `state` (with `metadata`) fires this rule.
    pub fn fires_on(&self, state: TaskState, metadata: Option<&Metadata>) -> bool {
        if !self.enabled || !self.states().contains(&state) {
            return false;
        }
        match &self.trigger.skill {
            None => true,
            Some(skill) => metadata.is_some_and(|m| {
                ["skill", "skillId"]
                    .iter()
                    .any(|k| m.get(*k).and_then(|v| v.as_str()) == Some(skill.as_str()))
            }),
        }
    }
}

/// Rule ids are slugs: safe in URLs, logs and command lines.
pub fn check_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "rule id `{id}` must be 1 to 64 letters, digits, `-` or `_`"
        ))
    }
}

/// A template may use only the known `{{placeholders}}`.
pub fn check_template(template: &str) -> Result<(), String> {
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err("template: `{{` without a closing `}}`".into());
        };
        let name = after[..end].trim();
        if !PLACEHOLDERS.contains(&name) {
            return Err(format!(
                "template: unknown placeholder `{{{{{name}}}}}`; known: {}",
                PLACEHOLDERS
                    .iter()
                    .map(|p| format!("{{{{{p}}}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        rest = &after[end + 2..];
    }
    Ok(())
}

/// The text parts of a list of parts, joined by blank lines.
fn text_of<'a>(parts: impl Iterator<Item = &'a Part>) -> String {
    parts
        .filter_map(|p| match &p.content {
            PartContent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Fills a (checked) template from a task.
pub fn render_template(template: &str, task: &Task, agent: &str) -> String {
    let value = |name: &str| -> String {
        match name {
            "task.id" => task.id.clone(),
            "task.contextId" => task.context_id.clone(),
            "task.state" => task.status.state.short_name().to_owned(),
            "task.agent" => agent.to_owned(),
            "status.text" => task
                .status
                .message
                .as_ref()
                .map(|m| text_of(m.parts.iter()))
                .unwrap_or_default(),
            "request.text" => task
                .history
                .iter()
                .find(|m| m.role == crate::a2a::types::Role::User)
                .map(|m| text_of(m.parts.iter()))
                .unwrap_or_default(),
            "artifacts.text" => {
                text_of(task.artifacts.iter().flatten().flat_map(|a| a.parts.iter()))
            }
            _ => String::new(),
        }
    };
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                out.push_str(&value(after[..end].trim()));
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(json: serde_json::Value) -> ChainRule {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn checks_fill_defaults_and_refuse_bad_rules() {
        let mut r = rule(serde_json::json!({
            "trigger": {"agent": "inbox"},
            "action": {"kind": "send", "peer": "b"}
        }));
        r.check(|a| a == "inbox", |p| p == "b").unwrap();
        assert!(r.id.starts_with("inbox-to-b-"), "{}", r.id);
        assert_eq!(r.trigger.states, vec!["completed"]);
        assert!(r.fires_on(TaskState::Completed, None));
        assert!(!r.fires_on(TaskState::Failed, None));

        let bad = [
            (
                serde_json::json!({"trigger": {}, "action": {"kind": "send", "peer": "b"}}),
                "exactly one",
            ),
            (
                serde_json::json!({"trigger": {"agent": "nope"}, "action": {"kind": "send", "peer": "b"}}),
                "no served agent",
            ),
            (
                serde_json::json!({"trigger": {"agent": "inbox", "states": ["done"]}, "action": {"kind": "send", "peer": "b"}}),
                "not a task state",
            ),
            (
                serde_json::json!({"trigger": {"agent": "inbox"}, "action": {"kind": "send", "peer": "b", "template": "{{task.nope}}"}}),
                "unknown placeholder",
            ),
            (
                serde_json::json!({"trigger": {"agent": "inbox"}, "action": {"kind": "push", "url": "ftp://x/y"}}),
                "http or https",
            ),
            (
                serde_json::json!({"id": "has space", "trigger": {"agent": "inbox"}, "action": {"kind": "send", "peer": "b"}}),
                "rule id",
            ),
        ];
        for (json, want) in bad {
            let err = rule(json.clone())
                .check(|a| a == "inbox", |p| p == "b")
                .unwrap_err();
            assert!(err.contains(want), "{json}: {err}");
        }
    }

    #[test]
    fn skill_filter_reads_task_metadata() {
        let mut r = rule(serde_json::json!({
            "id": "r", "trigger": {"peer": "b", "states": ["completed", "failed"], "skill": "deploy"},
            "action": {"kind": "push", "url": "https://hooks.example/x"}
        }));
        r.check(|_| false, |p| p == "b").unwrap();
        let serde_json::Value::Object(md) = serde_json::json!({"skillId": "deploy"}) else {
            unreachable!()
        };
        assert!(r.fires_on(TaskState::Failed, Some(&md)));
        assert!(!r.fires_on(TaskState::Failed, None));
        r.enabled = false;
        assert!(!r.fires_on(TaskState::Failed, Some(&md)));
    }

    #[test]
    fn templates_fill_from_the_task() {
        let task: Task = serde_json::from_value(serde_json::json!({
            "id": "t1", "contextId": "c1",
            "status": {"state": "TASK_STATE_COMPLETED"},
            "history": [{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "ship it?"}]}],
            "artifacts": [{"artifactId": "a", "parts": [{"text": "one"}, {"data": {"x": 1}}, {"text": "two"}]}]
        }))
        .unwrap();
        let out = render_template(
            "{{ task.id }}/{{task.state}} asked {{request.text}}: {{artifacts.text}} {{",
            &task,
            "inbox",
        );
        assert_eq!(out, "t1/completed asked ship it?: one\n\ntwo {{");
    }
}
