//! Token counting on the largest corpus session: cold cache, warm cache, and bare tiktoken-rs
//! `encode_ordinary` of the same text.
//!
//! `cargo bench --bench count -- --warm-up-time 1 --measurement-time 3`
//!
//! The Claude Code importer is written elsewhere; this bench reads the JSONL itself: the
//! `message` objects of the `user` / `assistant` lines, in order, as one Anthropic request body.

use compactor::conversation::{Block, Conversation, ToolInput, ToolResultContent};
use compactor::format::Format;
use compactor::tokens::{CachedCounter, TiktokenCounter, TokenCounter, Tokenizer};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::hint::black_box;

const SESSION: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/corpus/cc_spotter_fa812bfe.jsonl"
);

fn load() -> Conversation {
    let text = std::fs::read_to_string(SESSION).unwrap_or_default();
    let messages: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| matches!(v["type"].as_str(), Some("user" | "assistant")))
        .filter_map(|v| {
            let m = v.get("message")?;
            Some(json!({"role": m.get("role")?, "content": m.get("content")?}))
        })
        .collect();
    Format::Anthropic
        .read(&json!({ "messages": messages }))
        .unwrap_or_default()
}

/// The strings the counter tokenizes, extracted once (tool inputs serialized up front).
fn texts(conv: &Conversation) -> Vec<String> {
    fn walk(b: &Block, out: &mut Vec<String>) {
        match b {
            Block::Text(t) => out.push(t.text.clone()),
            Block::ToolUse(t) => {
                out.push(t.name.clone());
                out.push(match &t.input {
                    ToolInput::Json(v) => v.to_string(),
                    ToolInput::Arguments(s) | ToolInput::Freeform(s) => s.clone(),
                });
            }
            Block::ToolResult(r) => match &r.content {
                Some(ToolResultContent::Text(s)) => out.push(s.clone()),
                Some(ToolResultContent::Blocks(bs)) => bs.iter().for_each(|b| walk(b, out)),
                None => {}
            },
            Block::Thinking(v) => {
                if let Some(t) = v.get("thinking").and_then(Value::as_str) {
                    out.push(t.to_string());
                }
            }
            Block::Other(v) => out.push(v.to_string()),
            Block::Image(_) | Block::Document(_) => {}
        }
    }
    let mut out = Vec::new();
    for (_, _, b) in conv.blocks() {
        walk(b, &mut out);
    }
    out
}

fn bench(c: &mut Criterion) {
    let conv = load();
    let strings = texts(&conv);
    let bpe = tiktoken_rs::o200k_base_singleton();
    let bytes: usize = strings.iter().map(String::len).sum();
    let bare_total: usize = strings.iter().map(|s| bpe.encode_ordinary(s).len()).sum();
    let counted = TiktokenCounter::new(Tokenizer::O200kBase).count_conversation(&conv);
    eprintln!(
        "{} messages, {} blocks, {bytes} bytes of text; bare {bare_total} tokens, counter {counted} tokens",
        conv.messages.len(),
        conv.blocks().count()
    );

    let mut g = c.benchmark_group("count");
    g.sample_size(10);
    g.bench_function("bare_encode_ordinary", |b| {
        b.iter(|| {
            strings
                .iter()
                .map(|s| bpe.encode_ordinary(black_box(s)).len())
                .sum::<usize>()
        })
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
