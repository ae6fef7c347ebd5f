//! What one compaction gives back: its output ([`Compacted`], [`SharedCompacted`]) or the
//! error that refuses its input ([`CompactError`]), and its report's figures at the start and
//! at the end.

use super::{Host, Run};
use crate::conversation::Conversation;
use crate::guard::Violation;
use crate::report::{Report, Status, Timings};
use std::borrow::Cow;
use std::sync::Arc;

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
    /// attached (`Memory::attach_written`): those items, of the output's first
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

/// The report before anything is done: the input's figures.
pub(super) fn first_report(compactor: &dyn Host, run: &Run<'_>, tokens: usize) -> Report {
    Report {
        status: Status::Unchanged,
        request: run.request,
        strategy: compactor.settings().label().to_string(),
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
        repairs: Vec::new(),
        recall: Vec::new(),
        opaque: run
            .input
            .messages
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                let what = run.format.rules().unknown_in(m)?;
                Some(crate::report::OpaqueUnit {
                    path: crate::format::block_path(run.format, run.input, i, None),
                    message: i,
                    what,
                })
            })
            .collect(),
        cost: None,
        cache_breakpoint: None,
    }
}

/// The final figures and status.
pub(super) fn finish(
    run: &Run<'_>,
    report: &mut Report,
    changed: bool,
    tokens: usize,
    degraded: bool,
) {
    report.tokens_after = run.basis.to_model(tokens);
    report.counted_after = tokens;
    report.recall = report
        .tiers
        .iter()
        .filter(|t| t.accepted)
        .flat_map(|t| t.recall.iter().cloned())
        .collect();
    report.status = run
        .targets
        .status(changed, report.counted_before, tokens, degraded);
}

/// The least share of the input's tokens a lossy edit (whole messages dropped, a span
/// summarized) must save when the output is still over the budget (issue 34: a lossy edit
/// pays for itself).
pub const LOSSY_MIN_SAVING: f64 = 0.05;

/// Why the output `best` is not taken: it is still over the budget, a tier taken dropped the
/// user's words or whole rounds ([`crate::strategy::Edit::Dropped`] /
/// [`crate::strategy::Edit::Summarized`]), and it saves less than [`LOSSY_MIN_SAVING`] of
/// `before` (counted tokens). `None` when it is taken.
pub(super) fn lossy_without_payback(
    run: &Run<'_>,
    best: &super::Best,
    report: &Report,
    before: usize,
) -> Option<String> {
    best.conversation.as_ref()?;
    if best.tokens <= run.targets.counted.limit {
        return None;
    }
    let lossy = report.tiers.iter().filter(|t| t.accepted).any(|t| {
        t.edits.iter().any(|e| {
            matches!(
                e,
                crate::strategy::Edit::Dropped { .. } | crate::strategy::Edit::Summarized { .. }
            )
        })
    });
    let saved = before.saturating_sub(best.tokens) as f64 / before.max(1) as f64;
    (lossy && saved < LOSSY_MIN_SAVING).then(|| {
        format!(
            "not compacted: still over the budget ({} > {} tokens) and dropping messages saved only {:.1}% (a lossy edit must save {:.0}%)",
            run.basis.to_model(best.tokens),
            run.targets.model.limit,
            saved * 100.0,
            LOSSY_MIN_SAVING * 100.0
        )
    })
}

/// The cost estimate of this compaction ([`crate::cost`]): the input of `before` counted
/// tokens as the client sent it, of which the first `known_input` were sent last turn when a
/// remembered compaction says so (else all but the messages from the last assistant message
/// on); the output of `after = (tokens, cached)` counted tokens, of which `cached` were sent
/// before (`None`: the input is what goes out).
pub(super) fn cost(
    run: &Run<'_>,
    prices: Option<crate::models::Prices>,
    before: usize,
    known_input: Option<usize>,
    after: Option<(usize, usize)>,
) -> crate::cost::CostEstimate {
    use crate::cost::{CostEstimate, Parts};
    let cached = known_input.unwrap_or_else(|| {
        let messages = &run.input.messages;
        let last = messages
            .iter()
            .rposition(|m| m.role == crate::conversation::Role::Assistant);
        match last {
            Some(k) => {
                let tail: usize = messages[k..]
                    .iter()
                    .map(|m| run.counter.count_message(m))
                    .sum();
                before.saturating_sub(tail)
            }
            None => 0,
        }
    });
    let client = Parts::after(before, cached);
    let forwarded = after.map_or(client, |(tokens, cached)| Parts::after(tokens, cached));
    CostEstimate::of(&run.basis, prices, forwarded, client)
}
