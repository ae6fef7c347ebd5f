//! Every method and path the service does not handle itself goes to the upstream as it came:
//! `GET /v1/models`, `POST /v1/embeddings`, `/v1/files` uploads, `GET /v1/messages/batches`,
//! query strings (`?beta=true`) and all. Bodies are streamed both ways (no body limit applies,
//! nothing is buffered or compacted).
//!
//! Which upstream: `server.anthropic_upstream` when the request carries an `anthropic-version`
//! or `x-api-key` header (every Anthropic SDK sends both); `server.gemini_upstream` for a
//! Google request ([`is_gemini`]: an `x-goog-api-key` or `x-goog-api-client` header, a `key=`
//! query, a `/v1beta/`, `/v1alpha/` or `/upload/` path, or a `/v1/models/{model}:{method}`
//! path); else `server.openai_upstream`.
//! The service token, when configured, is required as on the proxy routes
//! (`x-compactor-token`; `authorization` is the provider's key and passes through).
//!
//! A client's start-up probe (`HEAD /`, `HEAD /api/hello` without a provider header: Claude
//! Code's) is answered here, 200 with no body.
//!
//! The request goes as it came, but hop-by-hop headers ([`upstream::request_headers`]): its
//! `content-length` too, so a sized body is not re-sent chunked. Its body is bounded by
//! [`super::body::Paced`] (a gap timeout and a minimum average rate). A protocol upgrade
//! (`Upgrade: websocket`, OpenAI's realtime API) is not tunneled: a JSON 501
//! `upgrade_not_supported` names the route.

use super::body::StallSignal;
use super::{AppError, AppState, authorized, upstream};
use axum::extract::{Request, State};
use axum::http::header::UPGRADE;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};

/// The fallback handler: forwards the request unchanged and streams the answer back.
///
/// # Errors
/// 401 without the service token; 501 for a protocol upgrade other than `h2c` (not tunneled);
/// 408 when the client's body stalled on its way up; 502 when the upstream cannot be reached.
pub(crate) async fn forward(
    State(state): State<AppState>,
    req: Request,
) -> Result<Response, AppError> {
    if is_client_probe(&req) {
        state.metrics().proxied("other", "probe");
        tracing::debug!(path = %req.uri().path(), "pass-through: a client's start-up probe answered here");
        return Ok(StatusCode::OK.into_response());
    }
    if !authorized(&state, req.headers(), true) {
        return Err(AppError::Unauthorized);
    }
    if let Some(protocol) = upgrade(req.headers()) {
        tracing::info!(path = %req.uri().path(), %protocol, "pass-through: upgrade refused");
        return Err(AppError::UpgradeNotSupported(format!(
            "{} {}",
            req.method(),
            req.uri().path()
        )));
    }
    let (parts, body) = req.into_parts();
    let server = &state.settings().server;
    let anthropic =
        parts.headers.contains_key("anthropic-version") || parts.headers.contains_key("x-api-key");
    let base = if anthropic {
        &server.anthropic_upstream
    } else if is_gemini(&parts.headers, parts.uri.path(), parts.uri.query()) {
        &server.gemini_upstream
    } else {
        &server.openai_upstream
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path(), |p| p.as_str());
    state.metrics().proxied("other", "forwarded");
    let out = upstream::Outbound {
        method: parts.method,
        url: upstream::url(base, path),
        headers: upstream::request_headers(&parts.headers, true),
        body,
        stall: parts.extensions.get::<StallSignal>().cloned(),
    };
    upstream::send(&state, out, Vec::new(), None).await
}

/// Whether a request the service does not handle itself is Google's: an `x-goog-api-key` or
/// `x-goog-api-client` header (`@google/genai` sends them), a `key=` query parameter (the
/// Gemini API's other way to pass the key), a path under `/v1beta/`, `/v1alpha/` or
/// `/upload/`, or a model method path (`/v1/models/gemini-3-flash:countTokens`; OpenAI's
/// `/v1/models/{id}` has no `:`).
pub(crate) fn is_gemini(headers: &HeaderMap, path: &str, query: Option<&str>) -> bool {
    headers.contains_key("x-goog-api-key")
        || headers.contains_key("x-goog-api-client")
        || query.is_some_and(|q| q.split('&').any(|kv| kv.starts_with("key=")))
        || is_gemini_path(path)
}

/// Whether `path` is one of the Gemini API's: under `/v1beta/`, `/v1alpha/` or `/upload/`, or
/// `/v1/models/{model}:{method}`.
pub(crate) fn is_gemini_path(path: &str) -> bool {
    ["/v1beta/", "/v1alpha/", "/upload/"]
        .iter()
        .any(|p| path.starts_with(p))
        || path
            .strip_prefix("/v1/models/")
            .is_some_and(|rest| rest.contains(':'))
}

/// Whether `req` is a client's start-up probe, answered here with an empty 200: `HEAD /` or
/// `HEAD /api/hello` with no provider header (`x-api-key`, `anthropic-version`,
/// `authorization`). Claude Code sends both when it starts, to see that its base URL
/// answers; no provider has such a route, and forwarded they got a 502 from the OpenAI
/// upstream (and a WARN and an ERROR line) at every client start.
fn is_client_probe(req: &Request) -> bool {
    let headers = req.headers();
    req.method() == Method::HEAD
        && matches!(req.uri().path(), "/" | "/api/hello")
        && !["x-api-key", "anthropic-version", "authorization"]
            .iter()
            .any(|h| headers.contains_key(*h))
}

/// The protocol a request asks to upgrade to (`Upgrade: websocket`), but `h2c`: a client
/// asking for that takes an HTTP/1.1 answer as the refusal (RFC 9113 3.1 leaves h2c upgrade
/// out; curl sends it and goes on).
fn upgrade(headers: &HeaderMap) -> Option<String> {
    let asked = headers.get(UPGRADE)?.to_str().unwrap_or("?");
    let other = asked
        .split(',')
        .map(str::trim)
        .any(|p| !p.eq_ignore_ascii_case("h2c"));
    other.then(|| asked.to_string())
}
