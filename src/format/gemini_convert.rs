//! Converting to and from Gemini `generateContent` bodies ([`super::convert`]).
//!
//! From Gemini: `systemInstruction` becomes the system text, `tools[].functionDeclarations`
//! one flat list of declarations (`{name, description, parameters}`, which the other formats'
//! tool converter reads), thought parts are dropped (signed for Gemini only, D4), the
//! Gemini-only request fields (`generationConfig`, `safetySettings`, `toolConfig`,
//! `cachedContent`) are left out and a content without a role is the user's.
//!
//! To Gemini: the conversation in Anthropic's shape (roles merged, every tool result in the
//! user turn after its calls, as D1 wants) with `model` for `assistant`, the system text as
//! `systemInstruction`, the declarations as one `functionDeclarations` tool, `max_tokens` /
//! `temperature` / `top_p` / `stop` as `generationConfig`; other fields are left out (the
//! model is in the URL). Thinking cannot cross; a base64 image becomes `inlineData`. The
//! calls written get the documented skip signature on the first call of each turn
//! ([`super::gemini::SKIP_SIGNATURE`], D5), as the writer gives every call it did not read.

use crate::conversation::{Block, Conversation, Message, Object, Role};
use serde_json::{Value, json};

/// The request fields only Gemini has: left out when converting from it.
const GEMINI_ONLY: &[&str] = &[
    "generationConfig",
    "generation_config",
    "safetySettings",
    "safety_settings",
    "toolConfig",
    "tool_config",
    "cachedContent",
    "cached_content",
    "labels",
];

/// A Gemini conversation in the neutral terms the other converters read.
pub(super) fn from_gemini(c: &Conversation) -> Conversation {
    let mut extra: Object = c
        .extra
        .iter()
        .filter(|(k, _)| !GEMINI_ONLY.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(Value::Array(tools)) = c.extra.get("tools") {
        let decls: Vec<Value> = tools
            .iter()
            .filter_map(|t| {
                t.get("functionDeclarations")
                    .or_else(|| t.get("function_declarations"))
            })
            .filter_map(Value::as_array)
            .flatten()
            .cloned()
            .collect();
        if decls.is_empty() {
            extra.remove("tools");
        } else {
            extra.insert("tools".into(), Value::Array(decls));
        }
    }
    let messages = c
        .messages
        .iter()
        .map(|m| Message {
            role: match &m.role {
                Role::Other(r) if r.is_empty() => Role::User,
                r => r.clone(),
            },
            content: m
                .content
                .iter()
                .filter(|b| !matches!(b, Block::Thinking(_)))
                .map(|b| match b {
                    Block::Other(v) => other_part(v),
                    b => b.clone(),
                })
                .collect(),
            extra: Object::new(),
            form: m.form,
        })
        .filter(|m| !m.content.is_empty())
        .collect();
    Conversation {
        system: c
            .system
            .as_ref()
            .map(|s| Value::String(system_text(s)))
            .filter(|s| s.as_str().is_some_and(|t| !t.is_empty())),
        messages,
        extra,
        bare: c.bare,
    }
}

/// A Gemini part the model keeps verbatim, for another format: an image as an Anthropic
/// image block (the converters take it from there), anything else kept as it is (it becomes
/// a `[type]` placeholder).
fn other_part(v: &Value) -> Block {
    if let Some(d) = v.get("inlineData")
        && let (Some(mime), Some(data)) = (
            d.get("mimeType").and_then(Value::as_str),
            d.get("data").and_then(Value::as_str),
        )
        && mime.starts_with("image/")
    {
        return Block::Image(
            json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}),
        );
    }
    let kind = v
        .as_object()
        .and_then(|o| o.keys().next().cloned())
        .unwrap_or_else(|| "part".into());
    Block::Other(json!({ "type": kind }))
}

/// The text of a `systemInstruction` (a Content: its text parts joined by newlines), or of a
/// plain string.
pub(crate) fn system_text(v: &Value) -> String {
    match v.get("parts").and_then(Value::as_array) {
        Some(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        None => plain_text(v),
    }
}

/// A system prompt's text: a string as is, text blocks joined by newlines.
fn plain_text(v: &Value) -> String {
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

/// A conversation already in Anthropic's shape (`anthropic`, from the Anthropic converter),
/// written in Gemini's terms; `extra` the source's other fields with tools converted.
pub(super) fn to_gemini(anthropic: Conversation) -> Conversation {
    let mut extra = Object::new();
    if let Some(tools) = anthropic.extra.get("tools").and_then(Value::as_array) {
        let decls: Vec<Value> = tools
            .iter()
            .map(|t| {
                let mut d = Object::new();
                for (from, to) in [
                    ("name", "name"),
                    ("description", "description"),
                    ("input_schema", "parameters"),
                ] {
                    if let Some(v) = t.get(from) {
                        d.insert(to.into(), v.clone());
                    }
                }
                Value::Object(d)
            })
            .collect();
        if !decls.is_empty() {
            extra.insert("tools".into(), json!([{ "functionDeclarations": decls }]));
        }
    }
    let mut config = Object::new();
    for (from, to) in [
        ("max_tokens", "maxOutputTokens"),
        ("max_completion_tokens", "maxOutputTokens"),
        ("max_output_tokens", "maxOutputTokens"),
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("stop", "stopSequences"),
        ("stop_sequences", "stopSequences"),
    ] {
        if let Some(v) = anthropic.extra.get(from).filter(|v| !v.is_null()) {
            let v = match (to, v) {
                ("stopSequences", Value::String(s)) => json!([s]),
                _ => v.clone(),
            };
            config.insert(to.into(), v);
        }
    }
    if !config.is_empty() {
        extra.insert("generationConfig".into(), Value::Object(config));
    }
    let messages = anthropic
        .messages
        .into_iter()
        .map(|m| Message {
            content: m
                .content
                .into_iter()
                .filter(|b| !matches!(b, Block::Thinking(_)))
                .map(gemini_block)
                .collect(),
            form: crate::conversation::ContentForm::Blocks,
            ..m
        })
        .filter(|m| !m.content.is_empty())
        .collect();
    Conversation {
        system: anthropic
            .system
            .map(|s| json!({ "parts": [{ "text": plain_text(&s) }] })),
        messages,
        extra,
        bare: anthropic.bare,
    }
}

/// A block of the Anthropic shape as a Gemini part: images as `inlineData` (base64) or
/// `fileData` (URL), documents and other blocks as a `[type]` text.
fn gemini_block(b: Block) -> Block {
    match b {
        Block::Image(v) => {
            let src = v.get("source");
            let kind = src.and_then(|s| s.get("type")).and_then(Value::as_str);
            let field = |k: &str| {
                src.and_then(|s| s.get(k))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            match kind {
                Some("base64") => Block::Other(
                    json!({"inlineData": {"mimeType": field("media_type"), "data": field("data")}}),
                ),
                Some("url") => Block::Other(json!({"fileData": {"fileUri": field("url")}})),
                _ => Block::text("[image]"),
            }
        }
        Block::Document(_) => Block::text("[document]"),
        Block::Other(v) => Block::text(format!(
            "[{}]",
            v.get("type").and_then(Value::as_str).unwrap_or("item")
        )),
        Block::ToolUse(mut t) => {
            t.extra = Object::new();
            Block::ToolUse(t)
        }
        Block::ToolResult(mut r) => {
            r.extra = Object::new();
            r.is_error = None;
            Block::ToolResult(r)
        }
        b => b,
    }
}
