use super::*;
use serde_json::json;

#[allow(clippy::needless_pass_by_value)] // called with json!(...) temporaries
fn found(format: Format, body: serde_json::Value) -> Vec<(Option<usize>, ViolationKind)> {
    let conv = format.read(&body).expect("readable");
    validate(&conv, format, ValidateOptions::default())
        .into_iter()
        .map(|v| (v.message, v.kind))
        .collect()
}

#[test]
fn server_results_and_callers_must_name_an_earlier_server_tool_use() {
    let got = found(
        Format::Anthropic,
        json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_x", "content": []},
                {"type": "server_tool_use", "id": "srvtoolu_y", "name": "web_search", "input": {}},
                {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {},
                 "caller": {"type": "code_execution_20250825", "tool_id": "srvtoolu_z"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "a"}]},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "next"}
        ]}),
    );
    assert_eq!(
        got,
        vec![
            (
                Some(1),
                ViolationKind::OrphanServerResult {
                    id: "srvtoolu_x".into()
                }
            ),
            (
                Some(1),
                ViolationKind::ServerCallWithoutResult {
                    id: "srvtoolu_y".into()
                }
            ),
            (
                Some(1),
                ViolationKind::CallerMissing {
                    id: "toolu_a".into(),
                    caller: "srvtoolu_z".into()
                }
            ),
        ]
    );
}

#[test]
fn a_user_text_between_parallel_tool_messages_is_refused_where_it_stands() {
    let got = found(
        Format::OpenAiChat,
        json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "a"},
            {"role": "user", "content": "reminder"},
            {"role": "tool", "tool_call_id": "c2", "content": "b"}
        ]}),
    );
    assert_eq!(
        got,
        vec![
            (
                Some(3),
                ViolationKind::MissingResults {
                    ids: vec!["c2".into()],
                    expected: "before this message"
                }
            ),
            (
                Some(4),
                ViolationKind::OrphanResult {
                    id: "c2".into(),
                    expected: "in a directly preceding assistant tool_calls"
                }
            ),
        ]
    );
}

#[test]
fn approvals_safety_checks_images_and_breakpoints_are_checked() {
    let got = found(
        Format::OpenAiResponses,
        json!({"input": [
            {"role": "user", "content": [{"type": "input_image", "image_url": ""}]},
            {"type": "mcp_approval_response", "approval_request_id": "mcpr_gone", "approve": true},
            {"type": "computer_call", "id": "cu_1", "call_id": "call_c", "action": {"type": "click"},
             "pending_safety_checks": [{"id": "cs_1", "code": "malicious_instructions"}]},
            {"type": "computer_call_output", "call_id": "call_c",
             "acknowledged_safety_checks": [{"id": "cs_1"}, {"id": "cs_9"}],
             "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}}
        ]}),
    );
    assert_eq!(
        got,
        vec![
            (
                Some(0),
                ViolationKind::BadImage {
                    reason: crate::tokens::image::ImageFault::Empty,
                    nested: None
                }
            ),
            (
                Some(1),
                ViolationKind::OrphanApproval {
                    item: "mcp_approval_response".into(),
                    id: "mcpr_gone".into()
                }
            ),
            (
                Some(3),
                ViolationKind::UnknownSafetyCheck {
                    id: "call_c".into(),
                    check: "cs_9".into()
                }
            ),
        ]
    );
    let cc = json!({"type": "ephemeral"});
    let blocks: Vec<serde_json::Value> = (0..5)
        .map(|k| json!({"type": "text", "text": format!("n{k}"), "cache_control": cc}))
        .collect();
    let got = found(
        Format::Anthropic,
        json!({"messages": [{"role": "user", "content": blocks}]}),
    );
    assert_eq!(
        got,
        vec![(None, ViolationKind::TooManyCacheBreakpoints { found: 5 })]
    );
}
