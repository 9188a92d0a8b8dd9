//! WAL checkpoints off the writer's path. SQLite's automatic checkpoint runs
//! inside the commit that crosses its threshold, so that one commit (and
//! every caller waiting on it) stalls for the whole copy: p99 latency under
//! load was the checkpoint. Here a thread with its own connection copies the
//! WAL back into the database (`PASSIVE`: it never blocks the writer or
//! readers) at most every [`INTERVAL`] while commits keep coming.
//!
//! With `synchronous = NORMAL` a checkpoint is also what puts commits on
//! the disk: SQLite syncs the WAL before it copies frames back. A
//! checkpoint held back by a read (one that another process keeps open: a
//! backup, a `sqlite3` shell) copies nothing and so syncs nothing; this
//! thread syncs the WAL itself then, so commits still reach the disk within
//! an interval.

use std::path::{Path, PathBuf};
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
///
/// Not shorter than 30 ms, though: each checkpoint copies again the pages
/// every commit touches (the tails of the b-trees) and syncs twice, so at
/// 10 ms the thread took 10–14 µs of the core per durable SendMessage and
/// at 30 ms 5.5–7 (and 20–28 against 10–14 per webhook push). In
/// alternated pairs, durable SendMessage ran faster in eight of ten
/// (median +11%), webhook pushes in ten of thirteen (median +5%), with
/// p99 within the pairs' noise either way. The worst case under
/// SendMessage load rose from 15–40 ms to 40–60 (the writer's fallback
/// checkpoint finds more to copy and sync).
const INTERVAL: Duration = Duration::from_millis(30);

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
/// `wal`, the WAL's path when commits leave syncing it to checkpoints
/// (`synchronous = NORMAL`), is synced after a checkpoint that copied
/// nothing though frames were left.
pub fn start(conn: Connection, wal: Option<PathBuf>) -> Nudge {
    let (tx, rx) = mpsc::sync_channel::<()>(1);
    let spawned = thread::Builder::new()
        .name("store-checkpoint".into())
        .spawn(move || run(&conn, &rx, wal.as_deref()));
    if let Err(e) = spawned {
        tracing::warn!("cannot start the checkpoint thread (commits will checkpoint): {e}");
    }
    Nudge(tx)
}

/// Syncs the WAL at `path` (`fdatasync` through a handle of our own
/// flushes the file, whoever wrote it).
pub fn sync_wal(path: &Path) -> std::io::Result<()> {
    std::fs::File::open(path).and_then(|f| f.sync_data())
}

fn run(conn: &Connection, rx: &mpsc::Receiver<()>, wal: Option<&Path>) {
    let mut last = Instant::now();
    // Frames copied back by the last checkpoint, as it counted them.
    let mut was_copied = -1;
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
            Ok((_, log, copied)) => {
                tracing::trace!(log, copied, "checkpoint");
                if let Some(wal) = wal
                    && copied < log
                    && copied == was_copied
                    && let Err(e) = sync_wal(wal)
                {
                    tracing::error!("cannot sync {}: {e}", wal.display());
                }
                was_copied = copied;
            }
            Err(e) => tracing::warn!("WAL checkpoint failed: {e}"),
        }
    }
}
