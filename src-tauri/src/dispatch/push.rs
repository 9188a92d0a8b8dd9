//! One push notification as it goes on the wire: the body in the config's
//! dialect, the headers every SDK's receiver looks for, and what the
//! receiver's answer means for the outbox (done, retry later, give up).
//!
//! A2A 1.0 receivers get one `StreamResponse` per POST with
//! `Authorization: <scheme> <credentials>` from the config; 0.3 and pre-0.3
//! receivers get the whole `Task` in their dialect. The config's token goes
//! in both `A2A-Notification-Token` (1.0 SDKs) and `X-A2A-Notification-Token`
//! (0.3 SDKs). `A2A-Notification-Id` names the event; it is the same on
//! every retry, so a receiver can drop duplicates (delivery is at least once).

use std::time::Duration;

use crate::a2a::types::{AuthenticationInfo, StreamResponse};
use crate::a2a::v0_3::{self, Dialect};

/// Why a delivery did not succeed, and whether trying again may help.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub message: String,
    pub transient: bool,
    /// Our own storage failed, not the receiver: tried again for as long
    /// as it takes, never given up on.
    pub ours: bool,
    /// Not a failure of the receiver's: the item waits until then (ms since
    /// the epoch), and that wait counts for nothing towards giving up.
    pub not_before: Option<i64>,
}

impl Failure {
    pub fn permanent(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            transient: false,
            ours: false,
            not_before: None,
        }
    }

    pub fn transient(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            transient: true,
            ours: false,
            not_before: None,
        }
    }

    /// A storage failure of ours (a full disk, say).
    pub fn storage(e: &crate::store::Error) -> Failure {
        Failure {
            message: format!("storage failure: {e}"),
            transient: true,
            ours: true,
            not_before: None,
        }
    }

    /// Not tried now: tried again at `at_ms`, as often as it takes.
    pub fn not_before(message: impl Into<String>, at_ms: i64) -> Failure {
        Failure {
            message: message.into(),
            transient: true,
            ours: false,
            not_before: Some(at_ms),
        }
    }
}

/// Where a notification goes and how it authenticates.
pub struct Target<'a> {
    pub url: &'a url::Url,
    pub authentication: Option<&'a AuthenticationInfo>,
    pub token: Option<&'a str>,
    /// `v1`, `v0.3` or `legacy`: the dialect the config was set in.
    pub dialect: &'a str,
}

/// The body for a receiver of `dialect`: the event itself for 1.0, the task
/// (the snapshot taken with the event) for older dialects. Written straight
/// from the types, as the answers are.
pub fn body(dialect: &str, payload: &StreamResponse) -> String {
    let old = match dialect {
        "v0.3" => Dialect::V03,
        "legacy" => Dialect::Legacy,
        _ => return text(payload),
    };
    text(&v0_3::OldEvent(payload, old, false))
}

/// Writing these fails only for map keys that are not strings, which none
/// of them have.
fn text<T: serde::Serialize>(v: &T) -> String {
    crate::a2a::to_json_sized(v, 1024).unwrap_or_else(|_| "null".into())
}

/// POSTs one notification and classifies the answer.
pub async fn post(
    http: &reqwest::Client,
    target: &Target<'_>,
    body: String,
    event_id: &str,
    timeout: Duration,
) -> Result<(), Failure> {
    let content_type = if target.dialect == "v1" {
        "application/a2a+json"
    } else {
        "application/json"
    };
    let mut req = http
        .post(target.url.clone())
        .timeout(timeout)
        .header(reqwest::header::CONTENT_TYPE, content_type)
        .header("A2A-Notification-Id", event_id)
        .body(body);
    if let Some(a) = target.authentication
        && let Some(c) = a.credentials.as_deref().filter(|c| !c.is_empty())
    {
        req = req.header(
            reqwest::header::AUTHORIZATION,
            format!("{} {c}", a.scheme.trim()),
        );
    }
    if let Some(t) = target.token.filter(|t| !t.is_empty()) {
        req = req
            .header("A2A-Notification-Token", t)
            .header("X-A2A-Notification-Token", t);
    }
    let resp = req.send().await.map_err(|e| request_failure(&e))?;
    answer(resp.status(), target.url)
}

/// What a receiver's status code means.
fn answer(status: reqwest::StatusCode, url: &url::Url) -> Result<(), Failure> {
    let code = status.as_u16();
    match code {
        200..=299 => Ok(()),
        300..=399 => Err(Failure::permanent(format!(
            "{url} answered HTTP {code} (a redirect); redirects are not followed, so set the final URL"
        ))),
        408 | 425 | 429 | 500..=599 => {
            Err(Failure::transient(format!("{url} answered HTTP {code}")))
        }
        _ => Err(Failure::permanent(format!("{url} answered HTTP {code}"))),
    }
}

/// A request that got no answer: refused by the outbound policy (final),
/// or a network problem (worth retrying).
fn request_failure(e: &reqwest::Error) -> Failure {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(refused) = s.downcast_ref::<super::ssrf::Refused>() {
            return Failure::permanent(refused.to_string());
        }
        source = s.source();
    }
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message = format!("{message}: {s}");
        source = s.source();
    }
    if e.is_builder() {
        Failure::permanent(message)
    } else {
        Failure::transient(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_are_classified() {
        let url = url::Url::parse("https://hooks.example/x").unwrap();
        assert!(answer(reqwest::StatusCode::NO_CONTENT, &url).is_ok());
        let redirect = answer(reqwest::StatusCode::FOUND, &url).unwrap_err();
        assert!(!redirect.transient && redirect.message.contains("redirect"));
        assert!(
            answer(reqwest::StatusCode::SERVICE_UNAVAILABLE, &url)
                .unwrap_err()
                .transient
        );
        assert!(
            answer(reqwest::StatusCode::TOO_MANY_REQUESTS, &url)
                .unwrap_err()
                .transient
        );
        assert!(
            !answer(reqwest::StatusCode::UNAUTHORIZED, &url)
                .unwrap_err()
                .transient
        );
    }

    #[test]
    fn old_dialects_get_the_task() {
        let task: crate::a2a::types::Task = serde_json::from_value(serde_json::json!({
            "id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}
        }))
        .unwrap();
        let ev = StreamResponse::Task(task);
        assert_eq!(
            body("v1", &ev),
            r#"{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}"#
        );
        assert_eq!(
            body("v0.3", &ev),
            r#"{"id":"t","contextId":"c","status":{"state":"working"},"kind":"task"}"#
        );
        assert_eq!(
            body("legacy", &ev),
            r#"{"id":"t","sessionId":"c","status":{"state":"working"}}"#
        );
    }
}
