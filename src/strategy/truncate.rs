//! `truncate`: rule truncation.
//!
//! 1. Cap: every tool_result, tool_use input string and long text over its cap that can be
//!    kept is cut to head + tail with a `[… N tokens truncated …]` marker (never twice); what
//!    is dropped whole is never cut, nor a result an earlier tier rewrote
//!    ([`crate::conversation::ToolResult::rewritten`]: microcompact's placeholder stays whole).
//! 2. Drop: the oldest whole units go, cutting only where the guard allows, and one user-role
//!    marker message with the `SessionState` of what went (made by code) takes their place.
//! 3. Squeeze: when even the newest turn is over the limit, the kept tool results and inputs are
//!    capped harder, down to a floor.
//!
//! Never touched: pinned system messages, thinking blocks, the assistant turn of the open tool
//! loop, the newest message (except its tool results' content). Never dropped but capped: the
//! held outputs of a history on the provider's server (B4, [`crate::guard::Units::held`]).

mod drop;

use super::{Budget, Compaction, Context, Strategy, StrategyError};
use crate::conversation::{Block, Conversation};
use crate::guard::{Layout, MessageTokens, UnitEdit, write};
use drop::{Dropped, drop_oldest};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Settings of [`Truncate`]; all sizes in tokens.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TruncateConfig {
    /// Cap on one tool_result's content.
    pub max_tool_result_tokens: usize,
    /// Cap on one string value inside a tool_use input.
    pub max_tool_input_tokens: usize,
    /// Cap on one text block (user or assistant), except in the newest message.
    pub max_text_tokens: usize,
    /// Share of the target the marker of dropped messages always gets (0..1): its floor.
    pub digest_share: f64,
    /// Share of the target the marker may grow to (`digest_share..1`) when the session state
    /// of what is dropped needs it: the user's words, failures, files and commands
    /// (`crate::facts::StateSizes::need`). The newest messages keep the rest verbatim.
    pub digest_max_share: f64,
    /// Smallest cap the squeeze step goes down to.
    pub min_cap_tokens: usize,
}

impl Default for TruncateConfig {
    fn default() -> Self {
        TruncateConfig {
            max_tool_result_tokens: 2_000,
            max_tool_input_tokens: 1_000,
            max_text_tokens: 4_000,
            digest_share: 0.1,
            digest_max_share: 0.5,
            min_cap_tokens: 24,
        }
    }
}

/// The rule-truncation strategy.
#[derive(Debug, Clone, Default)]
pub struct Truncate {
    /// Its settings.
    pub config: TruncateConfig,
}

#[async_trait::async_trait]
impl Strategy for Truncate {
    fn name(&self) -> &str {
        "truncate"
    }

    async fn compact(
        &self,
        conversation: &Conversation,
        budget: Budget,
        cx: &Context<'_>,
    ) -> Result<Compaction, StrategyError> {
        Ok(self.run(conversation, budget, cx))
    }
}

/// Caps for one capping pass.
#[derive(Debug, Clone, Copy)]
struct Caps {
    result: usize,
    input: usize,
    text: usize,
}

impl Truncate {
    /// A plan that caps the oversized blocks of messages `from..` only, with the caps a run at
    /// `budget` would use, and drops nothing: what a continuation sends when new messages
    /// arrive over the caps, so they are capped when they first go out and the prefix sent
    /// before them stays as it was.
    pub fn caps_from(
        &self,
        input: &Conversation,
        from: usize,
        budget: Budget,
        cx: &Context<'_>,
    ) -> Compaction {
        let caps = self.caps(budget);
        let mut compaction = Compaction {
            plan: Vec::new(),
            notes: Vec::new(),
            degraded: None,
        };
        let n = input.messages.len();
        for cap in cap_blocks(input, cx.layout, from.min(n)..n, caps, cx).into_values() {
            compaction.plan.push(UnitEdit::Cap(cap.written));
        }
        compaction
    }

    /// The caps of a run at `budget`: the configured ones, at most a quarter of the target, at
    /// least the floor.
    fn caps(&self, budget: Budget) -> Caps {
        let c = &self.config;
        let scale = budget.target / 4;
        Caps {
            result: c.max_tool_result_tokens.min(scale).max(c.min_cap_tokens),
            input: c.max_tool_input_tokens.min(scale).max(c.min_cap_tokens),
            text: c.max_text_tokens.min(scale).max(c.min_cap_tokens),
        }
    }

    /// The synchronous core of [`Strategy::compact`]: a plan for [`crate::guard::apply`] (caps
    /// and at most one drop, in indices of `input`), made from the borrowed input and its
    /// layout (`cx.layout`). The steps of the module docs: cap what can be kept
    /// (`Truncate::cap_keepable`), drop the oldest units (`Truncate::drop_step`), squeeze
    /// (`Truncate::squeeze`), then the plan (`plan_of`).
    pub fn run(&self, input: &Conversation, budget: Budget, cx: &Context<'_>) -> Compaction {
        let counter = cx.counter;
        let layout = cx.layout;
        let n = input.messages.len();
        let caps = self.caps(budget);
        let fixed =
            counter.count_system(input.system.as_ref()) + counter.count_tools(input.tools());
        // Per message, uncapped (counted once by the pipeline; no text is cut for them).
        let raw: Vec<usize> = (0..n).map(|i| cx.tokens.message(i)).collect();
        let pinned = layout.pinned();
        let Capping {
            per,
            mut capped,
            capped_from,
            mut tokens,
        } = cap_keepable(input, budget, caps, (fixed, &raw), cx);
        let mut notes = Vec::new();
        let mut dropped: Option<Dropped> = None;
        if tokens > budget.target {
            match self.drop_step(input, budget, fixed, (per, raw), cx, &mut notes) {
                Some(d) => {
                    capped.retain(|&(i, _), _| i < pinned || i >= d.to);
                    tokens = d.tokens;
                    dropped = Some(d);
                }
                None => notes.push("no legal cut point: nothing could be dropped".to_string()),
            }
        }
        if dropped.is_none() && capped_from > pinned.min(n) {
            // Nothing dropped: what was not capped yet is kept, so it is capped too.
            for (at, cap) in cap_blocks(input, layout, pinned.min(n)..capped_from, caps, cx) {
                tokens -= cap.saved;
                capped.insert(at, cap);
            }
        }
        let kept_from = dropped.as_ref().map_or(layout.pinned(), |d| d.to);
        self.squeeze(input, budget, (caps, kept_from), (&mut capped, tokens), cx);
        plan_of(input, capped, dropped, notes, cx)
    }

    /// Drops the oldest units ([`drop_oldest`]), with room kept for the marker's recall line.
    /// `per`: the per-message counts after the caps, `raw` before them.
    fn drop_step(
        &self,
        input: &Conversation,
        budget: Budget,
        fixed: usize,
        (per, raw): (Vec<usize>, Vec<usize>),
        cx: &Context<'_>,
        notes: &mut Vec<String>,
    ) -> Option<Dropped> {
        let n = input.messages.len();
        let view = MessageTokens::from_counts(per);
        let raw = MessageTokens::from_counts(raw);
        // Room for the marker's recall line (`write::recall_line`), priced with an id whose
        // hex digits tokenize badly and the largest count, plus a little slack.
        let reserve = if cx.recall {
            let sample = write::recall_line(n, &format!("rc_{}", "7e3a9f0c".repeat(4)));
            cx.counter.count_text_cached(&sample) + 4
        } else {
            0
        };
        drop_oldest(
            input,
            cx.layout,
            (&view, &raw),
            (fixed + reserve, budget),
            &self.config,
            cx,
            notes,
        )
    }

    /// Squeeze: halves the caps on what is kept (the held outputs of the pinned prefix and the
    /// messages from `kept_from` on) until the output is under the limit or the caps at the
    /// floor; each block is cut from its original text (never truncated twice).
    fn squeeze(
        &self,
        input: &Conversation,
        budget: Budget,
        (caps, kept_from): (Caps, usize),
        (capped, mut tokens): (&mut BTreeMap<(usize, usize), Capped>, usize),
        cx: &Context<'_>,
    ) {
        let c = &self.config;
        let layout = cx.layout;
        let n = input.messages.len();
        let pinned = layout.pinned();
        let mut squeeze = caps;
        while tokens > budget.limit && squeeze.result > c.min_cap_tokens {
            squeeze = Caps {
                result: (squeeze.result / 2).max(c.min_cap_tokens),
                input: (squeeze.input / 2).max(c.min_cap_tokens),
                text: (squeeze.text / 2).max(c.min_cap_tokens),
            };
            let held = cap_blocks(input, layout, 0..pinned.min(n), squeeze, cx);
            for (at, cap) in
                held.into_iter()
                    .chain(cap_blocks(input, layout, kept_from..n, squeeze, cx))
            {
                let before = capped.get(&at).map_or(0, |c| c.saved);
                if cap.saved > before {
                    tokens -= cap.saved - before;
                    capped.insert(at, cap);
                }
            }
        }
    }
}

/// What the first capping pass leaves: the per-message counts after the caps, the capped
/// blocks, the first message capped (messages before it, after the pinned prefix, are not
/// capped yet) and the output's tokens.
struct Capping {
    per: Vec<usize>,
    capped: BTreeMap<(usize, usize), Capped>,
    capped_from: usize,
    tokens: usize,
}

/// Caps only what can be kept: from the newest message back, each message is capped (its
/// count after the caps is exact; counts are additive, message = overhead + blocks) until the
/// capped tail alone is over the target. Every cut before that point leaves more than the
/// target and is never chosen (`drop_oldest` rejects it whatever its marker), so its messages
/// go whole and their caps would be thrown away. The latest cut is always reached (it is the
/// fallback). `fixed`: the system prompt's and tools' tokens; `raw`: per message, uncapped.
fn cap_keepable(
    input: &Conversation,
    budget: Budget,
    caps: Caps,
    (fixed, raw): (usize, &[usize]),
    cx: &Context<'_>,
) -> Capping {
    let layout = cx.layout;
    let n = input.messages.len();
    let pinned = layout.pinned();
    let last_cut = layout.cuts().last().map_or(0, |c| c.index);
    let mut per = raw.to_vec();
    let mut capped = BTreeMap::new();
    // The pinned prefix is kept whatever is dropped; of it only held outputs (B4: outputs
    // answering calls the provider's server holds) are not protected, and are capped.
    for (at, cap) in cap_blocks(input, layout, 0..pinned.min(n), caps, cx) {
        per[at.0] -= cap.saved;
        capped.insert(at, cap);
    }
    let head_fixed = fixed + per[..pinned.min(n)].iter().sum::<usize>();
    let mut capped_from = n;
    let mut tail = 0usize;
    while capped_from > pinned.min(n) {
        let i = capped_from - 1;
        if i < last_cut && head_fixed + tail > budget.target {
            break;
        }
        for (at, cap) in cap_blocks(input, layout, i..i + 1, caps, cx) {
            per[i] -= cap.saved;
            capped.insert(at, cap);
        }
        tail += per[i];
        capped_from = i;
    }
    let tokens = head_fixed + tail + raw[pinned.min(n)..capped_from].iter().sum::<usize>();
    Capping {
        per,
        capped,
        capped_from,
        tokens,
    }
}

/// The plan of a run: the caps in block order, then the drop; with `cx.recall`, each capped
/// block and the marker name the recall ids of their originals (the guard's writers keep the
/// originals with them).
fn plan_of(
    input: &Conversation,
    capped: BTreeMap<(usize, usize), Capped>,
    dropped: Option<Dropped>,
    mut notes: Vec<String>,
    cx: &Context<'_>,
) -> Compaction {
    let mut plan: Vec<UnitEdit> = Vec::new();
    for mut cap in capped.into_values() {
        // A capped block names the recall id of its original, like a cleared result.
        if cx.recall {
            cap.written.name_recall(input, cx.format);
        }
        plan.push(UnitEdit::Cap(cap.written));
    }
    if let Some(mut d) = dropped {
        // The marker names the recall id of the span it stands for.
        if cx.recall {
            d.marker.name_recall(input, cx.format, d.from..d.to);
        }
        let words = d.marker.user_words();
        if !words.is_verbatim() {
            notes.push(words.note());
        }
        plan.push(UnitEdit::Drop {
            to: d.to,
            marker: d.marker,
        });
    }
    Compaction {
        plan,
        notes,
        degraded: None,
    }
}

/// One capped block: the block the guard wrote (with the figures of its report edit), and
/// the tokens it saves.
struct Capped {
    written: write::Capped,
    saved: usize,
}

/// Caps every editable block of the messages in `range` of `input` (the input is not
/// changed: each capped block is a new value, written by [`write::cap`]). Protected messages
/// are skipped; of the newest message only tool results are capped; an earlier summary or
/// marker is merged by the next digest, never cut as ordinary text (its failures and
/// requests would go).
fn cap_blocks(
    input: &Conversation,
    layout: &Layout,
    range: std::ops::Range<usize>,
    caps: Caps,
    cx: &Context<'_>,
) -> BTreeMap<(usize, usize), Capped> {
    let mut out = BTreeMap::new();
    let smallest = caps.result.min(caps.input).min(caps.text);
    for i in range {
        if layout.is_protected(i) {
            continue;
        }
        let newest = layout.newest() == Some(i);
        for (j, b) in input.messages[i].content.iter().enumerate() {
            // The count of the whole block (counted once per input): what fits is never
            // tokenized again.
            let block_tokens = cx
                .tokens
                .block(i, j)
                .unwrap_or_else(|| cx.counter.count_block(b));
            if block_tokens <= smallest {
                continue;
            }
            let cap = match b {
                Block::ToolResult(_) => caps.result,
                Block::ToolUse(_) if !newest => caps.input,
                Block::Text(t) if !newest && crate::facts::summary_kind(&t.text).is_none() => {
                    caps.text
                }
                _ => continue,
            };
            let Some(written) = write::cap(input, (i, j), cap, block_tokens, cx.counter) else {
                continue;
            };
            // Priced with the recall id it will name (`Truncate::run`).
            let named = if cx.recall {
                cx.counter
                    .count_text_cached(" · recall rc_7e3a9f0c7e3a9f0c7e3a9f0c7e3a9f0c")
            } else {
                0
            };
            let saved = block_tokens.saturating_sub(cx.counter.count_block(written.with()) + named);
            out.insert((i, j), Capped { written, saved });
        }
    }
    out
}

/// True when a text holds a truncation marker of ours.
pub fn is_truncated(text: &str) -> bool {
    text.contains(write::TRUNCATION_MARK)
}

#[cfg(test)]
mod tests {
    use super::drop::earliest_fitting;
    use proptest::prelude::*;

    proptest! {
        /// With a monotone fit (none, then all), the search finds the first that fits, or the
        /// last when none does, in O(log n) probes.
        #[test]
        fn the_search_finds_the_first_fit_in_log_probes(
            n in 1usize..3_000,
            first in 0usize..3_100,
        ) {
            // Candidates 1, 4, 7 …; those past `first * 3` fit.
            let candidates: Vec<usize> = (0..n).map(|i| i * 3 + 1).collect();
            let mut probes = 0usize;
            let got = earliest_fitting(&candidates, |k| {
                probes += 1;
                (k > first * 3, k)
            });
            let want = candidates
                .iter()
                .copied()
                .find(|&k| k > first * 3)
                .unwrap_or(candidates[n - 1]);
            prop_assert_eq!(got, Some(want));
            let log = usize::BITS - n.leading_zeros();
            prop_assert!(probes <= 2 * log as usize + 3, "{} probes for {} candidates", probes, n);
            // None fits: the first and the last are probed, nothing else.
            if candidates[n - 1] <= first * 3 {
                prop_assert!(probes <= 2, "{} probes when none fits", probes);
            }
        }
    }

    #[test]
    fn no_candidate_no_cut() {
        assert_eq!(earliest_fitting(&[], |k| (true, k)), None);
    }
}
