//! The keys of the memory: [`PrefixHashes`], the hashes of every prefix of a conversation.

use crate::conversation::{Block, Conversation, Message, ToolInput, ToolResultContent};
use crate::tokens::{hash_str, hash_value};
use std::hash::Hasher;
use xxhash_rust::xxh3::Xxh3;

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
    pub(super) prefix: Vec<u64>,
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
    pub(super) fn longest_first<T>(&self, mut f: impl FnMut(usize, u64) -> Option<T>) -> Option<T> {
        self.prefix
            .iter()
            .enumerate()
            .rev()
            .find_map(|(len, key)| f(len, *key))
    }
}

/// The hash of the tag, the system prompt and the other top-level fields of `c` (the request's
/// envelope: `model`, `tools`, `metadata`, `client_metadata`, `stream`, ...), by value: the
/// keys of every object in sorted order, at every depth ([`hash_canonical`]). A client may
/// build its envelope afresh for every request with its keys in another order (Codex's
/// `client_metadata`); the same values are the same context. Every field takes part: a
/// continuation is sent with the remembered envelope, so one whose value changed must not
/// continue.
fn context_hash(c: &Conversation, tag: u64) -> u64 {
    let mut h = Xxh3::new();
    h.write_u64(tag);
    if let Some(s) = &c.system {
        hash_canonical(&mut h, s);
    }
    let mut fields: Vec<(&String, &serde_json::Value)> = c.extra.iter().collect();
    fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
    h.write_u64(fields.len() as u64);
    for (k, v) in fields {
        hash_str(&mut h, k);
        hash_canonical(&mut h, v);
    }
    h.finish()
}

/// [`hash_value`] with the keys of every object in sorted order: equal for two values that
/// differ only in the order of their keys. Arrays keep their order (it is meaning).
pub(crate) fn hash_canonical(h: &mut Xxh3, v: &serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Object(obj) => {
            h.update(b"{");
            h.update(&(obj.len() as u64).to_le_bytes());
            let mut fields: Vec<(&String, &Value)> = obj.iter().collect();
            fields.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (k, item) in fields {
                hash_str(h, k);
                hash_canonical(h, item);
            }
        }
        Value::Array(items) => {
            h.update(b"[");
            h.update(&(items.len() as u64).to_le_bytes());
            for item in items {
                hash_canonical(h, item);
            }
        }
        scalar => hash_value(h, scalar),
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
