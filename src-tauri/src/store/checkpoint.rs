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

/// Shortest time between two checkpoints. Short, so that each copy is
/// small: the thread shares a busy core with the writer and the request
/// threads, and a copy of 200 ms of commits held that core for several
/// milliseconds (p99 latency under load). It also bounds what the writer's
/// own fallback checkpoint (below) finds left to copy. At 10 ms rather
/// than 200 ms, p99 at 32 connections fell from 8 to 5 ms for durable
/// SendMessage and from 12 to 8.5 ms for webhook pushes, at the same
/// throughput; the worst case fell from about 40 ms to 12.
const INTERVAL: Duration = Duration::from_millis(10);

/// WAL pages after which a commit checkpoints by itself anyway (SQLite's
/// default is 1,000). The WAL only starts over from its beginning after a
/// checkpoint that copied every frame, which the writer's own does: under
/// sustained load this is what keeps the WAL file bounded.
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
