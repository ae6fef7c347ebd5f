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

/// A big tool result answering a new call: `lines` lines of a file.
fn read_turn(c: &mut Conversation, id: &str, lines: usize) {
    let file: String = (0..lines)
        .map(|i| format!("fn line_{i}() {{}}\n"))
        .collect();
    let next = Format::Anthropic
        .read(&json!({"model": "m", "max_tokens": 8, "messages": [
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": id, "name": "Read", "input": {"file_path": "src/a.rs"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": file}]}]}))
        .expect("readable");
    c.messages.extend(next.messages);
}

/// After a compaction, each turn appends to the prefix sent before until the budget, not the
/// trigger, is passed; a new result over the cap is capped as it arrives.
#[tokio::test]
async fn continuations_append_until_the_budget_and_cap_new_results_as_they_arrive() {
    let mut settings = Settings::default();
    settings.policy.tiers = vec!["truncate".into()];
    let engine = Compactor::from_config(settings).expect("settings");
    let budget = Some(8_000);
    let first = history(12);
    let out = engine
        .compact(&first, Format::Anthropic, budget)
        .await
        .expect("compacts");
    assert_eq!(out.report.status, Status::Compacted);
    let sent = out.conversation.into_owned();
    let mut input = first.clone();
    // Small turns: over the trigger (6,400) they still continue, up to the budget.
    let mut previous = sent.clone();
    let mut over_trigger = false;
    for k in 0..40 {
        let from = input.messages.len();
        input.messages.push(Message::text(
            Role::Assistant,
            format!("step {k}: {}", "ok ".repeat(60)),
        ));
        input.messages.push(Message::text(
            Role::User,
            format!("and {k}? {}", "go ".repeat(60)),
        ));
        let again = engine
            .compact(&input, Format::Anthropic, budget)
            .await
            .expect("compacts");
        // Until a re-compaction: the continuation's tiers ran.
        if again.report.continued_from != Some(from)
            || again.report.tiers.iter().any(|t| t.accepted)
        {
            break;
        }
        // The prefix sent before is the start of this one.
        assert_eq!(
            again.conversation.messages[..previous.messages.len()],
            previous.messages[..]
        );
        assert!(again.report.tokens_after <= 8_000, "{:?}", again.report);
        over_trigger |= again.report.tokens_after > again.report.trigger;
        previous = again.conversation.into_owned();
    }
    assert!(over_trigger, "a continuation went on past the trigger");
    // A 6,000-token file read arrives: capped in the request that first sends it.
    let mut input = history(30);
    read_turn(&mut input, "toolu_big", 1_000);
    let again = engine
        .compact(&input, Format::Anthropic, Some(20_000))
        .await
        .expect("compacts");
    // Budget 20,000 is another memory key: compacted afresh, the new read capped by truncate.
    assert!(again.report.tokens_after < again.report.tokens_before);
    let mut input2 = input.clone();
    read_turn(&mut input2, "toolu_big2", 1_000);
    let next = engine
        .compact(&input2, Format::Anthropic, Some(20_000))
        .await
        .expect("compacts");
    assert_eq!(next.report.continued_from, Some(input.messages.len()));
    let capped = next
        .report
        .tiers
        .iter()
        .find(|t| t.accepted)
        .expect("capped");
    assert_eq!(capped.strategy, "truncate");
    assert_eq!(capped.edits.len(), 1);
    // Only the new message changed: the prefix is the previous output's.
    let prev = again.conversation.messages.len();
    assert_eq!(
        next.conversation.messages[..prev],
        again.conversation.messages[..]
    );
}

/// An idle session's cached prefix is gone: with a cache lifetime of 0 s every continuation
/// over the trigger is compacted (again), not sent on to the budget.
#[tokio::test]
async fn a_cold_prefix_is_compacted_from_the_trigger_on() {
    let mut settings = Settings::default();
    settings.policy.tiers = vec!["truncate".into()];
    settings.policy.cache_ttl_secs = 0.0;
    let engine = Compactor::from_config(settings).expect("settings");
    let budget = Some(8_000);
    let mut input = history(12);
    engine
        .compact(&input, Format::Anthropic, budget)
        .await
        .expect("compacts");
    let mut compacted_over_trigger = false;
    for k in 0..40 {
        input.messages.push(Message::text(
            Role::Assistant,
            format!("step {k}: {}", "ok ".repeat(60)),
        ));
        input.messages.push(Message::text(
            Role::User,
            format!("and {k}? {}", "go ".repeat(60)),
        ));
        let again = engine
            .compact(&input, Format::Anthropic, budget)
            .await
            .expect("compacts");
        // Never sent on past the trigger.
        assert!(
            again.report.tokens_after <= again.report.trigger,
            "{:?}",
            again.report
        );
        compacted_over_trigger |= again.report.notes.iter().any(|n| n.contains("is cold"));
    }
    assert!(compacted_over_trigger);
}

/// gpt-4o's window is 128k: at the default settings its budget is 128,000 less its 16,384
/// output tokens, so a 140k-token request is compacted, not forwarded as it came.
#[tokio::test]
async fn a_140k_token_gpt_4o_request_is_compacted_at_default_settings() {
    let engine = Compactor::from_config(Settings::default()).expect("settings");
    let line = "the build printed this line and then another one like it\n".repeat(40);
    let mut messages = vec![json!({"role": "user", "content": "fix the build"})];
    for i in 0..300 {
        let id = format!("call_{i}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\":\"make\"}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": line}));
    }
    messages.push(json!({"role": "assistant", "content": "done"}));
    messages.push(json!({"role": "user", "content": "and now?"}));
    let body = json!({"model": "gpt-4o-2024-08-06", "messages": messages});
    let input = Format::OpenAiChat.read(&body).expect("readable");
    let out = engine
        .compact(&input, Format::OpenAiChat, None)
        .await
        .expect("compacts");
    assert!(
        out.report.tokens_before > 140_000,
        "{}",
        out.report.tokens_before
    );
    assert_eq!(out.report.budget, 128_000 - 16_384);
    assert_eq!(out.report.status, Status::Compacted);
    assert!(out.report.tokens_after <= out.report.target);
    // The cost is in dollars by gpt-4o's prices: cached input at $1.25, the rest at $2.50.
    let cost = out.report.cost.expect("estimated");
    assert!(cost.priced);
    assert!(cost.saved() > 0.0, "{cost:?}");
}

/// When no tier reaches the budget and the only saving is dropping the user's rounds for
/// under 5%, nothing is dropped: the request goes as it came, over budget, with the reason.
#[tokio::test]
async fn dropping_rounds_for_under_5_percent_is_not_done() {
    let mut settings = Settings::default();
    settings.policy.tiers = vec!["truncate".into()];
    let engine = Compactor::from_config(settings).expect("settings");
    let mut messages = Vec::new();
    for i in 0..6 {
        messages.push(json!({"role": "user", "content": format!("question {i}")}));
        messages.push(
            json!({"role": "assistant", "content": format!("answer {i}: {}", "done. ".repeat(60))}),
        );
    }
    messages.push(json!({"role": "user", "content": "last"}));
    let system = "You follow the house rules.\n".repeat(2_000);
    let body = json!({"model": "m", "max_tokens": 8, "system": system, "messages": messages});
    let input = Format::Anthropic.read(&body).expect("readable");
    let out = engine
        .compact(&input, Format::Anthropic, Some(5_000))
        .await
        .expect("compacts");
    assert_eq!(out.report.status, Status::OverBudget);
    assert!(matches!(out.conversation, std::borrow::Cow::Borrowed(_)));
    assert_eq!(out.report.tokens_after, out.report.tokens_before);
    let why = out
        .report
        .notes
        .iter()
        .find(|n| n.starts_with("not compacted: still over the budget"))
        .unwrap_or_else(|| panic!("{:?}", out.report));
    assert!(why.contains("a lossy edit must save 5%"), "{why}");
}

/// Claude Code's own summary request (the history plus a user text asking for a detailed
/// summary) is compacted to the context window, not the budget: untouched while it fits the
/// window, cut down to the window when it does not.
#[tokio::test]
async fn the_clients_own_summary_request_is_compacted_to_the_window_only() {
    let mut settings = Settings::default();
    settings.policy.tiers = vec!["truncate".into()];
    settings.budget.tokens = 2_000;
    settings.budget.context_window = 8_000;
    settings.budget.reserve_output = 1_000;
    let engine = Compactor::from_config(settings).expect("settings");
    let ask = |turns: usize| {
        let mut c = history(turns);
        let last = c.messages.last_mut().expect("a last message");
        last.content = vec![crate::conversation::Block::text(
            "Your task is to create a detailed summary of the conversation so far, paying attention to details.",
        )];
        c
    };
    // About 4,000 tokens: over the budget, under the window (7,000 less nothing).
    let fits = ask(6);
    let out = engine
        .compact(&fits, Format::Anthropic, None)
        .await
        .expect("runs");
    assert_eq!(
        out.report.request,
        crate::report::RequestKind::ClientSummary
    );
    assert_eq!(out.report.budget, 7_000);
    assert!(
        out.report.tokens_before > 2_000,
        "{}",
        out.report.tokens_before
    );
    assert_eq!(out.report.status, Status::Unchanged);
    assert_eq!(out.conversation.messages, fits.messages);
    // About 10,000 tokens: cut, down to the window and no further than needed.
    let over = ask(16);
    let out = engine
        .compact(&over, Format::Anthropic, None)
        .await
        .expect("runs");
    assert_eq!(out.report.status, Status::Compacted);
    assert!(
        out.report.tokens_after <= 7_000,
        "{}",
        out.report.tokens_after
    );
    assert!(
        out.report.tokens_after > 4_000,
        "{}",
        out.report.tokens_after
    );
    // The same history as a turn goes to the budget.
    let mut turn = over.clone();
    turn.messages.last_mut().expect("last").content =
        vec![crate::conversation::Block::text("go on")];
    let out = engine
        .compact(&turn, Format::Anthropic, None)
        .await
        .expect("runs");
    assert_eq!(out.report.request, crate::report::RequestKind::Turn);
    assert_eq!(out.report.budget, 2_000);
    assert!(
        out.report.tokens_after <= 2_000,
        "{}",
        out.report.tokens_after
    );
}
