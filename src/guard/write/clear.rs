//! A cleared tool result: the guard's writer of the placeholder ([`clear`]), of a cleared
//! call input ([`clear_input`]), and the sealed [`Cleared`] a plan carries.

use super::cap::Capped;
use super::text_cut::thousands;
use crate::conversation::{
    Block, Conversation, Outcome, ToolInput, ToolResult, ToolResultContent, ToolUse,
};
use crate::facts::CLEARED_PREFIX;
use crate::format::Format;
use crate::outcome::exit_marker;
use crate::recall::{Entry, wire};
use crate::render::clip;
use crate::tokens::TokenCounter;
use serde_json::Value;

/// Longest kept line of a cleared failure, in chars.
const KEPT_LINE_CHARS: usize = 200;

/// Longest string value, in chars, a cleared call input keeps whole.
const KEPT_INPUT_CHARS: usize = 200;

/// A tool result of the input as the guard cleared it for [`crate::guard::UnitEdit::Clear`]:
/// only [`clear`] makes one, from the input's own result at ([`Cleared::message`],
/// [`Cleared::block`]); its call id, `is_error`, outcome and other fields are the original's,
/// its content the placeholder.
#[derive(Debug, Clone, PartialEq)]
pub struct Cleared {
    pub(in crate::guard) message: usize,
    pub(in crate::guard) block: usize,
    pub(in crate::guard) with: ToolResult,
    tool: String,
    tokens_before: usize,
    tokens_after: usize,
    /// The original its placeholder names by recall id.
    pub(in crate::guard) recall: Option<Entry>,
}

impl Cleared {
    /// A cleared result with any content, as a faulty writer would make it: for tests of
    /// what [`crate::guard::apply`] and the verifiers refuse.
    #[cfg(test)]
    pub(crate) fn forged(at: (usize, usize), with: ToolResult) -> Cleared {
        Cleared {
            message: at.0,
            block: at.1,
            with,
            tool: String::new(),
            tokens_before: 0,
            tokens_after: 0,
            recall: None,
        }
    }

    /// Message index (of the input it was written from).
    pub fn message(&self) -> usize {
        self.message
    }

    /// Block index within the message.
    pub fn block(&self) -> usize {
        self.block
    }

    /// The result that takes the original's place.
    pub fn with(&self) -> &ToolResult {
        &self.with
    }

    /// The call id.
    pub fn id(&self) -> &str {
        &self.with.tool_use_id
    }

    /// The tool's name, as the placeholder names it.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Counter tokens of the original block.
    pub fn tokens_before(&self) -> usize {
        self.tokens_before
    }

    /// Counter tokens of the cleared block.
    pub fn tokens_after(&self) -> usize {
        self.tokens_after
    }

    /// The original the placeholder names by recall id, if it names one: what
    /// [`crate::guard::apply`] returns for it ([`crate::guard::Applied::recall`]).
    pub fn recall(&self) -> Option<&Entry> {
        self.recall.as_ref()
    }
}

/// Clears the tool result at `at` = (message, block) of `input`: its content becomes one
/// placeholder line, `[compactor: cleared result of TOOL call ID (N tokens) to save context;
/// re-run the tool if it is needed · recall rc_…]` (`failed (error) ` before `result` for a
/// failure, followed by its exit-code line and first and last informative lines, each at
/// most 200 chars). A result of blocks keeps one text block. `tool`: the call's tool name;
/// `before`: the block's counter tokens.
///
/// With `recall`, the placeholder names the recall id of the original block (`format`'s JSON
/// of it, [`crate::recall`]) and the [`Cleared`] keeps that original
/// ([`Cleared::recall`]); no id is named when the running compaction has no recall key.
///
/// `None` when the block is not a tool result with content, or when clearing would not save
/// bytes and tokens, or would make a failure read as a success under `format`'s outcome
/// policy (Anthropic keeps `is_error`; the exit-code formats keep the marker line).
pub fn clear(
    input: &Conversation,
    at: (usize, usize),
    (tool, before): (&str, usize),
    recall: bool,
    counter: &dyn TokenCounter,
    format: Format,
) -> Option<Cleared> {
    let Some(Block::ToolResult(r)) = input.messages.get(at.0)?.content.get(at.1) else {
        return None;
    };
    let failed = r.outcome == Outcome::Error;
    let entry = recall
        .then(|| wire::block(format, input, at.0, at.1))
        .flatten();
    let text = r.text_ref();
    let head = format!(
        "{CLEARED_PREFIX} {}result of {tool} call {} ({} tokens) to save context; re-run the tool if it is needed{}]",
        if failed { "failed (error) " } else { "" },
        r.tool_use_id,
        thousands(before),
        entry
            .as_ref()
            .map(|e| format!(" · recall {}", e.reference.id))
            .unwrap_or_default()
    );
    let placeholder = if failed {
        let mut lines = vec![head];
        lines.extend(failure_lines(&text));
        lines.join("\n")
    } else {
        head
    };
    if placeholder.len() >= content_bytes(r) {
        return None;
    }
    let content = Some(match &r.content {
        Some(ToolResultContent::Blocks(_)) => {
            ToolResultContent::Blocks(vec![Block::text(placeholder)])
        }
        _ => ToolResultContent::Text(placeholder),
    });
    // The old content is not copied: only the fields around it.
    let cleared = Block::ToolResult(ToolResult {
        tool_use_id: r.tool_use_id.clone(),
        content,
        is_error: r.is_error,
        extra: r.extra.clone(),
        outcome: r.outcome,
        rewritten: r.rewritten,
    });
    let after = counter.count_block(&cleared);
    let Block::ToolResult(cleared) = cleared else {
        return None;
    };
    if after >= before {
        return None;
    }
    if failed && format.outcome_policy().classify(&cleared) != Outcome::Error {
        return None;
    }
    Some(Cleared {
        message: at.0,
        block: at.1,
        with: cleared,
        tool: tool.to_string(),
        tokens_before: before,
        tokens_after: after,
        recall: entry,
    })
}

/// Bytes of a result's content as sent: its text, plus the JSON of any other block (images).
fn content_bytes(r: &ToolResult) -> usize {
    match &r.content {
        None => 0,
        Some(ToolResultContent::Text(s)) => s.len(),
        Some(ToolResultContent::Blocks(bs)) => bs
            .iter()
            .map(|b| match b {
                Block::Text(t) => t.text.len(),
                Block::Image(v) | Block::Document(v) | Block::Other(v) | Block::Thinking(v) => {
                    v.to_string().len()
                }
                _ => 0,
            })
            .sum(),
    }
}

/// What a cleared failure keeps, in order: the line holding its exit-code marker (verbatim
/// when short, else the marker and code alone), then its first and last informative lines
/// (clipped to [`KEPT_LINE_CHARS`]). Codex's structured output (`{"output": "…",
/// "metadata": …}`) is read through its `output` string.
fn failure_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let marker = exit_marker(text);
    let mut marker_line = None;
    if let Some(m) = marker {
        let from = text
            .get(..m.start)
            .and_then(|t| t.rfind('\n'))
            .map_or(0, |p| p + 1);
        let to = text
            .get(m.end..)
            .and_then(|t| t.find('\n'))
            .map_or(text.len(), |p| m.end + p);
        let line = text.get(from..to).unwrap_or("").trim();
        let kept = if line.chars().count() <= KEPT_LINE_CHARS {
            line
        } else {
            text.get(m.start..m.end).unwrap_or("")
        };
        marker_line = Some(line.to_string());
        out.push(kept.to_string());
    }
    let body = crate::facts::output_text(text);
    let informative = |l: &&str| {
        let t = l.trim();
        marker_line.as_deref() != Some(t) && crate::facts::is_informative(t)
    };
    let first = body.lines().find(informative);
    let last = body.lines().rev().find(informative);
    for l in [first, last].into_iter().flatten() {
        let l = clip(l.trim(), KEPT_LINE_CHARS);
        if !out.contains(&l) {
            out.push(l);
        }
    }
    out
}

/// The call at `at` = (message, block) of `input` with every string value of its JSON input
/// longer than 200 chars replaced by `[compactor: cleared N chars]`, as a [`Capped`]
/// (`tool_use_input`) whose figures are the input's counter tokens before and after; `None`
/// when the block is not a call or its input not a JSON object.
pub fn clear_input(
    input: &Conversation,
    at: (usize, usize),
    counter: &dyn TokenCounter,
) -> Option<Capped> {
    let block = input.messages.get(at.0)?.content.get(at.1)?;
    let Block::ToolUse(t) = block else {
        return None;
    };
    // A JSON input is counted as the compact JSON it serializes to, so the difference of the
    // (cached) block counts is the difference of the inputs' counts: no serializing here.
    let json = matches!(t.input, ToolInput::Json(_));
    let before = if json {
        counter.count_block(block)
    } else {
        counter.count_text_cached(&t.input.to_value().to_string())
    };
    let mut v = t.input.to_value();
    let Value::Object(obj) = &mut v else {
        return None;
    };
    for val in obj.values_mut() {
        if let Value::String(s) = val
            && s.chars().count() > KEPT_INPUT_CHARS
        {
            *s = format!("{CLEARED_PREFIX} {} chars]", thousands(s.chars().count()));
        }
    }
    let t = ToolUse {
        id: t.id.clone(),
        name: t.name.clone(),
        input: match &t.input {
            ToolInput::Json(_) => ToolInput::Json(v),
            ToolInput::Arguments(_) => ToolInput::Arguments(v.to_string()),
            ToolInput::Freeform(s) => ToolInput::Freeform(s.clone()),
        },
        extra: t.extra.clone(),
    };
    let with = Block::ToolUse(t);
    let after = match &with {
        Block::ToolUse(_) if json => counter.count_block(&with),
        Block::ToolUse(t) => counter.count_text_cached(&t.input.to_value().to_string()),
        _ => 0,
    };
    let mut capped = Capped::new(at, with, "tool_use_input", (before, after));
    // The report lists the cleared result, not its call's input (as before the guard wrote
    // both).
    capped.reported = false;
    Some(capped)
}
