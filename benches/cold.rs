//! Cold compactions of the largest corpus session ([`common::LARGEST`], whole log) in a loop, for
//! `perf record -g`: a new pipeline (empty token cache, compaction memory off) per call, the
//! pipeline built and dropped outside the clock, then bare tiktoken-rs encoding of the same text
//! in a loop of the same length, and the ratio of the two means.
//!
//! `COMPACTOR_COLD=PRESET@BUDGET` (default `truncate@20000`), `COMPACTOR_COLD_SECS` (default 10).
//!
//! `cargo bench --bench cold --no-run`, then `COMPACTOR_COLD=default@20000
//! target/release/deps/cold-<hash> --bench`

mod common;

use compactor::Format;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// `COMPACTOR_COLD=count`: a cold count of the session (a new [`CachedCounter`] per run, as the
/// pipeline counts its input) and uncached [`TiktokenCounter`], alternated with bare encoding, 20
/// runs each: medians in ms.
fn count_loop() {
    use compactor::tokens::{CachedCounter, TiktokenCounter, TokenCounter, Tokenizer};
    let conv = common::load_whole(common::LARGEST);
    let strings = common::texts(&conv);
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (mut bare, mut cached, mut plain) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..20 {
        let t = Instant::now();
        black_box(common::bare_encode(&strings));
        bare.push(t.elapsed().as_secs_f64() * 1e3);
        let c = CachedCounter::new(TiktokenCounter::new(Tokenizer::O200kBase));
        let t = Instant::now();
        black_box(c.count_conversation(&conv));
        cached.push(t.elapsed().as_secs_f64() * 1e3);
        let c = TiktokenCounter::new(Tokenizer::O200kBase);
        let t = Instant::now();
        black_box(c.count_conversation(&conv));
        plain.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (b, c, p) = (median(bare), median(cached), median(plain));
    eprintln!(
        "count: bare {b:.2} ms, cached cold {c:.2} ms ({:.2}x), uncached {p:.2} ms ({:.2}x)",
        c / b,
        p / b
    );
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
    let (mut bare, mut bare_runs) = (Duration::ZERO, 0u32);
    while bare < case {
        let t = Instant::now();
        black_box(common::bare_encode(&strings));
        bare += t.elapsed();
        bare_runs += 1;
    }
    let case_ms = case.as_secs_f64() * 1e3 / f64::from(runs);
    let bare_ms = bare.as_secs_f64() * 1e3 / f64::from(bare_runs);
    eprintln!(
        "cold {spec}: {runs} runs, {case_ms:.2} ms each; bare {bare_ms:.2} ms; {:.2}x",
        case_ms / bare_ms
    );
}
