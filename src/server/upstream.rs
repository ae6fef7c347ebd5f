//! Talking to the upstream: the headers that go, the request, and the answer streamed back with
//! a read timeout between chunks.
//!
//! ```text
//! client headers - hop-by-hop (RFC 9110 7.6.1: the fixed list and every name the
//!   `Connection` header lists) - host - x-compactor-token
//!   - content-length (only where the body was rewritten; a pass-through body keeps it)
//!   -> upstream, nothing added but `host` (no `accept`, no `user-agent`)
//! upstream status + headers (- hop-by-hop) + body chunks as they come      -> client
//!   no chunk for server.upstream_read_timeout_secs -> the stream ends with an error
//!   (the client sees a cut connection, never a hang)
//! ```
//! The client is hyper's own (hyper-util's pooled client, TLS by rustls with the webpki
//! roots), not reqwest: reqwest adds `accept: */*` to every request it sends.

use super::body::StallSignal;
use super::{AppError, AppState, TOKEN_HEADER};
use axum::body::Body;
use axum::http::header::{CONNECTION, CONTENT_LENGTH, HOST};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method};
use axum::response::Response;
use futures_util::{Stream, StreamExt};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::time::Duration;

/// The upstream client: pooled, HTTP/1 and HTTP/2 (by ALPN), `http://` and `https://`.
pub(crate) type UpstreamClient = Client<HttpsConnector<HttpConnector>, Body>;

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

/// The upstream URL of a request: the configured `base` and the client's path and query.
/// A base ending in `/v1` (as the OpenAI SDKs' `base_url` is written,
/// `https://api.openai.com/v1`) is taken as the server root when the path starts with `/v1/`
/// too, so the request does not go to `/v1/v1/...`.
pub(crate) fn url(base: &str, path_and_query: &str) -> String {
    let base = base.trim_end_matches('/');
    let base = match base.strip_suffix("/v1") {
        Some(root) if path_and_query.starts_with("/v1/") || path_and_query == "/v1" => root,
        _ => base,
    };
    format!("{base}{path_and_query}")
}

/// The connector under the upstream client: TCP_NODELAY (a streamed answer's small chunks go
/// out at once, not after the peer's delayed ACK), connect timeout 10 s, any scheme (TLS is
/// the next layer's).
pub(crate) fn connector() -> HttpConnector {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(Duration::from_secs(10)));
    http
}

/// Builds the upstream client: TCP_NODELAY, connect timeout 10 s ([`connector`]), idle pooled
/// connections kept 90 s, no redirects followed, TLS by rustls (ring) with the webpki roots.
///
/// # Errors
/// The TLS configuration's error (a crypto provider without safe protocol versions).
pub(crate) fn client() -> Result<UpstreamClient, String> {
    let http = connector();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
        .map_err(|e| format!("TLS: {e}"))?
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .timer(TokioTimer::new())
        .build(https))
}

/// The names `headers`' `Connection` header lists (lower case): hop-by-hop as well.
fn connection_named(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
        .collect()
}

/// Whether `name` goes from one hop to the next: not hop-by-hop, not named in `Connection`.
fn end_to_end(name: &HeaderName, named: &[String]) -> bool {
    let n = name.as_str();
    !HOP_BY_HOP.contains(&n) && !named.iter().any(|c| c == n)
}

/// The client's headers minus hop-by-hop ones (the fixed list and those the client's
/// `Connection` header names), `host` and the service token; minus `content-length` too
/// unless `keep_length` (a pass-through body goes as it came; a rewritten one gets its own).
pub(crate) fn request_headers(headers: &HeaderMap, keep_length: bool) -> HeaderMap {
    let named = connection_named(headers);
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        let dropped = name == HOST
            || name.as_str() == TOKEN_HEADER
            || (name == CONTENT_LENGTH && !keep_length);
        if !dropped && end_to_end(name, &named) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// One request for the upstream.
pub(crate) struct Outbound {
    /// The method.
    pub method: Method,
    /// The whole URL (the configured base and the client's path and query).
    pub url: String,
    /// The headers, from [`request_headers`].
    pub headers: HeaderMap,
    /// The body: the client's own stream (pass-through) or the bytes to send.
    pub body: Body,
    /// Set when the client's body was cut ([`super::body::Paced`]): the failure is then the
    /// client's (408), not the upstream's (502).
    pub stall: Option<StallSignal>,
}

/// Sends one request upstream and streams the answer back, adding `extra` as a header. With
/// `probe` (the model and the counted tokens of the body sent), the answer's `usage` is read
/// as it streams by and teaches the model's token ratio ([`super::usage::UsageTap`]).
///
/// # Errors
/// [`AppError::BodyTimeout`] (408) when the client's body stalled on its way up;
/// [`AppError::Upstream`] (502) when the upstream cannot be reached (the URL and cause are
/// logged, not shown).
pub(crate) async fn send(
    state: &AppState,
    out: Outbound,
    extra: Vec<(&'static str, String)>,
    probe: Option<(String, usize)>,
) -> Result<Response, AppError> {
    let url = out.url;
    // Logged without the query's values: a key may ride in it (`?key=...`).
    let shown = redact_query(&url);
    let unreachable = |why: String| AppError::Upstream(format!("{shown}: {why}"));
    let mut request = hyper::Request::builder()
        .method(out.method)
        .uri(url.as_str())
        .body(out.body)
        .map_err(|e| unreachable(format!("not a request URL: {e}")))?;
    *request.headers_mut() = out.headers;
    let answer = match state.inner.client.request(request).await {
        Ok(answer) => answer,
        Err(e) => {
            if let Some(stall) = out.stall.as_ref().and_then(StallSignal::get) {
                return Err(AppError::BodyTimeout(stall.clone()));
            }
            return Err(unreachable(error_chain(&e)));
        }
    };
    let (parts, incoming) = answer.into_parts();
    let tap = super::usage::learning_tap(state, parts.status, &parts.headers, probe);
    let mut response = Response::builder().status(parts.status);
    if let Some(h) = response.headers_mut() {
        let named = connection_named(&parts.headers);
        for (name, value) in &parts.headers {
            if end_to_end(name, &named) {
                h.append(name.clone(), value.clone());
            }
        }
        for (name, value) in extra {
            if let Ok(v) = HeaderValue::from_str(&value) {
                h.insert(HeaderName::from_static(name), v);
            }
        }
    }
    let gap = Duration::from_secs(state.settings().server.upstream_read_timeout_secs);
    let stream = with_gap_timeout(Body::new(incoming).into_data_stream(), gap);
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

/// `url` with the value of every query parameter replaced by `REDACTED` (names kept), for
/// logs: an API key may travel in a query string (`?key=…`).
pub(crate) fn redact_query(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_string();
    };
    let params: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((name, _)) => format!("{name}=REDACTED"),
            None => p.to_string(),
        })
        .collect();
    format!("{base}?{}", params.join("&"))
}

/// An error and its causes, `: `-joined (hyper-util's own text is only "client error").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_redacted_for_logs() {
        assert_eq!(
            redact_query("https://x.test/v1beta/models?key=AIza123&alt=sse&flag"),
            "https://x.test/v1beta/models?key=REDACTED&alt=REDACTED&flag"
        );
        assert_eq!(
            redact_query("https://x.test/v1/models"),
            "https://x.test/v1/models"
        );
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_are_dropped() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, X-Trace-Hop"),
            ("x-trace-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("content-length", "5"),
            ("host", "127.0.0.1:8787"),
            ("x-compactor-token", "secret"),
            ("x-api-key", "sk"),
            ("anthropic-version", "2023-06-01"),
        ] {
            h.append(k, HeaderValue::from_static(v));
        }
        let names = |m: &HeaderMap| m.keys().map(|k| k.as_str().to_string()).collect::<Vec<_>>();
        assert_eq!(
            names(&request_headers(&h, true)),
            ["content-length", "x-api-key", "anthropic-version"]
        );
        assert_eq!(
            names(&request_headers(&h, false)),
            ["x-api-key", "anthropic-version"]
        );
    }

    #[test]
    fn a_base_ending_in_v1_does_not_double_the_version() {
        let cases = [
            (
                "https://api.openai.com/v1",
                "/v1/responses",
                "https://api.openai.com/v1/responses",
            ),
            (
                "https://api.openai.com/v1/",
                "/v1/chat/completions?x=1",
                "https://api.openai.com/v1/chat/completions?x=1",
            ),
            (
                "https://api.openai.com",
                "/v1/responses",
                "https://api.openai.com/v1/responses",
            ),
            (
                "http://127.0.0.1:9/openai/v1",
                "/v1/models",
                "http://127.0.0.1:9/openai/v1/models",
            ),
            // A path outside /v1 keeps the base whole.
            (
                "http://127.0.0.1:9/v1",
                "/api/hello",
                "http://127.0.0.1:9/v1/api/hello",
            ),
            (
                "http://127.0.0.1:9/xv1",
                "/v1/models",
                "http://127.0.0.1:9/xv1/v1/models",
            ),
        ];
        for (base, path, want) in cases {
            assert_eq!(url(base, path), want, "{base} + {path}");
        }
    }

    #[tokio::test]
    async fn the_upstream_connector_sets_tcp_nodelay() {
        use tower::ServiceExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let uri: axum::http::Uri = format!("http://{addr}/").parse().unwrap();
        let (stream, _) = tokio::join!(connector().oneshot(uri), listener.accept());
        assert!(stream.unwrap().inner().nodelay().unwrap());
    }
}
