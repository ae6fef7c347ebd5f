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

fn responses_violations(body: &serde_json::Value) -> Vec<(Option<usize>, String)> {
    let conv = Format::OpenAiResponses.read(body).expect("readable");
    validate(
        &conv,
        Format::OpenAiResponses,
        ValidateOptions {
            allow_open_tail: false,
        },
    )
    .into_iter()
    .map(|v| (v.message, format!("{} {}", v.rule.unwrap_or("-"), v.kind)))
    .collect()
}

/// A call item of `kind` with id `id` and the fields its type has on the wire.
fn call_item(kind: &str, id: &str) -> serde_json::Value {
    let mut v = match kind {
        "function_call" => json!({"name": "f", "arguments": "{}"}),
        "custom_tool_call" => json!({"name": "exec", "input": "ls -la"}),
        "apply_patch_call" => {
            json!({"status": "completed", "operation": {"type": "delete_file", "path": "a"}})
        }
        "shell_call" => json!({"action": {"commands": ["ls"]}, "status": "completed"}),
        "local_shell_call" => {
            json!({"id": "ls_1", "action": {"type": "exec", "command": ["ls"]}, "status": "completed"})
        }
        "computer_call" => {
            json!({"action": {"type": "click", "x": 1, "y": 2}, "pending_safety_checks": []})
        }
        "tool_search_call" => json!({"execution": "client", "arguments": {"query": "q"}}),
        "program" => json!({"code": "print(1)", "fingerprint": "fp"}),
        _ => unreachable!("{kind}"),
    };
    v["type"] = json!(kind);
    v["call_id"] = json!(id);
    v
}

/// The output item answering a call of `kind`.
fn output_item(kind: &str, id: &str) -> serde_json::Value {
    let mut v = match kind {
        "function_call" | "custom_tool_call" => json!({"output": "ok"}),
        "apply_patch_call" => json!({"status": "completed", "output": "done"}),
        "shell_call" => {
            json!({"output": [{"stdout": "a", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]})
        }
        "local_shell_call" => json!({"output": "a"}),
        "computer_call" => {
            json!({"output": {"type": "computer_screenshot", "image_url": "https://x/y.png"}})
        }
        "tool_search_call" => json!({"execution": "client", "tools": []}),
        "program" => json!({"result": "1", "status": "completed"}),
        _ => unreachable!("{kind}"),
    };
    let table = crate::rules::OPENAI_RESPONSES
        .pair_of_call(kind)
        .expect("a pair");
    v["type"] = json!(table.output);
    v["call_id"] = json!(id);
    v
}

const PAIRED: [&str; 8] = [
    "function_call",
    "custom_tool_call",
    "apply_patch_call",
    "shell_call",
    "local_shell_call",
    "computer_call",
    "tool_search_call",
    "program",
];

#[test]
fn every_responses_pair_type_pairs_by_call_id_and_its_output_must_be_of_its_type() {
    for kind in PAIRED {
        let user = json!({"role": "user", "content": "go"});
        let ok = json!({"input": [user, call_item(kind, "c1"), output_item(kind, "c1")]});
        assert_eq!(responses_violations(&ok), vec![], "{kind}");
        // The call alone: its output is missing.
        let alone = json!({"input": [user, call_item(kind, "c1")]});
        assert_eq!(
            responses_violations(&alone),
            vec![(
                Some(1),
                "B1 tool_use c1 without tool_result in the input".to_string()
            )],
            "{kind}"
        );
        // Answered by the output of another type.
        let other = if kind == "function_call" {
            "custom_tool_call"
        } else {
            "function_call"
        };
        let crossed = json!({"input": [user, call_item(kind, "c1"), output_item(other, "c1")]});
        let out = crate::rules::OPENAI_RESPONSES
            .pair_of_call(other)
            .expect("a pair");
        assert_eq!(
            responses_violations(&crossed),
            vec![(
                Some(2),
                format!(
                    "B1.1 {} c1 answers a {kind}: No tool call found for {} output with call_id c1",
                    out.output, out.human
                )
            )],
            "{kind}"
        );
    }
}

#[test]
fn a_server_executed_tool_search_holds_its_own_result() {
    let body = json!({"input": [
        {"role": "user", "content": "find"},
        {"type": "tool_search_call", "call_id": "ts1", "execution": "server", "arguments": {"query": "q"}},
        {"type": "tool_search_output", "call_id": "ts1", "execution": "server", "tools": []},
    ]});
    let conv = Format::OpenAiResponses.read(&body).expect("readable");
    assert!(conv.messages.iter().all(|m| m.tool_uses().next().is_none()));
    assert!(
        conv.messages
            .iter()
            .all(|m| m.tool_results().next().is_none())
    );
    assert_eq!(responses_violations(&body), vec![]);
}

#[test]
fn a_reasoning_item_needs_a_follower_the_model_emitted_and_a_trigger_comes_last() {
    let rs = json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"});
    let user = json!({"role": "user", "content": "go"});
    let said = json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]});
    let trigger = json!({"type": "compaction_trigger"});
    let no_follower = |i: usize| {
        (
            Some(i),
            "B2 Item 'rs_1' of type 'reasoning' was provided without its required following item."
                .to_string(),
        )
    };
    let cases = [
        (json!([user, rs, said]), vec![]),
        (
            json!([
                user,
                rs,
                call_item("function_call", "c1"),
                output_item("function_call", "c1")
            ]),
            vec![],
        ),
        (json!([user, rs]), vec![no_follower(1)]),
        (json!([user, rs, user]), vec![no_follower(1)]),
        (json!([user, rs, trigger]), vec![no_follower(1)]),
        (json!([user, said, trigger]), vec![]),
        (
            json!([user, trigger, said]),
            vec![(
                Some(1),
                "B3.1 compaction_trigger must be the final input item".to_string(),
            )],
        ),
    ];
    for (input, want) in cases {
        assert_eq!(
            responses_violations(&json!({ "input": input })),
            want,
            "{input}"
        );
    }
}

#[test]
fn leading_outputs_answer_stored_calls_only_when_the_history_lives_on_the_server() {
    let input = json!([
        output_item("function_call", "call_s1"),
        output_item("apply_patch_call", "call_s2"),
        {"role": "user", "content": "go on"},
    ]);
    for key in ["previous_response_id", "conversation"] {
        let body = json!({ key: "resp_1", "input": input });
        assert_eq!(responses_violations(&body), vec![], "{key}");
    }
    let found = responses_violations(&json!({ "input": input }));
    assert_eq!(
        found,
        vec![
            (
                Some(0),
                "B1.1 tool_result call_s1 has no tool_use earlier in the input".to_string()
            ),
            (
                Some(1),
                "B1.1 tool_result call_s2 has no tool_use earlier in the input".to_string()
            ),
        ]
    );
    // After a call of the input, an output must answer one of the input's calls.
    let late = json!({"previous_response_id": "resp_1", "input": [
        {"role": "user", "content": "go"},
        call_item("function_call", "c1"),
        output_item("function_call", "c1"),
        output_item("function_call", "call_s9"),
    ]});
    assert_eq!(
        responses_violations(&late),
        vec![(
            Some(3),
            "B1.1 tool_result call_s9 has no tool_use earlier in the input".to_string()
        )]
    );
}
