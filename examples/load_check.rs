//! Load check of `compactor serve` in proxy mode (run by `scripts/load-check.sh`, not by the tests).
//!
//! Starts a fake Anthropic upstream on 127.0.0.1, starts `compactor serve` (the binary given as
//! the first argument) pointed at it, and runs N concurrent agent loops for a bounded time:
//! first straight at the upstream (baseline), then through the proxy. Each loop replays a growing
//! coding session turn by turn, so the proxy passes bodies through, compacts them, and reuses
//! remembered prefixes. Prints requests/s, p50/p99 latency, the latency the proxy adds, and errors.
//! Sends traffic to 127.0.0.1 only.
//!
//! `cargo run --example load_check -- target/debug/compactor [CLIENTS] [SECONDS] [BODY.json BUDGET]`
//!
//! With BODY.json (one Anthropic request body, e.g. a corpus session through `compactor convert`)
//! and BUDGET (tokens), every client sends that body on every turn instead: over the trigger when
//! BUDGET is below its size (compacted once, then served from the memory), under it otherwise.
//! During the proxy phase a probe times `GET /healthz` every 20 ms and its p99 is printed, and
//! at the end the service's peak resident set (`VmHWM`). The probe runs on a thread and a
//! runtime of its own, so its figure is the service's latency, not this program's queueing.
//!
//! A sixth argument `distinct` makes every request's body unique (a `metadata.user_id` of its
//! own), so nothing is remembered or replayed: each body over the trigger is compacted afresh
//! and the caches fill up to their bounds (peak RSS under a distinct-bodies load). Extra
//! `[server]` lines for the service come from `LOAD_CHECK_SERVER` (e.g.
//! `LOAD_CHECK_SERVER='memory_bytes = 8388608'`); otherwise the service runs with its defaults
//! (`concurrency_limit = 64`: past 64 clients the others wait for a place, their bodies unread).
//!
//! A sixth argument `grow` makes each client play an agent over BODY.json's history instead:
//! turn k sends the messages up to the k-th cut after the start (a cut ends with a user
//! message, so every body is a valid request), so each body is one exchange longer than the
//! one before it and the compaction memory holds its predecessor. The start is the first cut
//! past 60% of the history's bytes (over the trigger for the 170k-token session at a budget of
//! 150k; `LOAD_CHECK_GROW_START=FRACTION` moves it). Clients start at different cuts and each
//! has a `metadata.user_id` of its own, so no two share a sequence and nothing is replayed;
//! at the end of the history a client starts again under a new `user_id` (a new session: one
//! fresh compaction, counted in the figures). Every client sends its first body before the
//! clock starts (untimed), so the phase measures continuations from a warm memory.

use axum::Router;
use axum::routing::post;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn history(client: usize, rounds: usize) -> Value {
    let mut messages =
        vec![json!({"role": "user", "content": format!("Client {client}: fix the failing test")})];
    for i in 0..rounds {
        let id = format!("toolu_{client}_{i:03}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Reading src/f{i}.rs.")},
            {"type": "tool_use", "id": id, "name": "Read", "input": {"path": format!("src/f{i}.rs")}}
        ]}));
        let file: String = (0..40)
            .map(|k| format!("fn f{i}_{k}() {{ /* line {k} */ }}\n"))
            .collect();
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": file}
        ]}));
    }
    json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You are a coding agent.", "messages": messages})
}

struct Outcome {
    latencies: Vec<Duration>,
    errors: usize,
    elapsed: Duration,
    /// Grow mode: turns that began a new session (a fresh compaction).
    restarts: usize,
}

/// What each client sends.
#[derive(Clone)]
enum Bodies {
    /// The generated small histories, turn by turn.
    Generated,
    /// One body on every turn (unique per turn when `distinct`).
    Fixed { body: String, distinct: bool },
    /// Growing prefixes of one history (grow mode), each a JSON object body without its `{`.
    Grow(std::sync::Arc<Vec<String>>),
}

/// The bodies of grow mode: `body`'s history cut after every user message from the first one
/// past `start` (a fraction of its bytes) to the end, each serialized without its leading `{`
/// so a client can put its own `metadata` first.
fn grow_bodies(body: &str, start: f64) -> anyhow::Result<Vec<String>> {
    let value: Value = serde_json::from_str(body)?;
    let messages = value
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow::anyhow!("BODY.json has no messages array"))?;
    let total: usize = messages.iter().map(|m| m.to_string().len()).sum();
    let (mut seen, mut out) = (0usize, Vec::new());
    for (i, m) in messages.iter().enumerate() {
        seen += m.to_string().len();
        let user = m.get("role").and_then(Value::as_str) == Some("user");
        if user && seen as f64 >= start * total as f64 {
            let mut cut = value.clone();
            if let Some(list) = cut.get_mut("messages").and_then(Value::as_array_mut) {
                list.truncate(i + 1);
            }
            let text = cut.to_string();
            out.push(text.strip_prefix('{').unwrap_or(&text).to_string());
        }
    }
    anyhow::ensure!(
        !out.is_empty(),
        "no cut of BODY.json ends with a user message"
    );
    Ok(out)
}

/// `body` with a `metadata.user_id` unique to this client and turn as its first field.
fn unique(body: &str, client: usize, turn: usize) -> String {
    let rest = body.trim_start().strip_prefix('{').unwrap_or(body);
    format!("{{\"metadata\":{{\"user_id\":\"load-{client}-{turn}\"}},{rest}")
}

/// Client `c`'s body of `turn` (grow mode: the cut `offset + turn`, and whether it begins a
/// new session). `phase` keeps the direct and the proxy phase's `user_id`s apart.
fn body_of(bodies: &Bodies, c: usize, clients: usize, turn: usize, phase: &str) -> (String, bool) {
    match bodies {
        Bodies::Generated => {
            let r = turn % 60 + 1;
            (history(c, r).to_string(), false)
        }
        Bodies::Fixed { body, distinct } => {
            if *distinct {
                (unique(body, c, turn), false)
            } else {
                (body.clone(), false)
            }
        }
        Bodies::Grow(cuts) => {
            // Spread the clients' starts over the first half of the cuts.
            let offset = c * (cuts.len() / 2).max(1) / clients.max(1);
            let step = offset + turn;
            let (session, k) = (step / cuts.len(), step % cuts.len());
            let restart = turn > 0 && k == 0;
            (
                format!(
                    "{{\"metadata\":{{\"user_id\":\"grow-{phase}-{c}-{session}\"}},{}",
                    cuts[k]
                ),
                restart,
            )
        }
    }
}

/// `clients` loops sending `bodies` to `base` for `duration` (from the moment every client
/// is ready, which is sent on `started`).
async fn run(
    base: &str,
    clients: usize,
    duration: Duration,
    bodies: Bodies,
    phase: &str,
    started: Option<std::sync::mpsc::Sender<Instant>>,
) -> Outcome {
    let http = reqwest::Client::new();
    let mut tasks = Vec::new();
    // Grow mode: every client's first body goes before the clock starts.
    let warm = matches!(bodies, Bodies::Grow(_));
    let ready = std::sync::Arc::new(tokio::sync::Barrier::new(clients + 1));
    let (start_tx, start_rx) = tokio::sync::watch::channel(None::<Instant>);
    for c in 0..clients {
        let http = http.clone();
        let url = format!("{base}/v1/messages");
        let bodies = bodies.clone();
        let phase = phase.to_string();
        let ready = ready.clone();
        let mut start_rx = start_rx.clone();
        tasks.push(tokio::spawn(async move {
            let send = |body: String| {
                http.post(&url)
                    .header("x-api-key", "sk-load-check")
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
            };
            let mut turn = 0usize;
            let mut errors = 0usize;
            if warm {
                let (body, _) = body_of(&bodies, c, clients, turn, &phase);
                match send(body).await {
                    Ok(r) if r.status().is_success() => {
                        if r.bytes().await.is_err() {
                            errors += 1;
                        }
                    }
                    _ => errors += 1,
                }
                turn += 1;
            }
            ready.wait().await;
            let deadline = loop {
                if let Some(t) = *start_rx.borrow_and_update() {
                    break t + duration;
                }
                if start_rx.changed().await.is_err() {
                    break Instant::now();
                }
            };
            let (mut lat, mut restarts) = (Vec::new(), 0usize);
            while Instant::now() < deadline {
                let (body, restart) = body_of(&bodies, c, clients, turn, &phase);
                restarts += usize::from(restart);
                let t0 = Instant::now();
                match send(body).await {
                    Ok(r) if r.status().is_success() => match r.bytes().await {
                        Ok(_) => lat.push(t0.elapsed()),
                        Err(_) => errors += 1,
                    },
                    _ => errors += 1,
                }
                turn += 1;
            }
            (lat, errors, restarts)
        }));
    }
    ready.wait().await;
    let began = Instant::now();
    let _ = start_tx.send(Some(began));
    if let Some(tx) = started {
        let _ = tx.send(began);
    }
    let mut out = Outcome {
        latencies: Vec::new(),
        errors: 0,
        elapsed: Duration::ZERO,
        restarts: 0,
    };
    for t in tasks {
        match t.await {
            Ok((lat, errors, restarts)) => {
                out.latencies.extend(lat);
                out.errors += errors;
                out.restarts += restarts;
            }
            Err(_) => out.errors += 1,
        }
    }
    out.elapsed = began.elapsed();
    out.latencies.sort();
    out
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// The command line: binary, clients, seconds, body, budget and mode.
struct Args {
    bin: String,
    clients: usize,
    seconds: u64,
    /// BODY.json, when given.
    fixed: Option<String>,
    budget: usize,
    distinct: bool,
    grow: bool,
}

impl Args {
    fn parse() -> anyhow::Result<Args> {
        let args: Vec<String> = std::env::args().collect();
        let mode = args.get(6).map_or("", String::as_str);
        Ok(Args {
            bin: args
                .get(1)
                .cloned()
                .unwrap_or_else(|| "target/debug/compactor".into()),
            clients: args.get(2).map_or(Ok(16), |s| s.parse())?,
            seconds: args.get(3).map_or(Ok(10), |s| s.parse())?,
            fixed: args.get(4).map(std::fs::read_to_string).transpose()?,
            budget: args.get(5).map_or(Ok(6000), |s| s.parse())?,
            distinct: mode == "distinct",
            grow: mode == "grow",
        })
    }

    /// What each client sends.
    fn bodies(&self) -> anyhow::Result<Bodies> {
        Ok(match (&self.fixed, self.grow) {
            (None, _) => Bodies::Generated,
            (Some(body), false) => Bodies::Fixed {
                body: body.clone(),
                distinct: self.distinct,
            },
            (Some(body), true) => {
                let start = std::env::var("LOAD_CHECK_GROW_START")
                    .ok()
                    .map_or(Ok(0.6), |s| s.parse::<f64>())?;
                Bodies::Grow(std::sync::Arc::new(grow_bodies(body, start)?))
            }
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    let bodies = args.bodies()?;
    // Only a fixed body is sent once before the proxy phase; grow mode warms each client.
    let fixed = args.fixed.clone().filter(|_| !args.grow);
    let upstream_addr = fake_upstream().await?;
    let (mut child, proxy) = start_service(&args, upstream_addr).await?;
    let http = reqwest::Client::new();

    let half = Duration::from_secs(args.seconds);
    let base = run(
        &format!("http://{upstream_addr}"),
        args.clients,
        half,
        bodies.clone(),
        "direct",
        None,
    )
    .await;
    // With a fixed body: one request first, so the proxy phase runs on a warm memory (the
    // cold compaction's time is printed apart).
    let warmup = match &fixed {
        Some(body) => Some(warm_up(&http, &proxy, body).await?),
        None => None,
    };
    let probe = spawn_probe(format!("{proxy}/healthz"), half);
    let cpu_before = child.id().and_then(cpu_seconds);
    let prox = run(
        &proxy,
        args.clients,
        half,
        bodies.clone(),
        "proxy",
        Some(probe.1),
    )
    .await;
    let cpu_after = child.id().and_then(cpu_seconds);
    let health = probe
        .0
        .join()
        .map_err(|_| anyhow::anyhow!("the /healthz probe panicked"))??;
    let metrics = http
        .get(format!("{proxy}/metrics"))
        .send()
        .await?
        .text()
        .await?;
    let peak_rss = child
        .id()
        .and_then(peak_rss)
        .unwrap_or_else(|| "unknown".into());
    child.start_kill()?;
    let _ = child.wait().await;

    let results = Results {
        base,
        prox,
        health,
        warmup,
        peak_rss,
        cpu: cpu_before.zip(cpu_after),
        metrics,
    };
    results.print(&args, &bodies);
    anyhow::ensure!(
        results.prox.errors == 0,
        "{} errors through the proxy",
        results.prox.errors
    );
    Ok(())
}

/// Starts the fake Anthropic upstream on 127.0.0.1 and gives its address.
async fn fake_upstream() -> anyhow::Result<std::net::SocketAddr> {
    let upstream = Router::new().route(
        "/v1/messages",
        // The body is read whole (as a provider does): an unread 700 KB body makes hyper reset
        // the connection under the client, which would count as the proxy's error.
        post(|_body: axum::body::Bytes| async {
            (
                [("content-type", "application/json")],
                r#"{"id":"msg_load","type":"message","content":[{"type":"text","text":"ok"}]}"#,
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let upstream_addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, upstream).await });
    Ok(upstream_addr)
}

/// Starts `compactor serve` on a free port of 127.0.0.1, pointed at `upstream_addr`, and
/// waits until it answers: the child and the proxy's base URL.
async fn start_service(
    args: &Args,
    upstream_addr: std::net::SocketAddr,
) -> anyhow::Result<(tokio::process::Child, String)> {
    let extra = std::env::var("LOAD_CHECK_SERVER").unwrap_or_default();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let dir = std::env::temp_dir().join(format!("compactor-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("load.toml");
    let budget = args.budget;
    std::fs::write(
        &config,
        format!(
            "[budget]\ntokens = {budget}\n[server]\nanthropic_upstream = \"http://{upstream_addr}\"\n{extra}\n"
        ),
    )?;
    let child = tokio::process::Command::new(&args.bin)
        .args(["serve", "--config"])
        .arg(&config)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()?;
    let proxy = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let mut up = false;
    for _ in 0..100 {
        if http.get(format!("{proxy}/healthz")).send().await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::ensure!(up, "compactor serve did not come up on {proxy}");
    Ok((child, proxy))
}

/// Sends `body` once through the proxy: the time of that first (cold) request.
async fn warm_up(http: &reqwest::Client, proxy: &str, body: &str) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    http.post(format!("{proxy}/v1/messages"))
        .header("x-api-key", "sk-load-check")
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await?
        .bytes()
        .await?;
    Ok(t0.elapsed())
}

/// The `/healthz` probe at `url`, every 20 ms for `half` from the instant sent on the channel
/// returned: its thread (giving the sorted latencies) and that channel. Its own thread and
/// runtime: the 128 client tasks and the fake upstream of this program must not delay the
/// probe's own polling.
fn spawn_probe(
    url: String,
    half: Duration,
) -> (
    std::thread::JoinHandle<anyhow::Result<Vec<Duration>>>,
    std::sync::mpsc::Sender<Instant>,
) {
    let (started_tx, started_rx) = std::sync::mpsc::channel::<Instant>();
    let thread = std::thread::spawn(move || -> anyhow::Result<Vec<Duration>> {
        // From the phase's start (after grow mode's untimed first bodies) to its end.
        let deadline = started_rx.recv()? + half;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async move {
            let http = reqwest::Client::new();
            let mut lat = Vec::new();
            while Instant::now() < deadline {
                let t0 = Instant::now();
                if let Ok(r) = http.get(&url).send().await
                    && r.bytes().await.is_ok()
                {
                    lat.push(t0.elapsed());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            lat.sort();
            Ok(lat)
        })
    });
    (thread, started_tx)
}

/// Peak resident set of process `pid` (Linux: VmHWM in /proc/PID/status).
fn peak_rss(pid: u32) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .map(|l| l.trim_start_matches("VmHWM:").trim().to_string())
}

/// What the two phases measured.
struct Results {
    base: Outcome,
    prox: Outcome,
    /// The `/healthz` probe's latencies during the proxy phase, sorted.
    health: Vec<Duration>,
    /// The first (cold) request through the proxy, with a fixed body.
    warmup: Option<Duration>,
    peak_rss: String,
    /// CPU seconds of the service before and after the proxy phase.
    cpu: Option<(f64, f64)>,
    /// The service's /metrics text after the run.
    metrics: String,
}

impl Results {
    fn print(&self, args: &Args, bodies: &Bodies) {
        let (base, prox, clients) = (&self.base, &self.prox, args.clients);
        let rps = |o: &Outcome| o.latencies.len() as f64 / o.elapsed.as_secs_f64();
        println!(
            "load check: {clients} clients, {} s per phase{}, 127.0.0.1 only, binary {}",
            args.seconds,
            if args.distinct {
                ", distinct bodies"
            } else if args.grow {
                ", growing histories"
            } else {
                ""
            },
            args.bin
        );
        if let Bodies::Grow(cuts) = bodies {
            println!(
                "  grow: {} cuts per session; sessions begun again during the proxy phase: {} (fresh compactions)",
                cuts.len(),
                prox.restarts
            );
        }
        for (name, o) in [("direct", base), ("proxy", prox)] {
            println!(
                "{name:>7}: {:>6} ok, {:>3} errors, {:>8.1} req/s, p50 {:>7.2} ms, p99 {:>7.2} ms",
                o.latencies.len(),
                o.errors,
                rps(o),
                pct(&o.latencies, 0.5),
                pct(&o.latencies, 0.99)
            );
        }
        println!(
            "  added: p50 {:.2} ms, p99 {:.2} ms",
            pct(&prox.latencies, 0.5) - pct(&base.latencies, 0.5),
            pct(&prox.latencies, 0.99) - pct(&base.latencies, 0.99)
        );
        let health = &self.health;
        println!(
            "  /healthz while loaded: {} probes, p50 {:.2} ms, p99 {:.2} ms",
            health.len(),
            pct(health, 0.5),
            pct(health, 0.99)
        );
        if let Some(w) = self.warmup {
            println!(
                "  first (cold) request through the proxy: {:.1} ms",
                w.as_secs_f64() * 1000.0
            );
        }
        println!("  peak RSS of compactor serve: {}", self.peak_rss);
        if let Some((a, b)) = self.cpu {
            // Grow mode's untimed first bodies (one per client) ran in the phase too.
            let served = prox.latencies.len() + if args.grow { clients } else { 0 };
            println!(
                "  CPU of compactor serve over the proxy phase: {:.2} s, {:.2} ms per request",
                b - a,
                (b - a) * 1000.0 / served.max(1) as f64
            );
        }
        for line in self.metrics.lines().filter(|l| {
            l.starts_with("compactor_proxy_requests_total")
                || l.starts_with("compactor_replay")
                || l.starts_with("compactor_memory")
                || l.starts_with("compactor_token_cache")
                || l.starts_with("compactor_read_cache")
        }) {
            println!("  {line}");
        }
    }
}

/// User plus system CPU seconds of process `pid` so far (Linux: fields 14 and 15 of
/// /proc/PID/stat, in USER_HZ = 100 ticks a second).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    // After the name, field 3 (state) is index 0, so fields 14 and 15 are 11 and 12.
    Some((ticks(11)? + ticks(12)?) / 100.0)
}
