//! Anthropic Messages API request bodies.
//!
//! Shape (Messages API reference): `{"model", "max_tokens", "system"?, "messages": [{"role":
//! "user"|"assistant", "content": string | [block]}], "tools"?, ...}`. Blocks: `text`,
//! `tool_use {id, name, input}`, `tool_result {tool_use_id, content?, is_error?}`, `thinking
//! {thinking, signature}`, `redacted_thinking {data}`, `image`, `document`, and server-side types
//! (`server_tool_use`, `web_search_tool_result`, ...) which pass through as [`Block::Other`].

use super::{Format, FormatError, as_object, json_kind, req_str, without};
use crate::conversation::{
    Block, ContentForm, Conversation, Message, Object, Outcome, Role, Text, ToolInput, ToolResult,
    ToolResultContent, ToolUse,
};
use crate::outcome::OutcomePolicy;
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

/// Reads an Anthropic request body or a bare array of messages.
///
/// # Errors
/// [`FormatError::Shape`] with the JSON path (`messages[3].content[1].id`) of the first element
/// that is not what the API documents: a message without a known role, a `tool_use` without a
/// string `id`, a `tool_result` whose `content` is neither string nor array, ...
pub fn read(body: &Value) -> Result<Conversation, FormatError> {
    let (system, items, extra, bare) = super::split_body(body, Format::Anthropic)?;
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
        extra: without(obj, &MESSAGE_FIELDS),
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
            extra: without(obj, &TEXT_FIELDS),
        }),
        "tool_use" => Block::ToolUse(ToolUse {
            id: req_str(obj, "id", path)?,
            name: req_str(obj, "name", path)?,
            input: ToolInput::Json(
                obj.get("input")
                    .cloned()
                    .ok_or_else(|| FormatError::shape(path, "tool_use has no \"input\""))?,
            ),
            extra: without(obj, &TOOL_USE_FIELDS),
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
            extra: without(obj, &TOOL_RESULT_FIELDS),
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
    super::join_body(conversation, Format::Anthropic, items)
}

/// Writes one message object.
pub(crate) fn write_message(m: &Message) -> Value {
    to_value(&WireMessage(m))
}

/// `wire` as a `Value`. Serializing into a `Value` fails only for a map key that is not a
/// string, and every key of the wire shapes is one.
fn to_value(wire: &impl Serialize) -> Value {
    serde_json::to_value(wire).unwrap_or_default()
}

/// The modelled fields of a message, in the order they are written (its other fields follow).
const MESSAGE_FIELDS: [&str; 2] = ["role", "content"];
/// The modelled fields of a `text` block.
const TEXT_FIELDS: [&str; 2] = ["type", "text"];
/// The modelled fields of a `tool_use` block.
const TOOL_USE_FIELDS: [&str; 4] = ["type", "id", "name", "input"];
/// The modelled fields of a `tool_result` block.
const TOOL_RESULT_FIELDS: [&str; 4] = ["type", "tool_use_id", "content", "is_error"];

/// Whether `extra` holds a field named like one of `modelled`: written after them, it replaces
/// that field in place (as a JSON object's insert does, the reader never leaves one, a
/// hand-built conversation may hold one).
fn clashes(extra: &Object, modelled: &[&str]) -> bool {
    !extra.is_empty() && modelled.iter().any(|k| extra.contains_key(*k))
}

/// Serializes `fields` where a clash with [`clashes`] is possible: through a `Value` (whose map
/// replaces the field in place) when `clash`, straight to `s` otherwise.
fn entries<S: Serializer>(fields: &impl Serialize, clash: bool, s: S) -> Result<S::Ok, S::Error> {
    if clash {
        to_value(fields).serialize(s)
    } else {
        fields.serialize(s)
    }
}

/// An Anthropic message on the wire: `role`, `content` (a string, `null` or absent as it came,
/// else its blocks), then its other fields. The one writer of the format: [`write_message`]
/// serializes it into a `Value`, [`super::emit`] straight into the request's bytes, so both
/// give the same object.
pub(crate) struct WireMessage<'a>(pub(crate) &'a Message);

impl Serialize for WireMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        entries(
            &MessageFields(self.0),
            clashes(&self.0.extra, &MESSAGE_FIELDS),
            s,
        )
    }
}

/// The entries of a message, in order, duplicates included.
struct MessageFields<'a>(&'a Message);

impl Serialize for MessageFields<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let [role, content] = MESSAGE_FIELDS;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry(role, m.role.as_str())?;
        match (m.form, m.content.as_slice()) {
            (ContentForm::String, [Block::Text(t)]) if t.extra.is_empty() => {
                map.serialize_entry(content, &t.text)?;
            }
            (ContentForm::Null, []) => map.serialize_entry(content, &Value::Null)?,
            (ContentForm::Absent, []) => {}
            (_, blocks) => map.serialize_entry(content, &WireBlocks(blocks))?,
        }
        for (k, v) in &m.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// An array of content blocks.
struct WireBlocks<'a>(&'a [Block]);

impl Serialize for WireBlocks<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for b in self.0 {
            seq.serialize_element(&WireBlock(b))?;
        }
        seq.end()
    }
}

/// An Anthropic content block on the wire: `type`, its modelled fields, its other fields;
/// a block kept as JSON (thinking, image, document, other types) as it came.
pub(crate) struct WireBlock<'a>(pub(crate) &'a Block);

impl Serialize for WireBlock<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let extra = match self.0 {
            Block::Text(t) => clashes(&t.extra, &TEXT_FIELDS),
            Block::ToolUse(t) => clashes(&t.extra, &TOOL_USE_FIELDS),
            Block::ToolResult(r) => clashes(&r.extra, &TOOL_RESULT_FIELDS),
            Block::Thinking(v) | Block::Image(v) | Block::Document(v) | Block::Other(v) => {
                return v.serialize(s);
            }
        };
        entries(&BlockFields(self.0), extra, s)
    }
}

/// The entries of a modelled block, in order, duplicates included.
struct BlockFields<'a>(&'a Block);

impl Serialize for BlockFields<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        let extra = match self.0 {
            Block::Text(t) => {
                let [kind, text] = TEXT_FIELDS;
                map.serialize_entry(kind, "text")?;
                map.serialize_entry(text, &t.text)?;
                &t.extra
            }
            Block::ToolUse(t) => {
                let [kind, id, name, input] = TOOL_USE_FIELDS;
                map.serialize_entry(kind, "tool_use")?;
                map.serialize_entry(id, &t.id)?;
                map.serialize_entry(name, &t.name)?;
                // JSON input as it is held; string arguments as `ToolInput::to_value` gives them.
                match &t.input {
                    ToolInput::Json(v) => map.serialize_entry(input, v)?,
                    other => map.serialize_entry(input, &other.to_value())?,
                }
                &t.extra
            }
            Block::ToolResult(r) => {
                let [kind, id, content, is_error] = TOOL_RESULT_FIELDS;
                map.serialize_entry(kind, "tool_result")?;
                map.serialize_entry(id, &r.tool_use_id)?;
                match &r.content {
                    None => {}
                    Some(ToolResultContent::Text(text)) => map.serialize_entry(content, text)?,
                    Some(ToolResultContent::Blocks(bs)) => {
                        map.serialize_entry(content, &WireBlocks(bs))?;
                    }
                }
                if let Some(e) = r.is_error {
                    map.serialize_entry(is_error, &e)?;
                }
                &r.extra
            }
            Block::Thinking(_) | Block::Image(_) | Block::Document(_) | Block::Other(_) => {
                return Err(serde::ser::Error::custom(
                    "a block kept as JSON has no fields",
                ));
            }
        };
        for (k, v) in extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
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
