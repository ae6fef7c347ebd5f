//! The wire JSON of what a strategy replaces: one block, or a span of messages, as the input's
//! format writes it. Formats read losslessly (`write(read(x)) == x`), so this is the input's
//! JSON of that block or of those messages, key order and number text included.

use super::{Entry, RecallId, RecallKind, RecallRef};
use crate::conversation::{Conversation, Object};
use crate::format::{Format, block_path};
use serde_json::Value;

/// The conversation holding only `messages` (no system prompt, no other field).
fn alone(messages: Vec<crate::conversation::Message>) -> Conversation {
    Conversation {
        system: None,
        messages,
        extra: Object::new(),
        bare: false,
    }
}

/// The value at a path of `block_path`'s form (`messages[0].content[2]`, `input[0]`).
fn at<'v>(mut v: &'v Value, path: &str) -> Option<&'v Value> {
    for seg in path.split('.') {
        let (key, rest) = seg.split_once('[').unwrap_or((seg, ""));
        v = v.get(key)?;
        if let Some(idx) = rest.strip_suffix(']') {
            v = v.get(idx.parse::<usize>().ok()?)?;
        }
    }
    Some(v)
}

/// The recall entry of block `j` of message `i` of `conv`: the block's wire JSON (OpenAI
/// Chat: a `tool` message is one element, the message), or `None` when there is no such
/// block.
pub fn block(format: Format, conv: &Conversation, i: usize, j: usize) -> Option<Entry> {
    let m = conv.messages.get(i)?;
    m.content.get(j)?;
    let one = alone(vec![m.clone()]);
    let written = format.write(&one);
    let original = at(&written, &block_path(format, &one, 0, Some(j)))?.clone();
    let (id, bytes) = RecallId::of(RecallKind::Block, &original);
    Some(Entry {
        reference: RecallRef {
            id: id.to_string(),
            kind: RecallKind::Block,
            bytes: bytes.len(),
            message: i,
            end: j,
            path: block_path(format, conv, i, Some(j)),
        },
        original,
    })
}

/// The recall entry of messages `from..to` of `conv`: the array of their wire JSON, or `None`
/// for an empty or out-of-range span.
pub fn span(format: Format, conv: &Conversation, from: usize, to: usize) -> Option<Entry> {
    let messages = conv.messages.get(from..to).filter(|m| !m.is_empty())?;
    let written = format.write(&alone(messages.to_vec()));
    let original = written.get(format.messages_key())?.clone();
    let (id, bytes) = RecallId::of(RecallKind::Span, &original);
    Some(Entry {
        reference: RecallRef {
            id: id.to_string(),
            kind: RecallKind::Span,
            bytes: bytes.len(),
            message: from,
            end: to,
            path: format!("{}[{from}..{to}]", format.messages_key()),
        },
        original,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_block_and_a_span_are_the_inputs_json() {
        let body = json!({"model": "m", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls", "n": 1.50}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a b", "zz": 1, "aa": 2}]}]});
        let conv = Format::Anthropic.read(&body).unwrap();
        let b = block(Format::Anthropic, &conv, 2, 0).unwrap();
        assert_eq!(
            serde_json::to_string(&b.original).unwrap(),
            serde_json::to_string(&body["messages"][2]["content"][0]).unwrap()
        );
        assert_eq!(b.reference.path, "messages[2].content[0]");
        let s = span(Format::Anthropic, &conv, 1, 3).unwrap();
        assert_eq!(
            serde_json::to_string(&s.original).unwrap(),
            serde_json::to_string(&json!([body["messages"][1], body["messages"][2]])).unwrap()
        );
        assert!(span(Format::Anthropic, &conv, 2, 2).is_none());
        assert!(block(Format::Anthropic, &conv, 2, 1).is_none());
    }
}
