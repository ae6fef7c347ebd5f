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
use crate::tokens::TokenCounter;
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
                    None => skipped.push("summary tier skipped: no LLM configured".to_string()),
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
            settings,
            counter,
            tiers,
            skipped: Vec::new(),
            memory: Memory::default(),
        }
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
    /// LLM configured`).
    pub fn skipped_tiers(&self) -> &[String] {
        &self.skipped
    }

    /// The budget: `explicit` tokens, else the configured one.
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
        let invalid = guard::validate(
            input,
            format,
            ValidateOptions {
                allow_open_tail: true,
            },
        );
        if !invalid.is_empty() {
            return Err(CompactError::InvalidInput(invalid));
        }
        let budget = self.budget(budget);
        let trigger = (budget.limit as f64 * self.settings.budget.trigger) as usize;
        let t0 = Instant::now();
        let tokens_before = self.counter.count_conversation(input);
        timings.count_ms = ms(t0);
        let mut report = Report {
            status: Status::Unchanged,
            strategy: self.settings.preset.clone(),
            format: format.as_str().into(),
            tokens_before,
            tokens_after: tokens_before,
            budget: budget.limit,
            trigger,
            target: budget.target,
            messages_before: input.messages.len(),
            messages_after: input.messages.len(),
            tiers: Vec::new(),
            continued_from: None,
            notes: Vec::new(),
            timings,
        };
        if tokens_before <= trigger {
            report.notes.push(format!(
                "under the trigger ({tokens_before} <= {trigger} tokens): nothing to do"
            ));
            report.timings.total_ms = ms(started);
            return Ok(Compacted {
                conversation: Cow::Borrowed(input),
                report,
            });
        }
        report.notes.extend(self.skipped.iter().cloned());
        let cx = Context {
            format,
            counter: self.counter.as_ref(),
            instructions,
        };
        let mut current: Option<Conversation> = None;
        let mut tokens_now = tokens_before;
        // Hysteresis across calls: continue from the remembered compaction of this history's
        // prefix, so the compacted prefix (and the provider's prompt cache) stays the same.
        let hashes = PrefixHashes::of(input, budget.limit as u64);
        let remember = self.settings.policy.remember;
        if let Some((len, mut candidate)) = remember.then(|| self.memory.recall(&hashes)).flatten()
        {
            candidate.messages.extend_from_slice(&input.messages[len..]);
            let t0 = Instant::now();
            let mut violations = guard::validate(&candidate, format, options);
            violations.extend(guard::check_compaction(input, &candidate, format));
            report.timings.guard_ms += ms(t0);
            let tokens = self.counter.count_conversation(&candidate);
            if violations.is_empty() && tokens < tokens_before {
                report.notes.push(format!(
                    "continued from the remembered compaction of the first {len} messages ({} new)",
                    input.messages.len() - len
                ));
                tokens_now = tokens;
                report.continued_from = Some(len);
                if tokens <= trigger {
                    self.memory.remember(&hashes, &candidate);

                    report.tokens_after = tokens;
                    report.status = Status::Compacted;
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
        let mut degraded = false;
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
            };
            let compaction = match result {
                Ok(c) => c,
                Err(e) => {
                    run.notes
                        .push(format!("{} could not run: {e}", tier.name()));
                    report.tiers.push(run);
                    continue;
                }
            };
            run.notes = compaction.notes;
            run.edits = compaction.edits;
            if run.edits.is_empty() {
                report.tiers.push(run);
                continue;
            }
            let t0 = Instant::now();
            let mut violations = guard::validate(&compaction.conversation, format, options);
            violations.extend(guard::check_compaction(
                input,
                &compaction.conversation,
                format,
            ));
            report.timings.guard_ms += ms(t0);
            let tokens = self.counter.count_conversation(&compaction.conversation);
            run.tokens_after = tokens;
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
                    "output not smaller ({tokens} >= {tokens_now} tokens): discarded"
                ));
                report.tiers.push(run);
                continue;
            }
            run.accepted = true;
            if let Some(why) = compaction.degraded {
                // Why the output is degraded belongs on the report itself, not only in the tier.
                degraded = true;
                report.notes.push(why);
            }
            tokens_now = tokens;
            current = Some(compaction.conversation);
            report.tiers.push(run);
            if tokens_now <= budget.target {
                break;
            }
        }
        report.tokens_after = tokens_now;
        report.status = match &current {
            None if tokens_before > budget.limit => Status::OverBudget,
            None => Status::Unchanged,
            Some(_) if tokens_now > budget.limit => Status::OverBudget,
            Some(_) if degraded => Status::Degraded,
            Some(_) => Status::Compacted,
        };
        if current.is_some() && tokens_now > budget.target {
            report.notes.push(format!(
                "target not reached: {tokens_now} > {} tokens",
                budget.target
            ));
        }
        report.timings.total_ms = ms(started);
        let conversation = match current {
            Some(c) => {
                if remember {
                    self.memory.remember(&hashes, &c);
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
