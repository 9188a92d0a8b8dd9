//! The A2A client: Countersign talking to remote agents ("peers").
//!
//! [`A2aClient::discover`] reads a peer's card and picks an [`Endpoint`];
//! every call then names the endpoint it uses and the [`PeerAuth`] to send.
//! Both dialects (1.0, 0.3) over both bindings (JSON-RPC, HTTP+JSON) are
//! spoken, always in the internal v1.0 types: requests are encoded and
//! answers decoded by the `a2a::v0_3*` codecs. Failures are
//! [`ClientError`]s that say what went wrong in a person's words.
//!
//! Reads (the card, GetTask) are retried a little on transient failures;
//! nothing that changes a peer's state (send, cancel, push config) is ever
//! retried automatically: doing it twice is the caller's decision.

mod error;
mod operation;
mod peer_card;
mod resolve;
mod sse;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use reqwest::redirect::Policy;

pub use self::error::ClientError;
pub use self::peer_card::{Binding, Endpoint, PeerCard};
pub use self::sse::EventStream;
pub use crate::a2a::v0_3::Dialect;

use self::error::{snippet, status_error, transport_error};
use self::operation::{HttpCall, Operation};
use crate::a2a::types::{
    SendMessageRequest, SendMessageResponse, Task, TaskPushNotificationConfig,
};

/// Credentials and extra headers for one peer, from its configuration.
/// `Debug` never shows the secrets.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PeerAuth {
    /// Sent as `Authorization: Bearer <token>`.
    pub bearer: Option<String>,
    /// `(header name, key)`, e.g. `("X-API-Key", "…")`.
    pub api_key: Option<(String, String)>,
    /// Sent as given; they replace a default header of the same name, and
    /// the bearer token and API key replace them.
    pub headers: Vec<(String, String)>,
}

impl fmt::Debug for PeerAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("PeerAuth")
            .field("bearer", &self.bearer.as_ref().map(|_| "<secret>"))
            .field(
                "api_key",
                &self.api_key.as_ref().map(|(h, _)| (h, "<secret>")),
            )
            .field("headers", &names)
            .finish()
    }
}

impl PeerAuth {
    /// The headers to send; a header that cannot be sent is a settings
    /// error naming the header (never its value).
    fn header_map(&self) -> Result<HeaderMap, ClientError> {
        let name = |n: &str| {
            HeaderName::from_bytes(n.trim().as_bytes())
                .map_err(|_| ClientError::Config(format!("`{n}` is not a valid header name")))
        };
        let value = |what: &str, v: &str| {
            let mut hv = HeaderValue::from_str(v.trim()).map_err(|_| {
                ClientError::Config(format!(
                    "{what} cannot be sent as a header value (line breaks or non-ASCII characters?)"
                ))
            })?;
            // Kept out of logs and HTTP/2 header compression.
            hv.set_sensitive(true);
            Ok::<_, ClientError>(hv)
        };
        let mut h = HeaderMap::new();
        for (k, v) in &self.headers {
            h.append(name(k)?, value(&format!("the value of header `{k}`"), v)?);
        }
        if let Some((k, v)) = &self.api_key {
            h.insert(name(k)?, value("the API key", v)?);
        }
        if let Some(t) = &self.bearer {
            h.insert(
                AUTHORIZATION,
                value("the bearer token", &format!("Bearer {}", t.trim()))?,
            );
        }
        Ok(h)
    }
}

/// The largest answer (or card) read into memory.
const MAX_ANSWER_BYTES: usize = 16 << 20;
/// Tasks asked for per ListTasks page (the most 1.0 allows).
const LIST_PAGE_SIZE: i32 = 100;
/// The pauses before the second and third attempt of a read.
const READ_RETRY_DELAYS: [Duration; 2] = [Duration::from_millis(100), Duration::from_millis(400)];
/// Connecting never waits longer than this, whatever the call timeout.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stream may stay silent (no event, no keep-alive) by default.
const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// Talks A2A to peers. Cheap to clone; one per process is enough.
#[derive(Clone, Debug)]
pub struct A2aClient {
    http: reqwest::Client,
    timeout: Duration,
    stream_idle_timeout: Duration,
}

impl A2aClient {
    /// A client whose calls (connect, send, answer) each take at most
    /// `timeout`; a stream's answer must begin within it. Redirects are
    /// never followed: a call goes only where the card says.
    pub fn new(timeout: Duration) -> Result<A2aClient, ClientError> {
        let http = reqwest::Client::builder()
            .redirect(Policy::none())
            .connect_timeout(timeout.min(MAX_CONNECT_TIMEOUT))
            .dns_resolver(Arc::new(resolve::PeerResolver))
            .user_agent(concat!("countersign/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ClientError::Config(format!("cannot set up HTTP: {e}")))?;
        Ok(A2aClient {
            http,
            timeout,
            stream_idle_timeout: DEFAULT_STREAM_IDLE_TIMEOUT,
        })
    }

    /// How long an open stream may stay silent before it fails with
    /// [`ClientError::Timeout`] (5 minutes unless set).
    pub fn with_stream_idle_timeout(mut self, idle: Duration) -> A2aClient {
        self.stream_idle_timeout = idle;
        self
    }

    /// Reads the card of the agent at `url`: the URL itself when it ends in
    /// `.json`, else `{url}/.well-known/agent-card.json`, falling back to the
    /// pre-0.3 `{url}/.well-known/agent.json` when that is missing or not a
    /// card. Sends `A2A-Version: 1.0`, so a negotiating peer serves its 1.0 card.
    pub async fn discover(&self, url: &str, auth: &PeerAuth) -> Result<PeerCard, ClientError> {
        let headers = auth.header_map()?;
        let candidates = peer_card::card_urls(url)?;
        let mut failures = Vec::new();
        for u in &candidates {
            match retrying(|| self.fetch_card(u, &headers)).await {
                Ok(mut card) => {
                    self.check_signature(&mut card).await?;
                    return Ok(card);
                }
                Err(e) => {
                    let try_next = is_missing(&e) || matches!(e, ClientError::BadCard { .. });
                    failures.push(e);
                    if !try_next {
                        break;
                    }
                }
            }
        }
        if failures.iter().all(is_missing) {
            let tried: Vec<String> = candidates.iter().map(|u| u.to_string()).collect();
            return Err(ClientError::BadCard {
                url: url.to_owned(),
                reason: format!("nothing is served at {}", tried.join(" or ")),
            });
        }
        let first_bad = failures
            .iter()
            .position(|e| matches!(e, ClientError::BadCard { .. }));
        Err(match first_bad {
            Some(i) => failures.swap_remove(i),
            None => failures.pop().unwrap_or(ClientError::BadCard {
                url: url.to_owned(),
                reason: "no card location was tried".into(),
            }),
        })
    }

    /// SendMessage: a task or a direct message. Never retried.
    pub async fn send_message(
        &self,
        endpoint: &Endpoint,
        auth: &PeerAuth,
        request: SendMessageRequest,
    ) -> Result<SendMessageResponse, ClientError> {
        let v = self
            .call(&Operation::Send(&request), endpoint, auth)
            .await?;
        operation::decode_send(v, endpoint)
    }

    /// GetTask, with at most `history_length` messages of history. Retried
    /// (three attempts in all) on timeouts, refused connections and 5xx.
    pub async fn get_task(
        &self,
        endpoint: &Endpoint,
        auth: &PeerAuth,
        id: &str,
        history_length: Option<i32>,
    ) -> Result<Task, ClientError> {
        let op = Operation::GetTask { id, history_length };
        retrying(|| async {
            let v = self.call(&op, endpoint, auth).await?;
            operation::decode_task(v, endpoint)
        })
        .await
    }

    /// The task on the peer whose history holds the message `message_id`,
    /// among the tasks whose status changed at or after `since` (RFC 3339),
    /// read with ListTasks a page of 100 at a time, at most `max_pages`
    /// pages: for a message that may have reached the peer before a stop
    /// cut its answer off. `Ok(None)` when no listed task holds it; an
    /// error when the peer cannot list its tasks (an A2A 0.3 endpoint, a
    /// peer without the method) or has more than `max_pages` pages of them.
    /// Each page is retried as reads are.
    pub async fn task_holding(
        &self,
        endpoint: &Endpoint,
        auth: &PeerAuth,
        message_id: &str,
        since: &str,
        max_pages: usize,
    ) -> Result<Option<Task>, ClientError> {
        let mut token: Option<String> = None;
        for _ in 0..max_pages {
            let op = Operation::ListTasks {
                since: Some(since),
                page_size: LIST_PAGE_SIZE,
                page_token: token.as_deref(),
            };
            let page = retrying(|| async {
                let v = self.call(&op, endpoint, auth).await?;
                operation::decode_task_page(v)
            })
            .await?;
            let held = page
                .tasks
                .into_iter()
                .find(|t| t.history.iter().any(|m| m.message_id == message_id));
            if held.is_some() {
                return Ok(held);
            }
            if page.next_page_token.is_empty() || token.as_deref() == Some(&page.next_page_token) {
                return Ok(None);
            }
            token = Some(page.next_page_token);
        }
        Err(ClientError::Unsupported(format!(
            "looking for a message among more than {} tasks of the peer's",
            max_pages * LIST_PAGE_SIZE as usize
        )))
    }

    /// CancelTask: the task as the peer left it. Never retried.
    pub async fn cancel_task(
        &self,
        endpoint: &Endpoint,
        auth: &PeerAuth,
        id: &str,
    ) -> Result<Task, ClientError> {
        let v = self.call(&Operation::Cancel { id }, endpoint, auth).await?;
        operation::decode_task(v, endpoint)
    }

    /// Registers a webhook for the task `config.task_id` names
    /// (CreateTaskPushNotificationConfig, 0.3 `tasks/pushNotificationConfig/set`).
    /// Never retried.
    pub async fn create_push_config(
        &self,
        endpoint: &Endpoint,
        auth: &PeerAuth,
        config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, ClientError> {
        let Some(task_id) = config.task_id.clone().filter(|t| !t.is_empty()) else {
            return Err(ClientError::Incomplete(
                "a push notification config needs the id of its task (`taskId`)".into(),
            ));
        };
        let op = Operation::CreatePushConfig {
            task_id: &task_id,
            config: &config,
        };
        let v = self.call(&op, endpoint, auth).await?;
        operation::decode_push_config(v, endpoint, &task_id)
    }

    /// SendStreamingMessage: the task (or message) and its events as they
    /// happen. Never retried.
    pub async fn send_streaming(
        &self,
        endpoint: &Endpoint,
        auth: &PeerAuth,
        request: SendMessageRequest,
    ) -> Result<EventStream, ClientError> {
        self.stream(&Operation::Stream(&request), endpoint, auth)
            .await
    }

    /// SubscribeToTask (0.3 `tasks/resubscribe`): the task, then its events
    /// until it ends.
    pub async fn subscribe(
        &self,
        endpoint: &Endpoint,
        auth: &PeerAuth,
        id: &str,
    ) -> Result<EventStream, ClientError> {
        self.stream(&Operation::Subscribe { id }, endpoint, auth)
            .await
    }

    async fn fetch_card(
        &self,
        url: &url::Url,
        headers: &HeaderMap,
    ) -> Result<PeerCard, ClientError> {
        let shown = url.to_string();
        let resp = self
            .http
            .get(url.clone())
            .header(ACCEPT, "application/json")
            .header("A2A-Version", crate::a2a::PROTOCOL_VERSION)
            .headers(headers.clone())
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| transport_error(e, &shown))?;
        let (status, content_type, bytes) = read_answer(resp, &shown).await?;
        if !(200..300).contains(&status) {
            return Err(match status {
                401 | 403 => status_error(status, &bytes),
                _ => ClientError::Http {
                    status,
                    body: snippet(&bytes),
                },
            });
        }
        let card = serde_json::from_slice(&bytes).map_err(|_| ClientError::BadCard {
            url: shown.clone(),
            reason: format!(
                "it is not JSON ({}): {}",
                content_type.as_deref().unwrap_or("no content type"),
                snippet(&bytes)
            ),
        })?;
        PeerCard::from_json(&shown, card)
    }

    /// Verifies a signed card (spec §8.4) with the keys its signatures'
    /// `jku` publishes, which must be on the card's own origin (a card cannot
    /// send us elsewhere); records the verified key's thumbprint. An unsigned card
    /// passes; a signed one that does not verify is refused.
    async fn check_signature(&self, card: &mut PeerCard) -> Result<(), ClientError> {
        let sig_headers = crate::a2a::signing::signature_headers(&card.card);
        if sig_headers.is_empty() {
            return Ok(());
        }
        let bad = |reason: String| ClientError::BadSignature {
            url: card.source.clone(),
            reason,
        };
        let source = url::Url::parse(&card.source).map_err(|e| bad(e.to_string()))?;
        let Some(jku) = sig_headers
            .iter()
            .flatten()
            .find_map(|h| h.get("jku").and_then(serde_json::Value::as_str))
        else {
            return Err(bad(
                "no signature names the key set (`jku`) to verify it with".into(),
            ));
        };
        let jku = source
            .join(jku)
            .map_err(|e| bad(format!("its `jku` is not a URL: {e}")))?;
        if jku.origin() != source.origin() {
            return Err(bad(format!(
                "its keys are published at {jku}, not on the card's own origin"
            )));
        }
        let shown = jku.to_string();
        let resp = self
            .http
            .get(jku)
            .header(ACCEPT, "application/json")
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| transport_error(e, &shown))?;
        let (status, _, bytes) = read_answer(resp, &shown).await?;
        if !(200..300).contains(&status) {
            return Err(bad(format!("its key set {shown} answered HTTP {status}")));
        }
        let jwks: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|_| bad(format!("its key set {shown} is not JSON")))?;
        let keys = crate::a2a::signing::jwks_keys(&jwks);
        let kid = crate::a2a::signing::verify(&card.card, &keys).map_err(|e| bad(e.to_string()))?;
        card.signing_key = Some(kid);
        Ok(())
    }

    fn request(
        &self,
        call: &HttpCall,
        headers: &HeaderMap,
        stream: bool,
    ) -> reqwest::RequestBuilder {
        let accept = if stream {
            "text/event-stream"
        } else {
            "application/json, application/a2a+json"
        };
        let mut rb = self
            .http
            .request(call.method.clone(), call.url.clone())
            .header(ACCEPT, accept);
        if call.v1 {
            rb = rb.header("A2A-Version", crate::a2a::PROTOCOL_VERSION);
        }
        if let Some(body) = &call.body {
            rb = rb.json(body);
        }
        rb.headers(headers.clone())
    }

    /// A unary call: the JSON answer (a JSON-RPC `result`, unwrapped).
    async fn call(
        &self,
        op: &Operation<'_>,
        endpoint: &Endpoint,
        auth: &PeerAuth,
    ) -> Result<operation::Answer, ClientError> {
        let call = operation::build(op, endpoint)?;
        let headers = auth.header_map()?;
        let shown = call.url.to_string();
        let resp = self
            .request(&call, &headers, false)
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| transport_error(e, &shown))?;
        let (status, content_type, bytes) = read_answer(resp, &shown).await?;
        if !(200..300).contains(&status) {
            return Err(status_error(status, &bytes));
        }
        if let Some(ct) = content_type.as_deref().filter(|ct| !is_json(ct)) {
            return Err(ClientError::Protocol(format!(
                "{shown} answered with `{ct}`, not JSON: {}",
                snippet(&bytes)
            )));
        }
        match &call.rpc_id {
            Some(id) => operation::rpc_answer(&bytes, id, &shown),
            None => operation::body_answer(&bytes, &shown),
        }
    }

    /// A streaming call: once the peer answers with an event stream, its events.
    async fn stream(
        &self,
        op: &Operation<'_>,
        endpoint: &Endpoint,
        auth: &PeerAuth,
    ) -> Result<EventStream, ClientError> {
        let call = operation::build(op, endpoint)?;
        let headers = auth.header_map()?;
        let mut resp = self.open(&call, &headers).await?;
        if resp.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED
            && let Some(post) = operation::subscribe_fallback(&call)
        {
            resp = self.open(&post, &headers).await?;
        }
        let shown = resp.url().to_string();
        let content_type = content_type(&resp);
        if resp.status().is_success()
            && content_type
                .as_deref()
                .is_some_and(|ct| ct.eq_ignore_ascii_case("text/event-stream"))
        {
            return Ok(sse::events(
                resp,
                endpoint.clone(),
                shown,
                self.stream_idle_timeout,
            ));
        }
        let (status, content_type, bytes) = read_answer(resp, &shown).await?;
        if !(200..300).contains(&status) {
            return Err(status_error(status, &bytes));
        }
        // A peer may refuse a stream with a plain JSON error.
        if let Some(e) = serde_json::from_slice(&bytes)
            .ok()
            .and_then(|v| error::remote_error(&v))
        {
            return Err(e);
        }
        Err(ClientError::Protocol(format!(
            "{shown} answered with `{}`, not an event stream: {}",
            content_type.as_deref().unwrap_or("no content type"),
            snippet(&bytes)
        )))
    }

    /// Sends a streaming request; its answer must begin within the timeout.
    async fn open(
        &self,
        call: &HttpCall,
        headers: &HeaderMap,
    ) -> Result<reqwest::Response, ClientError> {
        let shown = call.url.to_string();
        match tokio::time::timeout(self.timeout, self.request(call, headers, true).send()).await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => Err(transport_error(e, &shown)),
            Err(_) => Err(ClientError::Timeout(shown)),
        }
    }
}

/// Runs a read up to three times while it fails transiently.
async fn retrying<T, F, Fut>(mut attempt: F) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ClientError>>,
{
    let mut delays = READ_RETRY_DELAYS.iter();
    loop {
        match attempt().await {
            Err(e) if e.is_transient() => match delays.next() {
                Some(d) => tokio::time::sleep(*d).await,
                None => return Err(e),
            },
            done => return done,
        }
    }
}

/// "Nothing here" answers, after which discovery tries the next location.
fn is_missing(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Http {
            status: 404 | 410,
            ..
        }
    )
}

/// The media type of an answer, without parameters, lowercased.
fn content_type(resp: &reqwest::Response) -> Option<String> {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(crate::a2a::media_type_essence)
        .filter(|v| !v.is_empty())
}

fn is_json(media_type: &str) -> bool {
    media_type == "application/json" || media_type.ends_with("+json")
}

/// Status, media type and body (at most [`MAX_ANSWER_BYTES`]) of an answer;
/// a redirect is an error.
async fn read_answer(
    mut resp: reqwest::Response,
    shown: &str,
) -> Result<(u16, Option<String>, Vec<u8>), ClientError> {
    let status = resp.status();
    if status.is_redirection() && status != reqwest::StatusCode::NOT_MODIFIED {
        let to = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(|l| {
                resp.url()
                    .join(l)
                    .map(|u| u.to_string())
                    .unwrap_or_else(|_| l.to_owned())
            })
            .unwrap_or_else(|| "an address it does not name".into());
        return Err(ClientError::Redirect {
            from: shown.to_owned(),
            to,
        });
    }
    let media_type = content_type(&resp);
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| transport_error(e, shown))? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(ClientError::Protocol(format!(
                "the answer from {shown} is larger than {} MiB",
                MAX_ANSWER_BYTES >> 20
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((status.as_u16(), media_type, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_becomes_headers_and_debug_hides_secrets() {
        let auth = PeerAuth {
            bearer: Some("tok-123".into()),
            api_key: Some(("X-Api-Key".into(), "key-456".into())),
            headers: vec![
                ("X-Team".into(), "blue".into()),
                ("Authorization".into(), "Basic overridden".into()),
            ],
        };
        let h = auth.header_map().unwrap();
        assert_eq!(h["authorization"], "Bearer tok-123");
        assert_eq!(h["x-api-key"], "key-456");
        assert_eq!(h["x-team"], "blue");
        let shown = format!("{auth:?}");
        assert!(
            !shown.contains("tok-123") && !shown.contains("key-456"),
            "{shown}"
        );
        assert!(shown.contains("X-Team"), "{shown}");
    }

    #[test]
    fn unsendable_headers_are_settings_errors_without_the_secret() {
        let auth = PeerAuth {
            bearer: Some("abc\nxyz".into()),
            ..PeerAuth::default()
        };
        let e = auth.header_map().unwrap_err().to_string();
        assert!(e.contains("bearer token") && !e.contains("abc"), "{e}");
        let auth = PeerAuth {
            headers: vec![("bad name".into(), "v".into())],
            ..PeerAuth::default()
        };
        assert!(matches!(auth.header_map(), Err(ClientError::Config(_))));
    }

    #[tokio::test]
    async fn reads_are_retried_three_times_at_most_and_only_when_transient() {
        let mut n = 0;
        let r: Result<(), _> = retrying(|| {
            n += 1;
            async { Err(ClientError::Timeout("u".into())) }
        })
        .await;
        assert!(matches!(r, Err(ClientError::Timeout(_))));
        assert_eq!(n, 3);
        let mut n = 0;
        let r: Result<(), _> = retrying(|| {
            n += 1;
            async {
                Err(ClientError::Http {
                    status: 404,
                    body: String::new(),
                })
            }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(n, 1);
    }

    #[test]
    fn json_media_types() {
        assert!(is_json("application/json"));
        assert!(is_json("application/a2a+json"));
        assert!(!is_json("text/html"));
    }
}
