//! `[store]` settings: the optional shared store (Redis) of the service's compaction memory
//! and summary cache; the store itself is `server::store`.

use serde::{Deserialize, Serialize};

/// The longest `ttl_secs` accepted (a year).
pub const MAX_TTL_SECS: u64 = 365 * 86_400;

/// `[store]` settings (all optional; no `redis_url` = in-process only).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSettings {
    /// `redis://[user:password@]host:port[/db]`; unset or empty = no shared store. Also
    /// `COMPACTOR__STORE__REDIS_URL`.
    pub redis_url: Option<String>,
    /// Seconds an entry lives without being used.
    pub ttl_secs: u64,
    /// Bound of everything this service keeps in Redis (memory and summaries), in bytes of
    /// stored values; least recently used evicted first.
    pub max_bytes: u64,
    /// Largest single entry shared, in bytes (a larger compaction stays local).
    pub max_entry_bytes: u64,
    /// Milliseconds one Redis operation may take; then it counts as failed.
    pub timeout_ms: u64,
    /// Seconds without trying Redis after a failure.
    pub retry_secs: u64,
    /// The key prefix (a Redis Cluster hash tag: every key is `{PREFIX}:…`).
    pub key_prefix: String,
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            redis_url: None,
            ttl_secs: 24 * 3600,
            max_bytes: 256 * 1024 * 1024,
            max_entry_bytes: 16 * 1024 * 1024,
            timeout_ms: 250,
            retry_secs: 5,
            key_prefix: "compactor".into(),
        }
    }
}

impl StoreSettings {
    /// The Redis URL when one is set.
    pub fn url(&self) -> Option<&str> {
        self.redis_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
    }

    /// Checks ranges; returns `(key, message)` for the first bad value.
    pub(crate) fn check(&self) -> Result<(), (&'static str, String)> {
        if let Some(url) = self.url()
            && !(url.starts_with("redis://") || url.starts_with("rediss://"))
        {
            // The URL may hold a password: not echoed.
            return Err(("store.redis_url", "not a redis:// or rediss:// URL".into()));
        }
        for (key, n) in [
            ("store.max_bytes", self.max_bytes),
            ("store.max_entry_bytes", self.max_entry_bytes),
        ] {
            if n == 0 {
                return Err((key, "must be > 0".into()));
            }
        }
        let day = super::MAX_SECS;
        for (key, n, min, max, unit) in [
            (
                "store.ttl_secs",
                self.ttl_secs,
                1,
                MAX_TTL_SECS,
                "seconds (a year)",
            ),
            (
                "store.timeout_ms",
                self.timeout_ms,
                1,
                day * 1000,
                "milliseconds (one day)",
            ),
            (
                "store.retry_secs",
                self.retry_secs,
                0,
                day,
                "seconds (one day)",
            ),
        ] {
            if !(min..=max).contains(&n) {
                return Err((key, format!("must be {min} to {max} {unit}, found {n}")));
            }
        }
        if self.key_prefix.is_empty() || self.key_prefix.contains(['{', '}']) {
            return Err((
                "store.key_prefix",
                "must be non-empty, without { or }".into(),
            ));
        }
        Ok(())
    }
}
