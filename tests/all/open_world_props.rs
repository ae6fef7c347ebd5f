//! Open world, as a property: random valid histories with invented roles, block types and
//! Responses item types put at random places between their exchanges, compacted by every
//! preset at random budgets. Each invented unit reaches the output byte-identical and in
//! order; the independent checker (../shared/tools/check_request.py) finds no fault in the
//! output it did not find in the input; the budget is met unless the report says it could not.

use crate::guard_props::{persisted, plan, read, render};
use crate::support::checker::{Batch, Body};
use crate::support::{run_cases, runtime};
use compactor::config::Loader;
use compactor::format::Format;
use compactor::{Compactor, Status};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::OnceLock;

const PRESETS: [&str; 3] = ["default", "truncate", "microcompact"];

fn engines() -> &'static Vec<Compactor> {
    static ENGINES: OnceLock<Vec<Compactor>> = OnceLock::new();
    ENGINES.get_or_init(|| {
        PRESETS
            .iter()
            .map(|p| {
                let mut s = Loader {
                    preset: Some(p.to_string()),
                    env: false,
                    ..Loader::default()
                }
                .load()
                .unwrap();
                s.policy.remember = false;
                Compactor::from_config(s).unwrap()
            })
            .collect()
    })
}

/// The checker's findings, with the message index taken out of each (`messages[3]: x` -> `x`),
/// so input and output findings compare.
fn findings(faults: &[String]) -> BTreeSet<String> {
    faults
        .iter()
        .map(|l| match l.split_once("]: ") {
            Some((_, rest)) => rest.to_string(),
            None => l.clone(),
        })
        .collect()
}

/// `body` for the checker: its rules only, a call may wait at the end.
fn judged(label: String, body: &Value, format: Format) -> Body {
    Body {
        label,
        output: body.to_string().into_bytes(),
        input: None,
        format: Some(format.as_str()),
        open_tail: true,
    }
}

/// An invented unit of `format` numbered `n`: a message of a role no table holds (Anthropic,
/// Chat) or an item of a type none holds (Responses).
fn invented_message(format: Format, n: usize) -> Value {
    match format {
        Format::OpenAiResponses => {
            json!({"type": format!("x_item_{n}"), "id": format!("x{n}"), "payload": [n, 1.50]})
        }
        _ => {
            json!({"role": format!("x_role_{n}"), "content": format!("invented {n}"), "x_weight": 0.25})
        }
    }
}

fn items(format: Format, body: &mut Value) -> &mut Vec<Value> {
    let key = format.messages_key();
    if body.is_array() {
        body.as_array_mut().unwrap()
    } else {
        body[key].as_array_mut().unwrap()
    }
}

/// Each case's input and, per preset, its output, for the checker after the cases; then no output
/// may hold a finding its input does not.
#[test]
fn invented_units_survive_in_order_and_add_no_fault() {
    const NAME: &str = "invented_units_survive_in_order_and_add_no_fault";
    let values = (
        plan(1),
        prop::collection::vec(any::<prop::sample::Index>(), 1..4),
        any::<bool>(),
        0.1f64..1.2,
    );
    // The bodies, and per case the index of its input and of its outputs in the batch.
    let batch = RefCell::new(Batch::new(NAME));
    let cases: RefCell<Vec<(usize, Vec<usize>)>> = RefCell::default();
    run_cases(
        NAME,
        file!(),
        persisted(40),
        values,
        |(plan, picks, block, share)| {
            let format = plan.format;
            let rendered = render(&plan);
            let mut body = rendered.body.clone();
            // Invented messages or items before round starts (never inside an exchange), last
            // first so earlier indices hold.
            let mut at: Vec<usize> = picks
                .iter()
                .map(|p| rendered.round_starts[p.index(rendered.round_starts.len())])
                .collect();
            at.sort_unstable();
            at.dedup();
            let mut invented: Vec<Value> = Vec::new();
            for (n, &i) in at.iter().enumerate().rev() {
                let unit = invented_message(format, n);
                items(format, &mut body).insert(i, unit.clone());
                invented.insert(0, unit);
            }
            // Anthropic: an invented block in the first round-start user message after the first.
            let mut invented_block = None;
            if block && format == Format::Anthropic && rendered.round_starts.len() > 1 {
                let target = items(format, &mut body)
                    .iter_mut()
                    .filter(|m| m["role"] == "user" && m["content"].is_string())
                    .nth(1);
                if let Some(m) = target {
                    let note = json!({"type": "x_note", "v": [1, 2.50]});
                    let text = m["content"].clone();
                    m["content"] = json!([{"type": "text", "text": text}, note]);
                    invented_block = Some(note);
                }
            }
            let input = read(format, &body);
            let case = cases.borrow().len();
            let mut batch = batch.borrow_mut();
            let judged_in = batch.len();
            batch.push(judged(
                format!("case {case} ({format:?}): input"),
                &body,
                format,
            ));
            let mut judged_out = Vec::new();
            for (preset, engine) in PRESETS.iter().zip(engines()) {
                let tokens = engine.counter().count_conversation(&input);
                let budget = ((tokens as f64 * share) as usize).max(1);
                let out = runtime()
                    .block_on(engine.compact(&input, format, Some(budget)))
                    .unwrap();
                let written = format.write(&out.conversation);
                let mut kept = written.clone();
                let out_items = items(format, &mut kept).clone();
                // Each invented unit, byte-identical, in order.
                let mut from = 0;
                for unit in &invented {
                    let found = out_items[from..].iter().position(|m| m == unit);
                    prop_assert!(
                        found.is_some(),
                        "{preset} @ {budget}: {unit} lost or out of order"
                    );
                    from += found.unwrap() + 1;
                }
                if let Some(note) = &invented_block {
                    prop_assert!(
                        out_items
                            .iter()
                            .any(|m| m["content"].as_array().is_some_and(|c| c.contains(note))),
                        "{preset} @ {budget}: the invented block is lost"
                    );
                }
                judged_out.push(batch.len());
                batch.push(judged(
                    format!("case {case} ({format:?}): {preset} @ {budget}"),
                    &written,
                    format,
                ));
                let r = &out.report;
                prop_assert!(
                    !r.opaque.is_empty(),
                    "{preset}: the report lists no opaque unit"
                );
                if *preset != "microcompact" && r.status != Status::OverBudget {
                    prop_assert!(
                        r.tokens_after <= budget,
                        "{preset}: {} > {budget}",
                        r.tokens_after
                    );
                }
            }
            cases.borrow_mut().push((judged_in, judged_out));
            Ok(())
        },
    );
    let (batch, cases) = (batch.into_inner(), cases.into_inner());
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let faults = batch.faults();
    for (judged_in, judged_out) in cases {
        let before = findings(&faults[judged_in]);
        for out in judged_out {
            let new: Vec<String> = findings(&faults[out])
                .difference(&before)
                .cloned()
                .collect();
            assert!(new.is_empty(), "{}: new faults {new:?}", batch.label(out));
        }
    }
    batch.remove_files();
}
