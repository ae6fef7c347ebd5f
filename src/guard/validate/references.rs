//! The references [`validate`](super::validate) follows beyond client call / result pairs
//! (see [`refs`] for the sources): Anthropic server tools and programmatic tool calling,
//! Responses MCP approvals and computer-use safety checks.

use super::Checker;
use crate::conversation::{Block, Role, ToolInput};
use crate::guard::refs;
use crate::guard::units::is_clean_user;
use crate::guard::violation::ViolationKind;
use crate::rules::BlockKind;
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

impl<'a> Checker<'a> {
    /// Anthropic server tools and programmatic tool calling (see [`refs`]).
    pub(super) fn server_tools(&mut self) {
        if self.seed.is_some() {
            // A continuation has no server tool blocks (else it is validated whole).
            return;
        }
        let table = self.format.rules();
        let mut turn = 0usize;
        let mut uses: HashMap<&str, (usize, usize, usize)> = HashMap::new();
        let mut done: HashSet<&str> = HashSet::new();
        let mut found = Vec::new();
        for (i, m) in self.conv.messages.iter().enumerate() {
            if i > 0 && is_clean_user(m) {
                turn += 1;
            }
            for (j, b) in m.content.iter().enumerate() {
                if let Some(id) = refs::server_use_id(table, b) {
                    if m.role != Role::Assistant {
                        found.push((
                            i,
                            j,
                            ViolationKind::BlockNotAllowed {
                                block: b.kind().into(),
                                role: m.role.clone(),
                            },
                        ));
                    }
                    uses.entry(id).or_insert((i, j, turn));
                }
                if let Some(id) = refs::server_result_id(table, b) {
                    match uses.get(id) {
                        Some(&(_, _, t)) if t == turn && done.insert(id) => {}
                        Some(&(_, _, t)) if t == turn => {
                            found.push((i, j, ViolationKind::DuplicateResult { id: id.into() }))
                        }
                        _ => {
                            found.push((i, j, ViolationKind::OrphanServerResult { id: id.into() }))
                        }
                    }
                }
                if let (Some(caller), Block::ToolUse(t)) = (refs::caller_id(b), b)
                    && !uses.contains_key(caller)
                {
                    found.push((
                        i,
                        j,
                        ViolationKind::CallerMissing {
                            id: t.id.clone(),
                            caller: caller.into(),
                        },
                    ));
                }
            }
        }
        for (id, &(i, j, t)) in &uses {
            if t < turn && !done.contains(id) {
                found.push((
                    i,
                    j,
                    ViolationKind::ServerCallWithoutResult {
                        id: (*id).to_string(),
                    },
                ));
            }
        }
        found.sort_by_key(|f| (f.0, f.1));
        for (i, j, kind) in found {
            self.push(Some(i), Some(j), kind);
        }
    }

    /// Responses MCP approvals and computer-use safety checks (see [`refs`]).
    pub(super) fn approvals(&mut self) {
        if self.seed.is_some() {
            // A continuation has no approvals or safety checks (else it is validated whole).
            return;
        }
        let table = self.format.rules();
        let mut requests: HashSet<&str> = HashSet::new();
        let mut pending_checks: HashMap<&str, HashSet<&str>> = HashMap::new();
        let mut found = Vec::new();
        for (i, j, b) in self.conv.blocks() {
            if let Some((t, id, names)) = refs::approval_ref(table, b) {
                if t == BlockKind::ApprovalRequest
                    && let Some(id) = id
                {
                    requests.insert(id);
                }
                if let Some(r) = names
                    && !requests.contains(r)
                {
                    found.push((
                        i,
                        j,
                        ViolationKind::OrphanApproval {
                            item: b.kind().into(),
                            id: r.into(),
                        },
                    ));
                }
            }
            match b {
                Block::ToolUse(t) => {
                    if let ToolInput::Json(v) = &t.input
                        && let Some(serde_json::Value::Array(checks)) =
                            v.get("pending_safety_checks")
                    {
                        pending_checks.insert(
                            t.id.as_str(),
                            checks
                                .iter()
                                .filter_map(|c| c.get("id").and_then(serde_json::Value::as_str))
                                .collect(),
                        );
                    }
                }
                Block::ToolResult(r) => {
                    if let Some(serde_json::Value::Array(acks)) =
                        r.extra.get("acknowledged_safety_checks")
                    {
                        let raised = pending_checks.get(r.tool_use_id.as_str());
                        for ack in acks {
                            let Some(check) = ack.get("id").and_then(serde_json::Value::as_str)
                            else {
                                continue;
                            };
                            if !raised.is_some_and(|s| s.contains(check)) {
                                found.push((
                                    i,
                                    j,
                                    ViolationKind::UnknownSafetyCheck {
                                        id: r.tool_use_id.clone(),
                                        check: check.into(),
                                    },
                                ));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        for (i, j, kind) in found {
            self.push(Some(i), Some(j), kind);
        }
    }
}
