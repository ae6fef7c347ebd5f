//! Remembered compactions: the same history prefix gets the same compacted prefix.
//!
//! Agents (and every client of the proxy) resend the whole history on each turn. Compacting each
//! turn from scratch would move the cut every turn and miss the provider's prompt cache every
//! time. Instead, the pipeline remembers its last outputs keyed by a hash of the input they came
//! from; when a new input extends a remembered one, the remembered output plus the new messages is
//! the candidate, and it is compacted again only once it crosses the trigger (hysteresis).

use crate::conversation::{Block, Conversation, Message, ToolInput, ToolResultContent};
use crate::format::Format;
use crate::guard::{FailureRecord, Junction};
use crate::tokens::{ModelTokens, hash_str, hash_value};
use moka::sync::Cache;
use std::hash::Hasher;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use xxhash_rust::xxh3::Xxh3;

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

/// A compaction taken out of the memory by [`Memory::take`].
#[derive(Debug)]
pub struct Taken {
    /// Input messages it covers (the prefix of the conversation looked up).
    pub len: usize,
    /// The compaction.
    pub remembered: Remembered,
    /// Whether its entry left the memory (a whole output, moved out); `false` for a view of
    /// a later output (copied, the entry stays). A taken entry that is not continued goes
    /// back with [`Memory::put_back`].
    pub removed: bool,
    /// The written items of the whole output, when attached ([`Memory::attach_written`]).
    pub written: Option<Arc<Written>>,
    /// The sum of [`message_bytes`] over the output's messages, when it left the memory.
    pub messages_bytes: Option<usize>,
}

/// The predecessor of a continuation, remembered again as a view of the continuation's first
/// messages ([`Memory::remember_shared`]).
#[derive(Debug, Clone)]
pub struct Predecessor {
    /// Input messages it covers.
    pub len: usize,
    /// Messages of its output (the continuation's first ones).
    pub messages: usize,
    /// Why its output is degraded, when it is.
    pub degraded: Option<String>,
    /// Its failure records.
    pub failures: Vec<FailureRecord>,
    /// What a continuation of it needs.
    pub continuation: Option<Arc<Continuation>>,
    /// The sum of [`message_bytes`] over its output's messages, when known: the
    /// continuation's is then that plus its new messages' (not a pass over the whole).
    pub messages_bytes: Option<usize>,
}

/// What a continuation of a remembered compaction (the remembered input prefix followed by
/// new messages) needs, so that it is neither counted nor checked whole again.
///
/// Token counts are the counter's own tokens of the whole request (system prompt, tools and
/// every message: `TokenCounter::count_conversation`, which is that sum), so a continuation's
/// count is the remembered count plus each new message's `count_message`.
#[derive(Debug, Clone, PartialEq)]
pub struct Continuation {
    /// The counting basis the counts were made with; a continuation counted on another basis
    /// (another model's framing or vocabulary) uses neither count.
    pub basis: ModelTokens,
    /// Counted tokens of the input prefix (the whole request).
    pub input_tokens: usize,
    /// Counted tokens of the output (the whole request).
    pub output_tokens: usize,
    /// The guard's junction at the end of the input prefix (its validation state).
    pub input: Junction,
    /// The guard's junction at the end of the output.
    pub output: Junction,
}

impl Continuation {
    /// An estimate of the heap bytes it holds (the junctions' id sets), for the byte bound.
    pub fn estimated_bytes(&self) -> usize {
        self.input.estimated_bytes() + self.output.estimated_bytes()
    }
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

/// Hashes of every prefix of a conversation: `prefix[k]` covers the context and messages `..k`.
///
/// `prefix[0]` is the xxh3 of the context tag, the system prompt and the other top-level
/// fields; `prefix[k + 1]` is the xxh3 of `prefix[k]` and the xxh3 digest of message `k`
/// alone. So the hashes of a conversation that keeps the first `j` messages of another are
/// that one's first `j + 1` followed by one digest per new message
/// ([`PrefixHashes::extended`]), in proportion to the new messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixHashes {
    tag: u64,
    prefix: Vec<u64>,
}

impl PrefixHashes {
    /// Hashes `c` under a context tag (e.g. the budget), one pass over the content.
    pub fn of(c: &Conversation, tag: u64) -> PrefixHashes {
        let mut prefix = Vec::with_capacity(c.messages.len() + 1);
        prefix.push(context_hash(c, tag));
        let mut hashes = PrefixHashes { tag, prefix };
        hashes.push_messages(&c.messages);
        hashes
    }

    /// The hashes of `c` when its first `kept` messages are those (equal, e.g. read from the
    /// same bytes) of the conversation hashed in `self`: `self`'s first `kept + 1` hashes
    /// and the new messages' own. Hashes `c` whole ([`PrefixHashes::of`]) when the tag or
    /// the context (system prompt, other fields: hashed again, a short pass) differs, or when
    /// `self` covers fewer than `kept` messages.
    pub fn extended(mut self, c: &Conversation, kept: usize, tag: u64) -> PrefixHashes {
        let kept = kept.min(c.messages.len());
        if self.tag != tag
            || kept >= self.prefix.len()
            || self.prefix.first() != Some(&context_hash(c, tag))
        {
            return PrefixHashes::of(c, tag);
        }
        self.prefix.truncate(kept + 1);
        self.push_messages(&c.messages[kept..]);
        self
    }

    fn push_messages(&mut self, messages: &[Message]) {
        self.prefix.reserve(messages.len());
        for m in messages {
            let mut one = Xxh3::new();
            hash_message(&mut one, m);
            let last = self.prefix.last().copied().unwrap_or_default();
            let mut link = Xxh3::new();
            link.write_u64(last);
            link.write_u64(one.finish());
            self.prefix.push(link.finish());
        }
    }

    /// The context tag the hashes were made under.
    pub fn tag(&self) -> u64 {
        self.tag
    }

    /// The number of messages covered (the longest prefix).
    pub fn messages(&self) -> usize {
        self.prefix.len().saturating_sub(1)
    }

    /// The hash of the context and the first `len` messages (`None` past the end).
    pub fn key(&self, len: usize) -> Option<u64> {
        self.prefix.get(len).copied()
    }

    /// The first `Some` of `f(len, key)` over the prefixes, longest first (the memory's probe
    /// order: a hit `k` messages short of the whole costs `k + 1` calls).
    fn longest_first<T>(&self, mut f: impl FnMut(usize, u64) -> Option<T>) -> Option<T> {
        self.prefix
            .iter()
            .enumerate()
            .rev()
            .find_map(|(len, key)| f(len, *key))
    }
}

/// The hash of the tag, the system prompt and the other top-level fields of `c`.
fn context_hash(c: &Conversation, tag: u64) -> u64 {
    let mut h = Xxh3::new();
    h.write_u64(tag);
    if let Some(s) = &c.system {
        hash_value(&mut h, s);
    }
    for (k, v) in &c.extra {
        hash_str(&mut h, k);
        hash_value(&mut h, v);
    }
    h.finish()
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
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The estimated bytes held now (after pending evictions ran).
    pub fn bytes(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.weighted_size()
    }

    /// Remembered outputs now.
    pub fn len(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.entry_count()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The remembered compaction whose input is the longest prefix of the conversation hashed
    /// in `hashes`, with that prefix's length. Probes the prefixes from the longest down, so a
    /// hit `k` messages short of the whole costs `k + 1` look-ups (a miss one per message).
    /// The output is copied and stays remembered; the continuation state is shared.
    pub fn recall(&self, hashes: &PrefixHashes) -> Option<(usize, Remembered)> {
        hashes.longest_first(|len, key| {
            let entry = self.entries.get(&(len, key))?;
            entry.copied().map(|r| (len, r))
        })
    }

    /// [`Memory::recall`], but a whole output is taken out of the memory: moved when nothing
    /// else holds it (the caller that made it let it go), copied otherwise. A view of a later
    /// output is copied and stays. The caller puts back what it does not continue
    /// ([`Memory::put_back`]) or remembers its continuation with it as the predecessor
    /// ([`Memory::remember_shared`]).
    pub fn take(&self, hashes: &PrefixHashes) -> Option<Taken> {
        hashes.longest_first(|len, key| {
            let entry = self.entries.get(&(len, key))?;
            if entry.is_view() {
                let remembered = entry.copied()?;
                return Some(Taken {
                    len,
                    remembered,
                    removed: false,
                    written: None,
                    messages_bytes: None,
                });
            }
            drop(entry);
            let entry = self.entries.remove(&(len, key))?;
            let output = std::mem::replace(&mut *entry.lock(), Output::Taken);
            let output = match output {
                Output::Whole(c) => Arc::try_unwrap(c).unwrap_or_else(|c| (*c).clone()),
                Output::Prefix(of, n) => first_messages(&*of.upgrade()?, n)?,
                Output::Taken => return None,
            };
            Some(Taken {
                len,
                remembered: Remembered {
                    output,
                    degraded: entry.degraded.clone(),
                    failures: entry.failures.clone(),
                    continuation: entry.continuation.clone(),
                },
                removed: true,
                written: entry.written.clone(),
                messages_bytes: Some(entry.messages_bytes),
            })
        })
    }

    /// Puts a compaction taken by [`Memory::take`] back under its key (the first `len`
    /// messages hashed in `hashes`).
    pub fn put_back(&self, hashes: &PrefixHashes, len: usize, remembered: Remembered) {
        let Some(key) = hashes.key(len) else {
            return;
        };
        self.entries.insert(
            (len, key),
            Arc::new(Entry {
                continuation: remembered.continuation,
                ..Entry::new(
                    Output::Whole(Arc::new(remembered.output)),
                    remembered.degraded,
                    remembered.failures,
                )
            }),
        );
    }

    /// Remembers `output` as the compaction of the whole conversation hashed in `hashes`, with
    /// why it is degraded (`None`: it is not) and its failure records. An output larger than
    /// the whole bound is not kept.
    pub fn remember(
        &self,
        hashes: &PrefixHashes,
        output: &Conversation,
        degraded: Option<&str>,
        failures: &[FailureRecord],
    ) {
        self.remember_prefix(hashes, hashes.messages(), output, degraded, failures);
    }

    /// Remembers `output` (shared, not copied) as the compaction of the whole conversation
    /// hashed in `hashes`, with what a continuation of it needs ([`Continuation`]). With a
    /// `predecessor` (the compaction `output` continues, taken by [`Memory::take`]), that one
    /// is remembered again as a view of `output`'s first `predecessor.messages` messages.
    pub fn remember_shared(
        &self,
        hashes: &PrefixHashes,
        output: &Arc<Conversation>,
        degraded: Option<&str>,
        failures: &[FailureRecord],
        continuation: Continuation,
        predecessor: Option<Predecessor>,
    ) {
        let Some(key) = hashes.key(hashes.messages()) else {
            return;
        };
        let messages_bytes = match predecessor.as_ref().and_then(|p| {
            let known = p.messages_bytes?;
            let new = output.messages.get(p.messages..)?;
            Some(known + new.iter().map(message_bytes).sum::<usize>())
        }) {
            Some(n) => n,
            None => output.messages.iter().map(message_bytes).sum(),
        };
        self.entries.insert(
            (hashes.messages(), key),
            Arc::new(Entry {
                output: Mutex::new(Output::Whole(output.clone())),
                degraded: degraded.map(str::to_string),
                failures: failures.to_vec(),
                continuation: Some(Arc::new(continuation)),
                written: None,
                messages_bytes,
            }),
        );
        if let Some(p) = predecessor
            && p.len < hashes.messages()
            && p.messages <= output.messages.len()
            && let Some(key) = hashes.key(p.len)
        {
            self.entries.insert(
                (p.len, key),
                Arc::new(Entry {
                    continuation: p.continuation,
                    ..Entry::new(
                        Output::Prefix(Arc::downgrade(output), p.messages),
                        p.degraded,
                        p.failures,
                    )
                }),
            );
        }
    }

    /// Keeps `written` (the JSON items of `output`'s messages) with the output remembered
    /// for the whole conversation hashed in `hashes`, when that is `output` itself (the same
    /// allocation: nothing else's bytes are ever attached to it). The entry is inserted again
    /// so that its weight counts the bytes.
    pub fn attach_written(
        &self,
        hashes: &PrefixHashes,
        output: &Arc<Conversation>,
        written: Written,
    ) {
        let n = hashes.messages();
        let Some(key) = hashes.key(n) else {
            return;
        };
        let Some(entry) = self.entries.get(&(n, key)) else {
            return;
        };
        let moved = {
            let mut held = entry.lock();
            match &*held {
                Output::Whole(c)
                    if Arc::ptr_eq(c, output) && written.messages == c.messages.len() =>
                {
                    std::mem::replace(&mut *held, Output::Taken)
                }
                _ => return,
            }
        };
        self.entries.insert(
            (n, key),
            Arc::new(Entry {
                output: Mutex::new(moved),
                degraded: entry.degraded.clone(),
                failures: entry.failures.clone(),
                continuation: entry.continuation.clone(),
                written: Some(Arc::new(written)),
                messages_bytes: entry.messages_bytes,
            }),
        );
    }

    /// [`Memory::remember`] with what a continuation of it needs ([`Continuation`]).
    pub fn remember_continuable(
        &self,
        hashes: &PrefixHashes,
        output: &Conversation,
        degraded: Option<&str>,
        failures: &[FailureRecord],
        continuation: Continuation,
    ) {
        let output = Arc::new(output.clone());
        self.remember_shared(hashes, &output, degraded, failures, continuation, None);
    }
}

/// Look-ups by prefix length, for a store shared with other processes (the service's Redis
/// store reads and fills the memory through them).
impl Memory {
    /// The length of the longest remembered prefix of the conversation hashed in `hashes`.
    pub fn longest(&self, hashes: &PrefixHashes) -> Option<usize> {
        (0..hashes.prefix.len()).rev().find(|&len| {
            self.entries
                .get(&(len, hashes.prefix[len]))
                .is_some_and(|e| match &*e.lock() {
                    Output::Whole(_) => true,
                    Output::Prefix(of, _) => of.strong_count() > 0,
                    Output::Taken => false,
                })
        })
    }

    /// Why the output remembered for the first `len` messages is degraded: `None` when
    /// nothing is remembered there, `Some(None)` when it is not degraded.
    pub fn degraded_at(&self, hashes: &PrefixHashes, len: usize) -> Option<Option<String>> {
        let key = *hashes.prefix.get(len)?;
        self.entries.get(&(len, key)).map(|e| e.degraded.clone())
    }

    /// Remembers `output` as the compaction of the first `len` messages hashed in `hashes`
    /// (nothing when `len` is past the end), as [`Memory::remember`].
    pub fn remember_prefix(
        &self,
        hashes: &PrefixHashes,
        len: usize,
        output: &Conversation,
        degraded: Option<&str>,
        failures: &[FailureRecord],
    ) {
        let Some(&key) = hashes.prefix.get(len) else {
            return;
        };
        self.entries.insert(
            (len, key),
            Arc::new(Entry::new(
                Output::Whole(Arc::new(output.clone())),
                degraded.map(str::to_string),
                failures.to_vec(),
            )),
        );
    }

    /// The failure records of the output remembered for the first `len` messages (`None` when
    /// nothing is remembered there).
    pub fn failures_at(&self, hashes: &PrefixHashes, len: usize) -> Option<Vec<FailureRecord>> {
        let key = *hashes.prefix.get(len)?;
        self.entries.get(&(len, key)).map(|e| e.failures.clone())
    }
}

/// An estimate of the heap bytes a conversation holds, for the memory's byte bound: every
/// value's own size (`size_of` of its message, block and JSON value structs, in their vectors)
/// plus every string's bytes, plus [`ALLOC_BYTES`] per heap allocation (each string, vector
/// and JSON map), plus the index table of each JSON map. Counting only text and JSON lengths
/// (and 64 bytes per block) came to about half of what the service's resident set grew by
/// (docs/service.md, "Load check").
pub fn estimated_bytes(c: &Conversation) -> usize {
    estimated_bytes_with(c, c.messages.iter().map(message_bytes).sum())
}

/// [`estimated_bytes`] of `c` when the sum of [`message_bytes`] over its messages is known
/// (`messages_bytes`): the rest is its top level (system prompt, other fields, the message
/// vector), so a caller that keeps the sum across a growing history estimates each turn in
/// proportion to its new messages.
pub fn estimated_bytes_with(c: &Conversation, messages_bytes: usize) -> usize {
    std::mem::size_of::<Conversation>()
        + c.system.as_ref().map_or(0, value_heap)
        + object_heap(&c.extra)
        + ALLOC_BYTES
        + c.messages.capacity() * std::mem::size_of::<Message>()
        + messages_bytes
}

/// The heap bytes below one message (its fields' and blocks'; not its own `size_of`, which
/// the conversation's message vector counts), as [`estimated_bytes`] counts them.
pub fn message_bytes(m: &Message) -> usize {
    object_heap(&m.extra)
        + ALLOC_BYTES
        + m.content.capacity() * std::mem::size_of::<Block>()
        + m.content.iter().map(block_bytes).sum::<usize>()
}

/// The bookkeeping an allocator adds to one heap allocation, on average (a header and the
/// rounding up to its size class), in bytes.
pub const ALLOC_BYTES: usize = 16;

/// The heap bytes of a string: its capacity and one allocation (none when empty).
fn string_heap(s: &str, capacity: usize) -> usize {
    if capacity == 0 && s.is_empty() {
        0
    } else {
        capacity.max(s.len()) + ALLOC_BYTES
    }
}

/// The heap bytes below a JSON value (not its own `size_of`, which its parent counts). With
/// `arbitrary_precision` a number is a string; with `preserve_order` a map is an `IndexMap`
/// (a vector of entries holding each key's hash, plus an index table of 8 bytes a slot).
fn value_heap(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    match v {
        Value::Null | Value::Bool(_) => 0,
        Value::Number(x) => x.as_str().len() + ALLOC_BYTES,
        Value::String(s) => string_heap(s, s.capacity()),
        Value::Array(a) => {
            ALLOC_BYTES
                + a.capacity() * std::mem::size_of::<Value>()
                + a.iter().map(value_heap).sum::<usize>()
        }
        Value::Object(o) => object_heap(o),
    }
}

/// The heap bytes of a JSON map: its entries (key, value and the key's hash), its index table,
/// and what lies below each key and value.
fn object_heap(o: &serde_json::Map<String, serde_json::Value>) -> usize {
    if o.is_empty() {
        return 0;
    }
    let entry = std::mem::size_of::<String>() + std::mem::size_of::<serde_json::Value>() + 8;
    2 * ALLOC_BYTES
        + o.len() * (entry + 8)
        + o.iter()
            .map(|(k, v)| string_heap(k, k.capacity()) + value_heap(v))
            .sum::<usize>()
}

/// The heap bytes below a block (not its own `size_of`, which its message's vector counts).
fn block_bytes(b: &Block) -> usize {
    match b {
        Block::Text(t) => string_heap(&t.text, t.text.capacity()) + object_heap(&t.extra),
        Block::ToolUse(t) => {
            string_heap(&t.id, t.id.capacity())
                + string_heap(&t.name, t.name.capacity())
                + object_heap(&t.extra)
                + match &t.input {
                    ToolInput::Json(v) => value_heap(v),
                    ToolInput::Arguments(s) | ToolInput::Freeform(s) => {
                        string_heap(s, s.capacity())
                    }
                }
        }
        Block::ToolResult(r) => {
            string_heap(&r.tool_use_id, r.tool_use_id.capacity())
                + object_heap(&r.extra)
                + match &r.content {
                    None => 0,
                    Some(ToolResultContent::Text(s)) => string_heap(s, s.capacity()),
                    Some(ToolResultContent::Blocks(bs)) => {
                        ALLOC_BYTES
                            + bs.capacity() * std::mem::size_of::<Block>()
                            + bs.iter().map(block_bytes).sum::<usize>()
                    }
                }
        }
        Block::Thinking(v) | Block::Image(v) | Block::Document(v) | Block::Other(v) => {
            value_heap(v)
        }
    }
}

fn hash_message(h: &mut Xxh3, m: &Message) {
    h.write(m.role.as_str().as_bytes());
    h.write_u8(m.form as u8);
    for (k, v) in &m.extra {
        hash_str(h, k);
        hash_value(h, v);
    }
    for b in &m.content {
        hash_block(h, b);
    }
    h.write_u8(0xff);
}

fn hash_block(h: &mut Xxh3, b: &Block) {
    match b {
        Block::Text(t) => {
            h.write_u8(1);
            hash_str(h, &t.text);
            for (k, v) in &t.extra {
                hash_str(h, k);
                hash_value(h, v);
            }
        }
        Block::ToolUse(t) => {
            h.write_u8(2);
            hash_str(h, &t.id);
            hash_str(h, &t.name);
            match &t.input {
                ToolInput::Json(v) => hash_value(h, v),
                ToolInput::Arguments(s) | ToolInput::Freeform(s) => hash_str(h, s),
            }
            hash_extra_but_breakpoints(h, &t.extra);
        }
        Block::ToolResult(r) => {
            h.write_u8(3);
            hash_str(h, &r.tool_use_id);
            h.write_u8(r.is_error.map_or(2, u8::from));
            match &r.content {
                None => h.write_u8(0),
                Some(ToolResultContent::Text(s)) => hash_str(h, s),
                Some(ToolResultContent::Blocks(bs)) => bs.iter().for_each(|b| hash_block(h, b)),
            }
            hash_extra_but_breakpoints(h, &r.extra);
        }
        Block::Thinking(v) | Block::Image(v) | Block::Document(v) | Block::Other(v) => {
            h.write_u8(4);
            hash_value(h, v);
        }
    }
}

/// The other fields of a tool_use or tool_result block, so that a client's change to one of
/// them in an earlier message is a different prefix (the remembered output would carry the
/// old value). `cache_control` is left out, as it always was for these blocks: a client moves
/// its prompt-cache breakpoints every turn (Claude Code marks the newest block), and the
/// guard settles their number in every output (`guard::cache`).
fn hash_extra_but_breakpoints(h: &mut Xxh3, extra: &serde_json::Map<String, serde_json::Value>) {
    for (k, v) in extra {
        if k != "cache_control" {
            hash_str(h, k);
            hash_value(h, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A conversation of `n` user/assistant turns whose texts are `size` bytes each, tagged by
    /// `tag` so two conversations never share a prefix.
    fn conversation(tag: usize, n: usize, size: usize) -> Conversation {
        let messages: Vec<_> = (0..n)
            .map(|i| {
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                json!({"role": role, "content": format!("{tag}:{i}:{}", "x".repeat(size))})
            })
            .collect();
        Format::Anthropic
            .read(&json!({"model": "m", "max_tokens": 1, "messages": messages}))
            .unwrap()
    }

    #[test]
    fn distinct_outputs_are_evicted_to_stay_under_the_byte_bound() {
        let memory = Memory::with_max_bytes(1_000_000);
        let one = estimated_bytes(&conversation(0, 10, 10_000)) as u64;
        assert!(one > 100_000 && one < 110_000, "{one}");
        for tag in 0..40 {
            let c = conversation(tag, 10, 10_000);
            memory.remember(&PrefixHashes::of(&c, 7), &c, None, &[]);
        }
        assert!(memory.bytes() <= 1_000_000, "{}", memory.bytes());
        assert!(memory.len() < 40 && !memory.is_empty(), "{}", memory.len());
    }

    #[test]
    fn a_changed_field_of_an_earlier_tool_call_or_result_is_another_prefix() {
        let body = |use_extra: serde_json::Value, result_extra: serde_json::Value| {
            let mut call =
                json!({"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}});
            let mut result = json!({"type": "tool_result", "tool_use_id": "t1", "content": "a.rs"});
            for (block, extra) in [(&mut call, use_extra), (&mut result, result_extra)] {
                if let (Some(b), Some(e)) = (block.as_object_mut(), extra.as_object()) {
                    b.extend(e.clone());
                }
            }
            let messages = json!([
                {"role": "user", "content": "list the files"},
                {"role": "assistant", "content": [call]},
                {"role": "user", "content": [result]},
                {"role": "assistant", "content": "done"},
            ]);
            let c = Format::Anthropic
                .read(&json!({"model": "m", "max_tokens": 1, "messages": messages}))
                .unwrap();
            PrefixHashes::of(&c, 7)
        };
        let plain = body(json!({}), json!({}));
        for (u, r) in [
            (json!({"caller": {"type": "direct"}}), json!({})),
            (json!({}), json!({"x_meta": 1})),
        ] {
            let changed = body(u, r);
            assert_eq!(changed.key(1), plain.key(1));
            assert_ne!(changed.key(4), plain.key(4));
        }
        // A moved prompt-cache breakpoint is the same prefix.
        let marked = body(json!({}), json!({"cache_control": {"type": "ephemeral"}}));
        assert_eq!(marked.key(4), plain.key(4));
    }

    #[test]
    fn the_longest_remembered_prefix_is_recalled() {
        let memory = Memory::default();
        let long = conversation(1, 12, 10);
        let short = Conversation {
            messages: long.messages[..4].to_vec(),
            ..long.clone()
        };
        let output = conversation(9, 2, 10);
        memory.remember(&PrefixHashes::of(&short, 3), &output, None, &[]);
        let longer_prefix = Conversation {
            messages: long.messages[..8].to_vec(),
            ..long.clone()
        };
        memory.remember(
            &PrefixHashes::of(&longer_prefix, 3),
            &short,
            Some("summary failed"),
            &[FailureRecord {
                id: "call_7".into(),
                message: 1,
            }],
        );
        let (len, got) = memory.recall(&PrefixHashes::of(&long, 3)).unwrap();
        assert_eq!(len, 8);
        assert_eq!(got.output, short);
        assert_eq!(got.degraded.as_deref(), Some("summary failed"));
        // The typed failure records come back with the output they belong to.
        assert_eq!(got.failures.len(), 1);
        assert_eq!(
            (got.failures[0].id.as_str(), got.failures[0].message),
            ("call_7", 1)
        );
        // Another context tag (another budget) recalls nothing.
        assert!(memory.recall(&PrefixHashes::of(&long, 4)).is_none());
    }
    /// `c` with its first `kept` messages and then `new` more (tagged `tag`).
    fn grown(c: &Conversation, kept: usize, new: usize, tag: usize) -> Conversation {
        let mut g = c.clone();
        g.messages.truncate(kept);
        g.messages.extend(conversation(tag, new, 5).messages);
        g
    }

    proptest::proptest! {
        /// Extending the hashes of a conversation for one that keeps its first `kept`
        /// messages gives the hashes of the whole, for any split, tag and context.
        #[test]
        fn extended_hashes_are_the_hashes_of_the_whole(
            n in 0usize..12, kept in 0usize..14, new in 0usize..6, tag in 0u64..3,
            same_tag: bool, same_system: bool,
        ) {
            let first = conversation(1, n, 8);
            let mut next = grown(&first, kept, new, 2);
            if !same_system {
                next.system = Some(json!("another system prompt"));
            }
            let other_tag = if same_tag { tag } else { tag + 1 };
            let got = PrefixHashes::of(&first, tag).extended(&next, kept, other_tag);
            proptest::prop_assert_eq!(got, PrefixHashes::of(&next, other_tag));
        }
    }

    #[test]
    fn a_taken_output_is_moved_and_its_continuation_leaves_a_view() {
        let memory = Memory::default();
        let first = conversation(3, 6, 10);
        let hashes = PrefixHashes::of(&first, 1);
        let output = Arc::new(conversation(4, 2, 10));
        let continuation = |c: &Conversation| Continuation {
            basis: ModelTokens::counter(crate::tokens::Tokenizer::O200kBase),
            input_tokens: 1,
            output_tokens: 1,
            input: Junction::of(c, Format::Anthropic),
            output: Junction::of(c, Format::Anthropic),
        };
        memory.remember_shared(&hashes, &output, None, &[], continuation(&first), None);
        let address = Arc::as_ptr(&output);
        drop(output);
        let next = grown(&first, 6, 2, 5);
        let next_hashes = PrefixHashes::of(&next, 1);
        let taken = memory.take(&next_hashes).expect("remembered");
        assert_eq!((taken.len, taken.removed), (6, true));
        // Moved out: the same messages, not a copy of them.
        assert_eq!(taken.remembered.output, conversation(4, 2, 10));
        assert!(memory.recall(&hashes).is_none(), "it left the memory");
        // Its continuation: the output plus the new messages, remembered with a view of its
        // first two messages in the predecessor's place.
        let mut out = taken.remembered.output;
        out.messages.extend_from_slice(&next.messages[6..]);
        let out = Arc::new(out);
        let predecessor = Predecessor {
            len: 6,
            messages: 2,
            degraded: Some("why".into()),
            failures: vec![],
            continuation: None,
            messages_bytes: taken.messages_bytes,
        };
        memory.remember_shared(
            &next_hashes,
            &out,
            None,
            &[],
            continuation(&next),
            Some(predecessor),
        );
        // The continuation's weight, summed from its predecessor's and its new messages',
        // is the whole estimate (and the view's 64 bytes).
        assert_eq!(
            memory.bytes() as usize,
            estimated_bytes(&out) + continuation(&next).estimated_bytes() + 64
        );
        let (len, view) = memory.recall(&hashes).expect("the view");
        assert_eq!(len, 6);
        assert_eq!(view.output, conversation(4, 2, 10));
        assert_eq!(view.degraded.as_deref(), Some("why"));
        let (len, whole) = memory.recall(&next_hashes).expect("the continuation");
        assert_eq!((len, &whole.output), (8, &*out));
        assert_ne!(address, Arc::as_ptr(&out));
        // Taking the continuation (nothing else holds it) moves it; the view is then gone.
        drop(out);
        let again = memory.take(&next_hashes).expect("remembered");
        assert_eq!((again.len, again.removed), (8, true));
        assert!(memory.recall(&hashes).is_none());
        assert_eq!(memory.longest(&next_hashes), None);
        // Put back, it is there again.
        memory.put_back(&next_hashes, 8, again.remembered);
        assert_eq!(memory.longest(&next_hashes), Some(8));
    }
}
