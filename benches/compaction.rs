//! `compact` on the largest corpus session (the whole Claude Code log of cc_spotter_fa812bfe,
//! imported), budget 20,000 tokens: cold (a new pipeline, empty token cache) and warm (the same
//! pipeline again: counts come from the cache; the compaction memory is off so the strategies
//! really run).
//!
//! `cargo bench --bench compaction -- --warm-up-time 1 --measurement-time 5`

use compactor::config::Loader;
use compactor::format::{self, Format, detect::ImportOptions};
use compactor::{Compactor, Conversation};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use std::hint::black_box;

const SESSION: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/corpus/cc_spotter_fa812bfe.jsonl"
);
const BUDGET: usize = 20_000;

fn load() -> Conversation {
    let bytes = std::fs::read(SESSION).unwrap_or_default();
    format::load(&bytes, None, ImportOptions { whole_log: true })
        .map(|l| l.conversation)
        .unwrap_or_default()
}

fn pipeline(preset: &str) -> Compactor {
    let mut settings = Loader {
        preset: Some(preset.into()),
        env: false,
        ..Loader::default()
    }
    .load()
    .unwrap_or_default();
    settings.policy.remember = false;
    Compactor::from_config(settings).unwrap_or_else(|e| panic!("{e}"))
}

fn bench(c: &mut Criterion) {
    let conv = load();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut group = c.benchmark_group("compact");
    group.sample_size(10);
    for preset in ["truncate", "default"] {
        group.bench_function(format!("{preset}/cold"), |b| {
            b.iter_batched(
                || pipeline(preset),
                |p| {
                    black_box(
                        rt.block_on(p.compact(&conv, Format::Anthropic, Some(BUDGET)))
                            .map(|o| o.report.tokens_after)
                            .ok(),
                    )
                },
                BatchSize::PerIteration,
            )
        });
        let warm = pipeline(preset);
        let _ = rt.block_on(warm.compact(&conv, Format::Anthropic, Some(BUDGET)));
        group.bench_function(format!("{preset}/warm"), |b| {
            b.iter(|| {
                black_box(
                    rt.block_on(warm.compact(&conv, Format::Anthropic, Some(BUDGET)))
                        .map(|o| o.report.tokens_after)
                        .ok(),
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
