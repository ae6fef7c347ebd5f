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
//! The whole request path (`proxy_turn`): the proxy (`server::app`, defaults but the replay
//! cache off, so that no body is answered without being read) with a fake upstream on
//! 127.0.0.1, sent the largest corpus session turn by turn as an agent sends it (each body one
//! exchange longer, from 60% of the session to its end, then again from there: every body is
//! read with the session's last read, as the proxy reads a continuing session), once with the
//! default budget (every turn under the trigger: forwarded as it came) and once with a budget of
//! 100,000 tokens (every turn over it: continued from the compaction memory). The table gives
//! the median time of a turn, what the proxy did (the `x-compactor-tokens` tier), and the
//! scanner's median on the same bodies: its share of a turn.
//!
//! Under `cargo bench` the tables come first (medians of alternating runs, the ratios to the
//! scanner); `COMPACTOR_BENCH_TABLES_ONLY=1` prints only those.
//!
//! `cargo bench --bench slices -- --warm-up-time 1 --measurement-time 3`

mod common;

#[allow(dead_code)]
#[path = "../src/format/slices/oracle.rs"]
mod oracle;
#[allow(dead_code)]
#[path = "../src/format/slices/scanner.rs"]
mod scanner;

use axum::Router;
use axum::body::{Body as HttpBody, to_bytes};
use axum::http::Request;
use bytes::Bytes;
use compactor::config::Loader;
use compactor::format::{self, Format, detect::ImportOptions};
use compactor::server::{AppState, app};
use compactor::{Conversation, Role};
use criterion::{Criterion, criterion_group, criterion_main};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tower::ServiceExt;

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

/// The largest corpus session as an agent sends it: one Anthropic body per user message from
/// 60% of its messages to its end, each the history up to that message.
fn turns() -> Vec<Bytes> {
    let whole = common::load_whole(common::LARGEST);
    let n = whole.messages.len();
    (n * 6 / 10..n)
        .filter(|&i| whole.messages[i].role == Role::User)
        .map(|i| {
            let mut c: Conversation = whole.clone();
            c.messages.truncate(i + 1);
            Bytes::from(Format::Anthropic.write_bytes(&c))
        })
        .collect()
}

/// The proxy with the default settings (the replay cache off; a budget of `budget` tokens when
/// given) forwarding to a fake upstream on 127.0.0.1 that answers a small JSON message to
/// every request.
fn proxy(rt: &Runtime, budget: Option<usize>) -> Router {
    let url = rt.block_on(async {
        let upstream = Router::new().fallback(|| async {
            axum::Json(serde_json::json!({"id": "msg_1", "type": "message", "content": []}))
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("fake upstream: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("fake upstream: {e}"));
        tokio::spawn(async move { axum::serve(listener, upstream).await });
        format!("http://{addr}")
    });
    let loader = Loader::default();
    let mut settings = loader
        .load()
        .unwrap_or_else(|e| panic!("default settings: {e}"));
    settings.server.anthropic_upstream = url;
    settings.server.replay_cache_bytes = 0;
    if let Some(tokens) = budget {
        settings.budget.tokens = tokens;
    }
    app(AppState::from_parts(settings, loader, None).unwrap_or_else(|e| panic!("proxy: {e}")))
}

/// One turn through the proxy: the tier it names in `x-compactor-tokens`.
async fn turn(router: &Router, body: Bytes) -> String {
    let request = Request::post("/v1/messages")
        .header("content-type", "application/json")
        .header("x-api-key", "sk-ant-bench")
        .header("anthropic-version", "2023-06-01")
        .body(HttpBody::from(body))
        .unwrap_or_else(|e| panic!("request: {e}"));
    let response = router
        .clone()
        .oneshot(request)
        .await
        .unwrap_or_else(|e| panic!("proxy: {e}"));
    assert!(response.status().is_success(), "{}", response.status());
    let tier = response
        .headers()
        .get("x-compactor-tokens")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split("tier=").nth(1))
        .map_or("-".to_string(), |v| {
            v.split(';').next().unwrap_or_default().to_string()
        });
    black_box(
        to_bytes(response.into_body(), usize::MAX)
            .await
            .map(|b| b.len()),
    )
    .unwrap_or_else(|e| panic!("response body: {e}"));
    tier
}

/// The whole path's table: median time of a turn (after one untimed pass that fills the
/// caches), the tiers applied, and the scanner's median on the same bodies.
fn turn_table(rt: &Runtime, router: &Router, turns: &[Bytes], setting: &str) {
    for body in turns {
        rt.block_on(turn(router, body.clone()));
    }
    let (mut whole, mut scans) = (Vec::new(), Vec::new());
    let mut tiers = BTreeMap::<String, usize>::new();
    for _ in 0..3 {
        for body in turns {
            let start = Instant::now();
            let tier = rt.block_on(turn(router, body.clone()));
            whole.push(start.elapsed());
            *tiers.entry(tier).or_default() += 1;
            let start = Instant::now();
            black_box(scanner::spans(black_box(body), "messages"));
            scans.push(start.elapsed());
        }
    }
    let (turn_us, scan_us) = (median_us(whole), median_us(scans));
    eprintln!(
        "\nproxy turns of {} ({} bodies, {} to {} B, 3 passes), {setting}: a turn {turn_us:.1} us (median), the scan of its body {scan_us:.1} us ({:.1}%); tiers {tiers:?}",
        common::LARGEST,
        turns.len(),
        turns.first().map_or(0, Bytes::len),
        turns.last().map_or(0, Bytes::len),
        100.0 * scan_us / turn_us,
    );
}

fn bench(c: &mut Criterion) {
    let bodies = bodies();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let router = proxy(&rt, None);
    let turns = turns();
    if common::benching() {
        table(&bodies);
        turn_table(&rt, &router, &turns, "default budget");
        let budget = 100_000;
        let over = proxy(&rt, Some(budget));
        turn_table(&rt, &over, &turns, &format!("budget {budget}"));
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
    let mut group = c.benchmark_group("proxy_turn");
    let mut next = 0;
    group.bench_function(common::LARGEST, |b| {
        b.iter(|| {
            next = (next + 1) % turns.len();
            rt.block_on(turn(&router, turns[next].clone()))
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
