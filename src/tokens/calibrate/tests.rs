//! Unit tests of calibration: the points read from small logs, the fit on made-up points.

use super::*;
use crate::tokens::{MESSAGE_OVERHEAD, TiktokenCounter, TokenCounter, Tokenizer};
use serde_json::{Value, json};

fn line(v: &Value) -> String {
    format!("{v}\n")
}

fn assistant(id: &str, text: &str, input: u64) -> String {
    line(
        &json!({"type": "assistant", "message": {"id": id, "model": "claude-x", "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "usage": {"input_tokens": 3, "cache_read_input_tokens": input, "cache_creation_input_tokens": 7}}}),
    )
}

fn user(text: &str) -> String {
    line(&json!({"type": "user", "message": {"role": "user", "content": text}}))
}

#[test]
fn claude_code_points_count_the_prefix_each_response_saw_and_restart_after_a_compaction() {
    let c = TiktokenCounter::new(Tokenizer::O200kBase);
    let hw = c.count_text("hello world");
    let log = [
        user("hello world"),
        assistant("m1", "hello world", 100),
        // A second line of the same response: no new point.
        assistant("m1", "hello world", 100),
        user("hello world"),
        assistant("m2", "hello world", 200),
        line(&json!({"type": "system", "subtype": "compact_boundary"})),
        user("hello world"),
        assistant("m3", "hello world", 50),
    ]
    .concat();
    let points = usage_points(&log, &c).unwrap();
    let got: Vec<_> = points
        .iter()
        .map(|p| (p.segment, p.line, p.counted, p.messages, p.actual))
        .collect();
    let m = MESSAGE_OVERHEAD;
    assert_eq!(
        got,
        vec![
            (0, 2, m + hw, 1, 110),
            (0, 5, 3 * m + 4 * hw, 3, 210),
            (1, 8, m + hw, 1, 60),
        ]
    );
}

#[test]
fn a_bad_line_is_named() {
    let c = TiktokenCounter::new(Tokenizer::O200kBase);
    let log = [user("x"), "[1]\n".to_string()].concat();
    assert_eq!(
        usage_points(&log, &c).unwrap_err().to_string(),
        "line 2: expected a JSON object, found an array"
    );
}

#[test]
fn codex_points_end_the_prefix_before_the_models_own_items() {
    let c = TiktokenCounter::new(Tokenizer::O200kBase);
    let item = |v: Value| line(&json!({"type": "response_item", "payload": v}));
    let count = |n: u64| {
        line(
            &json!({"type": "event_msg", "payload": {"type": "token_count",
            "info": {"last_token_usage": {"input_tokens": n}}}}),
        )
    };
    let log = [
        line(&json!({"type": "session_meta", "payload": {"instructions": "hello world"}})),
        line(&json!({"type": "turn_context", "payload": {"model": "gpt-5"}})),
        item(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello world"}]})),
        item(json!({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"})),
        count(500),
        count(500),
        item(json!({"type": "function_call_output", "call_id": "c1", "output": "hello world"})),
        item(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]})),
        count(900),
    ]
    .concat();
    let points = usage_points(&log, &c).unwrap();
    let hw = c.count_text("hello world");
    let m = MESSAGE_OVERHEAD;
    let call = c.count_text("shell") + c.count_text("{}");
    let got: Vec<_> = points
        .iter()
        .map(|p| (p.model.as_str(), p.counted, p.actual))
        .collect();
    assert_eq!(
        got,
        vec![
            ("gpt-5", hw + m + hw, 500),
            ("gpt-5", hw + m + hw + m + call + m + hw, 900),
        ]
    );
}

#[test]
fn codex_reasoning_of_an_earlier_turn_leaves_the_prefix_at_the_next_user_message() {
    let c = TiktokenCounter::new(Tokenizer::O200kBase);
    let item = |v: Value| line(&json!({"type": "response_item", "payload": v}));
    let count = |n: u64| {
        line(
            &json!({"type": "event_msg", "payload": {"type": "token_count",
            "info": {"last_token_usage": {"input_tokens": n}}}}),
        )
    };
    let user = |t: &str| {
        item(
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}),
        )
    };
    let reasoning =
        json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "think think"}]});
    let log = [
        line(&json!({"type": "turn_context", "payload": {"model": "gpt-5"}})),
        user("hello world"),
        count(100),
        item(reasoning),
        item(json!({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"})),
        item(json!({"type": "function_call_output", "call_id": "c1", "output": "hello world"})),
        count(200),
        user("again"),
        count(300),
    ]
    .concat();
    let points = usage_points(&log, &c).unwrap();
    let m = MESSAGE_OVERHEAD;
    let hw = c.count_text("hello world");
    let think = c.count_text("think think");
    let call = c.count_text("shell") + c.count_text("{}");
    let got: Vec<_> = points.iter().map(|p| (p.counted, p.tool_calls)).collect();
    let second = m + hw + m + think + call + m + hw;
    assert_eq!(
        got,
        vec![
            (m + hw, 0),
            (second, 1),
            // The reasoning item is gone from the third request; the call stays (the user
            // text joins the user-role message of the call's output).
            (second - think + c.count_text("again"), 1),
        ]
    );
}

#[test]
fn the_fit_separates_a_per_call_cost_from_the_ratio() {
    // The provider counts 1.1 per token plus 170 per call; calls do not grow in step with
    // tokens (a few large results, many small ones).
    let sizes = [
        900usize, 150, 4000, 200, 300, 6000, 120, 80, 2500, 400, 90, 3000,
    ];
    let mut pts = Vec::new();
    let (mut counted, mut calls) = (1000usize, 0usize);
    for (i, s) in sizes.iter().enumerate() {
        counted += s;
        calls += 1 + i % 2;
        let actual = (1.1 * counted as f64 + 170.0 * calls as f64) as u64 + 12_000;
        pts.push(UsagePoint {
            tool_calls: calls,
            ..point(0, counted, actual)
        });
    }
    let f = &fit(std::slice::from_ref(&pts))[0];
    assert!((f.ratio - 1.1).abs() < 1e-3, "{}", f.ratio);
    assert!((f.tool_call - 170.0).abs() < 0.5, "{}", f.tool_call);
    assert!((f.segments[0].intercept - 12_000.0).abs() < 2.0);
    assert!(f.linear_ratio > 1.15, "{}", f.linear_ratio);
    for (p, e) in replay(&pts, f.ratio, f.tool_call, 3) {
        assert!((e - p.actual as f64).abs() < 2.0);
    }
}

fn point(source_segment: usize, counted: usize, actual: u64) -> UsagePoint {
    UsagePoint {
        model: "m".into(),
        segment: source_segment,
        line: 0,
        counted,
        messages: 1,
        tool_calls: 0,
        actual,
    }
}

#[test]
fn the_fit_recovers_a_shared_slope_with_one_intercept_per_segment() {
    let a: Vec<_> = (1..10)
        .map(|i| point(0, i * 1000, (1.4 * (i * 1000) as f64) as u64 + 5000))
        .chain((1..5).map(|i| point(1, i * 700, (1.4 * (i * 700) as f64) as u64 + 9000)))
        .collect();
    let fits = fit(std::slice::from_ref(&a));
    assert_eq!(fits.len(), 1);
    let f = &fits[0];
    assert!((f.ratio - 1.4).abs() < 1e-3, "{}", f.ratio);
    assert!((f.segments[0].intercept - 5000.0).abs() < 2.0);
    assert!((f.segments[1].intercept - 9000.0).abs() < 2.0);
    assert!(f.max_error < 1e-3);
    let replayed = replay(&a, f.ratio, f.tool_call, 2);
    assert_eq!(replayed.len(), 7 + 2);
    for (p, e) in replayed {
        assert!((e - p.actual as f64).abs() < 2.0);
    }
}
