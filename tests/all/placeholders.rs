//! What compactor wrote stays whole: with `default` (microcompact, then truncate), every
//! result that microcompact cleared reads in the output exactly as microcompact wrote it for
//! that call, whatever truncate does after it (caps, the squeeze of an over-limit newest turn),
//! and is typed as cleared ([`ToolResult::rewritten`]). Sessions are generated: rounds of
//! parallel tool batches, results of random sizes, some failed, in Anthropic and OpenAI Chat.

use crate::guard_props::persisted;
use crate::support::runtime;
use compactor::config::{Loader, Settings};
use compactor::conversation::{Conversation, Rewrite, ToolResult};
use compactor::format::Format;
use compactor::strategy::microcompact::CLEARED_PREFIX;
use compactor::{Compactor, Status};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::OnceLock;

/// `default` as shipped, and `default` with its microcompact tier alone (same settings).
fn engines() -> &'static (Compactor, Compactor) {
    static ENGINES: OnceLock<(Compactor, Compactor)> = OnceLock::new();
    ENGINES.get_or_init(|| {
        let settings = || -> Settings {
            let mut s = Loader {
                preset: Some("default".into()),
                env: false,
                ..Loader::default()
            }
            .load()
            .unwrap();
            s.policy.remember = false;
            s
        };
        let mut alone = settings();
        alone.policy.tiers = vec!["microcompact".into()];
        (
            Compactor::from_config(settings()).unwrap(),
            Compactor::from_config(alone).unwrap(),
        )
    })
}

/// One call of a batch: its tool, the lines of its output, whether it failed.
#[derive(Debug, Clone)]
struct Call {
    tool: &'static str,
    lines: usize,
    failed: bool,
}

fn call() -> impl Strategy<Value = Call> {
    (
        prop::sample::select(vec!["Bash", "Read", "Grep", "Edit"]),
        0usize..80,
        prop::bool::weighted(0.3),
    )
        .prop_map(|(tool, lines, failed)| Call {
            tool,
            lines,
            failed,
        })
}

/// The output of call `id`: `lines` numbered lines, a failure framed by error lines (and, for
/// OpenAI Chat, the exit-code marker its outcome policy reads).
fn output(id: &str, c: &Call, chat: bool) -> String {
    let body: Vec<String> = (0..c.lines)
        .map(|j| format!("{id} line {j}: value {}", j * 7919 % 1000))
        .collect();
    let body = body.join("\n");
    match (c.failed, chat) {
        (false, _) => body,
        (true, false) => format!("error: {id} could not build\n{body}\nerror: build failed"),
        (true, true) => format!(
            "<returncode>1</returncode>\n<output>\nerror: {id} could not build\n{body}\nerror: build failed\n</output>"
        ),
    }
}

/// A request body of `rounds` (each a user request, then one parallel batch per inner vec).
fn session(rounds: &[Vec<Vec<Call>>], chat: bool) -> Value {
    let mut messages = Vec::new();
    for (r, batches) in rounds.iter().enumerate() {
        messages.push(json!({"role": "user", "content": format!("Request {r}: fix the build.")}));
        for (b, batch) in batches.iter().enumerate() {
            let ids: Vec<String> = (0..batch.len())
                .map(|i| format!("call_{r}_{b}_{i}"))
                .collect();
            if chat {
                let calls: Vec<Value> = batch.iter().zip(&ids).map(|(c, id)| json!({
                    "id": id, "type": "function",
                    "function": {"name": c.tool, "arguments": json!({"command": format!("make {id}")}).to_string()}
                })).collect();
                messages.push(json!({"role": "assistant", "content": null, "tool_calls": calls}));
                for (c, id) in batch.iter().zip(&ids) {
                    messages.push(
                        json!({"role": "tool", "tool_call_id": id, "content": output(id, c, true)}),
                    );
                }
            } else {
                let uses: Vec<Value> = batch.iter().zip(&ids).map(|(c, id)| json!({
                    "type": "tool_use", "id": id, "name": c.tool, "input": {"command": format!("make {id}")}
                })).collect();
                let results: Vec<Value> = batch.iter().zip(&ids).map(|(c, id)| {
                    let mut r = json!({"type": "tool_result", "tool_use_id": id, "content": output(id, c, false)});
                    if c.failed {
                        r["is_error"] = json!(true);
                    }
                    r
                }).collect();
                messages.push(json!({"role": "assistant", "content": uses}));
                messages.push(json!({"role": "user", "content": results}));
            }
        }
    }
    json!({"model": "claude-sonnet-4-5", "max_tokens": 1000, "messages": messages})
}

/// Every tool result of `c`, by call id.
fn results(c: &Conversation) -> HashMap<String, ToolResult> {
    c.messages
        .iter()
        .flat_map(|m| m.tool_results())
        .map(|r| (r.tool_use_id.clone(), r.clone()))
        .collect()
}

/// Compacts `body` with `default` and with its microcompact tier alone at `budget`; checks
/// that every placeholder of the `default` output is the one microcompact wrote for its call,
/// typed as cleared, and returns how many it kept.
fn placeholders_kept_whole(body: &Value, format: Format, budget: usize) -> usize {
    let input = format.read(body).unwrap();
    let (default, alone) = engines();
    let out = runtime()
        .block_on(default.compact(&input, format, Some(budget)))
        .unwrap();
    let cleared = runtime()
        .block_on(alone.compact(&input, format, Some(budget)))
        .unwrap();
    let written = results(&cleared.conversation);
    let mut kept = 0;
    for r in results(&out.conversation).values() {
        let text = r.text();
        if !text.contains(CLEARED_PREFIX) {
            continue;
        }
        let whole = &written[&r.tool_use_id];
        assert_eq!(
            text,
            whole.text(),
            "budget {budget}: the placeholder of {} was cut",
            r.tool_use_id
        );
        assert_eq!(r.rewritten, Some(Rewrite::Cleared));
        assert_eq!(r.outcome, whole.outcome);
        kept += 1;
    }
    kept
}

proptest! {
    #![proptest_config(persisted(96))]
    #[test]
    fn every_placeholder_in_a_default_output_is_the_one_microcompact_wrote(
        rounds in prop::collection::vec(prop::collection::vec(prop::collection::vec(call(), 1..10), 1..3), 1..4),
        chat in any::<bool>(),
        share in 0.02f64..1.0,
    ) {
        let format = if chat { Format::OpenAiChat } else { Format::Anthropic };
        let body = session(&rounds, chat);
        let input = format.read(&body).unwrap();
        let before = engines().0.counter().count_conversation(&input);
        let budget = ((before as f64 * share) as usize).max(1);
        placeholders_kept_whole(&body, format, budget);
    }
}

/// The QA's case: the newest turn is one batch of ten calls over the limit, so microcompact
/// clears its five stale results and truncate squeezes what is left. Before the mend the
/// squeeze cut the placeholders (`[compactor: cleared re` … `[… 21 tokens truncated …]`).
#[test]
fn a_squeezed_newest_batch_keeps_microcompacts_placeholders_whole() {
    let batch = |failed: fn(usize) -> bool| -> Vec<Call> {
        (0..10)
            .map(|i| Call {
                tool: "Bash",
                lines: 30,
                failed: failed(i),
            })
            .collect()
    };
    let rounds = vec![vec![batch(|_| false), batch(|i| i % 3 == 1)]];
    for chat in [false, true] {
        let format = if chat {
            Format::OpenAiChat
        } else {
            Format::Anthropic
        };
        let body = session(&rounds, chat);
        let input = format.read(&body).unwrap();
        let out = runtime()
            .block_on(engines().0.compact(&input, format, Some(300)))
            .unwrap();
        // The newest batch alone is over the limit: truncate capped what it could.
        assert_eq!(out.report.status, Status::OverBudget);
        assert!(out.report.tiers.iter().all(|t| t.accepted));
        assert_eq!(placeholders_kept_whole(&body, format, 300), 5);
    }
}
