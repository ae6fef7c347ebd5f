//! `GET /v1/recall/{id}`: the original a recall id names ([`crate::recall`]), for the tenant of
//! the request ([`super::tenant`]), from the store every pipeline of the service (API and
//! proxy) writes into, then from Redis when `[store]` names one (an id another replica wrote,
//! checked against its id before it is served; store/recall.rs).
//!
//! 200 `{"id", "kind": "block"|"span", "original"}`; 400 `malformed_recall_id`; 404
//! `recall_disabled`; 404 `unknown_recall_id` with one body whatever the reason (never made
//! for this tenant, another tenant's, evicted or expired), so an answer tells nothing of ids
//! the asker does not hold; all in the service's error shape.

use super::AppState;
use super::error::AppError;
use crate::recall::{RecallError, RecallId, Recalled};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;

/// The one message of every 404 `unknown_recall_id`.
pub const NOT_HERE: &str = "no original is kept for this recall id here: never made for this \
                            tenant, or evicted or expired since";

/// The handler.
pub(crate) async fn recall(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Recalled>, AppError> {
    let tenant = super::tenant::of(&state, &headers);
    let compactor = state.default_compactor();
    let answer = compactor.recall_for(tenant, &id);
    // An id this replica does not hold may be on the shared store (another replica made it).
    if let (Err(RecallError::Unknown(_) | RecallError::Evicted(_)), Some(store), Some(local)) =
        (&answer, state.store(), compactor.recall_store())
        && let Ok(parsed) = RecallId::parse(&id)
        && let Some(found) = store.recall(&local.key(), tenant, parsed).await
    {
        return Ok(Json(found));
    }
    answer.map(Json).map_err(|e| error_of(&e))
}

/// A recall path that is no `/v1/recall/{id}` (no id, or more than one segment after
/// `/v1/recall/`): 400 `malformed_recall_id` naming the path, in the service's error shape.
pub(crate) async fn no_id(uri: axum::http::Uri) -> AppError {
    AppError::bad_request(
        "malformed_recall_id",
        format!(
            "{} is no recall path: expected /v1/recall/rc_ and 32 hex digits",
            uri.path()
        ),
    )
}

/// The service's answer to a recall that gave nothing: an evicted id and an unknown one alike.
fn error_of(e: &RecallError) -> AppError {
    match e {
        RecallError::Malformed(_) => AppError::bad_request("malformed_recall_id", e.to_string()),
        RecallError::Unknown(_) | RecallError::Evicted(_) => AppError::NotFound {
            code: "unknown_recall_id",
            message: NOT_HERE.to_string(),
        },
        RecallError::Disabled => AppError::NotFound {
            code: "recall_disabled",
            message: e.to_string(),
        },
    }
}
