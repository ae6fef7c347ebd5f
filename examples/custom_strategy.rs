//! A strategy of your own, registered by name and used as a tier.
//!
//! Run: `cargo run --release --example custom_strategy`. `tests/all/compaction.rs` runs [`run`] too.
//!
//! `keep_tail` drops the oldest whole rounds behind a marker: it reads the guard's layout
//! (`cx.layout`) for the legal cuts and keeps the longest tail that fits the target with the
//! marker. It decides what goes; the guard writes the marker (the session state of the
//! dropped rounds, `guard::write::drop_marker`, with the recall id of what it stands for) and
//! builds the output, and the pipeline verifies it like any built-in tier's.

use compactor::conversation::Conversation;
use compactor::guard::{CutKind, MessageTokens, UnitEdit, write};
use compactor::registry::{Built, Registry};
use compactor::strategy::{Budget, Compaction, Context, Strategy, StrategyError};
use compactor::{Compactor, Format, Status};
use serde_json::json;

/// Drops the oldest rounds, cutting only at a round start.
struct KeepTail;

#[async_trait::async_trait]
impl Strategy for KeepTail {
    fn name(&self) -> &str {
        "keep_tail"
    }

    async fn compact(
        &self,
        conversation: &Conversation,
        budget: Budget,
        cx: &Context<'_>,
    ) -> Result<Compaction, StrategyError> {
        let layout = cx.layout;
        let tokens = MessageTokens::of(conversation, cx.counter);
        let pinned = layout.pinned();
        // The marker of a drop up to `cut`, written by the guard: the dropped rounds' session
        // state (the user's words verbatim, failures, files) within a quarter of the target.
        // With recall on, its last line names the recall id of the dropped rounds; the marker
        // keeps them, and the pipeline stores them once it takes the output.
        let marker = |cut: usize| {
            let mut marker = write::drop_marker(
                conversation,
                &tokens,
                pinned..cut,
                budget.target / 4,
                cx.counter,
            );
            if cx.recall {
                marker.name_recall(conversation, cx.format, pinned..cut);
            }
            marker
        };
        // The earliest round start whose tail and marker fit the target.
        let cut = layout.earliest_cut(pinned, |c| {
            c.kind == CutKind::RoundStart
                && tokens.tail(c.index) + cx.counter.count_text(marker(c.index).text())
                    <= budget.target
        });
        let Some(cut) = cut.filter(|c| c.kind == CutKind::RoundStart) else {
            return Ok(Compaction::unchanged("keep_tail: no round start fits"));
        };
        // A plan, not an output: the guard builds the output (and refuses the plan, naming
        // the edit, if it breaks a rule).
        let marker = marker(cut.index);
        Ok(Compaction {
            plan: vec![UnitEdit::Drop {
                to: cut.index,
                marker,
            }],
            notes: Vec::new(),
            degraded: None,
        })
    }
}

/// Builds a pipeline whose only tier is `keep_tail`, compacts a ten-round chat to a budget of
/// 2,000 tokens and returns the output's message count and the report's status.
///
/// # Errors
/// Any error of the library (config, input, compaction).
pub async fn run() -> anyhow::Result<(usize, Status, String)> {
    let mut settings = compactor::config::Settings::default();
    settings.policy.tiers = vec!["keep_tail".to_string()];
    settings.policy.remember = false;
    run_with(settings).await
}

/// The built-in strategies plus `keep_tail`.
pub fn registry() -> Registry {
    let mut registry = Registry::builtin();
    registry.register("keep_tail", |_settings| {
        Ok(Built::Ready(Box::new(KeepTail)))
    });
    registry
}

/// Compacts a 20-message history at 2,000 tokens with `settings` (whose tiers may name
/// `keep_tail`, e.g. from a config file loaded with
/// `Loader { file, ..Loader::default() }.accepting(registry().names())`).
///
/// # Errors
/// Any error of the library (config, input, compaction).
pub async fn run_with(
    settings: compactor::config::Settings,
) -> anyhow::Result<(usize, Status, String)> {
    let compactor = Compactor::from_registry(settings, &registry())?;

    let mut messages = Vec::new();
    for i in 0..10 {
        messages.push(
            json!({"role": "user", "content": format!("question {i}: {}", "why? ".repeat(20))}),
        );
        messages.push(json!({"role": "assistant", "content": format!("answer {i}: {}", "because. ".repeat(200))}));
    }
    let history =
        Format::Anthropic.read(&json!({"model": "m", "max_tokens": 64, "messages": messages}))?;
    let out = compactor
        .compact(&history, Format::Anthropic, Some(2_000))
        .await?;
    Ok((
        out.conversation.messages.len(),
        out.report.status,
        out.report.applied(),
    ))
}

#[allow(dead_code)] // `tests/all/compaction.rs` includes this file and calls `run` / `run_with`.
#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let (messages, status, applied) = run().await?;
    // The status as the report's JSON names it ("compacted"), not the Rust variant.
    let status = serde_json::to_value(status)?;
    let status = status.as_str().unwrap_or_default();
    println!("{status} by {applied}: {messages} messages kept");
    Ok(())
}
