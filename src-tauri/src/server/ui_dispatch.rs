//! The UI API's outbound side: chain rules (list, add, edit, remove), their
//! recent hops (and the person's answer to a gated one), and the outbox of
//! deliveries with its dead letters (retryable by hand).

use std::collections::BTreeMap;

use super::ui_api::ApiBody;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde_json::json;

use super::Shared;
use super::ui_api::{api_error, store_error};
use crate::dispatch::chains::ChainRule;
use crate::engine::dispatch::ChainError;

/// The routes, to be nested under `/api`.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/chains", get(list).post(add))
        .route("/chains/hops", get(hops))
        .route("/chains/hops/{id}/release", post(release))
        .route("/chains/hops/{id}/drop", post(drop_hop))
        .route("/chains/{id}", put(update).delete(remove))
        .route("/outbox", get(outbox))
        .route("/outbox/{id}/retry", post(retry))
}

fn chain_error(e: ChainError) -> Response {
    let status = match &e {
        ChainError::UnknownRule(_) | ChainError::UnknownHop(_) => StatusCode::NOT_FOUND,
        ChainError::FromConfig(_) | ChainError::Exists(_) => StatusCode::CONFLICT,
        ChainError::Invalid(_) => StatusCode::BAD_REQUEST,
        ChainError::Store(s) => return store_error(s),
    };
    api_error(status, e.to_string())
}

fn parse_rule(body: &Bytes) -> Result<ChainRule, String> {
    serde_json::from_slice(body).map_err(|e| format!("invalid chain rule: {e}"))
}

/// `GET /api/chains`
async fn list(State(state): State<Shared>) -> Response {
    match state.engine.chain_rules().await {
        Ok(rules) => axum::Json(json!({ "rules": rules })).into_response(),
        Err(e) => store_error(&e),
    }
}

/// `POST /api/chains`: 201 with the rule as stored (its id filled in).
async fn add(State(state): State<Shared>, ApiBody(body): ApiBody) -> Response {
    let rule = match parse_rule(&body) {
        Ok(r) => r,
        Err(m) => return api_error(StatusCode::BAD_REQUEST, m),
    };
    match state.engine.add_chain_rule(rule).await {
        Ok(rule) => (StatusCode::CREATED, axum::Json(json!({ "rule": rule }))).into_response(),
        Err(e) => chain_error(e),
    }
}

/// `PUT /api/chains/{id}`
async fn update(
    State(state): State<Shared>,
    Path(id): Path<String>,
    ApiBody(body): ApiBody,
) -> Response {
    let rule = match parse_rule(&body) {
        Ok(r) => r,
        Err(m) => return api_error(StatusCode::BAD_REQUEST, m),
    };
    match state.engine.update_chain_rule(&id, rule).await {
        Ok(rule) => axum::Json(json!({ "rule": rule })).into_response(),
        Err(e) => chain_error(e),
    }
}

/// `DELETE /api/chains/{id}`
async fn remove(State(state): State<Shared>, Path(id): Path<String>) -> Response {
    match state.engine.remove_chain_rule(&id).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => chain_error(e),
    }
}

/// `GET /api/chains/hops?limit=50`: the newest hops.
async fn hops(State(state): State<Shared>, Query(p): Query<BTreeMap<String, String>>) -> Response {
    let limit = match p.get("limit").map(|l| l.parse::<usize>()) {
        None => 50,
        Some(Ok(n)) if (1..=500).contains(&n) => n,
        Some(_) => {
            return api_error(
                StatusCode::BAD_REQUEST,
                "limit must be a number from 1 to 500",
            );
        }
    };
    match state.engine.chain_hops(limit).await {
        Ok(hops) => axum::Json(json!({ "hops": hops })).into_response(),
        Err(e) => store_error(&e),
    }
}

async fn answer(state: &Shared, id: &str, release: bool) -> Response {
    match state.engine.answer_gate(id, release).await {
        Ok(hop) if hop.state == "gated" || hop.state == "pending" || hop.state == "dropped" => {
            axum::Json(json!({ "hop": hop })).into_response()
        }
        Ok(hop) => api_error(
            StatusCode::CONFLICT,
            format!("hop `{id}` is {} and no longer waits for you", hop.state),
        ),
        Err(e) => chain_error(e),
    }
}

/// `POST /api/chains/hops/{id}/release`: a gated hop goes out.
async fn release(State(state): State<Shared>, Path(id): Path<String>) -> Response {
    answer(&state, &id, true).await
}

/// `POST /api/chains/hops/{id}/drop`: a gated hop is dropped.
async fn drop_hop(State(state): State<Shared>, Path(id): Path<String>) -> Response {
    answer(&state, &id, false).await
}

/// `GET /api/outbox?failed=true`: deliveries owed (decisions to peers, push
/// notifications, chain hops), newest first; `failed` for the dead letters.
async fn outbox(
    State(state): State<Shared>,
    Query(p): Query<BTreeMap<String, String>>,
) -> Response {
    let failed = p.get("failed").is_some_and(|v| v == "true" || v == "1");
    match state.engine.outbox(failed).await {
        Ok(items) => axum::Json(json!({ "items": items })).into_response(),
        Err(e) => store_error(&e),
    }
}

/// `POST /api/outbox/{id}/retry`: a dead letter is tried again from scratch.
async fn retry(State(state): State<Shared>, Path(id): Path<String>) -> Response {
    match state.engine.retry_delivery(&id).await {
        Ok(true) => axum::Json(json!({ "retried": id })).into_response(),
        Ok(false) => api_error(
            StatusCode::NOT_FOUND,
            format!("no failed delivery `{id}` (only dead letters can be retried)"),
        ),
        Err(e) => store_error(&e),
    }
}
