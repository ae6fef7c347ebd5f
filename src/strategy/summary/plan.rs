//! The pure plan of a summary: which span goes, which legal cut starts the kept tail, and
//! whether the span starts with an earlier summary of ours.

use super::*;

/// What to summarize: messages `from..to` go, `to..` are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// First replaced message (the first unpinned one).
    pub from: usize,
    /// First kept message (a legal cut).
    pub to: usize,
    /// How the kept tail starts.
    pub kind: CutKind,
    /// The earlier summary message at `from`, when the history starts with one.
    pub previous: Option<String>,
}

/// Chooses the span to summarize, without I/O: everything after the pinned prefix up to the
/// earliest legal cut whose tail fits `keep_recent_share × target` (the latest cut when none
/// does). `tokens` are the counts of `conversation`'s messages. `None` when there is no legal
/// cut after the span start (the open last exchange and the newest message are never
/// summarized).
pub fn plan(
    conversation: &Conversation,
    layout: &Layout,
    tokens: &MessageTokens,
    budget: Budget,
    keep_recent_share: f64,
) -> Option<Plan> {
    let msgs = &conversation.messages;
    let from = layout.pinned();
    let previous = msgs.get(from).and_then(summary_text).map(str::to_string);
    let span_start = from + usize::from(previous.is_some());
    let keep = (budget.target as f64 * keep_recent_share) as usize;
    // Only cuts whose carried state has a legal place ([`Layout::carry`]).
    let legal: Vec<crate::guard::Cut> = layout
        .cuts_after(span_start)
        .iter()
        .copied()
        .filter(|c| layout.carry(conversation, c.index).is_ok())
        .collect();
    let cut = legal
        .iter()
        .copied()
        .find(|c| tokens.tail(c.index) <= keep)
        .or_else(|| legal.last().copied())?;
    Some(Plan {
        from,
        to: cut.index,
        kind: cut.kind,
        previous,
    })
}

/// The text of a summary message of ours, if `m` is one.
pub fn summary_text(m: &Message) -> Option<&str> {
    if m.role != Role::User {
        return None;
    }
    // The summary is the message's last block; carried context blocks may come before it.
    match m.content.last() {
        Some(Block::Text(t)) if t.text.starts_with(SUMMARY_PREFIX) => Some(&t.text),
        _ => None,
    }
}
