//! The in-process recall store: originals by [`RecallId`], bounded by bytes (moka, weighed by
//! the original's compact JSON bytes), with a bounded record of evicted ids so that a recall of
//! an evicted id says so ([`RecallError::Evicted`]) instead of [`RecallError::Unknown`].

use super::{Entry, RecallError, RecallId, RecallKind, Recalled};
use moka::notification::RemovalCause;
use moka::sync::Cache;
use serde_json::Value;
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// How many evicted ids are remembered (oldest forgotten first: one of those is `Unknown`).
pub const EVICTED_RECORD: usize = 65_536;

/// One stored original.
#[derive(Debug)]
struct Stored {
    kind: RecallKind,
    original: Value,
    bytes: usize,
}

/// Ids evicted so far, oldest first, at most [`EVICTED_RECORD`].
#[derive(Debug, Default)]
struct Evicted {
    order: VecDeque<u128>,
    set: HashSet<u128>,
}

impl Evicted {
    fn add(&mut self, id: u128) {
        if self.set.insert(id) {
            self.order.push_back(id);
            while self.order.len() > EVICTED_RECORD {
                if let Some(old) = self.order.pop_front() {
                    self.set.remove(&old);
                }
            }
        }
    }
}

/// Counts of the store (the service's `/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecallStats {
    /// Originals held.
    pub entries: u64,
    /// Bytes held (compact JSON bytes of the originals).
    pub bytes: u64,
    /// The bound, in bytes.
    pub max_bytes: u64,
    /// Originals evicted since start.
    pub evictions: u64,
}

/// The store. Cheap to share (`Arc` inside).
#[derive(Clone)]
pub struct RecallStore {
    cache: Cache<u128, Arc<Stored>>,
    evicted: Arc<Mutex<Evicted>>,
    evictions: Arc<AtomicU64>,
    max_bytes: u64,
}

impl std::fmt::Debug for RecallStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecallStore")
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl RecallStore {
    /// A store holding at most `max_bytes` bytes of originals (each weighed by its compact
    /// JSON bytes; one larger than the bound is not kept and counts as evicted).
    pub fn new(max_bytes: u64) -> RecallStore {
        let evicted = Arc::new(Mutex::new(Evicted::default()));
        let evictions = Arc::new(AtomicU64::new(0));
        let (rec, count) = (Arc::clone(&evicted), Arc::clone(&evictions));
        let cache = Cache::builder()
            .max_capacity(max_bytes)
            .weigher(|_: &u128, v: &Arc<Stored>| u32::try_from(v.bytes).unwrap_or(u32::MAX))
            .eviction_listener(move |k: Arc<u128>, _v, cause: RemovalCause| {
                if cause.was_evicted() {
                    count.fetch_add(1, Ordering::Relaxed);
                    rec.lock().unwrap_or_else(PoisonError::into_inner).add(*k);
                }
            })
            .build();
        RecallStore {
            cache,
            evicted,
            evictions,
            max_bytes,
        }
    }

    /// Keeps `entry`'s original under its id (an id held already is left as it is: same id,
    /// same content).
    pub fn put(&self, entry: &Entry) {
        let Ok(id) = RecallId::parse(&entry.reference.id) else {
            return;
        };
        if self.cache.contains_key(&id.0) {
            return;
        }
        self.evicted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .set
            .remove(&id.0);
        self.cache.insert(
            id.0,
            Arc::new(Stored {
                kind: entry.reference.kind,
                original: entry.original.clone(),
                bytes: entry.reference.bytes,
            }),
        );
        // The bound is applied by moka's pending maintenance: run it now, so an evicted id is
        // gone (and recorded) before the next recall.
        self.cache.run_pending_tasks();
    }

    /// The original of `id`.
    ///
    /// # Errors
    /// [`RecallError::Malformed`] for an id not of the form `rc_` + 32 hex digits,
    /// [`RecallError::Evicted`] for one stored and evicted since, [`RecallError::Unknown`] for
    /// one never stored here.
    pub fn get(&self, id: &str) -> Result<Recalled, RecallError> {
        let parsed = RecallId::parse(id)?;
        if let Some(s) = self.cache.get(&parsed.0) {
            return Ok(Recalled {
                id: parsed.to_string(),
                kind: s.kind,
                original: s.original.clone(),
            });
        }
        // Evictions are reported by moka's pending maintenance: run it before answering.
        self.cache.run_pending_tasks();
        let evicted = self
            .evicted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .set
            .contains(&parsed.0);
        if evicted {
            Err(RecallError::Evicted(parsed.to_string()))
        } else {
            Err(RecallError::Unknown(parsed.to_string()))
        }
    }

    /// Entries, bytes, bound and evictions.
    pub fn stats(&self) -> RecallStats {
        self.cache.run_pending_tasks();
        RecallStats {
            entries: self.cache.entry_count(),
            bytes: self.cache.weighted_size(),
            max_bytes: self.max_bytes,
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recall::RecallRef;
    use serde_json::json;

    fn entry(n: usize) -> Entry {
        let original = json!({"type": "tool_result", "tool_use_id": format!("t{n}"), "content": "x".repeat(200)});
        let (id, bytes) = RecallId::of(RecallKind::Block, &original);
        Entry {
            reference: RecallRef {
                id: id.to_string(),
                kind: RecallKind::Block,
                bytes: bytes.len(),
                message: n,
                end: 0,
                path: format!("messages[{n}].content[0]"),
            },
            original,
        }
    }

    #[test]
    fn a_stored_original_comes_back_and_others_are_unknown() {
        let store = RecallStore::new(1 << 20);
        let e = entry(1);
        store.put(&e);
        let got = store.get(&e.reference.id).unwrap();
        assert_eq!(got.original, e.original);
        assert_eq!(got.kind, RecallKind::Block);
        let other = entry(2).reference.id;
        assert_eq!(store.get(&other), Err(RecallError::Unknown(other.clone())));
        assert_eq!(
            store.get("rc_1"),
            Err(RecallError::Malformed("rc_1".into()))
        );
        let s = store.stats();
        assert_eq!((s.entries, s.bytes), (1, e.reference.bytes as u64));
    }

    #[test]
    fn a_small_store_evicts_and_says_so() {
        // Room for about 3 of the ~240-byte originals.
        let store = RecallStore::new(800);
        let entries: Vec<Entry> = (0..40).map(entry).collect();
        for e in &entries {
            store.put(e);
        }
        let mut evicted = 0;
        for e in &entries {
            match store.get(&e.reference.id) {
                Ok(r) => assert_eq!(r.original, e.original),
                Err(RecallError::Evicted(_)) => evicted += 1,
                Err(other) => panic!("{} gave {other:?}", e.reference.id),
            }
        }
        assert!(evicted >= 36, "only {evicted} of 40 evicted");
        let s = store.stats();
        assert!(s.bytes <= 800, "{s:?}");
        assert_eq!(s.evictions, evicted);
    }
}
