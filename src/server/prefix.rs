//! Hysteresis for the proxy: once a history has been compacted, the next turns send the same
//! compacted prefix followed by what is new, until that is over the trigger again. The prompt
//! cache of the provider then keeps hitting between compactions.
//!
//! ```text
//! turn t:   original m0..m(n-1)  -> compacted C                  (remembered: hash(m0..m(n-1)) -> C)
//! turn t+1: original m0..m(n+1)  -> C ++ m(n) m(n+1)  if under the trigger, else compact afresh
//! ```
//! A memory is keyed by a chained hash of the original message JSON (seeded with the format,
//! preset, system prompt and tools), so a request matches it only if its first messages are
//! byte-for-byte those that were compacted.

use crate::conversation::Message;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// One remembered compaction.
#[derive(Clone)]
pub(crate) struct Memo {
    /// The seed (format, preset, system prompt, tools).
    context: u64,
    /// How many original messages were compacted.
    pub len: usize,
    /// The chained hash of those messages.
    hash: u64,
    /// What they became.
    pub compacted: Arc<Vec<Message>>,
    /// The tiers applied (`microcompact+truncate`).
    pub applied: String,
}

/// The most recent compactions, newest first, at most `capacity`.
pub(crate) struct Memos {
    entries: Mutex<VecDeque<Memo>>,
    capacity: usize,
}

/// The seed of the chained hash: everything besides the messages that makes up the prefix.
pub(crate) fn context_hash(parts: &[&str], system: Option<&Value>, tools: Option<&Value>) -> u64 {
    let mut bytes = Vec::new();
    for p in parts {
        bytes.extend_from_slice(p.as_bytes());
        bytes.push(0);
    }
    for v in [system, tools] {
        if let Some(v) = v {
            bytes.extend_from_slice(v.to_string().as_bytes());
        }
        bytes.push(0);
    }
    xxh3_64_with_seed(&bytes, 0)
}

/// `h[i]` = hash of messages `0..=i`, chained from `context`.
pub(crate) fn prefix_hashes(context: u64, messages: &[Value]) -> Vec<u64> {
    let mut h = context;
    messages
        .iter()
        .map(|m| {
            h = xxh3_64_with_seed(m.to_string().as_bytes(), h);
            h
        })
        .collect()
}

impl Memos {
    pub(crate) fn new(capacity: usize) -> Memos {
        Memos {
            entries: Mutex::new(VecDeque::new()),
            capacity,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Memo>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The memory covering the longest prefix of a request with these prefix hashes.
    pub(crate) fn find(&self, context: u64, hashes: &[u64]) -> Option<Memo> {
        self.lock()
            .iter()
            .filter(|m| {
                m.context == context
                    && m.len > 0
                    && m.len <= hashes.len()
                    && hashes[m.len - 1] == m.hash
            })
            .max_by_key(|m| m.len)
            .cloned()
    }

    /// Remembers that the first `len` messages (hash `hashes[len - 1]`) became `compacted`.
    pub(crate) fn remember(
        &self,
        context: u64,
        hashes: &[u64],
        compacted: Vec<Message>,
        applied: String,
    ) {
        let Some(&hash) = hashes.last() else { return };
        let mut entries = self.lock();
        entries.retain(|m| !(m.context == context && m.hash == hash));
        entries.push_front(Memo {
            context,
            len: hashes.len(),
            hash,
            compacted: Arc::new(compacted),
            applied,
        });
        entries.truncate(self.capacity);
    }
}
