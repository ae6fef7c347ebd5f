//! The model behind the `summary` strategy: one small object-safe trait and two HTTP clients.
//!
//! ```text
//! summary strategy -> Summarizer::complete(SummaryRequest) -> anthropic.rs  POST {base}/v1/messages
//!                                                          -> openai.rs     POST {base}/v1/chat/completions
//!                     (timeout per attempt; bounded retries on 429/5xx honouring retry-after,
//!                      and on transport failures: post.rs, with `backon`)
//! ```
//!
//! The strategy decides *what* to send (a pure planner); this module only sends it. The API key is
//! read once from the environment variable named in the config and is never logged (`Debug` of
//! the clients prints it redacted). A local server (llama.cpp's `llama-server`, Ollama, vLLM) may
//! need no key at all.
//!
//! Every client of [`from_config`] also has, per attempt, a `breaker::Breaker` that bounds the
//! attempts in flight and stops retries once the model keeps failing, and an answer size cap
//! (`max_answer_bytes`, read incrementally, never buffered past it); per call it honours the
//! [`scope::Scope`] a service lends it: a deadline, a call counter and a shared summary cache.

pub mod anthropic;
pub(crate) mod breaker;
pub mod openai;
mod post;
pub mod scope;

pub(crate) use post::{http_client, post_json};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// One completion request: a system prompt and one user message, answered with plain text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRequest {
    /// The instructions (the summary prompt).
    pub system: String,
    /// The material: a transcript, partial summaries, or an old summary plus new messages.
    pub user: String,
    /// Upper limit on the answer, in tokens.
    pub max_output_tokens: usize,
}

/// A model that writes summaries. Object safe: config picks the provider at run time and the
/// strategy holds an `Arc<dyn Summarizer>`.
///
/// Contract: `complete` sends one request (retrying transient failures within its own bounds)
/// and returns the model's text, or an [`LlmError`]; it never returns an empty string as success.
#[async_trait::async_trait]
pub trait Summarizer: Send + Sync {
    /// The model name (part of the summary cache key).
    fn model(&self) -> &str;

    /// The model's context window in tokens: prompt plus answer must fit.
    fn context_window(&self) -> usize;

    /// Sends `request` and returns the answer's text.
    ///
    /// # Errors
    /// [`LlmError`] on transport failures, timeouts, HTTP errors left after retries, answers of
    /// an unexpected shape and empty answers.
    async fn complete(&self, request: &SummaryRequest) -> Result<String, LlmError>;
}

/// Errors at the LLM boundary.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The server answered with an error status (after the retries, for 429/5xx).
    #[error("HTTP {status} from {url}: {body}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The endpoint.
        url: String,
        /// The start of the response body.
        body: String,
    },
    /// No answer within the timeout.
    #[error("no answer from {url} within {timeout:?}")]
    Timeout {
        /// The endpoint.
        url: String,
        /// The timeout in force.
        timeout: Duration,
    },
    /// Connection or protocol failure.
    #[error("request to {url} failed: {source}")]
    Transport {
        /// The endpoint.
        url: String,
        /// The client's error.
        #[source]
        source: reqwest::Error,
    },
    /// The answer is not of the documented shape.
    #[error("unexpected answer from {url}: {message}: {body}")]
    Decode {
        /// The endpoint.
        url: String,
        /// What was wrong.
        message: String,
        /// The start of the response body.
        body: String,
    },
    /// The model answered with no text.
    #[error("empty answer from {url}")]
    Empty {
        /// The endpoint.
        url: String,
    },
    /// The configured API key variable is not set.
    #[error("environment variable {0} (llm.api_key_env) is not set")]
    MissingKey(String),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    /// The answer is longer than `llm.max_answer_bytes`; reading stopped there.
    #[error("the answer from {url} is over {limit} bytes (llm.max_answer_bytes)")]
    TooLarge {
        /// The endpoint.
        url: String,
        /// The cap, in bytes.
        limit: usize,
    },
    /// The circuit breaker refused the attempt: the model failed too often just now.
    #[error("circuit open for {url}: {why}")]
    CircuitOpen {
        /// The endpoint.
        url: String,
        /// `N s of cool-down left`, or `a probe is already out`.
        why: String,
    },
    /// The summary tier's time budget (the request's deadline) ran out.
    #[error("the summary time budget ran out")]
    Budget,
}

/// Which API the configured endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Provider {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI Chat Completions, or any compatible server.
    Openai,
}

/// `[llm]`: the summarizer's endpoint. Absent from the config means no LLM (the `summary` tier is
/// skipped).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    /// `anthropic` or `openai`.
    pub provider: Provider,
    /// Server root without `/v1` (default: the provider's public API).
    #[serde(default)]
    pub base_url: Option<String>,
    /// The model name sent in each request.
    pub model: String,
    /// Name of the environment variable holding the API key; unset = send no key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Upper limit on one answer, in tokens.
    #[serde(default = "defaults::max_output_tokens")]
    pub max_output_tokens: usize,
    /// Timeout of one attempt, in seconds.
    #[serde(default = "defaults::timeout_secs")]
    pub timeout_secs: f64,
    /// Retries after a 429 or 5xx answer or a transport failure (connection refused, reset or
    /// cut before the answer was read).
    #[serde(default = "defaults::retries")]
    pub retries: u32,
    /// The summarizer model's context window, in tokens (prompt + answer).
    #[serde(default = "defaults::context_window")]
    pub context_window: usize,
    /// Fields added to every request body, over those compactor sets (`model`, `max_tokens`,
    /// `temperature`), for the options an endpoint takes: `{ frequency_penalty = 0.5 }` (OpenAI
    /// and llama.cpp), `{ top_k = 40 }`, `{ metadata = { user_id = "..." } }` (Anthropic).
    /// The keys `messages` and `system` carry the request itself and are never replaced, and
    /// `stream` is never set (the answer is read as one JSON body).
    #[serde(default)]
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// Largest answer body read, in bytes; a longer one fails the attempt (read in chunks and
    /// dropped at the cap, so a runaway answer cannot grow the process).
    #[serde(default = "defaults::max_answer_bytes")]
    pub max_answer_bytes: usize,
    /// Consecutive failed attempts that open the circuit breaker; also the most attempts in
    /// flight at once (0: no breaker). See `llm::breaker`.
    #[serde(default = "defaults::breaker_threshold")]
    pub breaker_threshold: u32,
    /// Seconds the open breaker refuses attempts before it lets one probe through.
    #[serde(default = "defaults::breaker_cooldown_secs")]
    pub breaker_cooldown_secs: f64,
}

/// `body` with the configured [`LlmConfig::extra_body`] fields set on it (never `messages`,
/// `system` or `stream`).
pub(crate) fn with_extra_body(
    mut body: serde_json::Value,
    config: &LlmConfig,
) -> serde_json::Value {
    if let Some(obj) = body.as_object_mut() {
        for (k, v) in &config.extra_body {
            if !matches!(k.as_str(), "messages" | "system" | "stream") {
                obj.insert(k.clone(), v.clone());
            }
        }
    }
    body
}

mod defaults {
    pub fn max_output_tokens() -> usize {
        2_048
    }
    pub fn timeout_secs() -> f64 {
        120.0
    }
    pub fn retries() -> u32 {
        2
    }
    pub fn context_window() -> usize {
        128_000
    }
    pub fn max_answer_bytes() -> usize {
        1024 * 1024
    }
    pub fn breaker_threshold() -> u32 {
        5
    }
    pub fn breaker_cooldown_secs() -> f64 {
        30.0
    }
}

impl LlmConfig {
    /// The base URL in force: the server root, without a trailing slash and without a
    /// trailing `/v1` (the clients add `/v1/...`; a `base_url` written the way the OpenAI
    /// SDKs take it, `http://127.0.0.1:8080/v1`, does not post to `/v1/v1/...`).
    pub fn base(&self) -> String {
        let url = self
            .base_url
            .clone()
            .unwrap_or_else(|| match self.provider {
                Provider::Anthropic => "https://api.anthropic.com".into(),
                Provider::Openai => "https://api.openai.com".into(),
            });
        let url = url.trim_end_matches('/');
        url.strip_suffix("/v1").unwrap_or(url).to_string()
    }

    /// The timeout of one attempt.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_secs.max(0.001))
    }

    /// The circuit breaker of one client of this config: per attempt, with a probe
    /// ([`breaker::Policy::Probe`]); a cool-down that is negative or not finite is 0.
    pub(crate) fn breaker(&self) -> breaker::Breaker {
        let cooldown = if self.breaker_cooldown_secs.is_finite() {
            self.breaker_cooldown_secs.max(0.0)
        } else {
            0.0
        };
        breaker::Breaker::new(
            self.breaker_threshold,
            Duration::from_secs_f64(cooldown),
            breaker::Policy::Probe,
        )
    }
}

/// The 128-bit cache key of `request` to `model`: the model, both prompts and the answer
/// limit, hashed with xxh3 (the same request always has the same key, in every replica).
pub fn request_key(model: &str, request: &SummaryRequest) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for part in [model, &request.system, &request.user] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.update(&(request.max_output_tokens as u64).to_le_bytes());
    h.digest128()
}

/// A client with the request's [`scope::Scope`] applied around each call: the shared cache
/// first, then the call, cut at the scope's deadline.
struct Scoped<S>(S);

#[async_trait::async_trait]
impl<S: Summarizer> Summarizer for Scoped<S> {
    fn model(&self) -> &str {
        self.0.model()
    }

    fn context_window(&self) -> usize {
        self.0.context_window()
    }

    async fn complete(&self, request: &SummaryRequest) -> Result<String, LlmError> {
        let scope = scope::current();
        let key = request_key(self.model(), request);
        if let Some(cache) = &scope.cache
            && let Some(text) = cache.get(key).await
        {
            return Ok(text);
        }
        let call = self.0.complete(request);
        let text = match scope.deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, call)
                .await
                .map_err(|_| LlmError::Budget)??,
            None => call.await?,
        };
        if let Some(cache) = &scope.cache {
            cache.put(key, &text).await;
        }
        Ok(text)
    }
}

/// Builds the client the config names, reading the API key from `api_key_env`.
///
/// # Errors
/// [`LlmError::MissingKey`] when the named variable is not set; [`LlmError::Client`] when the
/// HTTP client cannot be built.
pub fn from_config(config: &LlmConfig) -> Result<Arc<dyn Summarizer>, LlmError> {
    let key = match &config.api_key_env {
        Some(var) if !var.is_empty() => match std::env::var(var) {
            Ok(k) => Some(k),
            Err(_) => return Err(LlmError::MissingKey(var.clone())),
        },
        _ => None,
    };
    Ok(match config.provider {
        Provider::Anthropic => Arc::new(Scoped(anthropic::AnthropicClient::new(
            config.clone(),
            key,
        )?)),
        Provider::Openai => Arc::new(Scoped(openai::OpenAiClient::new(config.clone(), key)?)),
    })
}

/// The first 500 characters of a body, for error messages.
pub(crate) fn snippet(body: &str) -> String {
    crate::render::clip(body.trim(), 500)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn _object_safe(_: &dyn Summarizer) {}

    #[test]
    fn base_url_defaults_per_provider_and_loses_its_trailing_slash() {
        let mut c = LlmConfig {
            provider: Provider::Anthropic,
            base_url: None,
            model: "m".into(),
            api_key_env: None,
            max_output_tokens: 10,
            timeout_secs: 1.0,
            retries: 0,
            context_window: 100,
            extra_body: Default::default(),
            max_answer_bytes: 1000,
            breaker_threshold: 0,
            breaker_cooldown_secs: 0.0,
        };
        assert_eq!(c.base(), "https://api.anthropic.com");
        c.base_url = Some("http://127.0.0.1:8080/".into());
        assert_eq!(c.base(), "http://127.0.0.1:8080");
        // Written as the OpenAI SDKs take it: the clients add /v1 themselves.
        for written in ["http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/"] {
            c.base_url = Some(written.into());
            assert_eq!(c.base(), "http://127.0.0.1:8080", "{written}");
        }
        c.base_url = Some("http://127.0.0.1:8080/openai/v1".into());
        assert_eq!(c.base(), "http://127.0.0.1:8080/openai");
    }

    #[test]
    fn a_missing_key_variable_is_an_error_naming_it() {
        let c = LlmConfig {
            provider: Provider::Openai,
            base_url: None,
            model: "m".into(),
            api_key_env: Some("COMPACTOR_TEST_SURELY_UNSET_KEY".into()),
            max_output_tokens: 10,
            timeout_secs: 1.0,
            retries: 0,
            context_window: 100,
            extra_body: Default::default(),
            max_answer_bytes: 1000,
            breaker_threshold: 0,
            breaker_cooldown_secs: 0.0,
        };
        let err = from_config(&c).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "environment variable COMPACTOR_TEST_SURELY_UNSET_KEY (llm.api_key_env) is not set"
            )
        );
    }
}
