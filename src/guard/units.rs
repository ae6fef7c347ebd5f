//! Units of a conversation: pinned prefix, rounds, tool exchanges and the legal cut points.
//!
//! Besides the client tool calls paired with their results, these references bind messages into
//! one unit (see [`super::refs`] for the rules and their sources): an Anthropic
//! `server_tool_use` / `mcp_tool_use` and its `*_tool_result` (same assistant message or a
//! `pause_turn` continuation), a `tool_use.caller.tool_id` and the `server_tool_use` it names,
//! and a Responses `mcp_approval_request` with the `mcp_approval_response` and `mcp_call` that
//! name it by `approval_request_id`.
//!
//! When the history lives on the provider's server (Responses `previous_response_id` or
//! `conversation`, rule B4), `input` holds only new items, and the outputs it opens with may
//! answer calls the server holds: those are *held* ([`Units::held`]), part of the pinned prefix
//! (never dropped, so no stored call loses its output) but not protected (their content may be
//! capped).

use super::refs;
use crate::conversation::{Conversation, Message, Role};
use crate::format::Format;
use crate::rules::{RoleKind, Table};
use foldhash::HashSet;

/// One tool exchange: a run of assistant messages that issues tool calls, plus the messages that
/// carry their results. Parallel calls are one exchange. Exchanges are atomic: a strategy keeps,
/// summarizes or drops them whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// Index of the first assistant message of the run.
    pub start: usize,
    /// One past the last message that carries a result of this exchange.
    pub end: usize,
    /// The call ids issued, in order.
    pub calls: Vec<String>,
    /// True when some call has no result yet and the history ends inside this exchange (an agent
    /// mid-turn, waiting for a tool).
    pub open: bool,
}

/// A round: from one clean user message (role user, no tool_result) to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// Index of the clean user message that starts it (or of the first unpinned message when
    /// the history does not start with one).
    pub start: usize,
    /// One past its last message.
    pub end: usize,
}

/// How a strategy may cut at an index. Exhaustive on purpose: a cut either may simply drop
/// what is before it or needs a user-role message in front, and a strategy must handle both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutKind {
    /// At a round start: the older messages may simply go.
    RoundStart,
    /// At an exchange boundary inside a round: allowed only with a user-role summary or marker
    /// message put in front, so the kept tail still starts with a user message.
    NeedsMarker,
}

/// A legal cut: messages `pinned..index` may be dropped or replaced; `index..` are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// The first kept message.
    pub index: usize,
    /// What the cut requires.
    pub kind: CutKind,
}

/// The guard's view of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Units {
    /// Number of leading messages never dropped: the system / developer messages (OpenAI),
    /// never edited either, and the held outputs after them ([`Units::held`]).
    pub pinned: usize,
    /// The messages of the pinned prefix that answer calls the provider's server holds (rule
    /// B4: with `previous_response_id` or `conversation`, the outputs before the first call of
    /// the input whose call is not in it), with the messages between them: never dropped (the
    /// stored call would lose its output: `No tool output found for function call call_X.`),
    /// their results' content may be capped. Empty when the history is all in the body.
    pub held: std::ops::Range<usize>,
    /// Rounds, oldest first.
    pub rounds: Vec<Round>,
    /// Tool exchanges, oldest first.
    pub exchanges: Vec<Exchange>,
    /// Runs of consecutive assistant messages `(start, end)`: a Responses reasoning item stays
    /// with the call or message after it, so no cut falls inside a run.
    pub assistant_runs: Vec<(usize, usize)>,
    /// Message count.
    pub len: usize,
    /// For each index `k` in `0..=len`: true when a cut at `k` would fall inside an exchange or
    /// an assistant run (computed once, so every cut query is O(1)).
    inside: Vec<bool>,
    /// For each message: the index into `exchanges` of the exchange holding it.
    exchange_of: Vec<Option<usize>>,
    /// First message of the newest exchange ([`Units::newest_exchange`]).
    newest: usize,
    /// What each message is ([`Slot`]).
    slots: Vec<Slot>,
    /// [`Units::turn_end`].
    turn_end: usize,
}

/// True when `m` starts a round: a user message without tool_result blocks.
pub fn is_clean_user(m: &Message) -> bool {
    m.role == Role::User && !m.has_tool_results()
}

/// What each message is to the units, read from the format's rule table once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// A user message without tool results: starts a round.
    Clean,
    /// A message that carries tool results (an Anthropic user message with tool_result
    /// blocks, an OpenAI tool message, a Responses output item).
    Results,
    /// The model's message (or item).
    Assistant,
    /// An instruction (system / developer) message: belongs to the round before it.
    Instruction,
    /// An Anthropic effort-only system message (`content: []` with `output_config`): renders
    /// nothing and may stand anywhere (A1.6), so it is transparent to pairing.
    Effort,
    /// A role the table does not know.
    Unknown,
}

impl Slot {
    /// The slot of `m` under `table`.
    pub(crate) fn of(table: &Table, m: &Message) -> Slot {
        match table.kind_of(m) {
            None => Slot::Unknown,
            Some(RoleKind::Assistant) => Slot::Assistant,
            Some(RoleKind::ToolOutput) => Slot::Results,
            Some(RoleKind::User) if m.has_tool_results() => Slot::Results,
            Some(RoleKind::User) => Slot::Clean,
            Some(RoleKind::Instruction) if is_effort_only(m) => Slot::Effort,
            Some(RoleKind::Instruction) => Slot::Instruction,
        }
    }

    /// An instruction of either form.
    pub(crate) fn is_instruction(self) -> bool {
        matches!(self, Slot::Instruction | Slot::Effort)
    }
}

/// An Anthropic effort-only system message: no content, an `output_config` (A1.6, A7).
pub(crate) fn is_effort_only(m: &Message) -> bool {
    m.content.is_empty()
        && m.extra
            .get("output_config")
            .is_some_and(serde_json::Value::is_object)
}

impl Units {
    /// Splits a conversation of `format` into units. Works on any input, valid or not: for
    /// invalid histories the units are still well formed (validation reports the faults).
    /// What a message is comes from the format's rule table (`crate::rules`).
    pub fn of(conversation: &Conversation, format: Format) -> Units {
        let table = format.rules();
        let msgs = &conversation.messages;
        let n = msgs.len();
        let slots: Vec<Slot> = msgs.iter().map(|m| Slot::of(table, m)).collect();
        let mut system = slots.iter().take_while(|s| s.is_instruction()).count();
        // A table that pins the first message (Gemini `contents[0]`, D7) treats it as part of
        // the leading prefix.
        if table.pin_first && system == 0 && n > 0 {
            system = 1;
        }
        // Trailing instructions (a reminder after the newest tool results) are not a turn: the
        // exchange before them is still the open one.
        let turn_end = n - slots
            .iter()
            .rev()
            .take_while(|s| s.is_instruction())
            .count();
        let mut exchanges = Vec::new();
        let mut assistant_runs = Vec::new();
        let mut i = system;
        while i < n {
            if slots[i] != Slot::Assistant {
                i += 1;
                continue;
            }
            let start = i;
            while i < n && slots[i] == Slot::Assistant {
                i += 1;
            }
            assistant_runs.push((start, i));
            let calls: Vec<String> = msgs[start..i]
                .iter()
                .flat_map(|m| m.tool_uses().map(|t| t.id.clone()))
                .collect();
            if calls.is_empty() {
                continue;
            }
            let mut pending: HashSet<&str> = calls.iter().map(String::as_str).collect();
            let mut end = i;
            while end < n && !pending.is_empty() {
                match slots[end] {
                    Slot::Results => {
                        for r in msgs[end].tool_results() {
                            pending.remove(r.tool_use_id.as_str());
                        }
                    }
                    // An effort-only message between a call and its results (accepted
                    // anywhere, A1.6) stays inside the exchange.
                    Slot::Effort if slots.get(end + 1) == Some(&Slot::Results) => {}
                    _ => break,
                }
                end += 1;
            }
            // OpenAI: trailing tool messages that answer nothing pending still belong here.
            while end < n && slots[end] == Slot::Results && msgs[end].role == Role::Tool {
                end += 1;
            }
            let open = !pending.is_empty() && end >= turn_end;
            exchanges.push(Exchange {
                start,
                end,
                calls,
                open,
            });
            i = end;
        }
        let exchanges = merge_linked(
            exchanges,
            &assistant_runs,
            &refs::links(conversation, table),
        );
        // A provider compaction item is not pinned with all before it: the provider ignores
        // what precedes the latest one (A9, B3), so that goes first; the item's unit is kept in
        // place ([`crate::guard::Layout::carry`]).
        let held = held_outputs(conversation, table, &slots, system);
        let pinned = held.end.max(system);
        let mut starts: Vec<usize> = (pinned..n).filter(|&k| slots[k] == Slot::Clean).collect();
        if starts.first() != Some(&pinned) && pinned < n {
            starts.insert(0, pinned);
        }
        let rounds = starts
            .iter()
            .enumerate()
            .map(|(r, &s)| Round {
                start: s,
                end: starts.get(r + 1).copied().unwrap_or(n),
            })
            .collect();
        let mut inside = vec![false; n + 1];
        let mut exchange_of = vec![None; n];
        for (x, e) in exchanges.iter().enumerate() {
            for slot in exchange_of.iter_mut().take(e.end.min(n)).skip(e.start) {
                *slot = Some(x);
            }
        }
        let spans = exchanges
            .iter()
            .map(|e| (e.start, e.end))
            .chain(assistant_runs.iter().copied());
        for (s, e) in spans {
            for flag in inside.iter_mut().take(e.min(n + 1)).skip(s + 1) {
                *flag = true;
            }
        }
        let newest = match exchanges.last() {
            Some(e) if e.end >= turn_end => e.start,
            _ => slots[..turn_end]
                .iter()
                .rposition(|s| *s != Slot::Assistant)
                .unwrap_or(0),
        };
        Units {
            pinned,
            held,
            rounds,
            exchanges,
            assistant_runs,
            len: n,
            inside,
            exchange_of,
            newest,
            slots,
            turn_end,
        }
    }

    /// What message `i` is to the units (see [`Slot`]).
    pub(crate) fn slot(&self, i: usize) -> Option<Slot> {
        self.slots.get(i).copied()
    }

    /// One past the last message that is not an instruction: the messages after it are
    /// trailing system / developer messages (the newest of them stays the last message).
    pub fn turn_end(&self) -> usize {
        self.turn_end
    }

    /// The newest exchange: what the agent just sent, which compaction never rewrites on its
    /// own account (an unusable image there refuses the input, `crate::guard::plan_repairs`).
    /// It is the last tool exchange when the history ends inside it or with its last result
    /// (the calls and what the tools just gave back); otherwise the newest message that is not
    /// the model's (the user's new words, with their images) and any assistant messages after
    /// it (a prefill). Everything before it has been sent to the model before, or was left
    /// behind by a newer user message.
    pub fn newest_exchange(&self) -> std::ops::Range<usize> {
        self.newest..self.len
    }

    /// The exchange that contains message `index`, if any.
    pub fn exchange_at(&self, index: usize) -> Option<&Exchange> {
        self.exchange_of
            .get(index)
            .copied()
            .flatten()
            .and_then(|x| self.exchanges.get(x))
    }

    /// Whether a cut at `index` would split an exchange or an assistant run.
    fn splits_unit(&self, index: usize) -> bool {
        self.inside.get(index).copied().unwrap_or(false)
    }

    /// Classifies a cut at `index` (first kept message), or `None` when no cut may fall there:
    /// inside an exchange (including the open last one), inside an assistant run, inside the
    /// pinned prefix, or at the very end (the newest message is always kept).
    /// An instruction message belongs to the round before it, so no cut falls on one either.
    pub fn cut_at(&self, index: usize) -> Option<Cut> {
        if index <= self.pinned || index >= self.len || self.splits_unit(index) {
            return None;
        }
        let kind = match self.slots[index] {
            Slot::Results | Slot::Instruction | Slot::Effort => return None,
            Slot::Clean => CutKind::RoundStart,
            Slot::Assistant | Slot::Unknown => CutKind::NeedsMarker,
        };
        Some(Cut { index, kind })
    }

    /// Every legal cut, oldest first.
    pub fn cuts(&self) -> Vec<Cut> {
        (self.pinned + 1..self.len)
            .filter_map(|k| self.cut_at(k))
            .collect()
    }

    /// The message ranges a strategy may treat as atomic, in order: each exchange, and each
    /// message outside exchanges on its own (assistant runs without calls stay whole). The pinned
    /// prefix is not included.
    pub fn atoms(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut run_end = vec![0usize; self.len];
        for &(s, e) in &self.assistant_runs {
            if let Some(slot) = run_end.get_mut(s) {
                *slot = e;
            }
        }
        let mut i = self.pinned;
        while i < self.len {
            let end = if let Some(e) = self.exchange_at(i).filter(|e| e.start == i) {
                e.end
            } else if run_end[i] > i {
                run_end[i]
            } else {
                i + 1
            };
            out.push((i, end.max(i + 1)));
            i = end.max(i + 1);
        }
        out
    }
}

/// The held outputs of a history that lives on the server ([`Units::held`]): from the end
/// of the leading instructions (`from`) to one past the last output, before the first call of
/// the input, that answers a call the input does not hold. Empty (`from..from`) when the body
/// puts nothing on the server or no output answers a stored call.
fn held_outputs(
    conversation: &Conversation,
    table: &Table,
    slots: &[Slot],
    from: usize,
) -> std::ops::Range<usize> {
    if !table.server_holds_history(&conversation.extra) {
        return from..from;
    }
    let msgs = &conversation.messages;
    let first_call = msgs
        .iter()
        .position(|m| m.tool_uses().next().is_some())
        .unwrap_or(msgs.len());
    let called: HashSet<&str> = msgs
        .iter()
        .flat_map(|m| m.tool_uses().map(|t| t.id.as_str()))
        .collect();
    let end = (from..first_call)
        .rfind(|&i| {
            slots[i] == Slot::Results
                && msgs[i]
                    .tool_results()
                    .any(|r| !called.contains(r.tool_use_id.as_str()))
        })
        .map_or(from, |i| i + 1);
    from..end
}

/// Folds reference links into the exchanges: every link `(a, b)` (messages `a` and `b` must stay
/// together) makes the span `a..=b` atomic, widened to the exchanges and assistant runs it
/// touches; overlapping spans and exchanges become one exchange (calls in order, open when any
/// part is open).
fn merge_linked(
    exchanges: Vec<Exchange>,
    runs: &[(usize, usize)],
    links: &[(usize, usize)],
) -> Vec<Exchange> {
    if links.is_empty() {
        return exchanges;
    }
    let mut spans: Vec<(usize, usize)> = links
        .iter()
        .map(|&(a, b)| (a.min(b), a.max(b) + 1))
        .filter(|&(s, e)| e > s + 1)
        .collect();
    if spans.is_empty() {
        return exchanges;
    }
    let atoms: Vec<(usize, usize)> = exchanges
        .iter()
        .map(|e| (e.start, e.end))
        .chain(runs.iter().copied())
        .collect();
    // Widen each span to the atoms it overlaps, until nothing changes.
    loop {
        let mut changed = false;
        for span in spans.iter_mut() {
            for &(s, e) in &atoms {
                if s < span.1 && span.0 < e && (s < span.0 || e > span.1) {
                    *span = (span.0.min(s), span.1.max(e));
                    changed = true;
                }
            }
        }
        spans.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
        for (s, e) in spans.drain(..) {
            match merged.last_mut() {
                Some(last) if s < last.1 => {
                    last.1 = last.1.max(e);
                    changed = true;
                }
                _ => merged.push((s, e)),
            }
        }
        spans = merged;
        if !changed {
            break;
        }
    }
    let mut out: Vec<Exchange> = Vec::new();
    let mut rest = exchanges.into_iter().peekable();
    for (s, e) in spans {
        while let Some(x) = rest.next_if(|x| x.end <= s) {
            out.push(x);
        }
        let mut joined = Exchange {
            start: s,
            end: e,
            calls: Vec::new(),
            open: false,
        };
        while let Some(x) = rest.next_if(|x| x.start < e) {
            joined.calls.extend(x.calls);
            joined.open |= x.open;
        }
        out.push(joined);
    }
    out.extend(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;
    use serde_json::json;

    #[test]
    fn a_server_tool_and_the_calls_it_made_are_one_exchange() {
        // The b01 shape: server_tool_use at 1, client calls naming it as caller at 1 and 3,
        // its result at 5.
        let caller = json!({"type": "code_execution_20250825", "tool_id": "srvtoolu_1"});
        let body = json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "code_execution", "input": {}},
                {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}, "caller": caller}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "a"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_b", "name": "f", "input": {}, "caller": caller}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_b", "content": "b"}]},
            {"role": "assistant", "content": [
                {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_1", "content": {}},
                {"type": "text", "text": "done"}]},
            {"role": "user", "content": "next"}
        ]});
        let conv = Format::Anthropic.read(&body).unwrap();
        let units = Units::of(&conv, Format::Anthropic);
        let spans: Vec<(usize, usize)> = units.exchanges.iter().map(|e| (e.start, e.end)).collect();
        assert_eq!(spans, vec![(1, 6)]);
        assert_eq!(units.exchanges[0].calls, vec!["toolu_a", "toolu_b"]);
        let cuts: Vec<usize> = units.cuts().iter().map(|c| c.index).collect();
        assert_eq!(cuts, vec![1, 6]);
    }

    #[test]
    fn an_approval_chain_spans_the_user_turn_between_request_and_response() {
        let body = json!({"input": [
            {"role": "user", "content": "add the column"},
            {"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "db", "name": "sql", "arguments": "{}"},
            {"role": "user", "content": "yes"},
            {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": true},
            {"type": "mcp_call", "id": "mcp_1", "approval_request_id": "mcpr_1", "name": "sql", "arguments": "{}", "output": "ok"},
            {"role": "user", "content": "thanks"}
        ]});
        let conv = Format::OpenAiResponses.read(&body).unwrap();
        let units = Units::of(&conv, Format::OpenAiResponses);
        let spans: Vec<(usize, usize)> = units.exchanges.iter().map(|e| (e.start, e.end)).collect();
        assert_eq!(spans, vec![(1, 5)]);
        let cuts: Vec<usize> = units.cuts().iter().map(|c| c.index).collect();
        assert_eq!(cuts, vec![1, 5]);
    }

    #[test]
    fn the_newest_exchange_is_the_last_tool_exchange_or_the_newest_user_message() {
        let u = |t: &str| json!({"role": "user", "content": t});
        let a = |t: &str| json!({"role": "assistant", "content": t});
        let call = |id: &str| json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "f", "input": {}}]});
        let result = |id: &str| json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "x"}]});
        let cases = [
            // The tool just answered: its exchange.
            (vec![u("go"), call("t1"), result("t1")], 1..3),
            // A new request after it: that request alone.
            (vec![u("go"), call("t1"), result("t1"), u("next")], 3..4),
            // The model answered last (a stored history): the newest non-model message on.
            (vec![u("go"), call("t1"), result("t1"), a("done")], 2..4),
            // Calls still waiting: the open exchange.
            (vec![u("go"), call("t1"), result("t1"), call("t2")], 3..4),
            // A request sent again after one the provider refused: the newest one.
            (vec![u("look"), u("look again")], 1..2),
            (vec![u("go")], 0..1),
            (vec![], 0..0),
        ];
        for (messages, newest) in cases {
            let conv = Format::Anthropic
                .read(&json!({"messages": messages}))
                .unwrap();
            assert_eq!(
                Units::of(&conv, Format::Anthropic).newest_exchange(),
                newest,
                "{messages:?}"
            );
        }
        // OpenAI Chat: a user message after the tool messages starts the newest exchange.
        let chat = json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "x"},
            {"role": "user", "content": "look"}
        ]});
        let conv = Format::OpenAiChat.read(&chat).unwrap();
        assert_eq!(Units::of(&conv, Format::OpenAiChat).newest_exchange(), 3..4);
    }

    #[test]
    fn a_compaction_item_pins_nothing_before_it_and_a_drop_keeps_it_in_place() {
        let body = json!({"input": [
            {"role": "user", "content": "old"},
            {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAA"},
            {"role": "user", "content": "new"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "more"}
        ]});
        let conv = Format::OpenAiResponses.read(&body).unwrap();
        let units = Units::of(&conv, Format::OpenAiResponses);
        assert_eq!(units.pinned, 0);
        let cuts: Vec<usize> = units.cuts().iter().map(|c| c.index).collect();
        assert_eq!(cuts, vec![1, 2, 3, 4]);
        let layout = crate::guard::Layout::of(&conv, Format::OpenAiResponses);
        let kept: Vec<usize> = layout
            .carry(&conv, 3)
            .unwrap()
            .kept
            .iter()
            .map(|k| k.0)
            .collect();
        assert_eq!(kept, vec![1]);
        assert!(layout.is_protected(1));
    }

    #[test]
    fn outputs_of_stored_calls_are_held_only_when_the_history_lives_on_the_server() {
        let fco = |id: &str| json!({"type": "function_call_output", "call_id": id, "output": "x"});
        let input = json!([
            {"role": "developer", "content": "d"},
            fco("call_s1"),
            fco("call_s2"),
            {"role": "user", "content": "next"},
            {"type": "function_call", "call_id": "call_n1", "name": "f", "arguments": "{}"},
            fco("call_n1"),
            {"role": "user", "content": "more"}
        ]);
        for (key, held, cuts) in [
            ("previous_response_id", 1..3, vec![4, 6]),
            ("conversation", 1..3, vec![4, 6]),
            ("store", 1..1, vec![3, 4, 6]),
        ] {
            let body = json!({"model": "gpt-5", key: "resp_1", "input": input});
            let conv = Format::OpenAiResponses.read(&body).unwrap();
            let units = Units::of(&conv, Format::OpenAiResponses);
            assert_eq!(units.held, held, "{key}");
            assert_eq!(units.pinned, held.end, "{key}");
            // Held outputs are never in a dropped span (no cut at or before the user message
            // after them); the instruction stays as it is, a held output may be capped.
            assert_eq!(
                units.cuts().iter().map(|c| c.index).collect::<Vec<_>>(),
                cuts,
                "{key}"
            );
            let layout = crate::guard::Layout::of(&conv, Format::OpenAiResponses);
            let protected: Vec<bool> = (0..4).map(|i| layout.is_protected(i)).collect();
            assert_eq!(protected, vec![true, false, false, false], "{key}");
        }
    }
}
