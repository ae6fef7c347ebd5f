//! The guard's writers: every piece of content a cap or a clear puts into an output.
//!
//! A strategy decides *what* to shorten; the text that takes its place is written here, by
//! the guard, and handed back sealed: a [`Capped`] block (head + tail cut by [`cap`], or a
//! call input cleared by [`clear_input`]), a [`Cleared`] result (the placeholder of
//! [`clear`]), or the [`Marker`] of a dropped span (its session state, made by code, with the
//! recall line of [`Marker::name_recall`]) and a summary's code-made ledger. Only these
//! functions make one, each from the input's own block at the indices it records, so the
//! replacement keeps the block's kind, call id, `is_error` and outcome by construction, and
//! [`crate::guard::apply`] splices it in without reading its content again.
//!
//! A recall id is written the same way: [`clear`] (its `recall` flag),
//! [`Capped::name_recall`] and [`Marker::name_recall`] write the id of the original's wire
//! JSON ([`crate::recall`]) into the text and keep that original ([`crate::recall::Entry`])
//! in the sealed value, so what [`crate::guard::apply`] returns as the applied originals
//! ([`crate::guard::Applied::recall`]) is exactly what the output names.
//! A strategy prices a replacement with the figures it carries (and its own counter) before
//! it plans it. What the guard does not write is what a model wrote: a summary's narrative
//! (kept apart from the ledger, [`crate::guard::SummaryParts`]) and its first line.
//!
//! The texts: the truncation mark `[… N tokens truncated …]` ([`TRUNCATION_MARK`], with an
//! optional ` · recall rc_…` after it), and the placeholder
//! `[compactor: cleared result of TOOL call ID (N tokens) …]` (`facts::CLEARED_PREFIX`),
//! which the session facts read back on a later turn; the marker's first line
//! (`facts::MARKER_PREFIX`) and the ledger's header ([`LEDGER_HEADER`]).

mod cap;
mod clear;
mod marker;
#[cfg(test)]
mod tests;
pub(crate) mod text_cut;

pub use cap::{Capped, cap};
pub use clear::{Cleared, clear, clear_input};
pub use marker::{LEDGER_HEADER, Marker, drop_marker, recall_line};
pub(crate) use marker::{ledger, marker};
pub use text_cut::{TRUNCATION_MARK, thousands};
