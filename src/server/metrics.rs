//! Prometheus metrics kept in the state (one registry per [`super::AppState`], no globals).

use crate::report::Report;
use prometheus::core::Collector;
use prometheus::{
    CounterVec, Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec,
    IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// The service's counters and histograms.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    runs: RunMetrics,
    proxy: ProxyMetrics,
    held: HeldMetrics,
    store: StoreMetrics,
    /// Summary-tier LLM calls. The summary tier feeds this; until it is configured it stays 0.
    pub llm_calls: IntCounter,
    /// Summary-tier LLM calls that failed (fed by the summary tier, like `llm_calls`).
    pub llm_failures: IntCounter,
    /// Attempts the open circuit breaker refused without a call.
    pub llm_refused: IntCounter,
}

/// What compaction runs did: runs, tokens, time, refusals, panics, opaque units, input cost.
#[derive(Clone)]
struct RunMetrics {
    compactions: IntCounterVec,
    tokens_before: IntCounterVec,
    tokens_after: IntCounterVec,
    latency: HistogramVec,
    guard_rejections: IntCounter,
    panics: IntCounter,
    opaque: IntCounterVec,
    input_tokens: IntCounterVec,
    input_cost: CounterVec,
}

/// What the proxy did with bodies, and its replay and read caches.
#[derive(Clone)]
struct ProxyMetrics {
    requests: IntCounterVec,
    skipped: IntCounterVec,
    counts: IntCounter,
    replay_bytes: IntGaugeVec,
    replay_hits: IntCounter,
    read_bytes: IntGaugeVec,
}

/// What the service holds in memory: compaction memory, token count cache, learned ratios,
/// recall store.
#[derive(Clone)]
struct HeldMetrics {
    memory_bytes: IntGaugeVec,
    memory_max_bytes: IntGaugeVec,
    token_cache_bytes: IntGaugeVec,
    token_ratio: GaugeVec,
    learned_bytes: IntGaugeVec,
    recall_entries: IntGauge,
    recall_bytes: IntGaugeVec,
    recall_evictions: IntCounter,
}

/// The shared store: up, refusals, errors, bytes.
#[derive(Clone)]
struct StoreMetrics {
    up: IntGaugeVec,
    over_budget: IntCounterVec,
    oom: IntCounterVec,
    errors: IntCounterVec,
    bytes: IntGaugeVec,
}

/// Makes metrics and registers each in a registry.
struct Registrar<'r>(&'r Registry);

impl Registrar<'_> {
    /// Registers `metric` and gives it back.
    fn add<C: Collector + Clone + 'static>(&self, metric: C) -> Result<C, prometheus::Error> {
        self.0.register(Box::new(metric.clone()))?;
        Ok(metric)
    }

    fn counter(&self, name: &str, help: &str) -> Result<IntCounter, prometheus::Error> {
        self.add(IntCounter::new(name, help)?)
    }

    fn counters(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
    ) -> Result<IntCounterVec, prometheus::Error> {
        self.add(IntCounterVec::new(Opts::new(name, help), labels)?)
    }

    fn gauges(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
    ) -> Result<IntGaugeVec, prometheus::Error> {
        self.add(IntGaugeVec::new(Opts::new(name, help), labels)?)
    }
}

impl Metrics {
    /// Registers every metric in a fresh registry.
    ///
    /// # Errors
    /// A prometheus error if a metric is malformed (a bug, caught by the tests).
    pub fn new() -> Result<Metrics, prometheus::Error> {
        let registry = Registry::new();
        let r = Registrar(&registry);
        Ok(Metrics {
            runs: RunMetrics::new(&r)?,
            proxy: ProxyMetrics::new(&r)?,
            held: HeldMetrics::new(&r)?,
            store: StoreMetrics::new(&r)?,
            llm_calls: r.counter(
                "compactor_llm_calls_total",
                "HTTP attempts sent to the summary model (retries included).",
            )?,
            llm_failures: r.counter(
                "compactor_llm_failures_total",
                "HTTP attempts to the summary model that failed (transport, timeout, error status, answer over the cap).",
            )?,
            llm_refused: r.counter(
                "compactor_llm_refused_total",
                "Attempts to the summary model refused by the open circuit breaker (no call made).",
            )?,
            registry,
        })
    }

    /// Records one compaction run.
    pub fn record(&self, report: &Report) {
        let status = serde_json::to_value(report.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        self.runs
            .compactions
            .with_label_values(&[report.strategy.as_str(), status.as_str()])
            .inc();
        self.runs
            .tokens_before
            .with_label_values(&[report.strategy.as_str()])
            .inc_by(report.tokens_before as u64);
        self.runs
            .tokens_after
            .with_label_values(&[report.strategy.as_str()])
            .inc_by(report.tokens_after as u64);
        self.runs
            .latency
            .with_label_values(&[report.strategy.as_str()])
            .observe(report.timings.total_ms / 1000.0);
        self.runs
            .guard_rejections
            .inc_by(report.rejections() as u64);
        for unit in &report.opaque {
            let kind = match unit.what {
                crate::rules::Unknown::Role(_) => "role",
                crate::rules::Unknown::Block { nested: false, .. } => "block",
                crate::rules::Unknown::Block { nested: true, .. } => "nested_block",
            };
            self.runs
                .opaque
                .with_label_values(&[report.format.as_str(), kind])
                .inc();
        }
        if let Some(c) = &report.cost {
            self.record_cost(c);
        }
    }

    /// Adds one request's cost estimate: its input tokens by body and kind, and its cost by
    /// body and unit (`usd` for a model the table prices, `input_tokens` otherwise).
    fn record_cost(&self, c: &crate::cost::CostEstimate) {
        for (body, t, cost) in [
            ("forwarded", &c.forwarded, c.forwarded_cost),
            ("client", &c.client, c.client_cost),
        ] {
            for (kind, n) in [
                ("cache_read", t.cache_read),
                ("cache_write", t.cache_write),
                ("plain", t.plain),
            ] {
                self.runs
                    .input_tokens
                    .with_label_values(&[body, kind])
                    .inc_by(n as u64);
            }
            let unit = if c.priced { "usd" } else { "input_tokens" };
            let scale = if c.priced { 1.0 } else { 1e6 };
            self.runs
                .input_cost
                .with_label_values(&[body, unit])
                .inc_by((cost * scale).max(0.0));
        }
    }

    /// Records what the proxy did with a body.
    pub fn proxied(&self, route: &str, body: &str) {
        self.proxy.requests.with_label_values(&[route, body]).inc();
    }

    /// Records a body the proxy forwarded as it came, and why (`reason`: one of a fixed set,
    /// `proxy::Skip`); counted as `body="skipped"` as well.
    pub fn skipped(&self, route: &str, reason: &str) {
        self.proxied(route, "skipped");
        self.proxy.skipped.with_label_values(&[route, reason]).inc();
    }

    /// Records one `count_tokens` body the pipeline ran on (a count, not a compaction).
    pub fn counted(&self) {
        self.proxy.counts.inc();
    }

    /// Sets `compactor_model_token_ratio` to the learned ratios in force, `(model, ratio)`,
    /// and nothing else (a model evicted from the bounded table loses its series), and the
    /// table's estimated bytes and bound.
    ///
    /// The label is the model's family ([`model_family`]), never the client's own string (a
    /// label per string a client may send would let clients grow /metrics without bound and
    /// carry their text into it): a family's series is the mean of its models' ratios.
    pub fn token_ratios(&self, ratios: &[(String, f64)], bytes: u64, max_bytes: u64) {
        self.held.token_ratio.reset();
        let mut families: std::collections::BTreeMap<&str, (f64, u32)> = Default::default();
        for (model, ratio) in ratios {
            let f = families.entry(model_family(model)).or_default();
            f.0 += *ratio;
            f.1 += 1;
        }
        for (family, (sum, n)) in families {
            self.held
                .token_ratio
                .with_label_values(&[family])
                .set(sum / f64::from(n.max(1)));
        }
        used_and_max(&self.held.learned_bytes, bytes, max_bytes);
    }

    /// Sets the shared store's refusals: requests whose reads or writes ran past their budget,
    /// and operations Redis refused for its `maxmemory` (running totals).
    pub fn store_refusals(&self, over_budget: u64, oom: u64) {
        for (counter, total) in [
            (&self.store.over_budget, over_budget),
            (&self.store.oom, oom),
        ] {
            let c = counter.with_label_values(&["redis"]);
            c.inc_by(total.saturating_sub(c.get()));
        }
    }

    /// Records a compaction that gave no value ([`super::pool::PoolError`]): only panics count.
    pub fn panicked(&self, e: &super::pool::PoolError) {
        if matches!(e, super::pool::PoolError::Panicked(_)) {
            self.runs.panics.inc();
        }
    }

    /// Sets the recall store's counts (entries, bytes held and bound, evictions so far: a
    /// running total).
    pub fn recall(&self, stats: crate::recall::RecallStats) {
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.held.recall_entries.set(gauge(stats.entries));
        self.held
            .recall_bytes
            .with_label_values(&["used"])
            .set(gauge(stats.bytes));
        self.held
            .recall_bytes
            .with_label_values(&["max"])
            .set(gauge(stats.max_bytes));
        self.held.recall_evictions.inc_by(
            stats
                .evictions
                .saturating_sub(self.held.recall_evictions.get()),
        );
    }

    /// Sets the compaction memory's size and bound (bytes) of preset `strategy`.
    pub fn memory(&self, strategy: &str, bytes: u64, max_bytes: u64) {
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.held
            .memory_bytes
            .with_label_values(&[strategy])
            .set(gauge(bytes));
        self.held
            .memory_max_bytes
            .with_label_values(&[strategy])
            .set(gauge(max_bytes));
    }

    /// Sets the shared store's state: up or not, its failed operations so far (a running
    /// total), its bound and, when Redis answered, its bytes (else the last bytes it said, 0
    /// before it ever answered).
    pub fn store(&self, up: bool, errors: u64, used: Option<u64>, max: u64) {
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.store
            .up
            .with_label_values(&["redis"])
            .set(i64::from(up));
        let counter = self.store.errors.with_label_values(&["redis"]);
        counter.inc_by(errors.saturating_sub(counter.get()));
        let used_gauge = self.store.bytes.with_label_values(&["redis", "used"]);
        if let Some(used) = used {
            used_gauge.set(gauge(used));
        }
        self.store
            .bytes
            .with_label_values(&["redis", "max"])
            .set(gauge(max));
    }

    /// Sets the estimated size and bound, in bytes, of the token count cache of vocabulary
    /// `tokenizer` (`o200k_base`, `cl100k_base`).
    pub fn token_cache(&self, tokenizer: &str, bytes: u64, max_bytes: u64) {
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.held
            .token_cache_bytes
            .with_label_values(&["used", tokenizer])
            .set(gauge(bytes));
        self.held
            .token_cache_bytes
            .with_label_values(&["max", tokenizer])
            .set(gauge(max_bytes));
    }

    /// Sets the replay cache's estimated size and bound, in bytes.
    pub fn replay_cache(&self, bytes: u64, max_bytes: u64) {
        used_and_max(&self.proxy.replay_bytes, bytes, max_bytes);
    }

    /// Sets the read cache's estimated size and bound, in bytes.
    pub fn read_cache(&self, bytes: u64, max_bytes: u64) {
        used_and_max(&self.proxy.read_bytes, bytes, max_bytes);
    }

    /// Counts one body answered from the replay cache.
    pub fn replayed(&self) {
        self.proxy.replay_hits.inc();
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        // Encoding into a Vec cannot fail for well-formed metrics.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl RunMetrics {
    fn new(r: &Registrar) -> Result<RunMetrics, prometheus::Error> {
        Ok(RunMetrics {
            compactions: r.counters(
                "compactor_compactions_total",
                "Compaction runs by strategy preset and status.",
                &["strategy", "status"],
            )?,
            tokens_before: r.counters(
                "compactor_tokens_before_total",
                "Tokens of the inputs of compaction runs.",
                &["strategy"],
            )?,
            tokens_after: r.counters(
                "compactor_tokens_after_total",
                "Tokens of the outputs of compaction runs.",
                &["strategy"],
            )?,
            latency: r.add(HistogramVec::new(
                HistogramOpts::new(
                    "compactor_compaction_seconds",
                    "Wall time of compaction runs.",
                )
                .buckets(vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                    5.0, 10.0, 30.0,
                ]),
                &["strategy"],
            )?)?,
            guard_rejections: r.counter(
                "compactor_guard_rejections_total",
                "Strategy outputs the guard refused.",
            )?,
            panics: r.counter(
                "compactor_panics_total",
                "Compactions that panicked (API: answered 500; proxy: the original body forwarded).",
            )?,
            // Labels are the format and what kind of thing was unknown, never its name: a
            // client sending random type names does not grow /metrics.
            opaque: r.counters(
                "compactor_opaque_units_total",
                "Messages of compacted bodies holding a role or block/item type the rule table does not know (kept in place, byte-identical), by format and kind (role, block, nested_block).",
                &["format", "kind"],
            )?,
            input_tokens: r.counters(
                "compactor_input_tokens_total",
                "Estimated input tokens of compacted requests in model tokens, by body (forwarded: what the proxy sent; client: the client's body as it came) and kind (cache_read, cache_write, plain), with prompt caching.",
                &["body", "kind"],
            )?,
            input_cost: r.add(CounterVec::new(
                Opts::new(
                    "compactor_input_cost_total",
                    "Estimated input cost of compacted requests by body (forwarded, client) and unit (usd: priced by the [models] table; input_tokens: input-token equivalents of a model the table does not price).",
                ),
                &["body", "unit"],
            )?)?,
        })
    }
}

impl ProxyMetrics {
    fn new(r: &Registrar) -> Result<ProxyMetrics, prometheus::Error> {
        Ok(ProxyMetrics {
            requests: r.counters(
                "compactor_proxy_requests_total",
                "Proxied requests by route and what was done to the body (passthrough, compacted, reused, repaired, skipped; route other: forwarded as it came, or probe: a client's start-up probe answered here).",
                &["route", "body"],
            )?,
            skipped: r.counters(
                "compactor_proxy_skipped_total",
                "Proxied bodies forwarded as they came, by route and reason (not_json, not_a_request_body, invalid_history, internal_error); also counted as body=skipped in compactor_proxy_requests_total.",
                &["route", "reason"],
            )?,
            counts: r.counter(
                "compactor_count_tokens_total",
                "Bodies of the proxy's /v1/messages/count_tokens route the pipeline ran on (counts, not compactions: not in compactor_compactions_total).",
            )?,
            replay_bytes: r.gauges(
                "compactor_replay_cache_bytes",
                "Estimated bytes of the proxy's replay cache (kind=used), and its bound (kind=max, server.replay_cache_bytes).",
                &["kind"],
            )?,
            replay_hits: r.counter(
                "compactor_replay_hits_total",
                "Proxied bodies seen before byte for byte and answered from the replay cache (also counted in compactor_proxy_requests_total).",
            )?,
            read_bytes: r.gauges(
                "compactor_read_cache_bytes",
                "Estimated bytes of the proxy's read cache (kind=used: session bodies and their parsed histories), and its bound (kind=max, server.read_cache_bytes).",
                &["kind"],
            )?,
        })
    }
}

impl HeldMetrics {
    fn new(r: &Registrar) -> Result<HeldMetrics, prometheus::Error> {
        Ok(HeldMetrics {
            memory_bytes: r.gauges(
                "compactor_memory_bytes",
                "Estimated bytes held by the compaction memory, by strategy preset.",
                &["strategy"],
            )?,
            memory_max_bytes: r.gauges(
                "compactor_memory_max_bytes",
                "Bound of the compaction memory in bytes (server.memory_bytes), by strategy preset.",
                &["strategy"],
            )?,
            token_cache_bytes: r.gauges(
                "compactor_token_cache_bytes",
                "Estimated bytes of the token count cache of the pipelines' vocabulary (kind=used, shared by every preset counting with it), and its bound (kind=max, server.token_cache_bytes).",
                &["kind", "tokenizer"],
            )?,
            token_ratio: r.add(token_ratio_gauge()?)?,
            learned_bytes: r.gauges(
                "compactor_learned_ratios_bytes",
                "Estimated bytes of the learned per-model token ratios (kind=used), and their bound (kind=max, [tokens] learned_bytes).",
                &["kind"],
            )?,
            recall_entries: r.add(IntGauge::new(
                "compactor_recall_entries",
                "Originals held by the recall store (cleared blocks and dropped spans).",
            )?)?,
            recall_bytes: r.gauges(
                "compactor_recall_bytes",
                "Bytes of the originals held by the recall store (kind=used), and its bound (kind=max, recall.max_bytes).",
                &["kind"],
            )?,
            recall_evictions: r.counter(
                "compactor_recall_evictions_total",
                "Originals evicted from the recall store by its byte bound (their ids answer 410).",
            )?,
        })
    }
}

impl StoreMetrics {
    fn new(r: &Registrar) -> Result<StoreMetrics, prometheus::Error> {
        Ok(StoreMetrics {
            up: r.gauges(
                "compactor_store_up",
                "1 while the shared store answers, 0 while the service runs on its local store alone.",
                &["backend"],
            )?,
            over_budget: r.counters(
                "compactor_store_over_budget_total",
                "Requests whose shared store reads or writes ran past their budget (store.timeout_ms) and were given up.",
                &["backend"],
            )?,
            oom: r.counters(
                "compactor_store_oom_total",
                "Shared store operations Redis refused because it reached its maxmemory (OOM).",
                &["backend"],
            )?,
            errors: r.counters(
                "compactor_store_errors_total",
                "Shared store operations that failed (the local store served instead).",
                &["backend"],
            )?,
            bytes: r.gauges(
                "compactor_store_bytes",
                "Bytes this service keeps in the shared store (its eviction count), and its bound (kind=max).",
                &["backend", "kind"],
            )?,
        })
    }
}

/// Sets `vec{kind="used"}` to `used` and `vec{kind="max"}` to `max` (bytes, saturated).
fn used_and_max(vec: &IntGaugeVec, used: u64, max: u64) {
    let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    vec.with_label_values(&["used"]).set(gauge(used));
    vec.with_label_values(&["max"]).set(gauge(max));
}

/// `compactor_model_token_ratio{model}`: the model tokens per counted token in force for each
/// model in the proxy's bounded table of learned ratios (learned from usage, or the
/// configured ratio while every sample was ignored).
fn token_ratio_gauge() -> Result<GaugeVec, prometheus::Error> {
    GaugeVec::new(
        Opts::new(
            "compactor_model_token_ratio",
            "Model tokens per counted token in force, per model of the bounded learned-ratio table ([tokens] learned_bytes).",
        ),
        &["model"],
    )
}

/// The summarizer's calls, counted into these metrics (lent to it by [`crate::llm::scope`]).
impl crate::llm::scope::CallObserver for Metrics {
    fn sent(&self) {
        self.llm_calls.inc();
    }
    fn failed(&self) {
        self.llm_failures.inc();
    }
    fn refused(&self) {
        self.llm_refused.inc();
    }
}

/// The families a `model` label may name; any other model is `other`.
const FAMILIES: [&str; 11] = [
    "claude", "gpt", "o1", "o3", "o4", "gemini", "mistral", "llama", "deepseek", "qwen", "grok",
];

/// The family of a request's `model` for a /metrics label: the first of [`FAMILIES`] the name
/// starts with (after a `provider/` prefix, case aside), else `other`.
pub fn model_family(model: &str) -> &'static str {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    FAMILIES
        .iter()
        .find(|f| {
            name.strip_prefix(**f).is_some_and(|rest| {
                rest.is_empty() || !rest.starts_with(|c: char| c.is_ascii_alphabetic())
            })
        })
        .copied()
        .unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::model_family;

    #[test]
    fn a_model_label_is_a_known_family_or_other() {
        for (model, family) in [
            ("claude-sonnet-4-5", "claude"),
            ("anthropic/claude-opus-4-6", "claude"),
            ("gpt-4o-2024-08-06", "gpt"),
            ("o3-mini", "o3"),
            ("gemini-2.5-pro", "gemini"),
            ("gptx-secret-team-name", "other"),
            ("sk-ant-api03-AAAA", "other"),
            ("", "other"),
        ] {
            assert_eq!(model_family(model), family, "{model}");
        }
    }
}
