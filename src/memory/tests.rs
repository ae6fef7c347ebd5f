use super::*;
use crate::guard::Junction;
use crate::tokens::ModelTokens;
use serde_json::json;

/// A conversation of `n` user/assistant turns whose texts are `size` bytes each, tagged by
/// `tag` so two conversations never share a prefix.
fn conversation(tag: usize, n: usize, size: usize) -> Conversation {
    let messages: Vec<_> = (0..n)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": format!("{tag}:{i}:{}", "x".repeat(size))})
        })
        .collect();
    Format::Anthropic
        .read(&json!({"model": "m", "max_tokens": 1, "messages": messages}))
        .unwrap()
}

#[test]
fn distinct_outputs_are_evicted_to_stay_under_the_byte_bound() {
    let memory = Memory::with_max_bytes(1_000_000);
    let one = estimated_bytes(&conversation(0, 10, 10_000)) as u64;
    assert!(one > 100_000 && one < 110_000, "{one}");
    for tag in 0..40 {
        let c = conversation(tag, 10, 10_000);
        memory.remember(&PrefixHashes::of(&c, 7), &c, None, &[]);
    }
    assert!(memory.bytes() <= 1_000_000, "{}", memory.bytes());
    assert!(memory.len() < 40 && !memory.is_empty(), "{}", memory.len());
}

#[test]
fn a_changed_field_of_an_earlier_tool_call_or_result_is_another_prefix() {
    let body = |use_extra: serde_json::Value, result_extra: serde_json::Value| {
        let mut call =
            json!({"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}});
        let mut result = json!({"type": "tool_result", "tool_use_id": "t1", "content": "a.rs"});
        for (block, extra) in [(&mut call, use_extra), (&mut result, result_extra)] {
            if let (Some(b), Some(e)) = (block.as_object_mut(), extra.as_object()) {
                b.extend(e.clone());
            }
        }
        let messages = json!([
            {"role": "user", "content": "list the files"},
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
            {"role": "assistant", "content": "done"},
        ]);
        let c = Format::Anthropic
            .read(&json!({"model": "m", "max_tokens": 1, "messages": messages}))
            .unwrap();
        PrefixHashes::of(&c, 7)
    };
    let plain = body(json!({}), json!({}));
    for (u, r) in [
        (json!({"caller": {"type": "direct"}}), json!({})),
        (json!({}), json!({"x_meta": 1})),
    ] {
        let changed = body(u, r);
        assert_eq!(changed.key(1), plain.key(1));
        assert_ne!(changed.key(4), plain.key(4));
    }
    // A moved prompt-cache breakpoint is the same prefix.
    let marked = body(json!({}), json!({"cache_control": {"type": "ephemeral"}}));
    assert_eq!(marked.key(4), plain.key(4));
}

#[test]
fn the_longest_remembered_prefix_is_recalled() {
    let memory = Memory::default();
    let long = conversation(1, 12, 10);
    let short = Conversation {
        messages: long.messages[..4].to_vec(),
        ..long.clone()
    };
    let output = conversation(9, 2, 10);
    memory.remember(&PrefixHashes::of(&short, 3), &output, None, &[]);
    let longer_prefix = Conversation {
        messages: long.messages[..8].to_vec(),
        ..long.clone()
    };
    memory.remember(
        &PrefixHashes::of(&longer_prefix, 3),
        &short,
        Some("summary failed"),
        &[FailureRecord {
            id: "call_7".into(),
            message: 1,
        }],
    );
    let (len, got) = memory.recall(&PrefixHashes::of(&long, 3)).unwrap();
    assert_eq!(len, 8);
    assert_eq!(got.output, short);
    assert_eq!(got.degraded.as_deref(), Some("summary failed"));
    // The typed failure records come back with the output they belong to.
    assert_eq!(got.failures.len(), 1);
    assert_eq!(
        (got.failures[0].id.as_str(), got.failures[0].message),
        ("call_7", 1)
    );
    // Another context tag (another budget) recalls nothing.
    assert!(memory.recall(&PrefixHashes::of(&long, 4)).is_none());
}
/// `c` with its first `kept` messages and then `new` more (tagged `tag`).
fn grown(c: &Conversation, kept: usize, new: usize, tag: usize) -> Conversation {
    let mut g = c.clone();
    g.messages.truncate(kept);
    g.messages.extend(conversation(tag, new, 5).messages);
    g
}

proptest::proptest! {
    /// Extending the hashes of a conversation for one that keeps its first `kept`
    /// messages gives the hashes of the whole, for any split, tag and context.
    #[test]
    fn extended_hashes_are_the_hashes_of_the_whole(
        n in 0usize..12, kept in 0usize..14, new in 0usize..6, tag in 0u64..3,
        same_tag: bool, same_system: bool,
    ) {
        let first = conversation(1, n, 8);
        let mut next = grown(&first, kept, new, 2);
        if !same_system {
            next.system = Some(json!("another system prompt"));
        }
        let other_tag = if same_tag { tag } else { tag + 1 };
        let got = PrefixHashes::of(&first, tag).extended(&next, kept, other_tag);
        proptest::prop_assert_eq!(got, PrefixHashes::of(&next, other_tag));
    }
}

#[test]
fn a_taken_output_is_moved_and_its_continuation_leaves_a_view() {
    let memory = Memory::default();
    let first = conversation(3, 6, 10);
    let hashes = PrefixHashes::of(&first, 1);
    let output = Arc::new(conversation(4, 2, 10));
    let continuation = |c: &Conversation| Continuation {
        basis: ModelTokens::counter(crate::tokens::Tokenizer::O200kBase),
        input_tokens: 1,
        output_tokens: 1,
        input: Junction::of(c, Format::Anthropic),
        output: Junction::of(c, Format::Anthropic),
        cycle: super::Cycle::start(1),
    };
    memory.remember_shared(&hashes, &output, None, &[], continuation(&first), None);
    let address = Arc::as_ptr(&output);
    drop(output);
    let next = grown(&first, 6, 2, 5);
    let next_hashes = PrefixHashes::of(&next, 1);
    let taken = memory.take(&next_hashes).expect("remembered");
    assert_eq!((taken.len, taken.removed), (6, true));
    // Moved out: the same messages, not a copy of them.
    assert_eq!(taken.remembered.output, conversation(4, 2, 10));
    assert!(memory.recall(&hashes).is_none(), "it left the memory");
    // Its continuation: the output plus the new messages, remembered with a view of its
    // first two messages in the predecessor's place.
    let mut out = taken.remembered.output;
    out.messages.extend_from_slice(&next.messages[6..]);
    let out = Arc::new(out);
    let predecessor = Predecessor {
        len: 6,
        messages: 2,
        degraded: Some("why".into()),
        failures: vec![],
        continuation: None,
        messages_bytes: taken.messages_bytes,
    };
    memory.remember_shared(
        &next_hashes,
        &out,
        None,
        &[],
        continuation(&next),
        Some(predecessor),
    );
    // The continuation's weight, summed from its predecessor's and its new messages',
    // is the whole estimate (and the view's 64 bytes).
    assert_eq!(
        memory.bytes() as usize,
        estimated_bytes(&out) + continuation(&next).estimated_bytes() + 64
    );
    let (len, view) = memory.recall(&hashes).expect("the view");
    assert_eq!(len, 6);
    assert_eq!(view.output, conversation(4, 2, 10));
    assert_eq!(view.degraded.as_deref(), Some("why"));
    let (len, whole) = memory.recall(&next_hashes).expect("the continuation");
    assert_eq!((len, &whole.output), (8, &*out));
    assert_ne!(address, Arc::as_ptr(&out));
    // Taking the continuation (nothing else holds it) moves it; the view is then gone.
    drop(out);
    let again = memory.take(&next_hashes).expect("remembered");
    assert_eq!((again.len, again.removed), (8, true));
    assert!(memory.recall(&hashes).is_none());
    assert_eq!(memory.longest(&next_hashes), None);
    // Put back, it is there again.
    memory.put_back(&next_hashes, 8, again.remembered);
    assert_eq!(memory.longest(&next_hashes), Some(8));
}
