//! OpenAI Responses API input items.
//!
//! Shape (Responses API reference): `{"model", "instructions"?, "input": [item], ...}`. Items:
//! `message {role, content: string | [input_text | output_text | input_image | input_file ...]}`
//! (the `type` may be omitted for messages), `function_call {call_id, name, arguments}` with
//! `arguments` a JSON *string*, `function_call_output {call_id, output}`, `custom_tool_call
//! {call_id, name, input}` / `custom_tool_call_output`, and `reasoning {summary,
//! encrypted_content}`. A reasoning item belongs with the call or message that follows it (the
//! guard keeps them in one unit). The built-in tools' calls that the client answers
//! (`local_shell_call`, `shell_call`, `apply_patch_call`, `computer_call`: any `*_call` item with
//! a `call_id`) are calls too, paired with their `*_call_output` by `call_id`; their fields other
//! than `type`, `id`, `call_id` and `status` are the call's input. Every item is one [`Message`];
//! unknown items pass through as one [`Block::Other`].

use super::{FormatError, as_object, json_kind, req_str, without};
use crate::conversation::{
    Block, ContentForm, Conversation, Message, Object, Outcome, Role, Text, ToolInput, ToolResult,
    ToolResultContent, ToolUse,
};
use crate::outcome::OutcomePolicy;
use serde_json::Value;

/// Reads a Responses request body (`input` array, `instructions` as the system prompt) or a bare
/// array of items.
///
/// # Errors
/// [`FormatError::Shape`] with the JSON path (`input[7].call_id`) of the first malformed item.
pub fn read(body: &Value) -> Result<Conversation, FormatError> {
    let (system, items, extra, bare) = super::split_body(body, "input", Some("instructions"))?;
    let messages = items
        .iter()
        .enumerate()
        .map(|(i, m)| read_item(m, &format!("input[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Conversation {
        system,
        messages,
        extra,
        bare,
    })
}

/// Reads one input item.
pub(crate) fn read_item(value: &Value, path: &str) -> Result<Message, FormatError> {
    let obj = as_object(value, path)?;
    let kind = obj.get("type").and_then(Value::as_str);
    let single = |role, block| Message {
        role,
        content: vec![block],
        extra: Object::new(),
        form: ContentForm::Absent,
    };
    Ok(match kind {
        None | Some("message") => {
            let role_name = req_str(obj, "role", path)?;
            // A message item of an unknown role is kept as it came; `tool` is no message role
            // here (outputs are items of their own), so it is an unknown one too.
            let role = match Role::parse(&role_name) {
                Role::Tool => Role::Other(role_name.as_str().into()),
                role => role,
            };
            let (content, form) = match obj.get("content") {
                Some(Value::String(s)) => (vec![Block::text(s.clone())], ContentForm::String),
                Some(Value::Array(parts)) => (
                    parts
                        .iter()
                        .enumerate()
                        .map(|(j, p)| read_part(p, &format!("{path}.content[{j}]")))
                        .collect::<Result<Vec<_>, _>>()?,
                    ContentForm::Blocks,
                ),
                Some(other) => {
                    return Err(FormatError::shape(
                        format!("{path}.content"),
                        format!("expected a string or an array, found {}", json_kind(other)),
                    ));
                }
                None => return Err(FormatError::shape(path, "message item has no \"content\"")),
            };
            Message {
                role,
                content,
                extra: without(obj, &["role", "content"]),
                form,
            }
        }
        Some("function_call") | Some("custom_tool_call") => {
            let custom = kind == Some("custom_tool_call");
            let key = if custom { "input" } else { "arguments" };
            let raw = match obj.get(key) {
                Some(Value::String(s)) => s.clone(),
                Some(other) => {
                    return Err(FormatError::shape(
                        format!("{path}.{key}"),
                        format!("expected a string, found {}", json_kind(other)),
                    ));
                }
                None => return Err(FormatError::shape(path, format!("missing \"{key}\""))),
            };
            let input = if custom {
                ToolInput::Freeform(raw)
            } else {
                ToolInput::Arguments(raw)
            };
            single(
                Role::Assistant,
                Block::ToolUse(ToolUse {
                    id: req_str(obj, "call_id", path)?,
                    name: req_str(obj, "name", path)?,
                    input,
                    extra: without(obj, &["call_id", "name", key]),
                }),
            )
        }
        Some(k)
            if matches!(k, "function_call_output" | "custom_tool_call_output")
                || (k.ends_with("_call_output")
                    && is_native_call(k.trim_end_matches("_output"))
                    && obj.get("call_id").is_some_and(Value::is_string)) =>
        {
            let native = !matches!(k, "function_call_output" | "custom_tool_call_output");
            let (content, skip): (_, &[&str]) = match obj.get("output") {
                Some(Value::String(s)) => (
                    Some(ToolResultContent::Text(s.clone())),
                    &["call_id", "output"],
                ),
                Some(Value::Array(parts)) if !native => (
                    Some(ToolResultContent::Blocks(
                        parts
                            .iter()
                            .enumerate()
                            .map(|(j, p)| read_part(p, &format!("{path}.output[{j}]")))
                            .collect::<Result<Vec<_>, _>>()?,
                    )),
                    &["call_id", "output"],
                ),
                // A built-in tool's other output (a screenshot object, a list of command
                // outputs) stays in the item as it came.
                _ if native => (None, &["call_id"]),
                Some(other) => {
                    return Err(FormatError::shape(
                        format!("{path}.output"),
                        format!("expected a string or an array, found {}", json_kind(other)),
                    ));
                }
                None => return Err(FormatError::shape(path, "missing \"output\"")),
            };
            single(
                Role::Tool,
                Block::ToolResult(OutcomePolicy::ExitCode.apply(ToolResult {
                    tool_use_id: req_str(obj, "call_id", path)?,
                    content,
                    is_error: None,
                    extra: without(obj, skip),
                    outcome: Outcome::Unknown,
                    rewritten: None,
                })),
            )
        }
        Some("reasoning") => single(Role::Assistant, Block::Thinking(value.clone())),
        Some(k) if is_native_call(k) && obj.get("call_id").is_some_and(Value::is_string) => {
            // The input is every field but the item's own bookkeeping, written back as fields.
            let input = without(obj, &["type", "id", "call_id", "status"]);
            single(
                Role::Assistant,
                Block::ToolUse(ToolUse {
                    id: req_str(obj, "call_id", path)?,
                    name: k.trim_end_matches("_call").to_string(),
                    input: ToolInput::Json(Value::Object(input.clone())),
                    extra: without(
                        obj,
                        &input
                            .keys()
                            .map(String::as_str)
                            .chain(["call_id"])
                            .collect::<Vec<_>>(),
                    ),
                }),
            )
        }
        Some(_) => single(Role::Assistant, Block::Other(value.clone())),
    })
}

/// A built-in tool's call item that the client answers with a `*_call_output` (not
/// `function_call` / `custom_tool_call`, which have their own shapes).
fn is_native_call(kind: &str) -> bool {
    kind.ends_with("_call") && kind != "function_call" && kind != "custom_tool_call"
}

fn read_part(value: &Value, path: &str) -> Result<Block, FormatError> {
    let obj = as_object(value, path)?;
    Ok(match obj.get("type").and_then(Value::as_str) {
        // The part type stays in `extra` so input_text / output_text round-trip as written.
        Some("input_text") | Some("output_text") | Some("text") => Block::Text(Text {
            text: req_str(obj, "text", path)?,
            extra: without(obj, &["text"]),
        }),
        Some("input_image") => Block::Image(value.clone()),
        Some("input_file") => Block::Document(value.clone()),
        _ => Block::Other(value.clone()),
    })
}

/// Writes a conversation as a Responses request body. A message read from one item writes back
/// as that item; a message from elsewhere (a compaction marker, a converted message) is split
/// into a message item for its text and one item per tool call or result.
pub fn write(conversation: &Conversation) -> Value {
    let mut items = Vec::new();
    for m in &conversation.messages {
        write_message(m, &mut items);
    }
    super::join_body(conversation, "input", "instructions", items)
}

pub(crate) fn write_message(m: &Message, items: &mut Vec<Value>) {
    let mut parts: Vec<Value> = Vec::new();
    let flush = |parts: &mut Vec<Value>, items: &mut Vec<Value>| {
        if !parts.is_empty() {
            let mut obj = Object::new();
            if m.form == ContentForm::Blocks || m.form == ContentForm::String {
                // extra carries `type: "message"`, `id`, `status` when the item had them.
            } else {
                obj.insert("type".into(), "message".into());
            }
            obj.insert("role".into(), Value::String(m.role.as_str().into()));
            let content = std::mem::take(parts);
            let text_only = matches!(m.form, ContentForm::String) && content.len() == 1;
            let as_string = if text_only {
                content[0].get("text").cloned()
            } else {
                None
            };
            match as_string {
                Some(s)
                    if content[0]
                        .as_object()
                        .map(|o| o.len() == 2)
                        .unwrap_or(false) =>
                {
                    obj.insert("content".into(), s);
                }
                _ => {
                    obj.insert("content".into(), Value::Array(content));
                }
            }
            for (k, v) in &m.extra {
                obj.insert(k.clone(), v.clone());
            }
            items.push(Value::Object(obj));
        }
    };
    for b in &m.content {
        match b {
            Block::Text(t) => {
                let mut obj = Object::new();
                let default = if m.role == Role::Assistant {
                    "output_text"
                } else {
                    "input_text"
                };
                let kind = t
                    .extra
                    .get("type")
                    .cloned()
                    .unwrap_or_else(|| Value::String(default.into()));
                obj.insert("type".into(), kind);
                obj.insert("text".into(), Value::String(t.text.clone()));
                for (k, v) in &t.extra {
                    if k != "type" {
                        obj.insert(k.clone(), v.clone());
                    }
                }
                parts.push(Value::Object(obj));
            }
            Block::Image(v) | Block::Document(v) => parts.push(v.clone()),
            Block::Other(v) if m.form != ContentForm::Absent => parts.push(v.clone()),
            Block::Other(v) | Block::Thinking(v) => {
                flush(&mut parts, items);
                items.push(v.clone());
            }
            Block::ToolUse(t)
                if t.extra
                    .get("type")
                    .and_then(Value::as_str)
                    .is_some_and(is_native_call) =>
            {
                // A built-in tool's call: its input fields go back into the item.
                flush(&mut parts, items);
                let mut obj = Object::new();
                for (k, v) in &t.extra {
                    obj.insert(k.clone(), v.clone());
                }
                obj.insert("call_id".into(), Value::String(t.id.clone()));
                match &t.input {
                    ToolInput::Json(Value::Object(fields)) => {
                        for (k, v) in fields {
                            obj.insert(k.clone(), v.clone());
                        }
                    }
                    ToolInput::Json(v) => {
                        obj.insert("action".into(), v.clone());
                    }
                    ToolInput::Arguments(s) | ToolInput::Freeform(s) => {
                        obj.insert("action".into(), Value::String(s.clone()));
                    }
                }
                items.push(Value::Object(obj));
            }
            Block::ToolUse(t) => {
                flush(&mut parts, items);
                let mut obj = Object::new();
                let (kind, key, raw) = match &t.input {
                    ToolInput::Arguments(s) => ("function_call", "arguments", s.clone()),
                    ToolInput::Json(v) => ("function_call", "arguments", v.to_string()),
                    ToolInput::Freeform(s) => ("custom_tool_call", "input", s.clone()),
                };
                if !t.extra.contains_key("type") {
                    obj.insert("type".into(), kind.into());
                }
                for (k, v) in &t.extra {
                    obj.insert(k.clone(), v.clone());
                }
                obj.insert("call_id".into(), Value::String(t.id.clone()));
                obj.insert("name".into(), Value::String(t.name.clone()));
                obj.insert(key.into(), Value::String(raw));
                items.push(Value::Object(obj));
            }
            Block::ToolResult(r) => {
                flush(&mut parts, items);
                let mut obj = Object::new();
                if !r.extra.contains_key("type") {
                    obj.insert("type".into(), "function_call_output".into());
                }
                for (k, v) in &r.extra {
                    obj.insert(k.clone(), v.clone());
                }
                obj.insert("call_id".into(), Value::String(r.tool_use_id.clone()));
                let output = match &r.content {
                    None => Value::String(String::new()),
                    Some(ToolResultContent::Text(s)) => Value::String(s.clone()),
                    Some(ToolResultContent::Blocks(bs)) => {
                        let mut sub = Vec::new();
                        let tmp = Message::new(Role::User, bs.clone());
                        for b in &tmp.content {
                            if let Block::Text(t) = b {
                                let mut o = Object::new();
                                o.insert(
                                    "type".into(),
                                    t.extra
                                        .get("type")
                                        .cloned()
                                        .unwrap_or_else(|| "input_text".into()),
                                );
                                o.insert("text".into(), Value::String(t.text.clone()));
                                sub.push(Value::Object(o));
                            } else if let Block::Image(v) | Block::Document(v) | Block::Other(v) = b
                            {
                                sub.push(v.clone());
                            }
                        }
                        Value::Array(sub)
                    }
                };
                // A built-in tool's non-text output was kept in the item as it came.
                if !(r.content.is_none() && r.extra.contains_key("output")) {
                    obj.insert("output".into(), output);
                }
                items.push(Value::Object(obj));
            }
        }
    }
    flush(&mut parts, items);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn items_round_trip() {
        let body = json!({"model": "gpt-5", "instructions": "be brief", "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"role": "user", "content": "plain"},
            {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"},
            {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_1"},
            {"type": "function_call_output", "call_id": "call_1", "output": "a\nb"},
            {"type": "custom_tool_call", "call_id": "call_2", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "custom_tool_call_output", "call_id": "call_2", "output": "ok"},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {"type": "message", "role": "assistant", "id": "msg_1", "content": [{"type": "output_text", "text": "done", "annotations": []}]}
        ]});
        let conv = read(&body).unwrap();
        assert_eq!(conv.messages.len(), 9);
        assert_eq!(write(&conv), body);
    }

    #[test]
    fn built_in_tool_calls_pair_with_their_outputs_and_round_trip() {
        let body = json!({"input": [
            {"role": "user", "content": "list"},
            {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_a", "status": "completed",
             "action": {"type": "exec", "command": ["ls"], "env": {}}},
            {"type": "local_shell_call_output", "call_id": "call_a", "output": "a b"},
            {"type": "computer_call", "id": "cu_1", "call_id": "call_b", "status": "completed",
             "action": {"type": "screenshot"}, "pending_safety_checks": []},
            {"type": "computer_call_output", "call_id": "call_b",
             "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"}
        ]});
        let conv = read(&body).unwrap();
        assert_eq!(write(&conv), body);
        let call = conv.messages[1].tool_uses().next().unwrap();
        assert_eq!(
            (call.id.as_str(), call.name.as_str()),
            ("call_a", "local_shell")
        );
        assert_eq!(
            call.input,
            ToolInput::Json(json!({"action": {"type": "exec", "command": ["ls"], "env": {}}}))
        );
        let result = conv.messages[2].tool_results().next().unwrap();
        assert_eq!(
            (result.tool_use_id.as_str(), result.text()),
            ("call_a", "a b".into())
        );
        let screenshot = conv.messages[4].tool_results().next().unwrap();
        assert_eq!(screenshot.tool_use_id, "call_b");
        assert!(matches!(conv.messages[5].content[0], Block::Other(_)));
        // Without its call, the output is an orphan the guard reports.
        let mut orphan = body;
        orphan["input"].as_array_mut().unwrap().remove(1);
        let violations = crate::guard::validate(
            &read(&orphan).unwrap(),
            crate::format::Format::OpenAiResponses,
            Default::default(),
        );
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(violations[0].message, Some(1));
    }
}
