//! The Anthropic Messages rules of [`validate`](super::validate): roles user and assistant,
//! the first message a user's, each tool_use answered by tool_result blocks first in the very
//! next message, tool_use input an object, no empty text or content but a final prefill,
//! thinking only in assistant turns.

use super::{Checker, ValidateOptions};
use crate::conversation::{Block, ContentForm, Conversation, Role, ToolInput};
use crate::guard::violation::ViolationKind;
use foldhash::{HashSet, HashSetExt};

impl<'a> Checker<'a> {
    pub(super) fn anthropic(&mut self, options: ValidateOptions) {
        let conv: &'a Conversation = self.conv;
        let msgs = &conv.messages;
        if self.from == 0 && msgs[0].role != Role::User {
            self.push(
                Some(0),
                None,
                ViolationKind::FirstNotUser { role: msgs[0].role },
            );
        }
        // The junction's last message is no longer the last: what depended on that again.
        if let Some(at) = self.from.checked_sub(1) {
            self.anthropic_ending(at, options);
        }
        for (i, m) in msgs.iter().enumerate().skip(self.from) {
            if !matches!(m.role, Role::User | Role::Assistant) {
                self.push(
                    Some(i),
                    None,
                    ViolationKind::RoleNotAllowed { role: m.role },
                );
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
                        } else if here.contains(id) || self.answered.contains(id) {
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
            for id in here {
                self.answered.insert(id);
            }
            self.anthropic_ending(i, options);
        }
    }

    /// The Anthropic checks of message `i` that depend on whether it is the last one: only the
    /// final assistant message may be empty ("" or [], a prefill; `content` itself is required,
    /// a string or an array, on every message), and its calls are answered in the next message
    /// or, at the end, left open only when allowed.
    fn anthropic_ending(&mut self, i: usize, options: ValidateOptions) {
        let conv: &'a Conversation = self.conv;
        let msgs = &conv.messages;
        let m = &msgs[i];
        let last = i + 1 == msgs.len();
        let lenient = last && m.role == Role::Assistant;
        let missing = matches!(m.form, ContentForm::Null | ContentForm::Absent);
        if m.content.is_empty() && (missing || !lenient) {
            self.push(Some(i), None, ViolationKind::EmptyContent);
        }
        for (j, b) in m.content.iter().enumerate() {
            if matches!(b, Block::Text(t) if t.text.trim().is_empty()) && !lenient {
                self.push(Some(i), Some(j), ViolationKind::EmptyText);
            }
        }
        if m.role == Role::Assistant && m.has_tool_uses() {
            let calls: Vec<&str> = m.tool_uses().map(|t| t.id.as_str()).collect();
            match msgs.get(i + 1) {
                None => {
                    if !(options.allow_open_tail && self.open_start().is_some()) {
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
