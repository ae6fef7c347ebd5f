//! A per-block count cache keyed by a content hash, so that compacting the same history again
//! (every turn of an agent loop) tokenizes only what is new.

use super::TokenCounter;
use crate::conversation::{Block, ToolInput, ToolResultContent};
use quick_cache::UnitWeighter;
use quick_cache::sync::{Cache, DefaultLifecycle};
use serde_json::Value;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use xxhash_rust::xxh3::Xxh3;

/// Entries kept by [`CachedCounter::new`]; past it the least useful are evicted (quick_cache's
/// S3-FIFO-like policy: an entry seen once goes before one seen again). One entry is a 128-bit
/// key and a count, at most `ENTRY_BYTES` with the cache's own bookkeeping, so the bound is at
/// most about 12 MB; 100,000 blocks is several long agent sessions.
pub const DEFAULT_CACHE_CAPACITY: usize = 100_000;

/// Entries a new cache is sized for before it grows (a long session's blocks), so that a
/// counter made for one request does not allocate the whole bound.
const INITIAL_ENTRIES: usize = 4096;

/// Bytes allowed for one cache entry (16-byte key, 8-byte count, and the cache's per-entry
/// bookkeeping, which in `quick_cache`'s inline table is less than this), used to turn a byte
/// bound into an entry bound ([`CachedCounter::with_max_bytes`]): the bound errs low.
pub const ENTRY_BYTES: usize = 128;

/// Hit and miss counts of a [`CachedCounter`] since it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct CacheStats {
    /// Look-ups answered from the cache.
    pub hits: u64,
    /// Look-ups that had to count.
    pub misses: u64,
    /// Entries in the cache now.
    pub entries: usize,
}

/// Wraps a [`TokenCounter`] and caches the token count of every block, system prompt and tool
/// definition list under the 128-bit xxh3 hash of its content. A text block and a text
/// tool_result are cached as their text (the entry [`count_text_cached`](TokenCounter::count_text_cached)
/// of that text finds), a tool_result of blocks as its blocks: each text is hashed and looked up
/// once per count.
///
/// The hash is fed straight from the block's fields (strings, the JSON tree of verbatim values),
/// never from a serialization, and covers exactly what the count depends on: a tool_use's name
/// and input but not its id, so two identical calls share an entry. On a miss the inner counter's
/// [`count_block`](TokenCounter::count_block), [`count_system`](TokenCounter::count_system) or
/// [`count_tools`](TokenCounter::count_tools) does the work; messages and conversations are
/// summed from cached blocks by the provided methods. [`count_text`](TokenCounter::count_text)
/// is passed through uncached.
///
/// Bound: at most `capacity` entries, evicted one by one (`quick_cache`), never cleared all at
/// once. Thread safe (`quick_cache`'s sharded map). A warm compaction looks up every block, so
/// the cache is the hot path's map: `quick_cache` keeps each entry inline in its table (no
/// allocation or reference count per entry, no background upkeep), where moka's lookups were
/// 14% of a warm 10,000-call compaction's instructions (`git show 97644f4:docs/speed.md`).
#[derive(Debug)]
pub struct CachedCounter<C> {
    inner: C,
    map: Cache<u128, usize, UnitWeighter, BuildHasherDefault<KeyHasher>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl<C: TokenCounter> CachedCounter<C> {
    /// A cache of [`DEFAULT_CACHE_CAPACITY`] entries around `inner`.
    pub fn new(inner: C) -> CachedCounter<C> {
        CachedCounter::with_capacity(inner, DEFAULT_CACHE_CAPACITY)
    }

    /// A cache of at most `max_bytes` bytes (`max_bytes / ENTRY_BYTES` entries) around `inner`.
    pub fn with_max_bytes(inner: C, max_bytes: usize) -> CachedCounter<C> {
        CachedCounter::with_capacity(inner, max_bytes / ENTRY_BYTES)
    }

    /// A cache of at most `capacity` entries (at least 1) around `inner`.
    pub fn with_capacity(inner: C, capacity: usize) -> CachedCounter<C> {
        CachedCounter {
            inner,
            // Sized for a session's blocks at first; the table grows up to the bound.
            map: Cache::with(
                capacity.clamp(1, INITIAL_ENTRIES),
                capacity.max(1) as u64,
                UnitWeighter,
                BuildHasherDefault::default(),
                DefaultLifecycle::default(),
            ),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The wrapped counter.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// Hits, misses and current size.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.map.len(),
        }
    }

    /// Empties the cache (the statistics are kept).
    pub fn clear(&self) {
        self.map.clear();
    }

    /// The inner counter's count of `block`, cached under the hash of its content.
    fn cached_block(&self, block: &Block) -> usize {
        let mut h = Xxh3::new();
        hash_block(&mut h, block);
        self.cached(h.digest128(), || self.inner.count_block(block))
    }

    fn cached(&self, key: u128, count: impl FnOnce() -> usize) -> usize {
        if let Some(n) = self.map.get(&key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return n;
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let n = count();
        self.map.insert(key, n);
        n
    }
}

impl<C: TokenCounter> TokenCounter for CachedCounter<C> {
    fn count_text(&self, text: &str) -> usize {
        self.inner.count_text(text)
    }

    fn count_at_least(&self, text: &str) -> usize {
        self.inner.count_at_least(text)
    }

    fn prefix_within<'t>(&self, text: &'t str, max_tokens: usize) -> &'t str {
        self.inner.prefix_within(text, max_tokens)
    }

    fn suffix_within<'t>(&self, text: &'t str, max_tokens: usize) -> &'t str {
        self.inner.suffix_within(text, max_tokens)
    }

    fn count_text_cached(&self, text: &str) -> usize {
        self.cached(text_key(text), || self.inner.count_text(text))
    }

    fn adds_at_piece_starts(&self) -> bool {
        self.inner.adds_at_piece_starts()
    }

    fn count_text_cached_or(&self, text: &str, sum: &mut dyn FnMut() -> Option<usize>) -> usize {
        self.cached(text_key(text), || {
            sum().unwrap_or_else(|| self.inner.count_text(text))
        })
    }

    fn count_block(&self, block: &Block) -> usize {
        // By the per-block rules of the `tokens` module (which the inner counter applies): a
        // text block and a text tool_result count as their text, a tool_result of blocks as
        // the sum of its blocks. So a text block or text result is cached as its text (one
        // hash, one look-up, one entry, shared with `count_text_cached` of the same text: a
        // strategy that cuts the text finds its count here), and a result of blocks is the sum
        // of its blocks, each cached on its own (its content is hashed once, block by block).
        match block {
            Block::Text(t) => self.count_text_cached(&t.text),
            Block::ToolResult(r) => match &r.content {
                Some(ToolResultContent::Text(s)) => self.count_text_cached(s),
                Some(ToolResultContent::Blocks(bs)) => bs.iter().map(|b| self.count_block(b)).sum(),
                None => self.cached_block(block),
            },
            _ => self.cached_block(block),
        }
    }

    fn count_system(&self, system: Option<&Value>) -> usize {
        let Some(v) = system else { return 0 };
        let mut h = Xxh3::new();
        h.update(b"system");
        hash_value(&mut h, v);
        self.cached(h.digest128(), || self.inner.count_system(system))
    }

    fn count_tools(&self, tools: Option<&Value>) -> usize {
        let Some(v) = tools else { return 0 };
        let mut h = Xxh3::new();
        h.update(b"tools");
        hash_value(&mut h, v);
        self.cached(h.digest128(), || self.inner.count_tools(tools))
    }
}

/// The key of a text's count (shared by a text block, a text tool_result and
/// [`TokenCounter::count_text_cached`]).
fn text_key(text: &str) -> u128 {
    let mut h = Xxh3::new();
    h.update(b"text");
    hash_str(&mut h, text);
    h.digest128()
}

pub(crate) fn hash_str(h: &mut Xxh3, s: &str) {
    h.update(&(s.len() as u64).to_le_bytes());
    h.update(s.as_bytes());
}

/// Feeds what a block's count depends on into `h`: a type tag, then its strings and JSON,
/// length-prefixed so that different splits never collide.
fn hash_block(h: &mut Xxh3, block: &Block) {
    match block {
        Block::Text(t) => {
            h.update(b"T");
            hash_str(h, &t.text);
        }
        Block::ToolUse(t) => {
            h.update(b"U");
            hash_str(h, &t.name);
            match &t.input {
                ToolInput::Json(v) => {
                    h.update(b"j");
                    hash_value(h, v);
                }
                ToolInput::Arguments(s) => {
                    h.update(b"a");
                    hash_str(h, s);
                }
                ToolInput::Freeform(s) => {
                    h.update(b"f");
                    hash_str(h, s);
                }
            }
        }
        Block::ToolResult(r) => {
            h.update(b"R");
            match &r.content {
                None => {
                    h.update(b"n");
                    if let Some(v) = r.extra.get("output") {
                        hash_value(h, v);
                    }
                }
                Some(ToolResultContent::Text(s)) => {
                    h.update(b"s");
                    hash_str(h, s);
                }
                Some(ToolResultContent::Blocks(bs)) => {
                    h.update(b"b");
                    h.update(&(bs.len() as u64).to_le_bytes());
                    for b in bs {
                        hash_block(h, b);
                    }
                }
            }
        }
        Block::Thinking(v) => {
            h.update(b"K");
            hash_value(h, v);
        }
        Block::Image(v) => {
            h.update(b"I");
            hash_value(h, v);
        }
        Block::Document(v) => {
            h.update(b"D");
            hash_value(h, v);
        }
        Block::Other(v) => {
            h.update(b"O");
            hash_value(h, v);
        }
    }
}

/// Feeds a JSON tree into `h` without serializing it (keys in order, as the counter sees them).
pub(crate) fn hash_value(h: &mut Xxh3, v: &Value) {
    match v {
        Value::Null => h.update(b"n"),
        Value::Bool(b) => h.update(if *b { b"t" } else { b"f" }),
        Value::Number(n) => {
            h.update(b"#");
            hash_str(h, &n.to_string());
        }
        Value::String(s) => {
            h.update(b"s");
            hash_str(h, s);
        }
        Value::Array(items) => {
            h.update(b"[");
            h.update(&(items.len() as u64).to_le_bytes());
            for item in items {
                hash_value(h, item);
            }
        }
        Value::Object(obj) => {
            h.update(b"{");
            h.update(&(obj.len() as u64).to_le_bytes());
            for (k, item) in obj {
                hash_str(h, k);
                hash_value(h, item);
            }
        }
    }
}

/// The map's keys are already xxh3 hashes: use their low 64 bits instead of hashing again.
#[derive(Debug, Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(buf);
        }
    }
    fn write_u128(&mut self, n: u128) {
        self.0 = n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{Conversation, Message, Object, Role, ToolResult, ToolUse};
    use crate::tokens::TiktokenCounter;
    use serde_json::json;
    use std::sync::atomic::AtomicUsize;

    /// Counts whitespace-separated words and how often it was asked.
    #[derive(Default)]
    struct Counting {
        calls: AtomicUsize,
    }

    impl TokenCounter for Counting {
        fn count_text(&self, text: &str) -> usize {
            self.calls.fetch_add(1, Ordering::SeqCst);
            text.split_whitespace().count()
        }
    }

    fn conversation() -> Conversation {
        let call = Block::ToolUse(ToolUse {
            id: "toolu_1".into(),
            name: "Bash".into(),
            input: ToolInput::Json(json!({"command": "ls -la"})),
            extra: Object::new(),
        });
        let result = Block::ToolResult(ToolResult {
            tool_use_id: "toolu_1".into(),
            content: Some(ToolResultContent::Blocks(vec![Block::text("a.rs b.rs")])),
            is_error: None,
            extra: Object::new(),
            outcome: Default::default(),
            rewritten: None,
        });
        Conversation {
            system: Some(json!("be brief")),
            messages: vec![
                Message::text(Role::User, "list the files"),
                Message::new(Role::Assistant, vec![Block::text("sure"), call]),
                Message::new(Role::User, vec![result]),
            ],
            extra: serde_json::from_value(json!({"tools": [{"name": "Bash"}]})).unwrap(),
            bare: false,
        }
    }

    #[test]
    fn counting_the_same_history_twice_does_not_tokenize_again() {
        let counter = CachedCounter::new(Counting::default());
        let conv = conversation();
        let first = counter.count_conversation(&conv);
        let calls = counter.inner().calls.load(Ordering::SeqCst);
        assert!(calls > 0);
        let second = counter.count_conversation(&conv);
        assert_eq!(first, second);
        assert_eq!(counter.inner().calls.load(Ordering::SeqCst), calls);
        let stats = counter.stats();
        // Misses (and entries), once each: system, tools, the 2 text blocks (as their texts),
        // the tool_use and the text block inside the tool_result (a result of blocks is the
        // sum of its blocks, not an entry). Hits, the second time: the same 6 look-ups.
        assert_eq!((stats.hits, stats.misses, stats.entries), (6, 6, 6));
    }

    #[test]
    fn cached_counts_equal_uncached_counts() {
        let plain = TiktokenCounter::default();
        let cached = CachedCounter::new(TiktokenCounter::default());
        let conv = conversation();
        assert_eq!(
            cached.count_conversation(&conv),
            plain.count_conversation(&conv)
        );
        assert_eq!(
            cached.count_conversation(&conv),
            plain.count_conversation(&conv)
        );
    }

    #[test]
    fn a_new_message_only_tokenizes_its_own_blocks() {
        let counter = CachedCounter::new(Counting::default());
        let mut conv = conversation();
        counter.count_conversation(&conv);
        let before = counter.inner().calls.load(Ordering::SeqCst);
        conv.messages.push(Message::text(Role::Assistant, "done"));
        counter.count_conversation(&conv);
        assert_eq!(counter.inner().calls.load(Ordering::SeqCst), before + 1);
    }

    #[test]
    fn a_full_cache_evicts_entries_one_by_one_and_keeps_counting_right() {
        let counter = CachedCounter::with_capacity(Counting::default(), 50);
        for round in 0..3 {
            for i in 0..200 {
                let text = format!("w{i} x y");
                assert_eq!(counter.count_block(&Block::text(text)), 3, "round {round}");
            }
        }
        let entries = counter.stats().entries;
        // Bounded, and not emptied: what is kept is a part of what was counted.
        assert!(entries <= 50 && entries > 0, "{entries}");
    }

    #[test]
    fn a_byte_bound_is_an_entry_bound() {
        let counter = CachedCounter::with_max_bytes(Counting::default(), 10 * ENTRY_BYTES);
        for i in 0..100 {
            counter.count_block(&Block::text(format!("t{i}")));
        }
        assert!(counter.stats().entries <= 10, "{:?}", counter.stats());
    }

    #[test]
    fn different_content_never_shares_an_entry() {
        let counter = CachedCounter::new(Counting::default());
        assert_eq!(counter.count_block(&Block::text("one two")), 2);
        assert_eq!(counter.count_block(&Block::text("one two three")), 3);
        let other = Block::Other(json!({"type": "x", "text": "one two"}));
        counter.count_block(&other);
        // One miss each: a text block is looked up as its text, once.
        assert_eq!(counter.stats().misses, 3);
    }
}
