//! One-line renderings of blocks for the summary strategy's transcript and ledger
//! ([`digest_line`]); the session state a dropped span leaves behind is [`crate::facts::SessionState`].
//!
//! ```text
//! [user] Run the tests and fix what fails.
//! [call toolu_01 Bash(cargo test)]
//! [result toolu_01 (error): 3 tests failed: config::loads …]
//! ```
//!
//! Thinking is never copied. A failed call is never written as a success: its line says
//! `(error)`; a result whose outcome the wire does not record says `(outcome unknown)`.

use crate::conversation::{Block, Outcome, Role, ToolResult};
pub use crate::facts::MARKER_PREFIX;
use crate::render::{call_summary, one_line_clipped, one_line_tail};
use std::collections::HashMap;

/// Characters kept of a user's text, of an assistant's text and of a result.
const USER_CHARS: usize = 240;
const ASSISTANT_CHARS: usize = 160;
const RESULT_CHARS: usize = 100;

/// The digest line for one block, or `None` for blocks that leave no line (thinking, empty
/// text). `tools` maps call ids to tool names.
pub fn digest_line(role: &Role, b: &Block, tools: &HashMap<&str, &str>) -> Option<String> {
    Some(match b {
        Block::Text(t) if t.text.trim().is_empty() => return None,
        Block::Text(t) if t.text.starts_with(MARKER_PREFIX) => return None,
        Block::Text(t) => {
            let max = if *role == Role::User {
                USER_CHARS
            } else {
                ASSISTANT_CHARS
            };
            format!("[{role}] {}", one_line_clipped(&t.text, max))
        }
        Block::ToolUse(t) => format!("[call {} {}]", t.id, call_summary(t, 80)),
        Block::ToolResult(r) => result_line(r, tools.get(r.tool_use_id.as_str()).copied()),
        Block::Thinking(_) => return None,
        Block::Image(_) => format!("[{role} image]"),
        Block::Document(_) => format!("[{role} document]"),
        Block::Other(_) => format!("[{}]", b.kind()),
    })
}

fn result_line(r: &ToolResult, tool: Option<&str>) -> String {
    let tag = match r.outcome() {
        Outcome::Success => "",
        Outcome::Error => " (error)",
        Outcome::Unknown => " (outcome unknown)",
    };
    let tool = tool.map(|t| format!(" {t}")).unwrap_or_default();
    let full = r.text();
    let text = one_line_clipped(&full, RESULT_CHARS);
    if text.starts_with(crate::strategy::microcompact::CLEARED_PREFIX) {
        return format!("[result {}{tool}{tag}: cleared]", r.tool_use_id);
    }
    if tag == " (error)" {
        // A failure says why at the end (panics, exit codes, the last compiler error).
        if let Some(tail) = one_line_tail(&full, RESULT_CHARS) {
            return format!("[result {}{tool}{tag}: …{tail}]", r.tool_use_id);
        }
    }
    if text.is_empty() {
        format!("[result {}{tool}{tag}]", r.tool_use_id)
    } else {
        format!("[result {}{tool}{tag}: {text}]", r.tool_use_id)
    }
}
