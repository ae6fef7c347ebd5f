//! Properties: random valid histories x random budgets x every preset -> a valid output that is
//! never longer than the input (no tier refused), and the input itself when it is under the
//! trigger; and each strategy called directly -> a plan that `guard::apply` accepts, whose
//! output passes the guard. The guard is the code under test, so a sample of the outputs of both
//! also goes to the independent checker (../shared/tools/check_request.py, with the input for
//! its preservation rules), all of a property's sample in one Python run after its cases.

use crate::guard_props::{persisted, plan, read, render};
use crate::support::checker::{Batch, Body};
use crate::support::{run_cases, runtime};
use compactor::config::{Loader, Settings};
use compactor::conversation::{Block, Conversation, ToolResultContent};
use compactor::format::Format;
use compactor::guard::{self, Layout, MessageTokens, Units, ValidateOptions};
use compactor::llm::{LlmError, Summarizer, SummaryRequest};
use compactor::registry::{Built, Registry};
use compactor::strategy::microcompact::{Microcompact, MicrocompactConfig};
use compactor::strategy::summary::{DEFAULT_PROMPT, Summary, SummaryConfig};
use compactor::strategy::truncate::{Truncate, TruncateConfig};
use compactor::strategy::{Budget, Context, Strategy};
use compactor::tokens::{TiktokenCounter, TokenCounter, Tokenizer, counter_for};
use compactor::{Compactor, Status};
use proptest::prelude::*;
use proptest::test_runner::TestCaseResult;
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::OnceLock;

/// The presets, and last `default` with its `summary` tier on the in-process [`Echo`].
const PRESETS: [&str; 4] = ["default", "truncate", "microcompact", "default+summary"];

fn engines() -> &'static Vec<Compactor> {
    static ENGINES: OnceLock<Vec<Compactor>> = OnceLock::new();
    ENGINES.get_or_init(|| {
        let mut registry = Registry::builtin();
        registry.register("summary", |s: &Settings| {
            Ok(Built::Ready(Box::new(Summary::new(
                Arc::new(Echo),
                s.summary.clone(),
                DEFAULT_PROMPT.to_string(),
                s.truncate.clone(),
            ))))
        });
        PRESETS
            .iter()
            .map(|p| {
                let mut s = Loader {
                    preset: Some(p.trim_end_matches("+summary").to_string()),
                    env: false,
                    ..Loader::default()
                }
                .load()
                .unwrap();
                s.policy.remember = false; // every case is a fresh history
                if p.ends_with("+summary") {
                    assert!(s.policy.tiers.iter().any(|t| t == "summary"));
                    return Compactor::from_registry(s, &registry).unwrap();
                }
                Compactor::from_config(s).unwrap()
            })
            .collect()
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

/// Every [`SAMPLED`]th case of a property has its outputs judged by the checker too.
const SAMPLED: usize = 5;

/// The outputs a property sends to the independent checker: those of every [`SAMPLED`]th case.
struct Sample {
    batch: RefCell<Batch>,
    case: Cell<usize>,
}

impl Sample {
    /// Starts the next case; whether its outputs are in the sample.
    fn next_case(&self) -> (usize, bool) {
        let n = self.case.get();
        self.case.set(n + 1);
        (n, n.is_multiple_of(SAMPLED))
    }

    /// `output`, compacted from `input` (bodies of `format`), for the checker with `label`.
    fn add(
        &self,
        label: String,
        format: Format,
        input: &Conversation,
        output: &Conversation,
        open: bool,
    ) {
        self.batch.borrow_mut().push(Body {
            label,
            output: format.write(output).to_string().into_bytes(),
            input: Some(format.write(input).to_string().into_bytes()),
            format: Some(format.as_str()),
            open_tail: open,
        });
    }
}

/// Runs `property` on `cases` cases of `values` (see [`run_cases`]), then has the independent
/// checker judge what the cases put in the [`Sample`], in one Python run.
fn run_and_check<S>(
    name: &'static str,
    cases: u32,
    values: S,
    property: impl Fn(S::Value, &Sample) -> TestCaseResult,
) where
    S: proptest::strategy::Strategy,
    S::Value: Debug,
{
    let sample = Sample {
        batch: RefCell::new(Batch::new(name)),
        case: Cell::new(0),
    };
    run_cases(name, file!(), persisted(cases), values, |v| {
        property(v, &sample)
    });
    let batch = sample.batch.into_inner();
    assert!(
        batch.len() >= cases as usize / SAMPLED / 2,
        "{name}: only {} outputs sampled",
        batch.len()
    );
    batch.assert_valid();
}

#[test]
fn every_preset_gives_a_valid_never_longer_output_at_any_budget() {
    let values = (plan(1), 1usize..300, 0.05f64..1.5);
    run_and_check(
        "every_preset_gives_a_valid_never_longer_output_at_any_budget",
        600,
        values,
        |(plan, scale, share), sample| {
            let (case, sampled) = sample.next_case();
            let format = plan.format;
            let mut input = read(format, &render(&plan).body);
            inflate(&mut input, scale);
            let open = Units::of(&input, format)
                .exchanges
                .last()
                .is_some_and(|e| e.open);
            for (preset, engine) in PRESETS.iter().zip(engines()) {
                let before = engine.counter().count_conversation(&input);
                let budget = ((before as f64 * share) as usize).max(1);
                let out = runtime()
                    .block_on(engine.compact(&input, format, Some(budget)))
                    .unwrap();
                let r = &out.report;
                let violations = guard::validate(
                    &out.conversation,
                    format,
                    ValidateOptions {
                        allow_open_tail: open,
                    },
                );
                prop_assert!(
                    violations.is_empty(),
                    "{preset} @ {budget}: {}",
                    violations[0]
                );
                let lost = guard::check_compaction(&input, &out.conversation, format);
                prop_assert!(lost.is_empty(), "{preset} @ {budget}: {}", lost[0]);
                // Every tier that produced an output had it taken or found not smaller: none refused.
                for t in &r.tiers {
                    prop_assert!(
                        t.refused.is_none(),
                        "{preset} @ {budget}: {} refused: {:?}",
                        t.strategy,
                        t.refused
                    );
                }
                prop_assert_eq!(r.tokens_before, before);
                prop_assert!(
                    r.tokens_after <= r.tokens_before,
                    "{preset}: grew {} -> {}",
                    r.tokens_before,
                    r.tokens_after
                );
                prop_assert_eq!(
                    r.tokens_after,
                    engine.counter().count_conversation(&out.conversation)
                );
                // And by a counter without a cache: a count the strategies summed from parts (a cut
                // text, a marker; kept in the engine's cache) is the plain count of the output.
                prop_assert_eq!(
                    r.tokens_after,
                    TiktokenCounter::new(Tokenizer::O200kBase)
                        .count_conversation(&out.conversation)
                );
                if before <= r.trigger {
                    prop_assert!(
                        matches!(out.conversation, Cow::Borrowed(_)),
                        "{preset}: changed under the trigger"
                    );
                    prop_assert_eq!(r.status, Status::Unchanged);
                }
                if *preset != "microcompact" && r.status != Status::OverBudget {
                    prop_assert!(
                        r.tokens_after <= budget,
                        "{preset}: {} > budget {budget} with status {:?}",
                        r.tokens_after,
                        r.status
                    );
                }
                // What is written reads back and writes again as the same JSON.
                let written = format.write(&out.conversation);
                prop_assert_eq!(&format.write(&read(format, &written)), &written);
                if sampled && r.status != Status::Unchanged {
                    let label = format!(
                        "case {case} ({format:?}, scale {scale}, share {share}), {preset} @ {budget}: {:?}",
                        r.status
                    );
                    sample.add(label, format, &input, &out.conversation, open);
                }
            }
            Ok(())
        },
    );
}

/// A deterministic in-process summarizer: no network, the same answer for the same material.
struct Echo;

#[async_trait::async_trait]
impl Summarizer for Echo {
    fn model(&self) -> &str {
        "echo"
    }
    fn context_window(&self) -> usize {
        200_000
    }
    async fn complete(&self, request: &SummaryRequest) -> Result<String, LlmError> {
        let lines = request.user.lines().count();
        Ok(format!(
            "The user and the agent worked through {lines} transcript lines."
        ))
    }
}

/// Every strategy, as the pipeline builds it, but called directly.
fn strategies() -> Vec<Box<dyn Strategy>> {
    let truncate = TruncateConfig::default();
    vec![
        Box::new(Truncate {
            config: truncate.clone(),
        }),
        Box::new(Microcompact {
            config: MicrocompactConfig {
                keep_recent: 1,
                ..MicrocompactConfig::default()
            },
        }),
        Box::new(Summary::new(
            Arc::new(Echo),
            SummaryConfig::default(),
            DEFAULT_PROMPT.to_string(),
            truncate,
        )),
    ]
}

#[test]
fn every_strategys_plan_is_accepted_by_apply_and_its_output_passes_the_guard() {
    let values = (plan(1), 1usize..200, 0.05f64..1.2);
    run_and_check(
        "every_strategys_plan_is_accepted_by_apply_and_its_output_passes_the_guard",
        400,
        values,
        |(plan, scale, share), sample| {
            let (case, sampled) = sample.next_case();
            let format = plan.format;
            let mut input = read(format, &render(&plan).body);
            inflate(&mut input, scale);
            let layout = Layout::of(&input, format);
            let counter = counter_for(Tokenizer::default());
            let limit = ((counter.count_conversation(&input) as f64 * share) as usize).max(1);
            let budget = Budget {
                limit,
                target: limit * 3 / 5,
            };
            let options = ValidateOptions {
                allow_open_tail: layout.ends_with_open_call(),
            };
            // Counted once: every strategy is given the same input.
            let tokens = MessageTokens::of(&input, counter.as_ref());
            for strategy in strategies() {
                let name = strategy.name().to_string();
                let cx = Context {
                    format,
                    counter: counter.as_ref(),
                    instructions: None,
                    layout: &layout,
                    tokens: &tokens,
                    recall: false,
                };
                let c = runtime()
                    .block_on(strategy.compact(&input, budget, &cx))
                    .unwrap();
                if c.plan.is_empty() {
                    continue;
                }
                let edits = c.plan.len();
                let applied = guard::apply(&input, &layout, c.plan, Some(&[]));
                prop_assert!(
                    applied.is_ok(),
                    "{name}: plan refused: {}",
                    applied.unwrap_err()
                );
                let applied = applied.unwrap();
                // Every applied plan says what it did: one report edit per edit (a call input
                // cleared with its result aside).
                prop_assert!(
                    !applied.edits.is_empty() && applied.edits.len() <= edits,
                    "{name}: {} report edits for a plan of {edits}",
                    applied.edits.len()
                );
                let (mut out, records) = (applied.conversation, applied.records);
                guard::settle(format, &mut out);
                let v = guard::validate(&out, format, options);
                prop_assert!(v.is_empty(), "{name}: {}", v[0]);
                let lost =
                    guard::check_compaction_with(&input, &layout, &out, format, records.as_deref());
                prop_assert!(lost.is_empty(), "{name}: {}", lost[0]);
                let env = guard::check_envelope(&input, &out, format);
                prop_assert!(env.is_empty(), "{name}: {}", env[0]);
                if sampled {
                    let label = format!(
                        "case {case} ({format:?}, scale {scale}, share {share}), {name} @ {limit}"
                    );
                    sample.add(label, format, &input, &out, options.allow_open_tail);
                }
            }
            Ok(())
        },
    );
}
