//! The Gemini routes of the proxy: `POST /v1beta/models/{model}:{method}` (also `/v1/`,
//! `/v1alpha/`). The agent's step (`:streamGenerateContent`) is compacted by the proxy
//! ([`super::proxy`]); every other method goes to `server.gemini_upstream` as it came.

use super::proxy::forward_as;
use super::{AppError, AppState, upstream};
use crate::format::Format;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use bytes::Bytes;

/// `POST /v1beta/models/{model}:{method}` (and `/v1/...`, `/v1alpha/...`): Google Gemini. The
/// agent's step, `:streamGenerateContent` (Gemini CLI sends every step so, `?alt=sse`), is
/// compacted; every other method (`:generateContent`, the CLI's side calls: model router, loop
/// check, its own compression; `:countTokens`; `:embedContent`, ...) goes to
/// `server.gemini_upstream` as it came. The key (`x-goog-api-key`, `authorization`, `?key=`)
/// passes through and is never logged (the trace and upstream lines drop the query).
pub(crate) async fn route(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let base = state.settings().server.gemini_upstream.clone();
    if gemini_method(uri.path()) != Some(GEMINI_STEP) {
        let body = body?;
        state.metrics().proxied(GEMINI_OTHER, "forwarded");
        let url = upstream::url(
            &base,
            uri.path_and_query().map_or(uri.path(), |p| p.as_str()),
        );
        let out = upstream::Outbound {
            method: Method::POST,
            url,
            headers: upstream::request_headers(&headers, false),
            body: axum::body::Body::from(body),
            stall: None,
        };
        return upstream::send(&state, out, Vec::new(), None).await;
    }
    forward_as(
        &state,
        Format::Gemini,
        &base,
        &uri,
        GEMINI_ROUTE,
        headers,
        body,
    )
    .await
}

/// The method of a Gemini model route compacted: the agent's streaming step.
pub(crate) const GEMINI_STEP: &str = "streamGenerateContent";
/// The route name of compacted Gemini steps in metrics and logs (the model, a path segment,
/// is left out: a metric label set stays fixed).
pub(crate) const GEMINI_ROUTE: &str = "/v1beta/models/{model}:streamGenerateContent";

/// The route name of the other Gemini model methods, passed through, in metrics.
pub(crate) const GEMINI_OTHER: &str = "/v1beta/models/{model}:{method}";

/// The method of a Gemini model path (`/v1beta/models/gemini-3-flash:streamGenerateContent`
/// -> `streamGenerateContent`): the text after the last `:` of the last segment.
pub(crate) fn gemini_method(path: &str) -> Option<&str> {
    let last = path.rsplit('/').next()?;
    last.rsplit_once(':').map(|(_, m)| m)
}
