//! The client's request body under the `[server]` bounds, and where the one global
//! concurrency place is taken.
//!
//! ```text
//! /healthz, /metrics                 -> handler (outside the limit)
//! POST to a route that reads its body whole (proxy history routes, API routes):
//!   token checked -> body read whole: every chunk first takes room in the body buffer
//!   (server.body_buffer_bytes, shared; a chunk waits while it is full), 413 past
//!   body_limit_bytes, 408 body_timeout when no chunk comes for body_read_timeout_secs or the
//!   whole body is not in within body_timeout_secs
//!   -> one global concurrency place (the handler's CPU work and its upstream stream)
//!   -> handler, the body in memory (its room given back when the handler returns)
//! any other request (pass-through, 405s)
//!   -> one global concurrency place -> handler, the body streamed through `Paced`:
//!      408 body_timeout when no chunk comes for body_read_timeout_secs, or once it is past
//!      body_timeout_secs + (bytes received / body_min_rate_bytes) seconds
//! ```
//! So a body trickled at 1 byte/s holds no concurrency place on the routes that read it
//! whole, and holds one for about `body_timeout_secs` on a pass-through route; an upload at
//! `body_min_rate_bytes` or faster (a 100 MB `/v1/files` upload) goes through. The place is
//! kept until the answer's body ends ([`super::guarded`]).

use super::{AppError, AppState, authorized, guarded, is_proxy_route};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body::{Body as _, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// Why the client's body was cut. The text names the `[server]` key of the bound.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Stall {
    /// No chunk for `body_read_timeout_secs`.
    #[error("the client's request body sent nothing for {0} s (server.body_read_timeout_secs)")]
    Gap(u64),
    /// A body read whole was not in within `body_timeout_secs`.
    #[error(
        "the client's request body was not received whole within {0} s (server.body_timeout_secs)"
    )]
    Whole(u64),
    /// A pass-through body came slower than `body_min_rate_bytes`.
    #[error(
        "the client's request body came slower than {rate} bytes/s: {received} bytes in {secs} s \
         (server.body_timeout_secs + 1 s per server.body_min_rate_bytes received)"
    )]
    Slow {
        /// Bytes received when it was cut.
        received: u64,
        /// Seconds since the request began.
        secs: u64,
        /// `body_min_rate_bytes`.
        rate: u64,
    },
}

/// Set by [`Paced`] when it cuts a body, so the handler that streamed it upstream answers
/// 408 for the client's stall instead of blaming the upstream. A request extension.
#[derive(Debug, Clone, Default)]
pub(crate) struct StallSignal(Arc<OnceLock<Stall>>);

impl StallSignal {
    /// The stall, when the body was cut.
    pub(crate) fn get(&self) -> Option<&Stall> {
        self.0.get()
    }
}

/// A request body cut when no chunk comes within `gap`, or when it is past its deadline:
/// `start + base`, plus one second per `rate` bytes received when a rate is given.
pub(crate) struct Paced {
    inner: Body,
    start: Instant,
    gap: Duration,
    base: Duration,
    rate: Option<u64>,
    received: u64,
    timer: Pin<Box<Sleep>>,
    signal: StallSignal,
    done: bool,
}

impl Paced {
    fn new(inner: Body, start: Instant, gap: Duration, base: Duration, rate: Option<u64>) -> Self {
        let mut paced = Paced {
            inner,
            start,
            gap,
            base,
            rate,
            received: 0,
            timer: Box::pin(tokio::time::sleep_until(start)),
            signal: StallSignal::default(),
            done: false,
        };
        paced.rearm();
        paced
    }

    /// When the body is past its deadline for what it has sent so far.
    fn deadline(&self) -> Instant {
        let earned = self.rate.map_or(Duration::ZERO, |rate| {
            Duration::from_secs(self.received / rate.max(1))
        });
        self.start + self.base + earned
    }

    fn rearm(&mut self) {
        let next = (Instant::now() + self.gap).min(self.deadline());
        self.timer.as_mut().reset(next);
    }

    fn stall(&self) -> Stall {
        let now = Instant::now();
        if now < self.deadline() {
            return Stall::Gap(self.gap.as_secs());
        }
        match self.rate {
            None => Stall::Whole(self.base.as_secs()),
            Some(rate) => Stall::Slow {
                received: self.received,
                secs: now.duration_since(self.start).as_secs(),
                rate,
            },
        }
    }
}

impl http_body::Body for Paced {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.received += data.len() as u64;
                }
                self.rearm();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(other) => {
                self.done = true;
                Poll::Ready(other)
            }
            Poll::Pending => {
                if self.timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                let stall = self.stall();
                tracing::info!(%stall, "request body cut");
                let _ = self.signal.0.set(stall.clone());
                self.done = true;
                Poll::Ready(Some(Err(axum::Error::new(stall))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether the request goes to a handler that reads its body whole (see the module docs).
fn reads_whole(method: &Method, path: &str) -> bool {
    *method == Method::POST
        && (is_proxy_route(path)
            || matches!(path, "/v1/compact" | "/v1/count_tokens" | "/v1/validate"))
}

/// The body buffer of the routes that read their body whole (`server.body_buffer_bytes`).
pub(crate) fn buffer(server: &crate::config::ServerSettings) -> Arc<Semaphore> {
    let bytes = usize::try_from(server.body_buffer_bytes).unwrap_or(usize::MAX);
    Arc::new(Semaphore::new(bytes.min(Semaphore::MAX_PERMITS)))
}

/// The middleware of the module docs: bounds the body, then takes the global place.
pub(crate) async fn admit(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path == "/healthz" || path == "/metrics" {
        return next.run(req).await;
    }
    let server = &state.settings().server;
    let start = Instant::now();
    let gap = Duration::from_secs(server.body_read_timeout_secs);
    let base = Duration::from_secs(server.body_timeout_secs);
    if reads_whole(req.method(), path) {
        // No body is read for a client without the token.
        if !authorized(&state, req.headers(), is_proxy_route(path)) {
            return AppError::Unauthorized.into_response();
        }
        let (parts, body) = req.into_parts();
        let paced = Paced::new(body, start, gap, base, None);
        let read = read_whole(paced, server.body_limit_bytes, &state.inner.body_buffer);
        let (bytes, room) = match tokio::time::timeout_at(start + base, read).await {
            Ok(Ok(read)) => read,
            Ok(Err(e)) => return e.into_response(),
            Err(_) => {
                return AppError::BodyTimeout(Stall::Whole(base.as_secs())).into_response();
            }
        };
        let Ok(place) = state.inner.limit.clone().acquire_owned().await else {
            return AppError::Internal("the concurrency limit is closed".into()).into_response();
        };
        let response = next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
        drop(room);
        return guarded::hold_until_end(response, place);
    }
    let Ok(place) = state.inner.limit.clone().acquire_owned().await else {
        return AppError::Internal("the concurrency limit is closed".into()).into_response();
    };
    let rate = Some(server.body_min_rate_bytes);
    let (mut parts, body) = req.into_parts();
    let paced = Paced::new(body, start, gap, base, rate);
    parts.extensions.insert(paced.signal.clone());
    let response = next.run(Request::from_parts(parts, Body::new(paced))).await;
    guarded::hold_until_end(response, place)
}

/// Reads `body` whole, each chunk taking its room in `buffer` first: the bytes and the room
/// they hold.
///
/// # Errors
/// 413 past `limit` bytes, 408 when [`Paced`] cut the body, 400 `unreadable_body` when the
/// connection failed.
async fn read_whole(
    mut body: Paced,
    limit: usize,
    buffer: &Arc<Semaphore>,
) -> Result<(Bytes, Option<OwnedSemaphorePermit>), AppError> {
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut len = 0usize;
    let mut room: Option<OwnedSemaphorePermit> = None;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| match body.signal.get() {
            Some(stall) => AppError::BodyTimeout(stall.clone()),
            None => AppError::bad_request(
                "unreadable_body",
                format!("the request body could not be read: {e}"),
            ),
        })?;
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        if chunk.is_empty() {
            continue;
        }
        len += chunk.len();
        if len > limit {
            return Err(AppError::PayloadTooLarge);
        }
        let n = u32::try_from(chunk.len()).unwrap_or(u32::MAX);
        let Ok(more) = buffer.clone().acquire_many_owned(n).await else {
            return Err(AppError::Internal("the body buffer is closed".into()));
        };
        match &mut room {
            Some(r) => r.merge(more),
            None => room = Some(more),
        }
        // Waiting for room is not the client's gap.
        body.rearm();
        chunks.push(chunk);
    }
    let bytes = match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.pop().unwrap_or_default(),
        _ => {
            let mut all = Vec::with_capacity(len);
            for c in &chunks {
                all.extend_from_slice(c);
            }
            Bytes::from(all)
        }
    };
    Ok((bytes, room))
}
