//! The one writer: a thread that owns the write connection and commits jobs
//! in batches (group commit). Jobs that arrive while a commit is in flight
//! share the next transaction, so 32 concurrent writers cost a handful of
//! commits (and, with `durability = "full"`, of fsyncs) rather than 32.
//!
//! A job runs under a savepoint, so that its failure undoes only its own
//! changes, unless it is one that only the database itself can fail (see
//! [`Isolation::Batch`]): a savepoint copies every page the job changes that
//! an earlier job of the batch changed too, and for a new task that was a
//! sixth of the server's time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::syncer::{Committed, Syncer};
use super::{Error, Result};

/// Largest number of jobs committed in one transaction.
const MAX_BATCH: usize = 512;

/// After a batch was lost to a job without a savepoint, every job runs
/// under one for this long.
const CAUTION: Duration = Duration::from_secs(60);

/// How long the writer waits for a job before it does the work a batch
/// left ([`Hooks::when_idle`]) and cuts the WAL file back ([`WAL_KEPT`]).
pub(super) const IDLE: Duration = Duration::from_millis(200);

/// The largest WAL file (bytes) the writer leaves once it is idle. SQLite
/// writes the WAL from its start again after a checkpoint that copied every
/// frame, but never makes the file smaller: under a burst that outruns the
/// checkpoints it grows to the fallback checkpoint's size (about 32 MB of
/// 2 KiB pages) and stays so until Countersign stops. A larger file is
/// emptied once the writer has been idle for [`IDLE`]. Not while it works:
/// cut back at every start-over (`journal_size_limit`), the file had to
/// grow again under the same load, and durable SendMessage ran 3–5%
/// slower with a higher p99.
pub(super) const WAL_KEPT: u64 = 4 << 20;

/// How a job's failure is contained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Under its own savepoint: a failure undoes this job's changes only.
    Savepoint,
    /// Without one, for a job whose only failures are the database's own
    /// (I/O, a full disk), which would fail the commit anyway. If it fails
    /// all the same, the whole batch is rolled back and every job in it
    /// fails; for [`CAUTION`] after that, all jobs run under savepoints, so
    /// a job that keeps failing (say, on a damaged row) loses no more than
    /// one batch a minute.
    Batch,
}

/// Tells a job how its batch ended: committed, or not (and why). It runs
/// the job's after-commit step, and returns what wakes its caller, to be
/// called once for the whole batch (see [`super::syncer::Tell`]).
pub(super) type Completion = Box<dyn FnOnce(std::result::Result<(), &str>) -> Wake + Send>;
/// Hands a job's result to its caller, waking it.
pub(super) type Wake = Box<dyn FnOnce() + Send>;
/// What the writer does around each batch besides running its jobs.
pub struct Hooks {
    /// Counts the commits.
    pub commits: Arc<AtomicU64>,
    /// Runs in the batch's transaction after its jobs, before the commit;
    /// returns whether it left work for [`Hooks::when_idle`].
    pub before_commit: fn(&Connection) -> rusqlite::Result<bool>,
    /// Runs in a transaction of its own once no job came for [`IDLE`]
    /// after a commit that left work (and once after the writer starts);
    /// returns whether it wrote anything (if not, nothing is committed).
    pub when_idle: fn(&Connection) -> rusqlite::Result<bool>,
    /// Told of each commit.
    pub after_commit: super::checkpoint::Nudge,
    /// Who hears of each commit.
    pub tell: super::syncer::Tell,
    /// Whether writes are failing as a whole (see [`super::Failing`]).
    pub failing: tokio::sync::watch::Sender<Option<super::Failing>>,
    /// The kept read connections: their snapshots end just before each
    /// commit, so that none keeps the WAL from starting over.
    pub readers: super::readers::Readers,
    /// The WAL file, when commits do not sync it themselves
    /// (`synchronous = NORMAL`): a batch with a job that asked for the
    /// disk ([`Writer::submit`]'s `to_disk`) is answered once the
    /// [`Syncer`] has synced it after its commit.
    pub wal: Option<std::path::PathBuf>,
    /// What is known to be on the disk.
    pub synced: Arc<Synced>,
}

/// What the writer knows to be on the disk.
#[derive(Debug, Default)]
pub struct Synced {
    /// Batches synced for a job that asked for the disk.
    pub batches: AtomicU64,
    /// The number of the newest commit known to be on the disk, with every
    /// one before it: synced for such a job, or by SQLite at the commit
    /// (`synchronous = FULL`; then stored before the commit is counted).
    pub through: AtomicU64,
}
/// A job runs against the open transaction, or gets `None` when no
/// transaction could be begun (it then reports failure without touching the
/// database); `cautious` puts it under a savepoint whatever its isolation.
type Job = Box<dyn FnOnce(Option<&Connection>, bool) -> Ran + Send>;

/// What running a job left: how to tell its caller, and whether it failed
/// with no savepoint to undo its changes (its batch is then lost).
struct Ran {
    complete: Completion,
    spoiled: bool,
    /// The job's batch must reach the disk before its caller is answered.
    to_disk: bool,
}

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
                let syncer = hooks.wal.clone().map(|wal| {
                    Syncer::start(super::syncer::Told {
                        wal,
                        sync: super::checkpoint::sync_wal,
                        synced: hooks.synced.clone(),
                        tell: hooks.tell.clone(),
                    })
                });
                let batch = Batch {
                    conn: &conn,
                    hooks: &hooks,
                    syncer: syncer.as_ref(),
                    spoiled_at: std::cell::Cell::new(None),
                    queued_seen: std::cell::Cell::new(super::peers::queued_count()),
                    failing: std::cell::Cell::new(false),
                };
                let shutdown = run(&batch, &rx);
                // Every batch is answered before the shutdown request is.
                if let Some(syncer) = syncer {
                    syncer.finish();
                }
                hooks.readers.end_snapshots();
                close(conn, shutdown);
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start the database writer thread: {e}");
        }
        Writer { tx }
    }

    /// Queues `f`; after its transaction commits, `after_commit` runs (in
    /// commit order, on the writer thread or the [`Syncer`]'s) and then the
    /// caller is woken. With `to_disk`, the transaction is also on the disk
    /// by then (a power loss keeps it), whatever `[store] durability` says.
    pub async fn submit<R, F, H>(
        &self,
        isolation: Isolation,
        to_disk: bool,
        f: F,
        after_commit: H,
    ) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
        H: FnOnce(&R) + Send + 'static,
    {
        let (done_tx, done_rx) = oneshot::channel::<Result<R>>();
        // A job that panics (a bug) fails alone, as if it had returned an
        // error: the writer thread, and every write after it, goes on.
        let f = move |conn: &Connection| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(conn)))
                .unwrap_or_else(|panic| Err(Error::NotStored(panicked(&*panic))))
        };
        let job: Job = Box::new(move |conn: Option<&Connection>, cautious: bool| -> Ran {
            let (result, spoiled) = match conn {
                Some(conn) if cautious || isolation == Isolation::Savepoint => {
                    (in_savepoint(conn, f).map_err(Some), false)
                }
                Some(conn) => {
                    let result = f(conn).map_err(Some);
                    let spoiled = result.is_err();
                    (result, spoiled)
                }
                // Not run: `complete` is told why.
                None => (Err(None), false),
            };
            let complete: Completion = Box::new(move |committed| {
                let out = match (result, committed) {
                    (Ok(r), Ok(())) => {
                        after_commit(&r);
                        Ok(r)
                    }
                    (Ok(_) | Err(None), Err(why)) => Err(Error::NotStored(why.to_owned())),
                    (Err(Some(e)), _) => Err(e),
                    (Err(None), Ok(())) => Err(Error::NotStored("the job did not run".into())),
                };
                Box::new(move || {
                    let _ = done_tx.send(out);
                })
            });
            Ran {
                complete,
                spoiled,
                to_disk,
            }
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

/// Why a write failed when its job panicked.
fn panicked(panic: &(dyn std::any::Any + Send)) -> String {
    let said = crate::unwind::said(panic);
    format!("the write failed on a bug ({said}); see the server log")
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
    /// Syncs and answers the batches that asked for the disk; `None` when
    /// commits sync themselves (no `wal`).
    syncer: Option<&'a Syncer>,
    /// When a batch was last lost to a job without a savepoint.
    spoiled_at: std::cell::Cell<Option<Instant>>,
    /// The outbox count at the last commit.
    queued_seen: std::cell::Cell<u64>,
    /// Whether the last transaction failed to begin or to commit.
    failing: std::cell::Cell<bool>,
}

impl Batch<'_> {
    /// Tells watchers when writes start failing as a whole (`Some(why)`)
    /// and when one commits again (`None`); a batch that ends as the one
    /// before did costs nothing.
    fn health(&self, failure: Option<&str>) {
        if self.failing.replace(failure.is_some()) == failure.is_some() {
            return;
        }
        let now = failure.map(|why| super::Failing {
            since_ms: crate::clock::now_ms(),
            why: why.to_owned(),
        });
        self.hooks.failing.send_replace(now);
    }
}

/// Commits batches until a shutdown request (returned, to be answered once
/// the database is closed) or until every sender is gone.
fn run(batch: &Batch<'_>, rx: &mpsc::Receiver<Command>) -> Option<oneshot::Sender<()>> {
    let mut shutdown: Option<oneshot::Sender<()>> = None;
    // A store may open with work left from before (a crash), and with a
    // large WAL. Only a commit leaves work owed, so `owed` implies `wrote`.
    let mut owed = true;
    let mut wrote = true;
    while shutdown.is_none() {
        let next = if wrote {
            match rx.recv_timeout(IDLE) {
                Ok(c) => Some(c),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match rx.recv() {
                Ok(c) => Some(c),
                Err(_) => break,
            }
        };
        match next {
            Some(Command::Job(j)) => {
                owed = commit_batch(batch, j, rx, &mut shutdown);
                wrote = true;
            }
            Some(Command::Shutdown(s)) => shutdown = Some(s),
            None => {
                if owed {
                    idle(batch);
                }
                cut_back_wal(batch);
                owed = false;
                wrote = false;
            }
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

/// The work batches left, in a transaction of its own. A failure is
/// logged: the work waits for the next batch, or for a caller that needs
/// it done.
fn idle(batch: &Batch<'_>) {
    let conn = batch.conn;
    let done = run_cached(conn, "BEGIN IMMEDIATE")
        .and_then(|()| (batch.hooks.when_idle)(conn))
        .and_then(|wrote| {
            if wrote {
                batch.hooks.readers.end_snapshots();
            }
            run_cached(conn, if wrote { "COMMIT" } else { "ROLLBACK" }).map(|()| wrote)
        });
    match done {
        Ok(false) => {}
        Ok(true) => {
            count_commit(batch.hooks);
            batch.hooks.after_commit.committed();
        }
        Err(e) => {
            tracing::warn!("the writer's idle work failed: {e}");
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
        }
    }
}

/// Empties the WAL file if it is larger than [`WAL_KEPT`]: a `TRUNCATE`
/// checkpoint copies what is left back into the database, syncs it, and
/// truncates the file. It waits for nothing: a read under way in a
/// snapshot of the log (ours or another process's), or the checkpoint
/// thread mid-copy, leaves it for the next idle spell.
fn cut_back_wal(batch: &Batch<'_>) {
    let conn = batch.conn;
    let Some(wal) = conn
        .path()
        .map(|p| super::wal_path(std::path::Path::new(p)))
    else {
        return;
    };
    let size = match std::fs::metadata(&wal) {
        Ok(m) => m.len(),
        Err(_) => return,
    };
    if size <= WAL_KEPT {
        return;
    }
    // A kept snapshot begun before the last checkpoint would hold the log.
    batch.hooks.readers.end_snapshots();
    let began = Instant::now();
    let waited = conn.busy_timeout(Duration::ZERO);
    let done = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        r.get::<_, i64>(0)
    });
    let restored = conn.busy_timeout(super::BUSY_TIMEOUT);
    if let Err(e) = waited.and(restored) {
        tracing::warn!("cannot set the writer's busy timeout: {e}");
    }
    match done {
        Ok(0) => tracing::debug!(
            bytes = size,
            ms = began.elapsed().as_secs_f64() * 1e3,
            "emptied the WAL file while idle"
        ),
        Ok(_) => tracing::debug!(bytes = size, "the WAL file is in use; left for later"),
        Err(e) => tracing::warn!("cannot empty the WAL file ({size} bytes): {e}"),
    }
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
/// request ends the batch; it is answered after this commit. Returns
/// whether the batch left work for [`Hooks::when_idle`].
fn commit_batch(
    batch: &Batch<'_>,
    first: Job,
    rx: &mpsc::Receiver<Command>,
    shutdown: &mut Option<oneshot::Sender<()>>,
) -> bool {
    // The first job woke this thread, most often while the thread that
    // sent it (an HTTP worker) still had requests read and not yet parsed.
    // Where both share a core (a busy machine, or the benchmark's one
    // server core), the writer ran at once and committed one or two jobs,
    // then the rest, each commit writing the same index pages again. Giving
    // the core back once lets those jobs reach the queue first: where
    // nothing else waits for the core this returns at once, and at 32
    // connections on one core a commit then held about 30 parked tasks
    // instead of 11.5 (a fifth fewer bytes written, 10–16% more requests).
    std::thread::yield_now();
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
    commit_jobs(batch, jobs)
}

fn commit_jobs(batch: &Batch<'_>, jobs: impl Iterator<Item = Job>) -> bool {
    let conn = batch.conn;
    if let Err(e) = run_cached(conn, "BEGIN IMMEDIATE") {
        tracing::error!("cannot begin a write transaction: {e}");
        let why = format!("the write transaction could not begin ({e})");
        batch.health(Some(&why));
        for job in jobs {
            (job(None, true).complete)(Err(&why))();
        }
        return false;
    }
    let cautious = batch
        .spoiled_at
        .get()
        .is_some_and(|t| t.elapsed() < CAUTION);
    let mut spoiled = false;
    let mut to_disk = false;
    let completions: Vec<Completion> = jobs
        .map(|job| {
            let ran = job(Some(conn), cautious);
            spoiled |= ran.spoiled;
            to_disk |= ran.to_disk;
            ran.complete
        })
        .collect();
    if spoiled {
        tracing::error!(
            jobs = completions.len(),
            "a job without a savepoint failed: its batch is rolled back, and jobs run under savepoints for {CAUTION:?}"
        );
        if let Err(e) = conn.execute_batch("ROLLBACK") {
            tracing::error!("rollback failed: {e}");
        }
        batch.spoiled_at.set(Some(Instant::now()));
        for c in completions {
            c(Err(
                "another write in its batch failed, and the batch was rolled back",
            ))();
        }
        return false;
    }
    let finished = (batch.hooks.before_commit)(conn).and_then(|owed| {
        batch.hooks.readers.end_snapshots();
        run_cached(conn, "COMMIT").map(|()| owed)
    });
    let owed = match finished {
        Ok(owed) => owed,
        Err(e) => {
            tracing::error!("commit failed: {e}");
            let _ = conn.execute_batch("ROLLBACK");
            let failure = format!("the commit failed ({e})");
            batch.health(Some(&failure));
            for c in completions {
                c(Err(&failure))();
            }
            return false;
        }
    };
    batch.health(None);
    // The count is global (tests open several stores); each writer
    // compares with its own last look, so none misses its items, and
    // another store's items cost at most one look.
    let queued = super::peers::queued_count();
    let committed = Committed {
        // Counted before any caller hears of the commit.
        number: count_commit(batch.hooks),
        to_disk,
        queued: queued != batch.queued_seen.replace(queued),
        completions,
    };
    batch.hooks.after_commit.committed();
    let mine = match batch.syncer {
        Some(syncer) => syncer.hand_over(committed),
        None => Some(committed),
    };
    if let Some(committed) = mine {
        super::syncer::answer(committed, &batch.hooks.tell);
    }
    owed
}

/// Counts a commit, and notes it as on the disk when SQLite synced it
/// (commits sync themselves: no `wal`). Returns its number.
fn count_commit(hooks: &Hooks) -> u64 {
    // Only this thread counts, so this is the commit's number.
    let n = hooks.commits.load(Ordering::Relaxed) + 1;
    if hooks.wal.is_none() {
        hooks.synced.through.store(n, Ordering::Release);
    }
    hooks.commits.fetch_add(1, Ordering::Release);
    n
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{Durability, Error, Result, Store};
    use rusqlite::Connection;

    fn put(conn: &Connection, x: &str) -> Result<()> {
        conn.execute("INSERT INTO t (x) VALUES (?1)", [x])?;
        Ok(())
    }

    fn fail_after_put(conn: &Connection, x: &str) -> Result<()> {
        put(conn, x)?;
        Err(Error::Corrupt(format!("{x} failed")))
    }

    /// A store with one table, `t (x)`, and the dir that holds it.
    async fn store_with_table() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db.sqlite"), Durability::Normal).unwrap();
        store
            .write(|c| Ok(c.execute_batch("CREATE TABLE t (x TEXT NOT NULL)")?))
            .await
            .unwrap();
        (dir, store)
    }

    async fn rows(store: &Store) -> Vec<String> {
        store
            .read(|c| {
                let mut stmt = c.prepare("SELECT x FROM t ORDER BY x")?;
                let rows = stmt.query_map([], |r| r.get(0))?;
                Ok(rows.collect::<rusqlite::Result<_>>()?)
            })
            .await
            .unwrap()
    }

    /// Runs `first` (a guarded job) and `rest` in one batch: `first` holds
    /// the writer until the others are queued. Returns every job's result.
    async fn one_batch(
        store: &Store,
        first: &'static str,
        rest: Vec<(&'static str, bool, bool)>,
    ) -> Vec<Result<()>> {
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let s = store.clone();
        let mut handles = vec![tokio::spawn(async move {
            s.write(move |c| {
                put(c, first)?;
                let _ = hold.recv_timeout(Duration::from_secs(10));
                Ok(())
            })
            .await
        })];
        for (x, unguarded, fails) in rest {
            let s = store.clone();
            handles.push(tokio::spawn(async move {
                let job = move |c: &Connection| {
                    if fails {
                        fail_after_put(c, x)
                    } else {
                        put(c, x)
                    }
                };
                if unguarded {
                    s.write_then_unguarded(job, |_| {}).await
                } else {
                    s.write(job).await
                }
            }));
        }
        // The test runs on one thread: the spawned tasks each send their
        // job before this task is polled again.
        tokio::task::yield_now().await;
        let _ = release.send(());
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap());
        }
        out
    }

    /// A job without a savepoint that fails takes its whole batch with it;
    /// after that, jobs run under savepoints, so the next such failure
    /// undoes only its own job.
    #[tokio::test]
    async fn an_unguarded_failure_loses_its_batch_then_jobs_are_guarded() {
        let (_dir, store) = store_with_table().await;

        let out = one_batch(&store, "a", vec![("b", false, false), ("c", true, true)]).await;
        assert!(out[0].is_err(), "the batch was rolled back: {out:?}");
        assert!(out[1].is_err(), "the batch was rolled back: {out:?}");
        assert!(
            matches!(&out[2], Err(Error::Corrupt(m)) if m == "c failed"),
            "the failing job reports its own error: {out:?}"
        );
        assert!(rows(&store).await.is_empty());

        // Now every job has a savepoint: the same failure costs only itself.
        let out = one_batch(&store, "d", vec![("e", true, true), ("f", true, false)]).await;
        assert!(out[0].is_ok() && out[2].is_ok(), "{out:?}");
        assert!(out[1].is_err(), "{out:?}");
        assert_eq!(rows(&store).await, ["d", "f"]);
    }

    /// When no write transaction can begin (another process holds the
    /// write lock past the busy timeout), each job is told SQLite's reason,
    /// and the writer goes on once the lock is free.
    #[tokio::test]
    async fn a_write_that_cannot_begin_says_why() {
        let (dir, store) = store_with_table().await;
        let other = Connection::open(dir.path().join("db.sqlite")).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let refused = store.write(|c| put(c, "a")).await;
        match refused {
            Err(Error::NotStored(why)) => {
                assert!(why.contains("could not begin"), "{why}");
                assert!(why.contains("locked"), "SQLite's reason: {why}");
            }
            other => panic!("{other:?}"),
        }
        other.execute_batch("ROLLBACK").unwrap();
        // Right after another connection of this process gave the lock up,
        // SQLite may still answer a begin with a plain SQLITE_BUSY without
        // waiting (seen about once in ten runs on a loaded machine): the
        // job fails with nothing stored, which every caller treats as "try
        // again". The writer itself must go on.
        let mut stored = store.write(|c| put(c, "b")).await;
        for _ in 0..20 {
            if stored.is_ok() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            stored = store.write(|c| put(c, "b")).await;
        }
        stored.unwrap();
        assert_eq!(rows(&store).await, ["b"]);
    }

    /// A job that panics fails with nothing stored, and the writer takes
    /// the next job as usual, with or without a savepoint.
    #[tokio::test]
    async fn a_job_that_panics_fails_alone() {
        let (_dir, store) = store_with_table().await;
        let out = store
            .write(|c| -> Result<()> {
                put(c, "a")?;
                panic!("a bug in a job");
            })
            .await;
        match out {
            Err(Error::NotStored(why)) => assert!(why.contains("a bug in a job"), "{why}"),
            other => panic!("{other:?}"),
        }
        let out = store
            .write_then_unguarded(
                |c| -> Result<()> {
                    put(c, "b")?;
                    panic!("an unguarded bug")
                },
                |_| {},
            )
            .await;
        assert!(matches!(out, Err(Error::NotStored(_))), "{out:?}");
        store.write(|c| put(c, "c")).await.unwrap();
        assert_eq!(rows(&store).await, ["c"]);
    }

    /// Without a failure, an unguarded job commits like any other.
    #[tokio::test]
    async fn unguarded_jobs_commit() {
        let (_dir, store) = store_with_table().await;
        let jobs = ["a", "b", "c"].map(|x| store.write_then_unguarded(move |c| put(c, x), |_| {}));
        for r in futures::future::join_all(jobs).await {
            r.unwrap();
        }
        assert_eq!(rows(&store).await, ["a", "b", "c"]);
    }
}
