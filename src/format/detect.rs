//! Recognising what a file is and loading it into a [`Conversation`].

use super::{Format, FormatError, claude_code, codex, trajectory};
use crate::conversation::Conversation;
use serde_json::Value;

/// Where a conversation came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// A request body (or bare message array) of the given format.
    Request(Format),
    /// A Claude Code session log (`~/.claude/projects/**.jsonl`), imported as Anthropic.
    ClaudeCode,
    /// A Codex CLI rollout (`~/.codex/sessions/**.jsonl`), imported as OpenAI Responses.
    CodexRollout,
    /// A trajectory object whose `messages` is an OpenAI Chat array (mini-swe-agent
    /// `.traj.json`), imported as OpenAI Chat.
    Trajectory,
}

/// Options for importing session logs.
#[derive(Debug, Clone, Copy, Default)]
pub struct ImportOptions {
    /// Claude Code: keep the whole log instead of starting at the last `compact_boundary`.
    pub whole_log: bool,
}

/// A loaded conversation with its request format and origin.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The conversation.
    pub conversation: Conversation,
    /// The request format it is written back in.
    pub format: Format,
    /// What the input was.
    pub source: Source,
}

/// Loads bytes as a conversation. With `hint`, the bytes must be a request body of that format;
/// without, the format is detected: JSONL session logs (Claude Code, Codex) by their entry types,
/// JSON bodies by their keys and message shapes ([`guess_format`]).
///
/// # Errors
/// [`FormatError`] when the bytes are not JSON / JSONL, the format cannot be told, or an element is
/// malformed (with its path or line).
pub fn load(
    bytes: &[u8],
    hint: Option<Format>,
    options: ImportOptions,
) -> Result<Loaded, FormatError> {
    let text = std::str::from_utf8(bytes).map_err(|e| FormatError::Shape {
        path: "input".into(),
        message: format!("not UTF-8 at byte {}", e.valid_up_to()),
    })?;
    let whole: Result<Value, _> = serde_json::from_str(text);
    let value = match whole {
        Ok(v) => v,
        Err(err) => {
            // Not one JSON document: a JSONL session log?
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let Ok(Value::Object(entry)) = serde_json::from_str::<Value>(first) else {
                return Err(FormatError::Json {
                    location: "input".into(),
                    source: err,
                });
            };
            if codex::is_rollout_entry(&entry) {
                return Ok(Loaded {
                    conversation: codex::import(text)?,
                    format: Format::OpenAiResponses,
                    source: Source::CodexRollout,
                });
            }
            if claude_code::looks_like_log(text) {
                return Ok(Loaded {
                    conversation: claude_code::import(text, options)?,
                    format: Format::Anthropic,
                    source: Source::ClaudeCode,
                });
            }
            return Err(FormatError::Json {
                location: "input".into(),
                source: err,
            });
        }
    };
    if let Some(format) = hint {
        if trajectory::is_trajectory(&value) && format == Format::OpenAiChat {
            return Ok(Loaded {
                conversation: trajectory::import(&value)?,
                format,
                source: Source::Trajectory,
            });
        }
        return Ok(Loaded {
            conversation: format.read(&value)?,
            format,
            source: Source::Request(format),
        });
    }
    if trajectory::is_trajectory(&value) {
        return Ok(Loaded {
            conversation: trajectory::import(&value)?,
            format: Format::OpenAiChat,
            source: Source::Trajectory,
        });
    }
    // A one-line Claude Code log is still a log.
    if let Value::Object(entry) = &value
        && claude_code::looks_like_log(text)
        && !entry.contains_key("messages")
    {
        return Ok(Loaded {
            conversation: claude_code::import(text, options)?,
            format: Format::Anthropic,
            source: Source::ClaudeCode,
        });
    }
    let format = guess_format(&value)?;
    Ok(Loaded {
        conversation: format.read(&value)?,
        format,
        source: Source::Request(format),
    })
}

/// Guesses the request format of a JSON body: `input` => Responses; a message with role
/// `system`/`developer`/`tool`, `tool_calls` or `tool_call_id` => OpenAI Chat; an item with a `type`
/// and no `role` => Responses; blocks of Anthropic types or a top-level `system` => Anthropic.
/// Plain user/assistant text with nothing else to tell is read as Anthropic (both readers
/// accept it and write it back unchanged).
///
/// # Errors
/// [`FormatError::Unrecognised`] when the value is neither a request object nor an array.
pub fn guess_format(value: &Value) -> Result<Format, FormatError> {
    let items = match value {
        Value::Array(items) => items,
        Value::Object(obj) => {
            if let Some(Value::Array(_)) = obj.get("input") {
                return Ok(Format::OpenAiResponses);
            }
            match obj.get("messages") {
                Some(Value::Array(items)) => items,
                _ => {
                    return Err(FormatError::Unrecognised(
                        "expected a request body with \"messages\" or \"input\", a message array, or a session log".into(),
                    ));
                }
            }
        }
        _ => {
            return Err(FormatError::Unrecognised(
                "expected a JSON object or array".into(),
            ));
        }
    };
    for item in items {
        let Some(m) = item.as_object() else { continue };
        if m.contains_key("type") && !m.contains_key("role") {
            return Ok(Format::OpenAiResponses);
        }
        if matches!(
            m.get("role").and_then(Value::as_str),
            Some("system" | "developer" | "tool")
        ) || m.contains_key("tool_calls")
            || m.contains_key("tool_call_id")
        {
            return Ok(Format::OpenAiChat);
        }
        if let Some(Value::Array(blocks)) = m.get("content") {
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("input_text" | "output_text") => return Ok(Format::OpenAiResponses),
                    Some("image_url") => return Ok(Format::OpenAiChat),
                    Some("tool_use" | "tool_result" | "thinking" | "redacted_thinking") => {
                        return Ok(Format::Anthropic);
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(Format::Anthropic)
}
