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
    /// attached ([`Memory::attach_written`]): those items, of the output's first
    /// `written.messages` messages.
    ///
    /// [`Memory::attach_written`]: crate::memory::Memory::attach_written
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
