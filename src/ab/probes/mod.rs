//! Fidelity probes: facts a later turn may need, taken deterministically from the original
//! history, and the share of them an output tells *with their meaning*.
//!
//! ```text
//! original history -> Probes::of     touched paths, edited files, commands + outcome, failures +
//!                                    cause, fixes of failures, the user's messages, instructions,
//!                                    identifiers, last user request
//! compacted history -> survival      each item counts when the output keeps its original block
//!                                    (the call with its result, the user's message), or a text
//!                                    line tells it with its context (see below); each probe
//!                                    reports how its items matched ([`How`])
//! ```
//!
//! What a line must hold besides the item (text compared with whitespace runs collapsed, case
//! ignored): a command its outcome word (`ok` / `failed` / `unknown`, or what the outcome means);
//! a failure its id and the start of its first error line, with no denial on the line (`no
//! errors`, `passed`); an edited file an edit word (edited, created, modified …) on its line,
//! the next line or its heading; a touched path a file word or an action word there; the user's
//! words and instructions an attribution to the user (`user` before it on its line or in its
//! heading, as in `[user] #1: …` or `All user messages:`). A path is matched by its file name
//! plus as many parent folders as tell the session's files apart, so a relative or left-clipped
//! path counts. Identifiers (URLs, versions, hashes) count verbatim anywhere. A context-free dump
//! of every probe string, or a list of ids, therefore scores low.
//!
//! The parts: `items` takes each probe's items from the original history, `output` reads an
//! output once for every probe, `told` says whether a line of it tells an item with its
//! meaning; this file holds the probes, their survival and the scoring.

mod items;
mod output;
mod told;

pub(crate) use items::{
    commands, failed_calls, failure_lines, identifiers, instructions, last_request, paths,
};

use crate::conversation::Conversation;
use crate::facts::{Facts, FileAction, around_constraints, parents_needed};
use crate::render::one_line;
use output::Output;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use told::{EDIT_WORDS, FILE_WORDS, command_told, failure_how, fix_how};

/// The probes, in report order: (name in [`Survival::probe`], column header).
pub const PROBE_NAMES: &[(&str, &str)] = &[
    ("paths", "paths"),
    ("edited", "edited"),
    ("commands", "commands"),
    ("failed_calls", "failures"),
    ("fixes", "fixes"),
    ("user_messages", "user messages"),
    ("instructions", "instructions"),
    ("identifiers", "identifiers"),
    ("last_request", "last request"),
];

/// A command the agent ran and what came of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandRun {
    /// The call id.
    pub id: String,
    /// The command text (a `["bash", "-lc", script]` array gives the script).
    pub command: String,
    /// `success`, `error`, `unknown`, or `no result`.
    pub outcome: &'static str,
}

/// A failed call that a later identical call fixed (`crate::facts::FailureFact::fixed_by`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FixRun {
    /// The failed call's id.
    pub failed: String,
    /// Its first informative error line.
    pub first_line: String,
    /// The id of the call that succeeded later.
    pub fixed_by: String,
}

/// Every probe of one history.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Probes {
    /// File paths the tools touched.
    pub paths: Vec<String>,
    /// Files created, edited or deleted by calls that did not fail.
    pub edited: Vec<String>,
    /// Commands run, with their outcome.
    pub commands: Vec<CommandRun>,
    /// Ids of the calls that failed.
    pub failed_calls: Vec<String>,
    /// The first informative error line of each failed call (same order as `failed_calls`).
    pub failure_lines: Vec<String>,
    /// Failures a later call fixed.
    pub fixes: Vec<FixRun>,
    /// What the person wrote, one item per user text block
    /// (`person_text`).
    pub user_messages: Vec<String>,
    /// User sentences that instruct or constrain.
    pub instructions: Vec<String>,
    /// URLs, versions, issue numbers, hex hashes and file paths written in user / assistant text.
    pub identifiers: Vec<String>,
    /// The text of the last user request.
    pub last_request: Option<String>,
}

/// How an item was found in the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum How {
    /// The original block is kept: the call with its result (same outcome), the file's call, the
    /// user's own message.
    Kept,
    /// A text line tells it with its context (outcome, cause, action, attribution).
    Line,
    /// A user message shortened to its first sentence and its constraint sentences.
    Shortened,
    /// Found verbatim (identifiers).
    Verbatim,
    /// Not counted: the failure is told but the later call that fixed it is not (a stale
    /// failure).
    Stale,
}

/// How many items of one probe survive, and how they matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Survival {
    /// The probe's name (one of [`PROBE_NAMES`]).
    pub probe: &'static str,
    /// Items found in the output.
    pub kept: usize,
    /// Items in the original.
    pub total: usize,
    /// Items by how they matched (the counted ones, and [`How::Stale`] for told failures
    /// whose fix is not told).
    pub how: BTreeMap<How, usize>,
}

impl Survival {
    /// `kept/total`, or `-` when the probe found nothing to check.
    pub fn cell(&self) -> String {
        if self.total == 0 {
            "-".into()
        } else {
            format!("{}/{}", self.kept, self.total)
        }
    }

    /// How the items matched, e.g. `3 kept, 2 line, 1 stale`; empty when nothing matched.
    pub fn how_cell(&self) -> String {
        self.how
            .iter()
            .map(|(h, n)| {
                let word = match h {
                    How::Kept => "kept",
                    How::Line => "line",
                    How::Shortened => "shortened",
                    How::Verbatim => "verbatim",
                    How::Stale => "stale",
                };
                format!("{n} {word}")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The mean share kept over the probes that have items; `None` when none has.
pub fn fidelity(survival: &[Survival]) -> Option<f64> {
    let shares: Vec<f64> = survival
        .iter()
        .filter(|s| s.total > 0)
        .map(|s| s.kept as f64 / s.total as f64)
        .collect();
    if shares.is_empty() {
        None
    } else {
        Some(shares.iter().sum::<f64>() / shares.len() as f64)
    }
}

fn is_write(a: FileAction) -> bool {
    matches!(
        a,
        FileAction::Created | FileAction::Edited | FileAction::Deleted
    )
}

/// Counts items by how they matched.
fn tally(
    probe: &'static str,
    total: usize,
    matches: impl Iterator<Item = Option<How>>,
) -> Survival {
    let mut how = BTreeMap::new();
    let mut kept = 0;
    for h in matches.flatten() {
        *how.entry(h).or_insert(0) += 1;
        if h != How::Stale {
            kept += 1;
        }
    }
    Survival {
        probe,
        kept,
        total,
        how,
    }
}

impl Probes {
    /// Runs every probe on `c`.
    pub fn of(c: &Conversation) -> Probes {
        let facts = Facts::of(&c.messages);
        let (mut edited, mut seen) = (Vec::new(), HashSet::new());
        for t in facts.touches.iter().filter(|t| is_write(t.action)) {
            push_unique(&mut edited, &mut seen, &t.path);
        }
        let fixes = facts
            .failures
            .iter()
            .filter_map(|f| {
                let call = facts.call_of(f)?;
                let fix = f.fixed_by.as_ref()?;
                Some(FixRun {
                    failed: call.id.clone(),
                    first_line: f.first_line.clone(),
                    fixed_by: fix.id.clone(),
                })
            })
            .collect();
        let (mut user_messages, mut seen) = (Vec::new(), HashSet::new());
        for u in &facts.user {
            push_unique(&mut user_messages, &mut seen, &u.text);
        }
        Probes {
            paths: paths(c),
            edited,
            commands: commands(c),
            failed_calls: failed_calls(c),
            failure_lines: failure_lines(c),
            fixes,
            user_messages,
            instructions: instructions(c),
            identifiers: identifiers(c),
            last_request: last_request(c),
        }
    }

    /// The share of each probe the output tells, in [`PROBE_NAMES`] order.
    pub fn survival(&self, output: &Conversation) -> Vec<Survival> {
        let out = Output::of(output);
        let originals: HashSet<String> = self
            .user_messages
            .iter()
            .map(|u| one_line(u).to_lowercase())
            .collect();
        let need = parents_needed(&self.paths);
        let paths = tally(
            "paths",
            self.paths.len(),
            self.paths.iter().zip(&need).map(|(p, &n)| {
                if out.call_paths.contains(p) {
                    Some(How::Kept)
                } else {
                    let words: Vec<&str> = FILE_WORDS.iter().chain(EDIT_WORDS).copied().collect();
                    out.path_with(p, n, &words).then_some(How::Line)
                }
            }),
        );
        let need_edited = parents_needed(&self.edited);
        let edited = tally(
            "edited",
            self.edited.len(),
            self.edited.iter().zip(&need_edited).map(|(p, &n)| {
                if out.written.contains(p) {
                    Some(How::Kept)
                } else {
                    out.path_with(p, n, EDIT_WORDS).then_some(How::Line)
                }
            }),
        );
        let commands = tally(
            "commands",
            self.commands.len(),
            self.commands.iter().map(|c| command_told(&out, c)),
        );
        let failures = tally(
            "failed_calls",
            self.failed_calls.len(),
            self.failed_calls
                .iter()
                .zip(&self.failure_lines)
                .map(|(id, line)| failure_how(&out, id, line)),
        );
        let fixes = tally(
            "fixes",
            self.fixes.len(),
            self.fixes.iter().map(|f| fix_how(&out, f)),
        );
        let user_messages = tally(
            "user_messages",
            self.user_messages.len(),
            self.user_messages.iter().map(|u| {
                out.user_text(u, &originals).or_else(|| {
                    let short = around_constraints(u);
                    let parts: Vec<&str> = short.split(" … ").collect();
                    (short != *u && parts.iter().all(|p| out.user_text(p, &originals).is_some()))
                        .then_some(How::Shortened)
                })
            }),
        );
        let instructions = tally(
            "instructions",
            self.instructions.len(),
            self.instructions
                .iter()
                .map(|s| out.user_text(s, &originals)),
        );
        let identifiers = tally(
            "identifiers",
            self.identifiers.len(),
            self.identifiers.iter().map(|i| {
                out.hay
                    .contains(&one_line(i).to_lowercase())
                    .then_some(How::Verbatim)
            }),
        );
        let last_request = tally(
            "last_request",
            usize::from(self.last_request.is_some()),
            self.last_request
                .iter()
                .map(|u| out.user_text(u, &originals)),
        );
        vec![
            paths,
            edited,
            commands,
            failures,
            fixes,
            user_messages,
            instructions,
            identifiers,
            last_request,
        ]
    }
}

/// Pushes `s` unless empty or already present (first-seen order).
fn push_unique(out: &mut Vec<String>, seen: &mut HashSet<String>, s: &str) {
    let s = s.trim();
    if !s.is_empty() && seen.insert(s.to_string()) {
        out.push(s.to_string());
    }
}

#[cfg(test)]
mod tests;
