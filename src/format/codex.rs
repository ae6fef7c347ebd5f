//! Codex CLI rollout JSONL: one entry per line, `{"timestamp", "type": "session_meta" |
//! "response_item" | "turn_context" | "event_msg", "payload"}`.

use super::FormatError;
use crate::conversation::{Conversation, Object};

/// True when a first JSONL entry looks like a Codex rollout entry.
pub fn is_rollout_entry(entry: &Object) -> bool {
    matches!(
        entry.get("type").and_then(serde_json::Value::as_str),
        Some("session_meta" | "response_item" | "turn_context" | "event_msg")
    ) && entry.contains_key("payload")
}

/// Imports a rollout as an OpenAI Responses conversation.
///
/// # Errors
/// [`FormatError`] naming the line of the first malformed entry.
pub fn import(_text: &str) -> Result<Conversation, FormatError> {
    Err(FormatError::Unrecognised(
        "Codex rollouts are not supported yet".into(),
    ))
}
