//! Property: random valid histories x random budgets x every preset -> a valid output that is
//! never longer than the input, and the input itself when it is under the trigger.

use crate::guard_props::{plan, read, render};
use compactor::config::Loader;
use compactor::conversation::{Block, Conversation, ToolResultContent};
use compactor::guard::{self, Units, ValidateOptions};
use compactor::{Compactor, Status};
use proptest::prelude::*;
use std::borrow::Cow;
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
                s.policy.remember = false; // every case is a fresh history
                Compactor::from_config(s).unwrap()
            })
            .collect()
    })
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    })
}

/// Makes tool results (and assistant texts) longer, so budgets bite: each text repeated
/// `scale` times.
fn inflate(c: &mut Conversation, scale: usize) {
    for m in &mut c.messages {
        for b in &mut m.content {
            match b {
                Block::ToolResult(r) => match &mut r.content {
                    Some(ToolResultContent::Text(s)) => *s = vec![s.as_str(); scale].join("\n"),
                    Some(ToolResultContent::Blocks(bs)) => {
                        for b in bs {
                            if let Block::Text(t) = b {
                                t.text = vec![t.text.as_str(); scale].join("\n");
                            }
                        }
                    }
                    None => {}
                },
                Block::Text(t) if scale > 50 => {
                    t.text = vec![t.text.as_str(); scale / 10].join(" ")
                }
                _ => {}
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]
    #[test]
    fn every_preset_gives_a_valid_never_longer_output_at_any_budget(
        plan in plan(1),
        scale in 1usize..300,
        share in 0.05f64..1.5,
    ) {
        let format = plan.format;
        let mut input = read(format, &render(&plan).body);
        inflate(&mut input, scale);
        let open = Units::of(&input).exchanges.last().is_some_and(|e| e.open);
        for (preset, engine) in PRESETS.iter().zip(engines()) {
            let before = engine.counter().count_conversation(&input);
            let budget = ((before as f64 * share) as usize).max(1);
            let out = runtime().block_on(engine.compact(&input, format, Some(budget))).unwrap();
            let r = &out.report;
            let violations = guard::validate(&out.conversation, format, ValidateOptions { allow_open_tail: open });
            prop_assert!(violations.is_empty(), "{preset} @ {budget}: {}", violations[0]);
            let lost = guard::check_compaction(&input, &out.conversation, format);
            prop_assert!(lost.is_empty(), "{preset} @ {budget}: {}", lost[0]);
            prop_assert_eq!(r.tokens_before, before);
            prop_assert!(r.tokens_after <= r.tokens_before, "{preset}: grew {} -> {}", r.tokens_before, r.tokens_after);
            prop_assert_eq!(r.tokens_after, engine.counter().count_conversation(&out.conversation));
            if before <= r.trigger {
                prop_assert!(matches!(out.conversation, Cow::Borrowed(_)), "{preset}: changed under the trigger");
                prop_assert_eq!(r.status, Status::Unchanged);
            }
            if *preset != "microcompact" && r.status != Status::OverBudget {
                prop_assert!(r.tokens_after <= budget, "{preset}: {} > budget {budget} with status {:?}", r.tokens_after, r.status);
            }
            // What is written reads back and writes again as the same JSON.
            let written = format.write(&out.conversation);
            prop_assert_eq!(&format.write(&read(format, &written)), &written);
        }
    }
}
