//! The tier loop: each tier plans on the best output so far, the guard builds and judges its
//! output, and the output is taken when it is smaller; a tier's output may be passed on to the
//! next tier before its verdict ([`Pending`]).

use super::{Best, Run, ms};
use crate::guard::{self, MessageTokens};
use crate::report::{Report, TierRun, violation_lines};
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
    let sink = crate::recall::Sink::default();
    let cx = Context {
        format: run.format,
        counter: run.counter,
        instructions,
        layout,
        tokens: per,
        recall: run.recall.map(|_| &sink),
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
            Ok(applied) => {
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
                )
            }
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
        let first = violations
            .first()
            .map(ToString::to_string)
            .unwrap_or_default();
        tracing::warn!(
            strategy = tier.name(),
            violations = violations.len(),
            first = %first,
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
    // The originals the output names by recall id are kept from now on.
    let entries = sink.take();
    if let Some(store) = run.recall {
        for e in &entries {
            store.put(e);
        }
    }
    tier_run.recall = entries.into_iter().map(|e| e.reference).collect();
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
