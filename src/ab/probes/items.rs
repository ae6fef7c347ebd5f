//! The items each probe looks for, taken deterministically from the original history: the
//! paths the tools touched, the commands run with their outcome, the failed calls and their
//! first error line, the user's instructions, the identifiers written in text, the last
//! request.

use super::{CommandRun, push_unique};
use crate::conversation::{Block, Conversation, Message, Outcome, Role, ToolUse};
use crate::facts::{Facts, is_constraint, sentences};
use crate::strategy::MARKER_PREFIX;
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
    "ex", "exs", "heex",
];

/// Every string inside a JSON value, depth first.
pub(super) fn strings_in<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
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
fn outcomes(c: &Conversation) -> HashMap<&str, Outcome> {
    c.messages
        .iter()
        .flat_map(Message::tool_results)
        .map(|r| (r.tool_use_id.as_str(), r.outcome()))
        .collect()
}

pub(super) fn outcome_name(o: Option<&Outcome>) -> &'static str {
    match o {
        Some(Outcome::Success) => "success",
        Some(Outcome::Error) => "error",
        Some(Outcome::Unknown) => "unknown",
        None => "no result",
    }
}

/// Commands run (calls with a shell command, `crate::facts::command_of`), in order, with
/// their outcome.
pub fn commands(c: &Conversation) -> Vec<CommandRun> {
    let outcomes = outcomes(c);
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
pub fn failed_calls(c: &Conversation) -> Vec<String> {
    let (mut out, mut seen) = (Vec::new(), HashSet::new());
    for r in c.messages.iter().flat_map(Message::tool_results) {
        if r.outcome() == Outcome::Error {
            push_unique(&mut out, &mut seen, &r.tool_use_id);
        }
    }
    out
}

/// The first informative error line of each failed call, in [`failed_calls`] order (from
/// `crate::facts::Facts`).
pub fn failure_lines(c: &Conversation) -> Vec<String> {
    let facts = Facts::of(&c.messages);
    let ids = failed_calls(c);
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

/// Text a person wrote: text blocks of user messages, without compactor's own markers,
/// earlier summaries and harness elements (`<system-reminder>` …); slash commands count with
/// their arguments ([`crate::facts::person_text`]).
fn user_texts(c: &Conversation) -> Vec<String> {
    Facts::of(&c.messages)
        .user
        .into_iter()
        .map(|u| u.text)
        .collect()
}

/// User sentences with an instruction word (`crate::facts::INSTRUCTION_WORDS`), in order,
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
