//! `countersign chains …`: list, add and remove chain rules, see recent
//! hops and release or drop a gated one; and `countersign deliveries retry`.

use std::path::Path;

use serde_json::{Value, json};

use super::client::Api;
use super::human::{first_line, table};
use super::{CliError, Output, unreadable};
use crate::dispatch::chains::{Action, ChainRule};

/// One side of a rule, for a table: `agent inbox` / `peer b`.
fn trigger_of(r: &ChainRule) -> String {
    let who = match (&r.trigger.agent, &r.trigger.peer) {
        (Some(a), _) => format!("agent {a}"),
        (_, Some(p)) => format!("peer {p}"),
        _ => "-".into(),
    };
    let skill = r
        .trigger
        .skill
        .as_deref()
        .map(|s| format!(" skill {s}"))
        .unwrap_or_default();
    format!("{who} {}{skill}", r.trigger.states.join("|"))
}

fn action_of(r: &ChainRule) -> String {
    match &r.action {
        Action::Push { url, .. } => format!("push {url}"),
        Action::Send { peer, .. } => format!("send to {peer}"),
    }
}

/// `countersign chains list`
pub async fn chains_list(data_dir: &Path, json: bool) -> Result<Output, CliError> {
    let api = Api::connect(data_dir)?;
    let answer = api.get(&["chains"], &[]).await?;
    if json {
        return Ok(Output::json(&answer));
    }
    let rules: Vec<ChainRule> =
        serde_json::from_value(answer["rules"].clone()).map_err(|e| unreadable("rules", e))?;
    if rules.is_empty() {
        return Ok(Output::new("no chain rules\n"));
    }
    let rows: Vec<Vec<String>> = rules
        .iter()
        .map(|r| {
            vec![
                r.id.clone(),
                trigger_of(r),
                action_of(r),
                if r.gate { "yes" } else { "no" }.into(),
                r.source.clone(),
            ]
        })
        .collect();
    Ok(Output::new(table(
        &["ID", "WHEN", "THEN", "GATE", "FROM"],
        &rows,
    )))
}

/// `countersign chains add …`: the rule as JSON (built from the flags).
pub async fn chains_add(data_dir: &Path, rule: Value) -> Result<Output, CliError> {
    let api = Api::connect(data_dir)?;
    let answer = api.post(&["chains"], &rule).await?;
    let rule: ChainRule =
        serde_json::from_value(answer["rule"].clone()).map_err(|e| unreadable("rule", e))?;
    Ok(Output::new(format!(
        "added chain rule {}: when {} then {}{}",
        rule.id,
        trigger_of(&rule),
        action_of(&rule),
        if rule.gate { " (gated)" } else { "" }
    )))
}

/// `countersign chains remove ID`
pub async fn chains_remove(data_dir: &Path, id: &str) -> Result<Output, CliError> {
    let api = Api::connect(data_dir)?;
    api.delete(&["chains", id]).await?;
    Ok(Output::new(format!("removed chain rule {id}")))
}

/// `countersign chains hops`: the newest hops and how they went.
pub async fn chains_hops(data_dir: &Path, json: bool) -> Result<Output, CliError> {
    let api = Api::connect(data_dir)?;
    let answer = api.get(&["chains", "hops"], &[("limit", "50")]).await?;
    if json {
        return Ok(Output::json(&answer));
    }
    let hops = answer["hops"].as_array().cloned().unwrap_or_default();
    if hops.is_empty() {
        return Ok(Output::new("no chain hops yet\n"));
    }
    let s = |h: &Value, k: &str| h[k].as_str().unwrap_or("-").to_owned();
    let rows: Vec<Vec<String>> = hops
        .iter()
        .map(|h| {
            vec![
                s(h, "id"),
                s(h, "ruleId"),
                match h["parent"]["preview"].as_str() {
                    Some(p) => first_line(
                        &format!("{}: {p}", h["parent"]["agentId"].as_str().unwrap_or("-")),
                        48,
                    ),
                    // The task that fired it is gone only once archived.
                    None => "(archived)".to_owned(),
                },
                s(h, "parentTaskId"),
                s(h, "childTaskId"),
                s(h, "state"),
                first_line(h["reason"].as_str().unwrap_or(""), 70),
            ]
        })
        .collect();
    Ok(Output::new(table(
        &[
            "HOP",
            "RULE",
            "ABOUT",
            "FROM TASK",
            "TO TASK",
            "STATE",
            "REASON",
        ],
        &rows,
    )))
}

/// `countersign chains release HOP` / `chains drop HOP`.
pub async fn chains_gate(data_dir: &Path, hop: &str, release: bool) -> Result<Output, CliError> {
    let api = Api::connect(data_dir)?;
    let verb = if release { "release" } else { "drop" };
    let answer = api.post(&["chains", "hops", hop, verb], &json!({})).await?;
    Ok(Output::new(format!(
        "hop {hop}: {}",
        answer["hop"]["state"].as_str().unwrap_or("?")
    )))
}

/// `countersign deliveries retry ID`: a dead letter is tried again.
pub async fn deliveries_retry(data_dir: &Path, id: &str) -> Result<Output, CliError> {
    let api = Api::connect(data_dir)?;
    api.post(&["outbox", id, "retry"], &json!({})).await?;
    Ok(Output::new(format!("delivery {id} queued again")))
}
