//! The desktop app: a Tauri window over the same server `countersign serve`
//! runs, started in-process (the A2A server and the webhook receiver keep
//! listening while the window is closed), a tray icon with the number of
//! parked tasks, OS notifications, one instance per user, and
//! `countersign://task/ID` links. The only module that names tauri.
//!
//! The window's UI talks to the server through one command and one event
//! (the contract at the top of `ui/src/lib/api.ts`): `api` answers exactly
//! what the HTTP route of the same method and path answers (it runs the
//! request through the server's own router), and `api-event` carries each
//! event of `GET /api/events`.

mod notify;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, anyhow};
use axum::body::Body;
use base64::Engine as _;
use serde::Serialize;
use serde_json::Value;
use tauri::menu::{CheckMenuItem, Menu, MenuItem, PredefinedMenuItem};
use tauri::tray::{TrayIcon, TrayIconBuilder};
use tauri::{AppHandle, Emitter, Manager, RunEvent, WindowEvent};
use tower::ServiceExt;

use crate::link::task_of_link;
use crate::server::run::{ServeOptions, serve_until};
use crate::server::ui_api::EventNotice;
use crate::server::{Shared, router};

/// What the shell keeps: the running server and the person's view.
pub(crate) struct Shell {
    state: Shared,
    runtime: tokio::runtime::Handle,
    data_dir: std::path::PathBuf,
    /// The task the window shows, if any (no notification for it).
    viewing: Mutex<Option<String>>,
    /// Paused from the tray.
    paused: std::sync::atomic::AtomicBool,
    tray: Mutex<Option<TrayIcon>>,
}

/// The in-process server: how to stop it and wait for it to close.
struct Server {
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

/// Starts the server on its own thread and runtime; returns once it listens.
fn start_server(opts: ServeOptions) -> anyhow::Result<(Arc<Shell>, Server)> {
    let data_dir = opts.data_dir.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let failed = ready_tx.clone();
    let thread = std::thread::Builder::new()
        .name("server".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    let _ = failed.send(Err(anyhow!("cannot start the async runtime: {e}")));
                    return;
                }
            };
            let handle = runtime.handle().clone();
            let stop = async move {
                let _ = stop_rx.await;
            };
            let result = runtime.block_on(serve_until(
                opts,
                move |state| {
                    let _ = ready_tx.send(Ok((state, handle)));
                },
                stop,
            ));
            if let Err(e) = result {
                let _ = failed.send(Err(anyhow!(e)));
            }
        })
        .context("cannot start the server thread")?;
    let (state, runtime) = ready_rx
        .recv_timeout(Duration::from_secs(60))
        .context("the server did not start")??;
    tracing::info!(data_dir = %data_dir.display(), "desktop app started");
    let shell = Arc::new(Shell {
        state,
        runtime,
        data_dir,
        viewing: Mutex::new(None),
        paused: std::sync::atomic::AtomicBool::new(false),
        tray: Mutex::new(None),
    });
    Ok((
        shell,
        Server {
            stop: stop_tx,
            thread,
        },
    ))
}

/// Runs the desktop app until the person quits it. A second launch hands
/// its link to the first and exits before starting anything.
pub fn run(opts: ServeOptions, open_task: Option<String>) -> anyhow::Result<()> {
    let server: Arc<Mutex<Option<Server>>> = Arc::default();
    let started = server.clone();
    let app = tauri::Builder::default()
        .plugin(tauri_plugin_single_instance::init(|app, argv, _cwd| {
            tracing::info!("a second launch: showing the window");
            show_window(app);
            if let Some(task) = argv.iter().find_map(|a| task_of_link(a)) {
                open_task_in_window(app, &task);
            }
        }))
        .plugin(tauri_plugin_deep_link::init())
        .invoke_handler(tauri::generate_handler![api, viewing])
        .setup(move |app| {
            // Only the first instance gets here: the server starts now.
            let (shell, running) = start_server(opts).inspect_err(notify::cannot_start)?;
            if let Ok(mut s) = started.lock() {
                *s = Some(running);
            }
            app.manage(shell);
            setup(app, open_task)?;
            Ok(())
        })
        .on_window_event(|window, event| {
            if let WindowEvent::CloseRequested { api, .. } = event {
                // The server keeps listening; the tray brings the window back.
                api.prevent_close();
                let _ = window.hide();
            }
        })
        .build(tauri::generate_context!())
        .context("cannot start the window")?;
    app.run(move |_app, event| match event {
        // Closing the last window keeps the app in the tray.
        RunEvent::ExitRequested { api, code, .. } if code.is_none() => api.prevent_exit(),
        // Quit: stop the server cleanly (requests finish, the database
        // closes) before the process ends.
        RunEvent::Exit => {
            if let Some(s) = server.lock().ok().and_then(|mut s| s.take()) {
                let _ = s.stop.send(());
                let _ = s.thread.join();
            }
        }
        _ => {}
    });
    Ok(())
}

/// Creates the main window from the config, with agents' links (the UI
/// opens them as new windows) going to the system browser and any other
/// navigation away from the app refused.
fn create_window(app: &tauri::App) -> anyhow::Result<()> {
    let config = app
        .config()
        .app
        .windows
        .iter()
        .find(|w| w.label == "main")
        .cloned()
        .ok_or_else(|| anyhow!("tauri.conf.json has no `main` window"))?;
    tauri::WebviewWindowBuilder::from_config(app.handle(), &config)?
        .on_new_window(|url, _features| {
            if matches!(url.scheme(), "http" | "https" | "mailto") {
                open_in_browser(url.as_str());
            } else {
                tracing::warn!(%url, "refused to open a link");
            }
            tauri::webview::NewWindowResponse::Deny
        })
        .on_navigation(|url| {
            let own = matches!(url.scheme(), "tauri") || url.host_str() == Some("tauri.localhost");
            if !own && matches!(url.scheme(), "http" | "https" | "mailto") {
                open_in_browser(url.as_str());
            }
            own
        })
        .build()?;
    Ok(())
}

/// Opens a link in the person's browser (their default handler).
fn open_in_browser(url: &str) {
    #[cfg(target_os = "linux")]
    let spawned = std::process::Command::new("xdg-open").arg(url).spawn();
    #[cfg(target_os = "macos")]
    let spawned = std::process::Command::new("open").arg(url).spawn();
    #[cfg(windows)]
    let spawned = std::process::Command::new("rundll32")
        .args(["url.dll,FileProtocolHandler", url])
        .spawn();
    #[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
    let spawned: std::io::Result<std::process::Child> = Err(std::io::Error::other(
        "no browser launcher on this platform",
    ));
    if let Err(e) = spawned {
        tracing::warn!("cannot open {url} in the browser: {e}");
    }
}

fn setup(app: &mut tauri::App, open_task: Option<String>) -> anyhow::Result<()> {
    create_window(app)?;
    let handle = app.handle().clone();
    let shell = app.state::<Arc<Shell>>().inner().clone();
    build_tray(&handle, &shell)?;
    #[cfg(any(target_os = "linux", windows))]
    {
        use tauri_plugin_deep_link::DeepLinkExt;
        if let Err(e) = app.deep_link().register_all() {
            tracing::warn!("cannot register countersign:// links: {e}");
        }
    }
    {
        use tauri_plugin_deep_link::DeepLinkExt;
        let h = handle.clone();
        app.deep_link().on_open_url(move |event| {
            for url in event.urls() {
                if let Some(task) = task_of_link(url.as_str()) {
                    open_task_in_window(&h, &task);
                }
            }
        });
    }
    if let Some(task) = open_task {
        open_task_in_window(&handle, &task);
    }
    // Events: to the window, to the tray count, to the notifier.
    let mut rx = shell.state.engine.bus().subscribe_all();
    let (h, s) = (handle.clone(), shell.clone());
    shell.runtime.spawn(async move {
        refresh_tray(&s).await;
        loop {
            match rx.recv().await {
                Ok(ev) => {
                    behind_the_answer(&rx).await;
                    let _ = h.emit("api-event", EventNotice::from(ev.as_ref()));
                    if ev.state.is_interrupted() || ev.state.is_terminal() {
                        refresh_tray(&s).await;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    refresh_tray(&s).await;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    });
    // Peers held for a changed card, or released: to the window too.
    let mut peer_rx = shell.state.engine.peer_notices();
    let h = handle.clone();
    shell.runtime.spawn(async move {
        loop {
            match peer_rx.recv().await {
                Ok(n) => {
                    let _ = h.emit("api-event", crate::server::ui_api::peer_event(&n));
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    });
    // Writes failing as a whole (a full disk), and their end: to the
    // window, and as OS notifications.
    let storage = shell.state.engine.store().failing();
    shell
        .runtime
        .spawn(notify::storage(handle.clone(), storage));
    notify::start(handle, shell);
    Ok(())
}

/// Lets the request whose commit raised an event answer first. The writer
/// publishes a commit's events just before it wakes the request that made
/// it, so on a busy core the window's event, the tray's count and the
/// notifier's reads ran ahead of the answer: without this yield the
/// webhook's 200 took 3.2–3.4 ms p50 in the app, with it 1.6–1.8, as in
/// `serve` (`tests/bench/desktop.sh`), and the notification came as soon.
/// Only the first event of a burst yields: a receiver with more events
/// waiting is behind already, and drains them at full speed rather than
/// fall further behind (and lose some) under load.
pub(crate) async fn behind_the_answer<T>(rx: &tokio::sync::broadcast::Receiver<T>) {
    if rx.is_empty() {
        tokio::task::yield_now().await;
    }
}

fn show_window(app: &AppHandle) {
    if let Some(w) = app.get_webview_window("main") {
        let _ = w.unminimize();
        let _ = w.show();
        let _ = w.set_focus();
    }
}

/// Shows a task in the window (the UI routes by `#/task/ID`).
pub(crate) fn open_task_in_window(app: &AppHandle, task: &str) {
    open_in_window(app, &format!("#/task/{task}"));
}

/// Shows the window on a screen of the UI (`#/queue`, `#/task/ID`, …).
pub(crate) fn open_in_window(app: &AppHandle, hash: &str) {
    show_window(app);
    if let Some(w) = app.get_webview_window("main") {
        // Task ids were checked to be plain tokens; JSON-quote it anyway.
        let script = format!(
            "window.location.hash = {};",
            serde_json::to_string(hash).unwrap_or_default()
        );
        if let Err(e) = w.eval(&script) {
            tracing::warn!("cannot open {hash} in the window: {e}");
        }
    }
}

fn build_tray(app: &AppHandle, shell: &Arc<Shell>) -> anyhow::Result<()> {
    let open = MenuItem::with_id(app, "open", "Open Countersign", true, None::<&str>)?;
    let pause = CheckMenuItem::with_id(
        app,
        "pause",
        "Pause notifications",
        true,
        false,
        None::<&str>,
    )?;
    let quit = MenuItem::with_id(app, "quit", "Quit", true, None::<&str>)?;
    let sep = PredefinedMenuItem::separator(app)?;
    let menu = Menu::with_items(app, &[&open, &pause, &sep, &quit])?;
    let mut builder = TrayIconBuilder::with_id("main")
        .tooltip("Countersign")
        .menu(&menu)
        .show_menu_on_left_click(true);
    if let Some(icon) = app.default_window_icon() {
        builder = builder.icon(icon.clone());
    }
    let s = shell.clone();
    let tray = builder
        .on_menu_event(move |app, event| match event.id().as_ref() {
            "open" => show_window(app),
            "pause" => {
                let now = !s.paused.load(std::sync::atomic::Ordering::Relaxed);
                s.paused.store(now, std::sync::atomic::Ordering::Relaxed);
                tracing::info!(paused = now, "notifications");
            }
            "quit" => app.exit(0),
            _ => {}
        })
        .build(app)?;
    if let Ok(mut t) = shell.tray.lock() {
        *t = Some(tray);
    }
    Ok(())
}

/// Puts the number of parked tasks on the tray (tooltip and label).
async fn refresh_tray(shell: &Shell) {
    let query = crate::engine::queue::QueueQuery {
        limit: Some(1),
        ..Default::default()
    };
    let total = match shell.state.engine.queue(query).await {
        Ok(page) => page.total,
        Err(e) => {
            tracing::warn!("cannot count the queue: {e}");
            return;
        }
    };
    let tooltip = match total {
        0 => "Countersign — nothing waiting".to_owned(),
        1 => "Countersign — 1 task waiting".to_owned(),
        n => format!("Countersign — {n} tasks waiting"),
    };
    let label = (total > 0).then(|| total.to_string());
    let tray = shell.tray.lock().ok().and_then(|t| t.clone());
    if let Some(tray) = tray {
        let _ = tray.set_tooltip(Some(&tooltip));
        let _ = tray.set_title(label.as_deref());
    }
    // A record of the count for tests and scripts that want to follow it.
    if let Ok(path) = std::env::var("COUNTERSIGN_TRAY_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{total}");
        }
    }
}

/// What `api` answers: the route's status, content type and body (JSON, or
/// the raw bytes in base64).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ApiAnswer {
    status: u16,
    content_type: String,
    body: Value,
}

/// `invoke('api', {method, path, body})`: one UI API request, run through the
/// server's own router (same checks, same answers as over HTTP).
#[tauri::command]
async fn api(
    shell: tauri::State<'_, Arc<Shell>>,
    method: String,
    path: String,
    body: Option<Value>,
) -> Result<ApiAnswer, String> {
    let allowed = path.starts_with("/api/")
        || (path.starts_with("/a2a/") && path.ends_with("/.well-known/agent-card.json"));
    if !allowed {
        return Err(format!("`{path}` is not a UI API path"));
    }
    let method: axum::http::Method = method
        .parse()
        .map_err(|_| format!("`{method}` is not an HTTP method"))?;
    let state = shell.state.clone();
    let host = state.local_addr.to_string();
    let mut req = axum::http::Request::builder()
        .method(method)
        .uri(&path)
        .header("host", &host)
        .header(
            "authorization",
            format!("Bearer {}", state.ui_secret.as_str()),
        )
        .header("x-countersign-actor", "desktop");
    let body = match body {
        None | Some(Value::Null) => Body::empty(),
        Some(v) => {
            req = req.header("content-type", "application/json");
            Body::from(v.to_string())
        }
    };
    let req = req.body(body).map_err(|e| format!("bad request: {e}"))?;
    let app = router(state);
    let resp = shell
        .runtime
        .spawn(async move { app.oneshot(req).await })
        .await
        .map_err(|e| format!("the request failed: {e}"))?
        .map_err(|e| format!("the request failed: {e}"))?;
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .map_err(|e| format!("cannot read the answer: {e}"))?;
    let body = if bytes.is_empty() {
        Value::Null
    } else if content_type.contains("json") && !content_type.contains("jsonl") {
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    } else {
        serde_json::json!({ "base64": base64::engine::general_purpose::STANDARD.encode(&bytes) })
    };
    Ok(ApiAnswer {
        status,
        content_type,
        body,
    })
}

/// `invoke('viewing', {taskId})`: the task the window shows (or none), so it
/// raises no notification.
#[tauri::command]
fn viewing(shell: tauri::State<'_, Arc<Shell>>, task_id: Option<String>) {
    if let Ok(mut v) = shell.viewing.lock() {
        *v = task_id;
    }
}
