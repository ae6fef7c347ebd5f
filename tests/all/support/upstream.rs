//! The proxy tests' fake upstream on 127.0.0.1: it answers a scripted [`Reply`], records every
//! request it receives, and has the independent checker judge each body the proxy compacts
//! (../shared/tools/check_request.py, all of one upstream in one Python run) when the test lets
//! go of its [`Recorded`] handle, as wiremock's `MockServer` verifies its expectations on drop.
//! So an invalid forwarded body fails the test that caused it, whatever that test asserts.

use super::checker::{Batch, Body as Checked};
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use bytes::Bytes;
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// An Anthropic event stream in three events.
pub(crate) const EVENTS: [&str; 3] = [
    "event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"Hi\"}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
];

/// What the fake upstream answers to every request.
#[derive(Clone)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(&'static str, &'static str)>,
    pub(crate) chunks: Vec<&'static str>,
    /// Held before the second chunk until notified (proves the proxy streams).
    pub(crate) gate: Option<Arc<Notify>>,
    pub(crate) delay: Duration,
}

impl Reply {
    /// The SSE [`EVENTS`], the second held until `gate` is notified.
    pub(crate) fn gated_events(gate: Arc<Notify>) -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type", "text/event-stream")],
            chunks: EVENTS.to_vec(),
            gate: Some(gate),
            delay: Duration::ZERO,
        }
    }

    /// `body` with `status`, as JSON.
    pub(crate) fn json(status: u16, body: &'static str) -> Reply {
        Reply {
            status,
            headers: vec![("content-type", "application/json")],
            chunks: vec![body],
            gate: None,
            delay: Duration::ZERO,
        }
    }
}

/// One request the upstream received.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) uri: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Seen {
    /// A request as a fake upstream's handler receives it.
    pub(crate) fn of(
        method: &axum::http::Method,
        uri: &axum::http::Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> Seen {
        Seen {
            method: method.to_string(),
            uri: uri.to_string(),
            headers,
            body,
        }
    }
}

/// The requests an upstream received (`seen.lock()` reads them, through `Deref`), judged by the
/// checker when this handle is dropped (unless the test already panicked or called
/// [`Recorded::faults`]). Keep it to the end of the test: bind it to a name (`_seen`), since
/// `let (url, _) = ...` drops it, and checks it, before any request came.
pub(crate) struct Recorded {
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Bodies the test sends invalid on purpose, which the proxy forwards as they came.
    as_sent: Mutex<Vec<Bytes>>,
    /// Faults the test plants on purpose (checker lines holding one of these are not faults).
    planted: Mutex<Vec<String>>,
    checked: Mutex<bool>,
}

impl Deref for Recorded {
    type Target = Mutex<Vec<Seen>>;
    fn deref(&self) -> &Self::Target {
        &self.seen
    }
}

impl Recorded {
    /// An empty record, judged at its drop like [`spawn_upstream`]'s: for a hand-made upstream
    /// whose answer depends on the request, which pushes each request it receives to
    /// [`Recorded::log`].
    pub(crate) fn new() -> Recorded {
        Recorded {
            seen: Arc::default(),
            as_sent: Mutex::default(),
            planted: Mutex::default(),
            checked: Mutex::default(),
        }
    }

    /// The list the upstream's handler pushes each request it receives to (shared with this
    /// handle).
    pub(crate) fn log(&self) -> Arc<Mutex<Vec<Seen>>> {
        self.seen.clone()
    }

    /// `body` (sent invalid by the test) is not the checker's to judge when the upstream gets it
    /// byte-identical: the proxy forwards what it cannot compact as it came.
    pub(crate) fn sent_invalid(&self, body: impl Into<Bytes>) {
        self.as_sent.lock().unwrap().push(body.into());
    }

    /// A fault the test plants in what it sends on purpose (a part of the checker's line, e.g.
    /// `role 'critic' is not user/assistant/system`), which the proxy keeps: the checker's lines
    /// that hold it are not faults. Every other line still is.
    pub(crate) fn planted(&self, fault: &str) {
        self.planted.lock().unwrap().push(fault.to_string());
    }

    /// The checker's faults in the bodies received so far on a route the proxy compacts
    /// (`/messages`, `/messages/count_tokens`, `/chat/completions`, `/responses`,
    /// `:streamGenerateContent`; every other request goes as it came), one line each naming the
    /// request; those of the bodies given to [`Recorded::sent_invalid`] are not judged. One
    /// Python run, none when no body is to judge. The drop then checks no more.
    pub(crate) fn faults(&self) -> Vec<String> {
        *self.checked.lock().unwrap() = true;
        let as_sent = self.as_sent.lock().unwrap();
        let mut batch = Batch::new("upstream");
        for (i, seen) in self.seen.lock().unwrap().iter().enumerate() {
            let Some(format) = compacted_route(&seen.method, &seen.uri) else {
                continue;
            };
            if as_sent.contains(&seen.body) {
                continue;
            }
            batch.push(Checked {
                label: format!("request {i}: {} {}", seen.method, seen.uri),
                output: seen.body.to_vec(),
                input: None,
                format: Some(format),
                // Whether a request ends on an open call is the client's (the tests send saved
                // sessions that do); an open call anywhere else is a fault.
                open_tail: true,
            });
        }
        let planted = self.planted.lock().unwrap();
        batch.faults_named(|line| !planted.iter().any(|p| line.contains(p.as_str())))
    }
}

impl Drop for Recorded {
    fn drop(&mut self) {
        if std::thread::panicking() || *self.checked.lock().unwrap() {
            return;
        }
        let faults = self.faults();
        assert!(
            faults.is_empty(),
            "the fake upstream received bodies the independent checker refuses:\n{}",
            faults.join("\n")
        );
    }
}

/// The checker's `--format` for a request the proxy compacts, by method and path (after any
/// base path of the upstream URL); `None` for what goes as it came.
fn compacted_route(method: &str, uri: &str) -> Option<&'static str> {
    let path = uri.split('?').next().unwrap_or(uri);
    if method != "POST" {
        None
    } else if path.ends_with("/messages") || path.ends_with("/messages/count_tokens") {
        Some("anthropic")
    } else if path.ends_with("/chat/completions") {
        Some("openai-chat")
    } else if path.ends_with("/responses") {
        Some("openai-responses")
    } else if path.ends_with(":streamGenerateContent") {
        Some("gemini")
    } else {
        None
    }
}

/// A fake upstream on 127.0.0.1 answering `reply` to every request: its base URL, and the
/// handle on what it receives (see [`Recorded`] for the check at its drop).
pub(crate) async fn spawn_upstream(reply: Reply) -> (String, Recorded) {
    let recorded = Recorded::new();
    let rec = recorded.log();
    let handler = move |method: axum::http::Method, uri: Uri, headers: HeaderMap, body: Bytes| {
        let reply = reply.clone();
        let rec = rec.clone();
        async move {
            rec.lock()
                .unwrap()
                .push(Seen::of(&method, &uri, headers, body));
            tokio::time::sleep(reply.delay).await;
            let gate = reply.gate.clone();
            let chunks = reply.chunks.clone();
            let stream = futures_util::stream::unfold(0usize, move |i| {
                let gate = gate.clone();
                let chunk = chunks.get(i).copied();
                async move {
                    let chunk = chunk?;
                    if i == 1
                        && let Some(g) = gate
                    {
                        g.notified().await;
                    }
                    Some((
                        Ok::<_, std::convert::Infallible>(Bytes::from_static(chunk.as_bytes())),
                        i + 1,
                    ))
                }
            });
            let mut b = Response::builder().status(reply.status);
            for (k, v) in &reply.headers {
                b = b.header(*k, *v);
            }
            b.body(Body::from_stream(stream)).unwrap()
        }
    };
    let app = Router::new().fallback(handler);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), recorded)
}
