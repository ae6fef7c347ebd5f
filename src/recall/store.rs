//! The in-process recall store: originals by `(tenant, id)`, bounded by bytes (moka, weighed by
//! the original's compact JSON bytes), with a bounded record of evicted ids so that the library
//! can say [`RecallError::Evicted`] instead of [`RecallError::Unknown`] (the service answers
//! both alike, docs/recall.md).
//!
//! A tenant sees its own originals only: the same id asked by another tenant is unknown. An id
//! held already keeps its first original (set-if-absent).

use super::id::{RecallKey, Tenant};
use super::{Entry, RecallError, RecallId, RecallKind, Recalled, scope};
use moka::notification::RemovalCause;
use moka::sync::Cache;
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

/// How many evicted ids are remembered (oldest forgotten first: one of those is `Unknown`).
pub const EVICTED_RECORD: usize = 65_536;

/// One stored original.
#[derive(Debug)]
struct Stored {
    kind: RecallKind,
    original: Arc<str>,
}

/// Where an original is kept: its tenant and id.
type Slot = (Tenant, u128);

/// Ids evicted so far, oldest first, at most [`EVICTED_RECORD`].
#[derive(Debug, Default)]
struct Evicted {
    order: VecDeque<Slot>,
    set: HashSet<Slot>,
}

impl Evicted {
    fn add(&mut self, slot: Slot) {
        if self.set.insert(slot) {
            self.order.push_back(slot);
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
    cache: Cache<Slot, Arc<Stored>>,
    evicted: Arc<Mutex<Evicted>>,
    evictions: Arc<AtomicU64>,
    max_bytes: u64,
    key: Arc<RwLock<RecallKey>>,
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
    /// JSON bytes; one larger than the bound is not kept and counts as evicted), whose ids are
    /// made under `key`.
    pub fn new(max_bytes: u64, key: RecallKey) -> RecallStore {
        let evicted = Arc::new(Mutex::new(Evicted::default()));
        let evictions = Arc::new(AtomicU64::new(0));
        let (rec, count) = (Arc::clone(&evicted), Arc::clone(&evictions));
        let cache = Cache::builder()
            .max_capacity(max_bytes)
            .weigher(|_: &Slot, v: &Arc<Stored>| {
                u32::try_from(v.original.len()).unwrap_or(u32::MAX)
            })
            .eviction_listener(move |k: Arc<Slot>, _v, cause: RemovalCause| {
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
            key: Arc::new(RwLock::new(key)),
        }
    }

    /// The key ids are made under.
    pub fn key(&self) -> RecallKey {
        self.key
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Makes ids under `key` from now on (the service's shared key, read from Redis before it
    /// serves; ids made before stay under the old one).
    pub fn set_key(&self, key: RecallKey) {
        *self.key.write().unwrap_or_else(PoisonError::into_inner) = key;
    }

    /// Keeps `entry`'s original under its id for the running compaction's tenant
    /// ([`scope::tenant`]). An id held already keeps the original it has.
    pub fn put(&self, entry: &Entry) {
        self.put_for(scope::tenant(), entry);
    }

    /// [`RecallStore::put`] for `tenant`.
    pub fn put_for(&self, tenant: Tenant, entry: &Entry) {
        let Ok(id) = RecallId::parse(&entry.reference.id) else {
            return;
        };
        let slot = (tenant, id.0);
        if self.cache.contains_key(&slot) {
            return;
        }
        self.evicted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .set
            .remove(&slot);
        self.cache.insert(
            slot,
            Arc::new(Stored {
                kind: entry.reference.kind,
                original: entry.original.clone(),
            }),
        );
        // The bound is applied by moka's pending maintenance: run it now, so an evicted id is
        // gone (and recorded) before the next recall.
        self.cache.run_pending_tasks();
    }

    /// The kind and compact JSON of `id`'s original kept for `tenant`, if held.
    pub fn raw(&self, tenant: Tenant, id: RecallId) -> Option<(RecallKind, Arc<str>)> {
        self.cache
            .get(&(tenant, id.0))
            .map(|s| (s.kind, s.original.clone()))
    }

    /// The original of `id` kept by the library's own compactions ([`Tenant::NONE`]).
    ///
    /// # Errors
    /// As [`RecallStore::get_for`].
    pub fn get(&self, id: &str) -> Result<Recalled, RecallError> {
        self.get_for(Tenant::NONE, id)
    }

    /// The original of `id` kept for `tenant`.
    ///
    /// # Errors
    /// [`RecallError::Malformed`] for an id not of the form `rc_` + 32 hex digits,
    /// [`RecallError::Evicted`] for one stored for this tenant and evicted since,
    /// [`RecallError::Unknown`] for one never stored for it.
    pub fn get_for(&self, tenant: Tenant, id: &str) -> Result<Recalled, RecallError> {
        let parsed = RecallId::parse(id)?;
        if let Some((kind, original)) = self.raw(tenant, parsed) {
            return Recalled::parse(parsed, kind, &original)
                .ok_or_else(|| RecallError::Unknown(parsed.to_string()));
        }
        // Evictions are reported by moka's pending maintenance: run it before answering.
        self.cache.run_pending_tasks();
        let evicted = self
            .evicted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .set
            .contains(&(tenant, parsed.0));
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

    fn key() -> RecallKey {
        RecallKey::from_secret(b"test")
    }

    fn entry(n: usize) -> Entry {
        let original = format!(
            r#"{{"type":"tool_result","tool_use_id":"t{n}","content":"{}"}}"#,
            "x".repeat(200)
        );
        let id = key().id(RecallKind::Block, Tenant::NONE, original.as_bytes());
        Entry {
            reference: RecallRef {
                id: id.to_string(),
                kind: RecallKind::Block,
                bytes: original.len(),
                message: n,
                end: 0,
                path: format!("messages[{n}].content[0]"),
            },
            original: original.into(),
        }
    }

    #[test]
    fn a_stored_original_comes_back_for_its_tenant_only() {
        let store = RecallStore::new(1 << 20, key());
        let e = entry(1);
        store.put(&e);
        let got = store.get(&e.reference.id).unwrap();
        assert_eq!(got.original.to_string(), e.original.as_ref());
        assert_eq!(got.kind, RecallKind::Block);
        let id = e.reference.id.clone();
        assert_eq!(
            store.get_for(Tenant(9), &id),
            Err(RecallError::Unknown(id.clone()))
        );
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
    fn an_id_keeps_its_first_original() {
        let store = RecallStore::new(1 << 20, key());
        let first = entry(1);
        let mut second = entry(2);
        second.reference.id = first.reference.id.clone();
        store.put(&first);
        store.put(&second);
        let got = store.get(&first.reference.id).unwrap();
        assert_eq!(got.original.to_string(), first.original.as_ref());
    }

    #[test]
    fn a_small_store_evicts_and_says_so() {
        // Room for about 3 of the ~240-byte originals.
        let store = RecallStore::new(800, key());
        let entries: Vec<Entry> = (0..40).map(entry).collect();
        for e in &entries {
            store.put(e);
        }
        let mut evicted = 0;
        for e in &entries {
            match store.get(&e.reference.id) {
                Ok(r) => assert_eq!(r.original.to_string(), e.original.as_ref()),
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
