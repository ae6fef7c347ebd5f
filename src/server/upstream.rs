//! Talking to the upstream: the headers that go, the request, and the answer streamed back with
//! a read timeout between chunks.
//!
//! ```text
//! client headers - hop-by-hop - host - content-length - x-compactor-token -> upstream
//! upstream status + headers (- hop-by-hop) + body chunks as they come      -> client
//!   no chunk for server.upstream_read_timeout_secs -> the stream ends with an error
//!   (the client sees a cut connection, never a hang)
//! ```

use super::{AppError, AppState, TOKEN_HEADER};
use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method};
use axum::response::Response;
use futures_util::{Stream, StreamExt};
use std::time::Duration;

/// Headers of one connection, not of the message (RFC 9110 7.6.1).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The client's headers minus hop-by-hop ones, `host`, `content-length` (the body may change)
/// and the service token.
pub(crate) fn request_headers(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        let n = name.as_str();
        if !HOP_BY_HOP.contains(&n) && n != "host" && n != "content-length" && n != TOKEN_HEADER {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// Sends one request upstream and streams the answer back, adding `extra` as a header. With
/// `probe` (the model and the counted tokens of the body sent), the answer's `usage` is read
/// as it streams by and teaches the model's token ratio ([`super::usage::UsageTap`]).
///
/// # Errors
/// [`AppError::Upstream`] (502) when the upstream cannot be reached; the URL and cause are
/// logged, not shown.
pub(crate) async fn send(
    state: &AppState,
    method: Method,
    url: &str,
    headers: HeaderMap,
    body: reqwest::Body,
    extra: Option<(&'static str, String)>,
    probe: Option<(String, usize)>,
) -> Result<Response, AppError> {
    let answer = state
        .inner
        .client
        .request(method, url)
        .headers(headers)
        .body(body)
        .send()
        .await
        .map_err(|e| AppError::Upstream(format!("{url}: {e}")))?;
    let tap = super::usage::learning_tap(state, &answer, probe);
    let mut response = Response::builder().status(answer.status());
    if let Some(h) = response.headers_mut() {
        for (name, value) in answer.headers() {
            if !HOP_BY_HOP.contains(&name.as_str()) {
                h.append(name.clone(), value.clone());
            }
        }
        if let Some((name, value)) = extra
            && let Ok(v) = HeaderValue::from_str(&value)
        {
            h.insert(HeaderName::from_static(name), v);
        }
    }
    let gap = Duration::from_secs(state.settings().server.upstream_read_timeout_secs);
    let stream = with_gap_timeout(answer.bytes_stream(), gap);
    let body = match tap {
        None => Body::from_stream(stream),
        Some(mut tap) => Body::from_stream(stream.map(move |chunk| {
            if let Ok(bytes) = &chunk {
                tap.feed(bytes);
            }
            chunk
        })),
    };
    response
        .body(body)
        .map_err(|e| AppError::Internal(format!("building the response: {e}")))
}

/// The error that ends a stream whose upstream fell silent.
#[derive(Debug, thiserror::Error)]
#[error("no data from the upstream for {0:?} (server.upstream_read_timeout_secs)")]
pub(crate) struct Stalled(Duration);

/// `stream`, ending with [`Stalled`] when no item comes within `gap` of the last one.
fn with_gap_timeout<S, T, E>(
    stream: S,
    gap: Duration,
) -> impl Stream<Item = Result<T, Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
where
    S: Stream<Item = Result<T, E>> + Send + Unpin + 'static,
    T: Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    futures_util::stream::unfold(Some(stream), move |state| async move {
        let mut stream = state?;
        match tokio::time::timeout(gap, stream.next()).await {
            Ok(Some(Ok(item))) => Some((Ok(item), Some(stream))),
            Ok(Some(Err(e))) => Some((Err(e.into()), None)),
            Ok(None) => None,
            Err(_) => {
                tracing::warn!(?gap, "upstream stream stalled: cut");
                Some((Err(Stalled(gap).into()), None))
            }
        }
    })
}
