//! The proxy's fast read and write paths give what the `Value` paths give: a body read by its
//! item spans (`format::slices`, with or without the session's previous body) is the
//! conversation `Format::read` gives for the whole parsed body, and `Format::write_bytes` is
//! `serde_json::to_vec(&Format::write)`, on random bodies with unknown fields, odd numbers,
//! unknown block types, escapes and whitespace, and on broken ones (where the span read may
//! only give up or agree).

use super::{Format, slices};
use proptest::prelude::*;
use serde_json::Value;

/// Numbers `arbitrary_precision` keeps as written, and other scalars.
fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("1e400".to_string()),
        Just("-0".to_string()),
        Just("-0.0".to_string()),
        Just("1.0".to_string()),
        Just("2.50".to_string()),
        Just("1E-7".to_string()),
        Just("123456789012345678901234567890".to_string()),
        Just("-98765432109876543210".to_string()),
        Just("true".to_string()),
        Just("null".to_string()),
        text().prop_map(|t| quote(&t)),
    ]
}

/// Text with the characters a scanner can trip on: quotes, backslashes, brackets, newlines,
/// non-ASCII and control characters.
pub(super) fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("a".to_string()),
            Just("\"".to_string()),
            Just("\\".to_string()),
            Just("\\\"".to_string()),
            Just("]}".to_string()),
            Just("[{,:".to_string()),
            Just("\n".to_string()),
            Just("é漢🙂".to_string()),
            Just("\u{1}".to_string()),
            "[a-z ]{0,12}",
        ],
        0..6,
    )
    .prop_map(|parts| parts.concat())
}

/// A JSON string literal for `t`, escaped one of two ways (serde's, or every non-ASCII
/// character as `\u` escapes), so that equal strings can have different bytes.
pub(super) fn quote(t: &str) -> String {
    if t.len().is_multiple_of(2) {
        serde_json::to_string(t).unwrap_or_default()
    } else {
        let mut out = String::from("\"");
        for c in t.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
                c => {
                    let mut buf = [0u16; 2];
                    for u in c.encode_utf16(&mut buf) {
                        out.push_str(&format!("\\u{u:04x}"));
                    }
                }
            }
        }
        out.push('"');
        out
    }
}

/// JSON whitespace between tokens.
pub(super) fn ws() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just(""), Just(" "), Just("\n  "), Just("\t\r\n")]
}

/// A random JSON value's text, nested a few levels.
pub(super) fn value() -> impl Strategy<Value = String> {
    scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (prop::collection::vec(inner.clone(), 0..4), ws())
                .prop_map(|(items, w)| format!("[{w}{}{w}]", items.join(&format!(",{w}")))),
            (prop::collection::vec(("[a-z_]{1,6}", inner), 0..4), ws()).prop_map(|(fields, w)| {
                let fields: Vec<String> = fields
                    .into_iter()
                    .map(|(k, v)| format!("{}{w}:{w}{v}", quote(&k)))
                    .collect();
                format!("{{{w}{}{w}}}", fields.join(&format!(",{w}")))
            }),
        ]
    })
}

/// Unknown fields: `,"x_..": value` pieces.
fn unknown_fields() -> impl Strategy<Value = String> {
    prop::collection::vec(("x_[a-z]{1,4}", value()), 0..3).prop_map(|fields| {
        fields
            .into_iter()
            .map(|(k, v)| format!(", {}: {v}", quote(&k)))
            .collect()
    })
}

/// An Anthropic content block, of a known or an unknown type.
fn block() -> impl Strategy<Value = String> {
    prop_oneof![
        (text(), unknown_fields())
            .prop_map(|(t, x)| format!(r#"{{"type": "text", "text": {}{x}}}"#, quote(&t))),
        ("[a-z0-9]{1,6}", value(), unknown_fields()).prop_map(|(id, input, x)| format!(
            r#"{{"type":"tool_use","id":"toolu_{id}","name":"Bash","input":{{"v":{input}}}{x}}}"#
        )),
        ("[a-z0-9]{1,6}", text(), prop::option::of(any::<bool>()), unknown_fields()).prop_map(
            |(id, t, e, x)| {
                let e = e.map_or(String::new(), |e| format!(r#", "is_error": {e}"#));
                format!(
                    r#"{{"type": "tool_result", "tool_use_id": "toolu_{id}", "content": [{{"type": "text", "text": {}}}]{e}{x}}}"#,
                    quote(&t)
                )
            }
        ),
        text().prop_map(|t| format!(
            r#"{{"type": "thinking", "thinking": {}, "signature": "c2ln"}}"#,
            quote(&t)
        )),
        (value(), unknown_fields())
            .prop_map(|(v, x)| format!(r#"{{"type": "future_block", "payload": {v}{x}}}"#)),
    ]
}

/// An Anthropic message: string, block, null or no content, with unknown fields.
fn anthropic_message() -> impl Strategy<Value = String> {
    (
        prop_oneof![Just("user"), Just("assistant")],
        prop_oneof![
            text().prop_map(|t| format!(r#", "content": {}"#, quote(&t))),
            (prop::collection::vec(block(), 0..4), ws())
                .prop_map(|(b, w)| format!(r#", "content": [{w}{}{w}]"#, b.join(","))),
            Just(r#", "content": null"#.to_string()),
            Just(String::new()),
        ],
        unknown_fields(),
    )
        .prop_map(|(role, content, x)| format!(r#"{{"role": "{role}"{content}{x}}}"#))
}

/// An OpenAI Chat or Responses item with string content and unknown fields (a Responses
/// `function_call` item now and then).
fn openai_item() -> impl Strategy<Value = String> {
    prop_oneof![
        (
            prop_oneof![Just("user"), Just("assistant"), Just("system")],
            text(),
            unknown_fields()
        )
            .prop_map(|(role, t, x)| format!(
                r#"{{"role": "{role}", "content": {}{x}}}"#,
                quote(&t)
            )),
        (value(), unknown_fields()).prop_map(|(v, x)| format!(
            r#"{{"type": "function_call", "call_id": "c1", "name": "f", "arguments": {}{x}}}"#,
            quote(&v)
        )),
    ]
}

/// A request body of `format` with `items`, its top-level fields in a random order.
fn body(
    format: Format,
    items: &[String],
    fields: &[(String, String)],
    w: &str,
    bare: bool,
) -> String {
    let array = format!("[{w}{}{w}]", items.join(&format!(",{w}")));
    if bare {
        return format!("{w}{array}{w}");
    }
    let mut parts: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{w}{v}", quote(k)))
        .collect();
    let at = fields.len() / 2;
    parts.insert(at, format!("\"{}\":{w}{array}", format.messages_key()));
    format!("{w}{{{w}{}{w}}}{w}", parts.join(&format!(",{w}")))
}

fn top_fields() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec(
        prop_oneof![
            Just(("model".to_string(), "\"m\"".to_string())),
            Just(("max_tokens".to_string(), "1024".to_string())),
            Just((
                "system".to_string(),
                r#"[{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}]"#
                    .to_string()
            )),
            ("x_[a-z]{1,4}", value()),
        ],
        0..5,
    )
}

/// What the whole-body path gives.
fn whole(format: Format, bytes: &[u8]) -> Option<crate::conversation::Conversation> {
    let value: Value = serde_json::from_slice(bytes).ok()?;
    format.read(&value).ok()
}

/// The span read, with the previous body when given.
fn spanned(
    format: Format,
    bytes: &[u8],
    previous: Option<&[u8]>,
) -> Option<crate::conversation::Conversation> {
    let spans = slices::scan(bytes, format)?;
    let previous = previous.and_then(|p| {
        let s = slices::scan(p, format)?;
        Some((p, slices::read(format, p, s, None)?))
    });
    slices::read(format, bytes, spans, previous).map(|r| r.conversation)
}

fn items_for(format: Format) -> BoxedStrategy<Vec<String>> {
    match format {
        Format::Anthropic => prop::collection::vec(anthropic_message(), 0..6).boxed(),
        _ => prop::collection::vec(openai_item(), 0..6).boxed(),
    }
}

fn any_format() -> impl Strategy<Value = Format> {
    prop_oneof![
        Just(Format::Anthropic),
        Just(Format::OpenAiChat),
        Just(Format::OpenAiResponses)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A valid body read by its spans is the whole read, and is written to the same bytes.
    #[test]
    fn the_span_read_and_the_byte_writer_agree_with_the_value_paths(
        (format, items) in any_format().prop_flat_map(|f| (Just(f), items_for(f))),
        fields in top_fields(),
        w in ws(),
        bare in any::<bool>(),
    ) {
        let text = body(format, &items, &fields, w, bare);
        let old = whole(format, text.as_bytes());
        let new = spanned(format, text.as_bytes(), None);
        match (&old, &new) {
            (_, Some(n)) => prop_assert_eq!(old.as_ref(), Some(n), "{}", text),
            // Gives up only where the whole read fails too.
            (Some(_), None) => prop_assert!(false, "the span read gave up on {}", text),
            (None, None) => {}
        }
        if let Some(c) = &old {
            prop_assert_eq!(
                String::from_utf8(format.write_bytes(c)).unwrap_or_default(),
                serde_json::to_string(&format.write(c)).unwrap_or_default()
            );
        }
    }

    /// A grown body read with the previous body of its session (some items the same, one
    /// maybe changed, more after) is the whole read of the grown body.
    #[test]
    fn a_grown_body_read_with_its_previous_body_is_the_whole_read(
        (format, items) in any_format().prop_flat_map(|f| (Just(f), items_for(f))),
        fields in top_fields(),
        keep in 0usize..6,
        change in prop::option::of(0usize..6),
        w in ws(),
    ) {
        let before: Vec<String> = items.iter().take(keep).cloned().collect();
        let mut after = items;
        if let Some(i) = change && i < after.len() {
            after[i] = after[i].replacen('{', "{\"x_changed\": 1, ", 1);
        }
        after.push(r#"{"role": "user", "content": "more"}"#.to_string());
        let prev = body(format, &before, &fields, w, false);
        let next = body(format, &after, &fields, w, false);
        let old = whole(format, next.as_bytes());
        let new = spanned(format, next.as_bytes(), Some(prev.as_bytes()));
        if let Some(n) = &new {
            prop_assert_eq!(old.as_ref(), Some(n), "{} after {}", next, prev);
        } else {
            prop_assert!(old.is_none(), "the span read gave up on {}", next);
        }
    }

    /// A broken body (cut short, or a byte changed) is never read differently: the span read
    /// gives up or gives what the whole read gives.
    #[test]
    fn a_broken_body_is_never_read_otherwise(
        items in prop::collection::vec(anthropic_message(), 1..5),
        fields in top_fields(),
        at in any::<prop::sample::Index>(),
        byte in prop_oneof![Just(b'"'), Just(b'\\'), Just(b']'), Just(b'}'), Just(b','), Just(b' '), Just(b'x')],
        cut in any::<bool>(),
    ) {
        let good = body(Format::Anthropic, &items, &fields, " ", false);
        let mut bad = good.clone().into_bytes();
        let i = at.index(bad.len());
        if cut { bad.truncate(i) } else { bad[i] = byte }
        for previous in [None, Some(good.as_bytes())] {
            if let Some(n) = spanned(Format::Anthropic, &bad, previous) {
                let old = whole(Format::Anthropic, &bad);
                prop_assert_eq!(old.as_ref(), Some(&n), "{}", String::from_utf8_lossy(&bad));
            }
        }
    }
}
