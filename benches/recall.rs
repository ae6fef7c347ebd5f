//! Recall's cost (issue 35): the largest corpus session ([`common::LARGEST`], whole log)
//! compacted cold by each preset at 20,000 tokens with `[recall] enabled = true` and `false`,
//! alternating, each run on a new pipeline (empty token cache) as the `compaction` bench's
//! cold rows. Prints the medians of the report's `timings` (total, strategies) and the ratio
//! on / off for each preset; the target is recall on within 1.2x of recall off. Exits 1 when a
//! ratio is over it, so `cargo bench --bench recall` is the check.
//!
//! `COMPACTOR_BENCH_RUNS=N` sets the runs per side (default 9).

mod common;

use compactor::config::Loader;
use compactor::report::Timings;
use compactor::{Compactor, Conversation, Format};

const BUDGET: usize = 20_000;
const TARGET: f64 = 1.2;

fn pipeline(preset: &str, recall: bool) -> Compactor {
    let mut settings = Loader {
        preset: Some(preset.into()),
        ..Loader::default()
    }
    .load()
    .unwrap_or_else(|e| panic!("preset {preset}: {e}"));
    settings.policy.remember = false;
    settings.recall.enabled = recall;
    Compactor::from_config(settings).unwrap_or_else(|e| panic!("preset {preset}: {e}"))
}

fn run(rt: &tokio::runtime::Runtime, preset: &str, recall: bool, conv: &Conversation) -> Timings {
    let p = pipeline(preset, recall);
    let out = rt
        .block_on(p.compact(conv, Format::Anthropic, Some(BUDGET)))
        .unwrap_or_else(|e| panic!("compact: {e}"));
    assert_eq!(
        out.report.recall.is_empty(),
        !recall,
        "recall {recall}: {} refs",
        out.report.recall.len()
    );
    out.report.timings
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::var("COMPACTOR_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let conv = common::largest_session();
    eprintln!(
        "recall on vs off, cold, @ {BUDGET} (median of {runs} alternating runs; target on <= {TARGET}x off):"
    );
    let mut over = false;
    for preset in ["default", "truncate", "microcompact"] {
        run(&rt, preset, true, &conv);
        let (mut on, mut off) = (Vec::new(), Vec::new());
        let (mut on_s, mut off_s) = (Vec::new(), Vec::new());
        let (mut on_g, mut off_g) = (Vec::new(), Vec::new());
        let (mut on_c, mut off_c) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let t = run(&rt, preset, true, &conv);
            on.push(t.total_ms);
            on_s.push(t.strategies_ms);
            on_g.push(t.guard_ms);
            on_c.push(t.count_ms);
            let t = run(&rt, preset, false, &conv);
            off.push(t.total_ms);
            off_s.push(t.strategies_ms);
            off_g.push(t.guard_ms);
            off_c.push(t.count_ms);
        }
        let (on, off) = (median(on), median(off));
        let ratio = on / off;
        over |= ratio > TARGET;
        eprintln!(
            "  {preset:<13} total on {on:>7.1} ms  off {off:>7.1} ms  {ratio:.3}x   strategies {:>6.1} / {:>6.1} ms   guard {:>6.1} / {:>6.1} ms   count {:>6.1} / {:>6.1} ms",
            median(on_s),
            median(off_s),
            median(on_g),
            median(off_g),
            median(on_c),
            median(off_c)
        );
    }
    if over {
        eprintln!("recall on is over {TARGET}x of recall off");
        std::process::exit(1);
    }
}
