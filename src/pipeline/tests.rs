use crate::Compactor;
use crate::config::Settings;
use crate::conversation::{Conversation, Message, Role};
use crate::format::Format;
use crate::guard::Junction;
use crate::memory::PrefixHashes;
use crate::report::Status;
use crate::tokens::TokenCounter;
use serde_json::json;

fn history(turns: usize) -> Conversation {
    let long = "output line ".repeat(300);
    let mut messages = vec![json!({"role": "user", "content": "start"})];
    for i in 0..turns {
        let id = format!("toolu_{i}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": long, "is_error": i == 1}]}));
        messages.push(json!({"role": "assistant", "content": format!("turn {i}")}));
        messages.push(json!({"role": "user", "content": "go on"}));
    }
    Format::Anthropic
        .read(&json!({"model": "m", "max_tokens": 8, "messages": messages}))
        .expect("readable")
}

/// A continuation taken from the junction reports the counts a whole count gives, and is
/// remembered with the junctions and counts of the whole, so the next one continues too.
#[tokio::test]
async fn a_continuation_is_counted_and_remembered_as_the_whole() {
    let mut settings = Settings::default();
    settings.policy.tiers = vec!["truncate".into()];
    let engine = Compactor::from_config(settings).expect("settings");
    let first = history(8);
    let out = engine
        .compact(&first, Format::Anthropic, Some(2_000))
        .await
        .expect("compacts");
    assert_eq!(out.report.status, Status::Compacted);
    let mut input = first.clone();
    for round in 0..2 {
        let from = input.messages.len();
        input
            .messages
            .push(Message::text(Role::Assistant, format!("ok {round}")));
        input
            .messages
            .push(Message::text(Role::User, format!("and now {round}?")));
        let again = engine
            .compact(&input, Format::Anthropic, Some(2_000))
            .await
            .expect("compacts");
        assert_eq!(
            again.report.continued_from,
            Some(from),
            "{:?}",
            again.report
        );
        let bare = crate::tokens::counter_for(again.report.counting.tokenizer);
        let counter = again.report.counting.framed(bare.as_ref());
        assert_eq!(
            again.report.counted_before,
            counter.count_conversation(&input)
        );
        assert_eq!(
            again.report.counted_after,
            counter.count_conversation(&again.conversation)
        );
        let limit = engine.budget(Some(2_000)).limit as u64;
        let (len, remembered) = engine
            .memory()
            .recall(&PrefixHashes::of(&input, limit))
            .expect("remembered");
        assert_eq!(len, input.messages.len());
        let c = remembered.continuation.expect("with what continuing needs");
        assert_eq!(c.input, Junction::of(&input, Format::Anthropic));
        assert_eq!(
            c.output,
            Junction::of(&again.conversation, Format::Anthropic)
        );
        assert_eq!(
            (c.input_tokens, c.output_tokens),
            (again.report.counted_before, again.report.counted_after)
        );
    }
}
