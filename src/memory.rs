//! Remembered compactions: the same history prefix gets the same compacted prefix.
//!
//! Agents (and every client of the proxy) resend the whole history on each turn. Compacting each
//! turn from scratch would move the cut every turn and miss the provider's prompt cache every
//! time. Instead, the pipeline remembers its last outputs keyed by a hash of the input they came
//! from; when a new input extends a remembered one, the remembered output plus the new messages is
//! the candidate, and it is compacted again only once it crosses the trigger (hysteresis).
//!
//! Here: the store (its entries, its byte bound, [`Memory::remember`]). Beside it: continuing
//! a remembered compaction (`continuation`: what a continuation takes out, leaves and
//! remembers), the look-ups by prefix length of a store shared with other processes
//! (`shared`), the prefix hashes that key the entries (`hash`), and the estimated heap bytes
//! that weigh them (`size`).

mod continuation;
mod hash;
#[cfg(any(test, feature = "server"))]
mod shared;
mod size;
#[cfg(test)]
mod tests;

use crate::conversation::Conversation;
use crate::format::Format;
use crate::guard::FailureRecord;
pub use continuation::{Continuation, Cycle, Predecessor};
pub use hash::PrefixHashes;
#[cfg(feature = "server")]
pub(crate) use hash::hash_canonical;
use moka::sync::Cache;
#[cfg(test)]
pub use size::estimated_bytes;
pub use size::{estimated_bytes_with, message_bytes};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// The default bound of one pipeline's memory, in bytes of remembered output (64 MiB).
pub const DEFAULT_MEMORY_BYTES: u64 = 64 * 1024 * 1024;

/// A memory of compactions bounded by bytes, with least-recently-used eviction (`moka`, whose
/// weigher counts each output's size), safe to share between tasks.
///
/// Key: `(messages of the input, hash of the context and those messages)`; value: the
/// compacted output with its typed failure records. The weight of an entry is an estimate of
/// the heap bytes its output holds ([`estimated_bytes`]: struct sizes, string bytes and a
/// per-allocation overhead).
///
/// An output is held behind an `Arc`, shared with the caller that made it
/// ([`Memory::remember_shared`]), so remembering it copies nothing. A continuation takes its
/// predecessor out ([`Memory::take`]: moved, not copied, when nothing else holds it) and
/// leaves in its place a view of its own output's first messages, which is the predecessor's
/// output exactly (a continuation appends the new messages to it). A view lives as long as
/// the output it looks into stays remembered: one turn back from the newest continuation of a
/// history is always recalled (an agent that edits or retries its last turn), a view of a
/// view's own successor that was taken in turn is gone (a miss: compacted afresh).
#[derive(Clone)]
pub struct Memory {
    entries: Cache<(usize, u64), Arc<Entry>>,
    max_bytes: u64,
}

/// One remembered compaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Remembered {
    /// The compacted output.
    pub output: Conversation,
    /// Why the output is degraded (a tier fell back), when it is.
    pub degraded: Option<String>,
    /// Where the output keeps each failure whose result it dropped (message indices of
    /// `output`), as [`crate::guard::apply`] recorded them: a continuation is checked against
    /// them, structurally ([`crate::guard::check_compaction_with`]).
    pub failures: Vec<FailureRecord>,
    /// What a continuation needs so that it costs in proportion to its new messages (`None`:
    /// not known, e.g. an entry read back from the shared store; a continuation of it is then
    /// counted and checked whole, once).
    pub continuation: Option<Arc<Continuation>>,
}

/// A remembered output as the memory holds it.
#[derive(Debug)]
enum Output {
    /// The output itself, shared with whoever made it.
    Whole(Arc<Conversation>),
    /// The first `messages` messages of a later output (the continuation that took this
    /// entry's place), with that output's system prompt and fields; gone with it.
    Prefix(Weak<Conversation>, usize),
    /// Taken out by [`Memory::take`] (the entry has left the memory).
    Taken,
}

/// The JSON a writer made of an output's message array, kept with the output (by the service,
/// [`Memory::attach_written`]) so that a continuation of it writes only its new messages
/// ([`crate::format::emit::write_bytes_reusing`]).
#[derive(Clone)]
pub struct Written {
    /// The wire format the bytes are of.
    pub format: Format,
    /// The output's messages the items are of (all of them when attached).
    pub messages: usize,
    /// The items, comma-separated, without the array's brackets.
    pub items: Arc<dyn AsRef<[u8]> + Send + Sync>,
    /// Bytes the items keep allocated (a slice of a larger buffer keeps all of it), for the
    /// memory's byte bound.
    pub held_bytes: usize,
}

impl std::fmt::Debug for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Written")
            .field("format", &self.format)
            .field("messages", &self.messages)
            .field("items", &(*self.items).as_ref().len())
            .field("held_bytes", &self.held_bytes)
            .finish()
    }
}

/// A memory entry: the output and what [`Remembered`] says of it. The output is in a `Mutex`
/// so that taking it out moves it, whatever references the cache's own bookkeeping (its
/// pending write log) still hold to the entry.
#[derive(Debug)]
struct Entry {
    output: Mutex<Output>,
    degraded: Option<String>,
    failures: Vec<FailureRecord>,
    continuation: Option<Arc<Continuation>>,
    /// The output's written items, when the service attached them.
    written: Option<Arc<Written>>,
    /// The sum of [`message_bytes`] over the output's messages (a whole output; 0 else).
    messages_bytes: usize,
}

impl Entry {
    /// The estimated heap bytes of the entry (a view: its records only).
    fn weight(&self) -> usize {
        let records: usize = self.failures.iter().map(|f| f.id.len() + 32).sum();
        let continuation = self
            .continuation
            .as_ref()
            .map_or(0, |c| c.estimated_bytes());
        let output = match &*self.lock() {
            Output::Whole(c) => estimated_bytes_with(c, self.messages_bytes),
            Output::Prefix(..) | Output::Taken => 64,
        };
        let written = self.written.as_ref().map_or(0, |w| w.held_bytes);
        output + records + continuation + written
    }

    fn new(output: Output, degraded: Option<String>, failures: Vec<FailureRecord>) -> Entry {
        let messages_bytes = match &output {
            Output::Whole(c) => c.messages.iter().map(message_bytes).sum(),
            Output::Prefix(..) | Output::Taken => 0,
        };
        Entry {
            output: Mutex::new(output),
            degraded,
            failures,
            continuation: None,
            written: None,
            messages_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Output> {
        self.output.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether it is a view of a later output.
    fn is_view(&self) -> bool {
        matches!(&*self.lock(), Output::Prefix(..))
    }

    /// The entry as a [`Remembered`] (its output copied), `None` for a view whose output is
    /// gone.
    fn copied(&self) -> Option<Remembered> {
        let output = match &*self.lock() {
            Output::Whole(c) => Conversation::clone(c),
            Output::Prefix(of, messages) => first_messages(&*of.upgrade()?, *messages)?,
            Output::Taken => return None,
        };
        Some(Remembered {
            output,
            degraded: self.degraded.clone(),
            failures: self.failures.clone(),
            continuation: self.continuation.clone(),
        })
    }
}

/// The system prompt, fields and first `messages` messages of `c` (`None` past its end).
fn first_messages(c: &Conversation, messages: usize) -> Option<Conversation> {
    Some(Conversation {
        system: c.system.clone(),
        messages: c.messages.get(..messages)?.to_vec(),
        extra: c.extra.clone(),
        bare: c.bare,
    })
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("entries", &self.entries.entry_count())
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

impl Default for Memory {
    fn default() -> Self {
        Memory::with_max_bytes(DEFAULT_MEMORY_BYTES)
    }
}

impl Memory {
    /// A memory holding at most `max_bytes` of remembered outputs (estimated bytes).
    pub fn with_max_bytes(max_bytes: u64) -> Memory {
        Memory {
            // moka's default policy (TinyLFU: least recently used, with an admission test).
            // Plain LRU was tried: with more sessions than fit, agents' turns come round
            // robin and LRU evicts every entry before its session's next turn (128 clients:
            // 12% of the turns continued, against 67% with TinyLFU, which keeps a subset).
            entries: Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|_, v: &Arc<Entry>| u32::try_from(v.weight()).unwrap_or(u32::MAX))
                .build(),
            max_bytes,
        }
    }

    /// The bound, in bytes.
    #[cfg(any(test, feature = "server"))]
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The estimated bytes held now (after pending evictions ran).
    #[cfg(any(test, feature = "server"))]
    pub fn bytes(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.weighted_size()
    }

    /// Remembered outputs now.
    #[cfg(any(test, feature = "server"))]
    pub fn len(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.entry_count()
    }

    /// Whether nothing is remembered.
    #[cfg(any(test, feature = "server"))]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Remembers `output` as the compaction of the whole conversation hashed in `hashes`, with
    /// why it is degraded (`None`: it is not) and its failure records. An output larger than
    /// the whole bound is not kept.
    #[cfg(any(test, feature = "server"))]
    pub fn remember(
        &self,
        hashes: &PrefixHashes,
        output: &Conversation,
        degraded: Option<&str>,
        failures: &[FailureRecord],
    ) {
        self.remember_prefix(hashes, hashes.messages(), output, degraded, failures);
    }
}
