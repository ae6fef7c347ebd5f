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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// OpenAI `system` message.
    System,
    /// OpenAI `developer` message (the newer name for system instructions).
    Developer,
    /// The user, or (Anthropic) the message that carries tool results.
    User,
    /// The model.
    Assistant,
    /// OpenAI Chat `tool` message / Responses `function_call_output`: carries one tool result.
    Tool,
}

impl Role {
    /// The wire name (`"user"`, `"assistant"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// Parses a wire role name; `None` for anything else.
    pub fn parse(s: &str) -> Option<Role> {
        Some(match s {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            _ => return None,
        })
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
}

/// The content of a tool result.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResultContent {
    /// A plain string.
    Text(String),
    /// Content blocks (text, image, document, ...).
    Blocks(Vec<Block>),
}

/// What a tool call came to, as far as the history tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Known success (Anthropic result without `is_error`, exit code 0).
    Success,
    /// Failed: `is_error: true`, a non-zero exit code, a sandbox denial or a tool error marker.
    Error,
    /// The wire carries no outcome (OpenAI tool messages) and the text does not tell.
    Unknown,
}

impl ToolResult {
    /// All text of the result (text blocks joined by newlines; other blocks skipped).
    pub fn text(&self) -> String {
        self.text_ref().into_owned()
    }

    /// [`ToolResult::text`], borrowed when the content is one string or one text block.
    fn text_ref(&self) -> std::borrow::Cow<'_, str> {
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

    /// The outcome of the call. `is_error` decides when present; otherwise the text is read for
    /// the markers agents write (Claude Code `<tool_use_error>`, Codex `"exit_code": N` metadata
    /// and `exit code: N`, sandbox denials). Without any marker: [`Outcome::Success`] when the
    /// wire has an `is_error` convention (Anthropic, where absence means success), else
    /// [`Outcome::Unknown`].
    pub fn outcome(&self, has_error_flag: bool) -> Outcome {
        if self.is_error == Some(true) {
            return Outcome::Error;
        }
        let text = self.text_ref();
        if let Some(code) = exit_code(&text) {
            return if code == 0 {
                Outcome::Success
            } else {
                Outcome::Error
            };
        }
        let head = text[..prefix_bytes(&text, 200)].to_lowercase();
        if head.contains("<tool_use_error>")
            || head.starts_with("error")
            || head.contains("failed in sandbox")
            || head.contains("[request interrupted")
            // compactor's own placeholder for a cleared failed result (microcompact)
            || head.starts_with("[compactor: cleared failed")
        {
            return Outcome::Error;
        }
        if self.is_error == Some(false) || has_error_flag {
            Outcome::Success
        } else {
            Outcome::Unknown
        }
    }
}

/// Finds an exit code written by the agent harness: `"exit_code":N` (Codex metadata),
/// `Exit code: N` / `exit code: N`, `Process exited with code N`. Looks at the first 4,000
/// bytes, then the last 2,000 bytes; in each, the markers in that order, each at its last
/// place.
fn exit_code(text: &str) -> Option<i64> {
    const MARKERS: [&str; 5] = [
        "\"exit_code\":",
        "exit code: ",
        "Exit code: ",
        "Exit code ",
        "exited with code ",
    ];
    let head = &text[..prefix_bytes(text, 4000)];
    let mut tail_start = text.len().saturating_sub(2000);
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let tail = &text[tail_start..];
    // The tail only adds something when the head does not cover the whole text.
    let hays = if head.len() == text.len() {
        &[head][..]
    } else {
        &[head, tail][..]
    };
    for hay in hays {
        // One pass over the places of "xit", which every marker holds, instead of one search
        // per marker: this runs on every tool_result of every history the guard checks.
        let mut last = [None; MARKERS.len()];
        for p in memchr::memmem::find_iter(hay.as_bytes(), b"xit") {
            for (m, marker) in MARKERS.iter().enumerate() {
                let k = marker.find("xit").unwrap_or(0);
                if p >= k && hay[p - k..].starts_with(marker) {
                    last[m] = Some(p - k);
                }
            }
        }
        for (m, marker) in MARKERS.iter().enumerate() {
            let Some(pos) = last[m] else { continue };
            let rest = hay[pos + marker.len()..].trim_start();
            let end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '-'))
                .unwrap_or(rest.len());
            if let Ok(n) = rest[..end].parse() {
                return Some(n);
            }
        }
    }
    None
}

/// The length of the longest prefix of `text` of at most `max` bytes that ends on a char
/// boundary.
fn prefix_bytes(text: &str, max: usize) -> usize {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(text: &str, is_error: Option<bool>) -> ToolResult {
        ToolResult {
            tool_use_id: "t".into(),
            content: Some(ToolResultContent::Text(text.into())),
            is_error,
            extra: Object::new(),
        }
    }

    #[test]
    fn is_error_flag_decides_first() {
        assert_eq!(result("all good", Some(true)).outcome(true), Outcome::Error);
        assert_eq!(result("all good", None).outcome(true), Outcome::Success);
        assert_eq!(result("all good", None).outcome(false), Outcome::Unknown);
    }

    #[test]
    fn codex_exit_codes_are_read() {
        let ok = r#"{"output":"x","metadata":{"exit_code":0,"duration_seconds":0.0}}"#;
        let bad = r#"{"output":"x","metadata":{"exit_code":1,"duration_seconds":0.0}}"#;
        assert_eq!(result(ok, None).outcome(false), Outcome::Success);
        assert_eq!(result(bad, None).outcome(false), Outcome::Error);
        let sandbox = "failed in sandbox MacosSeatbelt with execution error: sandbox denied exec error, exit code: 2, stdout: ";
        assert_eq!(result(sandbox, None).outcome(false), Outcome::Error);
    }

    #[test]
    fn claude_code_tool_use_error_marker_is_an_error() {
        let r = result(
            "<tool_use_error>File does not exist.</tool_use_error>",
            None,
        );
        assert_eq!(r.outcome(true), Outcome::Error);
    }

    #[test]
    fn an_exit_code_at_the_end_of_long_non_ascii_output_is_read() {
        // 10,013 bytes, two-byte chars first: the last 2,000 bytes start inside a char.
        let text = format!("{}\nExit code: 3", "é".repeat(5_000));
        assert!(!text.is_char_boundary(text.len() - 2000));
        assert_eq!(result(&text, None).outcome(false), Outcome::Error);
        let text = format!("{}\nExit code: 0", "é".repeat(5_000));
        assert_eq!(result(&text, None).outcome(false), Outcome::Success);
    }

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
        };
        assert_eq!(r.text(), "one\ntwo\nthree");
    }
}
