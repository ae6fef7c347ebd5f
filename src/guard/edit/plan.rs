//! What a strategy's plan is made of: [`UnitEdit`]s, and the [`SummaryParts`] and [`Marker`]
//! that stand for a span it drops.

use super::image::ImageRepair;
use crate::guard::write::{Capped, Cleared, Marker};

/// One edit, in units the guard knows. Indices are message / block indices of the input the
/// strategy was given.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum UnitEdit {
    /// A block capped by the guard's writer ([`crate::guard::write::cap`]: head + tail with
    /// a truncation mark, or [`crate::guard::write::clear_input`]: a call's long input
    /// strings cleared), at the indices it records. A tool result is marked
    /// [`Rewrite::Capped`] in the output; one already rewritten is refused
    /// ([`PlanError::Rewritten`]).
    ///
    /// [`Rewrite::Capped`]: crate::conversation::Rewrite::Capped
    /// [`PlanError::Rewritten`]: super::PlanError::Rewritten
    Cap(Capped),
    /// A tool_result's content replaced by the guard's placeholder
    /// ([`crate::guard::write::clear`]); id, `is_error` and outcome unchanged. Marked
    /// [`Rewrite::Cleared`] in the output; a result already cleared is refused
    /// ([`PlanError::Rewritten`]), a capped one may be cleared.
    ///
    /// [`Rewrite::Cleared`]: crate::conversation::Rewrite::Cleared
    /// [`PlanError::Rewritten`]: super::PlanError::Rewritten
    Clear(Cleared),
    /// Messages `pinned..to` dropped, `marker` (a user-role message) put in their place.
    Drop {
        /// First kept message: a legal cut of the layout.
        to: usize,
        /// The record that stands for the dropped span, written by the guard
        /// ([`crate::guard::write::drop_marker`], or truncate's crate-internal writer).
        marker: Marker,
    },
    /// Messages `pinned..to` replaced by one user-role summary message, which [`apply`]
    /// writes from its parts ([`SummaryParts::text`]) and whose ledger's failures it records.
    ///
    /// [`apply`]: super::apply
    Summarize {
        /// First kept message: a legal cut of the layout.
        to: usize,
        /// What stands for the summarized span.
        summary: SummaryParts,
    },
    /// An unusable inline image (empty or undecodable base64 data) outside the newest exchange
    /// replaced by a text placeholder of its format, in its place, which [`apply`] writes
    /// ([`ImageRepair::placeholder_text`]). Planned from the input's own violations by
    /// `crate::guard::plan_repairs`, never by a strategy; refused when the image is not
    /// there with that fault or lies in the newest exchange. A tool result so repaired is not
    /// marked rewritten: its content may still be capped or cleared.
    ///
    /// [`apply`]: super::apply
    RepairImage(ImageRepair),
}

/// The parts of a summary message, kept apart so that what a model wrote never reads as what
/// code recorded: the ledger comes last, under its own header line, which the narrative may
/// not hold ([`PlanError::ForgedLedger`]).
///
/// [`PlanError::ForgedLedger`]: super::PlanError::ForgedLedger
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryParts {
    /// The first line: which messages the summary replaces, and that it is background for the
    /// turns that follow, not a request.
    pub head: String,
    /// The summarizing model's text.
    pub narrative: String,
    /// The code-made ledger (its first line is its header; empty text = no ledger) and the
    /// failures it records (typed ids).
    pub ledger: Marker,
    /// Counter tokens of the messages the summary replaces (for the report).
    pub tokens_before: usize,
    /// Counter tokens of the summary message, as the strategy counted it when fitting the
    /// ledger (for the report).
    pub tokens: usize,
}

impl SummaryParts {
    /// The message text: `head`, a blank line, the narrative, then (when there is one) a blank
    /// line and the ledger.
    pub fn text(&self) -> String {
        let mut s = format!("{}\n\n{}\n", self.head.trim(), self.narrative.trim());
        if !self.ledger.text.trim().is_empty() {
            s.push('\n');
            s.push_str(&self.ledger.text);
            if !s.ends_with('\n') {
                s.push('\n');
            }
        }
        s
    }

    /// Whether the narrative holds the ledger's header line (a model imitating code).
    pub(super) fn forged(&self) -> bool {
        let header = self.ledger.text.lines().next().unwrap_or("").trim();
        !header.is_empty() && self.narrative.contains(header)
    }
}
