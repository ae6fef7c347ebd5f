//! The writers keep what a replacement must keep (kind, call id, `is_error`, outcome) on
//! every input the generator makes, and name a recall id after the first mark only.

use super::{TRUNCATION_MARK, cap, clear, clear_input};
use crate::conversation::{Block, Outcome};
use crate::format::Format;
use crate::tokens::{Tokenizer, counter_for};
use proptest::prelude::*;
use serde_json::json;

#[test]
fn an_id_is_named_after_the_first_mark_only() {
    let body = json!({"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1",
         "content": "head\n[… 12 tokens truncated …]\ntail [… 3 tokens truncated …]"}]}]});
    let conv = Format::Anthropic.read(&body).unwrap();
    let mut b = conv.messages[0].content[0].clone();
    assert!(super::cap::name_after_mark(&mut b, TRUNCATION_MARK, "rc_1"));
    let Block::ToolResult(r) = &b else {
        panic!("{b:?}")
    };
    assert_eq!(
        r.text(),
        "head\n[… 12 tokens truncated …] · recall rc_1\ntail [… 3 tokens truncated …]"
    );
    let plain = Format::Anthropic
        .read(&json!({"messages": [{"role": "user", "content": "no mark"}]}))
        .unwrap();
    let mut b = plain.messages[0].content[0].clone();
    assert!(!super::cap::name_after_mark(
        &mut b,
        TRUNCATION_MARK,
        "rc_1"
    ));
}

/// An Anthropic exchange: a call with a long string input, its result (`failed`: with
/// `is_error` and an exit code), then a closing user message.
fn exchange(output: &str, failed: bool) -> serde_json::Value {
    let mut result = json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": output});
    if failed {
        result["is_error"] = json!(true);
    }
    json!({"messages": [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
            "input": {"command": output}}]},
        {"role": "user", "content": [result]},
        {"role": "user", "content": "thanks"}
    ]})
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever the text, a cap or a clear of a block is the same kind of block with the same
    /// call id, `is_error` and outcome, shorter in counter tokens; a cut text holds the mark.
    #[test]
    fn a_written_block_keeps_what_it_replaces(
        lines in prop::collection::vec("[a-z0-9 ./:=-]{0,60}", 20..120),
        failed in any::<bool>(),
        cap_tokens in 8usize..200,
    ) {
        let mut output = lines.join("\n");
        if failed {
            output.push_str("\nerror: build failed\nExit code: 2");
        }
        let conv = Format::Anthropic.read(&exchange(&output, failed)).unwrap();
        let counter = counter_for(Tokenizer::default());
        let counter = counter.as_ref();
        let Block::ToolResult(original) = &conv.messages[2].content[0] else {
            panic!("a result")
        };
        let before = counter.count_block(&conv.messages[2].content[0]);
        if let Some(c) = cap(&conv, (2, 0), cap_tokens, before, counter) {
            let Block::ToolResult(r) = c.with() else { panic!("{c:?}") };
            prop_assert_eq!(&r.tool_use_id, &original.tool_use_id);
            prop_assert_eq!(r.is_error, original.is_error);
            prop_assert_eq!(r.outcome, original.outcome);
            prop_assert!(r.text().contains(TRUNCATION_MARK));
            prop_assert!(c.tokens_after() < c.tokens_before());
            prop_assert_eq!((c.message(), c.block(), c.what()), (2, 0, "tool_result"));
        }
        if let Some(c) = clear(&conv, (2, 0), ("Bash", before), true, counter, Format::Anthropic) {
            let r = c.with();
            prop_assert_eq!(&r.tool_use_id, &original.tool_use_id);
            prop_assert_eq!(r.is_error, original.is_error);
            prop_assert_eq!(r.outcome, original.outcome);
            prop_assert_eq!(
                Format::Anthropic.outcome_policy().classify(r) == Outcome::Error,
                failed
            );
            prop_assert!(r.text().contains("call toolu_1"));
            let named = c.recall().map(|e| format!("recall {}", e.reference.id));
            prop_assert!(r.text().contains(named.as_deref().unwrap_or("(none)")));
            prop_assert!(c.tokens_after() < before);
        }
        let call_tokens = counter.count_block(&conv.messages[1].content[0]);
        if let Some(c) = cap(&conv, (1, 0), cap_tokens, call_tokens, counter) {
            let Block::ToolUse(t) = c.with() else { panic!("{c:?}") };
            prop_assert_eq!((t.id.as_str(), t.name.as_str()), ("toolu_1", "Bash"));
        }
        if let Some(c) = clear_input(&conv, (1, 0), counter) {
            let Block::ToolUse(t) = c.with() else { panic!("{c:?}") };
            prop_assert_eq!(t.id.as_str(), "toolu_1");
            prop_assert!(t.input.to_value()["command"].is_string());
        }
        // Nothing is written for a block that is not there, nor a clear of a call.
        prop_assert!(cap(&conv, (9, 0), cap_tokens, 1, counter).is_none());
        prop_assert!(clear(&conv, (1, 0), ("Bash", before), false, counter, Format::Anthropic).is_none());
    }
}
