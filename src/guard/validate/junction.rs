//! Where [`validate`](super::validate) stands at the end of a conversation it accepted (a
//! [`Junction`]), and [`validate_continuation`]: checking a continuation of that
//! conversation from there, in proportion to its new messages.

use super::{Checker, ValidateOptions, has_reference};
use crate::conversation::Conversation;
use crate::format::Format;
use crate::guard::units::{Exchange, Units};
use crate::guard::violation::Violation;
use std::borrow::Cow;

/// Where [`validate`] stands after the messages of a conversation that it accepted (or whose
/// only faults were bad inline images, which the junction keeps, located): what a
/// continuation of it (the same messages followed by new ones, as an agent resends its history)
/// needs so that only the new messages are checked ([`validate_continuation`]).
///
/// Shapes: the call ids and answered result ids of the messages so far are persistent sets
/// (`imbl`), so a continuation shares them (O(1) clone) and adds its own; the calls still
/// waiting, the `cache_control` count and the start of the unit that reaches the end are small.
///
/// [`validate`]: super::validate
#[derive(Debug, Clone, PartialEq)]
pub struct Junction {
    pub(super) format: Format,
    /// Messages covered.
    pub(super) at: usize,
    /// Every tool_use id of messages `..at`.
    pub(super) calls: imbl::HashSet<String>,
    /// Answered result ids of messages `..at`: Anthropic every tool_result id, OpenAI Chat the
    /// tool messages that answered a pending call, Responses the outputs that answered a call.
    pub(super) answered: imbl::HashSet<String>,
    /// Calls still waiting at `at`, with their message index: OpenAI Chat the calls awaiting
    /// tool messages, Responses the calls without an output.
    pub(super) pending: Vec<(String, usize)>,
    /// OpenAI Chat: the legacy `function_call` of message `at - 1`, which only the next message
    /// may answer.
    pub(super) legacy: Option<String>,
    /// `cache_control` breakpoints of the request with messages `..at` (tools and system too).
    pub(super) breakpoints: usize,
    /// Messages `..at` hold a reference beyond call / result pairs ([`has_reference`]): a
    /// continuation is then validated whole.
    pub(super) references: bool,
    /// The inline images of messages `..at` whose data is empty or not base64, as
    /// [`validate`] reported them (`BadImage`): a compaction repaired them, and a continuation
    /// reports them again without looking at the prefix ([`validate_continuation`]). Empty
    /// but for a history that held one.
    pub(super) bad_images: Vec<Violation>,
    /// [`Junction::estimated_bytes`] of `calls` and `answered`, kept as ids are added.
    pub(super) id_bytes: usize,
    /// Start of the earliest tool exchange or assistant run that reaches message `at` (`at`
    /// when none does): new messages extend only these units ([`Units`]), so a continuation's
    /// last exchange is found among its messages `open_from..`.
    pub(super) open_from: usize,
}

impl Junction {
    /// The junction at the end of `conversation` (one pass, as [`validate`] makes).
    ///
    /// [`validate`]: super::validate
    pub fn of(conversation: &Conversation, format: Format) -> Junction {
        let mut v = Checker::new(conversation, format, None);
        v.run(ValidateOptions::default());
        v.finish().1
    }

    /// An estimate of the heap bytes it holds: each id's bytes plus 64 for its string and its
    /// node in the persistent set, and each bad image's path plus 96.
    pub fn estimated_bytes(&self) -> usize {
        self.id_bytes
            + self.pending.len() * 64
            + self
                .bad_images
                .iter()
                .map(|v| v.path.len() + 96)
                .sum::<usize>()
    }

    /// [`Junction::of`] with the conversation's layout already computed (its units are not
    /// computed again).
    pub fn of_laid_out(
        conversation: &Conversation,
        format: Format,
        layout: &crate::guard::Layout,
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
    pub fn last_exchange(&self, conversation: &Conversation) -> Option<Exchange> {
        tail_units(conversation, self.open_from, self.format)
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
pub(super) fn tail_units(c: &Conversation, from: usize, format: Format) -> Units {
    let tail = Conversation {
        messages: c.messages.get(from..).unwrap_or(&[]).to_vec(),
        ..Conversation::default()
    };
    Units::of(&tail, format)
}

/// Start of the earliest exchange or assistant run of `units` (of messages `from..`) that
/// reaches their end, as an index of the whole conversation.
pub(super) fn reaching(units: &Units, from: usize) -> usize {
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

/// [`validate`] of `conversation`, a continuation of the conversation `junction` was made of
/// (its first [`Junction::messages`] messages are those, unchanged, and [`validate`] accepted
/// them but for bad inline images, which are reported again from the junction), checking only
/// the junction and the new messages: the violations [`validate`] would
/// find in the whole, and the junction at the new end. Work in proportion to the new messages
/// (and the unit that reaches the junction), not to the history.
///
/// `None` when it cannot be done so and the caller validates the whole: another format, an
/// empty prefix, a `conversation` shorter than the prefix, or a reference beyond call / result
/// pairs ([`has_reference`]) in the prefix or the new messages.
///
/// [`validate`]: super::validate
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
        .any(|m| m.content.iter().any(|b| has_reference(format, b)))
    {
        return None;
    }
    let mut v = Checker::new(conversation, format, Some(junction));
    v.run(options);
    Some(v.finish())
}
