//! The pipeline: policy -> strategies (tiers) -> guard, as one value an agent loop keeps.
//!
//! ```text
//! conversation -> count (cached) -> under trigger? -> unchanged (borrowed, no copy)
//!                                -> tier 1 -> guard -> tier 2 -> guard -> ... -> Report
//! ```
//! Each tier works on the output of the last accepted one and the run stops at the first tier
//! that reaches the target. Every output passes [`guard::validate`] and
//! [`guard::check_compaction`] against the original input; an output that fails is discarded
//! (the report names the violations) and so is one that is not smaller.

use crate::config::{ConfigError, Settings};
use crate::conversation::Conversation;
use crate::format::Format;
use crate::guard::{self, ValidateOptions, Violation};
use crate::memory::{Memory, PrefixHashes};
use crate::report::{Report, Status, TierRun, Timings, violation_lines};
use crate::strategy::microcompact::Microcompact;
use crate::strategy::summary::{DEFAULT_PROMPT, Summary};
use crate::strategy::truncate::Truncate;
use crate::strategy::{Budget, Context, Strategy};
use crate::tokens::{Calibration, ModelTokens, Observation, TokenCounter, Tokenizer};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

/// Errors of [`Compactor::compact`].
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    /// The input breaks the provider's rules; compacting it would hide the fault. Each violation
    /// names its place (`messages[0].content[0]: tool_result toolu_x has no tool_use ...`).
    #[error("invalid input: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    InvalidInput(Vec<Violation>),
}

/// A compaction result: the conversation (borrowed when unchanged) and the report.
#[derive(Debug)]
pub struct Compacted<'a> {
    /// The output: `Cow::Borrowed(input)` when nothing changed.
    pub conversation: Cow<'a, Conversation>,
    /// What happened.
    pub report: Report,
}

/// A configured pipeline. Cheap to share (`Arc` inside); reuse it across turns so the token
/// cache stays warm.
pub struct Compactor {
    settings: Settings,
    counter: Arc<dyn TokenCounter>,
    tiers: Vec<Box<dyn Strategy>>,
    skipped: Vec<String>,
    memory: Memory,
    /// The vocabulary of `counter`.
    tokenizer: Tokenizer,
    /// A counter of the other vocabulary, built when a model needs it.
    other_counter: std::sync::OnceLock<Arc<dyn TokenCounter>>,
    calibration: Calibration,
}

impl Compactor {
    /// Builds the pipeline the settings describe: the tokenizer, and one strategy per tier.
    /// `summary` needs an LLM (`[llm]`); without one it is skipped and the report says so.
    ///
    /// # Errors
    /// [`ConfigError`] for a tier that cannot be built.
    pub fn from_config(settings: Settings) -> Result<Compactor, ConfigError> {
        let counter = crate::tokens::counter_for(settings.tokens.tokenizer);
        let mut tiers: Vec<Box<dyn Strategy>> = Vec::new();
        let mut skipped = Vec::new();
        for name in &settings.policy.tiers {
            match name.as_str() {
                "truncate" => tiers.push(Box::new(Truncate {
                    config: settings.truncate.clone(),
                })),
                "microcompact" => tiers.push(Box::new(Microcompact {
                    config: settings.microcompact.clone(),
                })),
                "summary" => match &settings.llm {
                    None => skipped.push("summary tier skipped: no [llm] configured".to_string()),
                    Some(llm) => {
                        let summarizer =
                            crate::llm::from_config(llm).map_err(|e| ConfigError::Invalid {
                                key: "llm".into(),
                                message: e.to_string(),
                            })?;
                        tiers.push(Box::new(Summary::new(
                            summarizer,
                            settings.summary.clone(),
                            summary_prompt(&settings.summary.prompt_file)?,
                            settings.truncate.clone(),
                        )));
                    }
                },
                other => {
                    return Err(ConfigError::Invalid {
                        key: "policy.tiers".into(),
                        message: format!("unknown strategy {other:?}"),
                    });
                }
            }
        }
        Ok(Compactor {
            tokenizer: settings.tokens.tokenizer,
            other_counter: std::sync::OnceLock::new(),
            calibration: calibration_of(&settings),
            settings,
            counter,
            tiers,
            skipped,
            memory: Memory::default(),
        })
    }

    /// A pipeline with explicit parts (tests, custom strategies).
    pub fn with_parts(
        settings: Settings,
        counter: Arc<dyn TokenCounter>,
        tiers: Vec<Box<dyn Strategy>>,
    ) -> Compactor {
        Compactor {
            tokenizer: settings.tokens.tokenizer,
            other_counter: std::sync::OnceLock::new(),
            calibration: calibration_of(&settings),
            settings,
            counter,
            tiers,
            skipped: Vec::new(),
            memory: Memory::default(),
        }
    }

    /// This pipeline counting with `counter`, which must count the configured `[tokens]
    /// tokenizer (e.g. a [`CachedCounter`](crate::tokens::CachedCounter) with a byte bound the
    /// service shows in its metrics).
    pub fn with_counter(mut self, counter: Arc<dyn TokenCounter>) -> Compactor {
        self.counter = counter;
        self
    }

    /// This pipeline with its compaction memory bounded to `max_bytes` (estimated bytes of
    /// remembered outputs; see [`Memory`]). Anything remembered so far is dropped.
    pub fn with_memory_bytes(mut self, max_bytes: u64) -> Compactor {
        self.memory = Memory::with_max_bytes(max_bytes);
        self
    }

    /// The compaction memory (its size and bound feed the service's `/metrics`).
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// The settings in force.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The token counter (cached).
    pub fn counter(&self) -> &dyn TokenCounter {
        self.counter.as_ref()
    }

    /// Tiers of the settings that cannot run here, with the reason (`summary tier skipped: no
    /// [llm] configured`).
    pub fn skipped_tiers(&self) -> &[String] {
        &self.skipped
    }

    /// The counting basis of `model` (the request body's `model`; `None`: `[tokens] model`):
    /// vocabulary, ratio and overhead in force, learned ratio included.
    pub fn model_tokens(&self, model: Option<&str>) -> ModelTokens {
        self.calibration.resolve(self.calibration.model_of(model))
    }

    /// Feeds the provider's count of one request back: `counted` is the counter's count of the
    /// request sent ([`Report::counted_after`]), `actual` the input tokens of the answer's
    /// `usage` (Anthropic: `input_tokens + cache_read_input_tokens +
    /// cache_creation_input_tokens`; OpenAI: `prompt_tokens` / `input_tokens`). The model's
    /// running ratio moves (bounded, outliers ignored; see
    /// [`Calibration::observe`](crate::tokens::Calibration::observe)) and the next
    /// compactions of that model use it. `None` when nothing was learned (an exact model, no
    /// rule, learning off).
    pub fn observe_usage(&self, model: &str, counted: usize, actual: u64) -> Option<Observation> {
        self.calibration.observe(model, counted, actual)
    }

    /// The ratios learned so far: `(model, ratio, accepted samples, ignored samples)`.
    pub fn learned_ratios(&self) -> Vec<(String, f64, u64, u64)> {
        self.calibration.learned()
    }

    /// The counter of `tokenizer`: the configured one, or one of the other vocabulary.
    fn counter_of(&self, tokenizer: Tokenizer) -> &dyn TokenCounter {
        if tokenizer == self.tokenizer {
            return self.counter.as_ref();
        }
        self.other_counter
            .get_or_init(|| crate::tokens::counter_for(tokenizer))
            .as_ref()
    }

    /// The budget in model tokens: `explicit` tokens, else the configured one.
    pub fn budget(&self, explicit: Option<usize>) -> Budget {
        let limit = self.settings.budget.budget(explicit);
        Budget {
            limit,
            target: (limit as f64 * self.settings.budget.target) as usize,
        }
    }

    /// Compacts `conversation` (of wire format `format`) to the budget (`budget` tokens, or the
    /// configured one). Never mutates the input; returns it borrowed when it is under the
    /// trigger or nothing valid and smaller could be made.
    ///
    /// # Errors
    /// [`CompactError::InvalidInput`] when the input itself breaks the provider's rules.
    pub async fn compact<'a>(
        &self,
        conversation: &'a Conversation,
        format: Format,
        budget: Option<usize>,
    ) -> Result<Compacted<'a>, CompactError> {
        self.compact_with(conversation, format, budget, None).await
    }

    /// [`Compactor::compact`] with extra instructions for a model summary.
    ///
    /// # Errors
    /// As [`Compactor::compact`].
    pub async fn compact_with<'a>(
        &self,
        input: &'a Conversation,
        format: Format,
        budget: Option<usize>,
        instructions: Option<&str>,
    ) -> Result<Compacted<'a>, CompactError> {
        let started = Instant::now();
        let mut timings = Timings::default();
        let units = guard::Units::of(input);
        let options = ValidateOptions {
            allow_open_tail: units.exchanges.last().is_some_and(|e| e.open),
        };
        let mut invalid = guard::validate(
            input,
            format,
            ValidateOptions {
                allow_open_tail: true,
            },
        );
        // A fault every output repairs (surplus cache_control) does not refuse the input.
        invalid.retain(|v| !v.kind.is_repairable());
        if !invalid.is_empty() {
            return Err(CompactError::InvalidInput(invalid));
        }
        // Budget, trigger and target are in the target model's tokens; the strategies work in
        // the counter's own (cached) tokens, so the model figures are converted once here.
        let basis = self.model_tokens(input.extra.get("model").and_then(|m| m.as_str()));
        // The model's per-call framing (`[tokens.models] tool_call`) joins every tool_use
        // block's count; with none configured this is the cached counter as it is.
        let framed = basis.framed(self.counter_of(basis.tokenizer));
        let counter: &dyn TokenCounter = &framed;
        let model_budget = self.budget(budget);
        let model_trigger = (model_budget.limit as f64 * self.settings.budget.trigger) as usize;
        let budget = Budget {
            limit: basis.to_counted(model_budget.limit),
            target: basis.to_counted(model_budget.target),
        };
        let trigger = basis.to_counted(model_trigger);
        let t0 = Instant::now();
        let tokens_before = counter.count_conversation(input);
        timings.count_ms = ms(t0);
        let mut report = Report {
            status: Status::Unchanged,
            strategy: self.settings.preset.clone(),
            format: format.as_str().into(),
            tokens_before: basis.to_model(tokens_before),
            tokens_after: basis.to_model(tokens_before),
            counted_before: tokens_before,
            counted_after: tokens_before,
            counting: basis.clone(),
            budget: model_budget.limit,
            trigger: model_trigger,
            target: model_budget.target,
            messages_before: input.messages.len(),
            messages_after: input.messages.len(),
            tiers: Vec::new(),
            continued_from: None,
            notes: Vec::new(),
            skipped: Vec::new(),
            timings,
        };
        if tokens_before <= trigger {
            report.notes.push(format!(
                "under the trigger ({} <= {model_trigger} tokens): nothing to do",
                report.tokens_before
            ));
            report.timings.total_ms = ms(started);
            return Ok(Compacted {
                conversation: Cow::Borrowed(input),
                report,
            });
        }
        report.notes.extend(self.skipped.iter().cloned());
        report.skipped = self.skipped.clone();
        let cx = Context {
            format,
            counter,
            instructions,
        };
        let mut current: Option<Conversation> = None;
        // Why the output is degraded (a tier fell back, here or in the remembered prefix).
        let mut degraded: Option<String> = None;
        let mut tokens_now = tokens_before;
        // Hysteresis across calls: continue from the remembered compaction of this history's
        // prefix, so the compacted prefix (and the provider's prompt cache) stays the same.
        let hashes = PrefixHashes::of(input, model_budget.limit as u64);
        let remember = self.settings.policy.remember;
        if let Some((len, mut candidate, was_degraded)) =
            remember.then(|| self.memory.recall(&hashes)).flatten()
        {
            candidate.messages.extend_from_slice(&input.messages[len..]);
            let t0 = Instant::now();
            let mut violations = guard::validate(&candidate, format, options);
            violations.extend(guard::check_compaction(input, &candidate, format));
            report.timings.guard_ms += ms(t0);
            let tokens = counter.count_conversation(&candidate);
            if violations.is_empty() && tokens < tokens_before {
                report.notes.push(format!(
                    "continued from the remembered compaction of the first {len} messages ({} new)",
                    input.messages.len() - len
                ));
                tokens_now = tokens;
                report.continued_from = Some(len);
                if let Some(why) = &was_degraded {
                    // The remembered prefix was made by a fallback: so is this output.
                    report
                        .notes
                        .push(format!("remembered compaction was degraded: {why}"));
                    degraded = Some(why.clone());
                }
                if tokens <= trigger {
                    self.memory
                        .remember(&hashes, &candidate, degraded.as_deref());

                    report.tokens_after = basis.to_model(tokens);
                    report.counted_after = tokens;
                    report.status = if degraded.is_some() {
                        Status::Degraded
                    } else {
                        Status::Compacted
                    };
                    report.messages_after = candidate.messages.len();
                    report.timings.total_ms = ms(started);
                    return Ok(Compacted {
                        conversation: Cow::Owned(candidate),
                        report,
                    });
                }
                current = Some(candidate);
            }
        }
        for tier in &self.tiers {
            let base = current.as_ref().unwrap_or(input);
            let t0 = Instant::now();
            let result = tier.compact(base, budget, &cx).await;
            let millis = ms(t0);
            report.timings.strategies_ms += millis;
            let mut run = TierRun {
                strategy: tier.name().to_string(),
                accepted: false,
                tokens_after: 0,
                violations: Vec::new(),
                notes: Vec::new(),
                edits: Vec::new(),
                millis,
                degraded: None,
                failed: None,
            };
            let mut compaction = match result {
                Ok(c) => c,
                Err(e) => {
                    run.notes
                        .push(format!("{} could not run: {e}", tier.name()));
                    run.failed = Some(e.to_string());
                    report.tiers.push(run);
                    continue;
                }
            };
            run.notes = compaction.notes;
            run.degraded.clone_from(&compaction.degraded);
            run.edits = compaction.edits;
            if run.edits.is_empty() {
                report.tiers.push(run);
                continue;
            }
            let settled = guard::settle(format, &mut compaction.conversation);
            run.notes.extend(settled.iter().map(ToString::to_string));
            let t0 = Instant::now();
            let mut violations = guard::validate(&compaction.conversation, format, options);
            violations.extend(guard::check_compaction(
                input,
                &compaction.conversation,
                format,
            ));
            violations.extend(guard::check_envelope(
                input,
                &compaction.conversation,
                format,
            ));
            report.timings.guard_ms += ms(t0);
            let tokens = counter.count_conversation(&compaction.conversation);
            run.tokens_after = basis.to_model(tokens);
            if !violations.is_empty() {
                tracing::warn!(
                    strategy = tier.name(),
                    violations = violations.len(),
                    "guard rejected a strategy output"
                );
                run.violations = violation_lines(&violations);
                report.tiers.push(run);
                continue;
            }
            if tokens >= tokens_now {
                run.notes.push(format!(
                    "output not smaller ({} >= {} tokens): discarded",
                    basis.to_model(tokens),
                    basis.to_model(tokens_now)
                ));
                report.tiers.push(run);
                continue;
            }
            run.accepted = true;
            if let Some(why) = compaction.degraded {
                // Why the output is degraded belongs on the report itself, not only in the tier.
                report.notes.push(why.clone());
                degraded = Some(why);
            }
            tokens_now = tokens;
            current = Some(compaction.conversation);
            report.tiers.push(run);
            if tokens_now <= budget.target {
                break;
            }
        }
        report.tokens_after = basis.to_model(tokens_now);
        report.counted_after = tokens_now;
        report.status = match &current {
            None if tokens_before > budget.limit => Status::OverBudget,
            None => Status::Unchanged,
            Some(_) if tokens_now > budget.limit => Status::OverBudget,
            Some(_) if degraded.is_some() => Status::Degraded,
            Some(_) => Status::Compacted,
        };
        if current.is_some() && tokens_now > budget.target {
            report.notes.push(format!(
                "target not reached: {} > {} tokens",
                basis.to_model(tokens_now),
                model_budget.target
            ));
        }
        report.timings.total_ms = ms(started);
        let conversation = match current {
            Some(c) => {
                if remember {
                    self.memory.remember(&hashes, &c, degraded.as_deref());
                }
                Cow::Owned(c)
            }
            None => Cow::Borrowed(input),
        };
        report.messages_after = conversation.messages.len();
        Ok(Compacted {
            conversation,
            report,
        })
    }
}

/// The model rules and learning switch of `[tokens]`.
fn calibration_of(settings: &Settings) -> Calibration {
    let t = &settings.tokens;
    Calibration::new(t.tokenizer, &t.model, t.models.clone(), t.learn)
}

/// The summary prompt: the file named by `summary.prompt_file`, else the built-in one.
fn summary_prompt(file: &str) -> Result<String, ConfigError> {
    if file.trim().is_empty() {
        return Ok(DEFAULT_PROMPT.to_string());
    }
    std::fs::read_to_string(file).map_err(|e| ConfigError::Invalid {
        key: "summary.prompt_file".into(),
        message: format!("cannot read {file}: {e}"),
    })
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::{Compaction, StrategyError};
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
}
