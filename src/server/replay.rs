//! The proxy's replay cache: what it sent for a request body it has seen byte for byte.
//!
//! ```text
//! client body -> xxh3-128 of (route, body bytes)      on the async worker, ~0.1 ms per MB
//!   hit, same counting basis -> the remembered outgoing body (or the original bytes), its
//!                               header and usage probe; no parse, count, compaction or write
//!   miss                     -> the compaction pool (proxy.rs), and the decision is kept
//!                               here when a repeat of it gives the same answer
//! ```
//! Agents resend the same body (a retry, Claude Code's `count_tokens` before `messages`, a
//! replica's health probe of a session), and a long session's 700 KB body costs tens of
//! milliseconds of CPU to read, count and write again even when the answer is known. Only two
//! kinds of decision are kept, the two whose repeat through the pipeline is the same bytes and
//! the same header: a body under the trigger (forwarded as it came) and a body continued from
//! the compaction memory with no tier run (`tier=remembered; prefix=reused`). A fresh
//! compaction is not kept: its repeat is answered by the memory (`prefix=reused`) and that
//! answer is the one kept. An entry is used only while the counting basis of its model (the
//! ratio, learned or configured, and the overhead) is the one it was made with; otherwise the
//! body goes through the pipeline again.
//!
//! Bounded by bytes (`server.replay_cache_bytes`; `moka` with a weigher, least recently used
//! evicted first): an entry weighs its outgoing body (nothing for a body forwarded as it came)
//! plus its header and a fixed overhead.

use crate::report::Report;
use crate::tokens::ModelTokens;
use bytes::Bytes;
use moka::sync::Cache;
use std::sync::Arc;
use xxhash_rust::xxh3::Xxh3;

/// Bytes counted for an entry besides its body and header (key, report, bookkeeping).
const ENTRY_OVERHEAD: usize = 1024;

/// One remembered decision.
#[derive(Debug)]
pub(crate) struct Replayed {
    /// What went upstream: `None` when it was the client's own bytes (under the trigger).
    pub body: Option<Bytes>,
    /// The `x-compactor-tokens` value sent with it.
    pub header: String,
    /// The model and the counter's count of the body sent (for the usage tap).
    pub probe: Option<(String, usize)>,
    /// The `compactor_proxy_requests_total` body label (`passthrough` or `reused`).
    pub label: &'static str,
    /// The report of the run, recorded again in the metrics on each replay.
    pub report: Report,
    /// The model named by the body (`None`: none), to check its basis on a hit.
    pub model: Option<String>,
    /// The counting basis the decision was made with.
    pub basis: ModelTokens,
}

/// The key of a body: a 128-bit hash of the route and the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key(u128);

impl Key {
    /// The key of `body` sent to `route`.
    pub fn of(route: &str, body: &[u8]) -> Key {
        let mut h = Xxh3::new();
        h.update(&(route.len() as u64).to_le_bytes());
        h.update(route.as_bytes());
        h.update(body);
        Key(h.digest128())
    }
}

/// A byte-bounded cache of [`Replayed`] decisions. Cheap to clone.
#[derive(Clone)]
pub struct ReplayCache {
    entries: Cache<Key, Arc<Replayed>>,
    max_bytes: u64,
}

impl std::fmt::Debug for ReplayCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayCache")
            .field("entries", &self.entries.entry_count())
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

impl ReplayCache {
    /// A cache of at most `max_bytes` bytes of entries (estimated: outgoing body, header and
    /// 1 KiB each).
    pub fn with_max_bytes(max_bytes: u64) -> ReplayCache {
        ReplayCache {
            entries: Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|_, v: &Arc<Replayed>| u32::try_from(weight(v)).unwrap_or(u32::MAX))
                .build(),
            max_bytes,
        }
    }

    /// The bound, in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The estimated bytes held now (after pending evictions ran).
    pub fn bytes(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.weighted_size()
    }

    /// The decision kept for `key`, when `basis_of(model)` is still the basis it was made with.
    pub(crate) fn get(
        &self,
        key: Key,
        basis_of: impl FnOnce(Option<&str>) -> ModelTokens,
    ) -> Option<Arc<Replayed>> {
        let hit = self.entries.get(&key)?;
        (basis_of(hit.model.as_deref()) == hit.basis).then_some(hit)
    }

    /// Keeps `replayed` for `key` (nothing when it alone is over the whole bound).
    pub(crate) fn insert(&self, key: Key, replayed: Replayed) {
        if weight(&replayed) as u64 <= self.max_bytes {
            self.entries.insert(key, Arc::new(replayed));
        }
    }
}

fn weight(v: &Replayed) -> usize {
    v.body.as_ref().map_or(0, Bytes::len) + v.header.len() + ENTRY_OVERHEAD
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Tokenizer;

    fn basis(ratio: f64) -> ModelTokens {
        ModelTokens {
            ratio,
            rule_ratio: ratio,
            ..ModelTokens::counter(Tokenizer::O200kBase)
        }
    }

    /// The report of a real (tiny, untouched) run.
    fn report() -> Report {
        static REPORT: std::sync::OnceLock<Report> = std::sync::OnceLock::new();
        REPORT.get_or_init(run_once).clone()
    }

    fn run_once() -> Report {
        let c = crate::format::Format::Anthropic
            .read(&serde_json::json!({"model": "m", "max_tokens": 1,
                "messages": [{"role": "user", "content": "hi"}]}))
            .unwrap();
        let engine = crate::Compactor::from_config(crate::config::Settings::default()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(engine.compact(&c, crate::format::Format::Anthropic, None))
            .unwrap()
            .report
    }

    fn replayed(body: usize, ratio: f64) -> Replayed {
        Replayed {
            body: Some(Bytes::from(vec![b'x'; body])),
            header: "10->5; tier=remembered; prefix=reused".into(),
            probe: None,
            label: "reused",
            report: report(),
            model: Some("m".into()),
            basis: basis(ratio),
        }
    }

    #[test]
    fn a_hit_needs_the_same_route_bytes_and_basis() {
        let cache = ReplayCache::with_max_bytes(1_000_000);
        let key = Key::of("/v1/messages", b"{\"a\":1}");
        cache.insert(key, replayed(100, 1.0));
        assert!(cache.get(key, |_| basis(1.0)).is_some());
        assert_eq!(
            cache
                .get(key, |m| {
                    assert_eq!(m, Some("m"));
                    basis(1.0)
                })
                .map(|r| r.label),
            Some("reused")
        );
        // Another counting basis (a ratio learned since): not replayed.
        assert!(cache.get(key, |_| basis(1.2)).is_none());
        assert!(
            cache
                .get(Key::of("/v1/messages/count_tokens", b"{\"a\":1}"), |_| {
                    basis(1.0)
                })
                .is_none()
        );
        assert!(
            cache
                .get(Key::of("/v1/messages", b"{\"a\":2}"), |_| basis(1.0))
                .is_none()
        );
    }

    #[test]
    fn distinct_bodies_are_evicted_to_stay_under_the_byte_bound() {
        let cache = ReplayCache::with_max_bytes(1_000_000);
        for i in 0..50u32 {
            cache.insert(
                Key::of("/v1/messages", &i.to_le_bytes()),
                replayed(100_000, 1.0),
            );
        }
        let held = cache.bytes();
        assert!((100_000..=1_000_000).contains(&held), "{held}");
        // An entry larger than the bound is not kept at all.
        let big = Key::of("/v1/messages", b"big");
        cache.insert(big, replayed(2_000_000, 1.0));
        assert!(cache.get(big, |_| basis(1.0)).is_none());
    }
}
