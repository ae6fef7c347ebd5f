//! An unusable inline image replaced by its placeholder, as [`apply`](super::apply) builds it
//! for a [`UnitEdit::RepairImage`](super::UnitEdit::RepairImage): the typed record of the
//! repair ([`ImageRepair`]) and the block that takes the image's place (planned by
//! [`crate::guard::plan_repairs`]).

use super::PlanError;
use super::check::block_at;
use crate::conversation::{Block, Conversation, Object, Text, ToolResultContent};
use crate::guard::layout::Layout;
use crate::tokens::image::{ImageFault, image_data_fault};
use serde::Serialize;
use serde_json::Value;

/// The prefix of every placeholder that stands for a removed image, so a later pass (or a
/// reader) recognizes it: `[compactor: image removed: empty base64 data (image/png)]`.
pub const IMAGE_REMOVED_PREFIX: &str = "[compactor: image removed: ";

/// One unusable inline image replaced by a text placeholder: where it was, why, and what it
/// declared itself to be. In the report (`repairs`) and, as a plan edit,
/// `UnitEdit::RepairImage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageRepair {
    /// JSON path of the image in the wire format's terms
    /// (`messages[3].content[0].content[1]`, `messages[4].content[1]`, `input[2].output[0]`).
    pub path: String,
    /// Index of the message (or Responses item) that holds it.
    pub message: usize,
    /// Index of its block in the message's content: the image, or the tool_result holding it.
    pub block: usize,
    /// Its index in that tool_result's content; `None` at the top level of the message.
    pub nested: Option<usize>,
    /// What is wrong with its data.
    pub reason: ImageFault,
    /// The media type it declared (`source.media_type`, a data URL's type), when it is a plain
    /// `type/subtype` token; the placeholder names it.
    pub media_type: Option<String>,
}

impl ImageRepair {
    /// The placeholder's text: `[compactor: image removed: empty base64 data (image/png)]`,
    /// `[compactor: image removed: invalid base64 data]` (no media type declared).
    pub fn placeholder_text(&self) -> String {
        let why = self.reason.removed_because();
        match &self.media_type {
            Some(media) => format!("{IMAGE_REMOVED_PREFIX}{why} ({media})]"),
            None => format!("{IMAGE_REMOVED_PREFIX}{why}]"),
        }
    }
}

impl std::fmt::Display for ImageRepair {
    /// The warning line: `messages[3].content[0].content[1]: image removed (empty base64
    /// data): the provider would reject every later request`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: image removed ({}): the provider would reject every later request",
            self.path,
            self.reason.removed_because()
        )
    }
}

/// The image value at `message` / `block` (/ `nested` inside a tool result) of `c`.
pub(in crate::guard) fn image_at(
    c: &Conversation,
    message: usize,
    block: usize,
    nested: Option<usize>,
) -> Option<&Value> {
    let b = c.messages.get(message)?.content.get(block)?;
    let b = match (b, nested) {
        (b, None) => b,
        (Block::ToolResult(r), Some(k)) => match &r.content {
            Some(ToolResultContent::Blocks(bs)) => bs.get(k)?,
            _ => return None,
        },
        _ => return None,
    };
    match b {
        Block::Image(v) => Some(v),
        _ => None,
    }
}

/// The text block that stands for `image` in its own format, at its place: a Responses
/// `input_text` for an `input_image`, else a `text` block (Anthropic) or part (OpenAI Chat).
/// A `cache_control` breakpoint on the image moves to it (its text is never empty, Anthropic
/// `cache_control cannot be set for empty text blocks`); nothing else of the image is kept.
fn placeholder(image: &Value, repair: &ImageRepair) -> Block {
    let mut extra = Object::new();
    if image.get("type").and_then(Value::as_str) == Some("input_image") {
        extra.insert("type".into(), Value::String("input_text".into()));
    }
    if let Some(cc) = image.get("cache_control") {
        extra.insert("cache_control".into(), cc.clone());
    }
    Block::Text(Text {
        text: repair.placeholder_text(),
        extra,
    })
}

/// The block that replaces block `repair.block` of message `repair.message` of `input` after
/// `repair` (edit `edit` of the plan): the placeholder, or the tool result with its image at
/// `repair.nested` replaced. `current`: that block as an earlier repair of the same plan left
/// it (two images of one tool result).
///
/// # Errors
/// [`PlanError::OutOfRange`] for a block the input lacks; [`PlanError::NotRepairable`] when it
/// is no image whose data has the fault the repair names; [`PlanError::InNewestExchange`] for
/// an image of the newest exchange.
pub(super) fn repaired_block(
    input: &Conversation,
    layout: &Layout,
    edit: usize,
    repair: &ImageRepair,
    current: Option<&Block>,
) -> Result<Block, PlanError> {
    let (message, block) = (repair.message, repair.block);
    let old = block_at(input, (edit, message, block))?;
    if message >= layout.units().newest_exchange().start {
        return Err(PlanError::InNewestExchange { edit, message });
    }
    let not_repairable = PlanError::NotRepairable {
        edit,
        message,
        block,
    };
    let image = image_at(input, message, block, repair.nested)
        .filter(|v| image_data_fault(v) == Some(repair.reason))
        .ok_or(not_repairable.clone())?;
    let with = placeholder(image, repair);
    let Some(k) = repair.nested else {
        return Ok(with);
    };
    let mut result = match current.unwrap_or(old) {
        Block::ToolResult(r) => r.clone(),
        _ => return Err(not_repairable),
    };
    match &mut result.content {
        Some(ToolResultContent::Blocks(bs))
            if bs.get(k).is_some_and(|b| matches!(b, Block::Image(_))) =>
        {
            bs[k] = with;
        }
        _ => return Err(not_repairable),
    }
    Ok(Block::ToolResult(result))
}
