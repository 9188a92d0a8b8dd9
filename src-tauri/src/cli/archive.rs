//! `countersign archive list|export|show`: reads the archive files in the data
//! dir directly. They are append-only files the server only ever adds
//! complete gzip members to, so reading them needs neither the database nor
//! a running server (an archive is most often read after the fact).

use std::convert::Infallible;
use std::path::{Path, PathBuf};

use super::{CliError, Output, human};
use crate::archive::{self, ExportFilter};
use crate::engine::queue::ChainLinks;

/// The shape `archive export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExportFormat {
    #[default]
    Jsonl,
    Csv,
}

impl std::str::FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "jsonl" => Ok(ExportFormat::Jsonl),
            "csv" => Ok(ExportFormat::Csv),
            _ => Err(format!("`{s}` is not jsonl or csv")),
        }
    }
}

fn read_error(e: archive::ReadError) -> CliError {
    CliError::Server(e.to_string())
}

/// `countersign archive list`: the files, their months, tasks and sizes.
pub fn archive_list(data_dir: &Path, json: bool) -> Result<Output, CliError> {
    let dir = archive::dir_of(data_dir);
    let files = archive::list(&dir).map_err(read_error)?;
    if json {
        let v = serde_json::to_value(&files)
            .map_err(|e| CliError::Server(format!("cannot encode the list: {e}")))?;
        return Ok(Output::json(&v));
    }
    if files.is_empty() {
        return Ok(Output::new(format!(
            "No archived tasks in {}.",
            dir.display()
        )));
    }
    let mut out = format!(
        "{:<26} {:>7} {:>10}  {:<24} {:<24}\n",
        "FILE", "TASKS", "BYTES", "FIRST", "LAST"
    );
    let (mut tasks, mut bytes) = (0usize, 0u64);
    for f in &files {
        tasks += f.tasks;
        bytes += f.bytes;
        out.push_str(&format!(
            "{:<26} {:>7} {:>10}  {:<24} {:<24}{}\n",
            f.name,
            f.tasks,
            f.bytes,
            f.first.as_deref().unwrap_or("-"),
            f.last.as_deref().unwrap_or("-"),
            if f.torn { "  (torn tail)" } else { "" }
        ));
    }
    out.push_str(&format!(
        "{} file(s), {tasks} task(s), {bytes} bytes in {}\n",
        files.len(),
        dir.display()
    ));
    Ok(Output::new(out))
}

/// A time given on the command line: RFC 3339, or a date (midnight UTC).
pub fn parse_time(s: &str) -> Result<i64, CliError> {
    if let Some(ms) = crate::a2a::types::parse_timestamp(s) {
        return Ok(ms);
    }
    chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc().timestamp_millis())
        .ok_or_else(|| {
            CliError::Usage(format!(
                "`{s}` is not a date (YYYY-MM-DD) or an RFC 3339 time"
            ))
        })
}

/// `countersign archive show ID`: one archived task, as `show` prints a task
/// that is still here (`--json`: its whole archived record).
pub fn archive_show(data_dir: &Path, id: &str, json: bool) -> Result<Output, CliError> {
    let dir = archive::dir_of(data_dir);
    let Some(rec) = archive::find(&dir, id).map_err(read_error)? else {
        return Err(CliError::NotFound(format!(
            "the archive in {} holds no task `{id}`",
            dir.display()
        )));
    };
    if json {
        return Ok(Output::json(&rec));
    }
    let unreadable = |e: serde_json::Error| {
        CliError::Server(format!("cannot read the archived record of `{id}`: {e}"))
    };
    // Its chain links as `show` reads them; with no server at hand, whether
    // the tasks at their other ends were archived too is not known.
    let (parent, children) = crate::store::retention::record_hops(&rec).map_err(unreadable)?;
    let chain = ChainLinks::of(parent, children, |_| Ok::<bool, Infallible>(true))
        .unwrap_or_else(|never| match never {});
    let mut rec = rec;
    rec["chain"] = serde_json::to_value(chain).map_err(unreadable)?;
    let view: human::TaskDetailView = serde_json::from_value(rec).map_err(unreadable)?;
    Ok(Output::new(human::show(&view, crate::clock::now_ms())))
}

/// `countersign archive export`: the archived tasks (each once), as JSON
/// Lines or CSV, on stdout or into `out`.
pub fn archive_export(
    data_dir: &Path,
    filter: &ExportFilter,
    format: ExportFormat,
    out: Option<&PathBuf>,
) -> Result<Output, CliError> {
    let records = archive::export(&archive::dir_of(data_dir), filter).map_err(read_error)?;
    let text = match format {
        ExportFormat::Jsonl => archive::to_jsonl(&records),
        ExportFormat::Csv => archive::to_csv(&records),
    };
    match out {
        None => Ok(Output { text }),
        Some(path) => {
            std::fs::write(path, text)
                .map_err(|e| CliError::Usage(format!("cannot write {}: {e}", path.display())))?;
            Ok(Output::new(format!(
                "exported {} task(s) to {}",
                records.len(),
                path.display()
            )))
        }
    }
}
