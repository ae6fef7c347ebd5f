//! Truncate's drop of the oldest units: the earliest legal cut that brings the history under
//! the target, priced from prefix sums, with the marker that stands for what it drops.

use super::TruncateConfig;
use crate::conversation::{Conversation, Message, Role};
use crate::facts::{Facts, SessionState, StateSizes};
use crate::guard::{Layout, Marker, MessageTokens, write};
use crate::strategy::{Budget, Context};
use crate::tokens::pieces;

/// The oldest units to drop: up to `to`, with the marker that stands for them.
pub(super) struct Dropped {
    pub(super) to: usize,
    pub(super) marker: Marker,
    /// The first dropped message (the end of the pinned prefix).
    pub(super) from: usize,
    /// Tokens of the output (after the caps of `tokens`).
    pub(super) tokens: usize,
}

/// Drops `pinned..k` for the earliest legal cut `k` that brings the conversation under the
/// target (or the latest legal cut when none does), with a marker message holding the
/// session state of the dropped messages. `tokens` are the per-message counts after the caps
/// (exact from the first message that can be kept on; see [`Truncate::run`]), `raw` the
/// counts before any cap (what the marker and the edit report as dropped), `fixed` the system
/// prompt and tool definitions.
///
/// The split: the marker gets what the state's priority parts need ([`StateSizes::need`]),
/// at least `digest_share` and at most `digest_max_share` of the target, and the newest
/// messages the rest. Each cut is priced from prefix sums in O(1) ([`StateSizes`]); the real
/// marker is built only for the first cut whose price fits and, when that one does not, for
/// O(log n) more (a galloping then binary search over the cuts that are left), so the search
/// is O(n log n) in the history's length, not quadratic.
pub(super) fn drop_oldest(
    input: &Conversation,
    layout: &Layout,
    (tokens, raw): (&MessageTokens, &MessageTokens),
    (fixed, budget): (usize, Budget),
    config: &TruncateConfig,
    cx: &Context<'_>,
    notes: &mut Vec<String>,
) -> Option<Dropped> {
    let counter = cx.counter;
    let pinned = layout.pinned();
    // What each cut must keep in place and carry (the rule table's carry rules), and its
    // tokens; a cut whose carry has no legal place is not taken.
    let mut refused: Vec<(usize, crate::guard::CarryError)> = Vec::new();
    let carried: Vec<(usize, usize)> = layout
        .cuts_after(pinned)
        .iter()
        .filter_map(|c| match layout.carry(input, c.index) {
            Ok(carry) => Some((c.index, carry_tokens(&carry, raw, counter))),
            Err(why) => {
                refused.push((c.index, why));
                None
            }
        })
        .collect();
    if let Some((at, why)) = refused.first() {
        notes.push(format!(
            "{} of {} cuts not taken (the first at message {at}): {why}",
            refused.len(),
            refused.len() + carried.len()
        ));
    }
    let last = carried.last()?.0;
    let extra = |k: usize| {
        carried
            .binary_search_by_key(&k, |c| c.0)
            .map_or(0, |at| carried[at].1)
    };
    let fixed = fixed + tokens.span(0..pinned);
    let share = |s: f64| ((budget.target as f64) * s) as usize;
    let floor = share(config.digest_share);
    let most = share(config.digest_max_share).max(floor);
    // Read once from the input; each candidate cut takes the facts before it.
    let facts = Facts::of(&input.messages);
    let sizes = StateSizes::of(&facts, pinned, input.messages.len(), counter);
    // The marker's text is budgeted by `room` (its header included, see
    // `SessionState::marker_text`); what the message adds around the text is counted once.
    let frame = counter.count_message(&Message::text(Role::User, String::new()));
    let base = |k: usize| fixed + tokens.tail(k) + frame + extra(k);
    // The cuts whose price fits: the tail, and the marker at its share (never below what it
    // takes whatever its budget). The latest cut is the fallback, so it is always tried.
    let candidates: Vec<usize> = carried
        .iter()
        .map(|c| c.0)
        .filter(|&k| {
            let reserve = sizes.need(k).clamp(floor, most).max(sizes.least(k));
            base(k) + reserve <= budget.target || k == last
        })
        .collect();
    // The output's count with a marker: exact, or estimated from the counts its render
    // budgeted (no new tokenizing; for the probes of the search after the first). Exact is the
    // message's frame plus its text (the per-block rules), the text summed from its lines'
    // cached counts where the counter adds up at piece starts (each line was counted by the
    // render; `pieces::count_by_lines`), else tokenized; the count stays in the cache for the
    // output's count.
    let exact_total = |k: usize, m: &Marker| {
        let message = if counter.adds_at_piece_starts() {
            frame
                + counter.count_text_cached_or(m.text(), &mut || {
                    pieces::count_by_lines(counter, m.text())
                })
        } else {
            counter.count_message(&Message::text(Role::User, m.text()))
        };
        fixed + message + tokens.tail(k) + extra(k)
    };
    // The real marker of cut `k` and the output's count with it (`exact` or estimated).
    let build = |k: usize, exact: bool| -> (Marker, usize) {
        let room = budget.target.saturating_sub(base(k)).min(most.max(32));
        let marker_of = |state: &SessionState| {
            let (m, rendered) =
                write::marker(state, (k - pinned, raw.span(pinned..k)), room, counter);
            let total = if exact {
                exact_total(k, &m)
            } else {
                base(k) + rendered
            };
            (m, total)
        };
        // The state is read from the facts once; the lean one is the same state shedding.
        // The user's words may pass the marker's room and the target (an earlier cut that
        // keeps them whole is not passed over for one that leaves some out); at the latest
        // cut, the fallback, not what the output has left under the limit.
        let state = SessionState::of(&facts, pinned..k);
        let state = if k == last {
            state.with_words_ceiling(budget.limit.saturating_sub(base(k)))
        } else {
            state
        };
        let (marker, total) = marker_of(&state);
        if total > budget.limit {
            // Over the hard limit: the outcomes of settled rounds go before anything else.
            let lean = marker_of(&state.shedding_settled());
            if lean.1 < total {
                return lean;
            }
        }
        (marker, total)
    };
    // Whether an output of `total` tokens is under the target; when no cut's is, the search
    // takes the latest cut (the fallback).
    let fits = |total: usize| total <= budget.target;
    let mut probes = 0usize;
    let chosen = earliest_fitting(&candidates, |k| {
        // The first probe (the one usually taken) is counted exactly; after it a cut that
        // does not fit by the estimate is passed over without tokenizing its marker, and one
        // that fits by it is confirmed by the exact count.
        let exact = probes == 0;
        probes += 1;
        let (m, mut total) = build(k, exact);
        let mut ok = fits(total);
        if ok && !exact {
            total = exact_total(k, &m);
            ok = fits(total);
        }
        (ok, (k, m, total, exact || ok))
    });
    let (to, marker, total, exact) = chosen?;
    let total = if exact {
        total
    } else {
        exact_total(to, &marker)
    };
    Some(Dropped {
        to,
        from: pinned,
        marker,
        tokens: total,
    })
}

/// Tokens of what a drop keeps in place and carries (`raw`: the counts of the input's
/// messages): the kept messages whole, the carried system message, and the context blocks the
/// marker opens with.
fn carry_tokens(
    carry: &crate::guard::Carried,
    raw: &MessageTokens,
    counter: &dyn crate::tokens::TokenCounter,
) -> usize {
    carry
        .kept
        .iter()
        .map(|(i, _)| raw.message(*i))
        .sum::<usize>()
        + carry
            .system
            .as_ref()
            .map_or(0, |(m, _)| counter.count_message(m))
        + carry
            .context
            .iter()
            .map(|(_, _, b)| counter.count_block(b))
            .sum::<usize>()
}

/// The first of `candidates` for which `probe` says it fits, assuming that once one fits the
/// later ones do too (the tail shrinks faster than the marker grows): the first is probed,
/// then the last (when it does not fit, none does, and it is taken: two probes), then the
/// ones after the first at distances 1, 2, 4 … until one fits, then the gap is halved
/// (O(log n) probes). `probe` returns whether the candidate fits and what it built.
pub(super) fn earliest_fitting<T>(
    candidates: &[usize],
    mut probe: impl FnMut(usize) -> (bool, T),
) -> Option<T> {
    let n = candidates.len();
    let (ok, first) = probe(*candidates.first()?);
    if ok || n == 1 {
        return Some(first);
    }
    let (ok, last) = probe(candidates[n - 1]);
    if !ok || n == 2 {
        return Some(last);
    }
    // `lo` does not fit and the last does; find the first `hi` after `lo` that fits.
    let (mut lo, mut step) = (0usize, 1usize);
    let (mut hi, mut at_hi) = loop {
        let i = lo + step;
        if i >= n - 1 {
            break (n - 1, last);
        }
        let (ok, built) = probe(candidates[i]);
        if ok {
            break (i, built);
        }
        lo = i;
        step *= 2;
    };
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let (ok, built) = probe(candidates[mid]);
        if ok {
            (hi, at_hi) = (mid, built);
        } else {
            lo = mid;
        }
    }
    Some(at_hi)
}
