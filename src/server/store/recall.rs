//! The recall originals on Redis: every replica answers `GET /v1/recall/{id}` for an id any
//! of them wrote, for the tenant it was written for.
//!
//! ```text
//! compaction (API or proxy) -> report.recall refs -> each original from the local store
//!   -> r:{tenant}:{id} = kind byte + compact JSON, only if absent (the first original stays),
//!      in the store's byte-bounded LRU (ttl_secs), all in the request's one write (mod.rs)
//! recall of an id the local store lacks -> GET r:{tenant}:{id} -> the MAC of what came back
//!   checked against the id (key, kind, tenant, bytes): a match is served, anything else is
//!   refused and answers as unknown
//! ```
//! Redis keeps nothing of an evicted or expired original: the service answers such an id as
//! it answers an unknown one (docs/recall.md).

use super::SharedStore;
use super::redis::Put;
use crate::recall::{RecallId, RecallKey, RecallKind, RecallRef, RecallStore, Recalled, Tenant};

/// The key of the store's shared secret (the key of recall ids and tenants) when no
/// `[recall] secret_env` is set.
const SECRET_KEY: &str = "recall-secret";

impl SharedStore {
    fn recall_key(&self, tenant: Tenant, id: RecallId) -> String {
        self.redis.key(&format!("r:{tenant}:{id}"))
    }

    /// The writes that share the originals `refs` name (read from `local`, where the
    /// compaction put them for `tenant`): one per original, set only if absent. An original
    /// over `max_entry_bytes` stays local only.
    pub fn recall_puts(&self, local: &RecallStore, tenant: Tenant, refs: &[RecallRef]) -> Vec<Put> {
        let mut puts = Vec::with_capacity(refs.len());
        for r in refs {
            let Ok(id) = RecallId::parse(&r.id) else {
                continue;
            };
            let Some((kind, original)) = local.raw(tenant, id) else {
                continue;
            };
            if original.len() as u64 + 1 > self.max_entry_bytes {
                continue;
            }
            let mut value = Vec::with_capacity(original.len() + 1);
            value.push(kind_byte(kind));
            value.extend_from_slice(original.as_bytes());
            puts.push(Put {
                key: self.recall_key(tenant, id),
                value,
                if_absent: true,
            });
        }
        puts
    }

    /// The original of `id` for `tenant` from Redis, when it holds one whose MAC under `key`
    /// is `id`. A value that is not (planted, or of another tenant or key) is refused with a
    /// WARN that names neither id nor tenant. `None` too when Redis cannot answer within the
    /// request's budget.
    pub async fn recall(&self, key: &RecallKey, tenant: Tenant, id: RecallId) -> Option<Recalled> {
        let key_name = self.recall_key(tenant, id);
        let read = self.redis.get(&key_name);
        let bytes = match tokio::time::timeout(self.redis.budget(), read).await {
            Ok(Ok(Some(bytes))) => bytes,
            Ok(_) => return None,
            Err(_) => {
                self.over_budget("recall read");
                return None;
            }
        };
        let (first, original) = bytes.split_first()?;
        let kind = match first {
            b'b' => RecallKind::Block,
            b's' => RecallKind::Span,
            _ => return refused(),
        };
        if !key.verify(id, kind, tenant, original) {
            return refused();
        }
        Recalled::parse(id, kind, std::str::from_utf8(original).ok()?)
    }

    /// The deployment's recall secret kept in Redis: the one a replica set first, or a new
    /// one set now. `None` when Redis cannot answer (the caller keeps its own key).
    pub async fn recall_secret(&self) -> Option<String> {
        let fresh = RecallKey::generate()?;
        self.redis
            .get_or_set(&self.redis.key(SECRET_KEY), &fresh)
            .await
            .ok()
    }
}

/// The first byte of a stored original: its kind.
fn kind_byte(kind: RecallKind) -> u8 {
    match kind {
        RecallKind::Block => b'b',
        RecallKind::Span => b's',
    }
}

/// A value read back that is not what its key says: never served.
fn refused() -> Option<Recalled> {
    tracing::warn!("shared store: a recall original in redis does not match its id: refused");
    None
}
