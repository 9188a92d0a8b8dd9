//! Retention: finished tasks older than `keep_days`, and the oldest beyond
//! `max_tasks`, are written to the archive and then removed from the live
//! database, a batch at a time (short write transactions, so the writer is
//! never held for long). Tasks with anything still owed on them stay: see
//! `store::retention`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::Engine;
use crate::a2a::Error;
use crate::archive;
use crate::clock::now_ms;
use crate::config::RetentionConfig;
use crate::store::retention as sql;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// Retention settings and the archive they write to.
pub struct Retention {
    pub config: RetentionConfig,
    writer: archive::Writer,
    /// One pass at a time.
    pass: tokio::sync::Mutex<()>,
}

impl Retention {
    pub fn new(config: RetentionConfig, archive_dir: std::path::PathBuf) -> Retention {
        Retention {
            config,
            writer: archive::Writer::new(archive_dir),
            pass: tokio::sync::Mutex::new(()),
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    /// Tasks written to the archive and removed from the database.
    pub archived: usize,
    /// Batches (write transactions) it took.
    pub batches: usize,
}

impl Engine {
    /// Sets retention up; once, before [`Engine::run_retention`].
    pub fn configure_retention(&self, retention: Retention) {
        if self.inner.retention.set(Arc::new(retention)).is_err() {
            tracing::error!("retention was configured twice; the first settings stay");
        }
    }

    /// Where the archive is written, once retention is configured.
    pub fn archive_dir(&self) -> Option<std::path::PathBuf> {
        self.inner
            .retention
            .get()
            .map(|r| r.writer.dir().to_path_buf())
    }

    /// One retention pass at the current time: archives every task due,
    /// oldest first, in batches. Nothing is deleted that is not durably in
    /// the archive first.
    pub async fn retain(&self) -> Result<Report, Error> {
        let Some(r) = self.inner.retention.get().cloned() else {
            return Ok(Report::default());
        };
        let _pass = r.pass.lock().await;
        let cfg = r.config.clone();
        let mut report = Report::default();
        loop {
            let now = now_ms();
            let cutoff = (cfg.keep_days > 0)
                .then(|| now.saturating_sub((cfg.keep_days as i64).saturating_mul(DAY_MS)));
            let (max_tasks, batch) = (cfg.max_tasks, cfg.batch);
            let (ids, records) = self
                .inner
                .store
                .read(move |c| {
                    let extra = match max_tasks {
                        0 => 0,
                        m => sql::task_count(c)?.saturating_sub(m),
                    };
                    let ids = sql::candidates(c, cutoff, extra, batch)?;
                    let mut records = Vec::with_capacity(ids.len());
                    for id in &ids {
                        if let Some(rec) = sql::record(c, id, now)? {
                            records.push(rec);
                        }
                    }
                    Ok((ids, records))
                })
                .await?;
            if ids.is_empty() {
                break;
            }
            let retention = r.clone();
            tokio::task::spawn_blocking(move || retention.writer.append(&records))
                .await
                .map_err(|e| Error::Internal(format!("archive writer failed: {e}")))?
                .map_err(|e| {
                    tracing::error!(
                        "cannot write the archive in {}: {e}",
                        r.writer.dir().display()
                    );
                    Error::Internal("cannot write the archive; see the server log".into())
                })?;
            let deleted = self
                .inner
                .store
                .write(move |c| sql::delete(c, &ids))
                .await?;
            report.batches += 1;
            report.archived += deleted.len();
            if deleted.is_empty() {
                break;
            }
            tokio::task::yield_now().await;
        }
        Ok(report)
    }

    /// Runs retention now and every `interval_secs` until shutdown.
    pub async fn run_retention(&self, mut shutdown: watch::Receiver<bool>) {
        let Some(every) = self
            .inner
            .retention
            .get()
            .map(|r| r.config.interval_secs)
            .filter(|s| *s > 0)
        else {
            return;
        };
        loop {
            match self.retain().await {
                Ok(Report { archived: 0, .. }) => {}
                Ok(r) => tracing::info!(
                    "archived {} finished task(s) in {} batch(es)",
                    r.archived,
                    r.batches
                ),
                Err(e) => tracing::warn!("retention pass failed: {e}"),
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(every)) => {}
                _ = shutdown.changed() => return,
            }
        }
    }
}
