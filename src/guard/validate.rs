//! Provider rules: is this conversation a request the provider accepts?

use super::refs;
use super::units::{Units, is_clean_user};
use super::violation::{Violation, ViolationKind, path_of};
use crate::conversation::{Block, ContentForm, Conversation, Role, ToolInput};
use crate::format::Format;
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::borrow::Cow;

/// Options of [`validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidateOptions {
    /// Accept a history that ends with calls still waiting for their results (an agent
    /// mid-turn). On by default; off for a request that is about to be sent as is.
    pub allow_open_tail: bool,
}

impl Default for ValidateOptions {
    fn default() -> Self {
        ValidateOptions {
            allow_open_tail: true,
        }
    }
}

/// Checks a conversation against the pairing invariants and the rules of `format`, and returns
/// every violation found, in message order. An empty list means the provider accepts it.
///
/// Pairing (all formats): call ids unique; each result answers an earlier call; no call answered
/// twice; no call left unanswered except in the open last exchange (when allowed).
/// Anthropic (Messages API, tool use docs): roles user/assistant only, first message user,
/// each tool_use answered by tool_result blocks in the very next (user) message, tool_result
/// blocks first in it, tool_use input an object, no empty text, thinking only in assistant turns.
/// OpenAI Chat: the tool messages answering an assistant's tool_calls follow it directly, one
/// per id; `arguments` is a JSON object string; `content` is null or missing only on an assistant
/// message with tool_calls (or a function_call, refusal or audio); a legacy `role: "function"`
/// message directly follows the assistant `function_call` it answers, with its `name` (Chat
/// Completions API reference, deprecated function calling; an unanswered `function_call` is
/// allowed). OpenAI Responses: each function_call_output follows its function_call;
/// `arguments` is a JSON object string.
///
/// References beyond call/result pairs (see [`super::refs`] for the sources): Anthropic server
/// tool results name a `server_tool_use` earlier in their turn, a `server_tool_use` of an
/// earlier turn has its result, `tool_use.caller.tool_id` names an earlier `server_tool_use`;
/// Responses approvals name an earlier `mcp_approval_request`, a `computer_call_output`
/// acknowledges only its call's pending safety checks. Anthropic `cache_control`: at most 4, none
/// on an empty text block. Every format: inline base64 image data is not empty and decodes.
pub fn validate(
    conversation: &Conversation,
    format: Format,
    options: ValidateOptions,
) -> Vec<Violation> {
    let mut v = Checker::new(conversation, format, None);
    v.run(options);
    v.out
}

/// Where [`validate`] stands after the messages of a conversation that it accepted: what a
/// continuation of it (the same messages followed by new ones, as an agent resends its history)
/// needs so that only the new messages are checked ([`validate_continuation`]).
///
/// Shapes: the call ids and answered result ids of the messages so far are persistent sets
/// (`imbl`), so a continuation shares them (O(1) clone) and adds its own; the calls still
/// waiting, the `cache_control` count and the start of the unit that reaches the end are small.
#[derive(Debug, Clone, PartialEq)]
pub struct Junction {
    format: Format,
    /// Messages covered.
    at: usize,
    /// Every tool_use id of messages `..at`.
    calls: imbl::HashSet<String>,
    /// Answered result ids of messages `..at`: Anthropic every tool_result id, OpenAI Chat the
    /// tool messages that answered a pending call, Responses the outputs that answered a call.
    answered: imbl::HashSet<String>,
    /// Calls still waiting at `at`, with their message index: OpenAI Chat the calls awaiting
    /// tool messages, Responses the calls without an output.
    pending: Vec<(String, usize)>,
    /// OpenAI Chat: the legacy `function_call` of message `at - 1`, which only the next message
    /// may answer.
    legacy: Option<String>,
    /// `cache_control` breakpoints of the request with messages `..at` (tools and system too).
    breakpoints: usize,
    /// Messages `..at` hold a reference beyond call / result pairs ([`has_reference`]): a
    /// continuation is then validated whole.
    references: bool,
    /// [`Junction::estimated_bytes`] of `calls` and `answered`, kept as ids are added.
    id_bytes: usize,
    /// Start of the earliest tool exchange or assistant run that reaches message `at` (`at`
    /// when none does): new messages extend only these units ([`Units`]), so a continuation's
    /// last exchange is found among its messages `open_from..`.
    open_from: usize,
}

impl Junction {
    /// The junction at the end of `conversation` (one pass, as [`validate`] makes).
    pub fn of(conversation: &Conversation, format: Format) -> Junction {
        let mut v = Checker::new(conversation, format, None);
        v.run(ValidateOptions::default());
        v.finish().1
    }

    /// An estimate of the heap bytes it holds: each id's bytes plus 64 for its string and its
    /// node in the persistent set.
    pub fn estimated_bytes(&self) -> usize {
        self.id_bytes + self.pending.len() * 64
    }

    /// [`Junction::of`] with the conversation's layout already computed (its units are not
    /// computed again).
    pub fn of_laid_out(
        conversation: &Conversation,
        format: Format,
        layout: &super::Layout,
    ) -> Junction {
        let mut v = Checker::new(conversation, format, None);
        v.tail = Some(Cow::Borrowed(layout.units()));
        v.run(ValidateOptions::default());
        v.finish().1
    }

    /// Messages covered.
    pub fn messages(&self) -> usize {
        self.at
    }

    /// The format whose rules it follows.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether the messages covered hold a reference beyond call / result pairs (server tools,
    /// callers, approvals, safety checks) or a provider compaction item.
    pub fn has_references(&self) -> bool {
        self.references
    }

    /// The last tool exchange of `conversation`, a continuation of the junction's (its first
    /// [`Junction::messages`] are the junction's), with indices of `conversation`: found among
    /// its messages from [`Junction::open_from`] on, in proportion to them. Exact when the
    /// junction has no references ([`Junction::has_references`]); `None` when there is none.
    pub fn last_exchange(&self, conversation: &Conversation) -> Option<super::units::Exchange> {
        tail_units(conversation, self.open_from)
            .exchanges
            .pop()
            .map(|mut e| {
                e.start += self.open_from;
                e.end += self.open_from;
                e
            })
    }
}

/// [`Units::of`] the messages `from..` of `c` (a copy of them), with their own indices.
fn tail_units(c: &Conversation, from: usize) -> Units {
    let tail = Conversation {
        messages: c.messages.get(from..).unwrap_or(&[]).to_vec(),
        ..Conversation::default()
    };
    Units::of(&tail)
}

/// Start of the earliest exchange or assistant run of `units` (of messages `from..`) that
/// reaches their end, as an index of the whole conversation.
fn reaching(units: &Units, from: usize) -> usize {
    let n = units.len;
    units
        .exchanges
        .iter()
        .map(|e| (e.start, e.end))
        .chain(units.assistant_runs.iter().copied())
        .filter(|&(_, e)| e == n)
        .map(|(s, _)| s)
        .min()
        .unwrap_or(n)
        + from
}

/// Whether a block is a reference [`validate`] follows beyond client call / result pairs (an
/// Anthropic server tool use or result, a `caller`, a Responses approval request or response,
/// computer-use safety checks) or a provider compaction item: the checks of these span turns
/// and units, so a continuation holding one is validated whole.
pub fn has_reference(b: &Block) -> bool {
    if refs::server_use_id(b).is_some()
        || refs::server_result_id(b).is_some()
        || refs::caller_id(b).is_some()
        || refs::is_compaction(b)
    {
        return true;
    }
    match b {
        Block::Other(_) => refs::approval_ref(b)
            .is_some_and(|(t, _, names)| t == "mcp_approval_request" || names.is_some()),
        Block::ToolUse(t) => {
            matches!(&t.input, ToolInput::Json(v) if v.get("pending_safety_checks").is_some())
        }
        Block::ToolResult(r) => r.extra.contains_key("acknowledged_safety_checks"),
        _ => false,
    }
}

/// [`validate`] of `conversation`, a continuation of the conversation `junction` was made of
/// (its first [`Junction::messages`] messages are those, unchanged, and [`validate`] accepted
/// them), checking only the junction and the new messages: the violations [`validate`] would
/// find in the whole, and the junction at the new end. Work in proportion to the new messages
/// (and the unit that reaches the junction), not to the history.
///
/// `None` when it cannot be done so and the caller validates the whole: another format, an
/// empty prefix, a `conversation` shorter than the prefix, or a reference beyond call / result
/// pairs ([`has_reference`]) in the prefix or the new messages.
pub fn validate_continuation(
    conversation: &Conversation,
    junction: &Junction,
    format: Format,
    options: ValidateOptions,
) -> Option<(Vec<Violation>, Junction)> {
    let n = conversation.messages.len();
    if junction.format != format || junction.at == 0 || junction.at > n || junction.references {
        return None;
    }
    if conversation.messages[junction.at..]
        .iter()
        .any(|m| m.content.iter().any(has_reference))
    {
        return None;
    }
    let mut v = Checker::new(conversation, format, Some(junction));
    v.run(options);
    Some(v.finish())
}

/// A set of ids: those of a junction (persistent, shared) and those found after it.
struct Ids<'a> {
    seed: Option<&'a imbl::HashSet<String>>,
    here: HashSet<&'a str>,
    /// `here` in the order found (the next junction adds them).
    order: Vec<&'a str>,
}

impl<'a> Ids<'a> {
    fn new(seed: Option<&'a imbl::HashSet<String>>) -> Ids<'a> {
        Ids {
            seed,
            here: HashSet::new(),
            order: Vec::new(),
        }
    }

    fn contains(&self, id: &str) -> bool {
        self.here.contains(id) || self.seed.is_some_and(|s| s.contains(id))
    }

    /// Adds `id`; false when it was there already.
    fn insert(&mut self, id: &'a str) -> bool {
        if self.seed.is_some_and(|s| s.contains(id)) || !self.here.insert(id) {
            return false;
        }
        self.order.push(id);
        true
    }

    /// The seed with the ids found added, and the estimated bytes of those (see
    /// [`Junction::estimated_bytes`]).
    fn into_set(self) -> (imbl::HashSet<String>, usize) {
        let mut set = self.seed.cloned().unwrap_or_default();
        let mut bytes = 0;
        for id in self.order {
            bytes += id.len() + 64;
            set.insert(id.to_string());
        }
        (set, bytes)
    }
}

struct Checker<'a> {
    conv: &'a Conversation,
    format: Format,
    out: Vec<Violation>,
    /// The junction this run continues from (`None`: the whole conversation is checked).
    seed: Option<&'a Junction>,
    /// First message checked: 0, or the junction's end.
    from: usize,
    /// Every call id (the duplicate check).
    calls: Ids<'a>,
    /// Answered result ids (see [`Junction::answered`]).
    answered: Ids<'a>,
    /// Calls still waiting at the end (see [`Junction::pending`]).
    pending: Vec<(String, usize)>,
    legacy: Option<String>,
    breakpoints: usize,
    references: bool,
    /// The units of messages `open_from..` (computed when first needed).
    tail: Option<Cow<'a, Units>>,
}

impl<'a> Checker<'a> {
    fn new(conv: &'a Conversation, format: Format, seed: Option<&'a Junction>) -> Checker<'a> {
        Checker {
            conv,
            format,
            out: Vec::new(),
            seed,
            from: seed.map_or(0, |j| j.at),
            calls: Ids::new(seed.map(|j| &j.calls)),
            answered: Ids::new(seed.map(|j| &j.answered)),
            pending: seed.map(|j| j.pending.clone()).unwrap_or_default(),
            legacy: seed.and_then(|j| j.legacy.clone()),
            breakpoints: 0,
            references: seed.is_some_and(|j| j.references),
            tail: None,
        }
    }

    /// Every check, on the messages from `self.from` on.
    fn run(&mut self, options: ValidateOptions) {
        if self.conv.messages.is_empty() {
            self.push(None, None, ViolationKind::NoMessages);
            return;
        }
        self.unique_calls();
        self.images();
        match self.format {
            Format::Anthropic => {
                self.anthropic(options);
                self.server_tools();
                self.breakpoints();
            }
            Format::OpenAiChat => self.chat(options),
            Format::OpenAiResponses => {
                self.responses(options);
                self.approvals();
            }
        }
        if self.seed.is_none() {
            self.references = self.conv.blocks().any(|(_, _, b)| has_reference(b));
        }
        self.out.sort_by_key(|x| (x.message, x.block));
    }

    /// Start of the units new messages can extend.
    fn open_from(&self) -> usize {
        self.seed.map_or(0, |j| j.open_from)
    }

    /// The units of messages `open_from..` (the whole conversation without a junction).
    fn tail(&mut self) -> &Units {
        let from = self.open_from();
        self.tail.get_or_insert_with(|| {
            Cow::Owned(match from {
                0 => Units::of(self.conv),
                _ => tail_units(self.conv, from),
            })
        })
    }

    /// The last exchange when the history ends inside it with a call unanswered: its start.
    fn open_start(&mut self) -> Option<usize> {
        let from = self.open_from();
        self.tail()
            .exchanges
            .last()
            .filter(|e| e.open)
            .map(|e| e.start + from)
    }

    /// The violations and the junction at the end of the conversation (after
    /// [`Checker::run`]).
    fn finish(mut self) -> (Vec<Violation>, Junction) {
        let from = self.open_from();
        let open_from = reaching(self.tail(), from);
        let (calls, call_bytes) = self.calls.into_set();
        let (answered, answered_bytes) = self.answered.into_set();
        let junction = Junction {
            format: self.format,
            at: self.conv.messages.len(),
            calls,
            answered,
            id_bytes: self.seed.map_or(0, |j| j.id_bytes) + call_bytes + answered_bytes,
            pending: self.pending,
            legacy: self.legacy,
            breakpoints: self.breakpoints,
            references: self.references,
            open_from,
        };
        (self.out, junction)
    }

    fn push(&mut self, message: Option<usize>, block: Option<usize>, kind: ViolationKind) {
        let path = match message {
            Some(i) => path_of(self.format, self.conv, i, block),
            None => self.format.messages_key().to_string(),
        };
        self.out.push(Violation {
            path,
            message,
            block,
            kind,
        });
    }

    /// The blocks of messages `from..`, with their indices.
    fn new_blocks(&self) -> impl Iterator<Item = (usize, usize, &'a Block)> + use<'a> {
        let conv: &'a Conversation = self.conv;
        conv.messages
            .iter()
            .enumerate()
            .skip(self.from)
            .flat_map(|(i, m)| m.content.iter().enumerate().map(move |(j, b)| (i, j, b)))
    }

    fn unique_calls(&mut self) {
        let mut dups = Vec::new();
        for (i, j, b) in self.new_blocks() {
            if let Block::ToolUse(t) = b
                && !self.calls.insert(t.id.as_str())
            {
                dups.push((i, j, t.id.clone()));
            }
        }
        for (i, j, id) in dups {
            self.push(Some(i), Some(j), ViolationKind::DuplicateCall { id });
        }
    }

    fn anthropic(&mut self, options: ValidateOptions) {
        let conv: &'a Conversation = self.conv;
        let msgs = &conv.messages;
        if self.from == 0 && msgs[0].role != Role::User {
            self.push(
                Some(0),
                None,
                ViolationKind::FirstNotUser { role: msgs[0].role },
            );
        }
        // The junction's last message is no longer the last: what depended on that again.
        if let Some(at) = self.from.checked_sub(1) {
            self.anthropic_ending(at, options);
        }
        for (i, m) in msgs.iter().enumerate().skip(self.from) {
            if !matches!(m.role, Role::User | Role::Assistant) {
                self.push(
                    Some(i),
                    None,
                    ViolationKind::RoleNotAllowed { role: m.role },
                );
            }
            let prev_calls: Vec<&str> = match i.checked_sub(1).map(|p| &msgs[p]) {
                Some(p) if p.role == Role::Assistant => {
                    p.tool_uses().map(|t| t.id.as_str()).collect()
                }
                _ => Vec::new(),
            };
            let mut other_before = false;
            let mut here: HashSet<&str> = HashSet::new();
            for (j, b) in m.content.iter().enumerate() {
                match b {
                    Block::ToolUse(t) => {
                        if m.role != Role::Assistant {
                            self.push(
                                Some(i),
                                Some(j),
                                ViolationKind::BlockNotAllowed {
                                    block: "tool_use".into(),
                                    role: m.role,
                                },
                            );
                        }
                        if !matches!(&t.input, ToolInput::Json(serde_json::Value::Object(_))) {
                            self.push(
                                Some(i),
                                Some(j),
                                ViolationKind::InputNotObject { id: t.id.clone() },
                            );
                        }
                    }
                    Block::ToolResult(r) => {
                        let id = r.tool_use_id.as_str();
                        if m.role != Role::User {
                            self.push(
                                Some(i),
                                Some(j),
                                ViolationKind::BlockNotAllowed {
                                    block: "tool_result".into(),
                                    role: m.role,
                                },
                            );
                        } else if here.contains(id) || self.answered.contains(id) {
                            self.push(
                                Some(i),
                                Some(j),
                                ViolationKind::DuplicateResult { id: id.into() },
                            );
                        } else if !prev_calls.contains(&id) {
                            self.push(
                                Some(i),
                                Some(j),
                                ViolationKind::OrphanResult {
                                    id: id.into(),
                                    expected: "in the previous message",
                                },
                            );
                        }
                        if other_before {
                            self.push(
                                Some(i),
                                Some(j),
                                ViolationKind::ResultNotFirst { id: id.into() },
                            );
                        }
                        here.insert(id);
                    }
                    Block::Thinking(_) if m.role != Role::Assistant => {
                        self.push(
                            Some(i),
                            Some(j),
                            ViolationKind::BlockNotAllowed {
                                block: b.kind().into(),
                                role: m.role,
                            },
                        );
                    }
                    _ => {}
                }
                if !matches!(b, Block::ToolResult(_)) {
                    other_before = true;
                }
            }
            for id in here {
                self.answered.insert(id);
            }
            self.anthropic_ending(i, options);
        }
    }

    /// The Anthropic checks of message `i` that depend on whether it is the last one: only the
    /// final assistant message may be empty ("" or [], a prefill; `content` itself is required,
    /// a string or an array, on every message), and its calls are answered in the next message
    /// or, at the end, left open only when allowed.
    fn anthropic_ending(&mut self, i: usize, options: ValidateOptions) {
        let conv: &'a Conversation = self.conv;
        let msgs = &conv.messages;
        let m = &msgs[i];
        let last = i + 1 == msgs.len();
        let lenient = last && m.role == Role::Assistant;
        let missing = matches!(m.form, ContentForm::Null | ContentForm::Absent);
        if m.content.is_empty() && (missing || !lenient) {
            self.push(Some(i), None, ViolationKind::EmptyContent);
        }
        for (j, b) in m.content.iter().enumerate() {
            if matches!(b, Block::Text(t) if t.text.trim().is_empty()) && !lenient {
                self.push(Some(i), Some(j), ViolationKind::EmptyText);
            }
        }
        if m.role == Role::Assistant && m.has_tool_uses() {
            let calls: Vec<&str> = m.tool_uses().map(|t| t.id.as_str()).collect();
            match msgs.get(i + 1) {
                None => {
                    if !(options.allow_open_tail && self.open_start().is_some()) {
                        let ids = calls.iter().map(|s| s.to_string()).collect();
                        self.push(
                            Some(i),
                            None,
                            ViolationKind::MissingResults {
                                ids,
                                expected: "(the history ends)",
                            },
                        );
                    }
                }
                Some(next) => {
                    let got: HashSet<&str> = if next.role == Role::User {
                        next.tool_results()
                            .map(|r| r.tool_use_id.as_str())
                            .collect()
                    } else {
                        HashSet::new()
                    };
                    let missing: Vec<String> = calls
                        .iter()
                        .filter(|c| !got.contains(*c))
                        .map(|s| s.to_string())
                        .collect();
                    if !missing.is_empty() {
                        self.push(
                            Some(i),
                            None,
                            ViolationKind::MissingResults {
                                ids: missing,
                                expected: "in the next message",
                            },
                        );
                    }
                }
            }
        }
    }

    fn chat(&mut self, options: ValidateOptions) {
        use crate::format::openai_chat::{is_legacy_call, is_legacy_result};
        let conv: &'a Conversation = self.conv;
        let mut pending = std::mem::take(&mut self.pending);
        // The legacy function_call of the previous message: only the next message may answer it.
        let mut legacy = self.legacy.take();
        for (i, m) in conv.messages.iter().enumerate().skip(self.from) {
            let legacy_open = legacy.take();
            if m.role != Role::Tool && !pending.is_empty() {
                let ids = pending.drain(..).map(|(id, _)| id).collect();
                self.push(
                    Some(i),
                    None,
                    ViolationKind::MissingResults {
                        ids,
                        expected: "before this message",
                    },
                );
            }
            let has_calls = m.content.iter().any(|b| matches!(b, Block::ToolUse(_)));
            if !has_calls && matches!(m.form, ContentForm::Null | ContentForm::Absent) {
                // Chat Completions API reference: an assistant message's `content` is required
                // unless it carries `tool_calls` or `function_call`; a refusal or audio reply
                // (as the API returns them) is taken as content too. Every other role needs it.
                let stands_in = ["function_call", "refusal", "audio"]
                    .iter()
                    .any(|k| m.extra.get(*k).is_some_and(|v| !v.is_null()));
                if !(m.role == Role::Assistant && stands_in) {
                    self.push(Some(i), None, ViolationKind::EmptyContent);
                }
            }
            match m.role {
                Role::Assistant => {
                    for (j, b) in m.content.iter().enumerate() {
                        if let Block::ToolUse(t) = b {
                            if is_legacy_call(t) {
                                legacy = Some(t.id.clone());
                            } else {
                                pending.push((t.id.clone(), i));
                            }
                            self.arguments_json(i, j, &t.id, &t.input);
                        }
                    }
                }
                Role::Tool => {
                    for r in m.tool_results() {
                        let id = r.tool_use_id.clone();
                        let key = r.tool_use_id.as_str();
                        if is_legacy_result(r) {
                            if legacy_open.as_deref() != Some(id.as_str()) {
                                self.push(
                                    Some(i),
                                    None,
                                    ViolationKind::OrphanResult {
                                        id: format!(
                                            "of function message {:?}",
                                            m.extra
                                                .get("name")
                                                .and_then(serde_json::Value::as_str)
                                                .unwrap_or("")
                                        ),
                                        expected: "in a directly preceding assistant function_call of the same name",
                                    },
                                );
                            }
                        } else if self.answered.contains(key) {
                            self.push(Some(i), None, ViolationKind::DuplicateResult { id });
                        } else if let Some(pos) = pending.iter().position(|(p, _)| *p == id) {
                            pending.remove(pos);
                            self.answered.insert(key);
                        } else {
                            self.push(
                                Some(i),
                                None,
                                ViolationKind::OrphanResult {
                                    id,
                                    expected: "in a directly preceding assistant tool_calls",
                                },
                            );
                        }
                    }
                }
                _ => {}
            }
        }
        self.legacy = legacy;
        self.pending = pending;
        if !self.pending.is_empty() && !options.allow_open_tail {
            let at = self.pending[0].1;
            let ids = self.pending.iter().map(|(id, _)| id.clone()).collect();
            self.push(
                Some(at),
                None,
                ViolationKind::MissingResults {
                    ids,
                    expected: "(the history ends)",
                },
            );
        }
    }

    fn responses(&mut self, options: ValidateOptions) {
        let conv: &'a Conversation = self.conv;
        // Calls seen so far, in message order (a result answers an earlier one), and those
        // without an output yet.
        let mut calls = Ids::new(self.seed.map(|j| &j.calls));
        let mut waiting = std::mem::take(&mut self.pending);
        for (i, m) in conv.messages.iter().enumerate().skip(self.from) {
            for (j, b) in m.content.iter().enumerate() {
                match b {
                    Block::ToolUse(t) => {
                        if calls.insert(t.id.as_str()) {
                            waiting.push((t.id.clone(), i));
                        }
                        self.arguments_json(i, j, &t.id, &t.input);
                    }
                    Block::ToolResult(r) => {
                        let id = r.tool_use_id.as_str();
                        if !calls.contains(id) {
                            self.push(
                                Some(i),
                                None,
                                ViolationKind::OrphanResult {
                                    id: id.into(),
                                    expected: "earlier in the input",
                                },
                            );
                        } else if !self.answered.insert(id) {
                            self.push(
                                Some(i),
                                None,
                                ViolationKind::DuplicateResult { id: id.into() },
                            );
                        } else if let Some(pos) = waiting.iter().position(|(w, _)| w == id) {
                            waiting.remove(pos);
                        }
                    }
                    _ => {}
                }
            }
        }
        self.pending = waiting;
        if self.pending.is_empty() {
            return;
        }
        let open_start = self.open_start();
        let missing = self.pending.clone();
        for (id, i) in missing {
            let in_open_tail = open_start.is_some_and(|s| i >= s);
            if !(options.allow_open_tail && in_open_tail) {
                self.push(
                    Some(i),
                    None,
                    ViolationKind::MissingResults {
                        ids: vec![id],
                        expected: "in the input",
                    },
                );
            }
        }
    }

    /// Inline base64 images, at the top level of a message and inside tool results.
    fn images(&mut self) {
        let mut found = Vec::new();
        for (i, j, b) in self.new_blocks() {
            let nested: Vec<&Block> = match b {
                Block::ToolResult(r) => match &r.content {
                    Some(crate::conversation::ToolResultContent::Blocks(bs)) => bs.iter().collect(),
                    _ => Vec::new(),
                },
                b => vec![b],
            };
            for nb in nested {
                if let Block::Image(v) = nb
                    && let Some(reason) = crate::tokens::image::image_data_fault(v)
                {
                    found.push((i, j, reason));
                }
            }
        }
        for (i, j, reason) in found {
            self.push(Some(i), Some(j), ViolationKind::BadImage { reason });
        }
    }

    /// Anthropic server tools and programmatic tool calling (see [`refs`]).
    fn server_tools(&mut self) {
        if self.seed.is_some() {
            // A continuation has no server tool blocks (else it is validated whole).
            return;
        }
        let mut turn = 0usize;
        let mut uses: HashMap<&str, (usize, usize, usize)> = HashMap::new();
        let mut done: HashSet<&str> = HashSet::new();
        let mut found = Vec::new();
        for (i, m) in self.conv.messages.iter().enumerate() {
            if i > 0 && is_clean_user(m) {
                turn += 1;
            }
            for (j, b) in m.content.iter().enumerate() {
                if let Some(id) = refs::server_use_id(b) {
                    if m.role != Role::Assistant {
                        found.push((
                            i,
                            j,
                            ViolationKind::BlockNotAllowed {
                                block: b.kind().into(),
                                role: m.role,
                            },
                        ));
                    }
                    uses.entry(id).or_insert((i, j, turn));
                }
                if let Some(id) = refs::server_result_id(b) {
                    match uses.get(id) {
                        Some(&(_, _, t)) if t == turn && done.insert(id) => {}
                        Some(&(_, _, t)) if t == turn => {
                            found.push((i, j, ViolationKind::DuplicateResult { id: id.into() }))
                        }
                        _ => {
                            found.push((i, j, ViolationKind::OrphanServerResult { id: id.into() }))
                        }
                    }
                }
                if let (Some(caller), Block::ToolUse(t)) = (refs::caller_id(b), b)
                    && !uses.contains_key(caller)
                {
                    found.push((
                        i,
                        j,
                        ViolationKind::CallerMissing {
                            id: t.id.clone(),
                            caller: caller.into(),
                        },
                    ));
                }
            }
        }
        for (id, &(i, j, t)) in &uses {
            if t < turn && !done.contains(id) {
                found.push((
                    i,
                    j,
                    ViolationKind::ServerCallWithoutResult {
                        id: (*id).to_string(),
                    },
                ));
            }
        }
        found.sort_by_key(|f| (f.0, f.1));
        for (i, j, kind) in found {
            self.push(Some(i), Some(j), kind);
        }
    }

    /// Anthropic `cache_control` breakpoints (see [`super::cache`]).
    fn breakpoints(&mut self) {
        // One scan: the sites counted are the ones checked for an empty text block.
        let (earlier, sites) = match self.seed {
            None => (0, super::cache::sites(self.conv)),
            Some(j) => (
                j.breakpoints,
                super::cache::sites_from(self.conv, self.from),
            ),
        };
        let found = earlier + sites.len();
        self.breakpoints = found;
        if found > super::cache::MAX_BREAKPOINTS {
            self.push(None, None, ViolationKind::TooManyCacheBreakpoints { found });
        }
        let empty = sites
            .into_iter()
            .filter(|s| super::cache::on_empty(self.conv, s));
        for site in empty {
            match site {
                super::cache::Site::Block { message, block, .. } => {
                    self.push(
                        Some(message),
                        Some(block),
                        ViolationKind::CacheControlOnEmptyText,
                    );
                }
                _ => self.push(None, None, ViolationKind::CacheControlOnEmptyText),
            }
        }
    }

    /// Responses MCP approvals and computer-use safety checks (see [`refs`]).
    fn approvals(&mut self) {
        if self.seed.is_some() {
            // A continuation has no approvals or safety checks (else it is validated whole).
            return;
        }
        let mut requests: HashSet<&str> = HashSet::new();
        let mut pending_checks: HashMap<&str, HashSet<&str>> = HashMap::new();
        let mut found = Vec::new();
        for (i, j, b) in self.conv.blocks() {
            if let Some((t, id, names)) = refs::approval_ref(b) {
                if t == "mcp_approval_request"
                    && let Some(id) = id
                {
                    requests.insert(id);
                }
                if let Some(r) = names
                    && !requests.contains(r)
                {
                    found.push((
                        i,
                        j,
                        ViolationKind::OrphanApproval {
                            item: t.into(),
                            id: r.into(),
                        },
                    ));
                }
            }
            match b {
                Block::ToolUse(t) => {
                    if let ToolInput::Json(v) = &t.input
                        && let Some(serde_json::Value::Array(checks)) =
                            v.get("pending_safety_checks")
                    {
                        pending_checks.insert(
                            t.id.as_str(),
                            checks
                                .iter()
                                .filter_map(|c| c.get("id").and_then(serde_json::Value::as_str))
                                .collect(),
                        );
                    }
                }
                Block::ToolResult(r) => {
                    if let Some(serde_json::Value::Array(acks)) =
                        r.extra.get("acknowledged_safety_checks")
                    {
                        let raised = pending_checks.get(r.tool_use_id.as_str());
                        for ack in acks {
                            let Some(check) = ack.get("id").and_then(serde_json::Value::as_str)
                            else {
                                continue;
                            };
                            if !raised.is_some_and(|s| s.contains(check)) {
                                found.push((
                                    i,
                                    j,
                                    ViolationKind::UnknownSafetyCheck {
                                        id: r.tool_use_id.clone(),
                                        check: check.into(),
                                    },
                                ));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        for (i, j, kind) in found {
            self.push(Some(i), Some(j), kind);
        }
    }

    fn arguments_json(&mut self, i: usize, j: usize, id: &str, input: &ToolInput) {
        if let ToolInput::Arguments(s) = input {
            let reason = match serde_json::from_str::<serde_json::Value>(s) {
                Ok(serde_json::Value::Object(_)) => return,
                Ok(_) => "not an object".to_string(),
                Err(e) => e.to_string(),
            };
            self.push(
                Some(i),
                Some(j),
                ViolationKind::ArgumentsNotJson {
                    id: id.into(),
                    reason,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chat_violations(messages: &serde_json::Value) -> Vec<(Option<usize>, ViolationKind)> {
        let conv = Format::OpenAiChat
            .read(&json!({ "messages": messages }))
            .expect("readable");
        validate(&conv, Format::OpenAiChat, ValidateOptions::default())
            .into_iter()
            .map(|v| (v.message, v.kind))
            .collect()
    }

    #[test]
    fn chat_assistant_without_content_or_tool_calls_is_refused() {
        let found = chat_violations(&json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null},
            {"role": "user", "content": "again"},
            {"role": "assistant"},
        ]));
        assert_eq!(
            found,
            vec![
                (Some(1), ViolationKind::EmptyContent),
                (Some(3), ViolationKind::EmptyContent)
            ]
        );
    }

    #[test]
    fn a_tool_message_needs_content_and_anthropic_content_is_never_null() {
        let found = chat_violations(&json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": null},
            {"role": "tool", "tool_call_id": "c2"},
        ]));
        assert_eq!(
            found,
            vec![
                (Some(2), ViolationKind::EmptyContent),
                (Some(3), ViolationKind::EmptyContent)
            ]
        );
        for last in [
            json!({"role": "assistant", "content": null}),
            json!({"role": "assistant"}),
        ] {
            let conv = Format::Anthropic
                .read(&json!({"messages": [{"role": "user", "content": "hi"}, last]}))
                .expect("readable");
            let found: Vec<_> = validate(&conv, Format::Anthropic, ValidateOptions::default())
                .into_iter()
                .map(|v| (v.message, v.kind))
                .collect();
            assert_eq!(found, vec![(Some(1), ViolationKind::EmptyContent)]);
        }
        // An empty final assistant message (a prefill) stays allowed.
        let conv = Format::Anthropic
            .read(&json!({"messages": [{"role": "user", "content": "hi"},
                                       {"role": "assistant", "content": []}]}))
            .expect("readable");
        assert_eq!(
            validate(&conv, Format::Anthropic, ValidateOptions::default()),
            vec![]
        );
    }

    #[test]
    fn chat_null_content_is_fine_beside_tool_calls_or_a_refusal_but_not_for_a_user() {
        let found = chat_violations(&json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": null, "refusal": "I can't help with that."},
            {"role": "user", "content": null},
        ]));
        assert_eq!(found, vec![(Some(4), ViolationKind::EmptyContent)]);
    }
}

#[cfg(test)]
mod reference_tests {
    use super::*;
    use serde_json::json;

    #[allow(clippy::needless_pass_by_value)] // called with json!(...) temporaries
    fn found(format: Format, body: serde_json::Value) -> Vec<(Option<usize>, ViolationKind)> {
        let conv = format.read(&body).expect("readable");
        validate(&conv, format, ValidateOptions::default())
            .into_iter()
            .map(|v| (v.message, v.kind))
            .collect()
    }

    #[test]
    fn server_results_and_callers_must_name_an_earlier_server_tool_use() {
        let got = found(
            Format::Anthropic,
            json!({"messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [
                    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_x", "content": []},
                    {"type": "server_tool_use", "id": "srvtoolu_y", "name": "web_search", "input": {}},
                    {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {},
                     "caller": {"type": "code_execution_20250825", "tool_id": "srvtoolu_z"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "a"}]},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "next"}
            ]}),
        );
        assert_eq!(
            got,
            vec![
                (
                    Some(1),
                    ViolationKind::OrphanServerResult {
                        id: "srvtoolu_x".into()
                    }
                ),
                (
                    Some(1),
                    ViolationKind::ServerCallWithoutResult {
                        id: "srvtoolu_y".into()
                    }
                ),
                (
                    Some(1),
                    ViolationKind::CallerMissing {
                        id: "toolu_a".into(),
                        caller: "srvtoolu_z".into()
                    }
                ),
            ]
        );
    }

    #[test]
    fn a_user_text_between_parallel_tool_messages_is_refused_where_it_stands() {
        let got = found(
            Format::OpenAiChat,
            json!({"messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                    {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "a"},
                {"role": "user", "content": "reminder"},
                {"role": "tool", "tool_call_id": "c2", "content": "b"}
            ]}),
        );
        assert_eq!(
            got,
            vec![
                (
                    Some(3),
                    ViolationKind::MissingResults {
                        ids: vec!["c2".into()],
                        expected: "before this message"
                    }
                ),
                (
                    Some(4),
                    ViolationKind::OrphanResult {
                        id: "c2".into(),
                        expected: "in a directly preceding assistant tool_calls"
                    }
                ),
            ]
        );
    }

    #[test]
    fn approvals_safety_checks_images_and_breakpoints_are_checked() {
        let got = found(
            Format::OpenAiResponses,
            json!({"input": [
                {"role": "user", "content": [{"type": "input_image", "image_url": ""}]},
                {"type": "mcp_approval_response", "approval_request_id": "mcpr_gone", "approve": true},
                {"type": "computer_call", "id": "cu_1", "call_id": "call_c", "action": {"type": "click"},
                 "pending_safety_checks": [{"id": "cs_1", "code": "malicious_instructions"}]},
                {"type": "computer_call_output", "call_id": "call_c",
                 "acknowledged_safety_checks": [{"id": "cs_1"}, {"id": "cs_9"}],
                 "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}}
            ]}),
        );
        assert_eq!(
            got,
            vec![
                (
                    Some(0),
                    ViolationKind::BadImage {
                        reason: "data is empty"
                    }
                ),
                (
                    Some(1),
                    ViolationKind::OrphanApproval {
                        item: "mcp_approval_response".into(),
                        id: "mcpr_gone".into()
                    }
                ),
                (
                    Some(3),
                    ViolationKind::UnknownSafetyCheck {
                        id: "call_c".into(),
                        check: "cs_9".into()
                    }
                ),
            ]
        );
        let cc = json!({"type": "ephemeral"});
        let blocks: Vec<serde_json::Value> = (0..5)
            .map(|k| json!({"type": "text", "text": format!("n{k}"), "cache_control": cc}))
            .collect();
        let got = found(
            Format::Anthropic,
            json!({"messages": [{"role": "user", "content": blocks}]}),
        );
        assert_eq!(
            got,
            vec![(None, ViolationKind::TooManyCacheBreakpoints { found: 5 })]
        );
    }
}
