//! Power cuts, simulated: the server runs with the power-cut library
//! (`tests/powercut/shim.rs`) preloaded, which records what each write to
//! the watched files replaces and each sync of them; after the server is
//! killed, [`cut_power`] undoes what a disk may lose.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The power-cut library, built by `cargo test` as an example.
pub fn shim() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_countersign"));
    let so = bin
        .parent()
        .expect("the binary's folder")
        .join("examples/libpowercut.so");
    assert!(
        so.exists(),
        "{} is missing: `cargo test` builds it, and so does \
         `cargo build --no-default-features --example powercut`",
        so.display()
    );
    so
}

/// `cmd` with the power-cut library preloaded, watching `files`.
pub fn preloaded(mut cmd: Command, files: &[PathBuf], log: &Path) -> Command {
    let files: Vec<&str> = files.iter().map(|f| f.to_str().unwrap()).collect();
    cmd.env("LD_PRELOAD", shim())
        .env("POWERCUT_FILES", files.join(":"))
        .env("POWERCUT_LOG", log);
    cmd
}

/// A data dir's database and its WAL, watched by the library, and the
/// library's record beside them.
pub struct Store {
    pub db: PathBuf,
    files: [PathBuf; 2],
    log: PathBuf,
}

impl Store {
    pub fn in_dir(dir: &Path) -> Store {
        let db = dir.join("countersign.db");
        Store {
            files: [db.clone(), dir.join("countersign.db-wal")],
            db,
            log: dir.join("powercut.log"),
        }
    }

    /// `countersign`, with the library preloaded watching this store.
    pub fn command(&self) -> Command {
        preloaded(
            Command::new(env!("CARGO_BIN_EXE_countersign")),
            &self.files,
            &self.log,
        )
    }

    /// [`cut_power`] on this store, once the server is killed.
    pub fn cut(&self, cut: Cut) -> (usize, bool) {
        cut_power(&self.files, &self.log, cut)
    }
}

/// One record of the library (its format: tests/powercut/shim.rs).
#[derive(Debug)]
enum Record {
    Write {
        file: usize,
        off: u64,
        len: u64,
        size: u64,
        old: Vec<u8>,
    },
    Truncate {
        file: usize,
        len: u64,
        size: u64,
        old: Vec<u8>,
    },
    Sync {
        file: usize,
    },
}

impl Record {
    fn file(&self) -> usize {
        match self {
            Record::Write { file, .. } | Record::Truncate { file, .. } | Record::Sync { file } => {
                *file
            }
        }
    }
}

/// The records in `log`. The library writes each record before the write
/// or truncation it describes, so a record the kill cut short (a long
/// record's `write` returns early once SIGKILL is pending) stands for an
/// operation never made: it, the last, is left out.
fn records(log: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    let mut at = 0;
    let u64_at = |at: usize| u64::from_le_bytes(log[at..at + 8].try_into().unwrap());
    while at + 2 <= log.len() {
        let (kind, file) = (log[at], usize::from(log[at + 1]));
        at += 2;
        if kind == b'S' {
            out.push(Record::Sync { file });
            continue;
        }
        if at + 32 > log.len() {
            break;
        }
        let (a, b, c, n) = (u64_at(at), u64_at(at + 8), u64_at(at + 16), u64_at(at + 24));
        at += 32;
        let Some(old) = log.get(at..at + n as usize) else {
            break;
        };
        let old = old.to_vec();
        at += n as usize;
        out.push(match kind {
            b'W' => Record::Write {
                file,
                off: a,
                len: b,
                size: c,
                old,
            },
            b'T' => Record::Truncate {
                file,
                len: a,
                size: b,
                old,
            },
            k => panic!("unknown record kind {k}"),
        });
    }
    out
}

/// How many syncs of watched file `file` the library's `log` records.
pub fn syncs(log: &Path, file: usize) -> usize {
    let log = std::fs::read(log).unwrap_or_default();
    records(&log)
        .iter()
        .filter(|r| matches!(r, Record::Sync { file: f } if *f == file))
        .count()
}

/// What the disk keeps of the writes made since their file's last sync.
#[derive(Clone, Copy, Debug)]
pub enum Cut {
    /// None of them.
    Unsynced,
    /// Those before a point picked by the seed, and of the write at that
    /// point its first sectors (perhaps none).
    Torn(u64),
    /// Any of them, out of order: each write, picked by the seed, is lost,
    /// kept, or kept for its first sectors only, whatever became of the
    /// writes before it, as from a disk that reorders what it was not yet
    /// told to sync. Truncations are kept, in order.
    Scattered(u64),
}

/// splitmix64: a seeded sequence, so a failing cut can be replayed.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The watched file `i`, which a record of a write to it says exists.
fn made(files: &[Option<File>], i: usize) -> &File {
    files[i]
        .as_ref()
        .expect("a watched file with writes exists")
}

/// Undoes `r`'s write but for its first `keep` bytes.
fn undo(files: &[Option<File>], r: &Record, keep: u64) {
    match r {
        Record::Write {
            file,
            off,
            len,
            size,
            old,
        } => {
            let f = made(files, *file);
            let keep = keep.min(*len);
            if (keep as usize) < old.len() {
                f.write_all_at(&old[keep as usize..], off + keep).unwrap();
            }
            let end = (*size).max(if keep > 0 { off + keep } else { 0 });
            if f.metadata().unwrap().len() > end {
                f.set_len(end).unwrap();
            }
        }
        Record::Truncate {
            file,
            len,
            size,
            old,
        } => {
            let f = made(files, *file);
            f.set_len(*size).unwrap();
            f.write_all_at(old, *len).unwrap();
        }
        Record::Sync { .. } => unreachable!("a sync is never undone"),
    }
}

/// Applies a power cut to `files` from the library's `log`, then removes
/// the log. Returns how many writes were undone, and whether one was torn.
pub fn cut_power(files: &[PathBuf], log: &Path, cut: Cut) -> (usize, bool) {
    let recs = records(&std::fs::read(log).unwrap());
    let mut last_sync = vec![None; files.len()];
    for (i, r) in recs.iter().enumerate() {
        if let Record::Sync { file } = r {
            last_sync[*file] = Some(i);
        }
    }
    let unsynced: Vec<&Record> = recs
        .iter()
        .enumerate()
        .filter(|(i, r)| {
            !matches!(r, Record::Sync { .. }) && last_sync[r.file()].is_none_or(|s| *i > s)
        })
        .map(|(_, r)| r)
        .collect();
    // A watched file never made has nothing to undo.
    let opened: Vec<Option<File>> = files
        .iter()
        .map(|f| {
            f.exists()
                .then(|| OpenOptions::new().read(true).write(true).open(f).unwrap())
        })
        .collect();
    let (undone, torn) = match cut {
        Cut::Unsynced => keep_prefix(&opened, &unsynced, 0, None),
        Cut::Torn(seed) => {
            let mut s = seed;
            let kept = (next(&mut s) % (unsynced.len() as u64 + 1)) as usize;
            let torn = match unsynced.get(kept) {
                Some(Record::Write { len, .. }) => Some(next(&mut s) % (len / 512 + 1) * 512),
                _ => None,
            };
            keep_prefix(&opened, &unsynced, kept, torn)
        }
        Cut::Scattered(seed) => scatter(&opened, &unsynced, seed),
    };
    for f in opened.iter().flatten() {
        f.sync_all().unwrap();
    }
    std::fs::remove_file(log).unwrap();
    (undone, torn)
}

/// [`Cut::Unsynced`] and [`Cut::Torn`]: undoes the unsynced writes after
/// the first `kept`, and of the one at `kept` all but its first `torn`
/// bytes (all of it without). Returns how many writes were undone, and
/// whether one was torn.
fn keep_prefix(
    files: &[Option<File>],
    unsynced: &[&Record],
    kept: usize,
    torn: Option<u64>,
) -> (usize, bool) {
    for r in unsynced.iter().skip(kept + 1).rev() {
        undo(files, r, 0);
    }
    if let Some(r) = unsynced.get(kept) {
        undo(files, r, torn.unwrap_or(0));
    }
    (unsynced.len().saturating_sub(kept), torn.is_some())
}

/// [`Cut::Scattered`]: undoes every unsynced write, newest first, taking
/// what each one wrote as it goes (the file as it stands, over the write's
/// range, is what that write left there); then writes again, oldest first,
/// those the seed keeps, some torn at a sector. Returns how many writes
/// were lost, and whether one was torn.
fn scatter(files: &[Option<File>], unsynced: &[&Record], seed: u64) -> (usize, bool) {
    let mut written = vec![Vec::new(); unsynced.len()];
    for (i, r) in unsynced.iter().enumerate().rev() {
        if let Record::Write { file, off, len, .. } = r {
            // A write the kill cut short (the kernel stops a large write
            // between pages for SIGKILL) left less than it was asked to.
            let f = made(files, *file);
            let left = f.metadata().unwrap().len().saturating_sub(*off).min(*len);
            let mut bytes = vec![0; left as usize];
            f.read_exact_at(&mut bytes, *off).unwrap();
            written[i] = bytes;
        }
        undo(files, r, 0);
    }
    let mut s = seed;
    let (mut lost, mut torn) = (0, false);
    for (r, bytes) in unsynced.iter().zip(&written) {
        match r {
            Record::Write { file, off, len, .. } => {
                let keep = match next(&mut s) % 8 {
                    0..=3 => 0,
                    4 => {
                        torn = true;
                        next(&mut s) % (len / 512 + 1) * 512
                    }
                    _ => *len,
                };
                if keep < *len {
                    lost += 1;
                }
                let keep = keep.min(bytes.len() as u64) as usize;
                if keep > 0 {
                    made(files, *file)
                        .write_all_at(&bytes[..keep], *off)
                        .unwrap();
                }
            }
            Record::Truncate { file, len, .. } => made(files, *file).set_len(*len).unwrap(),
            Record::Sync { .. } => unreachable!("a sync is never undone"),
        }
    }
    (lost, torn)
}
