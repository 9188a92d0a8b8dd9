//! WAL checkpoints off the writer's path. SQLite's automatic checkpoint runs
//! inside the commit that crosses its threshold, so that one commit (and
//! every caller waiting on it) stalls for the whole copy: p99 latency under
//! load was the checkpoint. Here a thread with its own connection copies the
//! WAL back into the database (`PASSIVE`: it never blocks the writer or
//! readers) at most every [`INTERVAL`] while commits keep coming.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rusqlite::Connection;

/// Shortest time between two checkpoints.
const INTERVAL: Duration = Duration::from_millis(200);

/// WAL pages after which a commit checkpoints by itself anyway: a fallback
/// should this thread fall behind (SQLite's default is 1,000).
pub const FALLBACK_PAGES: i64 = 16_000;

/// Wakes the checkpoint thread; cheap, never blocks.
#[derive(Clone)]
pub struct Nudge(mpsc::SyncSender<()>);

impl Nudge {
    /// Says that a transaction committed.
    pub fn committed(&self) {
        let _ = self.0.try_send(());
    }
}

/// Starts the thread on `conn`; it ends when every [`Nudge`] is dropped.
pub fn start(conn: Connection) -> Nudge {
    let (tx, rx) = mpsc::sync_channel::<()>(1);
    let spawned = thread::Builder::new()
        .name("store-checkpoint".into())
        .spawn(move || run(&conn, &rx));
    if let Err(e) = spawned {
        tracing::warn!("cannot start the checkpoint thread (commits will checkpoint): {e}");
    }
    Nudge(tx)
}

fn run(conn: &Connection, rx: &mpsc::Receiver<()>) {
    let mut last = Instant::now();
    while rx.recv().is_ok() {
        // Let commits gather: one checkpoint per interval at most.
        if let Some(wait) = INTERVAL.checked_sub(last.elapsed()) {
            thread::sleep(wait);
        }
        // Drop the nudges that came meanwhile: this checkpoint covers them.
        while rx.try_recv().is_ok() {}
        last = Instant::now();
        let done = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        });
        match done {
            Ok((_, log, copied)) => tracing::trace!(log, copied, "checkpoint"),
            Err(e) => tracing::warn!("WAL checkpoint failed: {e}"),
        }
    }
}
