//! Converting a conversation from one request format to another.
//!
//! Used to write an imported session (or any request) for another provider: `compactor convert
//! --to anthropic|openai-chat|openai-responses|gemini` (Gemini: [`super::gemini_convert`]). What cannot cross over is dropped on purpose and never invented:
//! OpenAI reasoning items and Anthropic thinking blocks (both are bound to their provider by
//! signatures or encryption), provider-specific fields of blocks and messages.

use super::Format;
use crate::conversation::{
    Block, ContentForm, Conversation, Message, Object, Outcome, Role, Text, ToolInput, ToolResult,
    ToolResultContent, ToolUse,
};
use serde_json::{Value, json};

/// Converts `conversation` (read as `from`) into the shape of `to`. Converting to the same format
/// returns a clone.
pub fn convert(conversation: &Conversation, from: Format, to: Format) -> Conversation {
    if from == to {
        return conversation.clone();
    }
    let normalized;
    let conversation = if from == Format::Gemini {
        normalized = super::gemini_convert::from_gemini(conversation);
        &normalized
    } else {
        conversation
    };
    let mut extra = conversation.extra.clone();
    if let Some(tools) = extra.get("tools").cloned() {
        let shape = if to == Format::Gemini {
            Format::Anthropic
        } else {
            to
        };
        extra.insert("tools".into(), convert_tools(&tools, shape));
    }
    extra.remove("tool_choice");
    match to {
        Format::Anthropic => to_anthropic(conversation, extra),
        Format::OpenAiChat => to_chat(conversation, extra),
        Format::OpenAiResponses => to_responses(conversation, extra),
        Format::Gemini => super::gemini_convert::to_gemini(to_anthropic(conversation, extra)),
    }
}

fn to_anthropic(c: &Conversation, extra: Object) -> Conversation {
    let mut system_parts: Vec<String> = Vec::new();
    if let Some(s) = &c.system {
        system_parts.push(system_text(s));
    }
    let mut out: Vec<Message> = Vec::new();
    for m in &c.messages {
        let (role, blocks): (Role, Vec<Block>) = match &m.role {
            Role::System | Role::Developer => {
                system_parts.push(m.plain_text());
                continue;
            }
            Role::Tool => (
                Role::User,
                m.content
                    .iter()
                    .filter_map(|b| anthropic_block(b, &Role::User))
                    .collect(),
            ),
            role => (
                role.clone(),
                m.content
                    .iter()
                    .filter_map(|b| anthropic_block(b, role))
                    .collect(),
            ),
        };
        if blocks.is_empty() {
            continue;
        }
        push_merged(&mut out, role, blocks);
    }
    // tool_result blocks first in each user message (Anthropic tool-use docs).
    for m in &mut out {
        if m.role == Role::User && m.has_tool_results() {
            m.content
                .sort_by_key(|b| !matches!(b, Block::ToolResult(_)));
        }
    }
    let system = system_parts
        .iter()
        .any(|s| !s.is_empty())
        .then(|| Value::String(system_parts.join("\n\n")));
    Conversation {
        system,
        messages: out,
        extra,
        bare: c.bare,
    }
}

/// Appends blocks as a message, merging into the previous message when it has the same role.
fn push_merged(out: &mut Vec<Message>, role: Role, blocks: Vec<Block>) {
    match out.last_mut() {
        Some(last) if last.role == role => {
            last.form = ContentForm::Blocks;
            last.content.extend(blocks);
        }
        _ => out.push(Message::new(role, blocks)),
    }
}

fn anthropic_block(b: &Block, role: &Role) -> Option<Block> {
    Some(match b {
        Block::Text(t) if t.text.trim().is_empty() => return None,
        Block::Text(t) => Block::text(t.text.clone()),
        Block::ToolUse(t) => Block::ToolUse(ToolUse {
            id: t.id.clone(),
            name: t.name.clone(),
            input: ToolInput::Json(match &t.input {
                ToolInput::Json(v) => v.clone(),
                ToolInput::Arguments(s) => match serde_json::from_str::<Value>(s) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => json!({ "arguments": s }),
                },
                ToolInput::Freeform(s) => json!({ "input": s }),
            }),
            extra: Object::new(),
        }),
        Block::ToolResult(r) => Block::ToolResult(ToolResult {
            tool_use_id: r.tool_use_id.clone(),
            content: r.content.as_ref().map(|c| match c {
                ToolResultContent::Text(s) => ToolResultContent::Text(s.clone()),
                ToolResultContent::Blocks(bs) => ToolResultContent::Blocks(
                    bs.iter()
                        .filter_map(|b| anthropic_block(b, &Role::User))
                        .collect(),
                ),
            }),
            // A failure the source's policy found (a non-zero exit code, a `<returncode>`) is
            // written as Anthropic's own signal, so the API and every later reader see it.
            is_error: if r.outcome == Outcome::Error {
                Some(true)
            } else {
                r.is_error
            },
            extra: Object::new(),
            outcome: r.outcome,
            rewritten: r.rewritten,
        }),
        Block::Thinking(v) if v.get("type").and_then(Value::as_str) == Some("reasoning") => {
            return None;
        }
        Block::Thinking(v) if *role == Role::Assistant => Block::Thinking(v.clone()),
        Block::Thinking(_) => return None,
        Block::Image(v) => match image_to_anthropic(v) {
            Some(img) => Block::Image(img),
            None => Block::text("[image]"),
        },
        Block::Document(v) if v.get("source").is_some() => Block::Document(v.clone()),
        Block::Document(_) => Block::text("[document]"),
        Block::Other(v) => Block::text(format!(
            "[{}]",
            v.get("type").and_then(Value::as_str).unwrap_or("item")
        )),
    })
}

fn image_to_anthropic(v: &Value) -> Option<Value> {
    if v.get("source").is_some() {
        return Some(v.clone());
    }
    let url = v
        .pointer("/image_url/url")
        .or_else(|| v.get("image_url"))
        .and_then(Value::as_str)?;
    if let Some(rest) = url.strip_prefix("data:") {
        let (media, data) = rest.split_once(";base64,")?;
        return Some(
            json!({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}),
        );
    }
    Some(json!({"type": "image", "source": {"type": "url", "url": url}}))
}

fn to_chat(c: &Conversation, extra: Object) -> Conversation {
    let mut out: Vec<Message> = Vec::new();
    if let Some(s) = &c.system {
        out.push(Message::text(Role::System, system_text(s)));
    }
    for m in &c.messages {
        match &m.role {
            Role::Tool => {
                for b in &m.content {
                    if let Block::ToolResult(r) = b {
                        out.push(chat_tool_message(r));
                    }
                }
            }
            Role::User if m.has_tool_results() => {
                let mut rest = Vec::new();
                for b in &m.content {
                    match b {
                        Block::ToolResult(r) => out.push(chat_tool_message(r)),
                        other => rest.extend(chat_part(other)),
                    }
                }
                if !rest.is_empty() {
                    out.push(Message::new(Role::User, rest));
                }
            }
            role => {
                let mut blocks: Vec<Block> = Vec::new();
                let mut calls: Vec<Block> = Vec::new();
                for b in &m.content {
                    match b {
                        Block::ToolUse(t) => calls.push(Block::ToolUse(ToolUse {
                            id: t.id.clone(),
                            name: t.name.clone(),
                            input: ToolInput::Arguments(match &t.input {
                                ToolInput::Arguments(s) => s.clone(),
                                ToolInput::Json(v) => v.to_string(),
                                ToolInput::Freeform(s) => json!({ "input": s }).to_string(),
                            }),
                            extra: Object::new(),
                        })),
                        other => blocks.extend(chat_part(other)),
                    }
                }
                if blocks.is_empty() && calls.is_empty() {
                    continue;
                }
                // Responses splits one model turn over several items; Chat wants one message.
                if *role == Role::Assistant
                    && let Some(last) = out.last_mut()
                {
                    if last.role == Role::Assistant && !last.has_tool_uses() {
                        last.content.extend(blocks);
                        last.content.extend(calls);
                        last.form = chat_form(&last.content);
                        continue;
                    }
                    if last.role == Role::Assistant && blocks.is_empty() {
                        last.content.extend(calls);
                        continue;
                    }
                }
                blocks.extend(calls);
                let form = chat_form(&blocks);
                out.push(Message {
                    role: role.clone(),
                    content: blocks,
                    extra: Object::new(),
                    form,
                });
            }
        }
    }
    Conversation {
        system: None,
        messages: out,
        extra,
        bare: c.bare,
    }
}

fn chat_form(blocks: &[Block]) -> ContentForm {
    let texts = blocks
        .iter()
        .filter(|b| !matches!(b, Block::ToolUse(_)))
        .count();
    let only_one_text = texts == 1 && blocks.iter().any(|b| matches!(b, Block::Text(_)));
    if texts == 0 {
        ContentForm::Null
    } else if only_one_text {
        ContentForm::String
    } else {
        ContentForm::Blocks
    }
}

fn chat_tool_message(r: &ToolResult) -> Message {
    let mut text = r.text();
    if r.outcome == Outcome::Error && !text.to_lowercase().contains("error") {
        text = format!("Error: {text}");
    }
    let has_image = matches!(&r.content, Some(ToolResultContent::Blocks(bs)) if bs.iter().any(|b| matches!(b, Block::Image(_))));
    if has_image {
        text.push_str("\n[image]");
    }
    Message {
        role: Role::Tool,
        content: vec![Block::ToolResult(ToolResult {
            tool_use_id: r.tool_use_id.clone(),
            content: Some(ToolResultContent::Text(text)),
            is_error: None,
            extra: Object::new(),
            outcome: r.outcome,
            rewritten: r.rewritten,
        })],
        extra: Object::new(),
        form: ContentForm::String,
    }
}

fn chat_part(b: &Block) -> Option<Block> {
    Some(match b {
        Block::Text(t) if t.text.is_empty() => return None,
        Block::Text(t) => Block::Text(Text {
            text: t.text.clone(),
            extra: Object::new(),
        }),
        Block::Thinking(_) => return None,
        Block::Image(v) => {
            let url = match v.get("source") {
                Some(src) if src.get("type").and_then(Value::as_str) == Some("base64") => format!(
                    "data:{};base64,{}",
                    src.get("media_type")
                        .and_then(Value::as_str)
                        .unwrap_or("image/png"),
                    src.get("data").and_then(Value::as_str).unwrap_or("")
                ),
                Some(src) => src
                    .get("url")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                None => return Some(Block::Image(v.clone())),
            };
            Block::Image(json!({"type": "image_url", "image_url": {"url": url}}))
        }
        Block::Document(_) => Block::text("[document]"),
        Block::Other(v) => Block::text(format!(
            "[{}]",
            v.get("type").and_then(Value::as_str).unwrap_or("item")
        )),
        Block::ToolUse(_) | Block::ToolResult(_) => return None,
    })
}

fn to_responses(c: &Conversation, extra: Object) -> Conversation {
    let chat = to_chat(c, extra);
    let mut system = None;
    let mut messages = Vec::new();
    for m in chat.messages {
        if matches!(m.role, Role::System) && system.is_none() && messages.is_empty() {
            system = Some(Value::String(m.plain_text()));
            continue;
        }
        messages.push(m);
    }
    Conversation {
        system,
        messages,
        extra: chat.extra,
        bare: c.bare,
    }
}

/// The text of a system prompt value (a string or an array of text blocks).
pub fn system_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn convert_tools(tools: &Value, to: Format) -> Value {
    let Value::Array(items) = tools else {
        return tools.clone();
    };
    let converted = items
        .iter()
        .map(|t| {
            let name = t
                .get("name")
                .or_else(|| t.pointer("/function/name"))
                .cloned()
                .unwrap_or(Value::Null);
            let description = t
                .get("description")
                .or_else(|| t.pointer("/function/description"))
                .cloned();
            let schema = t
                .get("input_schema")
                .or_else(|| t.get("parameters"))
                .or_else(|| t.pointer("/function/parameters"))
                .cloned()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            let mut obj = Object::new();
            match to {
                Format::Anthropic | Format::Gemini => {
                    obj.insert("name".into(), name);
                    if let Some(d) = description {
                        obj.insert("description".into(), d);
                    }
                    obj.insert("input_schema".into(), schema);
                }
                Format::OpenAiChat => {
                    let mut f = Object::new();
                    f.insert("name".into(), name);
                    if let Some(d) = description {
                        f.insert("description".into(), d);
                    }
                    f.insert("parameters".into(), schema);
                    obj.insert("type".into(), "function".into());
                    obj.insert("function".into(), Value::Object(f));
                }
                Format::OpenAiResponses => {
                    obj.insert("type".into(), "function".into());
                    obj.insert("name".into(), name);
                    if let Some(d) = description {
                        obj.insert("description".into(), d);
                    }
                    obj.insert("parameters".into(), schema);
                }
            }
            Value::Object(obj)
        })
        .collect();
    Value::Array(converted)
}

/// What a cross-format conversion left out, counted by kind (blocks of the input with no
/// counterpart in the output).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Anthropic `thinking` / `redacted_thinking` blocks (signed for Anthropic only).
    pub thinking: usize,
    /// OpenAI Responses `reasoning` items without `encrypted_content`.
    pub reasoning: usize,
    /// OpenAI Responses `reasoning` items with `encrypted_content` (readable by OpenAI only).
    pub encrypted_reasoning: usize,
    /// Blocks of types the target has no shape for, written as a `[type]` text placeholder.
    pub placeholders: usize,
}

impl Dropped {
    /// Compares the blocks of `before` (the conversion's input) with those of `after`.
    pub fn between(before: &Conversation, after: &Conversation) -> Dropped {
        let a = Dropped::count(before);
        let b = Dropped::count(after);
        Dropped {
            thinking: a.thinking.saturating_sub(b.thinking),
            reasoning: a.reasoning.saturating_sub(b.reasoning),
            encrypted_reasoning: a.encrypted_reasoning.saturating_sub(b.encrypted_reasoning),
            placeholders: a.placeholders.saturating_sub(b.placeholders),
        }
    }

    /// Whether nothing was dropped.
    pub fn is_empty(&self) -> bool {
        *self == Dropped::default()
    }

    fn count(c: &Conversation) -> Dropped {
        let mut d = Dropped::default();
        for b in c.messages.iter().flat_map(|m| &m.content) {
            match b {
                Block::Thinking(v)
                    if v.get("type").and_then(Value::as_str) == Some("reasoning") =>
                {
                    if v.get("encrypted_content").is_some_and(|e| !e.is_null()) {
                        d.encrypted_reasoning += 1;
                    } else {
                        d.reasoning += 1;
                    }
                }
                Block::Thinking(_) => d.thinking += 1,
                Block::Other(_) => d.placeholders += 1,
                _ => {}
            }
        }
        d
    }
}

impl std::fmt::Display for Dropped {
    /// `2 thinking blocks, 3 encrypted reasoning items` (kinds with a count of 0 left out).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = [
            (self.thinking, "thinking block(s)"),
            (self.reasoning, "reasoning item(s)"),
            (self.encrypted_reasoning, "encrypted reasoning item(s)"),
            (
                self.placeholders,
                "block(s) of other types written as a [type] placeholder",
            ),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        f.write_str(&parts.join(", "))
    }
}

/// Top-level fields a request body of `format` needs that `conversation` lacks: `model` (every
/// provider: Anthropic Messages, OpenAI Chat Completions and Responses references list it as
/// required) and `max_tokens` (Anthropic Messages: "max_tokens: required"). A bare message
/// array needs none.
pub fn missing_fields(conversation: &Conversation, format: Format) -> Vec<&'static str> {
    if conversation.bare {
        return Vec::new();
    }
    // Gemini names the model in the URL (`/v1beta/models/{model}:generateContent`).
    if format == Format::Gemini {
        return Vec::new();
    }
    let mut keys = vec!["model"];
    if format == Format::Anthropic {
        keys.push("max_tokens");
    }
    keys.into_iter()
        .filter(|k| !conversation.extra.contains_key(*k))
        .collect()
}

#[cfg(test)]
mod dropped_tests {
    use super::*;
    use crate::format::Format;

    #[test]
    fn thinking_and_encrypted_reasoning_are_counted_when_they_cannot_cross() {
        let body = json!({"model": "m", "input": [
            {"role": "user", "content": "hi"},
            {"type": "reasoning", "id": "r1", "summary": [], "encrypted_content": "gAAA"},
            {"type": "reasoning", "id": "r2", "summary": []},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
        ]});
        let c = Format::OpenAiResponses.read(&body).unwrap();
        let out = convert(&c, Format::OpenAiResponses, Format::Anthropic);
        let d = Dropped::between(&c, &out);
        assert_eq!((d.encrypted_reasoning, d.reasoning, d.thinking), (1, 1, 0));
        assert_eq!(
            d.to_string(),
            "1 reasoning item(s), 1 encrypted reasoning item(s)"
        );
        assert_eq!(missing_fields(&out, Format::Anthropic), vec!["max_tokens"]);
        assert!(Dropped::between(&c, &c).is_empty());
    }
}
