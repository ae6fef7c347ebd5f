//! `[server]`: where `compactor serve` listens, its limits, and where the proxy forwards.
//!
//! Part of [`Settings`](super::Settings) with or without the `server` feature, so one config
//! file serves the library and the service alike.

use serde::{Deserialize, Serialize};

/// `[server]` settings (every key has a default in `config/compactor.toml`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSettings {
    /// Address to bind (`127.0.0.1:8787`).
    pub listen: String,
    /// Largest request body accepted, in bytes; larger ones get 413.
    pub body_limit_bytes: usize,
    /// Whole-request timeout in seconds (for the proxy: until the upstream's headers arrive).
    pub request_timeout_secs: u64,
    /// Requests served at once; the rest wait.
    pub concurrency_limit: usize,
    /// Name of an environment variable holding a token that clients must present
    /// (`x-compactor-token`, or `authorization: Bearer` on the API routes). Unset = open.
    #[serde(default)]
    pub auth_token_env: Option<String>,
    /// Serve a `listen` address other than loopback without a token (`auth_token_env`): off,
    /// such a service refuses to start; on, it starts with a WARN (issue 35).
    #[serde(default)]
    pub allow_unauthenticated: bool,
    /// Base URL the Anthropic proxy route forwards to.
    pub anthropic_upstream: String,
    /// Base URL the OpenAI proxy routes (`/v1/chat/completions`, `/v1/responses`) forward to.
    pub openai_upstream: String,
    /// Base URL the Gemini routes (`/v1beta/models/{model}:{method}`) and Google pass-through
    /// requests go to.
    #[serde(default = "defaults::gemini_upstream")]
    pub gemini_upstream: String,
    /// Compactions run at once on the blocking pool; the others wait for a worker.
    #[serde(default = "defaults::compaction_workers")]
    pub compaction_workers: usize,
    /// Seconds a connection may take to send a request's headers (HTTP/1; the clock starts
    /// when the connection waits for its next request). Over it the connection is closed.
    #[serde(default = "defaults::thirty")]
    pub header_read_timeout_secs: u64,
    /// Seconds a connection may stay open with no request in flight; then it is closed.
    #[serde(default = "defaults::thirty")]
    pub idle_timeout_secs: u64,
    /// Seconds allowed between two chunks of a request body; over it the request fails
    /// (408 `body_timeout`).
    #[serde(default = "defaults::thirty")]
    pub body_read_timeout_secs: u64,
    /// Seconds a route that reads its body whole (`/v1/messages`, `/v1/messages/count_tokens`,
    /// `/v1/chat/completions`, `/v1/responses`, `/v1/compact`, `/v1/count_tokens`,
    /// `/v1/validate`) may take to receive all of it, from the request's start; over it: 408
    /// `body_timeout`. A pass-through body (streamed to the upstream, any size) gets this long
    /// plus one second for every `body_min_rate_bytes` received.
    #[serde(default = "defaults::thirty")]
    pub body_timeout_secs: u64,
    /// Pass-through request bodies: the rate, in bytes per second, that extends
    /// `body_timeout_secs` (a body slower than this on average is cut once it is past that
    /// deadline: 408 `body_timeout`).
    #[serde(default = "defaults::body_min_rate_bytes")]
    pub body_min_rate_bytes: u64,
    /// Bound of the request bodies being read at once on the routes that read them whole, in
    /// bytes (these do not hold a `concurrency_limit` place while their body comes in); a
    /// chunk waits while the bound is reached. At least `body_limit_bytes`.
    #[serde(default = "defaults::body_buffer_bytes")]
    pub body_buffer_bytes: u64,
    /// Seconds allowed between two chunks of an upstream answer once its headers came; over
    /// it the answer to the client ends (the stream is cut, the connection closed).
    #[serde(default = "defaults::upstream_read_timeout_secs")]
    pub upstream_read_timeout_secs: u64,
    /// Client connections open at once. Unset: 1024, or fewer when the open-file limit (the
    /// soft one, raised to the hard one at start) minus a reserve is lower
    /// ([`crate::server::listen::connection_cap`]). At the cap, a new connection takes the
    /// place of the one idle longest; with none idle it waits to be accepted.
    #[serde(default)]
    pub max_connections: Option<usize>,
    /// Bound of the compaction memory of each strategy preset, in bytes of remembered
    /// outputs (least recently used evicted first).
    #[serde(default = "defaults::memory_bytes")]
    pub memory_bytes: u64,
    /// Seconds to let requests in flight finish after ctrl-c / SIGTERM; then they are cut.
    #[serde(default = "defaults::thirty")]
    pub shutdown_timeout_secs: u64,
    /// Seconds the summary tier may spend on model calls within one request (all calls,
    /// retries and waits included); then it falls back to truncate. At most half of
    /// `request_timeout_secs` is used, so the fallback still answers in time.
    #[serde(default = "defaults::summary_budget_secs")]
    pub summary_budget_secs: f64,
    /// Bound of the token count cache of the proxy's pipeline, in bytes (an entry is about
    /// 128 bytes: a 128-bit block hash, a count and the cache's bookkeeping).
    #[serde(default = "defaults::token_cache_bytes")]
    pub token_cache_bytes: usize,
    /// Largest total size of a request's header names and values, in bytes; over it the
    /// answer is a JSON 431 (`headers_too_large`).
    #[serde(default = "defaults::max_header_bytes")]
    pub max_header_bytes: usize,
    /// Most header fields a request may carry; over it the answer is a JSON 431
    /// (`too_many_headers`). HTTP/1 requests with more than four times as many are refused by
    /// hyper itself with an empty 431 (its parser's bound).
    #[serde(default = "defaults::max_headers")]
    pub max_headers: usize,
    /// Bound of the proxy's replay cache (what it sent for a body it has seen byte for byte,
    /// see `server::replay`), in bytes of outgoing bodies and headers (least recently used
    /// evicted first). `0`: no replay cache.
    #[serde(default = "defaults::replay_cache_bytes")]
    pub replay_cache_bytes: u64,
    /// Bound of the proxy's read cache (the last body of each agent session and its
    /// conversation, so the next turn reads only its new messages; see `server::reads`), in
    /// bytes of bodies and estimated conversation heap (least recently used evicted first).
    /// `0`: no read cache.
    #[serde(default = "defaults::read_cache_bytes")]
    pub read_cache_bytes: u64,
}

/// The largest `max_headers` accepted (hyper's parser is given four times it).
pub const MAX_HEADERS: usize = 10_000;

mod defaults {
    pub fn compaction_workers() -> usize {
        4
    }
    pub fn thirty() -> u64 {
        30
    }
    pub fn gemini_upstream() -> String {
        "https://generativelanguage.googleapis.com".into()
    }
    pub fn upstream_read_timeout_secs() -> u64 {
        300
    }
    pub fn memory_bytes() -> u64 {
        crate::memory::DEFAULT_MEMORY_BYTES
    }
    pub fn summary_budget_secs() -> f64 {
        60.0
    }
    pub fn token_cache_bytes() -> usize {
        crate::tokens::DEFAULT_CACHE_CAPACITY * 128
    }
    pub fn max_header_bytes() -> usize {
        64 * 1024
    }
    pub fn max_headers() -> usize {
        100
    }
    pub fn body_min_rate_bytes() -> u64 {
        8 * 1024
    }
    pub fn body_buffer_bytes() -> u64 {
        256 * 1024 * 1024
    }
    pub fn replay_cache_bytes() -> u64 {
        64 * 1024 * 1024
    }
    pub fn read_cache_bytes() -> u64 {
        64 * 1024 * 1024
    }
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            listen: "127.0.0.1:8787".into(),
            body_limit_bytes: 32 * 1024 * 1024,
            request_timeout_secs: 600,
            concurrency_limit: 64,
            auth_token_env: None,
            allow_unauthenticated: false,
            anthropic_upstream: "https://api.anthropic.com".into(),
            openai_upstream: "https://api.openai.com".into(),
            gemini_upstream: defaults::gemini_upstream(),
            compaction_workers: defaults::compaction_workers(),
            header_read_timeout_secs: defaults::thirty(),
            idle_timeout_secs: defaults::thirty(),
            body_read_timeout_secs: defaults::thirty(),
            body_timeout_secs: defaults::thirty(),
            body_min_rate_bytes: defaults::body_min_rate_bytes(),
            body_buffer_bytes: defaults::body_buffer_bytes(),
            upstream_read_timeout_secs: defaults::upstream_read_timeout_secs(),
            max_connections: None,
            memory_bytes: defaults::memory_bytes(),
            shutdown_timeout_secs: defaults::thirty(),
            summary_budget_secs: defaults::summary_budget_secs(),
            token_cache_bytes: defaults::token_cache_bytes(),
            max_header_bytes: defaults::max_header_bytes(),
            max_headers: defaults::max_headers(),
            replay_cache_bytes: defaults::replay_cache_bytes(),
            read_cache_bytes: defaults::read_cache_bytes(),
        }
    }
}

impl ServerSettings {
    /// The summary tier's time budget in force: `summary_budget_secs`, at most half of
    /// `request_timeout_secs`.
    pub fn summary_budget(&self) -> std::time::Duration {
        let half = self.request_timeout_secs as f64 / 2.0;
        std::time::Duration::from_secs_f64(self.summary_budget_secs.min(half).max(0.0))
    }

    /// Checks ranges; returns `(key, message)` for the first bad value.
    pub(crate) fn check(&self) -> Result<(), (&'static str, String)> {
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            return Err((
                "server.listen",
                format!("not an address (HOST:PORT): {:?}", self.listen),
            ));
        }
        if self.body_limit_bytes == 0 {
            return Err(("server.body_limit_bytes", "must be > 0".into()));
        }
        for (key, secs) in [
            ("server.request_timeout_secs", self.request_timeout_secs),
            (
                "server.header_read_timeout_secs",
                self.header_read_timeout_secs,
            ),
            ("server.idle_timeout_secs", self.idle_timeout_secs),
            ("server.body_read_timeout_secs", self.body_read_timeout_secs),
            ("server.body_timeout_secs", self.body_timeout_secs),
            (
                "server.upstream_read_timeout_secs",
                self.upstream_read_timeout_secs,
            ),
            ("server.shutdown_timeout_secs", self.shutdown_timeout_secs),
        ] {
            super::check_secs(key, secs)?;
        }
        if self.concurrency_limit == 0 {
            return Err(("server.concurrency_limit", "must be > 0".into()));
        }
        for (key, n) in [
            ("server.compaction_workers", self.compaction_workers as u64),
            (
                "server.max_connections",
                self.max_connections.map_or(1, |n| n as u64),
            ),
            ("server.memory_bytes", self.memory_bytes),
            ("server.token_cache_bytes", self.token_cache_bytes as u64),
            ("server.max_header_bytes", self.max_header_bytes as u64),
            ("server.max_headers", self.max_headers as u64),
            ("server.body_min_rate_bytes", self.body_min_rate_bytes),
        ] {
            if n == 0 {
                return Err((key, "must be > 0".into()));
            }
        }
        super::check_secs_f64(
            "server.summary_budget_secs",
            self.summary_budget_secs,
            false,
        )?;
        if self.body_buffer_bytes < self.body_limit_bytes as u64 {
            return Err((
                "server.body_buffer_bytes",
                format!(
                    "must be at least server.body_limit_bytes ({}), found {}",
                    self.body_limit_bytes, self.body_buffer_bytes
                ),
            ));
        }
        if self.max_headers > MAX_HEADERS {
            return Err((
                "server.max_headers",
                format!("must be at most {MAX_HEADERS}, found {}", self.max_headers),
            ));
        }
        for (key, url) in [
            ("server.anthropic_upstream", &self.anthropic_upstream),
            ("server.openai_upstream", &self.openai_upstream),
            ("server.gemini_upstream", &self.gemini_upstream),
        ] {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err((key, format!("not an http(s) URL: {url:?}")));
            }
        }
        Ok(())
    }
}
