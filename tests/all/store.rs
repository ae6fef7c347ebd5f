//! The shared store: two service instances on one real `redis-server` (started here on
//! 127.0.0.1, a free port), a fake summary model counting its calls and a fake upstream
//! recording what each replica sends.

use crate::support::fake_llm::{DEFAULT_SUMMARY, FakeLlm};
use crate::support::upstream::{Recorded, Reply, spawn_upstream};
use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::{HeaderMap, Request, StatusCode};
use compactor::config::{Loader, Settings};
use compactor::llm::{LlmConfig, Provider};
use compactor::server::{AppState, app};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tower::ServiceExt;

/// A `redis-server` child on 127.0.0.1; killed when dropped.
pub(crate) struct RedisServer {
    child: Child,
    pub(crate) url: String,
    pub(crate) port: u16,
}

impl RedisServer {
    /// Starts `redis-server` on a free port (no persistence) and waits until it accepts.
    pub(crate) fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// [`RedisServer::start`] with more arguments (`--maxmemory 2mb`...).
    pub(crate) fn start_with(more: &[&str]) -> RedisServer {
        let found = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status();
        if found.is_err() {
            panic!(
                "these tests need the redis-server binary on PATH and it is missing: \
                 install it with `apt-get install -y redis-server` (Debian/Ubuntu); \
                 .ci/run does so"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
            ])
            .args(more)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not listen on 127.0.0.1:{port} within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        RedisServer {
            child,
            url: format!("redis://127.0.0.1:{port}"),
            port,
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// An upstream on 127.0.0.1 that records each request and answers a fixed message; the
/// independent checker judges every body it received when the handle drops.
async fn upstream() -> (String, Recorded) {
    spawn_upstream(Reply::json(
        200,
        r#"{"type":"message","role":"assistant","content":[{"type":"text","text":"ok"}]}"#,
    ))
    .await
}

/// A coding session: a prompt, then `rounds` Read calls answered by ~1,200-byte files, each
/// round closed by the user, so the summary has legal cuts.
fn history(rounds: usize) -> Value {
    let mut messages =
        vec![json!({"role": "user", "content": "Fix the failing test in src/lib.rs"})];
    for i in 0..rounds {
        let id = format!("toolu_{i:03}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Reading src/f{i}.rs.")},
            {"type": "tool_use", "id": id, "name": "Read", "input": {"path": format!("src/f{i}.rs")}}]}));
        let file: String = (0..40)
            .map(|k| format!("fn f{i}_{k}() {{ /* line {k} */ }}\n"))
            .collect();
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": file}]}));
        messages.push(json!({"role": "assistant", "content": format!("Read f{i}.")}));
        messages.push(json!({"role": "user", "content": format!("go on {i}")}));
    }
    json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You are a coding agent.", "messages": messages})
}

/// `h` with one more assistant answer and user turn.
fn next_turn(mut h: Value, n: usize) -> Value {
    let msgs = h["messages"].as_array_mut().unwrap();
    msgs.push(json!({"role": "assistant", "content": format!("done {n}")}));
    msgs.push(json!({"role": "user", "content": format!("and now {n}?")}));
    h
}

fn settings(upstream: &str, llm: &FakeLlm, redis: Option<&str>, prefix: &str) -> Settings {
    let loader = Loader {
        file: None,
        text: None,
        preset: None,
        env: false,
        preset_dirs: Vec::new(),
        strategies: Vec::new(),
    };
    let mut s = loader.load().unwrap();
    s.budget.tokens = 8_000;
    s.policy.tiers = vec!["summary".into(), "truncate".into()];
    s.llm = Some(LlmConfig {
        provider: Provider::Anthropic,
        base_url: Some(llm.url.clone()),
        model: "fake-model".into(),
        api_key_env: None,
        max_output_tokens: 1_000,
        timeout_secs: 5.0,
        retries: 0,
        context_window: 100_000,
        extra_body: Default::default(),
        max_answer_bytes: 1024 * 1024,
        breaker_threshold: 5,
        breaker_cooldown_secs: 30.0,
    });
    s.server.anthropic_upstream = upstream.to_string();
    s.store.redis_url = redis.map(str::to_string);
    s.store.key_prefix = prefix.to_string();
    s.store.retry_secs = 60;
    s
}

fn replica(s: &Settings) -> Router {
    let loader = Loader {
        file: None,
        text: None,
        preset: None,
        env: false,
        preset_dirs: Vec::new(),
        strategies: Vec::new(),
    };
    app(AppState::from_parts(s.clone(), loader, None).unwrap())
}

/// Sends `body` to `/v1/messages`; the status, the headers and the body sent upstream.
async fn send(app: &Router, body: &Value, seen: &Recorded) -> (StatusCode, HeaderMap, String) {
    let req = Request::post("/v1/messages")
        .header("content-type", "application/json")
        .header("x-api-key", "sk-ant-test")
        .header("anthropic-version", "2023-06-01")
        .body(Body::from(body.to_string()))
        .unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    to_bytes(res.into_body(), usize::MAX).await.unwrap();
    let sent = seen
        .lock()
        .unwrap()
        .last()
        .map(|s| s.body.clone())
        .unwrap_or_default();
    (status, headers, String::from_utf8(sent.to_vec()).unwrap())
}

fn tokens_header(h: &HeaderMap) -> String {
    h.get("x-compactor-tokens")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

async fn metrics(app: &Router) -> String {
    let res = app
        .clone()
        .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let body = to_bytes(res.into_body(), usize::MAX).await.unwrap();
    String::from_utf8(body.to_vec()).unwrap()
}

fn metric_line(text: &str, name: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with(name))
        .map(str::to_string)
}

#[tokio::test]
async fn a_second_replica_continues_the_first_ones_compacted_prefix_without_a_summary_call() {
    let redis = RedisServer::start();
    let llm = FakeLlm::start(vec![]).await;
    let (up, seen) = upstream().await;
    let s = settings(&up, &llm, Some(&redis.url), "t-share");
    let (a, b) = (replica(&s), replica(&s));

    let first = history(12);
    let (status, headers, sent_a) = send(&a, &first, &seen).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        tokens_header(&headers).contains("tier=summary"),
        "{}",
        tokens_header(&headers)
    );
    assert!(sent_a.contains(DEFAULT_SUMMARY));
    assert_eq!(llm.count(), 1);

    // The next turn lands on the other replica: the same compacted prefix, byte for byte,
    // then the new messages; no second summary.
    let second = next_turn(first, 1);
    let (status, headers, sent_b) = send(&b, &second, &seen).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        tokens_header(&headers).ends_with("tier=remembered; prefix=reused"),
        "{}",
        tokens_header(&headers)
    );
    let prefix = sent_a.strip_suffix("]}").unwrap();
    assert!(sent_b.starts_with(prefix), "replica b sent:\n{sent_b}");
    assert_eq!(
        &sent_b[prefix.len()..],
        r#",{"role":"assistant","content":"done 1"},{"role":"user","content":"and now 1?"}]}"#
    );
    assert_eq!(llm.count(), 1);
    let m = metrics(&b).await;
    assert_eq!(
        metric_line(&m, "compactor_store_up{").as_deref(),
        Some(r#"compactor_store_up{backend="redis"} 1"#)
    );
    assert_eq!(
        metric_line(&m, "compactor_llm_calls_total").as_deref(),
        Some("compactor_llm_calls_total 0")
    );
}

#[tokio::test]
async fn a_summary_is_paid_once_across_replicas_for_the_same_history() {
    let redis = RedisServer::start();
    let llm = FakeLlm::start(vec![]).await;
    let (up, seen) = upstream().await;
    let s = settings(&up, &llm, Some(&redis.url), "t-summary");
    // The second replica does not remember compactions (so it compacts afresh): its summary
    // request is the first one's, and the answer comes from the store.
    let mut s_b = s.clone();
    s_b.policy.remember = false;
    let (a, b) = (replica(&s), replica(&s_b));
    let h = history(12);
    let (_, _, sent_a) = send(&a, &h, &seen).await;
    assert_eq!(llm.count(), 1);
    let (_, _, sent_b) = send(&b, &h, &seen).await;
    assert_eq!(sent_a, sent_b);
    assert_eq!(llm.count(), 1);
}

#[tokio::test]
async fn with_redis_killed_the_service_runs_on_its_local_store_and_says_so() {
    let mut redis = RedisServer::start();
    let llm = FakeLlm::start(vec![]).await;
    let (up, seen) = upstream().await;
    let s = settings(&up, &llm, Some(&redis.url), "t-down");
    let a = replica(&s);
    let first = history(12);
    let (status, _, sent_first) = send(&a, &first, &seen).await;
    assert_eq!(status, StatusCode::OK);
    assert!(sent_first.contains(DEFAULT_SUMMARY));

    redis.kill();
    // The next turn: the replica's own memory still continues its prefix.
    let second = next_turn(first, 1);
    let (status, headers, sent) = send(&a, &second, &seen).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        tokens_header(&headers).ends_with("tier=remembered; prefix=reused"),
        "{}",
        tokens_header(&headers)
    );
    assert!(sent.starts_with(sent_first.strip_suffix("]}").unwrap()));
    // A new history is compacted afresh, locally.
    let mut other = history(14);
    other["messages"][0]["content"] = json!("Another task");
    let (status, headers, _) = send(&a, &other, &seen).await;
    assert_eq!(status, StatusCode::OK);
    assert!(tokens_header(&headers).contains("tier=summary"));
    assert_eq!(llm.count(), 2);
    let m = metrics(&a).await;
    assert_eq!(
        metric_line(&m, "compactor_store_up{").as_deref(),
        Some(r#"compactor_store_up{backend="redis"} 0"#)
    );
    let errors = metric_line(&m, "compactor_store_errors_total{").unwrap();
    let n: u64 = errors.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(n > 0, "{errors}");
}

#[tokio::test]
async fn the_store_evicts_the_least_recently_used_to_stay_under_its_byte_bound() {
    use compactor::llm::scope::SummaryCache;
    use compactor::server::store::{SharedStore, StoreSettings};
    let redis = RedisServer::start();
    let settings = StoreSettings {
        redis_url: Some(redis.url.clone()),
        max_bytes: 50_000,
        key_prefix: "t-evict".into(),
        ..StoreSettings::default()
    };
    let store = SharedStore::from_settings(&settings).unwrap().unwrap();
    let text = |i: u128| format!("{i:05}{}", "x".repeat(9_995));
    for i in 0..4u128 {
        store.put(i, &text(i)).await;
    }
    // Entry 0 is used again: entry 1 is now the least recently used.
    assert_eq!(store.get(0).await, Some(text(0)));
    for i in 4..8u128 {
        store.put(i, &text(i)).await;
    }
    assert_eq!(store.bytes().await.unwrap(), 50_000);
    let kept: Vec<u128> = {
        let mut kept = Vec::new();
        for i in 0..8u128 {
            if store.get(i).await.is_some() {
                kept.push(i);
            }
        }
        kept
    };
    assert_eq!(kept, vec![0, 4, 5, 6, 7]);
    assert!(store.is_up());
}

/// The first `rc_` id written in `text` (`rc_` + 32 hex digits).
fn first_recall_id(text: &str) -> String {
    let at = text
        .find("rc_")
        .expect("no recall id in the compacted body");
    text[at..at + 35].to_string()
}

/// `original` with every cleared tool_result in it replaced by what its own recall id gives
/// back on `app` (a span dropped after microcompact holds microcompact's placeholders).
async fn restore(app: &Router, original: &Value) -> Value {
    let mut messages = original.as_array().unwrap().clone();
    for m in &mut messages {
        let Some(blocks) = m["content"].as_array_mut() else {
            continue;
        };
        for b in blocks {
            if let Some(at) = b["content"].as_str().and_then(|t| t.find("recall rc_")) {
                let id = b["content"].as_str().unwrap()[at + 7..at + 42].to_string();
                let (status, body) = get(app, &format!("/v1/recall/{id}")).await;
                assert_eq!(status, StatusCode::OK, "{id}: {body}");
                *b = body["original"].clone();
            }
        }
    }
    Value::Array(messages)
}

/// `GET path` as the tenant of [`send`] (its provider key).
async fn get(app: &Router, path: &str) -> (StatusCode, Value) {
    let req = Request::get(path)
        .header("x-api-key", "sk-ant-test")
        .body(Body::empty())
        .unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let body = to_bytes(res.into_body(), usize::MAX).await.unwrap();
    (status, serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn an_id_one_replica_wrote_is_recalled_on_another_and_its_eviction_is_told() {
    let redis = RedisServer::start();
    let llm = FakeLlm::start(vec![]).await;
    let (up, seen) = upstream().await;
    let mut s = settings(&up, &llm, Some(&redis.url), "t-recall");
    s.llm = None;
    s.policy.tiers = vec!["microcompact".into(), "truncate".into()];
    let (a, b) = (replica(&s), replica(&s));

    let first = history(12);
    let (status, _, sent) = send(&a, &first, &seen).await;
    assert_eq!(status, StatusCode::OK);
    let id = first_recall_id(&sent);

    // Replica b never compacted this history: its answer comes from Redis, once a's write
    // (sent after the request went on, in a task of its own) has landed.
    let started = Instant::now();
    let (status, body) = loop {
        let (status, body) = get(&b, &format!("/v1/recall/{id}")).await;
        if status == StatusCode::OK || started.elapsed() > Duration::from_secs(5) {
            break (status, body);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["id"], json!(id));
    assert_eq!(body["kind"], "span");
    // The dropped span, each placeholder in it recalled in turn (also from Redis): the input's
    // first messages as they were sent.
    let span = restore(&b, &body["original"]).await;
    let n = span.as_array().unwrap().len();
    assert!(n > 0);
    assert_eq!(span, json!(first["messages"].as_array().unwrap()[..n]));

    // The original gone from Redis (evicted or expired): b, which holds no local copy,
    // answers as it answers an id nobody wrote.
    let client = redis::Client::open(redis.url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{{t-recall}}:r:*:{id}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let removed: u64 = redis::cmd("DEL")
        .arg(&keys[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(removed, 1);
    let (status, gone) = get(&b, &format!("/v1/recall/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{gone}");
    let unknown = format!("rc_{}", "0".repeat(32));
    let (status, never) = get(&b, &format!("/v1/recall/{unknown}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(gone, never);
    // Replica a still holds its own copy.
    let (status, body) = get(&a, &format!("/v1/recall/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}
