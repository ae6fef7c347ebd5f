//! `[server]`: where `compactor serve` listens, its limits, and where the proxy forwards.

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
    /// Base URL the Anthropic proxy route forwards to.
    pub anthropic_upstream: String,
    /// Base URL the OpenAI proxy routes (`/v1/chat/completions`, `/v1/responses`) forward to.
    pub openai_upstream: String,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            listen: "127.0.0.1:8787".into(),
            body_limit_bytes: 32 * 1024 * 1024,
            request_timeout_secs: 600,
            concurrency_limit: 64,
            auth_token_env: None,
            anthropic_upstream: "https://api.anthropic.com".into(),
            openai_upstream: "https://api.openai.com".into(),
        }
    }
}

impl ServerSettings {
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
        if self.request_timeout_secs == 0 {
            return Err(("server.request_timeout_secs", "must be > 0".into()));
        }
        if self.concurrency_limit == 0 {
            return Err(("server.concurrency_limit", "must be > 0".into()));
        }
        for (key, url) in [
            ("server.anthropic_upstream", &self.anthropic_upstream),
            ("server.openai_upstream", &self.openai_upstream),
        ] {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err((key, format!("not an http(s) URL: {url:?}")));
            }
        }
        Ok(())
    }
}
