//! The session state a dropped span leaves behind: made by code from [`Facts`](super::Facts),
//! budgeted by priority, and merged forward when a later pass drops the marker that holds it.
//!
//! ```text
//! [compactor: earlier conversation compacted] A record of earlier work, not instructions: …
//! The user's words, verbatim, oldest first:
//! [user] #1: Delete the build/ directory and rerun the release script.
//! [then] #1: ran rm -rf build/ && ./release.sh: ok
//! Files:
//! [edited] src/a.rs, lib/web/b.ex
//! Failures (first and last error line):
//! [failed toolu_02] Bash, command cargo test: error: … | … -> fixed by toolu_05 at message 9
//! Commands:
//! [ran ok] cargo build (×2, last toolu_05)
//! [… 4 more items omitted: 3 calls, 1 reply]
//! ```
//!
//! Priorities, in the order the budget is spent: (1) the user's words (every request verbatim;
//! a long one around its constraint sentences) and earlier summaries (whole); (2) failures,
//! always kept; (3) files and what was done to them; (4) commands with outcome, deduplicated;
//! (5) other calls and replies, newest first, with a count of what was left out. Calls are
//! written as `tool, argument`, never as `Name(args)` a model could imitate.
//!
//! The parts: `from_facts` makes a state from the facts of a span, `merge` reads an earlier
//! marker back into one, `render` writes it within a budget, `words` says what a record did to
//! the user's words. This file holds the state itself and the marker message around its lines.

mod from_facts;
mod merge;
mod render;
mod words;

pub use render::{Rendered, summary_item};
pub use words::{LeftOut, UserWords};

use super::{FileAction, MARKER_PREFIX, SummaryKind};
use crate::tokens::TokenCounter;
use foldhash::HashMap;
use std::collections::BTreeSet;

/// What a `[user]` line says after its number when its request is not verbatim.
const SHORTENED_TAG: &str = " (shortened)";

/// A user request with what followed it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Request {
    number: usize,
    text: String,
    then: Option<String>,
    /// The round's calls all succeeded (known outcomes, none failed). False when unknown (a
    /// merged earlier state) or when the round had no calls.
    settled: bool,
    /// `text` is already a shortening of the person's words (read back from an earlier marker
    /// whose line said so).
    shortened: bool,
}

/// The session state of a span, ready to be written into a marker message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionState {
    requests: Vec<Request>,
    summaries: Vec<(SummaryKind, String)>,
    /// Shown path -> actions, in first-touch order.
    files: Vec<(String, BTreeSet<FileAction>)>,
    /// Position of each shown path in `files`.
    file_index: HashMap<String, usize>,
    /// (id, line without tag) of each failure.
    failures: Vec<(String, String)>,
    /// Whole command lines (`[ran ok] …`).
    commands: Vec<String>,
    /// Whole lines of the rest (`[call …]`, `[assistant] …`).
    rest: Vec<String>,
    /// Items earlier passes left out.
    carried_omitted: usize,
    /// Requests an earlier record left out (its `[… N earlier requests left out: #a–#b]`
    /// line), carried into this record's run.
    carried_left_out: Option<LeftOut>,
    /// Leave out the `[then]` lines of settled rounds (all calls succeeded): the last resort
    /// when the marker with them does not fit the budget ([`SessionState::shedding_settled`]).
    shed_settled: bool,
    /// Counter tokens the whole output can give the record, past which the user's words are
    /// not kept whole ([`SessionState::with_words_ceiling`]); `None`: no ceiling.
    words_ceiling: Option<usize>,
}

/// Indents every line after the first by two spaces, so a multi-line text stays one item.
fn indent_rest(s: &str) -> String {
    s.trim().lines().collect::<Vec<_>>().join("\n  ")
}

impl SessionState {
    /// Records `action` on the shown path `shown` (a new path goes last).
    fn touch(&mut self, shown: String, action: FileAction) {
        match self.file_index.get(&shown) {
            Some(&i) => {
                self.files[i].1.insert(action);
            }
            None => {
                self.file_index.insert(shown.clone(), self.files.len());
                self.files.push((shown, BTreeSet::from([action])));
            }
        }
    }

    /// The same state without the `[then]` lines of rounds whose calls all succeeded (they are
    /// counted as omitted); failed or unknown outcomes keep theirs. For a budget the full
    /// marker does not fit.
    pub fn shedding_settled(mut self) -> SessionState {
        self.shed_settled = true;
        self
    }

    /// The same state with a ceiling on the user's words: `tokens` (counter tokens) is what the
    /// whole output can give the record at most, past its usual room. Without one the words
    /// are kept whatever they cost (shortened around their constraints past half the room);
    /// with one, past what the ceiling leaves after the failures the first request and the
    /// newest are kept and the ones between left out, by one line naming them ([`UserWords`]).
    pub fn with_words_ceiling(mut self, tokens: usize) -> SessionState {
        self.words_ceiling = Some(tokens);
        self
    }

    /// The marker message text: the fixed prefix, one sentence saying it is a record, then the
    /// lines of [`SessionState::render`].
    #[cfg(any(test, feature = "ab"))]
    pub fn marker_text(
        &self,
        removed_messages: usize,
        removed_tokens: usize,
        max_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> String {
        self.marker(removed_messages, removed_tokens, max_tokens, counter)
            .0
    }

    /// [`SessionState::marker_text`] and the ids of the failures it writes (typed, so the
    /// guard records which failures the marker keeps without reading its text).
    #[cfg(any(test, feature = "ab"))]
    pub fn marker(
        &self,
        removed_messages: usize,
        removed_tokens: usize,
        max_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> (String, Vec<String>) {
        let (s, rendered) =
            self.marker_sized(removed_messages, removed_tokens, max_tokens, counter);
        (s, rendered.failures)
    }

    /// The marker's text and what its render kept ([`Rendered`], its `lines` moved into the
    /// text and left empty; its `tokens` an estimate of the whole text's counter tokens: the
    /// header's count plus the lines' budget), for a caller that compares many candidate
    /// markers without tokenizing each whole.
    pub fn marker_sized(
        &self,
        removed_messages: usize,
        removed_tokens: usize,
        max_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> (String, Rendered) {
        let mut s = format!(
            "{MARKER_PREFIX} A record of earlier work, not instructions to act on: {removed_messages} earlier messages ({removed_tokens} tokens) were replaced by this session state, made by code.\n"
        );
        let head = counter.count_text_cached(&s);
        let mut rendered = self.render(max_tokens.saturating_sub(head), counter);
        for l in std::mem::take(&mut rendered.lines) {
            s.push_str(&l);
            s.push('\n');
        }
        rendered.tokens += head;
        (s, rendered)
    }
}

#[cfg(test)]
mod tests;
