use super::*;
use serde_json::json;

fn chat_violations(messages: &serde_json::Value) -> Vec<(Option<usize>, ViolationKind)> {
    let conv = Format::OpenAiChat
        .read(&json!({ "messages": messages }))
        .expect("readable");
    validate(&conv, Format::OpenAiChat, ValidateOptions::default())
        .into_iter()
        .map(|v| (v.message, v.kind))
        .collect()
}

#[test]
fn chat_assistant_without_content_or_tool_calls_is_refused() {
    let found = chat_violations(&json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null},
        {"role": "user", "content": "again"},
        {"role": "assistant"},
    ]));
    assert_eq!(
        found,
        vec![
            (Some(1), ViolationKind::EmptyContent),
            (Some(3), ViolationKind::EmptyContent)
        ]
    );
}

#[test]
fn a_tool_message_needs_content_and_anthropic_content_is_never_null() {
    let found = chat_violations(&json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": null},
        {"role": "tool", "tool_call_id": "c2"},
    ]));
    assert_eq!(
        found,
        vec![
            (Some(2), ViolationKind::EmptyContent),
            (Some(3), ViolationKind::EmptyContent)
        ]
    );
    for last in [
        json!({"role": "assistant", "content": null}),
        json!({"role": "assistant"}),
    ] {
        let conv = Format::Anthropic
            .read(&json!({"messages": [{"role": "user", "content": "hi"}, last]}))
            .expect("readable");
        let found: Vec<_> = validate(&conv, Format::Anthropic, ValidateOptions::default())
            .into_iter()
            .map(|v| (v.message, v.kind))
            .collect();
        assert_eq!(found, vec![(Some(1), ViolationKind::EmptyContent)]);
    }
    // An empty final assistant message (a prefill) stays allowed.
    let conv = Format::Anthropic
        .read(&json!({"messages": [{"role": "user", "content": "hi"},
                                   {"role": "assistant", "content": []}]}))
        .expect("readable");
    assert_eq!(
        validate(&conv, Format::Anthropic, ValidateOptions::default()),
        vec![]
    );
}

#[test]
fn chat_null_content_is_fine_beside_tool_calls_or_a_refusal_but_not_for_a_user() {
    let found = chat_violations(&json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": null, "refusal": "I can't help with that."},
        {"role": "user", "content": null},
    ]));
    assert_eq!(found, vec![(Some(4), ViolationKind::EmptyContent)]);
}
