//! Power loss: what the disk may hold when the power goes, not only what a
//! killed process left in the operating system's cache.
//!
//! The server runs with the power-cut library preloaded
//! (`tests/powercut/shim.rs`), which records what each write to the
//! database and its WAL replaces, and each sync of them. Under load (tasks
//! parked, parked tasks decided) the server is killed the moment an
//! operation is answered, and the writes made after their file's last
//! sync are undone: all of them, or a prefix of them in the order they
//! were made with the next one torn at a sector, or any of them out of
//! order (some torn), as from a disk that reorders what it was not told to
//! sync. That is the worst a disk that honours `fsync` may do. Then a server starts on what is left, and
//! the next round begins. In two of the rounds another process holds a
//! read open on the database, which keeps checkpoints from copying; in
//! one the checkpoint thread's syncs never finish, so only what a commit
//! syncs itself is kept.
//!
//! With `durability = "full"` every answered task and decision is there;
//! with the default, every answered decision is (its commit is synced
//! before the answer), and an answered task may be lost only if its answer
//! came within the checkpoint's few milliseconds before the cut, read held
//! or not. Either way the database passes `PRAGMA integrity_check` and
//! `foreign_key_check`, and the queue's counts match its turns. Retention, cut the same way with the
//! archive's files watched too, leaves every task in the database or the
//! archive; new folders and the files beside the database are synced into
//! their folders.
mod common;
use common::powercut::{self, Cut, cut_power, preloaded, syncs};
use common::*;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CONNECTIONS: usize = 16;
/// Operations answered in a round before the power goes (at least).
const PER_ROUND: usize = 240;

const AGENTS: &str = "[[agents]]\nid = \"inbox\"\nbackend = \"human\"\n";

/// An agent that completes each task at once: tasks for retention to archive.
const AUTO: &str = "[[agents]]\nid = \"auto\"\nbackend = \"scripted\"\n\
    fallback = [ { complete = \"done\" } ]\n";

/// The library writes each record before the write it describes, so a
/// record a kill cut short stands for a write never made: the cut leaves
/// it out and undoes the whole ones before it.
#[test]
fn a_record_cut_short_by_the_kill_is_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let (f, log) = (dir.path().join("f"), dir.path().join("log"));
    std::fs::write(&f, "new-data").unwrap();
    // A whole record: "old-data" replaced at 0 (8 bytes of 8)...
    let mut rec = vec![b'W', 0];
    for n in [0u64, 8, 8, 8] {
        rec.extend_from_slice(&n.to_le_bytes());
    }
    rec.extend_from_slice(b"old-data");
    // ...then the start of the next one, as the kill left it.
    let whole = rec.len();
    rec.extend_from_within(..whole);
    for torn_at in [whole + 1, whole + 20, whole + 36, rec.len() - 3] {
        std::fs::write(&f, "new-data").unwrap();
        std::fs::write(&log, &rec[..torn_at]).unwrap();
        let (undone, _) = cut_power(std::slice::from_ref(&f), &log, Cut::Unsynced);
        assert_eq!(undone, 1, "torn at {torn_at}");
        assert_eq!(std::fs::read(&f).unwrap(), b"old-data", "torn at {torn_at}");
    }
}

#[test]
fn a_cut_undoes_what_was_not_synced_and_keeps_what_was() {
    let dir = tempfile::tempdir().unwrap();
    let (f, log) = (dir.path().join("f"), dir.path().join("log"));
    let files = [f.clone()];
    let run = |args: &[&str]| {
        let mut cmd = Command::new(args[0]);
        cmd.args(&args[1..]);
        let st = preloaded(cmd, &files, &log).status().unwrap();
        assert!(st.success(), "{args:?}");
    };
    let dd = |text: &str, seek: &str, sync: &str| {
        let of = format!("of={}", f.display());
        let args = [
            "bash",
            "-c",
            r#"printf "$1" | dd "$2" bs=1 seek="$3" conv=notrunc$4 status=none"#,
            "bash",
            text,
            &of,
            seek,
            sync,
        ];
        run(&args);
    };
    for (cut, want) in [
        // Synced: "AAAA" over the start; then unsynced: "CC" at 6, a cut
        // to 5 bytes, "DDDDDD" at 8 (the file grows, with a hole).
        (Cut::Unsynced, b"BBBBAAAA".to_vec()),
        (Cut::Torn(1), b"BBBBAAAA".to_vec()),
        (Cut::Scattered(1), Vec::new()),
        (Cut::Scattered(2), Vec::new()),
        (Cut::Scattered(3), Vec::new()),
    ] {
        std::fs::write(&f, "AAAAAAAA").unwrap();
        dd("BBBB", "0", ",fdatasync");
        dd("CC", "6", "");
        run(&["truncate", "-s", "5", f.to_str().unwrap()]);
        dd("DDDDDD", "8", "");
        assert_eq!(std::fs::read(&f).unwrap(), b"BBBBA\0\0\0DDDDDD");
        let (undone, _) = cut_power(&files, &log, cut);
        let now = std::fs::read(&f).unwrap();
        match cut {
            Cut::Unsynced => {
                assert_eq!(undone, 2 + 1 + 6, "one record per byte dd wrote");
                assert_eq!(now, want);
            }
            // Some prefix of the unsynced writes survived.
            Cut::Torn(_) => assert!(
                [
                    b"BBBBAAAA".to_vec(),
                    b"BBBBAACA".to_vec(),
                    b"BBBBAACC".to_vec(),
                    b"BBBBA".to_vec(),
                ]
                .contains(&now)
                    || now.starts_with(b"BBBBA\0\0\0D"),
                "{now:?}"
            ),
            // Any of the writes, each alone; the truncation, in its place.
            Cut::Scattered(_) => {
                assert_eq!(&now[..5], b"BBBBA", "{now:?}");
                assert!(
                    now.len() == 5
                        || (now[5..8] == [0; 3]
                            && now[8..].iter().all(|b| matches!(b, b'D' | 0))
                            && now.last() == Some(&b'D')),
                    "{now:?}"
                );
                assert!(undone <= 8, "{undone}");
            }
        }
        assert!(!log.exists());
    }
    // A write to a file opened to append lands at its end, and a cut
    // that keeps it keeps it there.
    let outcomes: Vec<Vec<u8>> = (0..8)
        .map(|seed| {
            std::fs::write(&f, "AAAA").unwrap();
            let append = format!(
                "printf BB | dd of={} oflag=append conv=notrunc status=none",
                f.display()
            );
            run(&["bash", "-c", &append]);
            cut_power(&files, &log, Cut::Scattered(seed));
            std::fs::read(&f).unwrap()
        })
        .collect();
    assert!(
        outcomes
            .iter()
            .all(|o| [&b"AAAA"[..], b"AAAABB"].contains(&&o[..]))
            && outcomes.iter().any(|o| o == b"AAAABB"),
        "{outcomes:?}"
    );
    // A fsync keeps what came before it, in that file only.
    std::fs::write(&f, "AAAAAAAA").unwrap();
    dd("BB", "2", "");
    dd("C", "0", ",fsync");
    dd("EE", "6", "");
    cut_power(&files, &log, Cut::Unsynced);
    assert_eq!(std::fs::read(&f).unwrap(), b"CABBAAAA");
}

/// A read transaction on `db`, open until the connection is dropped. The
/// connection never checkpoints, not even when it closes last.
fn pin_reads(db: &Path) -> rusqlite::Connection {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    )
    .unwrap();
    conn.execute_batch("BEGIN").unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM tasks", [], |r| r.get(0))
        .unwrap();
    assert!(n >= 0);
    conn
}

#[derive(Default)]
struct Ledger {
    /// Answered tasks: the round and the moment of their answer.
    tasks: HashMap<String, (usize, Instant)>,
    parked: Vec<String>,
    /// Answered decisions: the round and the moment of their answer.
    decided: HashMap<String, (usize, Instant)>,
    /// When the power went, in each round.
    cuts: Vec<Instant>,
}

/// How a round runs and how it ends.
struct Round {
    /// Whether parked tasks are decided (one decision for every two
    /// sends), and the power goes as a decision is answered; otherwise
    /// only sends, and it goes as a send is answered.
    decisions: bool,
    /// Whether another process (a backup, say) holds a read open on the
    /// database, which no checkpoint can pass.
    pinned: bool,
    /// Whether the checkpoint thread's syncs never finish (a slow disk):
    /// then only what a commit syncs itself is kept.
    stalled: bool,
    /// The least time the load runs before the power goes.
    at_least: Duration,
    cut: Cut,
}

const ROUNDS: [Round; 5] = [
    // A decision's own sync, alone: with the checkpoint's stalled, a
    // decision answered without one is lost.
    Round {
        decisions: true,
        pinned: false,
        stalled: true,
        at_least: Duration::ZERO,
        cut: Cut::Unsynced,
    },
    Round {
        decisions: true,
        pinned: false,
        stalled: false,
        at_least: Duration::ZERO,
        cut: Cut::Torn(0x5eed),
    },
    Round {
        decisions: true,
        pinned: true,
        stalled: false,
        at_least: Duration::ZERO,
        cut: Cut::Scattered(0x5eed + 1),
    },
    // The last two run long past the loss bound below, with only sends:
    // unless the checkpoint thread syncs the WAL (also while a read holds
    // its checkpoints back), tasks answered that long before the cut are
    // lost.
    Round {
        decisions: false,
        pinned: true,
        stalled: false,
        at_least: Duration::from_millis(1500),
        cut: Cut::Unsynced,
    },
    Round {
        decisions: false,
        pinned: false,
        stalled: false,
        at_least: Duration::from_millis(1500),
        cut: Cut::Scattered(0x5eed + 2),
    },
];

/// Under the default durability, how long before the cut a lost task may
/// have been answered: commits reach the disk at the checkpoint that
/// follows them, within 30 ms; the rest is room for a loaded machine.
const LOSS_BOUND: Duration = Duration::from_millis(500);

/// Load on `base` until the server stops answering. Once `armed`, the
/// first worker to have the round's kind of operation answered kills the
/// server (`pid`) at once: that commit is then as new as an answered one
/// can be when the power goes.
async fn load(
    base: String,
    token: String,
    (round, decisions): (usize, bool),
    ledger: Arc<Mutex<Ledger>>,
    (armed, pid): (Arc<AtomicBool>, i32),
) {
    let counter = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for w in 0..CONNECTIONS {
        let (base, token, ledger) = (base.clone(), token.clone(), ledger.clone());
        let (counter, armed) = (counter.clone(), armed.clone());
        workers.push(tokio::spawn(async move {
            let http = worker_client();
            // Kills the server if armed and `this` is the round's kind.
            let cut_if_armed = |this: bool| {
                if this && armed.swap(false, Ordering::SeqCst) {
                    // SAFETY: a signal to a process of ours.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    ledger.lock().unwrap().cuts.push(Instant::now());
                }
            };
            loop {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                let next = if decisions && n % 3 == 2 {
                    ledger.lock().unwrap().parked.pop()
                } else {
                    None
                };
                let answered = match next {
                    None => {
                        let body = json!({"jsonrpc": "2.0", "id": n, "method": "SendMessage",
                            "params": {"message": message(&format!("pc-{round}-{w}-{n}"), &format!("Approve {n}?"))}});
                        let resp = http
                            .post(format!("{base}/a2a/inbox"))
                            .header("A2A-Version", "1.0")
                            .json(&body)
                            .send()
                            .await;
                        match resp {
                            Ok(r) => match r.json::<Value>().await {
                                Ok(v) => {
                                    let at = (round, Instant::now());
                                    cut_if_armed(!decisions);
                                    let id = v["result"]["task"]["id"].as_str().map(str::to_owned);
                                    let id = id.unwrap_or_else(|| panic!("not a task: {v}"));
                                    let mut l = ledger.lock().unwrap();
                                    l.tasks.insert(id.clone(), at);
                                    l.parked.push(id);
                                    true
                                }
                                Err(_) => false,
                            },
                            Err(_) => false,
                        }
                    }
                    Some(id) => {
                        let resp = http
                            .post(format!("{base}/api/tasks/{id}/decision"))
                            .bearer_auth(&token)
                            .json(&json!({"kind": "approve", "text": format!("ok {n}")}))
                            .send()
                            .await;
                        match resp.map(|r| r.status().as_u16()) {
                            Ok(200) => {
                                let at = (round, Instant::now());
                                cut_if_armed(true);
                                ledger.lock().unwrap().decided.insert(id, at);
                                true
                            }
                            // A task lost with the power (allowed only
                            // under the default durability; checked at
                            // the end) is not found.
                            Ok(404) => true,
                            Ok(s) => panic!("decision on {id}: HTTP {s}"),
                            Err(_) => false,
                        }
                    }
                };
                if !answered {
                    return; // the server is gone
                }
            }
        }));
    }
    futures::future::join_all(workers).await;
}

/// Rounds of load, each ended by a power cut; then checks what is left.
async fn rounds(durability: &str) {
    let dir = tempfile::tempdir().unwrap();
    let config = format!("[store]\ndurability = \"{durability}\"\n\n{AGENTS}");
    let store = powercut::Store::in_dir(dir.path());
    let db = &store.db;
    let ledger: Arc<Mutex<Ledger>> = Arc::default();
    for (i, round) in ROUNDS.iter().enumerate() {
        let mut cmd = store.command();
        if round.stalled {
            cmd.env("POWERCUT_STALL", "store-checkpoint");
        }
        let mut s = Server::start_cmd_in(cmd, dir.path(), Some(&config));
        let pin = round.pinned.then(|| pin_reads(db));
        let armed = Arc::new(AtomicBool::new(false));
        let pid = i32::try_from(s.pid()).unwrap();
        let work = tokio::spawn(load(
            s.base.clone(),
            s.ui_token(),
            (i, round.decisions),
            ledger.clone(),
            (armed.clone(), pid),
        ));
        let progress = |l: &Ledger| l.tasks.len() + l.decided.len();
        let at_start = progress(&ledger.lock().unwrap());
        let started = Instant::now();
        while (progress(&ledger.lock().unwrap()) < at_start + PER_ROUND
            || started.elapsed() < round.at_least)
            && started.elapsed() < Duration::from_secs(60)
        {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        armed.store(true, Ordering::SeqCst);
        work.await.unwrap();
        assert!(!armed.load(Ordering::SeqCst), "round {i} was never cut");
        s.kill9();
        drop(pin);
        let (undone, torn) = store.cut(round.cut);
        eprintln!(
            "{durability}, round {i}: {:?} undid {undone} writes (torn: {torn})",
            round.cut
        );
    }

    let mut s = Server::start_in(dir.path(), Some(&config), &[]);
    let token = s.ui_token();
    let http = reqwest::Client::new();
    let ledger = std::mem::take(&mut *ledger.lock().unwrap());
    let cuts = &ledger.cuts;
    assert!(
        ledger.tasks.len() >= ROUNDS.len() * PER_ROUND / 2 && !ledger.decided.is_empty(),
        "load too light: {} tasks, {} decisions",
        ledger.tasks.len(),
        ledger.decided.len()
    );
    // Lost answered tasks: how long before the cut each was answered.
    let mut lost = Vec::new();
    for (id, (round, answered)) in &ledger.tasks {
        let resp = http
            .get(s.url(&format!("/api/tasks/{id}")))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        if resp.status() == 404 {
            assert!(
                !ledger.decided.contains_key(id),
                "task {id} was decided, and lost"
            );
            lost.push(cuts[*round].saturating_duration_since(*answered));
            continue;
        }
        let d: Value = resp.json().await.unwrap();
        let decisions = d["decisions"].as_array().map_or(0, Vec::len);
        if ledger.decided.contains_key(id) {
            assert_eq!(decisions, 1, "decision on {id}: {d}");
            assert_eq!(d["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{d}");
        } else {
            // Perhaps decided as the power went, unanswered.
            assert!(decisions <= 1, "{id}: {d}");
        }
    }
    let oldest = lost.iter().max().copied().unwrap_or_default();
    if durability == "full" {
        assert!(lost.is_empty(), "{} answered tasks lost", lost.len());
    }
    assert!(
        oldest < LOSS_BOUND,
        "{} answered tasks lost, one answered {oldest:?} before the cut",
        lost.len()
    );
    // Decisions answered within 50 ms of a cut: the window a decision would
    // be lost in, if its commit were not synced.
    let late = ledger
        .decided
        .values()
        .filter(|(round, at)| {
            cuts[*round].saturating_duration_since(*at) < Duration::from_millis(50)
        })
        .count();
    eprintln!(
        "{durability}: {} tasks, {} decisions ({late} within 50 ms of a cut); \
         {} tasks lost, answered at most {oldest:?} before the cut",
        ledger.tasks.len(),
        ledger.decided.len(),
        lost.len()
    );
    // The queue's counts, as a person sees them, match the open turns.
    let (status, page) = Api::new(&s)
        .call(reqwest::Method::GET, "/queue?limit=1", None)
        .await;
    assert_eq!(status, 200, "{page}");
    s.terminate();
    let conn = rusqlite::Connection::open(db).unwrap();
    assert_sound(&conn);
    let open: i64 = conn
        .query_row(
            "SELECT count(*) FROM turns WHERE closed_ms IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(open > 0, "some tasks are still parked");
    assert_eq!(page["total"], open, "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_full_durability_a_power_cut_loses_nothing_answered() {
    rounds("full").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn by_default_a_power_cut_loses_no_decision_and_only_the_last_milliseconds() {
    rounds("normal").await;
}

/// Files made outside SQLite survive a power loss by name too: the data
/// dir is synced after the UI token and the card's signing key are made
/// on the first start, and after each save of the UI's settings (a
/// rename that a power loss could otherwise undo).
#[tokio::test]
async fn secrets_and_saved_settings_sync_the_data_dir() {
    let (mut s, log, _tmp) = watching_the_data_dir(AGENTS);
    let api = Api::new(&s);
    // SQLite syncs the folder too: after creating the journal of the
    // first migration, and on each connection's first sync of the WAL
    // (the writer's, then the checkpoint thread's, after the first
    // commit). Three, then one after the token and one after the key
    // (three in all before they were synced).
    let at_start = settled_syncs(&log).await;
    assert!(
        at_start >= 5,
        "{at_start} syncs of the folder: the token's and the key's are missing"
    );
    let (status, got) = api.call(reqwest::Method::GET, "/settings", None).await;
    assert_eq!(status, 200, "{got}");
    let mut settings = got["settings"].clone();
    settings["theme"] = json!("dark");
    let (status, saved) = api
        .call(reqwest::Method::PUT, "/settings", Some(settings))
        .await;
    assert_eq!(status, 200, "{saved}");
    assert_eq!(saved["settings"]["theme"], "dark");
    assert_eq!(
        settled_syncs(&log).await,
        at_start + 1,
        "the save synced the folder"
    );
    s.kill9();
}

/// A server on a data dir whose syncs the power-cut library counts (the
/// folder itself is the one file it watches), with `config`; the
/// library's record; what holds the folder.
fn watching_the_data_dir(config: &str) -> (Server, PathBuf, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    std::fs::create_dir(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    let log = tmp.path().join("powercut.log");
    let cmd = preloaded(
        Command::new(env!("CARGO_BIN_EXE_countersign")),
        std::slice::from_ref(&dir),
        &log,
    );
    (Server::start_cmd_in(cmd, &dir, Some(config)), log, tmp)
}

/// The first archive file is written into a folder that retention creates
/// then; the folder's name is synced into the data dir before the tasks
/// archived in it are deleted, or a power loss could take the folder, and
/// those tasks with it.
#[tokio::test]
async fn the_archive_folder_is_synced_into_the_data_dir() {
    let config = format!("[retention]\nmax_tasks = 1\ninterval_secs = 1\n\n{AUTO}");
    let (mut s, log, _tmp) = watching_the_data_dir(&config);
    let at_start = settled_syncs(&log).await;
    let client = s.client();
    for i in 0..3 {
        client
            .send_text("auto", &format!("m{i}"), "archive me")
            .await;
    }
    let archive = s.data_dir.join("archive");
    let started = Instant::now();
    while !std::fs::read_dir(&archive).is_ok_and(|mut d| d.next().is_some()) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "nothing archived"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        settled_syncs(&log).await,
        at_start + 1,
        "the archive folder's name was synced into the data dir"
    );
    s.kill9();
}

/// A data dir that `serve` creates is synced into its parent before
/// anything is stored in it, or a power loss could take the folder with
/// all that was stored.
#[tokio::test]
async fn a_new_data_dir_is_synced_into_its_parent() {
    use std::io::BufRead;
    let (tmp, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let parent = tmp.path().canonicalize().unwrap();
    let log = logs.path().join("powercut.log");
    let mut cmd = preloaded(
        Command::new(env!("CARGO_BIN_EXE_countersign")),
        std::slice::from_ref(&parent),
        &log,
    );
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(parent.join("data"))
        .args(["--bind", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("listening on "), "{line:?}");
    let synced = settled_syncs(&log).await;
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        synced, 1,
        "the new data dir's name was synced into its parent"
    );
}

/// The syncs of the watched folder once their count has held for a second
/// (the server's start-up writes are done by then).
async fn settled_syncs(log: &Path) -> usize {
    let started = Instant::now();
    let mut seen = (syncs(log, 0), Instant::now());
    while seen.1.elapsed() < Duration::from_secs(1) {
        assert!(started.elapsed() < Duration::from_secs(30), "never settled");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = syncs(log, 0);
        if now != seen.0 {
            seen = (now, Instant::now());
        }
    }
    seen.0
}

/// A change a person makes through the UI API (the UI, the CLI and the
/// desktop app all come this way) survives a power cut the moment it is
/// answered, with the default durability and the checkpoint thread's
/// syncs never finishing: here a chain rule added.
#[tokio::test]
async fn a_change_made_in_the_ui_survives_a_power_cut() {
    let dir = tempfile::tempdir().unwrap();
    let store = powercut::Store::in_dir(dir.path());
    let mut cmd = store.command();
    cmd.env("POWERCUT_STALL", "store-checkpoint");
    let config = format!("[outbound]\nallow = [\"127.0.0.1\"]\n\n{AGENTS}");
    let mut s = Server::start_cmd_in(cmd, dir.path(), Some(&config));
    let rule = json!({"id": "after-inbox",
        "trigger": {"agent": "inbox", "states": ["completed"]},
        "action": {"kind": "push", "url": "http://127.0.0.1:9/hook"}});
    let (status, added) = Api::new(&s)
        .call(reqwest::Method::POST, "/chains", Some(rule))
        .await;
    assert_eq!(status, 201, "{added}");
    s.kill9();
    let (undone, _) = store.cut(Cut::Unsynced);
    eprintln!("undid {undone} writes");

    let s = Server::start_in(dir.path(), Some(&config), &[]);
    let (status, list) = Api::new(&s)
        .call(reqwest::Method::GET, "/chains", None)
        .await;
    assert_eq!(status, 200, "{list}");
    let ids: Vec<&str> = list["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(
        ids,
        ["after-inbox"],
        "the rule added before the cut: {list}"
    );
}

/// Retention deletes the tasks it archived only once the archive holds
/// them on the disk, so a power cut at any moment leaves each task in the
/// database or in the archive. Five rounds of tasks completed as fast as
/// eight connections send them, with `durability = "full"`, each cut
/// within a few milliseconds of an append to the archive (retention runs
/// every second, keeps 20 tasks and archives 50 at a time), the archive
/// among the files cut: every answered task is in one place or the other
/// after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retention_loses_no_task_to_a_power_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let config = format!(
        "[store]\ndurability = \"full\"\n\n\
        [retention]\nmax_tasks = 20\ninterval_secs = 1\nbatch = 50\n\n{AUTO}"
    );
    let config = config.as_str();
    // Tasks are archived by the month (UTC) they last changed in: this
    // one's file, and the next one's should the test run across its end.
    let now = chrono::Utc::now();
    let next = now + chrono::Duration::days(32);
    let archive = dir.join("archive");
    let mut files = vec![dir.join("countersign.db"), dir.join("countersign.db-wal")];
    for month in [now, next] {
        files.push(archive.join(format!("tasks-{}.jsonl.gz", month.format("%Y-%m"))));
    }
    let archived_bytes = || -> u64 {
        files[2..]
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len())
            .sum()
    };
    let log = dir.join("powercut.log");
    let answered: Arc<Mutex<Vec<String>>> = Arc::default();
    for round in 0..5u64 {
        let cmd = preloaded(
            Command::new(env!("CARGO_BIN_EXE_countersign")),
            &files,
            &log,
        );
        let mut s = Server::start_cmd_in(cmd, &dir, Some(config));
        let workers: Vec<_> = (0..8)
            .map(|w| {
                let (url, answered) = (s.url("/a2a/auto"), answered.clone());
                tokio::spawn(async move {
                    let http = worker_client();
                    for n in 0.. {
                        let body = json!({"jsonrpc": "2.0", "id": n, "method": "SendMessage",
                            "params": {"message": message(&format!("r{round}-{w}-{n}"), "archive me")}});
                        let sent = http
                            .post(&url)
                            .header("A2A-Version", "1.0")
                            .json(&body)
                            .send()
                            .await;
                        let Ok(v) = (match sent {
                            Ok(r) => r.json::<Value>().await,
                            Err(_) => return, // the server is gone
                        }) else {
                            return;
                        };
                        let id = v["result"]["task"]["id"].as_str();
                        let id = id.unwrap_or_else(|| panic!("not a task: {v}"));
                        answered.lock().unwrap().push(id.to_owned());
                    }
                })
            })
            .collect();
        // Past the pass at start, with tasks piling up beyond what is
        // kept; then the next pass appends a batch at a time, and deletes
        // each after its append. The cut comes 0 to 8 ms after the first,
        // second or third append of it.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let (mut last, mut grew) = (archived_bytes(), 0);
        let started = Instant::now();
        while grew <= round % 3 {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "round {round}: archived {grew} times in 30 s"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
            let now = archived_bytes();
            if now != last {
                (last, grew) = (now, grew + 1);
            }
        }
        tokio::time::sleep(Duration::from_millis(round * 2)).await;
        s.kill9();
        futures::future::join_all(workers).await;
        let cut = match round % 3 {
            0 => Cut::Unsynced,
            1 => Cut::Torn(0xa5c4 + round),
            _ => Cut::Scattered(0xa5c4 + round),
        };
        let (undone, torn) = cut_power(&files, &log, cut);
        eprintln!("retention, round {round}: {cut:?} undid {undone} writes (torn: {torn})");
    }

    // One more start, so that the next archive append meets what the cuts
    // left at the archive's end; then what is where.
    let mut s = Server::start_in(&dir, Some(config), &[]);
    s.client().send_text("auto", "after", "one more").await;
    s.terminate();
    let conn = rusqlite::Connection::open(&files[0]).unwrap();
    assert_sound(&conn);
    let mut stmt = conn.prepare("SELECT id FROM tasks").unwrap();
    let stored: std::collections::HashSet<String> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let records = countersign::archive::export(&archive, &Default::default()).unwrap();
    let archived: std::collections::HashSet<&str> = records
        .iter()
        .filter_map(|r| r["task"]["id"].as_str())
        .collect();
    let answered = answered.lock().unwrap();
    let lost: Vec<&String> = answered
        .iter()
        .filter(|id| !stored.contains(*id) && !archived.contains(id.as_str()))
        .collect();
    eprintln!(
        "retention: {} tasks answered, {} in the database, {} archived",
        answered.len(),
        stored.len(),
        archived.len()
    );
    assert!(
        stored.len() + 100 < answered.len(),
        "retention deleted little: the rounds tested little"
    );
    assert!(
        lost.is_empty(),
        "{} answered tasks lost: {lost:?}",
        lost.len()
    );
}
