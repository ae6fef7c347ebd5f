use super::*;
use crate::conversation::Block;
use crate::format::Format;
use crate::guard::{ImageFault, PlanError, ValidateOptions, apply, validate};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// The PNG signature's 8 bytes, base64: data that decodes.
const PNG: &str = "iVBORw0KGgo=";

/// `body` read in `format`, its bad images planned and applied: the body written back, the
/// repairs applied, and the violations the plan left.
fn repaired(format: Format, body: &Value) -> (Value, Vec<ImageRepair>, Vec<Violation>) {
    let input = format.read(body).unwrap();
    let layout = Layout::of(&input, format);
    let mut violations = validate(&input, format, ValidateOptions::default());
    let plan = plan_repairs(&input, &layout, &mut violations);
    let applied = apply(&input, &layout, plan, None).unwrap();
    (
        format.write(&applied.conversation),
        applied.repairs,
        violations,
    )
}

fn repair(
    path: &str,
    at: (usize, usize, Option<usize>),
    reason: ImageFault,
    media: Option<&str>,
) -> ImageRepair {
    ImageRepair {
        path: path.into(),
        message: at.0,
        block: at.1,
        nested: at.2,
        reason,
        media_type: media.map(str::to_string),
    }
}

/// An old user image that does not decode, a screenshot tool's result with an empty image (a
/// breakpoint on it), a good one and a cut one, then the model's answer and a new request.
fn anthropic_history() -> Value {
    json!({"model": "claude-x", "max_tokens": 64, "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "what is on this page?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "not base64!"}}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "screenshot", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
            {"type": "text", "text": "captured"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}, "cache_control": {"type": "ephemeral"}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KG"}}]}]},
        {"role": "assistant", "content": "I could not see it."},
        {"role": "user", "content": "go on"}
    ]})
}

#[test]
fn bad_images_before_the_newest_exchange_become_placeholders_in_their_place() {
    let body = anthropic_history();
    let (out, repairs, left) = repaired(Format::Anthropic, &body);
    let mut expected = body;
    expected["messages"][0]["content"][1] = json!({"type": "text", "text": "[compactor: image removed: invalid base64 data (image/jpeg)]"});
    expected["messages"][2]["content"][0]["content"][1] = json!({"type": "text",
        "text": "[compactor: image removed: empty base64 data (image/png)]", "cache_control": {"type": "ephemeral"}});
    expected["messages"][2]["content"][0]["content"][3] = json!({"type": "text", "text": "[compactor: image removed: invalid base64 data (image/png)]"});
    assert_eq!(out, expected);
    assert_eq!(
        repairs,
        vec![
            repair(
                "messages[0].content[1]",
                (0, 1, None),
                ImageFault::NotBase64,
                Some("image/jpeg")
            ),
            repair(
                "messages[2].content[0].content[1]",
                (2, 0, Some(1)),
                ImageFault::Empty,
                Some("image/png")
            ),
            repair(
                "messages[2].content[0].content[3]",
                (2, 0, Some(3)),
                ImageFault::NotBase64,
                Some("image/png")
            ),
        ]
    );
    assert_eq!(left, vec![]);
    assert_eq!(
        repairs[1].to_string(),
        "messages[2].content[0].content[1]: image removed (empty base64 data): the provider \
         would reject every later request"
    );
    // The output has nothing left to repair: a second pass plans nothing.
    let again = Format::Anthropic.read(&out).unwrap();
    assert_eq!(
        validate(&again, Format::Anthropic, ValidateOptions::default()),
        vec![]
    );
    let (twice, none, _) = repaired(Format::Anthropic, &out);
    assert_eq!((twice, none), (out, vec![]));
}

#[test]
fn a_bad_image_in_the_newest_exchange_stays_a_violation() {
    // Without the new request, the tool result is the newest non-model message.
    let mut body = anthropic_history();
    body["messages"].as_array_mut().unwrap().pop();
    let (out, repairs, left) = repaired(Format::Anthropic, &body);
    assert_eq!(repairs.len(), 1);
    assert_eq!(repairs[0].path, "messages[0].content[1]");
    assert_eq!(out["messages"][2], body["messages"][2]);
    let left: Vec<(String, ViolationKind)> =
        left.into_iter().map(|v| (v.to_string(), v.kind)).collect();
    assert_eq!(
        left,
        vec![
            (
                "messages[2].content[0].content[1]: image data is empty".to_string(),
                ViolationKind::BadImage {
                    reason: ImageFault::Empty,
                    nested: Some(1)
                }
            ),
            (
                "messages[2].content[0].content[3]: image data is not valid base64".to_string(),
                ViolationKind::BadImage {
                    reason: ImageFault::NotBase64,
                    nested: Some(3)
                }
            ),
        ]
    );
}

#[test]
fn what_is_left_unrepaired_is_what_refuses_the_input() {
    let mut body = anthropic_history();
    let input = Format::Anthropic.read(&body).unwrap();
    let all = validate(&input, Format::Anthropic, ValidateOptions::default());
    assert_eq!(all.len(), 3);
    assert_eq!(
        unrepaired(&input, crate::format::Format::Anthropic, all),
        vec![]
    );
    body["messages"].as_array_mut().unwrap().pop();
    let input = Format::Anthropic.read(&body).unwrap();
    let left = unrepaired(
        &input,
        Format::Anthropic,
        validate(&input, Format::Anthropic, ValidateOptions::default()),
    );
    let paths: Vec<&str> = left.iter().map(|v| v.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "messages[2].content[0].content[1]",
            "messages[2].content[0].content[3]"
        ]
    );
}

#[test]
fn openai_placeholders_are_text_parts_of_their_own_format() {
    let chat = json!({"model": "m", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,", "detail": "high"}}]},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "shot", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "shot"},
            {"type": "image_url", "image_url": {"url": "data:image/webp;base64,@@@@"}}]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "next"}
    ]});
    let (out, repairs, left) = repaired(Format::OpenAiChat, &chat);
    let mut expected = chat;
    expected["messages"][0]["content"][1] = json!({"type": "text", "text": "[compactor: image removed: empty base64 data (image/png)]"});
    expected["messages"][2]["content"][1] = json!({"type": "text", "text": "[compactor: image removed: invalid base64 data (image/webp)]"});
    assert_eq!((out, left), (expected, vec![]));
    let paths: Vec<&str> = repairs.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["messages[0].content[1]", "messages[2].content[1]"]);

    let responses = json!({"model": "m", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": ""}]},
        {"type": "function_call", "call_id": "call_1", "name": "shot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": [{"type": "input_image", "image_url": "data:image/png;base64,"}]},
        {"role": "user", "content": "next"}
    ]});
    let (out, repairs, left) = repaired(Format::OpenAiResponses, &responses);
    let mut expected = responses;
    expected["input"][0]["content"][1] =
        json!({"type": "input_text", "text": "[compactor: image removed: empty base64 data]"});
    expected["input"][2]["output"][0] = json!({"type": "input_text", "text": "[compactor: image removed: empty base64 data (image/png)]"});
    assert_eq!((out, left), (expected, vec![]));
    let paths: Vec<&str> = repairs.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["input[0].content[1]", "input[2].output[0]"]);
}

#[test]
fn apply_refuses_a_repair_the_input_does_not_call_for() {
    let c = Format::Anthropic.read(&anthropic_history()).unwrap();
    let layout = Layout::of(&c, crate::format::Format::Anthropic);
    let refused = |plan: Vec<UnitEdit>| apply(&c, &layout, plan, None).unwrap_err();
    let empty = repair("p", (2, 0, Some(1)), ImageFault::Empty, None);
    let fix = |r: &ImageRepair| UnitEdit::RepairImage(r.clone());
    // A good image, a fault the image does not have, a block that is no image.
    for (at, reason) in [
        ((2, 0, Some(2)), ImageFault::Empty),
        ((2, 0, Some(1)), ImageFault::NotBase64),
        ((2, 0, Some(0)), ImageFault::Empty),
        ((2, 0, None), ImageFault::Empty),
    ] {
        assert_eq!(
            refused(vec![fix(&repair("p", at, reason, None))]),
            PlanError::NotRepairable {
                edit: 0,
                message: 2,
                block: 0
            }
        );
    }
    assert_eq!(
        refused(vec![fix(&repair(
            "p",
            (9, 0, None),
            ImageFault::Empty,
            None
        ))]),
        PlanError::OutOfRange {
            edit: 0,
            message: 9,
            block: 0
        }
    );
    assert_eq!(
        refused(vec![fix(&empty), fix(&empty)]),
        PlanError::Conflict { edit: 1, other: 0 }
    );
    let Block::ToolResult(result) = &c.messages[2].content[0] else {
        panic!("a tool result")
    };
    let clear = UnitEdit::Clear(crate::guard::write::Cleared::forged((2, 0), result.clone()));
    assert_eq!(
        refused(vec![clear.clone(), fix(&empty)]),
        PlanError::Conflict { edit: 1, other: 0 }
    );
    assert_eq!(
        refused(vec![fix(&empty), clear]),
        PlanError::Conflict { edit: 1, other: 0 }
    );
    // The same image when the tool result is the newest exchange.
    let mut newest = c.clone();
    newest.messages.truncate(3);
    assert_eq!(
        apply(
            &newest,
            &Layout::of(&newest, crate::format::Format::Anthropic),
            vec![fix(&empty)],
            None
        )
        .unwrap_err(),
        PlanError::InNewestExchange {
            edit: 0,
            message: 2
        }
    );
}
