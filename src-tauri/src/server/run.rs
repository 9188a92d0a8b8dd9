//! Starting and stopping a server: open the store, build the engine, bind,
//! announce the address, serve until SIGINT/SIGTERM, then close cleanly.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

use super::instance::InstanceFile;
use super::ui_auth::{SecretError, UiSecret};
use super::ui_settings::SettingsFile;
use super::ui_static::UiFiles;
use super::{AccessPolicy, AppState, router};
use crate::config::Config;
use crate::engine::Engine;
use crate::store::{self, Store};

/// What `countersign serve` was asked to do.
pub struct ServeOptions {
    pub config: Config,
    pub bind: SocketAddr,
    pub data_dir: PathBuf,
    /// Calls without credentials are allowed.
    pub open: bool,
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot create the data dir {0}: {1}")]
    DataDir(PathBuf, std::io::Error),
    #[error(transparent)]
    Locked(#[from] super::instance::LockError),
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
    #[error(transparent)]
    UiSecret(#[from] SecretError),
    #[error(transparent)]
    CardKey(#[from] super::card::KeyError),
    #[error("cannot write {0}: {1}")]
    Instance(PathBuf, std::io::Error),
    #[error("{0}")]
    Chains(String),
    #[error("server failed: {0}")]
    Serve(std::io::Error),
}

/// Runs the server until a shutdown signal, then closes the database.
pub async fn serve(opts: ServeOptions) -> Result<(), StartError> {
    serve_until(opts, |_| {}, shutdown_signal()).await
}

/// Raises this process's soft limit on open files to its hard limit. Every
/// connection, event stream and outbound request holds a descriptor, and a
/// desktop session's soft limit (1,024 by default on Linux) would cap the
/// server at about a thousand of them while the hard limit (usually
/// 524,288) allows far more. Failing leaves the limit as it was.
#[cfg(unix)]
fn raise_open_files_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let Some(soft) = limit.current else {
        return;
    };
    // Without a hard limit the kernel still caps descriptors (Linux's
    // `fs.nr_open`, 1,048,576 by default), and a soft limit above that cap
    // is refused; macOS refuses one above `OPEN_MAX` (10,240), so that is
    // tried next.
    let most = limit.maximum.unwrap_or(1 << 20);
    for files in [most, most.min(10_240)] {
        if files <= soft {
            return;
        }
        let raised = Rlimit {
            current: Some(files),
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => {
                tracing::debug!(files, "raised the open files limit");
                return;
            }
            Err(e) => tracing::debug!("cannot raise the open files limit to {files}: {e}"),
        }
    }
}

#[cfg(not(unix))]
fn raise_open_files_limit() {}

/// Runs the server until `stop` resolves, then closes the database. `ready`
/// gets the server's state once it listens: the desktop shell drives the
/// same server in-process through it.
pub async fn serve_until(
    opts: ServeOptions,
    ready: impl FnOnce(super::Shared),
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    raise_open_files_limit();
    crate::durable_fs::create_dir_all(&opts.data_dir)
        .map_err(|e| StartError::DataDir(opts.data_dir.clone(), e))?;
    // Before anything reads the store: a second server on the same data
    // dir would mark the first one's working tasks as interrupted and run
    // its deliveries a second time. Dropped last, after the store closes.
    let _lock = super::instance::lock_data_dir(&opts.data_dir)?;
    let db = opts.data_dir.join("countersign.db");
    let ui_secret = UiSecret::load_or_create(&opts.data_dir)?;
    let card_key = super::card::load_key(opts.config.cards.signing_key.as_deref(), &opts.data_dir)?;
    let store = Store::open(&db, opts.config.store.durability)?;
    let engine = Engine::new(
        store.clone(),
        &opts.config.all_agents(),
        opts.config.limits.clone(),
    );
    // Policy and limits for push notifications and chain hops, set before
    // anything reads them: recovery below already records events.
    let policy = crate::dispatch::ssrf::OutboundPolicy::new(&opts.config.outbound)
        .map_err(|e| StartError::Chains(format!("outbound.allow: {e}")))?;
    engine.configure_dispatch(crate::engine::dispatch::Dispatch::new(
        opts.config.dispatch.clone(),
        policy,
    ));
    engine.configure_retention(crate::engine::retention::Retention::new(
        opts.config.retention.clone(),
        crate::archive::dir_of(&opts.data_dir),
    ));
    let resend_wait = std::time::Duration::from_secs(opts.config.webhooks.resend_wait_secs);
    match engine.recover(resend_wait).await {
        Ok(0) => {}
        Ok(n) => tracing::info!("marked {n} task(s) interrupted by the last shutdown as failed"),
        Err(e) => tracing::warn!("recovery after restart failed: {e}"),
    }
    if let Err(e) = engine.register_config_peers(&opts.config.peers).await {
        tracing::warn!("cannot register the configured peers: {e}");
    }
    engine
        .register_config_chains(&opts.config.chains)
        .await
        .map_err(StartError::Chains)?;
    let listener = TcpListener::bind(opts.bind)
        .await
        .map_err(|e| StartError::Bind(opts.bind, e))?;
    let local_addr = listener
        .local_addr()
        .map_err(|e| StartError::Bind(opts.bind, e))?;
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let ui_files = UiFiles::locate(opts.config.ui.dir.clone());
    let rate_limits = super::rate_limit::RateLimits::new(&opts.config.rate_limits);
    let state = Arc::new(AppState {
        engine,
        access: AccessPolicy::from_config(&opts.config, opts.open),
        ui_hosts: super::ui_auth::AllowedHosts::new(local_addr, opts.config.public_url.as_deref()),
        config: opts.config,
        local_addr,
        started_ms: crate::clock::now_ms() / 1000 * 1000,
        shutdown: shutdown_rx,
        ui_secret,
        ui_files,
        ui_settings: SettingsFile::in_dir(&opts.data_dir),
        rate_limits,
        card_key,
        card_cache: Default::default(),
    });
    let signal = stop;
    // Written before the announcement: once it is out, the CLI finds us.
    let instance = InstanceFile::write(&opts.data_dir, local_addr)
        .map_err(|e| StartError::Instance(opts.data_dir.join(super::instance::INSTANCE_FILE), e))?;
    // Scripts wait for exactly this first line; the second is for the browser.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening on http://{local_addr}");
    let _ = writeln!(
        out,
        "ui http://{local_addr}/#token={}",
        state.ui_secret.as_str()
    );
    let _ = out.flush();
    drop(out);
    tracing::info!(db = %db.display(), "serving {} agent(s)", state.engine.agents().len());
    state.engine.set_webhook_base(super::webhook_base(&state));
    ready(state.clone());
    // The outbox delivers calls owed to peers; the sweep re-reads watched
    // tasks now (a restart loses nothing) and every `sweep_secs`.
    let outbox_engine = state.engine.clone();
    tokio::spawn(outbox_engine_run(outbox_engine, state.shutdown.clone()));
    // Retention archives finished tasks now and every `interval_secs`.
    let retention_engine = state.engine.clone();
    tokio::spawn({
        let stop = state.shutdown.clone();
        async move { retention_engine.run_retention(stop).await }
    });
    let sweep_secs = state.config.webhooks.sweep_secs;
    let sweep_engine = state.engine.clone();
    let mut sweep_stop = state.shutdown.clone();
    tokio::spawn(async move {
        loop {
            let n = sweep_engine.sweep().await;
            if n > 0 {
                tracing::debug!("sweep re-read {n} watched task(s)");
            }
            if sweep_secs == 0 {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_secs(sweep_secs)) => {}
                _ = sweep_stop.changed() => return,
            }
        }
    });
    // Callers idle long enough to have a full bucket again are forgotten.
    let limits_state = state.clone();
    let mut limits_stop = state.shutdown.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(super::rate_limit::FORGET_EVERY) => {}
                _ = limits_stop.changed() => return,
            }
            limits_state.rate_limits.forget_idle();
        }
    });
    let app = router(state.clone());
    let header_timeout = std::time::Duration::from_secs(state.config.limits.header_timeout_secs);
    let limits = state.clone();
    let admit: super::conn::Admit = std::sync::Arc::new(move |peer, uri, headers, over_limit| {
        super::rate_limit::admit(&limits, peer.ip(), uri.path(), headers, over_limit)
    });
    let counts = state.clone();
    let gate: super::conn::Gate =
        std::sync::Arc::new(
            move |peer| match counts.rate_limits.open_connection(peer.ip()) {
                Ok(held) => {
                    super::conn::Entry::Served(held.map(|h| Box::new(h) as Box<dyn Send + Sync>))
                }
                Err(_) => super::conn::Entry::OverLimit,
            },
        );
    super::conn::serve(listener, app, gate, admit, header_timeout, async move {
        signal.await;
        tracing::info!("shutting down: finishing requests in flight");
        let _ = shutdown_tx.send(true);
    })
    .await;
    instance.remove();
    store.close().await;
    tracing::info!("database closed");
    Ok(())
}

async fn outbox_engine_run(engine: Engine, shutdown: watch::Receiver<bool>) {
    engine.run_outbox(shutdown).await;
}

/// Listens for SIGINT and SIGTERM from the call on, and resolves on the
/// first. Called before the address is announced: a signal sent right after
/// the announcement must shut down cleanly, not kill the process outright.
fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut int = signal(SignalKind::interrupt()).ok();
        let mut term = signal(SignalKind::terminate()).ok();
        async move {
            let int = async {
                match int.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let term = async {
                match term.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = int => {},
                _ = term => {},
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
