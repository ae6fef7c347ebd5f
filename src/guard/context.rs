//! The client's standing context in its user messages (which text blocks are context to carry
//! when their message is dropped, which are noise, which request is the client's own summary
//! request), and the tools a block loads: what the layout reads of a conversation before any
//! cut is chosen ([`super::Layout`]) and what a drop carries ([`super::carry`]).

use crate::conversation::{Block, Conversation, Role, ToolResultContent};
use crate::rules::BlockKind;
use serde_json::Value;

/// Which text blocks of a user message are the client's standing context (carried when the
/// message is dropped) and which of those are noise (left to go). A block is context when it
/// holds an element `<TAG ...>` … `</TAG>` of a listed tag and none of the noise phrases.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContextRules {
    /// Tags whose blocks are context: Claude Code's `system-reminder` (CLAUDE.md, the working
    /// directory and date, the deferred-tool list, skills), Codex's `environment_context`,
    /// `user_instructions` and `INSTRUCTIONS` (AGENTS.md), Gemini CLI's `session_context`
    /// (date, OS, workspace directories and layout).
    pub tags: Vec<String>,
    /// Phrases that make a context block noise: periodic nudges that carry no standing fact.
    pub noise: Vec<String>,
    /// Phrases of a client's own request for a summary of the conversation (Claude Code sends
    /// the whole history plus a user text asking for "a detailed summary of the conversation
    /// so far" after a `prompt is too long` answer). A request whose newest message is a user
    /// turn with one of them in a text block is compacted only as far as the model's context
    /// window requires ([`crate::report::RequestKind::ClientSummary`]).
    pub summary_requests: Vec<String>,
}

impl Default for ContextRules {
    fn default() -> Self {
        ContextRules {
            tags: [
                "system-reminder",
                "environment_context",
                "user_instructions",
                "INSTRUCTIONS",
                "session_context",
            ]
            .map(String::from)
            .to_vec(),
            noise: [
                "tools haven't been used recently",
                "tool hasn't been used recently",
                "have not been used recently",
            ]
            .map(String::from)
            .to_vec(),
            summary_requests: vec![
                "Your task is to create a detailed summary of the conversation so far".into(),
            ],
        }
    }
}

impl ContextRules {
    /// The tag of a kind [`ContextRules::kind_of`] gave (`environment_context`,
    /// `INSTRUCTIONS`, `system-reminder`).
    pub fn tag_of(kind: &str) -> &str {
        kind.split('\n').next().unwrap_or(kind)
    }

    /// Whether `conversation` is a client's own request for a summary: its newest message is a
    /// user turn holding a text block with one of [`ContextRules::summary_requests`].
    pub fn is_summary_request(&self, conversation: &Conversation) -> bool {
        let Some(last) = conversation.messages.last() else {
            return false;
        };
        last.role == Role::User
            && last.content.iter().any(|b| match b {
                Block::Text(t) => self
                    .summary_requests
                    .iter()
                    .any(|p| !p.is_empty() && t.text.contains(p.as_str())),
                _ => false,
            })
    }

    /// The kind of a context block (its tag and first line of substance), or `None` when the
    /// text is not context.
    pub fn kind_of(&self, text: &str) -> Option<String> {
        let tag = self.tags.iter().find(|t| {
            let open = format!("<{t}");
            let close = format!("</{t}>");
            text.lines().any(|l| l.trim_start().starts_with(&open)) && text.contains(&close)
        })?;
        if self.noise.iter().any(|n| text.contains(n.as_str())) {
            return None;
        }
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && *l != format!("<{tag}>"))
            .unwrap_or("");
        Some(format!("{tag}\n{first}"))
    }
}

/// The tools a block loads (kind [`BlockKind::ToolReference`] inside a tool result, the
/// `tool_references` of a server tool search result, the `tools` of a Responses tool search
/// output).
pub(crate) fn loaded_tools(table: &crate::rules::Table, b: &Block) -> Vec<String> {
    let name_of = |v: &Value| {
        v.get("tool_name")
            .or_else(|| v.get("name"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    match b {
        Block::ToolResult(r) => match &r.content {
            Some(ToolResultContent::Blocks(inner)) => inner
                .iter()
                .filter(|x| table.kind_of_block(x) == Some(BlockKind::ToolReference))
                .filter_map(|x| match x {
                    Block::Other(v) => name_of(v),
                    _ => None,
                })
                .collect(),
            _ => r
                .extra
                .get("tools")
                .and_then(Value::as_array)
                .map(|tools| tools.iter().filter_map(name_of).collect())
                .unwrap_or_default(),
        },
        Block::Other(v) if table.kind_of_block(b) == Some(BlockKind::ServerOutput) => v
            .get("content")
            .and_then(|c| c.get("tool_references"))
            .and_then(Value::as_array)
            .map(|refs| refs.iter().filter_map(name_of).collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}
