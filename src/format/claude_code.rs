//! Claude Code session logs (JSONL under `~/.claude/projects/`).

use super::FormatError;
use super::detect::ImportOptions;
use crate::conversation::Conversation;

/// True when the text looks like a Claude Code session log.
pub fn looks_like_log(text: &str) -> bool {
    text.lines()
        .take(50)
        .any(|l| l.contains("\"sessionId\"") || l.contains("\"parentUuid\""))
}

/// Imports a session log as an Anthropic conversation.
///
/// # Errors
/// [`FormatError`] naming the line of the first malformed entry.
pub fn import(_text: &str, _options: ImportOptions) -> Result<Conversation, FormatError> {
    Err(FormatError::Unrecognised(
        "Claude Code logs are not supported yet".into(),
    ))
}
