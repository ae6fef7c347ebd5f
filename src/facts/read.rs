//! The facts of a history, read in one pass over its messages: the user's words, earlier
//! summaries, file touches, calls with their outcome, failures with their cause, assistant
//! replies; then the paths' style and, for each failure, the later identical call that fixed
//! it.

use super::calls::{argument_of, call_key, command_of, touches_of};
use super::{
    ARG_CHARS, CallFact, ERROR_LINE_CHARS, Facts, FailureFact, FileTouch, Fix, PathStyle,
    REPLY_CHARS, ReplyFact, SummaryFact, UserFact, informative_lines, person_text, summary_kind,
};
use crate::conversation::{Block, Message, Outcome, Role, ToolInput, ToolResult, ToolUse};
use foldhash::{HashMap, HashMapExt, HashSet};

impl Facts {
    /// Reads the facts of `messages` (each result's outcome is the one its format's reader
    /// typed, [`ToolResult::outcome`]).
    pub fn of(messages: &[Message]) -> Facts {
        let mut f = Facts::default();
        // Results by call id: (message index, outcome, text).
        let mut results: HashMap<&str, (usize, Outcome, &ToolResult)> =
            HashMap::with_capacity(messages.iter().map(|m| m.tool_results().count()).sum());
        for (i, m) in messages.iter().enumerate() {
            for r in m.tool_results() {
                results.insert(r.tool_use_id.as_str(), (i, r.outcome(), r));
            }
        }
        // Each call's block, for its key (computed only where a fix can be found, below).
        // (`None` for a self-contained call item, which has no key.)
        let mut uses: Vec<Option<&ToolUse>> = Vec::new();
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
                        // A result whose failure lives in its fields (a command's output
                        // chunks, B1.2) tells its cause there.
                        let text = match result {
                            Some(r) if needs_text => match r.2.text() {
                                t if t.trim().is_empty() => {
                                    crate::outcome::field_cause(r.2).unwrap_or(t)
                                }
                                t => t,
                            },
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
                        uses.push(Some(t));
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
                    // A built-in call that holds its own result (Responses `mcp_call`) and
                    // whose fields say how it went (B1.2): a call with that outcome.
                    Block::Other(v) => {
                        if let Some((call, failure)) = self_contained(v, i, f.calls.len()) {
                            f.failures.extend(failure);
                            f.calls.push(call);
                            uses.push(None);
                        }
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
            let t = uses.get(ci).copied().flatten()?;
            Some(match &t.input {
                ToolInput::Json(v) => call_key(t, v),
                other => call_key(t, &other.to_value()),
            })
        };
        let mut success_after: HashMap<u128, usize> = HashMap::new();
        let mut fix_of: HashMap<usize, usize> = HashMap::new();
        for (ci, c) in f.calls.iter().enumerate().skip(first_failed).rev() {
            if !failed_tools.contains(c.tool.as_str()) {
                continue;
            }
            match c.outcome {
                Some(Outcome::Success) => {
                    if let Some(k) = key(ci) {
                        success_after.insert(k, ci);
                    }
                }
                Some(Outcome::Error) => {
                    if let Some(&s) = key(ci).and_then(|k| success_after.get(&k)) {
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
}

/// A self-contained call item at message `i` whose own fields tell its outcome (a Responses
/// `mcp_call` with `error` or `status`, [`crate::outcome::in_any_table`]): the call (index
/// `at` in [`Facts::calls`], named by the item's `name`, its id the item's `id`) and, when it
/// failed, the failure with the cause its fields give. `None` for any other item.
fn self_contained(
    v: &serde_json::Value,
    i: usize,
    at: usize,
) -> Option<(CallFact, Option<FailureFact>)> {
    use serde_json::Value;
    let obj = v.as_object()?;
    let said = crate::outcome::in_any_table(obj)?;
    let field = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
    let kind = field("type").unwrap_or_default();
    let tool = match (field("server_label"), field("name")) {
        (Some(server), Some(name)) => format!("{server}.{name}"),
        (None, Some(name)) => name,
        (_, None) => kind,
    };
    let argument = field("arguments").map(|a| crate::render::one_line_clipped(&a, ARG_CHARS));
    let failure = (said.outcome == Outcome::Error).then(|| {
        let cause = said.cause.unwrap_or_default();
        let (first, last) = informative_lines(&cause);
        FailureFact {
            call: at,
            first_line: first
                .unwrap_or_else(|| crate::render::one_line_clipped(&cause, ERROR_LINE_CHARS)),
            last_line: last,
            fixed_by: None,
        }
    });
    Some((
        CallFact {
            id: field("id").unwrap_or_default(),
            tool,
            argument_line: argument.clone(),
            argument,
            command_line: None,
            command: None,
            outcome: Some(said.outcome),
            message: i,
            result_message: Some(i),
        },
        failure,
    ))
}
