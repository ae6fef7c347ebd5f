//! Rule-made digests: one line per block of the messages a strategy removes.
//!
//! ```text
//! [user] Run the tests and fix what fails.
//! [call toolu_01 Bash(cargo test)]
//! [result toolu_01 (error): 3 tests failed: config::loads …]
//! ```
//!
//! Thinking is never copied. A failed call is never written as a success: its line says
//! `(error)`; a result whose outcome the wire does not record says `(outcome unknown)`. Every
//! call and result line names the call id, so a fact can be traced to its source.

use crate::conversation::{Block, Message, Outcome, Role, ToolResult};
use crate::render::{call_summary, one_line_clipped, one_line_tail};
use crate::tokens::TokenCounter;
use std::collections::HashMap;

/// The fixed first words of every marker message compactor writes; a later pass recognises its
/// own markers by them and carries their digest lines forward.
pub const MARKER_PREFIX: &str = "[compactor: earlier conversation compacted]";

/// A digest of removed messages, ready to be written into a marker message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Digest {
    /// The lines kept, oldest first.
    pub lines: Vec<String>,
    /// Lines left out to respect the token limit.
    pub omitted: usize,
}

/// Characters kept of a user's text, of an assistant's text and of a result.
const USER_CHARS: usize = 240;
const ASSISTANT_CHARS: usize = 160;
const RESULT_CHARS: usize = 100;

/// The digest line for one block, or `None` for blocks that leave no line (thinking, empty
/// text). `tools` maps call ids to tool names; `has_error_flag` tells whether the wire marks
/// failures explicitly (Anthropic), so a result without the flag is a known success.
pub fn digest_line(
    role: Role,
    b: &Block,
    tools: &HashMap<&str, &str>,
    has_error_flag: bool,
) -> Option<String> {
    Some(match b {
        Block::Text(t) if t.text.trim().is_empty() => return None,
        Block::Text(t) if t.text.starts_with(MARKER_PREFIX) => return None,
        Block::Text(t) => {
            let max = if role == Role::User {
                USER_CHARS
            } else {
                ASSISTANT_CHARS
            };
            format!("[{role}] {}", one_line_clipped(&t.text, max))
        }
        Block::ToolUse(t) => format!("[call {} {}]", t.id, call_summary(t, 80)),
        Block::ToolResult(r) => result_line(
            r,
            tools.get(r.tool_use_id.as_str()).copied(),
            has_error_flag,
        ),
        Block::Thinking(_) => return None,
        Block::Image(_) => format!("[{role} image]"),
        Block::Document(_) => format!("[{role} document]"),
        Block::Other(_) => format!("[{}]", b.kind()),
    })
}

fn result_line(r: &ToolResult, tool: Option<&str>, has_error_flag: bool) -> String {
    let tag = match r.outcome(has_error_flag) {
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

impl Digest {
    /// Builds the digest of `messages` within `max_tokens`. When everything does not fit, the
    /// lines kept are, in order of priority: failed results and their calls, the user's words,
    /// then the most recent lines; the rest is counted in [`Digest::omitted`]. Lines of earlier
    /// marker messages are carried forward as they are.
    pub fn build(
        messages: &[Message],
        has_error_flag: bool,
        max_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> Digest {
        let tools: HashMap<&str, &str> = messages
            .iter()
            .flat_map(Message::tool_uses)
            .map(|t| (t.id.as_str(), t.name.as_str()))
            .collect();
        let failed: Vec<&str> = messages
            .iter()
            .flat_map(Message::tool_results)
            .filter(|r| r.outcome(has_error_flag) == Outcome::Error)
            .map(|r| r.tool_use_id.as_str())
            .collect();
        // (line, priority): 0 = must keep, 1 = user words, 2 = the rest.
        let mut all: Vec<(String, u8)> = Vec::new();
        for m in messages {
            for b in &m.content {
                if let Block::Text(t) = b
                    && let Some(rest) = t.text.strip_prefix(MARKER_PREFIX)
                {
                    for line in rest.lines().filter(|l| l.starts_with('[')) {
                        let p = if line.contains("(error)") { 0 } else { 2 };
                        all.push((line.to_string(), p));
                    }
                    continue;
                }
                let Some(line) = digest_line(m.role, b, &tools, has_error_flag) else {
                    continue;
                };
                let priority = match b {
                    Block::ToolResult(r) if failed.contains(&r.tool_use_id.as_str()) => 0,
                    Block::ToolUse(t) if failed.contains(&t.id.as_str()) => 0,
                    Block::Text(_) if m.role == Role::User => 1,
                    _ => 2,
                };
                all.push((line, priority));
            }
        }
        let costs: Vec<usize> = all
            .iter()
            .map(|(l, _)| counter.count_text_cached(l) + 1)
            .collect();
        let mut keep = vec![false; all.len()];
        let mut used = 0;
        for priority in 0..=2u8 {
            for i in (0..all.len()).rev() {
                if all[i].1 == priority && used + costs[i] <= max_tokens {
                    keep[i] = true;
                    used += costs[i];
                }
            }
        }
        // Failures are kept even past the limit: a failure must never vanish.
        for i in 0..all.len() {
            if all[i].1 == 0 {
                keep[i] = true;
            }
        }
        let omitted = keep.iter().filter(|k| !**k).count();
        let lines = all
            .into_iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .map(|((l, _), _)| l)
            .collect();
        Digest { lines, omitted }
    }

    /// The marker message text: the fixed prefix, what was removed, then the lines.
    pub fn marker_text(&self, removed_messages: usize, removed_tokens: usize) -> String {
        let mut s = format!(
            "{MARKER_PREFIX} {removed_messages} earlier messages ({removed_tokens} tokens) were removed to fit the context window. What they held, one line per block (rule-made, not a summary):\n"
        );
        for l in &self.lines {
            s.push_str(l);
            s.push('\n');
        }
        if self.omitted > 0 {
            s.push_str(&format!("[… {} more lines omitted]\n", self.omitted));
        }
        s
    }
}
