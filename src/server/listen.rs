//! The accept loop: a connection cap, header-read and idle timeouts, and a shutdown deadline.
//!
//! ```text
//! accept -> a place among max_connections (connection_cap: 1024 or the open-file limit less a
//!           reserve); none free: the connection idle longest is closed to make room (so
//!           /healthz answers under a flood of idle connections), or, all busy, it waits
//!   -> hyper auto (HTTP/1 + HTTP/2 by prior knowledge); HTTP/1 header_read_timeout (hyper's)
//!   -> per connection, whatever the protocol: requests in flight counted (a streamed answer
//!      counts to its end);
//!      no request begun within header_read_timeout (and idle_timeout) of the accept,
//!      or none in flight for idle_timeout since the last one ended -> graceful close
//!      (HTTP/1: close after the answer; HTTP/2: GOAWAY, then hyper waits for a PING's answer)
//!      graceful close, and nothing in flight for CLOSE_GRACE more -> the connection is cut
//! ctrl-c / SIGTERM -> the listener closed at once (new connections are refused), idle
//!                     connections closed, the rest finish within shutdown_timeout, then
//!                     return (what is left is cut)
//! ```
//! `axum::serve` has none of these knobs, so the loop is written here on hyper-util's
//! connection builder. HTTP/2 needs the connection-level clock: hyper's HTTP/2 keep-alive
//! PINGs find dead peers only, and an HTTP/2 connection that sends its preface and SETTINGS
//! (PINGs even) but no request is idle for as long as it likes; its graceful close waits for
//! an answer to hyper's PING that such a peer never sends, hence the cut after
//! [`CLOSE_GRACE`].

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

/// How long a connection asked to close gracefully (idle, no first request, shutdown) may
/// stay open with nothing in flight before it is cut: an HTTP/2 peer that never answers the
/// GOAWAY's PING would otherwise hold it forever.
pub const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Requests in flight on one connection and when the last one ended.
struct Activity {
    active: AtomicUsize,
    last: Mutex<Instant>,
    /// Whether a request has begun on the connection.
    begun: std::sync::atomic::AtomicBool,
    /// Whether it was asked to close to make room for a new connection.
    evicted: std::sync::atomic::AtomicBool,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            active: AtomicUsize::new(0),
            last: Mutex::new(Instant::now()),
            begun: std::sync::atomic::AtomicBool::new(false),
            evicted: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// How long the connection may still wait with nothing in flight before it is closed:
    /// `first` (no request begun yet: the accept's header deadline) or `idle` since the last
    /// request ended; `None` while something is in flight.
    fn left(&self, first: Duration, idle: Duration) -> Option<Duration> {
        let for_ = self.idle_for()?;
        let limit = if self.begun.load(Ordering::SeqCst) {
            idle
        } else {
            first.min(idle)
        };
        Some(limit.saturating_sub(for_))
    }

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
        a.begun.store(true, Ordering::SeqCst);
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

/// Open files the process keeps for other things than client connections: 32, plus the
/// smaller of `concurrency_limit` (upstream connections in flight) and a quarter of `limit`.
pub fn fd_reserve(limit: u64, concurrency_limit: usize) -> u64 {
    32 + (concurrency_limit as u64).min(limit / 4)
}

/// The connection cap: `server.max_connections` when set, else 1024 or, when lower, the
/// soft open-file limit less [`fd_reserve`] (at least 1). A set cap above that gets a WARN.
pub fn connection_cap(server: &crate::config::ServerSettings) -> usize {
    let limit = open_file_limit();
    let room = limit.map(|l| {
        l.saturating_sub(fd_reserve(l, server.concurrency_limit))
            .max(1)
    });
    match (server.max_connections, room) {
        (Some(n), Some(room)) if n as u64 > room => {
            tracing::warn!(
                max_connections = n,
                open_file_limit = limit,
                "server.max_connections is over the open-file limit less its reserve: accepts may fail once it is reached"
            );
            n
        }
        (Some(n), _) => n,
        (None, Some(room)) => usize::try_from(room).unwrap_or(1024).min(1024),
        (None, None) => 1024,
    }
}

/// The soft open-file limit (`None` where there is none to read).
fn open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rlimit::Resource::NOFILE.get().ok().map(|(soft, _)| soft)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Raises the soft open-file limit to the hard one (at start: a soft limit of 1024 is the
/// usual default, the hard one often far higher). Returns the soft limit in force.
pub fn raise_open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        match rlimit::increase_nofile_limit(u64::MAX) {
            Ok(n) => Some(n),
            Err(e) => {
                tracing::warn!(error = %e, "the open-file limit could not be raised");
                open_file_limit()
            }
        }
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The open connections, so that the one idle longest can be asked to close for a new one.
#[derive(Default)]
struct Open {
    next: u64,
    all: std::collections::HashMap<u64, (Arc<Activity>, Arc<tokio::sync::Notify>)>,
}

/// Asks the connection idle longest (nothing in flight, not asked before) to close; `false`
/// when every connection has something in flight.
fn evict_idlest(open: &Mutex<Open>) -> bool {
    let open = open
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let idlest = open
        .all
        .values()
        .filter(|(a, _)| !a.evicted.load(Ordering::SeqCst))
        .filter_map(|(a, n)| a.idle_for().map(|d| (d, a, n)))
        .max_by_key(|(d, _, _)| *d);
    match idlest {
        Some((_, a, n)) => {
            a.evicted.store(true, Ordering::SeqCst);
            n.notify_one();
            true
        }
        None => false,
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
    state.prepare().await;
    let max = connection_cap(&server).min(Semaphore::MAX_PERMITS);
    super::startup::log(&state, listener.local_addr()?);
    tracing::debug!(max_connections = max, "compactor serve: connection cap");
    let router = app(state);
    let open = Arc::new(Mutex::new(Open::default()));
    let connections = Arc::new(Semaphore::new(max));
    let header_read = Duration::from_secs(server.header_read_timeout_secs);
    // hyper answers an empty 431 past its read buffer: keep that far above our own limit,
    // so headers over `max_header_bytes` get the service's JSON 431.
    let limits = Limits {
        header_read,
        idle: Duration::from_secs(server.idle_timeout_secs),
        buf_size: server
            .max_header_bytes
            .saturating_mul(4)
            .max(HYPER_DEFAULT_BUF),
        // hyper answers an empty 431 past these too: the service's JSON 431 comes first.
        max_headers: server.max_headers.saturating_mul(4).max(100),
    };
    let (closing_tx, closing_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => with_nodelay(stream),
                Err(e) => {
                    // Out of file descriptors and the like: wait a little instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // At the cap: the connection idle longest makes room (else this one waits).
        let permit = match connections.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                evict_idlest(&open);
                tokio::select! {
                    () = &mut shutdown => break,
                    p = connections.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                }
            }
        };
        let router = router.clone();
        let closing = closing_rx.clone();
        let activity = Arc::new(Activity::new());
        let evict = Arc::new(tokio::sync::Notify::new());
        let id = {
            let mut o = open
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            o.next += 1;
            let id = o.next;
            o.all.insert(id, (activity.clone(), evict.clone()));
            id
        };
        let open = open.clone();
        tokio::spawn(async move {
            connection(stream, router, limits, closing, activity, evict).await;
            open.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .all
                .remove(&id);
            drop(permit);
        });
    }
    // New connections are refused from now on (not left waiting in the backlog to be reset).
    drop(listener);
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

/// An accepted connection, with TCP_NODELAY: a streamed answer's small chunks (SSE events)
/// go out at once instead of waiting for the client's delayed ACK of the one before.
fn with_nodelay(stream: tokio::net::TcpStream) -> tokio::net::TcpStream {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY not set");
    }
    stream
}

/// The per-connection bounds of `[server]`.
#[derive(Clone, Copy)]
struct Limits {
    /// `header_read_timeout_secs`: HTTP/1 headers (hyper's), and the first request of any
    /// connection (here).
    header_read: Duration,
    /// `idle_timeout_secs`.
    idle: Duration,
    /// hyper's HTTP/1 read buffer, and the HTTP/2 header list bound.
    buf_size: usize,
    /// hyper's HTTP/1 header count bound.
    max_headers: usize,
}

/// Serves one connection until it ends, is idle too long, or the server shuts down; a
/// connection asked to close that still has nothing in flight [`CLOSE_GRACE`] later is cut.
async fn connection(
    stream: tokio::net::TcpStream,
    router: Router,
    limits: Limits,
    mut closing: watch::Receiver<bool>,
    activity: Arc<Activity>,
    evict: Arc<tokio::sync::Notify>,
) {
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
        .header_read_timeout(limits.header_read)
        .max_buf_size(limits.buf_size)
        .max_headers(limits.max_headers);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.buf_size).unwrap_or(u32::MAX))
        // Dead peers under a long stream: a PING unanswered for CLOSE_GRACE ends it.
        .keep_alive_interval(limits.idle)
        .keep_alive_timeout(CLOSE_GRACE);
    let conn = builder
        .serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(service));
    tokio::pin!(conn);
    let mut watching = true;
    let mut closing_since: Option<Instant> = None;
    loop {
        let wait = match closing_since {
            None => activity
                .left(limits.header_read, limits.idle)
                .unwrap_or(limits.idle),
            Some(_) => CLOSE_GRACE,
        };
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                break;
            }
            () = evict.notified(), if closing_since.is_none() => {
                tracing::debug!("closing an idle connection to make room for a new one");
                conn.as_mut().graceful_shutdown();
                closing_since = Some(Instant::now());
            }
            changed = closing.changed(), if watching => {
                if changed.is_err() {
                    watching = false;
                } else if *closing.borrow() {
                    watching = false;
                    if closing_since.is_none() {
                        conn.as_mut().graceful_shutdown();
                        closing_since = Some(Instant::now());
                    }
                }
            }
            () = tokio::time::sleep(wait) => match closing_since {
                None => {
                    if activity.left(limits.header_read, limits.idle) == Some(Duration::ZERO) {
                        tracing::debug!("closing an idle connection");
                        conn.as_mut().graceful_shutdown();
                        closing_since = Some(Instant::now());
                    }
                }
                Some(since) => {
                    let quiet = activity.idle_for().is_some_and(|d| d >= CLOSE_GRACE);
                    if quiet && since.elapsed() >= CLOSE_GRACE {
                        tracing::debug!("cutting a connection that did not close gracefully");
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn an_accepted_connection_has_tcp_nodelay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (_client, server) =
            tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
        let (stream, _) = server.unwrap();
        assert!(!stream.nodelay().unwrap());
        assert!(super::with_nodelay(stream).nodelay().unwrap());
    }
}
