//! Whether an output tells an item with its meaning: a command with its outcome word, a
//! failure with its id and cause (not denied on its line), a fix with its failure, a path
//! with a file or edit word in its context.

use super::items::outcome_name;
use super::output::Output;
use super::{CommandRun, FixRun, How};
use crate::conversation::Outcome;
use crate::facts::has_phrase;
use crate::render::one_line;

/// Words that say a file *was* changed (whole words, lowercase): past tense and record words
/// only, so a request (`please update CLAUDE.md`) does not count as the edit done.
pub(super) const EDIT_WORDS: &[&str] = &[
    "edited",
    "modified",
    "changed",
    "updated",
    "created",
    "new",
    "wrote",
    "written",
    "added",
    "deleted",
    "removed",
    "rewrote",
    "rewritten",
    "fixed",
    "implemented",
    "refactored",
    "renamed",
    "moved",
];

/// Words that put a path in the context of files (besides [`EDIT_WORDS`]).
pub(super) const FILE_WORDS: &[&str] = &[
    "file",
    "files",
    "path",
    "paths",
    "read",
    "reads",
    "viewed",
    "opened",
    "searched",
    "looked",
    "explored",
    "examined",
    "inspected",
    "checked",
];

/// Words that deny a failure on the same line (`no errors`, `0 failed`).
const NEGATIONS: &[&str] = &[
    "no error",
    "no errors",
    "0 failed",
    "0 errors",
    "without error",
    "without errors",
    "no failures",
    "passed",
    "succeeded",
];

/// Characters of a failure's first error line a line must hold (its cause).
const CAUSE_CHARS: usize = 40;

/// True when a normalized line tells failure `id` with its cause (see `failure_how`).
fn line_tells_failure(line: &str, id: &str, cause: &str) -> bool {
    line.contains(id)
        && (line.contains("error") || line.contains("fail"))
        && !NEGATIONS.iter().any(|n| has_phrase(line, n))
        && line.contains(cause)
}

fn cause_of(first_line: &str) -> String {
    one_line(first_line)
        .to_lowercase()
        .chars()
        .take(CAUSE_CHARS)
        .collect()
}

/// A failure is told when the output keeps its failed result, or has a line that names the id,
/// says error/failed without denying it (`no errors`), and holds the start of its first error
/// line (its cause): a bare id with the word "error" is not enough.
pub(super) fn failure_how(out: &Output<'_>, id: &str, first_line: &str) -> Option<How> {
    if out.results.get(id) == Some(&Outcome::Error) {
        return Some(How::Kept);
    }
    let (id, cause) = (id.to_lowercase(), cause_of(first_line));
    out.docs
        .iter()
        .flat_map(|d| &d.lines)
        .any(|l| line_tells_failure(l, &id, &cause))
        .then_some(How::Line)
}

/// A fix is told when the failure is told and so is its fix: the fixing call's result is kept,
/// or the failure's line says `fixed` / `resolved` or names the fixing call. A told failure
/// whose fix is not is [`How::Stale`].
pub(super) fn fix_how(out: &Output<'_>, f: &FixRun) -> Option<How> {
    failure_how(out, &f.failed, &f.first_line)?;
    if out.results.get(f.fixed_by.as_str()) == Some(&Outcome::Success) {
        return Some(How::Kept);
    }
    let (id, cause, fix) = (
        f.failed.to_lowercase(),
        cause_of(&f.first_line),
        f.fixed_by.to_lowercase(),
    );
    let on_line = out.docs.iter().flat_map(|d| &d.lines).any(|l| {
        line_tells_failure(l, &id, &cause)
            && (l.contains(&fix) || has_phrase(l, "fixed") || has_phrase(l, "resolved"))
    });
    Some(if on_line { How::Line } else { How::Stale })
}

/// A command counts when the output keeps its call with its result (same outcome), or has a
/// line holding the command and its outcome word (ok / failed / unknown, or what the outcome
/// means: error, success, passed).
pub(super) fn command_told(out: &Output<'_>, c: &CommandRun) -> Option<How> {
    let kept = out
        .results
        .get(c.id.as_str())
        .is_some_and(|o| outcome_name(Some(o)) == c.outcome);
    if kept {
        return Some(How::Kept);
    }
    let words: &[&str] = match c.outcome {
        "success" => &["ok", "success", "succeeded", "passed"],
        "error" => &["failed", "error"],
        "unknown" => &["unknown"],
        _ => &["no result"],
    };
    let cmd = one_line(&c.command).to_lowercase();
    out.docs
        .iter()
        .flat_map(|d| &d.lines)
        .any(|l| {
            // The outcome word outside the command itself (`echo ok` says nothing).
            l.contains(&cmd) && {
                let rest = l.replacen(&cmd, " ", 1);
                words.iter().any(|w| has_phrase(&rest, w))
            }
        })
        .then_some(How::Line)
}
