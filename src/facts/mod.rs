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

mod errors;
mod paths;
mod state;
mod state_size;
mod user;

pub use errors::{
    CLEARED_PREFIX, ERROR_LINE_CHARS, informative_lines, is_informative, output_text,
};
pub use paths::{PATH_CHARS, PathStyle, clip_left, file_name, mentions_path, parents_needed};
pub use state::{LeftOut, Rendered, SessionState, UserWords, summary_item};
pub use state_size::StateSizes;
pub use user::{
    CLAUDE_CODE_SUMMARY_PREFIX, CODEX_SUMMARY_PREFIX, COMPACTOR_SUMMARY_PREFIX, INSTRUCTION_WORDS,
    Shortened, SummaryKind, around_constraints, has_phrase, is_constraint, person_text, sentences,
    shorten_around_constraints, summary_kind,
};

use crate::conversation::{Block, Message, Outcome, Role, ToolInput, ToolResult, ToolUse};
use foldhash::{HashMap, HashMapExt, HashSet};
use serde::Serialize;
use serde_json::Value;

/// The fixed first words of every marker message compactor writes; a later pass recognises its
/// own markers by them and merges their state forward.
pub const MARKER_PREFIX: &str = "[compactor: earlier conversation compacted]";

/// Characters a session state keeps of a command or a call's argument (on one line, see
/// [`CallFact::command_line`]).
pub const ARG_CHARS: usize = 120;

/// Characters a session state keeps of an assistant reply (on one line, see
/// [`ReplyFact::line`]).
pub const REPLY_CHARS: usize = 160;

/// Tool input keys that name a file.
const PATH_KEYS: &[&str] = &["file_path", "path", "notebook_path"];

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

/// The command text of a call: input `command` or `cmd`, a string, or an argv array
/// (`["bash", "-lc", script]` gives the script, other arrays are joined with spaces). Editor
/// tools whose `command` is a verb (`view`, `create`, `str_replace`) are not shell calls.
pub fn command_of(input: &Value) -> Option<String> {
    if input.get("path").is_some() || input.get("file_path").is_some() {
        return None;
    }
    let v = ["command", "cmd"].iter().find_map(|k| input.get(*k))?;
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let strs: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            match strs.as_slice() {
                [_, flag, script] if flag.starts_with('-') => (*script).to_string(),
                _ => strs.join(" "),
            }
        }
        _ => return None,
    };
    let s = s.trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// Keys whose value best names what a non-shell call did, in order of preference.
const ARGUMENT_KEYS: &[&str] = &[
    "file_path",
    "path",
    "notebook_path",
    "pattern",
    "url",
    "query",
    "description",
    "prompt",
];

fn argument_of(input: &Value) -> Option<String> {
    let obj = input.as_object()?;
    ARGUMENT_KEYS
        .iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_str))
        .or_else(|| obj.values().find_map(Value::as_str))
        .map(str::to_string)
}

/// The files a call names and what it does to them (before its outcome is known). `result`
/// is the text of its result, which tells a `Write` that created a file from one that
/// replaced it.
fn touches_of(
    t: &ToolUse,
    input: &Value,
    command: Option<&str>,
    result: &str,
) -> Vec<(String, FileAction)> {
    let mut out = Vec::new();
    let name = t.name.as_str();
    if let Some(obj) = input.as_object() {
        let path = PATH_KEYS
            .iter()
            .find_map(|k| obj.get(*k).and_then(Value::as_str));
        if let Some(p) = path.filter(|p| !p.trim().is_empty()) {
            let verb = obj.get("command").and_then(Value::as_str).unwrap_or("");
            let action = match (name, verb) {
                ("Read" | "read_file" | "view", _) | (_, "view") => Some(FileAction::Read),
                ("Write" | "write_file" | "create_file", _) => Some(
                    if result.contains("created") || result.contains("Created") {
                        FileAction::Created
                    } else {
                        FileAction::Edited
                    },
                ),
                (_, "create") => Some(FileAction::Created),
                ("Edit" | "MultiEdit" | "NotebookEdit" | "edit_file" | "replace", _)
                | (_, "str_replace" | "insert" | "undo_edit") => Some(FileAction::Edited),
                ("Grep" | "Glob" | "grep" | "glob" | "LS" | "list_dir", _) => {
                    Some(FileAction::Searched)
                }
                _ => Some(FileAction::Read),
            };
            if let Some(a) = action {
                out.push((p.trim().to_string(), a));
            }
        }
    }
    // apply_patch headers, in any input string (Codex `apply_patch`, freeform or JSON).
    let mut strings = Vec::new();
    strings_in(input, &mut strings);
    for s in strings.into_iter().filter(|s| s.contains("*** ")) {
        for line in s.lines() {
            let hit = [
                ("*** Add File: ", FileAction::Created),
                ("*** Update File: ", FileAction::Edited),
                ("*** Delete File: ", FileAction::Deleted),
                ("*** Move to: ", FileAction::Created),
            ]
            .into_iter()
            .find_map(|(h, a)| line.strip_prefix(h).map(|p| (p.trim().to_string(), a)));
            out.extend(hit);
        }
    }
    // `rm` / `git rm` in a shell command: every non-flag word after it, up to the next `;`/`&&`.
    if let Some(cmd) = command {
        for part in cmd.split(['\n', ';', '&', '|']) {
            let words: Vec<&str> = part.split_whitespace().collect();
            let rest = match words.as_slice() {
                ["rm", rest @ ..] | ["git", "rm", rest @ ..] => rest,
                _ => continue,
            };
            for w in rest.iter().filter(|w| !w.starts_with('-')) {
                out.push((w.trim_matches(['"', '\'']).to_string(), FileAction::Deleted));
            }
        }
    }
    out
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

/// A call's identity for "the same call again": the 128-bit xxh3 hash of the tool name and the
/// input's JSON tree (keys in order, fed without serializing it, as the token cache keys are),
/// so two calls share a key when their name and compact JSON input are the same.
fn call_key(t: &ToolUse, input: &Value) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    crate::tokens::hash_str(&mut h, &t.name);
    crate::tokens::hash_value(&mut h, input);
    h.digest128()
}

impl Facts {
    /// Reads the facts of `messages`. `has_error_flag`: the wire marks failures explicitly
    /// (Anthropic), so a result without the flag is a success.
    pub fn of(messages: &[Message], has_error_flag: bool) -> Facts {
        let mut f = Facts::default();
        // Results by call id: (message index, outcome, text).
        let mut results: HashMap<&str, (usize, Outcome, &ToolResult)> =
            HashMap::with_capacity(messages.iter().map(|m| m.tool_results().count()).sum());
        for (i, m) in messages.iter().enumerate() {
            for r in m.tool_results() {
                results.insert(r.tool_use_id.as_str(), (i, r.outcome(has_error_flag), r));
            }
        }
        // Each call's block, for its key (computed only where a fix can be found, below).
        let mut uses: Vec<&ToolUse> = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            // Claude Code logs a slash command's expanded prompt (`isMeta`) right after the
            // command; the import joins them into one user message. The expansion is the
            // command's text, not the person's: only the command and its arguments count.
            let mut after_command = false;
            for b in &m.content {
                match b {
                    Block::Text(_) if m.role == Role::User && after_command => {}
                    Block::Text(t) if m.role == Role::User => {
                        after_command = t.text.contains("<command-name>");
                        if let Some(kind) = summary_kind(&t.text) {
                            f.summaries.push(SummaryFact {
                                message: i,
                                kind,
                                text: t.text.trim().to_string(),
                            });
                        } else if let Some(text) = person_text(&t.text) {
                            f.user.push(UserFact { message: i, text });
                        }
                    }
                    Block::Text(t) if m.role == Role::Assistant && !t.text.trim().is_empty() => {
                        let text = t.text.trim().to_string();
                        f.replies.push(ReplyFact {
                            message: i,
                            line: crate::render::one_line_clipped(&text, REPLY_CHARS),
                            text,
                        });
                    }
                    Block::ToolUse(t) => {
                        let input = match &t.input {
                            ToolInput::Json(v) => std::borrow::Cow::Borrowed(v),
                            other => std::borrow::Cow::Owned(other.to_value()),
                        };
                        let command = command_of(&input);
                        let result = results.get(t.id.as_str());
                        let outcome = result.map(|r| r.1);
                        // The result's text is read only where it tells something: a failure's
                        // cause, and whether a Write created its file.
                        let needs_text = outcome == Some(Outcome::Error)
                            || matches!(t.name.as_str(), "Write" | "write_file" | "create_file");
                        let text = match result {
                            Some(r) if needs_text => r.2.text(),
                            _ => String::new(),
                        };
                        if outcome != Some(Outcome::Error) {
                            for (path, action) in touches_of(t, &input, command.as_deref(), &text) {
                                f.touches.push(FileTouch {
                                    path,
                                    // Shown once the style of every path is known (below).
                                    shown: String::new(),
                                    action,
                                    id: t.id.clone(),
                                    message: i,
                                });
                            }
                        }
                        if outcome == Some(Outcome::Error) {
                            let (first, last) = informative_lines(&text);
                            let first = first.unwrap_or_else(|| {
                                crate::render::one_line_clipped(&text, ERROR_LINE_CHARS)
                            });
                            f.failures.push(FailureFact {
                                call: f.calls.len(),
                                first_line: first,
                                last_line: last,
                                fixed_by: None,
                            });
                        }
                        uses.push(t);
                        f.calls.push(CallFact {
                            id: t.id.clone(),
                            tool: t.name.clone(),
                            argument: if command.is_none() {
                                argument_of(&input)
                            } else {
                                None
                            },
                            command_line: command
                                .as_deref()
                                .map(|c| crate::render::one_line_clipped(c, ARG_CHARS)),
                            argument_line: None,
                            command,
                            outcome,
                            message: i,
                            result_message: result.map(|r| r.0),
                        });
                    }
                    _ => {}
                }
            }
        }
        // How paths are shown depends on every path of the history.
        f.style = PathStyle::of(f.touches.iter().map(|t| t.path.as_str()));
        for t in &mut f.touches {
            t.shown = f.style.show(&t.path);
        }
        for c in &mut f.calls {
            c.argument_line = c
                .argument
                .as_deref()
                .map(|a| crate::render::one_line_clipped(&f.style.show(a), ARG_CHARS));
        }
        // Fixes: walking back, the latest success of each call key seen so far is the first
        // success after the failure at hand. A key holds the tool name, so only the calls of a
        // tool that failed, from its first failure on, are keyed.
        let first_failed = f.failures.first().map_or(f.calls.len(), |fl| fl.call);
        let failed_tools: HashSet<&str> = f
            .failures
            .iter()
            .filter_map(|fl| f.calls.get(fl.call))
            .map(|c| c.tool.as_str())
            .collect();
        let key = |ci: usize| {
            let t = uses[ci];
            match &t.input {
                ToolInput::Json(v) => call_key(t, v),
                other => call_key(t, &other.to_value()),
            }
        };
        let mut success_after: HashMap<u128, usize> = HashMap::new();
        let mut fix_of: HashMap<usize, usize> = HashMap::new();
        for (ci, c) in f.calls.iter().enumerate().skip(first_failed).rev() {
            if !failed_tools.contains(c.tool.as_str()) {
                continue;
            }
            match c.outcome {
                Some(Outcome::Success) => {
                    success_after.insert(key(ci), ci);
                }
                Some(Outcome::Error) => {
                    if let Some(&s) = success_after.get(&key(ci)) {
                        fix_of.insert(ci, s);
                    }
                }
                _ => {}
            }
        }
        for fl in &mut f.failures {
            if let Some(&s) = fix_of.get(&fl.call) {
                let c = &f.calls[s];
                fl.fixed_by = Some(Fix {
                    id: c.id.clone(),
                    message: c.message,
                });
            }
        }
        f
    }

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
mod tests {
    use super::test_blocks::{call, result};
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn session() -> Vec<Message> {
        vec![
            Message::text(
                Role::User,
                "<system-reminder>x</system-reminder>Fix the build.",
            ),
            Message::new(
                Role::Assistant,
                vec![
                    call("t1", "Read", json!({"file_path": "/p/src/a.rs"})),
                    call("t2", "Bash", json!({"command": "cargo build"})),
                ],
            ),
            Message::new(
                Role::User,
                vec![
                    result("t1", "fn a() {}", false),
                    result(
                        "t2",
                        "Exit code 101\nerror[E0425]: cannot find `b`\n\nerror: could not compile",
                        true,
                    ),
                ],
            ),
            Message::new(
                Role::Assistant,
                vec![
                    call(
                        "t3",
                        "Edit",
                        json!({"file_path": "/p/src/a.rs", "old_string": "a", "new_string": "b"}),
                    ),
                    call(
                        "t4",
                        "Write",
                        json!({"file_path": "/p/src/new.rs", "content": "x"}),
                    ),
                ],
            ),
            Message::new(
                Role::User,
                vec![
                    result("t3", "The file /p/src/a.rs has been updated.", false),
                    result("t4", "File created successfully at: /p/src/new.rs", false),
                ],
            ),
            Message::new(
                Role::Assistant,
                vec![call("t5", "Bash", json!({"command": "cargo build"}))],
            ),
            Message::new(Role::User, vec![result("t5", "Finished", false)]),
        ]
    }

    proptest::proptest! {
        /// A failure's fix is the first later call of the same tool with the same input that
        /// succeeded (counted here call by call), whatever other tools and inputs come between.
        #[test]
        fn a_fix_is_the_first_later_identical_success(
            calls in proptest::collection::vec((0usize..3, 0usize..3, proptest::bool::ANY), 0..24)
        ) {
            let tools = ["Bash", "Grep", "Read"];
            let mut msgs = Vec::new();
            for (k, (tool, input, failed)) in calls.iter().enumerate() {
                let id = format!("c{k}");
                msgs.push(Message::new(Role::Assistant, vec![call(&id, tools[*tool], json!({"command": format!("x{input}")}))]));
                msgs.push(Message::new(Role::User, vec![result(&id, "error: no", *failed)]));
            }
            let f = Facts::of(&msgs, true);
            let failed: Vec<usize> = (0..calls.len()).filter(|&k| calls[k].2).collect();
            proptest::prop_assert_eq!(f.failures.len(), failed.len());
            for (fl, &k) in f.failures.iter().zip(&failed) {
                let want = (k + 1..calls.len())
                    .find(|&j| !calls[j].2 && calls[j].0 == calls[k].0 && calls[j].1 == calls[k].1)
                    .map(|j| Fix { id: format!("c{j}"), message: 2 * j });
                proptest::prop_assert_eq!(&fl.fixed_by, &want, "call {}", k);
            }
        }
    }

    #[test]
    fn a_failure_has_its_cause_and_its_fix() {
        let f = Facts::of(&session(), true);
        assert_eq!(
            f.failures,
            vec![FailureFact {
                call: 1,
                first_line: "error[E0425]: cannot find `b`".into(),
                last_line: Some("error: could not compile".into()),
                fixed_by: Some(Fix {
                    id: "t5".into(),
                    message: 5
                }),
            }]
        );
        assert_eq!(f.calls[1].command.as_deref(), Some("cargo build"));
        assert_eq!(f.calls[1].outcome, Some(Outcome::Error));
    }

    #[test]
    fn files_carry_what_was_done_to_them() {
        let f = Facts::of(&session(), true);
        let got: Vec<(&str, FileAction)> = f
            .touches
            .iter()
            .map(|t| (t.path.as_str(), t.action))
            .collect();
        assert_eq!(
            got,
            vec![
                ("/p/src/a.rs", FileAction::Read),
                ("/p/src/a.rs", FileAction::Edited),
                ("/p/src/new.rs", FileAction::Created),
            ]
        );
    }

    #[test]
    fn user_words_leave_out_the_harness() {
        let f = Facts::of(&session(), true);
        assert_eq!(
            f.user,
            vec![UserFact {
                message: 0,
                text: "Fix the build.".into()
            }]
        );
    }

    #[test]
    fn a_failed_edit_touches_nothing_and_rm_deletes() {
        let msgs = vec![
            Message::new(
                Role::Assistant,
                vec![
                    call(
                        "e1",
                        "Edit",
                        json!({"file_path": "a.rs", "old_string": "x", "new_string": "y"}),
                    ),
                    call("e2", "Bash", json!({"command": "rm -f build/out.o && ls"})),
                ],
            ),
            Message::new(
                Role::User,
                vec![
                    result(
                        "e1",
                        "<tool_use_error>String not found</tool_use_error>",
                        true,
                    ),
                    result("e2", "", false),
                ],
            ),
        ];
        let f = Facts::of(&msgs, true);
        let got: Vec<(&str, FileAction)> = f
            .touches
            .iter()
            .map(|t| (t.path.as_str(), t.action))
            .collect();
        assert_eq!(got, vec![("build/out.o", FileAction::Deleted)]);
        assert_eq!(f.failures[0].first_line, "String not found");
        assert_eq!(f.failures[0].fixed_by, None);
    }

    #[test]
    fn a_slash_commands_expanded_prompt_is_not_the_persons_words() {
        let msgs = vec![Message::new(
            Role::User,
            vec![
                Block::text(
                    "<command-message>orchestrator is running…</command-message>\n<command-name>/orchestrator</command-name>\n<command-args>create TODO app</command-args>",
                ),
                Block::text("Split complex tasks into subtasks. Use Glob to list files."),
            ],
        )];
        let f = Facts::of(&msgs, true);
        assert_eq!(
            f.user,
            vec![UserFact {
                message: 0,
                text: "/orchestrator create TODO app".into()
            }]
        );
    }
}
