//! The proxy's read cache: the last body of each agent session and its conversation, so the
//! session's next body (one exchange longer) is read in proportion to its new messages.
//!
//! ```text
//! body -> format::slices::scan (spans, no parse) -> session key (bytes around the message
//!         array + first two items, xxh3-128)
//!   take the entry (it leaves the cache: one request holds it, nothing is copied)
//!   -> format::slices::read: the entry's conversation cut after the last unchanged item
//!      (compared byte for byte with the entry's body) + the new items read
//!   -> the pipeline -> the body and its conversation put back under the key
//! ```
//! An agent never sends the same body twice (the replay cache answers those) but sends its
//! history again with one exchange more: without this cache every turn parses the whole
//! 420-703 KB history into a `serde_json::Value`, reads it into a `Conversation` and drops
//! both (40-45% of the service's CPU on the 170k-token session, docs/service.md).
//!
//! Bounded by bytes (`server.read_cache_bytes`; `moka` with a weigher, least recently used
//! evicted first): an entry weighs its body's bytes plus the conversation's heap estimate
//! ([`crate::memory::estimated_bytes`]) plus 1 KiB. `0` turns it off.

use crate::format::slices::SpanRead;
use bytes::Bytes;
use moka::sync::Cache;
use std::sync::{Arc, Mutex, PoisonError};

/// Bytes counted for an entry besides its body and conversation (key, spans, bookkeeping).
const ENTRY_OVERHEAD: usize = 1024;

/// A session's last body and its read. In a `Mutex<Option<_>>` so that taking it out of the
/// cache moves it, whatever references the cache's own bookkeeping still holds.
type Slot = Arc<Mutex<Option<(Bytes, SpanRead)>>>;

/// A byte-bounded cache of the last read of each session. Cheap to clone.
#[derive(Clone)]
pub struct ReadCache {
    entries: Cache<u128, Slot>,
    max_bytes: u64,
}

impl std::fmt::Debug for ReadCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadCache")
            .field("entries", &self.entries.entry_count())
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

impl ReadCache {
    /// A cache of at most `max_bytes` bytes of entries (estimated: body bytes, conversation
    /// heap and 1 KiB each); `0`: nothing is kept.
    pub fn with_max_bytes(max_bytes: u64) -> ReadCache {
        ReadCache {
            entries: Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|_, slot: &Slot| {
                    let w = slot
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .as_ref()
                        .map_or(ENTRY_OVERHEAD, |(body, read)| weight(body, read));
                    u32::try_from(w).unwrap_or(u32::MAX)
                })
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

    /// Takes the entry of session `key` out of the cache (`None`: none, or another request
    /// of the session holds it).
    pub(crate) fn take(&self, key: u128) -> Option<(Bytes, SpanRead)> {
        let slot = self.entries.remove(&key)?;
        let mut guard = slot.lock().unwrap_or_else(PoisonError::into_inner);
        guard.take()
    }

    /// Keeps `body` and its `read` as session `key`'s last (nothing when it alone is over
    /// the whole bound).
    pub(crate) fn put(&self, key: u128, body: Bytes, read: SpanRead) {
        if self.max_bytes > 0 && weight(&body, &read) as u64 <= self.max_bytes {
            self.entries
                .insert(key, Arc::new(Mutex::new(Some((body, read)))));
        }
    }
}

fn weight(body: &Bytes, read: &SpanRead) -> usize {
    body.len()
        + crate::memory::estimated_bytes(&read.conversation)
        + read.spans.len() * std::mem::size_of::<std::ops::Range<usize>>()
        + ENTRY_OVERHEAD
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Format, slices};

    fn read(body: &str) -> (u128, Bytes, SpanRead) {
        let spans = slices::scan(body.as_bytes(), Format::Anthropic).unwrap();
        let key = spans.session_key(Format::Anthropic, body.as_bytes());
        let read = slices::read(Format::Anthropic, body.as_bytes(), spans, None).unwrap();
        (key, Bytes::from(body.to_string()), read)
    }

    #[test]
    fn an_entry_is_taken_once() {
        let cache = ReadCache::with_max_bytes(1 << 20);
        let (key, body, r) = read(r#"{"messages": [{"role": "user", "content": "hi"}]}"#);
        let conversation = r.conversation.clone();
        cache.put(key, body.clone(), r);
        let (b, taken) = cache.take(key).unwrap();
        assert_eq!((b, taken.conversation), (body, conversation));
        assert!(cache.take(key).is_none());
    }

    #[test]
    fn entries_are_evicted_to_stay_under_the_byte_bound() {
        let cache = ReadCache::with_max_bytes(64 * 1024);
        for i in 0..200 {
            let text = format!("{i}: {}", "x".repeat(2000));
            let (key, body, r) = read(&format!(
                r#"{{"messages": [{{"role": "user", "content": "{text}"}}]}}"#
            ));
            cache.put(key, body, r);
        }
        let bytes = cache.bytes();
        assert!(bytes <= 64 * 1024, "{bytes}");
        assert!(bytes > 32 * 1024, "{bytes}");
    }

    #[test]
    fn a_zero_bound_keeps_nothing() {
        let cache = ReadCache::with_max_bytes(0);
        let (key, body, r) = read(r#"{"messages": []}"#);
        cache.put(key, body, r);
        assert!(cache.take(key).is_none());
    }
}
