//! The provider-neutral message model.
//!
//! A [`Conversation`] is one request body: an optional top-level system prompt, the list of
//! [`Message`]s and everything else in the body (model, tools, max_tokens, ...) kept verbatim in
//! [`Conversation::extra`]. A message is a [`Role`] plus content [`Block`]s.
//!
//! The model is lossless: every struct keeps the fields it does not model in an `extra` map, and
//! block types it does not know are kept as [`Block::Other`] with their JSON untouched. The format
//! adapters in [`crate::format`] map each provider's wire shape onto this model and back, so that
//! `write(read(x)) == x` as JSON values.
//!
//! Wire mapping, one model message per wire item:
//! - Anthropic Messages: one `messages[i]` per message, blocks as in `content`.
//! - OpenAI Chat: one `messages[i]` per message; assistant `content` parts become text blocks and
//!   each `tool_calls[j]` a [`ToolUse`]; a `role: "tool"` message holds one [`ToolResult`].
//! - OpenAI Responses: one `input[i]` item per message; a `function_call` item is an assistant
//!   message with one [`ToolUse`], a `function_call_output` a [`Role::Tool`] message with one
//!   [`ToolResult`], a `reasoning` item an assistant message with one [`Block::Thinking`].

use serde_json::{Map, Value};

/// A JSON object: the type of every `extra` map.
pub type Object = Map<String, Value>;

/// One request body in neutral form.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Conversation {
    /// The top-level system prompt exactly as given: Anthropic `system` (string or text blocks) or
    /// OpenAI Responses `instructions`. OpenAI Chat keeps its system prompt as [`Role::System`] /
    /// [`Role::Developer`] messages instead. Never edited by a strategy.
    pub system: Option<Value>,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// Every other field of the request body (model, tools, max_tokens, stream, metadata, ...),
    /// in input order, passed through unchanged.
    pub extra: Object,
    /// Whether the input was a bare array of messages rather than a request object; the writer
    /// emits the same shape.
    pub bare: bool,
}

impl Conversation {
    /// The tool definitions of the request (`tools`), if any. They count against the token
    /// budget but are never edited.
    pub fn tools(&self) -> Option<&Value> {
        self.extra.get("tools")
    }

    /// Iterates over `(message index, block index, block)` of every block in order.
    pub fn blocks(&self) -> impl Iterator<Item = (usize, usize, &Block)> {
        self.messages
            .iter()
            .enumerate()
            .flat_map(|(i, m)| m.content.iter().enumerate().map(move |(j, b)| (i, j, b)))
    }
}

/// The author of a message.
///
/// Open: a role the model does not name is [`Role::Other`] with its wire name, kept and written
/// back as it came. What a role *is* to compaction (a user turn, an instruction, ...) is the
/// rule table's to say (`crate::rules::Table::role_kind`), per provider; an unknown role is
/// an opaque unit that the guard keeps in place.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Role {
    /// `system`: OpenAI system messages, Anthropic mid-conversation system messages.
    System,
    /// OpenAI `developer` message (the newer name for system instructions).
    Developer,
    /// The user, or (Anthropic) the message that carries tool results.
    User,
    /// The model.
    Assistant,
    /// OpenAI Chat `tool` message / Responses `*_output` item: carries one tool result.
    Tool,
    /// Any other wire role, by its name (`critic`, `ipython`, a role added next year).
    Other(Box<str>),
}

impl Role {
    /// The wire name (`"user"`, `"assistant"`, ... or the name of an [`Role::Other`]).
    pub fn as_str(&self) -> &str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Other(name) => name,
        }
    }

    /// The role of a wire name: one of the named variants, else [`Role::Other`].
    pub fn parse(s: &str) -> Role {
        match s {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            other => Role::Other(other.into()),
        }
    }

    /// True for [`Role::Other`].
    pub fn is_other(&self) -> bool {
        matches!(self, Role::Other(_))
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a message's `content` was written on the wire, so the writer can give it back the same
/// shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContentForm {
    /// An array of blocks / parts.
    #[default]
    Blocks,
    /// A plain string (one text block in the model).
    String,
    /// `"content": null` (OpenAI assistant messages with only tool calls).
    Null,
    /// No `content` key at all.
    Absent,
}

/// One message: a role and its content blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The content blocks in wire order (OpenAI Chat: text parts first, then tool calls).
    pub content: Vec<Block>,
    /// Message-level fields the model does not use (`name`, `id`, `status`, `type`, ...).
    pub extra: Object,
    /// The wire shape of `content`.
    pub form: ContentForm,
}

impl Message {
    /// A new message with array content and no extra fields.
    pub fn new(role: Role, content: Vec<Block>) -> Message {
        Message {
            role,
            content,
            extra: Object::new(),
            form: ContentForm::Blocks,
        }
    }

    /// A message whose content is one plain string.
    pub fn text(role: Role, text: impl Into<String>) -> Message {
        Message {
            role,
            content: vec![Block::text(text)],
            extra: Object::new(),
            form: ContentForm::String,
        }
    }

    /// The tool_use blocks of this message.
    pub fn tool_uses(&self) -> impl Iterator<Item = &ToolUse> {
        self.content.iter().filter_map(|b| match b {
            Block::ToolUse(t) => Some(t),
            _ => None,
        })
    }

    /// The tool_result blocks of this message.
    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResult> {
        self.content.iter().filter_map(|b| match b {
            Block::ToolResult(t) => Some(t),
            _ => None,
        })
    }

    /// True when the message carries at least one tool_result.
    pub fn has_tool_results(&self) -> bool {
        self.tool_results().next().is_some()
    }

    /// True when the message issues at least one tool call.
    pub fn has_tool_uses(&self) -> bool {
        self.tool_uses().next().is_some()
    }

    /// All text of the message's text blocks, joined by newlines.
    pub fn plain_text(&self) -> String {
        let parts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        parts.join("\n")
    }
}

/// One content block.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Plain text (`text`, OpenAI `text` / `input_text` / `output_text` parts).
    Text(Text),
    /// A tool call (Anthropic `tool_use`, OpenAI `tool_calls[j]`, Responses `function_call`).
    ToolUse(ToolUse),
    /// A tool result (Anthropic `tool_result`, OpenAI `tool` message, Responses
    /// `function_call_output`).
    ToolResult(ToolResult),
    /// `thinking`, `redacted_thinking` or a Responses `reasoning` item, verbatim. Never edited,
    /// never copied into a summary: the signature or encrypted content must stay byte-identical
    /// (Anthropic extended-thinking docs).
    Thinking(Value),
    /// An image block or part, verbatim.
    Image(Value),
    /// A document (PDF / file) block or part, verbatim.
    Document(Value),
    /// Any other block type, verbatim (server tool use, web search results, audio, ...).
    Other(Value),
}

impl Block {
    /// A text block with no extra fields.
    pub fn text(text: impl Into<String>) -> Block {
        Block::Text(Text {
            text: text.into(),
            extra: Object::new(),
        })
    }

    /// A short name of the block type: `text`, `tool_use`, `tool_result`, `thinking`,
    /// `redacted_thinking`, `reasoning`, `image`, `document`, or the wire `type` of an other block.
    pub fn kind(&self) -> &str {
        match self {
            Block::Text(_) => "text",
            Block::ToolUse(_) => "tool_use",
            Block::ToolResult(_) => "tool_result",
            Block::Thinking(v) => v.get("type").and_then(Value::as_str).unwrap_or("thinking"),
            Block::Image(_) => "image",
            Block::Document(_) => "document",
            Block::Other(v) => v.get("type").and_then(Value::as_str).unwrap_or("unknown"),
        }
    }
}

/// A text block.
#[derive(Debug, Clone, PartialEq)]
pub struct Text {
    /// The text.
    pub text: String,
    /// Other fields (`cache_control`, `citations`, ...), verbatim.
    pub extra: Object,
}

/// A tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUse {
    /// The call id (`toolu_…`, `call_…`); for Responses the `call_id`, not the item `id`.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments, in the wire's own encoding.
    pub input: ToolInput,
    /// Other fields, verbatim (Responses item `id`, `status`, `type`; OpenAI `type: "function"`).
    pub extra: Object,
}

/// Tool call arguments as they appear on the wire.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolInput {
    /// Anthropic `input`: a JSON value (an object for a valid request).
    Json(Value),
    /// OpenAI `function.arguments` / Responses `arguments`: a JSON object *encoded as a string*.
    /// Kept as the original string so an untouched call round-trips byte for byte.
    Arguments(String),
    /// Responses `custom_tool_call.input`: free-form text, not JSON.
    Freeform(String),
}

impl ToolInput {
    /// The arguments as a JSON value: `Json` as is, `Arguments` parsed (the raw string when it is
    /// not valid JSON), `Freeform` as a string.
    pub fn to_value(&self) -> Value {
        match self {
            ToolInput::Json(v) => v.clone(),
            ToolInput::Arguments(s) => {
                serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
            }
            ToolInput::Freeform(s) => Value::String(s.clone()),
        }
    }
}

/// A tool result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The id of the call it answers.
    pub tool_use_id: String,
    /// The result content; `None` when the wire had none.
    pub content: Option<ToolResultContent>,
    /// Anthropic `is_error`; `None` when absent (OpenAI has no such flag).
    pub is_error: Option<bool>,
    /// Other fields, verbatim.
    pub extra: Object,
    /// What the call came to, set once by the format adapter's outcome policy when the result
    /// is read ([`crate::outcome::OutcomePolicy::classify`]); not a wire field, never written.
    /// A result built by hand starts [`Outcome::Unknown`] until a policy classifies it.
    pub outcome: Outcome,
    /// What compactor wrote in this result's content, set by [`crate::guard::apply`] from the
    /// edit it applied (`Clear` -> [`Rewrite::Cleared`], `Cap` -> [`Rewrite::Capped`]) and
    /// carried through every later tier and the in-process memory; not a wire field, never
    /// written. A result read from the wire has `None`, even one holding an earlier
    /// compaction's placeholder (docs/fidelity.md, "Placeholders").
    pub rewritten: Option<Rewrite>,
}

/// What compactor did to a tool result's content ([`ToolResult::rewritten`]). A rewritten
/// result is frozen for later caps: its placeholder or head-and-tail is kept whole (the tool
/// name, call id and size a placeholder names stay readable), and only a capped one may still
/// be cleared.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rewrite {
    /// Replaced by microcompact's placeholder (tool, call id, size; a failure's error lines).
    Cleared,
    /// Cut to head and tail around a `[… N tokens truncated …]` marker.
    Capped,
}

/// The content of a tool result.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResultContent {
    /// A plain string.
    Text(String),
    /// Content blocks (text, image, document, ...).
    Blocks(Vec<Block>),
}

/// What a tool call came to, as far as the wire tells.
///
/// Computed once, when a format adapter reads the result, by the outcome policy of the format
/// ([`crate::outcome::OutcomePolicy`]), and carried in [`ToolResult::outcome`] through every
/// strategy: a result that is cleared or cut stays what it was. Never serialized: the wire
/// keeps its own signal (Anthropic `is_error`, an exit-code marker in the text).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Outcome {
    /// Known success: an Anthropic result without `is_error: true`, or an exit code 0.
    Success,
    /// Known failure: `is_error: true`, Claude Code's `<tool_use_error>` wrapper, or a non-zero
    /// exit code written by the harness.
    Error,
    /// The wire does not say (an OpenAI tool message without an exit-code marker). Shown as
    /// unknown, never as a success.
    #[default]
    Unknown,
}

impl Outcome {
    /// The word a report or digest shows: `ok`, `error`, `outcome unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "ok",
            Outcome::Error => "error",
            Outcome::Unknown => "outcome unknown",
        }
    }
}

impl ToolResult {
    /// All text of the result (text blocks joined by newlines; other blocks skipped).
    pub fn text(&self) -> String {
        self.text_ref().into_owned()
    }

    /// [`ToolResult::text`], borrowed when the content is one string or one text block.
    pub fn text_ref(&self) -> std::borrow::Cow<'_, str> {
        use std::borrow::Cow;
        match &self.content {
            None => Cow::Borrowed(""),
            Some(ToolResultContent::Text(s)) => Cow::Borrowed(s),
            Some(ToolResultContent::Blocks(bs)) => {
                let mut parts = bs.iter().filter_map(|b| match b {
                    Block::Text(t) => Some(t.text.as_str()),
                    _ => None,
                });
                match (parts.next(), parts.next()) {
                    (None, _) => Cow::Borrowed(""),
                    (Some(one), None) => Cow::Borrowed(one),
                    (Some(a), Some(b)) => {
                        let mut joined = format!("{a}\n{b}");
                        for p in parts {
                            joined.push('\n');
                            joined.push_str(p);
                        }
                        Cow::Owned(joined)
                    }
                }
            }
        }
    }

    /// The outcome of the call: the typed [`ToolResult::outcome`] field that the format
    /// adapter set when it read the result (see `crate::outcome` for the rule of each
    /// format). Nothing is re-read from the text here, so a cleared or cut result keeps the
    /// outcome it had.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_joins_text_blocks_and_skips_the_rest() {
        let r = ToolResult {
            tool_use_id: "t".into(),
            content: Some(ToolResultContent::Blocks(vec![
                Block::text("one"),
                Block::Image(json!({"type": "image"})),
                Block::text("two"),
                Block::text("three"),
            ])),
            is_error: None,
            extra: Object::new(),
            outcome: Outcome::Unknown,
            rewritten: None,
        };
        assert_eq!(r.text(), "one\ntwo\nthree");
    }

    #[test]
    fn the_outcome_method_returns_the_typed_field_whatever_the_text_says() {
        let r = ToolResult {
            tool_use_id: "t".into(),
            content: Some(ToolResultContent::Text("Exit code: 1\nerror".into())),
            is_error: None,
            extra: Object::new(),
            outcome: Outcome::Success,
            rewritten: None,
        };
        assert_eq!(r.outcome(), Outcome::Success);
    }
}
