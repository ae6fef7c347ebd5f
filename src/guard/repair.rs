//! Repairs of what the provider would refuse forever: an inline image whose base64 data is
//! empty or does not decode, in a message the agent sent before.
//!
//! Such an image (an empty `data` after a screenshot tool failed, a base64 string cut short)
//! makes every later request fail (Anthropic `messages.N.content.M.image.source.base64: image
//! cannot be empty`, `invalid base64 data`, `Could not process image`; OpenAI `Invalid image`;
//! anthropics/claude-code#35897, #5240): the agent is stuck. Compaction replaces it by a text
//! placeholder naming it, in the same place, unless it is in the newest exchange
//! ([`Units::newest_exchange`]): what the tool or the user just produced is a real error the
//! agent must see, so there the input is refused.
//!
//! ```text
//! validate(input)        -> BadImage violations, located (message, block, nested)
//! plan_repairs(layout)   -> outside the newest exchange: UnitEdit::RepairImage (ImageRepair)
//!                           inside it: left in the violations (the input is refused)
//! apply(plan)            -> the image replaced by a text block of its own format, same place
//!                           (a `cache_control` on the image moves to the text); the repairs
//!                           applied come back typed (Applied::repairs) for the report
//! ```
//!
//! Here the plan; the record ([`ImageRepair`]) and the block [`apply`](super::apply) writes
//! are the guard's edit's (`edit/image.rs`).
//!
//! [`Units::newest_exchange`]: super::Units::newest_exchange

use super::edit::{ImageRepair, UnitEdit, image_at};
use super::layout::Layout;
use super::violation::{Violation, ViolationKind};
use crate::conversation::Conversation;
use crate::tokens::image::image_media_type;

/// Plans the repair of every bad inline image of `input` (whose layout is `layout`) that
/// `violations` (the input's, from [`validate`](super::validate)) report outside the newest
/// exchange: those violations are taken out of `violations` and come back as
/// [`UnitEdit::RepairImage`] edits for [`apply`](super::apply), in message order. A bad
/// image in the newest exchange stays in `violations`, and so does every other violation.
pub fn plan_repairs(
    input: &Conversation,
    layout: &Layout,
    violations: &mut Vec<Violation>,
) -> Vec<UnitEdit> {
    let newest = layout.units().newest_exchange().start;
    let mut plan = Vec::new();
    violations.retain(|v| {
        let (ViolationKind::BadImage { reason, nested }, Some(message), Some(block)) =
            (&v.kind, v.message, v.block)
        else {
            return true;
        };
        if message >= newest {
            return true;
        }
        let media_type = image_at(input, message, block, *nested)
            .and_then(image_media_type)
            .map(str::to_string);
        plan.push(UnitEdit::RepairImage(ImageRepair {
            path: v.path.clone(),
            message,
            block,
            nested: *nested,
            reason: *reason,
            media_type,
        }));
        false
    });
    plan
}

/// The violations of `input` (whose [`validate`](super::validate) found `violations`) left
/// once the unusable images compaction replaces (outside the newest exchange,
/// [`plan_repairs`]) are taken out: what the A/B harness skips an input for.
#[cfg(any(test, feature = "ab"))]
pub fn unrepaired(
    input: &Conversation,
    format: crate::format::Format,
    mut violations: Vec<Violation>,
) -> Vec<Violation> {
    if violations
        .iter()
        .any(|v| matches!(v.kind, ViolationKind::BadImage { .. }))
    {
        plan_repairs(input, &Layout::of(input, format), &mut violations);
    }
    violations
}

#[cfg(test)]
mod tests;
