//! Format adapters: provider wire JSON <-> [`Conversation`].
//!
//! ```text
//! bytes -> detect -> read (lossless) -> Conversation -> ... -> write (same format) -> JSON
//! ```
//!
//! Four request formats are read and written: Anthropic Messages (`anthropic`), OpenAI Chat
//! Completions (`openai_chat`), OpenAI Responses (`openai_responses`) and Google Gemini
//! `generateContent` (`gemini`). Three session logs are
//! imported into a request conversation: Claude Code session JSONL (`claude_code`, to
//! Anthropic), Codex CLI rollouts (`codex`, to Responses) and mini-swe-agent trajectories
//! (`trajectory`, to OpenAI Chat). [`convert()`] turns a conversation of one request format into
//! another. [`detect`] guesses the format of unknown bytes.

pub(crate) mod anthropic;
pub(crate) mod claude_code;
pub(crate) mod codex;
mod convert;
pub(crate) use convert::system_text;
pub mod detect;
pub(crate) mod emit;
pub(crate) mod gemini;
mod gemini_convert;
pub(crate) mod openai_chat;
pub(crate) mod openai_responses;
#[cfg(feature = "server")]
pub(crate) mod slices;
pub(crate) mod trajectory;

#[cfg(all(test, feature = "server"))]
mod props_tests;

pub use convert::{Dropped, convert, missing_fields};
pub use detect::{Source, load};

use crate::conversation::{Conversation, Object};
use serde_json::Value;

/// A request-body format: what is read, compacted and written back.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Anthropic Messages API request body (`{"system", "messages": [...]}`) or a bare array.
    Anthropic,
    /// OpenAI Chat Completions request body (`{"messages": [...]}`) or a bare array.
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    /// OpenAI Responses API request body (`{"instructions", "input": [...]}`) or a bare array.
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// Google Gemini `generateContent` request body (`{"systemInstruction", "contents": [...]}`)
    /// or a bare array of contents (`gemini`).
    Gemini,
}

impl Format {
    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Anthropic => "anthropic",
            Format::OpenAiChat => "openai-chat",
            Format::OpenAiResponses => "openai-responses",
            Format::Gemini => "gemini",
        }
    }

    /// The JSON key of the message list in a request body (`messages`, `input` or
    /// `contents`).
    pub fn messages_key(self) -> &'static str {
        match self {
            Format::OpenAiResponses => "input",
            Format::Gemini => gemini::CONTENTS,
            _ => "messages",
        }
    }

    /// The top-level key of the system prompt in a request body: `system` (Anthropic),
    /// `instructions` (Responses) or `systemInstruction` (Gemini). OpenAI Chat carries its
    /// system prompt as a `system` message, so its reader takes no such key; a conversation
    /// given a top-level system value is written with it under `system`.
    pub fn system_key(self) -> &'static str {
        match self {
            Format::OpenAiResponses => "instructions",
            Format::Gemini => gemini::SYSTEM,
            Format::Anthropic | Format::OpenAiChat => "system",
        }
    }

    /// The top-level key the reader takes the system prompt from ([`Format::system_key`];
    /// `None` for OpenAI Chat, whose system prompt is a message).
    pub(crate) fn read_system_key(self) -> Option<&'static str> {
        (self != Format::OpenAiChat).then(|| self.system_key())
    }

    /// The provider's rule table ([`crate::rules`]): its roles, block and item types, pairs,
    /// placement and carry rules.
    pub(crate) fn rules(self) -> &'static crate::rules::Table {
        match self {
            Format::Anthropic => &crate::rules::ANTHROPIC,
            Format::OpenAiChat => &crate::rules::OPENAI_CHAT,
            Format::OpenAiResponses => &crate::rules::OPENAI_RESPONSES,
            Format::Gemini => &crate::rules::GEMINI,
        }
    }

    /// The rule that tells a tool result's outcome on this wire (`crate::outcome`):
    /// `is_error` for Anthropic and Gemini (whose reader sets it from `response.error`), harness
    /// exit codes for OpenAI Chat and Responses.
    pub fn outcome_policy(self) -> crate::outcome::OutcomePolicy {
        match self {
            Format::Anthropic | Format::Gemini => crate::outcome::OutcomePolicy::Anthropic,
            Format::OpenAiChat | Format::OpenAiResponses => crate::outcome::OutcomePolicy::ExitCode,
        }
    }

    /// Reads a request body (or bare message array) of this format.
    ///
    /// # Errors
    /// [`FormatError`] naming the JSON path of the first malformed element, or of the first
    /// element only another format has ([`detect::contradiction`]: an Anthropic `tool_use`
    /// block read as OpenAI Chat is refused, not misread).
    pub fn read(self, body: &Value) -> Result<Conversation, FormatError> {
        // A body of another format is refused where it shows, not misread as this one.
        if let Some(c) = detect::contradiction(body, self) {
            let message = c.to_string();
            return Err(FormatError::shape(c.path, message));
        }
        match self {
            Format::Anthropic => anthropic::read(body),
            Format::OpenAiChat => openai_chat::read(body),
            Format::OpenAiResponses => openai_responses::read(body),
            Format::Gemini => gemini::read(body),
        }
    }

    /// Writes a conversation as compact JSON bytes of a request body of this format: the
    /// bytes of `serde_json::to_vec(&self.write(conversation))`, without the `Value` tree
    /// (`emit`).
    pub fn write_bytes(self, conversation: &Conversation) -> Vec<u8> {
        emit::write_bytes(self, conversation)
    }

    /// Writes a conversation as a request body of this format.
    pub fn write(self, conversation: &Conversation) -> Value {
        match self {
            Format::Anthropic => anthropic::write(conversation),
            Format::OpenAiChat => openai_chat::write(conversation),
            Format::OpenAiResponses => openai_responses::write(conversation),
            Format::Gemini => gemini::write(conversation),
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "anthropic" => Ok(Format::Anthropic),
            "openai-chat" | "openai" | "chat" => Ok(Format::OpenAiChat),
            "openai-responses" | "responses" => Ok(Format::OpenAiResponses),
            "gemini" | "google" => Ok(Format::Gemini),
            other => Err(format!(
                "unknown format {other:?} (expected anthropic, openai-chat, openai-responses or gemini)"
            )),
        }
    }
}

/// A malformed input: where (a JSON path such as `messages[3].content[1].id`, or a line number
/// for JSONL logs) and what.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The bytes are not JSON (or a JSONL line is not).
    #[error("{location}: not valid JSON: {source}")]
    Json {
        /// `line N` for JSONL, `input` for a whole file.
        location: String,
        /// The parser's error (with line and column).
        #[source]
        source: serde_json::Error,
    },
    /// JSON of the wrong shape at a path.
    #[error("{path}: {message}")]
    Shape {
        /// JSON path of the offending element.
        path: String,
        /// What was expected or found.
        message: String,
    },
    /// The input's format could not be recognised.
    #[error("cannot tell the format: {0}")]
    Unrecognised(String),
}

impl FormatError {
    pub(crate) fn shape(path: impl Into<String>, message: impl Into<String>) -> FormatError {
        FormatError::Shape {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// A request body taken apart: (top-level system value, message array, other fields, bare?).
pub(crate) type BodyParts<'a> = (Option<Value>, &'a Vec<Value>, Object, bool);

/// Splits a request body of `format` into its [`BodyParts`].
pub(crate) fn split_body(body: &Value, format: Format) -> Result<BodyParts<'_>, FormatError> {
    let (messages_key, system_key) = (format.messages_key(), format.read_system_key());
    match body {
        Value::Array(items) => Ok((None, items, Object::new(), true)),
        Value::Object(obj) => {
            let items = match obj.get(messages_key) {
                Some(Value::Array(items)) => items,
                Some(_) => {
                    return Err(FormatError::shape(messages_key, "expected an array"));
                }
                None => {
                    return Err(FormatError::shape(
                        "$",
                        format!("request body has no \"{messages_key}\" array"),
                    ));
                }
            };
            let mut extra = Object::new();
            let mut system = None;
            for (k, v) in obj {
                if k == messages_key {
                    continue;
                }
                if Some(k.as_str()) == system_key {
                    system = Some(v.clone());
                } else {
                    extra.insert(k.clone(), v.clone());
                }
            }
            Ok((system, items, extra, false))
        }
        _ => Err(FormatError::shape(
            "$",
            "expected a request object or an array of messages",
        )),
    }
}

/// Assembles a request body from its parts (the inverse of [`split_body`]).
pub(crate) fn join_body(conversation: &Conversation, format: Format, items: Vec<Value>) -> Value {
    if conversation.bare {
        return Value::Array(items);
    }
    let mut obj = Object::new();
    // Keep the conventional order: system first, then the rest, messages last... unless the
    // input had its own order, which `extra` preserves for everything but these two keys.
    for (k, v) in &conversation.extra {
        obj.insert(k.clone(), v.clone());
    }
    if let Some(system) = &conversation.system {
        obj.insert(format.system_key().to_string(), system.clone());
    }
    obj.insert(format.messages_key().to_string(), Value::Array(items));
    Value::Object(obj)
}

/// Reads a required string field of an object, with its path in the error.
pub(crate) fn req_str(obj: &Object, key: &str, path: &str) -> Result<String, FormatError> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(FormatError::shape(
            format!("{path}.{key}"),
            format!("expected a string, found {}", json_kind(other)),
        )),
        None => Err(FormatError::shape(path, format!("missing \"{key}\""))),
    }
}

/// The JSON type name of a value, for error messages.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Copies an object without the given keys.
pub(crate) fn without(obj: &Object, keys: &[&str]) -> Object {
    obj.iter()
        .filter(|(k, _)| !keys.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The object at `v`, or a shape error at `path`.
pub(crate) fn as_object<'a>(v: &'a Value, path: &str) -> Result<&'a Object, FormatError> {
    v.as_object().ok_or_else(|| {
        FormatError::shape(path, format!("expected an object, found {}", json_kind(v)))
    })
}

/// The JSON path of message `i` (and of its block `j`) in the terms of `format`:
/// `messages[i].content[j]` (Anthropic), `messages[i].tool_calls[k]` / `messages[i].content[k]`
/// (OpenAI Chat, where calls and content parts are separate arrays; a tool message is one
/// element), `input[i]` (Responses, one item per message).
pub(crate) fn block_path(
    format: Format,
    conv: &Conversation,
    i: usize,
    j: Option<usize>,
) -> String {
    use crate::conversation::{Block, Role};
    match (format, j) {
        (Format::OpenAiResponses, _) => format!("input[{i}]"),
        (Format::Gemini, None) => format!("contents[{i}]"),
        (Format::Gemini, Some(j)) => format!("contents[{i}].parts[{j}]"),
        (_, None) => format!("messages[{i}]"),
        (Format::Anthropic, Some(j)) => format!("messages[{i}].content[{j}]"),
        (Format::OpenAiChat, Some(j)) => {
            let Some(m) = conv.messages.get(i) else {
                return format!("messages[{i}]");
            };
            if m.role == Role::Tool {
                return format!("messages[{i}]");
            }
            let is_call = matches!(m.content.get(j), Some(Block::ToolUse(_)));
            let k = m
                .content
                .iter()
                .take(j)
                .filter(|b| matches!(b, Block::ToolUse(_)) == is_call)
                .count();
            if is_call {
                format!("messages[{i}].tool_calls[{k}]")
            } else {
                format!("messages[{i}].content[{k}]")
            }
        }
    }
}

/// The JSON path of an image: block `j` of message `i`, or with `nested: Some(k)` the image at
/// index `k` of the content of the tool result that block `j` is. Anthropic
/// `messages[i].content[j]` / `messages[i].content[j].content[k]`; OpenAI Chat as
/// [`block_path`], a tool message's part `messages[i].content[k]`; Responses
/// `input[i].content[j]` (a message item's part) / `input[i].output[k]` (a
/// `function_call_output`'s).
pub(crate) fn image_path(
    format: Format,
    conv: &Conversation,
    i: usize,
    j: usize,
    nested: Option<usize>,
) -> String {
    match (format, nested) {
        (Format::Anthropic, Some(k)) => format!("messages[{i}].content[{j}].content[{k}]"),
        (Format::OpenAiChat, Some(k)) => format!("messages[{i}].content[{k}]"),
        (Format::OpenAiResponses, Some(k)) => format!("input[{i}].output[{k}]"),
        (Format::OpenAiResponses, None) => format!("input[{i}].content[{j}]"),
        (Format::Gemini, _) => block_path(format, conv, i, Some(j)),
        (_, None) => block_path(format, conv, i, Some(j)),
    }
}
