//! The service: every route and error path through `app()` with `oneshot`, and the proxy
//! against a local fake upstream that records what it receives.

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::{HeaderMap, Request, StatusCode};
use bytes::Bytes;
use compactor::config::{Loader, Settings};
use compactor::format::Format;
use compactor::guard;
use compactor::server::{AppState, app};
use compactor::tokens::{TokenCounter, counter_for};
use futures_util::StreamExt;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tower::ServiceExt;

pub(crate) use crate::support::upstream::{EVENTS, Reply, Seen, spawn_upstream};

pub(crate) fn loader() -> Loader {
    Loader {
        file: None,
        text: None,
        preset: None,
        env: false,
        preset_dirs: Vec::new(),
        strategies: Vec::new(),
    }
}

/// The built-in defaults with an explicit budget.
pub(crate) fn settings(budget: usize) -> Settings {
    let mut s = loader().load().unwrap();
    s.budget.tokens = budget;
    s
}

pub(crate) fn state(s: Settings) -> AppState {
    AppState::from_parts(s, loader(), None).unwrap()
}

/// A coding session: a prompt, then `rounds` Read calls each answered by a ~1,200-byte file.
pub(crate) fn history(rounds: usize) -> Value {
    let mut messages =
        vec![json!({"role": "user", "content": "Fix the failing test in src/lib.rs"})];
    for i in 0..rounds {
        let id = format!("toolu_{i:03}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Reading src/f{i}.rs.")},
            {"type": "tool_use", "id": id, "name": "Read", "input": {"path": format!("src/f{i}.rs")}}
        ]}));
        let file: String = (0..40)
            .map(|k| format!("fn f{i}_{k}() {{ /* line {k} */ }}\n"))
            .collect();
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": file}
        ]}));
    }
    json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You are a coding agent.", "messages": messages})
}

/// Tokens of a body in its model's tokens: the o200k count, through the shipped
/// `[tokens.models]` rule of the body's `model` (claude-*: ratio and overhead).
/// Model tokens of `body` by the documented rule of `[tokens.models]`: the o200k count plus
/// `ceil(tool_call / ratio)` per tool_use block, times the ratio, plus the overhead.
fn tokens_of(body: &Value, format: Format) -> usize {
    let conversation = format.read(body).unwrap();
    let counted = counter_for(Default::default()).count_conversation(&conversation);
    let calls = conversation
        .messages
        .iter()
        .map(|m| m.tool_uses().count())
        .sum::<usize>();
    let t = loader().load().unwrap().tokens;
    let rules = compactor::tokens::Calibration::new(t.tokenizer, "", t.models, false);
    let basis = rules.resolve(body["model"].as_str());
    let framing = (basis.tool_call as f64 / basis.ratio).ceil() as usize;
    basis.to_model(counted + calls * framing)
}

pub(crate) async fn call(app: Router, req: Request<Body>) -> (StatusCode, HeaderMap, Bytes) {
    let res = app.oneshot(req).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    (
        status,
        headers,
        to_bytes(res.into_body(), usize::MAX).await.unwrap(),
    )
}

pub(crate) async fn post_json(app: Router, path: &str, body: &Value) -> (StatusCode, Value) {
    let req = Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let (status, _, bytes) = call(app, req).await;
    (status, serde_json::from_slice(&bytes).unwrap())
}

fn orphan_history() -> Value {
    json!({"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "stale"}]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "go on"}
    ]})
}

#[tokio::test]
async fn healthz_answers_ok() {
    let (status, body) = {
        let req = Request::get("/healthz").body(Body::empty()).unwrap();
        let (s, _, b) = call(app(state(settings(0))), req).await;
        (s, serde_json::from_slice::<Value>(&b).unwrap())
    };
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "ok");
}

#[tokio::test]
async fn compact_returns_the_compacted_request_and_its_report() {
    let input = history(20);
    let before = tokens_of(&input, Format::Anthropic);
    let (status, body) = post_json(
        app(state(settings(0))),
        "/v1/compact",
        &json!({"request": input, "budget": 4000}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let report = &body["report"];
    assert_eq!(report["status"], "compacted");
    assert_eq!(report["format"], "anthropic");
    assert_eq!(report["budget"], 4000);
    assert_eq!(report["tokens_before"], before);
    assert_eq!(
        report["tokens_after"],
        tokens_of(&body["request"], Format::Anthropic)
    );
    let out = Format::Anthropic.read(&body["request"]).unwrap();
    assert_eq!(
        guard::validate(&out, Format::Anthropic, Default::default()),
        vec![]
    );
    assert_eq!(body["request"]["model"], "claude-sonnet-4-5");
}

#[tokio::test]
async fn compact_under_the_trigger_returns_the_request_as_it_came() {
    let input = history(2);
    let (status, body) = post_json(
        app(state(settings(0))),
        "/v1/compact",
        &json!({"request": input, "format": "anthropic"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["request"], input);
    assert_eq!(body["report"]["status"], "unchanged");
    assert_eq!(
        body["report"]["tokens_before"],
        tokens_of(&input, Format::Anthropic)
    );
}

#[tokio::test]
async fn compact_takes_a_bare_message_array_and_a_named_strategy() {
    let input = history(20)["messages"].clone();
    let (status, body) = post_json(
        app(state(settings(0))),
        "/v1/compact",
        &json!({"messages": input, "budget": 4000, "strategy": "truncate"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["report"]["strategy"], "truncate");
    assert!(body["request"].is_array());
}

#[tokio::test]
async fn compact_of_an_invalid_history_is_a_400_naming_the_place() {
    let (status, body) = post_json(
        app(state(settings(0))),
        "/v1/compact",
        &json!({"request": orphan_history()}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        json!({"error": {
            "code": "invalid_history",
            "message": "messages[0].content[0]: tool_result toolu_x has no tool_use in the previous message",
            "location": "messages[0].content[0]"
        }})
    );
}

#[tokio::test]
async fn a_strategy_that_cannot_run_here_is_a_400_naming_what_it_needs() {
    let (status, body) = post_json(
        app(state(settings(0))),
        "/v1/compact",
        &json!({"request": history(1), "strategy": "summary"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "strategy_unavailable");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "strategy summary: configuration: llm: the summary tier cannot run: no [llm] \
             configured; add an [llm] section"
        ),
        "{message}"
    );
}

#[tokio::test]
async fn an_unknown_strategy_is_a_404() {
    let (status, body) = post_json(
        app(state(settings(0))),
        "/v1/compact",
        &json!({"request": history(1), "strategy": "nope"}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        json!({"error": {"code": "unknown_strategy", "message": "no strategy preset \"nope\""}})
    );
    let (status, _) = post_json(
        app(state(settings(0))),
        "/v1/compact",
        &json!({"request": history(1), "strategy": "../etc/passwd"}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn malformed_json_is_a_400_with_line_and_column() {
    let req = Request::post("/v1/compact")
        .body(Body::from("{\"request\": [1,}"))
        .unwrap();
    let (status, _, bytes) = call(app(state(settings(0))), req).await;
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "invalid_json");
    assert_eq!(body["error"]["location"], "line 1 column 16");
}

/// Numbers come back with the values they were written with: `-0`, a float with a zero
/// fraction, a number past f64 and one past u64 (the body is read from its bytes, never through
/// `from_value`, which made `-0` a `0`). Only an exponent's spelling is serde_json's
/// (`1e400` is written `1e+400`).
#[tokio::test]
async fn compact_keeps_every_number_of_the_request_as_written() {
    let numbers = [
        ("-0", "-0"),
        ("1.0", "1.0"),
        ("-0.0", "-0.0"),
        ("18446744073709551616", "18446744073709551616"),
        ("1e400", "1e+400"),
        ("2.5E-3", "2.5e-3"),
    ];
    for (n, out) in numbers {
        let body = format!(
            r#"{{"format": "anthropic", "request": {{"model": "m", "max_tokens": 10, "x": {n}, "messages": [{{"role": "user", "content": "hi", "y": [{n}]}}]}}}}"#
        );
        let req = Request::post("/v1/compact")
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let (status, _, bytes) = call(app(state(settings(0))), req).await;
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        assert_eq!(status, StatusCode::OK, "{text}");
        assert!(text.contains(&format!(r#""x":{out}"#)), "{n}: {text}");
        assert!(text.contains(&format!(r#""y":[{out}]"#)), "{n}: {text}");
    }
}

/// `text` posted as it is to `path`: the status and the JSON answer.
async fn post_text(path: &str, text: impl Into<Body>) -> (StatusCode, Value) {
    let req = Request::post(path)
        .header("content-type", "application/json")
        .body(text.into())
        .unwrap();
    let (status, _, bytes) = call(app(state(settings(0))), req).await;
    (status, serde_json::from_slice(&bytes).unwrap())
}

const ROUTES: [&str; 3] = ["/v1/compact", "/v1/count_tokens", "/v1/validate"];

/// A budget is an integer read from its digits, never through a float: one past u64, a
/// negative one, a fraction or an exponent (also of a whole value) is refused on every route
/// naming the field, the value and the range; `-0` is 0, refused by `/v1/compact` as such.
#[tokio::test]
async fn a_budget_that_is_no_token_count_is_refused_naming_the_field_and_the_range() {
    let cases = [
        (
            "18446744073709551616",
            "18446744073709551616 is out of range",
        ),
        ("-5", "-5 is out of range"),
        (
            "-18446744073709551616",
            "-18446744073709551616 is out of range",
        ),
        ("1.5", "1.5 is not an integer (no fraction or exponent)"),
        (
            "60000.0",
            "60000.0 is not an integer (no fraction or exponent)",
        ),
        ("6E4", "6e+4 is not an integer (no fraction or exponent)"),
        (
            "1e400",
            "1e+400 is not an integer (no fraction or exponent)",
        ),
    ];
    let request = json!({"messages": [{"role": "user", "content": "hi"}]});
    for (n, why) in cases {
        for route in ROUTES {
            let (status, body) =
                post_text(route, format!(r#"{{"request": {request}, "budget": {n}}}"#)).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{route} {n}: {body}");
            assert_eq!(body["error"]["code"], "invalid_request", "{route} {n}");
            assert_eq!(body["error"]["location"], "budget", "{route} {n}");
            let message = body["error"]["message"].as_str().unwrap();
            let expected = format!(
                "budget {why}: a token budget is an integer from 1 to 18446744073709551615 at \
                 line 1 column "
            );
            assert!(message.starts_with(&expected), "{route} {n}: {message}");
        }
    }
    let (status, body) = post_text(
        "/v1/compact",
        format!(r#"{{"request": {request}, "budget": -0}}"#),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["location"], "budget");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("it must be at least 1"),
        "{body}"
    );
    // The largest is a budget like any other: nothing to shorten under it.
    let (status, body) = post_text(
        "/v1/compact",
        format!(r#"{{"request": {request}, "budget": 18446744073709551615}}"#),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["request"], request);
    assert_eq!(body["report"]["budget"], json!(u64::MAX));
}

/// JSON that is no body the service reads is `invalid_request` at its JSON path, in plain
/// words: nesting past 127 levels, an unpaired surrogate escape; a byte-order mark before the
/// body is read past.
#[tokio::test]
async fn a_body_nested_too_deep_or_holding_an_unpaired_surrogate_is_named_where() {
    let deep = format!(
        r#"{{"messages": [{{"role": "user", "content": "hi", "x": {}{}}}]}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    for route in ROUTES {
        let (status, body) = post_text(route, deep.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{route}");
        assert_eq!(body["error"]["code"], "invalid_request", "{route}");
        let location = body["error"]["location"].as_str().unwrap();
        assert!(location.starts_with("messages[0].x[0][0]"), "{location}");
        assert!(
            body["error"]["message"].as_str().unwrap().starts_with(
                "the body nests arrays and objects deeper than 127 levels, the most this \
                 service reads, at line 1 column "
            ),
            "{body}"
        );
        let surrogate = r#"{"messages": [{"role": "user", "content": "a\ud800b"}]}"#;
        let (status, body) = post_text(route, surrogate).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{route}");
        assert_eq!(
            body["error"],
            json!({
                "code": "invalid_request",
                "message": "the string holds an unpaired UTF-16 surrogate escape (\\uD800 to \
                            \\uDFFF without its other half), which is no Unicode text, at line \
                            1 column 51",
                "location": "messages[0].content"
            }),
            "{route}"
        );
        let mut bom = b"\xEF\xBB\xBF".to_vec();
        bom.extend_from_slice(br#"{"messages": [{"role": "user", "content": "hi"}]}"#);
        let (status, body) = post_text(route, bom).await;
        assert_eq!(status, StatusCode::OK, "{route}: {body}");
    }
}

/// A key twice in one object of `request` (or `messages`) is refused at its path on every
/// route: serde would keep the last one silently, and a provider may read the other. A field of
/// the API's own body twice is refused by name.
#[tokio::test]
async fn a_key_twice_in_one_object_is_refused_at_its_path() {
    let message = r#"{"role": "user", "content": "hi"}"#;
    let cases = [
        (
            format!(
                r#"{{"request": {{"model": "m", "max_tokens": 8, "messages": [], "messages": [{message}]}}}}"#
            ),
            "request.messages",
        ),
        (
            r#"{"messages": [{"role": "user", "content": [{"type": "text", "text": "a", "text": "b"}]}]}"#
                .to_string(),
            "messages[0].content[0].text",
        ),
        (
            format!(
                r#"{{"request": {{"model": "m", "messages": [{message}], "metadata": {{"user_id": "a", "user_id": "b"}}}}}}"#
            ),
            "request.metadata.user_id",
        ),
    ];
    for route in ROUTES {
        for (text, path) in &cases {
            let (status, body) = post_text(route, text.clone()).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{route} {text}");
            assert_eq!(body["error"]["code"], "invalid_request", "{route} {text}");
            assert_eq!(body["error"]["location"], *path, "{route} {text}");
            let key = path.rsplit('.').next().unwrap();
            let text = body["error"]["message"].as_str().unwrap();
            assert!(
                text.starts_with(&format!(
                    "the key \"{key}\" appears twice in this object: a body means one value by \
                     a key, and the service and the provider could read different ones at line 1 \
                     column "
                )),
                "{route}: {text}"
            );
        }
        let twice = format!(r#"{{"messages": [{message}], "messages": [{message}]}}"#);
        let (status, body) = post_text(route, twice).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{route}");
        assert_eq!(body["error"]["code"], "invalid_request", "{route}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("duplicate field `messages` at line 1 column "),
            "{route}: {body}"
        );
    }
}

#[tokio::test]
async fn trailing_text_after_the_body_is_invalid_json() {
    let req = Request::post("/v1/compact")
        .body(Body::from("{\"messages\": []} x"))
        .unwrap();
    let (status, _, bytes) = call(app(state(settings(0))), req).await;
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "invalid_json");
    assert_eq!(body["error"]["location"], "line 1 column 18");
}

#[tokio::test]
async fn a_malformed_message_is_a_400_with_its_path() {
    let (status, body) = post_json(
        app(state(settings(0))),
        "/v1/validate",
        &json!({"format": "anthropic", "request": {"messages": [{"role": "user", "content": "hi"}, 7]}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "invalid_request");
    assert_eq!(body["error"]["location"], "messages[1]");
}

#[tokio::test]
async fn missing_request_and_unknown_format_are_400s() {
    let (status, body) = post_json(app(state(settings(0))), "/v1/compact", &json!({})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "invalid_request");
    let (status, body) = post_json(
        app(state(settings(0))),
        "/v1/compact",
        &json!({"request": history(1), "format": "cohere"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "unknown_format");
    assert_eq!(body["error"]["location"], "format");
    // A field of the wrong type is named.
    let (status, body) = post_json(
        app(state(settings(0))),
        "/v1/compact",
        &json!({"request": history(1), "budget": -5}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["location"], "budget");
    // Read from the body's bytes: serde's own words, with where in the body.
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "budget -5 is out of range: a token budget is an integer from 1 to \
             18446744073709551615 at line 1 column "
        ),
        "{message}"
    );
    // A bare request body says where it belongs.
    let (status, body) = post_json(app(state(settings(0))), "/v1/validate", &history(1)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .ends_with("(a whole request body goes under \"request\")"),
        "{body}"
    );
}

#[tokio::test]
async fn a_body_over_the_limit_is_a_413() {
    let mut s = settings(0);
    s.server.body_limit_bytes = 1000;
    let big = json!({"request": history(5)});
    let (status, body) = post_json(app(state(s.clone())), "/v1/compact", &big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(body["error"]["code"], "payload_too_large");
    // The proxy routes answer the same JSON error.
    for route in ["/v1/messages", "/v1/chat/completions", "/v1/responses"] {
        let (status, body) = post_json(app(state(s.clone())), route, &history(5)).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{route}");
        assert_eq!(body["error"]["code"], "payload_too_large", "{route}");
    }
}

#[tokio::test]
async fn a_configured_token_is_required_except_for_healthz() {
    let s = settings(0);
    let st = AppState::from_parts(s, loader(), Some("s3cret".into())).unwrap();
    let body = json!({"request": history(1)}).to_string();
    let (status, _, bytes) = call(
        app(st.clone()),
        Request::post("/v1/count_tokens")
            .body(Body::from(body.clone()))
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let err: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(err["error"]["code"], "unauthorized");
    let (status, _, _) = call(
        app(st.clone()),
        Request::post("/v1/count_tokens")
            .header("authorization", "Bearer wrong")
            .body(Body::from(body.clone()))
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = call(
        app(st.clone()),
        Request::post("/v1/count_tokens")
            .header("authorization", "Bearer s3cret")
            .body(Body::from(body.clone()))
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = call(
        app(st.clone()),
        Request::post("/v1/count_tokens")
            .header("x-compactor-token", "s3cret")
            .body(Body::from(body))
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = call(
        app(st),
        Request::get("/healthz").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn count_tokens_breaks_the_total_down_by_role() {
    let input = history(3);
    let conv = Format::Anthropic.read(&input).unwrap();
    let counter = counter_for(Default::default());
    let by = |role: &str| -> usize {
        conv.messages
            .iter()
            .filter(|m| m.role.as_str() == role)
            .map(|m| counter.count_message(m))
            .sum()
    };
    let (status, body) = post_json(
        app(state(settings(0))),
        "/v1/count_tokens",
        &json!({"request": input}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let mut body = body;
    // Beside the counter's figures: the model tokens the pipeline budgets with (3 calls).
    let model = body
        .as_object_mut()
        .unwrap()
        .remove("model_tokens")
        .unwrap();
    assert_eq!(model["total"], tokens_of(&input, Format::Anthropic));
    assert_eq!(model["tool_calls"], 3);
    assert_eq!(model["counting"]["model"], "claude-sonnet-4-5");
    assert_eq!(model["counting"]["pattern"], "claude-*");
    assert_eq!(
        body,
        json!({
            "tokens": counter.count_conversation(&conv),
            "by_role": {
                "system": counter.count_text(&json!("You are a coding agent.").to_string()),
                "user": by("user"),
                "assistant": by("assistant"),
            },
            "messages": 7,
        })
    );
}

#[tokio::test]
async fn validate_gives_the_verdict_with_located_violations() {
    let (status, body) = post_json(
        app(state(settings(0))),
        "/v1/validate",
        &json!({"request": orphan_history()}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["valid"], false);
    assert_eq!(body["format"], "anthropic");
    assert_eq!(body["violations"].as_array().unwrap().len(), 1);
    let v = &body["violations"][0];
    assert_eq!(v["path"], "messages[0].content[0]");
    assert_eq!(v["kind"]["rule"], "orphan_result");
    assert_eq!(
        v["text"],
        "messages[0].content[0]: tool_result toolu_x has no tool_use in the previous message"
    );
    let (status, body) = post_json(
        app(state(settings(0))),
        "/v1/validate",
        &json!({"request": history(2)}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"valid": true, "format": "anthropic", "violations": []})
    );
}

/// A validator reports the request's token limits the provider refuses (no integer, below 1),
/// while `/v1/compact` passes them through as they came (a number's value exactly).
#[tokio::test]
async fn validate_reports_a_token_limit_that_is_no_integer_of_at_least_one() {
    for (n, found) in [
        ("1e400", "1e+400"),
        ("-0", "-0"),
        ("1024.0", "1024.0"),
        ("0", "0"),
    ] {
        let request = format!(
            r#"{{"model": "m", "max_tokens": {n}, "messages": [{{"role": "user", "content": "hi"}}]}}"#
        );
        let (status, body) =
            post_text("/v1/validate", format!(r#"{{"request": {request}}}"#)).await;
        assert_eq!(status, StatusCode::OK, "{n}");
        assert_eq!(
            body,
            json!({"valid": false, "format": "anthropic", "violations": [{
                "path": "max_tokens", "message": null, "block": null,
                "kind": {"rule": "bad_token_limit", "field": "max_tokens", "found": found},
                "text": format!("max_tokens: max_tokens must be an integer of at least 1 (no \
                                 fraction or exponent), not {found}")
            }]}),
            "{n}"
        );
        let req = Request::post("/v1/compact")
            .header("content-type", "application/json")
            .body(Body::from(format!(r#"{{"request": {request}}}"#)))
            .unwrap();
        let (status, _, bytes) = call(app(state(settings(0))), req).await;
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        assert_eq!(status, StatusCode::OK, "{n}: {text}");
        assert!(
            text.contains(&format!(r#""max_tokens":{found}"#)),
            "{n}: {text}"
        );
    }
    let (status, body) = post_json(
        app(state(settings(0))),
        "/v1/validate",
        &json!({"format": "openai-chat",
                "request": {"model": "m", "max_completion_tokens": 100, "max_tokens": null,
                            "messages": [{"role": "user", "content": "hi"}]}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"valid": true, "format": "openai-chat", "violations": []})
    );
}

#[tokio::test]
async fn a_route_of_the_service_with_another_method_is_a_json_405() {
    for (method, path) in [
        ("POST", "/healthz"),
        ("GET", "/v1/compact"),
        ("PUT", "/metrics"),
    ] {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .unwrap();
        let (status, _, bytes) = call(app(state(settings(0))), req).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            body,
            json!({"error": {"code": "method_not_allowed", "message": format!("this route does not take {method}")}})
        );
    }
}

#[tokio::test]
async fn metrics_count_compactions_by_strategy_and_status() {
    let st = state(settings(0));
    let (status, body) = post_json(
        app(st.clone()),
        "/v1/compact",
        &json!({"request": history(20), "budget": 4000}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let before = body["report"]["tokens_before"].as_u64().unwrap();
    let (status, headers, bytes) = call(
        app(st),
        Request::get("/metrics").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.contains(&"compactor_compactions_total{status=\"compacted\",strategy=\"default\"} 1"),
        "{text}"
    );
    assert!(
        lines.contains(
            &format!("compactor_tokens_before_total{{strategy=\"default\"}} {before}").as_str()
        ),
        "{text}"
    );
    assert!(
        lines.contains(&"compactor_compaction_seconds_count{strategy=\"default\"} 1"),
        "{text}"
    );
    assert!(
        lines.contains(&"compactor_guard_rejections_total 0"),
        "{text}"
    );
    assert!(lines.contains(&"compactor_llm_calls_total 0"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// Proxy, against a fake upstream on 127.0.0.1.

pub(crate) fn proxy_state(budget: usize, upstream: &str) -> AppState {
    let mut s = settings(budget);
    s.server.anthropic_upstream = upstream.to_string();
    s.server.openai_upstream = upstream.to_string();
    state(s)
}

pub(crate) fn anthropic_request(body: impl Into<Body>) -> Request<Body> {
    Request::post("/v1/messages?beta=true")
        .header("content-type", "application/json")
        .header("x-api-key", "sk-ant-test")
        .header("anthropic-version", "2023-06-01")
        .body(body.into())
        .unwrap()
}

#[tokio::test]
async fn proxy_forwards_a_body_under_the_trigger_byte_identical_with_its_key() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{\"id\":\"msg_1\"}")).await;
    // Odd spacing: a re-serialization would not reproduce it.
    let original = format!(
        "{{ \"model\" : \"m\",\n  \"max_tokens\":10, \"messages\": {} }}",
        history(2)["messages"]
    );
    let st = proxy_state(0, &upstream);
    let mut req = anthropic_request(original.clone());
    req.headers_mut()
        .insert("x-compactor-token", "not-for-upstream".parse().unwrap());
    let (status, headers, body) = call(app(st), req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, Bytes::from_static(b"{\"id\":\"msg_1\"}"));
    let tokens = tokens_of(&serde_json::from_str(&original).unwrap(), Format::Anthropic);
    assert_eq!(
        headers["x-compactor-tokens"],
        format!("{tokens}->{tokens}; model=m; ratio=1.000 (counter); overhead=0; tier=none")
            .as_str()
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].uri, "/v1/messages?beta=true");
    assert_eq!(seen[0].body, Bytes::from(original));
    assert_eq!(seen[0].headers["x-api-key"], "sk-ant-test");
    assert_eq!(seen[0].headers["anthropic-version"], "2023-06-01");
    assert!(seen[0].headers.get("x-compactor-token").is_none());
}

#[tokio::test]
async fn proxy_compacts_a_body_over_the_trigger_into_a_valid_request() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let input = history(30);
    let before = tokens_of(&input, Format::Anthropic);
    let (status, headers, _) = call(
        app(proxy_state(4000, &upstream)),
        anthropic_request(input.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let sent: Value = serde_json::from_slice(&seen.lock().unwrap()[0].body).unwrap();
    let after = tokens_of(&sent, Format::Anthropic);
    assert!(after <= 4000 * 8 / 10, "{after}");
    let conv = Format::Anthropic.read(&sent).unwrap();
    assert_eq!(
        guard::validate(&conv, Format::Anthropic, Default::default()),
        vec![]
    );
    let applied = headers["x-compactor-tokens"].to_str().unwrap().to_string();
    assert!(
        applied.starts_with(&format!(
            "{before}->{after}; model=claude-sonnet-4-5; ratio=1.105 (config claude-*); overhead=0; tool_call=172; tier="
        )),
        "{applied}"
    );
    assert_eq!(sent["model"], input["model"]);
    assert_eq!(sent["system"], input["system"]);
    // Its cost with prompt caching, in dollars by claude-sonnet-4-5's prices: the client's
    // body would read its previous request and write the rest; the compaction writes its
    // messages (system and tools stay cached).
    let cost = headers["x-compactor-cost"].to_str().unwrap();
    let saved: f64 = cost
        .rsplit("saved=$")
        .next()
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("{cost}"));
    assert!(cost.starts_with("forwarded=$"), "{cost}");
    // Forwarded: only the system prompt is read from the cache, the compacted messages are
    // written; the client's body would read all but its last turn.
    let system = tokens_of(
        &json!({"model": input["model"], "system": input["system"], "messages": []}),
        Format::Anthropic,
    );
    assert!(cost.contains(&format!("(read {system}, write ")), "{cost}");
    assert!(cost.contains("; client=$"), "{cost}");
    // 23k tokens read at $0.30 outweigh 2k written at $3.75.
    assert!(saved > 0.0, "{cost}");
}

#[tokio::test]
async fn proxy_compacts_openai_chat_and_passes_the_bearer_key() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let anthropic = Format::Anthropic.read(&history(30)).unwrap();
    let chat = Format::OpenAiChat.write(&compactor::format::convert(
        &anthropic,
        Format::Anthropic,
        Format::OpenAiChat,
    ));
    let req = Request::post("/v1/chat/completions")
        .header("authorization", "Bearer sk-openai-test")
        .header("openai-organization", "org-1")
        .body(Body::from(chat.to_string()))
        .unwrap();
    let (status, headers, _) = call(app(proxy_state(4000, &upstream)), req).await;
    assert_eq!(status, StatusCode::OK);
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].uri, "/v1/chat/completions");
    assert_eq!(seen[0].headers["authorization"], "Bearer sk-openai-test");
    assert_eq!(seen[0].headers["openai-organization"], "org-1");
    let sent: Value = serde_json::from_slice(&seen[0].body).unwrap();
    let conv = Format::OpenAiChat.read(&sent).unwrap();
    assert_eq!(
        guard::validate(&conv, Format::OpenAiChat, Default::default()),
        vec![]
    );
    assert!(tokens_of(&sent, Format::OpenAiChat) < tokens_of(&chat, Format::OpenAiChat));
    assert!(
        !headers["x-compactor-tokens"]
            .to_str()
            .unwrap()
            .ends_with("tier=none")
    );
}

#[tokio::test]
async fn proxy_compacts_openai_responses_input() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let anthropic = Format::Anthropic.read(&history(30)).unwrap();
    let responses = Format::OpenAiResponses.write(&compactor::format::convert(
        &anthropic,
        Format::Anthropic,
        Format::OpenAiResponses,
    ));
    let req = Request::post("/v1/responses")
        .header("authorization", "Bearer sk-openai-test")
        .body(Body::from(responses.to_string()))
        .unwrap();
    let (status, headers, _) = call(app(proxy_state(4000, &upstream)), req).await;
    assert_eq!(status, StatusCode::OK);
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].uri, "/v1/responses");
    assert_eq!(seen[0].headers["authorization"], "Bearer sk-openai-test");
    let sent: Value = serde_json::from_slice(&seen[0].body).unwrap();
    let conv = Format::OpenAiResponses.read(&sent).unwrap();
    assert_eq!(
        guard::validate(&conv, Format::OpenAiResponses, Default::default()),
        vec![]
    );
    let (before, after) = (
        tokens_of(&responses, Format::OpenAiResponses),
        tokens_of(&sent, Format::OpenAiResponses),
    );
    assert!(after < before, "{after} >= {before}");
    assert_eq!(sent["model"], responses["model"]);
    let applied = headers["x-compactor-tokens"].to_str().unwrap();
    assert!(
        applied.starts_with(&format!(
            "{before}->{after}; model=claude-sonnet-4-5; ratio=1.105 (config claude-*); overhead=0; tool_call=172; tier="
        )),
        "{applied}"
    );
}

#[tokio::test]
async fn proxy_streams_sse_events_unchanged_and_in_order() {
    let gate = Arc::new(Notify::new());
    let (upstream, _seen) = spawn_upstream(Reply {
        status: 200,
        headers: vec![
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache"),
        ],
        chunks: EVENTS.to_vec(),
        gate: Some(gate.clone()),
        delay: Duration::ZERO,
    })
    .await;
    let mut body = history(2);
    body["stream"] = json!(true);
    let res = app(proxy_state(0, &upstream))
        .oneshot(anthropic_request(body.to_string()))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    assert_eq!(res.headers()["cache-control"], "no-cache");
    let mut stream = res.into_body().into_data_stream();
    // The first event arrives while the upstream still holds the rest: nothing is buffered.
    let mut got = Vec::new();
    while got.len() < EVENTS[0].len() {
        let chunk = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("first event not streamed")
            .unwrap()
            .unwrap();
        got.extend_from_slice(&chunk);
    }
    assert_eq!(String::from_utf8(got.clone()).unwrap(), EVENTS[0]);
    gate.notify_one();
    while let Some(chunk) = stream.next().await {
        got.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(String::from_utf8(got).unwrap(), EVENTS.concat());
}

#[tokio::test]
async fn proxy_passes_upstream_errors_through_with_status_and_body() {
    let mut reply = Reply::json(
        429,
        "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}",
    );
    reply.headers.push(("retry-after", "7"));
    let (upstream, _seen) = spawn_upstream(reply).await;
    let (status, headers, body) = call(
        app(proxy_state(0, &upstream)),
        anthropic_request(history(1).to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "7");
    assert_eq!(
        body,
        Bytes::from_static(b"{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}")
    );
}

#[tokio::test]
async fn proxy_forwards_an_unreadable_body_as_it_came() {
    let (upstream, seen) = spawn_upstream(Reply::json(400, "{\"error\":\"bad\"}")).await;
    seen.sent_invalid("not json");
    let (status, headers, _) = call(
        app(proxy_state(0, &upstream)),
        anthropic_request("not json"),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(headers["x-compactor-skipped"], "not JSON");
    assert_eq!(
        seen.lock().unwrap()[0].body,
        Bytes::from_static(b"not json")
    );
}

#[tokio::test]
async fn proxy_answers_502_when_the_upstream_is_unreachable() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let (status, _, bytes) = call(
        app(proxy_state(0, &dead)),
        anthropic_request(history(1).to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        body,
        json!({"error": {"code": "upstream_unreachable", "message": "the upstream could not be reached"}})
    );
}

#[tokio::test]
async fn a_slow_upstream_is_a_408_after_the_timeout() {
    let mut reply = Reply::json(200, "{}");
    reply.delay = Duration::from_secs(3);
    let (upstream, _seen) = spawn_upstream(reply).await;
    let mut s = settings(0);
    s.server.anthropic_upstream = upstream;
    s.server.request_timeout_secs = 1;
    let (status, _, bytes) = call(app(state(s)), anthropic_request(history(1).to_string())).await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT);
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body["error"]["code"], "timeout");
}

/// An agent loop through the proxy: each turn sends the whole history plus one new round.
/// Between compactions the forwarded messages only grow at the end, so the provider's prompt
/// cache keeps hitting.
#[tokio::test]
async fn proxy_keeps_the_compacted_prefix_stable_between_compactions() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let router = app(proxy_state(6000, &upstream));
    let mut kinds = Vec::new();
    for rounds in 1..=60 {
        let body = history(rounds);
        let (status, headers, _) = call(router.clone(), anthropic_request(body.to_string())).await;
        assert_eq!(status, StatusCode::OK);
        let header = headers["x-compactor-tokens"].to_str().unwrap().to_string();
        kinds.push(if header.ends_with("prefix=reused") {
            "reused"
        } else if header.ends_with("tier=none") {
            "passthrough"
        } else {
            "compacted"
        });
    }
    let seen = seen.lock().unwrap();
    let sent: Vec<Value> = seen
        .iter()
        .map(|s| serde_json::from_slice(&s.body).unwrap())
        .collect();
    for (turn, body) in sent.iter().enumerate() {
        let conv = Format::Anthropic.read(body).unwrap();
        assert_eq!(
            guard::validate(&conv, Format::Anthropic, Default::default()),
            vec![],
            "turn {turn}"
        );
        // A continuation goes on to the budget itself (not the trigger): each turn appends.
        assert!(tokens_of(body, Format::Anthropic) <= 6000, "turn {turn}");
        if kinds[turn] == "passthrough" {
            assert_eq!(seen[turn].body, Bytes::from(history(turn + 1).to_string()));
        }
        if kinds[turn] == "reused" {
            let prev = sent[turn - 1]["messages"].as_array().unwrap();
            let now = body["messages"].as_array().unwrap();
            assert_eq!(&now[..prev.len()], &prev[..], "turn {turn}: prefix changed");
        }
    }
    let count = |k: &str| kinds.iter().filter(|x| **x == k).count();
    assert_eq!(
        (count("passthrough"), count("compacted"), count("reused")),
        // The budget is in Claude tokens (1.105 x o200k plus 172 per tool call). After the
        // first compaction each turn appends to the prefix sent before until the budget (not
        // the trigger, as before: 6, 21, 33) is passed: one compaction every sixth turn.
        (6, 10, 44),
        "{kinds:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Panic boundary, pass-through, limits and timeouts.

/// A strategy that panics: stands for any bug inside a compaction.
struct Boom;

#[async_trait::async_trait]
impl compactor::strategy::Strategy for Boom {
    fn name(&self) -> &str {
        "boom"
    }
    async fn compact(
        &self,
        _: &compactor::conversation::Conversation,
        _: compactor::strategy::Budget,
        _: &compactor::strategy::Context<'_>,
    ) -> Result<compactor::strategy::Compaction, compactor::strategy::StrategyError> {
        panic!("boom: a bug in a strategy");
    }
}

fn panicking_state(budget: usize, upstream: &str) -> AppState {
    let mut s = settings(budget);
    s.server.anthropic_upstream = upstream.to_string();
    s.server.openai_upstream = upstream.to_string();
    let pipeline = compactor::Compactor::with_parts(
        s.clone(),
        counter_for(Default::default()),
        vec![Box::new(Boom)],
    );
    AppState::with_compactor(s, loader(), None, pipeline).unwrap()
}

#[tokio::test]
async fn a_panic_in_compaction_is_a_json_500_on_the_api() {
    let router = app(panicking_state(2000, "http://127.0.0.1:9"));
    let (status, body) = post_json(
        router.clone(),
        "/v1/compact",
        &json!({"request": history(20)}),
    )
    .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        body,
        json!({"error": {"code": "internal", "message": "internal error"}})
    );
    // The service goes on: the next request is answered, and the panic is counted.
    let req = Request::get("/metrics").body(Body::empty()).unwrap();
    let (status, _, bytes) = call(router, req).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    assert!(
        text.lines().any(|l| l == "compactor_panics_total 1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_panic_in_compaction_forwards_the_original_body_on_the_proxy() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{\"id\":\"msg_1\"}")).await;
    let body = history(20).to_string();
    let (status, headers, bytes) = call(
        app(panicking_state(2000, &upstream)),
        anthropic_request(body.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(bytes, Bytes::from_static(b"{\"id\":\"msg_1\"}"));
    assert_eq!(headers["x-compactor-skipped"], "internal error");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body, Bytes::from(body));
    assert_eq!(seen[0].headers["x-api-key"], "sk-ant-test");
}

#[tokio::test]
async fn other_methods_and_paths_are_forwarded_as_they_came() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{\"data\":[]}")).await;
    let router = app(proxy_state(0, &upstream));
    let cases = [
        ("GET", "/v1/models?beta=true", ""),
        (
            "POST",
            "/v1/embeddings",
            "{\"input\":\"hello\",\"model\":\"e\"}",
        ),
        ("GET", "/v1/messages/batches?limit=2", ""),
        ("DELETE", "/v1/files/file_123", ""),
        ("GET", "/v1/chat/completions?limit=5", ""),
    ];
    for (method, path, body) in cases {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("x-api-key", "sk-ant-test")
            .header("anthropic-version", "2023-06-01")
            .body(Body::from(body))
            .unwrap();
        let (status, _, bytes) = call(router.clone(), req).await;
        assert_eq!(status, StatusCode::OK, "{method} {path}");
        assert_eq!(bytes, Bytes::from_static(b"{\"data\":[]}"));
    }
    let seen = seen.lock().unwrap();
    let got: Vec<(String, String, Bytes)> = seen
        .iter()
        .map(|s| (s.method.clone(), s.uri.clone(), s.body.clone()))
        .collect();
    let want: Vec<(String, String, Bytes)> = cases
        .iter()
        .map(|(m, p, b)| (m.to_string(), p.to_string(), Bytes::from(*b)))
        .collect();
    assert_eq!(got, want);
    assert!(seen.iter().all(|s| s.headers["x-api-key"] == "sk-ant-test"));
}

#[tokio::test]
async fn a_pass_through_request_needs_the_service_token_when_one_is_set() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let mut s = settings(0);
    s.server.openai_upstream = upstream;
    let router = app(AppState::from_parts(s, loader(), Some("secret".into())).unwrap());
    let req = |token: Option<&str>| {
        let mut b = Request::get("/v1/models").header("authorization", "Bearer secret");
        if let Some(t) = token {
            b = b.header("x-compactor-token", t);
        }
        b.body(Body::empty()).unwrap()
    };
    // `authorization` is the provider's key here, not the service token.
    let (status, _, _) = call(router.clone(), req(None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = call(router, req(Some("secret"))).await;
    assert_eq!(status, StatusCode::OK);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["authorization"], "Bearer secret");
    assert!(!seen[0].headers.contains_key("x-compactor-token"));
}

#[tokio::test]
async fn count_tokens_is_forwarded_with_the_same_compaction_as_messages() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{\"input_tokens\":1}")).await;
    let router = app(proxy_state(4000, &upstream));
    let mut body = history(30);
    body.as_object_mut().unwrap().remove("max_tokens");
    let req = Request::post("/v1/messages/count_tokens?beta=true")
        .header("x-api-key", "sk-ant-test")
        .body(Body::from(body.to_string()))
        .unwrap();
    let (status, headers, _) = call(router, req).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers.contains_key("x-compactor-tokens"), "{headers:?}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].uri, "/v1/messages/count_tokens?beta=true");
    let sent: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert!(tokens_of(&sent, Format::Anthropic) <= 4000 * 8 / 10);
    assert!(tokens_of(&body, Format::Anthropic) > 4000);
}

#[tokio::test]
async fn one_concurrency_limit_holds_until_a_streamed_answer_ends() {
    let gate = Arc::new(Notify::new());
    let (upstream, seen) = spawn_upstream(Reply::gated_events(gate.clone())).await;
    let mut s = settings(0);
    s.server.anthropic_upstream = upstream;
    s.server.concurrency_limit = 1;
    let router = app(state(s));
    let res = router
        .clone()
        .oneshot(anthropic_request(history(1).to_string()))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let mut stream = res.into_body().into_data_stream();
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first, Bytes::from_static(EVENTS[0].as_bytes()));
    // While the stream is open, a second request on another route waits for the one permit...
    let second = tokio::spawn(
        router
            .clone()
            .oneshot(anthropic_request(history(1).to_string())),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!second.is_finished());
    assert_eq!(seen.lock().unwrap().len(), 1);
    // ...but /healthz is not counted.
    let (status, _, _) = call(
        router.clone(),
        Request::get("/healthz").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    gate.notify_one();
    while let Some(chunk) = stream.next().await {
        chunk.unwrap();
    }
    drop(stream);
    gate.notify_one();
    let res = tokio::time::timeout(Duration::from_secs(10), second)
        .await
        .expect("the second request never ran")
        .unwrap()
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_stalled_upstream_stream_is_cut_after_the_read_timeout() {
    let gate = Arc::new(Notify::new());
    let (upstream, _seen) = spawn_upstream(Reply::gated_events(gate)).await;
    let mut s = settings(0);
    s.server.anthropic_upstream = upstream;
    s.server.upstream_read_timeout_secs = 1;
    let res = app(state(s))
        .oneshot(anthropic_request(history(1).to_string()))
        .await
        .unwrap();
    let read = tokio::time::timeout(
        Duration::from_secs(20),
        to_bytes(res.into_body(), usize::MAX),
    )
    .await
    .expect("the stalled stream hung the client");
    let err = read.unwrap_err();
    assert!(
        err.to_string().contains("Stalled") || format!("{err:?}").contains("Stalled(1s)"),
        "{err:?}"
    );
}

/// A compaction that holds its worker until released: proves where compaction runs.
struct Held(Arc<std::sync::Barrier>);

#[async_trait::async_trait]
impl compactor::strategy::Strategy for Held {
    fn name(&self) -> &str {
        "held"
    }
    async fn compact(
        &self,
        _c: &compactor::conversation::Conversation,
        _: compactor::strategy::Budget,
        _: &compactor::strategy::Context<'_>,
    ) -> Result<compactor::strategy::Compaction, compactor::strategy::StrategyError> {
        // Blocks this thread (as heavy CPU work would) until the test has checked /healthz.
        self.0.wait();
        Ok(compactor::strategy::Compaction::unchanged("held"))
    }
}

/// A state with one compaction worker whose strategy is [`Held`] on the returned barrier.
pub(crate) fn held_state() -> (AppState, Arc<std::sync::Barrier>) {
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let mut s = settings(2000);
    s.server.compaction_workers = 1;
    let pipeline = compactor::Compactor::with_parts(
        s.clone(),
        counter_for(Default::default()),
        vec![Box::new(Held(barrier.clone()))],
    );
    let state = AppState::with_compactor(s, loader(), None, pipeline).unwrap();
    (state, barrier)
}

#[tokio::test]
async fn healthz_answers_while_compaction_holds_its_worker() {
    let (held, barrier) = held_state();
    let router = app(held);
    let busy = {
        let router = router.clone();
        tokio::spawn(async move {
            post_json(router, "/v1/compact", &json!({"request": history(20)})).await
        })
    };
    // On this single-threaded test runtime a compaction on the async thread would block the
    // health check forever; on the pool it does not.
    let (status, _, _) = tokio::time::timeout(
        Duration::from_secs(10),
        call(
            router,
            Request::get("/healthz").body(Body::empty()).unwrap(),
        ),
    )
    .await
    .expect("/healthz stalled behind a compaction");
    assert_eq!(status, StatusCode::OK);
    let waiter = barrier.clone();
    tokio::task::spawn_blocking(move || waiter.wait())
        .await
        .unwrap();
    let (status, _) = busy.await.unwrap();
    assert_eq!(status, StatusCode::OK);
}

/// Serves `s` on a free port on 127.0.0.1 until the returned sender fires.
pub(crate) async fn serve_port(
    s: Settings,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        compactor::server::listen::serve_on(state(s), listener, async {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    (addr, tx, handle)
}

/// Reads until the peer closes; `Err` when it is still open after `within`.
pub(crate) async fn closed_within(
    stream: &mut tokio::net::TcpStream,
    within: Duration,
) -> Result<Vec<u8>, ()> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.map(|()| got).map_err(|_| ())
}

#[tokio::test]
async fn slow_headers_and_idle_connections_are_closed() {
    use tokio::io::AsyncWriteExt;
    let mut s = settings(0);
    s.server.header_read_timeout_secs = 1;
    s.server.idle_timeout_secs = 1;
    let (addr, stop, server) = serve_port(s).await;
    // Headers that never end.
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    assert!(
        closed_within(&mut slow, Duration::from_secs(10))
            .await
            .is_ok()
    );
    // A keep-alive connection after its answer.
    let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let got = closed_within(&mut idle, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200 OK"));
    stop_server(stop, server).await;
}

/// Stops a server of [`serve_port`] and waits (at most 20 s) for it to return.
pub(crate) async fn stop_server(
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<()>,
) {
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(20), server)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn shutdown_does_not_wait_past_its_deadline_for_a_stalled_stream() {
    use tokio::io::AsyncWriteExt;
    let gate = Arc::new(Notify::new());
    let (upstream, seen) = spawn_upstream(Reply::gated_events(gate)).await;
    let mut s = settings(0);
    s.server.anthropic_upstream = upstream;
    s.server.shutdown_timeout_secs = 1;
    let (addr, stop, server) = serve_port(s).await;
    let body = history(1).to_string();
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    client.write_all(head.as_bytes()).await.unwrap();
    client.write_all(body.as_bytes()).await.unwrap();
    while seen.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("shutdown waited on the stalled stream")
        .unwrap();
}

#[tokio::test]
async fn metrics_show_the_compaction_memory_and_its_byte_bound() {
    let mut s = settings(4000);
    s.server.memory_bytes = 5_000_000;
    let router = app(state(s));
    let (status, _) = post_json(
        router.clone(),
        "/v1/compact",
        &json!({"request": history(20)}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let req = Request::get("/metrics").body(Body::empty()).unwrap();
    let (_, _, bytes) = call(router, req).await;
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    assert!(
        text.lines()
            .any(|l| l == "compactor_memory_max_bytes{strategy=\"default\"} 5000000"),
        "{text}"
    );
    let held: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("compactor_memory_bytes{strategy=\"default\"} "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(held > 1000 && held <= 5_000_000, "{held}");
}

#[tokio::test]
async fn a_degraded_compaction_says_so_in_the_header_also_when_reused() {
    // The summary tier's LLM is a closed port on 127.0.0.1: it fails, truncate does the work.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let dir = std::env::temp_dir().join(format!("compactor-degraded-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("llm.toml");
    std::fs::write(
        &file,
        format!(
            "[policy]\ntiers = [\"summary\", \"truncate\"]\n[llm]\nprovider = \"openai\"\n\
             base_url = \"http://127.0.0.1:{port}\"\nmodel = \"x\"\nretries = 0\ntimeout_secs = 2\n"
        ),
    )
    .unwrap();
    let loader = Loader {
        file: Some(file),
        ..loader()
    };
    let (upstream, _seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let mut s = loader.load().unwrap();
    s.budget.tokens = 4000;
    s.server.anthropic_upstream = upstream.clone();
    let app_state = AppState::from_parts(s, loader, None).unwrap();
    let header = |h: &HeaderMap| h["x-compactor-tokens"].to_str().unwrap().to_string();
    let (status, first, _) = call(
        app(app_state.clone()),
        anthropic_request(history(30).to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let first = header(&first);
    assert!(first.ends_with("; status=degraded"), "{first}");
    assert!(
        first.contains("tier=truncate after summary failed"),
        "{first}"
    );
    // The next turn continues from the remembered (degraded) output.
    let (_, second, _) = call(app(app_state), anthropic_request(history(31).to_string())).await;
    let second = header(&second);
    assert!(second.contains("remembered"), "{second}");
    assert!(second.ends_with("; status=degraded"), "{second}");
}

#[tokio::test]
async fn an_output_still_over_the_budget_says_so_in_the_header() {
    let (upstream, _seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let router = app(proxy_state(60, &upstream));
    let (status, headers, _) =
        call(router.clone(), anthropic_request(history(6).to_string())).await;
    assert_eq!(status, StatusCode::OK);
    let header = headers["x-compactor-tokens"].to_str().unwrap();
    assert!(header.ends_with("; status=over_budget"), "{header}");
    let (_, text) = get_text(router, "/metrics").await;
    assert!(
        text.contains("compactor_compactions_total{status=\"over_budget\",strategy=\"default\"} 1"),
        "{text}"
    );
}

/// The proxy with the summary tier first on the fake model at `llm`.
fn summary_settings(
    budget: usize,
    upstream: &str,
    llm: &crate::support::fake_llm::FakeLlm,
) -> Settings {
    let mut s = settings(budget);
    s.server.anthropic_upstream = upstream.to_string();
    s.policy.tiers = vec!["summary".into(), "truncate".into()];
    s.llm = Some(compactor::llm::LlmConfig {
        provider: compactor::llm::Provider::Anthropic,
        base_url: Some(llm.url.clone()),
        model: "fake-model".into(),
        api_key_env: None,
        max_output_tokens: 1_000,
        timeout_secs: 30.0,
        retries: 2,
        context_window: 100_000,
        extra_body: Default::default(),
        max_answer_bytes: 1024 * 1024,
        breaker_threshold: 3,
        breaker_cooldown_secs: 600.0,
    });
    s
}

/// A history of `rounds` rounds whose first prompt is tagged, so no two share a prefix.
fn tagged_history(tag: usize, rounds: usize) -> Value {
    let mut h = history(rounds);
    h["messages"][0]["content"] = json!(format!("Task {tag}: fix the failing test"));
    // A closing user turn, so the summary has a legal cut before the newest message.
    let msgs = h["messages"].as_array_mut().unwrap();
    msgs.push(json!({"role": "assistant", "content": "Read them all."}));
    msgs.push(json!({"role": "user", "content": "go on"}));
    h
}

pub(crate) fn metric(text: &str, name: &str) -> String {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
        .to_string()
}

#[tokio::test]
async fn eight_concurrent_requests_to_a_failing_model_make_only_threshold_calls() {
    use crate::support::fake_llm::{FakeLlm, Reply as LlmReply};
    let llm = FakeLlm::start(vec![LlmReply::Status(500, None); 40]).await;
    let (up, _seen) = spawn_upstream(Reply::json(200, r#"{"ok":true}"#)).await;
    let mut s = summary_settings(8_000, &up, &llm);
    s.server.compaction_workers = 8;
    let app = app(state(s));
    let calls = (0..8).map(|i| {
        let app = app.clone();
        async move {
            let body = tagged_history(i, 16).to_string();
            let (status, headers, _) = call(app, anthropic_request(body)).await;
            (
                status,
                headers["x-compactor-tokens"].to_str().unwrap().to_string(),
            )
        }
    });
    for (status, header) in futures_util::future::join_all(calls).await {
        assert_eq!(status, StatusCode::OK);
        assert!(header.ends_with("status=degraded"), "{header}");
    }
    // Breaker threshold 3, retries 2: 3 attempts went out, not 8 x 3.
    assert_eq!(llm.count(), 3);
    let (_, m) = get_text(app, "/metrics").await;
    assert_eq!(
        metric(&m, "compactor_llm_calls_total"),
        "compactor_llm_calls_total 3"
    );
    assert_eq!(
        metric(&m, "compactor_llm_failures_total"),
        "compactor_llm_failures_total 3"
    );
}

pub(crate) async fn get_text(app: Router, path: &str) -> (StatusCode, String) {
    let (status, _, body) = call(app, Request::get(path).body(Body::empty()).unwrap()).await;
    (status, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn a_slow_summary_model_falls_back_to_truncate_within_the_summary_budget() {
    use crate::support::fake_llm::{FakeLlm, Reply as LlmReply};
    let llm = FakeLlm::start(vec![LlmReply::Delay(
        Duration::from_secs(30),
        "late".into(),
    )])
    .await;
    let (up, recorded) = spawn_upstream(Reply::json(200, r#"{"ok":true}"#)).await;
    let mut s = summary_settings(8_000, &up, &llm);
    s.server.request_timeout_secs = 5;
    s.server.summary_budget_secs = 0.5;
    let app = app(state(s));
    let (status, headers, _) = call(
        app.clone(),
        anthropic_request(tagged_history(0, 16).to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let header = headers["x-compactor-tokens"].to_str().unwrap();
    assert!(
        header.contains("tier=truncate after summary failed"),
        "{header}"
    );
    assert!(header.ends_with("status=degraded"), "{header}");
    let sent: Value = serde_json::from_slice(&recorded.lock().unwrap()[0].body).unwrap();
    assert_eq!(
        guard::validate(
            &Format::Anthropic.read(&sent).unwrap(),
            Format::Anthropic,
            Default::default()
        ),
        vec![]
    );
    let (_, m) = get_text(app, "/metrics").await;
    assert_eq!(
        metric(&m, "compactor_llm_calls_total"),
        "compactor_llm_calls_total 1"
    );
    assert_eq!(
        metric(&m, "compactor_llm_failures_total"),
        "compactor_llm_failures_total 1"
    );
}

#[tokio::test]
async fn an_answer_over_the_size_cap_fails_the_summary_and_truncate_takes_over() {
    use crate::support::fake_llm::{FakeLlm, Reply as LlmReply};
    let llm = FakeLlm::start(vec![LlmReply::Text("word ".repeat(400_000))]).await;
    let (up, _seen) = spawn_upstream(Reply::json(200, r#"{"ok":true}"#)).await;
    let mut s = summary_settings(8_000, &up, &llm);
    if let Some(l) = s.llm.as_mut() {
        l.max_answer_bytes = 65_536;
        l.retries = 0;
    }
    let app = app(state(s));
    let (status, body) = post_json(
        app,
        "/v1/compact",
        &json!({"request": tagged_history(0, 16), "budget": 8_000}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["report"]["status"], "degraded");
    let notes = body["report"]["notes"].to_string();
    assert!(
        notes.contains(&format!(
            "the answer from {}/v1/messages is over 65536 bytes (llm.max_answer_bytes)",
            llm.url
        )),
        "{notes}"
    );
    assert_eq!(llm.count(), 1);
}

#[tokio::test]
async fn headers_over_the_limit_get_a_json_431() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = settings(0);
    s.server.max_header_bytes = 16 * 1024;
    let (addr, stop, _handle) = serve_port(s).await;
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let big = "a".repeat(20 * 1024);
    stream
        .write_all(
            format!(
                "GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: {big}\r\nconnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8(answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    let body = answer.split("\r\n\r\n").nth(1).unwrap();
    let v: Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["error"]["code"], "headers_too_large");
    assert_eq!(
        v["error"]["message"],
        format!(
            "the request headers are {} bytes, over the limit (server.max_header_bytes)",
            4 + 1 + 5 + big.len() + 10 + 5
        )
    );
    let _ = stop.send(());
}

#[tokio::test]
async fn metrics_show_the_token_cache_bytes_and_their_bound_from_the_config() {
    let mut s = settings(100_000);
    s.server.token_cache_bytes = 1_280_000;
    let app = app(state(s));
    let used = |m: &str| -> u64 {
        let line = metric(
            m,
            r#"compactor_token_cache_bytes{kind="used",tokenizer="o200k_base"}"#,
        );
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let (status, _) = post_json(app.clone(), "/v1/compact", &json!({"request": history(3)})).await;
    assert_eq!(status, StatusCode::OK);
    let (_, m) = get_text(app.clone(), "/metrics").await;
    assert_eq!(
        metric(
            &m,
            r#"compactor_token_cache_bytes{kind="max",tokenizer="o200k_base"}"#
        ),
        r#"compactor_token_cache_bytes{kind="max",tokenizer="o200k_base"} 1280000"#
    );
    let before = used(&m);
    // Two more rounds: a text, a call and a result each, 6 new blocks (the text block and the
    // text result each cached as its text, the entry a cut of that text finds): 6 entries of
    // 128 bytes.
    let (status, _) = post_json(app.clone(), "/v1/compact", &json!({"request": history(5)})).await;
    assert_eq!(status, StatusCode::OK);
    let (_, m) = get_text(app, "/metrics").await;
    assert_eq!(used(&m) - before, 6 * 128);
}

/// Sends `bodies` in order through a proxy with `replay_cache_bytes`; what the upstream got,
/// the `x-compactor-tokens` headers, and the metrics text at the end.
async fn send_in_turn(
    replay_cache_bytes: u64,
    bodies: &[&str],
) -> (Vec<Bytes>, Vec<String>, String) {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let mut s = settings(4000);
    s.server.anthropic_upstream = upstream.clone();
    s.server.replay_cache_bytes = replay_cache_bytes;
    let router = app(state(s));
    let mut headers = Vec::new();
    for body in bodies {
        let (status, h, _) = call(router.clone(), anthropic_request(body.to_string())).await;
        assert_eq!(status, StatusCode::OK);
        headers.push(h["x-compactor-tokens"].to_str().unwrap().to_string());
    }
    let (_, m) = get_text(router, "/metrics").await;
    let sent = seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.body.clone())
        .collect();
    (sent, headers, m)
}

#[tokio::test]
async fn a_body_seen_before_is_replayed_as_the_pipeline_would_send_it_again() {
    let (over, under) = (history(30).to_string(), history(1).to_string());
    let bodies = [&*over, &*over, &*over, &*under, &*under, &*over];
    let (sent, headers, m) = send_in_turn(64 << 20, &bodies).await;
    // The same bodies through a proxy without the replay cache: every answer the same.
    let (sent_off, headers_off, m_off) = send_in_turn(0, &bodies).await;
    assert_eq!(headers, headers_off);
    assert_eq!(sent, sent_off);
    // Compacted once, then continued from the memory (kept), then replayed.
    assert!(
        headers[1].ends_with("tier=remembered; prefix=reused"),
        "{}",
        headers[1]
    );
    assert_eq!(sent[1], sent[2]);
    assert_eq!(sent[1], sent[5]);
    assert_eq!(sent[4], Bytes::from(under.clone()));
    assert!(headers[3].ends_with("tier=none"), "{}", headers[3]);
    assert_eq!(
        metric(&m, "compactor_replay_hits_total"),
        "compactor_replay_hits_total 3"
    );
    assert_eq!(
        metric(&m_off, "compactor_replay_hits_total"),
        "compactor_replay_hits_total 0"
    );
    // The requests are counted by what was done to them, replayed or not.
    for m in [&m, &m_off] {
        for (body, n) in [("compacted", 1), ("reused", 3), ("passthrough", 2)] {
            let name =
                format!("compactor_proxy_requests_total{{body=\"{body}\",route=\"/v1/messages\"}}");
            assert_eq!(metric(m, &name), format!("{name} {n}"));
        }
    }
    let used: u64 = metric(&m, r#"compactor_replay_cache_bytes{kind="used"}"#)
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // The kept remembered output and two headers with their overhead (the body forwarded as
    // it came is not kept).
    let expected = sent[1].len() as u64 + headers[1].len() as u64 + headers[3].len() as u64 + 2048;
    assert_eq!(used, expected);
    assert_eq!(
        metric(&m, r#"compactor_replay_cache_bytes{kind="max"}"#),
        format!(
            "compactor_replay_cache_bytes{{kind=\"max\"}} {}",
            64u64 << 20
        )
    );
}

#[tokio::test]
async fn every_preset_counts_into_the_one_token_cache_bounded_by_the_config() {
    let mut s = settings(2_000);
    s.server.token_cache_bytes = 20 * 128;
    let app = app(state(s));
    // Only presets other than the configured one (`default`) count here.
    for strategy in ["truncate", "microcompact"] {
        let (status, out) = post_json(
            app.clone(),
            "/v1/compact",
            &json!({"request": history(30), "strategy": strategy}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{out}");
        assert_eq!(out["report"]["strategy"], strategy);
    }
    let (_, m) = get_text(app, "/metrics").await;
    let value = |name: &str| -> u64 {
        metric(&m, name)
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let max = value(r#"compactor_token_cache_bytes{kind="max",tokenizer="o200k_base"}"#);
    let used = value(r#"compactor_token_cache_bytes{kind="used",tokenizer="o200k_base"}"#);
    assert_eq!(max, 20 * 128);
    // history(30) has 91 blocks: the presets' counts are in the one cache, held to its bound.
    assert!(used > 0 && used <= max, "{used}");
}

/// A tier that never shortens anything and counts how often it ran.
struct Stuck(Arc<std::sync::atomic::AtomicUsize>);

#[async_trait::async_trait]
impl compactor::strategy::Strategy for Stuck {
    fn name(&self) -> &str {
        "stuck"
    }
    async fn compact(
        &self,
        _c: &compactor::conversation::Conversation,
        _: compactor::strategy::Budget,
        _: &compactor::strategy::Context<'_>,
    ) -> Result<compactor::strategy::Compaction, compactor::strategy::StrategyError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(compactor::strategy::Compaction::unchanged("nothing to cut"))
    }
}

#[tokio::test]
async fn a_body_no_tier_could_shorten_is_not_replayed_but_tried_again() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let mut s = settings(2000);
    s.server.anthropic_upstream = upstream.clone();
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let pipeline = compactor::Compactor::with_parts(
        s.clone(),
        counter_for(Default::default()),
        vec![Box::new(Stuck(runs.clone()))],
    );
    let router = app(AppState::with_compactor(s, loader(), None, pipeline).unwrap());
    let body = history(20).to_string();
    for _ in 0..3 {
        let (status, _, _) = call(router.clone(), anthropic_request(body.clone())).await;
        assert_eq!(status, StatusCode::OK);
    }
    // Over the trigger, forwarded as it came each time, and the tier ran each time.
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .all(|s| s.body == body.as_bytes())
    );
    let (_, m) = get_text(router, "/metrics").await;
    assert_eq!(
        metric(&m, "compactor_replay_hits_total"),
        "compactor_replay_hits_total 0"
    );
}

/// Sends `bodies` in order through a proxy with `read_cache_bytes` and no replay cache; what
/// the upstream got, the `x-compactor-tokens` headers, and the metrics text at the end.
async fn send_growing(
    read_cache_bytes: u64,
    bodies: &[String],
    broken: &[&String],
) -> (Vec<Bytes>, Vec<String>, String) {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
    for body in broken {
        seen.sent_invalid(body.to_string());
    }
    let mut s = settings(4000);
    s.server.anthropic_upstream = upstream.clone();
    s.server.replay_cache_bytes = 0;
    s.server.read_cache_bytes = read_cache_bytes;
    let router = app(state(s));
    let mut headers = Vec::new();
    for body in bodies {
        let (status, h, _) = call(router.clone(), anthropic_request(body.clone())).await;
        assert_eq!(status, StatusCode::OK);
        let said = h.get("x-compactor-tokens").or(h.get("x-compactor-skipped"));
        headers.push(said.unwrap().to_str().unwrap().to_string());
    }
    let (_, m) = get_text(router, "/metrics").await;
    let sent = seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.body.clone())
        .collect();
    (sent, headers, m)
}

#[tokio::test]
async fn continued_turns_in_a_row_are_written_as_without_the_read_cache() {
    // A compacted history, then short exchanges that keep it under the trigger: each turn
    // continues the last one's output, and with the read cache on its continued prefix is
    // copied from the last body's written items rather than written again.
    let mut body = history(12);
    let mut bodies = vec![body.to_string()];
    for i in 0..5 {
        let messages = body["messages"].as_array_mut().unwrap();
        messages.push(json!({"role": "assistant", "content": format!("ok {i} \u{e9} \"q\"")}));
        messages.push(json!({"role": "user", "content": format!("next {i}\n")}));
        bodies.push(body.to_string());
    }
    let (sent, headers, _) = send_growing(64 << 20, &bodies, &[]).await;
    let (sent_off, headers_off, _) = send_growing(0, &bodies, &[]).await;
    assert_eq!(headers, headers_off);
    assert_eq!(sent, sent_off);
    let reused = headers
        .iter()
        .filter(|h| h.contains("prefix=reused"))
        .count();
    assert!(reused >= 3, "{headers:?}");
    assert!(
        headers
            .windows(2)
            .any(|w| w.iter().all(|h| h.contains("prefix=reused"))),
        "{headers:?}"
    );
}

#[tokio::test]
async fn a_growing_history_read_from_the_read_cache_is_sent_as_without_it() {
    // An agent's turns (each body one exchange longer), one turn with an earlier message
    // edited, and a body that is not JSON.
    let mut bodies: Vec<String> = (8..=30)
        .step_by(2)
        .map(|k| history(k).to_string())
        .collect();
    let mut edited = history(32);
    edited["messages"][3]["content"] = json!("an earlier message, edited");
    // Its call edited away, the next message's result answers none: forwarded as it came.
    let edited = edited.to_string();
    bodies.push(edited.clone());
    bodies.push(history(34).to_string());
    let (sent, headers, m) = send_growing(64 << 20, &bodies, &[&edited]).await;
    let (sent_off, headers_off, m_off) = send_growing(0, &bodies, &[&edited]).await;
    assert_eq!(headers, headers_off);
    assert_eq!(sent, sent_off);
    assert!(
        headers.iter().any(|h| h.contains("tier=remembered")),
        "{headers:?}"
    );
    let used = |m: &str| -> u64 {
        metric(m, r#"compactor_read_cache_bytes{kind="used"}"#)
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    // One session: its last body (and its history's heap) is held.
    let last = bodies.last().unwrap().len() as u64;
    assert!(used(&m) > last, "{} <= {last}", used(&m));
    assert_eq!(used(&m_off), 0);
}
