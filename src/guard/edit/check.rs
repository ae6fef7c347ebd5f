//! The checks of one edit of a plan against the input and its layout: the target of a cap or
//! a clear (there, editable, written for it, no result cut twice) and a drop (its failures
//! recorded, no call parted from its result).

use super::{FailureRecord, Marker, PlanError};
use crate::conversation::{Block, Conversation, Message, Outcome, Rewrite};
use crate::guard::layout::Layout;
use foldhash::HashSet;

/// Block `block` of message `message` of `input`, which edit `edit` names.
///
/// # Errors
/// [`PlanError::OutOfRange`] when the input has no such block.
pub(super) fn block_at(
    input: &Conversation,
    (edit, message, block): (usize, usize, usize),
) -> Result<&Block, PlanError> {
    input
        .messages
        .get(message)
        .and_then(|m| m.content.get(block))
        .ok_or(PlanError::OutOfRange {
            edit,
            message,
            block,
        })
}

/// The target of a cap or a clear (`doing`): a block of the input, not protected, not in the
/// newest message unless a tool result, and (for a tool result) not rewritten by compactor
/// already, except that a capped result may still give way to a placeholder. `with` was
/// written by the guard ([`crate::guard::write`]) from the block at these indices, so its
/// content is not read again; only that it was written for this block (same kind, same call)
/// is, in case a plan is applied to another input than it was made of.
pub(super) fn check_target(
    input: &Conversation,
    layout: &Layout,
    (edit, message, block): (usize, usize, usize),
    with: &Block,
    doing: Rewrite,
) -> Result<(), PlanError> {
    let old = block_at(input, (edit, message, block))?;
    if layout.is_protected(message) {
        return Err(PlanError::Protected { edit, message });
    }
    if layout.newest() == Some(message) && !matches!(old, Block::ToolResult(_)) {
        return Err(PlanError::Newest { edit });
    }
    match (old, with) {
        (Block::ToolResult(a), Block::ToolResult(b)) if a.tool_use_id == b.tool_use_id => {
            match a.rewritten {
                // A capped result may still give way to a placeholder.
                Some(Rewrite::Capped) if doing == Rewrite::Cleared => Ok(()),
                Some(done) => Err(PlanError::Rewritten {
                    edit,
                    message,
                    block,
                    done,
                }),
                None => Ok(()),
            }
        }
        (Block::ToolUse(a), Block::ToolUse(b)) if a.id == b.id && a.name == b.name => Ok(()),
        (Block::Text(_), Block::Text(_)) => Ok(()),
        _ => Err(PlanError::Mismatch {
            edit,
            message,
            block,
            why: "the replacement was written for another block",
        }),
    }
}

/// A drop of `span` must keep every failure in it (as a record of the marker) and take each
/// call with its results.
pub(super) fn check_drop(
    input: &Conversation,
    edit: usize,
    span: std::ops::Range<usize>,
    kept_in_span: &[usize],
    marker: &Marker,
    records: Option<&[FailureRecord]>,
) -> Result<(), PlanError> {
    let recorded: HashSet<&str> = marker.failures.iter().map(String::as_str).collect();
    let dropped: Vec<&Message> = span
        .clone()
        .filter(|i| !kept_in_span.contains(i))
        .map(|i| &input.messages[i])
        .collect();
    let earlier = records
        .unwrap_or(&[])
        .iter()
        .filter(|r| span.contains(&r.message) && !kept_in_span.contains(&r.message))
        .map(|r| r.id.as_str());
    let failed = dropped
        .iter()
        .flat_map(|m| m.tool_results())
        .filter(|r| r.outcome == Outcome::Error)
        .map(|r| r.tool_use_id.as_str());
    if let Some(id) = failed.chain(earlier).find(|id| !recorded.contains(id)) {
        return Err(PlanError::FailureLost {
            edit,
            id: id.to_string(),
        });
    }
    let calls: HashSet<&str> = dropped
        .iter()
        .flat_map(|m| m.tool_uses().map(|t| t.id.as_str()))
        .collect();
    let results: HashSet<&str> = dropped
        .iter()
        .flat_map(|m| m.tool_results().map(|r| r.tool_use_id.as_str()))
        .collect();
    let kept = input.messages[..span.start]
        .iter()
        .chain(kept_in_span.iter().map(|&i| &input.messages[i]))
        .chain(&input.messages[span.end..]);
    for m in kept {
        let parted = m
            .tool_results()
            .map(|r| r.tool_use_id.as_str())
            .find(|id| calls.contains(id))
            .or_else(|| {
                m.tool_uses()
                    .map(|t| t.id.as_str())
                    .find(|id| results.contains(id))
            });
        if let Some(id) = parted {
            return Err(PlanError::PartsPair {
                edit,
                id: id.to_string(),
            });
        }
    }
    Ok(())
}
