//! The wire JSON of what a strategy replaces: one block, or a span of messages, as the input's
//! format writes it. Formats read losslessly (`write(read(x)) == x`), so this is the input's
//! JSON of that block or of those messages, key order and number text included.
//!
//! Each original is written once, straight to its compact bytes ([`crate::format::emit`]: no
//! `Value` tree, no copy of the messages), and those bytes are what the id is made of, what the
//! store keeps and what Redis holds. (OpenAI blocks, one small message each, go through the
//! format's `Value` writer.)

use super::{Entry, RecallKind, RecallRef, scope};
use crate::conversation::{Conversation, Message, Object};
use crate::format::{Format, block_path, emit};
use serde_json::Value;
use std::sync::Arc;

/// The conversation holding only `messages` (no system prompt, no other field).
fn alone(messages: Vec<Message>) -> Conversation {
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

/// The entry of an original written to `bytes`: its id made with the running compaction's key
/// and tenant ([`scope`]). `None` for empty bytes (a writer failure) or without a key.
fn entry(
    kind: RecallKind,
    bytes: Vec<u8>,
    message: usize,
    end: usize,
    path: String,
) -> Option<Entry> {
    if bytes.is_empty() {
        return None;
    }
    let id = scope::key()?.id(kind, scope::tenant(), &bytes);
    let original: Arc<str> = String::from_utf8(bytes).ok()?.into();
    Some(Entry {
        reference: RecallRef {
            id: id.to_string(),
            kind,
            bytes: original.len(),
            message,
            end,
            path,
        },
        original,
    })
}

/// The recall entry of block `j` of message `i` of `conv`: the block's wire JSON (OpenAI
/// Chat: a `tool` message is one element, the message), or `None` when there is no such
/// block.
pub fn block(format: Format, conv: &Conversation, i: usize, j: usize) -> Option<Entry> {
    let m = conv.messages.get(i)?;
    let b = m.content.get(j)?;
    let bytes = match format {
        Format::Anthropic => emit::write_anthropic_block(b),
        Format::OpenAiChat | Format::OpenAiResponses | Format::Gemini => {
            let one = alone(vec![m.clone()]);
            let written = format.write(&one);
            serde_json::to_vec(at(&written, &block_path(format, &one, 0, Some(j)))?).ok()?
        }
    };
    entry(
        RecallKind::Block,
        bytes,
        i,
        j,
        block_path(format, conv, i, Some(j)),
    )
}

/// The recall entry of messages `from..to` of `conv`: the array of their wire JSON, or `None`
/// for an empty or out-of-range span.
pub fn span(format: Format, conv: &Conversation, from: usize, to: usize) -> Option<Entry> {
    let messages = conv.messages.get(from..to).filter(|m| !m.is_empty())?;
    let path = format!("{}[{from}..{to}]", format.messages_key());
    entry(
        RecallKind::Span,
        emit::write_messages(format, messages),
        from,
        to,
        path,
    )
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
            b.original.as_ref(),
            serde_json::to_string(&body["messages"][2]["content"][0]).unwrap()
        );
        assert_eq!(b.reference.bytes, b.original.len());
        assert_eq!(b.reference.path, "messages[2].content[0]");
        let s = span(Format::Anthropic, &conv, 1, 3).unwrap();
        assert_eq!(
            s.original.as_ref(),
            serde_json::to_string(&json!([body["messages"][1], body["messages"][2]])).unwrap()
        );
        assert!(span(Format::Anthropic, &conv, 2, 2).is_none());
        assert!(block(Format::Anthropic, &conv, 2, 1).is_none());
        // OpenAI Chat: the tool message is the block's original.
        let chat = json!({"model": "m", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "ls", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "a b"}]});
        let conv = Format::OpenAiChat.read(&chat).unwrap();
        let b = block(Format::OpenAiChat, &conv, 2, 0).unwrap();
        assert_eq!(b.original.as_ref(), chat["messages"][2].to_string());
        let s = span(Format::OpenAiChat, &conv, 0, 3).unwrap();
        assert_eq!(s.original.as_ref(), chat["messages"].to_string());
    }
}
