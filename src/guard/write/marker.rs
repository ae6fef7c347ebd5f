//! The record of a span a plan drops or summarizes: the sealed [`Marker`], written by the
//! guard from the span's session state ([`marker`] for a drop, [`ledger`] for a summary's
//! code-made part), with the failures and user words it holds as typed fields.

use crate::conversation::Conversation;
use crate::facts::{Facts, SessionState, UserWords};
use crate::format::Format;
use crate::guard::MessageTokens;
use crate::recall::{Entry, wire};
use crate::tokens::TokenCounter;
use std::ops::Range;

/// The line that opens the code-made ledger inside a summary message.
pub const LEDGER_HEADER: &str = "Ledger (made by code from the transcript, exact):";

/// A user-role record of a dropped span (or a summary's ledger), with the failures it writes
/// (typed call ids). Only the guard's writers fill one ([`drop_marker`], and the
/// crate-internal writers of truncate's marker and the summary ledger); the default is the
/// empty record (no ledger). [`crate::guard::apply`] still checks its failures against the
/// span it stands for (`PlanError::FailureLost`), the one place that rule is checked for a
/// drop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marker {
    pub(in crate::guard) text: String,
    pub(in crate::guard) failures: Vec<String>,
    pub(in crate::guard) user_words: UserWords,
    /// Counter tokens of the messages the marker stands for, as its first line states them
    /// (0 for a ledger).
    pub(in crate::guard) removed_tokens: usize,
    /// The original its last line names by recall id ([`Marker::name_recall`]).
    pub(in crate::guard) recall: Option<Entry>,
}

impl Marker {
    /// The message text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Call ids of the failures the text records.
    pub fn failures(&self) -> &[String] {
        &self.failures
    }

    /// The user's requests the text does not hold verbatim (shortened or left out), when the
    /// text is a record of the span's session state; empty for any other marker.
    pub fn user_words(&self) -> &UserWords {
        &self.user_words
    }

    /// The original the text names by recall id, if it names one: what
    /// [`crate::guard::apply`] returns for it ([`crate::guard::Applied::recall`]).
    pub fn recall(&self) -> Option<&Entry> {
        self.recall.as_ref()
    }

    /// Ends the text with the line naming the recall id of the dropped messages `span` of
    /// `input` ([`recall_line`]) and keeps them as the original (`format`'s JSON of those
    /// messages, [`crate::recall`]). `span` is the span the marker stands for: the drop's
    /// pinned prefix up to its cut.
    ///
    /// `false` (nothing named) for an empty or out-of-range span, when the running compaction
    /// has no recall key ([`crate::recall::scope`]), or when the marker names an id already.
    pub fn name_recall(
        &mut self,
        input: &Conversation,
        format: Format,
        span: Range<usize>,
    ) -> bool {
        if self.recall.is_some() {
            return false;
        }
        let Some(entry) = wire::span(format, input, span.start, span.end) else {
            return false;
        };
        self.text
            .push_str(&recall_line(span.len(), &entry.reference.id));
        self.recall = Some(entry);
        true
    }
}

/// The marker's last line naming the recall id of the `messages` dropped messages:
/// `The N dropped messages can be recalled whole: recall rc_…`.
pub fn recall_line(messages: usize, id: &str) -> String {
    format!("The {messages} dropped messages can be recalled whole: recall {id}\n")
}

/// The marker of a drop of `removed` = (messages, counter tokens) whose session state is
/// `state`, within about `room` counter tokens ([`SessionState::marker_sized`]: its first
/// line says what was replaced and that it is a record, not instructions), and the tokens its
/// render budgeted (an estimate of its count, without tokenizing the text again).
pub(crate) fn marker(
    state: &SessionState,
    removed: (usize, usize),
    room: usize,
    counter: &dyn TokenCounter,
) -> (Marker, usize) {
    let (text, rendered) = state.marker_sized(removed.0, removed.1, room, counter);
    (
        Marker {
            text,
            failures: rendered.failures,
            user_words: rendered.user_words,
            removed_tokens: removed.1,
            recall: None,
        },
        rendered.tokens,
    )
}

/// The marker of a drop of messages `span` of `input` (a strategy of your own plans
/// [`crate::guard::UnitEdit::Drop`] with it): the session state of the span read from the
/// history (the user's words, failures, files, commands), within about `room` counter
/// tokens, headed by the count of messages and of their `tokens` (counter tokens, one entry
/// per message of `input`). Every failure of the span is recorded, so the guard accepts the
/// drop.
pub fn drop_marker(
    input: &Conversation,
    tokens: &MessageTokens,
    span: Range<usize>,
    room: usize,
    counter: &dyn TokenCounter,
) -> Marker {
    let facts = Facts::of(&input.messages);
    let state = SessionState::of(&facts, span.clone());
    marker(&state, (span.len(), tokens.span(span)), room, counter).0
}

/// The ledger of `state` within `room` tokens (counted with `counter`, the header included):
/// [`LEDGER_HEADER`], then the lines of [`SessionState::render`] (the user's words and
/// failures kept even past the room); with the ids of the failures it writes. Empty text when
/// the state holds nothing.
pub(crate) fn ledger(state: &SessionState, room: usize, counter: &dyn TokenCounter) -> Marker {
    let write = |lines: &[String]| {
        let mut text = String::new();
        if !lines.is_empty() {
            text.push_str(LEDGER_HEADER);
            text.push('\n');
            for line in lines {
                text.push_str(line);
                text.push('\n');
            }
        }
        text
    };
    let header = counter.count_text_cached(LEDGER_HEADER) + 1;
    let mut lines_room = room.saturating_sub(header);
    let mut rendered = state.render(lines_room, counter);
    let mut text = write(&rendered.lines);
    // The render counts its lines apart (its section titles not at all): a few more passes,
    // each with its room shrunk by what the written ledger is over.
    for _ in 0..6 {
        let over = counter.count_text(&text).saturating_sub(room);
        if over == 0 || lines_room == 0 {
            break;
        }
        lines_room = lines_room.saturating_sub(over);
        rendered = state.render(lines_room, counter);
        text = write(&rendered.lines);
    }
    Marker {
        text,
        failures: rendered.failures,
        user_words: rendered.user_words,
        removed_tokens: 0,
        recall: None,
    }
}
