//! References between items that are not client tool_use / tool_result pairs, and the provider
//! compaction items. The guard binds what references each other into one unit
//! ([`super::Units`]) and [`super::validate`] checks that every reference resolves.
//!
//! | reference | source of the rule |
//! |---|---|
//! | Anthropic `server_tool_use` / `mcp_tool_use` `id` ← `*_tool_result.tool_use_id` (`web_search_tool_result`, `web_fetch_tool_result`, `code_execution_tool_result`, `bash_code_execution_tool_result`, `mcp_tool_result`, ...), in the same assistant message or a later one of the same turn (`pause_turn` continuation, programmatic tool calling) | Anthropic docs, "Server tools" and "Web search tool" (`pause_turn`: send the response back as is to continue), "Programmatic tool calling"; error text `tool_use ids were found without tool_result blocks` / `unexpected tool_use_id found in ... tool_result blocks` |
//! | Anthropic `tool_use.caller.tool_id` → the `server_tool_use` whose code called the tool | Anthropic docs, "Programmatic tool calling" (`caller` of type `code_execution_20250825`) |
//! | Responses `mcp_approval_response.approval_request_id`, `mcp_call.approval_request_id` → `mcp_approval_request.id` | OpenAI docs, "Remote MCP servers" (approvals: answer the request by its id) and the Responses API reference of the three items |
//! | Responses `computer_call_output.acknowledged_safety_checks[].id` → the `pending_safety_checks` of its `computer_call` | OpenAI docs, "Computer use" (acknowledge pending safety checks in the next `computer_call_output`) |
//! | Anthropic `compaction` block, Responses `compaction` item: a summary of everything before it | Anthropic docs, "Compaction" (context management `compact_20260112`: content before the block is dropped by the API); OpenAI docs, "Conversation state / compaction" (`compaction` item with `encrypted_content`) |

use crate::conversation::{Block, Conversation};
use crate::rules::{BlockKind, Table};
use foldhash::{HashMap, HashMapExt};
use serde_json::Value;

/// The wire `type` of a block kept verbatim ([`Block::Other`]) and its kind in `table`.
fn other_kind<'b>(table: &Table, b: &'b Block) -> Option<(&'b Value, BlockKind)> {
    match b {
        Block::Other(v) => {
            let kind = table.block_kind(v.get("type").and_then(Value::as_str)?)?;
            Some((v, kind))
        }
        _ => None,
    }
}

/// The id of a server tool call block (Anthropic `server_tool_use`, `mcp_tool_use`: kind
/// [`BlockKind::ServerCall`]).
pub(crate) fn server_use_id<'b>(table: &Table, b: &'b Block) -> Option<&'b str> {
    match other_kind(table, b)? {
        (v, BlockKind::ServerCall) => v.get("id").and_then(Value::as_str),
        _ => None,
    }
}

/// The `tool_use_id` of a server tool result block (kind [`BlockKind::ServerOutput`]:
/// `web_search_tool_result`, `code_execution_tool_result`, `mcp_tool_result`, ...).
pub(crate) fn server_result_id<'b>(table: &Table, b: &'b Block) -> Option<&'b str> {
    match other_kind(table, b)? {
        (v, BlockKind::ServerOutput) => v.get("tool_use_id").and_then(Value::as_str),
        _ => None,
    }
}

/// The `caller.tool_id` of a client tool_use called from a server tool's code (programmatic
/// tool calling).
pub(crate) fn caller_id(b: &Block) -> Option<&str> {
    match b {
        Block::ToolUse(t) => t
            .extra
            .get("caller")
            .and_then(|c| c.get("tool_id"))
            .and_then(Value::as_str),
        _ => None,
    }
}

/// An approval reference of a Responses item: `(kind, its own id, the approval_request_id it
/// names)` for an approval request, an approval response, or a self-contained call that names
/// a request (`mcp_call`).
pub(crate) fn approval_ref<'b>(
    table: &Table,
    b: &'b Block,
) -> Option<(BlockKind, Option<&'b str>, Option<&'b str>)> {
    let (v, kind) = other_kind(table, b)?;
    let names = v.get("approval_request_id").and_then(Value::as_str);
    match kind {
        BlockKind::ApprovalRequest | BlockKind::ApprovalResponse => {}
        BlockKind::SelfContained if names.is_some() => {}
        _ => return None,
    }
    Some((kind, v.get("id").and_then(Value::as_str), names))
}

/// True for a provider compaction item (kind [`BlockKind::Compaction`]: an Anthropic
/// `compaction` block, a Responses `compaction` item).
pub fn is_compaction(table: &Table, b: &Block) -> bool {
    matches!(other_kind(table, b), Some((_, BlockKind::Compaction)))
}

/// Index of the last message holding a provider compaction item, if any.
pub fn last_compaction(c: &Conversation, table: &Table) -> Option<usize> {
    c.messages
        .iter()
        .rposition(|m| m.content.iter().any(|b| is_compaction(table, b)))
}

/// Pairs of message indices bound by a reference (see the module docs): server tool call ->
/// its result, server tool call -> each tool_use it called, approval request -> each item
/// naming it. Unresolved references bind nothing ([`super::validate`] reports them).
pub fn links(c: &Conversation, table: &Table) -> Vec<(usize, usize)> {
    let mut server: HashMap<&str, usize> = HashMap::new();
    let mut requests: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, _, b) in c.blocks() {
        if let Some(id) = server_use_id(table, b) {
            server.entry(id).or_insert(i);
        }
        if let Some(id) = server_result_id(table, b).or_else(|| caller_id(b))
            && let Some(&at) = server.get(id)
        {
            out.push((at, i));
        }
        if let Some((kind, id, names)) = approval_ref(table, b) {
            if kind == BlockKind::ApprovalRequest
                && let Some(id) = id
            {
                requests.entry(id).or_insert(i);
            }
            if let Some(&at) = names.and_then(|r| requests.get(r)) {
                out.push((at, i));
            }
        }
    }
    out
}
