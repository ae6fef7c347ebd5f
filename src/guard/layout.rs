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

use super::context::{ContextRules, loaded_tools};
use super::units::{Cut, Exchange, Slot, Units};
use crate::conversation::Conversation;
use crate::format::Format;
use crate::rules::Unknown;
use crate::tokens::TokenCounter;
use foldhash::{HashMap, HashMapExt};
use std::ops::Range;
use std::sync::Arc;

/// Units, cuts and the protected set of one conversation. Indices are message indices of that
/// conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    units: Units,
    cuts: Vec<Cut>,
    /// Per message: true when no strategy may edit or drop it (the pinned prefix but its held
    /// outputs, [`Units::held`]; the assistant messages of the open tool loop).
    protected: Vec<bool>,
    /// The exchange the history ends inside, when it does (the open tool loop), as a range.
    open_loop: Option<Range<usize>>,
    /// The format whose rule table laid it out.
    format: Format,
    /// The units (exchanges or single messages) holding something the table does not know:
    /// `(start, end, what)`, oldest first. Kept byte-identical and in place by every edit.
    opaque: Vec<(usize, usize, Unknown)>,
    /// Every message the table does not know all of, with what ([`Layout::unknowns`]).
    unknowns: Vec<(usize, Unknown)>,
    /// Units that loaded a deferred tool: `(start, end, tool, last message calling it)`.
    loaders: Vec<(usize, usize, String, usize)>,
    /// Which user text blocks are the client's context.
    context: Arc<ContextRules>,
    /// The client's context blocks of the user messages: `(message, block, kind)`, in order.
    context_blocks: Vec<(usize, usize, String)>,
    /// The instruction messages after the pinned prefix, in order.
    instructions: Vec<usize>,
    /// The unit holding the latest provider compaction item, if any.
    compaction: Option<(usize, usize)>,
}

impl Layout {
    /// Computes the layout of `conversation`, a request of `format` (any input, valid or not;
    /// see [`Units::of`]), with the default `ContextRules`.
    pub fn of(conversation: &Conversation, format: Format) -> Layout {
        Layout::with_context(conversation, format, Arc::default())
    }

    /// [`Layout::of`] with the given rules for the client's context blocks (`[carry]`).
    pub fn with_context(
        conversation: &Conversation,
        format: Format,
        context: Arc<ContextRules>,
    ) -> Layout {
        let table = format.rules();
        let units = Units::of(conversation, format);
        let cuts = units.cuts();
        let n = units.len;
        let open_loop = units
            .exchanges
            .last()
            .filter(|e| e.end >= units.turn_end() && n > 0)
            .map(|e| e.start..e.end);
        let mut protected = vec![false; n];
        for (i, p) in protected.iter_mut().enumerate().take(units.pinned) {
            // A held output (B4) stays, but its content may be capped.
            *p = !(units.held.contains(&i) && units.slot(i) == Some(Slot::Results));
        }
        if let Some(open) = &open_loop {
            for i in open.clone() {
                if units.slot(i) == Some(Slot::Assistant) {
                    protected[i] = true;
                }
            }
        }
        let unknowns: Vec<(usize, Unknown)> = conversation
            .messages
            .iter()
            .enumerate()
            .filter_map(|(i, m)| table.unknown_in(m).map(|u| (i, u)))
            .collect();
        let atoms = units.atoms();
        let atom_of = |i: usize| {
            let at = atoms.partition_point(|&(s, _)| s <= i);
            at.checked_sub(1)
                .and_then(|a| atoms.get(a))
                .copied()
                .filter(|&(s, e)| s <= i && i < e)
                .unwrap_or((i, i + 1))
        };
        let mut opaque: Vec<(usize, usize, Unknown)> = Vec::new();
        for (i, what) in &unknowns {
            let (s, e) = atom_of(*i);
            // Byte-identical: no edit of any message of the unit.
            for p in protected.iter_mut().take(e).skip(s) {
                *p = true;
            }
            match opaque.last() {
                Some(&(ls, _, _)) if ls == s => {}
                _ => opaque.push((s, e, what.clone())),
            }
        }
        // Tool loaders: the unit that loaded a tool, and the last call of that tool.
        let mut last_call: HashMap<&str, usize> = HashMap::new();
        for (i, m) in conversation.messages.iter().enumerate() {
            for t in m.tool_uses() {
                last_call.insert(t.name.as_str(), i);
            }
        }
        let mut loaders = Vec::new();
        for (i, _, b) in conversation.blocks() {
            for tool in loaded_tools(table, b) {
                if let Some(&last) = last_call.get(tool.as_str())
                    && last > i
                {
                    let (s, e) = atom_of(i);
                    loaders.push((s, e, tool, last));
                }
            }
        }
        let mut context_blocks = Vec::new();
        for (i, m) in conversation.messages.iter().enumerate() {
            if units
                .slot(i)
                .is_some_and(|s| matches!(s, Slot::Clean | Slot::Results))
                && m.role == crate::conversation::Role::User
            {
                for (j, b) in m.content.iter().enumerate() {
                    if let crate::conversation::Block::Text(t) = b
                        && let Some(kind) = context.kind_of(&t.text)
                    {
                        context_blocks.push((i, j, kind));
                    }
                }
            }
        }
        // The latest provider compaction item's unit: kept byte-identical and in place.
        let compaction = super::refs::last_compaction(conversation, table).map(atom_of);
        if let Some((s, e)) = compaction {
            for p in protected.iter_mut().take(e).skip(s) {
                *p = true;
            }
        }
        let instructions = (units.pinned..n)
            .filter(|&i| units.slot(i).is_some_and(Slot::is_instruction))
            .collect();
        Layout {
            units,
            cuts,
            protected,
            open_loop,
            format,
            opaque,
            unknowns,
            loaders,
            context,
            context_blocks,
            instructions,
            compaction,
        }
    }

    /// The format whose rule table laid it out.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Every message holding a role or type the format's table does not know, with the first
    /// such thing: the report lists them; the guard keeps their units in place.
    pub fn unknowns(&self) -> &[(usize, Unknown)] {
        &self.unknowns
    }

    /// The units holding something the table does not know: `(start, end, what)`.
    pub(crate) fn opaque_units(&self) -> &[(usize, usize, Unknown)] {
        &self.opaque
    }

    /// The units that loaded a deferred tool a later message calls: `(start, end, tool, last
    /// call)`.
    pub(crate) fn loaders(&self) -> &[(usize, usize, String, usize)] {
        &self.loaders
    }

    /// The client's context blocks of the user messages: `(message, block, kind)`.
    pub(crate) fn context_blocks(&self) -> &[(usize, usize, String)] {
        &self.context_blocks
    }

    /// The unit holding the latest provider compaction item (kept in place by every drop).
    pub(crate) fn provider_compaction(&self) -> Option<(usize, usize)> {
        self.compaction
    }

    /// The instruction messages after the pinned prefix, in order.
    pub(crate) fn instructions(&self) -> &[usize] {
        &self.instructions
    }

    /// The units (rounds, exchanges, assistant runs).
    pub fn units(&self) -> &Units {
        &self.units
    }

    /// Number of leading messages never dropped (see [`Units::pinned`]); of these only the
    /// held outputs' content may be edited ([`Layout::is_protected`]).
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

    /// Whether message `index` may not be edited or dropped: pinned (but a held output of a
    /// history on the server, [`Units::held`], whose content may be capped), an assistant message of
    /// the open tool loop (its calls await results; Anthropic and OpenAI refuse a changed call),
    /// or part of a unit the table does not know (kept byte-identical; a drop keeps it in
    /// place, [`Layout::carry`]).
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
        let layout = Layout::of(&c, Format::Anthropic);
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
