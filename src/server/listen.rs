//! The accept loop: a connection cap, header-read and idle timeouts, and a shutdown deadline.
//!
//! ```text
//! accept (waits while server.max_connections are open)
//!   -> hyper auto (HTTP/1 + HTTP/2), header_read_timeout on HTTP/1
//!   -> per connection: requests in flight counted (a streamed answer counts to its end);
//!      none in flight for idle_timeout -> graceful close
//! ctrl-c / SIGTERM -> stop accepting, close idle connections, let the rest finish for
//!                     shutdown_timeout, then return (what is left is cut)
//! ```
//! `axum::serve` has none of these knobs, so the loop is written here on hyper-util's
//! connection builder.

use super::guarded::hold_until_end;
use super::{AppState, app};
use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tower::ServiceExt;

/// hyper's default HTTP/1 read buffer bound (its `DEFAULT_MAX_BUFFER_SIZE`, 8 KiB + 400 KiB).
const HYPER_DEFAULT_BUF: usize = 8192 + 4096 * 100;

/// Requests in flight on one connection and when the last one ended.
struct Activity {
    active: AtomicUsize,
    last: Mutex<Instant>,
}

impl Activity {
    /// How long the connection has had nothing in flight (`None`: something is in flight).
    fn idle_for(&self) -> Option<Duration> {
        if self.active.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let last = *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(last.elapsed())
    }
}

/// Marks one request in flight until dropped (with the end of its response body).
struct InFlight(Arc<Activity>);

impl InFlight {
    fn enter(a: &Arc<Activity>) -> InFlight {
        a.active.fetch_add(1, Ordering::SeqCst);
        InFlight(a.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        *self
            .0
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves [`app`] on `listener` until `shutdown` completes, then lets the requests in flight
/// finish for `server.shutdown_timeout_secs`.
///
/// # Errors
/// The I/O error of reading the listener's address.
pub async fn serve_on(
    state: AppState,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let server = state.settings().server.clone();
    tracing::info!(addr = %listener.local_addr()?, "compactor serve: listening");
    let router = app(state);
    let max = server.max_connections.min(Semaphore::MAX_PERMITS);
    let connections = Arc::new(Semaphore::new(max));
    let header_read = Duration::from_secs(server.header_read_timeout_secs);
    // hyper answers an empty 431 past its read buffer: keep that far above our own limit,
    // so headers over `max_header_bytes` get the service's JSON 431.
    let buf_size = server
        .max_header_bytes
        .saturating_mul(4)
        .max(HYPER_DEFAULT_BUF);
    let idle = Duration::from_secs(server.idle_timeout_secs);
    let (closing_tx, closing_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            p = connections.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let router = router.clone();
        let closing = closing_rx.clone();
        tokio::spawn(async move {
            connection(stream, router, header_read, idle, buf_size, closing).await;
            drop(permit);
        });
    }
    tracing::info!("shutting down: finishing requests in flight");
    let _ = closing_tx.send(true);
    let deadline = Duration::from_secs(server.shutdown_timeout_secs);
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    if tokio::time::timeout(deadline, connections.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!(
            open = max - connections.available_permits(),
            "shutdown deadline passed: cutting the connections still open"
        );
    }
    Ok(())
}

/// Serves one connection until it ends, is idle too long, or the server shuts down.
async fn connection(
    stream: tokio::net::TcpStream,
    router: Router,
    header_read: Duration,
    idle: Duration,
    buf_size: usize,
    mut closing: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity {
        active: AtomicUsize::new(0),
        last: Mutex::new(Instant::now()),
    });
    let act = activity.clone();
    let service = tower::service_fn(move |req: hyper::Request<Incoming>| {
        let router = router.clone();
        let mark = InFlight::enter(&act);
        async move {
            let response = router.oneshot(req.map(Body::new)).await?;
            Ok::<_, std::convert::Infallible>(hold_until_end(response, mark))
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read)
        .max_buf_size(buf_size);
    builder.http2().timer(TokioTimer::new());
    let conn = builder
        .serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(service));
    tokio::pin!(conn);
    let mut closed = false;
    loop {
        let wait = activity
            .idle_for()
            .map_or(idle, |for_| idle.saturating_sub(for_));
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                break;
            }
            changed = closing.changed(), if !closed => {
                if changed.is_err() || *closing.borrow() {
                    conn.as_mut().graceful_shutdown();
                    closed = true;
                }
            }
            () = tokio::time::sleep(wait), if !closed => {
                if activity.idle_for().is_some_and(|d| d >= idle) {
                    tracing::debug!("closing an idle connection");
                    conn.as_mut().graceful_shutdown();
                    closed = true;
                }
            }
        }
    }
}
