//! Continuing a remembered compaction: what a continuation needs of it ([`Continuation`]),
//! taking it out of the memory ([`Memory::take`], a [`Taken`]) and putting it back, and
//! remembering the continuation's output with its predecessor left as a view of it
//! ([`Predecessor`], [`Memory::remember_shared`]).

use super::{
    Entry, Memory, Output, PrefixHashes, Remembered, Written, first_messages, message_bytes,
};
use crate::conversation::Conversation;
use crate::guard::{FailureRecord, Junction};
use crate::tokens::ModelTokens;
use std::sync::{Arc, Mutex};

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
    /// Where the output stands in its compaction cycle (for the cost policy).
    pub cycle: Cycle,
}

/// A compaction cycle: the output a compaction made, then the turns that appended to it
/// unchanged. What the cost policy ([`crate::policy`]) learns the session's pace from, and when
/// the provider's prompt cache of its prefix went cold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cycle {
    /// Counted tokens of the output of the compaction that started the cycle.
    pub compacted_tokens: usize,
    /// Turns (continuations sent unchanged) since that compaction.
    pub turns: u32,
    /// When the output was sent: its prefix is in the provider's cache from then on, for the
    /// cache's lifetime.
    pub sent: std::time::Instant,
}

impl Cycle {
    /// The first output of a cycle (a compaction's), of `tokens` counted tokens, sent now.
    pub fn start(tokens: usize) -> Cycle {
        Cycle {
            compacted_tokens: tokens,
            turns: 0,
            sent: std::time::Instant::now(),
        }
    }

    /// The cycle one turn on (a continuation sent now).
    pub fn next(self) -> Cycle {
        Cycle {
            turns: self.turns.saturating_add(1),
            sent: std::time::Instant::now(),
            ..self
        }
    }

    /// Counted tokens the history grew by per turn since the cycle's compaction, with the
    /// output now `tokens` counted tokens (this turn included).
    pub fn growth(&self, tokens: usize) -> usize {
        tokens.saturating_sub(self.compacted_tokens) / (self.turns as usize + 1)
    }
}

impl Continuation {
    /// An estimate of the heap bytes it holds (the junctions' id sets), for the byte bound.
    pub fn estimated_bytes(&self) -> usize {
        self.input.estimated_bytes() + self.output.estimated_bytes()
    }
}

impl Memory {
    /// The remembered compaction whose input is the longest prefix of the conversation hashed
    /// in `hashes`, with that prefix's length. Probes the prefixes from the longest down, so a
    /// hit `k` messages short of the whole costs `k + 1` look-ups (a miss one per message).
    /// The output is copied and stays remembered; the continuation state is shared.
    #[cfg(any(test, feature = "server"))]
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
    #[cfg(any(test, feature = "server"))]
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
    #[cfg(any(test, feature = "server"))]
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
