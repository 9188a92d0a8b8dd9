//! The one writer: a thread that owns the write connection and commits jobs
//! in batches (group commit). Jobs that arrive while a commit is in flight
//! share the next transaction, so 32 concurrent writers cost a handful of
//! fsyncs rather than 32.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::{Error, Result};

/// Largest number of jobs committed in one transaction.
const MAX_BATCH: usize = 512;

type Completion = Box<dyn FnOnce(bool) + Send>;
/// What the writer does around each batch besides running its jobs.
pub struct Hooks {
    /// Counts the commits.
    pub commits: Arc<AtomicU64>,
    /// Runs in the batch's transaction after its jobs, before the commit.
    pub before_commit: fn(&Connection) -> rusqlite::Result<()>,
    /// Told of each commit.
    pub after_commit: super::checkpoint::Nudge,
    /// Notified after a commit that queued outbox items (see
    /// [`super::peers::queued_count`]).
    pub outbox_queued: Arc<tokio::sync::Notify>,
}
/// A job runs against the open transaction, or gets `None` when no
/// transaction could be begun (it then reports failure without touching the
/// database).
type Job = Box<dyn FnOnce(Option<&Connection>) -> Completion + Send>;

enum Command {
    Job(Job),
    Shutdown(oneshot::Sender<()>),
}

pub struct Writer {
    tx: mpsc::Sender<Command>,
}

impl Writer {
    /// Starts the writer thread.
    pub fn start(conn: Connection, hooks: Hooks) -> Writer {
        let (tx, rx) = mpsc::channel::<Command>();
        let spawned = thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || {
                let batch = Batch {
                    conn: &conn,
                    hooks: &hooks,
                    queued_seen: std::cell::Cell::new(super::peers::queued_count()),
                };
                let shutdown = run(&batch, &rx);
                close(conn, shutdown);
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start the database writer thread: {e}");
        }
        Writer { tx }
    }

    /// Queues `f`; after its transaction commits, `after_commit` runs on the
    /// writer thread (in commit order) and then the caller is woken.
    pub async fn submit<R, F, H>(&self, f: F, after_commit: H) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
        H: FnOnce(&R) + Send + 'static,
    {
        let (done_tx, done_rx) = oneshot::channel::<Result<R>>();
        let job: Job = Box::new(move |conn: Option<&Connection>| -> Completion {
            let result = match conn {
                Some(conn) => in_savepoint(conn, f),
                None => Err(Error::Corrupt("cannot begin a write transaction".into())),
            };
            Box::new(move |committed: bool| {
                let out = match result {
                    Ok(_) if !committed => {
                        Err(Error::Corrupt("the transaction did not commit".into()))
                    }
                    Ok(r) => {
                        after_commit(&r);
                        Ok(r)
                    }
                    Err(e) => Err(e),
                };
                let _ = done_tx.send(out);
            })
        });
        self.tx
            .send(Command::Job(job))
            .map_err(|_| Error::WriterGone)?;
        done_rx.await.map_err(|_| Error::WriterGone)?
    }

    pub async fn shutdown(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Command::Shutdown(tx)).is_ok() {
            let _ = rx.await;
        }
    }
}

fn in_savepoint<R>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<R>) -> Result<R> {
    run_cached(conn, "SAVEPOINT job")?;
    match f(conn) {
        Ok(r) => {
            run_cached(conn, "RELEASE job")?;
            Ok(r)
        }
        Err(e) => {
            run_cached(conn, "ROLLBACK TO job")?;
            run_cached(conn, "RELEASE job")?;
            Err(e)
        }
    }
}

/// Runs a statement kept prepared: these run for every job and batch, and
/// parsing them each time showed in profiles.
fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// What every batch needs: the connection and the hooks.
struct Batch<'a> {
    conn: &'a Connection,
    hooks: &'a Hooks,
    /// The outbox count at the last commit.
    queued_seen: std::cell::Cell<u64>,
}

/// Commits batches until a shutdown request (returned, to be answered once
/// the database is closed) or until every sender is gone.
fn run(batch: &Batch<'_>, rx: &mpsc::Receiver<Command>) -> Option<oneshot::Sender<()>> {
    let mut shutdown: Option<oneshot::Sender<()>> = None;
    while shutdown.is_none() {
        let Ok(first) = rx.recv() else { break };
        match first {
            Command::Job(j) => commit_batch(batch, j, rx, &mut shutdown),
            Command::Shutdown(s) => shutdown = Some(s),
        }
    }
    // Anything still queued behind the shutdown request is committed too.
    let mut rest = rx.try_iter().filter_map(|c| match c {
        Command::Job(j) => Some(j),
        Command::Shutdown(_) => None,
    });
    while let Some(first) = rest.next() {
        let more: Vec<Job> = rest.by_ref().take(MAX_BATCH - 1).collect();
        commit_jobs(batch, std::iter::once(first).chain(more));
    }
    shutdown
}

/// Checkpoints and closes the connection, then answers the shutdown request.
fn close(conn: Connection, shutdown: Option<oneshot::Sender<()>>) {
    if let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);") {
        tracing::warn!("WAL checkpoint at close failed: {e}");
    }
    if let Err((_, e)) = conn.close() {
        tracing::warn!("closing the database failed: {e}");
    }
    if let Some(s) = shutdown {
        let _ = s.send(());
    }
}

/// One transaction: `first`, then every job that is queued by the time the
/// one before it has run (up to `MAX_BATCH`): the jobs that arrive while a
/// batch runs join it rather than wait for a commit of their own. A shutdown
/// request ends the batch; it is answered after this commit.
fn commit_batch(
    batch: &Batch<'_>,
    first: Job,
    rx: &mpsc::Receiver<Command>,
    shutdown: &mut Option<oneshot::Sender<()>>,
) {
    let mut n = 0;
    let jobs = std::iter::once(first).chain(std::iter::from_fn(|| {
        n += 1;
        if n >= MAX_BATCH || shutdown.is_some() {
            return None;
        }
        match rx.try_recv() {
            Ok(Command::Job(j)) => Some(j),
            Ok(Command::Shutdown(s)) => {
                *shutdown = Some(s);
                None
            }
            Err(_) => None,
        }
    }));
    commit_jobs(batch, jobs);
}

fn commit_jobs(batch: &Batch<'_>, jobs: impl Iterator<Item = Job>) {
    let conn = batch.conn;
    if let Err(e) = run_cached(conn, "BEGIN IMMEDIATE") {
        tracing::error!("cannot begin a write transaction: {e}");
        for job in jobs {
            job(None)(false);
        }
        return;
    }
    let completions: Vec<Completion> = jobs.map(|job| job(Some(conn))).collect();
    let finished = (batch.hooks.before_commit)(conn).and_then(|()| run_cached(conn, "COMMIT"));
    let committed = match finished {
        Ok(()) => {
            // Counted before any caller hears of the commit.
            batch.hooks.commits.fetch_add(1, Ordering::Release);
            batch.hooks.after_commit.committed();
            // The count is global (tests open several stores); each writer
            // compares with its own last look, so none misses its items,
            // and another store's items cost at most one look.
            let queued = super::peers::queued_count();
            if queued != batch.queued_seen.replace(queued) {
                batch.hooks.outbox_queued.notify_one();
            }
            true
        }
        Err(e) => {
            tracing::error!("commit failed: {e}");
            let _ = conn.execute_batch("ROLLBACK");
            false
        }
    };
    for c in completions {
        c(committed);
    }
}
