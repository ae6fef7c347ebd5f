//! Continuing from a remembered prefix (issue 12: "costs in proportion to the new messages
//! only"): generated sessions ([`common::generated_session_every`], 20 user requests) of 1x, 4x
//! and 16x tool calls are
//! compacted once with `truncate` at 50,000 tokens (the compaction memory on), then each is
//! resent with the same few new messages (two more calls and their results, distinct per run so
//! that every run continues from the remembered prefix and not from the previous run's input).
//! The continuation stays under the trigger, so the remembered output plus the new messages is
//! the answer; the bench panics when a run did not continue (it would measure something else).
//!
//! The table (median of alternating runs, paired with bare o200k encoding of the new messages'
//! text) shows the cost against N: flat when it is in proportion to the new messages; what
//! stays linear is hashing the input (every prefix's key of the memory), internal to the crate
//! and so not timed apart here.
//! `COMPACTOR_BENCH_TABLES_ONLY=1` prints the table and skips criterion's measurements.
//!
//! `cargo bench --bench continuation`

mod common;

use compactor::config::Loader;
use compactor::{Compactor, Conversation, Format};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::json;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::runtime::Runtime;

/// Tool calls of the 1x session; 4x and 16x follow.
const BASE_CALLS: usize = 500;
const SCALES: [usize; 3] = [1, 4, 16];
const BUDGET: usize = 50_000;
/// User requests in every session.
const REQUESTS: usize = 20;
/// New tool calls per continuation (each an assistant call and its result).
const NEW_CALLS: usize = 2;
/// Alternating runs per paired measurement.
const RUNS: usize = 7;

/// A `truncate` pipeline with the compaction memory on (the default).
fn pipeline() -> Compactor {
    let settings = Loader {
        preset: Some("truncate".into()),
        ..Loader::default()
    }
    .load()
    .unwrap_or_else(|e| panic!("preset truncate: {e}"));
    assert!(settings.policy.remember, "the memory is on by default");
    Compactor::from_config(settings).unwrap_or_else(|e| panic!("pipeline: {e}"))
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// One compaction; returns the prefix length it continued from (`None`: compacted afresh).
fn compact(rt: &Runtime, p: &Compactor, conv: &Conversation) -> Option<usize> {
    rt.block_on(p.compact(conv, Format::Anthropic, Some(BUDGET)))
        .map(|o| o.report.continued_from)
        .unwrap_or_else(|e| panic!("compact: {e}"))
}

/// `prefix` with [`NEW_CALLS`] new calls and results, tagged `run` (distinct text per run).
fn continued(prefix: &Conversation, run: usize) -> Conversation {
    let mut messages: Vec<serde_json::Value> = Vec::new();
    for c in 0..NEW_CALLS {
        let id = format!("toolu_new_{run}_{c}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Next, part {run}.{c}.")},
            {"type": "tool_use", "id": id, "name": "Bash",
             "input": {"command": format!("cargo test new_{run}_{c}")}}
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id,
             "content": format!("test new_{run}_{c} ... ok\n{}", "output line\n".repeat(20))}
        ]}));
    }
    let new = Format::Anthropic
        .read(&json!({"messages": messages}))
        .unwrap_or_else(|e| panic!("new messages: {e}"));
    let mut c = prefix.clone();
    c.messages.extend(new.messages);
    c
}

/// A session of `calls` calls remembered by a new pipeline (compacted once).
fn remembered(rt: &Runtime, calls: usize) -> (Compactor, Conversation) {
    // The same 20 user requests at every size: the output's session state (which names every
    // request) then fits the budget, so a continuation stays under the trigger.
    let session = common::generated_session_every(calls, calls / REQUESTS);
    let p = pipeline();
    compact(rt, &p, &session);
    (p, session)
}

fn bench(c: &mut Criterion) {
    let rt = runtime();
    let sessions: Vec<(usize, Compactor, Conversation)> = SCALES
        .iter()
        .map(|&x| {
            let (p, s) = remembered(&rt, BASE_CALLS * x);
            (x, p, s)
        })
        .collect();
    let run = AtomicUsize::new(0);
    let next = |prefix: &Conversation| continued(prefix, run.fetch_add(1, Ordering::Relaxed));
    if common::benching() {
        eprintln!(
            "continuing from a remembered prefix with {NEW_CALLS} new calls, truncate @ {BUDGET} \
             (median of {RUNS} alternating runs; bare = o200k encoding of the new messages' text \
             by tiktoken-rs and by bpe-openai, the engine used):"
        );
        let mut first: Option<f64> = None;
        for (x, p, prefix) in &sessions {
            let sample = next(prefix);
            let tail = Conversation {
                messages: sample.messages[prefix.messages.len()..].to_vec(),
                ..Conversation::default()
            };
            let strings = common::texts(&tail);
            let len = prefix.messages.len();
            // The inputs are dropped after the clock (freeing N messages is the caller's).
            let done = std::cell::RefCell::new(Vec::new());
            let paired = common::paired(
                RUNS,
                &strings,
                || next(prefix),
                |conv| {
                    let from = compact(&rt, p, &conv);
                    assert_eq!(from, Some(len), "the run continued from the prefix");
                    done.borrow_mut().push(conv);
                },
            );
            drop(done);
            let one = *first.get_or_insert(paired.case_ms);
            eprintln!(
                "  {x:>2}x ({:>6} calls, {:>6} messages) {:>9.3} ms   {:>5.1}x the 1x   \
                 bare new: tiktoken-rs {:>6.3} ms, bpe-openai {:>6.3} ms",
                BASE_CALLS * x,
                len,
                paired.case_ms,
                paired.case_ms / one,
                paired.bare_ms,
                paired.engine_ms
            );
        }
        if common::tables_only() {
            return;
        }
    }
    let mut group = c.benchmark_group("continuation");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for (x, p, prefix) in &sessions {
        group.bench_function(format!("{x}x"), |b| {
            b.iter_batched(
                || next(prefix),
                |conv| {
                    compact(&rt, p, black_box(&conv));
                    conv
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
