//! The HTTP+JSON binding: the v1.0 routes under `/a2a/{agent}` (with an
//! optional `/{tenant}` prefix), and the agent's card. Errors use the
//! `google.rpc.Status` shape with `ErrorInfo`; streams are SSE whose `data:`
//! lines are `StreamResponse` objects.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::ops::{self, Op, Outcome};
use super::{
    Shared, Version, base_url, card, is_json_media_type, parse_json, read_request_body,
    requested_version,
};
use crate::a2a::Error;
use crate::a2a::v0_3::Dialect;

/// The HTTP response for an A2A error (the one mapping for this binding).
pub fn error_response(e: &Error, a2a_json: bool) -> Response {
    error_response_with(e, status_of(e), a2a_json)
}

/// The HTTP status this binding answers `e` with.
fn status_of(e: &Error) -> StatusCode {
    StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The binding's error object for `e` under `status`.
fn error_body(e: &Error, status: StatusCode) -> serde_json::Value {
    json!({
        "error": {
            "code": status.as_u16(),
            "status": e.grpc_status(),
            "message": e.to_string(),
            "details": e.details(),
        }
    })
}

/// The error body for `e` under an HTTP status of the binding's choosing.
/// An error as a stream event's data: the body this binding answers it with.
pub(super) fn error_event(e: &Error) -> String {
    error_body(e, status_of(e)).to_string()
}

fn error_response_with(e: &Error, status: StatusCode, a2a_json: bool) -> Response {
    let mut resp = (status, error_body(e, status).to_string()).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, content_type(a2a_json));
    if let Some(s) = e.retry_after() {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    resp
}

pub(super) fn content_type(a2a_json: bool) -> HeaderValue {
    HeaderValue::from_static(if a2a_json {
        "application/a2a+json"
    } else {
        "application/json"
    })
}

/// Answer in `application/a2a+json` when the client asks for it; plain
/// `application/json` otherwise, which every client reads.
pub(super) fn wants_a2a_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/a2a+json"))
}

/// What a path under `/a2a/{agent}/` names.
#[derive(Debug, PartialEq)]
pub enum Route {
    Card,
    LegacyCard,
    Send,
    Stream,
    ListTasks,
    Task(String),
    Cancel(String),
    Subscribe(String),
    PushConfigs(String),
    PushConfig(String, String),
    ExtendedCard,
}

impl Route {
    /// The methods a route takes, for the `Allow` header of a 405.
    pub(super) fn allowed(&self) -> &'static str {
        match self {
            Route::Card
            | Route::LegacyCard
            | Route::ListTasks
            | Route::Task(_)
            | Route::ExtendedCard => "GET",
            Route::Send | Route::Stream | Route::Cancel(_) => "POST",
            Route::Subscribe(_) | Route::PushConfigs(_) => "GET, POST",
            Route::PushConfig(..) => "GET, DELETE",
        }
    }
}

/// Whether a path segment is the first of a 1.0 route (and so no tenant).
fn route_word(s: &str) -> bool {
    s == "tasks" || s.starts_with("message:") || s == "extendedAgentCard" || s == ".well-known"
}

/// The optional `/{tenant}` segment the spec allows before a 1.0 route.
pub(super) fn path_tenant(rest: &str) -> Option<&str> {
    let mut segs = rest.split('/').filter(|s| !s.is_empty());
    let first = segs.next()?;
    (!route_word(first) && segs.next().is_some()).then_some(first)
}

/// The route a path under `/a2a/{agent}/` names (`rest` is what follows).
pub fn route(rest: &str) -> Option<Route> {
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    if segs == [".well-known", "agent-card.json"] {
        return Some(Route::Card);
    }
    if segs == [".well-known", "agent.json"] {
        return Some(Route::LegacyCard);
    }
    // An optional tenant segment comes first.
    let segs: &[&str] = match path_tenant(rest) {
        Some(_) => &segs[1..],
        None => &segs,
    };
    Some(match segs {
        ["message:send"] => Route::Send,
        ["message:stream"] => Route::Stream,
        ["extendedAgentCard"] => Route::ExtendedCard,
        ["tasks"] => Route::ListTasks,
        ["tasks", last] => match last.rsplit_once(':') {
            Some((id, "cancel")) if !id.is_empty() => Route::Cancel(id.to_owned()),
            Some((id, "subscribe")) if !id.is_empty() => Route::Subscribe(id.to_owned()),
            Some(_) => return None,
            None => Route::Task((*last).to_owned()),
        },
        ["tasks", id, "pushNotificationConfigs"] => Route::PushConfigs((*id).to_owned()),
        ["tasks", id, "pushNotificationConfigs", cid] => {
            Route::PushConfig((*id).to_owned(), (*cid).to_owned())
        }
        _ => return None,
    })
}

/// Query parameters as a JSON object, typed by field so serde can check them.
pub(super) fn query_object(uri: &Uri) -> Result<Value, Error> {
    let mut obj = Map::new();
    for (k, v) in url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()) {
        // Proto field names (`history_length`) are accepted as their JSON names.
        let k: std::borrow::Cow<str> = match k.as_ref() {
            "history_length" => "historyLength".into(),
            "page_size" => "pageSize".into(),
            "page_token" => "pageToken".into(),
            "context_id" => "contextId".into(),
            "include_artifacts" => "includeArtifacts".into(),
            "status_timestamp_after" => "statusTimestampAfter".into(),
            _ => k,
        };
        let value = match k.as_ref() {
            "pageSize" | "historyLength" => Value::Number(
                v.parse::<i32>()
                    .map_err(|_| {
                        Error::InvalidParams(format!(
                            "query parameter `{k}` must be an integer, got `{v}`"
                        ))
                    })?
                    .into(),
            ),
            "includeArtifacts" => match v.as_ref() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => {
                    return Err(Error::InvalidParams(format!(
                        "query parameter `{k}` must be true or false, got `{v}`"
                    )));
                }
            },
            "A2A-Version" | "a2a-version" => continue,
            _ => Value::String(v.into_owned()),
        };
        obj.insert(k.into_owned(), value);
    }
    Ok(Value::Object(obj))
}

pub(super) fn from<T: DeserializeOwned>(v: Value) -> Result<T, Error> {
    crate::a2a::from_value_traced(v).map_err(|e| Error::InvalidParams(e.to_string()))
}

pub(super) fn with(mut v: Value, key: &str, val: &str) -> Value {
    if let Value::Object(m) = &mut v {
        m.insert(key.into(), Value::String(val.to_owned()));
    }
    v
}

/// Every request under `/a2a/{first}/…` that is not a default-tenant
/// agent's JSON-RPC endpoint. When `first` is a tenant, the next segment is
/// its agent (`/a2a/{tenant}/{agent}` alone is that agent's JSON-RPC
/// endpoint); otherwise `first` is an agent of the default tenant. Tenant
/// ids are never default agent ids (the config refuses it), so the two
/// readings cannot meet.
pub async fn handle(
    State(state): State<Shared>,
    Path((first, rest)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let a2a_json = wants_a2a_json(&headers);
    let (tenant, agent_id, rest) = if state.config.tenant(&first).is_some() {
        let (id, rest) = rest.split_once('/').unwrap_or((rest.as_str(), ""));
        if rest.is_empty() {
            let id = id.to_owned();
            return super::jsonrpc::serve(state, Some(&first), &id, method, uri, headers, body)
                .await;
        }
        (Some(first.as_str()), id.to_owned(), rest.to_owned())
    } else {
        (None, first.clone(), rest)
    };
    let agent = match super::find_agent(&state, tenant, &agent_id) {
        Ok(a) => a,
        Err(e) => return error_response(&e, a2a_json),
    };
    // `/v1/...` are the A2A 0.3 routes, unless the caller says it speaks 1.0
    // (then `v1` is a tenant of the 1.0 routes).
    if let Some(old) = rest.strip_prefix("v1/")
        && !matches!(requested_version(&headers, &uri), Ok(Some(Version::V1)))
    {
        return super::rest_v0_3::handle(&state, &agent, old, &method, &uri, &headers, body).await;
    }
    let Some(route) = route(&rest) else {
        return error_response(
            &Error::NotFound(format!("no A2A route `{}`", uri.path())),
            a2a_json,
        );
    };
    if matches!(route, Route::Card | Route::LegacyCard) {
        if !matches!(method, Method::GET | Method::HEAD) {
            return method_not_allowed(&method, &uri, route.allowed(), a2a_json);
        }
        if route == Route::Card {
            return card::agent_card(&state, &agent, &headers, &uri);
        }
        return card::legacy_card(&state, &agent, &headers);
    }
    let access = state.access.for_tenant(agent.tenant());
    let owner = match access.authenticate(&headers) {
        Ok(o) => o,
        Err(e) => {
            let mut resp = error_response(&e, a2a_json);
            if let Ok(v) = HeaderValue::from_str(&access.challenge()) {
                resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
            }
            return resp;
        }
    };
    if let Err(e) = super::ops::check_tenant(&state, &agent, path_tenant(&rest)) {
        return error_response(&e, a2a_json);
    }
    // These are the 1.0 routes (0.3 routes live under `/v1/`): without an
    // A2A-Version header they are answered as 1.0, since 0.3 has no such paths.
    match requested_version(&headers, &uri) {
        Ok(None | Some(Version::V1)) => {}
        Ok(Some(Version::V03)) => {
            let e = Error::VersionNotSupported(format!(
                "{} is an A2A 1.0 route; the A2A 0.3 routes are under /a2a/{}/v1/",
                uri.path(),
                agent.id()
            ));
            return error_response(&e, a2a_json);
        }
        Err(e) => return error_response(&e, a2a_json),
    }
    let allowed = route.allowed();
    let op = match to_op(&state, route, &method, &uri, &headers, body).await {
        Ok(op) => op,
        Err(e) => {
            if e == Error::MethodNotFound(String::new()) {
                return method_not_allowed(&method, &uri, allowed, a2a_json);
            }
            return error_response(&e, a2a_json);
        }
    };
    let base = base_url(&state, &headers);
    match ops::execute(&state, &agent, &owner, op, &base, Dialect::V1).await {
        Ok(Outcome::Stream(events)) => {
            let stream = events.map(|item| {
                let data = item
                    .to_json(Dialect::V1, None)
                    .unwrap_or_else(|e| error_event(&e));
                Ok::<_, std::convert::Infallible>(SseEvent::default().data(data))
            });
            Sse::new(stream)
                .keep_alive(KeepAlive::default())
                .into_response()
        }
        Ok(outcome) => match outcome.to_v1_json(None) {
            Ok(text) => {
                let mut resp = (StatusCode::OK, text).into_response();
                resp.headers_mut()
                    .insert(header::CONTENT_TYPE, content_type(a2a_json));
                resp
            }
            Err(e) => error_response(&e, a2a_json),
        },
        Err(e) => error_response(&e, a2a_json),
    }
}

/// 405, naming the methods the route takes.
pub(super) fn method_not_allowed(
    method: &Method,
    uri: &Uri,
    allowed: &'static str,
    a2a_json: bool,
) -> Response {
    let mut resp = error_response_with(
        &Error::UnsupportedOperation(format!(
            "{method} is not allowed on {}; use {allowed}",
            uri.path()
        )),
        StatusCode::METHOD_NOT_ALLOWED,
        a2a_json,
    );
    resp.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allowed));
    resp
}

pub(super) async fn json_body(
    state: &Shared,
    headers: &HeaderMap,
    body: Body,
) -> Result<Value, Error> {
    let bytes = read_request_body(state, body, None).await?;
    decode_body(
        &bytes,
        headers.get(header::CONTENT_TYPE),
        state.config.limits.max_json_depth,
    )
}

/// A request body as the JSON object the routes take: empty is `{}`,
/// anything else must be JSON (by its content type), nested at most
/// `max_depth` deep, and an object. Pure (no HTTP), so it can be fuzzed.
pub fn decode_body(
    bytes: &[u8],
    content_type: Option<&HeaderValue>,
    max_depth: usize,
) -> Result<Value, Error> {
    if bytes.is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    if !is_json_media_type(content_type) {
        let got = content_type.and_then(|v| v.to_str().ok()).unwrap_or("none");
        return Err(Error::UnsupportedMediaType(format!(
            "request bodies must be application/json or application/a2a+json, got `{got}`"
        )));
    }
    let v = parse_json(bytes, max_depth)?;
    if !v.is_object() {
        return Err(Error::InvalidParams(
            "the request body must be a JSON object".into(),
        ));
    }
    Ok(v)
}

/// Whether a route and method take a request body.
pub(super) fn takes_body(route: &Route, method: &Method) -> bool {
    *method == Method::POST
        && matches!(
            route,
            Route::Send | Route::Stream | Route::Cancel(_) | Route::PushConfigs(_)
        )
}

/// Builds the operation for a route and method. A method the route does not
/// take comes back as `MethodNotFound("")`, answered 405.
async fn to_op(
    state: &Shared,
    route: Route,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Body,
) -> Result<Op, Error> {
    let body = if takes_body(&route, method) {
        json_body(state, headers, body).await?
    } else {
        Value::Object(Map::new())
    };
    build_op(route, method, uri, body)
}

/// The operation for a 1.0 route, method, query and (decoded) body. Pure (no
/// HTTP, no store), so it can be fuzzed. A method the route does not take
/// comes back as `MethodNotFound("")`.
pub fn build_op(route: Route, method: &Method, uri: &Uri, body: Value) -> Result<Op, Error> {
    let wrong = || Err(Error::MethodNotFound(String::new()));
    Ok(match (route, method.clone()) {
        (Route::Send, Method::POST) => Op::SendMessage(from(body)?),
        (Route::Stream, Method::POST) => Op::SendStreamingMessage(from(body)?),
        (Route::ListTasks, Method::GET) => Op::ListTasks(from(query_object(uri)?)?),
        (Route::Task(id), Method::GET) => Op::GetTask(from(with(query_object(uri)?, "id", &id))?),
        (Route::Cancel(id), Method::POST) => Op::CancelTask(from(with(body, "id", &id))?),
        // The spec's text says POST, the proto's HTTP option says GET: take both.
        (Route::Subscribe(id), Method::GET | Method::POST) => {
            Op::SubscribeToTask(from(with(Value::Object(Map::new()), "id", &id))?)
        }
        (Route::PushConfigs(id), Method::POST) => {
            Op::CreatePushConfig(from(with(body, "taskId", &id))?)
        }
        (Route::PushConfigs(id), Method::GET) => {
            Op::ListPushConfigs(from(with(query_object(uri)?, "taskId", &id))?)
        }
        (Route::PushConfig(id, cid), Method::GET) => Op::GetPushConfig(from(with(
            with(Value::Object(Map::new()), "taskId", &id),
            "id",
            &cid,
        ))?),
        (Route::PushConfig(id, cid), Method::DELETE) => Op::DeletePushConfig(from(with(
            with(Value::Object(Map::new()), "taskId", &id),
            "id",
            &cid,
        ))?),
        (Route::ExtendedCard, Method::GET) => Op::GetExtendedAgentCard,
        _ => return wrong(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(route("message:send"), Some(Route::Send));
        assert_eq!(route("acme/message:send"), Some(Route::Send));
        assert_eq!(route("tasks/abc:cancel"), Some(Route::Cancel("abc".into())));
        assert_eq!(
            route("tasks/abc:subscribe"),
            Some(Route::Subscribe("abc".into()))
        );
        assert_eq!(route("tasks/abc"), Some(Route::Task("abc".into())));
        assert_eq!(
            route("tasks/a/pushNotificationConfigs/b"),
            Some(Route::PushConfig("a".into(), "b".into()))
        );
        assert_eq!(route(".well-known/agent-card.json"), Some(Route::Card));
        assert_eq!(route("tasks/abc:explode"), None);
        assert_eq!(route("nothing"), None);
    }

    #[test]
    fn the_optional_tenant_segment() {
        assert_eq!(path_tenant("acme/message:send"), Some("acme"));
        assert_eq!(path_tenant("acme/tasks/abc"), Some("acme"));
        assert_eq!(path_tenant("tasks/abc"), None);
        assert_eq!(path_tenant("message:send"), None);
        assert_eq!(path_tenant(".well-known/agent-card.json"), None);
        assert_eq!(path_tenant("extendedAgentCard"), None);
    }
}
