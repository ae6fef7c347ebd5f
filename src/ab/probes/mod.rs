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

use crate::conversation::{Block, Conversation, Message, Outcome, Role, ToolUse};
use crate::facts::{
    Facts, FileAction, around_constraints, has_phrase, is_constraint, mentions_path,
    parents_needed, person_text, sentences,
};
use crate::guard;
use crate::render::one_line;
use crate::strategy::MARKER_PREFIX;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Tool input keys that name a file.
const PATH_KEYS: &[&str] = &["file_path", "path", "notebook_path"];

/// apply_patch headers that name a file.
const PATCH_HEADERS: &[&str] = &[
    "*** Add File: ",
    "*** Update File: ",
    "*** Delete File: ",
    "*** Move to: ",
];

/// File extensions that make a bare word in text a file name (`main.rs`).
const FILE_EXTENSIONS: &[&str] = &[
    "rs", "py", "js", "ts", "tsx", "jsx", "json", "jsonl", "toml", "yaml", "yml", "md", "txt",
    "go", "c", "h", "cpp", "hpp", "java", "rb", "sh", "lock", "cfg", "ini", "html", "css", "sql",
    "ex", "exs", "heex",
];

/// Words that say a file *was* changed (whole words, lowercase): past tense and record words
/// only, so a request (`please update CLAUDE.md`) does not count as the edit done.
const EDIT_WORDS: &[&str] = &[
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
const FILE_WORDS: &[&str] = &[
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

/// The words of `s` that are not paths or file names (no `/`, no `.` inside), so that a path
/// (`test/new.rs`) is not its own context.
fn prose(s: &str) -> String {
    s.split_whitespace()
        .filter(|w| {
            let w = w.trim_end_matches(['.', ',', ':', ';', ')', '`', '*', '"', '\'']);
            !w.contains('/') && !w.contains('.')
        })
        .collect::<Vec<_>>()
        .join(" ")
}

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

/// A failed call that a later identical call fixed ([`crate::facts::FailureFact::fixed_by`]).
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
    /// What the person wrote, one item per user text block ([`person_text`]).
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

/// Words at the start of a line that may label it as the user's.
const LABEL_WORDS: usize = 4;

/// One text of the output, whitespace collapsed and lowercased, with where each of its
/// (non-blank) lines starts.
struct Doc {
    /// The lines joined by one space.
    norm: String,
    /// Byte offset in `norm` of each line.
    starts: Vec<usize>,
    /// The lines.
    lines: Vec<String>,
    /// Leading whitespace of each line, in characters.
    indent: Vec<usize>,
}

impl Doc {
    fn of(text: &str) -> Doc {
        let raw: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let lines: Vec<String> = raw.iter().map(|l| one_line(l).to_lowercase()).collect();
        let indent = raw
            .iter()
            .map(|l| l.chars().take_while(|c| c.is_whitespace()).count())
            .collect();
        let mut starts = Vec::with_capacity(lines.len());
        let mut at = 0;
        for l in &lines {
            starts.push(at);
            at += l.len() + 1;
        }
        Doc {
            norm: lines.join(" "),
            starts,
            lines,
            indent,
        }
    }

    /// The line holding byte `p` of `norm`.
    fn line_at(&self, p: usize) -> usize {
        self.starts.partition_point(|&s| s <= p).saturating_sub(1)
    }

    /// The nearest heading above line `i` (a line ending with `:`, or starting with `#`), if any.
    fn heading(&self, i: usize) -> Option<&str> {
        self.lines[..i]
            .iter()
            .rev()
            .find(|l| l.ends_with(':') || l.starts_with('#'))
            .map(String::as_str)
    }

    /// Line `i`, the next line when it is indented under it (a sub-item), and the heading
    /// above, joined: where an action word may be.
    fn context(&self, i: usize) -> String {
        let mut s = self.lines[i].clone();
        if let Some(next) = self.lines.get(i + 1)
            && self.indent.get(i + 1) > self.indent.get(i)
        {
            s.push(' ');
            s.push_str(next);
        }
        if let Some(h) = self.heading(i) {
            s.push(' ');
            s.push_str(h);
        }
        s
    }

    /// True when `needle` (normalized) occurs attributed to the user: `user` among the first
    /// [`LABEL_WORDS`] words of its line and before it (`[user] #1: …`, `- The user asked …`),
    /// or in the heading above it (`All user messages:`).
    fn attributed(&self, needle: &str) -> bool {
        if needle.is_empty() {
            return false;
        }
        self.norm.match_indices(needle).any(|(p, _)| {
            let i = self.line_at(p);
            let before = self.norm.get(self.starts[i]..p).unwrap_or("");
            let label: Vec<&str> = before.split_whitespace().take(LABEL_WORDS).collect();
            has_phrase(&label.join(" "), "user")
                || self.heading(i).is_some_and(|h| has_phrase(h, "user"))
                || self.item_of(i).is_some_and(|j| self.labelled_user(j))
        })
    }

    /// For an indented line (the continuation of a multi-line item, as the session state
    /// writes a long user message), the item's first line: the nearest unindented line above.
    fn item_of(&self, i: usize) -> Option<usize> {
        if self.indent.get(i).is_none_or(|&n| n == 0) {
            return None;
        }
        (0..i).rev().find(|&j| self.indent[j] == 0)
    }

    /// Whether line `j` starts with a label naming the user (`[user] #1: …`).
    fn labelled_user(&self, j: usize) -> bool {
        let label: Vec<&str> = self.lines[j].split_whitespace().take(2).collect();
        has_phrase(&label.join(" "), "user")
    }
}

/// The output, read once for every probe.
struct Output<'a> {
    docs: Vec<Doc>,
    /// Outcome of every result kept, by call id.
    results: HashMap<&'a str, Outcome>,
    /// Paths named by the calls kept.
    call_paths: HashSet<String>,
    /// Files the kept calls wrote.
    written: HashSet<String>,
    /// The person's words in kept user messages, normalized.
    user_kept: Vec<String>,
    /// Whole text, whitespace collapsed, lowercased.
    hay: String,
}

impl<'a> Output<'a> {
    fn of(conv: &'a Conversation, has_error_flag: bool) -> Output<'a> {
        let docs = texts(conv).into_iter().map(Doc::of).collect();
        let results = conv
            .messages
            .iter()
            .flat_map(Message::tool_results)
            .map(|r| (r.tool_use_id.as_str(), r.outcome(has_error_flag)))
            .collect();
        let facts = Facts::of(&conv.messages, has_error_flag);
        let written = facts
            .touches
            .iter()
            .filter(|t| is_write(t.action))
            .map(|t| t.path.clone())
            .collect();
        let user_kept = conv
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .flat_map(|m| m.content.iter())
            .filter_map(|b| match b {
                Block::Text(t) => person_text(&t.text).map(|s| one_line(&s).to_lowercase()),
                _ => None,
            })
            .collect();
        Output {
            docs,
            results,
            call_paths: paths(conv).into_iter().collect(),
            written,
            user_kept,
            hay: haystack(conv).to_lowercase(),
        }
    }

    /// Some line naming `path` (by file name and `parents` folders) has one of `words` in its
    /// context ([`Doc::context`]).
    fn path_with(&self, path: &str, parents: usize, words: &[&str]) -> bool {
        let path = path.to_lowercase();
        self.docs.iter().any(|d| {
            d.lines.iter().enumerate().any(|(i, l)| {
                mentions_path(l, &path, parents) && {
                    let ctx = prose(&d.context(i));
                    words.iter().any(|w| has_phrase(&ctx, w))
                }
            })
        })
    }

    /// How a user text (message, sentence) is told: one of the person's own messages
    /// (`originals`, normalized) is kept and holds it, or it is found attributed to the user.
    /// A user message of other text (a dump) does not count as kept.
    fn user_text(&self, text: &str, originals: &HashSet<String>) -> Option<How> {
        let n = one_line(text).to_lowercase();
        if n.is_empty() {
            return None;
        }
        if self
            .user_kept
            .iter()
            .any(|u| originals.contains(u) && u.contains(&n))
        {
            return Some(How::Kept);
        }
        self.docs
            .iter()
            .any(|d| d.attributed(&n))
            .then_some(How::Line)
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
    /// Runs every probe on `c`. `has_error_flag`: the wire marks failures explicitly
    /// (Anthropic), so a result without the flag is a success.
    pub fn of(c: &Conversation, has_error_flag: bool) -> Probes {
        let facts = Facts::of(&c.messages, has_error_flag);
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
            commands: commands(c, has_error_flag),
            failed_calls: failed_calls(c, has_error_flag),
            failure_lines: failure_lines(c, has_error_flag),
            fixes,
            user_messages,
            instructions: instructions(c),
            identifiers: identifiers(c),
            last_request: last_request(c),
        }
    }

    /// The share of each probe the output tells, in [`PROBE_NAMES`] order.
    pub fn survival(&self, output: &Conversation, has_error_flag: bool) -> Vec<Survival> {
        let out = Output::of(output, has_error_flag);
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

/// Every string inside a JSON value, depth first.
fn strings_in<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|i| strings_in(i, out)),
        Value::Object(obj) => obj.values().for_each(|i| strings_in(i, out)),
        _ => {}
    }
}

fn tool_uses(c: &Conversation) -> impl Iterator<Item = &ToolUse> {
    c.messages.iter().flat_map(Message::tool_uses)
}

/// File paths touched by tool calls: inputs `file_path` / `path` / `notebook_path`, and the
/// files named by apply_patch headers (`*** Update File: src/a.rs`) in any input string.
pub fn paths(c: &Conversation) -> Vec<String> {
    let (mut out, mut seen) = (Vec::new(), HashSet::new());
    for t in tool_uses(c) {
        let input = t.input.to_value();
        if let Value::Object(obj) = &input {
            for k in PATH_KEYS {
                if let Some(Value::String(p)) = obj.get(*k) {
                    push_unique(&mut out, &mut seen, p);
                }
            }
        }
        let mut strings = Vec::new();
        strings_in(&input, &mut strings);
        for s in strings.into_iter().filter(|s| s.contains("*** ")) {
            for line in s.lines() {
                if let Some(p) = PATCH_HEADERS.iter().find_map(|h| line.strip_prefix(h)) {
                    push_unique(&mut out, &mut seen, p);
                }
            }
        }
    }
    out
}

/// The outcome of every answered call, by id.
fn outcomes(c: &Conversation, has_error_flag: bool) -> HashMap<&str, Outcome> {
    c.messages
        .iter()
        .flat_map(Message::tool_results)
        .map(|r| (r.tool_use_id.as_str(), r.outcome(has_error_flag)))
        .collect()
}

fn outcome_name(o: Option<&Outcome>) -> &'static str {
    match o {
        Some(Outcome::Success) => "success",
        Some(Outcome::Error) => "error",
        Some(Outcome::Unknown) => "unknown",
        None => "no result",
    }
}

/// Commands run (calls with a shell command, [`crate::facts::command_of`]), in order, with
/// their outcome.
pub fn commands(c: &Conversation, has_error_flag: bool) -> Vec<CommandRun> {
    let outcomes = outcomes(c, has_error_flag);
    tool_uses(c)
        .filter_map(|t| {
            let command = crate::facts::command_of(&t.input.to_value())?;
            Some(CommandRun {
                id: t.id.clone(),
                command,
                outcome: outcome_name(outcomes.get(t.id.as_str())),
            })
        })
        .collect()
}

/// Ids of calls whose result is a failure ([`crate::conversation::ToolResult::outcome`]), in
/// order.
pub fn failed_calls(c: &Conversation, has_error_flag: bool) -> Vec<String> {
    let (mut out, mut seen) = (Vec::new(), HashSet::new());
    for r in c.messages.iter().flat_map(Message::tool_results) {
        if r.outcome(has_error_flag) == Outcome::Error {
            push_unique(&mut out, &mut seen, &r.tool_use_id);
        }
    }
    out
}

/// A failure stays visible when the output keeps a failed result for the id, or has a line that
/// names the id together with `error` / `fail` (a digest line `[result id (error): …]`; the
/// guard's own rule, [`guard::mentions_failure`], for outputs built without records). Weaker
/// than [`failure_told`], which the probes use.
pub fn failure_visible(output: &Conversation, id: &str, has_error_flag: bool) -> bool {
    let result_kept = output
        .messages
        .iter()
        .flat_map(Message::tool_results)
        .any(|r| r.tool_use_id == id && r.outcome(has_error_flag) == Outcome::Error);
    result_kept || texts(output).iter().any(|t| guard::mentions_failure(t, id))
}

/// The first informative error line of each failed call, in [`failed_calls`] order (from
/// [`crate::facts::Facts`]).
pub fn failure_lines(c: &Conversation, has_error_flag: bool) -> Vec<String> {
    let facts = Facts::of(&c.messages, has_error_flag);
    let ids = failed_calls(c, has_error_flag);
    ids.iter()
        .map(|id| {
            facts
                .failures
                .iter()
                .find(|f| facts.call_of(f).is_some_and(|k| &k.id == id))
                .map(|f| f.first_line.clone())
                .unwrap_or_default()
        })
        .collect()
}

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

/// True when a normalized line tells failure `id` with its cause (see [`failure_told`]).
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

fn failure_how(out: &Output<'_>, id: &str, first_line: &str) -> Option<How> {
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

/// A failure is told when the output keeps its failed result, or has a line that names the id,
/// says error/failed without denying it (`no errors`), and holds the start of its first error
/// line (its cause): a bare id with the word "error" is not enough.
pub fn failure_told(
    output: &Conversation,
    id: &str,
    first_line: &str,
    has_error_flag: bool,
) -> bool {
    failure_how(&Output::of(output, has_error_flag), id, first_line).is_some()
}

/// A fix is told when the failure is told and so is its fix: the fixing call's result is kept,
/// or the failure's line says `fixed` / `resolved` or names the fixing call. A told failure
/// whose fix is not is [`How::Stale`].
fn fix_how(out: &Output<'_>, f: &FixRun) -> Option<How> {
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
fn command_told(out: &Output<'_>, c: &CommandRun) -> Option<How> {
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

/// Text a person wrote: text blocks of user messages, without compactor's own markers,
/// earlier summaries and harness elements (`<system-reminder>` …); slash commands count with
/// their arguments ([`crate::facts::person_text`]).
fn user_texts(c: &Conversation) -> Vec<String> {
    Facts::of(&c.messages, true)
        .user
        .into_iter()
        .map(|u| u.text)
        .collect()
}

/// User sentences with an instruction word ([`crate::facts::INSTRUCTION_WORDS`]), in order,
/// without repeats.
pub fn instructions(c: &Conversation) -> Vec<String> {
    let (mut out, mut seen) = (Vec::new(), HashSet::new());
    for text in user_texts(c) {
        for s in sentences(&text) {
            if is_constraint(s) {
                push_unique(&mut out, &mut seen, s);
            }
        }
    }
    out
}

/// The kind of identifier a word is, if any.
fn identifier_kind(w: &str) -> Option<&'static str> {
    if w.starts_with("http://") || w.starts_with("https://") {
        return (w.len() > 10).then_some("url");
    }
    if let Some(n) = w.strip_prefix('#') {
        return (!n.is_empty() && n.chars().all(|c| c.is_ascii_digit())).then_some("issue");
    }
    let version = w.strip_prefix('v').unwrap_or(w);
    let parts: Vec<&str> = version.split('.').collect();
    if parts.len() >= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        && (parts.len() >= 3 || version.len() < w.len())
    {
        return Some("version");
    }
    if (7..=64).contains(&w.len())
        && w.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        && w.chars().any(|c| c.is_ascii_digit())
        && w.chars().any(|c| c.is_ascii_alphabetic())
    {
        return Some("hash");
    }
    let path_chars = |c: char| c.is_alphanumeric() || "/._-~".contains(c);
    if w.chars().all(path_chars) && w.chars().any(char::is_alphabetic) && !w.starts_with("//") {
        // A file name: the last part has a known extension (`src/a.rs`, `main.rs`).
        let name = w.rsplit('/').next().unwrap_or(w);
        if let Some((stem, ext)) = name.rsplit_once('.')
            && !stem.is_empty()
            && FILE_EXTENSIONS.contains(&ext)
        {
            return Some("path");
        }
        // A rooted path of two folders or more (`/usr/lib`, `./scripts/x`, `~/.config/y`);
        // not a closing tag (`</summary>` splits to `/summary`) nor slash-joined words
        // (`read/write`, `and/or`).
        let rooted = ["/", "./", "../", "~/"].iter().any(|r| w.starts_with(r));
        let parts = w.split('/').filter(|p| !p.is_empty()).count();
        if rooted && parts >= 2 {
            return Some("path");
        }
    }
    None
}

/// Identifiers a later turn may need, written in user or assistant text: URLs, version numbers
/// (`1.2.3`, `v0.15`), issue numbers (`#123`), hex hashes (7+ lowercase hex digits with a letter
/// and a digit) and file paths (`src/a.rs`, `main.rs`, `/usr/lib`). In order, without repeats.
pub fn identifiers(c: &Conversation) -> Vec<String> {
    let (mut out, mut seen) = (Vec::new(), HashSet::new());
    let texts = c
        .messages
        .iter()
        .filter(|m| matches!(m.role, Role::User | Role::Assistant))
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            Block::Text(t) if !t.text.starts_with(MARKER_PREFIX) => Some(t.text.as_str()),
            _ => None,
        });
    for text in texts {
        for raw in text.split(|c: char| c.is_whitespace() || "`\"'()[]{}<>,;*|".contains(c)) {
            let w = raw.trim_end_matches(['.', ':', '!', '?']);
            if identifier_kind(w).is_some() {
                push_unique(&mut out, &mut seen, w);
            }
        }
    }
    out
}

/// The text of the last user message that a person wrote (see [`instructions`] for what counts).
pub fn last_request(c: &Conversation) -> Option<String> {
    c.messages.iter().rev().find_map(|m| {
        if m.role != Role::User {
            return None;
        }
        let single = Conversation {
            messages: vec![m.clone()],
            ..Default::default()
        };
        let parts: Vec<String> = user_texts(&single);
        (!parts.is_empty()).then(|| parts.join("\n").trim().to_string())
    })
}

/// Every text of a conversation a reader (or the model) sees: system prompt strings, text
/// blocks, tool names and input strings, result texts. Thinking is left out.
fn texts(c: &Conversation) -> Vec<&str> {
    let mut out = Vec::new();
    if let Some(s) = &c.system {
        strings_in(s, &mut out);
    }
    for m in &c.messages {
        for b in &m.content {
            match b {
                Block::Text(t) => out.push(&t.text),
                Block::ToolUse(t) => {
                    out.push(&t.name);
                    match &t.input {
                        crate::conversation::ToolInput::Json(v) => strings_in(v, &mut out),
                        crate::conversation::ToolInput::Arguments(s)
                        | crate::conversation::ToolInput::Freeform(s) => out.push(s),
                    }
                }
                Block::ToolResult(r) => match &r.content {
                    Some(crate::conversation::ToolResultContent::Text(s)) => out.push(s),
                    Some(crate::conversation::ToolResultContent::Blocks(bs)) => {
                        out.extend(bs.iter().filter_map(|b| match b {
                            Block::Text(t) => Some(t.text.as_str()),
                            _ => None,
                        }))
                    }
                    None => {}
                },
                _ => {}
            }
        }
    }
    out
}

/// All of [`texts`] joined, whitespace runs collapsed. OpenAI `arguments` strings are searched
/// as parsed JSON strings too, so an escaped path (`"a\/b"`, `\n`) is found as written.
fn haystack(c: &Conversation) -> String {
    let mut parts: Vec<String> = texts(c).into_iter().map(str::to_string).collect();
    for t in c.messages.iter().flat_map(Message::tool_uses) {
        if let crate::conversation::ToolInput::Arguments(_) = &t.input {
            let v = t.input.to_value();
            let mut strings = Vec::new();
            strings_in(&v, &mut strings);
            parts.extend(strings.into_iter().map(str::to_string));
        }
    }
    one_line(&parts.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{ToolInput, ToolResult, ToolResultContent};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn call(id: &str, name: &str, input: Value) -> Block {
        Block::ToolUse(ToolUse {
            id: id.into(),
            name: name.into(),
            input: ToolInput::Json(input),
            extra: Default::default(),
        })
    }

    fn result(id: &str, text: &str, is_error: Option<bool>) -> Block {
        Block::ToolResult(crate::outcome::OutcomePolicy::Anthropic.apply(ToolResult {
            tool_use_id: id.into(),
            content: Some(ToolResultContent::Text(text.into())),
            is_error,
            extra: Default::default(),
            outcome: Default::default(),
            rewritten: None,
        }))
    }

    fn conv(messages: Vec<Message>) -> Conversation {
        Conversation {
            messages,
            ..Default::default()
        }
    }

    /// A small Anthropic-style session with one of everything.
    fn session() -> Conversation {
        conv(vec![
            Message::text(
                Role::User,
                "Fix the login bug from #42 in src/auth.rs. You must keep the API stable. \
                 Thanks!\nNever push to main.",
            ),
            Message::new(
                Role::Assistant,
                vec![
                    Block::text("Looking at https://example.com/docs and version 1.2.3 now."),
                    call("t1", "Read", json!({"file_path": "src/auth.rs"})),
                    call("t2", "Bash", json!({"command": "cargo test"})),
                ],
            ),
            Message::new(
                Role::User,
                vec![
                    result("t1", "fn login() {}", None),
                    result("t2", "3 tests failed", Some(true)),
                ],
            ),
            Message::new(
                Role::Assistant,
                vec![call(
                    "t3",
                    "apply_patch",
                    json!({"input": "*** Begin Patch\n*** Update File: src/auth.rs\n*** Add File: tests/login.rs\n*** End Patch"}),
                )],
            ),
            Message::new(Role::User, vec![result("t3", "Done", None)]),
            Message::text(Role::User, "Now commit it as deadbeef1 on v0.15, please."),
        ])
    }

    #[test]
    fn paths_come_from_path_keys_and_patch_headers() {
        assert_eq!(
            paths(&session()),
            vec!["src/auth.rs".to_string(), "tests/login.rs".to_string()]
        );
    }

    #[test]
    fn commands_carry_their_outcome() {
        let mut c = session();
        c.messages[1].content.push(call(
            "t4",
            "shell",
            json!({"command": ["bash", "-lc", "rg login"]}),
        ));
        assert_eq!(
            commands(&c, true),
            vec![
                CommandRun {
                    id: "t2".into(),
                    command: "cargo test".into(),
                    outcome: "error"
                },
                CommandRun {
                    id: "t4".into(),
                    command: "rg login".into(),
                    outcome: "no result"
                },
            ]
        );
    }

    #[test]
    fn failed_calls_are_the_error_results() {
        assert_eq!(failed_calls(&session(), true), vec!["t2".to_string()]);
    }

    #[test]
    fn instructions_are_user_sentences_with_a_constraint_word() {
        assert_eq!(
            instructions(&session()),
            vec![
                "You must keep the API stable.".to_string(),
                "Never push to main.".to_string(),
            ]
        );
    }

    #[test]
    fn a_multi_line_user_item_is_the_users_on_every_line() {
        let full = session();
        let p = Probes::of(&full, true);
        let told = |text: &str| {
            let s = p.survival(&conv(vec![Message::text(Role::User, text)]), true);
            s.into_iter()
                .find(|x| x.probe == "instructions")
                .map(|x| x.kept)
        };
        // The session state writes a long request as one item, later lines indented; a line
        // of the request ending with `:` is not a heading that takes the attribution away.
        let item = "The user's words, verbatim, oldest first:\n[user] #1: Fix the login bug.\n  \
                    Steps:\n  You must keep the API stable.\n  Never push to main.";
        assert_eq!(told(item), Some(2));
        // The same lines unindented under a heading that is not the user's tell nothing.
        let loose = "Notes:\nSteps:\nYou must keep the API stable.\nNever push to main.";
        assert_eq!(told(loose), Some(0));
    }

    #[test]
    fn only_counts_as_a_whole_word() {
        let c = conv(vec![Message::new(
            Role::User,
            vec![
                Block::text("Use the only flag. Read the onlyfans docs."),
                Block::text("<system-reminder>You must never mind.</system-reminder>"),
            ],
        )]);
        assert_eq!(instructions(&c), vec!["Use the only flag.".to_string()]);
    }

    #[test]
    fn identifiers_cover_urls_versions_issues_hashes_and_paths() {
        assert_eq!(
            identifiers(&session()),
            vec![
                "#42",
                "src/auth.rs",
                "https://example.com/docs",
                "1.2.3",
                "deadbeef1",
                "v0.15",
            ]
        );
    }

    #[test]
    fn last_request_is_the_last_text_a_user_wrote() {
        assert_eq!(
            last_request(&session()).as_deref(),
            Some("Now commit it as deadbeef1 on v0.15, please.")
        );
    }

    #[test]
    fn everything_survives_in_the_original() {
        let c = session();
        let p = Probes::of(&c, true);
        let s = p.survival(&c, true);
        assert!(s.iter().all(|x| x.kept == x.total), "{s:?}");
        assert_eq!(fidelity(&s), Some(1.0));
    }

    #[test]
    fn a_digest_keeps_what_it_names_and_loses_the_rest() {
        let c = session();
        let p = Probes::of(&c, true);
        // The first four messages replaced by a digest that names the failure and one path.
        let digest = format!(
            "{MARKER_PREFIX}\n[user] Fix the login bug from #42 in src/auth.rs.\n\
             [call t2 Bash(cargo   test)]\n[result t2 (error): 3 tests failed]"
        );
        let mut out = conv(vec![Message::text(Role::User, digest)]);
        out.messages.extend(c.messages[4..].iter().cloned());
        out.messages.remove(1); // t3's result goes with its call
        let s = p.survival(&out, true);
        let cells: Vec<(&str, String)> = s.iter().map(|x| (x.probe, x.cell())).collect();
        assert_eq!(
            cells,
            vec![
                // Named in the user's words, not as a file a call touched.
                ("paths", "0/2".to_string()),
                ("edited", "0/2".to_string()),
                // Named without its outcome: not kept.
                ("commands", "0/1".to_string()),
                ("failed_calls", "1/1".to_string()),
                ("fixes", "-".to_string()),
                // The first request lost its constraints; the last is kept.
                ("user_messages", "1/2".to_string()),
                ("instructions", "0/2".to_string()),
                ("identifiers", "4/6".to_string()),
                ("last_request", "1/1".to_string()),
            ]
        );
        assert_eq!(s[3].how_cell(), "1 line");
        assert_eq!(s[5].how_cell(), "1 kept");
        let f = fidelity(&s).unwrap();
        assert!((f - (0.0 + 0.0 + 0.0 + 1.0 + 0.5 + 0.0 + 4.0 / 6.0 + 1.0) / 8.0).abs() < 1e-12);
    }

    #[test]
    fn a_failure_written_as_plain_text_is_not_visible() {
        let out = conv(vec![Message::text(
            Role::User,
            "[result t2: 3 tests passed]",
        )]);
        assert!(!failure_visible(&out, "t2", true));
        let out = conv(vec![Message::text(Role::User, "t2 failed")]);
        assert!(failure_visible(&out, "t2", true));
    }

    #[test]
    fn bare_ids_and_denied_failures_do_not_count() {
        let c = session();
        let p = Probes::of(&c, true);
        // Eight lines naming ids with "no errors": a list of bare ids, no cause, no outcome.
        let ids: String = ["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"]
            .iter()
            .map(|i| format!("[result {i}: passed, no errors]\n"))
            .collect();
        let out = conv(vec![Message::text(Role::User, ids)]);
        let s = p.survival(&out, true);
        let f = fidelity(&s).unwrap();
        assert!(f < 0.3, "{s:?}");
        let by: HashMap<&str, usize> = s.iter().map(|x| (x.probe, x.kept)).collect();
        assert_eq!((by["failed_calls"], by["commands"]), (0, 0));
    }

    #[test]
    fn a_command_counts_only_with_its_outcome_and_a_failure_with_its_cause() {
        let c = session();
        let p = Probes::of(&c, true);
        let cells = |text: &str| -> (String, String) {
            let out = conv(vec![Message::text(Role::User, text)]);
            let s = p.survival(&out, true);
            (s[2].cell(), s[3].cell())
        };
        assert_eq!(cells("ran cargo test"), ("0/1".into(), "0/1".into()));
        assert_eq!(cells("t2 failed"), ("0/1".into(), "0/1".into()));
        assert_eq!(
            cells("[failed t2] Bash, command cargo test: error: 3 tests failed"),
            ("1/1".into(), "1/1".into())
        );
    }

    #[test]
    fn an_edited_file_counts_only_as_edited() {
        let c = session();
        let p = Probes::of(&c, true);
        assert_eq!(
            p.edited,
            vec!["src/auth.rs".to_string(), "tests/login.rs".to_string()]
        );
        let edited = |text: &str| -> String {
            let out = conv(vec![Message::text(Role::User, text)]);
            p.survival(&out, true)[1].cell()
        };
        assert_eq!(edited("src/auth.rs\ntests/login.rs"), "0/2");
        assert_eq!(edited("[read] src/auth.rs, tests/login.rs"), "0/2");
        assert_eq!(
            edited("[edited] src/auth.rs\n[created] tests/login.rs"),
            "2/2"
        );
        // A path is not its own context: `new` in a file name says nothing.
        assert_eq!(edited("tests/new/login.rs"), "0/2");
        // Under a heading that says what was done.
        assert_eq!(edited("Files modified:\n- auth.rs\n- login.rs"), "2/2");
    }

    #[test]
    fn a_failure_told_without_its_later_fix_is_stale() {
        let mut c = session();
        c.messages.push(Message::new(
            Role::Assistant,
            vec![call("t5", "Bash", json!({"command": "cargo test"}))],
        ));
        c.messages
            .push(Message::new(Role::User, vec![result("t5", "ok", None)]));
        let p = Probes::of(&c, true);
        assert_eq!(
            p.fixes,
            vec![FixRun {
                failed: "t2".into(),
                first_line: "3 tests failed".into(),
                fixed_by: "t5".into()
            }]
        );
        let fixes = |text: &str| -> Survival {
            let out = conv(vec![Message::text(Role::User, text)]);
            p.survival(&out, true).swap_remove(4)
        };
        let stale = fixes("[failed t2] Bash, command cargo test: error: 3 tests failed");
        assert_eq!(
            (stale.cell(), stale.how_cell()),
            ("0/1".into(), "1 stale".into())
        );
        let told = fixes("[failed t2] Bash: error: 3 tests failed -> fixed by t5 at message 6");
        assert_eq!(
            (told.cell(), told.how_cell()),
            ("1/1".into(), "1 line".into())
        );
        // Not told at all: neither kept nor stale.
        assert_eq!(fixes("nothing").how_cell(), "");
    }

    #[test]
    fn user_words_count_when_attributed_to_the_user() {
        let c = session();
        let p = Probes::of(&c, true);
        let last = "Now commit it as deadbeef1 on v0.15, please.";
        let user = |text: &str| -> (String, String) {
            let out = conv(vec![Message::text(Role::Assistant, text)]);
            let s = p.survival(&out, true);
            (s[5].cell(), s[8].cell())
        };
        assert_eq!(user(last), ("0/2".into(), "0/1".into()));
        assert_eq!(
            user(&format!("[user] #2: {last}")),
            ("1/2".into(), "1/1".into())
        );
        assert_eq!(
            user(&format!("All user messages:\n- {last}")),
            ("1/2".into(), "1/1".into())
        );
        // Shortened around its constraints: first sentence, constraint sentences, last.
        let first = &p.user_messages[0];
        let short = around_constraints(first);
        assert_ne!(&short, first);
        assert_eq!(user(&format!("[user] #1: {short}")).0, "1/2");
    }

    #[test]
    fn identifiers_leave_out_closing_tags_and_slash_joined_words() {
        let c = conv(vec![Message::new(
            Role::Assistant,
            vec![Block::text(
                "<summary>read/write and/or lib/spotter</summary> see /usr/lib and ./run/x and a/b.rs",
            )],
        )]);
        assert_eq!(identifiers(&c), vec!["/usr/lib", "./run/x", "a/b.rs"]);
    }
}
