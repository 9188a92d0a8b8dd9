//! What can go wrong talking to a peer, in words a person can act on: the
//! one place where transport failures (reqwest) and the peer's error bodies
//! (JSON-RPC errors, `google.rpc.Status`) become a [`ClientError`].

use std::error::Error as StdError;

use serde_json::Value;

use super::resolve::DnsFailure;
use crate::a2a::Error as A2aError;

/// Every way a call to a peer can fail.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The address in the peer's settings is not a usable http(s) URL.
    #[error("`{url}` is not a usable peer address: {reason}")]
    InvalidUrl { url: String, reason: String },
    /// The peer's settings cannot be turned into a request (a bad header).
    #[error("the peer's settings cannot be used: {0}")]
    Config(String),
    /// The request lacks something every peer needs; nothing was sent.
    #[error("the request is incomplete: {0}")]
    Incomplete(String),
    /// The host name does not resolve.
    #[error("cannot find the host `{host}`: {reason}")]
    Dns { host: String, reason: String },
    /// Nothing listens at the address.
    #[error("{0} refused the connection: nothing is listening there (is the peer running?)")]
    Refused(String),
    /// Any other failure to reach the peer or to read its answer.
    #[error("cannot talk to {url}: {reason}")]
    Connect { url: String, reason: String },
    /// The secure connection could not be set up (certificate, handshake).
    #[error("the secure connection to {url} failed: {reason}")]
    Tls { url: String, reason: String },
    /// No answer within the configured time.
    #[error("{0} did not answer in time")]
    Timeout(String),
    /// The peer answered with a redirect, which calls never follow.
    #[error("{from} redirects to {to}; redirects are not followed: use the final address")]
    Redirect { from: String, to: String },
    /// Discovery found no usable agent card.
    #[error("no usable agent card at {url}: {reason}")]
    BadCard { url: String, reason: String },
    /// The card is signed, but its signature cannot be verified.
    #[error("the agent card at {url} is signed but does not verify: {reason}")]
    BadSignature { url: String, reason: String },
    /// The peer wants (other) credentials: HTTP 401 or 403.
    #[error(
        "the peer refused our credentials (HTTP {status}): {message}; check the peer's auth settings"
    )]
    Unauthorized { status: u16, message: String },
    /// A non-success HTTP status without an A2A error in the body.
    #[error("the peer answered HTTP {status}: {body}")]
    Http { status: u16, body: String },
    /// An A2A error from the peer. `code` is the A2A (JSON-RPC) code when the
    /// error is one A2A defines (`-32001` task not found), whichever binding
    /// carried it; `reason` is its `ErrorInfo` reason (`TASK_NOT_FOUND`).
    #[error("the peer answered with an error: {message} ({reason}, code {code})")]
    Remote {
        code: i64,
        reason: String,
        message: String,
    },
    /// The answer does not follow the protocol: not JSON, wrong content
    /// type, unexpected shape.
    #[error("the peer's answer does not follow the A2A protocol: {0}")]
    Protocol(String),
    /// Something this client does not speak (gRPC, pre-0.3 dialect).
    #[error("not supported: {0}")]
    Unsupported(String),
}

impl ClientError {
    /// Whether trying the same read again soon may succeed: timeouts, refused
    /// or broken connections, and 5xx answers.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Timeout(_) | ClientError::Refused(_) | ClientError::Connect { .. } => true,
            ClientError::Http { status, .. } => *status >= 500,
            _ => false,
        }
    }

    /// The peer's A2A error as the one A2A error enum (`TaskNotFound`, …),
    /// when this is an error A2A defines.
    pub fn a2a_error(&self) -> Option<A2aError> {
        match self {
            ClientError::Remote {
                code,
                reason,
                message,
            } => known_error(Some(reason), *code, message),
            _ => None,
        }
    }
}

/// The A2A error with this reason (or, without one, this JSON-RPC code).
fn known_error(reason: Option<&str>, code: i64, message: &str) -> Option<A2aError> {
    let m = || message.to_owned();
    let all = [
        A2aError::Parse(m()),
        A2aError::InvalidRequest(m()),
        A2aError::MethodNotFound(m()),
        A2aError::InvalidParams(m()),
        A2aError::Internal(m()),
        A2aError::TaskNotFound(m()),
        A2aError::TaskNotCancelable(m()),
        A2aError::PushNotificationNotSupported,
        A2aError::UnsupportedOperation(m()),
        A2aError::ContentTypeNotSupported(m()),
        A2aError::InvalidAgentResponse(m()),
        A2aError::ExtendedAgentCardNotConfigured,
        A2aError::ExtensionSupportRequired(m()),
        A2aError::VersionNotSupported(m()),
        A2aError::Unauthenticated(m()),
    ];
    let reason = reason.filter(|r| !r.is_empty());
    all.into_iter().find(|e| match reason {
        Some(r) => e.reason() == r,
        None => e.code() == code,
    })
}

/// The `reason` of the first `ErrorInfo`-like object in `details`/`data`.
fn error_info_reason(v: Option<&Value>) -> Option<String> {
    let found = match v? {
        Value::Array(items) => items.iter().find_map(|d| d.get("reason")),
        obj @ Value::Object(_) => obj.get("reason"),
        _ => None,
    };
    found.and_then(Value::as_str).map(str::to_owned)
}

/// The A2A error a response body carries: a JSON-RPC error object
/// (`{"jsonrpc","error":{code,message,data}}`) or a `google.rpc.Status`
/// (`{"error":{code,status,message,details:[ErrorInfo]}}`). A status body
/// counts only with an `ErrorInfo` reason: without one it says nothing an
/// HTTP status does not.
pub(crate) fn remote_error(body: &Value) -> Option<ClientError> {
    let err = body.get("error")?.as_object()?;
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let number = err.get("code").and_then(Value::as_i64);
    if body.get("jsonrpc").is_some() {
        let code = number?;
        let reason = error_info_reason(err.get("data"))
            .or_else(|| known_error(None, code, "").map(|e| e.reason().to_owned()))
            .unwrap_or_default();
        return Some(ClientError::Remote {
            code,
            reason,
            message,
        });
    }
    let reason = error_info_reason(err.get("details"))?;
    let code = known_error(Some(&reason), 0, "")
        .map(|e| e.code())
        .or(number)
        .unwrap_or_default();
    Some(ClientError::Remote {
        code,
        reason,
        message,
    })
}

/// A short, one-line excerpt of a body for an error message: its
/// `error.message` or `message` when it is JSON, else its first characters.
pub(crate) fn snippet(bytes: &[u8]) -> String {
    const MAX: usize = 200;
    if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
        let msg = v
            .get("error")
            .and_then(|e| e.get("message").or(Some(e)))
            .or_else(|| v.get("message"))
            .and_then(Value::as_str);
        if let Some(m) = msg {
            return m.to_owned();
        }
    }
    let text = String::from_utf8_lossy(bytes);
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.is_empty() {
        return "(empty body)".into();
    }
    match flat.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

/// The error for a non-success answer: 401/403 → [`ClientError::Unauthorized`],
/// an A2A error body → [`ClientError::Remote`], else [`ClientError::Http`].
pub(crate) fn status_error(status: u16, bytes: &[u8]) -> ClientError {
    if status == 401 || status == 403 {
        return ClientError::Unauthorized {
            status,
            message: snippet(bytes),
        };
    }
    if let Some(e) = serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|v| remote_error(&v))
    {
        return e;
    }
    ClientError::Http {
        status,
        body: snippet(bytes),
    }
}

fn chain<'a>(
    e: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(e), |&e| e.source())
}

/// Maps a transport error of a request to `url`. DNS failures are found by
/// type (our resolver makes them), refusals by `io::ErrorKind`, TLS failures
/// by what rustls says (it is not a direct dependency to downcast to).
pub(crate) fn transport_error(e: reqwest::Error, url: &str) -> ClientError {
    if e.is_builder() {
        return ClientError::InvalidUrl {
            url: url.to_owned(),
            reason: innermost(&e),
        };
    }
    if e.is_timeout() {
        return ClientError::Timeout(url.to_owned());
    }
    if let Some(d) = chain(&e).find_map(|c| c.downcast_ref::<DnsFailure>()) {
        return ClientError::Dns {
            host: d.host.clone(),
            reason: d.reason.clone(),
        };
    }
    let refused = chain(&e).any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    });
    if refused {
        return ClientError::Refused(url.to_owned());
    }
    if url.starts_with("https:") && chain(&e).any(is_tls) {
        let raw = innermost(&e);
        // What rustls says when the other side answers TLS with plain HTTP.
        let reason = if raw.contains("InvalidContentType") {
            format!(
                "the server does not speak TLS there; is the address http:// rather than https://? ({raw})"
            )
        } else {
            raw
        };
        return ClientError::Tls {
            url: url.to_owned(),
            reason,
        };
    }
    let reason = if e.is_body() || e.is_decode() {
        format!("the answer broke off: {}", innermost(&e))
    } else {
        innermost(&e)
    };
    ClientError::Connect {
        url: url.to_owned(),
        reason,
    }
}

fn is_tls(e: &(dyn StdError + 'static)) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    [
        "certificate",
        "tls",
        "handshake",
        "corrupt message",
        "fatal alert",
        "peer is incompatible",
        "peer misbehaved",
    ]
    .iter()
    .any(|w| text.contains(w))
}

/// The deepest cause's message: the one that says what happened.
fn innermost(e: &(dyn StdError + 'static)) -> String {
    chain(e).last().map(|c| c.to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn jsonrpc_errors_keep_code_and_reason() {
        let body = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "Task not found: x",
            "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND"}]}});
        let e = remote_error(&body).unwrap();
        assert!(
            matches!(&e, ClientError::Remote { code: -32001, reason, .. } if reason == "TASK_NOT_FOUND")
        );
        assert!(matches!(e.a2a_error(), Some(A2aError::TaskNotFound(_))));
        // A 0.3 peer sends no ErrorInfo: the reason comes from the code.
        let e = remote_error(
            &json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32002, "message": "no"}}),
        )
        .unwrap();
        assert!(
            matches!(&e, ClientError::Remote { reason, .. } if reason == "TASK_NOT_CANCELABLE")
        );
    }

    #[test]
    fn status_bodies_map_their_reason_to_the_a2a_code() {
        let body = json!({"error": {"code": 404, "status": "NOT_FOUND", "message": "Task not found",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org"}]}});
        assert!(matches!(
            status_error(404, body.to_string().as_bytes()),
            ClientError::Remote { code: -32001, .. }
        ));
        // Without ErrorInfo a 404 is only an HTTP status.
        assert!(matches!(
            status_error(404, br#"{"message": "Task not found"}"#),
            ClientError::Http { status: 404, body } if body == "Task not found"
        ));
        assert!(matches!(
            status_error(401, b"{}"),
            ClientError::Unauthorized { status: 401, .. }
        ));
        assert!(matches!(
            status_error(502, b"<html>\n<h1>Bad   gateway</h1></html>"),
            ClientError::Http { status: 502, body } if body == "<html> <h1>Bad gateway</h1></html>"
        ));
    }

    #[test]
    fn transient_errors_are_worth_a_retry() {
        assert!(ClientError::Timeout("u".into()).is_transient());
        assert!(
            ClientError::Http {
                status: 503,
                body: String::new()
            }
            .is_transient()
        );
        assert!(
            !ClientError::Http {
                status: 404,
                body: String::new()
            }
            .is_transient()
        );
        assert!(
            !ClientError::Remote {
                code: -32603,
                reason: "INTERNAL".into(),
                message: String::new()
            }
            .is_transient()
        );
    }
}
