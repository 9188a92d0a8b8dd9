//! The TOML configuration: bind address, data dir, limits, access
//! credentials and the agents Countersign serves.
//!
//! Errors name the file, the line and the field, so a person can fix them
//! without reading code.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::store::Durability;

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address to listen on; `127.0.0.1:7717` when unset.
    pub bind: Option<String>,
    /// Where the database lives; the OS data dir when unset.
    pub data_dir: Option<PathBuf>,
    /// Base URL the outside world reaches this server at (behind a proxy or
    /// tunnel). Cards are built from the request's `Host` when unset.
    pub public_url: Option<String>,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub store: StoreConfig,
    #[serde(default)]
    pub access: Access,
    #[serde(default)]
    pub cards: CardsConfig,
    #[serde(default)]
    pub webhooks: WebhooksConfig,
    /// The agents of the default tenant, served at `/a2a/{id}`.
    #[serde(default)]
    pub agents: Vec<AgentConfig>,
    /// Tenants: agents served at `/a2a/{tenant}/{id}`, each tenant with its
    /// own credentials and tasks.
    #[serde(default)]
    pub tenants: Vec<TenantConfig>,
    /// Remote agents Countersign talks to as a client.
    #[serde(default)]
    pub peers: Vec<PeerConfig>,
    /// Outbound deliveries: push notifications, chain hops, decisions.
    #[serde(default)]
    pub dispatch: DispatchConfig,
    /// Which private or loopback hosts outbound URLs may reach.
    #[serde(default)]
    pub outbound: crate::dispatch::ssrf::OutboundConfig,
    /// Chain rules: when a task reaches a state, push it or send it on.
    #[serde(default)]
    pub chains: Vec<crate::dispatch::chains::ChainRule>,
    #[serde(default)]
    pub ui: UiConfig,
    /// Requests per second per caller, by class of route.
    #[serde(default)]
    pub rate_limits: RateLimitsConfig,
    /// How long finished tasks stay in the live database.
    #[serde(default)]
    pub retention: RetentionConfig,
}

/// Rate limits (`[rate_limits]`): a GCRA bucket per caller (its credential,
/// else its IP address) for each class of route.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitsConfig {
    /// Off: no request is ever limited.
    pub enabled: bool,
    /// Limit loopback callers too (off by default: local tools, tests and
    /// the desktop window are never throttled).
    pub limit_loopback: bool,
    /// A2A calls: JSON-RPC, HTTP+JSON and the 0.3 REST routes.
    pub a2a: RateQuota,
    /// The push receiver (`/webhooks/…`).
    pub webhooks: RateQuota,
    /// The UI API (`/api/…`).
    pub ui: RateQuota,
    /// Agent cards and every other public document.
    pub cards: RateQuota,
    /// The most connections one address may hold open at once; on one
    /// more, each request is answered 429 and the connection closed.
    pub connections: usize,
}

impl Default for RateLimitsConfig {
    fn default() -> Self {
        RateLimitsConfig {
            enabled: true,
            limit_loopback: false,
            a2a: RateQuota::new(100, 1000),
            webhooks: RateQuota::new(100, 1000),
            ui: RateQuota::new(200, 2000),
            cards: RateQuota::new(20, 100),
            connections: 256,
        }
    }
}

/// A sustained rate and the burst allowed above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateQuota {
    /// Requests per second a caller may keep up.
    pub per_second: u32,
    /// Requests a caller may send at once after being idle.
    pub burst: u32,
}

impl RateQuota {
    pub const fn new(per_second: u32, burst: u32) -> RateQuota {
        RateQuota { per_second, burst }
    }
}

/// Retention (`[retention]`): finished tasks are moved to compressed JSON
/// Lines files under `<data_dir>/archive/` and removed from the database.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// Finished tasks untouched for longer than this are archived (days;
    /// 0 keeps them forever).
    pub keep_days: u64,
    /// The most tasks kept in the database: beyond it the oldest finished
    /// ones are archived early (0: no bound).
    pub max_tasks: u64,
    /// How often retention runs (seconds; 0 turns it off).
    pub interval_secs: u64,
    /// Tasks archived per write transaction.
    pub batch: usize,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            keep_days: 90,
            max_tasks: 1_000_000,
            interval_secs: 3600,
            batch: 100,
        }
    }
}

/// The browser UI served at `/`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UiConfig {
    /// The built UI (`ui/dist`); found next to the binary when unset.
    pub dir: Option<PathBuf>,
}

/// How outbound calls are retried and bounded (`[dispatch]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DispatchConfig {
    /// Attempts before a delivery is given up and dead-lettered.
    pub max_attempts: i64,
    /// The longest wait between two attempts (seconds); waits double from 1 s.
    pub max_backoff_secs: u64,
    /// How long one push notification may take (seconds).
    pub timeout_secs: u64,
    /// The most hops one chain may have before a hop is refused.
    pub max_chain_depth: i64,
    /// Deliveries in flight at once (each to a different webhook or task).
    pub concurrency: usize,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        DispatchConfig {
            max_attempts: 8,
            max_backoff_secs: 300,
            timeout_secs: 15,
            max_chain_depth: 8,
            concurrency: 16,
        }
    }
}

/// The push-notification webhook receiver (`/webhooks/{subscription}`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhooksConfig {
    /// Base URL peers reach this server's `/webhooks/` at (behind a tunnel
    /// or proxy); `public_url`, or the bound address, when unset.
    pub public_url: Option<String>,
    /// How often every open watched task is re-read from its peer, so a lost
    /// push loses nothing (seconds; 0 turns the sweep off).
    pub sweep_secs: u64,
    /// Largest push body accepted, in bytes.
    pub max_body_bytes: usize,
    /// How long a push waits for its re-read from the peer before it is
    /// answered 202 and the re-read is left to the outbox (milliseconds;
    /// 0: always answer at once and re-read after). Kept below the few
    /// seconds senders wait for an answer, so a slow or busy peer, or one
    /// that cannot answer GetTask while its own push is in flight, never
    /// times its push out.
    pub reread_wait_ms: u64,
    /// After a restart, how long a task sent to a peer whose answer the
    /// stop cut off waits for the peer's push about it (which shows the
    /// peer has it) before it is sent again (seconds). Only for sends that
    /// carried a push subscription; the others go again at once.
    pub resend_wait_secs: u64,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        WebhooksConfig {
            public_url: None,
            sweep_secs: 60,
            max_body_bytes: 1024 * 1024,
            reread_wait_ms: 2000,
            resend_wait_secs: 30,
        }
    }
}

/// How a decision to reject a peer's task is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RejectWith {
    /// A message with `{"decision": "reject", "reason": …}`.
    #[default]
    Message,
    /// CancelTask on the peer.
    Cancel,
}

/// A remote A2A agent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    /// Slug used in the CLI and API.
    pub id: Spanned<String>,
    /// Its base URL (where `/.well-known/agent-card.json` is) or card URL.
    pub url: String,
    pub name: Option<String>,
    pub bearer: Option<String>,
    pub api_key: Option<String>,
    /// Header for `api_key`; `X-API-Key` when unset.
    pub api_key_header: Option<String>,
    /// Extra headers sent with every call.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub reject_with: RejectWith,
    #[serde(default)]
    pub decision_format: DecisionFormat,
}

/// The shape a decision takes when it is sent to a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionFormat {
    /// A text part ("Approved. …") and a data part `{"decision": …}`.
    #[default]
    Parts,
    /// The text part only (for agents that read text).
    Text,
    /// The data part only (for agents that read structured input).
    Data,
}

impl DecisionFormat {
    pub fn name(self) -> &'static str {
        match self {
            DecisionFormat::Parts => "parts",
            DecisionFormat::Text => "text",
            DecisionFormat::Data => "data",
        }
    }
}

/// Which shape agent cards take for callers that do not say they speak 1.0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CardCompat {
    /// The 1.0 card plus the 0.3 fields (`url`, `preferredTransport`, …):
    /// clients of both generations discover the agent.
    #[default]
    Merged,
    /// Always the pure 1.0 card, for validators that refuse unknown fields;
    /// 0.3 clients then find the merged card at `/.well-known/agent.json`.
    Strict,
}

/// What `/.well-known/agent-card.json` describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RootCard {
    /// The first configured agent's card.
    #[default]
    First,
    /// A card for the whole server: one skill per agent, and an interface
    /// pointing to the agent directory (`/a2a/agents`).
    Gateway,
}

/// Agent card settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CardsConfig {
    pub compat: CardCompat,
    pub root: RootCard,
    /// The gateway card's name and description (`root = "gateway"`).
    pub gateway_name: Option<String>,
    pub gateway_description: Option<String>,
    /// A P-256 private key (PKCS#8 or SEC1 PEM) that signs the cards; when
    /// unset, one is made on first start in the data dir (`card-key.pem`).
    pub signing_key: Option<PathBuf>,
}

/// Bounds on what a request may carry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body, in bytes (413 above it).
    pub max_body_bytes: usize,
    /// Most parts in one message.
    pub max_parts: usize,
    /// Most messages kept in one task's history.
    pub max_history: usize,
    /// Most push notification configs one task keeps: each event of the
    /// task queues a delivery per config in the commit that makes it.
    pub max_push_configs: usize,
    /// Deepest JSON nesting accepted in a request.
    pub max_json_depth: usize,
    /// Longest a blocking SendMessage waits for the task to settle, in
    /// seconds; it then answers with the task as it is.
    pub max_blocking_wait_secs: u64,
    /// Longest a client may take to send a request's headers, in seconds;
    /// the connection is closed after it (slow-header attacks).
    pub header_timeout_secs: u64,
    /// Longest a client may take to send a request's body once its headers
    /// are in, in seconds; it is answered 408 and closed after it.
    pub body_timeout_secs: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 10 * 1024 * 1024,
            max_parts: 100,
            max_history: 1000,
            max_push_configs: 16,
            max_json_depth: 64,
            max_blocking_wait_secs: 300,
            header_timeout_secs: 30,
            body_timeout_secs: 60,
        }
    }
}

/// Storage settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    pub durability: Durability,
}

/// Credentials accepted for A2A calls.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Access {
    pub credentials: Vec<Credential>,
    /// Require a credential on every A2A call even on a loopback bind (for
    /// shared machines). Off a loopback bind credentials are always required.
    pub require_credentials: bool,
}

/// One accepted credential: a bearer token or an API key in a header.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credential {
    /// Who this is; tasks created with it are visible only to it.
    pub name: String,
    pub bearer: Option<String>,
    pub api_key: Option<String>,
    /// Header carrying the API key; `X-API-Key` when unset.
    pub header: Option<String>,
}

/// A tenant (`[[tenants]]`): its agents are served under `/a2a/{id}/`, only
/// its own credentials reach them, and its tasks are invisible elsewhere.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// Slug used in URLs and as the A2A `tenant` value.
    pub id: Spanned<String>,
    /// Shown in the UI next to its tasks; the id when unset.
    pub name: Option<String>,
    /// Require a credential even on a loopback bind (off loopback one is
    /// always required).
    #[serde(default)]
    pub require_credentials: bool,
    /// The credentials accepted for this tenant's agents (and no other's).
    #[serde(default)]
    pub credentials: Vec<Credential>,
    pub agents: Vec<AgentConfig>,
}

/// Names no tenant and no tenant's agent may take: they are path segments of
/// the routes under `/a2a/` (`/a2a/agents`, `/a2a/{agent}/tasks`, `/v1/...`).
pub const RESERVED_IDS: &[&str] = &["agents", "tasks", "v1"];

/// How a local agent does its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Every task waits for the person.
    #[default]
    Human,
    /// Rules pick a list of steps for each message.
    Scripted,
    /// A gateway in front of an upstream peer (`upstream`): messages are
    /// forwarded, the upstream task is mirrored back, and its questions are
    /// parked for the person too.
    Relay,
}

/// Who provides the agent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub organization: String,
    pub url: String,
}

/// A skill on the card.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillConfig {
    pub id: String,
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub examples: Vec<String>,
    #[serde(default)]
    pub input_modes: Vec<String>,
    #[serde(default)]
    pub output_modes: Vec<String>,
}

/// What the authenticated extended card adds to the public one.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtendedCardConfig {
    pub description: Option<String>,
    #[serde(default)]
    pub skills: Vec<SkillConfig>,
}

/// A local agent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Slug used in URLs: `/a2a/{id}` (`/a2a/{tenant}/{id}` in a tenant).
    pub id: Spanned<String>,
    /// The tenant it belongs to (set from `[[tenants]]`, never in the file);
    /// `None` for the default tenant.
    #[serde(skip)]
    pub tenant: Option<String>,
    pub name: Option<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default = "default_version")]
    pub version: String,
    #[serde(default)]
    pub backend: BackendKind,
    pub provider: Option<ProviderConfig>,
    pub documentation_url: Option<String>,
    pub icon_url: Option<String>,
    #[serde(default)]
    pub skills: Vec<SkillConfig>,
    /// Media types accepted in message parts (`type/*` and `*/*` allowed).
    #[serde(default = "default_input_modes")]
    pub input_modes: Vec<String>,
    #[serde(default = "default_output_modes")]
    pub output_modes: Vec<String>,
    /// SendStreamingMessage and SubscribeToTask (on by default).
    #[serde(default = "yes")]
    pub streaming: bool,
    /// Declare `capabilities.extendedAgentCard`. With no `extended_card`
    /// table the call answers ExtendedAgentCardNotConfigured.
    #[serde(default)]
    pub extended_agent_card: bool,
    pub extended_card: Option<ExtendedCardConfig>,
    /// Human backend: the status message a parked task shows its caller.
    pub park_message: Option<String>,
    /// Relay backend: the id of the peer (`[[peers]]`) it forwards to.
    pub upstream: Option<String>,
    /// Scripted backend: rules, first match wins.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// Scripted backend: steps when no rule matches.
    pub fallback: Option<Vec<StepConfig>>,
}

fn default_version() -> String {
    "1.0.0".into()
}
fn default_input_modes() -> Vec<String> {
    vec!["*/*".into()]
}
fn default_output_modes() -> Vec<String> {
    vec![
        "text/plain".into(),
        "text/markdown".into(),
        "application/json".into(),
    ]
}
fn yes() -> bool {
    true
}

/// A scripted rule: conditions (all that are set must match) and steps.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    pub message_id_prefix: Option<String>,
    /// Regular expression searched in the message's text parts.
    pub text: Option<Spanned<String>>,
    /// `text`, `raw`, `url`, `data` or `file` (raw or url): some part has it.
    pub part_kind: Option<String>,
    pub steps: Vec<StepConfig>,
}

/// One step of a scripted rule.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum StepConfig {
    /// Move to a state, optionally with an agent status message.
    Status { state: String, text: Option<String> },
    /// Produce or extend an artifact.
    Artifact(ArtifactStepConfig),
    /// Send an agent message (kept in history, streamed as a status update).
    Message(String),
    /// Wait this many milliseconds.
    DelayMs(u64),
    /// Answer with a Message instead of a Task (only as the first step).
    Reply(String),
    /// Complete the task with this agent message.
    Complete(String),
    /// Reject the task with this reason.
    Reject(String),
    /// Fail the task with this reason.
    Fail(String),
}

/// An artifact a step produces.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactStepConfig {
    pub artifact_id: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub parts: Vec<PartConfig>,
    #[serde(default)]
    pub append: bool,
    #[serde(default)]
    pub last_chunk: bool,
}

/// A part in config: one of `text`, `raw` (base64), `raw_text` (encoded for
/// you), `url`, `data`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartConfig {
    pub text: Option<String>,
    pub raw: Option<String>,
    pub raw_text: Option<String>,
    pub url: Option<String>,
    pub data: Option<serde_json::Value>,
    pub filename: Option<String>,
    pub media_type: Option<String>,
}

/// A configuration problem, with where it is.
#[derive(Debug, thiserror::Error)]
#[error("{path}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ConfigError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub message: String,
}

impl Config {
    /// The configuration used when no file is given: one human agent, `inbox`.
    pub fn default_config() -> Config {
        let toml = "[[agents]]\nid = \"inbox\"\nname = \"Inbox\"\ndescription = \"Asks a person: every task waits for their approval, answer or rejection.\"\n";
        // The literal above is valid; parsing it cannot fail.
        Config::parse(toml, Path::new("<built-in>")).unwrap_or_else(|_| Config {
            bind: None,
            data_dir: None,
            public_url: None,
            limits: Limits::default(),
            store: StoreConfig::default(),
            access: Access::default(),
            cards: CardsConfig::default(),
            webhooks: WebhooksConfig::default(),
            agents: Vec::new(),
            tenants: Vec::new(),
            peers: Vec::new(),
            dispatch: DispatchConfig::default(),
            outbound: Default::default(),
            chains: Vec::new(),
            ui: UiConfig::default(),
            rate_limits: RateLimitsConfig::default(),
            retention: RetentionConfig::default(),
        })
    }

    /// Every agent served: the default tenant's, then each tenant's.
    pub fn all_agents(&self) -> Vec<AgentConfig> {
        let mut all = self.agents.clone();
        for t in &self.tenants {
            all.extend(t.agents.iter().cloned());
        }
        all
    }

    /// The tenant with this id.
    pub fn tenant(&self, id: &str) -> Option<&TenantConfig> {
        self.tenants.iter().find(|t| t.id.get_ref() == id)
    }

    /// Reads and checks a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            line: None,
            message: format!("cannot read the file: {e}"),
        })?;
        Config::parse(&text, path)
    }

    /// Parses and checks configuration text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let mut cfg: Config = toml::from_str(text).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            line: e.span().map(|s| line_of(s.start)),
            message: match toml_error_key(&e) {
                Some(key) => format!("{key}: {}", e.message()),
                None => e.message().to_owned(),
            },
        })?;
        let err = |span: Option<std::ops::Range<usize>>, message: String| ConfigError {
            path: path.to_path_buf(),
            line: span.map(|s| line_of(s.start)),
            message,
        };
        if cfg.agents.is_empty() {
            cfg.agents = Config::default_config().agents;
        }
        let seen = check_agents(&cfg.agents, "", &cfg.peers, &err)?;
        check_tenants(&cfg, &seen, &err)?;
        for t in &mut cfg.tenants {
            for a in &mut t.agents {
                a.tenant = Some(t.id.get_ref().clone());
            }
        }
        let mut peer_ids = HashSet::new();
        for (i, p) in cfg.peers.iter().enumerate() {
            let id = p.id.get_ref();
            if !is_slug(id) {
                return Err(err(
                    Some(p.id.span()),
                    format!(
                        "peers[{i}].id: `{id}` is not a slug (lowercase letters, digits and `-`)"
                    ),
                ));
            }
            if !peer_ids.insert(id.clone()) || seen.contains(id) {
                return Err(err(
                    Some(p.id.span()),
                    format!("peers[{i}].id: `{id}` is already used by an agent or peer"),
                ));
            }
            match url::Url::parse(&p.url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
                _ => {
                    return Err(err(
                        Some(p.id.span()),
                        format!("peers[{i}].url: `{}` is not an http(s) URL", p.url),
                    ));
                }
            }
            if p.bearer.is_some() && p.api_key.is_some() {
                return Err(err(
                    Some(p.id.span()),
                    format!("peers[{i}]: set `bearer` or `api_key`, not both"),
                ));
            }
        }
        let d = &cfg.dispatch;
        if d.max_attempts < 1 || d.timeout_secs == 0 || d.max_chain_depth < 1 || d.concurrency == 0
        {
            return Err(err(
                None,
                "dispatch: max_attempts, timeout_secs, max_chain_depth and concurrency must be at least 1".into(),
            ));
        }
        if let Err(e) = crate::dispatch::ssrf::OutboundPolicy::new(&cfg.outbound) {
            return Err(err(None, format!("outbound.allow: {e}")));
        }
        let mut rule_ids = HashSet::new();
        // Chain triggers may name any agent by its key (`acme/inbox` in a tenant).
        let keys: HashSet<String> = cfg
            .all_agents()
            .iter()
            .map(|a| agent_key(a.tenant.as_deref(), a.id.get_ref()))
            .collect();
        for (i, rule) in cfg.chains.iter_mut().enumerate() {
            rule.source = "config".into();
            // A stable id, so hops keep naming the rule across restarts.
            if rule.id.trim().is_empty() {
                rule.id = format!("chain-{}", i + 1);
            }
            // Peers added at run time are checked when the server starts.
            rule.check(|a| keys.contains(a), |_| true)
                .map_err(|m| err(None, format!("chains[{i}]: {m}")))?;
            if rule.id.is_empty() || !rule_ids.insert(rule.id.clone()) {
                return Err(err(
                    None,
                    format!("chains[{i}].id: `{}` is used by two rules", rule.id),
                ));
            }
        }
        check_credentials(&cfg.access.credentials, "access.credentials", &err)?;
        if cfg.access.require_credentials && cfg.access.credentials.is_empty() {
            return Err(err(
                None,
                "access.require_credentials is set but no [[access.credentials]] are configured"
                    .into(),
            ));
        }
        if let Some(bind) = &cfg.bind
            && bind.parse::<std::net::SocketAddr>().is_err()
        {
            return Err(err(
                None,
                format!("bind: `{bind}` is not HOST:PORT with an IP address"),
            ));
        }
        if cfg.limits.max_body_bytes == 0
            || cfg.limits.max_parts == 0
            || cfg.limits.max_push_configs == 0
            || cfg.limits.max_json_depth < 4
        {
            return Err(err(None, "limits: max_body_bytes, max_parts and max_push_configs must be positive and max_json_depth at least 4".into()));
        }
        if cfg.limits.header_timeout_secs == 0 || cfg.limits.body_timeout_secs == 0 {
            return Err(err(
                None,
                "limits: header_timeout_secs and body_timeout_secs must be at least 1".into(),
            ));
        }
        let rl = &cfg.rate_limits;
        for (name, q) in [
            ("a2a", rl.a2a),
            ("webhooks", rl.webhooks),
            ("ui", rl.ui),
            ("cards", rl.cards),
        ] {
            if q.per_second == 0 || q.burst == 0 {
                return Err(err(
                    None,
                    format!(
                        "rate_limits.{name}: per_second and burst must be at least 1 (set rate_limits.enabled = false to turn limits off)"
                    ),
                ));
            }
        }
        if rl.connections == 0 {
            return Err(err(
                None,
                "rate_limits.connections must be at least 1 (set rate_limits.enabled = false to turn limits off)".into(),
            ));
        }
        if cfg.retention.batch == 0 {
            return Err(err(None, "retention.batch must be at least 1".into()));
        }
        Ok(cfg)
    }

    /// The default data dir of this OS (`~/.local/share/countersign` on Linux).
    pub fn default_data_dir() -> Option<PathBuf> {
        directories::ProjectDirs::from("", "", "countersign").map(|d| d.data_dir().to_path_buf())
    }
}

type ErrFn<'a> = dyn Fn(Option<std::ops::Range<usize>>, String) -> ConfigError + 'a;

/// Checks one tenant's agents (`prefix` names the tenant in errors) and
/// returns their ids.
fn check_agents(
    agents: &[AgentConfig],
    prefix: &str,
    peers: &[PeerConfig],
    err: &ErrFn,
) -> Result<HashSet<String>, ConfigError> {
    let mut seen = HashSet::new();
    for (i, a) in agents.iter().enumerate() {
        let id = a.id.get_ref();
        if !is_slug(id) {
            return Err(err(
                Some(a.id.span()),
                format!(
                    "{prefix}agents[{i}].id: `{id}` is not a slug (lowercase letters, digits and `-`, 1 to 64 characters)"
                ),
            ));
        }
        if id == "agents" {
            return Err(err(
                Some(a.id.span()),
                format!(
                    "{prefix}agents[{i}].id: `agents` is reserved for the agent directory (/a2a/agents)"
                ),
            ));
        }
        if !seen.insert(id.clone()) {
            return Err(err(
                Some(a.id.span()),
                format!("{prefix}agents[{i}].id: `{id}` is used by two agents"),
            ));
        }
        match a.backend {
            BackendKind::Scripted if a.rules.is_empty() && a.fallback.is_none() => {
                return Err(err(
                    Some(a.id.span()),
                    format!(
                        "{prefix}agents[{i}] (`{id}`): a scripted agent needs `rules` or a `fallback`"
                    ),
                ));
            }
            BackendKind::Human if !a.rules.is_empty() => {
                return Err(err(
                    Some(a.id.span()),
                    format!(
                        "{prefix}agents[{i}] (`{id}`): `rules` apply to scripted agents only; set backend = \"scripted\""
                    ),
                ));
            }
            _ => {}
        }
        for (j, r) in a.rules.iter().enumerate() {
            if let Some(t) = &r.text
                && let Err(e) = regex::Regex::new(t.get_ref())
            {
                return Err(err(
                    Some(t.span()),
                    format!("{prefix}agents[{i}].rules[{j}].text: invalid regular expression: {e}"),
                ));
            }
            if let Some(k) = &r.part_kind
                && !["text", "raw", "url", "data", "file"].contains(&k.as_str())
            {
                return Err(err(
                    Some(a.id.span()),
                    format!(
                        "agents[{i}].rules[{j}].part_kind: `{k}` is not one of text, raw, url, data, file"
                    ),
                ));
            }
            check_steps(&r.steps).map_err(|m| {
                err(
                    Some(a.id.span()),
                    format!("{prefix}agents[{i}].rules[{j}].steps: {m}"),
                )
            })?;
        }
        if let Some(f) = &a.fallback {
            check_steps(f).map_err(|m| {
                err(
                    Some(a.id.span()),
                    format!("{prefix}agents[{i}].fallback: {m}"),
                )
            })?;
        }
    }
    for (i, a) in agents.iter().enumerate() {
        let names_peer = |u: &String| peers.iter().any(|p| p.id.get_ref() == u);
        match (&a.backend, &a.upstream) {
            (BackendKind::Relay, Some(u)) if names_peer(u) => {}
            (BackendKind::Relay, Some(u)) => {
                return Err(err(
                    Some(a.id.span()),
                    format!("{prefix}agents[{i}].upstream: no [[peers]] entry has id `{u}`"),
                ));
            }
            (BackendKind::Relay, None) => {
                return Err(err(
                    Some(a.id.span()),
                    format!("{prefix}agents[{i}]: a relay agent needs `upstream = \"<peer id>\"`"),
                ));
            }
            (_, Some(_)) => {
                return Err(err(
                    Some(a.id.span()),
                    format!("{prefix}agents[{i}].upstream: only relay agents have an upstream"),
                ));
            }
            _ => {}
        }
    }
    Ok(seen)
}

/// Checks `[[tenants]]`: slugs, unique, not an agent of the default tenant
/// (whose sub-routes they would shadow), not reserved; their agents and
/// credentials as the top-level ones; and marks each agent with its tenant.
fn check_tenants(
    cfg: &Config,
    default_agents: &HashSet<String>,
    err: &ErrFn,
) -> Result<(), ConfigError> {
    let mut ids = HashSet::new();
    for (i, t) in cfg.tenants.iter().enumerate() {
        let id = t.id.get_ref();
        let at = Some(t.id.span());
        if !is_slug(id) {
            return Err(err(
                at,
                format!(
                    "tenants[{i}].id: `{id}` is not a slug (lowercase letters, digits and `-`, 1 to 64 characters)"
                ),
            ));
        }
        if RESERVED_IDS.contains(&id.as_str()) {
            return Err(err(
                at,
                format!(
                    "tenants[{i}].id: `{id}` is reserved (it is a path segment of the A2A routes)"
                ),
            ));
        }
        if default_agents.contains(id) {
            return Err(err(
                at,
                format!(
                    "tenants[{i}].id: `{id}` is also the id of a top-level agent; `/a2a/{id}/…` would be ambiguous"
                ),
            ));
        }
        if !ids.insert(id.clone()) {
            return Err(err(
                at,
                format!("tenants[{i}].id: `{id}` is used by two tenants"),
            ));
        }
        if t.agents.is_empty() {
            return Err(err(
                at,
                format!("tenants[{i}] (`{id}`): a tenant needs at least one [[tenants.agents]]"),
            ));
        }
        let prefix = format!("tenants[{i}].");
        let agents = check_agents(&t.agents, &prefix, &cfg.peers, err)?;
        if let Some(r) = RESERVED_IDS.iter().find(|r| agents.contains(**r)) {
            return Err(err(
                at,
                format!(
                    "tenants[{i}].agents: `{r}` is reserved (it is a path segment of the A2A routes)"
                ),
            ));
        }
        check_credentials(&t.credentials, &format!("{prefix}credentials"), err)?;
        if t.require_credentials && t.credentials.is_empty() {
            return Err(err(
                at,
                format!(
                    "tenants[{i}].require_credentials is set but the tenant has no [[tenants.credentials]]"
                ),
            ));
        }
    }
    Ok(())
}

/// Each credential has exactly one secret of at least 16 characters.
fn check_credentials(creds: &[Credential], what: &str, err: &ErrFn) -> Result<(), ConfigError> {
    for (i, c) in creds.iter().enumerate() {
        if c.bearer.is_some() == c.api_key.is_some() {
            return Err(err(
                None,
                format!(
                    "{what}[{i}] (`{}`): set exactly one of `bearer` or `api_key`",
                    c.name
                ),
            ));
        }
        if c.bearer
            .as_deref()
            .or(c.api_key.as_deref())
            .is_some_and(|s| s.len() < 16)
        {
            return Err(err(
                None,
                format!(
                    "{what}[{i}] (`{}`): the secret must be at least 16 characters",
                    c.name
                ),
            ));
        }
    }
    Ok(())
}

/// The dotted key a TOML error is about (`limits.max_parts`), so that a
/// wrong value names its field and not only the type it should have had.
fn toml_error_key(e: &toml::de::Error) -> Option<String> {
    // Without its input, the error's Display ends with "in `the.key`".
    let mut bare = e.clone();
    bare.set_input(None);
    let text = bare.to_string();
    let key = text
        .lines()
        .find_map(|l| l.strip_prefix("in `")?.strip_suffix('`'))?;
    (!key.is_empty()).then(|| key.to_owned())
}

fn check_steps(steps: &[StepConfig]) -> Result<(), String> {
    for (k, s) in steps.iter().enumerate() {
        match s {
            StepConfig::Status { state, .. }
                if crate::a2a::types::TaskState::parse(state).is_none() =>
            {
                return Err(format!("[{k}]: unknown state `{state}`"));
            }
            StepConfig::Reply(_) if k != 0 => {
                return Err(format!(
                    "[{k}]: `reply` answers with a Message and must be the only step"
                ));
            }
            StepConfig::Reply(_) if steps.len() > 1 => {
                return Err("`reply` answers with a Message and must be the only step".into());
            }
            StepConfig::Artifact(a) => {
                if a.parts.is_empty() {
                    return Err(format!("[{k}]: an artifact needs at least one part"));
                }
                for p in &a.parts {
                    let n = [
                        p.text.is_some(),
                        p.raw.is_some(),
                        p.raw_text.is_some(),
                        p.url.is_some(),
                        p.data.is_some(),
                    ]
                    .iter()
                    .filter(|b| **b)
                    .count();
                    if n != 1 {
                        return Err(format!(
                            "[{k}]: each part needs exactly one of text, raw, raw_text, url, data"
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The key an agent's tasks are stored under: its id, prefixed `{tenant}/`
/// in a tenant (`/` is in no slug, so keys of two tenants never meet).
pub fn agent_key(tenant: Option<&str>, id: &str) -> String {
    match tenant {
        Some(t) => format!("{t}/{id}"),
        None => id.to_owned(),
    }
}

/// The tenant in an agent key, if any.
pub fn tenant_of(agent_key: &str) -> Option<&str> {
    agent_key.split_once('/').map(|(t, _)| t)
}

/// 1 to 64 of `a-z`, `0-9`, `-`, not starting with `-`.
pub fn is_slug(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.starts_with('-')
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_agents_means_one_human_inbox() {
        let c = Config::parse("", Path::new("c.toml")).unwrap();
        assert_eq!(c.agents.len(), 1);
        assert_eq!(c.agents[0].id.get_ref(), "inbox");
        assert_eq!(c.agents[0].backend, BackendKind::Human);
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = Config::parse(
            "bind = \"127.0.0.1:1\"\n[[agents]]\nid = \"x\"\nnmae = \"typo\"\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("c.toml:4"), "{e}");
        assert!(e.contains("nmae"), "{e}");
        let e = Config::parse("[limits]\nmax_parts = \"many\"\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("c.toml:2: limits.max_parts:"), "{e}");
        for zero in ["max_parts", "max_push_configs"] {
            let e = Config::parse(&format!("[limits]\n{zero} = 0\n"), Path::new("c.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(zero) && e.contains("positive"), "{e}");
        }
        let e = Config::parse("[[agents]]\nid = \"Bad Id\"\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("c.toml:2") && e.contains("agents[0].id"),
            "{e}"
        );
        let e = Config::parse(
            "[[agents]]\nid = \"s\"\nbackend = \"scripted\"\n[[agents.rules]]\ntext = \"(\"\nsteps = []\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("c.toml:5") && e.contains("rules[0].text"),
            "{e}"
        );
    }

    #[test]
    fn tenants_carry_their_agents_and_refuse_ambiguity() {
        let c = Config::parse(
            "[[agents]]\nid = \"inbox\"\n[[tenants]]\nid = \"acme\"\n[[tenants.agents]]\nid = \"inbox\"\n[[chains]]\ntrigger = { agent = \"acme/inbox\", states = [\"completed\"] }\naction = { kind = \"push\", url = \"https://hooks.example.com/x\" }\n",
            Path::new("c.toml"),
        )
        .unwrap();
        let all = c.all_agents();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].tenant, None);
        assert_eq!(all[1].tenant.as_deref(), Some("acme"));
        assert_eq!(agent_key(Some("acme"), "inbox"), "acme/inbox");
        assert_eq!(tenant_of("acme/inbox"), Some("acme"));
        assert_eq!(tenant_of("inbox"), None);
        let e = Config::parse(
            "[[agents]]\nid = \"acme\"\n\n[[tenants]]\nid = \"acme\"\n[[tenants.agents]]\nid = \"x\"\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("c.toml:5: tenants[0].id"), "{e}");
        let e = Config::parse(
            "[[tenants]]\nid = \"t\"\n[[tenants.agents]]\nid = \"s\"\nbackend = \"scripted\"\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("tenants[0].agents[0]"), "{e}");
    }

    #[test]
    fn steps_parse_from_inline_tables() {
        let c = Config::parse(
            r#"[[agents]]
id = "s"
backend = "scripted"
[[agents.rules]]
message_id_prefix = "x"
steps = [ { status = { state = "working" } }, { delay_ms = 5 },
          { artifact = { name = "a", parts = [ { data = { key = "value", count = 42 } } ] } },
          { complete = "done" } ]
"#,
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(c.agents[0].rules[0].steps.len(), 4);
    }
}
