//! Cold compactions of the largest corpus session ([`common::LARGEST`], whole log) in a loop, for
//! `perf record -g`: a new pipeline (empty token cache, compaction memory off) per call, the
//! pipeline built and dropped outside the clock, then bare encoding of the same text by
//! tiktoken-rs (issue 12's reference) and by bpe-openai (the counter's engine), each in a loop of
//! the same length, and the ratios of the means.
//!
//! `COMPACTOR_COLD=PRESET@BUDGET` (default `truncate@20000`), `COMPACTOR_COLD_SECS` (default 10).
//!
//! `cargo bench --bench cold --no-run`, then `COMPACTOR_COLD=default@20000
//! target/release/deps/cold-<hash> --bench`

mod common;

use compactor::Format;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// `COMPACTOR_COLD=count`: [`common::count_table`] of the session, 20 runs.
fn count_loop() {
    let conv = common::load_whole(common::LARGEST);
    common::count_table(&conv, &common::texts(&conv), 20);
}

fn main() {
    if !common::benching() {
        return;
    }
    let spec = std::env::var("COMPACTOR_COLD").unwrap_or_else(|_| "truncate@20000".into());
    if spec == "count" {
        return count_loop();
    }
    let (preset, budget) = spec
        .split_once('@')
        .map(|(p, b)| {
            (
                p.to_string(),
                b.parse::<usize>().unwrap_or_else(|e| panic!("{spec}: {e}")),
            )
        })
        .unwrap_or_else(|| panic!("COMPACTOR_COLD={spec}: expected PRESET@BUDGET"));
    let secs: u64 = std::env::var("COMPACTOR_COLD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let conv = common::load_whole(common::LARGEST);
    let strings = common::texts(&conv);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let (mut case, mut runs) = (Duration::ZERO, 0u32);
    while case.as_secs() < secs {
        let p = common::pipeline(&preset);
        let t = Instant::now();
        let out = rt
            .block_on(p.compact(&conv, Format::Anthropic, Some(budget)))
            .unwrap_or_else(|e| panic!("compact at {budget}: {e}"));
        case += t.elapsed();
        black_box(out.report.tokens_after);
        drop(out);
        drop(p);
        runs += 1;
    }
    // Each bare encoding in a loop as long as the case's: its mean per run.
    let bare_loop = |encode: fn(&[String]) -> usize| {
        let (mut spent, mut bare_runs) = (Duration::ZERO, 0u32);
        while spent < case {
            let t = Instant::now();
            black_box(encode(&strings));
            spent += t.elapsed();
            bare_runs += 1;
        }
        spent.as_secs_f64() * 1e3 / f64::from(bare_runs)
    };
    let bare_ms = bare_loop(common::bare_encode);
    let engine_ms = bare_loop(common::bare_engine);
    let case_ms = case.as_secs_f64() * 1e3 / f64::from(runs);
    eprintln!(
        "cold {spec}: {runs} runs, {case_ms:.2} ms each; bare tiktoken-rs {bare_ms:.2} ms \
         ({:.2}x), bare bpe-openai {engine_ms:.2} ms ({:.2}x)",
        case_ms / bare_ms,
        case_ms / engine_ms
    );
}
