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
    /// (an evicted id is reported as evicted, not unknown).
    pub max_bytes: u64,
    /// The CLI's recall directory: `compactor compact` writes each original its output names
    /// there (`rc_….json`, pruned to `max_bytes`, oldest first) and `compactor recall ID`
    /// reads it. `""` = `$XDG_CACHE_HOME/compactor/recall` (else `~/.cache/compactor/recall`);
    /// `--recall-dir` overrides it. The library and the service never write it.
    pub dir: String,
}

impl Default for RecallSettings {
    fn default() -> Self {
        RecallSettings {
            enabled: true,
            max_bytes: 64 * 1024 * 1024,
            dir: String::new(),
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
        Ok(())
    }
}
