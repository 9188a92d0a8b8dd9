//! Serving accepted connections: HTTP/1.1 and HTTP/2 on one port, a limit on
//! how long a connection may sit without a request, and a graceful stop.
//!
//! hyper's `header_read_timeout` guards HTTP/1.1 only. A client that opens a
//! connection and sends nothing (hyper is still deciding which protocol it
//! speaks), or speaks HTTP/2 and never completes a request's headers (or
//! trickles them), would hold the connection forever. So every connection
//! counts its requests in flight, and one that has had none for the header
//! timeout, before its first request or (HTTP/2) between requests, is shut
//! down: gracefully first, then dropped if it still lingers.
//!
//! Before any of that, a gate counts the connection against its caller's
//! address. One over the caller's limit is still read as HTTP (a client
//! answered before it has written its request takes the answer for a
//! protocol error), but every request on it is refused, it closes after
//! its first answer, and it may idle only [`OVER_LIMIT_IDLE`], so a flood of
//! silent connections holds each for a second, not the header timeout.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use hyper::body::{Frame, SizeHint};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// What one connection's requests are doing.
struct Activity {
    opened: Instant,
    in_flight: AtomicUsize,
    /// When a request last started or finished, in ms after `opened`.
    last_ms: AtomicU64,
    /// The client has sent a request over HTTP/1.x, whose connections
    /// hyper's own header timeout already guards.
    http1: AtomicBool,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            last_ms: AtomicU64::new(0),
            http1: AtomicBool::new(false),
        }
    }

    fn touch(&self) {
        if self.http1.load(Ordering::Acquire) {
            // Not watched here (see `idle_deadline`): spare the clock read.
            return;
        }
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Release);
    }

    /// When the connection will have gone `limit` without a request, or
    /// `None` while one is in flight or hyper watches the connection itself.
    fn idle_deadline(&self, limit: Duration) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 || self.http1.load(Ordering::Acquire) {
            return None;
        }
        let last = Duration::from_millis(self.last_ms.load(Ordering::Acquire));
        Some(self.opened + last + limit)
    }
}

/// A request in flight, from its headers to the end of its response body.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        activity.touch();
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted until it is sent or
/// dropped (a stream can last much longer than its handler).
pub struct Tracked {
    inner: Body,
    _in_flight: InFlight,
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What decides, before routing, whether a caller's request is served:
/// `None` to serve it, or the response that refuses it. The last argument
/// says the request came on a connection over its caller's limit (see
/// [`Gate`]), which must be refused.
pub type Admit = Arc<
    dyn Fn(
            SocketAddr,
            &axum::http::Uri,
            &axum::http::HeaderMap,
            bool,
        ) -> Option<axum::response::Response>
        + Send
        + Sync,
>;

/// How a connection is let in, as it is accepted.
pub enum Entry {
    /// Served; what it holds (its count against its caller, if counted)
    /// is dropped when it ends.
    Served(Option<Box<dyn Send + Sync>>),
    /// Over its caller's limit: each request refused, closed after one.
    OverLimit,
}

/// What decides, as a connection is accepted, how it is let in.
pub type Gate = Arc<dyn Fn(SocketAddr) -> Entry + Send + Sync>;

/// How long a connection over its caller's limit may go without a request.
pub const OVER_LIMIT_IDLE: Duration = Duration::from_secs(1);

/// Accepts connections and serves `app` on each until `stop` resolves, then
/// lets the requests in flight finish. A connection without a request for
/// `idle_limit` (see the module's notes) is closed; one over its caller's
/// limit (`gate`) has each request refused by `admit`.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    gate: Gate,
    admit: Admit,
    idle_limit: Duration,
    stop: impl Future<Output = ()>,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::conn::auto::Builder;

    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(idle_limit);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let mut refusing = Builder::new(TokioExecutor::new());
    refusing
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(OVER_LIMIT_IDLE)
        .keep_alive(false);
    refusing.http2().timer(TokioTimer::new());
    let refusing = Arc::new(refusing);
    let (stopping_tx, stopping) = watch::channel(false);
    // Each connection holds a sender; when all are gone, all have ended.
    let (alive_tx, mut all_ended) = mpsc::channel::<()>(1);
    let mut stop = std::pin::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(x) => x,
                Err(e) => {
                    // Out of file descriptors and the like: wait, then go on.
                    tracing::warn!("cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let (held, over_limit) = match gate(peer) {
            Entry::Served(held) => (held, false),
            Entry::OverLimit => {
                tracing::debug!(%peer, "a connection over its caller's limit");
                (None, true)
            }
        };
        let _ = stream.set_nodelay(true);
        let activity = Arc::new(Activity::new());
        let answered = Arc::new(tokio::sync::Notify::new());
        let service = service(
            app.clone(),
            admit.clone(),
            peer,
            activity.clone(),
            over_limit.then(|| answered.clone()),
        );
        let (builder, idle_limit) = if over_limit {
            (refusing.clone(), OVER_LIMIT_IDLE.min(idle_limit))
        } else {
            (builder.clone(), idle_limit)
        };
        let (stopping, alive) = (stopping.clone(), alive_tx.clone());
        tokio::spawn(async move {
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            let mut conn = std::pin::pin!(conn);
            let mut stopping = stopping;
            // Shut down gracefully when the server stops or the connection
            // idles too long; dropped if it then idles another `idle_limit`.
            let mut closing = false;
            loop {
                let check = activity
                    .idle_deadline(idle_limit)
                    .unwrap_or_else(|| Instant::now() + idle_limit);
                tokio::select! {
                    ended = conn.as_mut() => {
                        if let Err(e) = ended {
                            tracing::debug!("connection ended: {e}");
                        }
                        break;
                    }
                    _ = stopping.wait_for(|s| *s), if !closing => {
                        conn.as_mut().graceful_shutdown();
                        closing = true;
                    }
                    // Over the limit: the request being refused is the last.
                    _ = answered.notified(), if over_limit && !closing => {
                        conn.as_mut().graceful_shutdown();
                        closing = true;
                    }
                    _ = tokio::time::sleep_until(check) => {
                        if activity.idle_deadline(idle_limit).is_some_and(|d| d <= Instant::now()) {
                            if closing {
                                tracing::debug!("dropped a connection still idle while closing");
                                break;
                            }
                            tracing::debug!("closing a connection without a request for {idle_limit:?}");
                            conn.as_mut().graceful_shutdown();
                            closing = true;
                            activity.touch();
                        }
                    }
                }
            }
            drop((alive, held));
        });
    }
    drop(listener);
    let _ = stopping_tx.send(true);
    drop(alive_tx);
    let _ = all_ended.recv().await;
}

/// The answer to a request whose handler panicked. What the panic said
/// goes to the log, not to the caller.
fn failed_on_a_bug() -> axum::response::Response {
    use axum::response::IntoResponse as _;
    (
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        axum::Json(serde_json::json!({"error": {
            "code": 500,
            "message": "internal error: the server failed on a bug while answering; see its log",
        }})),
    )
        .into_response()
}

/// The service for one connection: `admit`, then the app, with each request
/// counted in flight. With `over_limit`, every request is refused (`admit`
/// is told so) and the connection told to close through the `Notify`: over
/// HTTP/2 by a graceful shutdown; over HTTP/1 the refusing builder has
/// keep-alive off, so hyper answers with `Connection: close` and closes.
fn service(
    app: axum::Router,
    admit: Admit,
    peer: SocketAddr,
    activity: Arc<Activity>,
    over_limit: Option<Arc<tokio::sync::Notify>>,
) -> hyper_util::service::TowerToHyperService<
    impl tower::Service<
        axum::http::Request<hyper::body::Incoming>,
        Response = axum::http::Response<Tracked>,
        Error = std::convert::Infallible,
        Future = impl Send,
    > + Clone,
> {
    use tower::ServiceExt as _;
    let svc = tower::service_fn(move |req: axum::http::Request<hyper::body::Incoming>| {
        if req.version() < axum::http::Version::HTTP_2 {
            activity.http1.store(true, Ordering::Release);
        }
        let in_flight = InFlight::start(&activity);
        let call = match admit(peer, req.uri(), req.headers(), over_limit.is_some()) {
            None => Ok(app.clone().oneshot(req)),
            Some(refused) => {
                if let Some(answered) = &over_limit {
                    answered.notify_one();
                }
                Err(refused)
            }
        };
        async move {
            let resp = match call {
                // A handler that panics (a bug) would drop the connection
                // unanswered: the caller gets a 500 instead, and the
                // connection and server go on.
                Ok(call) => match crate::unwind::caught("an HTTP request", call).await {
                    Ok(resp) => resp?,
                    Err(_) => failed_on_a_bug(),
                },
                Err(refused) => refused,
            };
            Ok(resp.map(|inner| Tracked {
                inner,
                _in_flight: in_flight,
            }))
        }
    });
    hyper_util::service::TowerToHyperService::new(svc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_handler_that_panics_gets_a_500_and_the_server_goes_on() {
        async fn boom() -> &'static str {
            if std::hint::black_box(true) {
                panic!("a bug in a handler");
            }
            "never"
        }
        let app = axum::Router::new()
            .route("/boom", axum::routing::get(boom))
            .route("/ok", axum::routing::get(|| async { "fine" }));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let gate: Gate = Arc::new(|_| Entry::Served(None));
        let admit: Admit = Arc::new(|_, _, _, _| None);
        let server = tokio::spawn(serve(
            listener,
            app,
            gate,
            admit,
            Duration::from_secs(5),
            async {
                let _ = stop_rx.await;
            },
        ));
        // One client, so the second request may reuse the first's connection.
        let client = reqwest::Client::new();
        let resp = client
            .get(format!("http://{addr}/boom"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 500);
        let body: serde_json::Value = resp.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("internal error"), "{body}");
        assert!(
            !message.contains("a bug in a handler"),
            "the panic's text stays in the log: {body}"
        );
        for _ in 0..2 {
            let resp = client
                .get(format!("http://{addr}/ok"))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            assert_eq!(resp.text().await.unwrap(), "fine");
        }
        let _ = stop_tx.send(());
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .unwrap()
            .unwrap();
    }
}
