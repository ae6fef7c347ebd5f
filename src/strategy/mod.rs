//! Compaction strategies behind one object-safe trait.
//!
//! A strategy is given a conversation, its guard [`Layout`] (in [`Context::layout`]) and a
//! [`Budget`], and returns a [`Compaction`]: a *plan* of [`UnitEdit`]s (cap a block, clear a
//! tool result, drop up to a legal cut behind a marker, summarize up to a legal cut) with notes.
//! [`crate::guard::apply`] builds the output of a plan and says what it applied (the report's
//! [`Edit`]s); it is the only builder of outputs. Contract:
//! - edits follow the layout's units: whole exchanges are kept, cleared, summarized or dropped;
//!   a drop ends only at one of [`Layout::cuts`];
//! - no edit touches a protected message ([`Layout::is_protected`]: pinned prefix, open tool
//!   loop), a thinking block, or the newest message other than its tool results;
//! - a failed call stays one: a cleared or capped result keeps its outcome and `is_error`, a
//!   dropped or summarized one is named in the marker's (or the summary ledger's) typed
//!   [`crate::guard::Marker::failures`];
//! - it never mutates its input.
//!
//! The text of a cap, a clear or a drop's marker is written by the guard
//! ([`crate::guard::write`]: a strategy asks for it, prices it, and puts the sealed result in
//! its plan), recall ids included (with [`Context::recall`], the sealed value keeps the
//! original its id names, and [`crate::guard::Applied::recall`] lists those applied); a
//! summary message is written by the guard from its parts (`Summarize`: the
//! model's narrative, a head line, the guard's ledger); the guard checks the failures a marker
//! records against the span it drops. A plan that breaks a rule is refused with a
//! [`crate::guard::PlanError`] naming the edit, and the report shows it; the pipeline then
//! verifies every output it builds.

mod digest;
pub mod microcompact;
pub mod summary;
pub use crate::guard::Edit;
pub use crate::guard::write::thousands;
pub mod truncate;

pub use digest::{MARKER_PREFIX, digest_line};

use crate::conversation::Conversation;
use crate::format::Format;
use crate::guard::{Layout, MessageTokens, UnitEdit};
use crate::tokens::TokenCounter;
use serde::Serialize;

/// Token figures a strategy works towards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Budget {
    /// Hard limit in tokens: what the request may hold (context window minus reserved output).
    pub limit: usize,
    /// Where to stop once compacting, in tokens (below `limit`, so the next turns fit without
    /// compacting again and the prefix stays stable for prompt caching).
    pub target: usize,
}

/// What a strategy gets besides the conversation.
pub struct Context<'a> {
    /// The wire format (decides provider rules and placeholder shapes).
    pub format: Format,
    /// The token counter (cached).
    pub counter: &'a dyn TokenCounter,
    /// Extra instructions from the user for a model summary (`/compact <instructions>`).
    pub instructions: Option<&'a str>,
    /// The guard's layout of the conversation the strategy is given (units, pinned prefix,
    /// legal cuts, protected messages), computed once by the pipeline.
    pub layout: &'a Layout,
    /// Counter tokens of each message of the conversation the strategy is given (by
    /// `counter`; system prompt and tool definitions not included), counted once by the
    /// pipeline: a strategy reads them here instead of counting every message again.
    pub tokens: &'a MessageTokens,
    /// Whether strategies name recall ids in what they replace ([`crate::recall`]): the
    /// guard's writers then write the id and keep the original with the sealed value
    /// ([`crate::guard::write::Capped::name_recall`], the `recall` flag of
    /// [`crate::guard::write::clear`], [`crate::guard::Marker::name_recall`]), and
    /// [`crate::guard::apply`] returns the originals of what it applied. `false` when recall
    /// is off (`[recall] enabled = false`): then no id is written.
    pub recall: bool,
}

/// A strategy's result.
#[derive(Debug, Clone)]
pub struct Compaction {
    /// The plan: unit edits of the input for [`crate::guard::apply`], the only code that
    /// builds an output (a strategy, a user's own too, never writes one itself) and that
    /// says what was changed ([`crate::guard::Applied::edits`]). Empty when nothing changed
    /// (the input is not copied).
    pub plan: Vec<UnitEdit>,
    /// Remarks for the report (why a step was skipped, a fallback taken, ...).
    pub notes: Vec<String>,
    /// Why the strategy fell back to a lesser method (e.g. summary -> truncate), when it did;
    /// the pipeline puts it on the report.
    pub degraded: Option<String>,
}

impl Compaction {
    /// A compaction that changed nothing (an empty plan), with `note` saying why.
    pub fn unchanged(note: impl Into<String>) -> Compaction {
        Compaction {
            plan: Vec::new(),
            notes: vec![note.into()],
            degraded: None,
        }
    }
}

/// Errors a strategy can report (the pipeline turns them into a report note and keeps going).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StrategyError {
    /// The strategy needs something that is not configured (e.g. an LLM for `summary`).
    #[error("{0}")]
    NotConfigured(String),
    /// Anything else.
    #[error("{0}")]
    Failed(String),
}

/// A compaction strategy. Object safe: config picks strategies at run time as
/// `Box<dyn Strategy>`.
#[async_trait::async_trait]
pub trait Strategy: Send + Sync {
    /// The strategy's name in reports (`truncate`, `microcompact`, `summary`).
    fn name(&self) -> &str;

    /// Compacts `conversation` towards `budget.target`. Must not mutate its input; may return an
    /// output that is still over the target (the pipeline tries the next tier).
    ///
    /// # Errors
    /// [`StrategyError`] when the strategy cannot run at all.
    async fn compact(
        &self,
        conversation: &Conversation,
        budget: Budget,
        cx: &Context<'_>,
    ) -> Result<Compaction, StrategyError>;
}

#[cfg(test)]
mod tests {
    fn _object_safe(_: &dyn super::Strategy) {}
}
