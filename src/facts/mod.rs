//! Tool facts of a history, read once and typed: what the user wrote, earlier summaries, files
//! and what was done to them, calls with their outcome, failures with their cause and fix.
//!
//! ```text
//! messages -> Facts::of   user words (person's text only), earlier summaries (compactor,
//!                         Claude Code, Codex), file touches (read / edited / created / deleted),
//!                         calls (+ command, outcome), failures (+ first / last error line,
//!                         the later identical call that succeeded), assistant replies
//!          -> the session-state digest (strategy::digest), the summary ledger, the A/B probes
//! ```
//!
//! Every fact carries the index of the message it came from, so a strategy that keeps only
//! `messages[..k]` takes the facts before `k` without reading the history again. Outcomes come
//! from [`crate::conversation::ToolResult::outcome`], never from text a strategy wrote.
//!
//! The parts: `read` reads the facts of a history ([`Facts::of`]), `calls` what a call's
//! input says (its command, its argument, the files it touches, its identity); this file
//! holds the facts themselves.

mod calls;
mod errors;
mod paths;
mod read;
mod state;
mod state_size;
mod user;

pub use errors::{
    CLEARED_PREFIX, ERROR_LINE_CHARS, informative_lines, is_informative, output_text,
};
pub use paths::{PathStyle, distinct_tails};
pub use state::{SessionState, UserWords, summary_item};
pub use state_size::StateSizes;
pub use user::{
    SummaryKind, around_constraints, person_text, shorten_around_constraints, summary_kind,
};
// What only the A/B harness's probes read.
#[cfg(feature = "ab")]
pub use calls::command_of;
#[cfg(feature = "ab")]
pub use paths::{mentions_path, parents_needed};
#[cfg(feature = "ab")]
pub use user::{CLAUDE_CODE_SUMMARY_PREFIX, has_phrase, is_constraint, sentences};

use crate::conversation::Outcome;
use serde::Serialize;

/// The fixed first words of every marker message compactor writes; a later pass recognises its
/// own markers by them and merges their state forward.
pub const MARKER_PREFIX: &str = "[compactor: earlier conversation compacted]";

/// Characters a session state keeps of a command or a call's argument (on one line, see
/// [`CallFact::command_line`]).
pub const ARG_CHARS: usize = 120;

/// Characters a session state keeps of an assistant reply (on one line, see
/// [`ReplyFact::line`]).
pub const REPLY_CHARS: usize = 160;

/// What a call did to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileAction {
    /// Created (Claude Code `Write` of a new file, apply_patch `Add File`, editor `create`).
    Created,
    /// Changed in place (`Edit`, `MultiEdit`, `Write` over a file, apply_patch `Update File`).
    Edited,
    /// Removed (apply_patch `Delete File`, `rm` in a shell command).
    Deleted,
    /// Read (`Read`, editor `view`).
    Read,
    /// Searched (`Grep` / `Glob` with a path).
    Searched,
}

impl FileAction {
    /// The past-tense word a digest writes: `created`, `edited`, `deleted`, `read`, `searched`.
    pub fn word(self) -> &'static str {
        match self {
            FileAction::Created => "created",
            FileAction::Edited => "edited",
            FileAction::Deleted => "deleted",
            FileAction::Read => "read",
            FileAction::Searched => "searched",
        }
    }
}

/// One call's effect on one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileTouch {
    /// The path as the call wrote it.
    pub path: String,
    /// The path as a digest shows it: [`PathStyle::show`] with [`Facts::style`].
    pub shown: String,
    /// What was done.
    pub action: FileAction,
    /// The call id.
    pub id: String,
    /// Index of the message holding the call.
    pub message: usize,
}

/// One tool call and what came of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFact {
    /// The call id.
    pub id: String,
    /// The tool name.
    pub tool: String,
    /// The command, for shell calls (`command` / `cmd` input; `["bash", "-lc", s]` gives `s`).
    pub command: Option<String>,
    /// The most telling argument otherwise (path, pattern, url, query, description), unclipped.
    pub argument: Option<String>,
    /// `command` on one line, clipped to [`ARG_CHARS`] characters
    /// ([`crate::render::one_line_clipped`]): what a digest writes, made once per history.
    /// A shorter clip of it is [`crate::render::clip`] of this (the same as clipping the
    /// command itself).
    pub command_line: Option<String>,
    /// `argument` as a digest writes it: shown by [`Facts::style`] ([`PathStyle::show`]), on
    /// one line, clipped to [`ARG_CHARS`] characters.
    pub argument_line: Option<String>,
    /// The outcome of its result; `None` when the history holds no result for it.
    pub outcome: Option<Outcome>,
    /// Index of the message holding the call.
    pub message: usize,
    /// Index of the message holding its result.
    pub result_message: Option<usize>,
}

/// The later call that succeeded where a failed one did not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fix {
    /// Its call id.
    pub id: String,
    /// Index of the message holding it.
    pub message: usize,
}

/// A failed call: its cause (first and last informative lines of the output) and, when a later
/// identical call (same tool, same input) succeeded, that fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailureFact {
    /// Index into [`Facts::calls`].
    pub call: usize,
    /// The first informative line of the output (the finding), or its first line.
    pub first_line: String,
    /// The last informative line (the summary or exit status), when there is another one.
    pub last_line: Option<String>,
    /// The later identical call that succeeded.
    pub fixed_by: Option<Fix>,
}

/// Text a person wrote in one user message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserFact {
    /// Index of the message.
    pub message: usize,
    /// The words, verbatim (harness elements removed; see [`person_text`]).
    pub text: String,
}

/// An earlier summary carried in the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SummaryFact {
    /// Index of the message.
    pub message: usize,
    /// Who wrote it.
    pub kind: SummaryKind,
    /// Its whole text.
    pub text: String,
}

/// An assistant text block (what the agent told the user).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplyFact {
    /// Index of the message.
    pub message: usize,
    /// The text.
    pub text: String,
    /// The text on one line, clipped to [`REPLY_CHARS`] characters
    /// ([`crate::render::one_line_clipped`]); a shorter clip is [`crate::render::clip`] of it.
    pub line: String,
}

/// Every fact of a history, in message order within each list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// What the user wrote.
    pub user: Vec<UserFact>,
    /// Earlier summaries.
    pub summaries: Vec<SummaryFact>,
    /// File touches of calls that did not fail.
    pub touches: Vec<FileTouch>,
    /// Every tool call.
    pub calls: Vec<CallFact>,
    /// Every failed call.
    pub failures: Vec<FailureFact>,
    /// Assistant text.
    pub replies: Vec<ReplyFact>,
    /// How the history's paths are shown ([`PathStyle::of`] the paths of `touches`).
    pub style: PathStyle,
}

impl Facts {
    /// The call a failure is about.
    pub fn call_of(&self, failure: &FailureFact) -> Option<&CallFact> {
        self.calls.get(failure.call)
    }
}

/// Blocks for the unit tests of this module and its submodules.
#[cfg(test)]
pub(crate) mod test_blocks {
    use crate::conversation::{Block, ToolInput, ToolResult, ToolResultContent, ToolUse};
    use serde_json::Value;

    /// A tool_use block with JSON input.
    pub(crate) fn call(id: &str, name: &str, input: Value) -> Block {
        Block::ToolUse(ToolUse {
            id: id.into(),
            name: name.into(),
            input: ToolInput::Json(input),
            extra: Default::default(),
        })
    }

    /// A text tool_result, its outcome set by the Anthropic policy (`is_error`).
    pub(crate) fn result(id: &str, text: &str, is_error: bool) -> Block {
        Block::ToolResult(crate::outcome::OutcomePolicy::Anthropic.apply(ToolResult {
            tool_use_id: id.into(),
            content: Some(ToolResultContent::Text(text.into())),
            is_error: is_error.then_some(true),
            extra: Default::default(),
            outcome: Default::default(),
            rewritten: None,
        }))
    }
}

#[cfg(test)]
mod tests;
