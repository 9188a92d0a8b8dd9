//! A2A errors: one enum, with its JSON-RPC code, `ErrorInfo` reason and HTTP
//! status. Each binding maps it to the wire in exactly one function
//! (`server::jsonrpc::error_body`, `server::rest::error_response`).

use serde_json::{Value, json};

/// The ErrorInfo domain of A2A errors.
pub const DOMAIN: &str = "a2a-protocol.org";

/// Every error an A2A operation can answer with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    #[error("Invalid JSON payload: {0}")]
    Parse(String),
    #[error("Request payload validation error: {0}")]
    InvalidRequest(String),
    #[error("Method not found: {0}")]
    MethodNotFound(String),
    #[error("Invalid parameters: {0}")]
    InvalidParams(String),
    #[error("Internal error: {0}")]
    Internal(String),
    /// An internal error of the store (a full disk, say), which may pass:
    /// on the wire it is [`Error::Internal`].
    #[error("Internal error: {0}")]
    Storage(String),
    #[error("Task not found: {0}")]
    TaskNotFound(String),
    #[error("Task cannot be canceled: {0}")]
    TaskNotCancelable(String),
    #[error("Push notifications are not supported by this agent")]
    PushNotificationNotSupported,
    #[error("Unsupported operation: {0}")]
    UnsupportedOperation(String),
    #[error("Content type not supported: {0}")]
    ContentTypeNotSupported(String),
    /// The request body itself is not JSON (HTTP 415), as opposed to a
    /// message part of a media type the agent does not take.
    #[error("Unsupported media type: {0}")]
    UnsupportedMediaType(String),
    #[error("Invalid agent response: {0}")]
    InvalidAgentResponse(String),
    #[error("Extended agent card is not configured")]
    ExtendedAgentCardNotConfigured,
    #[error("Extension support required: {0}")]
    ExtensionSupportRequired(String),
    #[error("A2A version not supported: {0}")]
    VersionNotSupported(String),
    #[error("Authentication required: {0}")]
    Unauthenticated(String),
    #[error("Request body too large: the limit is {0} bytes")]
    PayloadTooLarge(usize),
    #[error("Not found: {0}")]
    NotFound(String),
    /// Too many requests from one caller; retry after this many seconds.
    #[error("Rate limit exceeded: retry after {0} s")]
    RateLimited(u64),
    /// A connection over its address's limit of open connections (the
    /// address, the limit); a client may retry once one of them closes.
    #[error("Too many connections from {0}: at most {1} may be open at once")]
    TooManyConnections(std::net::IpAddr, usize),
    /// The request body did not arrive within the configured time.
    #[error("Request body not received within {0} seconds")]
    RequestTimeout(u64),
}

impl Error {
    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        match self {
            Error::Parse(_) => -32700,
            Error::InvalidRequest(_) | Error::PayloadTooLarge(_) | Error::RequestTimeout(_) => {
                -32600
            }
            Error::MethodNotFound(_) | Error::NotFound(_) => -32601,
            Error::InvalidParams(_) => -32602,
            Error::Internal(_) | Error::Storage(_) => -32603,
            Error::TaskNotFound(_) => -32001,
            Error::TaskNotCancelable(_) => -32002,
            Error::PushNotificationNotSupported => -32003,
            Error::UnsupportedOperation(_) => -32004,
            Error::ContentTypeNotSupported(_) | Error::UnsupportedMediaType(_) => -32005,
            Error::InvalidAgentResponse(_) => -32006,
            Error::ExtendedAgentCardNotConfigured => -32007,
            Error::ExtensionSupportRequired(_) => -32008,
            Error::VersionNotSupported(_) => -32009,
            // Implementation-defined server error range of JSON-RPC 2.0.
            Error::Unauthenticated(_) => -32000,
            // Also implementation-defined; 429 is its HTTP status.
            Error::RateLimited(_) | Error::TooManyConnections(..) => -32029,
        }
    }

    /// The `ErrorInfo.reason`: the error name in UPPER_SNAKE without "Error".
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Parse(_) => "JSON_PARSE",
            Error::InvalidRequest(_) => "INVALID_REQUEST",
            Error::MethodNotFound(_) => "METHOD_NOT_FOUND",
            Error::InvalidParams(_) => "INVALID_PARAMS",
            Error::Internal(_) | Error::Storage(_) => "INTERNAL",
            Error::TaskNotFound(_) => "TASK_NOT_FOUND",
            Error::TaskNotCancelable(_) => "TASK_NOT_CANCELABLE",
            Error::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            Error::UnsupportedOperation(_) => "UNSUPPORTED_OPERATION",
            Error::ContentTypeNotSupported(_) | Error::UnsupportedMediaType(_) => {
                "CONTENT_TYPE_NOT_SUPPORTED"
            }
            Error::InvalidAgentResponse(_) => "INVALID_AGENT_RESPONSE",
            Error::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            Error::ExtensionSupportRequired(_) => "EXTENSION_SUPPORT_REQUIRED",
            Error::VersionNotSupported(_) => "VERSION_NOT_SUPPORTED",
            Error::Unauthenticated(_) => "UNAUTHENTICATED",
            Error::PayloadTooLarge(_) => "PAYLOAD_TOO_LARGE",
            Error::RequestTimeout(_) => "REQUEST_TIMEOUT",
            Error::NotFound(_) => "NOT_FOUND",
            Error::RateLimited(_) | Error::TooManyConnections(..) => "RATE_LIMITED",
        }
    }

    /// Whether this is one of the A2A-specific errors (which carry `ErrorInfo`
    /// with the A2A domain) rather than a generic protocol error.
    pub fn is_a2a_specific(&self) -> bool {
        (-32009..=-32001).contains(&self.code())
    }

    /// HTTP status, following the A2A 1.0.1 table (spec §5.4).
    pub fn http_status(&self) -> u16 {
        match self {
            Error::TaskNotFound(_) | Error::NotFound(_) | Error::MethodNotFound(_) => 404,
            Error::Internal(_) | Error::Storage(_) | Error::InvalidAgentResponse(_) => 500,
            Error::Unauthenticated(_) => 401,
            Error::PayloadTooLarge(_) => 413,
            Error::RateLimited(_) | Error::TooManyConnections(..) => 429,
            Error::RequestTimeout(_) => 408,
            Error::UnsupportedMediaType(_) => 415,
            _ => 400,
        }
    }

    /// The `google.rpc.Code` name matching [`Error::http_status`] for this error.
    pub fn grpc_status(&self) -> &'static str {
        match self {
            Error::TaskNotFound(_) | Error::NotFound(_) | Error::MethodNotFound(_) => "NOT_FOUND",
            Error::Internal(_) | Error::Storage(_) | Error::InvalidAgentResponse(_) => "INTERNAL",
            Error::Unauthenticated(_) => "UNAUTHENTICATED",
            Error::PayloadTooLarge(_) | Error::RateLimited(_) | Error::TooManyConnections(..) => {
                "RESOURCE_EXHAUSTED"
            }
            Error::RequestTimeout(_) => "DEADLINE_EXCEEDED",
            Error::Parse(_)
            | Error::InvalidRequest(_)
            | Error::InvalidParams(_)
            | Error::ContentTypeNotSupported(_)
            | Error::UnsupportedMediaType(_) => "INVALID_ARGUMENT",
            _ => "FAILED_PRECONDITION",
        }
    }

    /// Seconds the caller should wait before trying again (`Retry-After`).
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Error::RateLimited(s) => Some(*s),
            Error::TooManyConnections(..) => Some(1),
            _ => None,
        }
    }

    /// The error's detail objects: its `ErrorInfo`, and a `google.rpc.RetryInfo`
    /// when the caller should retry later.
    pub fn details(&self) -> Value {
        let mut details = vec![self.error_info()];
        if let Some(s) = self.retry_after() {
            details.push(json!({
                "@type": "type.googleapis.com/google.rpc.RetryInfo",
                "retryDelay": format!("{s}s"),
            }));
        }
        Value::Array(details)
    }

    /// The `ErrorInfo` detail object, with the task id when the error names one.
    pub fn error_info(&self) -> Value {
        let mut metadata = serde_json::Map::new();
        if let Error::TaskNotFound(id) | Error::TaskNotCancelable(id) = self {
            metadata.insert("taskId".into(), Value::String(id.clone()));
        }
        metadata.insert(
            "timestamp".into(),
            Value::String(crate::a2a::types::format_timestamp(crate::clock::now_ms())),
        );
        json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.reason(),
            "domain": DOMAIN,
            "metadata": metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a2a_errors_follow_the_1_0_1_status_table() {
        let table = [
            (Error::TaskNotFound("t".into()), -32001, 404),
            (Error::TaskNotCancelable("t".into()), -32002, 400),
            (Error::PushNotificationNotSupported, -32003, 400),
            (Error::UnsupportedOperation("x".into()), -32004, 400),
            (Error::ContentTypeNotSupported("x".into()), -32005, 400),
            (Error::InvalidAgentResponse("x".into()), -32006, 500),
            (Error::ExtendedAgentCardNotConfigured, -32007, 400),
            (Error::ExtensionSupportRequired("x".into()), -32008, 400),
            (Error::VersionNotSupported("x".into()), -32009, 400),
        ];
        for (e, code, status) in table {
            assert_eq!(e.code(), code, "{e}");
            assert_eq!(e.http_status(), status, "{e}");
            assert!(e.is_a2a_specific());
            assert_eq!(e.error_info()["domain"], DOMAIN);
        }
        assert!(!Error::InvalidParams("x".into()).is_a2a_specific());
    }

    #[test]
    fn rate_limited_says_when_to_retry() {
        let e = Error::RateLimited(3);
        assert_eq!((e.code(), e.http_status()), (-32029, 429));
        assert_eq!(e.grpc_status(), "RESOURCE_EXHAUSTED");
        assert_eq!(e.retry_after(), Some(3));
        let d = e.details();
        assert_eq!(d[0]["reason"], "RATE_LIMITED");
        assert_eq!(d[1]["retryDelay"], "3s");
        let e = Error::TooManyConnections([10, 0, 0, 7].into(), 256);
        assert_eq!((e.code(), e.http_status()), (-32029, 429));
        assert_eq!(e.grpc_status(), "RESOURCE_EXHAUSTED");
        assert_eq!(e.retry_after(), Some(1));
        assert_eq!(
            e.to_string(),
            "Too many connections from 10.0.0.7: at most 256 may be open at once"
        );
        assert_eq!(
            Error::Internal("x".into())
                .details()
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }
}
