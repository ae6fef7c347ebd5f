//! `microcompact`: clear the content of stale tool results.
//!
//! All tool results but those of the `keep_recent` most recent tool calls, for tools on the
//! compactable list, get their content replaced by a short placeholder that names the tool, the
//! call id and the original size. Ids, tool names and `is_error` stay, so pairing holds and a
//! failure still reads as one. Images inside a cleared result go too. Optionally, the string
//! values of the matching tool_use inputs are cleared as well. When fewer than `clear_at_least`
//! tokens would go, nothing is done: a cleared prefix costs a prompt-cache rewrite.

use super::text_cut::thousands;
use super::{Budget, Compaction, Context, Edit, Strategy, StrategyError};
use crate::conversation::{Block, Conversation, Outcome, ToolInput, ToolResultContent};
use crate::guard::Units;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;

/// The words every placeholder starts with; a result that holds them is not cleared again.
pub const CLEARED_PREFIX: &str = "[compactor: cleared";

/// Settings of [`Microcompact`].
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MicrocompactConfig {
    /// How many of the most recent tool calls keep their results.
    pub keep_recent: usize,
    /// Tools whose results may be cleared (case-insensitive names). Reads, searches, shells and
    /// web fetches: their output can be had again. Edits and writes are not on it.
    pub compactable_tools: Vec<String>,
    /// Do nothing unless at least this many tokens go.
    pub clear_at_least: usize,
    /// Results at or below this many tokens are left alone (the placeholder would not save).
    pub min_result_tokens: usize,
    /// Also clear the string values of the tool_use inputs of cleared calls.
    pub clear_tool_inputs: bool,
}

impl Default for MicrocompactConfig {
    fn default() -> Self {
        MicrocompactConfig {
            keep_recent: 5,
            compactable_tools: [
                "Read",
                "Grep",
                "Glob",
                "LS",
                "Bash",
                "BashOutput",
                "WebFetch",
                "WebSearch",
                "local_shell",
                "NotebookRead",
                "shell",
                "bash",
                "exec_command",
                "read_file",
                "read",
                "grep",
                "glob",
                "search",
                "list_dir",
                "find",
                "web_fetch",
                "web_search",
                "fetch",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            clear_at_least: 0,
            min_result_tokens: 40,
            clear_tool_inputs: false,
        }
    }
}

/// The microcompact strategy.
#[derive(Debug, Clone, Default)]
pub struct Microcompact {
    /// Its settings.
    pub config: MicrocompactConfig,
}

#[async_trait::async_trait]
impl Strategy for Microcompact {
    fn name(&self) -> &str {
        "microcompact"
    }

    async fn compact(
        &self,
        conversation: &Conversation,
        budget: Budget,
        cx: &Context<'_>,
    ) -> Result<Compaction, StrategyError> {
        Ok(self.run(conversation, budget, cx))
    }
}

impl Microcompact {
    /// The synchronous core of [`Strategy::compact`]. Clears from the oldest result on and stops
    /// as soon as the target is reached, so a compaction clears no more than it must.
    pub fn run(&self, input: &Conversation, budget: Budget, cx: &Context<'_>) -> Compaction {
        let counter = cx.counter;
        let c = &self.config;
        let allowed: Vec<String> = c
            .compactable_tools
            .iter()
            .map(|s| s.to_lowercase())
            .collect();
        let calls: Vec<(usize, &str, &str)> = input
            .messages
            .iter()
            .enumerate()
            .flat_map(|(i, m)| {
                m.tool_uses()
                    .map(move |t| (i, t.id.as_str(), t.name.as_str()))
            })
            .collect();
        let recent_from = calls.len().saturating_sub(c.keep_recent);
        let stale: HashMap<&str, &str> = calls[..recent_from]
            .iter()
            .filter(|(_, _, name)| allowed.contains(&name.to_lowercase()))
            .map(|(_, id, name)| (*id, *name))
            .collect();
        let units = Units::of(input);
        let mut conv = input.clone();
        let mut edits = Vec::new();
        let mut saved = 0usize;
        let mut total = counter.count_conversation(input);
        let has_flag = cx.format.has_error_flag();
        for i in units.pinned..conv.messages.len() {
            for j in 0..conv.messages[i].content.len() {
                if total <= budget.target {
                    break;
                }
                let Block::ToolResult(r) = &conv.messages[i].content[j] else {
                    continue;
                };
                let Some(tool) = stale.get(r.tool_use_id.as_str()).copied() else {
                    continue;
                };
                // No content: nothing to clear, or a built-in tool's non-text output (a
                // `computer_call_output` screenshot) that must keep its shape.
                if r.content.is_none() || r.text().starts_with(CLEARED_PREFIX) {
                    continue;
                }
                let before = counter.count_block(&conv.messages[i].content[j]);
                if before <= c.min_result_tokens {
                    continue;
                }
                let failed = r.outcome(has_flag) == Outcome::Error;
                let id = r.tool_use_id.clone();
                let placeholder = format!(
                    "{CLEARED_PREFIX} {}result of {tool} call {id} ({} tokens) to save context; re-run the tool if it is needed]",
                    if failed { "failed (error) " } else { "" },
                    thousands(before)
                );
                if let Block::ToolResult(r) = &mut conv.messages[i].content[j] {
                    r.content = Some(match &r.content {
                        Some(ToolResultContent::Blocks(_)) => {
                            ToolResultContent::Blocks(vec![Block::text(placeholder)])
                        }
                        _ => ToolResultContent::Text(placeholder),
                    });
                }
                let after = counter.count_block(&conv.messages[i].content[j]);
                let freed = before.saturating_sub(after);
                saved += freed;
                total = total.saturating_sub(freed);
                edits.push(Edit::Cleared {
                    message: i,
                    block: j,
                    id: id.clone(),
                    tool: tool.to_string(),
                    tokens: freed,
                });
                if c.clear_tool_inputs {
                    saved += clear_input(&mut conv, &id, cx);
                }
            }
        }
        if edits.is_empty() {
            return Compaction::unchanged(
                input,
                "microcompact: no stale compactable tool result to clear",
            );
        }
        if saved < c.clear_at_least {
            return Compaction::unchanged(
                input,
                format!(
                    "microcompact: only {saved} tokens could be cleared, below clear_at_least = {}",
                    c.clear_at_least
                ),
            );
        }
        Compaction {
            conversation: conv,
            edits,
            notes: Vec::new(),
            degraded: None,
        }
    }
}

/// Clears the long string values of the input of call `id`; returns the tokens freed.
fn clear_input(conv: &mut Conversation, id: &str, cx: &Context<'_>) -> usize {
    for m in &mut conv.messages {
        for b in &mut m.content {
            let Block::ToolUse(t) = b else { continue };
            if t.id != id {
                continue;
            }
            let before = cx
                .counter
                .count_text_cached(&t.input.to_value().to_string());
            let mut v = t.input.to_value();
            if let Value::Object(obj) = &mut v {
                for val in obj.values_mut() {
                    if let Value::String(s) = val
                        && s.chars().count() > 200
                    {
                        *s = format!("{CLEARED_PREFIX} {} chars]", thousands(s.chars().count()));
                    }
                }
            } else {
                return 0;
            }
            t.input = match &t.input {
                ToolInput::Json(_) => ToolInput::Json(v),
                ToolInput::Arguments(_) => ToolInput::Arguments(v.to_string()),
                ToolInput::Freeform(s) => ToolInput::Freeform(s.clone()),
            };
            let after = cx
                .counter
                .count_text_cached(&t.input.to_value().to_string());
            return before.saturating_sub(after);
        }
    }
    0
}
