//! A capped block: the guard's writer of head + tail cuts ([`cap`]) and of a cleared tool
//! call input ([`super::clear_input`]), and the sealed [`Capped`] a plan carries.

use super::text_cut::{TRUNCATION_MARK, cut_middle, cut_middle_known};
use crate::conversation::{Block, Conversation, ToolInput, ToolResultContent};
use crate::format::Format;
use crate::recall::{Entry, wire};
use crate::tokens::TokenCounter;
use serde_json::Value;

/// A block of the input as the guard wrote it for [`crate::guard::UnitEdit::Cap`]: only the
/// guard's writers ([`cap`], [`super::clear_input`]) make one, from the input's own block at
/// ([`Capped::message`], [`Capped::block`]), so what a plan puts in is the guard's text and
/// keeps the block's kind, call id, `is_error` and outcome by construction.
#[derive(Debug, Clone, PartialEq)]
pub struct Capped {
    pub(in crate::guard) message: usize,
    pub(in crate::guard) block: usize,
    pub(in crate::guard) with: Block,
    what: &'static str,
    tokens_before: usize,
    tokens_after: usize,
    /// Whether the report lists it (a call input cleared along with its result is not).
    pub(in crate::guard) reported: bool,
    /// The original its text names by recall id ([`Capped::name_recall`]).
    pub(in crate::guard) recall: Option<Entry>,
}

impl Capped {
    pub(super) fn new(
        (message, block): (usize, usize),
        with: Block,
        what: &'static str,
        (tokens_before, tokens_after): (usize, usize),
    ) -> Capped {
        Capped {
            message,
            block,
            with,
            what,
            tokens_before,
            tokens_after,
            reported: true,
            recall: None,
        }
    }

    /// A capped block with any content, as a faulty writer would make it: for tests of what
    /// [`crate::guard::apply`] and the verifiers refuse.
    #[cfg(test)]
    pub(crate) fn forged(at: (usize, usize), with: Block) -> Capped {
        Capped::new(at, with, "text", (0, 0))
    }

    /// Message index (of the input it was written from).
    pub fn message(&self) -> usize {
        self.message
    }

    /// Block index within the message.
    pub fn block(&self) -> usize {
        self.block
    }

    /// The block that takes the original's place.
    pub fn with(&self) -> &Block {
        &self.with
    }

    /// What was cut: `tool_result`, `tool_use_input` or `text`.
    pub fn what(&self) -> &'static str {
        self.what
    }

    /// The call id, for a tool block.
    pub fn id(&self) -> Option<&str> {
        match &self.with {
            Block::ToolResult(r) => Some(&r.tool_use_id),
            Block::ToolUse(t) => Some(&t.id),
            _ => None,
        }
    }

    /// Counter tokens of the cut text(s) before the cut (for a result of blocks, the sum over
    /// its cut text blocks; for a cleared input, the input as sent).
    pub fn tokens_before(&self) -> usize {
        self.tokens_before
    }

    /// Counter tokens of the same text(s) after the cut (truncation marks included).
    pub fn tokens_after(&self) -> usize {
        self.tokens_after
    }

    /// The original the block names by recall id, if it names one: what
    /// [`crate::guard::apply`] returns for it ([`crate::guard::Applied::recall`]).
    pub fn recall(&self) -> Option<&Entry> {
        self.recall.as_ref()
    }

    /// Names the recall id of the original block right after the first truncation mark of the
    /// block (`[… N tokens truncated …] · recall rc_…`) and keeps the original with it; the
    /// mark stays whole, so the block still reads as capped and is never cut twice. `input`
    /// and `format`: the conversation the block was written from ([`cap`]) and its wire
    /// format, whose JSON of the block is the original.
    ///
    /// `false` (nothing named) when no text of the block holds a mark, when the running
    /// compaction has no recall key ([`crate::recall::scope`]), or when the block names an id
    /// already.
    pub fn name_recall(&mut self, input: &Conversation, format: Format) -> bool {
        if self.recall.is_some() {
            return false;
        }
        let Some(entry) = wire::block(format, input, self.message, self.block) else {
            return false;
        };
        let named = name_after_mark(&mut self.with, TRUNCATION_MARK, &entry.reference.id);
        if named {
            self.recall = Some(entry);
        }
        named
    }
}

/// Caps block `at` = (message, block) of `input` to about `cap` counter tokens per text:
/// - a tool_result: its text, or each text block of a result of blocks (head + tail with a
///   `[… N tokens truncated …]` mark); a result compactor already rewrote is never cut
///   ([`crate::guard::PlanError::Rewritten`]);
/// - a tool_use: the string values of its JSON input (an OpenAI `arguments` string stays
///   valid JSON), or its freeform input;
/// - a text block: its text.
///
/// `block_tokens`: the block's cached count (a text block and a text result count as their
/// text), so what was counted is not tokenized again. `None` when nothing needs a cut, the
/// text was cut before, or the block is of another kind (thinking, images, ...).
pub fn cap(
    input: &Conversation,
    at: (usize, usize),
    cap: usize,
    block_tokens: usize,
    counter: &dyn TokenCounter,
) -> Option<Capped> {
    let b = input.messages.get(at.0)?.content.get(at.1)?;
    let (with, what, figures) = match b {
        Block::ToolResult(r) if r.rewritten.is_some() => return None,
        Block::ToolResult(r) => {
            let mut r = r.clone();
            let figures = cap_result(&mut r.content, cap, block_tokens, counter)?;
            (Block::ToolResult(r), "tool_result", figures)
        }
        Block::ToolUse(t) => {
            let mut t = t.clone();
            let figures = cap_input(&mut t.input, cap, counter)?;
            (Block::ToolUse(t), "tool_use_input", figures)
        }
        Block::Text(t) => {
            let (s, before, after) = cut_middle_known(&t.text, cap, counter, Some(block_tokens))?;
            let mut t = t.clone();
            t.text = s;
            (Block::Text(t), "text", (before, after))
        }
        _ => return None,
    };
    Some(Capped::new(at, with, what, figures))
}

/// Caps a tool_result's text. `block_tokens` is the cached count of the whole block: a text
/// result counts as its text, and each block of a result of blocks is cached on its own
/// ([`crate::tokens::CachedCounter`]), so no capped text is tokenized a second time.
fn cap_result(
    content: &mut Option<ToolResultContent>,
    cap: usize,
    block_tokens: usize,
    counter: &dyn TokenCounter,
) -> Option<(usize, usize)> {
    match content {
        Some(ToolResultContent::Text(s)) => cut_middle_known(s, cap, counter, Some(block_tokens))
            .map(|(out, before, after)| {
                *s = out;
                (before, after)
            }),
        Some(ToolResultContent::Blocks(bs)) => {
            let (mut before, mut after, mut changed) = (0, 0, false);
            for b in bs.iter_mut() {
                let known = matches!(b, Block::Text(_)).then(|| counter.count_block(b));
                if let Block::Text(t) = b
                    && let Some((out, b0, a0)) = cut_middle_known(&t.text, cap, counter, known)
                {
                    t.text = out;
                    before += b0;
                    after += a0;
                    changed = true;
                }
            }
            changed.then_some((before, after))
        }
        None => None,
    }
}

/// Caps the string values inside a tool call's input; the input stays a JSON object (and an
/// OpenAI `arguments` string stays valid JSON).
fn cap_input(
    input: &mut ToolInput,
    cap: usize,
    counter: &dyn TokenCounter,
) -> Option<(usize, usize)> {
    let mut totals = (0, 0);
    let changed = match input {
        ToolInput::Json(v) => cap_strings(v, cap, counter, &mut totals),
        ToolInput::Arguments(s) => match serde_json::from_str::<Value>(s) {
            Ok(mut v) if v.is_object() => {
                let changed = cap_strings(&mut v, cap, counter, &mut totals);
                if changed {
                    *s = v.to_string();
                }
                changed
            }
            _ => false,
        },
        ToolInput::Freeform(s) => match cut_middle(s, cap, counter) {
            Some((out, b, a)) => {
                *s = out;
                totals = (b, a);
                true
            }
            None => false,
        },
    };
    changed.then_some(totals)
}

fn cap_strings(
    v: &mut Value,
    cap: usize,
    counter: &dyn TokenCounter,
    totals: &mut (usize, usize),
) -> bool {
    match v {
        Value::String(s) => match cut_middle(s, cap, counter) {
            Some((out, b, a)) => {
                *s = out;
                totals.0 += b;
                totals.1 += a;
                true
            }
            None => false,
        },
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |acc, x| cap_strings(x, cap, counter, totals) | acc),
        Value::Object(obj) => obj
            .values_mut()
            .fold(false, |acc, x| cap_strings(x, cap, counter, totals) | acc),
        _ => false,
    }
}

/// Names recall id `id` right after the first `mark` in `block`'s text. `false` when no text
/// of the block holds the mark.
pub(super) fn name_after_mark(block: &mut Block, mark: &str, id: &str) -> bool {
    fn in_str(s: &mut String, mark: &str, id: &str) -> bool {
        match s.find(mark) {
            Some(at) => {
                s.insert_str(at + mark.len(), &format!(" · recall {id}"));
                true
            }
            None => false,
        }
    }
    fn in_value(v: &mut Value, mark: &str, id: &str) -> bool {
        match v {
            Value::String(s) => in_str(s, mark, id),
            Value::Array(items) => items.iter_mut().any(|x| in_value(x, mark, id)),
            Value::Object(o) => o.values_mut().any(|x| in_value(x, mark, id)),
            _ => false,
        }
    }
    match block {
        Block::Text(t) => in_str(&mut t.text, mark, id),
        Block::ToolResult(r) => match &mut r.content {
            Some(ToolResultContent::Text(s)) => in_str(s, mark, id),
            Some(ToolResultContent::Blocks(bs)) => bs.iter_mut().any(|b| match b {
                Block::Text(t) => in_str(&mut t.text, mark, id),
                _ => false,
            }),
            None => false,
        },
        Block::ToolUse(t) => match &mut t.input {
            ToolInput::Json(v) => in_value(v, mark, id),
            // JSON text: the words go inside a string literal (no quote, no backslash).
            ToolInput::Arguments(s) | ToolInput::Freeform(s) => in_str(s, mark, id),
        },
        _ => false,
    }
}
