//! Codex CLI rollout JSONL: one entry per line, `{"timestamp", "type": "session_meta" |
//! "response_item" | "turn_context" | "event_msg", "payload"}`.
//!
//! The `response_item` payloads are the Responses API input items the model saw, in order; each
//! is read with the Responses item reader. `session_meta.payload.instructions`, when present, is
//! the system prompt (`instructions`). The model of the last `turn_context` (`payload.model`,
//! the one the next request goes to) becomes `Conversation.extra["model"]`, so counting and
//! budgets are in its tokens. Otherwise `turn_context` and `event_msg` lines (UI events, token
//! counts, reasoning summaries shown to the user) repeat what the items already hold and are
//! skipped.

use super::openai_responses::read_item;
use super::{FormatError, json_kind};
use crate::conversation::{Conversation, Object};
use serde_json::Value;

/// True when a first JSONL entry looks like a Codex rollout entry.
pub fn is_rollout_entry(entry: &Object) -> bool {
    matches!(
        entry.get("type").and_then(serde_json::Value::as_str),
        Some("session_meta" | "response_item" | "turn_context" | "event_msg")
    ) && entry.contains_key("payload")
}

/// Imports a rollout as an OpenAI Responses conversation.
///
/// # Errors
/// [`FormatError`] naming the line of the first malformed entry: `line 17: not valid JSON: ...`,
/// `line 17: payload.call_id: expected a string, found a number`, ...
pub fn import(text: &str) -> Result<Conversation, FormatError> {
    let mut conversation = Conversation::default();
    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let at = format!("line {line}");
        let value: Value = serde_json::from_str(raw).map_err(|source| FormatError::Json {
            location: at.clone(),
            source,
        })?;
        let Value::Object(entry) = value else {
            return Err(FormatError::shape(
                at,
                format!("expected a JSON object, found {}", json_kind(&value)),
            ));
        };
        let payload = entry.get("payload");
        match entry.get("type").and_then(Value::as_str) {
            Some("response_item") => {
                let payload = payload
                    .ok_or_else(|| FormatError::shape(&at, "response_item has no \"payload\""))?;
                conversation
                    .messages
                    .push(read_item(payload, &format!("{at}: payload"))?);
            }
            Some("session_meta") => {
                if let Some(instructions) = payload
                    .and_then(|p| p.get("instructions"))
                    .filter(|i| !i.is_null())
                {
                    conversation.system = Some(instructions.clone());
                }
            }
            Some("turn_context") => {
                if let Some(m) = payload
                    .and_then(|p| p.get("model"))
                    .filter(|m| m.is_string())
                {
                    conversation.extra.insert("model".into(), m.clone());
                }
            }
            Some(_) => {}
            None => {
                return Err(FormatError::shape(at, "entry has no string \"type\""));
            }
        }
    }
    Ok(conversation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_items_become_the_conversation_instructions_the_system_and_the_turn_model_the_model()
    {
        let log = concat!(
            r#"{"timestamp":"t","type":"session_meta","payload":{"id":"s","instructions":"be brief"}}"#,
            "\n",
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#,
            "\n",
            r#"{"timestamp":"t","type":"event_msg","payload":{"type":"token_count"}}"#,
            "\n",
            r#"{"timestamp":"t","type":"turn_context","payload":{"cwd":"/","model":"gpt-5-codex"}}"#,
            "\n",
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}","call_id":"c1"}}"#,
            "\n",
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"ok"}}"#,
            "\n",
        );
        let c = import(log).unwrap();
        assert_eq!(c.system, Some(Value::String("be brief".into())));
        assert_eq!(c.messages.len(), 3);
        assert_eq!(c.messages[1].tool_uses().count(), 1);
        assert_eq!(
            c.extra.get("model"),
            Some(&Value::String("gpt-5-codex".into()))
        );
    }

    #[test]
    fn a_bad_line_is_named() {
        let log = "{\"type\":\"session_meta\",\"payload\":{}}\n{\"type\":\"response_item\",\"payload\":{\"type\":\"function_call\",\"name\":\"x\",\"arguments\":\"{}\",\"call_id\":7}}\nnot json\n";
        let err = import(log).unwrap_err().to_string();
        assert_eq!(
            err,
            "line 2: payload.call_id: expected a string, found a number"
        );
        let err = import("{\"type\":\"event_msg\",\"payload\":{}}\n{oops\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("line 2: not valid JSON"), "{err}");
    }
}
