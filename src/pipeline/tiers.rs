//! The tier loop: each tier plans on the best output so far, the guard builds and judges its
//! output, and the output is taken when it is smaller; a tier's output may be passed on to the
//! next tier before its verdict ([`Pending`]).

use super::output::{self, finish};
use super::{Best, Run, Shared, ms};
use crate::format::Format;
use crate::guard::{self, MessageTokens};
use crate::report::{Refusal, Report, TierRun};
use crate::strategy::{Context, Strategy};
use std::time::Instant;

/// A tier's output taken as the next tier's input before the guard has judged it. It is
/// judged only if it ends up the output: a later tier's output that the guard accepts is
/// checked against the original input on its own, so the one it was built from never needs
/// its own verdict (the first tier of the default preset rarely reaches the target alone, and
/// a verdict on its whole output was a tenth of a warm compaction). When the later tiers'
/// outputs are not taken, [`settle_pending`] judges it; a refused one gives way to `prior`,
/// and the tiers after it run again on that.
pub(super) struct Pending {
    /// Index of the tier's run in the report's tiers.
    tier: usize,
    /// The best output before the tier's (its `pending` is `None`).
    prior: Box<Best>,
    /// The note the tier added to the report's notes (why it is degraded), if it did.
    note: Option<String>,
}

/// Runs `tiers` in order on the best output so far, each run added to the report, until one
/// reaches the target. `defer`: a tier with a tier after it may pass its output on unjudged
/// ([`Pending`]).
pub(super) async fn run_tiers(
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
pub(super) fn settle_pending(run: &Run<'_>, best: &mut Best, report: &mut Report) -> Option<usize> {
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
        t.refused = Some(Refusal::Output(violations));
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
/// The steps: plan ([`Strategy::compact`]), build ([`build`]: `guard::apply`, settle, count),
/// judge and take ([`take`]).
async fn run_tier(
    run: &Run<'_>,
    tier: &dyn Strategy,
    instructions: Option<&str>,
    more: bool,
    best: &mut Best,
    report: &mut Report,
) -> TierRun {
    if best.layout.is_none() {
        best.layout = best.conversation.as_ref().map(|c| run.layout_of(c));
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
        recall: run.recall.is_some(),
    };
    let t0 = Instant::now();
    let result = tier.compact(base, run.targets.counted, &cx).await;
    let millis = ms(t0);
    report.timings.strategies_ms += millis;
    let mut tier_run = TierRun {
        strategy: tier.name().to_string(),
        accepted: false,
        tokens_after: 0,
        refused: None,
        notes: Vec::new(),
        edits: Vec::new(),
        millis,
        degraded: None,
        failed: None,
        recall: Vec::new(),
        carried: Default::default(),
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
    // The guard builds the output of the plan (a faulty plan is refused, naming the edit) and
    // says what it applied (the run's edits).
    if compaction.plan.is_empty() {
        return tier_run;
    }
    let tier_in = TierInput {
        base,
        layout,
        per,
        records: &best.records,
    };
    let Some(built) = build(run, tier.name(), tier_in, compaction.plan, &mut tier_run) else {
        return tier_run;
    };
    take(
        run,
        (tier.name(), more),
        built,
        compaction.degraded,
        best,
        report,
        &mut tier_run,
    );
    tier_run
}

/// What a tier worked on: the conversation, its layout, its per-message counts and its
/// failure records.
#[derive(Clone, Copy)]
struct TierInput<'b> {
    base: &'b crate::conversation::Conversation,
    layout: &'b guard::Layout,
    per: &'b MessageTokens,
    records: &'b [guard::FailureRecord],
}

/// A tier's output as built by the guard, with its facts and its count.
struct Built {
    output: crate::conversation::Conversation,
    records: Vec<guard::FailureRecord>,
    /// The originals the output names by recall id ([`guard::Applied::recall`]).
    recall: Vec<crate::recall::Entry>,
    per: MessageTokens,
    /// Counted tokens of the whole output (system prompt and tools included).
    tokens: usize,
}

/// Builds the output of `plan` on the tier's input ([`guard::apply`], then [`guard::settle`])
/// and counts it; the tier's run gets what the drop carried, the settle notes and the count.
/// `None` when the guard refuses the plan (the run names why).
fn build(
    run: &Run<'_>,
    name: &str,
    tier_in: TierInput<'_>,
    plan: Vec<guard::UnitEdit>,
    tier_run: &mut TierRun,
) -> Option<Built> {
    let TierInput {
        base,
        layout,
        per,
        records,
    } = tier_in;
    let (mut output, records, unchanged, recall) =
        match guard::apply(base, layout, plan, Some(records)) {
            Ok(applied) => {
                tier_run.edits = applied.edits;
                tier_run.carried = crate::report::Carried {
                    kept: applied
                        .carried
                        .kept
                        .into_iter()
                        .map(|(message, because)| crate::report::KeptMessage { message, because })
                        .collect(),
                    system_from: applied.carried.system_from,
                    context: applied
                        .carried
                        .context
                        .into_iter()
                        .map(|(message, tag)| crate::report::CarriedContext { message, tag })
                        .collect(),
                };
                (
                    applied.conversation,
                    applied.records.unwrap_or_default(),
                    applied.unchanged,
                    applied.recall,
                )
            }
            Err(e) => {
                tracing::warn!(strategy = name, error = %e, "guard refused a plan");
                tier_run.refused = Some(Refusal::Plan(e));
                return None;
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
    Some(Built {
        output,
        records,
        recall,
        per: out_per,
        tokens,
    })
}

/// Judges a tier's built output (now, or later when it is passed on to the next tier
/// unjudged, [`Pending`]) and takes it as the best output when the guard accepts it and it is
/// smaller; the originals it names by recall id ([`Built::recall`]) are then kept.
fn take(
    run: &Run<'_>,
    (name, more): (&str, bool),
    built: Built,
    degraded: Option<String>,
    best: &mut Best,
    report: &mut Report,
    tier_run: &mut TierRun,
) {
    let Built {
        output,
        records,
        recall: entries,
        per: out_per,
        tokens,
    } = built;
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
        let first = violations
            .first()
            .map(ToString::to_string)
            .unwrap_or_default();
        tracing::warn!(
            strategy = name,
            violations = violations.len(),
            first = %first,
            "guard rejected a strategy output"
        );
        tier_run.refused = Some(Refusal::Output(violations));
        return;
    }
    if !run.targets.takes(tokens, best.tokens) {
        tier_run.notes.push(format!(
            "output not smaller ({} >= {} tokens): discarded",
            run.basis.to_model(tokens),
            run.basis.to_model(best.tokens)
        ));
        return;
    }
    tier_run.accepted = true;
    // The originals the output names by recall id are kept from now on.
    if let Some(store) = run.recall {
        for e in &entries {
            store.put(e);
        }
    }
    tier_run.recall = entries.into_iter().map(|e| e.reference).collect();
    let note = degraded.clone();
    let taken = Best {
        conversation: Some(output),
        layout: None,
        per: Some(out_per),
        tokens,
        degraded: degraded.or_else(|| best.degraded.clone()),
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
}

/// Runs the tiers (again after a late refusal, [`settle_pending`]), lets a lossy output
/// without payback go, marks the kept prefix's breakpoint and finishes the report's figures.
pub(super) async fn compact_afresh(
    shared: &Shared<'_>,
    run: &Run<'_>,
    instructions: Option<&str>,
    best: &mut Best,
    known_input: Option<usize>,
    report: &mut Report,
) {
    let (input, tokens_before) = (shared.input, shared.tokens_before);
    let tiers = shared.compactor.tiers();
    run_tiers(run, tiers, instructions, true, best, report).await;
    if let Some(refused) = settle_pending(run, best, report) {
        // The tiers after a refused output ran on it: they run again on the output before it
        // (judged at once). `report.tiers` holds one run per tier so far, in tier order.
        let after = tiers.get(refused + 1..).unwrap_or_default();
        run_tiers(run, after, instructions, false, best, report).await;
    }
    if let Some(why) = output::lossy_without_payback(run, best, report, tokens_before) {
        // Still over the budget, and the words or rounds it dropped bought too little: the
        // request goes as it is (status over_budget, the reason in the notes).
        report.notes.push(why);
        best.conversation = None;
        best.tokens = tokens_before;
    }
    if run.format == Format::Anthropic
        && let Some(c) = best.conversation.as_mut()
        && let Some(site) = guard::cache::mark_kept_prefix(input, c)
    {
        // The prefix a re-compaction keeps is read from the cache, not written again.
        report.cache_breakpoint = Some(site.to_string());
    }
    finish(
        run,
        report,
        best.conversation.is_some(),
        best.tokens,
        best.degraded.is_some(),
    );
    if best.conversation.is_some() && !run.targets.reached(best.tokens) {
        report.notes.push(format!(
            "target not reached: {} > {} tokens",
            run.basis.to_model(best.tokens),
            report.target
        ));
    }
    // Compacted afresh: the tools and system prompt stay cached, the messages are written.
    let counter = run.counter;
    let fixed = counter.count_system(input.system.as_ref()) + counter.count_tools(input.tools());
    let after = best.conversation.as_ref().map(|_| (best.tokens, fixed));
    report.cost = Some(output::cost(
        run,
        shared.prices,
        tokens_before,
        known_input,
        after,
    ));
    report.timings.total_ms = ms(shared.started);
}
