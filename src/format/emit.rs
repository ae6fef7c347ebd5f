//! Writing a conversation straight to JSON bytes, without building the `serde_json::Value`
//! tree of [`Format::write`] first.
//!
//! ```text
//! Conversation -> Serialize wrappers (body, message, block) -> serde_json compact writer
//!   == serde_json::to_vec(&format.write(conversation)), byte for byte
//! ```
//! The top level emits the fields in the order the `Value` writer inserts them (the other
//! fields, the system prompt under [`Format::system_key`], the messages), and every unmodelled
//! value through `Value`'s own `Serialize`, so numbers (arbitrary precision), escapes and key
//! order come out as they do from the `Value`. Where the `Value` writer's map would replace a
//! key in place (a field of `extra` named like the messages or system key) the body is written
//! through the `Value` writer instead. Anthropic messages and blocks have one writer, the
//! `Serialize` shapes of [`super::anthropic`] (the `Value` writer serializes the same shapes
//! into a `Value`); OpenAI and Gemini messages are written through their `Value` writers one at
//! a time (only the top level is direct). tests/all/lossless.rs checks the bytes against the
//! `Value` path on random conversations.
//!
//! Why: writing the 170k-token session's 470 KB output through a `Value` tree (cloning every
//! string into it, then serializing and dropping it) was a fifth of the proxy's CPU on a
//! growing history (measured in `git show 97644f4:docs/service.md`, "Figures: growing histories").

use super::Format;
use crate::conversation::{Block, Conversation, Message};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// `conversation` as a compact JSON request body of `format`: the same bytes as
/// `serde_json::to_vec(&format.write(conversation))`.
pub fn write_bytes(format: Format, conversation: &Conversation) -> Vec<u8> {
    // About the size of the input's text, so the buffer grows a few times at most.
    let mut out = Vec::with_capacity(64 * 1024);
    let body = Body {
        format,
        conversation,
        messages: &conversation.messages,
    };
    // Writing into a Vec fails only where the Value path would too (a map key that is not a
    // string cannot occur: every key here is a String).
    if serde_json::to_writer(&mut out, &body).is_err() {
        return serde_json::to_vec(&format.write(conversation)).unwrap_or_default();
    }
    out
}

/// `messages` as the compact JSON array a request body of `format` holds them in: the bytes of
/// that array in [`write_bytes`]' output for a body of these messages (recall keeps a dropped
/// span so, written once). Empty only when serde_json fails to write into a `Vec`.
pub fn write_messages(format: Format, messages: &[Message]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 * 1024);
    if serde_json::to_writer(&mut out, &Items { format, messages }).is_err() {
        out.clear();
    }
    out
}

/// An Anthropic content block as compact JSON: the bytes [`write_bytes`] writes for it (recall
/// keeps a cleared block so, written once). Empty only when serde_json fails.
pub fn write_anthropic_block(block: &Block) -> Vec<u8> {
    serde_json::to_vec(&super::anthropic::WireBlock(block)).unwrap_or_default()
}

/// Where a request body's message array lies in the bytes [`write_bytes_reusing`] wrote: its
/// items (comma-separated, without the brackets), in byte offsets of the body.
#[cfg(feature = "server")]
pub type ItemsSpan = std::ops::Range<usize>;

/// `conversation` as [`write_bytes`] writes it (the same bytes), with where its message
/// array's items lie in them (`None` when the body is written through the `Value` path: a
/// field of the conversation's other fields named like the messages or system key). With
/// `prefix`, the items its first `prefix.1` messages were written to before (by this function
/// and `format`, e.g. last turn's output of which this conversation is a continuation), those
/// bytes are copied rather than written again and only the later messages are written. The
/// caller vouches that the prefix bytes are of those same messages.
#[cfg(feature = "server")]
pub fn write_bytes_reusing(
    format: Format,
    conversation: &Conversation,
    prefix: Option<(&[u8], usize)>,
) -> (Vec<u8>, Option<ItemsSpan>) {
    let c = conversation;
    let system_key = format.system_key();
    let direct = c.bare
        || !(c.extra.contains_key(format.messages_key())
            || (c.system.is_some() && c.extra.contains_key(system_key)));
    let (reused, from) = match prefix {
        Some((bytes, n)) if n <= c.messages.len() => (bytes, n),
        _ => (&[][..], 0),
    };
    // The body with no messages ends with `[]` (and `}` for an object); the items go between.
    let mut head = Vec::with_capacity(16 * 1024);
    let empty = Body {
        format,
        conversation: c,
        messages: &[],
    };
    let close: &[u8] = if c.bare { b"]" } else { b"]}" };
    let mut items = Vec::with_capacity(64 * 1024);
    let new = Items {
        format,
        messages: c.messages.get(from..).unwrap_or_default(),
    };
    let written = direct
        && serde_json::to_writer(&mut head, &empty).is_ok()
        && head.ends_with(if c.bare { b"[]" } else { b"[]}" })
        && serde_json::to_writer(&mut items, &new).is_ok()
        && items.len() >= 2;
    if !written {
        return (write_bytes(format, c), None);
    }
    head.truncate(head.len() - close.len());
    let new_items = &items[1..items.len() - 1];
    let mut out = head;
    out.reserve(reused.len() + new_items.len() + 3);
    let start = out.len();
    out.extend_from_slice(reused);
    if !reused.is_empty() && !new_items.is_empty() {
        out.push(b',');
    }
    out.extend_from_slice(new_items);
    let end = out.len();
    out.extend_from_slice(close);
    (out, Some(start..end))
}

struct Body<'a> {
    format: Format,
    conversation: &'a Conversation,
    /// The messages written (the conversation's, or none for the head alone).
    messages: &'a [Message],
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.conversation;
        let items = Items {
            format: self.format,
            messages: self.messages,
        };
        if c.bare {
            return items.serialize(s);
        }
        let messages_key = self.format.messages_key();
        let system_key = self.format.system_key();
        // `join_body` inserts the system prompt and the messages after the other fields; a
        // field of the same name among them would be replaced in place.
        if c.extra.contains_key(messages_key)
            || (c.system.is_some() && c.extra.contains_key(system_key))
        {
            return self.format.write(c).serialize(s);
        }
        let mut map = s.serialize_map(None)?;
        for (k, v) in &c.extra {
            map.serialize_entry(k, v)?;
        }
        if let Some(system) = &c.system {
            map.serialize_entry(system_key, system)?;
        }
        map.serialize_entry(messages_key, &items)?;
        map.end()
    }
}

/// The message array.
struct Items<'a> {
    format: Format,
    messages: &'a [Message],
}

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        match self.format {
            Format::Anthropic => {
                for m in self.messages {
                    seq.serialize_element(&super::anthropic::WireMessage(m))?;
                }
            }
            Format::OpenAiChat => {
                for m in self.messages {
                    seq.serialize_element(&super::openai_chat::write_message(m))?;
                }
            }
            Format::Gemini => {
                let names = super::gemini::call_names(self.messages);
                for m in self.messages {
                    seq.serialize_element(&super::gemini::write_content(m, &names))?;
                }
            }
            Format::OpenAiResponses => {
                let mut items = Vec::new();
                for m in self.messages {
                    super::openai_responses::write_message(m, &mut items);
                    for item in items.drain(..) {
                        seq.serialize_element(&item)?;
                    }
                }
            }
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn the_bytes_are_those_of_the_value_writer() {
        let body: Value = serde_json::from_str(
            r#"{"model": "m", "n": 1e400, "z": -0, "f": 1.0, "big": 12345678901234567890123,
            "system": [{"type": "text", "text": "s\u0001\"", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": "plain \u00e9 é \n"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "t", "signature": "sig"},
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": -1.50e-7}, "caller": "x"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "ok"}], "is_error": false}]},
                {"role": "assistant", "content": null, "id": "msg_1"},
                {"role": "user"}
            ]}"#,
        )
        .unwrap();
        for format in [
            Format::Anthropic,
            Format::OpenAiChat,
            Format::OpenAiResponses,
        ] {
            let Ok(c) = format.read(&body) else { continue };
            assert_eq!(
                String::from_utf8(write_bytes(format, &c)).unwrap(),
                serde_json::to_string(&format.write(&c)).unwrap(),
                "{format}"
            );
        }
        let c = Format::Anthropic.read(&body).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&write_bytes(Format::Anthropic, &c)).unwrap(),
            body
        );
    }

    #[test]
    fn a_field_named_like_a_modelled_one_is_written_as_the_value_writer_does() {
        let mut c = Format::Anthropic
            .read(&json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}]}))
            .unwrap();
        c.messages[0]
            .extra
            .insert("role".into(), json!("assistant"));
        c.extra.insert("messages".into(), json!([]));
        if let Block::Text(t) = &mut c.messages[0].content[0] {
            t.extra.insert("type".into(), json!("other"));
        }
        assert_eq!(
            write_bytes(Format::Anthropic, &c),
            serde_json::to_vec(&Format::Anthropic.write(&c)).unwrap()
        );
        c.extra.clear();
        assert_eq!(
            write_bytes(Format::Anthropic, &c),
            serde_json::to_vec(&Format::Anthropic.write(&c)).unwrap()
        );
    }
    /// Written with the items of a first part of the messages reused, the bytes are those of
    /// the whole written at once, at every split, in each format, bare or not.
    #[cfg(feature = "server")]
    #[test]
    fn reused_items_give_the_bytes_of_the_whole() {
        let messages = json!([
            {"role": "user", "content": "fix it é"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "reading"},
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": "a\\\"b"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x\ny"}]},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "thanks"}
        ]);
        let bodies = [
            json!({"model": "m", "system": "s", "tools": [{"name": "Read"}], "messages": messages}),
            messages,
        ];
        for body in &bodies {
            for format in [
                Format::Anthropic,
                Format::OpenAiChat,
                Format::OpenAiResponses,
            ] {
                let Ok(c) = format.read(body) else { continue };
                let whole = write_bytes(format, &c);
                let (once, span) = write_bytes_reusing(format, &c, None);
                assert_eq!(once, whole, "{format}");
                let span = span.expect("written directly");
                assert_eq!(
                    &whole[span.start - 1..=span.end],
                    &write_items(format, &c)[..]
                );
                for k in 0..=c.messages.len() {
                    let first = Conversation {
                        messages: c.messages[..k].to_vec(),
                        ..c.clone()
                    };
                    let (bytes, span) = write_bytes_reusing(format, &first, None);
                    let items = &bytes[span.expect("direct")];
                    let (again, span) = write_bytes_reusing(format, &c, Some((items, k)));
                    assert_eq!(
                        String::from_utf8(again.clone()),
                        String::from_utf8(whole.clone()),
                        "{format} {k}"
                    );
                    assert!(span.is_some());
                }
            }
        }
        // A clashing field: the Value path, and no span.
        let mut c = Format::Anthropic.read(&bodies[0]).unwrap();
        c.extra.insert("messages".into(), json!([]));
        let (bytes, span) = write_bytes_reusing(Format::Anthropic, &c, None);
        assert_eq!(bytes, write_bytes(Format::Anthropic, &c));
        assert!(span.is_none());
    }

    /// The message array of `c` alone, written.
    fn write_items(format: Format, c: &Conversation) -> Vec<u8> {
        serde_json::to_vec(&Items {
            format,
            messages: &c.messages,
        })
        .unwrap()
    }
}
