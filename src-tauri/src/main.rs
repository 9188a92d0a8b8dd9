//! The `countersign` command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

use countersign::config::Config;
use countersign::server::run::{ServeOptions, serve};

/// Countersign: approve, answer or reject the work AI agents park for you.
#[derive(Parser)]
#[command(name = "countersign", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the headless server: A2A agents, cards and (later) the web UI.
    Serve(ServeArgs),
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
    #[arg(long, value_name = "HOST:PORT")]
    bind: Option<SocketAddr>,
    /// Allow a non-loopback bind without any configured credential.
    #[arg(long)]
    insecure: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("countersign=info,warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Some(Command::Serve(args)) => run_serve(args),
        None => {
            eprintln!(
                "countersign: this build has no desktop window yet; starting the server as `countersign serve` would."
            );
            run_serve(ServeArgs::default())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("countersign: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run_serve(args: ServeArgs) -> anyhow::Result<()> {
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default_config(),
    };
    let bind: SocketAddr = match (args.bind, &config.bind) {
        (Some(b), _) => b,
        (None, Some(b)) => b
            .parse()
            .with_context(|| format!("bind address `{b}` in the config"))?,
        (None, None) => SocketAddr::from(([127, 0, 0, 1], 7717)),
    };
    let data_dir = match (args.data_dir, &config.data_dir) {
        (Some(d), _) => d,
        (None, Some(d)) => d.clone(),
        (None, None) => match Config::default_data_dir() {
            Some(d) => d,
            None => bail!("cannot find a home directory for the data dir; pass --data-dir"),
        },
    };
    if !bind.ip().is_loopback() && config.access.credentials.is_empty() && !args.insecure {
        bail!(
            "refusing to listen on {bind} without credentials: anyone who can reach it could use your agents. \
             Add [[access.credentials]] with a bearer token or API key to the config, bind 127.0.0.1, \
             or pass --insecure if the network is trusted"
        );
    }
    let require = config.access.require_credentials;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(ServeOptions {
        config,
        bind,
        data_dir,
        open: (bind.ip().is_loopback() && !require) || args.insecure,
    }))?;
    Ok(())
}
