//! `compact` on the largest Claude Code session of the corpus ([`common::LARGEST`], whole log,
//! checked to be the largest by o200k tokens), each case paired with two bare encodings of the
//! same text in the same run: tiktoken-rs `encode_ordinary` (issue 12's reference, the ratio
//! its targets are written in) and bpe-openai `count` (the counter's engine: the ratio to it is
//! the overhead beyond tokenizing):
//! - cold: a new pipeline (empty token cache) per run, presets `default`, `truncate` and
//!   `microcompact` at budgets 20,000, 50,000 and 100,000 tokens (issue 12: <= 1.2x bare);
//! - warm: the same pipeline again, counts from its cache (issue 12: <= 2 ms); the compaction
//!   memory is off in both, so the strategies really run;
//! - scaling: generated sessions of 625 / 1,250 / 2,500 / 5,000 / 10,000 tool calls, `truncate`
//!   at 20,000 tokens, cold and warm (issue 12: linear, a 16x session costs <= 17x; 10,000
//!   calls <= 150 ms), with a user request every 25 calls and, dense, every 10 calls (the
//!   session state of a dropped span then holds a thousand requests; truncation was quadratic
//!   there).
//!
//! `COMPACTOR_BENCH_TABLES_ONLY=1` prints the tables and skips criterion's measurements.
//! `COMPACTOR_BENCH_LOOP=PRESET` (or `PRESET@CALLS` for a generated session of that many calls,
//! a request every 25; `PRESET@CALLS/EVERY`, a request every `EVERY`) compacts warm in a loop
//! for about 10 s (`COMPACTOR_BENCH_LOOP_SECS`) and
//! prints the time per call, nothing else: a steady workload for `perf record`, or for
//! `valgrind --tool=callgrind --toggle-collect='*warm_runs*'` (instructions of warm calls only).
//!
//! Under `cargo bench` the paired tables (medians of alternating runs, and the ratios) are printed
//! to stderr first, then criterion measures each case.
//!
//! `cargo bench --bench compaction -- --warm-up-time 1 --measurement-time 5`

mod common;

use common::Paired;
use compactor::{Compactor, Conversation, Format};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use tokio::runtime::Runtime;

const PRESETS: [&str; 3] = ["default", "truncate", "microcompact"];
const BUDGETS: [usize; 3] = [20_000, 50_000, 100_000];
/// From 625 to 10,000 calls: the last row is a 16x session (issue 12: costs <= 17x).
const SCALES: [usize; 5] = [625, 1_250, 2_500, 5_000, 10_000];
const SCALE_BUDGET: usize = 20_000;
/// Alternating runs per paired measurement.
const RUNS: usize = 7;

/// One compaction; panics on an error (a bench of a failing call would measure nothing real).
fn compact(rt: &Runtime, p: &Compactor, conv: &Conversation, budget: usize) -> usize {
    rt.block_on(p.compact(conv, Format::Anthropic, Some(budget)))
        .map(|o| o.report.tokens_after)
        .unwrap_or_else(|e| panic!("compact at {budget}: {e}"))
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn row(name: &str, p: Paired, target: &str) {
    eprintln!(
        "  {name:<32} {:>9.2} ms   tiktoken-rs {:>8.2} ms {:>5.2}x   bpe-openai {:>8.2} ms {:>5.2}x   ({target})",
        p.case_ms,
        p.bare_ms,
        p.ratio(),
        p.engine_ms,
        p.engine_ratio()
    );
}

/// The paired table of the corpus session: cold per preset and budget, warm per preset.
fn corpus_table(rt: &Runtime, conv: &Conversation, strings: &[String]) {
    eprintln!(
        "compaction vs bare o200k encoding of the same text by tiktoken-rs (issue 12's ratio) \
         and by bpe-openai (the engine used) (median of {RUNS} alternating runs):"
    );
    for preset in PRESETS {
        for budget in BUDGETS {
            let p = common::paired(
                RUNS,
                strings,
                || common::pipeline(preset),
                |p| {
                    black_box(compact(rt, &p, conv, budget));
                },
            );
            row(&format!("cold {preset} @ {budget}"), p, "target <= 1.2x");
        }
        let warm = common::pipeline(preset);
        compact(rt, &warm, conv, BUDGETS[0]);
        let p = common::paired(
            RUNS,
            strings,
            || (),
            |()| {
                black_box(compact(rt, &warm, conv, BUDGETS[0]));
            },
        );
        row(
            &format!("warm {preset} @ {}", BUDGETS[0]),
            p,
            "target <= 2 ms",
        );
    }
}

/// The paired table of generated sessions: time per size, its ratio to bare encoding, and its
/// growth over the smallest size next to the growth in calls.
fn scaling_table(rt: &Runtime, label: &str, sessions: &[(usize, Conversation, Vec<String>)]) {
    eprintln!(
        "truncate @ {SCALE_BUDGET} on generated sessions, {label} (median of {RUNS} alternating runs):"
    );
    let mut first: Option<(usize, f64, f64)> = None;
    for (calls, conv, strings) in sessions {
        let cold = common::paired(
            RUNS,
            strings,
            || common::pipeline("truncate"),
            |p| {
                black_box(compact(rt, &p, conv, SCALE_BUDGET));
            },
        );
        let warm_pipeline = common::pipeline("truncate");
        compact(rt, &warm_pipeline, conv, SCALE_BUDGET);
        let warm = common::paired(
            RUNS,
            strings,
            || (),
            |()| {
                black_box(compact(rt, &warm_pipeline, conv, SCALE_BUDGET));
            },
        );
        let (c0, cold0, warm0) = *first.get_or_insert((*calls, cold.case_ms, warm.case_ms));
        let growth = format!(
            "{:.1}x calls: cold {:.1}x, warm {:.1}x",
            *calls as f64 / c0 as f64,
            cold.case_ms / cold0,
            warm.case_ms / warm0
        );
        let target = if *calls == 10_000 {
            "target <= 150 ms, "
        } else {
            ""
        };
        row(
            &format!("cold {calls} calls"),
            cold,
            &format!("{target}{growth}"),
        );
        row(&format!("warm {calls} calls"), warm, "linear in calls");
    }
}

/// `COMPACTOR_BENCH_LOOP`: warm compactions of one case in a loop (see the module docs).
fn profile_loop(rt: &Runtime, spec: &str) {
    let number = |n: &str| n.parse::<usize>().unwrap_or_else(|e| panic!("{spec}: {e}"));
    let (preset, calls) = match spec.split_once('@') {
        Some((p, n)) => match n.split_once('/') {
            Some((n, every)) => (p, Some((number(n), number(every)))),
            None => (p, Some((number(n), 25))),
        },
        None => (spec, None),
    };
    let (conv, budget) = match calls {
        Some((n, every)) => (common::generated_session_every(n, every), SCALE_BUDGET),
        None => (common::load_whole(common::LARGEST), BUDGETS[0]),
    };
    let p = common::pipeline(preset);
    compact(rt, &p, &conv, budget);
    let secs: u64 = std::env::var("COMPACTOR_BENCH_LOOP_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let started = std::time::Instant::now();
    let runs = warm_runs(rt, &p, &conv, budget, secs);
    eprintln!(
        "warm {spec}: {runs} runs, {:.3} ms each",
        started.elapsed().as_secs_f64() * 1e3 / f64::from(runs)
    );
}

/// The warm calls of [`profile_loop`] for `secs` seconds, in a function of their own so that
/// `valgrind --tool=callgrind --toggle-collect='*warm_runs*'` counts the instructions of warm
/// calls only (divide by the runs printed).
#[inline(never)]
fn warm_runs(rt: &Runtime, p: &Compactor, conv: &Conversation, budget: usize, secs: u64) -> u32 {
    let started = std::time::Instant::now();
    let mut runs = 0u32;
    while started.elapsed().as_secs() < secs {
        black_box(compact(rt, p, conv, budget));
        runs += 1;
    }
    runs
}

fn bench(c: &mut Criterion) {
    if let Ok(spec) = std::env::var("COMPACTOR_BENCH_LOOP") {
        return profile_loop(&runtime(), &spec);
    }
    let conv = common::largest_session();
    let strings = common::texts(&conv);
    let rt = runtime();
    let generate = |every: usize| -> Vec<(usize, Conversation, Vec<String>)> {
        SCALES
            .iter()
            .map(|&n| {
                let conv = common::generated_session_every(n, every);
                let strings = common::texts(&conv);
                (n, conv, strings)
            })
            .collect()
    };
    let sessions = generate(25);
    let dense = generate(10);
    if common::benching() {
        corpus_table(&rt, &conv, &strings);
        scaling_table(&rt, "a request every 25 calls", &sessions);
        scaling_table(&rt, "dense: a request every 10 calls", &dense);
        if common::tables_only() {
            return;
        }
    }

    let mut group = c.benchmark_group("compact");
    group.sample_size(10);
    group.bench_function("bare_o200k", |b| {
        b.iter(|| common::bare_encode(black_box(&strings)))
    });
    group.bench_function("bare_o200k_engine", |b| {
        b.iter(|| common::bare_engine(black_box(&strings)))
    });
    for preset in PRESETS {
        for budget in BUDGETS {
            group.bench_function(format!("cold/{preset}/{budget}"), |b| {
                b.iter_batched(
                    || common::pipeline(preset),
                    |p| compact(&rt, &p, black_box(&conv), budget),
                    BatchSize::PerIteration,
                )
            });
        }
        let warm = common::pipeline(preset);
        compact(&rt, &warm, &conv, BUDGETS[0]);
        group.bench_function(format!("warm/{preset}/{}", BUDGETS[0]), |b| {
            b.iter(|| compact(&rt, &warm, black_box(&conv), BUDGETS[0]))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("scaling");
    group.sample_size(10);
    for (calls, conv, strings) in &sessions {
        group.bench_function(format!("bare_o200k/{calls}"), |b| {
            b.iter(|| common::bare_encode(black_box(strings)))
        });
        group.bench_function(format!("bare_o200k_engine/{calls}"), |b| {
            b.iter(|| common::bare_engine(black_box(strings)))
        });
        group.bench_function(format!("cold/truncate/{calls}"), |b| {
            b.iter_batched(
                || common::pipeline("truncate"),
                |p| compact(&rt, &p, black_box(conv), SCALE_BUDGET),
                BatchSize::PerIteration,
            )
        });
    }
    for (calls, conv, _) in &dense {
        group.bench_function(format!("cold/truncate/dense/{calls}"), |b| {
            b.iter_batched(
                || common::pipeline("truncate"),
                |p| compact(&rt, &p, black_box(conv), SCALE_BUDGET),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
