//! OpenAI Responses API input items.
//!
//! Shape (Responses API reference): `{"model", "instructions"?, "input": [item], ...}`. Items:
//! `message {role, content: string | [input_text | output_text | input_image | input_file ...]}`
//! (the `type` may be omitted for messages), `reasoning {summary, encrypted_content}`, and the
//! call / output pairs of the rule table ([`crate::rules::OPENAI_RESPONSES`] `pairs`, rule
//! B1): `function_call {call_id, name, arguments}` with `arguments` a JSON *string*,
//! `custom_tool_call {call_id, name, input}` with free-form `input`, and the built-in tools'
//! calls the client answers (`apply_patch_call`, `shell_call`, `local_shell_call`,
//! `computer_call`, a client-executed `tool_search_call`, `program`), whose fields other than
//! `type`, `id`, the id field and `status` are the call's input. A call is read as a
//! [`ToolUse`], its output (`*_output`, paired by the id field the table names) as a
//! [`Role::Tool`] message with one [`ToolResult`]. A reasoning item belongs with the call or
//! message that follows it (the guard keeps them in one unit). Every item is one [`Message`];
//! items the table pairs with nothing (built-in calls holding their own result, state items)
//! and unknown items pass through as one [`Block::Other`], byte for byte.

use super::{FormatError, as_object, json_kind, req_str, without};
use crate::conversation::{
    Block, ContentForm, Conversation, Message, Object, Outcome, Role, Text, ToolInput, ToolResult,
    ToolResultContent, ToolUse,
};
use crate::outcome::OutcomePolicy;
use crate::rules::{BlockKind, OPENAI_RESPONSES, PairRule, RoleKind};
use serde_json::Value;

/// Reads a Responses request body (`input` array, `instructions` as the system prompt) or a bare
/// array of items.
///
/// # Errors
/// [`FormatError::Shape`] with the JSON path (`input[7].call_id`) of the first malformed item.
pub fn read(body: &Value) -> Result<Conversation, FormatError> {
    let (system, items, extra, bare) = super::split_body(body, super::Format::OpenAiResponses)?;
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
        Some(k) => {
            let table = &OPENAI_RESPONSES;
            if let Some(pair) = table.pair_of_call_item(k, obj) {
                single(
                    Role::Assistant,
                    Block::ToolUse(read_call(obj, k, pair, path)?),
                )
            } else if let Some(pair) = table.pair_of_output_item(k, obj) {
                single(Role::Tool, Block::ToolResult(read_output(obj, pair, path)?))
            } else if table.block_kind(k) == Some(BlockKind::Thinking) {
                single(Role::Assistant, Block::Thinking(value.clone()))
            } else {
                single(item_role(k, obj), Block::Other(value.clone()))
            }
        }
    })
}

/// The role of an item other than a message, a call or an output: an instruction role for the
/// state items the table admits only as instructions (`additional_tools`, `configuration_update`:
/// B5, B6), so that they stay in force when their round is dropped (the item's own `role` when
/// it names one, else `developer`); the model's for every other item (built-in calls holding
/// their result, approvals, unknown types). Only compaction reads it: the item is written back
/// as it came.
fn item_role(kind: &str, obj: &Object) -> Role {
    let table = &OPENAI_RESPONSES;
    if table
        .block(kind)
        .is_some_and(|b| b.roles == [RoleKind::Instruction])
    {
        let own = obj.get("role").and_then(Value::as_str).map(Role::parse);
        return match own {
            Some(r) if table.role_kind(r.as_str()) == Some(RoleKind::Instruction) => r,
            _ => Role::Developer,
        };
    }
    Role::Assistant
}

/// Makes a call's [`ToolInput`] from its input field's string.
type InputOf = fn(String) -> ToolInput;

/// The wire encoding of a call's input, for the call types whose input is one string field:
/// `function_call.arguments` (a JSON object *encoded as a string*) and
/// `custom_tool_call.input` (free-form text). Every other call type of the table's pairs
/// (`apply_patch_call`, `shell_call`, `tool_search_call`, `program`, ...) has its input in
/// fields of its own, read as [`ToolInput::Json`] of those fields.
fn input_field(call_type: &str) -> Option<(&'static str, InputOf)> {
    match call_type {
        "function_call" => Some(("arguments", ToolInput::Arguments)),
        "custom_tool_call" => Some(("input", ToolInput::Freeform)),
        _ => None,
    }
}

/// The item fields that are bookkeeping of a call, not its input.
const CALL_BOOKKEEPING: &[&str] = &["type", "id", "status"];

/// Reads a call item of a pair of the table ([`crate::rules::PairRule`]): its id from the
/// pair's id field; a named tool's call (`function_call`, `custom_tool_call`) with its `name`
/// and its input string; any other call with its own fields as the input (written back as
/// fields), named by its type (`apply_patch_call` -> `apply_patch`, for the digest).
fn read_call(
    obj: &Object,
    kind: &str,
    pair: &PairRule,
    path: &str,
) -> Result<ToolUse, FormatError> {
    let id = req_str(obj, pair.id_field, path)?;
    if let Some((key, wrap)) = input_field(kind) {
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
        return Ok(ToolUse {
            id,
            name: req_str(obj, "name", path)?,
            input: wrap(raw),
            extra: without(obj, &[pair.id_field, "name", key]),
        });
    }
    let mut skip: Vec<&str> = CALL_BOOKKEEPING.to_vec();
    skip.push(pair.id_field);
    let input = without(obj, &skip);
    let mut own: Vec<&str> = input.keys().map(String::as_str).collect();
    own.push(pair.id_field);
    Ok(ToolUse {
        id,
        name: kind.strip_suffix("_call").unwrap_or(kind).to_string(),
        extra: without(obj, &own),
        input: ToolInput::Json(Value::Object(input)),
    })
}

/// Reads an output item of a pair of the table: its id from the pair's id field, its `output`
/// as the result's content where it is text (a string; for a named tool's output also an
/// array of content parts), every other field (a command's output chunks, a screenshot, a
/// tool search's `tools`, a program's `result`) kept in the item as it came. The outcome
/// comes from the item's failure fields ([`crate::outcome::from_fields`]), else from an exit
/// code in the text.
fn read_output(obj: &Object, pair: &PairRule, path: &str) -> Result<ToolResult, FormatError> {
    // The id field, else the pair's other name for it (kept in the item: it is written back
    // from there, `write_message`).
    let (id, id_field) = match (obj.get(pair.id_field), pair.output_id_alt) {
        (None, Some(alt)) if obj.get(alt).is_some_and(Value::is_string) => {
            (req_str(obj, alt, path)?, None)
        }
        _ => (req_str(obj, pair.id_field, path)?, Some(pair.id_field)),
    };
    let named = input_field(pair.call).is_some();
    let content = match obj.get("output") {
        Some(Value::String(s)) => Some(ToolResultContent::Text(s.clone())),
        Some(Value::Array(parts)) if named => Some(ToolResultContent::Blocks(
            parts
                .iter()
                .enumerate()
                .map(|(j, p)| read_part(p, &format!("{path}.output[{j}]")))
                .collect::<Result<Vec<_>, _>>()?,
        )),
        _ if !named => None,
        Some(other) => {
            return Err(FormatError::shape(
                format!("{path}.output"),
                format!("expected a string or an array, found {}", json_kind(other)),
            ));
        }
        None => return Err(FormatError::shape(path, "missing \"output\"")),
    };
    let mut skip: Vec<&str> = id_field.into_iter().collect();
    if content.is_some() {
        skip.push("output");
    }
    Ok(OutcomePolicy::ExitCode.apply(ToolResult {
        tool_use_id: id,
        content,
        is_error: None,
        extra: without(obj, &skip),
        outcome: Outcome::Unknown,
        rewritten: None,
    }))
}

/// The wire type of a call as [`write`] writes it: its `type`, else `function_call` for JSON
/// arguments and `custom_tool_call` for free-form input.
pub(crate) fn call_type(t: &ToolUse) -> &str {
    match t.extra.get("type").and_then(Value::as_str) {
        Some(k) => k,
        None if matches!(t.input, ToolInput::Freeform(_)) => "custom_tool_call",
        None => "function_call",
    }
}

/// The wire type of an output as [`write`] writes it: its `type`, else
/// `function_call_output`.
pub(crate) fn output_type(r: &ToolResult) -> &str {
    r.extra
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("function_call_output")
}

/// A call whose input is its own fields (see [`input_field`]): written back as those fields.
fn is_native(t: &ToolUse) -> bool {
    t.extra
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|k| OPENAI_RESPONSES.pair_of_call(k).is_some() && input_field(k).is_none())
        && matches!(t.input, ToolInput::Json(Value::Object(_)))
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
    super::join_body(conversation, super::Format::OpenAiResponses, items)
}

/// Writes message `m` as Responses items onto `items`: its text, image, file and other parts
/// gathered into message items, each call, result and reasoning item as its own item, in order.
pub(crate) fn write_message(m: &Message, items: &mut Vec<Value>) {
    let mut parts: Vec<Value> = Vec::new();
    let flush = |parts: &mut Vec<Value>, items: &mut Vec<Value>| {
        if !parts.is_empty() {
            items.push(message_item(m, std::mem::take(parts)));
        }
    };
    for b in &m.content {
        match b {
            Block::Text(t) => parts.push(text_part(m, t)),
            Block::Image(v) | Block::Document(v) => parts.push(v.clone()),
            Block::Other(v) if m.form != ContentForm::Absent => parts.push(v.clone()),
            Block::Other(v) | Block::Thinking(v) => {
                flush(&mut parts, items);
                items.push(v.clone());
            }
            Block::ToolUse(t) if is_native(t) => {
                flush(&mut parts, items);
                items.push(native_call_item(t));
            }
            Block::ToolUse(t) => {
                flush(&mut parts, items);
                items.push(call_item(t));
            }
            Block::ToolResult(r) => {
                flush(&mut parts, items);
                items.push(result_item(r));
            }
        }
    }
    flush(&mut parts, items);
}

/// The message item of `m` holding `content` (its parts gathered so far): `content` a string
/// when the message was read with string content and this is its one plain text part.
fn message_item(m: &Message, content: Vec<Value>) -> Value {
    let mut obj = Object::new();
    if m.form == ContentForm::Blocks || m.form == ContentForm::String {
        // extra carries `type: "message"`, `id`, `status` when the item had them.
    } else {
        obj.insert("type".into(), "message".into());
    }
    obj.insert("role".into(), Value::String(m.role.as_str().into()));
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
    Value::Object(obj)
}

/// A text part of message `m`: its type as read (`output_text` for the assistant,
/// `input_text` otherwise when it had none), its text, its other fields.
fn text_part(m: &Message, t: &Text) -> Value {
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
    Value::Object(obj)
}

/// A built-in tool's call ([`is_native`]): its input fields go back into the item.
fn native_call_item(t: &ToolUse) -> Value {
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
    Value::Object(obj)
}

/// A function call (`arguments` a JSON string) or a custom tool call (`input`, free text).
fn call_item(t: &ToolUse) -> Value {
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
    Value::Object(obj)
}

/// A call's output item: its type and fields as read, the call it answers, its output.
fn result_item(r: &ToolResult) -> Value {
    let mut obj = Object::new();
    if !r.extra.contains_key("type") {
        obj.insert("type".into(), "function_call_output".into());
    }
    for (k, v) in &r.extra {
        obj.insert(k.clone(), v.clone());
    }
    // An output that named its call by the pair's other field (read so, kept in
    // the item) gets no `call_id`.
    let by_alt = OPENAI_RESPONSES
        .pair_of_output(output_type(r))
        .and_then(|p| p.output_id_alt)
        .is_some_and(|alt| {
            r.extra.get(alt).and_then(Value::as_str) == Some(r.tool_use_id.as_str())
        });
    if !by_alt {
        obj.insert("call_id".into(), Value::String(r.tool_use_id.clone()));
    }
    // An output read without text content (a command's chunks, a tool search's
    // tools) was kept in the item as it came: nothing to add.
    if r.content.is_some() || !r.extra.contains_key("type") {
        obj.insert("output".into(), result_output(r));
    }
    Value::Object(obj)
}

/// A result's `output`: its text, or its parts (text as `input_text` unless typed otherwise,
/// images, files and other parts as read); empty text when it had none.
fn result_output(r: &ToolResult) -> Value {
    match &r.content {
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
                } else if let Block::Image(v) | Block::Document(v) | Block::Other(v) = b {
                    sub.push(v.clone());
                }
            }
            Value::Array(sub)
        }
    }
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

    #[test]
    fn every_pair_type_of_the_table_reads_as_a_call_and_an_output_and_round_trips() {
        // One call and its output per pair of the table, with the fields of the SDK's types.
        let items = json!([
            {"role": "user", "content": "go"},
            {"type": "apply_patch_call", "call_id": "c1", "status": "completed",
             "operation": {"type": "update_file", "path": "a.py", "diff": "@@\n-a\n+b\n"}},
            {"type": "apply_patch_call_output", "call_id": "c1", "status": "failed", "output": "context mismatch"},
            {"type": "shell_call", "call_id": "c2", "action": {"commands": ["make"], "timeout_ms": 1000}, "status": "completed"},
            {"type": "shell_call_output", "call_id": "c2", "output": [
                {"stdout": "", "stderr": "boom", "outcome": {"type": "exit", "exit_code": 2}}]},
            {"type": "local_shell_call", "id": "lsc_1", "call_id": "c3", "status": "completed",
             "action": {"type": "exec", "command": ["ls"], "env": {}}},
            {"type": "local_shell_call_output", "id": "c3", "output": "a b"},
            {"type": "tool_search_call", "call_id": "c4", "execution": "client", "arguments": {"query": "deploy"}},
            {"type": "tool_search_output", "call_id": "c4", "execution": "client", "tools": [{"type": "function", "name": "deploy"}]},
            {"type": "program", "id": "pr_1", "call_id": "c5", "code": "x = 1", "fingerprint": "fp"},
            {"type": "program_output", "call_id": "c5", "result": "1", "status": "completed"},
            {"type": "custom_tool_call", "call_id": "c6", "name": "exec", "input": "ls",
             "caller": {"type": "program", "caller_id": "c5"}},
            {"type": "custom_tool_call_output", "call_id": "c6", "output": [{"type": "input_text", "text": "a"}]}
        ]);
        let body = json!({ "input": items });
        let conv = read(&body).unwrap();
        assert_eq!(write(&conv), body);
        let pairs: Vec<(String, String)> = conv
            .messages
            .iter()
            .flat_map(|m| {
                m.tool_uses()
                    .map(|t| ("call".to_string(), t.id.clone()))
                    .chain(
                        m.tool_results()
                            .map(|r| ("output".to_string(), r.tool_use_id.clone())),
                    )
                    .collect::<Vec<_>>()
            })
            .collect();
        let want: Vec<(String, String)> = (1..=6)
            .flat_map(|k| {
                [
                    ("call".to_string(), format!("c{k}")),
                    ("output".to_string(), format!("c{k}")),
                ]
            })
            .collect();
        assert_eq!(pairs, want);
        // Failure fields are the typed outcome (B1.2).
        let outcomes: Vec<Outcome> = conv
            .messages
            .iter()
            .flat_map(|m| m.tool_results().map(|r| r.outcome))
            .collect();
        use Outcome::*;
        assert_eq!(
            outcomes,
            vec![Error, Error, Unknown, Unknown, Unknown, Unknown]
        );
        assert_eq!(
            crate::guard::validate(
                &conv,
                crate::format::Format::OpenAiResponses,
                Default::default()
            ),
            vec![]
        );
    }
}
