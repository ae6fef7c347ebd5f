//! The proxy's span scanner (src/format/slices/scanner.rs) against serde_json's `RawValue`
//! spans (src/format/slices/oracle.rs, its test oracle), both built here from their source
//! files (the library keeps them crate-private), on realistic request bodies: the largest
//! corpus sessions written as request bodies (Claude Code as Anthropic and Gemini, the Codex
//! rollout as OpenAI Responses, the mini-SWE trajectory as OpenAI Chat) and the `compaction`
//! bench's generated sessions (2,500 and 10,000 calls, as Anthropic bodies). Three readers:
//! - `scanner`: what the proxy runs on every body it reads (`format::slices::scan`);
//! - `raw_one_pass`: the items as `Vec<&RawValue>` in one serde_json pass, without the array's
//!   own span or the nesting check: the least a RawValue reader would cost;
//! - `raw_spans`: the array as a `&RawValue`, then its items (two passes): the spans exactly.
//!
//! Under `cargo bench` a table comes first (medians of alternating runs, the ratios to the
//! scanner); `COMPACTOR_BENCH_TABLES_ONLY=1` prints only that. The whole request path's share
//! of the scan is measured by the `proxy` bench.
//!
//! `cargo bench --bench slices -- --warm-up-time 1 --measurement-time 3`

mod common;

#[allow(dead_code)]
#[path = "../src/format/slices/oracle.rs"]
mod oracle;
#[allow(dead_code)]
#[path = "../src/format/slices/scanner.rs"]
mod scanner;

use compactor::format::{self, Format, detect::ImportOptions};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Alternating runs per row of the table.
const RUNS: usize = 31;

/// A request body to read, its format and its name in the table.
struct Body {
    name: String,
    format: Format,
    bytes: Vec<u8>,
}

/// The corpus transcripts and the format each is written in.
const CORPUS: [(&str, Format); 5] = [
    (common::LARGEST, Format::Anthropic),
    ("cc_spotter_fa812bfe.jsonl", Format::Anthropic),
    ("codex_rollout_01997e76.jsonl", Format::OpenAiResponses),
    (
        "miniswe_deepseek_chat_astroid1333.traj.json",
        Format::OpenAiChat,
    ),
    (common::LARGEST, Format::Gemini),
];

fn bodies() -> Vec<Body> {
    let mut out = Vec::new();
    for (name, to) in CORPUS {
        let loaded = format::load(
            &common::read_corpus(name),
            None,
            ImportOptions { whole_log: true },
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let conversation = format::convert(&loaded.conversation, loaded.format, to);
        let stem = name.split('.').next().unwrap_or(name);
        out.push(Body {
            name: format!("{stem}:{}", to.as_str()),
            format: to,
            bytes: to.write_bytes(&conversation),
        });
    }
    for calls in [2_500, 10_000] {
        out.push(Body {
            name: format!("generated_{calls}:anthropic"),
            format: Format::Anthropic,
            bytes: Format::Anthropic.write_bytes(&common::generated_session(calls)),
        });
    }
    out
}

/// The three readers, by name: each gives the number of items found.
type Reader = fn(&[u8], &str) -> usize;

const READERS: [(&str, Reader); 3] = [
    ("scanner", |b, k| {
        scanner::spans(b, k).map_or(0, |(_, i)| i.len())
    }),
    ("raw_one_pass", |b, k| {
        oracle::items(b, k).map_or(0, |i| i.len())
    }),
    ("raw_spans", |b, k| {
        oracle::raw_spans(b, k).map_or(0, |(_, i)| i.len())
    }),
];

fn median_us(mut v: Vec<Duration>) -> f64 {
    v.sort_unstable();
    v.get(v.len() / 2)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1e6)
}

/// The table: per body, the median of each reader over alternating runs, and its ratio to the
/// scanner's. Panics when the readers disagree on the items (the bench would compare
/// different work).
fn table(bodies: &[Body]) {
    eprintln!("\nspans of a request body's message items (median of {RUNS} alternating runs)");
    for body in bodies {
        let key = body.format.messages_key();
        let items = READERS.map(|(name, read)| {
            let n = read(&body.bytes, key);
            assert!(n > 0, "{}: {name} found no item", body.name);
            n
        });
        assert!(
            items.iter().all(|&n| n == items[0]),
            "{}: {items:?}",
            body.name
        );
        let mut times: [Vec<Duration>; 3] = Default::default();
        for _ in 0..RUNS {
            for ((_, read), t) in READERS.iter().zip(&mut times) {
                let start = Instant::now();
                black_box(read(black_box(&body.bytes), key));
                t.push(start.elapsed());
            }
        }
        let [scan, one, two] = times.map(median_us);
        eprintln!(
            "  {:<44} {:>7} B {:>6} items  scanner {scan:>8.1} us  raw_one_pass {one:>8.1} us {:>5.2}x  raw_spans {two:>8.1} us {:>5.2}x",
            body.name,
            body.bytes.len(),
            items[0],
            one / scan,
            two / scan,
        );
    }
}

fn bench(c: &mut Criterion) {
    let bodies = bodies();
    if common::benching() {
        table(&bodies);
        if common::tables_only() {
            return;
        }
    }
    let mut group = c.benchmark_group("slices");
    for body in &bodies {
        let key = body.format.messages_key();
        for (name, read) in READERS {
            group.bench_function(format!("{name}/{}", body.name), |b| {
                b.iter(|| read(black_box(&body.bytes), key));
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
