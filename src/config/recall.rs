//! `[recall]` settings: the in-process store of what compaction cleared or dropped, kept by
//! recall id ([`crate::recall`]).

use serde::{Deserialize, Serialize};

/// `[recall]` settings (all optional).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecallSettings {
    /// Write recall ids into placeholders and markers and keep the originals. Off: the
    /// placeholders name no id and nothing is kept.
    pub enabled: bool,
    /// Bound of the store, in bytes of the originals' compact JSON; least used evicted first
    /// (the library reports an evicted id as evicted; the service answers it as unknown).
    pub max_bytes: u64,
    /// The CLI's recall directory: `compactor compact` writes each original its output names
    /// there (`rc_….json`, pruned to `max_bytes`, oldest first) and `compactor recall ID`
    /// reads it. `""` = `$XDG_CACHE_HOME/compactor/recall` (else `~/.cache/compactor/recall`);
    /// `--recall-dir` overrides it. The library and the service never write it.
    pub dir: String,
    /// The environment variable holding the deployment's secret, the key of recall ids and
    /// tenants (docs/recall.md, "Tenants and ids"). Unset: the service generates one and keeps
    /// it in Redis (`[store]`), else each process draws its own at start.
    pub secret_env: Option<String>,
    /// A request header naming the tenant (e.g. set by a gateway in front); its value is
    /// hashed like a credential. Unset, or absent from a request: the tenant is the keyed hash
    /// of the provider credential (`x-api-key`, `x-goog-api-key`, `authorization: Bearer`).
    pub tenant_header: Option<String>,
}

impl Default for RecallSettings {
    fn default() -> Self {
        RecallSettings {
            enabled: true,
            max_bytes: 64 * 1024 * 1024,
            dir: String::new(),
            secret_env: None,
            tenant_header: None,
        }
    }
}

impl RecallSettings {
    /// Checks ranges; returns `(key, message)` for the first bad value.
    pub(crate) fn check(&self) -> Result<(), (&'static str, String)> {
        if self.enabled && self.max_bytes == 0 {
            return Err((
                "recall.max_bytes",
                "must be at least 1 byte when recall is enabled".into(),
            ));
        }
        if let Some(h) = &self.tenant_header
            && axum_free_header_name(h).is_none()
        {
            return Err((
                "recall.tenant_header",
                format!("{h:?} is no HTTP header name (letters, digits, '-' and '_')"),
            ));
        }
        if self.secret_env.as_deref() == Some("") {
            return Err((
                "recall.secret_env",
                "names no variable (empty): leave it out or name one".into(),
            ));
        }
        Ok(())
    }

    /// The deployment's secret from `secret_env`, `None` when no variable is named.
    ///
    /// # Errors
    /// `(key, message)` when the variable is named but not set or empty (never its value).
    pub fn secret(&self) -> Result<Option<String>, (&'static str, String)> {
        let Some(var) = &self.secret_env else {
            return Ok(None);
        };
        match std::env::var(var) {
            Ok(s) if !s.is_empty() => Ok(Some(s)),
            _ => Err((
                "recall.secret_env",
                format!("the environment variable {var} is not set or empty"),
            )),
        }
    }
}

/// `name` in lower case when it is a plain header name (ASCII letters, digits, `-`, `_`).
fn axum_free_header_name(name: &str) -> Option<String> {
    (!name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    .then(|| name.to_ascii_lowercase())
}
