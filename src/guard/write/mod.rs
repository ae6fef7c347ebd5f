//! The guard's writers: every piece of content a cap or a clear puts into an output.
//!
//! A strategy decides *what* to shorten; the text that takes its place is written here, by
//! the guard, and handed back sealed: a [`Capped`] block (head + tail cut by [`cap`], or a
//! call input cleared by [`clear_input`]) or a [`Cleared`] result (the placeholder of
//! [`clear`]). Only these functions make one, each from the input's own block at the indices
//! it records, so the replacement keeps the block's kind, call id, `is_error` and outcome by
//! construction, and [`crate::guard::apply`] splices it in without reading its content again.
//! A strategy prices a replacement with the figures it carries (and its own counter) before
//! it plans it.
//!
//! The texts: the truncation mark `[… N tokens truncated …]` ([`TRUNCATION_MARK`], with an
//! optional ` · recall rc_…` after it), and the placeholder
//! `[compactor: cleared result of TOOL call ID (N tokens) …]` (`facts::CLEARED_PREFIX`),
//! which the session facts read back on a later turn.

mod cap;
mod clear;
#[cfg(test)]
mod tests;
pub(crate) mod text_cut;

pub use cap::{Capped, cap};
pub use clear::{Cleared, clear, clear_input};
pub use text_cut::{TRUNCATION_MARK, thousands};
