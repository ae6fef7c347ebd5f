//! Token counting on the largest Claude Code session of the corpus ([`common::LARGEST`], whole log
//! through the library's importer, checked to be the largest by o200k tokens): cold cache, warm
//! cache, and bare encoding of the same text by both engines: tiktoken-rs `encode_ordinary`
//! (issue 12's reference) and bpe-openai `count` (the counter's engine).
//!
//! Under `cargo bench` a paired table comes first (medians of alternating runs, the ratios to
//! each bare encoding); `COMPACTOR_BENCH_TABLES_ONLY=1` prints only that.
//!
//! `cargo bench --bench count -- --warm-up-time 1 --measurement-time 3`

mod common;

use compactor::tokens::{CachedCounter, TiktokenCounter, TokenCounter, Tokenizer};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use std::hint::black_box;

/// Alternating runs per paired measurement.
const RUNS: usize = 11;

fn bench(c: &mut Criterion) {
    let conv = common::largest_session();
    let strings = common::texts(&conv);
    let bytes: usize = strings.iter().map(String::len).sum();
    let bare_total = common::bare_encode(&strings);
    let engine_total = common::bare_engine(&strings);
    let counted = common::o200k_tokens(&conv);
    eprintln!(
        "{} messages, {} blocks, {bytes} bytes of text; bare tiktoken-rs {bare_total} tokens, \
         bare bpe-openai {engine_total} tokens, counter {counted} tokens",
        conv.messages.len(),
        conv.blocks().count()
    );
    assert_eq!(
        bare_total, engine_total,
        "the engines count the same text alike"
    );
    if common::benching() {
        common::count_table(&conv, &strings, RUNS);
        if common::tables_only() {
            return;
        }
    }

    let mut g = c.benchmark_group("count");
    g.sample_size(10);
    g.bench_function("bare_tiktoken_rs_encode_ordinary", |b| {
        b.iter(|| common::bare_encode(black_box(&strings)))
    });
    g.bench_function("bare_bpe_openai_count", |b| {
        b.iter(|| common::bare_engine(black_box(&strings)))
    });
    g.bench_function("cold", |b| {
        b.iter_batched(
            || CachedCounter::new(TiktokenCounter::new(Tokenizer::O200kBase)),
            |counter| counter.count_conversation(black_box(&conv)),
            BatchSize::PerIteration,
        )
    });
    let warm = CachedCounter::new(TiktokenCounter::new(Tokenizer::O200kBase));
    warm.count_conversation(&conv);
    g.bench_function("warm", |b| {
        b.iter(|| warm.count_conversation(black_box(&conv)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
