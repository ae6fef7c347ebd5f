//! The Anthropic Messages rules of [`validate`](super::validate), read from the rule table
//! ([`crate::rules::ANTHROPIC`]): roles and where each block type may stand, the first turn a
//! user's (system messages aside, A0.1), each tool_use answered by tool_result blocks first in
//! the very next message (A0.2-A0.4), tool_use input an object, no empty text or content but a
//! final prefill (A0.6), and the mid-conversation system messages: their content (A2, A6) and
//! where a run of them may stand (A1.1-A1.3, A4.4). A message of a role the table does not know
//! is not judged (an opaque unit, kept as it is).

use super::{Checker, ValidateOptions};
use crate::conversation::{Block, ContentForm, Conversation, Message, Role, ToolInput};
use crate::guard::carry::turn_scoped;
use crate::guard::units::is_effort_only;
use crate::guard::violation::{SystemRule, ViolationKind};
use crate::rules::{BlockKind, RoleKind, Table};
use foldhash::{HashSet, HashSetExt};
use serde_json::Value;

impl<'a> Checker<'a> {
    pub(super) fn anthropic(&mut self, options: ValidateOptions) {
        let conv: &'a Conversation = self.conv;
        let table = self.format.rules();
        let msgs = &conv.messages;
        if self.from == 0
            && let Some(first) = msgs
                .iter()
                .find(|m| table.kind_of(m) != Some(RoleKind::Instruction))
            && first.role != Role::User
            && table.kind_of(first).is_some()
        {
            let at = msgs
                .iter()
                .position(|m| std::ptr::eq(m, first))
                .unwrap_or(0);
            self.push(
                Some(at),
                None,
                ViolationKind::FirstNotUser {
                    role: first.role.clone(),
                },
            );
        }
        // The junction's last message is no longer the last: what depended on that again.
        if let Some(at) = self.from.checked_sub(1) {
            self.anthropic_ending(at, options);
        }
        for (i, m) in msgs.iter().enumerate().skip(self.from) {
            let Some(kind) = table.kind_of(m) else {
                // A role the table does not know: kept as it is, not judged.
                continue;
            };
            if kind == RoleKind::Instruction {
                self.system_content(i, m);
            } else if m.extra.contains_key("clear_at") {
                self.push(
                    Some(i),
                    None,
                    ViolationKind::SystemMessage {
                        rule: SystemRule::ClearAtRole,
                    },
                );
            }
            let prev_calls: Vec<&str> = match previous(msgs, i) {
                Some(p) if p.role == Role::Assistant => {
                    p.tool_uses().map(|t| t.id.as_str()).collect()
                }
                _ => Vec::new(),
            };
            let mut other_before = false;
            let mut here: HashSet<&str> = HashSet::new();
            for (j, b) in m.content.iter().enumerate() {
                let block_kind = table.kind_of_block(b);
                if let Some(bk) = block_kind
                    && kind != RoleKind::Instruction
                    && !allowed_in(table, b, bk, kind)
                {
                    self.push(
                        Some(i),
                        Some(j),
                        ViolationKind::BlockNotAllowed {
                            block: b.kind().into(),
                            role: m.role.clone(),
                        },
                    );
                }
                match b {
                    Block::ToolUse(t) if !matches!(&t.input, ToolInput::Json(Value::Object(_))) => {
                        self.push(
                            Some(i),
                            Some(j),
                            ViolationKind::InputNotObject { id: t.id.clone() },
                        );
                    }
                    Block::ToolResult(r) if kind == RoleKind::User => {
                        let id = r.tool_use_id.as_str();
                        if here.contains(id) || self.answered.contains(id) {
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
        self.system_placement();
    }

    /// The Anthropic checks of message `i` that depend on whether it is the last one: only the
    /// final assistant message may be empty ("" or [], a prefill; `content` itself is required,
    /// a string or an array, on every message), and its calls are answered in the next message
    /// (an effort-only system message between them is passed over, A1.6) or, at the end, left
    /// open only when allowed.
    fn anthropic_ending(&mut self, i: usize, options: ValidateOptions) {
        let conv: &'a Conversation = self.conv;
        let table = self.format.rules();
        let msgs = &conv.messages;
        let m = &msgs[i];
        let Some(kind) = table.kind_of(m) else {
            return;
        };
        let last = i + 1 == msgs.len();
        let lenient = last && m.role == Role::Assistant;
        let missing = matches!(m.form, ContentForm::Null | ContentForm::Absent);
        let system = kind == RoleKind::Instruction;
        if m.content.is_empty() && (missing || !lenient) && !system {
            self.push(Some(i), None, ViolationKind::EmptyContent);
        }
        for (j, b) in m.content.iter().enumerate() {
            if matches!(b, Block::Text(t) if t.text.trim().is_empty()) && !lenient {
                self.push(Some(i), Some(j), ViolationKind::EmptyText);
            }
        }
        if m.role == Role::Assistant && m.has_tool_uses() {
            let calls: Vec<&str> = m.tool_uses().map(|t| t.id.as_str()).collect();
            match next(msgs, i) {
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

    /// The content rules of a system message (A2, A2.1, A6, A6.2).
    fn system_content(&mut self, i: usize, m: &Message) {
        let table = self.format.rules();
        let mut found = Vec::new();
        if m.content.is_empty() && !is_effort_only(m) {
            found.push((None, SystemRule::Empty));
        }
        for (j, b) in m.content.iter().enumerate() {
            let ok = matches!(
                table.kind_of_block(b),
                Some(BlockKind::Text | BlockKind::ToolChange)
            );
            if !ok && table.kind_of_block(b).is_some() {
                found.push((
                    Some(j),
                    SystemRule::BlockType {
                        block: b.kind().to_string(),
                    },
                ));
            }
        }
        match m.extra.get("clear_at") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s == "never" || s == "next_user_message" => {}
            Some(_) => found.push((None, SystemRule::ClearAtValue)),
        }
        if turn_scoped(m) {
            if m.content.iter().any(|b| !matches!(b, Block::Text(_))) {
                found.push((None, SystemRule::TurnScopedContent));
            }
            if m.extra.contains_key("output_config") {
                found.push((None, SystemRule::TurnScopedEffort));
            }
            for (j, b) in m.content.iter().enumerate() {
                if matches!(b, Block::Text(t) if t.extra.contains_key("cache_control")) {
                    found.push((Some(j), SystemRule::TurnScopedCache));
                }
            }
        }
        for (j, rule) in found {
            self.push(Some(i), j, ViolationKind::SystemMessage { rule });
        }
    }

    /// Where each run of system messages stands (A1.1-A1.3, A4.4): judged as one run, from the
    /// run that reaches the junction on (a continuation's new messages and their neighbour).
    fn system_placement(&mut self) {
        let conv: &'a Conversation = self.conv;
        let table = self.format.rules();
        let msgs = &conv.messages;
        let n = msgs.len();
        let is_system = |k: usize| table.kind_of(&msgs[k]) == Some(RoleKind::Instruction);
        // From the start of the run that holds the junction's last message.
        let mut start = self.from.saturating_sub(1);
        while start > 0 && is_system(start - 1) {
            start -= 1;
        }
        let mut i = start;
        while i < n {
            if !is_system(i) {
                i += 1;
                continue;
            }
            let s = i;
            while i < n && is_system(i) {
                i += 1;
            }
            let group = &msgs[s..i];
            if group.iter().all(is_effort_only) {
                continue;
            }
            let prev = s.checked_sub(1).map(|p| &msgs[p]);
            let next = msgs.get(i);
            match prev {
                None => self.push(
                    Some(s),
                    None,
                    ViolationKind::SystemMessage {
                        rule: SystemRule::First,
                    },
                ),
                Some(p) => {
                    let paused = p.role == Role::Assistant && ends_in_server_result(table, p);
                    let user = table.kind_of(p) == Some(RoleKind::User);
                    // A role the table does not know is not judged.
                    if !(user || paused) && table.kind_of(p).is_some() {
                        self.push(
                            Some(s),
                            None,
                            ViolationKind::SystemMessage {
                                rule: SystemRule::NotAfterUser,
                            },
                        );
                    }
                    if paused
                        && let Some((k, j)) = group.iter().enumerate().find_map(|(k, m)| {
                            m.content
                                .iter()
                                .position(|b| table.kind_of_block(b) == Some(BlockKind::ToolChange))
                                .map(|j| (k, j))
                        })
                    {
                        self.push(
                            Some(s + k),
                            Some(j),
                            ViolationKind::SystemMessage {
                                rule: SystemRule::ToolChangeAfterPause,
                            },
                        );
                    }
                }
            }
            if let Some(nx) = next
                && nx.role != Role::Assistant
                && table.kind_of(nx).is_some()
            {
                self.push(
                    Some(i - 1),
                    None,
                    ViolationKind::SystemMessage {
                        rule: SystemRule::NotBeforeAssistant,
                    },
                );
            }
        }
    }
}

/// Whether block `b` (of kind `bk`) may stand in a message of kind `role` by its table row.
fn allowed_in(table: &Table, b: &Block, bk: BlockKind, role: RoleKind) -> bool {
    let name = match b {
        Block::Other(v) => v.get("type").and_then(Value::as_str),
        Block::Thinking(v) => v.get("type").and_then(Value::as_str),
        other => Some(other.kind()),
    };
    let roles = name.and_then(|n| table.block(n)).map(|r| r.roles);
    let _ = bk;
    roles.is_none_or(|r| r.is_empty() || r.contains(&role))
}

/// The message before `i`, passing over effort-only system messages (A1.6).
fn previous(msgs: &[Message], i: usize) -> Option<&Message> {
    msgs[..i].iter().rev().find(|m| !is_effort_only(m))
}

/// The message after `i`, passing over effort-only system messages (A1.6).
fn next(msgs: &[Message], i: usize) -> Option<&Message> {
    msgs.get(i + 1..)?.iter().find(|m| !is_effort_only(m))
}

/// An assistant message whose last block is a server tool result (paused, A1.2).
fn ends_in_server_result(table: &Table, m: &Message) -> bool {
    m.content
        .last()
        .is_some_and(|b| table.kind_of_block(b) == Some(BlockKind::ServerOutput))
}
