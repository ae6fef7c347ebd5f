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
use foldhash::{HashMap, HashMapExt};
use serde_json::Value;

/// Block / item types of a server-side tool call (Anthropic): `server_tool_use` and the MCP
/// connector's `mcp_tool_use`.
pub const SERVER_USE_TYPES: [&str; 2] = ["server_tool_use", "mcp_tool_use"];

/// The wire `type` of a block kept verbatim ([`Block::Other`]), if any.
pub(crate) fn other_type(b: &Block) -> Option<&str> {
    match b {
        Block::Other(v) => v.get("type").and_then(Value::as_str),
        _ => None,
    }
}

/// The id of an Anthropic server tool call block (`server_tool_use`, `mcp_tool_use`).
pub(crate) fn server_use_id(b: &Block) -> Option<&str> {
    match (b, other_type(b)) {
        (Block::Other(v), Some(t)) if SERVER_USE_TYPES.contains(&t) => {
            v.get("id").and_then(Value::as_str)
        }
        _ => None,
    }
}

/// The `tool_use_id` of an Anthropic server tool result block: any `*_tool_result` type other
/// than the client `tool_result` (`web_search_tool_result`, `code_execution_tool_result`,
/// `mcp_tool_result`, ...).
pub(crate) fn server_result_id(b: &Block) -> Option<&str> {
    match (b, other_type(b)) {
        (Block::Other(v), Some(t)) if t.ends_with("_tool_result") && t != "tool_result" => {
            v.get("tool_use_id").and_then(Value::as_str)
        }
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

/// For a Responses item kept verbatim: its `type`, its own `id` and the `approval_request_id`
/// it names (`mcp_approval_response`, `mcp_call`).
pub(crate) fn approval_ref(b: &Block) -> Option<(&str, Option<&str>, Option<&str>)> {
    let Block::Other(v) = b else { return None };
    let t = v.get("type").and_then(Value::as_str)?;
    Some((
        t,
        v.get("id").and_then(Value::as_str),
        v.get("approval_request_id").and_then(Value::as_str),
    ))
}

/// True for a provider compaction item: an Anthropic `compaction` block or a Responses
/// `compaction` item (kept as [`Block::Other`]).
pub fn is_compaction(b: &Block) -> bool {
    other_type(b) == Some("compaction")
}

/// Index of the last message holding a provider compaction item, if any.
pub fn last_compaction(c: &Conversation) -> Option<usize> {
    c.messages
        .iter()
        .rposition(|m| m.content.iter().any(is_compaction))
}

/// Pairs of message indices bound by a reference (see the module docs): server tool call ->
/// its result, server tool call -> each tool_use it called, approval request -> each item
/// naming it. Unresolved references bind nothing ([`super::validate`] reports them).
pub fn links(c: &Conversation) -> Vec<(usize, usize)> {
    let mut server: HashMap<&str, usize> = HashMap::new();
    let mut requests: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, _, b) in c.blocks() {
        if let Some(id) = server_use_id(b) {
            server.entry(id).or_insert(i);
        }
        if let Some(id) = server_result_id(b).or_else(|| caller_id(b))
            && let Some(&at) = server.get(id)
        {
            out.push((at, i));
        }
        if let Some((t, id, names)) = approval_ref(b) {
            if t == "mcp_approval_request"
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
