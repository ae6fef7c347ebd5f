//! `GET /v1/recall/{id}`: the original a recall id names ([`crate::recall`]), from the store
//! every pipeline of the service (API and proxy) writes into, then from Redis when `[store]`
//! names one (an id another replica wrote; store/recall.rs).
//!
//! 200 `{"id", "kind": "block"|"span", "original"}`; 400 `malformed_recall_id`; 404
//! `unknown_recall_id` (never kept here) or `recall_disabled`; 410 `recall_evicted` (kept, then
//! evicted by `[recall] max_bytes`); all in the service's error shape.

use super::AppState;
use super::error::AppError;
use crate::recall::{RecallError, Recalled};
use axum::Json;
use axum::extract::{Path, State};

/// The handler.
pub(crate) async fn recall(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Recalled>, AppError> {
    let mut answer = state.default_compactor().recall(&id);
    // An id this replica does not hold may be on the shared store (another replica made it):
    // an original found there wins; its eviction record turns an unknown id into an evicted one.
    if let (Err(RecallError::Unknown(canonical) | RecallError::Evicted(canonical)), Some(store)) =
        (&answer, state.store())
        && let Some(shared) = store.recall(canonical).await
        && (shared.is_ok() || matches!(answer, Err(RecallError::Unknown(_))))
    {
        answer = shared;
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

/// The service's answer to a recall that gave nothing.
fn error_of(e: &RecallError) -> AppError {
    let message = e.to_string();
    match e {
        RecallError::Malformed(_) => AppError::bad_request("malformed_recall_id", message),
        RecallError::Unknown(_) => AppError::NotFound {
            code: "unknown_recall_id",
            message,
        },
        RecallError::Disabled => AppError::NotFound {
            code: "recall_disabled",
            message,
        },
        RecallError::Evicted(_) => AppError::Gone {
            code: "recall_evicted",
            message,
        },
    }
}
