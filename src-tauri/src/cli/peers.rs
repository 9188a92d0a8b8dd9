//! The CLI commands for peers: add, list and remove them, start a task on
//! one (and watch it until it finishes or parks), create a webhook
//! subscription for another tool's push config, and read the outbox.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use super::client::Api;
use super::human::{self, OutboxView, PeerView};
use super::{CliError, Output, attach, unreadable};
use crate::a2a::types::Task;
use crate::clock::now_ms;

/// How often `send --watch` looks at the task.
const WATCH_EVERY: Duration = Duration::from_millis(500);
/// How long `send --watch` waits for the task to finish or park.
const WATCH_LIMIT: Duration = Duration::from_secs(600);

/// How `peers add` authenticates to the peer.
#[derive(Debug, Default)]
pub struct PeerAuth {
    pub bearer: Option<String>,
    pub api_key: Option<String>,
    pub api_key_header: Option<String>,
    /// `K:V`, as typed.
    pub headers: Vec<String>,
}

/// `K:V` (or `K: V`) as a header name and value.
fn header(kv: &str) -> Result<(String, String), CliError> {
    match kv.split_once(':') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
        _ => Err(CliError::Usage(format!(
            "--header `{kv}` is not NAME:VALUE"
        ))),
    }
}

/// `countersign peers add URL [--id ID] [--name NAME] [--header K:V]…
/// [--bearer TOKEN] [--api-key KEY [--api-key-header H]]`. The instance
/// reads the peer's card before it stores the peer.
pub async fn peers_add(
    data_dir: &Path,
    url: &str,
    id: Option<String>,
    name: Option<String>,
    auth: PeerAuth,
) -> Result<Output, CliError> {
    let headers = auth
        .headers
        .iter()
        .map(|kv| header(kv))
        .collect::<Result<BTreeMap<_, _>, _>>()?;
    let mut body = json!({"url": url});
    for (key, value) in [
        ("id", id),
        ("name", name),
        ("bearer", auth.bearer),
        ("apiKey", auth.api_key),
        ("apiKeyHeader", auth.api_key_header),
    ] {
        if let Some(v) = value {
            body[key] = json!(v);
        }
    }
    if !headers.is_empty() {
        body["headers"] = json!(headers);
    }
    let api = Api::connect(data_dir)?;
    let answer = api.post(&["peers"], &body).await?;
    let peer: PeerView =
        serde_json::from_value(answer["peer"].clone()).map_err(|e| unreadable("peer", e))?;
    Ok(Output::new(human::peer_added(&peer)))
}

/// `countersign peers list`.
pub async fn peers_list(data_dir: &Path, json: bool) -> Result<Output, CliError> {
    let api = Api::connect(data_dir)?;
    let answer = api.get(&["peers"], &[]).await?;
    if json {
        return Ok(Output::json(&answer));
    }
    let items: Vec<PeerView> =
        serde_json::from_value(answer["peers"].clone()).map_err(|e| unreadable("peers", e))?;
    Ok(Output::new(human::peers(&items, now_ms())))
}

/// `countersign peers remove ID`: its watched tasks stay.
pub async fn peers_remove(data_dir: &Path, id: &str) -> Result<Output, CliError> {
    let api = Api::connect(data_dir)?;
    api.delete(&["peers", id]).await?;
    Ok(Output::new(format!("removed peer {id}")))
}

/// `countersign peers trust ID`: accepts the peer's changed card.
pub async fn peers_trust(data_dir: &Path, id: &str) -> Result<Output, CliError> {
    let api = Api::connect(data_dir)?;
    let answer = api.post(&["peers", id, "trust"], &json!({})).await?;
    let peer: PeerView =
        serde_json::from_value(answer["peer"].clone()).map_err(|e| unreadable("peer", e))?;
    Ok(Output::new(match peer.card_change {
        None => format!("peer {id}: its current card is trusted; held deliveries go out now"),
        Some(change) => human::card_change_line(id, &change),
    }))
}

/// `countersign send PEER TEXT [--file PATH]… [--watch]`: starts a task on
/// the peer, mirrored here. With `watch`, each new state goes to `progress`
/// (one line each) until the task finishes or parks for a decision.
pub async fn send(
    data_dir: &Path,
    peer: &str,
    text: String,
    files: &[PathBuf],
    watch: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<Output, CliError> {
    let attached = files
        .iter()
        .map(|p| attach(p))
        .collect::<Result<Vec<_>, _>>()?;
    let api = Api::connect(data_dir)?;
    let answer = api
        .post(
            &["peers", peer, "tasks"],
            &json!({"text": text, "files": attached}),
        )
        .await
        .map_err(|e| match e {
            // What the instance keeps of a send it began (see
            // `Engine::send_to_peer`) goes out when it starts again.
            CliError::Cut { url, reason, .. } => CliError::Cut {
                url,
                reason,
                then: "; if it had begun sending the task, it sends it when it starts again \
                       (`countersign deliveries` lists it as `start`)"
                    .into(),
            },
            e => e,
        })?;
    let task: Task =
        serde_json::from_value(answer["task"].clone()).map_err(|e| unreadable("task", e))?;
    let started = format!(
        "started task {} on {peer}: {}",
        task.id,
        task.status.state.short_name()
    );
    if !watch {
        return Ok(Output::new(started));
    }
    progress(&started);
    watch_task(&api, &task, progress).await
}

/// Polls a task until it is terminal (nothing more to print) or parked
/// (how to decide it); each new state line goes to `progress`.
async fn watch_task(
    api: &Api,
    started: &Task,
    progress: &mut dyn FnMut(&str),
) -> Result<Output, CliError> {
    let id = started.id.as_str();
    // The start line showed the state alone.
    let mut last = started.status.state.short_name().to_owned();
    let deadline = Instant::now() + WATCH_LIMIT;
    loop {
        let detail = api.get(&["tasks", id], &[]).await?;
        let task: Task =
            serde_json::from_value(detail["task"].clone()).map_err(|e| unreadable("task", e))?;
        let line = human::status_line(&task);
        if line != last {
            progress(&line);
            last = line;
        }
        let state = task.status.state;
        if state.is_terminal() {
            return Ok(Output {
                text: String::new(),
            });
        }
        if state.is_interrupted() {
            return Ok(Output::new(format!(
                "parked: decide with countersign approve|reply|reject {id}"
            )));
        }
        if Instant::now() + WATCH_EVERY > deadline {
            return Err(CliError::StillRunning(format!(
                "task {id} is still {} after {} minutes; follow it with `countersign show {id}`",
                state.short_name(),
                WATCH_LIMIT.as_secs() / 60
            )));
        }
        tokio::time::sleep(WATCH_EVERY).await;
    }
}

/// `countersign subscribe PEER`: a webhook URL and token for another tool's
/// push config, one per line.
pub async fn subscribe(data_dir: &Path, peer: &str) -> Result<Output, CliError> {
    let api = Api::connect(data_dir)?;
    let sub = api
        .post(&["peers", peer, "subscriptions"], &json!({}))
        .await?;
    match (sub["url"].as_str(), sub["token"].as_str()) {
        (Some(url), Some(token)) => Ok(Output::new(format!("url: {url}\ntoken: {token}"))),
        _ => Err(CliError::Server(format!(
            "the subscription the instance sent has no url or token: {sub}"
        ))),
    }
}

/// `countersign deliveries [--failed]`: calls owed to peers, newest first.
pub async fn deliveries(data_dir: &Path, failed: bool, json: bool) -> Result<Output, CliError> {
    let api = Api::connect(data_dir)?;
    let flag = if failed { "true" } else { "false" };
    let answer = api.get(&["outbox"], &[("failed", flag)]).await?;
    if json {
        return Ok(Output::json(&answer));
    }
    let items: Vec<OutboxView> =
        serde_json::from_value(answer["items"].clone()).map_err(|e| unreadable("outbox", e))?;
    Ok(Output::new(human::deliveries(&items, failed, now_ms())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_name_colon_value() {
        assert_eq!(
            header("X-Team: blue").unwrap(),
            ("X-Team".into(), "blue".into())
        );
        assert_eq!(header("a:b:c").unwrap(), ("a".into(), "b:c".into()));
        assert_eq!(header("X-Empty:").unwrap(), ("X-Empty".into(), "".into()));
        for bad in ["bad", ":v", ""] {
            assert!(matches!(header(bad), Err(e) if e.exit_code() == 2), "{bad}");
        }
    }

    #[tokio::test]
    async fn bad_headers_and_files_are_usage_errors_before_any_instance_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let auth = PeerAuth {
            headers: vec!["bad".into()],
            ..PeerAuth::default()
        };
        let r = peers_add(dir.path(), "http://h/", None, None, auth).await;
        assert!(matches!(&r, Err(e) if e.exit_code() == 2), "{r:?}");
        let missing = dir.path().join("missing.txt");
        let r = send(dir.path(), "p", "x".into(), &[missing], false, &mut |_| {}).await;
        assert!(matches!(&r, Err(e) if e.exit_code() == 2), "{r:?}");
        let r = peers_list(dir.path(), false).await;
        assert!(
            matches!(&r, Err(e @ CliError::NoInstance(_)) if e.exit_code() == 1),
            "{r:?}"
        );
    }
}
