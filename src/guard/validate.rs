//! Provider rules: is this conversation a request the provider accepts?
//!
//! [`validate`] runs one `Checker` over the messages. The checks every format shares (the
//! messages are there, call ids are unique) are here, each rule family in its own file:
//!
//! - `anthropic`: Anthropic Messages roles, tool_use / tool_result pairing, empty content;
//! - `openai`: OpenAI Chat and Responses pairing, `arguments` as JSON, null content;
//! - `references`: Anthropic server tools and callers, Responses approvals and safety checks;
//! - `media`: inline base64 image data and Anthropic `cache_control` breakpoints;
//! - `junction`: where a run stands at its end ([`Junction`]), so that a continuation checks
//!   only its new messages ([`validate_continuation`]).

mod anthropic;
mod junction;
mod media;
mod openai;
#[cfg(test)]
mod reference_tests;
mod references;
#[cfg(test)]
mod tests;

use super::refs;
use super::units::Units;
use super::violation::{Violation, ViolationKind, path_of};
use crate::conversation::{Block, Conversation, ToolInput};
use crate::format::Format;
use foldhash::{HashSet, HashSetExt};
pub use junction::{Junction, validate_continuation};
use junction::{reaching, tail_units};
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
/// References beyond call/result pairs (see `super::refs` for the sources): Anthropic server
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

/// Whether a block is a reference [`validate`] follows beyond client call / result pairs (an
/// Anthropic server tool use or result, a `caller`, a Responses approval request or response,
/// computer-use safety checks) or a provider compaction item: the checks of these span turns
/// and units, so a continuation holding one is validated whole.
pub fn has_reference(format: Format, b: &Block) -> bool {
    let table = format.rules();
    if refs::server_use_id(table, b).is_some()
        || refs::server_result_id(table, b).is_some()
        || refs::caller_id(b).is_some()
        || refs::is_compaction(table, b)
    {
        return true;
    }
    match b {
        Block::Other(_) => refs::approval_ref(table, b).is_some_and(|(kind, _, names)| {
            kind == crate::rules::BlockKind::ApprovalRequest || names.is_some()
        }),
        Block::ToolUse(t) => {
            matches!(&t.input, ToolInput::Json(v) if v.get("pending_safety_checks").is_some())
        }
        Block::ToolResult(r) => r.extra.contains_key("acknowledged_safety_checks"),
        _ => false,
    }
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
    /// The bad inline images found in messages `from..` (see [`Junction::bad_images`]).
    bad_images: Vec<Violation>,
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
            bad_images: Vec::new(),
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
            // Gemini's shape is Anthropic's (calls in a model turn, every response in the one
            // user turn after it, D1): the same table-driven checks, read from its table.
            Format::Gemini => self.anthropic(options),
            Format::OpenAiChat => self.chat(options),
            Format::OpenAiResponses => {
                self.responses(options);
                self.approvals();
            }
        }
        if self.seed.is_none() {
            self.references = self
                .conv
                .blocks()
                .any(|(_, _, b)| has_reference(self.format, b));
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
                0 => Units::of(self.conv, self.format),
                _ => tail_units(self.conv, from, self.format),
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
        let mut bad_images = self.seed.map(|j| j.bad_images.clone()).unwrap_or_default();
        bad_images.append(&mut self.bad_images);
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
            bad_images,
            open_from,
        };
        (self.out, junction)
    }

    fn push(&mut self, message: Option<usize>, block: Option<usize>, kind: ViolationKind) {
        let path = match message {
            Some(i) => path_of(self.format, self.conv, i, block),
            None => self.format.messages_key().to_string(),
        };
        let rule = kind.rule_id(self.format);
        self.out.push(Violation {
            path,
            message,
            block,
            kind,
            rule,
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
}
