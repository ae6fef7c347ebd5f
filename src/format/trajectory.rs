//! mini-swe-agent trajectories (`.traj.json`): `{"messages": [OpenAI Chat messages], "info",
//! "trajectory_format", ...}`.
//!
//! The messages are OpenAI Chat messages as the harness kept them, with fields a real API call
//! would reject, which are stripped before reading:
//! - a final `role: "exit"` message (the harness's own output, e.g. the submitted patch);
//! - message-level `extra` (the raw responses and parsed actions) and `provider_specific_fields`,
//!   and `function_call: null` (litellm echoes the deprecated field);
//! - `index` inside `tool_calls[j]` (a streaming-delta field, not a request field).
//!
//! The model (`info.config.model.model_name`) becomes `Conversation.extra["model"]`; nothing else
//! of the trajectory's top level is a request field.

use super::{FormatError, as_object};
use crate::conversation::Conversation;
use serde_json::{Value, json};

/// True when the value looks like a trajectory object.
pub fn is_trajectory(value: &Value) -> bool {
    value.get("trajectory_format").is_some() && value.get("messages").is_some()
}

/// Imports a trajectory as an OpenAI Chat conversation.
///
/// # Errors
/// [`FormatError`] naming the malformed message (`messages[12].tool_calls[0].function`, ...).
pub fn import(value: &Value) -> Result<Conversation, FormatError> {
    let obj = as_object(value, "$")?;
    let Some(Value::Array(raw)) = obj.get("messages") else {
        return Err(FormatError::shape("messages", "expected an array"));
    };
    let mut messages = raw.clone();
    if messages
        .last()
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str)
        == Some("exit")
    {
        messages.pop();
    }
    for m in &mut messages {
        let Some(m) = m.as_object_mut() else { continue };
        m.remove("extra");
        m.remove("provider_specific_fields");
        if m.get("function_call") == Some(&Value::Null) {
            m.remove("function_call");
        }
        if let Some(Value::Array(calls)) = m.get_mut("tool_calls") {
            for call in calls {
                if let Some(call) = call.as_object_mut() {
                    call.remove("index");
                }
            }
        }
    }
    let model = obj
        .get("info")
        .and_then(|i| i.pointer("/config/model/model_name"))
        .filter(|m| m.is_string());
    let body = match model {
        Some(model) => json!({"model": model, "messages": messages}),
        None => json!({"messages": messages}),
    };
    super::openai_chat::read(&body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;

    #[test]
    fn harness_fields_and_the_exit_message_are_dropped() {
        let traj = json!({
            "trajectory_format": "mini-swe-agent-1.1",
            "info": {"config": {"model": {"model_name": "deepseek/deepseek-chat"}}},
            "messages": [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": "a", "function_call": null, "provider_specific_fields": null,
                 "extra": {"response": {}},
                 "tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok", "extra": {}},
                {"role": "exit", "content": "diff"}
            ]
        });
        let c = import(&traj).unwrap();
        assert_eq!(
            Format::OpenAiChat.write(&c),
            json!({"model": "deepseek/deepseek-chat", "messages": [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": "a",
                 "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                {"role": "tool", "content": "ok", "tool_call_id": "c1"}
            ]})
        );
    }

    #[test]
    fn an_exit_message_in_the_middle_is_kept_as_a_role_of_its_own() {
        let traj = json!({"trajectory_format": "x", "messages": [
            {"role": "user", "content": "u"}, {"role": "exit", "content": "e"}, {"role": "user", "content": "v"}]});
        let conv = import(&traj).unwrap();
        assert_eq!(conv.messages.len(), 3);
        assert_eq!(
            conv.messages[1].role,
            crate::conversation::Role::Other("exit".into())
        );
    }
}
