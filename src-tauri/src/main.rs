//! The `countersign` command line.

#![forbid(unsafe_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

use countersign::cli::{self, CliError, Output};
use countersign::config::Config;
use countersign::server::run::{ServeOptions, serve};

/// Every allocation of the process goes through mimalloc: the request path
/// allocates and frees about a hundred small buffers per request, and
/// glibc's allocator spent 13% of a durable SendMessage's instructions on
/// them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Countersign: approve, answer or reject the work AI agents park for you.
#[derive(Parser)]
#[command(
    name = "countersign",
    version,
    about,
    long_about = None,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand: the desktop app, with these options.
    #[command(flatten)]
    desktop: ServeArgs,
    /// A `countersign://task/ID` link to open (what the OS passes).
    #[arg(value_name = "LINK")]
    link: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the headless server: the A2A agents and their cards, the webhook receiver and the web UI.
    Serve(ServeArgs),
    /// List recent tasks of the running instance (`--parked`: those waiting for you).
    Tasks(TasksArgs),
    /// Show a task: its state, the conversation, turns and decisions.
    Show(ShowArgs),
    /// Approve a parked task.
    Approve(ApproveArgs),
    /// Answer a parked task with text, and optionally JSON data and files.
    Reply(ReplyArgs),
    /// Reject a parked task.
    Reject(RejectArgs),
    /// List the decisions taken, newest first.
    History(HistoryArgs),
    /// Add, list or remove peers: other A2A agents whose tasks you decide here.
    Peers(PeersArgs),
    /// Start a task on a peer; `--watch` follows it until it finishes or parks.
    Send(SendArgs),
    /// Create a webhook URL and token for another tool's push config for a peer.
    Subscribe(SubscribeArgs),
    /// List outbound deliveries (decisions to peers, push notifications,
    /// chain hops, re-reads of pushed tasks): delivered, pending or failed;
    /// `retry ID` a failed one.
    Deliveries(DeliveriesArgs),
    /// Chain rules: when a task reaches a state, push it to a URL or send it
    /// to a peer as a new task.
    Chains(ChainsArgs),
    /// Finished tasks moved out of the database by retention: list the
    /// archive files, export the tasks in them, or show one.
    Archive(ArchiveArgs),
}

#[derive(clap::Args)]
struct ArchiveArgs {
    #[command(subcommand)]
    command: ArchiveCommand,
}

#[derive(Subcommand)]
enum ArchiveCommand {
    /// The archive files: month, tasks, size, first and last change.
    List(JsonArgs),
    /// Print (or write) the archived tasks, each once, oldest first.
    Export(ArchiveExportArgs),
    /// Show one archived task as `show` does a task still here.
    Show(ArchiveShowArgs),
}

#[derive(clap::Args)]
struct ArchiveShowArgs {
    /// The task id.
    id: String,
    /// Print its whole archived record (JSON).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(clap::Args)]
struct ArchiveExportArgs {
    /// Tasks last changed at or after this time (YYYY-MM-DD or RFC 3339).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Tasks last changed before this time (YYYY-MM-DD or RFC 3339).
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    /// Only tasks of this agent.
    #[arg(long, value_name = "AGENT")]
    agent: Option<String>,
    /// jsonl (one full task per line) or csv (one row per task).
    #[arg(long, value_name = "FORMAT", default_value = "jsonl")]
    format: cli::ExportFormat,
    /// Write to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(clap::Args)]
struct ChainsArgs {
    #[command(subcommand)]
    command: ChainsCommand,
}

#[derive(Subcommand)]
enum ChainsCommand {
    /// List the chain rules.
    List(JsonArgs),
    /// Add a chain rule.
    Add(Box<ChainsAddArgs>),
    /// Remove a chain rule (rules from the config file are changed there).
    Remove(IdArgs),
    /// The newest hops: which rule fired for which task, and how it went.
    Hops(JsonArgs),
    /// Send a gated hop on.
    Release(IdArgs),
    /// Drop a gated hop.
    Drop(IdArgs),
}

#[derive(clap::Args)]
struct JsonArgs {
    /// Print the API's JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(clap::Args)]
struct IdArgs {
    id: String,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("when").required(true).args(["on_agent", "on_peer"])))]
#[command(group(clap::ArgGroup::new("then").required(true).args(["push", "send"])))]
struct ChainsAddArgs {
    /// Fire for tasks of this served agent.
    #[arg(long, value_name = "AGENT")]
    on_agent: Option<String>,
    /// Fire for watched tasks of this peer.
    #[arg(long, value_name = "PEER")]
    on_peer: Option<String>,
    /// A state that fires the rule (repeatable; default: completed).
    #[arg(long = "state", value_name = "STATE")]
    states: Vec<String>,
    /// Only tasks whose metadata names this skill.
    #[arg(long, value_name = "SKILL")]
    skill: Option<String>,
    /// POST the task to this URL as a push notification.
    #[arg(long, value_name = "URL")]
    push: Option<String>,
    /// With --push: the Authorization scheme (default Bearer).
    #[arg(long, value_name = "SCHEME", requires = "credentials")]
    auth_scheme: Option<String>,
    /// With --push: the Authorization credentials.
    #[arg(long, value_name = "CREDENTIALS", requires = "push")]
    credentials: Option<String>,
    /// With --push: the notification token header's value.
    #[arg(long, value_name = "TOKEN", requires = "push")]
    token: Option<String>,
    /// Send the task to this peer as a new task.
    #[arg(long, value_name = "PEER")]
    send: Option<String>,
    /// With --send: the message text; {{task.id}}, {{artifacts.text}}, … are filled in.
    #[arg(long, value_name = "TEXT", requires = "send")]
    template: Option<String>,
    /// With --send: join the task's context instead of starting a new one.
    #[arg(long, requires = "send")]
    same_context: bool,
    /// With --send: do not pass the task's artifacts on.
    #[arg(long, requires = "send")]
    no_artifacts: bool,
    /// Park each hop for you before it is sent.
    #[arg(long)]
    gate: bool,
    /// The rule id (default: from the trigger and target).
    #[arg(long, value_name = "ID")]
    id: Option<String>,
    #[command(flatten)]
    instance: InstanceArgs,
}

impl ChainsAddArgs {
    /// The rule as the UI API takes it.
    fn rule(&self) -> serde_json::Value {
        let action = match (&self.push, &self.send) {
            (Some(url), _) => serde_json::json!({
                "kind": "push", "url": url, "authScheme": self.auth_scheme,
                "credentials": self.credentials, "token": self.token,
            }),
            (_, Some(peer)) => {
                let mut a = serde_json::json!({
                    "kind": "send", "peer": peer,
                    "context": if self.same_context { "same" } else { "new" },
                    "artifacts": !self.no_artifacts,
                });
                if let Some(t) = &self.template {
                    a["template"] = t.clone().into();
                }
                a
            }
            _ => serde_json::Value::Null,
        };
        serde_json::json!({
            "id": self.id.clone().unwrap_or_default(),
            "gate": self.gate,
            "trigger": {"agent": self.on_agent, "peer": self.on_peer, "states": self.states, "skill": self.skill},
            "action": action,
        })
    }
}

/// Which running instance a client command talks to.
#[derive(clap::Args)]
struct InstanceArgs {
    /// The data dir of the running instance (default: the OS data dir).
    #[arg(long, value_name = "DIR", env = "COUNTERSIGN_DATA_DIR")]
    data_dir: Option<PathBuf>,
}

#[derive(clap::Args)]
struct TasksArgs {
    /// Only the tasks waiting for a decision.
    #[arg(long)]
    parked: bool,
    /// Only the tasks of this agent.
    #[arg(long, value_name = "AGENT")]
    agent: Option<String>,
    /// Only the tasks in this state (with --parked: input-required or
    /// auth-required).
    #[arg(long, value_name = "STATE")]
    state: Option<cli::StateArg>,
    /// Only the tasks whose request holds every word, without case: its
    /// first line, or the task's id (with --parked: the request or its
    /// answers, and the last word may be the start of one). A search of
    /// recent tasks reads at most 5,000 of them a page.
    #[arg(long, value_name = "WORDS")]
    search: Option<String>,
    /// How many to list (at most 500; default 50).
    #[arg(long, value_name = "N", value_parser = page_limit)]
    limit: Option<usize>,
    /// Print the API's JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    instance: InstanceArgs,
}

/// A `--limit` the server accepts: 1 to its largest page.
fn page_limit(s: &str) -> Result<usize, String> {
    let max = countersign::engine::queue::MAX_PAGE;
    match s.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("a number from 1 to {max}")),
    }
}

#[derive(clap::Args)]
struct ShowArgs {
    /// The task id.
    id: String,
    /// Print the API's JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(clap::Args)]
struct ApproveArgs {
    /// The task id.
    id: String,
    /// A comment sent with the approval.
    #[arg(long, value_name = "TEXT")]
    comment: Option<String>,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(clap::Args)]
struct ReplyArgs {
    /// The task id.
    id: String,
    /// The answer.
    text: String,
    /// A JSON value sent as a data part.
    #[arg(long, value_name = "JSON")]
    data: Option<String>,
    /// A file sent as a file part (repeatable).
    #[arg(long = "file", value_name = "PATH")]
    files: Vec<PathBuf>,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(clap::Args)]
struct RejectArgs {
    /// The task id.
    id: String,
    /// Why, sent with the rejection.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(clap::Args)]
struct HistoryArgs {
    /// Only the decisions on this agent's tasks.
    #[arg(long, value_name = "AGENT")]
    agent: Option<String>,
    /// Only the decisions whose request or answer holds every word (the
    /// last may be the start of one).
    #[arg(long, value_name = "WORDS")]
    search: Option<String>,
    /// How many to list (at most 500; default 50).
    #[arg(long, value_name = "N", value_parser = page_limit)]
    limit: Option<usize>,
    /// Print the API's JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(clap::Args)]
struct PeersArgs {
    #[command(subcommand)]
    command: PeersCommand,
}

#[derive(Subcommand)]
enum PeersCommand {
    /// Add a peer by its URL; its agent card is read first.
    Add(PeersAddArgs),
    /// List the peers.
    List(PeersListArgs),
    /// Remove a peer (its watched tasks stay).
    Remove(PeersRemoveArgs),
    /// Accept a peer's changed agent card (identity, skills, auth or signing
    /// key): the decisions and new tasks held for it go out.
    Trust(PeersRemoveArgs),
}

#[derive(clap::Args)]
struct PeersAddArgs {
    /// The peer's URL (its A2A endpoint or where its agent card is served).
    url: String,
    /// The peer id (default: from the name, or the URL's host).
    #[arg(long, value_name = "ID")]
    id: Option<String>,
    /// A name for people.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// An extra header sent with every call to the peer (repeatable).
    #[arg(long = "header", value_name = "K:V")]
    headers: Vec<String>,
    /// A bearer token the peer expects.
    #[arg(long, value_name = "TOKEN")]
    bearer: Option<String>,
    /// An API key the peer expects.
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
    /// The header the API key goes in.
    #[arg(long, value_name = "H", requires = "api_key")]
    api_key_header: Option<String>,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(clap::Args)]
struct PeersListArgs {
    /// Print the API's JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(clap::Args)]
struct PeersRemoveArgs {
    /// The peer id.
    id: String,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(clap::Args)]
struct SendArgs {
    /// The peer id.
    peer: String,
    /// The request.
    text: String,
    /// A file sent as a file part (repeatable).
    #[arg(long = "file", value_name = "PATH")]
    files: Vec<PathBuf>,
    /// Print each new state until the task finishes or waits for a decision.
    #[arg(long)]
    watch: bool,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(clap::Args)]
struct SubscribeArgs {
    /// The peer id.
    peer: String,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(clap::Args)]
struct DeliveriesArgs {
    #[command(subcommand)]
    command: Option<DeliveriesCommand>,
    /// Only the deliveries that failed for good.
    #[arg(long)]
    failed: bool,
    /// Print the API's JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(Subcommand)]
enum DeliveriesCommand {
    /// Try a failed delivery again (its attempts start over).
    Retry(IdArgs),
}

#[derive(clap::Args, Default)]
struct ServeArgs {
    /// Configuration file (TOML). Without one, a single human agent `inbox` is served.
    #[arg(long, value_name = "FILE", env = "COUNTERSIGN_CONFIG")]
    config: Option<PathBuf>,
    /// Where the database lives (default: the OS data dir, e.g. ~/.local/share/countersign).
    #[arg(long, value_name = "DIR", env = "COUNTERSIGN_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Address to listen on (default 127.0.0.1:7717; port 0 picks a free one).
    #[arg(long, value_name = "HOST:PORT", env = "COUNTERSIGN_BIND")]
    bind: Option<SocketAddr>,
    /// Allow a non-loopback bind without any configured credential.
    #[arg(long)]
    insecure: bool,
}

/// `countersign --data-dir DIR tasks` means `countersign tasks --data-dir
/// DIR`: the options the desktop app takes, given before a subcommand, are
/// moved after it (where each subcommand takes those it knows). Without
/// this, clap would read the subcommand's name as the desktop app's LINK.
fn options_after_command(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let takes_value = |name: &str| {
        cmd.get_arguments()
            .find(|a| a.get_long() == Some(name))
            .map(|a| a.get_action().takes_values())
    };
    let mut i = 1;
    while let Some(arg) = args.get(i).and_then(|a| a.to_str()) {
        let Some(long) = arg.strip_prefix("--") else {
            break;
        };
        let (name, inline_value) = match long.split_once('=') {
            Some((name, _)) => (name, true),
            None => (long, false),
        };
        match takes_value(name) {
            Some(true) if !inline_value => i += 2,
            Some(_) => i += 1,
            None => return args,
        }
    }
    let is_command = args
        .get(i)
        .and_then(|a| a.to_str())
        .is_some_and(|name| cmd.get_subcommands().any(|c| c.get_name() == name));
    if i == 1 || i >= args.len() || !is_command {
        return args;
    }
    let mut out = Vec::with_capacity(args.len());
    out.push(args[0].clone());
    out.push(args[i].clone());
    out.extend(args[1..i].iter().cloned());
    out.extend(args[i + 1..].iter().cloned());
    out
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(options_after_command(std::env::args_os().collect()));
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("countersign=info,warn")),
        )
        .with_writer(std::io::stderr)
        // A log line that cannot be written (the disk is full) is dropped;
        // the default reports it with `eprintln!`, which then panics the
        // thread that logged, the database writer among them.
        .log_internal_errors(false)
        .init();
    let result = match cli.command {
        Some(Command::Serve(args)) => run_serve(args),
        Some(Command::Tasks(a)) => {
            return run_client(a.instance, async move |dir| {
                let filter = cli::Filter {
                    agent: a.agent,
                    state: a.state,
                    search: a.search,
                    limit: a.limit,
                };
                cli::tasks(&dir, a.parked, &filter, a.json).await
            });
        }
        Some(Command::Show(a)) => {
            return run_client(a.instance, async move |dir| {
                cli::show(&dir, &a.id, a.json).await
            });
        }
        Some(Command::Approve(a)) => {
            return run_client(a.instance, async move |dir| {
                cli::approve(&dir, &a.id, a.comment).await
            });
        }
        Some(Command::Reply(a)) => {
            return run_client(a.instance, async move |dir| {
                cli::reply(&dir, &a.id, a.text, a.data.as_deref(), &a.files).await
            });
        }
        Some(Command::Reject(a)) => {
            return run_client(a.instance, async move |dir| {
                cli::reject(&dir, &a.id, a.reason).await
            });
        }
        Some(Command::History(a)) => {
            return run_client(a.instance, async move |dir| {
                let filter = cli::Filter {
                    agent: a.agent,
                    state: None,
                    search: a.search,
                    limit: a.limit,
                };
                cli::history(&dir, &filter, a.json).await
            });
        }
        Some(Command::Peers(p)) => return run_peers(p.command),
        Some(Command::Send(a)) => {
            return run_client(a.instance, async move |dir| {
                let mut progress = |line: &str| println!("{line}");
                cli::send(&dir, &a.peer, a.text, &a.files, a.watch, &mut progress).await
            });
        }
        Some(Command::Subscribe(a)) => {
            return run_client(a.instance, async move |dir| {
                cli::subscribe(&dir, &a.peer).await
            });
        }
        Some(Command::Deliveries(a)) => {
            if let Some(DeliveriesCommand::Retry(r)) = a.command {
                return run_client(r.instance, async move |dir| {
                    cli::deliveries_retry(&dir, &r.id).await
                });
            }
            return run_client(a.instance, async move |dir| {
                cli::deliveries(&dir, a.failed, a.json).await
            });
        }
        Some(Command::Chains(c)) => return run_chains(c.command),
        Some(Command::Archive(a)) => return run_archive(a.command),
        None => run_desktop(cli.desktop, cli.link),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("countersign: {}", countersign::error_text(&e));
            ExitCode::from(2)
        }
    }
}

/// The desktop app (the server runs in-process, as `serve` would).
#[cfg(feature = "desktop")]
fn run_desktop(args: ServeArgs, link: Option<String>) -> anyhow::Result<()> {
    let opts = serve_options(args)?;
    let open_task = match link {
        None => None,
        Some(l) => match countersign::link::task_of_link(&l) {
            Some(id) => Some(id),
            None => {
                bail!("`{l}` is neither a command nor a countersign://task/ID link (see --help)")
            }
        },
    };
    countersign::desktop::run(opts, open_task)
}

/// Without the desktop shell (a headless build), no subcommand serves.
#[cfg(not(feature = "desktop"))]
fn run_desktop(args: ServeArgs, link: Option<String>) -> anyhow::Result<()> {
    if let Some(l) = link {
        if !l.starts_with("countersign://") {
            bail!("`{l}` is neither a command nor a countersign://task/ID link (see --help)");
        }
        bail!("this build has no desktop window to open a link in");
    }
    eprintln!(
        "countersign: this build has no desktop window; serving as `countersign serve` would."
    );
    run_serve(args)
}

fn run_serve(args: ServeArgs) -> anyhow::Result<()> {
    let opts = serve_options(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(opts))?;
    Ok(())
}

/// What `serve` (and the desktop app) run with: config, bind and data dir
/// from the arguments, the config file, the saved settings and the
/// defaults, in that order.
fn serve_options(args: ServeArgs) -> anyhow::Result<ServeOptions> {
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default_config(),
    };
    let data_dir = match (args.data_dir, &config.data_dir) {
        (Some(d), _) => d,
        (None, Some(d)) => d.clone(),
        (None, None) => match Config::default_data_dir() {
            Some(d) => d,
            None => bail!("cannot find a home directory for the data dir; pass --data-dir"),
        },
    };
    // What the settings screen saved fills what the config leaves unset.
    countersign::server::ui_settings::apply_saved(&mut config, &data_dir);
    let bind: SocketAddr = match (args.bind, &config.bind) {
        (Some(b), _) => b,
        (None, Some(b)) => b
            .parse()
            .with_context(|| format!("bind address `{b}` in the config"))?,
        (None, None) => SocketAddr::from(([127, 0, 0, 1], 7717)),
    };
    if !bind.ip().is_loopback() && config.access.credentials.is_empty() && !args.insecure {
        bail!(
            "refusing to listen on {bind} without credentials: anyone who can reach it could use your agents. \
             Add [[access.credentials]] with a bearer token or API key to the config, bind 127.0.0.1, \
             or pass --insecure if the network is trusted"
        );
    }
    if !bind.ip().is_loopback()
        && !args.insecure
        && let Some(t) = config.tenants.iter().find(|t| t.credentials.is_empty())
    {
        bail!(
            "refusing to listen on {bind}: tenant `{}` has no credentials, so no one could reach its agents. \
             Add [[tenants.credentials]] to it, bind 127.0.0.1, or pass --insecure if the network is trusted",
            t.id.get_ref()
        );
    }
    let require = config.access.require_credentials;
    Ok(ServeOptions {
        config,
        bind,
        data_dir,
        open: (bind.ip().is_loopback() && !require) || args.insecure,
    })
}

/// `countersign peers add|list|remove`.
fn run_peers(command: PeersCommand) -> ExitCode {
    match command {
        PeersCommand::Add(a) => run_client(a.instance, async move |dir| {
            let auth = cli::PeerAuth {
                bearer: a.bearer,
                api_key: a.api_key,
                api_key_header: a.api_key_header,
                headers: a.headers,
            };
            cli::peers_add(&dir, &a.url, a.id, a.name, auth).await
        }),
        PeersCommand::List(a) => run_client(a.instance, async move |dir| {
            cli::peers_list(&dir, a.json).await
        }),
        PeersCommand::Remove(a) => run_client(a.instance, async move |dir| {
            cli::peers_remove(&dir, &a.id).await
        }),
        PeersCommand::Trust(a) => run_client(a.instance, async move |dir| {
            cli::peers_trust(&dir, &a.id).await
        }),
    }
}

/// `countersign archive list|export|show`: reads the archive files in the data
/// dir; no running server is needed.
fn run_archive(command: ArchiveCommand) -> ExitCode {
    match command {
        ArchiveCommand::List(a) => {
            run_client(a.instance, async move |dir| cli::archive_list(&dir, a.json))
        }
        ArchiveCommand::Export(a) => run_client(a.instance, async move |dir| {
            let filter = countersign::archive::ExportFilter {
                since_ms: a.since.as_deref().map(cli::parse_time).transpose()?,
                until_ms: a.until.as_deref().map(cli::parse_time).transpose()?,
                agent: a.agent,
            };
            cli::archive_export(&dir, &filter, a.format, a.output.as_ref())
        }),
        ArchiveCommand::Show(a) => run_client(a.instance, async move |dir| {
            cli::archive_show(&dir, &a.id, a.json)
        }),
    }
}

fn run_chains(command: ChainsCommand) -> ExitCode {
    match command {
        ChainsCommand::List(a) => run_client(a.instance, async move |dir| {
            cli::chains_list(&dir, a.json).await
        }),
        ChainsCommand::Add(a) => {
            let rule = a.rule();
            run_client(a.instance, async move |dir| {
                cli::chains_add(&dir, rule).await
            })
        }
        ChainsCommand::Remove(a) => run_client(a.instance, async move |dir| {
            cli::chains_remove(&dir, &a.id).await
        }),
        ChainsCommand::Hops(a) => run_client(a.instance, async move |dir| {
            cli::chains_hops(&dir, a.json).await
        }),
        ChainsCommand::Release(a) => run_client(a.instance, async move |dir| {
            cli::chains_gate(&dir, &a.id, true).await
        }),
        ChainsCommand::Drop(a) => run_client(a.instance, async move |dir| {
            cli::chains_gate(&dir, &a.id, false).await
        }),
    }
}

/// Runs a client command against the instance of a data dir: its output on
/// stdout and exit 0, or a one-line reason on stderr and exit 1 (refused) or
/// 2 (usage).
fn run_client<F, Fut>(args: InstanceArgs, command: F) -> ExitCode
where
    F: FnOnce(PathBuf) -> Fut,
    Fut: Future<Output = Result<Output, CliError>>,
{
    let Some(dir) = args.data_dir.or_else(Config::default_data_dir) else {
        eprintln!("countersign: cannot find a home directory for the data dir; pass --data-dir");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("countersign: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(command(dir)) {
        Ok(out) => {
            print!("{}", out.text);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("countersign: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
