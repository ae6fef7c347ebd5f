//! Provider rules: is this conversation a request the provider accepts?

use super::units::Units;
use super::violation::{Violation, ViolationKind, path_of};
use crate::conversation::{Block, ContentForm, Conversation, Role, ToolInput};
use crate::format::Format;
use std::collections::{HashMap, HashSet};

/// Options of [`validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidateOptions {
    /// Accept a history that ends with calls still waiting for their results (an agent
    /// mid-turn). On by default; off for a request that is about to be sent as is.
    pub allow_open_tail: bool,
}

impl Default for ValidateOptions {
    fn default() -> Self {
        ValidateOptions {
            allow_open_tail: true,
        }
    }
}

/// Checks a conversation against the pairing invariants and the rules of `format`, and returns
/// every violation found, in message order. An empty list means the provider accepts it.
///
/// Pairing (all formats): call ids unique; each result answers an earlier call; no call answered
/// twice; no call left unanswered except in the open last exchange (when allowed).
/// Anthropic (Messages API, tool use docs): roles user/assistant only, first message user,
/// each tool_use answered by tool_result blocks in the very next (user) message, tool_result
/// blocks first in it, tool_use input an object, no empty text, thinking only in assistant turns.
/// OpenAI Chat: the tool messages answering an assistant's tool_calls follow it directly, one
/// per id; `arguments` is a JSON object string; `content` is null or missing only on an assistant
/// message with tool_calls (or a function_call, refusal or audio). OpenAI Responses: each
/// function_call_output follows its function_call; `arguments` is a JSON object string.
pub fn validate(
    conversation: &Conversation,
    format: Format,
    options: ValidateOptions,
) -> Vec<Violation> {
    let mut v = Checker {
        conv: conversation,
        format,
        out: Vec::new(),
    };
    let units = Units::of(conversation);
    if conversation.messages.is_empty() {
        v.push(None, None, ViolationKind::NoMessages);
        return v.out;
    }
    v.unique_calls();
    match format {
        Format::Anthropic => v.anthropic(&units, options),
        Format::OpenAiChat => v.chat(options),
        Format::OpenAiResponses => v.responses(&units, options),
    }
    v.out.sort_by_key(|x| (x.message, x.block));
    v.out
}

struct Checker<'a> {
    conv: &'a Conversation,
    format: Format,
    out: Vec<Violation>,
}

impl Checker<'_> {
    fn push(&mut self, message: Option<usize>, block: Option<usize>, kind: ViolationKind) {
        let path = match message {
            Some(i) => path_of(self.format, self.conv, i, block),
            None => self.format.messages_key().to_string(),
        };
        self.out.push(Violation {
            path,
            message,
            block,
            kind,
        });
    }

    fn unique_calls(&mut self) {
        let mut seen = HashSet::new();
        let mut dups = Vec::new();
        for (i, j, b) in self.conv.blocks() {
            if let Block::ToolUse(t) = b
                && !seen.insert(t.id.as_str())
            {
                dups.push((i, j, t.id.clone()));
            }
        }
        for (i, j, id) in dups {
            self.push(Some(i), Some(j), ViolationKind::DuplicateCall { id });
        }
    }

    fn anthropic(&mut self, units: &Units, options: ValidateOptions) {
        let msgs = &self.conv.messages;
        let n = msgs.len();
        if msgs[0].role != Role::User {
            self.push(
                Some(0),
                None,
                ViolationKind::FirstNotUser { role: msgs[0].role },
            );
        }
        let mut answered: HashSet<&str> = HashSet::new();
        for (i, m) in msgs.iter().enumerate() {
            let last = i + 1 == n;
            if !matches!(m.role, Role::User | Role::Assistant) {
                self.push(
                    Some(i),
                    None,
                    ViolationKind::RoleNotAllowed { role: m.role },
                );
            }
            // Only the final assistant message may be empty ("" or [], a prefill); `content`
            // itself is required (a string or an array) on every message.
            let lenient = last && m.role == Role::Assistant;
            let missing = matches!(m.form, ContentForm::Null | ContentForm::Absent);
            if m.content.is_empty() && (missing || !lenient) {
                self.push(Some(i), None, ViolationKind::EmptyContent);
            }
            let prev_calls: Vec<&str> = match i.checked_sub(1).map(|p| &msgs[p]) {
                Some(p) if p.role == Role::Assistant => {
                    p.tool_uses().map(|t| t.id.as_str()).collect()
                }
                _ => Vec::new(),
            };
            let mut other_before = false;
            let mut here: HashSet<&str> = HashSet::new();
            for (j, b) in m.content.iter().enumerate() {
                match b {
                    Block::Text(t) if t.text.trim().is_empty() && !lenient => {
                        self.push(Some(i), Some(j), ViolationKind::EmptyText);
                    }
                    Block::ToolUse(t) => {
                        if m.role != Role::Assistant {
                            self.push(
                                Some(i),
                                Some(j),
                                ViolationKind::BlockNotAllowed {
                                    block: "tool_use".into(),
                                    role: m.role,
                                },
                            );
                        }
                        if !matches!(&t.input, ToolInput::Json(serde_json::Value::Object(_))) {
                            self.push(
                                Some(i),
                                Some(j),
                                ViolationKind::InputNotObject { id: t.id.clone() },
                            );
                        }
                    }
                    Block::ToolResult(r) => {
                        let id = r.tool_use_id.as_str();
                        if m.role != Role::User {
                            self.push(
                                Some(i),
                                Some(j),
                                ViolationKind::BlockNotAllowed {
                                    block: "tool_result".into(),
                                    role: m.role,
                                },
                            );
                        } else if here.contains(id) || answered.contains(id) {
                            self.push(
                                Some(i),
                                Some(j),
                                ViolationKind::DuplicateResult { id: id.into() },
                            );
                        } else if !prev_calls.contains(&id) {
                            self.push(
                                Some(i),
                                Some(j),
                                ViolationKind::OrphanResult {
                                    id: id.into(),
                                    expected: "in the previous message",
                                },
                            );
                        }
                        if other_before {
                            self.push(
                                Some(i),
                                Some(j),
                                ViolationKind::ResultNotFirst { id: id.into() },
                            );
                        }
                        here.insert(id);
                    }
                    Block::Thinking(_) if m.role != Role::Assistant => {
                        self.push(
                            Some(i),
                            Some(j),
                            ViolationKind::BlockNotAllowed {
                                block: b.kind().into(),
                                role: m.role,
                            },
                        );
                    }
                    _ => {}
                }
                if !matches!(b, Block::ToolResult(_)) {
                    other_before = true;
                }
            }
            answered.extend(here);
            if m.role == Role::Assistant && m.has_tool_uses() {
                let calls: Vec<&str> = m.tool_uses().map(|t| t.id.as_str()).collect();
                match msgs.get(i + 1) {
                    None => {
                        let open = units.exchanges.last().is_some_and(|e| e.open);
                        if !(options.allow_open_tail && open) {
                            let ids = calls.iter().map(|s| s.to_string()).collect();
                            self.push(
                                Some(i),
                                None,
                                ViolationKind::MissingResults {
                                    ids,
                                    expected: "(the history ends)",
                                },
                            );
                        }
                    }
                    Some(next) => {
                        let got: HashSet<&str> = if next.role == Role::User {
                            next.tool_results()
                                .map(|r| r.tool_use_id.as_str())
                                .collect()
                        } else {
                            HashSet::new()
                        };
                        let missing: Vec<String> = calls
                            .iter()
                            .filter(|c| !got.contains(*c))
                            .map(|s| s.to_string())
                            .collect();
                        if !missing.is_empty() {
                            self.push(
                                Some(i),
                                None,
                                ViolationKind::MissingResults {
                                    ids: missing,
                                    expected: "in the next message",
                                },
                            );
                        }
                    }
                }
            }
        }
    }

    fn chat(&mut self, options: ValidateOptions) {
        let msgs = &self.conv.messages;
        let mut pending: Vec<(String, usize)> = Vec::new();
        let mut answered: HashSet<String> = HashSet::new();
        for (i, m) in msgs.iter().enumerate() {
            if m.role != Role::Tool && !pending.is_empty() {
                let ids = pending.drain(..).map(|(id, _)| id).collect();
                self.push(
                    Some(i),
                    None,
                    ViolationKind::MissingResults {
                        ids,
                        expected: "before this message",
                    },
                );
            }
            let has_calls = m.content.iter().any(|b| matches!(b, Block::ToolUse(_)));
            if !has_calls && matches!(m.form, ContentForm::Null | ContentForm::Absent) {
                // Chat Completions API reference: an assistant message's `content` is required
                // unless it carries `tool_calls` or `function_call`; a refusal or audio reply
                // (as the API returns them) is taken as content too. Every other role needs it.
                let stands_in = ["function_call", "refusal", "audio"]
                    .iter()
                    .any(|k| m.extra.get(*k).is_some_and(|v| !v.is_null()));
                if !(m.role == Role::Assistant && stands_in) {
                    self.push(Some(i), None, ViolationKind::EmptyContent);
                }
            }
            match m.role {
                Role::Assistant => {
                    for (j, b) in m.content.iter().enumerate() {
                        if let Block::ToolUse(t) = b {
                            pending.push((t.id.clone(), i));
                            self.arguments_json(i, j, &t.id, &t.input);
                        }
                    }
                }
                Role::Tool => {
                    for r in m.tool_results() {
                        let id = r.tool_use_id.clone();
                        if answered.contains(&id) {
                            self.push(Some(i), None, ViolationKind::DuplicateResult { id });
                        } else if let Some(pos) = pending.iter().position(|(p, _)| *p == id) {
                            pending.remove(pos);
                            answered.insert(id);
                        } else {
                            self.push(
                                Some(i),
                                None,
                                ViolationKind::OrphanResult {
                                    id,
                                    expected: "in a directly preceding assistant tool_calls",
                                },
                            );
                        }
                    }
                }
                _ => {}
            }
        }
        if !pending.is_empty() && !options.allow_open_tail {
            let at = pending[0].1;
            let ids = pending.into_iter().map(|(id, _)| id).collect();
            self.push(
                Some(at),
                None,
                ViolationKind::MissingResults {
                    ids,
                    expected: "(the history ends)",
                },
            );
        }
    }

    fn responses(&mut self, units: &Units, options: ValidateOptions) {
        let msgs = &self.conv.messages;
        let mut calls: HashMap<&str, usize> = HashMap::new();
        let mut outputs: HashSet<&str> = HashSet::new();
        for (i, m) in msgs.iter().enumerate() {
            for (j, b) in m.content.iter().enumerate() {
                match b {
                    Block::ToolUse(t) => {
                        calls.entry(t.id.as_str()).or_insert(i);
                        self.arguments_json(i, j, &t.id, &t.input);
                    }
                    Block::ToolResult(r) => {
                        let id = r.tool_use_id.as_str();
                        if !calls.contains_key(id) {
                            self.push(
                                Some(i),
                                None,
                                ViolationKind::OrphanResult {
                                    id: id.into(),
                                    expected: "earlier in the input",
                                },
                            );
                        } else if !outputs.insert(id) {
                            self.push(
                                Some(i),
                                None,
                                ViolationKind::DuplicateResult { id: id.into() },
                            );
                        }
                    }
                    _ => {}
                }
            }
        }
        let open_start = units.exchanges.last().filter(|e| e.open).map(|e| e.start);
        let mut missing: Vec<(&str, usize)> = calls
            .iter()
            .filter(|(id, _)| !outputs.contains(*id))
            .map(|(id, i)| (*id, *i))
            .collect();
        missing.sort_by_key(|&(_, i)| i);
        for (id, i) in missing {
            let in_open_tail = open_start.is_some_and(|s| i >= s);
            if !(options.allow_open_tail && in_open_tail) {
                self.push(
                    Some(i),
                    None,
                    ViolationKind::MissingResults {
                        ids: vec![id.into()],
                        expected: "in the input",
                    },
                );
            }
        }
    }

    fn arguments_json(&mut self, i: usize, j: usize, id: &str, input: &ToolInput) {
        if let ToolInput::Arguments(s) = input {
            let reason = match serde_json::from_str::<serde_json::Value>(s) {
                Ok(serde_json::Value::Object(_)) => return,
                Ok(_) => "not an object".to_string(),
                Err(e) => e.to_string(),
            };
            self.push(
                Some(i),
                Some(j),
                ViolationKind::ArgumentsNotJson {
                    id: id.into(),
                    reason,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chat_violations(messages: &serde_json::Value) -> Vec<(Option<usize>, ViolationKind)> {
        let conv = Format::OpenAiChat
            .read(&json!({ "messages": messages }))
            .expect("readable");
        validate(&conv, Format::OpenAiChat, ValidateOptions::default())
            .into_iter()
            .map(|v| (v.message, v.kind))
            .collect()
    }

    #[test]
    fn chat_assistant_without_content_or_tool_calls_is_refused() {
        let found = chat_violations(&json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null},
            {"role": "user", "content": "again"},
            {"role": "assistant"},
        ]));
        assert_eq!(
            found,
            vec![
                (Some(1), ViolationKind::EmptyContent),
                (Some(3), ViolationKind::EmptyContent)
            ]
        );
    }

    #[test]
    fn a_tool_message_needs_content_and_anthropic_content_is_never_null() {
        let found = chat_violations(&json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": null},
            {"role": "tool", "tool_call_id": "c2"},
        ]));
        assert_eq!(
            found,
            vec![
                (Some(2), ViolationKind::EmptyContent),
                (Some(3), ViolationKind::EmptyContent)
            ]
        );
        for last in [
            json!({"role": "assistant", "content": null}),
            json!({"role": "assistant"}),
        ] {
            let conv = Format::Anthropic
                .read(&json!({"messages": [{"role": "user", "content": "hi"}, last]}))
                .expect("readable");
            let found: Vec<_> = validate(&conv, Format::Anthropic, ValidateOptions::default())
                .into_iter()
                .map(|v| (v.message, v.kind))
                .collect();
            assert_eq!(found, vec![(Some(1), ViolationKind::EmptyContent)]);
        }
        // An empty final assistant message (a prefill) stays allowed.
        let conv = Format::Anthropic
            .read(&json!({"messages": [{"role": "user", "content": "hi"},
                                       {"role": "assistant", "content": []}]}))
            .expect("readable");
        assert_eq!(
            validate(&conv, Format::Anthropic, ValidateOptions::default()),
            vec![]
        );
    }

    #[test]
    fn chat_null_content_is_fine_beside_tool_calls_or_a_refusal_but_not_for_a_user() {
        let found = chat_violations(&json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": null, "refusal": "I can't help with that."},
            {"role": "user", "content": null},
        ]));
        assert_eq!(found, vec![(Some(4), ViolationKind::EmptyContent)]);
    }
}
