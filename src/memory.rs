//! Remembered compactions: the same history prefix gets the same compacted prefix.
//!
//! Agents (and every client of the proxy) resend the whole history on each turn. Compacting each
//! turn from scratch would move the cut every turn and miss the provider's prompt cache every
//! time. Instead, the pipeline remembers its last outputs keyed by a hash of the input they came
//! from; when a new input extends a remembered one, the remembered output plus the new messages is
//! the candidate, and it is compacted again only once it crosses the trigger (hysteresis).

use crate::conversation::{Block, Conversation, Message, ToolInput, ToolResultContent};
use crate::tokens::{hash_str, hash_value};
use std::collections::VecDeque;
use std::hash::Hasher;
use std::sync::Mutex;
use xxhash_rust::xxh3::Xxh3;

/// How many compactions are remembered (per pipeline).
const CAPACITY: usize = 64;

/// A bounded memory of compactions, safe to share between tasks.
#[derive(Debug, Default)]
pub struct Memory {
    entries: Mutex<VecDeque<Entry>>,
}

#[derive(Debug, Clone)]
struct Entry {
    /// Messages of the input this output came from.
    len: usize,
    /// Hash of the context (budget, system, other fields) and of those messages.
    key: u64,
    /// The compacted output.
    output: Conversation,
    /// Why the output is degraded (a tier fell back), when it is.
    degraded: Option<String>,
}

/// Hashes of every prefix of a conversation: `prefix[k]` covers the context and messages `..k`.
pub struct PrefixHashes {
    prefix: Vec<u64>,
}

impl PrefixHashes {
    /// Hashes `c` under a context tag (e.g. the budget), one pass over the content.
    pub fn of(c: &Conversation, tag: u64) -> PrefixHashes {
        let mut h = Xxh3::new();
        h.write_u64(tag);
        if let Some(s) = &c.system {
            hash_value(&mut h, s);
        }
        for (k, v) in &c.extra {
            hash_str(&mut h, k);
            hash_value(&mut h, v);
        }
        let mut prefix = Vec::with_capacity(c.messages.len() + 1);
        prefix.push(h.finish());
        for m in &c.messages {
            hash_message(&mut h, m);
            prefix.push(h.finish());
        }
        PrefixHashes { prefix }
    }
}

impl Memory {
    /// The remembered output whose input is the longest prefix of the conversation hashed in
    /// `hashes`, with that prefix's length and why it was degraded, if it was.
    pub fn recall(&self, hashes: &PrefixHashes) -> Option<(usize, Conversation, Option<String>)> {
        let entries = self.entries.lock().ok()?;
        entries
            .iter()
            .filter(|e| hashes.prefix.get(e.len) == Some(&e.key))
            .max_by_key(|e| e.len)
            .map(|e| (e.len, e.output.clone(), e.degraded.clone()))
    }

    /// Remembers `output` as the compaction of the whole conversation hashed in `hashes`, and
    /// why it is degraded (`None`: it is not).
    pub fn remember(&self, hashes: &PrefixHashes, output: &Conversation, degraded: Option<&str>) {
        let len = hashes.prefix.len() - 1;
        let Some(&key) = hashes.prefix.last() else {
            return;
        };
        if let Ok(mut entries) = self.entries.lock() {
            entries.retain(|e| !(e.len == len && e.key == key));
            if entries.len() >= CAPACITY {
                entries.pop_front();
            }
            entries.push_back(Entry {
                len,
                key,
                output: output.clone(),
                degraded: degraded.map(str::to_string),
            });
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
        }
        Block::Thinking(v) | Block::Image(v) | Block::Document(v) | Block::Other(v) => {
            h.write_u8(4);
            hash_value(h, v);
        }
    }
}
