//! Google Gemini `generateContent` request bodies (also `streamGenerateContent`, `countTokens`).
//!
//! Shape (Gemini API reference, `models.generateContent`; ../shared/PROVIDER_RULES.md §D):
//! `{"contents": [{"role": "user"|"model", "parts": [part]}], "systemInstruction"?: {"parts":
//! [...]}, "tools"?: [{"functionDeclarations": [...]}], "generationConfig"?, ...}` or a bare array
//! of contents. A part holds one datum (`text`, `inlineData`, `fileData`, `functionCall {name,
//! args?, id?}`, `functionResponse {name, response, id?}`, ...) plus metadata beside it
//! (`thought`, `thoughtSignature`).
//!
//! Mapping onto the neutral model, one message per content:
//! - role `model` is [`Role::Assistant`] (written back as `model`), `user` is [`Role::User`]; a
//!   content without a role (AI Studio reads it as the user's) is `Role::Other("")` and written
//!   back without one; any other role is `Role::Other`, opaque to the guard.
//! - a text part is a [`Block::Text`] (its other keys in the text's `extra`); a thought part
//!   (`thought: true`) or a text part that carries a `thoughtSignature` is a
//!   [`Block::Thinking`], kept byte for byte or dropped, never edited (D3, D4).
//! - a `functionCall` part is a [`ToolUse`]: `id` the call's id or, when the wire has none, one
//!   made from its position ([`SYNTHETIC_ID_PREFIX`]); `input` the `args` object; `extra` the
//!   part's other keys (`thoughtSignature` verbatim) and, under `functionCall`, the call object
//!   as read with `args` left out (its key order and which keys it had).
//! - a `functionResponse` part is a [`ToolResult`] answering the call of the same id, or without
//!   ids the call at the same position of the model turn before (D1); its content is the text of
//!   `response.error` or `response.output` when that is a string, else the compact JSON of
//!   `response`; `is_error` is `Some(true)` for a `response.error` (Gemini CLI's failure shape)
//!   and `Some(false)` for an `output`; `extra.functionResponse` is the response object as read
//!   with that text replaced by [`TEXT_SLOT`].
//! - every other part (`inlineData`, `fileData`, `executableCode`, a kind newer than this code)
//!   is a [`Block::Other`], which the rule table does not know: its unit is kept whole.
//!
//! Writing reverses the mapping; an untouched body is written back equal as JSON. A call the
//! compaction made (no `functionCall` record in its `extra`) that opens its model turn gets the
//! documented [`SKIP_SIGNATURE`] (D5).

use super::{FormatError, as_object, json_kind};
use crate::conversation::{
    Block, ContentForm, Conversation, Message, Object, Outcome, Role, Text, ToolInput, ToolResult,
    ToolResultContent, ToolUse,
};
use crate::outcome::OutcomePolicy;
use foldhash::{HashMap, HashMapExt};
use serde_json::Value;

/// The key of the message list in a request body.
pub const CONTENTS: &str = "contents";
/// The key of the system instruction in a request body ([`Conversation::system`]).
pub const SYSTEM: &str = "systemInstruction";
/// The documented value of a `thoughtSignature` for a call the model did not sign (history a
/// client built itself): "skip_thought_signature_validator" (ai.google.dev thought-signatures
/// FAQ; ../shared/PROVIDER_RULES.md D5).
pub const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";
/// The prefix of the ids made for calls and responses the wire gives none: `gemini:<content>:<part>`.
pub const SYNTHETIC_ID_PREFIX: &str = "gemini:";
/// What stands for the result text inside the `functionResponse` record of a result's
/// `extra`; the writer puts the (possibly shortened) text back there.
pub const TEXT_SLOT: &str = "\u{0}compactor:text";
/// The record of a call's wire object in its `extra`.
const CALL_KEY: &str = "functionCall";
/// The record of a response's wire object in its `extra`.
const RESPONSE_KEY: &str = "functionResponse";
/// The key of a part's signature (D3).
const SIGNATURE: &str = "thoughtSignature";

/// Reads a Gemini request body or a bare array of contents.
///
/// # Errors
/// [`FormatError::Shape`] with the JSON path (`contents[3].parts[1].functionCall.name`) of the
/// first element that is not what the API documents: a content that is not an object, `parts`
/// that is not an array, a role that is not a string, a `functionCall` without a string `name`
/// or with `args` that is not an object, a `functionResponse` without a `name` or an object
/// `response`.
pub fn read(body: &Value) -> Result<Conversation, FormatError> {
    let (system, items, extra, bare) = super::split_body(body, super::Format::Gemini)?;
    let mut messages: Vec<Message> = Vec::with_capacity(items.len());
    for (i, c) in items.iter().enumerate() {
        let prev = messages.last();
        let m = read_content(c, &format!("{CONTENTS}[{i}]"), i, prev)?;
        messages.push(m);
    }
    Ok(Conversation {
        system,
        messages,
        extra,
        bare,
    })
}

/// Reads one content (`{"role", "parts"}`) at index `i`; `prev` is the message before it (its
/// calls name the responses that carry no id). `path` names it in errors.
pub(crate) fn read_content(
    value: &Value,
    path: &str,
    i: usize,
    prev: Option<&Message>,
) -> Result<Message, FormatError> {
    let obj = as_object(value, path)?;
    let role = match obj.get("role") {
        None => Role::Other("".into()),
        Some(Value::String(r)) if r == "model" => Role::Assistant,
        Some(Value::String(r)) if r == "user" => Role::User,
        // "assistant" would read back as "model": kept as an other role, opaque.
        Some(Value::String(r)) => Role::Other(r.as_str().into()),
        Some(other) => {
            return Err(FormatError::shape(
                format!("{path}.role"),
                format!("expected a string, found {}", json_kind(other)),
            ));
        }
    };
    let (content, form) = match obj.get("parts") {
        None => (Vec::new(), ContentForm::Absent),
        Some(Value::Array(parts)) => {
            let calls: Vec<&ToolUse> = prev.map(|p| p.tool_uses().collect()).unwrap_or_default();
            let mut blocks = Vec::with_capacity(parts.len());
            let mut k = 0;
            for (j, p) in parts.iter().enumerate() {
                let at = format!("{path}.parts[{j}]");
                let b = read_part(p, &at, i, j, &calls, &mut k)?;
                blocks.push(b);
            }
            (blocks, ContentForm::Blocks)
        }
        Some(other) => {
            return Err(FormatError::shape(
                format!("{path}.parts"),
                format!("expected an array of parts, found {}", json_kind(other)),
            ));
        }
    };
    // A role written after the parts (as `@google/genai` writes it) stays in `extra`, in its
    // place, so the content is written back in its own key order.
    let role_after = obj.keys().position(|k| k == "role") > obj.keys().position(|k| k == "parts");
    let extra = obj
        .iter()
        .filter(|(k, _)| *k != "parts" && (*k != "role" || role_after))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Ok(Message {
        role,
        content,
        extra,
        form,
    })
}

/// Reads part `j` of content `i`. `calls` are the calls of the content before; `k` counts the
/// responses read so far in this content (the position that pairs a response without id).
fn read_part(
    value: &Value,
    path: &str,
    i: usize,
    j: usize,
    calls: &[&ToolUse],
    k: &mut usize,
) -> Result<Block, FormatError> {
    let obj = as_object(value, path)?;
    if let Some(fc) = obj.get(CALL_KEY) {
        return read_call(obj, fc, &format!("{path}.{CALL_KEY}"), i, j);
    }
    if let Some(fr) = obj.get(RESPONSE_KEY) {
        let r = read_response(obj, fr, &format!("{path}.{RESPONSE_KEY}"), i, j, calls, *k)?;
        *k += 1;
        return Ok(r);
    }
    if let Some(text) = obj.get("text") {
        let Value::String(s) = text else {
            return Err(FormatError::shape(
                format!("{path}.text"),
                format!("expected a string, found {}", json_kind(text)),
            ));
        };
        let thought = obj.get("thought").is_some_and(|t| t != &Value::Bool(false));
        if thought || obj.contains_key(SIGNATURE) {
            return Ok(Block::Thinking(value.clone()));
        }
        return Ok(Block::Text(Text {
            text: s.clone(),
            extra: super::without(obj, &["text"]),
        }));
    }
    // A part with only a signature (Gemini 3 streams such parts) is signed reasoning.
    if obj.contains_key(SIGNATURE) && obj.keys().all(|k| k == SIGNATURE || k == "thought") {
        return Ok(Block::Thinking(value.clone()));
    }
    Ok(Block::Other(value.clone()))
}

fn read_call(
    part: &Object,
    fc: &Value,
    path: &str,
    i: usize,
    j: usize,
) -> Result<Block, FormatError> {
    let obj = as_object(fc, path)?;
    let name = super::req_str(obj, "name", path)?;
    let input = match obj.get("args") {
        None => Value::Object(Object::new()),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(other) => {
            return Err(FormatError::shape(
                format!("{path}.args"),
                format!("expected an object, found {}", json_kind(other)),
            ));
        }
    };
    let id = match obj.get("id") {
        None => format!("{SYNTHETIC_ID_PREFIX}{i}:{j}"),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(FormatError::shape(
                format!("{path}.id"),
                format!("expected a string, found {}", json_kind(other)),
            ));
        }
    };
    // The call object as read, without its arguments (they are the input).
    let record: Object = obj
        .iter()
        .map(|(k, v)| {
            let v = if k == "args" { Value::Null } else { v.clone() };
            (k.clone(), v)
        })
        .collect();
    let mut extra = Object::new();
    for (k, v) in part {
        if k == CALL_KEY {
            extra.insert(k.clone(), Value::Object(record.clone()));
        } else {
            extra.insert(k.clone(), v.clone());
        }
    }
    Ok(Block::ToolUse(ToolUse {
        id,
        name,
        input: ToolInput::Json(input),
        extra,
    }))
}

fn read_response(
    part: &Object,
    fr: &Value,
    path: &str,
    i: usize,
    j: usize,
    calls: &[&ToolUse],
    k: usize,
) -> Result<Block, FormatError> {
    let obj = as_object(fr, path)?;
    super::req_str(obj, "name", path)?;
    let response = match obj.get("response") {
        Some(Value::Object(r)) => r,
        Some(other) => {
            return Err(FormatError::shape(
                format!("{path}.response"),
                format!("expected an object, found {}", json_kind(other)),
            ));
        }
        None => return Err(FormatError::shape(path, "missing \"response\"")),
    };
    let id = match obj.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(FormatError::shape(
                format!("{path}.id"),
                format!("expected a string, found {}", json_kind(other)),
            ));
        }
        // D1: without ids the k-th response answers the k-th call of the turn before.
        None => calls
            .get(k)
            .map(|c| c.id.clone())
            .unwrap_or_else(|| format!("{SYNTHETIC_ID_PREFIX}{i}:{j}")),
    };
    let failed = response.get("error").is_some_and(|e| !e.is_null());
    let slot = if response.get("error").is_some_and(Value::is_string) {
        Some("error")
    } else if !failed && response.get("output").is_some_and(Value::is_string) {
        Some("output")
    } else {
        None
    };
    let (text, shape) = match slot {
        Some(key) => {
            let text = response
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let mut shape = response.clone();
            shape.insert(key.into(), Value::String(TEXT_SLOT.into()));
            (text, Value::Object(shape))
        }
        None => (
            Value::Object(response.clone()).to_string(),
            Value::String(TEXT_SLOT.into()),
        ),
    };
    let record: Object = obj
        .iter()
        .map(|(k, v)| {
            let v = if k == "response" {
                shape.clone()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect();
    let mut extra = Object::new();
    for (k, v) in part {
        if k == RESPONSE_KEY {
            extra.insert(k.clone(), Value::Object(record.clone()));
        } else {
            extra.insert(k.clone(), v.clone());
        }
    }
    let r = ToolResult {
        tool_use_id: id,
        content: Some(ToolResultContent::Text(text)),
        is_error: Some(failed),
        extra,
        outcome: Outcome::Unknown,
        rewritten: None,
    };
    Ok(Block::ToolResult(OutcomePolicy::Anthropic.apply(r)))
}

/// Writes a conversation as a Gemini request body (or a bare array of contents).
pub fn write(conversation: &Conversation) -> Value {
    let names = call_names(&conversation.messages);
    let items = conversation
        .messages
        .iter()
        .map(|m| write_content(m, &names))
        .collect();
    super::join_body(conversation, super::Format::Gemini, items)
}

/// Every call's function name by its id: what a response the compaction made names.
pub(crate) fn call_names(messages: &[Message]) -> HashMap<String, String> {
    let mut names = HashMap::new();
    for m in messages {
        for t in m.tool_uses() {
            names.insert(t.id.clone(), t.name.clone());
        }
    }
    names
}

/// Writes one content; `names` gives each call id its function name.
pub(crate) fn write_content(m: &Message, names: &HashMap<String, String>) -> Value {
    let mut obj = Object::new();
    let role: Option<Value> = match &m.role {
        Role::Other(r) if r.is_empty() => None,
        Role::Assistant => Some("model".into()),
        other => Some(other.as_str().into()),
    };
    // Role first, unless the content had it after its parts (then it is in `extra`).
    let role_after = m.extra.contains_key("role");
    if let (Some(r), false) = (&role, role_after) {
        obj.insert("role".into(), r.clone());
    }
    if m.form != ContentForm::Absent || !m.content.is_empty() {
        let mut first_call = true;
        let parts = m
            .content
            .iter()
            .map(|b| {
                let is_call = matches!(b, Block::ToolUse(_));
                let v = write_part(b, names, first_call && is_call);
                if is_call {
                    first_call = false;
                }
                v
            })
            .collect();
        obj.insert("parts".into(), Value::Array(parts));
    }
    for (k, v) in &m.extra {
        match (k.as_str(), &role) {
            ("role", Some(r)) => obj.insert(k.clone(), r.clone()),
            ("role", None) => None,
            _ => obj.insert(k.clone(), v.clone()),
        };
    }
    Value::Object(obj)
}

/// Writes one part. `opens` is set for the first call of its model turn: a call the compaction
/// made gets the skip signature there (D4: parallel calls sign the first only; D5).
fn write_part(b: &Block, names: &HashMap<String, String>, opens: bool) -> Value {
    match b {
        Block::Text(t) => {
            let mut obj = Object::new();
            obj.insert("text".into(), Value::String(t.text.clone()));
            for (k, v) in &t.extra {
                obj.insert(k.clone(), v.clone());
            }
            Value::Object(obj)
        }
        Block::ToolUse(t) => write_call(t, opens),
        Block::ToolResult(r) => write_response(r, names),
        Block::Thinking(v) | Block::Image(v) | Block::Document(v) | Block::Other(v) => v.clone(),
    }
}

fn write_call(t: &ToolUse, opens: bool) -> Value {
    let args = t.input.to_value();
    let mut fc = Object::new();
    match t.extra.get(CALL_KEY) {
        Some(Value::Object(record)) => {
            for (k, v) in record {
                let v = match k.as_str() {
                    "name" => Value::String(t.name.clone()),
                    "id" => Value::String(t.id.clone()),
                    "args" => args.clone(),
                    _ => v.clone(),
                };
                fc.insert(k.clone(), v);
            }
            // Arguments the wire left out stay out while they are empty.
            if !fc.contains_key("args") && args.as_object().is_none_or(|a| !a.is_empty()) {
                fc.insert("args".into(), args);
            }
        }
        _ => {
            fc.insert("name".into(), Value::String(t.name.clone()));
            fc.insert("args".into(), args);
            if !t.id.starts_with(SYNTHETIC_ID_PREFIX) {
                fc.insert("id".into(), Value::String(t.id.clone()));
            }
        }
    }
    let mut part = Object::new();
    let mut placed = false;
    for (k, v) in &t.extra {
        if k == CALL_KEY {
            part.insert(k.clone(), Value::Object(fc.clone()));
            placed = true;
        } else {
            part.insert(k.clone(), v.clone());
        }
    }
    if !placed {
        part.insert(CALL_KEY.into(), Value::Object(fc));
        if opens && !part.contains_key(SIGNATURE) {
            part.insert(SIGNATURE.into(), Value::String(SKIP_SIGNATURE.into()));
        }
    }
    Value::Object(part)
}

fn write_response(r: &ToolResult, names: &HashMap<String, String>) -> Value {
    let text = r.text();
    let fill = |shape: &Value| -> Value {
        match shape {
            Value::String(s) if s == TEXT_SLOT => match serde_json::from_str::<Value>(&text) {
                Ok(v @ Value::Object(_)) => v,
                _ => serde_json::json!({ "output": text }),
            },
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| {
                        let v = match v {
                            Value::String(s) if s == TEXT_SLOT => Value::String(text.clone()),
                            other => other.clone(),
                        };
                        (k.clone(), v)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    };
    let mut fr = Object::new();
    match r.extra.get(RESPONSE_KEY) {
        Some(Value::Object(record)) => {
            for (k, v) in record {
                let v = if k == "response" { fill(v) } else { v.clone() };
                fr.insert(k.clone(), v);
            }
        }
        _ => {
            let name = names.get(&r.tool_use_id).cloned().unwrap_or_default();
            fr.insert("name".into(), Value::String(name));
            let key = if r.outcome == Outcome::Error || r.is_error == Some(true) {
                "error"
            } else {
                "output"
            };
            let mut resp = Object::new();
            resp.insert(key.into(), Value::String(text.clone()));
            fr.insert("response".into(), Value::Object(resp));
            if !r.tool_use_id.starts_with(SYNTHETIC_ID_PREFIX) {
                fr.insert("id".into(), Value::String(r.tool_use_id.clone()));
            }
        }
    }
    let mut part = Object::new();
    let mut placed = false;
    for (k, v) in &r.extra {
        if k == RESPONSE_KEY {
            part.insert(k.clone(), Value::Object(fr.clone()));
            placed = true;
        } else {
            part.insert(k.clone(), v.clone());
        }
    }
    if !placed {
        part.insert(RESPONSE_KEY.into(), Value::Object(fr));
    }
    Value::Object(part)
}

/// Whether `body` looks like a Gemini request: an object whose `contents` is an array of objects
/// each with `parts` (or `role` `user` / `model`), and no `messages` or `input` key.
pub fn looks_like(body: &Value) -> bool {
    let Some(obj) = body.as_object() else {
        return false;
    };
    if obj.contains_key("messages") || obj.contains_key("input") {
        return false;
    }
    match obj.get(CONTENTS) {
        Some(Value::Array(items)) => items.iter().all(|c| {
            c.get("parts").is_some_and(Value::is_array)
                || matches!(
                    c.get("role").and_then(Value::as_str),
                    Some("user" | "model")
                )
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body() -> Value {
        json!({
            "contents": [
                {"role": "user", "parts": [{"text": "<session_context>cwd</session_context>"}, {"text": "fix it"}]},
                {"role": "model", "parts": [
                    {"text": "thinking", "thought": true},
                    {"functionCall": {"id": "a", "args": {"p": 1.50}, "name": "read_file"}, "thoughtSignature": "c2ln"},
                    {"functionCall": {"name": "ls"}}
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "read_file", "response": {"output": "x"}, "id": "a"}},
                    {"functionResponse": {"name": "ls", "response": {"error": "no such dir", "code": 2}}}
                ]},
                {"parts": [{"inlineData": {"mimeType": "image/png", "data": "AA=="}}], "x": 1},
                {"role": "model", "parts": [{"text": "done", "thoughtSignature": "AB"}]}
            ],
            "systemInstruction": {"role": "user", "parts": [{"text": "You are an agent."}]},
            "tools": [{"functionDeclarations": [{"name": "read_file"}]}],
            "generationConfig": {"temperature": 0.70}
        })
    }

    #[test]
    fn a_body_reads_and_writes_back_equal() {
        let b = body();
        let c = read(&b).unwrap();
        assert_eq!(write(&c), b);
    }

    #[test]
    fn a_role_after_the_parts_stays_after_them() {
        let b = json!({"contents": [{"parts": [{"text": "hi"}], "role": "user"}]});
        let c = read(&b).unwrap();
        assert_eq!(c.messages[0].role, Role::User);
        assert_eq!(
            serde_json::to_string(&write(&c)).unwrap(),
            r#"{"contents":[{"parts":[{"text":"hi"}],"role":"user"}]}"#
        );
        assert_eq!(
            String::from_utf8(crate::format::emit::write_bytes(
                crate::format::Format::Gemini,
                &c
            ))
            .unwrap(),
            r#"{"contents":[{"parts":[{"text":"hi"}],"role":"user"}]}"#
        );
    }

    #[test]
    fn calls_and_responses_pair_by_id_or_by_position() {
        let c = read(&body()).unwrap();
        let calls: Vec<&str> = c.messages[1].tool_uses().map(|t| t.id.as_str()).collect();
        assert_eq!(calls, ["a", "gemini:1:2"]);
        let answers: Vec<&str> = c.messages[2]
            .tool_results()
            .map(|r| r.tool_use_id.as_str())
            .collect();
        assert_eq!(answers, ["a", "gemini:1:2"]);
        let outcomes: Vec<Outcome> = c.messages[2].tool_results().map(|r| r.outcome).collect();
        assert_eq!(outcomes, [Outcome::Success, Outcome::Error]);
        assert_eq!(
            c.messages[2].tool_results().nth(1).unwrap().text(),
            "no such dir"
        );
        assert!(matches!(c.messages[1].content[0], Block::Thinking(_)));
        assert!(matches!(c.messages[4].content[0], Block::Thinking(_)));
    }

    #[test]
    fn a_shortened_result_goes_back_where_its_text_was() {
        let mut c = read(&body()).unwrap();
        if let Block::ToolResult(r) = &mut c.messages[2].content[1] {
            r.content = Some(ToolResultContent::Text("cut".into()));
        }
        let out = write(&c);
        assert_eq!(
            out["contents"][2]["parts"][1],
            json!({"functionResponse": {"name": "ls", "response": {"error": "cut", "code": 2}}})
        );
    }

    #[test]
    fn a_call_the_compaction_made_gets_the_skip_signature_on_the_first_call() {
        let m = Message::new(
            Role::Assistant,
            vec![
                Block::ToolUse(ToolUse {
                    id: "r1".into(),
                    name: "recall".into(),
                    input: ToolInput::Json(json!({})),
                    extra: Object::new(),
                }),
                Block::ToolUse(ToolUse {
                    id: "r2".into(),
                    name: "recall".into(),
                    input: ToolInput::Json(json!({})),
                    extra: Object::new(),
                }),
            ],
        );
        let v = write_content(&m, &HashMap::new());
        assert_eq!(v["parts"][0]["thoughtSignature"], SKIP_SIGNATURE);
        assert!(v["parts"][1].get("thoughtSignature").is_none());
        assert_eq!(v["role"], "model");
    }

    #[test]
    fn bad_parts_are_refused_where_they_are() {
        let bad =
            json!({"contents": [{"role": "model", "parts": [{"functionCall": {"args": {}}}]}]});
        let e = read(&bad).unwrap_err().to_string();
        assert!(e.starts_with("contents[0].parts[0].functionCall"), "{e}");
        let bad = json!({"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "f", "response": "x"}}]}]});
        let e = read(&bad).unwrap_err().to_string();
        assert!(
            e.starts_with("contents[0].parts[0].functionResponse.response"),
            "{e}"
        );
        let bad = json!({"contents": [{"role": "user", "parts": {"text": "x"}}]});
        assert!(
            read(&bad)
                .unwrap_err()
                .to_string()
                .starts_with("contents[0].parts")
        );
    }

    #[test]
    fn detection_needs_contents_of_parts() {
        assert!(looks_like(&body()));
        assert!(!looks_like(&json!({"messages": [], "contents": []})));
        assert!(!looks_like(&json!({"contents": [{"text": "x"}]})));
    }
}
