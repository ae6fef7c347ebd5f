//! Reading a request body by the byte spans of its message items, so that the next body of a
//! growing history is read in proportion to what changed.
//!
//! ```text
//! body bytes -> scan: top-level keys, the message array, one span per item (no parse)
//!   previous read of the same session (same bytes around the array, same first items)?
//!     -> its conversation, cut after the last item whose bytes are the same
//!   else -> the top level parsed as R1 ++ "[]" ++ R2 (the array emptied)
//!   -> each item not reused: parsed alone, checked (detect::item_contradiction), read
//! anything unusual (a duplicate message key, nesting past 120, a legacy OpenAI function call,
//! an error) -> None: the caller reads the whole body the ordinary way (Format::read), which
//! gives the same conversation or the exact error.
//! ```
//!
//! The result is the conversation [`Format::read`] gives for `serde_json::from_slice` of the
//! same bytes (tests/all/lossless.rs checks it on random bodies with unknown fields, odd
//! numbers and unknown block types): every item is read by the format's own item reader from
//! its own `Value`, and the top level by the same `split_body`. Why a span read is the same as
//! the whole parse: JSON is a context-free grammar, so a body `R1 [e0, e1, ...] R2` is valid
//! when `R1 [] R2` is valid, each `ei` is a valid value on its own and the separators are
//! whitespace and commas; its top-level fields are those of `R1 [] R2` and its array's items
//! are the `ei`. An item is reused only when its bytes are the same as the previous body's
//! item at the same index (compared byte for byte, not by hash), and the previous body's were
//! read this way. serde_json's nesting limit (128) is kept by refusing bodies nested deeper
//! than [`scanner::MAX_DEPTH`].
//!
//! A scanner and not serde_json's `RawValue` spans, by measure (issue 38 asked; 2026-12-05,
//! `benches/slices.rs`): on the largest corpus session as an Anthropic body (658 KB, 278
//! items) the scanner takes 169 µs, one `Vec<&RawValue>` pass at least 629 µs (without the
//! array's span or the nesting check) and exact RawValue spans 1,008 µs; a proxy turn of that
//! session took 1,021 µs with the scanner and 1,582 µs with the one-pass RawValue reader in
//! its place (best of 3 alternating runs), 55% more where 5% was allowed. The RawValue spans
//! are the scanner's test oracle instead (`slices/oracle.rs`, `slices/spans_tests.rs`).

use super::{Format, detect};
use crate::conversation::Conversation;
use serde_json::Value;
use std::ops::Range;

#[cfg(test)]
mod oracle;
mod scanner;
#[cfg(test)]
mod spans_tests;

/// Where the parts of a request body lie, in byte offsets of the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spans {
    /// The message array, from its `[` to its `]` inclusive.
    array: Range<usize>,
    /// Each message item (`messages[i]` / `input[i]`), without surrounding whitespace.
    items: Vec<Range<usize>>,
}

impl Spans {
    /// The number of message items.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Each message item's bytes in the body (`messages[i]` / `input[i]`).
    pub fn items(&self) -> &[Range<usize>] {
        &self.items
    }

    /// A 128-bit key naming the session of `body` (scanned into `self`) in `format`: a hash of
    /// the bytes around the message array (model, system, tools, metadata, ...) and of the
    /// first two items. The next body of the same agent session has the same key; whether its
    /// items are the same is then checked byte for byte ([`read`]).
    pub fn session_key(&self, format: Format, body: &[u8]) -> u128 {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        let part = |h: &mut xxhash_rust::xxh3::Xxh3, bytes: &[u8]| {
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part(&mut h, format.as_str().as_bytes());
        part(&mut h, body.get(..self.array.start).unwrap_or_default());
        part(&mut h, body.get(self.array.end..).unwrap_or_default());
        for item in self.items.iter().take(2) {
            part(&mut h, body.get(item.clone()).unwrap_or_default());
        }
        h.digest128()
    }

    /// The body's envelope parsed: everything but the message array, which reads as `[]`
    /// (`[]` alone for a bare message array; `None` when it is not JSON). The proxy's read
    /// cache compares envelopes by value with it, so a client that writes its keys in another
    /// order each time (Codex's `client_metadata`) still continues its session.
    pub fn envelope(&self, body: &[u8]) -> Option<Value> {
        let mut top = body.get(..self.array.start)?.to_vec();
        top.extend_from_slice(b"[]");
        top.extend_from_slice(body.get(self.array.end..)?);
        serde_json::from_slice(&top).ok()
    }
}

/// A body read by its spans: the conversation and where its items lie in the body.
#[derive(Debug, Clone)]
pub struct SpanRead {
    /// What [`Format::read`] gives for the body.
    pub conversation: Conversation,
    /// The body's spans.
    pub spans: Spans,
    /// How many of the first messages were taken from the previous read (their items' bytes
    /// are the same as the previous body's); `0` when read without one.
    pub reused: usize,
}

/// The spans of `body`, a request body of `format` (an object with its message array, or a
/// bare array of messages). `None` when the body is not plainly such a body: not an object or
/// array, no message array, the message key twice at the top level, nested deeper than
/// [`scanner::MAX_DEPTH`], or not JSON where the scanner looks (every byte it does not look at is
/// checked by serde_json in [`read`]).
pub fn scan(body: &[u8], format: Format) -> Option<Spans> {
    let (array, items) = scanner::spans(body, format.messages_key())?;
    Some(Spans { array, items })
}

/// Reads `body` (scanned into `spans`) as `format`, reusing the conversation of `previous`
/// (the same session's last body and its read) for the items whose bytes did not change.
/// `None` when the span read cannot tell (see the module docs): read the whole body with
/// [`Format::read`] instead, which gives the same conversation or the error.
pub fn read(
    format: Format,
    body: &[u8],
    spans: Spans,
    previous: Option<(&[u8], SpanRead)>,
) -> Option<SpanRead> {
    let envelope_of = |value: &Value| {
        super::split_body(value, format)
            .ok()
            .map(|(system, _, extra, bare)| (system, extra, bare))
    };
    // The new body's envelope, parsed when its bytes differ from the previous body's: when
    // its value is the same (keys in another order) the previous messages are reused and the
    // conversation takes the new envelope.
    let mut parsed = None;
    let reused = previous.and_then(|(prev_body, prev)| {
        let same_around = body.get(..spans.array.start) == prev_body.get(..prev.spans.array.start)
            && body.get(spans.array.end..) == prev_body.get(prev.spans.array.end..);
        if !same_around {
            let now = parsed.insert(spans.envelope(body)?);
            if prev.spans.envelope(prev_body).as_ref() != Some(&*now) {
                return None;
            }
        }
        let kept = spans
            .items
            .iter()
            .zip(&prev.spans.items)
            .take_while(|(a, b)| body.get((*a).clone()) == prev_body.get((*b).clone()))
            .count();
        let mut conversation = prev.conversation;
        conversation.messages.truncate(kept);
        Some(conversation)
    });
    let mut conversation = match reused {
        Some(mut c) => {
            if let Some(value) = parsed {
                (c.system, c.extra, c.bare) = envelope_of(&value)?;
            }
            c
        }
        None => {
            let value = match parsed {
                Some(v) => v,
                None => spans.envelope(body)?,
            };
            let (system, extra, bare) = envelope_of(&value)?;
            Conversation {
                system,
                messages: Vec::with_capacity(spans.items.len()),
                extra,
                bare,
            }
        }
    };
    let key = format.messages_key();
    let reused = conversation.messages.len();
    for (i, item) in spans
        .items
        .iter()
        .enumerate()
        .skip(conversation.messages.len())
    {
        let value: Value = serde_json::from_slice(body.get(item.clone())?).ok()?;
        if detect::item_contradiction(&value, i, format).is_some() {
            return None;
        }
        let path = format!("{key}[{i}]");
        let message = match format {
            Format::Anthropic => super::anthropic::read_message(&value, &path),
            Format::OpenAiChat => super::openai_chat::read_message(&value, &path),
            Format::OpenAiResponses => super::openai_responses::read_item(&value, &path),
            Format::Gemini => {
                super::gemini::read_content(&value, &path, i, conversation.messages.last())
            }
        }
        .ok()?;
        conversation.messages.push(message);
    }
    // OpenAI Chat pairs legacy `function` messages across the whole list: left to the
    // whole-body read.
    if format == Format::OpenAiChat && super::openai_chat::has_legacy(&conversation) {
        return None;
    }
    Some(SpanRead {
        conversation,
        spans,
        reused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn whole(format: Format, body: &[u8]) -> Conversation {
        let value: Value = serde_json::from_slice(body).unwrap();
        format.read(&value).unwrap()
    }

    #[test]
    fn items_are_found_around_strings_with_brackets_quotes_and_escapes() {
        let body =
            br#" {"model" : "m\"]}", "messages": [ {"role":"user","content":"a ] } \\\" ["} ,
            {"role":"assistant","content":[{"type":"text","text":"\\"}]}], "n": -1.5e3 } "#;
        let spans = scan(body, Format::Anthropic).unwrap();
        assert_eq!(spans.len(), 2);
        let read = read(Format::Anthropic, body, spans, None).unwrap();
        assert_eq!(read.conversation, whole(Format::Anthropic, body));
        assert_eq!(read.conversation.messages[1].plain_text(), "\\");
    }

    #[test]
    fn a_grown_body_reuses_the_unchanged_items_and_reads_the_rest() {
        let one = json!({"model": "m", "messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "second"},
        ]})
        .to_string();
        let two = json!({"model": "m", "messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "second, edited"},
            {"role": "user", "content": "third"},
        ]})
        .to_string();
        let s1 = scan(one.as_bytes(), Format::Anthropic).unwrap();
        let s2 = scan(two.as_bytes(), Format::Anthropic).unwrap();
        assert_ne!(
            s1.session_key(Format::Anthropic, one.as_bytes()),
            s2.session_key(Format::Anthropic, two.as_bytes()),
            "the second item changed, so the key does"
        );
        let r1 = read(Format::Anthropic, one.as_bytes(), s1, None).unwrap();
        let r2 = read(
            Format::Anthropic,
            two.as_bytes(),
            s2,
            Some((one.as_bytes(), r1)),
        )
        .unwrap();
        assert_eq!(r2.conversation, whole(Format::Anthropic, two.as_bytes()));
    }

    #[test]
    fn unusual_bodies_are_left_to_the_whole_read() {
        for body in [
            &br#"{"messages": [], "messages": []}"#[..],
            br#"{"messages": {}}"#,
            br#"{"model": "m"}"#,
            br#"{"messages": [{"role": "user", "content": "x"},]}"#,
            br#"{"messages": [{"role": "user", "content": "x"}] } x"#,
            br#""messages""#,
            b"",
        ] {
            assert_eq!(
                scan(body, Format::Anthropic),
                None,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        let deep = format!(
            r#"{{"messages": [{{"role": "user", "content": "x", "d": {}{}}}]}}"#,
            "[".repeat(130),
            "]".repeat(130)
        );
        assert_eq!(scan(deep.as_bytes(), Format::Anthropic), None);
    }

    #[test]
    fn an_item_of_another_format_or_a_bad_item_is_left_to_the_whole_read() {
        let body = br#"{"messages": [{"role": "user", "content": [{"type": "input_text", "text": "x"}]}]}"#;
        let spans = scan(body, Format::Anthropic).unwrap();
        assert!(read(Format::Anthropic, body, spans, None).is_none());
        let body = br#"{"messages": [{"role": "user", "content": "x"}], "tools": [}}"#;
        let spans = scan(body, Format::Anthropic).unwrap();
        assert!(read(Format::Anthropic, body, spans, None).is_none());
    }
}
