//! What a call's input says: its shell command, the argument that best names what it did,
//! the files it touches and how, and its identity for "the same call again".

use super::FileAction;
use crate::conversation::ToolUse;
use serde_json::Value;

/// Tool input keys that name a file.
const PATH_KEYS: &[&str] = &["file_path", "path", "notebook_path"];

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

pub(super) fn argument_of(input: &Value) -> Option<String> {
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
pub(super) fn touches_of(
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
    // A Responses `apply_patch_call`'s operation (openai-python `ApplyPatchCall`:
    // `operation: {type: create_file | update_file | delete_file, path, diff?}`).
    if let Some(op) = input.get("operation").and_then(Value::as_object)
        && let Some(path) = op.get("path").and_then(Value::as_str)
    {
        let action = match op.get("type").and_then(Value::as_str) {
            Some("create_file") => Some(FileAction::Created),
            Some("update_file") => Some(FileAction::Edited),
            Some("delete_file") => Some(FileAction::Deleted),
            _ => None,
        };
        out.extend(action.map(|a| (path.trim().to_string(), a)));
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
pub(super) fn call_key(t: &ToolUse, input: &Value) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    crate::tokens::hash_str(&mut h, &t.name);
    crate::tokens::hash_value(&mut h, input);
    h.digest128()
}
