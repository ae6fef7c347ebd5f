//! What a compaction must keep: the checks run on every strategy output, beside [`validate`].
//!
//! [`validate`]: super::validate

use super::edit::FailureRecord;
use super::layout::Layout;
use super::validate::Junction;
use super::violation::{Violation, ViolationKind};
use crate::conversation::{Block, Conversation, Message, Outcome, Role, ToolResult};
use crate::format::Format;
use foldhash::{HashMap, HashSet};

/// Compares a compaction's output with its input and returns what it failed to keep:
/// - the system prompt and the pinned prefix (OpenAI's system / developer messages) unchanged,
///   but for the content of held outputs ([`super::Units::held`]: outputs answering calls the
///   provider's server holds, B4);
/// - the newest message kept, only its tool results' content may be shorter;
/// - every thinking / redacted_thinking / reasoning block in the output byte-identical to one of
///   the input (their signatures cover the text);
/// - when the input ends inside a tool loop, the assistant turn that issued the calls verbatim;
/// - every failed call ([`ToolResult::outcome`] is [`Outcome::Error`], set by the format's
///   outcome policy at read time) still a failure: its result kept with that typed outcome (and
///   with `is_error: true` when the input had it), or its id named on one line with the word
///   error or fail(ed) in a text block of the output (a digest line, a summary ledger).
pub fn check_compaction(
    before: &Conversation,
    after: &Conversation,
    format: Format,
) -> Vec<Violation> {
    check_compaction_with(before, &Layout::of(before, format), after, format, None)
}

/// [`check_compaction`] with the input's layout already computed (the pipeline computes it once
/// per input). The pinned prefix and the open tool loop are the layout's
/// ([`Layout::pinned`], [`Layout::open_loop`]), the same ones every strategy reads.
///
/// `records` are the typed failure records of `after` when [`super::apply`] built it: a failure
/// whose result is gone must then be recorded there (structural, no text is read). `None`
/// (an output [`super::apply`] did not build: another tool's, one read back from a file, as the
/// A/B harness checks them): the failure's id must be named on one line with the word error or
/// fail(ed) in a text block of the output. The pipeline always passes records (a remembered
/// output brings those it was built with).
pub fn check_compaction_with(
    before: &Conversation,
    layout: &Layout,
    after: &Conversation,
    format: Format,
    records: Option<&[FailureRecord]>,
) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut push = |message: Option<usize>, kind| {
        let path = message.map_or_else(
            || "$".to_string(),
            |i| super::violation::path_of(format, after, i, None),
        );
        out.push(Violation {
            path,
            message,
            block: None,
            kind,
            rule: None,
        });
    };
    let pinned = layout.pinned().min(before.messages.len());
    // The pinned prefix as it was; a held output (B4) may only have its content shortened.
    let pinned_kept = after.messages.get(..pinned).is_some_and(|kept| {
        kept.iter()
            .zip(&before.messages[..pinned])
            .enumerate()
            .all(|(i, (a, b))| a == b || (!layout.is_protected(i) && same_but_results(b, a)))
    });
    if before.system != after.system || !pinned_kept {
        push(None, ViolationKind::SystemChanged);
    }
    if let (Some(a), Some(b)) = (before.messages.last(), after.messages.last())
        && !same_but_results(a, b)
    {
        push(
            Some(after.messages.len() - 1),
            ViolationKind::LastMessageChanged,
        );
    }
    let thinking_in: HashSet<&serde_json::Value> = thinking(before).collect();
    for (i, m) in after.messages.iter().enumerate() {
        if m.content
            .iter()
            .any(|b| matches!(b, Block::Thinking(v) if !thinking_in.contains(v)))
        {
            push(Some(i), ViolationKind::ThinkingModified);
        }
    }
    if let Some(open) = layout.open_loop() {
        let n = before.messages.len();
        if !open_loop_kept(&before.messages[open.start..n.saturating_sub(1)], after) {
            push(None, ViolationKind::OpenLoopChanged);
        }
    }
    let results_after: HashMap<&str, (usize, &ToolResult)> = after
        .messages
        .iter()
        .enumerate()
        .flat_map(|(i, m)| {
            m.tool_results()
                .map(move |r| (r.tool_use_id.as_str(), (i, r)))
        })
        .collect();
    let mut text_after: Option<String> = None;
    for r in before.messages.iter().flat_map(Message::tool_results) {
        if r.outcome != Outcome::Error {
            continue;
        }
        let id = r.tool_use_id.as_str();
        let (at, kept) = match results_after.get(id) {
            // A kept result: its typed outcome says whether it still is a failure (a strategy
            // that clears or cuts it carries the field); its text is not read again, so a cut
            // that took an exit-code marker with it does not make the failure vanish. Its wire
            // flag must not have been dropped either.
            Some((i, now)) => (
                Some(*i),
                now.outcome == Outcome::Error
                    && (r.is_error != Some(true) || now.is_error == Some(true)),
            ),
            None if records.is_some() => (
                None,
                records
                    .unwrap_or(&[])
                    .iter()
                    .any(|f| f.id == id && f.message < after.messages.len()),
            ),
            None => {
                let text = text_after.get_or_insert_with(|| {
                    after
                        .messages
                        .iter()
                        .map(Message::plain_text)
                        .collect::<Vec<_>>()
                        .join("\n")
                });
                (None, mentions_failure(text, id))
            }
        };
        if !kept {
            push(at, ViolationKind::FailureLost { id: id.into() });
        }
    }
    out
}

/// Whether every assistant message of `open` (the open tool loop but the newest message, which
/// is checked on its own) is kept in `after`: its calls await results, and the providers
/// refuse a changed call.
fn open_loop_kept(open: &[Message], after: &Conversation) -> bool {
    open.iter()
        .filter(|m| m.role == Role::Assistant)
        .all(|m| after.messages.contains(m))
}

/// [`check_compaction_with`] of a continuation, in proportion to the new messages, for
/// [`super::continue_prefix`] (which builds the continuation): `after` is
/// a remembered output `R` followed by `before.messages[from..]` (the new messages, verbatim),
/// where `R` passed [`check_compaction_with`] against `before.messages[..from]` (the input's
/// remembered prefix `P`, whose [`Junction`] is `junction`) with the failure records `R` keeps,
/// and `before` passed [`validate`](super::validate()).
///
/// What `R` kept of `P` stays kept: the system prompt and the pinned prefix (the leading
/// system / developer messages, within `P`), the thinking blocks (the new ones are verbatim),
/// every failure of `P` (its result or record is in `R`; the new ones are verbatim, and `before`
/// has no duplicate result id), and the newest message (the input's, verbatim). What can change
/// at the junction is the open tool loop: the input's last exchange may have started in `P`, so
/// its assistant messages there must be in `R`; that exchange is found from the junction on
/// ([`Junction::last_exchange`]).
///
/// `None` when it cannot be decided so and the caller checks the whole: a reference beyond call
/// / result pairs or a provider compaction item in `P` or the new messages (units then span
/// turns, and the pinned prefix moves), a `P` that is all system / developer messages, or an
/// `after` shorter than the new messages.
pub(super) fn check_continuation(
    before: &Conversation,
    from: usize,
    junction: &Junction,
    after: &Conversation,
) -> Option<Vec<Violation>> {
    let n = before.messages.len();
    let new = before.messages.get(from..)?;
    if junction.messages() != from
        || junction.has_references()
        || after.messages.len() < new.len()
        || new.iter().any(|m| {
            m.content
                .iter()
                .any(|b| super::has_reference(junction.format(), b))
        })
    {
        return None;
    }
    let system = before
        .messages
        .iter()
        .take_while(|m| matches!(m.role, Role::System | Role::Developer))
        .count();
    if system >= from {
        return None;
    }
    let mut out = Vec::new();
    if let Some(open) = junction
        .last_exchange(before)
        .filter(|e| e.end == n && n > 0)
    {
        // Its messages from the junction on are in `after` verbatim.
        let in_prefix = open.start..from.min(n.saturating_sub(1)).max(open.start);
        if !open_loop_kept(&before.messages[in_prefix], after) {
            out.push(Violation {
                path: "$".to_string(),
                message: None,
                block: None,
                kind: ViolationKind::OpenLoopChanged,
                rule: None,
            });
        }
    }
    Some(out)
}

/// Whether a line of `text` names call `id` (as written) together with "error" or "fail" (any
/// case), as the digest and the summary ledger do for a failed call they replace. The one
/// definition of "a failure is still told in text", for outputs [`super::apply`] did not build
/// (no typed [`FailureRecord`]s): the guard's check without records reads it.
pub(super) fn mentions_failure(text: &str, id: &str) -> bool {
    text.match_indices(id).any(|(pos, _)| {
        // Offsets from searches: char boundaries; `get` keeps that checked.
        let from = text
            .get(..pos)
            .and_then(|t| t.rfind('\n'))
            .map_or(0, |p| p + 1);
        let to = text
            .get(pos..)
            .and_then(|t| t.find('\n'))
            .map_or(text.len(), |p| pos + p);
        let line = text.get(from..to).unwrap_or("").to_lowercase();
        line.contains("error") || line.contains("fail")
    })
}

fn thinking(c: &Conversation) -> impl Iterator<Item = &serde_json::Value> {
    c.messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            Block::Thinking(v) => Some(v),
            _ => None,
        })
}

/// Same message, except that tool result content may differ (shortened).
fn same_but_results(a: &Message, b: &Message) -> bool {
    if a == b {
        return true;
    }
    a.role == b.role
        && a.content.len() == b.content.len()
        && a.content.iter().zip(&b.content).all(|(x, y)| match (x, y) {
            (Block::ToolResult(x), Block::ToolResult(y)) => {
                x.tool_use_id == y.tool_use_id && x.is_error == y.is_error
            }
            _ => x == y,
        })
}
