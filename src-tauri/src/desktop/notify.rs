//! OS notifications (notify-rust, the desktop notification service on
//! D-Bus): one for every newly parked task — title the agent, body the first
//! line of the request — shown at once, and grouped into one when several
//! park in quick succession. What each says, and which are held back (turned
//! off, muted for the agent, the task the window shows, only while hidden),
//! is [`Notifications::notice`]; none while paused from the tray. Silent
//! unless the person asked for a sound. Clicking one opens its task (the
//! queue, for several) where the notification server supports actions. No
//! notification service means a logged warning, never a failure.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tauri::{AppHandle, Manager};
use tokio::sync::broadcast::error::RecvError;

use super::Shell;
use crate::server::ui_settings::{Notice, Notifications, Opens, Parked, SettingsFile, Window};

/// Parkings within this window of a notification are shown together when
/// it ends; one after a quiet spell is shown at once.
const GROUP_WINDOW: Duration = Duration::from_millis(400);

/// The notification preferences saved on the settings screen (defaults
/// when there are none or the file cannot be read).
fn prefs(shell: &Shell) -> Notifications {
    match SettingsFile::in_dir(&shell.data_dir).read() {
        Ok(s) => s.notifications,
        Err(e) => {
            tracing::warn!("notification settings: {e}");
            Notifications::default()
        }
    }
}

/// Starts the notifier for the life of the app. A task that parks after a
/// quiet spell is shown at once; tasks that park within [`GROUP_WINDOW`] of
/// a notification wait for the window to end and are shown as one.
pub(super) fn start(app: AppHandle, shell: Arc<Shell>) {
    let mut rx = shell.state.engine.bus().subscribe_all();
    let runtime = shell.runtime.clone();
    runtime.spawn(async move {
        // Parked tasks we told the person about, with the turn (the
        // question) we told them of: a task that asks again, a new turn,
        // is news again.
        let mut told: HashMap<String, String> = HashMap::new();
        // Tasks that parked, or may have asked again, not looked at yet,
        // oldest first.
        let mut pending: Vec<String> = Vec::new();
        // Parkings before this instant wait for it.
        let mut quiet_from = Instant::now();
        loop {
            let hold = tokio::time::sleep_until(quiet_from.into());
            tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(ev) => {
                        super::behind_the_answer(&rx).await;
                        if ev.state.is_interrupted() {
                            if !pending.contains(&ev.task_id) {
                                pending.push(ev.task_id.clone());
                            }
                        } else {
                            told.remove(&ev.task_id);
                            // Answered before it was shown: nothing to say.
                            pending.retain(|t| *t != ev.task_id);
                        }
                    }
                    // Fell behind: go on from what comes next.
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return,
                },
                _ = hold, if !pending.is_empty() => {}
            }
            if pending.is_empty() || Instant::now() < quiet_from {
                continue;
            }
            let fresh = std::mem::take(&mut pending);
            let mut parked = Vec::new();
            for task_id in fresh {
                if let Ok(d) = shell.state.engine.task_detail(&task_id).await {
                    let Some(turn) = d.open_turn else { continue };
                    // Another event of a question already shown.
                    if told.get(&task_id) == Some(&turn.id) {
                        continue;
                    }
                    told.insert(task_id.clone(), turn.id.clone());
                    let agent = agent_name(&shell, &d.agent_id).await;
                    parked.push(Parked {
                        task_id,
                        agent_id: d.agent_id,
                        agent,
                        first_line: turn.preview,
                    });
                }
            }
            if !parked.is_empty() {
                quiet_from = Instant::now() + GROUP_WINDOW;
                deliver(&app, &shell, parked);
            }
        }
    });
}

/// Tells the person why the app cannot start, where they will see it: an
/// app opened from a menu has no terminal for the error.
pub(super) fn cannot_start(e: &anyhow::Error) {
    let shown = notify_rust::Notification::new()
        .appname("Countersign")
        .summary("Countersign cannot start")
        .body(&crate::error_text(e))
        .icon("countersign")
        .show();
    if let Err(n) = shown {
        tracing::warn!("cannot show why the app cannot start: {n}");
    }
}

/// How long writes must work again before the person is told so: a nearly
/// full disk that lets small writes through between failures would
/// otherwise raise a notification for each.
const STORAGE_CALM: Duration = Duration::from_secs(5);

/// Forwards each change of whether writes fail as a whole (a full disk) to
/// the window, and tells the person: once when saving stops, and once when
/// it has worked again for [`STORAGE_CALM`]. Shown whatever the
/// notification settings say: agents' work is being refused meanwhile.
pub(super) async fn storage(
    app: AppHandle,
    mut failing: tokio::sync::watch::Receiver<Option<crate::store::Failing>>,
) {
    use tauri::Emitter;
    // Watched from when the window is set up, which may be after writes
    // began to fail: that counts as a change too.
    if failing.borrow().is_some() {
        failing.mark_changed();
    }
    let mut told = false;
    let mut calm_since: Option<tokio::time::Instant> = None;
    loop {
        let calm = calm_since.map(|t| t + STORAGE_CALM);
        tokio::select! {
            changed = failing.changed() => {
                if changed.is_err() {
                    return;
                }
                let now = failing.borrow_and_update().clone();
                let _ = app.emit("api-event", crate::server::ui_api::storage_event(&now));
                match now {
                    Some(f) => {
                        calm_since = None;
                        if !told {
                            told = true;
                            show_storage(
                                "Countersign cannot save",
                                format!("New tasks and decisions are refused until it can; nothing saved is lost. {}", f.why),
                            );
                        }
                    }
                    None if told => calm_since = Some(tokio::time::Instant::now()),
                    None => {}
                }
            }
            _ = tokio::time::sleep_until(calm.unwrap_or_else(tokio::time::Instant::now)), if calm.is_some() => {
                told = false;
                calm_since = None;
                show_storage("Countersign saves again", "New tasks and decisions are taken again.".to_owned());
            }
        }
    }
}

/// Shows a storage notification (blocking D-Bus calls: its own thread).
fn show_storage(summary: &'static str, body: String) {
    std::thread::spawn(move || {
        let shown = notify_rust::Notification::new()
            .appname("Countersign")
            .summary(summary)
            .body(&body)
            .icon("countersign")
            .show();
        if let Err(e) = shown {
            tracing::warn!("cannot show a storage notification: {e}");
        }
    });
}

/// The agent's (or peer's) name for people.
async fn agent_name(shell: &Shell, id: &str) -> String {
    if let Some(a) = shell.state.engine.agent(id) {
        return a.config.name.clone().unwrap_or_else(|| id.to_owned());
    }
    match shell.state.engine.peers().await {
        Ok(peers) => peers
            .into_iter()
            .find(|p| p.id == id)
            .and_then(|p| p.name)
            .unwrap_or_else(|| id.to_owned()),
        Err(_) => id.to_owned(),
    }
}

/// Applies the person's preferences and shows what is left.
fn deliver(app: &AppHandle, shell: &Shell, parked: Vec<Parked>) {
    if shell.paused.load(Ordering::Relaxed) {
        return;
    }
    let main = app.get_webview_window("main");
    let focused = main
        .as_ref()
        .is_some_and(|w| w.is_visible().unwrap_or(false) && w.is_focused().unwrap_or(false));
    let viewing = shell.viewing.lock().ok().and_then(|v| v.clone());
    let window = Window {
        focused,
        viewing: viewing.as_deref(),
    };
    if let Some(notice) = prefs(shell).notice(&parked, window) {
        let app = app.clone();
        std::thread::spawn(move || show(&app, notice));
    }
}

/// Notifications waiting for a click at most: each holds a thread and a
/// D-Bus connection until the notification service closes it, and a service
/// that keeps notifications until they are dismissed would let them pile up.
/// Past this many, notifications are shown without the "Open" action.
const MAX_WAITING: usize = 8;

/// Notifications now waiting for a click.
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// Shows one notification (blocking D-Bus calls: its own thread).
fn show(app: &AppHandle, notice: Notice) {
    let Notice {
        summary,
        body,
        opens,
        sound,
    } = notice;
    let mut n = notify_rust::Notification::new();
    n.appname("Countersign")
        .summary(&summary)
        .body(&body)
        .icon("countersign");
    if sound {
        // The freedesktop sound theme's name for a new message.
        n.sound_name("message-new-instant");
    } else {
        n.hint(notify_rust::Hint::SuppressSound(true));
    }
    let open = Some(opens).filter(|_| {
        let waiting = WAITING.fetch_add(1, Ordering::AcqRel);
        if waiting >= MAX_WAITING {
            WAITING.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    });
    if open.is_some() {
        n.action("default", "Open");
    }
    match n.show() {
        Ok(handle) => {
            tracing::debug!(%summary, "notified");
            if let Some(opens) = open {
                handle.wait_for_action(|action| {
                    if action != "default" {
                        return;
                    }
                    // Windows are shown and focused from the main thread.
                    let (on_main, opens) = (app.clone(), opens.clone());
                    let ran = app.run_on_main_thread(move || match opens {
                        Opens::Task(task) => super::open_task_in_window(&on_main, &task),
                        Opens::Queue => super::open_in_window(&on_main, "#/queue"),
                    });
                    if let Err(e) = ran {
                        tracing::warn!("cannot open the window: {e}");
                    }
                });
                WAITING.fetch_sub(1, Ordering::AcqRel);
            }
        }
        Err(e) => {
            if open.is_some() {
                WAITING.fetch_sub(1, Ordering::AcqRel);
            }
            tracing::warn!("cannot show a notification (is a notification service running?): {e}")
        }
    }
}
