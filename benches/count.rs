//! Token counting on the largest Claude Code session of the corpus ([`common::LARGEST`], whole log
//! through the library's importer, checked to be the largest by o200k tokens): cold cache, warm
//! cache, and bare tiktoken-rs `encode_ordinary` of the same text.
//!
//! `cargo bench --bench count -- --warm-up-time 1 --measurement-time 3`

mod common;

use compactor::tokens::{CachedCounter, TiktokenCounter, TokenCounter, Tokenizer};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let conv = common::largest_session();
    let strings = common::texts(&conv);
    let bytes: usize = strings.iter().map(String::len).sum();
    let bare_total = common::bare_encode(&strings);
    let counted = common::o200k_tokens(&conv);
    eprintln!(
        "{} messages, {} blocks, {bytes} bytes of text; bare {bare_total} tokens, counter {counted} tokens",
        conv.messages.len(),
        conv.blocks().count()
    );

    let mut g = c.benchmark_group("count");
    g.sample_size(10);
    g.bench_function("bare_encode_ordinary", |b| {
        b.iter(|| common::bare_encode(black_box(&strings)))
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
