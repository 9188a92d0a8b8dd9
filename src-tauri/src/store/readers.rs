//! Read connections, kept between reads, each reading on in one snapshot
//! until a commit makes it stale.
//!
//! A read transaction takes and releases a WAL read lock: two `fcntl`
//! calls, about a sixth of a GetTask's time on one core. Every write goes
//! through the one writer, which counts its commits, so a snapshot begun at
//! a count is still the newest while the count stays: reads in between go
//! on in it, with no lock calls and no `BEGIN`/`COMMIT`. The writer ends the
//! kept snapshots just before each commit ([`Readers::end_snapshots`]): a
//! reader holding one would keep SQLite from starting the WAL over, and the
//! file would grow under a steady mix of reads and writes.
//!
//! A commit is counted before any caller hears of it, so a read that
//! follows a write it was told of sees it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use super::{Durability, Result};

/// A read connection, and the commit count its open read transaction
/// began at (`None`: no transaction open).
struct Reader {
    conn: Connection,
    snapshot: Option<u64>,
}

impl Reader {
    /// Ends the open read transaction, if any; false if the connection is
    /// left inside one (it is then dropped, which ends it).
    fn end(&mut self) -> bool {
        if self.snapshot.take().is_some() {
            let _ = self
                .conn
                .prepare_cached("COMMIT")
                .and_then(|mut end| end.execute([]));
        }
        self.conn.is_autocommit()
    }
}

/// The kept read connections of one store, and its commit count.
#[derive(Clone)]
pub(super) struct Readers {
    kept: Arc<Mutex<Vec<Reader>>>,
    commits: Arc<AtomicU64>,
    path: PathBuf,
    durability: Durability,
    most: usize,
}

impl Readers {
    /// Keeps at most `most` connections to `path` between reads.
    pub(super) fn new(
        path: &Path,
        durability: Durability,
        commits: Arc<AtomicU64>,
        most: usize,
    ) -> Readers {
        Readers {
            kept: Arc::new(Mutex::new(Vec::new())),
            commits,
            path: path.to_path_buf(),
            durability,
            most,
        }
    }

    /// Runs `f` in one read transaction (its statements see one snapshot:
    /// a task's row, messages and turns as one commit left them): the
    /// snapshot a kept connection holds when no commit came since it began,
    /// else a new one.
    pub(super) fn read<R>(&self, f: impl FnOnce(&Connection) -> Result<R>) -> Result<R> {
        let now = self.commits.load(Ordering::Acquire);
        let kept = self.kept.lock().ok().and_then(|mut k| k.pop());
        let mut reader = match kept {
            Some(mut r) => {
                // A stale snapshot ends here; a connection that cannot end
                // it is dropped (which ends it) for a new one.
                if r.snapshot == Some(now) || r.end() {
                    r
                } else {
                    self.open()?
                }
            }
            None => self.open()?,
        };
        if reader.snapshot.is_none() {
            reader
                .conn
                .prepare_cached("BEGIN")
                .and_then(|mut begin| begin.execute([]))?;
            reader.snapshot = Some(now);
        }
        let out = f(&reader.conn);
        // A snapshot a commit made stale while `f` ran is ended now rather
        // than kept (the writer ended the kept ones before that commit), and
        // so is one a failed read used: the next read begins anew.
        let current = reader.snapshot == Some(self.commits.load(Ordering::Acquire));
        if (out.is_err() || !current) && !reader.end() {
            return out;
        }
        if let Ok(mut kept) = self.kept.lock()
            && kept.len() < self.most
        {
            kept.push(reader);
        }
        out
    }

    /// Ends every kept connection's snapshot: called by the writer just
    /// before it commits (see the module's comment) and before it closes.
    pub(super) fn end_snapshots(&self) {
        if let Ok(mut kept) = self.kept.lock() {
            kept.retain_mut(Reader::end);
        }
    }

    /// Closes every kept connection.
    pub(super) fn clear(&self) {
        if let Ok(mut kept) = self.kept.lock() {
            kept.clear();
        }
    }

    /// How many connections are kept.
    #[cfg(test)]
    pub(super) fn kept(&self) -> usize {
        self.kept.lock().map(|k| k.len()).unwrap_or(0)
    }

    fn open(&self) -> Result<Reader> {
        let conn = super::open_connection(&self.path, self.durability)?;
        conn.execute_batch("PRAGMA query_only = ON;")?;
        Ok(Reader {
            conn,
            snapshot: None,
        })
    }
}
