//! One number for the size of a request in its target model's tokens, with the counting that
//! made it.
//!
//! ```text
//! conversation + model (explicit, else the body's `model`, else `[tokens] model`, else none)
//!   -> ModelTokens (Calibration::resolve: rule, learned ratio, or the counter's tokens as is)
//!   -> counted = the cached counter of its vocabulary, framed (`ModelTokens::framed`):
//!                system prompt + tools + messages, plus ceil(tool_call / rule ratio) per
//!                tool_use block
//!   -> total   = ModelTokens::to_model(counted) = ceil(counted × ratio) + overhead
//! ```
//!
//! Every place that reports or budgets model tokens gives this figure for the same body and
//! model: `compactor count` (text and `--json`), the pipeline's `tokens_before` /
//! `tokens_after` and its summary line ([`crate::report::Report`], counted with the same
//! framed counter and the same [`ModelTokens::to_model`], its per-message counts kept for the
//! tiers), the API's `/v1/count_tokens` (`model_tokens`), the proxy's `x-compactor-tokens`
//! header (the pipeline's report), and Python's `count` (`model_tokens`). `tests/all/
//! model_count.rs` compares them on every corpus session and on prefixes of the Claude Code
//! logs, and recomputes the figure from tiktoken-rs counts of each block.
//!
//! Units: **counted tokens** are tokens of the counter's vocabulary (`o200k_base` or
//! `cl100k_base`, [`ModelTokens::tokenizer`]), framing included; **model tokens** are the
//! target model's, what budgets, triggers and targets are in. When no model is named, or the
//! model has no `[tokens.models]` rule, the two are the same number and the counting says so
//! ([`ModelTokens::as_counted`]: `source = "counter"`).
//!
//! Counting reuses the counter's per-block cache: a block counted by the breakdown, an earlier
//! compaction or an earlier count is not tokenized again.

use super::breakdown::thousands;
use super::{ModelTokens, RatioSource, TokenCounter};
use crate::conversation::Conversation;
use serde::Serialize;

/// The size of a request in its target model's tokens and how it was counted: what the
/// pipeline budgets with. Serializes as `{"total", "counted", "tool_calls", "counting": {...}}`
/// (`counting` as [`ModelTokens`]: `model` is `null` and `source` `"counter"` when no model is
/// named).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelCount {
    /// Model tokens: `counting.to_model(counted)`, i.e. `ceil(counted × ratio) + overhead`.
    pub total: usize,
    /// Counted tokens of `counting.tokenizer`: system prompt + tool definitions + messages
    /// (each with [`super::MESSAGE_OVERHEAD`]) + `counting.call_framing()` per tool_use block.
    /// The same figure as the report's `counted_before`; a [`super::Breakdown`] of the same
    /// vocabulary has `total = counted − tool_calls × counting.call_framing()`.
    pub counted: usize,
    /// Top-level tool_use blocks of the messages (each carries the per-call framing).
    pub tool_calls: usize,
    /// The counting basis: model, rule, vocabulary, ratio, overhead, per-call framing and
    /// where the ratio comes from.
    pub counting: ModelTokens,
}

impl ModelCount {
    /// Counts `conversation` under `counting`. `counter` counts `counting.tokenizer`'s
    /// vocabulary *without* framing (the pipeline's cached counter of that vocabulary,
    /// [`crate::Compactor::counter_of`]); the per-call framing is added here, as the pipeline
    /// adds it, so no caller can leave it out.
    pub fn of(
        counting: ModelTokens,
        counter: &dyn TokenCounter,
        conversation: &Conversation,
    ) -> ModelCount {
        let counted = counting.framed(counter).count_conversation(conversation);
        let tool_calls = conversation
            .messages
            .iter()
            .map(|m| m.tool_uses().count())
            .sum();
        ModelCount {
            total: counting.to_model(counted),
            counted,
            tool_calls,
            counting,
        }
    }

    /// For humans, after the total: `model=claude-opus-4-6; ratio=1.105 (config claude-*);
    /// overhead=0; tool_call=172; 41,611 o200k_base tokens counted, 38 tool calls` for a
    /// calibrated model, [`ModelTokens::as_counted`] (`no model named: o200k_base tokens as
    /// counted`) when the model's tokens are the counter's own.
    pub fn describe(&self) -> String {
        if let Some(note) = self.counting.as_counted() {
            return note;
        }
        format!(
            "{}; {} {} tokens counted, {} tool calls",
            self.counting.describe(),
            thousands(self.counted),
            self.counting.tokenizer,
            thousands(self.tool_calls)
        )
    }
}

impl ModelTokens {
    /// When model tokens are the counter's tokens as counted (no model named, or a model no
    /// `[tokens.models]` rule names: [`RatioSource::Counter`]), what to say of it:
    /// `no model named: o200k_base tokens as counted`, or `no [tokens.models] rule for
    /// llama-3: o200k_base tokens as counted`. `None` for a model with a rule.
    pub fn as_counted(&self) -> Option<String> {
        if self.source != RatioSource::Counter {
            return None;
        }
        let which = match &self.model {
            None => "no model named".to_string(),
            Some(m) => format!("no [tokens.models] rule for {m}"),
        };
        Some(format!("{which}: {} tokens as counted", self.tokenizer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;
    use crate::tokens::{CachedCounter, Calibration, ModelRule, TiktokenCounter, Tokenizer};
    use serde_json::json;
    use std::collections::BTreeMap;

    fn calibration(default_model: &str) -> Calibration {
        let mut rules = BTreeMap::new();
        rules.insert(
            "claude-*".to_string(),
            ModelRule {
                tokenizer: Tokenizer::O200kBase,
                ratio: 1.105,
                overhead: 7,
                tool_call: 172,
            },
        );
        Calibration::new(Tokenizer::O200kBase, default_model, rules, false)
    }

    fn two_calls() -> Conversation {
        Format::Anthropic
            .read(&json!({"system": "be brief", "messages": [
                {"role": "user", "content": "list files"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
                    {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "pwd"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "a.rs"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "/w"}]}]}))
            .unwrap()
    }

    #[test]
    fn a_calibrated_count_is_the_framed_count_times_the_ratio_plus_the_overhead() {
        let counter = CachedCounter::new(TiktokenCounter::default());
        let conversation = two_calls();
        let plain = counter.count_conversation(&conversation);
        let basis = calibration("").resolve(Some("claude-opus-4-6"));
        let count = ModelCount::of(basis.clone(), &counter, &conversation);
        // ceil(172 / 1.105) = 156 counted tokens per call.
        assert_eq!(count.tool_calls, 2);
        assert_eq!(count.counted, plain + 2 * 156);
        assert_eq!(
            count.total,
            ((plain + 312) as f64 * 1.105).ceil() as usize + 7
        );
        assert_eq!(count.counting, basis);
        assert!(count.counting.as_counted().is_none());
        assert_eq!(
            count.describe(),
            format!(
                "model=claude-opus-4-6; ratio=1.105 (config claude-*); overhead=7; \
                 tool_call=172; {} o200k_base tokens counted, 2 tool calls",
                plain + 312
            )
        );
    }

    #[test]
    fn without_a_model_or_a_rule_the_count_says_it_is_the_counters_own() {
        let counter = CachedCounter::new(TiktokenCounter::default());
        let conversation = two_calls();
        let plain = counter.count_conversation(&conversation);
        let none = ModelCount::of(calibration("").resolve(None), &counter, &conversation);
        assert_eq!(
            (none.total, none.counted, none.tool_calls),
            (plain, plain, 2)
        );
        assert_eq!(
            none.describe(),
            "no model named: o200k_base tokens as counted"
        );
        let value = serde_json::to_value(&none).unwrap();
        assert_eq!(value["counting"]["source"], "counter");
        assert_eq!(value["counting"]["model"], serde_json::Value::Null);
        let other = ModelCount::of(
            calibration("").resolve(Some("llama-3")),
            &counter,
            &conversation,
        );
        assert_eq!(other.total, plain);
        assert_eq!(
            other.describe(),
            "no [tokens.models] rule for llama-3: o200k_base tokens as counted"
        );
        // `[tokens] model` names the model of a body that names none.
        let c = calibration("claude-opus-4-6");
        let fallback = ModelCount::of(c.resolve(c.model_of(None)), &counter, &conversation);
        assert_eq!(fallback.counted, plain + 312);
    }
}
