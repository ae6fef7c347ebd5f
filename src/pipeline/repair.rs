//! Repairing the input before it is compacted: an unusable inline image outside the newest
//! exchange is replaced by a text placeholder (the guard plans and builds it,
//! [`guard::plan_repairs`], [`guard::apply`]); compaction then works on the repaired copy, so
//! no output, remembered prefix or continuation brings the image back. A bad image in the
//! newest exchange stays a violation: the input is refused.

use crate::conversation::Conversation;
use crate::format::Format;
use crate::guard::{self, ImageRepair, Layout, ValidateOptions, Violation, ViolationKind};

/// The input with its unusable images repaired: what compaction works on instead of it.
pub(super) struct Repaired {
    /// The repaired copy: the input but for the placeholders.
    pub(super) conversation: Conversation,
    /// Its layout (the input's: a placeholder in an image's place moves no unit).
    pub(super) layout: Layout,
    /// What was repaired, in message order.
    pub(super) repairs: Vec<ImageRepair>,
}

/// Repairs the bad images of `input` that `invalid` (the input's violations but the
/// repairable ones) reports outside the newest exchange, taking them out of `invalid`. `None`
/// when there is nothing to repair, or when the input is refused anyway (`invalid` then holds
/// what refuses it, the bad images of the newest exchange included).
pub(super) fn repair_input(
    input: &Conversation,
    format: crate::format::Format,
    context: std::sync::Arc<crate::guard::ContextRules>,
    invalid: &mut Vec<Violation>,
) -> Option<Repaired> {
    if !invalid
        .iter()
        .any(|v| matches!(v.kind, ViolationKind::BadImage { .. }))
    {
        return None;
    }
    let layout = Layout::with_context(input, format, context);
    let all = invalid.clone();
    let plan = guard::plan_repairs(input, &layout, invalid);
    if plan.is_empty() || !invalid.is_empty() {
        // Refused: what refuses it is what the error names.
        return None;
    }
    match guard::apply(input, &layout, plan, None) {
        Ok(applied) => Some(Repaired {
            conversation: applied.conversation,
            layout,
            repairs: applied.repairs,
        }),
        Err(e) => {
            // A plan made from the input's own violations is never refused; if it were, the
            // input is refused with them rather than sent as it is.
            tracing::error!(error = %e, "guard refused the repair of the input's images");
            *invalid = all;
            None
        }
    }
}

/// The guard's verdict on the repaired input as an output of its own (under the trigger, or
/// when no tier's output was taken): the provider's rules, and every top-level field of the
/// input unchanged. Empty when it passes.
pub(super) fn verify_repaired(
    input: &Conversation,
    repaired: &Conversation,
    format: Format,
) -> Vec<Violation> {
    let options = ValidateOptions {
        allow_open_tail: true,
    };
    let mut violations = guard::validate(repaired, format, options);
    violations.retain(|v| !v.kind.is_repairable());
    violations.extend(guard::check_envelope(input, repaired, format));
    violations
}
