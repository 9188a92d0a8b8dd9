//! SQLite storage: schema, migrations, the single writer with group commit,
//! and a small pool of read connections. Every SQL statement lives here.
//!
//! Durability rule: [`Store::write`] resolves only after the transaction that
//! holds the change has committed, so a caller that answers after awaiting it
//! never acknowledges anything a crash could lose.

mod checkpoint;
pub mod dispatch;
pub mod peers;
pub mod queue;
mod readers;
pub mod retention;
mod schema;
mod syncer;
pub mod tasks;
mod writer;

pub use tasks::{ListFilter, NewTask, TaskHead, TaskPage};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::Connection;

/// Storage errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("the database writer has stopped")]
    WriterGone,
    /// A write whose transaction did not commit (a full disk, an I/O error,
    /// another write of its batch that failed): none of it was stored.
    #[error("nothing was stored: {0}")]
    NotStored(String),
    #[error("cannot open the database at {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "the database at {0} was written by a newer Countersign (schema {1}, this build knows {2})"
    )]
    TooNew(PathBuf, i64, i64),
    #[error(
        "{0} is not a Countersign database (not an SQLite file, or its header is damaged); \
         it was left as it is: move it away, or give another --data-dir"
    )]
    NotADatabase(PathBuf),
}

pub type Result<T> = std::result::Result<T, Error>;

/// Writes failing as a whole (a full disk, an I/O error): since when, and
/// SQLite's reason for the first failure.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failing {
    pub since_ms: i64,
    pub why: String,
}

/// How hard a commit tries to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// WAL + `synchronous=NORMAL`: a crash of the process loses nothing that
    /// was committed; a power loss may lose the last batch.
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit is fsynced, at a cost in throughput.
    Full,
}

/// Reads on the blocking pool at once ([`Store::read`]). Each read holds a
/// connection with its own page cache; without a bound, a burst of 32
/// searches or pages opened 32 connections (24 beyond the kept ones, each
/// opened and closed again) and grew the process by tens of MiB.
const BLOCKING_READS: usize = 8;

/// Read connections kept open between reads: the blocking reads' plus
/// room for point reads ([`Store::read_point`]) on the async workers.
const KEPT_READERS: usize = BLOCKING_READS + 8;

/// How long a connection waits for a lock another holds before it gives up
/// with `SQLITE_BUSY`.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The WAL file of the database at `db`: SQLite's name for it.
pub(super) fn wal_path(db: &Path) -> PathBuf {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// Handle to the database: cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    writer: writer::Writer,
    /// Transactions the writer has committed since the store opened.
    commits: Arc<AtomicU64>,
    /// Notified after each commit that queued outbox items.
    outbox_queued: Arc<tokio::sync::Notify>,
    failing: tokio::sync::watch::Sender<Option<Failing>>,
    readers: readers::Readers,
    /// Permits for reads on the blocking pool: see [`BLOCKING_READS`].
    blocking_reads: Arc<tokio::sync::Semaphore>,
    path: PathBuf,
    /// See [`Store::synced`] and [`Store::sync`].
    synced: Arc<writer::Synced>,
}

impl Store {
    /// Opens (creating if needed) the database file and migrates it.
    pub fn open(path: &Path, durability: Durability) -> Result<Store> {
        let mut conn = open_connection(path, durability)?;
        // A database that opens but cannot be written (a full disk, a
        // read-only file) fails here: say which one.
        let at = |e: Error| match e {
            Error::Sqlite(source) => Error::Open {
                path: path.to_path_buf(),
                source,
            },
            e => e,
        };
        schema::migrate(&mut conn, path).map_err(at)?;
        let commits = Arc::new(AtomicU64::new(0));
        let readers = readers::Readers::new(path, durability, commits.clone(), KEPT_READERS);
        // Checkpoints run on their own thread and connection.
        conn.pragma_update(None, "wal_autocheckpoint", checkpoint::FALLBACK_PAGES)?;
        let wal = (durability == Durability::Normal).then(|| wal_path(path));
        let nudge = checkpoint::start(open_connection(path, durability)?, wal.clone());
        let outbox_queued = Arc::new(tokio::sync::Notify::new());
        let (failing, _) = tokio::sync::watch::channel(None);
        let synced = Arc::new(writer::Synced::default());
        let writer = writer::Writer::start(
            conn,
            writer::Hooks {
                commits: commits.clone(),
                before_commit: queue::before_commit,
                when_idle: queue::index_search_backlog,
                after_commit: nudge,
                tell: syncer::Tell {
                    outbox_queued: outbox_queued.clone(),
                    runtime: tokio::runtime::Handle::try_current().ok(),
                },
                failing: failing.clone(),
                readers: readers.clone(),
                wal,
                synced: synced.clone(),
            },
        );
        Ok(Store {
            inner: Arc::new(Inner {
                writer,
                commits,
                outbox_queued,
                failing,
                readers,
                blocking_reads: Arc::new(tokio::sync::Semaphore::new(BLOCKING_READS)),
                path: path.to_path_buf(),
                synced,
            }),
        })
    }

    /// Runs `f` inside the writer's current transaction and resolves once
    /// that transaction has committed. If `f` fails, only its own changes are
    /// rolled back (each job runs under a savepoint).
    pub async fn write<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        self.inner
            .writer
            .submit(writer::Isolation::Savepoint, false, f, |_| {})
            .await
    }

    /// Like [`Store::write`], and its transaction is on the disk before this
    /// returns, whatever `[store] durability` says: for what a person did
    /// (a decision), which no one can send again. With the default
    /// durability a commit reaches the disk at the checkpoint after it,
    /// within about 30 ms; a power loss in between would lose it.
    pub async fn write_to_disk<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        self.write_to_disk_then(f, |_| {}).await
    }

    /// [`Store::write_to_disk`] with [`Store::write_then`]'s `after_commit`.
    pub async fn write_to_disk_then<R, F, H>(&self, f: F, after_commit: H) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
        H: FnOnce(&R) + Send + 'static,
    {
        self.inner
            .writer
            .submit(writer::Isolation::Savepoint, true, f, after_commit)
            .await
    }

    /// Puts every commit made so far on the disk, when commits leave that
    /// to the checkpoint (`durability = "normal"`; with `full` each one
    /// already is): after a change a person made, before they are told it
    /// went through. It is an empty job asking for the disk, so its batch
    /// syncs the WAL after it commits as a decision's does, and the WAL
    /// holds every commit before it; none, when nothing was committed since
    /// the newest commit known to be on the disk (the change itself was a
    /// decision, synced by its own job). A failure is logged, not returned:
    /// the commits stand, and the next checkpoint syncs the WAL again.
    pub async fn sync(&self) {
        if let Err(e) = self.sync_now().await {
            tracing::error!("cannot sync the WAL after a change: {e}");
        }
    }

    /// [`Store::sync`], returning its failure: for what must not go on
    /// unless every commit before it is on the disk.
    pub async fn sync_now(&self) -> Result<()> {
        // Nothing committed since the last commit known to be on the disk.
        let through = self.inner.synced.through.load(Ordering::Acquire);
        if through >= self.inner.commits.load(Ordering::Acquire) {
            return Ok(());
        }
        self.write_to_disk(|_| Ok(())).await
    }

    /// How many commits were synced for [`Store::write_to_disk`] and
    /// [`Store::sync`] (with `durability = "full"` every commit is, by
    /// SQLite, and none counts).
    pub fn synced(&self) -> u64 {
        self.inner.synced.batches.load(Ordering::Relaxed)
    }

    /// Like [`Store::write`], and runs `after_commit` right after the commit
    /// (or after the sync of an earlier commit that asked for the disk), in
    /// commit order: the place to publish events so that subscribers see
    /// them in the order they were stored.
    pub async fn write_then<R, F, H>(&self, f: F, after_commit: H) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
        H: FnOnce(&R) + Send + 'static,
    {
        self.inner
            .writer
            .submit(writer::Isolation::Savepoint, false, f, after_commit)
            .await
    }

    /// Like [`Store::write_then`], for a job that only the database itself
    /// can fail (I/O, a full disk): it runs without a savepoint of its own,
    /// and if it fails all the same, its whole batch fails with it (see
    /// [`writer::Isolation::Batch`]).
    pub async fn write_then_unguarded<R, F, H>(&self, f: F, after_commit: H) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
        H: FnOnce(&R) + Send + 'static,
    {
        self.write_unguarded(false, f, after_commit).await
    }

    /// [`Store::write_then_unguarded`], on the disk before it returns when
    /// `to_disk` says so, as [`Store::write_to_disk`]'s.
    pub async fn write_unguarded<R, F, H>(&self, to_disk: bool, f: F, after_commit: H) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
        H: FnOnce(&R) + Send + 'static,
    {
        self.inner
            .writer
            .submit(writer::Isolation::Batch, to_disk, f, after_commit)
            .await
    }

    /// Runs `f` on a read connection on the blocking pool, at most
    /// [`BLOCKING_READS`] at once; later reads wait for a turn.
    pub async fn read<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        let permit = self
            .inner
            .blocking_reads
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| Error::Corrupt(format!("reader permits closed: {e}")))?;
        let inner = self.inner.clone();
        // The permit goes with the read: a caller that stops waiting does
        // not free it while the read still runs.
        tokio::task::spawn_blocking(move || {
            let out = inner.with_reader(f);
            drop(permit);
            out
        })
        .await
        .map_err(|e| Error::Corrupt(format!("reader task failed: {e}")))?
    }

    /// Runs `f` on a read connection on the current thread, even an async
    /// worker: for reads of a few rows by key (a task, its head, a push
    /// config, a subscription), which take tens of microseconds. Handing
    /// such a read to the blocking pool costs two thread switches, more than
    /// the read: GetTask went from 18,000 to 29,800 req/s on one core by
    /// reading here. Lists, pages and searches use [`Store::read`].
    pub fn read_point<R>(&self, f: impl FnOnce(&Connection) -> Result<R>) -> Result<R> {
        self.inner.with_reader(f)
    }

    /// Adds the parked turns still waiting for the full-text index (see
    /// [`queue::SEARCH_BACKLOG`]) before a search reads it; costs a read
    /// when none wait.
    pub async fn index_search(&self) -> Result<()> {
        if self.read_point(queue::search_backlog_waits)? {
            self.write(|conn| Ok(queue::index_search_backlog(conn)?))
                .await?;
        }
        Ok(())
    }

    /// How many transactions have committed since the store opened: a
    /// value read before a query that still holds afterwards means the
    /// data did not change in between (for caches of derived values).
    pub fn commits(&self) -> u64 {
        self.inner.commits.load(Ordering::Acquire)
    }

    /// Notified (a permit is kept when nobody waits) after each commit
    /// that queued outbox items: the outbox runner looks then, and not
    /// after every other commit.
    /// Whether writes are failing as a whole now, and each change of that.
    pub fn failing(&self) -> tokio::sync::watch::Receiver<Option<Failing>> {
        self.inner.failing.subscribe()
    }

    pub fn outbox_queued(&self) -> &tokio::sync::Notify {
        &self.inner.outbox_queued
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Waits for queued writes, then closes the writer connection cleanly
    /// (checkpointing the WAL). Later writes fail with [`Error::WriterGone`].
    pub async fn close(&self) {
        self.inner.writer.shutdown().await;
        self.inner.readers.clear();
    }
}

impl Inner {
    fn with_reader<R>(&self, f: impl FnOnce(&Connection) -> Result<R>) -> Result<R> {
        self.readers.read(f)
    }
}

/// Appends a keyset-pagination condition to a query being built: rows
/// strictly beyond `(time, key)` in the `(time_col, key_col)` order that
/// `cmp` (`<` or `>`) names.
pub(crate) fn push_keyset(
    sql: &mut String,
    args: &mut Vec<rusqlite::types::Value>,
    (time_col, key_col, cmp): (&str, &str, &str),
    time: i64,
    key: rusqlite::types::Value,
) {
    args.push(time.into());
    let a = args.len();
    args.push(key);
    let b = args.len();
    sql.push_str(&format!(
        " AND ({time_col} {cmp} ?{a} OR ({time_col} = ?{a} AND {key_col} {cmp} ?{b}))"
    ));
}

fn open_connection(path: &Path, durability: Durability) -> Result<Connection> {
    // Through the file layer that hands each WAL commit to the kernel in one
    // write (`countersign_vfs`), where the platform's layer is SQLite's
    // `unix`; elsewhere through the default one.
    let opened = if countersign_vfs::register() {
        Connection::open_with_flags_and_vfs(
            path,
            rusqlite::OpenFlags::default(),
            countersign_vfs::NAME,
        )
    } else {
        Connection::open(path)
    };
    let conn = opened.map_err(|source| Error::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let sync = match durability {
        Durability::Normal => "NORMAL",
        Durability::Full => "FULL",
    };
    // The first statement reads the file's header: where a file that is
    // not a database is found.
    //
    // Foreign keys are not enforced: each child row checked its parent on
    // insert, a look-up of the task or turn the same job had just written
    // (3% of a durable SendMessage). The schema still declares them; the
    // one place that deletes tasks deletes what hangs off them itself
    // (`retention::delete`), and the crash tests check that no row is left
    // without its parent (`PRAGMA foreign_key_check`).
    //
    // A new database gets pages of 2 KiB (SQLite's default is 4): each
    // commit writes every b-tree leaf it touched to the WAL, about a dozen
    // for a batch of parked tasks (a task, its turn, their indexes) of which
    // each task fills a small part, so smaller pages write less for the same
    // rows. A database that has pages already keeps their size.
    conn.execute_batch(&format!(
        "PRAGMA page_size = 2048;
         PRAGMA journal_mode = WAL;
         PRAGMA synchronous = {sync};
         PRAGMA foreign_keys = OFF;
         PRAGMA temp_store = MEMORY;"
    ))
    .map_err(|source| match source.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) => Error::NotADatabase(path.to_path_buf()),
        _ => Error::Open {
            path: path.to_path_buf(),
            source,
        },
    })?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Every statement the store runs stays prepared (there are over 100).
    conn.set_prepared_statement_cache_capacity(256);
    // Without the query planner stability guarantee, a statement whose plan
    // looked at a bound value is re-prepared whenever the statement cache
    // clears its bindings, i.e. on every use: measured at 6% of a durable
    // SendMessage. Our plans never depend on bound values.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    /// Writes that ask for the disk, mixed with writes that do not, from
    /// writers one write after another: `after_commit` runs, and callers
    /// hear, in commit order (what event subscribers rely on), whichever
    /// batches waited for a sync.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn commits_are_told_in_order_while_some_wait_for_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db.sqlite"), Durability::Normal).unwrap();
        store
            .write(|c| Ok(c.execute_batch("CREATE TABLE seq (n INTEGER PRIMARY KEY, b BLOB)")?))
            .await
            .unwrap();
        let told = Arc::new(std::sync::Mutex::new(Vec::new()));
        // A write for the disk brings 256 KiB, so that its sync takes a
        // while and small writes queue behind it.
        let insert = |bytes: i64| {
            move |c: &Connection| -> Result<i64> {
                c.execute("INSERT INTO seq (b) VALUES (zeroblob(?1))", [bytes])?;
                Ok(c.last_insert_rowid())
            }
        };
        // 16 writers, each one write after another, so that batches stay
        // small and keep coming while a sync is under way.
        let writers: Vec<_> = (0..16)
            .map(|w| {
                let store = store.clone();
                let told = told.clone();
                tokio::spawn(async move {
                    for i in 0..60 {
                        let told = told.clone();
                        let tell = move |n: &i64| told.lock().unwrap().push(*n);
                        if (w + i) % 6 == 0 {
                            store.write_to_disk_then(insert(256 << 10), tell).await
                        } else {
                            store.write_then(insert(0), tell).await
                        }
                        .unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.await.unwrap();
        }
        let told = told.lock().unwrap().clone();
        assert_eq!(told.len(), 960);
        let mut sorted = told.clone();
        sorted.sort_unstable();
        assert_eq!(told, sorted, "after_commit ran out of commit order");
        assert!(store.synced() >= 1);
    }

    #[tokio::test]
    async fn a_new_store_has_small_pages_and_an_old_one_keeps_its_own() {
        let page_size = |store: &Store| {
            store
                .read_point(|c| Ok(c.query_row("PRAGMA page_size", [], |r| r.get::<_, i64>(0))?))
                .unwrap()
        };
        let dir = tempfile::tempdir().unwrap();
        let new = Store::open(&dir.path().join("new.sqlite"), Durability::Normal).unwrap();
        assert_eq!(page_size(&new), 2048);
        // A store made with SQLite's default pages, holding a row.
        let path = dir.path().join("old.sqlite");
        let old = Connection::open(&path).unwrap();
        old.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE kept (x TEXT NOT NULL);
             INSERT INTO kept VALUES ('still here');",
        )
        .unwrap();
        drop(old);
        let store = Store::open(&path, Durability::Normal).unwrap();
        assert_eq!(page_size(&store), 4096);
        let kept: String = store
            .read_point(|c| Ok(c.query_row("SELECT x FROM kept", [], |r| r.get(0))?))
            .unwrap();
        assert_eq!(kept, "still here");
    }

    #[tokio::test]
    async fn a_read_sees_one_snapshot_even_as_a_write_commits_inside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let store = Store::open(&path, Durability::Normal).unwrap();
        // Another connection, writing while a read is under way.
        let other = Arc::new(std::sync::Mutex::new(Connection::open(&path).unwrap()));
        let add = move |id: &str| rule(&other.lock().unwrap(), id).unwrap();
        let count = rules;
        // Point reads and pooled reads alike: what a read saw first, it
        // sees to its end, though another write commits in between.
        let seen = store.read_point(|conn| {
            let before = count(conn)?;
            add("r1");
            Ok((before, count(conn)?))
        });
        assert_eq!(seen.unwrap(), (0, 0));
        // Reads see another commit of the store's own writer.
        store.write(|conn| rule(conn, "r2")).await.unwrap();
        let (add_r3, count2) = (add.clone(), count);
        let seen = store
            .read(move |conn| {
                let before = count2(conn)?;
                add_r3("r3");
                Ok((before, count2(conn)?))
            })
            .await;
        assert_eq!(seen.unwrap(), (2, 2));
        // A failed read leaves no snapshot behind: the next sees it all.
        let failed = store.read_point(|conn| {
            count(conn)?;
            Err::<(), _>(Error::Corrupt("a read that fails".into()))
        });
        assert!(failed.is_err());
        add("r4");
        assert_eq!(store.read_point(count).unwrap(), 4);
    }

    /// Adds a chain rule row with id `id`.
    fn rule(conn: &Connection, id: &str) -> Result<()> {
        conn.execute(
            "INSERT INTO chain_rules (id, source, body, created_ms, updated_ms)
             VALUES (?1, 'api', '{}', 0, 0)",
            [id],
        )?;
        Ok(())
    }

    fn rules(conn: &Connection) -> Result<i64> {
        Ok(conn.query_row("SELECT COUNT(*) FROM chain_rules", [], |r| r.get(0))?)
    }

    /// After a change a person made, `sync` costs nothing when nothing was
    /// committed since the newest commit known to be on the disk (a
    /// decision's, synced by its own job): only a later commit needs one.
    #[tokio::test]
    async fn sync_does_nothing_for_what_is_on_the_disk_already() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db.sqlite"), Durability::Normal).unwrap();
        store.write(|conn| rule(conn, "a")).await.unwrap();
        store.sync().await;
        assert_eq!(store.synced(), 1, "a commit left to the checkpoint");
        store.sync().await;
        assert_eq!(store.synced(), 1, "nothing new since");
        store.write_to_disk(|conn| rule(conn, "b")).await.unwrap();
        assert_eq!(store.synced(), 2);
        store.sync().await;
        assert_eq!(store.synced(), 2, "synced by its own job");
        store.write(|conn| rule(conn, "c")).await.unwrap();
        store.sync().await;
        assert_eq!(store.synced(), 3);
        // With `full`, SQLite synced each commit: not even an empty one.
        let dir = tempfile::tempdir().unwrap();
        let full = Store::open(&dir.path().join("db.sqlite"), Durability::Full).unwrap();
        full.write(|conn| rule(conn, "a")).await.unwrap();
        let commits = full.inner.commits.load(Ordering::Acquire);
        full.sync().await;
        assert_eq!(full.inner.commits.load(Ordering::Acquire), commits);
    }

    /// `[store] durability` reaches SQLite on every connection the store
    /// opens: the writer's, whose commits it governs, and the readers'.
    #[tokio::test]
    async fn durability_sets_how_each_connection_syncs() {
        let synchronous = |conn: &Connection| -> Result<i64> {
            Ok(conn.query_row("PRAGMA synchronous", [], |r| r.get(0))?)
        };
        for (durability, want) in [(Durability::Normal, 1), (Durability::Full, 2)] {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(&dir.path().join("db.sqlite"), durability).unwrap();
            let seen = (
                store.write(synchronous).await.unwrap(),
                store.read_point(synchronous).unwrap(),
                store.read(synchronous).await.unwrap(),
            );
            assert_eq!(seen, (want, want, want), "{durability:?}");
        }
        let setting = |text: &str| toml::from_str::<crate::config::StoreConfig>(text);
        let full = setting("durability = \"full\"").unwrap().durability;
        assert_eq!(setting("").unwrap().durability, Durability::Normal);
        assert_eq!(full, Durability::Full);
        let wrong = setting("durability = \"fsync\"").unwrap_err().to_string();
        assert!(wrong.contains("unknown variant `fsync`"), "{wrong}");
    }

    /// Every write goes through the writer, which counts its commits: reads
    /// with no commit between them read on in the snapshot the first began
    /// (no lock calls), and the next commit ends it. A row written around
    /// the writer shows which snapshot a read is in.
    #[tokio::test]
    async fn reads_between_commits_share_a_snapshot_until_the_next_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let store = Store::open(&path, Durability::Normal).unwrap();
        assert_eq!(store.read_point(rules).unwrap(), 0);
        rule(&Connection::open(&path).unwrap(), "around").unwrap();
        assert_eq!(store.read_point(rules).unwrap(), 0, "the same snapshot");
        assert_eq!(store.read(rules).await.unwrap(), 0, "on the pool too");
        store.write(|conn| rule(conn, "through")).await.unwrap();
        assert_eq!(store.read_point(rules).unwrap(), 2, "a snapshot after it");
    }

    /// A kept snapshot keeps SQLite from starting the WAL over from its
    /// beginning once every frame is copied back: the file would grow with
    /// every commit under a steady mix of reads and writes. The writer ends
    /// the kept snapshots before it commits.
    #[tokio::test]
    async fn a_kept_snapshot_does_not_keep_the_wal_from_starting_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let store = Store::open(&path, Durability::Normal).unwrap();
        // Frames in the WAL, after copying back all that no read needs
        // (again while the checkpoint thread holds the checkpoint).
        let frames = || -> i64 {
            let conn = Connection::open(&path).unwrap();
            for _ in 0..1_000 {
                let (busy, log): (i64, i64) = conn
                    .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })
                    .unwrap();
                if busy == 0 && log >= 0 {
                    return log;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            panic!("the checkpoint stayed busy");
        };
        // A read of another connection, open through the writes, keeps the
        // checkpoint thread from copying them all back (and the WAL from
        // starting over) before the snapshot below is taken, however the
        // threads are scheduled.
        let pin = Connection::open(&path).unwrap();
        pin.execute_batch("BEGIN").unwrap();
        assert_eq!(rules(&pin).unwrap(), 0);
        for i in 0..200 {
            store
                .write(move |conn| rule(conn, &format!("r{i}")))
                .await
                .unwrap();
        }
        pin.execute_batch("COMMIT").unwrap();
        drop(pin);
        // Kept, in a snapshot of a WAL not yet copied back.
        assert_eq!(store.read_point(rules).unwrap(), 200);
        let before = frames();
        assert!(before > 200, "{before} frames");
        // The checkpoint thread is done with the last commit's nudge.
        tokio::time::sleep(Duration::from_millis(100)).await;
        store.write(|conn| rule(conn, "last")).await.unwrap();
        let after = frames();
        assert!(
            after < 20,
            "the WAL went on from {before} frames to {after}"
        );
        assert_eq!(store.read_point(rules).unwrap(), 201);
        // Closing copies every frame back and empties the file (or the
        // last connection to close removes it), a kept snapshot or not.
        store.close().await;
        let wal = std::fs::metadata(path.with_extension("sqlite-wal")).map_or(0, |m| m.len());
        assert_eq!(wal, 0);
    }

    /// SQLite never makes the WAL file smaller. A burst that outruns the
    /// checkpoints (here: a read held open through it) grows the file; once
    /// the writer has been idle it empties it, unless a read still holds the
    /// log, and loses nothing either way.
    #[tokio::test]
    async fn an_idle_writer_empties_a_grown_wal_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let wal = path.with_extension("sqlite-wal");
        let size = || std::fs::metadata(&wal).map_or(0, |m| m.len());
        let store = Store::open(&path, Durability::Normal).unwrap();
        store
            .write(|c| Ok(c.execute_batch("CREATE TABLE seq (n INTEGER PRIMARY KEY, b BLOB)")?))
            .await
            .unwrap();
        let count = |c: &Connection| -> Result<i64> {
            Ok(c.query_row("SELECT count(*) FROM seq", [], |r| r.get(0))?)
        };
        let pin = Connection::open(&path).unwrap();
        pin.execute_batch("BEGIN").unwrap();
        assert_eq!(count(&pin).unwrap(), 0);
        for _ in 0..40 {
            store
                .write(|c| Ok(c.execute("INSERT INTO seq (b) VALUES (zeroblob(200000))", [])?))
                .await
                .unwrap();
        }
        let grown = size();
        assert!(grown > writer::WAL_KEPT, "the WAL file has {grown} bytes");
        // Idle, but the read still holds the log: the file is left as is,
        // and the writer does not wait for the read to end.
        tokio::time::sleep(writer::IDLE * 3).await;
        assert_eq!(size(), grown);
        let write = store.write(|c| Ok(c.execute("INSERT INTO seq (b) VALUES (0)", [])?));
        tokio::time::timeout(Duration::from_secs(2), write)
            .await
            .expect("the writer waited for the read")
            .unwrap();
        pin.execute_batch("COMMIT").unwrap();
        drop(pin);
        // The next idle spell after a write empties it.
        store
            .write(|c| Ok(c.execute("INSERT INTO seq (b) VALUES (1)", [])?))
            .await
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while size() > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the WAL file still has {} bytes",
                size()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(store.read_point(count).unwrap(), 42);
        // Writes go on into the emptied file.
        store
            .write(|c| Ok(c.execute("INSERT INTO seq (b) VALUES (2)", [])?))
            .await
            .unwrap();
        assert_eq!(store.read(count).await.unwrap(), 43);
        store.close().await;
        let store = Store::open(&path, Durability::Normal).unwrap();
        assert_eq!(store.read_point(count).unwrap(), 43);
        let check: String = store
            .read_point(|c| Ok(c.query_row("PRAGMA integrity_check", [], |r| r.get(0))?))
            .unwrap();
        assert_eq!(check, "ok");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blocking_reads_take_turns_beyond_their_bound() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db.sqlite"), Durability::Normal).unwrap();
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let reads = (0..4 * BLOCKING_READS).map(|_| {
            let (store, running, most) = (store.clone(), running.clone(), most.clone());
            tokio::spawn(async move {
                store
                    .read(move |conn| {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(20));
                        let n: i64 =
                            conn.query_row("SELECT COUNT(*) FROM tasks", [], |r| r.get(0))?;
                        running.fetch_sub(1, Ordering::SeqCst);
                        Ok(n)
                    })
                    .await
            })
        });
        for read in reads.collect::<Vec<_>>() {
            assert_eq!(read.await.unwrap().unwrap(), 0);
        }
        let most = most.load(Ordering::SeqCst);
        assert!(most > 1, "reads ran one at a time");
        assert!(most <= BLOCKING_READS, "{most} reads ran at once");
        let kept = store.inner.readers.kept();
        assert!((1..=KEPT_READERS).contains(&kept), "{kept} readers kept");
    }
}
