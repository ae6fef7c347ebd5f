//! The weight of a memory entry: an estimate of the heap bytes a conversation holds.

use crate::conversation::{Block, Conversation, Message, ToolInput, ToolResultContent};

/// An estimate of the heap bytes a conversation holds, for the memory's byte bound: every
/// value's own size (`size_of` of its message, block and JSON value structs, in their vectors)
/// plus every string's bytes, plus [`ALLOC_BYTES`] per heap allocation (each string, vector
/// and JSON map), plus the index table of each JSON map. Counting only text and JSON lengths
/// (and 64 bytes per block) came to about half of what the service's resident set grew by
/// (docs/service.md, "Load check").
#[cfg(test)]
pub fn estimated_bytes(c: &Conversation) -> usize {
    estimated_bytes_with(c, c.messages.iter().map(message_bytes).sum())
}

/// [`estimated_bytes`] of `c` when the sum of [`message_bytes`] over its messages is known
/// (`messages_bytes`): the rest is its top level (system prompt, other fields, the message
/// vector), so a caller that keeps the sum across a growing history estimates each turn in
/// proportion to its new messages.
pub fn estimated_bytes_with(c: &Conversation, messages_bytes: usize) -> usize {
    std::mem::size_of::<Conversation>()
        + c.system.as_ref().map_or(0, value_heap)
        + object_heap(&c.extra)
        + ALLOC_BYTES
        + c.messages.capacity() * std::mem::size_of::<Message>()
        + messages_bytes
}

/// The heap bytes below one message (its fields' and blocks'; not its own `size_of`, which
/// the conversation's message vector counts), as [`estimated_bytes`] counts them.
pub fn message_bytes(m: &Message) -> usize {
    object_heap(&m.extra)
        + ALLOC_BYTES
        + m.content.capacity() * std::mem::size_of::<Block>()
        + m.content.iter().map(block_bytes).sum::<usize>()
}

/// The bookkeeping an allocator adds to one heap allocation, on average (a header and the
/// rounding up to its size class), in bytes.
pub const ALLOC_BYTES: usize = 16;

/// The heap bytes of a string: its capacity and one allocation (none when empty).
fn string_heap(s: &str, capacity: usize) -> usize {
    if capacity == 0 && s.is_empty() {
        0
    } else {
        capacity.max(s.len()) + ALLOC_BYTES
    }
}

/// The heap bytes below a JSON value (not its own `size_of`, which its parent counts). With
/// `arbitrary_precision` a number is a string; with `preserve_order` a map is an `IndexMap`
/// (a vector of entries holding each key's hash, plus an index table of 8 bytes a slot).
fn value_heap(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    match v {
        Value::Null | Value::Bool(_) => 0,
        Value::Number(x) => x.as_str().len() + ALLOC_BYTES,
        Value::String(s) => string_heap(s, s.capacity()),
        Value::Array(a) => {
            ALLOC_BYTES
                + a.capacity() * std::mem::size_of::<Value>()
                + a.iter().map(value_heap).sum::<usize>()
        }
        Value::Object(o) => object_heap(o),
    }
}

/// The heap bytes of a JSON map: its entries (key, value and the key's hash), its index table,
/// and what lies below each key and value.
fn object_heap(o: &serde_json::Map<String, serde_json::Value>) -> usize {
    if o.is_empty() {
        return 0;
    }
    let entry = std::mem::size_of::<String>() + std::mem::size_of::<serde_json::Value>() + 8;
    2 * ALLOC_BYTES
        + o.len() * (entry + 8)
        + o.iter()
            .map(|(k, v)| string_heap(k, k.capacity()) + value_heap(v))
            .sum::<usize>()
}

/// The heap bytes below a block (not its own `size_of`, which its message's vector counts).
fn block_bytes(b: &Block) -> usize {
    match b {
        Block::Text(t) => string_heap(&t.text, t.text.capacity()) + object_heap(&t.extra),
        Block::ToolUse(t) => {
            string_heap(&t.id, t.id.capacity())
                + string_heap(&t.name, t.name.capacity())
                + object_heap(&t.extra)
                + match &t.input {
                    ToolInput::Json(v) => value_heap(v),
                    ToolInput::Arguments(s) | ToolInput::Freeform(s) => {
                        string_heap(s, s.capacity())
                    }
                }
        }
        Block::ToolResult(r) => {
            string_heap(&r.tool_use_id, r.tool_use_id.capacity())
                + object_heap(&r.extra)
                + match &r.content {
                    None => 0,
                    Some(ToolResultContent::Text(s)) => string_heap(s, s.capacity()),
                    Some(ToolResultContent::Blocks(bs)) => {
                        ALLOC_BYTES
                            + bs.capacity() * std::mem::size_of::<Block>()
                            + bs.iter().map(block_bytes).sum::<usize>()
                    }
                }
        }
        Block::Thinking(v) | Block::Image(v) | Block::Document(v) | Block::Other(v) => {
            value_heap(v)
        }
    }
}
