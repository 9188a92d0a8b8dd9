//! The task archive: finished tasks that retention moved out of the live
//! database, as gzip-compressed JSON Lines under `<data_dir>/archive/`, one
//! file per month of the tasks' last change (`tasks-2026-07.jsonl.gz`).
//!
//! Each line is one task with everything stored about it (history,
//! artifacts, turns, decisions, hops). Every write appends one complete gzip
//! member and is fsynced before the engine deletes those tasks, so a crash
//! in between can only archive a task twice, never lose it; readers keep the
//! last copy of each task. A member cut short by a crash is truncated away
//! before the next append and ignored by readers.
//!
//! Knows no SQL and no HTTP: the engine writes, the CLI and the UI API read.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use flate2::Compression;
use flate2::bufread::GzDecoder;
use flate2::write::GzEncoder;
use serde::Serialize;
use serde_json::Value;

use crate::a2a::types::parse_timestamp;

/// The archive's directory under the data dir.
pub const DIR: &str = "archive";

/// The archive directory of a data dir.
pub fn dir_of(data_dir: &Path) -> PathBuf {
    data_dir.join(DIR)
}

/// The file a task last changed at `updated_ms` goes to.
fn file_name(updated_ms: i64) -> String {
    let month = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(updated_ms)
        .unwrap_or_default()
        .format("%Y-%m");
    format!("tasks-{month}.jsonl.gz")
}

/// The month a file name covers (`2026-07`), if it is an archive file.
fn month_of(name: &str) -> Option<&str> {
    let m = name.strip_prefix("tasks-")?.strip_suffix(".jsonl.gz")?;
    (m.len() == 7 && m.as_bytes()[4] == b'-').then_some(m)
}

/// Appends to the archive. Cheap to share; appends are serialised.
pub struct Writer {
    dir: PathBuf,
    /// Files already checked for a torn tail by this process.
    checked: Mutex<HashSet<PathBuf>>,
}

impl Writer {
    pub fn new(dir: PathBuf) -> Writer {
        Writer {
            dir,
            checked: Mutex::new(HashSet::new()),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends records (each with its task's last-change time) and makes
    /// them durable: when this returns `Ok`, they survive a crash.
    pub fn append(&self, records: &[(i64, Value)]) -> std::io::Result<()> {
        let mut by_file: Vec<(String, Vec<&Value>)> = Vec::new();
        for (ms, rec) in records {
            let name = file_name(*ms);
            match by_file.iter_mut().find(|(n, _)| *n == name) {
                Some((_, v)) => v.push(rec),
                None => by_file.push((name, vec![rec])),
            }
        }
        let mut checked = self
            .checked
            .lock()
            .map_err(|_| std::io::Error::other("the archive writer lock is poisoned"))?;
        // The folder's own name must be durable too, or a power loss could
        // take it, with the files in it, once their tasks are gone.
        crate::durable_fs::create_dir_all(&self.dir)?;
        for (name, recs) in by_file {
            let path = self.dir.join(&name);
            let existed = path.exists();
            if existed && !checked.contains(&path) {
                let good = scan(&path, |_| {})?.good_bytes;
                let f = OpenOptions::new().write(true).open(&path)?;
                if f.metadata()?.len() > good {
                    tracing::warn!(
                        "{}: dropping a partly written tail ({} bytes) left by a crash",
                        path.display(),
                        f.metadata()?.len() - good
                    );
                    f.set_len(good)?;
                    f.sync_all()?;
                }
            }
            checked.insert(path.clone());
            let file = OpenOptions::new().create(true).append(true).open(&path)?;
            // The member's text first, then one write to the encoder: each
            // write to it runs the compressor over a fresh 32 KiB output
            // buffer, and a record written straight to it (a write per
            // JSON token) spent nine tenths of retention's time there.
            let mut text = Vec::new();
            for rec in recs {
                serde_json::to_writer(&mut text, rec)?;
                text.push(b'\n');
            }
            let mut gz = GzEncoder::new(file, Compression::default());
            gz.write_all(&text)?;
            let file = gz.finish()?;
            file.sync_all()?;
            if !existed {
                crate::durable_fs::sync_parent(&path);
            }
        }
        Ok(())
    }
}

/// What reading one file found.
struct Scan {
    /// Bytes up to the end of the last complete gzip member.
    good_bytes: u64,
    /// Whether a damaged or cut-short tail followed them.
    torn: bool,
}

/// Reads every complete member of a file, calling `line` for each record.
fn scan(path: &Path, line: impl FnMut(Value)) -> std::io::Result<Scan> {
    scan_lines(path, |_| true, line)
}

/// [`scan`], parsing only the lines `wanted` keeps.
fn scan_lines(
    path: &Path,
    wanted: impl Fn(&str) -> bool,
    mut line: impl FnMut(Value),
) -> std::io::Result<Scan> {
    let mut reader = BufReader::new(File::open(path)?);
    let mut good = 0u64;
    loop {
        if reader.fill_buf()?.is_empty() {
            return Ok(Scan {
                good_bytes: good,
                torn: false,
            });
        }
        let mut text = String::new();
        let mut member = GzDecoder::new(&mut reader);
        if member.read_to_string(&mut text).is_err() {
            return Ok(Scan {
                good_bytes: good,
                torn: true,
            });
        }
        drop(member);
        good = reader.stream_position()?;
        for l in text.lines().filter(|l| !l.trim().is_empty() && wanted(l)) {
            match serde_json::from_str(l) {
                Ok(v) => line(v),
                Err(e) => {
                    tracing::warn!("{}: skipping a line that is not JSON: {e}", path.display())
                }
            }
        }
    }
}

/// One archive file, as `archive list` shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileInfo {
    pub name: String,
    /// The month its tasks last changed in (`2026-07`).
    pub month: String,
    pub bytes: u64,
    /// Distinct tasks in it.
    pub tasks: usize,
    /// The earliest and latest `updatedAt` of its tasks.
    pub first: Option<String>,
    pub last: Option<String>,
    /// A write was cut short (it is dropped before the next append).
    pub torn: bool,
}

/// Why the archive could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the archive at {path}: {source}")]
pub struct ReadError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

fn archive_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, ReadError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(ReadError {
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    let mut files: Vec<(String, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_owned();
            month_of(&name)?;
            Some((name, e.path()))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// The archive files of a directory, oldest month first.
pub fn list(dir: &Path) -> Result<Vec<FileInfo>, ReadError> {
    let mut out = Vec::new();
    for (name, path) in archive_files(dir)? {
        let err = |source| ReadError {
            path: path.clone(),
            source,
        };
        let bytes = std::fs::metadata(&path).map_err(err)?.len();
        let mut ids = HashSet::new();
        let (mut first, mut last): (Option<String>, Option<String>) = (None, None);
        let scan = scan(&path, |rec| {
            if let Some(id) = task_id(&rec) {
                ids.insert(id.to_owned());
            }
            if let Some(t) = rec.get("updatedAt").and_then(Value::as_str) {
                if first.as_deref().is_none_or(|f| t < f) {
                    first = Some(t.to_owned());
                }
                if last.as_deref().is_none_or(|l| t > l) {
                    last = Some(t.to_owned());
                }
            }
        })
        .map_err(err)?;
        out.push(FileInfo {
            month: month_of(&name).unwrap_or_default().to_owned(),
            name,
            bytes,
            tasks: ids.len(),
            first,
            last,
            torn: scan.torn,
        });
    }
    Ok(out)
}

fn task_id(rec: &Value) -> Option<&str> {
    rec.get("task")?.get("id")?.as_str()
}

fn updated_ms(rec: &Value) -> Option<i64> {
    parse_timestamp(rec.get("updatedAt")?.as_str()?)
}

/// Which archived tasks an export takes.
#[derive(Debug, Clone, Default)]
pub struct ExportFilter {
    /// Tasks last changed at or after this time.
    pub since_ms: Option<i64>,
    /// Tasks last changed before this time.
    pub until_ms: Option<i64>,
    pub agent: Option<String>,
}

/// The archived record of task `id` (its last archived copy), newest month
/// first; `None` when the archive does not hold it.
pub fn find(dir: &Path, id: &str) -> Result<Option<Value>, ReadError> {
    // Only lines that name the id are parsed: the id as JSON writes it.
    let needle = serde_json::to_string(id).unwrap_or_default();
    for (_, path) in archive_files(dir)?.into_iter().rev() {
        let mut found = None;
        scan_lines(
            &path,
            |l| l.contains(&needle),
            |rec| {
                if task_id(&rec) == Some(id) {
                    found = Some(rec);
                }
            },
        )
        .map_err(|source| ReadError {
            path: path.clone(),
            source,
        })?;
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

/// The archived tasks `filter` takes, each once (its last archived copy),
/// oldest first.
pub fn export(dir: &Path, filter: &ExportFilter) -> Result<Vec<Value>, ReadError> {
    let mut by_id: HashMap<String, Value> = HashMap::new();
    for (name, path) in archive_files(dir)? {
        // Whole months outside the range are not opened.
        let month = month_of(&name).unwrap_or_default();
        let month_start = parse_timestamp(&format!("{month}-01T00:00:00Z"));
        if let (Some(until), Some(start)) = (filter.until_ms, month_start)
            && start >= until
        {
            continue;
        }
        scan(&path, |rec| {
            let Some(id) = task_id(&rec).map(str::to_owned) else {
                return;
            };
            let t = updated_ms(&rec).unwrap_or(0);
            if filter.since_ms.is_some_and(|s| t < s) || filter.until_ms.is_some_and(|u| t >= u) {
                return;
            }
            if let Some(a) = &filter.agent
                && rec.get("agentId").and_then(Value::as_str) != Some(a)
            {
                return;
            }
            by_id.insert(id, rec);
        })
        .map_err(|source| ReadError {
            path: path.clone(),
            source,
        })?;
    }
    let mut out: Vec<Value> = by_id.into_values().collect();
    out.sort_by(|a, b| (updated_ms(a), task_id(a)).cmp(&(updated_ms(b), task_id(b))));
    Ok(out)
}

/// Records as JSON Lines.
pub fn to_jsonl(records: &[Value]) -> String {
    let mut out = String::new();
    for r in records {
        out.push_str(&r.to_string());
        out.push('\n');
    }
    out
}

/// Records as CSV: one row per task, with its counts.
pub fn to_csv(records: &[Value]) -> String {
    let mut out = String::from(
        "id,agent,owner,context,state,created,updated,archived,messages,artifacts,decisions\r\n",
    );
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let n = |v: Option<&Value>| v.and_then(Value::as_array).map_or(0, Vec::len).to_string();
    for r in records {
        let task = r.get("task").cloned().unwrap_or(Value::Null);
        let row = [
            s(&task, "id"),
            s(r, "agentId"),
            s(r, "owner"),
            s(&task, "contextId"),
            s(r, "state"),
            s(r, "createdAt"),
            s(r, "updatedAt"),
            s(r, "archivedAt"),
            n(task.get("history")),
            n(task.get("artifacts")),
            n(r.get("decisions")),
        ];
        out.push_str(
            &row.iter()
                .map(|f| crate::engine::queue::csv_field(f))
                .collect::<Vec<_>>()
                .join(","),
        );
        out.push_str("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(id: &str, updated: &str, agent: &str) -> (i64, Value) {
        (
            parse_timestamp(updated).unwrap(),
            json!({"task": {"id": id, "contextId": "c"}, "agentId": agent, "updatedAt": updated}),
        )
    }

    #[test]
    fn appends_survive_a_torn_tail_and_exports_keep_one_copy() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(DIR);
        let w = Writer::new(dir.clone());
        w.append(&[
            rec("a", "2026-01-05T00:00:00Z", "x"),
            rec("b", "2026-02-05T00:00:00Z", "y"),
        ])
        .unwrap();
        // A crash between the archive write and the delete: `a` again.
        w.append(&[rec("a", "2026-01-05T00:00:00Z", "x")]).unwrap();
        // A crash in the middle of a write: half a gzip member.
        let jan = dir.join("tasks-2026-01.jsonl.gz");
        let mut f = OpenOptions::new().append(true).open(&jan).unwrap();
        f.write_all(&[0x1f, 0x8b, 8, 0, 0, 0]).unwrap();
        drop(f);
        let files = list(&dir).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!((files[0].tasks, files[0].torn), (1, true));
        // A fresh writer (a restart) cuts the torn tail before appending.
        let w = Writer::new(dir.clone());
        w.append(&[rec("c", "2026-01-06T00:00:00Z", "x")]).unwrap();
        let files = list(&dir).unwrap();
        assert_eq!((files[0].tasks, files[0].torn), (2, false));
        let all = export(&dir, &ExportFilter::default()).unwrap();
        let ids: Vec<_> = all.iter().map(|r| task_id(r).unwrap()).collect();
        assert_eq!(ids, ["a", "c", "b"]);
        let some = export(
            &dir,
            &ExportFilter {
                since_ms: parse_timestamp("2026-01-06T00:00:00Z"),
                until_ms: None,
                agent: Some("x".into()),
            },
        )
        .unwrap();
        assert_eq!(some.len(), 1);
        assert!(to_csv(&some).lines().nth(1).unwrap().starts_with("c,x,"));

        // Cut short inside the compressed data (the trailer and some of the
        // stream lost): that member is ignored, then dropped on append.
        w.append(&[rec("d", "2026-01-07T00:00:00Z", "x")]).unwrap();
        let len = std::fs::metadata(&jan).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&jan)
            .unwrap()
            .set_len(len - 12)
            .unwrap();
        let files = list(&dir).unwrap();
        assert_eq!((files[0].tasks, files[0].torn), (2, true));
        Writer::new(dir.clone())
            .append(&[rec("e", "2026-01-08T00:00:00Z", "x")])
            .unwrap();
        let ids: Vec<String> = export(&dir, &ExportFilter::default())
            .unwrap()
            .iter()
            .map(|r| task_id(r).unwrap().to_owned())
            .collect();
        assert_eq!(ids, ["a", "c", "e", "b"]);
    }

    /// One task is found by its id, in whichever month holds it; an id
    /// that only appears inside another record (a link to it) is not it.
    #[test]
    fn find_reads_one_task_by_id() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(DIR);
        assert_eq!(find(&dir, "a").unwrap(), None, "no archive yet");
        let (ms, mut linked) = rec("b", "2026-03-05T00:00:00Z", "y");
        linked["continues"] = json!("a");
        Writer::new(dir.clone())
            .append(&[rec("a", "2026-01-05T00:00:00Z", "x"), (ms, linked)])
            .unwrap();
        let a = find(&dir, "a").unwrap().unwrap();
        assert_eq!((task_id(&a), a["agentId"].as_str()), (Some("a"), Some("x")));
        assert_eq!(task_id(&find(&dir, "b").unwrap().unwrap()), Some("b"));
        assert_eq!(find(&dir, "c").unwrap(), None);
        assert_eq!(find(&dir, "").unwrap(), None);
    }
}
