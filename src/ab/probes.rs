//! Fidelity probes: facts a later turn may need, taken deterministically from the original
//! history, and the share of them that survives in a compacted one.
//!
//! ```text
//! original history -> Probes::of     paths, commands, failed calls, instructions, identifiers,
//!                                    last user request
//! compacted history -> survival      each item found verbatim (whitespace collapsed) anywhere in
//!                                    the output's text: messages, tool inputs, results, digests
//! ```
//!
//! Each probe is a small pure function. "Verbatim" compares with whitespace runs collapsed to
//! one space on both sides, so a digest line that puts a multi-line command on one line still
//! counts; a clipped command (`cargo test --wor…`) does not.

use crate::conversation::{Block, Conversation, Message, Outcome, Role, ToolUse};
use crate::facts::{INSTRUCTION_WORDS, has_phrase, sentences};
use crate::render::one_line;
use crate::strategy::MARKER_PREFIX;
use serde::Serialize;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

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

/// Every probe of one history.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Probes {
    /// File paths the tools touched.
    pub paths: Vec<String>,
    /// Commands run, with their outcome.
    pub commands: Vec<CommandRun>,
    /// Ids of the calls that failed.
    pub failed_calls: Vec<String>,
    /// The first informative error line of each failed call (same order as `failed_calls`).
    pub failure_lines: Vec<String>,
    /// User sentences that instruct or constrain.
    pub instructions: Vec<String>,
    /// URLs, versions, issue numbers, hex hashes and file paths written in user / assistant text.
    pub identifiers: Vec<String>,
    /// The text of the last user request.
    pub last_request: Option<String>,
}

/// How many items of one probe survive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Survival {
    /// The probe's name (`paths`, `commands`, `failed_calls`, `instructions`, `identifiers`,
    /// `last_request`).
    pub probe: &'static str,
    /// Items found in the output.
    pub kept: usize,
    /// Items in the original.
    pub total: usize,
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

impl Probes {
    /// Runs every probe on `c`. `has_error_flag`: the wire marks failures explicitly
    /// (Anthropic), so a result without the flag is a success.
    pub fn of(c: &Conversation, has_error_flag: bool) -> Probes {
        Probes {
            paths: paths(c),
            commands: commands(c, has_error_flag),
            failed_calls: failed_calls(c, has_error_flag),
            failure_lines: failure_lines(c, has_error_flag),
            instructions: instructions(c),
            identifiers: identifiers(c),
            last_request: last_request(c),
        }
    }

    /// The share of each probe found in `output`.
    pub fn survival(&self, output: &Conversation, has_error_flag: bool) -> Vec<Survival> {
        let hay = haystack(output);
        let hay_lines: Vec<String> = texts(output)
            .iter()
            .flat_map(|t| t.lines())
            .map(|l| one_line(l).to_lowercase())
            .collect();
        let found = |items: Vec<&str>| -> (usize, usize) {
            let kept = items.iter().filter(|i| hay.contains(&one_line(i))).count();
            (kept, items.len())
        };
        let survival = |probe, (kept, total)| Survival { probe, kept, total };
        let failures_kept = self
            .failed_calls
            .iter()
            .zip(&self.failure_lines)
            .filter(|(id, line)| failure_told(output, id, line, has_error_flag))
            .count();
        vec![
            survival("paths", {
                // By file name plus as many parent folders as tell the session's files apart,
                // so a relative or left-clipped path counts and a bare folder does not.
                let need = crate::facts::parents_needed(&self.paths);
                let kept = self
                    .paths
                    .iter()
                    .zip(need)
                    .filter(|(p, n)| crate::facts::mentions_path(&hay, p, *n))
                    .count();
                (kept, self.paths.len())
            }),
            survival(
                "commands",
                (
                    self.commands
                        .iter()
                        .filter(|c| command_visible(output, &hay_lines, c, has_error_flag))
                        .count(),
                    self.commands.len(),
                ),
            ),
            survival("failed_calls", (failures_kept, self.failed_calls.len())),
            survival(
                "instructions",
                found(self.instructions.iter().map(String::as_str).collect()),
            ),
            survival(
                "identifiers",
                found(self.identifiers.iter().map(String::as_str).collect()),
            ),
            survival(
                "last_request",
                found(self.last_request.iter().map(String::as_str).collect()),
            ),
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

/// The command text of a call: input `command` or `cmd`, a string, or an argv array
/// (`["bash", "-lc", script]` gives the script, other arrays are joined with spaces).
fn command_of(t: &ToolUse) -> Option<String> {
    let input = t.input.to_value();
    let v = ["command", "cmd"].iter().find_map(|k| input.get(*k))?;
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
            let strs: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            Some(match strs.as_slice() {
                [_, flag, script] if flag.starts_with('-') => (*script).to_string(),
                _ => strs.join(" "),
            })
        }
        _ => None,
    }
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

/// Commands run (calls with a `command` / `cmd` input), in order, with their outcome.
pub fn commands(c: &Conversation, has_error_flag: bool) -> Vec<CommandRun> {
    let outcomes = outcomes(c, has_error_flag);
    tool_uses(c)
        .filter_map(|t| {
            let command = command_of(t)?;
            (!command.trim().is_empty()).then(|| CommandRun {
                id: t.id.clone(),
                command: command.trim().to_string(),
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
/// names the id together with `error` / `fail` (a digest line `[result id (error): …]`).
pub fn failure_visible(output: &Conversation, id: &str, has_error_flag: bool) -> bool {
    let result_kept = output
        .messages
        .iter()
        .flat_map(Message::tool_results)
        .any(|r| r.tool_use_id == id && r.outcome(has_error_flag) == Outcome::Error);
    result_kept
        || texts(output).iter().any(|t| {
            t.lines().any(|l| {
                let lower = l.to_lowercase();
                l.contains(id) && (lower.contains("error") || lower.contains("fail"))
            })
        })
}

/// The first informative error line of each failed call, in [`failed_calls`] order (from
/// [`crate::facts::Facts`]).
pub fn failure_lines(c: &Conversation, has_error_flag: bool) -> Vec<String> {
    let facts = crate::facts::Facts::of(&c.messages, has_error_flag);
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
    "without error",
    "no failures",
    "passed",
];

/// A failure is told when the output keeps its failed result, or has a line that names the id,
/// says error/failed without denying it (`no errors`), and holds the start of its first error
/// line (its cause): a bare id with the word "error" is not enough.
pub fn failure_told(
    output: &Conversation,
    id: &str,
    first_line: &str,
    has_error_flag: bool,
) -> bool {
    let result_kept = output
        .messages
        .iter()
        .flat_map(Message::tool_results)
        .any(|r| r.tool_use_id == id && r.outcome(has_error_flag) == Outcome::Error);
    let cause: String = one_line(first_line)
        .to_lowercase()
        .chars()
        .take(40)
        .collect();
    result_kept
        || texts(output).iter().any(|t| {
            t.lines().any(|l| {
                let lower = one_line(l).to_lowercase();
                l.contains(id)
                    && (lower.contains("error") || lower.contains("fail"))
                    && !NEGATIONS.iter().any(|n| has_phrase(&lower, n))
                    && lower.contains(&cause)
            })
        })
}

/// A command counts when the output keeps its call with its result (same outcome), or has a
/// line holding the command and its outcome word (ok / failed / unknown, or what the outcome
/// means: error, success, passed).
fn command_visible(
    output: &Conversation,
    lines: &[String],
    c: &CommandRun,
    has_error_flag: bool,
) -> bool {
    let kept_call = output
        .messages
        .iter()
        .flat_map(Message::tool_results)
        .any(|r| {
            r.tool_use_id == c.id && outcome_name(Some(&r.outcome(has_error_flag))) == c.outcome
        });
    let words: &[&str] = match c.outcome {
        "success" => &["ok", "success", "succeeded", "passed"],
        "error" => &["failed", "error"],
        "unknown" => &["unknown"],
        _ => &["no result"],
    };
    let cmd = one_line(&c.command).to_lowercase();
    kept_call
        || lines
            .iter()
            .any(|l| l.contains(&cmd) && words.iter().any(|w| has_phrase(l, w)))
}

/// Text a person wrote: text blocks of user messages, without compactor's own markers,
/// earlier summaries and harness elements (`<system-reminder>` …); slash commands count with
/// their arguments ([`crate::facts::person_text`]).
fn user_texts(c: &Conversation) -> Vec<String> {
    c.messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            Block::Text(t) => crate::facts::person_text(&t.text),
            _ => None,
        })
        .collect()
}

/// User sentences with an instruction word (must, never, always, don't, do not, only,
/// make sure, ensure, should not, avoid, required), in order, without repeats.
pub fn instructions(c: &Conversation) -> Vec<String> {
    let (mut out, mut seen) = (Vec::new(), HashSet::new());
    for text in user_texts(c) {
        for s in sentences(&text) {
            let lower = s.to_lowercase().replace('’', "'");
            if INSTRUCTION_WORDS.iter().any(|w| has_phrase(&lower, w)) {
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
    if w.chars().all(path_chars) && w.chars().any(char::is_alphabetic) {
        if w.contains('/') && w.len() >= 3 && !w.starts_with("//") {
            return Some("path");
        }
        if let Some((stem, ext)) = w.rsplit_once('.')
            && !stem.is_empty()
            && FILE_EXTENSIONS.contains(&ext)
        {
            return Some("path");
        }
    }
    None
}

/// Identifiers a later turn may need, written in user or assistant text: URLs, version numbers
/// (`1.2.3`, `v0.15`), issue numbers (`#123`), hex hashes (7+ lowercase hex digits with a letter
/// and a digit) and file paths (`src/a.rs`, `main.rs`). In order, without repeats.
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
                ("paths", "1/2".to_string()),
                // Named without its outcome: not kept.
                ("commands", "0/1".to_string()),
                ("failed_calls", "1/1".to_string()),
                ("instructions", "0/2".to_string()),
                ("identifiers", "4/6".to_string()),
                ("last_request", "1/1".to_string()),
            ]
        );
        let f = fidelity(&s).unwrap();
        assert!((f - (0.5 + 0.0 + 1.0 + 0.0 + 4.0 / 6.0 + 1.0) / 6.0).abs() < 1e-12);
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
            (s[1].cell(), s[2].cell())
        };
        assert_eq!(cells("ran cargo test"), ("0/1".into(), "0/1".into()));
        assert_eq!(cells("t2 failed"), ("0/1".into(), "0/1".into()));
        assert_eq!(
            cells("[failed t2] Bash, command cargo test: error: 3 tests failed"),
            ("1/1".into(), "1/1".into())
        );
    }
}
