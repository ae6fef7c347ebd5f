//! The recall entries [`apply`] returns are exactly the recall ids its output names: one entry
//! per id the guard's writers wrote into an applied edit, in plan order, each the input's own
//! JSON of the block or the messages it stands for.

use super::*;
use crate::format::Format;
use crate::guard::MessageTokens;
use crate::guard::write::{cap, clear, drop_marker};
use crate::recall::{Entry, RecallKind};
use crate::tokens::{Tokenizer, counter_for};
use proptest::prelude::*;
use serde_json::{Value, json};

/// An Anthropic history of one round per output (a request, a call, its result: failed when
/// the flag says so), then a closing question.
fn rounds(outputs: &[(String, bool)]) -> Value {
    let mut messages = Vec::new();
    for (k, (output, failed)) in outputs.iter().enumerate() {
        let id = format!("toolu_{k}");
        let mut result = json!({"type": "tool_result", "tool_use_id": id, "content": output});
        if *failed {
            result["is_error"] = json!(true);
        }
        messages.push(json!({"role": "user", "content": format!("step {k}")}));
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": output}}]}));
        messages.push(json!({"role": "user", "content": [result]}));
    }
    messages.push(json!({"role": "user", "content": "done?"}));
    json!({"messages": messages})
}

/// The recall ids `text` names (`recall rc_` and 32 hex digits), in order.
fn named_ids(text: &str) -> Vec<String> {
    let skip = "recall ".len();
    text.match_indices("recall rc_")
        .map(|(at, _)| {
            text.get(at + skip..at + skip + 35)
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

/// The input's JSON an entry stands for, read from the request body: the block (a block), the
/// array of the messages (a span).
fn original_in(body: &Value, e: &Entry) -> Value {
    let r = &e.reference;
    match r.kind {
        RecallKind::Block => body["messages"][r.message]["content"][r.end].clone(),
        RecallKind::Span => {
            Value::Array(body["messages"].as_array().unwrap()[r.message..r.end].to_vec())
        }
    }
}

/// The ids of the entries the plan's sealed values carry, in plan order.
fn carried(plan: &[UnitEdit]) -> Vec<String> {
    plan.iter()
        .filter_map(|e| match e {
            UnitEdit::Cap(c) => c.recall(),
            UnitEdit::Clear(c) => c.recall(),
            UnitEdit::Drop { marker, .. } => marker.recall(),
            _ => None,
        })
        .map(|e| e.reference.id.clone())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Random histories, each round's result cleared or capped (naming its recall id or not),
    /// and maybe a drop up to a random legal cut (its marker naming the span's id or not).
    #[test]
    fn the_recall_entries_of_an_applied_plan_are_the_ids_its_output_names(
        outputs in prop::collection::vec(
            (prop::collection::vec("[a-z0-9 ./:=-]{0,60}", 10..80), any::<bool>()), 1..6),
        choices in prop::collection::vec((0u8..3, any::<bool>()), 6),
        drop in prop::option::of((any::<prop::sample::Index>(), any::<bool>())),
        cap_tokens in 8usize..120,
    ) {
        let outputs: Vec<(String, bool)> =
            outputs.into_iter().map(|(lines, failed)| (lines.join("\n"), failed)).collect();
        let body = rounds(&outputs);
        let format = Format::Anthropic;
        let input = format.read(&body).unwrap();
        let counter = counter_for(Tokenizer::default());
        let counter = counter.as_ref();
        let layout = Layout::of(&input, format);
        let tokens = MessageTokens::of(&input, counter);
        let cuts = layout.cuts();
        let pinned = layout.pinned();
        let to = match &drop {
            Some((i, _)) if !cuts.is_empty() => Some(cuts[i.index(cuts.len())].index),
            _ => None,
        };
        let mut plan = Vec::new();
        for (k, &(how, named)) in choices.iter().enumerate().take(outputs.len()) {
            let at = (3 * k + 2, 0);
            if to.is_some_and(|to| at.0 < to) || layout.is_protected(at.0) {
                continue;
            }
            let before = counter.count_block(&input.messages[at.0].content[0]);
            match how {
                0 => {
                    if let Some(c) = clear(&input, at, ("Bash", before), named, counter, format) {
                        plan.push(UnitEdit::Clear(c));
                    }
                }
                1 => {
                    if let Some(mut c) = cap(&input, at, cap_tokens, before, counter) {
                        if named {
                            prop_assert!(c.name_recall(&input, format));
                            // One id per block: a second naming is refused.
                            prop_assert!(!c.name_recall(&input, format));
                        }
                        plan.push(UnitEdit::Cap(c));
                    }
                }
                _ => {}
            }
        }
        if let (Some(to), Some((_, named))) = (to, drop) {
            let mut marker = drop_marker(&input, &tokens, pinned..to, 400, counter);
            if named {
                prop_assert!(marker.name_recall(&input, format, pinned..to));
            }
            plan.push(UnitEdit::Drop { to, marker });
        }
        let in_plan = carried(&plan);
        let applied = apply(&input, &layout, plan, Some(&[])).unwrap();
        let listed: Vec<String> = applied.recall.iter().map(|e| e.reference.id.clone()).collect();
        // In plan order, as the writers named them.
        prop_assert_eq!(&listed, &in_plan);
        // Exactly the ids the output names (the input names none).
        let mut named = named_ids(&format.write(&applied.conversation).to_string());
        let mut listed = listed;
        named.sort();
        listed.sort();
        prop_assert_eq!(named, listed);
        for e in &applied.recall {
            prop_assert_eq!(
                serde_json::from_str::<Value>(&e.original).unwrap(),
                original_in(&body, e)
            );
            prop_assert_eq!(e.reference.bytes, e.original.len());
        }
    }
}

#[test]
fn a_marker_naming_the_recall_id_of_other_messages_than_its_drop_is_refused() {
    let outputs: Vec<(String, bool)> = (0..3).map(|k| (format!("out {k}"), false)).collect();
    let input = Format::Anthropic.read(&rounds(&outputs)).unwrap();
    let counter = counter_for(Tokenizer::default());
    let layout = Layout::of(&input, Format::Anthropic);
    let tokens = MessageTokens::of(&input, counter.as_ref());
    let (pinned, to) = (layout.pinned(), 3);
    assert!(layout.cuts().iter().any(|c| c.index == to));
    let drop = |named: std::ops::Range<usize>| {
        let mut marker = drop_marker(&input, &tokens, pinned..to, 400, counter.as_ref());
        assert!(marker.name_recall(&input, Format::Anthropic, named));
        vec![UnitEdit::Drop { to, marker }]
    };
    assert_eq!(
        apply(&input, &layout, drop(pinned..to + 1), Some(&[])).err(),
        Some(PlanError::RecallElsewhere {
            edit: 0,
            from: pinned,
            end: to + 1
        })
    );
    let applied = apply(&input, &layout, drop(pinned..to), Some(&[])).unwrap();
    assert_eq!(applied.recall.len(), 1);
}
