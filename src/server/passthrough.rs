//! Every method and path the service does not handle itself goes to the upstream as it came:
//! `GET /v1/models`, `POST /v1/embeddings`, `/v1/files` uploads, `GET /v1/messages/batches`,
//! query strings (`?beta=true`) and all. Bodies are streamed both ways (no body limit applies,
//! nothing is buffered or compacted).
//!
//! Which upstream: `server.anthropic_upstream` when the request carries an `anthropic-version`
//! or `x-api-key` header (every Anthropic SDK sends both), else `server.openai_upstream`.
//! The service token, when configured, is required as on the proxy routes
//! (`x-compactor-token`; `authorization` is the provider's key and passes through).

use super::{AppError, AppState, authorized, upstream};
use axum::extract::{Request, State};
use axum::response::Response;

/// The fallback handler: forwards the request unchanged and streams the answer back.
///
/// # Errors
/// 401 without the service token; 502 when the upstream cannot be reached.
pub(crate) async fn forward(
    State(state): State<AppState>,
    req: Request,
) -> Result<Response, AppError> {
    if !authorized(&state, req.headers(), true) {
        return Err(AppError::Unauthorized);
    }
    let (parts, body) = req.into_parts();
    let server = &state.settings().server;
    let anthropic =
        parts.headers.contains_key("anthropic-version") || parts.headers.contains_key("x-api-key");
    let base = if anthropic {
        &server.anthropic_upstream
    } else {
        &server.openai_upstream
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path(), |p| p.as_str());
    let url = format!("{}{path}", base.trim_end_matches('/'));
    let headers = upstream::request_headers(&parts.headers);
    let body = reqwest::Body::wrap_stream(body.into_data_stream());
    state.metrics().proxied("other", "forwarded");
    upstream::send(&state, parts.method, &url, headers, body, None, None).await
}
