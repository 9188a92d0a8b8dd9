//! The approval queue as people see it: open turns (filtered, sorted,
//! paged), a task with its turns and decisions, and the history of
//! decisions with JSON Lines / CSV export.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine as _;
use serde::Serialize;

use super::Engine;
use crate::a2a::types::{Task, TaskState};
use crate::store::dispatch::Hop;
use crate::store::queue::{
    self as q, DecisionRecord, HistoryFilter, QueueCounts, QueueFilter, Turn,
};
use crate::store::tasks;

/// Largest page the queue and history hand out.
pub const MAX_PAGE: usize = 500;

/// What a person asks of the queue.
#[derive(Debug, Clone, Default)]
pub struct QueueQuery {
    pub agent_id: Option<String>,
    pub state: Option<TaskState>,
    pub text: Option<String>,
    pub newest_first: bool,
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

/// What the counts of a queue page depend on: agent, state (number), words.
type CountsKey = (Option<String>, Option<i64>, Option<String>);

/// The counts of recent searches of the queue, valid until the next commit:
/// a search's total is counted on the search index (milliseconds with many
/// matches), and a queue that is only read (a person paging through a
/// search) does not change it. Pages without a search read the counts the
/// store keeps.
#[derive(Default)]
pub(super) struct CountsCache {
    counts: Mutex<(u64, HashMap<CountsKey, QueueCounts>)>,
    /// Held while a page takes counts: pages that find them missing at once
    /// (several windows searching, clients after a commit) wait for one
    /// count rather than each taking it on its own read connection, whose
    /// page cache fills with what it counted (32 pages counting 100,000
    /// open turns left eight such connections pooled, and the server at
    /// 42 MiB rather than 25).
    counting: tokio::sync::Mutex<()>,
    /// How many times counts were taken.
    #[cfg(test)]
    taken: std::sync::atomic::AtomicU64,
}

impl CountsCache {
    /// Filters remembered at most (any more and the cache starts afresh).
    const MAX: usize = 64;

    /// Counts for `key` taken when at least `commits` transactions had
    /// committed: counts taken later are only newer.
    fn get(&self, commits: u64, key: &CountsKey) -> Option<QueueCounts> {
        let g = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if g.0 < commits {
            return None;
        }
        g.1.get(key).cloned()
    }

    /// Remembers counts taken when `commits` transactions had committed.
    fn put(&self, commits: u64, key: CountsKey, counts: QueueCounts) {
        #[cfg(test)]
        self.taken
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut g = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if commits < g.0 {
            return;
        }
        if commits > g.0 || g.1.len() >= Self::MAX {
            g.0 = commits;
            g.1.clear();
        }
        g.1.insert(key, counts);
    }
}

/// A page of parked tasks.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueuePage {
    pub items: Vec<Turn>,
    pub total: i64,
    /// Open turns per agent: `{"inbox": 3}`.
    pub counts: serde_json::Map<String, serde_json::Value>,
    /// Pass back as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The most words a search (of the queue, the history or recent tasks)
/// takes.
pub const MAX_SEARCH_WORDS: usize = 32;

/// The most characters (not bytes: a word in Chinese takes three bytes a
/// character) a search takes; its refusal says "1,000".
pub const MAX_SEARCH_CHARS: usize = 1_000;

/// A person's search, `None` when it holds no word, refused when longer
/// than [`MAX_SEARCH_WORDS`] or [`MAX_SEARCH_CHARS`]: every word is
/// matched against each task or turn the search reads (the queue's and the
/// history's searches walk the index's entries of each word), so a search
/// of a few hundred common words held a reader for seconds.
fn bounded_search(text: Option<String>) -> Result<Option<String>, QueryError> {
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return Ok(None);
    };
    if text.split_whitespace().nth(MAX_SEARCH_WORDS).is_some()
        || text.chars().nth(MAX_SEARCH_CHARS).is_some()
    {
        return Err(QueryError::Invalid(format!(
            "a search takes at most {MAX_SEARCH_WORDS} words and 1,000 characters"
        )));
    }
    Ok(Some(text))
}

/// What `GET /api/tasks` lists: recent tasks, narrowed.
#[derive(Debug, Clone, Default)]
pub struct TasksQuery {
    pub agent_id: Option<String>,
    pub state: Option<TaskState>,
    /// Only the tasks whose request's first line or id holds every word.
    pub text: Option<String>,
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

/// A task with everything a person needs to decide on it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskDetail {
    pub task: Task,
    pub agent_id: String,
    /// The tenant of its agent; absent in the default tenant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub dialect: String,
    pub turns: Vec<Turn>,
    pub decisions: Vec<DecisionRecord>,
    /// The turn waiting for a decision, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_turn: Option<Turn>,
    /// Chain links: the task this one was chained from, and the hops it fired.
    pub chain: ChainLinks,
    /// The task this one goes on in: its peer answered a decision on it
    /// with a new task (a peer that starts a task per message does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continued_in: Option<String>,
    /// The task this one continues (see `continued_in`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continues: Option<String>,
    /// Whether the task this one continues has been archived (its link
    /// leads to the archive, not to a task here).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub continues_archived: bool,
}

/// A task's place in chains.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainLinks {
    pub parent: Option<ChainLink>,
    pub children: Vec<ChainLink>,
}

impl ChainLinks {
    /// The links of a task from the hop that started it and the hops it
    /// fired; `kept` says whether a task is still here (not archived).
    pub fn of<E>(
        parent: Option<Hop>,
        children: Vec<Hop>,
        mut kept: impl FnMut(&str) -> Result<bool, E>,
    ) -> Result<ChainLinks, E> {
        let mut link = |h: Hop, other: Option<String>| -> Result<ChainLink, E> {
            let archived = match &other {
                Some(id) => !kept(id)?,
                None => false,
            };
            Ok(ChainLink {
                hop_id: h.id,
                rule_id: h.rule_id,
                task_id: other,
                state: h.state,
                reason: h.reason,
                archived,
            })
        };
        let parent = match parent {
            Some(h) => {
                let p = Some(h.parent_task_id.clone());
                Some(link(h, p)?)
            }
            None => None,
        };
        let children = children
            .into_iter()
            .map(|h| {
                let c = h.child_task_id.clone();
                link(h, c)
            })
            .collect::<Result<_, E>>()?;
        Ok(ChainLinks { parent, children })
    }
}

/// One hop seen from a task: the task on its other end (none yet for a
/// gated, pending, refused or push hop), the rule and how it went.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainLink {
    pub hop_id: String,
    pub rule_id: String,
    pub task_id: Option<String>,
    pub state: String,
    pub reason: Option<String>,
    /// Whether the task on the other end has been archived (its link leads
    /// to the archive, not to a task here).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub archived: bool,
}

/// One decided turn.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryItem {
    pub decision: DecisionRecord,
    pub turn: Turn,
}

/// A page of history, newest decision first.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryPage {
    pub items: Vec<HistoryItem>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A page of recent tasks, newest first.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPage {
    pub items: Vec<crate::store::queue::TaskSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// With a search: how many tasks this page read to find its items (at
    /// most [`q::SEARCH_READS`]; a page that read that many may hold fewer
    /// items than asked for, and its cursor reads on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub searched: Option<usize>,
}

/// Why a queue or history request was refused.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("{0}")]
    Invalid(String),
    #[error("no task `{0}`")]
    NotFound(String),
    #[error("storage failure: {0}")]
    Store(#[from] crate::store::Error),
}

fn encode_cursor(ms: i64, id: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{ms}:{id}"))
}

/// The refusal of cursor `c`, which no page of this server handed out.
fn not_issued(c: &str) -> QueryError {
    QueryError::Invalid(format!("cursor `{c}` is not one this server issued"))
}

fn decode_cursor(c: &str) -> Result<(i64, String), QueryError> {
    let bad = || not_issued(c);
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(c)
        .map_err(|_| bad())?;
    let s = String::from_utf8(raw).map_err(|_| bad())?;
    let (ms, id) = s.split_once(':').ok_or_else(bad)?;
    Ok((ms.parse().map_err(|_| bad())?, id.to_owned()))
}

/// A cursor of recent tasks: `(time, state, rowid)`, the state and rowid
/// written `state.rowid`.
fn encode_recent((ms, state, rowid): q::RecentPosition) -> String {
    encode_cursor(ms, &format!("{state}.{rowid}"))
}

fn decode_recent(c: &str) -> Result<q::RecentPosition, QueryError> {
    let bad = || not_issued(c);
    let (ms, pos) = decode_cursor(c)?;
    let (state, rowid) = pos.split_once('.').ok_or_else(bad)?;
    Ok((
        ms,
        state.parse().map_err(|_| bad())?,
        rowid.parse().map_err(|_| bad())?,
    ))
}

/// A cursor holding `(time, position)`.
fn decode_position(c: &str) -> Result<(i64, i64), QueryError> {
    let (ms, pos) = decode_cursor(c)?;
    let pos = pos.parse().map_err(|_| not_issued(c))?;
    Ok((ms, pos))
}

fn page_limit(limit: Option<usize>) -> Result<usize, QueryError> {
    match limit {
        None => Ok(50),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        Some(n) => Err(QueryError::Invalid(format!(
            "limit must be between 1 and {MAX_PAGE}, got {n}"
        ))),
    }
}

impl Engine {
    /// Parked tasks, oldest first unless `newest_first`.
    pub async fn queue(&self, query: QueueQuery) -> Result<QueuePage, QueryError> {
        if let Some(s) = query.state
            && !s.is_interrupted()
        {
            return Err(QueryError::Invalid(format!(
                "the queue holds input-required and auth-required tasks, not {}",
                s.short_name()
            )));
        }
        let filter = QueueFilter {
            agent_id: query.agent_id.filter(|a| !a.is_empty()),
            state: query.state,
            text: bounded_search(query.text)?,
            newest_first: query.newest_first,
            limit: page_limit(query.limit)?,
            after: query
                .cursor
                .as_deref()
                .filter(|c| !c.is_empty())
                .map(decode_position)
                .transpose()?,
        };
        let page = if q::counts_are_kept(&filter) {
            // Counts kept by the store are read with the page. Without a
            // state filter the page walks one index of the open turns for
            // at most a page of entries: read here, as GetTask is, since
            // the blocking pool's two thread switches cost more than such
            // a read. A state filter may read past many entries: on the
            // pool.
            if filter.state.is_none() {
                self.inner
                    .store
                    .read_point(|conn| q::list_queue(conn, &filter, None))?
            } else {
                self.inner
                    .store
                    .read(move |conn| q::list_queue(conn, &filter, None))
                    .await?
            }
        } else {
            self.searched_page(filter).await?
        };
        let next_cursor = if page.more {
            page.turns
                .last()
                .map(|(t, pos)| encode_cursor(t.opened_ms, &pos.to_string()))
        } else {
            None
        };
        Ok(QueuePage {
            counts: page
                .counts
                .into_iter()
                .map(|(a, n)| (a, n.into()))
                .collect(),
            items: page.turns.into_iter().map(|(t, _)| t).collect(),
            total: page.total,
            next_cursor,
        })
    }

    /// A page narrowed by a search. Its total is counted on the search
    /// index (milliseconds with many matches), so it is cached until the
    /// next commit, and missing totals are taken by one page at a time: a
    /// page that waited finds them taken by the one before it, if that one
    /// began after this page's commit count.
    async fn searched_page(&self, filter: QueueFilter) -> Result<q::QueuePage, QueryError> {
        let key: CountsKey = (
            filter.agent_id.clone(),
            filter.state.map(|s| s.number()),
            filter.text.clone(),
        );
        self.inner.store.index_search().await?;
        // Read before the query: counts taken after a later commit are only
        // newer than this number promises, never older.
        let commits = self.inner.store.commits();
        let cache = &self.inner.queue_counts;
        let mut cached = cache.get(commits, &key);
        let mut _counting = None;
        if cached.is_none() {
            let turn = cache.counting.lock().await;
            cached = cache.get(commits, &key);
            if cached.is_none() {
                _counting = Some(turn);
            }
        }
        let hit = cached.is_some();
        let page = self
            .inner
            .store
            .read(move |conn| q::list_queue(conn, &filter, cached))
            .await?;
        if !hit {
            let counts = QueueCounts {
                total: page.total,
                counts: page.counts.clone(),
            };
            cache.put(commits, key, counts);
        }
        Ok(page)
    }

    /// Recent tasks of every agent and caller (or of one agent, in one
    /// state, holding some words), newest first.
    pub async fn recent_tasks(&self, query: TasksQuery) -> Result<TaskPage, QueryError> {
        let TasksQuery {
            agent_id,
            state,
            text,
            limit,
            cursor,
        } = query;
        let agent_id = agent_id.filter(|a| !a.is_empty());
        let limit = page_limit(limit)?;
        let before = cursor
            .as_deref()
            .filter(|c| !c.is_empty())
            .map(decode_recent)
            .transpose()?;
        let words: Vec<String> = bounded_search(text)?
            .as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_lowercase)
            .collect();
        if !words.is_empty() {
            let found = self
                .inner
                .store
                .read(move |conn| {
                    q::search_recent_tasks(
                        conn,
                        limit,
                        before,
                        agent_id.as_deref(),
                        state,
                        &words,
                        q::SEARCH_READS,
                    )
                })
                .await?;
            return Ok(TaskPage {
                next_cursor: found.resume.map(encode_recent),
                searched: Some(found.read),
                items: found.tasks.into_iter().map(|(t, _)| t).collect(),
            });
        }
        let (rows, more) = self
            .inner
            .store
            .read(move |conn| q::recent_tasks(conn, limit, before, agent_id.as_deref(), state))
            .await?;
        let next_cursor = if more {
            rows.last()
                .map(|(t, rowid)| encode_recent(q::recent_position(t, *rowid)))
        } else {
            None
        };
        Ok(TaskPage {
            items: rows.into_iter().map(|(t, _)| t).collect(),
            next_cursor,
            searched: None,
        })
    }

    /// The chain links of an archived task, from the hops its archive
    /// record holds.
    pub fn archived_chain(
        &self,
        parent: Option<Hop>,
        children: Vec<Hop>,
    ) -> Result<ChainLinks, QueryError> {
        Ok(self
            .inner
            .store
            .read_point(|conn| ChainLinks::of(parent, children, |id| tasks::kept(conn, id)))?)
    }

    /// A task with its turns and decisions (whoever created it: the person
    /// sees every task).
    pub async fn task_detail(&self, task_id: &str) -> Result<TaskDetail, QueryError> {
        let tid = task_id.to_owned();
        let found = self
            .inner
            .store
            .read(move |conn| {
                let Some((head, task)) = tasks::load(conn, &tid, None, true)? else {
                    return Ok(None);
                };
                let turns = q::turns_of_task(conn, &tid)?;
                let decisions = q::decisions_of_task(conn, &tid)?;
                let (parent, children) = crate::store::dispatch::links(conn, &tid)?;
                let chain = ChainLinks::of(parent, children, |id| tasks::kept(conn, id))?;
                let continuation = crate::store::peers::continuation(conn, &tid)?;
                Ok(Some((head, task, turns, decisions, chain, continuation)))
            })
            .await?;
        let (head, task, turns, decisions, chain, continuation) =
            found.ok_or_else(|| QueryError::NotFound(task_id.to_owned()))?;
        let open_turn = turns.iter().find(|t| t.closed_ms.is_none()).cloned();
        Ok(TaskDetail {
            task,
            tenant: crate::config::tenant_of(&head.agent_id).map(str::to_owned),
            agent_id: head.agent_id,
            dialect: head.dialect,
            turns,
            decisions,
            open_turn,
            chain,
            continued_in: continuation.continued_in,
            continues: continuation.continues,
            continues_archived: continuation.continues_archived,
        })
    }

    /// Decided turns, newest first.
    pub async fn history(
        &self,
        agent_id: Option<String>,
        text: Option<String>,
        limit: Option<usize>,
        cursor: Option<String>,
    ) -> Result<HistoryPage, QueryError> {
        let filter = HistoryFilter {
            agent_id: agent_id.filter(|a| !a.is_empty()),
            text: bounded_search(text)?,
            limit: page_limit(limit)?,
            before: cursor
                .as_deref()
                .filter(|c| !c.is_empty())
                .map(decode_position)
                .transpose()?,
        };
        if filter.text.is_some() {
            self.inner.store.index_search().await?;
        }
        let (rows, more) = self
            .inner
            .store
            .read(move |conn| q::list_history(conn, &filter))
            .await?;
        let next_cursor = if more {
            rows.last()
                .map(|(d, _, pos)| encode_cursor(d.created_ms, &pos.to_string()))
        } else {
            None
        };
        Ok(HistoryPage {
            items: rows
                .into_iter()
                .map(|(decision, turn, _)| HistoryItem { decision, turn })
                .collect(),
            next_cursor,
        })
    }

    /// The whole (filtered) history, newest first, in pages of [`MAX_PAGE`].
    pub async fn history_all(
        &self,
        agent_id: Option<String>,
        text: Option<String>,
    ) -> Result<Vec<HistoryItem>, QueryError> {
        let mut out = Vec::new();
        let mut cursor = None;
        loop {
            let page = self
                .history(agent_id.clone(), text.clone(), Some(MAX_PAGE), cursor)
                .await?;
            out.extend(page.items);
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return Ok(out),
            }
        }
    }
}

/// History as JSON Lines: one decision with its turn per line.
pub fn to_jsonl(items: &[HistoryItem]) -> String {
    let mut out = String::new();
    for item in items {
        out.push_str(&serde_json::to_string(item).unwrap_or_default());
        out.push('\n');
    }
    out
}

/// History as CSV (RFC 4180): one row per decision.
pub fn to_csv(items: &[HistoryItem]) -> String {
    let header = [
        "decision_id",
        "decided_at",
        "kind",
        "actor",
        "delivery",
        "delivery_error",
        "task_id",
        "agent_id",
        "turn_id",
        "state",
        "request",
        "parked_at",
        "payload",
    ];
    let mut out = header.join(",");
    out.push_str("\r\n");
    for i in items {
        let d = &i.decision;
        let row = [
            d.id.clone(),
            crate::a2a::types::format_timestamp(d.created_ms),
            d.kind.clone(),
            d.actor.clone(),
            d.delivery.clone(),
            d.delivery_error.clone().unwrap_or_default(),
            d.task_id.clone(),
            d.agent_id.clone(),
            d.turn_id.clone(),
            i.turn.state.short_name().to_owned(),
            i.turn.preview.clone(),
            crate::a2a::types::format_timestamp(i.turn.opened_ms),
            d.payload.to_string(),
        ];
        out.push_str(
            &row.iter()
                .map(|f| csv_field(f))
                .collect::<Vec<_>>()
                .join(","),
        );
        out.push_str("\r\n");
    }
    out
}

/// Quotes a CSV field when needed; a leading `=`, `+`, `-` or `@` is
/// prefixed with `'` so spreadsheets do not run agent text as a formula.
pub(crate) fn csv_field(f: &str) -> String {
    let f = if f.starts_with(['=', '+', '-', '@']) {
        format!("'{f}")
    } else {
        f.to_owned()
    };
    if f.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_and_formulas_defused() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("=HYPERLINK(1)"), "'=HYPERLINK(1)");
    }

    /// Searches that find their total missing at once count it once: the
    /// others wait and read it from the cache. Pages without a search read
    /// the kept counts and take none.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_burst_of_searches_takes_the_counts_once() {
        use crate::a2a::types::TaskStatus;
        use crate::store::tasks::{NewTask, insert_task};
        let dir = tempfile::tempdir().unwrap();
        let store =
            crate::store::Store::open(&dir.path().join("q.db"), crate::store::Durability::Normal)
                .unwrap();
        store
            .write(|conn| {
                for i in 0..2_000 {
                    let id = format!("t{i}");
                    let submitted = TaskStatus {
                        state: TaskState::Submitted,
                        message: None,
                        timestamp: None,
                    };
                    let task = NewTask::for_test((&id, "inbox", "local", "c"), submitted, i);
                    insert_task(conn, &task)?;
                    q::sync_turn_with(
                        conn,
                        &id,
                        "inbox",
                        TaskState::Submitted,
                        TaskState::InputRequired,
                        i,
                        Some(q::Opening::served(format!(
                            "{} the invoice",
                            if i % 2 == 0 { "pay" } else { "file" }
                        ))),
                    )?;
                }
                Ok(())
            })
            .await
            .unwrap();
        let cfg = crate::config::Config::parse(
            "[[agents]]\nid = \"inbox\"\n",
            std::path::Path::new("t.toml"),
        )
        .unwrap();
        let engine = Engine::new(store, &cfg.agents, cfg.limits);
        let taken = || {
            engine
                .inner
                .queue_counts
                .taken
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        let pages = futures::future::join_all((0..16).map(|i| {
            let engine = engine.clone();
            let query = QueueQuery {
                text: (i % 4 != 0).then(|| "pay".to_owned()),
                ..QueueQuery::default()
            };
            tokio::spawn(async move { engine.queue(query).await })
        }))
        .await;
        for (i, page) in pages.into_iter().enumerate() {
            let page = page.unwrap().unwrap();
            let expected = if i % 4 == 0 { 2_000 } else { 1_000 };
            assert_eq!(page.total, expected, "page {i}");
            assert_eq!(page.counts["inbox"], 2_000);
        }
        assert_eq!(taken(), 1);
        // Without a search, nothing is counted or cached.
        engine.queue(QueueQuery::default()).await.unwrap();
        assert_eq!(taken(), 1);
    }

    #[test]
    fn cursors_round_trip_and_bad_ones_are_refused() {
        let c = encode_cursor(42, "abc");
        assert_eq!(decode_cursor(&c).unwrap(), (42, "abc".to_owned()));
        assert!(decode_cursor("!!").is_err());
    }
}
