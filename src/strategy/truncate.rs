//! `truncate`: rule truncation.
//!
//! 1. Cap: every tool_result, tool_use input string and long text over its cap is cut to head +
//!    tail with a `[… N tokens truncated …]` marker (never twice).
//! 2. Drop: the oldest whole units go, cutting only where the guard allows, and one user-role
//!    marker message with the [`SessionState`] of what went (made by code) takes their place.
//! 3. Squeeze: when even the newest turn is over the limit, the kept tool results and inputs are
//!    capped harder, down to a floor.
//!
//! Never touched: pinned system messages, thinking blocks, the assistant turn of the open tool
//! loop, the newest message (except its tool results' content).

use super::text_cut::{TRUNCATION_MARK, cut_middle, cut_middle_known};
use super::{Budget, Compaction, Context, Edit, Strategy, StrategyError};
use crate::conversation::{Block, Conversation, Message, Role, ToolInput, ToolResultContent};
use crate::facts::{Facts, SessionState};
use crate::guard::{Layout, MessageTokens};
use serde::Deserialize;
use serde_json::Value;

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
    /// Share of the target the digest of dropped messages may take (0..1).
    pub digest_share: f64,
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
    /// The synchronous core of [`Strategy::compact`].
    pub fn run(&self, input: &Conversation, budget: Budget, cx: &Context<'_>) -> Compaction {
        let counter = cx.counter;
        let c = &self.config;
        let scale = budget.target / 4;
        let caps = Caps {
            result: c.max_tool_result_tokens.min(scale).max(c.min_cap_tokens),
            input: c.max_tool_input_tokens.min(scale).max(c.min_cap_tokens),
            text: c.max_text_tokens.min(scale).max(c.min_cap_tokens),
        };
        let layout = cx.layout;
        let frozen = layout.protected().to_vec();
        let mut conv = input.clone();
        let mut edits = Vec::new();
        cap_all(&mut conv, &frozen, caps, cx, &mut edits, 0);
        let mut notes = Vec::new();
        let mut offset_map: Vec<usize> = (0..conv.messages.len()).collect();

        let mut tokens = counter.count_conversation(&conv);
        if tokens > budget.target {
            if let Some((dropped, map)) =
                drop_oldest(&conv, layout, budget, self.config.digest_share, cx)
            {
                edits.retain(
                    |e| !matches!(e, Edit::Truncated { message, .. } if *message < dropped.from()),
                );
                edits.push(dropped.edit);
                conv = dropped.conversation;
                tokens = dropped.tokens;
                offset_map = map;
            } else {
                notes.push("no legal cut point: nothing could be dropped".to_string());
            }
        }

        // Squeeze: halve the caps on what is kept until under the limit or at the floor.
        let mut squeeze = caps;
        while tokens > budget.limit && squeeze.result > c.min_cap_tokens {
            squeeze = Caps {
                result: (squeeze.result / 2).max(c.min_cap_tokens),
                input: (squeeze.input / 2).max(c.min_cap_tokens),
                text: (squeeze.text / 2).max(c.min_cap_tokens),
            };
            let frozen_now = frozen_after_drop(&frozen, &offset_map);
            let mut more = Vec::new();
            cap_all(&mut conv, &frozen_now, squeeze, cx, &mut more, 0);
            for mut e in more {
                if let Edit::Truncated { message, .. } = &mut e {
                    *message = offset_map.get(*message).copied().unwrap_or(*message);
                }
                edits.push(e);
            }
            tokens = counter.count_conversation(&conv);
        }
        Compaction {
            conversation: (!edits.is_empty()).then_some(conv),
            edits,
            notes,
            degraded: None,
        }
    }
}

fn frozen_after_drop(frozen: &[bool], map: &[usize]) -> Vec<bool> {
    map.iter()
        .map(|&orig| orig == usize::MAX || frozen.get(orig).copied().unwrap_or(false))
        .collect()
}

/// Caps every editable block of `conv`; `base` is added to message indices in the edits.
fn cap_all(
    conv: &mut Conversation,
    frozen: &[bool],
    caps: Caps,
    cx: &Context<'_>,
    edits: &mut Vec<Edit>,
    base: usize,
) {
    let n = conv.messages.len();
    for (i, m) in conv.messages.iter_mut().enumerate() {
        if frozen.get(i).copied().unwrap_or(false) {
            continue;
        }
        let newest = i + 1 == n;
        for (j, b) in m.content.iter_mut().enumerate() {
            // The cached count of the whole block: what fits is never tokenized again.
            let block_tokens = cx.counter.count_block(b);
            if block_tokens <= caps.result.min(caps.input).min(caps.text) {
                continue;
            }
            let edit = match b {
                Block::ToolResult(r) => {
                    cap_result(&mut r.content, caps.result, cx).map(|(before, after)| {
                        ("tool_result", Some(r.tool_use_id.clone()), before, after)
                    })
                }
                Block::ToolUse(t) if !newest => cap_input(&mut t.input, caps.input, cx)
                    .map(|(before, after)| ("tool_use_input", Some(t.id.clone()), before, after)),
                // An earlier summary or marker is merged by the next digest, never cut as
                // ordinary text (its failures and requests would go).
                Block::Text(t) if !newest && crate::facts::summary_kind(&t.text).is_none() => {
                    cut_middle_known(&t.text, caps.text, cx.counter, Some(block_tokens)).map(
                        |(s, before, after)| {
                            t.text = s;
                            ("text", None, before, after)
                        },
                    )
                }
                _ => None,
            };
            if let Some((what, id, tokens_before, tokens_after)) = edit {
                edits.push(Edit::Truncated {
                    message: base + i,
                    block: j,
                    what,
                    id,
                    tokens_before,
                    tokens_after,
                });
            }
        }
    }
}

fn cap_result(
    content: &mut Option<ToolResultContent>,
    cap: usize,
    cx: &Context<'_>,
) -> Option<(usize, usize)> {
    match content {
        Some(ToolResultContent::Text(s)) => {
            cut_middle_known(s, cap, cx.counter, Some(cx.counter.count_text_cached(s))).map(
                |(out, before, after)| {
                    *s = out;
                    (before, after)
                },
            )
        }
        Some(ToolResultContent::Blocks(bs)) => {
            let (mut before, mut after, mut changed) = (0, 0, false);
            for b in bs.iter_mut() {
                if let Block::Text(t) = b {
                    let known = Some(cx.counter.count_text_cached(&t.text));
                    if let Some((out, b0, a0)) = cut_middle_known(&t.text, cap, cx.counter, known) {
                        t.text = out;
                        before += b0;
                        after += a0;
                        changed = true;
                    }
                }
            }
            changed.then_some((before, after))
        }
        None => None,
    }
}

/// Caps the string values inside a tool call's input; the input stays a JSON object (and an
/// OpenAI `arguments` string stays valid JSON).
fn cap_input(input: &mut ToolInput, cap: usize, cx: &Context<'_>) -> Option<(usize, usize)> {
    let mut totals = (0, 0);
    let changed = match input {
        ToolInput::Json(v) => cap_strings(v, cap, cx, &mut totals),
        ToolInput::Arguments(s) => match serde_json::from_str::<Value>(s) {
            Ok(mut v) if v.is_object() => {
                let changed = cap_strings(&mut v, cap, cx, &mut totals);
                if changed {
                    *s = v.to_string();
                }
                changed
            }
            _ => false,
        },
        ToolInput::Freeform(s) => match cut_middle(s, cap, cx.counter) {
            Some((out, b, a)) => {
                *s = out;
                totals = (b, a);
                true
            }
            None => false,
        },
    };
    changed.then_some(totals)
}

fn cap_strings(v: &mut Value, cap: usize, cx: &Context<'_>, totals: &mut (usize, usize)) -> bool {
    match v {
        Value::String(s) => match cut_middle(s, cap, cx.counter) {
            Some((out, b, a)) => {
                *s = out;
                totals.0 += b;
                totals.1 += a;
                true
            }
            None => false,
        },
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |acc, x| cap_strings(x, cap, cx, totals) | acc),
        Value::Object(obj) => obj
            .values_mut()
            .fold(false, |acc, x| cap_strings(x, cap, cx, totals) | acc),
        _ => false,
    }
}

/// The result of dropping the oldest units.
struct Dropped {
    conversation: Conversation,
    edit: Edit,
    /// Tokens of `conversation`.
    tokens: usize,
}

impl Dropped {
    fn from(&self) -> usize {
        match self.edit {
            Edit::Dropped { to, .. } => to,
            _ => 0,
        }
    }
}

/// Drops `pinned..k` for the earliest legal cut `k` that brings the conversation under the
/// target (or the latest legal cut when none does), putting a marker message with a digest of
/// the dropped messages in their place. Returns the new conversation and, for each of its
/// messages, the index it had in `conv` (`usize::MAX` for the marker).
fn drop_oldest(
    conv: &Conversation,
    layout: &Layout,
    budget: Budget,
    digest_share: f64,
    cx: &Context<'_>,
) -> Option<(Dropped, Vec<usize>)> {
    let counter = cx.counter;
    let last = layout.cuts().last()?.index;
    let pinned = layout.pinned();
    let n = conv.messages.len();
    // Capping changes blocks, never messages: the input's layout holds for `conv`.
    let tokens = MessageTokens::of(conv, counter);
    let fixed = counter.count_system(conv.system.as_ref())
        + counter.count_tools(conv.tools())
        + tokens.span(0..pinned);
    let digest_cap = ((budget.target as f64) * digest_share) as usize;
    let has_flag = cx.format.has_error_flag();
    // Read once; each candidate cut takes the facts before it.
    let facts = Facts::of(&conv.messages, has_flag);
    let marker_for = |k: usize, room: usize, shed: bool| -> Message {
        let mut state = SessionState::of(&facts, pinned..k);
        if shed {
            state = state.shedding_settled();
        }
        Message::text(
            Role::User,
            state.marker_text(k - pinned, tokens.span(pinned..k), room, counter),
        )
    };
    // The marker's text is budgeted by `room` (its header included, see
    // `SessionState::marker_text`); what the message adds around the text is counted once.
    let frame = counter.count_message(&Message::text(Role::User, String::new()));
    let mut chosen = None;
    layout.earliest_cut(pinned, |cut| {
        let base = fixed + tokens.tail(cut.index) + frame;
        if base + digest_cap.min(budget.target / 10 + 1) > budget.target && cut.index != last {
            return false;
        }
        let room = budget.target.saturating_sub(base).min(digest_cap.max(32));
        let mut marker = marker_for(cut.index, room, false);
        // The candidate's count, from the parts already counted (the sum is additive).
        let mut total = fixed + counter.count_message(&marker) + tokens.tail(cut.index);
        if total > budget.limit {
            // Over the hard limit: the outcomes of settled rounds go before anything else.
            let lean = marker_for(cut.index, room, true);
            let lean_total = fixed + counter.count_message(&lean) + tokens.tail(cut.index);
            if lean_total < total {
                (marker, total) = (lean, lean_total);
            }
        }
        if total <= budget.target || cut.index == last {
            chosen = Some((cut.index, marker, total));
            return true;
        }
        false
    })?;
    let (k, marker, tokens_after) = chosen?;
    let mut messages = conv.messages[..pinned].to_vec();
    messages.push(marker);
    messages.extend_from_slice(&conv.messages[k..]);
    let conversation = Conversation {
        system: conv.system.clone(),
        messages,
        extra: conv.extra.clone(),
        bare: conv.bare,
    };
    debug_assert_eq!(counter.count_conversation(&conversation), tokens_after);
    let dropped = &conv.messages[pinned..k];
    let calls = dropped.iter().map(|m| m.tool_uses().count()).sum();
    let tokens = tokens.span(pinned..k);
    let mut map: Vec<usize> = (0..pinned).collect();
    map.push(usize::MAX);
    map.extend(k..n);
    let edit = Edit::Dropped {
        from: pinned,
        to: k,
        calls,
        tokens,
    };
    Some((
        Dropped {
            conversation,
            edit,
            tokens: tokens_after,
        },
        map,
    ))
}

/// True when a text holds a truncation marker of ours.
pub fn is_truncated(text: &str) -> bool {
    text.contains(TRUNCATION_MARK)
}
