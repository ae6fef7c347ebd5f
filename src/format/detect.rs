//! Recognising what a file is and loading it into a [`Conversation`].

use super::{Format, FormatError, claude_code, codex, trajectory};
use crate::conversation::{Conversation, Message};
use serde_json::Value;

impl Source {
    /// Its kebab-case name without the request format: `request`, `claude-code`,
    /// `codex-rollout`, `trajectory`.
    pub fn name(self) -> &'static str {
        match self {
            Source::Request(_) => "request",
            Source::ClaudeCode => "claude-code",
            Source::CodexRollout => "codex-rollout",
            Source::Trajectory => "trajectory",
        }
    }
}

/// Options for importing session logs (owned by the Claude Code importer, the only one with options).
pub use super::claude_code::ImportOptions;

/// Where a conversation came from.
#[non_exhaustive]
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

/// A loaded conversation with its request format and origin.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The conversation.
    pub conversation: Conversation,
    /// The request format it is written back in.
    pub format: Format,
    /// What the input was.
    pub source: Source,
    /// What the import left out, for the caller to tell the user.
    pub notes: LoadNotes,
}

/// What loading left out of the input (all empty for a request body).
#[derive(Debug, Clone, Default)]
pub struct LoadNotes {
    /// Claude Code: the messages before the last `compact_boundary`, which the model no longer
    /// saw and which the import left out ([`ImportOptions::whole_log`] keeps them).
    pub before_boundary: Option<Vec<Message>>,
    /// 1-based number of a cut-off last line of a session log that was skipped (the log is
    /// still being written).
    pub skipped_last_line: Option<usize>,
}

fn claude_code_log(text: &str, options: ImportOptions) -> Result<Loaded, FormatError> {
    let imported = claude_code::import_log(text, options)?;
    Ok(Loaded {
        conversation: imported.conversation,
        format: Format::Anthropic,
        source: Source::ClaudeCode,
        notes: LoadNotes {
            before_boundary: imported.before_boundary,
            skipped_last_line: imported.skipped_last_line,
        },
    })
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
    // A byte-order mark (editors on Windows write one) is not part of the JSON.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
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
                    notes: LoadNotes::default(),
                });
            }
            if claude_code::looks_like_log(text) {
                return claude_code_log(text, options);
            }
            return Err(FormatError::Json {
                location: "input".into(),
                source: err,
            });
        }
    };
    if let Some(format) = hint {
        if let Some(c) = contradiction(&value, format) {
            // Checked here too, before the trajectory import, which is not `Format::read`.
            let message = c.to_string();
            return Err(FormatError::shape(c.path, message));
        }
        if trajectory::is_trajectory(&value) && format == Format::OpenAiChat {
            return Ok(Loaded {
                conversation: trajectory::import(&value)?,
                format,
                source: Source::Trajectory,
                notes: LoadNotes::default(),
            });
        }
        return Ok(Loaded {
            conversation: format.read(&value)?,
            format,
            source: Source::Request(format),
            notes: LoadNotes::default(),
        });
    }
    if trajectory::is_trajectory(&value) {
        return Ok(Loaded {
            conversation: trajectory::import(&value)?,
            format: Format::OpenAiChat,
            source: Source::Trajectory,
            notes: LoadNotes::default(),
        });
    }
    // A one-line Claude Code log is still a log.
    if let Value::Object(entry) = &value
        && claude_code::looks_like_log(text)
        && !entry.contains_key("messages")
    {
        return claude_code_log(text, options);
    }
    let format = guess_format(&value)?;
    Ok(Loaded {
        conversation: format.read(&value)?,
        format,
        source: Source::Request(format),
        notes: LoadNotes::default(),
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

/// Evidence that a body is not of the format it was said to be: the JSON path of the first
/// element only another format has, what it is, and that format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contradiction {
    /// JSON path of the element (`messages[1].content[0]`).
    pub path: String,
    /// What the element is (`a "tool_use" block`).
    pub what: String,
    /// The format the hint named.
    pub given: Format,
    /// The format the element belongs to.
    pub looks_like: Format,
}

impl std::fmt::Display for Contradiction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} belongs to {}, not to {} (the format given); the body looks like {}",
            self.what, self.looks_like, self.given, self.looks_like
        )
    }
}

/// The first element of `value` that only another format has, when `value` is said to be of
/// format `given`. Rules (from each provider's request reference):
/// - Anthropic Messages content blocks `tool_use`, `tool_result`, `thinking`,
///   `redacted_thinking`, and `image`/`document` with a `source`, exist in no OpenAI format;
/// - OpenAI Chat has `tool_calls`, `tool_call_id`, roles `tool`/`developer` and `image_url`
///   parts; the Anthropic Messages API has none of them (its system prompt is top level);
/// - OpenAI Responses items carry a `type` without a `role` (`function_call`, ...) and use
///   `input_text`/`output_text` parts; a Chat body or Anthropic body has neither.
///
/// A bare array is checked the same way. Returns `None` when nothing contradicts `given`.
pub fn contradiction(value: &Value, given: Format) -> Option<Contradiction> {
    let found = |path: String, what: String, looks_like: Format| {
        Some(Contradiction {
            path,
            what,
            given,
            looks_like,
        })
    };
    let key = given.messages_key();
    let items = match value {
        Value::Array(items) => items,
        Value::Object(obj) => {
            let other = if given == Format::OpenAiResponses {
                "messages"
            } else {
                "input"
            };
            match obj.get(key) {
                Some(Value::Array(items)) => items,
                _ => {
                    if let Some(Value::Array(_)) = obj.get(other) {
                        let looks_like = guess_format(value).ok()?;
                        return found(
                            "$".into(),
                            format!("a top-level \"{other}\" array"),
                            looks_like,
                        );
                    }
                    return None;
                }
            }
        }
        _ => return None,
    };
    items
        .iter()
        .enumerate()
        .find_map(|(i, item)| item_contradiction(item, i, given))
}

/// The first element of message item `i` (`item`, one element of the message array) that only
/// another format than `given` has: the per-item rules of [`contradiction`].
pub(crate) fn item_contradiction(item: &Value, i: usize, given: Format) -> Option<Contradiction> {
    let found = |path: String, what: String, looks_like: Format| {
        Some(Contradiction {
            path,
            what,
            given,
            looks_like,
        })
    };
    let key = given.messages_key();
    let m = item.as_object()?;
    let at = format!("{key}[{i}]");
    let role = m.get("role").and_then(Value::as_str);
    if given != Format::OpenAiResponses && m.contains_key("type") && role.is_none() {
        let kind = m.get("type").and_then(Value::as_str).unwrap_or("?");
        return found(
            at,
            format!("an item of type {kind:?} without a role"),
            Format::OpenAiResponses,
        );
    }
    if given != Format::OpenAiChat {
        for field in ["tool_calls", "tool_call_id"] {
            if m.contains_key(field) {
                return found(
                    format!("{at}.{field}"),
                    format!("a \"{field}\" field"),
                    Format::OpenAiChat,
                );
            }
        }
        if given == Format::Anthropic && matches!(role, Some("tool" | "developer")) {
            return found(
                format!("{at}.role"),
                format!("role {:?}", role.unwrap_or_default()),
                Format::OpenAiChat,
            );
        }
    }
    let Some(Value::Array(blocks)) = m.get("content") else {
        return None;
    };
    for (j, b) in blocks.iter().enumerate() {
        let Some(kind) = b.get("type").and_then(Value::as_str) else {
            continue;
        };
        let looks_like = match kind {
            "tool_use" | "tool_result" | "thinking" | "redacted_thinking" => Format::Anthropic,
            "image" | "document" if b.get("source").is_some() => Format::Anthropic,
            "image_url" => Format::OpenAiChat,
            "input_text" | "output_text" | "input_image" | "input_file" => Format::OpenAiResponses,
            _ => continue,
        };
        if looks_like != given {
            return found(
                format!("{at}.content[{j}]"),
                format!("a {kind:?} block"),
                looks_like,
            );
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_source_name_is_its_serde_name_without_the_format() {
        for s in [Source::ClaudeCode, Source::CodexRollout, Source::Trajectory] {
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.name()));
        }
        let request = serde_json::to_value(Source::Request(Format::OpenAiChat)).unwrap();
        assert_eq!(request, json!({"request": "openai-chat"}));
        assert_eq!(Source::Request(Format::OpenAiChat).name(), "request");
    }

    fn anthropic_body() -> Value {
        json!({"model": "m", "max_tokens": 8, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
        ]})
    }

    #[test]
    fn an_anthropic_body_said_to_be_openai_chat_is_refused_at_its_first_anthropic_block() {
        let err = load(
            anthropic_body().to_string().as_bytes(),
            Some(Format::OpenAiChat),
            ImportOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "messages[1].content[0]: a \"tool_use\" block belongs to anthropic, not to openai-chat \
             (the format given); the body looks like anthropic"
        );
    }

    #[test]
    fn a_chat_body_said_to_be_anthropic_is_refused_at_its_tool_calls() {
        let body = json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}
        ]});
        let c = contradiction(&body, Format::Anthropic).unwrap();
        assert_eq!(c.path, "messages[1].tool_calls");
        assert_eq!(c.looks_like, Format::OpenAiChat);
        let c = contradiction(&body, Format::OpenAiResponses).unwrap();
        assert_eq!((c.path.as_str(), c.looks_like), ("$", Format::OpenAiChat));
    }

    #[test]
    fn a_body_of_the_format_given_has_no_contradiction() {
        assert_eq!(contradiction(&anthropic_body(), Format::Anthropic), None);
        let items = json!([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                           {"role": "user", "content": [{"type": "input_text", "text": "x"}]}]);
        assert_eq!(contradiction(&items, Format::OpenAiResponses), None);
        let c = contradiction(&items, Format::OpenAiChat).unwrap();
        assert_eq!(
            (c.path.as_str(), c.looks_like),
            ("messages[0]", Format::OpenAiResponses)
        );
    }

    #[test]
    fn a_byte_order_mark_is_read_past() {
        let text = format!("\u{feff}{}", anthropic_body());
        let loaded = load(text.as_bytes(), None, ImportOptions::default()).unwrap();
        assert_eq!(loaded.format, Format::Anthropic);
        assert_eq!(loaded.conversation.messages.len(), 3);
    }
}
