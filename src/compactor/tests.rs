//! Unit tests of [`Compactor`](super::Compactor).

use super::*;
use crate::memory::PrefixHashes;
use crate::report::{Refusal, Status};
use crate::strategy::truncate::Truncate;
use crate::strategy::{Compaction, Context, StrategyError};
use serde_json::json;

/// The real truncation, reported the way `summary` reports its fallback.
struct FellBack(Truncate);

#[async_trait::async_trait]
impl Strategy for FellBack {
    fn name(&self) -> &str {
        "summary"
    }
    async fn compact(
        &self,
        conversation: &Conversation,
        budget: Budget,
        cx: &Context<'_>,
    ) -> Result<Compaction, StrategyError> {
        let mut c = self.0.compact(conversation, budget, cx).await?;
        c.degraded = Some("summary failed (connection refused): fell back to truncate".into());
        Ok(c)
    }
}

fn history(turns: usize) -> Conversation {
    let long = "output line ".repeat(300);
    let mut messages = vec![json!({"role": "user", "content": "start"})];
    for i in 0..turns {
        let id = format!("toolu_{i}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": long}]}));
        messages.push(json!({"role": "assistant", "content": format!("turn {i}")}));
        messages.push(json!({"role": "user", "content": "go on"}));
    }
    Format::Anthropic
        .read(&json!({"model": "m", "max_tokens": 8, "messages": messages}))
        .unwrap()
}

#[tokio::test]
async fn a_fallback_is_named_warned_and_stays_degraded_when_continued_from_memory() {
    let settings = Settings::default();
    let counter = crate::tokens::counter_for(settings.tokens.tokenizer);
    let engine = Compactor::with_parts(
        settings.clone(),
        counter,
        vec![Box::new(FellBack(Truncate {
            config: settings.truncate.clone(),
        }))],
    );
    let first = history(8);
    let out = engine
        .compact(&first, Format::Anthropic, Some(2_000))
        .await
        .unwrap();
    assert_eq!(out.report.status, Status::Degraded);
    assert_eq!(out.report.applied(), "truncate after summary failed");
    assert!(
        out.report
            .summary_line()
            .contains(" by truncate after summary failed [default]")
    );
    assert_eq!(
        out.report.warnings(),
        vec!["summary failed (connection refused): fell back to truncate".to_string()]
    );
    // The next turn extends the same history and fits after the remembered prefix.
    let mut next = first.clone();
    next.messages.push(crate::conversation::Message::new(
        crate::conversation::Role::Assistant,
        vec![crate::conversation::Block::text("ok")],
    ));
    next.messages.push(crate::conversation::Message::new(
        crate::conversation::Role::User,
        vec![crate::conversation::Block::text("and now?")],
    ));
    let again = engine
        .compact(&next, Format::Anthropic, Some(2_000))
        .await
        .unwrap();
    assert_eq!(again.report.continued_from, Some(first.messages.len()));
    assert_eq!(again.report.status, Status::Degraded, "{:?}", again.report);
}

/// `history(turns)` whose first `failed` results are failures (`is_error`).
fn history_with_failures(turns: usize, failed: usize) -> Conversation {
    let mut c = history(turns);
    for m in &mut c.messages {
        for b in &mut m.content {
            if let crate::conversation::Block::ToolResult(r) = b
                && r.tool_use_id
                    .trim_start_matches("toolu_")
                    .parse::<usize>()
                    .is_ok_and(|i| i < failed)
            {
                r.is_error = Some(true);
            }
        }
    }
    Format::Anthropic
        .read(&Format::Anthropic.write(&c))
        .unwrap()
}

#[tokio::test]
async fn a_continuation_is_checked_against_the_failure_records_remembered_with_its_prefix() {
    let mut settings = Settings::default();
    settings.policy.tiers = vec!["truncate".into()];
    let engine = Compactor::from_config(settings).unwrap();
    let first = history_with_failures(8, 2);
    let out = engine
        .compact(&first, Format::Anthropic, Some(2_000))
        .await
        .unwrap();
    assert_eq!(out.report.status, Status::Compacted);
    let kept: Vec<&str> = out
        .conversation
        .messages
        .iter()
        .flat_map(|m| m.tool_results())
        .map(|r| r.tool_use_id.as_str())
        .collect();
    assert!(
        !kept.contains(&"toolu_0") && !kept.contains(&"toolu_1"),
        "the failed results were dropped: {kept:?}"
    );
    let mut next = first.clone();
    next.messages.push(crate::conversation::Message::text(
        crate::conversation::Role::Assistant,
        "ok",
    ));
    next.messages.push(crate::conversation::Message::text(
        crate::conversation::Role::User,
        "and now?",
    ));
    // With the records it was built with, the remembered prefix is taken.
    let again = engine
        .compact(&next, Format::Anthropic, Some(2_000))
        .await
        .unwrap();
    assert_eq!(again.report.continued_from, Some(first.messages.len()));
    // The same output remembered without its records: the marker's text still names both
    // failures, but the guard reads no text, so the continuation is refused and the history
    // compacted afresh.
    let limit = engine.budget(Some(2_000)).limit as u64;
    let hashes = PrefixHashes::of(&next, limit);
    let (len, remembered) = engine.memory().recall(&hashes).unwrap();
    assert_eq!(len, next.messages.len());
    assert_eq!(remembered.failures.len(), 2, "{:?}", remembered.failures);
    let text: String = remembered
        .output
        .messages
        .iter()
        .map(crate::conversation::Message::plain_text)
        .collect();
    assert!(
        text.contains("toolu_0") && text.contains("toolu_1"),
        "{text}"
    );
    engine
        .memory()
        .remember(&hashes, &remembered.output, None, &[]);
    let afresh = engine
        .compact(&next, Format::Anthropic, Some(2_000))
        .await
        .unwrap();
    assert_eq!(
        afresh.report.continued_from, None,
        "{:?}",
        afresh.report.notes
    );
    assert_eq!(afresh.report.status, Status::Compacted);
}

#[test]
fn a_model_of_the_other_vocabulary_counts_with_the_counter_given_for_it() {
    use crate::tokens::{CachedCounter, TiktokenCounter};
    let settings = Settings::default();
    let other = match settings.tokens.tokenizer {
        Tokenizer::O200kBase => Tokenizer::Cl100kBase,
        _ => Tokenizer::O200kBase,
    };
    let given: Arc<dyn TokenCounter> = Arc::new(CachedCounter::with_max_bytes(
        TiktokenCounter::new(other),
        10 * 128,
    ));
    let c = Compactor::from_config(settings)
        .unwrap()
        .with_other_counter(given.clone());
    let used = c.counter_of(other) as *const dyn TokenCounter;
    assert!(std::ptr::addr_eq(used, Arc::as_ptr(&given)));
    // Without one, a counter of its own is built (not the configured vocabulary's).
    let plain = Compactor::from_config(Settings::default()).unwrap();
    let own = plain.counter_of(other) as *const dyn TokenCounter;
    assert!(!std::ptr::addr_eq(own, Arc::as_ptr(&given)));
    assert!(!std::ptr::addr_eq(own, Arc::as_ptr(&plain.counter)));
}

/// A faulty tier: blanks the first assistant text it may edit. `guard::apply` takes the
/// plan (a text for a text), the provider would not (an empty text block).
struct Blank;

#[async_trait::async_trait]
impl Strategy for Blank {
    fn name(&self) -> &str {
        "blank"
    }
    async fn compact(
        &self,
        conversation: &Conversation,
        _budget: Budget,
        cx: &Context<'_>,
    ) -> Result<Compaction, StrategyError> {
        let at = conversation.messages.iter().enumerate().find(|(i, m)| {
            m.role == crate::conversation::Role::Assistant
                && !cx.layout.is_protected(*i)
                && cx.layout.newest() != Some(*i)
                && matches!(m.content.first(), Some(crate::conversation::Block::Text(_)))
        });
        let Some((message, _)) = at else {
            return Ok(Compaction::unchanged("blank: nothing to blank"));
        };
        Ok(Compaction {
            plan: vec![crate::guard::UnitEdit::Cap(
                crate::guard::write::Capped::forged(
                    (message, 0),
                    crate::conversation::Block::text(""),
                ),
            )],
            notes: Vec::new(),
            degraded: None,
        })
    }
}

/// A tier that never edits.
struct Idle;

#[async_trait::async_trait]
impl Strategy for Idle {
    fn name(&self) -> &str {
        "idle"
    }
    async fn compact(
        &self,
        _conversation: &Conversation,
        _budget: Budget,
        _cx: &Context<'_>,
    ) -> Result<Compaction, StrategyError> {
        Ok(Compaction::unchanged("idle"))
    }
}

/// A first tier's output that is smaller but short of the target is handed to the next
/// tier before the guard's verdict; when it ends up the output, the verdict comes then:
/// refused, it is not taken, its tier names the violation, and the input stands.
#[tokio::test]
async fn an_output_passed_on_unjudged_is_judged_when_it_ends_up_the_output() {
    let mut settings = Settings::default();
    settings.policy.remember = false;
    let counter = crate::tokens::counter_for(settings.tokens.tokenizer);
    let engine = Compactor::with_parts(settings, counter, vec![Box::new(Blank), Box::new(Idle)]);
    let input = history(8);
    let out = engine
        .compact(&input, Format::Anthropic, Some(2_000))
        .await
        .unwrap();
    assert_eq!(out.report.status, Status::OverBudget, "{:?}", out.report);
    assert_eq!(*out.conversation, input);
    let blank = &out.report.tiers[0];
    assert!(!blank.accepted);
    assert!(
        matches!(&blank.refused, Some(Refusal::Output(v))
            if v.iter().any(|v| v.kind == crate::guard::ViolationKind::EmptyText)),
        "{:?}",
        blank.refused
    );
    assert_eq!(out.report.rejections(), 1);
    assert_eq!(out.report.applied(), "none");
    // The same faulty tier last: judged at once, with the same verdict.
    let counter = crate::tokens::counter_for(Settings::default().tokens.tokenizer);
    let mut settings = Settings::default();
    settings.policy.remember = false;
    let alone = Compactor::with_parts(settings, counter, vec![Box::new(Blank)]);
    let once = alone
        .compact(&input, Format::Anthropic, Some(2_000))
        .await
        .unwrap();
    assert_eq!(once.report.tiers[0].refused, blank.refused);
    assert_eq!(once.report.status, Status::OverBudget);
}

/// Passed on unjudged and then built on: the later tier's output is judged against the
/// original input on its own, and both tiers are named as applied.
#[tokio::test]
async fn an_output_passed_on_and_built_on_is_settled_by_the_later_verdict() {
    let mut settings = Settings::default();
    settings.policy.remember = false;
    settings.policy.tiers = vec!["microcompact".into(), "truncate".into()];
    let engine = Compactor::from_config(settings).unwrap();
    let input = history_with_failures(12, 1);
    let out = engine
        .compact(&input, Format::Anthropic, Some(2_000))
        .await
        .unwrap();
    assert_eq!(out.report.status, Status::Compacted, "{:?}", out.report);
    assert_eq!(out.report.applied(), "microcompact+truncate");
    assert_eq!(out.report.rejections(), 0);
    assert!(
        crate::guard::validate(&out.conversation, Format::Anthropic, Default::default()).is_empty()
    );
}

/// A refused output that later tiers were built on: they run again on the output before
/// it, so a faulty tier costs its own edits, not the later tiers' work.
#[tokio::test]
async fn the_tiers_after_a_refused_output_run_again_on_the_one_before_it() {
    let mut settings = Settings::default();
    settings.policy.remember = false;
    let counter = crate::tokens::counter_for(settings.tokens.tokenizer);
    let microcompact = crate::strategy::microcompact::Microcompact {
        config: settings.microcompact.clone(),
    };
    let engine = Compactor::with_parts(
        settings,
        counter,
        vec![Box::new(Blank), Box::new(microcompact)],
    );
    let input = history(8);
    let out = engine
        .compact(&input, Format::Anthropic, Some(2_000))
        .await
        .unwrap();
    let runs: Vec<(&str, bool, bool)> = out
        .report
        .tiers
        .iter()
        .map(|t| (t.strategy.as_str(), t.accepted, t.refused.is_none()))
        .collect();
    // Blank passed on, microcompact's output built on it refused (it keeps the blanked
    // text), Blank refused when judged, microcompact again on the input: taken.
    assert_eq!(
        runs,
        vec![
            ("blank", false, false),
            ("microcompact", false, false),
            ("microcompact", true, true)
        ],
        "{:?}",
        out.report
    );
    assert_eq!(out.report.applied(), "microcompact");
    assert!(out.report.tokens_after < out.report.tokens_before);
    assert!(
        crate::guard::validate(&out.conversation, Format::Anthropic, Default::default()).is_empty()
    );
}
