//! Property tests of continuing from a junction: the oracle is the whole conversation checked
//! in one pass ([`validate`], [`check_compaction_with`] with [`Layout::of`] the whole input,
//! `count_conversation`), the subject the same verdict reached from a remembered prefix's
//! [`Junction`] and the new messages only.

use super::preserve::check_continuation;
use super::*;
use crate::conversation::Conversation;
use crate::format::Format;
use crate::tokens::{FramedCounter, TiktokenCounter, TokenCounter};
use proptest::prelude::*;
use serde_json::{Value, json};

/// One step of a generated history.
#[derive(Debug, Clone)]
enum Op {
    /// A user text (empty when true).
    User(bool),
    /// An assistant text (empty when true).
    Assistant(bool),
    /// A user text with an inline image (its base64 data empty when true).
    Image(bool),
    /// An assistant message with `n` calls; the next message answers the first `answered` of
    /// them (none: no message); `error` marks the first result failed; `fault` 1 answers an
    /// unknown id, 2 reuses the first call id of the history.
    Calls {
        n: usize,
        answered: usize,
        error: bool,
        fault: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let empty = prop::bool::weighted(0.04);
    prop_oneof![
        3 => empty.prop_map(Op::User),
        2 => empty.prop_map(Op::Assistant),
        1 => prop::bool::weighted(0.6).prop_map(Op::Image),
        5 => (1usize..3, prop::bool::weighted(0.85), any::<bool>(), prop::sample::select(vec![0u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]))
            .prop_map(|(n, all, error, fault)| Op::Calls {
                n,
                answered: if all { n } else { n / 2 },
                error,
                fault,
            }),
    ]
}

/// The request body of `ops` in `format`, and after how many messages each op ends.
fn build(format: Format, ops: &[Op]) -> (Value, Vec<usize>) {
    let mut items: Vec<Value> = Vec::new();
    let mut ends = Vec::new();
    let mut next = 0usize;
    for (k, op) in ops.iter().enumerate() {
        let text = |e: bool, who: &str| {
            if e {
                String::new()
            } else {
                format!("{who}{k}")
            }
        };
        match op {
            Op::User(e) => items.push(json!({"role": "user", "content": text(*e, "u")})),
            Op::Image(bad) => {
                // A 1-pixel GIF's base64, or nothing.
                let data = if *bad { "" } else { "R0lGODlhAQABAAAAACw=" };
                let image = match format {
                    Format::Anthropic => {
                        json!({"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": data}})
                    }
                    Format::OpenAiChat => {
                        json!({"type": "image_url", "image_url": {"url": format!("data:image/gif;base64,{data}")}})
                    }
                    _ => {
                        json!({"type": "input_image", "image_url": format!("data:image/gif;base64,{data}")})
                    }
                };
                let words = match format {
                    Format::OpenAiResponses => {
                        json!({"type": "input_text", "text": text(false, "u")})
                    }
                    _ => json!({"type": "text", "text": text(false, "u")}),
                };
                items.push(json!({"role": "user", "content": [words, image]}));
            }
            Op::Assistant(e) => items.push(match format {
                Format::OpenAiResponses => json!({"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": text(*e, "a")}]}),
                _ => json!({"role": "assistant", "content": text(*e, "a")}),
            }),
            Op::Calls {
                n,
                answered,
                error,
                fault,
            } => {
                let ids: Vec<String> = (0..*n)
                    .map(|c| {
                        next += 1;
                        if c == 0 && *fault == 2 {
                            "t1".to_string()
                        } else {
                            format!("t{next}")
                        }
                    })
                    .collect();
                let answers: Vec<(String, bool)> = ids
                    .iter()
                    .take(*answered)
                    .enumerate()
                    .map(|(c, id)| match c {
                        0 if *fault == 1 => (format!("zz{k}"), *error),
                        0 => (id.clone(), *error),
                        _ => (id.clone(), false),
                    })
                    .collect();
                match format {
                    Format::Anthropic => {
                        let uses: Vec<Value> = ids
                            .iter()
                            .map(|id| json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}))
                            .collect();
                        items.push(json!({"role": "assistant", "content": uses}));
                        if !answers.is_empty() {
                            let results: Vec<Value> = answers
                                .iter()
                                .map(|(id, err)| json!({"type": "tool_result", "tool_use_id": id, "content": "out", "is_error": err}))
                                .collect();
                            items.push(json!({"role": "user", "content": results}));
                        }
                    }
                    Format::OpenAiChat => {
                        let calls: Vec<Value> = ids
                            .iter()
                            .map(|id| json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}}))
                            .collect();
                        items.push(
                            json!({"role": "assistant", "content": null, "tool_calls": calls}),
                        );
                        for (id, err) in &answers {
                            let out = if *err { "Error: failed" } else { "out" };
                            items.push(json!({"role": "tool", "tool_call_id": id, "content": out}));
                        }
                    }
                    _ => {
                        for id in &ids {
                            items.push(json!({"type": "function_call", "name": "f", "arguments": "{}", "call_id": id}));
                        }
                        for (id, err) in &answers {
                            let out = if *err { "Error: failed" } else { "out" };
                            items.push(json!({"type": "function_call_output", "call_id": id, "output": out}));
                        }
                    }
                }
            }
        }
        ends.push(items.len());
    }
    let body = match format {
        Format::OpenAiResponses => json!({"model": "m", "input": items}),
        _ => json!({"model": "m", "max_tokens": 8, "messages": items}),
    };
    (body, ends)
}

fn read(format: Format, ops: &[Op]) -> Conversation {
    let (body, _) = build(format, ops);
    format.read(&body).expect("a generated body reads")
}

/// `c` with only its first `n` messages.
fn first(c: &Conversation, n: usize) -> Conversation {
    Conversation {
        messages: c.messages[..n.min(c.messages.len())].to_vec(),
        ..c.clone()
    }
}

/// `head` followed by `tail`'s messages from `from` on.
fn joined(head: &Conversation, tail: &Conversation, from: usize) -> Conversation {
    let mut c = head.clone();
    c.messages.extend_from_slice(&tail.messages[from..]);
    c
}

fn format_of(k: u8) -> Format {
    match k {
        0 => Format::Anthropic,
        1 => Format::OpenAiChat,
        _ => Format::OpenAiResponses,
    }
}

proptest! {
    // Many generated prefixes or outputs are not accepted (the precondition): reject freely.
    #![proptest_config(ProptestConfig {
        cases: 300,
        max_global_rejects: 100_000,
        ..ProptestConfig::default()
    })]

    /// For a prefix that `validate` accepted, or refused only for bad inline images (which a
    /// compaction repairs), and any new messages (faults included), the verdict from the
    /// prefix's junction is the whole conversation's, violation for violation (the prefix's
    /// bad images too), and the junction it returns is the one of the whole; twice in a row.
    #[test]
    fn a_continuation_is_validated_as_the_whole(
        k in 0u8..3,
        ops in prop::collection::vec(op(), 1..14),
        more in prop::collection::vec(op(), 0..6),
        cut in 0usize..14,
        open_prefix in any::<bool>(),
        open_whole in any::<bool>(),
    ) {
        let format = format_of(k);
        let mut all = ops.clone();
        all.extend(more.iter().cloned());
        let whole = read(format, &all);
        let (_, ends) = build(format, &all);
        let split = ends[ops.len() - 1];
        let prefix = first(&whole, split);
        let before = ValidateOptions { allow_open_tail: open_prefix };
        let images_only = |c: &Conversation, o| validate(c, format, o)
            .iter()
            .all(|v| matches!(v.kind, ViolationKind::BadImage { .. }));
        prop_assume!(images_only(&prefix, before));
        let options = ValidateOptions { allow_open_tail: open_whole };
        let junction = Junction::of(&prefix, format);
        prop_assert_eq!(junction.messages(), split);
        let (got, next) = validate_continuation(&whole, &junction, format, options)
            .expect("no references in generated histories");
        prop_assert_eq!(&got, &validate(&whole, format, options));
        prop_assert_eq!(&next, &Junction::of(&whole, format));
        // A second step from the first one's junction, when the first was accepted.
        let mid = ends[(ops.len() - 1 + cut % (more.len() + 1)).min(ends.len() - 1)];
        let middle = first(&whole, mid);
        if images_only(&middle, before) {
            let (_, j1) = validate_continuation(&middle, &junction, format, before)
                .expect("continuable");
            let (again, _) = validate_continuation(&whole, &j1, format, options)
                .expect("continuable");
            prop_assert_eq!(again, validate(&whole, format, options));
        }
    }

    /// A compaction `R` of the input's prefix `P` that the guard accepted, followed by the new
    /// messages: the verdict of [`validate_continuation`] (from `R`'s junction) and
    /// [`check_continuation`] (from `P`'s) equals the full `validate` + `check_compaction_with`
    /// against the whole input, and the counts add up to `count_conversation` exactly.
    #[test]
    fn a_continuation_is_checked_and_counted_as_the_whole(
        k in 0u8..2,
        ops in prop::collection::vec(op(), 2..16),
        more in prop::collection::vec(op(), 0..6),
        cut in any::<prop::sample::Index>(),
        drop in prop::collection::vec(prop::bool::weighted(0.3), 16),
        per_call in 0usize..3,
    ) {
        let format = format_of(k);
        let mut all = ops.clone();
        all.extend(more.iter().cloned());
        let input = read(format, &all);
        let (_, ends) = build(format, &all);
        let from = ends[ops.len() - 1];
        let mut invalid = validate(&input, format, ValidateOptions { allow_open_tail: true });
        invalid.retain(|v| !v.kind.is_repairable());
        prop_assume!(invalid.is_empty());
        let prefix = first(&input, from);
        let prefix_layout = Layout::of(&prefix, format);
        // R: a cut at a round start (or none), then some assistant texts dropped.
        let cuts: Vec<usize> = prefix_layout.cuts().iter()
            .filter(|c| c.kind == CutKind::RoundStart).map(|c| c.index).collect();
        let keep_from = if cuts.is_empty() { prefix_layout.pinned() } else { cuts[cut.index(cuts.len())] };
        let n = prefix.messages.len();
        let output = Conversation {
            messages: prefix.messages.iter().enumerate()
                .filter(|(i, _)| *i < prefix_layout.pinned() || *i >= keep_from)
                .filter(|(i, m)| !(i + 1 < n && m.role == crate::conversation::Role::Assistant
                    && !m.has_tool_uses() && drop[i % drop.len()]))
                .map(|(_, m)| m.clone()).collect(),
            ..prefix.clone()
        };
        let output_options = ValidateOptions { allow_open_tail: prefix_layout.ends_with_open_call() };
        prop_assume!(validate(&output, format, output_options).is_empty());
        prop_assume!(check_compaction_with(&prefix, &prefix_layout, &output, format, Some(&[])).is_empty());
        let continuation = joined(&output, &input, from);
        let input_layout = Layout::of(&input, format);
        let options = ValidateOptions { allow_open_tail: input_layout.ends_with_open_call() };
        let mut expected = validate(&continuation, format, options);
        expected.extend(check_compaction_with(&input, &input_layout, &continuation, format, Some(&[])));

        let input_junction = Junction::of(&prefix, format);
        let open = input_junction.last_exchange(&input).is_some_and(|e| e.open);
        prop_assert_eq!(open, options.allow_open_tail);
        let (mut got, _) = validate_continuation(&continuation, &Junction::of(&output, format), format, options)
            .expect("continuable");
        got.extend(check_continuation(&input, from, &input_junction, &continuation).expect("decidable"));
        prop_assert_eq!(got, expected);

        let bare = TiktokenCounter::default();
        let counter = FramedCounter::new(&bare, per_call);
        let new: usize = input.messages[from..].iter().map(|m| counter.count_message(m)).sum();
        prop_assert_eq!(counter.count_conversation(&prefix) + new, counter.count_conversation(&input));
        prop_assert_eq!(counter.count_conversation(&output) + new, counter.count_conversation(&continuation));
    }
}

/// The case the junction check exists for: the input's last exchange began in the remembered
/// prefix (an assistant run across the junction), and the output dropped a message of it.
#[test]
fn an_open_loop_begun_in_the_prefix_must_be_kept_by_the_output() {
    let input = Format::Anthropic
        .read(&json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "thinking aloud"},
            {"role": "assistant", "content": "still"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]}
        ]}))
        .expect("readable");
    let prefix = first(&input, 3);
    let output = Conversation {
        messages: vec![prefix.messages[0].clone(), prefix.messages[2].clone()],
        ..prefix.clone()
    };
    assert!(check_compaction(&prefix, &output, Format::Anthropic).is_empty());
    let continuation = joined(&output, &input, 3);
    let got = check_continuation(
        &input,
        3,
        &Junction::of(&prefix, Format::Anthropic),
        &continuation,
    )
    .expect("decidable");
    let kinds: Vec<_> = got.iter().map(|v| v.kind.clone()).collect();
    assert_eq!(kinds, vec![ViolationKind::OpenLoopChanged]);
    assert_eq!(
        got,
        check_compaction(&input, &continuation, Format::Anthropic)
    );
}
