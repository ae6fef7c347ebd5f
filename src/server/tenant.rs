//! Whose request: the tenant a compaction keeps its recall originals for, and whose recall
//! ids a `GET /v1/recall/{id}` may read.
//!
//! ```text
//! [recall] tenant_header set and present  -> keyed hash of "header" + its value
//! else x-api-key | x-goog-api-key | authorization: Bearer (not the service token)
//!                                         -> keyed hash of "credential" + the key
//! else                                    -> Tenant::NONE (every request without one)
//! ```
//! The hash is a MAC under the deployment's recall key ([`crate::recall::RecallKey::tenant`]):
//! the credential itself is never kept, logged or sent to Redis, and the tenant of a key
//! cannot be computed without the deployment's secret.

use super::AppState;
use crate::recall::Tenant;
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;

/// The provider credential headers, in the order they are looked at.
const CREDENTIALS: [&str; 2] = ["x-api-key", "x-goog-api-key"];

/// The tenant of a request with `headers` (see the module docs).
pub(crate) fn of(state: &AppState, headers: &HeaderMap) -> Tenant {
    let Some(store) = state.default_compactor().recall_store().cloned() else {
        return Tenant::NONE;
    };
    let key = store.key();
    let named = |name: &str| {
        headers
            .get(name)
            .map(|v| v.as_bytes())
            .filter(|v| !v.is_empty())
    };
    if let Some(name) = &state.settings().recall.tenant_header
        && let Some(value) = named(name)
    {
        return key.tenant(&[b"header\0", value].concat());
    }
    let bearer = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty() && !state.is_service_token(t))
        .map(str::as_bytes);
    let credential = CREDENTIALS.iter().find_map(|n| named(n)).or(bearer);
    match credential {
        Some(c) => key.tenant(&[b"credential\0", c].concat()),
        None => Tenant::NONE,
    }
}
