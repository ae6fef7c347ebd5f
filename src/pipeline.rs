//! The pipeline of one compaction, each step once:
//!
//! ```text
//! input -> guard::validate (the input's own faults refuse it)
//!       -> guard::Layout::of (once) and count (cached)
//!       -> policy: under the trigger? -> unchanged (borrowed, no copy)
//!       -> policy: remembered prefix?  -> continue from it (verified by the guard from the
//!                                         prefix's junction: only the new messages are
//!                                         validated, checked and counted)
//!       -> tier 1 .. tier n            strategy plan -> guard::apply -> settle -> verify
//!                                      -> taken when smaller
//!       -> verify the output taken last, if it was passed on unjudged (refused: the
//!          tiers after it run again on the output before it)
//!       -> report
//! ```
//!
//! Each tier works on the output of the last taken one (with that output's layout) and the
//! run stops at the first tier that reaches the target. Every output returned passes
//! [`guard::validate`], [`guard::check_compaction_with`] against the original input and
//! [`guard::check_envelope`]; one that fails is not taken, and the report names the
//! violations. A tier's output that is smaller but short of the target, with a tier after it,
//! is passed on before that verdict and judged only if it ends up the output.

use crate::config::Settings;
use crate::conversation::Conversation;
use crate::format::Format;
use crate::guard::{
    self, FailureRecord, Junction, Layout, MessageTokens, ValidateOptions, Violation,
};
use crate::memory::{Continuation, Memory, Predecessor, PrefixHashes};
use crate::policy::{self, Targets};
use crate::report::{Report, Status, TierRun, Timings, violation_lines};
use crate::strategy::{Context, Strategy};
use crate::tokens::{ModelTokens, TokenCounter, Tokenizer};
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
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

/// A compaction result whose output is shared with the compaction memory (no copy is made to
/// remember it): the service writes the output's bytes from it and lets it go, so that the
/// next turn of the history takes it out of the memory without copying it either.
#[derive(Debug)]
pub struct SharedCompacted {
    /// The output: `None` when nothing changed (the input is the output).
    pub conversation: Option<Arc<Conversation>>,
    /// What happened.
    pub report: Report,
    /// When the output continues a remembered output whose message items were written and
    /// attached ([`Memory::attach_written`]): those items, of the output's first
    /// `written.messages` messages.
    pub written: Option<Arc<crate::memory::Written>>,
}

impl SharedCompacted {
    /// As a [`Compacted`] of `input`: the output copied when the memory shares it.
    pub fn into_compacted(self, input: &Conversation) -> Compacted<'_> {
        Compacted {
            conversation: match self.conversation {
                None => Cow::Borrowed(input),
                Some(c) => Cow::Owned(Arc::try_unwrap(c).unwrap_or_else(|c| (*c).clone())),
            },
            report: self.report,
        }
    }
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
    /// The input's layout, computed when first needed (a continuation that stays under the
    /// trigger needs none).
    layout: OnceLock<Layout>,
    /// Counter tokens of each input message, counted once when first needed (a continuation
    /// counts only its new messages).
    tokens: OnceLock<MessageTokens>,
    format: Format,
    options: ValidateOptions,
    counter: &'a dyn TokenCounter,
    basis: ModelTokens,
    targets: Targets,
}

impl Run<'_> {
    /// The input's layout ([`Layout::of`], once).
    fn layout(&self) -> &Layout {
        self.layout.get_or_init(|| Layout::of(self.input))
    }

    /// Counter tokens of each input message ([`MessageTokens::of`], once).
    fn tokens(&self) -> &MessageTokens {
        self.tokens
            .get_or_init(|| MessageTokens::of(self.input, self.counter))
    }

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
            self.layout(),
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
    /// When `conversation` is a tier's output taken without the guard's verdict yet (see
    /// [`Pending`]): that tier and the best output before it.
    pending: Option<Pending>,
}

/// A tier's output taken as the next tier's input before the guard has judged it. It is
/// judged only if it ends up the output: a later tier's output that the guard accepts is
/// checked against the original input on its own, so the one it was built from never needs
/// its own verdict (the first tier of the default preset rarely reaches the target alone, and
/// a verdict on its whole output was a tenth of a warm compaction). When the later tiers'
/// outputs are not taken, [`settle_pending`] judges it; a refused one gives way to `prior`,
/// and the tiers after it run again on that.
struct Pending {
    /// Index of the tier's run in the report's tiers.
    tier: usize,
    /// The best output before the tier's (its `pending` is `None`).
    prior: Box<Best>,
    /// The note the tier added to the report's notes (why it is degraded), if it did.
    note: Option<String>,
}

/// [`Compactor::compact_with`](crate::Compactor::compact_with): the steps above.
pub(crate) async fn compact<'a>(
    compactor: &dyn Host,
    input: &'a Conversation,
    format: Format,
    budget: Option<usize>,
    instructions: Option<&str>,
) -> Result<Compacted<'a>, CompactError> {
    let shared = compact_shared(compactor, input, format, budget, instructions, None).await?;
    Ok(shared.into_compacted(input))
}

/// The steps above, the output shared with the memory. `given`: the input's prefix hashes
/// when the caller has them (the proxy extends last turn's, [`PrefixHashes::extended`]);
/// used when made under this budget's tag and covering every input message, else the input
/// is hashed here.
pub(crate) async fn compact_shared(
    compactor: &dyn Host,
    input: &Conversation,
    format: Format,
    budget: Option<usize>,
    instructions: Option<&str>,
    given: Option<&PrefixHashes>,
) -> Result<SharedCompacted, CompactError> {
    let started = Instant::now();
    let basis = compactor.model_tokens(input.extra.get("model").and_then(|m| m.as_str()));
    // The model's per-call framing (`[tokens.models] tool_call`) joins every tool_use block's
    // count; with none configured this is the cached counter as it is.
    let framed = basis.framed(compactor.counter_of(basis.tokenizer));
    let counter: &dyn TokenCounter = &framed;
    let targets = Targets::of(&compactor.settings().budget, &basis, budget);
    let remember = compactor.settings().policy.remember;
    // Hysteresis: the remembered compaction of the longest remembered prefix, looked up first
    // so that the input's validation and count start from that prefix's junction.
    let tag = targets.model.limit as u64;
    let hashes: Option<Cow<'_, PrefixHashes>> = remember.then(|| match given {
        Some(h) if h.tag() == tag && h.messages() == input.messages.len() => Cow::Borrowed(h),
        _ => Cow::Owned(PrefixHashes::of(input, tag)),
    });
    let hashes = hashes.as_deref();
    // Taken out of the memory: every way out below puts it back or remembers it again.
    let recalled = hashes.and_then(|h| policy::recall(compactor.memory(), h, input));
    let known = recalled.as_ref().and_then(|r| {
        r.continuation
            .clone()
            .filter(|c| c.basis == basis && c.input.messages() == r.len)
            .map(|c| (r.len, c))
    });
    let input_options = ValidateOptions {
        allow_open_tail: true,
    };
    let (mut invalid, input_junction) = match known
        .as_ref()
        .and_then(|(_, c)| guard::validate_continuation(input, &c.input, format, input_options))
    {
        Some((violations, junction)) => (violations, Some(junction)),
        None => (guard::validate(input, format, input_options), None),
    };
    // A fault every output repairs (surplus cache_control) does not refuse the input.
    invalid.retain(|v| !v.kind.is_repairable());
    if !invalid.is_empty() {
        if let (Some(r), Some(h)) = (recalled, hashes) {
            r.put_back(compactor.memory(), h);
        }
        return Err(CompactError::InvalidInput(invalid));
    }
    let layout = OnceLock::new();
    // Whether the input ends inside a tool loop: from the junction on when continuing (no
    // reference beyond call / result pairs, so the last exchange is found there), else from
    // the layout.
    let open_tail = match (&known, &input_junction) {
        (Some((_, c)), Some(_)) => c.input.last_exchange(input).is_some_and(|e| e.open),
        _ => layout
            .get_or_init(|| Layout::of(input))
            .ends_with_open_call(),
    };
    let run = Run {
        input,
        options: ValidateOptions {
            allow_open_tail: open_tail,
        },
        layout,
        tokens: OnceLock::new(),
        format,
        counter,
        basis,
        targets,
    };
    let t0 = Instant::now();
    // A continuation: the remembered prefix's count plus the new messages' (the count of a
    // request is the sum of its system prompt's, its tools' and its messages' counts).
    let tokens_before = match (&known, &input_junction) {
        (Some((len, c)), Some(_)) => {
            c.input_tokens
                + input.messages[*len..]
                    .iter()
                    .map(|m| counter.count_message(m))
                    .sum::<usize>()
        }
        // The count of a request is its system prompt's, its tools' and its messages' (each
        // message counted once, kept for the tiers).
        _ => {
            counter.count_system(input.system.as_ref())
                + counter.count_tools(input.tools())
                + run.tokens().tail(0)
        }
    };
    let mut report = first_report(compactor, &run, tokens_before);
    report.timings.count_ms = ms(t0);
    if targets.untouched(tokens_before) {
        report.notes.push(format!(
            "under the trigger ({} <= {} tokens): nothing to do",
            report.tokens_before, targets.model_trigger
        ));
        report.timings.total_ms = ms(started);
        if let (Some(r), Some(h)) = (recalled, hashes) {
            r.put_back(compactor.memory(), h);
        }
        return Ok(SharedCompacted {
            conversation: None,
            report,
            written: None,
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
        pending: None,
    };
    // The output junction of a continuation that was taken.
    let mut continued: Option<Junction> = None;
    // The remembered compaction a taken continuation continues.
    let mut predecessor: Option<Predecessor> = None;
    // The remembered output's written items, for a continuation taken.
    let mut written = None;
    if let Some(mut recalled) = recalled {
        let items = recalled.written.take();
        match continue_from(
            &run,
            recalled,
            known.as_ref().map(|(_, c)| c.as_ref()),
            &mut best,
            &mut continued,
            &mut report,
        ) {
            Ok(p) => {
                predecessor = Some(p);
                written = items;
            }
            Err(recalled) => {
                if let Some(h) = hashes {
                    (*recalled).put_back(compactor.memory(), h);
                }
            }
        }
    }
    if predecessor.is_some()
        && targets.untouched(best.tokens)
        && let Some(conversation) = best.conversation.take()
    {
        // Still under the trigger after the new messages: the remembered prefix is the output.
        let conversation = Arc::new(conversation);
        if let Some(hashes) = hashes {
            let input = input_junction.unwrap_or_else(|| Junction::of(input, format));
            let output = continued.unwrap_or_else(|| Junction::of(&conversation, format));
            remember_output(
                compactor,
                hashes,
                &run,
                tokens_before,
                &best,
                &conversation,
                (input, output),
                predecessor,
            );
        }
        finish(
            &run,
            &mut report,
            true,
            best.tokens,
            best.degraded.is_some(),
        );
        report.messages_after = conversation.messages.len();
        report.timings.total_ms = ms(started);
        return Ok(SharedCompacted {
            conversation: Some(conversation),
            report,
            written: written.take(),
        });
    }
    // Continued but over the trigger: the tiers compact the continuation afresh and what
    // they make is remembered for the whole input; the compaction it continued (taken out of
    // the memory) is not put back: the history has grown past it and its prefix is no longer
    // what is sent (keeping it held a stale whole output per crossing, docs/service.md).
    drop(predecessor);
    if let Some(c) = &best.conversation
        && best.layout.is_none()
    {
        // Continued but over the trigger: the tiers work on the continuation's layout.
        best.layout = Some(Layout::of(c));
    }
    let tiers = compactor.tiers();
    run_tiers(&run, tiers, instructions, true, &mut best, &mut report).await;
    if let Some(refused) = settle_pending(&run, &mut best, &mut report) {
        // The tiers after a refused output ran on it: they run again on the output before it
        // (judged at once). `report.tiers` holds one run per tier so far, in tier order.
        let after = tiers.get(refused + 1..).unwrap_or_default();
        run_tiers(&run, after, instructions, false, &mut best, &mut report).await;
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
    let conversation = match best.conversation.take() {
        Some(c) => {
            let c = Arc::new(c);
            if let Some(hashes) = hashes {
                // The output junction of the continuation when no tier replaced it.
                let output = continued
                    .filter(|_| report.tiers.iter().all(|t| !t.accepted))
                    .unwrap_or_else(|| Junction::of(&c, format));
                let input = input_junction
                    .unwrap_or_else(|| Junction::of_laid_out(input, format, run.layout()));
                remember_output(
                    compactor,
                    hashes,
                    &run,
                    tokens_before,
                    &best,
                    &c,
                    (input, output),
                    None,
                );
            }
            Some(c)
        }
        None => None,
    };
    report.messages_after = conversation
        .as_ref()
        .map_or(input.messages.len(), |c| c.messages.len());
    Ok(SharedCompacted {
        conversation,
        report,
        written: None,
    })
}

/// Remembers `output` (the best output, of `best.tokens` counted tokens) as the compaction of
/// the input hashed in `hashes` (`input_tokens` counted tokens), with the junctions (input's,
/// output's) a continuation of it starts from, and the compaction it continues (remembered
/// again as a view of its first messages).
#[allow(clippy::too_many_arguments)]
fn remember_output(
    compactor: &dyn Host,
    hashes: &PrefixHashes,
    run: &Run<'_>,
    input_tokens: usize,
    best: &Best,
    output: &Arc<Conversation>,
    (input_junction, output_junction): (Junction, Junction),
    predecessor: Option<Predecessor>,
) {
    let continuation = Continuation {
        basis: run.basis.clone(),
        input_tokens,
        output_tokens: best.tokens,
        input: input_junction,
        output: output_junction,
    };
    compactor.memory().remember_shared(
        hashes,
        output,
        best.degraded.as_deref(),
        &best.records,
        continuation,
        predecessor,
    );
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
/// returns what it continues when taken, and gives it back when not. With what continuing needs (`known`, of the same counting
/// basis) only the junction and the new messages are validated, checked and counted
/// ([`guard::validate_continuation`], [`guard::check_continuation`]), and `continued` is set to
/// the output's new junction; else the continuation is validated, checked and counted whole.
fn continue_from(
    run: &Run<'_>,
    recalled: policy::Recalled,
    known: Option<&Continuation>,
    best: &mut Best,
    continued: &mut Option<Junction>,
    report: &mut Report,
) -> Result<Predecessor, Box<policy::Recalled>> {
    let len = recalled.len;
    let conversation = &recalled.conversation;
    let t0 = Instant::now();
    let incremental = known.and_then(|c| {
        let (mut v, junction) =
            guard::validate_continuation(conversation, &c.output, run.format, run.options)?;
        v.extend(guard::check_continuation(
            run.input,
            len,
            &c.input,
            conversation,
        )?);
        Some((v, junction, c.output_tokens))
    });
    let (violations, tokens) = match incremental {
        Some((violations, junction, output_tokens)) => {
            let tokens = output_tokens
                + run.input.messages[len..]
                    .iter()
                    .map(|m| run.counter.count_message(m))
                    .sum::<usize>();
            *continued = Some(junction);
            (violations, tokens)
        }
        None => {
            let mut v = guard::validate(conversation, run.format, run.options);
            v.extend(guard::check_compaction_with(
                run.input,
                run.layout(),
                conversation,
                run.format,
                Some(recalled.failures.as_slice()),
            ));
            (v, run.counter.count_conversation(conversation))
        }
    };
    report.timings.guard_ms += ms(t0);
    if !violations.is_empty() || !run.targets.takes(tokens, best.tokens) {
        *continued = None;
        return Err(Box::new(recalled));
    }
    let predecessor = recalled.predecessor();
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
    // The tiers that may follow compute its layout (none when it stays under the trigger).
    best.layout = None;
    // Its messages are counted by the first tier that runs on it.
    best.per = None;
    best.conversation = Some(recalled.conversation);
    Ok(predecessor)
}

/// Runs `tiers` in order on the best output so far, each run added to the report, until one
/// reaches the target. `defer`: a tier with a tier after it may pass its output on unjudged
/// ([`Pending`]).
async fn run_tiers(
    run: &Run<'_>,
    tiers: &[Box<dyn Strategy>],
    instructions: Option<&str>,
    defer: bool,
    best: &mut Best,
    report: &mut Report,
) {
    for (i, tier) in tiers.iter().enumerate() {
        let more = defer && i + 1 < tiers.len();
        let tier_run = run_tier(run, tier.as_ref(), instructions, more, best, report).await;
        report.tiers.push(tier_run);
        if best.conversation.is_some() && run.targets.reached(best.tokens) {
            break;
        }
    }
}

/// Gives the pending output (see [`Pending`]) the guard's verdict: kept when it passes, else
/// the best output before it comes back, its tier's run names the violations, and the index
/// of that run is returned.
fn settle_pending(run: &Run<'_>, best: &mut Best, report: &mut Report) -> Option<usize> {
    let pending = best.pending.take()?;
    let output = best.conversation.as_ref()?;
    let violations = run.verify(output, Some(&best.records), report);
    if violations.is_empty() {
        return None;
    }
    tracing::warn!(
        violations = violations.len(),
        "guard rejected a strategy output"
    );
    if let Some(t) = report.tiers.get_mut(pending.tier) {
        t.accepted = false;
        t.violations = violation_lines(&violations);
    }
    if let Some(note) = pending.note
        && let Some(at) = report.notes.iter().position(|n| *n == note)
    {
        report.notes.remove(at);
    }
    *best = *pending.prior;
    Some(pending.tier)
}

/// Runs one tier on the best output so far (or the input) and takes its output when the guard
/// accepts it and it is smaller. With `more` tiers after it, an output that is smaller but
/// does not reach the target is taken for the next tier without a verdict yet ([`Pending`]).
async fn run_tier(
    run: &Run<'_>,
    tier: &dyn Strategy,
    instructions: Option<&str>,
    more: bool,
    best: &mut Best,
    report: &mut Report,
) -> TierRun {
    if best.layout.is_none() {
        best.layout = best.conversation.as_ref().map(Layout::of);
    }
    let base = best.conversation.as_ref().unwrap_or(run.input);
    let layout = best.layout.as_ref().unwrap_or_else(|| run.layout());
    let counted;
    let per = match (&best.conversation, &best.per) {
        (None, _) => run.tokens(),
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
    // Judged now unless it is taken for the next tier only (at most one output waits).
    let defer = more
        && best.pending.is_none()
        && !run.targets.reached(tokens)
        && run.targets.takes(tokens, best.tokens);
    let violations = if defer {
        Vec::new()
    } else {
        run.verify(&output, Some(&records), report)
    };
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
    let note = compaction.degraded.clone();
    let taken = Best {
        conversation: Some(output),
        layout: None,
        per: Some(out_per),
        tokens,
        degraded: compaction.degraded.or_else(|| best.degraded.clone()),
        records,
        pending: None,
    };
    let prior = std::mem::replace(best, taken);
    if let Some(why) = &note {
        // Why the output is degraded belongs on the report itself, not only in the tier.
        report.notes.push(why.clone());
    }
    // A verdict on this output settles the one it was built from (checked against the
    // original input, it stands on its own); a deferred one keeps what it would give way to.
    if defer {
        best.pending = Some(Pending {
            tier: report.tiers.len(),
            prior: Box::new(prior),
            note,
        });
    }
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

#[cfg(test)]
mod tests {
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
}
