//! [`PlanError`]: why [`apply`](super::apply) refuses a plan, naming the faulty edit.

use crate::conversation::Rewrite;

/// A plan the guard refuses; `edit` is the index of the faulty edit in the plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The edit names a message or block the input does not have.
    #[error("edit {edit}: messages[{message}].content[{block}] does not exist")]
    OutOfRange {
        /// Edit index.
        edit: usize,
        /// Message index.
        message: usize,
        /// Block index.
        block: usize,
    },
    /// The edit touches a protected message (pinned prefix, open tool loop).
    #[error("edit {edit}: messages[{message}] is protected (pinned prefix or open tool loop)")]
    Protected {
        /// Edit index.
        edit: usize,
        /// Message index.
        message: usize,
    },
    /// The newest message may only have its tool results' content shortened.
    #[error("edit {edit}: the newest message may only have its tool results shortened")]
    Newest {
        /// Edit index.
        edit: usize,
    },
    /// The replacement is not the same kind of block, changes a call id, or is a thinking block
    /// (signed: byte-identical or gone).
    #[error("edit {edit}: messages[{message}].content[{block}]: {why}")]
    Mismatch {
        /// Edit index.
        edit: usize,
        /// Message index.
        message: usize,
        /// Block index.
        block: usize,
        /// What differs.
        why: &'static str,
    },
    /// A failed call would read as a success.
    #[error("edit {edit}: the failure of call {id} would be lost")]
    FailureLost {
        /// Edit index.
        edit: usize,
        /// Call id.
        id: String,
    },
    /// Two edits on one block, or more than one drop.
    #[error("edit {edit}: conflicts with edit {other}")]
    Conflict {
        /// Edit index.
        edit: usize,
        /// The earlier edit.
        other: usize,
    },
    /// A drop that does not end at a legal cut.
    #[error("edit {edit}: {to} is not a legal cut")]
    IllegalCut {
        /// Edit index.
        edit: usize,
        /// The cut asked for.
        to: usize,
    },
    /// What the drop must carry has no legal place after its cut ([`crate::guard::Layout::carry`]).
    #[error("edit {edit}: cut at {to}: {why}")]
    Carry {
        /// Edit index.
        edit: usize,
        /// The cut asked for.
        to: usize,
        /// Why.
        why: crate::guard::CarryError,
    },
    /// An edit of a message the plan's drop removes.
    #[error("edit {edit}: messages[{message}] is dropped by edit {drop}")]
    EditsDropped {
        /// Edit index.
        edit: usize,
        /// Message index.
        message: usize,
        /// The drop.
        drop: usize,
    },
    /// The drop would part a tool_use from its tool_result.
    #[error("edit {edit}: call {id} and its result would be parted")]
    PartsPair {
        /// Edit index.
        edit: usize,
        /// Call id.
        id: String,
    },
    /// A tool result compactor already rewrote (an earlier tier's placeholder or cap, known from
    /// [`ToolResult::rewritten`]) would be cut again, or a placeholder cleared again: what it
    /// names (tool, call id, size, error lines) would be lost or misstated.
    ///
    /// [`ToolResult::rewritten`]: crate::conversation::ToolResult::rewritten
    #[error("edit {edit}: messages[{message}].content[{block}] was already {done:?} by compactor")]
    Rewritten {
        /// Edit index.
        edit: usize,
        /// Message index.
        message: usize,
        /// Block index.
        block: usize,
        /// What was done to it.
        done: Rewrite,
    },
    /// A repair of an image that is not there, or whose data does not have the fault the
    /// repair names ([`UnitEdit::RepairImage`](super::UnitEdit::RepairImage)).
    #[error(
        "edit {edit}: messages[{message}].content[{block}] holds no image with the fault the repair names"
    )]
    NotRepairable {
        /// Edit index.
        edit: usize,
        /// Message index.
        message: usize,
        /// Block index.
        block: usize,
    },
    /// A repair inside the newest exchange ([`Units::newest_exchange`]), which only the
    /// provider's own error may answer.
    ///
    /// [`Units::newest_exchange`]: crate::guard::Units::newest_exchange
    #[error("edit {edit}: messages[{message}] is in the newest exchange, which no repair rewrites")]
    InNewestExchange {
        /// Edit index.
        edit: usize,
        /// Message index.
        message: usize,
    },
    /// A drop's marker names the recall id of other messages than the span it drops
    /// ([`crate::guard::Marker::name_recall`] with another span), so the id would give back
    /// what the output still holds, or not all it lost.
    #[error(
        "edit {edit}: the marker names the recall id of messages {from}..{end}, not of the dropped span"
    )]
    RecallElsewhere {
        /// Edit index.
        edit: usize,
        /// First message the named original holds.
        from: usize,
        /// One past its last message.
        end: usize,
    },
    /// A summary's narrative holds its ledger's header line, so model text would read as the
    /// code-made ledger.
    #[error("edit {edit}: the summary's narrative holds the ledger's header line")]
    ForgedLedger {
        /// Edit index.
        edit: usize,
    },
}
