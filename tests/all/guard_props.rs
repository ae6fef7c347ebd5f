//! Property tests for the guard: random valid histories in the three request formats, the cuts
//! the guard offers on them, and located violations for single mutations.
//!
//! A history is generated as a format-neutral [`Plan`] (rounds of a clean user message, tool
//! exchanges with 1..=6 parallel calls, thinking, failed results, replies, an optional open last
//! exchange) and rendered to a request body of one format. The renderer also records where each
//! exchange and round lies, which is the ground truth the guard's units are checked against.
//!
//! Turns marked `special` add the provider-specific kinds: an Anthropic `server_tool_use` with
//! its `web_search_tool_result` and client calls naming it as `caller`; a Responses MCP approval
//! chain (`mcp_approval_request`, `mcp_approval_response`, `mcp_call`); a legacy Chat
//! `function_call` answered by a `role: "function"` message. A Responses history may start with a
//! server-side `compaction` item, a round of its own that the guard keeps in place.

use compactor::conversation::{Conversation, Message, Role};
use compactor::format::Format;
use compactor::guard::{CutKind, Units, ValidateOptions, Violation, ViolationKind, validate};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};
use std::collections::HashSet;

const MARKER: &str = "[earlier conversation removed]";
const OPEN_TAIL: ValidateOptions = ValidateOptions {
    allow_open_tail: true,
};

/// `cases` cases, failing seeds saved beside the test's source file
/// (`tests/all/<module>.proptest-regressions`) and replayed first. Named explicitly: the
/// default (`SourceParallel`) looks for a `lib.rs` / `main.rs` above the source file, finds
/// none for `tests/all/*.rs`, and only then falls back to this, printing a warning each run.
pub(crate) fn persisted(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// The plan

/// One tool call and its result.
#[derive(Debug, Clone)]
struct Call {
    name: &'static str,
    arg: String,
    result: String,
    is_error: bool,
    /// The result content as an array of text blocks / parts instead of a string.
    result_blocks: bool,
}

/// A thinking block: `(redacted, text)`.
type Thinking = (bool, String);

/// One tool exchange: an assistant turn issuing parallel calls, then their results.
#[derive(Debug, Clone)]
struct Turn {
    thinking: Option<Thinking>,
    pre_text: Option<String>,
    calls: Vec<Call>,
    /// The results come in call order rotated left by this much.
    rotate: usize,
    /// Anthropic: user text after the tool_result blocks in the results message.
    after_text: Option<String>,
    /// Add the format's provider-specific items (see the module docs).
    special: bool,
}

#[derive(Debug, Clone)]
struct Round {
    user: String,
    user_blocks: bool,
    turns: Vec<Turn>,
    reply: String,
    reply_blocks: bool,
    reply_thinking: Option<Thinking>,
}

#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) format: Format,
    system: Option<String>,
    bare: bool,
    rounds: Vec<Round>,
    /// Whether the last round ends with the assistant's reply (ignored with an open tail).
    last_reply: bool,
    /// Calls at the very end still waiting for their results.
    open: Option<Turn>,
    /// Responses: the input starts with a server-side compaction item.
    compaction: bool,
}

fn text() -> impl Strategy<Value = String> {
    "[A-Za-z][A-Za-z0-9 .,:éü日😀]{0,16}"
}

fn thinking() -> impl Strategy<Value = Option<Thinking>> {
    prop::option::weighted(0.4, (prop::bool::weighted(0.2), text()))
}

fn call() -> impl Strategy<Value = Call> {
    (
        prop::sample::select(vec!["Bash", "Read", "Edit", "Grep"]),
        text(),
        text(),
        prop::bool::weighted(0.25),
        any::<bool>(),
    )
        .prop_map(|(name, arg, result, is_error, result_blocks)| Call {
            name,
            arg,
            result,
            is_error,
            result_blocks,
        })
}

fn turn() -> impl Strategy<Value = Turn> {
    (
        thinking(),
        prop::option::weighted(0.3, text()),
        prop::collection::vec(call(), 1..=6),
        0..6usize,
        prop::option::weighted(0.25, text()),
        prop::bool::weighted(0.3),
    )
        .prop_map(
            |(thinking, pre_text, calls, rotate, after_text, special)| Turn {
                thinking,
                pre_text,
                calls,
                rotate,
                after_text,
                special,
            },
        )
}

fn round(min_turns: usize) -> impl Strategy<Value = Round> {
    (
        text(),
        any::<bool>(),
        prop::collection::vec(turn(), min_turns..=3),
        text(),
        any::<bool>(),
        thinking(),
    )
        .prop_map(
            |(user, user_blocks, turns, reply, reply_blocks, reply_thinking)| Round {
                user,
                user_blocks,
                turns,
                reply,
                reply_blocks,
                reply_thinking,
            },
        )
}

fn format() -> impl Strategy<Value = Format> {
    prop::sample::select(vec![
        Format::Anthropic,
        Format::OpenAiChat,
        Format::OpenAiResponses,
    ])
}

/// A random valid history; with `min_turns > 0` the first round has at least that many closed
/// exchanges (so a mutation always has a call and a result to work on).
pub(crate) fn plan(min_turns: usize) -> impl Strategy<Value = Plan> {
    (
        format(),
        prop::option::of(text()),
        prop::bool::weighted(0.2),
        round(min_turns),
        prop::collection::vec(round(0), 0..=3),
        any::<bool>(),
        prop::option::weighted(0.3, turn()),
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(format, system, bare, first, rest, last_reply, open, compaction)| Plan {
                format,
                system,
                bare,
                rounds: std::iter::once(first).chain(rest).collect(),
                last_reply,
                open,
                compaction: compaction && format == Format::OpenAiResponses,
            },
        )
}

// ---------------------------------------------------------------------------------------------
// Rendering

/// A rendered history and where its units lie.
#[derive(Debug)]
pub(crate) struct Rendered {
    pub(crate) body: Value,
    /// `(start, end, open)` of every exchange, in message indices.
    pub(crate) exchanges: Vec<(usize, usize, bool)>,
    /// Index of every clean user message.
    pub(crate) round_starts: Vec<usize>,
}

struct Renderer {
    format: Format,
    items: Vec<Value>,
    exchanges: Vec<(usize, usize, bool)>,
    round_starts: Vec<usize>,
    next: usize,
}

impl Renderer {
    fn id(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{:02}x{}", self.next, self.items.len())
    }

    fn thinking(&mut self, t: &Thinking) -> Value {
        let n = self.id("");
        match (self.format, t.0) {
            (Format::OpenAiResponses, redacted) => {
                let summary = if redacted {
                    json!([])
                } else {
                    json!([{"type": "summary_text", "text": t.1}])
                };
                json!({"type": "reasoning", "id": format!("rs_{n}"), "summary": summary,
                       "encrypted_content": format!("gAAAA{n}")})
            }
            (_, true) => json!({"type": "redacted_thinking", "data": format!("EqRed{n}")}),
            (_, false) => {
                json!({"type": "thinking", "thinking": t.1, "signature": format!("Eq{n}sig==")})
            }
        }
    }

    fn user(&mut self, text: &str, blocks: bool) {
        self.round_starts.push(self.items.len());
        let part = match self.format {
            Format::OpenAiResponses => json!({"type": "input_text", "text": text}),
            _ => json!({"type": "text", "text": text}),
        };
        let item = match (self.format, blocks) {
            (Format::OpenAiResponses, true) => {
                json!({"type": "message", "role": "user", "content": [part]})
            }
            (_, true) => json!({"role": "user", "content": [part]}),
            (_, false) => json!({"role": "user", "content": text}),
        };
        self.items.push(item);
    }

    fn reply(&mut self, r: &Round) {
        let thinking = match (&r.reply_thinking, self.format) {
            (Some(t), Format::Anthropic | Format::OpenAiResponses) => Some(self.thinking(t)),
            _ => None,
        };
        match self.format {
            Format::Anthropic => {
                let content = match thinking {
                    None if !r.reply_blocks => json!(r.reply),
                    t => Value::Array(
                        t.into_iter()
                            .chain([json!({"type": "text", "text": r.reply})])
                            .collect(),
                    ),
                };
                self.items
                    .push(json!({"role": "assistant", "content": content}));
            }
            Format::OpenAiChat => {
                let content = if r.reply_blocks {
                    json!([{"type": "text", "text": r.reply}])
                } else {
                    json!(r.reply)
                };
                self.items
                    .push(json!({"role": "assistant", "content": content}));
            }
            Format::OpenAiResponses => {
                self.items.extend(thinking);
                let item = if r.reply_blocks {
                    let id = self.id("msg_");
                    json!({"type": "message", "role": "assistant", "id": id, "status": "completed",
                           "content": [{"type": "output_text", "text": r.reply, "annotations": []}]})
                } else {
                    json!({"role": "assistant", "content": r.reply})
                };
                self.items.push(item);
            }
            _ => unreachable!("a format the generator does not know"),
        }
    }

    fn result_text(&self, c: &Call) -> String {
        if c.is_error && self.format != Format::Anthropic {
            format!("Error: {}", c.result)
        } else {
            c.result.clone()
        }
    }

    fn turn(&mut self, t: &Turn, open: bool) {
        let mut start = self.items.len();
        let prefix = match self.format {
            Format::Anthropic => "toolu_",
            _ => "call_",
        };
        let ids: Vec<String> = t.calls.iter().map(|_| self.id(prefix)).collect();
        let n = t.calls.len();
        let order: Vec<usize> = (0..n).map(|k| (k + t.rotate) % n).collect();
        match self.format {
            Format::Anthropic => self.turn_anthropic(t, &ids, &order, open),
            Format::OpenAiChat => self.turn_chat(t, &ids, &order, open, &mut start),
            Format::OpenAiResponses => self.turn_responses(t, &ids, &order, open),
            _ => unreachable!("a format the generator does not know"),
        }
        self.exchanges.push((start, self.items.len(), open));
    }

    /// An Anthropic turn: the assistant's message with its calls (a server tool's call and
    /// result first when `special`), then the results in `order` unless `open`.
    fn turn_anthropic(&mut self, t: &Turn, ids: &[String], order: &[usize], open: bool) {
        let mut content = Vec::new();
        if let Some(th) = &t.thinking {
            content.push(self.thinking(th));
        }
        if let Some(p) = &t.pre_text {
            content.push(json!({"type": "text", "text": p}));
        }
        let server = t.special.then(|| self.id("srvtoolu_"));
        if let Some(srv) = &server {
            content.push(
                json!({"type": "server_tool_use", "id": srv, "name": "web_search",
                                "input": {"query": t.calls[0].arg}}),
            );
            content.push(json!({"type": "web_search_tool_result", "tool_use_id": srv,
                                "content": [{"type": "web_search_result", "url": "https://example.com/",
                                             "title": t.calls[0].result, "encrypted_content": "EqWs"}]}));
        }
        for (c, id) in t.calls.iter().zip(ids) {
            let mut b = json!({"type": "tool_use", "id": id, "name": c.name,
                                "input": {"arg": c.arg}});
            if let Some(srv) = &server {
                b["caller"] = json!({"type": "code_execution_20250825", "tool_id": srv});
            }
            content.push(b);
        }
        self.items
            .push(json!({"role": "assistant", "content": content}));
        if !open {
            let mut results = Vec::new();
            for &k in order {
                let c = &t.calls[k];
                let mut b = json!({"type": "tool_result", "tool_use_id": ids[k]});
                b["content"] = if c.result_blocks {
                    json!([{"type": "text", "text": c.result}])
                } else {
                    json!(c.result)
                };
                if c.is_error {
                    b["is_error"] = json!(true);
                }
                results.push(b);
            }
            if let Some(a) = &t.after_text {
                results.push(json!({"type": "text", "text": a}));
            }
            self.items.push(json!({"role": "user", "content": results}));
        }
    }

    /// A Chat turn: a legacy `function_call` exchange first when `special` (its own exchange,
    /// moving `start` past it), the assistant's message with its calls, then the results in
    /// `order` unless `open`.
    fn turn_chat(
        &mut self,
        t: &Turn,
        ids: &[String],
        order: &[usize],
        open: bool,
        start: &mut usize,
    ) {
        if t.special && !open {
            let c = &t.calls[0];
            self.items.push(
                json!({"role": "assistant", "content": null, "function_call": {
                "name": c.name, "arguments": json!({"arg": c.arg}).to_string()}}),
            );
            self.items.push(json!({"role": "function", "name": c.name,
                                   "content": self.result_text(c)}));
            self.exchanges.push((*start, self.items.len(), false));
            *start = self.items.len();
        }
        let calls: Vec<Value> = t
            .calls
            .iter()
            .zip(ids)
            .map(|(c, id)| {
                json!({"id": id, "type": "function", "function": {
                    "name": c.name, "arguments": json!({"arg": c.arg}).to_string()}})
            })
            .collect();
        let content = t.pre_text.as_ref().map_or(Value::Null, |p| json!(p));
        self.items
            .push(json!({"role": "assistant", "content": content, "tool_calls": calls}));
        if !open {
            for &k in order {
                let c = &t.calls[k];
                let text = self.result_text(c);
                let content = if c.result_blocks {
                    json!([{"type": "text", "text": text}])
                } else {
                    json!(text)
                };
                self.items
                    .push(json!({"role": "tool", "tool_call_id": ids[k], "content": content}));
            }
        }
    }

    /// A Responses turn: reasoning and text items, an MCP approval exchange when `special`,
    /// one `function_call` item per call, then the outputs in `order` unless `open`.
    fn turn_responses(&mut self, t: &Turn, ids: &[String], order: &[usize], open: bool) {
        if let Some(th) = &t.thinking {
            let item = self.thinking(th);
            self.items.push(item);
        }
        if let Some(p) = &t.pre_text {
            let id = self.id("msg_");
            self.items
                .push(json!({"type": "message", "role": "assistant", "id": id,
                "content": [{"type": "output_text", "text": p, "annotations": []}]}));
        }
        if t.special {
            let req = self.id("mcpr_");
            let call = self.id("mcp_");
            self.items
                .push(json!({"type": "mcp_approval_request", "id": req,
                "server_label": "db", "name": "run_sql", "arguments": "{}"}));
            self.items.push(json!({"type": "mcp_approval_response",
                "approval_request_id": req, "approve": true}));
            self.items
                .push(json!({"type": "mcp_call", "id": call, "server_label": "db",
                "name": "run_sql", "approval_request_id": req, "arguments": "{}",
                "output": t.calls[0].result}));
        }
        for (c, id) in t.calls.iter().zip(ids) {
            let item_id = self.id("fc_");
            self.items.push(
                json!({"type": "function_call", "id": item_id, "call_id": id,
                "name": c.name, "arguments": json!({"arg": c.arg}).to_string()}),
            );
        }
        if !open {
            for &k in order {
                let c = &t.calls[k];
                let text = self.result_text(c);
                let output = if c.result_blocks {
                    json!([{"type": "input_text", "text": text}])
                } else {
                    json!(text)
                };
                self.items
                    .push(json!({"type": "function_call_output", "call_id": ids[k],
                                       "output": output}));
            }
        }
    }
}

pub(crate) fn render(plan: &Plan) -> Rendered {
    let mut r = Renderer {
        format: plan.format,
        items: Vec::new(),
        exchanges: Vec::new(),
        round_starts: Vec::new(),
        next: 0,
    };
    if let (Format::OpenAiChat, Some(s)) = (plan.format, &plan.system) {
        r.items.push(json!({"role": "system", "content": s}));
    }
    if plan.compaction {
        // The item is a round of its own: not pinned, kept in place by the carry rules.
        r.round_starts.push(r.items.len());
        r.items
            .push(json!({"type": "compaction", "id": "cmp_0", "encrypted_content": "gAAAAcmp"}));
    }
    let last = plan.rounds.len() - 1;
    for (k, round) in plan.rounds.iter().enumerate() {
        r.user(&round.user, round.user_blocks);
        for t in &round.turns {
            r.turn(t, false);
        }
        if k < last || (plan.last_reply && plan.open.is_none()) {
            r.reply(round);
        }
    }
    if let Some(t) = &plan.open {
        r.turn(t, true);
    }
    let items = Value::Array(r.items);
    let body = if plan.bare {
        items
    } else {
        let mut obj = serde_json::Map::new();
        obj.insert("model".into(), json!("some-model"));
        match (plan.format, &plan.system) {
            (Format::Anthropic, Some(s)) => {
                obj.insert("system".into(), json!(s));
            }
            (Format::OpenAiResponses, Some(s)) => {
                obj.insert("instructions".into(), json!(s));
            }
            _ => {}
        }
        obj.insert(plan.format.messages_key().into(), items);
        obj.insert("max_tokens".into(), json!(1024));
        Value::Object(obj)
    };
    Rendered {
        body,
        exchanges: r.exchanges,
        round_starts: r.round_starts,
    }
}

pub(crate) fn read(format: Format, body: &Value) -> Conversation {
    format
        .read(body)
        .unwrap_or_else(|e| panic!("{format} read failed: {e}"))
}

fn items_mut(format: Format, body: &mut Value) -> &mut Vec<Value> {
    let key = format.messages_key();
    let list = if body.is_array() {
        Some(body)
    } else {
        body.get_mut(key)
    };
    match list.and_then(Value::as_array_mut) {
        Some(items) => items,
        None => panic!("the body has no {key} array"),
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers on conversations

fn call_ids(msgs: &[Message]) -> HashSet<String> {
    msgs.iter()
        .flat_map(|m| m.tool_uses().map(|t| t.id.clone()))
        .collect()
}

fn result_ids(msgs: &[Message]) -> HashSet<String> {
    msgs.iter()
        .flat_map(|m| m.tool_results().map(|r| r.tool_use_id.clone()))
        .collect()
}

/// The conversation that keeps `index..` after a cut: pinned messages first, then the marker
/// when the cut needs one, then the tail.
fn kept_tail(conv: &Conversation, pinned: usize, index: usize, kind: CutKind) -> Conversation {
    let mut messages = conv.messages[..pinned].to_vec();
    if kind == CutKind::NeedsMarker {
        messages.push(Message::text(Role::User, MARKER));
    }
    messages.extend_from_slice(&conv.messages[index..]);
    Conversation {
        messages,
        ..conv.clone()
    }
}

fn violation(
    format: Format,
    message: usize,
    block: Option<usize>,
    kind: ViolationKind,
) -> Violation {
    let path = match (format, block) {
        (Format::OpenAiResponses, _) => format!("input[{message}]"),
        (_, None) => format!("messages[{message}]"),
        (_, Some(j)) => format!("messages[{message}].content[{j}]"),
    };
    let rule = kind.rule_id(format);
    Violation {
        path,
        message: Some(message),
        block,
        kind,
        rule,
    }
}

/// Whether an item is an assistant-side item (a message of the model, a call, reasoning).
fn is_assistant_item(format: Format, item: &Value) -> bool {
    match format {
        Format::OpenAiResponses => match item["type"].as_str() {
            Some("function_call") | Some("reasoning") | Some("compaction") => true,
            Some(t) if t.starts_with("mcp_") => true,
            Some("function_call_output") => false,
            _ => item["role"] == "assistant",
        },
        _ => item["role"] == "assistant",
    }
}

// ---------------------------------------------------------------------------------------------
// Properties

proptest! {
    #![proptest_config(persisted(3000))]

    /// Every generated history is accepted, reads into the units it was built from, and writes
    /// back to the same JSON.
    #[test]
    fn random_valid_histories_validate_and_round_trip(plan in plan(0)) {
        let rendered = render(&plan);
        let conv = read(plan.format, &rendered.body);
        let violations = validate(&conv, plan.format, OPEN_TAIL);
        prop_assert!(violations.is_empty(), "{:#?}\n{:#}", violations, rendered.body);
        prop_assert_eq!(&plan.format.write(&conv), &rendered.body);

        let units = Units::of(&conv, plan.format);
        let exchanges: Vec<(usize, usize, bool)> =
            units.exchanges.iter().map(|e| (e.start, e.end, e.open)).collect();
        prop_assert_eq!(exchanges, rendered.exchanges);
        let starts: Vec<usize> = units.rounds.iter().map(|r| r.start).collect();
        prop_assert_eq!(starts, rendered.round_starts);

        // Without the open tail allowance, exactly the open calls are reported.
        let strict = validate(&conv, plan.format, ValidateOptions { allow_open_tail: false });
        prop_assert_eq!(strict.is_empty(), plan.open.is_none(), "{:#?}", strict);
    }
}

proptest! {
    #![proptest_config(persisted(2500))]

    /// Every cut the guard offers keeps a valid tail and drops whole exchanges only.
    #[test]
    fn every_offered_cut_leaves_both_sides_valid(plan in plan(0)) {
        let rendered = render(&plan);
        let format = plan.format;
        let conv = read(format, &rendered.body);
        let units = Units::of(&conv, plan.format);
        for cut in units.cuts() {
            let tail = kept_tail(&conv, units.pinned, cut.index, cut.kind);
            let violations = validate(&tail, format, OPEN_TAIL);
            prop_assert!(violations.is_empty(), "cut {:?}: {:#?}\n{:#}", cut, violations,
                         format.write(&tail));
            // The tail as it would be sent: written and read back, still valid.
            let reread = read(format, &format.write(&tail));
            let violations = validate(&reread, format, OPEN_TAIL);
            prop_assert!(violations.is_empty(), "cut {:?} after write: {:#?}", cut, violations);

            let head = &conv.messages[units.pinned..cut.index];
            let kept = &conv.messages[cut.index..];
            let (head_calls, head_results) = (call_ids(head), result_ids(head));
            let (kept_calls, kept_results) = (call_ids(kept), result_ids(kept));
            prop_assert!(head_calls.is_disjoint(&kept_results), "cut {:?}", cut);
            prop_assert!(kept_calls.is_disjoint(&head_results), "cut {:?}", cut);
            for &(start, end, _) in &rendered.exchanges {
                prop_assert!(end <= cut.index || start >= cut.index,
                             "cut {:?} splits exchange {}..{}", cut, start, end);
            }
            let clean_user = conv.messages[cut.index].role == Role::User
                && !conv.messages[cut.index].has_tool_results();
            prop_assert_eq!(cut.kind == CutKind::RoundStart, clean_user, "cut {:?}", cut);
        }
    }
}

proptest! {
    #![proptest_config(persisted(2000))]

    /// No index inside an exchange is a cut, and every round start after the first is one.
    #[test]
    fn no_cut_splits_an_exchange(plan in plan(0)) {
        let rendered = render(&plan);
        let conv = read(plan.format, &rendered.body);
        let units = Units::of(&conv, plan.format);
        let offered: Vec<usize> = units.cuts().iter().map(|c| c.index).collect();
        for index in 0..=conv.messages.len() + 1 {
            let inside = rendered
                .exchanges
                .iter()
                .any(|&(start, end, _)| start < index && index < end);
            if inside {
                prop_assert_eq!(units.cut_at(index), None, "index {}", index);
                prop_assert!(!offered.contains(&index), "index {}", index);
            }
        }
        prop_assert_eq!(units.cut_at(conv.messages.len()), None);
        for &start in rendered.round_starts.iter().skip(1) {
            prop_assert_eq!(units.cut_at(start).map(|c| c.kind),
                            Some(CutKind::RoundStart), "round start {}", start);
        }
    }
}

proptest! {
    #![proptest_config(persisted(1500))]

    /// Removing the call of an answered result makes that result an orphan, reported where the
    /// result is.
    #[test]
    fn removing_a_call_reports_the_orphan_result_in_place(plan in plan(1), pick in any::<Index>()) {
        let format = plan.format;
        let mut body = render(&plan).body;
        let items = items_mut(format, &mut body);
        let mut expected = Vec::new();
        match format {
            Format::Anthropic => {
                let results: Vec<(usize, usize, String)> = items.iter().enumerate()
                    .flat_map(|(i, m)| m["content"].as_array().into_iter().flatten().enumerate()
                        .filter(|(_, b)| b["type"] == "tool_result")
                        .map(move |(k, b)| (i, k, b["tool_use_id"].as_str().unwrap().to_string())))
                    .collect();
                let (ri, rk, id) = pick.get(&results).clone();
                let content = items[ri - 1]["content"].as_array_mut().unwrap();
                let j = content.iter().position(|b| b["id"] == id.as_str()).unwrap();
                content.remove(j);
                if content.is_empty() {
                    expected.push(violation(format, ri - 1, None, ViolationKind::EmptyContent));
                }
                expected.push(violation(format, ri, Some(rk), ViolationKind::OrphanResult {
                    id, expected: "in the previous message" }));
            }
            Format::OpenAiChat => {
                let results: Vec<(usize, String)> = items.iter().enumerate()
                    .filter(|(_, m)| m["role"] == "tool")
                    .map(|(i, m)| (i, m["tool_call_id"].as_str().unwrap().to_string()))
                    .collect();
                let (t, id) = pick.get(&results).clone();
                let a = items[..t].iter()
                    .rposition(|m| m["tool_calls"].as_array().is_some_and(|c| c.iter().any(|c| c["id"] == id.as_str())))
                    .unwrap();
                let call_msg = &mut items[a];
                let calls = call_msg["tool_calls"].as_array_mut().unwrap();
                calls.retain(|c| c["id"] != id.as_str());
                if calls.is_empty() {
                    call_msg.as_object_mut().unwrap().remove("tool_calls");
                    // An assistant message with neither content nor tool_calls is refused.
                    if call_msg["content"].is_null() {
                        expected.push(violation(format, a, None, ViolationKind::EmptyContent));
                    }
                }
                expected.push(violation(format, t, None, ViolationKind::OrphanResult {
                    id, expected: "in a directly preceding assistant tool_calls" }));
            }
            Format::OpenAiResponses => {
                let results: Vec<(usize, String)> = items.iter().enumerate()
                    .filter(|(_, m)| m["type"] == "function_call_output")
                    .map(|(i, m)| (i, m["call_id"].as_str().unwrap().to_string()))
                    .collect();
                let (o, id) = pick.get(&results).clone();
                let c = items.iter().position(|m| m["type"] == "function_call" && m["call_id"] == id.as_str())
                    .unwrap();
                prop_assert!(c < o);
                items.remove(c);
                // A reasoning item the call followed now stands before an item the model did not
                // emit (B2): reported too, where it is.
                let emitted = |m: &Value| m["type"] == "function_call" || m["role"] == "assistant";
                if c > 0 && items[c - 1]["type"] == "reasoning" && !emitted(&items[c]) {
                    let id = items[c - 1]["id"].as_str().unwrap().to_string();
                    expected.push(violation(format, c - 1, None, ViolationKind::ReasoningWithoutFollower { id }));
                }
                expected.push(violation(format, o - 1, None, ViolationKind::OrphanResult {
                    id, expected: "earlier in the input" }));
            }
            _ => unreachable!("a format the generator does not know"),
        }
        let conv = read(format, &body);
        prop_assert_eq!(validate(&conv, format, OPEN_TAIL), expected);
    }
}

proptest! {
    #![proptest_config(persisted(1500))]

    /// A second copy of a result is reported as a duplicate where the copy is, naming the id.
    #[test]
    fn duplicating_a_result_reports_the_duplicate_in_place(
        plan in plan(1),
        pick in any::<Index>(),
        place in any::<Index>(),
    ) {
        let format = plan.format;
        let mut body = render(&plan).body;
        let items = items_mut(format, &mut body);
        let expected = match format {
            Format::Anthropic => {
                let results: Vec<(usize, usize, String)> = items.iter().enumerate()
                    .flat_map(|(i, m)| m["content"].as_array().into_iter().flatten().enumerate()
                        .filter(|(_, b)| b["type"] == "tool_result")
                        .map(move |(k, b)| (i, k, b["tool_use_id"].as_str().unwrap().to_string())))
                    .collect();
                let (ri, rk, id) = pick.get(&results).clone();
                let content = items[ri]["content"].as_array_mut().unwrap();
                let n_results = content.iter().filter(|b| b["type"] == "tool_result").count();
                // Anywhere after the original among the tool_result blocks (they stay first).
                let p = rk + 1 + place.index(n_results - rk);
                let copy = content[rk].clone();
                content.insert(p, copy);
                violation(format, ri, Some(p), ViolationKind::DuplicateResult { id })
            }
            _ => {
                let (kind, key) = match format {
                    Format::OpenAiChat => ("tool", "tool_call_id"),
                    _ => ("function_call_output", "call_id"),
                };
                let results: Vec<(usize, String)> = items.iter().enumerate()
                    .filter(|(_, m)| m["type"] == kind || m["role"] == kind)
                    .map(|(i, m)| (i, m[key].as_str().unwrap().to_string()))
                    .collect();
                let (t, id) = pick.get(&results).clone();
                // Anywhere after the original, but not inside a run of assistant items nor
                // between a legacy function_call and the function message answering it.
                let places: Vec<usize> = (t + 1..=items.len())
                    .filter(|&p| p == items.len()
                        || !((is_assistant_item(format, &items[p - 1])
                             && is_assistant_item(format, &items[p]))
                             || items[p]["role"] == "function"))
                    .collect();
                let p = *place.get(&places);
                let copy = items[t].clone();
                items.insert(p, copy);
                violation(format, p, None, ViolationKind::DuplicateResult { id })
            }
        };
        let conv = read(format, &body);
        prop_assert_eq!(validate(&conv, format, OPEN_TAIL), vec![expected]);
    }
}
