//! What the proxy answers around its compactions, through `app()`: each skip reason's metrics
//! label, the client's start-up probes answered here, `count_tokens` counted as counts, the
//! memory keyed by the envelope's value, and the small server items (a located 400 for
//! `{"request": 5}`, `bearer` in any case, a base URL ending in `/v1`).

use crate::server::{
    Reply, anthropic_request, call, get_text, history, loader, post_json, proxy_state, settings,
    spawn_upstream, state,
};
use crate::service_says::orphan;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use bytes::Bytes;
use compactor::format::Format;
use compactor::server::{AppState, app};
use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};

/// The lines of `metrics` that start with `name{` or `name `.
fn series(metrics: &str, name: &str) -> Vec<String> {
    metrics
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
        })
        .map(str::to_string)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Through app(): skip labels, probes, count_tokens, keys by value, the small items.

#[tokio::test]
async fn each_skip_reason_has_its_own_metrics_label() {
    let (upstream, seen) = spawn_upstream(Reply::json(400, "{\"error\":\"bad\"}")).await;
    // Each breaks the rules on purpose: forwarded as they came.
    for body in [
        "not json".to_string(),
        orphan(),
        "{\"messages\": 5}".to_string(),
    ] {
        seen.sent_invalid(body);
    }
    let router = app(proxy_state(0, &upstream));
    let (_, headers, _) = call(router.clone(), anthropic_request("not json")).await;
    assert_eq!(headers["x-compactor-skipped"], "not JSON");
    for _ in 0..2 {
        let (status, headers, _) = call(router.clone(), anthropic_request(orphan())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(headers["x-compactor-skipped"], "invalid history");
    }
    let req = Request::post("/v1/chat/completions")
        .body(Body::from("{\"messages\": 5}"))
        .unwrap();
    let (_, headers, _) = call(router.clone(), req).await;
    assert_eq!(
        headers["x-compactor-skipped"],
        "not a request body of this format"
    );
    // Forwarded as they came: the provider answers.
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen[1].body, Bytes::from(orphan()));
        assert_eq!(seen.len(), 4);
    }
    let (_, m) = get_text(router, "/metrics").await;
    assert_eq!(
        series(&m, "compactor_proxy_skipped_total"),
        [
            "compactor_proxy_skipped_total{reason=\"invalid_history\",route=\"/v1/messages\"} 2",
            "compactor_proxy_skipped_total{reason=\"not_a_request_body\",route=\"/v1/chat/completions\"} 1",
            "compactor_proxy_skipped_total{reason=\"not_json\",route=\"/v1/messages\"} 1",
        ]
    );
    assert_eq!(
        series(&m, "compactor_proxy_requests_total"),
        [
            "compactor_proxy_requests_total{body=\"skipped\",route=\"/v1/chat/completions\"} 1",
            "compactor_proxy_requests_total{body=\"skipped\",route=\"/v1/messages\"} 3",
        ]
    );
}

/// The fake upstream's own check (which every proxy test runs when it drops the upstream's
/// handle) names a body that breaks a rule, here one the proxy forwards as it came; and it
/// excuses exactly the bodies a test says it sent broken.
#[tokio::test]
async fn the_fake_upstream_names_an_invalid_body_it_receives() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let (_, headers, _) = call(app(proxy_state(0, &upstream)), anthropic_request(orphan())).await;
    assert_eq!(headers["x-compactor-skipped"], "invalid history");
    let faults = seen.faults();
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(
        faults[0].starts_with(
            "request 0: POST /v1/messages?beta=true: messages[0].content[0]: tool_result toolu_x \
             has no tool_use in the previous message (orphan)\n  (check_request.py "
        ),
        "{faults:?}"
    );
    seen.sent_invalid(format!("{} ", orphan()));
    assert_eq!(seen.faults().len(), 1, "only the same bytes are excused");
    seen.sent_invalid(orphan());
    assert_eq!(seen.faults(), Vec::<String>::new());
}

#[tokio::test]
async fn client_start_up_probes_are_answered_here() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{\"from\":\"upstream\"}")).await;
    let st = {
        let mut s = settings(0);
        s.server.openai_upstream = upstream.clone();
        s.server.anthropic_upstream = upstream.clone();
        // With a token configured too: a probe carries none, and learns nothing.
        AppState::from_parts(s, loader(), Some("s3cret".into())).unwrap()
    };
    for path in ["/", "/api/hello"] {
        let req = Request::head(path).body(Body::empty()).unwrap();
        let (status, _, body) = call(app(st.clone()), req).await;
        assert_eq!((status, body.len()), (StatusCode::OK, 0), "{path}");
    }
    assert_eq!(seen.lock().unwrap().len(), 0);
    // With a provider header it is the provider's request: passed through.
    let req = Request::head("/")
        .header("x-api-key", "sk-test")
        .header("x-compactor-token", "s3cret")
        .body(Body::empty())
        .unwrap();
    let (status, _, _) = call(app(st.clone()), req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(seen.lock().unwrap()[0].method, "HEAD");
    // Other methods on those paths are not probes.
    let req = Request::get("/api/hello").body(Body::empty()).unwrap();
    let (status, _, _) = call(app(st.clone()), req).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let req = Request::get("/metrics")
        .header("authorization", "Bearer s3cret")
        .body(Body::empty())
        .unwrap();
    let (_, _, m) = call(app(st), req).await;
    let m = String::from_utf8(m.to_vec()).unwrap();
    assert_eq!(
        series(&m, "compactor_proxy_requests_total"),
        [
            "compactor_proxy_requests_total{body=\"forwarded\",route=\"other\"} 1",
            "compactor_proxy_requests_total{body=\"probe\",route=\"other\"} 2",
        ]
    );
}

#[tokio::test]
async fn count_tokens_calls_are_counted_as_counts_not_compactions() {
    let (upstream, _seen) = spawn_upstream(Reply::json(200, "{\"input_tokens\":1}")).await;
    let router = app(proxy_state(4000, &upstream));
    let mut body = history(30);
    body.as_object_mut().unwrap().remove("max_tokens");
    for _ in 0..2 {
        let req = Request::post("/v1/messages/count_tokens")
            .header("x-api-key", "sk-ant-test")
            .body(Body::from(body.to_string()))
            .unwrap();
        let (status, headers, _) = call(router.clone(), req).await;
        assert_eq!(status, StatusCode::OK);
        assert!(headers.contains_key("x-compactor-tokens"));
    }
    let (_, m) = get_text(router.clone(), "/metrics").await;
    assert_eq!(
        series(&m, "compactor_count_tokens_total"),
        ["compactor_count_tokens_total 2"]
    );
    assert_eq!(
        series(&m, "compactor_compactions_total"),
        Vec::<String>::new()
    );
    // A message body is a compaction.
    let (status, _, _) = call(router.clone(), anthropic_request(history(30).to_string())).await;
    assert_eq!(status, StatusCode::OK);
    let (_, m) = get_text(router, "/metrics").await;
    assert_eq!(
        series(&m, "compactor_compactions_total"),
        ["compactor_compactions_total{status=\"compacted\",strategy=\"default\"} 1"]
    );
}

/// A Codex-like Responses body of `rounds` rounds, its `client_metadata` keys in the order
/// given.
fn codex_body(rounds: usize, metadata: &[(&str, &str)]) -> String {
    let anthropic = Format::Anthropic.read(&history(rounds)).unwrap();
    let mut body = Format::OpenAiResponses.write(&compactor::format::convert(
        &anthropic,
        Format::Anthropic,
        Format::OpenAiResponses,
    ));
    let meta: Map<String, Value> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let obj = body.as_object_mut().unwrap();
    obj.insert("store".into(), json!(false));
    obj.insert("prompt_cache_key".into(), json!("019a-session"));
    obj.insert("client_metadata".into(), Value::Object(meta));
    body.to_string()
}

/// Codex writes `client_metadata` with its keys in another order in every request: the
/// memory (and the read cache) key the envelope by value, so the next turn continues the
/// remembered compaction; a changed value does not.
#[tokio::test]
async fn a_reordered_envelope_continues_the_remembered_compaction() {
    let order = [
        ("originator", "codex_cli_rs"),
        ("session", "s1"),
        ("turn", "t"),
    ];
    let mut reversed = order;
    reversed.reverse();
    let changed = [
        ("originator", "codex_cli_rs"),
        ("session", "s2"),
        ("turn", "t"),
    ];
    for read_cache in [true, false] {
        let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
        let mut s = settings(4000);
        s.server.openai_upstream = upstream;
        if !read_cache {
            s.server.read_cache_bytes = 0;
        }
        let router = app(state(s));
        let send = |body: String| {
            let router = router.clone();
            async move {
                let req = Request::post("/v1/responses")
                    .header("authorization", "Bearer sk-test")
                    .body(Body::from(body))
                    .unwrap();
                let (status, headers, _) = call(router, req).await;
                assert_eq!(status, StatusCode::OK);
                headers["x-compactor-tokens"].to_str().unwrap().to_string()
            }
        };
        let first = send(codex_body(30, &order)).await;
        assert!(!first.contains("tier=remembered"), "{first}");
        let next = send(codex_body(31, &reversed)).await;
        assert!(
            next.contains("tier=remembered; prefix=reused"),
            "read cache {read_cache}: {next}"
        );
        // The remembered prefix goes out again, the new round after it.
        let sent: Vec<Value> = seen
            .lock()
            .unwrap()
            .iter()
            .map(|s| serde_json::from_slice(&s.body).unwrap())
            .collect();
        let (a, b) = (
            sent[0]["input"].as_array().unwrap(),
            sent[1]["input"].as_array().unwrap(),
        );
        assert_eq!(&b[..a.len()], &a[..]);
        assert_eq!(sent[1]["client_metadata"], sent[0]["client_metadata"]);
        // Another value is another context: compacted afresh.
        let other = send(codex_body(32, &changed)).await;
        assert!(
            !other.contains("tier=remembered"),
            "read cache {read_cache}: {other}"
        );
    }
}

#[tokio::test]
async fn a_request_that_is_no_body_is_a_400_at_its_place() {
    for (body, message) in [
        (json!({"request": 5}), "found a number"),
        (json!({"request": "hello"}), "found a string"),
    ] {
        let (status, answer) = post_json(app(state(settings(0))), "/v1/compact", &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let message = format!(
            "\"request\" must be a request body (a JSON object) or a message array, {message}"
        );
        assert_eq!(
            answer,
            json!({"error": {"code": "invalid_request", "message": message, "location": "request"}}),
            "{body}"
        );
    }
    let (status, answer) = post_json(
        app(state(settings(0))),
        "/v1/validate",
        &json!({"request": {"a": 1}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(answer["error"]["code"], "unknown_format");
    assert_eq!(answer["error"]["location"], "request");
}

#[tokio::test]
async fn the_bearer_scheme_is_read_in_any_case() {
    let st = AppState::from_parts(settings(0), loader(), Some("s3cret".into())).unwrap();
    let body = json!({"request": history(1)}).to_string();
    for (value, want) in [
        ("bearer s3cret", StatusCode::OK),
        ("BEARER s3cret", StatusCode::OK),
        ("Bearer  s3cret", StatusCode::OK),
        ("Bearers3cret", StatusCode::UNAUTHORIZED),
        ("Basic s3cret", StatusCode::UNAUTHORIZED),
        ("bearer wrong", StatusCode::UNAUTHORIZED),
    ] {
        let req = Request::post("/v1/count_tokens")
            .header("authorization", value)
            .body(Body::from(body.clone()))
            .unwrap();
        let (status, _, _) = call(app(st.clone()), req).await;
        assert_eq!(status, want, "{value}");
    }
}

#[tokio::test]
async fn an_upstream_base_ending_in_v1_is_not_doubled() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let mut s = settings(0);
    s.server.openai_upstream = format!("{upstream}/v1/");
    s.server.anthropic_upstream = format!("{upstream}/v1");
    let router = app(state(s));
    let chat = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]});
    let req = Request::post("/v1/chat/completions")
        .body(Body::from(chat.to_string()))
        .unwrap();
    call(router.clone(), req).await;
    call(router.clone(), anthropic_request(history(1).to_string())).await;
    let req = Request::get("/v1/models?limit=2")
        .body(Body::empty())
        .unwrap();
    call(router, req).await;
    let uris: Vec<String> = seen.lock().unwrap().iter().map(|s| s.uri.clone()).collect();
    assert_eq!(
        uris,
        [
            "/v1/chat/completions",
            "/v1/messages?beta=true",
            "/v1/models?limit=2"
        ]
    );
}

#[tokio::test]
async fn an_llm_base_url_ending_in_v1_posts_once_to_v1() {
    use crate::support::fake_llm::{FakeLlm, Reply as LlmReply};
    use compactor::llm::{LlmConfig, Provider, SummaryRequest};
    for provider in [Provider::Openai, Provider::Anthropic] {
        let server = FakeLlm::start(vec![LlmReply::Text("a summary".into())]).await;
        let config = LlmConfig {
            provider,
            base_url: Some(format!("{}/v1", server.url)),
            model: "m".into(),
            api_key_env: None,
            max_output_tokens: 100,
            timeout_secs: 5.0,
            retries: 0,
            context_window: 10_000,
            extra_body: Default::default(),
            max_answer_bytes: 1 << 20,
            breaker_threshold: 0,
            breaker_cooldown_secs: 0.0,
        };
        let client = compactor::llm::from_config(&config).unwrap();
        let request = SummaryRequest {
            system: "s".into(),
            user: "u".into(),
            max_output_tokens: 10,
        };
        assert_eq!(client.complete(&request).await.unwrap(), "a summary");
        let want = if provider == Provider::Openai {
            "/v1/chat/completions"
        } else {
            "/v1/messages"
        };
        assert_eq!(server.requests()[0].path, want);
    }
}
