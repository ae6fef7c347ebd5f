//! The recall originals on Redis: every replica answers `GET /v1/recall/{id}` for an id any
//! of them wrote.
//!
//! ```text
//! compaction (API or proxy) -> report.recall refs -> for each: the original from the local
//!   recall store -> SET r:{id} (the store's byte-bounded LRU, ttl_secs) + mark rt:{id}
//!   (outside the LRU, for TOMBSTONE_TTLS x ttl_secs)
//! recall of an id the local store lacks -> GET r:{id}: the original; else rt:{id} exists:
//!   evicted or expired (410); else unknown (404)
//! ```
//! Redis keeps an evicted id's record as long as its marker lives: an id published more than
//! `TOMBSTONE_TTLS x ttl_secs` ago reads as unknown.

use super::SharedStore;
use crate::recall::{RecallError, RecallKind, RecallRef, RecallStore, Recalled};
use serde_json::{Value, json};

/// How many `ttl_secs` an id's "was published" marker outlives its original.
pub const TOMBSTONE_TTLS: u64 = 7;

impl SharedStore {
    fn recall_key(&self, id: &str) -> String {
        self.redis.key(&format!("r:{id}"))
    }

    fn recall_mark(&self, id: &str) -> String {
        self.redis.key(&format!("rt:{id}"))
    }

    /// Shares the originals `refs` name (read from `local`, where the compaction put them).
    /// An original over `max_entry_bytes` stays local only. Failures are logged and counted by
    /// the Redis client; the local store still answers.
    pub async fn publish_recall(&self, local: &RecallStore, refs: &[RecallRef]) {
        for r in refs {
            let Ok(found) = local.get(&r.id) else {
                continue;
            };
            let value =
                json!({"kind": found.kind.as_str(), "original": found.original}).to_string();
            if value.len() as u64 > self.max_entry_bytes {
                continue;
            }
            if self
                .redis
                .put(&self.recall_key(&r.id), value.as_bytes())
                .await
                .is_ok()
            {
                let ttl = self.redis.ttl_secs().saturating_mul(TOMBSTONE_TTLS);
                let _ = self.redis.mark(&self.recall_mark(&r.id), ttl).await;
            }
        }
    }

    /// The original of `id` from Redis: `Ok` when it holds it, [`RecallError::Evicted`] when it
    /// held it (its marker lives), `None` when Redis knows nothing of it or cannot answer.
    pub async fn recall(&self, id: &str) -> Option<Result<Recalled, RecallError>> {
        if let Ok(Some(bytes)) = self.redis.get(&self.recall_key(id)).await {
            let value: Value = serde_json::from_slice(&bytes).ok()?;
            let kind = match value.get("kind")?.as_str()? {
                "block" => RecallKind::Block,
                "span" => RecallKind::Span,
                _ => return None,
            };
            return Some(Ok(Recalled {
                id: id.to_string(),
                kind,
                original: value.get("original")?.clone(),
            }));
        }
        match self.redis.exists(&self.recall_mark(id)).await {
            Ok(true) => Some(Err(RecallError::Evicted(id.to_string()))),
            _ => None,
        }
    }
}
