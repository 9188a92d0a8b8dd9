//! The store's SQLite file layer (`countersign_vfs`) through real SQLite
//! files: what reaches the kernel, and that every other connection (through
//! the layer or not) reads only whole commits. That a commit's failed
//! write fails the commit (the layer writes the frames with the commit
//! frame, not later) is held by `tests/disk_full.rs`, whose server runs
//! under a file-size limit.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use proptest::prelude::*;
use rusqlite::{Connection, OpenFlags};

fn through_layer(path: &Path) -> Connection {
    assert!(countersign_vfs::register(), "the layer registers on Linux");
    let conn =
        Connection::open_with_flags_and_vfs(path, OpenFlags::default(), countersign_vfs::NAME)
            .unwrap();
    setup(&conn);
    conn
}

fn plain(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    setup(&conn);
    conn
}

fn setup(conn: &Connection) {
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;",
    )
    .unwrap();
}

/// Write system calls this thread has made (`/proc/thread-self/io`).
fn writes_so_far() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("syscw: "))
        .unwrap()
        .parse()
        .unwrap()
}

/// Inserts `rows` rows of 300 bytes in one transaction on `conn`, whose
/// database is `path`; returns the write system calls it took and the
/// frames it appended to the WAL (4,096-byte pages and their 24-byte
/// headers, after the log's own 32-byte header).
fn commit_rows(conn: &Connection, path: &Path, rows: usize, tag: &str) -> (u64, u64) {
    let wal = path.with_extension("db-wal");
    let frames = || {
        (std::fs::metadata(&wal)
            .map_or(0, |m| m.len())
            .saturating_sub(32))
            / 4120
    };
    let before_frames = frames();
    let before = writes_so_far();
    let tx = conn.unchecked_transaction().unwrap();
    for i in 0..rows {
        tx.execute(
            "INSERT INTO t (k, v) VALUES (?1, ?2)",
            (format!("{tag}-{i:06}"), "x".repeat(300)),
        )
        .unwrap();
    }
    tx.commit().unwrap();
    (writes_so_far() - before, frames() - before_frames)
}

#[test]
fn a_commit_reaches_the_kernel_in_one_write() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["layer", "plain"] {
        let path = dir.path().join(format!("{name}.db"));
        let conn = if name == "layer" {
            through_layer(&path)
        } else {
            plain(&path)
        };
        conn.execute_batch(
            "PRAGMA wal_autocheckpoint = 0;
             CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT NOT NULL);",
        )
        .unwrap();
        // The log has started; each commit below appends to it. The larger
        // ones are more than the `unix` layer writes in one call.
        for (round, rows) in [200, 200, 1000, 3000].into_iter().enumerate() {
            let (writes, frames) = commit_rows(&conn, &path, rows, &format!("r{round}"));
            assert!(
                frames >= 20,
                "{name}: a commit of 60 KB appends pages ({frames})"
            );
            if name == "layer" {
                let bytes = frames as usize * 4120;
                let calls = bytes.div_ceil(countersign_vfs::MAX_WRITE) as u64;
                assert_eq!(writes, calls, "{name}: {frames} frames");
                if rows == 200 {
                    assert_eq!(writes, 1);
                }
            } else {
                // What the layer saves: SQLite's two writes a frame.
                assert_eq!(writes, 2 * frames, "{name}");
            }
        }
    }
}

#[test]
fn other_connections_read_every_commit_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let writer = through_layer(&path);
    writer
        .execute_batch(
            "CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT NOT NULL);
             CREATE TABLE n (round INTEGER NOT NULL, rows INTEGER NOT NULL);",
        )
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    // Readers in this process, one through the layer and one not, read as
    // the writer commits: the count of rows each round says it wrote must
    // be the count there is, in every snapshot.
    let readers: Vec<_> = [true, false]
        .into_iter()
        .map(|layered| {
            let path = path.clone();
            let done = done.clone();
            std::thread::spawn(move || {
                let conn = if layered {
                    through_layer(&path)
                } else {
                    plain(&path)
                };
                let mut reads = 0;
                while !done.load(Ordering::Relaxed) {
                    let (said, found): (i64, i64) = conn
                        .query_row(
                            "SELECT (SELECT coalesce(sum(rows), 0) FROM n),
                                    (SELECT count(*) FROM t WHERE length(v) = 300)",
                            [],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        )
                        .unwrap();
                    assert_eq!(said, found, "a snapshot holds part of a commit");
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for round in 0..300_i64 {
        let rows = 1 + round % 40;
        let tx = writer.unchecked_transaction().unwrap();
        for i in 0..rows {
            tx.execute(
                "INSERT INTO t (k, v) VALUES (?1, ?2)",
                (format!("{round:04}-{i:03}"), "y".repeat(300)),
            )
            .unwrap();
        }
        tx.execute("INSERT INTO n (round, rows) VALUES (?1, ?2)", (round, rows))
            .unwrap();
        tx.commit().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    for reader in readers {
        assert!(reader.join().unwrap() > 0);
    }
    common::assert_sound(&plain(&path));
}

#[test]
fn frames_spilled_by_a_rolled_back_transaction_never_land_on_a_later_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let spiller = through_layer(&path);
    spiller
        .execute_batch(
            "CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT NOT NULL);
             INSERT INTO t VALUES ('first', 'kept');",
        )
        .unwrap();
    // A page cache of 8 pages: a transaction of 200 KB spills frames into
    // the log before it ends, and then rolls back.
    spiller.execute_batch("PRAGMA cache_size = 8;").unwrap();
    let tx = spiller.unchecked_transaction().unwrap();
    for i in 0..200 {
        tx.execute(
            "INSERT INTO t (k, v) VALUES (?1, ?2)",
            (format!("spilled-{i:04}"), "s".repeat(1000)),
        )
        .unwrap();
    }
    tx.rollback().unwrap();
    // Another connection commits where those frames were.
    let other = plain(&path);
    let tx = other.unchecked_transaction().unwrap();
    for i in 1..=50 {
        tx.execute(
            "INSERT INTO t (k, v) VALUES (?1, ?2)",
            (format!("other-{i}"), "o".repeat(1000)),
        )
        .unwrap();
    }
    tx.commit().unwrap();
    // The first connection writes again.
    spiller
        .execute("INSERT INTO t VALUES ('last', 'kept')", [])
        .unwrap();
    let reader = plain(&path);
    common::assert_sound(&reader);
    let (others, spilled): (i64, i64) = reader
        .query_row(
            "SELECT count(*) FILTER (WHERE k LIKE 'other-%' AND v = printf('%.1000c', 'o')),
                    count(*) FILTER (WHERE k LIKE 'spilled-%')
             FROM t",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((others, spilled), (50, 0));
    let kept: Vec<String> = reader
        .prepare("SELECT k FROM t WHERE v = 'kept' ORDER BY k")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(kept, ["first", "last"]);
}

#[test]
fn a_log_that_starts_over_is_gathered_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.db");
    let conn = through_layer(&path);
    conn.execute_batch(
        "PRAGMA wal_autocheckpoint = 0;
         CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT NOT NULL);",
    )
    .unwrap();
    commit_rows(&conn, &path, 200, "a");
    // Everything copied back and the log emptied: the next commit writes
    // its header at offset 0 and its frames from the start again.
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    let (writes, frames) = commit_rows(&conn, &path, 200, "b");
    assert!(frames >= 20);
    // The log's header, then the frames in one write.
    assert_eq!(writes, 2, "{frames} frames");
    let (writes, _) = commit_rows(&conn, &path, 200, "c");
    assert_eq!(writes, 1);
    let count: i64 = plain(&path)
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 600);
}

/// One step of the property below.
#[derive(Debug, Clone)]
enum Step {
    /// A transaction of `rows` rows of `size` bytes each, committed or
    /// rolled back; in a small page cache, a large one spills frames
    /// into the log before it ends.
    Write {
        rows: usize,
        size: usize,
        commit: bool,
    },
    /// A checkpoint by another connection; `truncate` empties the log, so
    /// the writer's next commit starts it over.
    Checkpoint { truncate: bool },
    /// The writer closed and opened again.
    Reopen,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (1..400_usize, 1..3000_usize, proptest::bool::weighted(0.8))
            .prop_map(|(rows, size, commit)| Step::Write { rows, size, commit }),
        2 => proptest::bool::ANY.prop_map(|truncate| Step::Checkpoint { truncate }),
        1 => Just(Step::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever the mix of commits, rollbacks with spilled frames,
    /// checkpoints and reopenings, a connection outside the layer reads
    /// exactly the committed rows, and the file stays sound.
    #[test]
    fn the_store_reads_back_exactly_what_committed(
        steps in proptest::collection::vec(step(), 1..24),
        small_cache in proptest::bool::ANY,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.db");
        let open = || {
            let conn = through_layer(&path);
            if small_cache {
                conn.execute_batch("PRAGMA cache_size = 16;").unwrap();
            }
            conn
        };
        let mut writer = open();
        writer
            .execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL);")
            .unwrap();
        let reader = plain(&path);
        let (mut rows_kept, mut bytes_kept, mut next) = (0_i64, 0_i64, 0_i64);
        for step in steps {
            match step {
                Step::Write { rows, size, commit } => {
                    let tx = writer.unchecked_transaction().unwrap();
                    for _ in 0..rows {
                        next += 1;
                        tx.execute("INSERT INTO t (k, v) VALUES (?1, ?2)", (next, "w".repeat(size)))
                            .unwrap();
                    }
                    if commit {
                        tx.commit().unwrap();
                        rows_kept += rows as i64;
                        bytes_kept += (rows * size) as i64;
                    } else {
                        tx.rollback().unwrap();
                    }
                }
                Step::Checkpoint { truncate } => {
                    let mode = if truncate { "TRUNCATE" } else { "PASSIVE" };
                    reader
                        .query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |_| Ok(()))
                        .unwrap();
                }
                Step::Reopen => {
                    drop(writer);
                    writer = open();
                }
            }
            let (count, bytes): (i64, i64) = reader
                .query_row("SELECT count(*), coalesce(sum(length(v)), 0) FROM t", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .unwrap();
            prop_assert_eq!((count, bytes), (rows_kept, bytes_kept));
        }
        common::assert_sound(&reader);
    }
}
