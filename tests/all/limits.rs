//! The service's bounds (issue 15, "nothing can stall it"), driven over 127.0.0.1: HTTP/2
//! connections that send no request, trickled and stalled request bodies, a large pass-through
//! upload, header counts, what a pass-through request carries upstream, where the API routes
//! parse, the learned ratios' bound, `/metrics` outside the concurrency limit.

use crate::server::{
    Reply, Seen, anthropic_request, call, closed_within, get_text, held_state, history, serve_port,
    settings, spawn_upstream, state, stop_server,
};
use crate::support::upstream::Recorded;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Request, StatusCode, Uri};
use compactor::server::app;
use futures_util::StreamExt;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tower::ServiceExt;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// One HTTP/2 frame (RFC 9113 4.1).
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut f = len[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend(payload);
    f
}

/// The types of the frames in `bytes` (what the server sent after its preface).
fn frame_types(bytes: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    let mut at = 0;
    while at + 9 <= bytes.len() {
        let len = u32::from_be_bytes([0, bytes[at], bytes[at + 1], bytes[at + 2]]) as usize;
        types.push(bytes[at + 3]);
        at += 9 + len;
    }
    types
}

/// Reads an HTTP/2 connection until the server closes it, sending a PING every 500 ms and
/// answering none of the server's (so its graceful close never completes); `Err` when it is
/// still open after `within`.
async fn h2_until_closed(c: &mut TcpStream, within: Duration) -> Result<Vec<u8>, ()> {
    let mut got = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let end = tokio::time::sleep(within);
    tokio::pin!(end);
    let mut buf = [0u8; 4096];
    loop {
        tokio::select! {
            () = &mut end => return Err(()),
            _ = tick.tick() => {
                if c.write_all(&frame(6, 0, 0, b"12345678")).await.is_err() {
                    return Ok(got);
                }
            }
            r = c.read(&mut buf) => match r {
                Ok(0) | Err(_) => return Ok(got),
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    }
}

/// Sends `request` (HTTP/1.1 with `connection: close`) and reads the answer to its end.
async fn raw_http1(addr: SocketAddr, request: &[u8]) -> String {
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(request).await.unwrap();
    let got = closed_within(&mut c, Duration::from_secs(30))
        .await
        .expect("no whole answer within 30 s");
    String::from_utf8_lossy(&got).into_owned()
}

/// The JSON body of a `connection: close` HTTP/1.1 answer with a content-length.
fn json_of(answer: &str) -> Value {
    let body = &answer[answer.find("\r\n\r\n").unwrap() + 4..];
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer}"))
}

#[tokio::test]
async fn an_http2_connection_that_sends_no_request_is_closed_and_frees_its_place() {
    let mut s = settings(0);
    s.server.header_read_timeout_secs = 1;
    s.server.idle_timeout_secs = 3600;
    s.server.max_connections = Some(1);
    let (addr, stop_tx, server) = serve_port(s).await;
    let mut h2 = TcpStream::connect(addr).await.unwrap();
    h2.write_all(&[PREFACE, &frame(4, 0, 0, &[]), &frame(4, 1, 0, &[])].concat())
        .await
        .unwrap();
    // The only connection place is the HTTP/2 one's: /healthz on another connection waits.
    let health = tokio::spawn(async move {
        raw_http1(
            addr,
            b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        )
        .await
    });
    // Preface, SETTINGS and PINGs but no request: GOAWAY after header_read_timeout_secs, then
    // cut CLOSE_GRACE later, since it never answers the server's PING.
    let got = h2_until_closed(&mut h2, Duration::from_secs(20))
        .await
        .expect("an HTTP/2 connection without a request is still open after 20 s");
    assert!(frame_types(&got).contains(&7), "no GOAWAY in {got:?}");
    let answer = tokio::time::timeout(Duration::from_secs(20), health)
        .await
        .expect("/healthz never got a connection")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    stop_server(stop_tx, server).await;
}

#[tokio::test]
async fn an_idle_http2_connection_is_closed_after_its_last_request() {
    let mut s = settings(0);
    s.server.idle_timeout_secs = 1;
    let (addr, stop_tx, server) = serve_port(s).await;
    let mut h2 = TcpStream::connect(addr).await.unwrap();
    // GET /healthz: :method GET, :scheme http (static table), :path and :authority literal.
    let mut block = vec![0x82, 0x86, 0x44, 8];
    block.extend(b"/healthz");
    block.extend([0x41, 1, b'x']);
    h2.write_all(
        &[
            PREFACE,
            &frame(4, 0, 0, &[]),
            &frame(4, 1, 0, &[]),
            &frame(1, 0x5, 1, &block),
        ]
        .concat(),
    )
    .await
    .unwrap();
    let got = h2_until_closed(&mut h2, Duration::from_secs(20))
        .await
        .expect("an idle HTTP/2 connection is still open after 20 s");
    let types = frame_types(&got);
    // The answer's HEADERS and DATA, then the GOAWAY of the idle close.
    assert!(types.contains(&1) && types.contains(&0), "{types:?}");
    assert!(types.contains(&7), "{types:?}");
    stop_server(stop_tx, server).await;
}

#[tokio::test]
async fn a_trickled_body_holds_no_concurrency_place_and_is_cut_at_the_body_timeout() {
    let mut s = settings(0);
    s.server.concurrency_limit = 1;
    s.server.body_timeout_secs = 4;
    let (addr, stop_tx, server) = serve_port(s).await;
    let (mut slow_read, mut slow_write) = TcpStream::connect(addr).await.unwrap().into_split();
    slow_write
        .write_all(
            b"POST /v1/count_tokens HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
              content-length: 1000\r\nconnection: close\r\n\r\n{",
        )
        .await
        .unwrap();
    let trickle = tokio::spawn(async move {
        for _ in 0..80 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            if slow_write.write_all(b" ").await.is_err() {
                break;
            }
        }
    });
    // Meanwhile a whole body is answered at once: the trickle holds no concurrency place.
    let body = r#"{"messages":[{"role":"user","content":"hello"}]}"#;
    let request = format!(
        "POST /v1/count_tokens HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = tokio::time::timeout(Duration::from_secs(20), raw_http1(addr, request.as_bytes()))
        .await
        .expect("a whole request waited behind a trickled one");
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert_eq!(json_of(&answer)["messages"], 1);
    // ...while the trickle was still going, unanswered.
    let mut probe = [0u8; 64];
    assert!(slow_read.try_read(&mut probe).is_err());
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), slow_read.read_to_end(&mut got))
        .await
        .expect("the trickled body was not cut")
        .unwrap();
    let cut = String::from_utf8_lossy(&got).into_owned();
    assert!(cut.starts_with("HTTP/1.1 408"), "{cut}");
    assert_eq!(
        json_of(&cut)["error"],
        json!({"code": "body_timeout", "message":
            "the client's request body was not received whole within 4 s (server.body_timeout_secs)"})
    );
    trickle.abort();
    stop_server(stop_tx, server).await;
}

#[tokio::test]
async fn a_pass_through_body_slower_than_the_minimum_rate_is_cut_with_a_408() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let mut s = settings(0);
    s.server.openai_upstream = upstream;
    s.server.body_timeout_secs = 1;
    s.server.body_min_rate_bytes = 1000;
    let (addr, stop_tx, server) = serve_port(s).await;
    let (mut read, mut write) = TcpStream::connect(addr).await.unwrap().into_split();
    write
        .write_all(
            b"POST /v1/files HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\nconnection: close\r\n\r\n",
        )
        .await
        .unwrap();
    let trickle = tokio::spawn(async move {
        for _ in 0..300 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if write.write_all(b"x").await.is_err() {
                break;
            }
        }
    });
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), read.read_to_end(&mut got))
        .await
        .expect("a pass-through body at 10 bytes/s was not cut")
        .unwrap();
    let answer = String::from_utf8_lossy(&got).into_owned();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let error = &json_of(&answer)["error"];
    assert_eq!(error["code"], "body_timeout");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.starts_with("the client's request body came slower than 1000 bytes/s")
            && message.ends_with(
                "(server.body_timeout_secs + 1 s per server.body_min_rate_bytes received)"
            ),
        "{message}"
    );
    // The upstream never got a whole request.
    assert!(seen.lock().unwrap().is_empty());
    trickle.abort();
    stop_server(stop_tx, server).await;
}

#[tokio::test]
async fn a_stalled_client_body_is_a_408_that_says_so_on_every_kind_of_route() {
    let (upstream, _seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let mut s = settings(0);
    s.server.openai_upstream = upstream.clone();
    s.server.anthropic_upstream = upstream;
    s.server.body_read_timeout_secs = 1;
    let (addr, stop_tx, server) = serve_port(s).await;
    // Pass-through, proxy and API: 10 bytes of 100, then nothing.
    for path in ["/v1/files", "/v1/messages", "/v1/validate"] {
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             content-length: 100\r\nconnection: close\r\n\r\n{{\"model\": "
        );
        let answer = raw_http1(addr, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{path}: {answer}");
        assert_eq!(
            json_of(&answer)["error"],
            json!({"code": "body_timeout", "message":
                "the client's request body sent nothing for 1 s (server.body_read_timeout_secs)"}),
            "{path}"
        );
    }
    stop_server(stop_tx, server).await;
}

/// An upstream that counts the body it receives (never buffering it) and answers with the
/// count and the framing headers it saw: its URL, and the record of its requests for the
/// independent checker. It keeps no body, so it records each with an empty one, which the
/// checker refuses on a route the proxy compacts: it is for pass-through routes only.
async fn counting_upstream() -> (String, Recorded) {
    let recorded = Recorded::new();
    let log = recorded.log();
    let handler = move |method: Method, uri: Uri, headers: HeaderMap, body: Body| {
        log.lock()
            .unwrap()
            .push(Seen::of(&method, &uri, headers.clone(), Bytes::new()));
        async move {
            let mut stream = body.into_data_stream();
            let mut bytes = 0usize;
            while let Some(chunk) = stream.next().await {
                bytes += chunk.unwrap().len();
            }
            let header = |k: &str| headers.get(k).map(|v| v.to_str().unwrap().to_string());
            axum::Json(json!({
                "bytes": bytes,
                "content-length": header("content-length"),
                "transfer-encoding": header("transfer-encoding"),
            }))
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = Router::new().fallback(handler);
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (format!("http://{addr}"), recorded)
}

#[tokio::test]
async fn a_100_mb_pass_through_upload_streams_to_the_upstream_with_its_content_length() {
    let mut s = settings(0);
    let (upstream, _seen) = counting_upstream().await;
    s.server.openai_upstream = upstream;
    let size = 100 * 1024 * 1024;
    let chunk = Bytes::from(vec![7u8; 1024 * 1024]);
    let chunks = futures_util::stream::iter(
        (0..100).map(move |_| Ok::<_, std::convert::Infallible>(chunk.clone())),
    );
    let req = Request::post("/v1/files")
        .header("content-type", "application/octet-stream")
        .header("content-length", size.to_string())
        .body(Body::from_stream(chunks))
        .unwrap();
    let (status, _, body) = call(app(state(s)), req).await;
    assert_eq!(status, StatusCode::OK);
    let seen: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        seen,
        json!({"bytes": size, "content-length": size.to_string(), "transfer-encoding": null})
    );
}

#[tokio::test]
async fn too_many_headers_get_a_json_431_up_to_hypers_own_bound() {
    let (addr, stop_tx, server) = serve_port(settings(0)).await;
    let request = |n: usize| {
        let mut r = String::from("GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n");
        for i in 0..n {
            r.push_str(&format!("x-h{i}: 1\r\n"));
        }
        r.push_str("\r\n");
        r
    };
    // host, connection and 99 more: 101 fields, over max_headers = 100.
    let answer = raw_http1(addr, request(99).as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    assert_eq!(
        json_of(&answer)["error"],
        json!({"code": "too_many_headers",
               "message": "the request has 101 header fields, over the limit (server.max_headers)"})
    );
    // 98 more: 100 fields, answered.
    assert!(
        raw_http1(addr, request(98).as_bytes())
            .await
            .starts_with("HTTP/1.1 200 OK")
    );
    // Past four times the bound hyper's parser refuses them itself, with an empty 431.
    let answer = raw_http1(addr, request(400).as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    assert!(answer.ends_with("\r\n\r\n"), "{answer}");
    stop_server(stop_tx, server).await;
}

#[tokio::test]
async fn a_pass_through_request_reaches_the_upstream_with_its_own_headers_only() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, r#"{"ok":true}"#)).await;
    let mut s = settings(0);
    s.server.openai_upstream = upstream.clone();
    s.server.anthropic_upstream = upstream;
    let (addr, stop_tx, server) = serve_port(s).await;
    let answer = raw_http1(
        addr,
        b"POST /v1/files?purpose=x HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\
          connection: close\r\nconnection: x-hop\r\nx-hop: 1\r\nx-end: 2\r\n\r\nhello",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    let history_route = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{}",
        history(1).to_string().len(),
        history(1)
    );
    let answer = raw_http1(addr, history_route.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        let names = |h: &HeaderMap| {
            let mut n: Vec<String> = h.keys().map(|k| k.as_str().to_string()).collect();
            n.sort();
            n
        };
        // The client's headers, its content-length kept, nothing added but host.
        assert_eq!(names(&seen[0].headers), ["content-length", "host", "x-end"]);
        assert_eq!(seen[0].headers["content-length"], "5");
        assert_eq!(seen[0].uri, "/v1/files?purpose=x");
        assert_eq!(seen[0].body, Bytes::from_static(b"hello"));
        // A history route: no accept either; its own content-length for the body it sends.
        assert_eq!(
            names(&seen[1].headers),
            ["content-length", "content-type", "host"]
        );
    }
    // An upgrade is not tunneled: a JSON 501 naming the route, nothing sent upstream.
    let answer = raw_http1(
        addr,
        b"GET /v1/realtime?model=gpt-realtime HTTP/1.1\r\nhost: x\r\nconnection: upgrade, close\r\n\
          upgrade: websocket\r\nsec-websocket-version: 13\r\n\
          sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 501"), "{answer}");
    assert_eq!(json_of(&answer)["error"]["code"], "upgrade_not_supported");
    let message = json_of(&answer)["error"]["message"].to_string();
    assert!(message.contains("GET /v1/realtime"), "{message}");
    assert_eq!(seen.lock().unwrap().len(), 2);
    stop_server(stop_tx, server).await;
}

#[tokio::test]
async fn the_api_routes_parse_their_bodies_on_the_compaction_pool() {
    let (app_state, barrier) = held_state();
    let router = app(app_state.clone());
    let post = |path: &'static str, body: String| {
        let router = router.clone();
        tokio::spawn(async move {
            let req = Request::post(path)
                .header("content-type", "application/json")
                .body(Body::from(body))
                .unwrap();
            call(router, req).await
        })
    };
    // A compaction holds the one worker.
    let busy = post("/v1/compact", json!({"request": history(20)}).to_string());
    while app_state.pool().busy() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Malformed bodies to each API route: their parse waits for the worker too (on this
    // single-threaded runtime, a parse on the async thread would have answered by now).
    let waiting: Vec<_> = ["/v1/validate", "/v1/count_tokens", "/v1/compact"]
        .into_iter()
        .map(|path| post(path, "{\"messages\": [".into()))
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(waiting.iter().all(|w| !w.is_finished()));
    let waiter = barrier.clone();
    tokio::task::spawn_blocking(move || waiter.wait())
        .await
        .unwrap();
    assert_eq!(busy.await.unwrap().0, StatusCode::OK);
    for w in waiting {
        let (status, _, body) = w.await.unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "invalid_json");
    }
}

#[tokio::test]
async fn the_learned_ratios_and_their_metrics_series_stay_under_their_byte_bound() {
    let (upstream, _seen) =
        spawn_upstream(Reply::json(200, r#"{"usage": {"input_tokens": 900}}"#)).await;
    let mut s = settings(0);
    s.server.anthropic_upstream = upstream;
    s.tokens.learned_bytes = 2048;
    let router = app(state(s));
    for i in 0..60 {
        let mut body = history(1);
        body["model"] = json!(format!("claude-made-up-{i}"));
        let (status, _, _) = call(router.clone(), anthropic_request(body.to_string())).await;
        assert_eq!(status, StatusCode::OK);
    }
    let (_, text) = get_text(router, "/metrics").await;
    let series = text
        .lines()
        .filter(|l| l.starts_with("compactor_model_token_ratio{"))
        .count();
    // The label is the family, never the client's string: 60 made-up names, one series.
    assert_eq!(series, 1, "{series} series:\n{text}");
    assert!(
        text.contains("compactor_model_token_ratio{model=\"claude\"}"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l == "compactor_learned_ratios_bytes{kind=\"max\"} 2048"),
        "{text}"
    );
}

#[tokio::test]
async fn metrics_answer_while_the_limit_is_held_and_show_the_store_bound_without_redis() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let (upstream, _seen) = spawn_upstream(Reply::gated_events(gate.clone())).await;
    // Redis is a closed port from the start.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut s = settings(0);
    s.server.anthropic_upstream = upstream;
    s.server.concurrency_limit = 1;
    s.store.redis_url = Some(format!("redis://127.0.0.1:{port}"));
    s.store.max_bytes = 1_000_000;
    let router = app(state(s));
    let res = router
        .clone()
        .oneshot(anthropic_request(history(1).to_string()))
        .await
        .unwrap();
    let mut stream = res.into_body().into_data_stream();
    stream.next().await.unwrap().unwrap();
    // The open stream holds the one place; /metrics is outside the limit, like /healthz.
    let (status, text) =
        tokio::time::timeout(Duration::from_secs(10), get_text(router, "/metrics"))
            .await
            .expect("/metrics waited for the concurrency limit");
    assert_eq!(status, StatusCode::OK);
    for line in [
        "compactor_store_bytes{backend=\"redis\",kind=\"max\"} 1000000",
        "compactor_store_bytes{backend=\"redis\",kind=\"used\"} 0",
        "compactor_store_up{backend=\"redis\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    }
    gate.notify_one();
}
