//! The memory's look-ups by prefix length, for a store shared with other processes.

use super::{Entry, Memory, Output, PrefixHashes};
use crate::conversation::Conversation;
use crate::guard::FailureRecord;
use std::sync::Arc;

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
