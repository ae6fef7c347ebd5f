//! The OpenAI rules of [`validate`](super::validate): Chat (tool messages directly after
//! their assistant `tool_calls`, legacy `function` messages after their `function_call`,
//! `content` null only where the API allows it) and Responses (each output after its call, by
//! `call_id`); in both, `arguments` is a JSON object string.

use super::{Checker, Ids, ValidateOptions};
use crate::conversation::{Block, ContentForm, Conversation, Message, Role, ToolInput};
use crate::guard::violation::ViolationKind;
use crate::rules::BlockKind;
use foldhash::{HashMap, HashMapExt};
use serde_json::Value;

impl<'a> Checker<'a> {
    pub(super) fn chat(&mut self, options: ValidateOptions) {
        use crate::format::openai_chat::{is_legacy_call, is_legacy_result};
        let conv: &'a Conversation = self.conv;
        let mut pending = std::mem::take(&mut self.pending);
        // The legacy function_call of the previous message: only the next message may answer it.
        let mut legacy = self.legacy.take();
        for (i, m) in conv.messages.iter().enumerate().skip(self.from) {
            let legacy_open = legacy.take();
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
                            if is_legacy_call(t) {
                                legacy = Some(t.id.clone());
                            } else {
                                pending.push((t.id.clone(), i));
                            }
                            self.arguments_json(i, j, &t.id, &t.input);
                        }
                    }
                }
                Role::Tool => {
                    for r in m.tool_results() {
                        let id = r.tool_use_id.clone();
                        let key = r.tool_use_id.as_str();
                        if is_legacy_result(r) {
                            if legacy_open.as_deref() != Some(id.as_str()) {
                                self.push(
                                    Some(i),
                                    None,
                                    ViolationKind::OrphanResult {
                                        id: format!(
                                            "of function message {:?}",
                                            m.extra
                                                .get("name")
                                                .and_then(serde_json::Value::as_str)
                                                .unwrap_or("")
                                        ),
                                        expected: "in a directly preceding assistant function_call of the same name",
                                    },
                                );
                            }
                        } else if self.answered.contains(key) {
                            self.push(Some(i), None, ViolationKind::DuplicateResult { id });
                        } else if let Some(pos) = pending.iter().position(|(p, _)| *p == id) {
                            pending.remove(pos);
                            self.answered.insert(key);
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
        self.legacy = legacy;
        self.pending = pending;
        if !self.pending.is_empty() && !options.allow_open_tail {
            let at = self.pending[0].1;
            let ids = self.pending.iter().map(|(id, _)| id.clone()).collect();
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

    pub(super) fn responses(&mut self, options: ValidateOptions) {
        use crate::format::openai_responses::{call_type, output_type};
        let conv: &'a Conversation = self.conv;
        let table = self.format.rules();
        // B4: with the history on the server, outputs before the first call of the input
        // answer calls the server holds (accepted leniently wherever other items stand
        // between them).
        let server = table.server_holds_history(&conv.extra);
        let mut leading = self.from == 0;
        // Calls seen so far, in message order (a result answers an earlier one), with their
        // wire type, and those without an output yet.
        let mut calls = Ids::new(self.seed.map(|j| &j.calls));
        let mut types: HashMap<&'a str, &'a str> = HashMap::new();
        let mut waiting = std::mem::take(&mut self.pending);
        for (i, m) in conv.messages.iter().enumerate().skip(self.from) {
            for (j, b) in m.content.iter().enumerate() {
                match b {
                    Block::ToolUse(t) => {
                        leading = false;
                        if calls.insert(t.id.as_str()) {
                            waiting.push((t.id.clone(), i));
                            types.insert(t.id.as_str(), call_type(t));
                        }
                        self.arguments_json(i, j, &t.id, &t.input);
                    }
                    Block::ToolResult(r) => {
                        let id = r.tool_use_id.as_str();
                        if !calls.contains(id) {
                            if server && leading && self.answered.insert(id) {
                                continue;
                            }
                            self.push(
                                Some(i),
                                None,
                                ViolationKind::OrphanResult {
                                    id: id.into(),
                                    expected: "earlier in the input",
                                },
                            );
                            continue;
                        }
                        let output = output_type(r);
                        // B1.1: the output answers a call of its own pair's type.
                        if let Some(call) = types.get(id).copied()
                            && table.pair_of_call(call).is_some_and(|p| p.output != output)
                        {
                            let output_human = table
                                .pair_of_output(output)
                                .map_or(output, |p| p.human)
                                .to_string();
                            self.push(
                                Some(i),
                                None,
                                ViolationKind::OutputTypeMismatch {
                                    id: id.into(),
                                    output: output.into(),
                                    output_human,
                                    call: call.into(),
                                },
                            );
                        }
                        if !self.answered.insert(id) {
                            self.push(
                                Some(i),
                                None,
                                ViolationKind::DuplicateResult { id: id.into() },
                            );
                        } else if let Some(pos) = waiting.iter().position(|(w, _)| w == id) {
                            waiting.remove(pos);
                        }
                    }
                    _ => {}
                }
            }
        }
        self.pending = waiting;
        self.followers();
        if self.pending.is_empty() {
            return;
        }
        let open_start = self.open_start();
        let missing = self.pending.clone();
        for (id, i) in missing {
            let in_open_tail = open_start.is_some_and(|s| i >= s);
            if !(options.allow_open_tail && in_open_tail) {
                self.push(
                    Some(i),
                    None,
                    ViolationKind::MissingResults {
                        ids: vec![id],
                        expected: "in the input",
                    },
                );
            }
        }
    }

    /// Responses item order: a `reasoning` item directly before an item the model emitted
    /// (B2; an item the table does not know is taken as one, leniently), a
    /// `compaction_trigger` last (B3.1).
    fn followers(&mut self) {
        let conv: &'a Conversation = self.conv;
        let table = self.format.rules();
        let kind = |m: &Message| m.content.first().and_then(|b| table.kind_of_block(b));
        let n = conv.messages.len();
        let mut found = Vec::new();
        for (i, m) in conv.messages.iter().enumerate().skip(self.from) {
            match kind(m) {
                Some(BlockKind::Thinking) => {
                    let follows = conv.messages.get(i + 1).is_some_and(|next| {
                        match (&next.role, kind(next)) {
                            (Role::Other(_), _) => true,
                            (Role::Assistant, k) => {
                                !matches!(k, Some(BlockKind::Trigger | BlockKind::ApprovalResponse))
                            }
                            _ => false,
                        }
                    });
                    if !follows {
                        let id = match m.content.first() {
                            Some(Block::Thinking(v)) => v.get("id").and_then(Value::as_str),
                            _ => None,
                        };
                        found.push((
                            i,
                            ViolationKind::ReasoningWithoutFollower {
                                id: id.unwrap_or_default().to_string(),
                            },
                        ));
                    }
                }
                Some(BlockKind::Trigger) if i + 1 < n => {
                    found.push((i, ViolationKind::TriggerNotLast));
                }
                _ => {}
            }
        }
        for (i, kind) in found {
            self.push(Some(i), None, kind);
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
