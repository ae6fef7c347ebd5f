//! The proxy's read cache: the last body of each agent session and its conversation, so the
//! session's next body (one exchange longer) is read in proportion to its new messages.
//!
//! ```text
//! body -> format::slices::scan (spans, no parse) -> session key (bytes around the message
//!         array + first two items, xxh3-128)
//!   take the entry (it leaves the cache: one request holds it, nothing is copied); none:
//!   the key by value (the envelope parsed, its objects' keys sorted) -> the key the
//!   session's last body was kept under (a client that reorders its envelope's keys)
//!   -> format::slices::read: the entry's conversation cut after the last unchanged item
//!      (compared byte for byte with the entry's body; an envelope whose bytes differ is
//!      compared by value) + the new items read
//!   -> prefix hashes: the entry's, extended for the new messages (memory::PrefixHashes)
//!   -> the pipeline -> the body, its conversation and hashes put back under the key
//! ```
//! An agent never sends the same body twice (the replay cache answers those) but sends its
//! history again with one exchange more: without this cache every turn parses the whole
//! 420-703 KB history into a `serde_json::Value`, reads it into a `Conversation` and drops
//! both (40-45% of the service's CPU on the 170k-token session, docs/service.md).
//!
//! Bounded by bytes (`server.read_cache_bytes`; `moka` with a weigher, least recently used
//! evicted first): an entry weighs its body's bytes plus the conversation's heap estimate
//! ([`crate::memory::estimated_bytes`]) plus 1 KiB. `0` turns it off.

use crate::format::Format;
use crate::format::slices::{self, SpanRead};
use crate::memory::PrefixHashes;
use bytes::Bytes;
use moka::sync::Cache;
use std::sync::{Arc, Mutex, PoisonError};
use xxhash_rust::xxh3::Xxh3;

/// Bytes counted for an entry besides its body and conversation (key, spans, bookkeeping).
const ENTRY_OVERHEAD: usize = 1024;

/// A session's last body, its read and the read's prefix hashes (the compaction memory's keys,
/// when the memory is on), so the next body's hashes are extended for its new messages only
/// ([`PrefixHashes::extended`]).
#[derive(Debug)]
pub(crate) struct Last {
    /// The body as it came.
    pub body: Bytes,
    /// Its read.
    pub read: SpanRead,
    /// The prefix hashes of `read.conversation`, when made.
    pub hashes: Option<PrefixHashes>,
    /// `sums[k]`: the sum of [`crate::memory::message_bytes`] over the first `k` messages
    /// of `read.conversation` (one more than its messages), so the entry's weight is
    /// extended for the next body's new messages, not estimated whole again.
    pub sums: Vec<usize>,
}

impl Last {
    /// `sums` (of an earlier read whose first `kept` messages are `conversation`'s) extended
    /// for `conversation`'s later messages; summed whole when `sums` covers fewer.
    pub fn sums(
        mut sums: Vec<usize>,
        conversation: &crate::conversation::Conversation,
        kept: usize,
    ) -> Vec<usize> {
        let kept = kept.min(conversation.messages.len());
        if sums.len() <= kept {
            sums.clear();
        }
        sums.truncate(kept + 1);
        if sums.is_empty() {
            sums.push(0);
        }
        let from = sums.len() - 1;
        let mut total = sums.last().copied().unwrap_or_default();
        for m in conversation.messages.get(from..).unwrap_or_default() {
            total += crate::memory::message_bytes(m);
            sums.push(total);
        }
        sums
    }
}

/// A session's last read. In a `Mutex<Option<_>>` so that taking it out of the cache moves it,
/// whatever references the cache's own bookkeeping still holds.
type Slot = Arc<Mutex<Option<Last>>>;

/// A byte-bounded cache of the last read of each session. Cheap to clone.
#[derive(Clone)]
pub struct ReadCache {
    entries: Cache<u128, Slot>,
    /// A session's key by value (its envelope compared by value, [`value_key`]) -> the key
    /// its last body was kept under: the way back for a body whose envelope bytes changed
    /// but not its value (Codex writes `client_metadata` with its keys in another order in
    /// every request).
    aliases: Cache<u128, u128>,
    max_bytes: u64,
}

/// How many by-value keys are kept (16 bytes each and moka's bookkeeping: well under 1 MB).
const MAX_ALIASES: u64 = 8192;

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
                        .map_or(ENTRY_OVERHEAD, weight);
                    u32::try_from(w).unwrap_or(u32::MAX)
                })
                .build(),
            aliases: Cache::builder()
                .max_capacity(if max_bytes > 0 { MAX_ALIASES } else { 0 })
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
    pub(crate) fn take(&self, key: u128) -> Option<Last> {
        let slot = self.entries.remove(&key)?;
        let mut guard = slot.lock().unwrap_or_else(PoisonError::into_inner);
        guard.take()
    }

    /// Keeps `last` as session `key`'s last read (nothing when it alone is over the whole
    /// bound), and `by_value` (the session's [`value_key`], when it was made) as a way to it.
    pub(crate) fn put(&self, key: u128, by_value: Option<u128>, last: Last) {
        if self.max_bytes > 0 && weight(&last) as u64 <= self.max_bytes {
            self.entries.insert(key, Arc::new(Mutex::new(Some(last))));
            if let Some(v) = by_value {
                self.aliases.insert(v, key);
            }
        }
    }

    /// The session of `body` (scanned into `spans`): its key, its key by value when it was
    /// made, and its last read taken out of the cache. The key is made of the body's bytes
    /// ([`slices::Spans::session_key`]); when nothing is kept under it, the key by value
    /// ([`value_key`]: one parse of the envelope) finds a session whose last body wrote the
    /// same envelope with its keys in another order.
    pub(crate) fn take_session(
        &self,
        format: Format,
        body: &[u8],
        spans: &slices::Spans,
    ) -> (u128, Option<u128>, Option<Last>) {
        // Keys are the tenant's: another tenant's body never continues from its sessions.
        let tenant = crate::recall::scope::tenant().0;
        let key = spans.session_key(format, body) ^ tenant;
        if let Some(last) = self.take(key) {
            return (key, None, Some(last));
        }
        let by_value = value_key(format, body, spans).map(|v| v ^ tenant);
        let last = by_value
            .and_then(|v| self.aliases.get(&v))
            .and_then(|old| self.take(old));
        (key, by_value, last)
    }
}

/// A session's key by value: the format, the envelope (everything but the message array)
/// hashed with the keys of every object in sorted order ([`crate::memory::hash_canonical`]),
/// and the first two message items' bytes. `None` when the envelope is not JSON.
pub(crate) fn value_key(format: Format, body: &[u8], spans: &slices::Spans) -> Option<u128> {
    let envelope = spans.envelope(body)?;
    let mut h = Xxh3::new();
    h.update(format.as_str().as_bytes());
    crate::memory::hash_canonical(&mut h, &envelope);
    for item in spans.items().iter().take(2) {
        let bytes = body.get(item.clone()).unwrap_or_default();
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    Some(h.digest128())
}

/// An entry's weight: the body's bytes, the conversation's heap estimate (from its message
/// sums), the spans, the hashes and sums (8 bytes a message each) and [`ENTRY_OVERHEAD`].
fn weight(last: &Last) -> usize {
    let messages = last.sums.last().copied().unwrap_or_default();
    last.body.len()
        + crate::memory::estimated_bytes_with(&last.read.conversation, messages)
        + last.sums.len() * std::mem::size_of::<usize>()
        + last.read.spans.len() * std::mem::size_of::<std::ops::Range<usize>>()
        + last.hashes.as_ref().map_or(0, |h| 8 * (h.messages() + 1))
        + ENTRY_OVERHEAD
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Format, slices};

    fn read(body: &str) -> (u128, Last) {
        let spans = slices::scan(body.as_bytes(), Format::Anthropic).unwrap();
        let key = spans.session_key(Format::Anthropic, body.as_bytes());
        let read = slices::read(Format::Anthropic, body.as_bytes(), spans, None).unwrap();
        let hashes = Some(PrefixHashes::of(&read.conversation, 1));
        let sums = Last::sums(Vec::new(), &read.conversation, 0);
        let last = Last {
            body: Bytes::from(body.to_string()),
            read,
            hashes,
            sums,
        };
        (key, last)
    }

    #[test]
    fn an_entry_is_taken_once() {
        let cache = ReadCache::with_max_bytes(1 << 20);
        let (key, last) = read(r#"{"messages": [{"role": "user", "content": "hi"}]}"#);
        let (body, conversation, hashes) = (
            last.body.clone(),
            last.read.conversation.clone(),
            last.hashes.clone(),
        );
        cache.put(key, None, last);
        let taken = cache.take(key).unwrap();
        assert_eq!(
            (taken.body, taken.read.conversation, taken.hashes),
            (body, conversation, hashes)
        );
        assert!(cache.take(key).is_none());
    }

    #[test]
    fn entries_are_evicted_to_stay_under_the_byte_bound() {
        let cache = ReadCache::with_max_bytes(64 * 1024);
        for i in 0..200 {
            let text = format!("{i}: {}", "x".repeat(2000));
            let (key, last) = read(&format!(
                r#"{{"messages": [{{"role": "user", "content": "{text}"}}]}}"#
            ));
            cache.put(key, None, last);
        }
        let bytes = cache.bytes();
        assert!(bytes <= 64 * 1024, "{bytes}");
        assert!(bytes > 32 * 1024, "{bytes}");
    }

    #[test]
    fn extended_sums_are_the_sums_of_the_whole() {
        let (_, a) = read(
            r#"{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}"#,
        );
        let (_, b) = read(
            r#"{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "text", "text": "other"}]}, {"role": "user", "content": "more"}]}"#,
        );
        let whole = Last::sums(Vec::new(), &b.read.conversation, 0);
        assert_eq!(whole.len(), 4);
        assert_eq!(
            whole[3] + crate::memory::estimated_bytes_with(&b.read.conversation, 0),
            crate::memory::estimated_bytes(&b.read.conversation)
        );
        for kept in 0..=3 {
            let prefix = kept.min(1);
            let extended = Last::sums(a.sums.clone(), &b.read.conversation, prefix);
            assert_eq!(extended, whole, "{kept}");
        }
    }

    #[test]
    fn a_zero_bound_keeps_nothing() {
        let cache = ReadCache::with_max_bytes(0);
        let (key, last) = read(r#"{"messages": []}"#);
        cache.put(key, None, last);
        assert!(cache.take(key).is_none());
    }
}
