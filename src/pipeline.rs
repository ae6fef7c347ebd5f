//! The pipeline of one compaction, each step once:
//!
//! ```text
//! input -> guard::validate (the input's own faults refuse it)
//!       -> guard::Layout::of (once) and count (cached)
//!       -> policy: under the trigger? -> unchanged (borrowed, no copy)
//!       -> policy: remembered prefix?  -> continue from it (verified by the guard)
//!       -> tier 1 .. tier n            strategy plan -> guard::apply -> settle -> verify
//!                                      -> taken when smaller
//!       -> report
//! ```
//!
//! Each tier works on the output of the last taken one (with that output's layout) and the
//! run stops at the first tier that reaches the target. Every output passes
//! [`guard::validate`], [`guard::check_compaction_with`] against the original input and
//! [`guard::check_envelope`]; one that fails is not taken, and the report names the
//! violations.

use crate::config::Settings;
use crate::conversation::Conversation;
use crate::format::Format;
use crate::guard::{self, FailureRecord, Layout, MessageTokens, ValidateOptions, Violation};
use crate::memory::{Memory, PrefixHashes};
use crate::policy::{self, Targets};
use crate::report::{Report, Status, TierRun, Timings, violation_lines};
use crate::strategy::{Context, Strategy};
use crate::tokens::{ModelTokens, TokenCounter, Tokenizer};
use std::borrow::Cow;
use std::time::Instant;

/// Errors of [`Compactor::compact`](crate::Compactor::compact).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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

/// What the pipeline needs of its owner, [`crate::Compactor`] (which implements it; the
/// pipeline does not import it, so the two modules do not depend on each other).
pub(crate) trait Host: Sync {
    /// The settings in force.
    fn settings(&self) -> &Settings;
    /// Tiers of the settings that cannot run here, with the reason.
    fn skipped_tiers(&self) -> &[String];
    /// The hysteresis memory of earlier compactions.
    fn memory(&self) -> &Memory;
    /// The tiers, in the order they run.
    fn tiers(&self) -> &[Box<dyn Strategy>];
    /// The counting basis of `model` (the request body's `model`).
    fn model_tokens(&self, model: Option<&str>) -> ModelTokens;
    /// The cached counter of `tokenizer`'s vocabulary.
    fn counter_of(&self, tokenizer: Tokenizer) -> &dyn TokenCounter;
}

/// What one compaction knows of its input, computed once.
struct Run<'a> {
    input: &'a Conversation,
    layout: Layout,
    /// Counter tokens of each input message, counted once.
    tokens: MessageTokens,
    format: Format,
    options: ValidateOptions,
    counter: &'a dyn TokenCounter,
    basis: ModelTokens,
    targets: Targets,
}

impl Run<'_> {
    /// The guard's verdict on an output: provider rules, what must survive, the envelope.
    fn verify(
        &self,
        output: &Conversation,
        records: Option<&[FailureRecord]>,
        report: &mut Report,
    ) -> Vec<Violation> {
        let t0 = Instant::now();
        let mut violations = guard::validate(output, self.format, self.options);
        violations.extend(guard::check_compaction_with(
            self.input,
            &self.layout,
            output,
            self.format,
            records,
        ));
        violations.extend(guard::check_envelope(self.input, output, self.format));
        report.timings.guard_ms += ms(t0);
        violations
    }
}

/// The best output so far and why it is degraded, if it is.
struct Best {
    conversation: Option<Conversation>,
    /// Layout of `conversation` (what the next tier is given); a tier's output gets it only
    /// when a next tier runs on it (`None` until then).
    layout: Option<Layout>,
    /// Counter tokens of each message of `conversation` when a tier built it (a tier given a
    /// conversation without them counts it); `None` before.
    per: Option<MessageTokens>,
    tokens: usize,
    degraded: Option<String>,
    /// Typed failure records of `conversation` (the input has none of its own; a remembered
    /// output brings its own from the memory).
    records: Vec<FailureRecord>,
}

/// [`Compactor::compact_with`](crate::Compactor::compact_with): the steps above.
pub(crate) async fn compact<'a>(
    compactor: &dyn Host,
    input: &'a Conversation,
    format: Format,
    budget: Option<usize>,
    instructions: Option<&str>,
) -> Result<Compacted<'a>, CompactError> {
    let started = Instant::now();
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
    let layout = Layout::of(input);
    let basis = compactor.model_tokens(input.extra.get("model").and_then(|m| m.as_str()));
    // The model's per-call framing (`[tokens.models] tool_call`) joins every tool_use block's
    // count; with none configured this is the cached counter as it is.
    let framed = basis.framed(compactor.counter_of(basis.tokenizer));
    let counter: &dyn TokenCounter = &framed;
    let targets = Targets::of(&compactor.settings().budget, &basis, budget);
    let t0 = Instant::now();
    let tokens = MessageTokens::of(input, counter);
    let tokens_before = counter.count_system(input.system.as_ref())
        + counter.count_tools(input.tools())
        + tokens.tail(0);
    let run = Run {
        input,
        options: ValidateOptions {
            allow_open_tail: layout.ends_with_open_call(),
        },
        layout,
        tokens,
        format,
        counter,
        basis,
        targets,
    };
    let mut report = first_report(compactor, &run, tokens_before);
    report.timings.count_ms = ms(t0);
    if targets.untouched(tokens_before) {
        report.notes.push(format!(
            "under the trigger ({} <= {} tokens): nothing to do",
            report.tokens_before, targets.model_trigger
        ));
        report.timings.total_ms = ms(started);
        return Ok(Compacted {
            conversation: Cow::Borrowed(input),
            report,
        });
    }
    report
        .notes
        .extend(compactor.skipped_tiers().iter().cloned());
    report.skipped = compactor.skipped_tiers().to_vec();
    let mut best = Best {
        conversation: None,
        layout: None,
        per: None,
        tokens: tokens_before,
        degraded: None,
        records: Vec::new(),
    };
    let hashes = PrefixHashes::of(input, targets.model.limit as u64);
    let remember = compactor.settings().policy.remember;
    if remember
        && let Some(recalled) = policy::recall(compactor.memory(), &hashes, input)
        && continue_from(&run, recalled, &mut best, &mut report)
        && targets.untouched(best.tokens)
        && let Some(conversation) = best.conversation.take()
    {
        // Still under the trigger after the new messages: the remembered prefix is the output.
        compactor.memory().remember(
            &hashes,
            &conversation,
            best.degraded.as_deref(),
            &best.records,
        );
        finish(
            &run,
            &mut report,
            true,
            best.tokens,
            best.degraded.is_some(),
        );
        report.messages_after = conversation.messages.len();
        report.timings.total_ms = ms(started);
        return Ok(Compacted {
            conversation: Cow::Owned(conversation),
            report,
        });
    }
    for tier in compactor.tiers() {
        let tier_run = run_tier(&run, tier.as_ref(), instructions, &mut best, &mut report).await;
        report.tiers.push(tier_run);
        if best.conversation.is_some() && targets.reached(best.tokens) {
            break;
        }
    }
    finish(
        &run,
        &mut report,
        best.conversation.is_some(),
        best.tokens,
        best.degraded.is_some(),
    );
    if best.conversation.is_some() && !targets.reached(best.tokens) {
        report.notes.push(format!(
            "target not reached: {} > {} tokens",
            run.basis.to_model(best.tokens),
            targets.model.target
        ));
    }
    report.timings.total_ms = ms(started);
    let conversation = match best.conversation {
        Some(c) => {
            if remember {
                compactor
                    .memory()
                    .remember(&hashes, &c, best.degraded.as_deref(), &best.records);
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

/// The report before anything is done: the input's figures.
fn first_report(compactor: &dyn Host, run: &Run<'_>, tokens: usize) -> Report {
    Report {
        status: Status::Unchanged,
        strategy: compactor.settings().preset.clone(),
        format: run.format.as_str().into(),
        tokens_before: run.basis.to_model(tokens),
        tokens_after: run.basis.to_model(tokens),
        counted_before: tokens,
        counted_after: tokens,
        counting: run.basis.clone(),
        budget: run.targets.model.limit,
        trigger: run.targets.model_trigger,
        target: run.targets.model.target,
        messages_before: run.input.messages.len(),
        messages_after: run.input.messages.len(),
        tiers: Vec::new(),
        continued_from: None,
        notes: Vec::new(),
        skipped: Vec::new(),
        timings: Timings::default(),
    }
}

/// Takes the remembered compaction when the guard accepts it and it is smaller than the input;
/// returns whether it was taken.
fn continue_from(
    run: &Run<'_>,
    recalled: policy::Recalled,
    best: &mut Best,
    report: &mut Report,
) -> bool {
    let violations = {
        let t0 = Instant::now();
        let mut v = guard::validate(&recalled.conversation, run.format, run.options);
        v.extend(guard::check_compaction_with(
            run.input,
            &run.layout,
            &recalled.conversation,
            run.format,
            Some(recalled.failures.as_slice()),
        ));
        report.timings.guard_ms += ms(t0);
        v
    };
    let tokens = run.counter.count_conversation(&recalled.conversation);
    if !violations.is_empty() || !run.targets.takes(tokens, best.tokens) {
        return false;
    }
    let len = recalled.len;
    report.notes.push(format!(
        "continued from the remembered compaction of the first {len} messages ({} new)",
        run.input.messages.len() - len
    ));
    report.continued_from = Some(len);
    if let Some(why) = recalled.degraded {
        // The remembered prefix was made by a fallback: so is this output.
        report
            .notes
            .push(format!("remembered compaction was degraded: {why}"));
        best.degraded = Some(why);
    }
    best.tokens = tokens;
    best.records = recalled.failures;
    best.layout = Some(Layout::of(&recalled.conversation));
    best.conversation = Some(recalled.conversation);
    true
}

/// Runs one tier on the best output so far (or the input) and takes its output when the guard
/// accepts it and it is smaller.
async fn run_tier(
    run: &Run<'_>,
    tier: &dyn Strategy,
    instructions: Option<&str>,
    best: &mut Best,
    report: &mut Report,
) -> TierRun {
    if best.layout.is_none() {
        best.layout = best.conversation.as_ref().map(Layout::of);
    }
    let base = best.conversation.as_ref().unwrap_or(run.input);
    let layout = best.layout.as_ref().unwrap_or(&run.layout);
    let counted;
    let per = match (&best.conversation, &best.per) {
        (None, _) => &run.tokens,
        (Some(_), Some(per)) => per,
        (Some(c), None) => {
            counted = MessageTokens::of(c, run.counter);
            &counted
        }
    };
    let cx = Context {
        format: run.format,
        counter: run.counter,
        instructions,
        layout,
        tokens: per,
    };
    let t0 = Instant::now();
    let result = tier.compact(base, run.targets.counted, &cx).await;
    let millis = ms(t0);
    report.timings.strategies_ms += millis;
    let mut tier_run = TierRun {
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
    let compaction = match result {
        Ok(c) => c,
        Err(e) => {
            tier_run
                .notes
                .push(format!("{} could not run: {e}", tier.name()));
            tier_run.failed = Some(e.to_string());
            return tier_run;
        }
    };
    tier_run.notes = compaction.notes;
    tier_run.degraded.clone_from(&compaction.degraded);
    tier_run.edits = compaction.edits;
    if tier_run.edits.is_empty() {
        return tier_run;
    }
    // The guard builds the output of the plan (a faulty plan is refused, naming the edit).
    if compaction.plan.is_empty() {
        return tier_run;
    }
    let (mut output, records, unchanged) =
        match guard::apply(base, layout, compaction.plan, Some(&best.records)) {
            Ok(applied) => (
                applied.conversation,
                applied.records.unwrap_or_default(),
                applied.unchanged,
            ),
            Err(e) => {
                tracing::warn!(strategy = tier.name(), error = %e, "guard refused a plan");
                tier_run.violations = vec![format!("plan refused: {e}")];
                return tier_run;
            }
        };
    let settled = guard::settle(run.format, &mut output);
    tier_run
        .notes
        .extend(settled.iter().map(ToString::to_string));
    let violations = run.verify(&output, Some(&records), report);
    // A message copied unchanged keeps its count (`settle` may still have edited any message,
    // then each is counted).
    let out_per = MessageTokens::reusing(&output, run.counter, |k| {
        unchanged
            .get(k)
            .copied()
            .flatten()
            .filter(|_| settled.is_empty())
            .and_then(|i| per.blocks(i))
    });
    let tokens = run.counter.count_system(output.system.as_ref())
        + run.counter.count_tools(output.tools())
        + out_per.tail(0);
    tier_run.tokens_after = run.basis.to_model(tokens);
    if !violations.is_empty() {
        tracing::warn!(
            strategy = tier.name(),
            violations = violations.len(),
            "guard rejected a strategy output"
        );
        tier_run.violations = violation_lines(&violations);
        return tier_run;
    }
    if !run.targets.takes(tokens, best.tokens) {
        tier_run.notes.push(format!(
            "output not smaller ({} >= {} tokens): discarded",
            run.basis.to_model(tokens),
            run.basis.to_model(best.tokens)
        ));
        return tier_run;
    }
    tier_run.accepted = true;
    if let Some(why) = compaction.degraded {
        // Why the output is degraded belongs on the report itself, not only in the tier.
        report.notes.push(why.clone());
        best.degraded = Some(why);
    }
    best.tokens = tokens;
    best.records = records;
    best.layout = None;
    best.per = Some(out_per);
    best.conversation = Some(output);
    tier_run
}

/// The final figures and status.
fn finish(run: &Run<'_>, report: &mut Report, changed: bool, tokens: usize, degraded: bool) {
    report.tokens_after = run.basis.to_model(tokens);
    report.counted_after = tokens;
    report.status = run
        .targets
        .status(changed, report.counted_before, tokens, degraded);
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}
