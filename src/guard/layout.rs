//! The guard's layout of one input, computed once and borrowed by every strategy and check.
//!
//! ```text
//! conversation -> Layout::of      units (rounds, exchanges, assistant runs), pinned prefix,
//!                                 legal cuts, protected messages (pinned, open tool loop)
//!              -> strategies      read it (where may I cut? what may I edit?)
//!              -> check_compaction reads the input's layout for what must survive
//! ```
//!
//! Building it is linear in the history: [`Units::of`] precomputes which indices fall inside a
//! unit, so each cut query is O(1).

use super::units::{Cut, Exchange, Units};
use crate::conversation::{Conversation, Role};
use crate::tokens::TokenCounter;
use std::ops::Range;

/// Units, cuts and the protected set of one conversation. Indices are message indices of that
/// conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    units: Units,
    cuts: Vec<Cut>,
    /// Per message: true when no strategy may edit or drop it (the pinned prefix; the assistant
    /// messages of the open tool loop).
    protected: Vec<bool>,
    /// The exchange the history ends inside, when it does (the open tool loop), as a range.
    open_loop: Option<Range<usize>>,
}

impl Layout {
    /// Computes the layout of `conversation` (any input, valid or not; see [`Units::of`]).
    pub fn of(conversation: &Conversation) -> Layout {
        let units = Units::of(conversation);
        let cuts = units.cuts(conversation);
        let n = units.len;
        let open_loop = units
            .exchanges
            .last()
            .filter(|e| e.end == n && n > 0)
            .map(|e| e.start..e.end);
        let mut protected = vec![false; n];
        for p in protected.iter_mut().take(units.pinned) {
            *p = true;
        }
        if let Some(open) = &open_loop {
            for i in open.clone() {
                if conversation.messages[i].role == Role::Assistant {
                    protected[i] = true;
                }
            }
        }
        Layout {
            units,
            cuts,
            protected,
            open_loop,
        }
    }

    /// The units (rounds, exchanges, assistant runs).
    pub fn units(&self) -> &Units {
        &self.units
    }

    /// Number of leading messages never dropped or edited (see [`Units::pinned`]).
    pub fn pinned(&self) -> usize {
        self.units.pinned
    }

    /// Message count.
    pub fn len(&self) -> usize {
        self.units.len
    }

    /// True for an empty history.
    pub fn is_empty(&self) -> bool {
        self.units.len == 0
    }

    /// Index of the newest message (always kept; only its tool results' content may shrink).
    pub fn newest(&self) -> Option<usize> {
        self.units.len.checked_sub(1)
    }

    /// Every legal cut, oldest first.
    pub fn cuts(&self) -> &[Cut] {
        &self.cuts
    }

    /// The legal cuts whose first kept message comes after `index`.
    pub fn cuts_after(&self, index: usize) -> &[Cut] {
        let from = self.cuts.partition_point(|c| c.index <= index);
        self.cuts.get(from..).unwrap_or(&[])
    }

    /// The earliest legal cut after `after` for which `fits` holds, else the latest cut after
    /// `after`; `None` when there is none. The one search every dropping or summarizing
    /// strategy uses to find the oldest span it may replace.
    pub fn earliest_cut(&self, after: usize, mut fits: impl FnMut(&Cut) -> bool) -> Option<Cut> {
        let cuts = self.cuts_after(after);
        let last = *cuts.last()?;
        Some(cuts.iter().copied().find(|c| fits(c)).unwrap_or(last))
    }

    /// Whether message `index` may not be edited or dropped: pinned, or an assistant message of
    /// the open tool loop (its calls await results; Anthropic and OpenAI refuse a changed call).
    pub fn is_protected(&self, index: usize) -> bool {
        self.protected.get(index).copied().unwrap_or(false)
    }

    /// The protected flags, one per message.
    pub fn protected(&self) -> &[bool] {
        &self.protected
    }

    /// The open tool loop: the last exchange when the history ends inside it.
    pub fn open_loop(&self) -> Option<&Exchange> {
        self.open_loop
            .as_ref()
            .and_then(|_| self.units.exchanges.last())
    }

    /// Whether some call of the last exchange still awaits its result.
    pub fn ends_with_open_call(&self) -> bool {
        self.units.exchanges.last().is_some_and(|e| e.open)
    }
}

/// Counter tokens per message and of every tail `i..`, counted once per input; when made by
/// [`MessageTokens::of`] or [`MessageTokens::reusing`], also per block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageTokens {
    per: Vec<usize>,
    /// `suffix[i]` = tokens of messages `i..`; one longer than `per`.
    suffix: Vec<usize>,
    /// Counts of every block, message after message (empty when not known).
    blocks: Vec<usize>,
    /// `starts[i]..starts[i + 1]` are message `i`'s blocks in `blocks`; one longer than `per`
    /// when the block counts are known, else empty.
    starts: Vec<usize>,
}

impl MessageTokens {
    /// Counts each block of `conversation` once (the counter caches per block); a message
    /// counts [`crate::tokens::MESSAGE_OVERHEAD`] plus its blocks, the rule of
    /// [`TokenCounter::count_message`].
    pub fn of(conversation: &Conversation, counter: &dyn TokenCounter) -> MessageTokens {
        MessageTokens::reusing(conversation, counter, |_| None)
    }

    /// As [`MessageTokens::of`], but message `k`'s block counts are taken from `known(k)` when
    /// it gives them (a message copied unchanged from a conversation already counted), not
    /// counted again.
    pub fn reusing<'k>(
        conversation: &Conversation,
        counter: &dyn TokenCounter,
        known: impl Fn(usize) -> Option<&'k [usize]>,
    ) -> MessageTokens {
        let n = conversation.messages.len();
        let mut per = Vec::with_capacity(n);
        let mut blocks = Vec::with_capacity(n);
        let mut starts = Vec::with_capacity(n + 1);
        for (k, m) in conversation.messages.iter().enumerate() {
            starts.push(blocks.len());
            match known(k).filter(|b| b.len() == m.content.len()) {
                Some(b) => blocks.extend_from_slice(b),
                None => blocks.extend(m.content.iter().map(|b| counter.count_block(b))),
            }
            let from = starts[k];
            per.push(crate::tokens::MESSAGE_OVERHEAD + blocks[from..].iter().sum::<usize>());
        }
        starts.push(blocks.len());
        let mut tokens = MessageTokens::from_counts(per);
        tokens.blocks = blocks;
        tokens.starts = starts;
        tokens
    }

    /// From counts already made (e.g. after planned caps), one per message (no block counts).
    pub fn from_counts(per: Vec<usize>) -> MessageTokens {
        let mut suffix = vec![0usize; per.len() + 1];
        for i in (0..per.len()).rev() {
            suffix[i] = suffix[i + 1] + per[i];
        }
        MessageTokens {
            per,
            suffix,
            blocks: Vec::new(),
            starts: Vec::new(),
        }
    }

    /// Tokens of each block of message `i`, when known.
    pub fn blocks(&self, i: usize) -> Option<&[usize]> {
        let (from, to) = (*self.starts.get(i)?, *self.starts.get(i + 1)?);
        self.blocks.get(from..to)
    }

    /// Tokens of block `j` of message `i`, when known.
    pub fn block(&self, i: usize, j: usize) -> Option<usize> {
        self.blocks(i)?.get(j).copied()
    }

    /// Tokens of message `i` (0 past the end).
    pub fn message(&self, i: usize) -> usize {
        self.per.get(i).copied().unwrap_or(0)
    }

    /// Tokens of messages `from..` (0 past the end).
    pub fn tail(&self, from: usize) -> usize {
        self.suffix.get(from).copied().unwrap_or(0)
    }

    /// Tokens of messages in `range`.
    pub fn span(&self, range: Range<usize>) -> usize {
        self.tail(range.start).saturating_sub(self.tail(range.end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;
    use serde_json::json;

    fn conv(v: &serde_json::Value) -> Conversation {
        Format::Anthropic.read(v).unwrap()
    }

    #[test]
    fn the_open_loop_is_protected_and_the_earliest_cut_is_searched_once() {
        let c = conv(&json!({"messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}
        ]}));
        let layout = Layout::of(&c);
        assert_eq!(layout.protected(), &[false, false, false, true, false]);
        assert_eq!(layout.open_loop().map(|e| (e.start, e.end)), Some((3, 5)));
        let cuts: Vec<usize> = layout.cuts().iter().map(|c| c.index).collect();
        assert_eq!(cuts, vec![1, 2, 3]);
        assert_eq!(
            layout.earliest_cut(1, |c| c.index >= 3).map(|c| c.index),
            Some(3)
        );
        assert_eq!(layout.earliest_cut(0, |_| false).map(|c| c.index), Some(3));
        assert_eq!(layout.earliest_cut(3, |_| true), None);
    }
}
