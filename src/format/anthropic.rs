//! Anthropic Messages API request bodies.
//!
//! Shape (Messages API reference): `{"model", "max_tokens", "system"?, "messages": [{"role":
//! "user"|"assistant", "content": string | [block]}], "tools"?, ...}`. Blocks: `text`,
//! `tool_use {id, name, input}`, `tool_result {tool_use_id, content?, is_error?}`, `thinking
//! {thinking, signature}`, `redacted_thinking {data}`, `image`, `document`, and server-side types
//! (`server_tool_use`, `web_search_tool_result`, ...) which pass through as [`Block::Other`].

use super::{FormatError, as_object, json_kind, req_str, without};
use crate::conversation::{
    Block, ContentForm, Conversation, Message, Object, Outcome, Role, Text, ToolInput, ToolResult,
    ToolResultContent, ToolUse,
};
use crate::outcome::OutcomePolicy;
use serde_json::Value;

/// Reads an Anthropic request body or a bare array of messages.
///
/// # Errors
/// [`FormatError::Shape`] with the JSON path (`messages[3].content[1].id`) of the first element
/// that is not what the API documents: a message without a known role, a `tool_use` without a
/// string `id`, a `tool_result` whose `content` is neither string nor array, ...
pub fn read(body: &Value) -> Result<Conversation, FormatError> {
    let (system, items, extra, bare) = super::split_body(body, "messages", Some("system"))?;
    let messages = items
        .iter()
        .enumerate()
        .map(|(i, m)| read_message(m, &format!("messages[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Conversation {
        system,
        messages,
        extra,
        bare,
    })
}

/// Reads one message object (`{"role", "content"}`); `path` names it in errors.
pub(crate) fn read_message(value: &Value, path: &str) -> Result<Message, FormatError> {
    let obj = as_object(value, path)?;
    let role_name = req_str(obj, "role", path)?;
    // An unknown role is kept as it came (`Role::Other`); the rule table says what it is.
    let role = Role::parse(&role_name);
    let (content, form) = match obj.get("content") {
        None => (Vec::new(), ContentForm::Absent),
        Some(Value::Null) => (Vec::new(), ContentForm::Null),
        Some(Value::String(s)) => (vec![Block::text(s.clone())], ContentForm::String),
        Some(Value::Array(blocks)) => (
            read_blocks(blocks, &format!("{path}.content"))?,
            ContentForm::Blocks,
        ),
        Some(other) => {
            return Err(FormatError::shape(
                format!("{path}.content"),
                format!(
                    "expected a string or an array of blocks, found {}",
                    json_kind(other)
                ),
            ));
        }
    };
    Ok(Message {
        role,
        content,
        extra: without(obj, &["role", "content"]),
        form,
    })
}

/// Reads an array of content blocks; `path` is the array's path.
pub(crate) fn read_blocks(blocks: &[Value], path: &str) -> Result<Vec<Block>, FormatError> {
    blocks
        .iter()
        .enumerate()
        .map(|(j, b)| read_block(b, &format!("{path}[{j}]")))
        .collect()
}

fn read_block(value: &Value, path: &str) -> Result<Block, FormatError> {
    let obj = as_object(value, path)?;
    let kind = match obj.get("type") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(FormatError::shape(
                format!("{path}.type"),
                format!("expected a string, found {}", json_kind(other)),
            ));
        }
        None => return Err(FormatError::shape(path, "content block has no \"type\"")),
    };
    Ok(match kind {
        "text" => Block::Text(Text {
            text: req_str(obj, "text", path)?,
            extra: without(obj, &["type", "text"]),
        }),
        "tool_use" => Block::ToolUse(ToolUse {
            id: req_str(obj, "id", path)?,
            name: req_str(obj, "name", path)?,
            input: ToolInput::Json(
                obj.get("input")
                    .cloned()
                    .ok_or_else(|| FormatError::shape(path, "tool_use has no \"input\""))?,
            ),
            extra: without(obj, &["type", "id", "name", "input"]),
        }),
        "tool_result" => Block::ToolResult(OutcomePolicy::Anthropic.apply(ToolResult {
            tool_use_id: req_str(obj, "tool_use_id", path)?,
            content: match obj.get("content") {
                None => None,
                Some(Value::String(s)) => Some(ToolResultContent::Text(s.clone())),
                Some(Value::Array(bs)) => Some(ToolResultContent::Blocks(read_blocks(
                    bs,
                    &format!("{path}.content"),
                )?)),
                Some(other) => {
                    return Err(FormatError::shape(
                        format!("{path}.content"),
                        format!(
                            "expected a string or an array of blocks, found {}",
                            json_kind(other)
                        ),
                    ));
                }
            },
            is_error: match obj.get("is_error") {
                None | Some(Value::Null) => None,
                Some(Value::Bool(b)) => Some(*b),
                Some(other) => {
                    return Err(FormatError::shape(
                        format!("{path}.is_error"),
                        format!("expected a boolean, found {}", json_kind(other)),
                    ));
                }
            },
            extra: without(obj, &["type", "tool_use_id", "content", "is_error"]),
            outcome: Outcome::Unknown,
            rewritten: None,
        })),
        "thinking" | "redacted_thinking" => Block::Thinking(value.clone()),
        "image" => Block::Image(value.clone()),
        "document" => Block::Document(value.clone()),
        _ => Block::Other(value.clone()),
    })
}

/// Writes a conversation as an Anthropic request body (or a bare array if it was read from one).
pub fn write(conversation: &Conversation) -> Value {
    let items = conversation.messages.iter().map(write_message).collect();
    super::join_body(conversation, "messages", "system", items)
}

/// Writes one message object.
pub(crate) fn write_message(m: &Message) -> Value {
    let mut obj = Object::new();
    obj.insert("role".into(), Value::String(m.role.as_str().into()));
    let content = match (m.form, m.content.as_slice()) {
        (ContentForm::String, [Block::Text(t)]) if t.extra.is_empty() => {
            Some(Value::String(t.text.clone()))
        }
        (ContentForm::Null, []) => Some(Value::Null),
        (ContentForm::Absent, []) => None,
        (_, blocks) => Some(Value::Array(blocks.iter().map(write_block).collect())),
    };
    if let Some(c) = content {
        obj.insert("content".into(), c);
    }
    for (k, v) in &m.extra {
        obj.insert(k.clone(), v.clone());
    }
    Value::Object(obj)
}

/// Writes one content block.
pub fn write_block(b: &Block) -> Value {
    let mut obj = Object::new();
    match b {
        Block::Text(t) => {
            obj.insert("type".into(), "text".into());
            obj.insert("text".into(), Value::String(t.text.clone()));
            extend(&mut obj, &t.extra);
        }
        Block::ToolUse(t) => {
            obj.insert("type".into(), "tool_use".into());
            obj.insert("id".into(), Value::String(t.id.clone()));
            obj.insert("name".into(), Value::String(t.name.clone()));
            obj.insert("input".into(), t.input.to_value());
            extend(&mut obj, &t.extra);
        }
        Block::ToolResult(r) => {
            obj.insert("type".into(), "tool_result".into());
            obj.insert("tool_use_id".into(), Value::String(r.tool_use_id.clone()));
            match &r.content {
                None => {}
                Some(ToolResultContent::Text(s)) => {
                    obj.insert("content".into(), Value::String(s.clone()));
                }
                Some(ToolResultContent::Blocks(bs)) => {
                    obj.insert(
                        "content".into(),
                        Value::Array(bs.iter().map(write_block).collect()),
                    );
                }
            }
            if let Some(e) = r.is_error {
                obj.insert("is_error".into(), Value::Bool(e));
            }
            extend(&mut obj, &r.extra);
        }
        Block::Thinking(v) | Block::Image(v) | Block::Document(v) | Block::Other(v) => {
            return v.clone();
        }
    }
    Value::Object(obj)
}

fn extend(obj: &mut Object, extra: &Object) {
    for (k, v) in extra {
        obj.insert(k.clone(), v.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_and_blocks_round_trip() {
        let body = json!({
            "model": "m", "max_tokens": 5, "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "t", "signature": "sig"},
                    {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}},
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": 1}, "caller": "x"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "ok"}], "is_error": false}, {"type": "text", "text": "go"}]},
                {"role": "assistant", "content": "plain", "id": "msg_1"}
            ]
        });
        let conv = read(&body).unwrap();
        assert_eq!(write(&conv), body);
    }

    #[test]
    fn bad_tool_use_id_is_located() {
        let body = json!({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "tool_use", "id": 7, "name": "n", "input": {}}]}]});
        let err = read(&body).unwrap_err().to_string();
        assert_eq!(
            err,
            "messages[1].content[1].id: expected a string, found a number"
        );
    }
}
