//! A response body that holds a value (a concurrency permit, a connection's activity mark)
//! until the body is finished or dropped, so a limit counts a streamed answer to its end.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};

/// `inner`, with `guard` dropped only when the body is dropped (after its last frame was sent,
/// or when the client went away).
struct Guarded<G> {
    inner: Body,
    _guard: G,
}

impl<G: Send + Unpin + 'static> http_body::Body for Guarded<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// `response` whose body keeps `guard` alive until it ends. Size hints pass through, so a
/// `content-length` is still sent for bodies of known size.
pub(crate) fn hold_until_end<G: Send + Unpin + 'static>(response: Response, guard: G) -> Response {
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        Body::new(Guarded {
            inner: body,
            _guard: guard,
        }),
    )
}
