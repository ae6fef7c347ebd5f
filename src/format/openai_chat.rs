//! OpenAI Chat Completions request bodies.
//!
//! Shape (Chat Completions API reference): `{"model", "messages": [...], "tools"?, ...}`. A message
//! is `{"role": "system"|"developer"|"user"|"assistant"|"tool", "content": string | [part] | null}`;
//! assistant messages may carry `tool_calls: [{id, type: "function", function: {name, arguments}}]`
//! where `arguments` is a JSON object *encoded as a string*, or custom tool calls
//! `{id, type: "custom", custom: {name, input}}` with free-form `input` ([`CUSTOM_CALL`], rule
//! C5); a `tool` message answers one call by `tool_call_id`, its content a string or an array of
//! text parts. Parts: `text`, `image_url`, `file`, `input_audio`, `refusal`.
//!
//! Legacy (deprecated, still accepted) function calling: an assistant message's
//! `function_call: {name, arguments}` is answered by the next message, `{"role": "function",
//! "name", "content"}`, which has no call id (Chat Completions API reference, `function_call` and
//! the `function` role). The call is read as a [`ToolUse`] and the answer as a [`Role::Tool`]
//! message with one [`ToolResult`], both marked with [`LEGACY_FUNCTION`] in their `extra`, and
//! paired by an id the reader makes up (`legacy_function_<message index>`), which is never
//! written: the writer gives both back in their legacy shape.

use super::{FormatError, as_object, json_kind, req_str, without};
use crate::conversation::{
    Block, ContentForm, Conversation, Message, Object, Outcome, Role, Text, ToolInput, ToolResult,
    ToolResultContent, ToolUse,
};
use crate::outcome::OutcomePolicy;
use serde_json::Value;

/// The `extra` key that marks a legacy function call ([`ToolUse::extra`]: an object with the
/// wire `function_call`'s fields other than `name` and `arguments`) and its answer
/// ([`ToolResult::extra`]: `true`). Never written to the wire under this key.
pub const LEGACY_FUNCTION: &str = "function_call";

/// True for a call read from a legacy assistant `function_call`.
pub fn is_legacy_call(t: &ToolUse) -> bool {
    t.extra.contains_key(LEGACY_FUNCTION)
}

/// True for a result read from a legacy `role: "function"` message.
pub fn is_legacy_result(r: &ToolResult) -> bool {
    r.extra.contains_key(LEGACY_FUNCTION)
}

/// Whether `c` holds a legacy function call or result (read from `function_call` /
/// `role: "function"`), whose ids [`read`] pairs across the whole message list.
#[cfg(feature = "server")]
pub(crate) fn has_legacy(c: &Conversation) -> bool {
    c.messages.iter().flat_map(|m| &m.content).any(|b| match b {
        Block::ToolUse(t) => is_legacy_call(t),
        Block::ToolResult(r) => is_legacy_result(r),
        _ => false,
    })
}

/// Reads an OpenAI Chat request body or a bare array of messages.
///
/// # Errors
/// [`FormatError::Shape`] with the JSON path of the first malformed element, e.g.
/// `messages[4].tool_calls[0].function.arguments: expected a string, found an object`.
pub fn read(body: &Value) -> Result<Conversation, FormatError> {
    let (_, items, extra, bare) = super::split_body(body, super::Format::OpenAiChat)?;
    let mut messages = items
        .iter()
        .enumerate()
        .map(|(i, m)| read_message(m, &format!("messages[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    pair_legacy_functions(&mut messages);
    Ok(Conversation {
        system: None,
        messages,
        extra,
        bare,
    })
}

pub(crate) fn read_message(value: &Value, path: &str) -> Result<Message, FormatError> {
    let obj = as_object(value, path)?;
    let role_name = req_str(obj, "role", path)?;
    let role = match role_name.as_str() {
        "function" => Role::Tool,
        // An unknown role is kept as it came (`Role::Other`).
        name => Role::parse(name),
    };
    let (parts, form) = read_content(obj.get("content"), &format!("{path}.content"))?;
    if role == Role::Tool {
        let legacy = role_name == "function";
        let tool_use_id = if legacy {
            // Paired with its function_call by `pair_legacy_functions`.
            String::new()
        } else {
            req_str(obj, "tool_call_id", path)?
        };
        let content = match (form, parts) {
            (ContentForm::String, mut p) => match p.pop() {
                Some(Block::Text(t)) => Some(ToolResultContent::Text(t.text)),
                _ => None,
            },
            (ContentForm::Blocks, p) => Some(ToolResultContent::Blocks(p)),
            _ => None,
        };
        let mut result_extra = Object::new();
        if legacy {
            result_extra.insert(LEGACY_FUNCTION.into(), Value::Bool(true));
        }
        let result = OutcomePolicy::ExitCode.apply(ToolResult {
            tool_use_id,
            content,
            is_error: None,
            extra: result_extra,
            outcome: Outcome::Unknown,
            rewritten: None,
        });
        return Ok(Message {
            role,
            content: vec![Block::ToolResult(result)],
            extra: without(obj, &["role", "content", "tool_call_id"]),
            form,
        });
    }
    let mut content = parts;
    let mut skip: Vec<&str> = vec!["role", "content"];
    if let Some(other) = obj.get("tool_calls")
        && !(other.is_array() || other.is_null())
    {
        return Err(FormatError::shape(
            format!("{path}.tool_calls"),
            format!("expected an array, found {}", json_kind(other)),
        ));
    }
    if let Some(Value::Array(calls)) = obj.get("tool_calls")
        && !calls.is_empty()
    {
        skip.push("tool_calls");
        for (j, call) in calls.iter().enumerate() {
            content.push(Block::ToolUse(read_call(
                call,
                &format!("{path}.tool_calls[{j}]"),
            )?));
        }
    }
    if role == Role::Assistant
        && let Some(call) = obj.get(LEGACY_FUNCTION)
        && !call.is_null()
    {
        skip.push(LEGACY_FUNCTION);
        content.push(Block::ToolUse(read_legacy_call(
            call,
            &format!("{path}.{LEGACY_FUNCTION}"),
        )?));
    }
    Ok(Message {
        role,
        content,
        extra: without(obj, &skip),
        form,
    })
}

/// Reads a legacy `function_call: {name, arguments}`; the id is set by
/// [`pair_legacy_functions`].
fn read_legacy_call(value: &Value, path: &str) -> Result<ToolUse, FormatError> {
    let obj = as_object(value, path)?;
    let name = req_str(obj, "name", path)?;
    let arguments = match obj.get("arguments") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(FormatError::shape(
                format!("{path}.arguments"),
                format!(
                    "expected a string (JSON-encoded arguments), found {}",
                    json_kind(other)
                ),
            ));
        }
        None => return Err(FormatError::shape(path, "missing \"arguments\"")),
    };
    let mut extra = Object::new();
    extra.insert(
        LEGACY_FUNCTION.into(),
        Value::Object(without(obj, &["name", "arguments"])),
    );
    Ok(ToolUse {
        id: String::new(),
        name,
        input: ToolInput::Arguments(arguments),
        extra,
    })
}

/// Gives each legacy function call an id (`legacy_function_<message index>`, made unique against
/// the real call ids) and the same id to the `function` message right after it when its `name`
/// matches (or is absent); a `function` message that answers no such call gets an id of its own
/// (`legacy_function_result_<index>`), which the guard reports as an orphan.
fn pair_legacy_functions(messages: &mut [Message]) {
    let taken: std::collections::HashSet<String> = messages
        .iter()
        .flat_map(|m| m.tool_uses().map(|t| t.id.clone()))
        .filter(|id| !id.is_empty())
        .collect();
    let fresh = |base: String| {
        let mut id = base;
        while taken.contains(&id) {
            id.push('_');
        }
        id
    };
    let mut open: Option<(String, String)> = None;
    for (i, m) in messages.iter_mut().enumerate() {
        let answered = open.take();
        for b in &mut m.content {
            match b {
                Block::ToolUse(t) if is_legacy_call(t) => {
                    t.id = fresh(format!("legacy_function_{i}"));
                    open = Some((t.id.clone(), t.name.clone()));
                }
                Block::ToolResult(r) if is_legacy_result(r) => {
                    let name = m.extra.get("name").and_then(Value::as_str);
                    r.tool_use_id = match &answered {
                        Some((id, called)) if name.is_none_or(|n| n == called) => id.clone(),
                        _ => fresh(format!("legacy_function_result_{i}")),
                    };
                }
                _ => {}
            }
        }
    }
}

/// The `type` of a custom (free-form) tool call: `{"id", "type": "custom", "custom": {"name",
/// "input"}}`, with no `function` (openai-python
/// `chat_completion_message_custom_tool_call_param.py`, rule C5). Its `input` is free text, read
/// as [`ToolInput::Freeform`]; the other fields of `custom` are kept in the call's `extra`
/// under `custom` and written back in place.
pub const CUSTOM_CALL: &str = "custom";

fn read_call(value: &Value, path: &str) -> Result<ToolUse, FormatError> {
    let obj = as_object(value, path)?;
    let id = req_str(obj, "id", path)?;
    if obj.get("type").and_then(Value::as_str) == Some(CUSTOM_CALL) {
        let cpath = format!("{path}.{CUSTOM_CALL}");
        let custom = as_object(obj.get(CUSTOM_CALL).unwrap_or(&Value::Null), &cpath)?;
        let mut extra = without(obj, &["id", CUSTOM_CALL]);
        let rest = without(custom, &["name", "input"]);
        if !rest.is_empty() {
            extra.insert(CUSTOM_CALL.into(), Value::Object(rest));
        }
        return Ok(ToolUse {
            id,
            name: req_str(custom, "name", &cpath)?,
            input: ToolInput::Freeform(req_str(custom, "input", &cpath)?),
            extra,
        });
    }
    let fpath = format!("{path}.function");
    let function = as_object(obj.get("function").unwrap_or(&Value::Null), &fpath)?;
    let name = req_str(function, "name", &fpath)?;
    let arguments = match function.get("arguments") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(FormatError::shape(
                format!("{fpath}.arguments"),
                format!(
                    "expected a string (JSON-encoded arguments), found {}",
                    json_kind(other)
                ),
            ));
        }
        None => return Err(FormatError::shape(&fpath, "missing \"arguments\"")),
    };
    let mut extra = without(obj, &["id", "function"]);
    let fextra = without(function, &["name", "arguments"]);
    if !fextra.is_empty() {
        extra.insert("function".into(), Value::Object(fextra));
    }
    Ok(ToolUse {
        id,
        name,
        input: ToolInput::Arguments(arguments),
        extra,
    })
}

fn read_content(
    value: Option<&Value>,
    path: &str,
) -> Result<(Vec<Block>, ContentForm), FormatError> {
    Ok(match value {
        None => (Vec::new(), ContentForm::Absent),
        Some(Value::Null) => (Vec::new(), ContentForm::Null),
        Some(Value::String(s)) => (vec![Block::text(s.clone())], ContentForm::String),
        Some(Value::Array(parts)) => {
            let blocks = parts
                .iter()
                .enumerate()
                .map(|(j, p)| read_part(p, &format!("{path}[{j}]")))
                .collect::<Result<Vec<_>, _>>()?;
            (blocks, ContentForm::Blocks)
        }
        Some(other) => {
            return Err(FormatError::shape(
                path,
                format!(
                    "expected a string, an array or null, found {}",
                    json_kind(other)
                ),
            ));
        }
    })
}

fn read_part(value: &Value, path: &str) -> Result<Block, FormatError> {
    let obj = as_object(value, path)?;
    Ok(match obj.get("type").and_then(Value::as_str) {
        Some("text") => Block::Text(Text {
            text: req_str(obj, "text", path)?,
            extra: without(obj, &["type", "text"]),
        }),
        Some("image_url") => Block::Image(value.clone()),
        Some("file") => Block::Document(value.clone()),
        _ => Block::Other(value.clone()),
    })
}

/// Writes a conversation as an OpenAI Chat request body.
pub fn write(conversation: &Conversation) -> Value {
    let items = conversation.messages.iter().map(write_message).collect();
    super::join_body(conversation, super::Format::OpenAiChat, items)
}

pub(crate) fn write_message(m: &Message) -> Value {
    let mut obj = Object::new();
    obj.insert("role".into(), Value::String(m.role.as_str().into()));
    if m.role == Role::Tool
        && let Some(Block::ToolResult(r)) = m.content.first()
    {
        if is_legacy_result(r) {
            obj.insert("role".into(), "function".into());
        } else {
            obj.insert("tool_call_id".into(), Value::String(r.tool_use_id.clone()));
        }
        match &r.content {
            Some(ToolResultContent::Text(s)) => {
                obj.insert("content".into(), Value::String(s.clone()));
            }
            Some(ToolResultContent::Blocks(bs)) => {
                obj.insert(
                    "content".into(),
                    Value::Array(bs.iter().map(write_part).collect()),
                );
            }
            None => match m.form {
                ContentForm::Null => {
                    obj.insert("content".into(), Value::Null);
                }
                ContentForm::Absent => {}
                _ => {
                    obj.insert("content".into(), Value::String(String::new()));
                }
            },
        }
        for (k, v) in &m.extra {
            obj.insert(k.clone(), v.clone());
        }
        return Value::Object(obj);
    }
    let parts: Vec<&Block> = m
        .content
        .iter()
        .filter(|b| !matches!(b, Block::ToolUse(_)))
        .collect();
    let calls: Vec<Value> = m
        .content
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse(t) if !is_legacy_call(t) => Some(write_call(t)),
            _ => None,
        })
        .collect();
    let legacy = m
        .tool_uses()
        .find(|t| is_legacy_call(t))
        .map(write_legacy_call);
    let content = match (m.form, parts.as_slice()) {
        (ContentForm::String, [Block::Text(t)]) if t.extra.is_empty() => {
            Some(Value::String(t.text.clone()))
        }
        (ContentForm::Null, []) => Some(Value::Null),
        (ContentForm::Absent, []) => None,
        (ContentForm::String, []) => Some(Value::String(String::new())),
        (_, parts) => Some(Value::Array(parts.iter().map(|b| write_part(b)).collect())),
    };
    if let Some(c) = content {
        obj.insert("content".into(), c);
    }
    for (k, v) in &m.extra {
        obj.insert(k.clone(), v.clone());
    }
    if !calls.is_empty() {
        obj.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(call) = legacy {
        obj.insert(LEGACY_FUNCTION.into(), call);
    }
    Value::Object(obj)
}

/// Writes a legacy call back as `function_call: {name, arguments, ...}` (no id on the wire).
fn write_legacy_call(t: &ToolUse) -> Value {
    let mut obj = Object::new();
    obj.insert("name".into(), Value::String(t.name.clone()));
    let arguments = match &t.input {
        ToolInput::Arguments(s) => s.clone(),
        ToolInput::Json(v) => v.to_string(),
        ToolInput::Freeform(s) => serde_json::json!({ "input": s }).to_string(),
    };
    obj.insert("arguments".into(), Value::String(arguments));
    if let Some(Value::Object(rest)) = t.extra.get(LEGACY_FUNCTION) {
        for (k, v) in rest {
            obj.insert(k.clone(), v.clone());
        }
    }
    Value::Object(obj)
}

fn write_call(t: &ToolUse) -> Value {
    let mut obj = Object::new();
    obj.insert("id".into(), Value::String(t.id.clone()));
    if t.extra.get("type").and_then(Value::as_str) == Some(CUSTOM_CALL) {
        let mut custom = Object::new();
        custom.insert("name".into(), Value::String(t.name.clone()));
        let input = match &t.input {
            ToolInput::Freeform(s) | ToolInput::Arguments(s) => s.clone(),
            ToolInput::Json(v) => v.to_string(),
        };
        custom.insert("input".into(), Value::String(input));
        if let Some(Value::Object(rest)) = t.extra.get(CUSTOM_CALL) {
            for (k, v) in rest {
                custom.insert(k.clone(), v.clone());
            }
        }
        for (k, v) in &t.extra {
            if k != CUSTOM_CALL {
                obj.insert(k.clone(), v.clone());
            }
        }
        obj.insert(CUSTOM_CALL.into(), Value::Object(custom));
        return Value::Object(obj);
    }
    let mut function = Object::new();
    function.insert("name".into(), Value::String(t.name.clone()));
    let arguments = match &t.input {
        ToolInput::Arguments(s) => s.clone(),
        ToolInput::Json(v) => v.to_string(),
        ToolInput::Freeform(s) => serde_json::json!({ "input": s }).to_string(),
    };
    function.insert("arguments".into(), Value::String(arguments));
    if let Some(Value::Object(fextra)) = t.extra.get("function") {
        for (k, v) in fextra {
            function.insert(k.clone(), v.clone());
        }
    }
    if !t.extra.contains_key("type") {
        obj.insert("type".into(), "function".into());
    }
    for (k, v) in &t.extra {
        if k != "function" {
            obj.insert(k.clone(), v.clone());
        }
    }
    obj.insert("function".into(), Value::Object(function));
    Value::Object(obj)
}

fn write_part(b: &Block) -> Value {
    match b {
        Block::Text(t) => {
            let mut obj = Object::new();
            obj.insert("type".into(), "text".into());
            obj.insert("text".into(), Value::String(t.text.clone()));
            for (k, v) in &t.extra {
                obj.insert(k.clone(), v.clone());
            }
            Value::Object(obj)
        }
        Block::Image(v) | Block::Document(v) | Block::Other(v) | Block::Thinking(v) => v.clone(),
        Block::ToolUse(_) | Block::ToolResult(_) => {
            // Not representable as a content part; the converter never puts them here.
            serde_json::json!({"type": "text", "text": ""})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_calls_and_tool_messages_round_trip() {
        let body = json!({"model": "gpt", "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "image_url", "image_url": {"url": "data:x"}}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "r", "name": "f"},
            {"role": "assistant", "content": "done", "refusal": null}
        ]});
        let conv = read(&body).unwrap();
        assert_eq!(conv.messages[2].content.len(), 1);
        assert_eq!(write(&conv), body);
    }

    #[test]
    fn custom_tool_calls_refusals_and_text_part_tool_messages_round_trip_byte_for_byte() {
        let text = r#"{"model":"gpt-5.4","messages":[{"role":"system","content":"s"},{"role":"user","content":"patch it"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_c1","type":"custom","custom":{"name":"apply_patch","input":"*** Begin Patch\n*** Update File: a.py\n@@\n-a\n+b\n*** End Patch"}},{"id":"call_f1","type":"function","function":{"name":"run","arguments":"{\"cmd\":\"ls\"}"}}]},{"role":"tool","tool_call_id":"call_c1","content":[{"type":"text","text":"Done"}]},{"role":"tool","tool_call_id":"call_f1","content":"a.py"},{"role":"developer","content":[{"type":"text","text":"plan mode: do not edit"}]},{"role":"assistant","content":null,"refusal":"I can't do that."}]}"#;
        let body: Value = serde_json::from_str(text).unwrap();
        let conv = read(&body).unwrap();
        let call = conv.messages[2].tool_uses().next().unwrap();
        assert_eq!(
            (call.id.as_str(), call.name.as_str()),
            ("call_c1", "apply_patch")
        );
        assert!(matches!(&call.input, ToolInput::Freeform(s) if s.starts_with("*** Begin Patch")));
        assert_eq!(serde_json::to_string(&write(&conv)).unwrap(), text);
        assert_eq!(
            crate::guard::validate(
                &conv,
                crate::format::Format::OpenAiChat,
                crate::guard::ValidateOptions {
                    allow_open_tail: false
                }
            ),
            vec![]
        );
        // A custom call with no `custom` object is a located shape error.
        let broken = json!({"messages": [{"role": "assistant", "content": null,
            "tool_calls": [{"id": "c", "type": "custom", "function": {"name": "f", "arguments": "{}"}}]}]});
        assert_eq!(
            read(&broken).unwrap_err().to_string(),
            "messages[0].tool_calls[0].custom: expected an object, found null"
        );
    }

    #[test]
    fn arguments_must_be_a_string() {
        let body = json!({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}]});
        assert_eq!(
            read(&body).unwrap_err().to_string(),
            "messages[0].tool_calls[0].function.arguments: expected a string (JSON-encoded arguments), found an object"
        );
    }
}

#[cfg(test)]
mod legacy_tests {
    use super::*;
    use crate::format::Format;
    use crate::guard::{ValidateOptions, ViolationKind, validate};
    use serde_json::json;

    #[test]
    fn legacy_function_messages_pair_with_their_call_and_round_trip() {
        let body = json!({"model": "gpt-4o", "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": null, "function_call": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
            {"role": "function", "name": "get_weather", "content": "18 C"},
            {"role": "assistant", "content": "18 C"}
        ]});
        let conv = read(&body).unwrap();
        let call = conv.messages[1].tool_uses().next().unwrap();
        let result = conv.messages[2].tool_results().next().unwrap();
        assert_eq!(call.id, "legacy_function_1");
        assert_eq!(result.tool_use_id, call.id);
        assert_eq!(result.text(), "18 C");
        assert_eq!(write(&conv), body);
        let units = crate::guard::Units::of(&conv, crate::format::Format::OpenAiChat);
        assert_eq!(
            units
                .exchanges
                .iter()
                .map(|e| (e.start, e.end))
                .collect::<Vec<_>>(),
            vec![(1, 3)]
        );
        assert_eq!(
            validate(&conv, Format::OpenAiChat, ValidateOptions::default()),
            vec![]
        );
    }

    #[test]
    fn a_function_message_that_answers_no_function_call_is_an_orphan() {
        let body = json!({"messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": null, "function_call": {"name": "get_weather", "arguments": "{}"}},
            {"role": "function", "name": "other", "content": "x"},
            {"role": "user", "content": "and?"},
            {"role": "assistant", "content": null, "function_call": {"name": "get_weather", "arguments": "{}"}},
            {"role": "user", "content": "never mind"}
        ]});
        let conv = read(&body).unwrap();
        let found: Vec<(Option<usize>, ViolationKind)> =
            validate(&conv, Format::OpenAiChat, ValidateOptions::default())
                .into_iter()
                .map(|v| (v.message, v.kind))
                .collect();
        // The misnamed answer is refused; an unanswered function_call is allowed by the API.
        assert_eq!(
            found,
            vec![(
                Some(2),
                ViolationKind::OrphanResult {
                    id: "of function message \"other\"".into(),
                    expected: "in a directly preceding assistant function_call of the same name"
                }
            )]
        );
    }
}
