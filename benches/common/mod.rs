//! Shared by the benches: the corpus session they claim, the text a counter tokenizes (for bare
//! encoding of the same text), generated sessions, and a paired timer.
//!
//! Every case is paired with two references, timed alternately with it:
//! - bare tiktoken-rs `encode_ordinary` (o200k_base), issue 12's reference ("cold compaction
//!   <= 1.2x bare encoding"), kept as it was so that figures stay comparable across commits;
//! - bare bpe-openai `count` (o200k_base), the engine the counter uses: the case's overhead
//!   beyond tokenizing is its ratio to this one.
//!
//! Benches time things; tests never do (COMMON.md). The corpus is read from ../shared/corpus and
//! never copied into the repository: a missing file is a panic naming the path, never an empty
//! history benched in silence.

#![allow(dead_code)] // each bench binary uses its own part of this module

/// The benches allocate as the `compactor` binary does (src/main.rs: jemalloc, with the `cli`
/// feature, on by default), so their figures are those of the product an operator runs.
/// Built without the `cli` feature they measure the system allocator instead (a library
/// user's default; `git show 97644f4:docs/speed.md` gives figures for both).
#[cfg(feature = "cli")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use compactor::config::Loader;
use compactor::conversation::{Block, ToolInput, ToolResultContent};
use compactor::format::detect::{ImportOptions, Source};
use compactor::format::{self, Format};
use compactor::tokens::{CachedCounter, TiktokenCounter, TokenCounter, Tokenizer};
use compactor::{Compactor, Conversation};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Where the corpus of real transcripts lives by default (../shared/corpus, next to the
/// repository); `$COMPACTOR_SHARED/corpus` when that is set ([`corpus`]).
pub const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus");

/// The corpus folder: `$COMPACTOR_SHARED/corpus`, else [`CORPUS`].
pub fn corpus() -> PathBuf {
    std::env::var_os("COMPACTOR_SHARED").map_or_else(
        || PathBuf::from(CORPUS),
        |s| PathBuf::from(s).join("corpus"),
    )
}

/// The largest Claude Code session of the corpus by o200k tokens when read whole (`compactor
/// compact --whole-log`): 170,669 tokens when issue 12 was written. [`largest_session`] checks
/// the claim. (The Codex rollout counts more, 194,071, but is an OpenAI Responses history.)
pub const LARGEST: &str = "cc_spotter_4d5611e5.jsonl";

/// Reads a corpus file; panics naming the path when it is not there.
pub fn read_corpus(name: &str) -> Vec<u8> {
    let dir = corpus();
    let path = dir.join(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "bench input {} is missing ({e}): the benches read the corpus from ../shared/corpus",
            path.display()
        )
    })
}

/// Loads a corpus file as `compactor compact --whole-log` does: the format is detected, and a
/// Claude Code log is imported whole (also the entries before its last `compact_boundary`).
/// Panics naming the file when it is missing, does not load, or holds no message.
pub fn load_whole(name: &str) -> Conversation {
    let bytes = read_corpus(name);
    let dir = corpus();
    let loaded = format::load(&bytes, None, ImportOptions { whole_log: true })
        .unwrap_or_else(|e| panic!("{}/{name}: {e}", dir.display()));
    assert!(
        !loaded.conversation.messages.is_empty(),
        "{}/{name}: no message loaded",
        dir.display()
    );
    loaded.conversation
}

/// o200k tokens of a conversation as the library counts them (no cache).
pub fn o200k_tokens(conv: &Conversation) -> usize {
    TiktokenCounter::new(Tokenizer::O200kBase).count_conversation(conv)
}

/// [`LARGEST`], loaded whole, after checking that no other Claude Code session of the corpus
/// (every `.jsonl` file that loads as one) has more o200k tokens. Prints the sizes it compared.
pub fn largest_session() -> Conversation {
    let conv = load_whole(LARGEST);
    let tokens = o200k_tokens(&conv);
    let mut others: Vec<(usize, String)> = Vec::new();
    let dir = corpus();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == LARGEST || !name.ends_with(".jsonl") {
            continue;
        }
        let bytes = read_corpus(&name);
        if let Ok(l) = format::load(&bytes, None, ImportOptions { whole_log: true })
            && l.source == Source::ClaudeCode
        {
            others.push((o200k_tokens(&l.conversation), name));
        }
    }
    others.sort_unstable_by(|a, b| b.cmp(a));
    if let Some((n, name)) = others.first() {
        assert!(
            *n <= tokens,
            "{LARGEST} ({tokens} o200k tokens) is not the largest Claude Code session: {name} has {n}"
        );
        eprintln!(
            "session {LARGEST} (whole log): {} messages, {tokens} o200k tokens; next largest {name}: {n}",
            conv.messages.len()
        );
    }
    conv
}

/// The strings a token counter encodes for a conversation: text, tool names and inputs (JSON
/// serialized once, up front), tool result text, thinking text, and other blocks' JSON. Images
/// and documents are priced from their size, not encoded, so they are left out.
pub fn texts(conv: &Conversation) -> Vec<String> {
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
            // Priced from their size, not encoded; a block type added later is not counted here.
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Some(s) = &conv.system {
        out.push(s.to_string());
    }
    for (_, _, b) in conv.blocks() {
        walk(b, &mut out);
    }
    out
}

/// Bare tiktoken-rs: `encode_ordinary` of every string with o200k_base, no cache, no
/// structure; returns the token total (issue 12's reference).
pub fn bare_encode(strings: &[String]) -> usize {
    let bpe = tiktoken_rs::o200k_base_singleton();
    strings.iter().map(|s| bpe.encode_ordinary(s).len()).sum()
}

/// Bare bpe-openai, the counter's engine: `count` of every string with o200k_base (what
/// `TiktokenCounter::count_text` calls), no cache, no structure; returns the token total.
pub fn bare_engine(strings: &[String]) -> usize {
    let bpe = bpe_openai::o200k_base();
    strings.iter().map(|s| bpe.count(s.as_str())).sum()
}

/// A generated coding session of `calls` tool calls, as an Anthropic request body: a user request
/// every 25 calls, each call a `Read`, `Bash` or `Grep` with its own input and a result of about
/// 120 o200k tokens (every text distinct, so no cache hit across calls), one call in 37 failed
/// (`is_error`), the last one answered too.
pub fn generated_session(calls: usize) -> Conversation {
    generated_session_every(calls, 25)
}

/// [`generated_session`] with a user request every `user_every` calls (10: a dense session,
/// where the session state of a dropped span holds many requests).
pub fn generated_session_every(calls: usize, user_every: usize) -> Conversation {
    let user_every = user_every.max(1);
    let mut messages = Vec::with_capacity(calls * 2 + calls / user_every + 1);
    for i in 0..calls {
        if i % user_every == 0 {
            messages.push(json!({"role": "user", "content": format!(
                "Step {}: make test_{i} pass in src/mod_{}/lib.rs and keep the API stable.",
                i / user_every,
                i % 40
            )}));
        }
        let id = format!("toolu_{i:06}");
        let (name, input) = match i % 3 {
            0 => (
                "Read",
                json!({"file_path": format!("src/mod_{}/file_{i}.rs", i % 40)}),
            ),
            1 => (
                "Bash",
                json!({"command": format!("cargo test -p crate_{} test_{i}", i % 7)}),
            ),
            _ => (
                "Grep",
                json!({"pattern": format!("fn handler_{i}"), "path": "src"}),
            ),
        };
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Looking at part {i} of the change.")},
            {"type": "tool_use", "id": id, "name": name, "input": input}
        ]}));
        let body: String = (0..6)
            .map(|l| {
                format!(
                    "{:>4}\tlet value_{i}_{l} = compute(\"{name} {i}\", {l}, {}); // line {l} of {i}\n",
                    l + 1,
                    i * 7 + l
                )
            })
            .collect();
        let failed = i % 37 == 36;
        let content = if failed {
            format!("error[E0425]: cannot find value `value_{i}` in this scope\n{body}")
        } else {
            body
        };
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": content, "is_error": failed}
        ]}));
    }
    Format::Anthropic
        .read(&json!({"model": "claude-sonnet-4-5", "max_tokens": 8192, "messages": messages}))
        .unwrap_or_else(|e| panic!("generated session of {calls} calls: {e}"))
}

/// Whether the bench binary runs as `cargo bench` (criterion gets `--bench`), not as a smoke
/// test under `cargo test --benches`: the paired tables below run only then.
pub fn benching() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// Whether only the paired tables are wanted (`COMPACTOR_BENCH_TABLES_ONLY=1`): criterion's
/// own measurements are then skipped.
pub fn tables_only() -> bool {
    std::env::var_os("COMPACTOR_BENCH_TABLES_ONLY").is_some_and(|v| v != "0")
}

/// Medians of a paired measurement, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Paired {
    /// Bare tiktoken-rs encoding of the same text ([`bare_encode`]).
    pub bare_ms: f64,
    /// Bare encoding of the same text with the counter's engine ([`bare_engine`]).
    pub engine_ms: f64,
    /// The measured case.
    pub case_ms: f64,
}

impl Paired {
    /// `case / bare tiktoken-rs` (issue 12's ratio).
    pub fn ratio(&self) -> f64 {
        self.case_ms / self.bare_ms
    }

    /// `case / bare engine`: what the case costs beyond tokenizing with the engine it uses.
    pub fn engine_ratio(&self) -> f64 {
        self.case_ms / self.engine_ms
    }
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort_unstable();
    v.get(v.len() / 2)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
}

/// Runs bare tiktoken-rs encoding of `strings`, bare engine encoding of them and `case`
/// alternately `runs` times (so that load from other processes falls on all three alike) and
/// returns their medians. `setup` builds the case's input outside the clock.
pub fn paired<S>(
    runs: usize,
    strings: &[String],
    mut setup: impl FnMut() -> S,
    mut case: impl FnMut(S),
) -> Paired {
    let mut b = Vec::with_capacity(runs);
    let (mut e, mut c) = (b.clone(), b.clone());
    for _ in 0..runs {
        let t = Instant::now();
        std::hint::black_box(bare_encode(strings));
        b.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(bare_engine(strings));
        e.push(t.elapsed());
        let input = setup();
        let t = Instant::now();
        case(input);
        c.push(t.elapsed());
    }
    Paired {
        bare_ms: median(b),
        engine_ms: median(e),
        case_ms: median(c),
    }
}

/// A pipeline of a built-in preset with the compaction memory off (every call compacts).
pub fn pipeline(preset: &str) -> Compactor {
    let mut settings = Loader {
        preset: Some(preset.into()),
        ..Loader::default()
    }
    .load()
    .unwrap_or_else(|e| panic!("preset {preset}: {e}"));
    settings.policy.remember = false;
    Compactor::from_config(settings).unwrap_or_else(|e| panic!("preset {preset}: {e}"))
}

/// The paired table of counting `conv` (whose texts are `strings`): bare encoding by both
/// engines, then a cold count (a new [`CachedCounter`], as the pipeline counts its input), an
/// uncached [`TiktokenCounter`] and a warm count, each with its ratio to both.
pub fn count_table(conv: &Conversation, strings: &[String], runs: usize) {
    // Each row is its own paired measurement: its bare figures are shown with it.
    let row = |name: &str, p: Paired| {
        eprintln!(
            "  {name:<34} {:>8.2} ms   tiktoken-rs {:>7.2} ms {:>5.2}x   bpe-openai {:>7.2} ms {:>5.2}x",
            p.case_ms,
            p.bare_ms,
            p.ratio(),
            p.engine_ms,
            p.engine_ratio()
        );
    };
    let bare = paired(runs, strings, || (), |()| ());
    eprintln!(
        "count vs bare o200k encoding of the same text (median of {runs} alternating runs): \
         tiktoken-rs {:.2} ms, bpe-openai {:.2} ms ({:.2}x)",
        bare.bare_ms,
        bare.engine_ms,
        bare.engine_ms / bare.bare_ms
    );
    let cold = paired(
        runs,
        strings,
        || CachedCounter::new(TiktokenCounter::new(Tokenizer::O200kBase)),
        |counter| {
            std::hint::black_box(counter.count_conversation(conv));
        },
    );
    row("cold (a new CachedCounter)", cold);
    // The same counter on every run.
    let again = |name: &str, counter: &dyn TokenCounter| {
        let p = paired(
            runs,
            strings,
            || (),
            |()| {
                std::hint::black_box(counter.count_conversation(conv));
            },
        );
        row(name, p);
    };
    again(
        "uncached (TiktokenCounter)",
        &TiktokenCounter::new(Tokenizer::O200kBase),
    );
    let warm = CachedCounter::new(TiktokenCounter::new(Tokenizer::O200kBase));
    warm.count_conversation(conv);
    again("warm (the same CachedCounter)", &warm);
}
