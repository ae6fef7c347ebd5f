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

/// Results by call id: (message index, outcome, the result).
type Results<'m> = HashMap<&'m str, (usize, Outcome, &'m ToolResult)>;

impl Facts {
    /// Reads the facts of `messages` (each result's outcome is the one its format's reader
    /// typed, [`ToolResult::outcome`]).
    pub fn of(messages: &[Message]) -> Facts {
        let mut f = Facts::default();
        // Results by call id: (message index, outcome, text).
        let mut results: Results =
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
            f.read_message(i, m, &results, &mut uses);
        }
        f.show_paths();
        f.find_fixes(&uses);
        f
    }

    /// Reads message `i`'s blocks: the user's words and earlier summaries, the assistant's
    /// replies, calls (each call's block pushed on `uses`, `None` for a self-contained item).
    fn read_message<'m>(
        &mut self,
        i: usize,
        m: &'m Message,
        results: &Results,
        uses: &mut Vec<Option<&'m ToolUse>>,
    ) {
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
                        self.summaries.push(SummaryFact {
                            message: i,
                            kind,
                            text: t.text.trim().to_string(),
                        });
                    } else if let Some(text) = person_text(&t.text) {
                        self.user.push(UserFact { message: i, text });
                    }
                }
                Block::Text(t) if m.role == Role::Assistant && !t.text.trim().is_empty() => {
                    let text = t.text.trim().to_string();
                    self.replies.push(ReplyFact {
                        message: i,
                        line: crate::render::one_line_clipped(&text, REPLY_CHARS),
                        text,
                    });
                }
                Block::ToolUse(t) => {
                    self.read_call(i, t, results.get(t.id.as_str()));
                    uses.push(Some(t));
                }
                // A built-in call that holds its own result (Responses `mcp_call`) and
                // whose fields say how it went (B1.2): a call with that outcome.
                Block::Other(v) => {
                    if let Some((call, failure)) = self_contained(v, i, self.calls.len()) {
                        self.failures.extend(failure);
                        self.calls.push(call);
                        uses.push(None);
                    }
                }
                _ => {}
            }
        }
    }

    /// Reads call `t` of message `i` with its `result` (message index, outcome, the result):
    /// the files it touched (unless it failed), its failure with the cause, and the call.
    fn read_call(&mut self, i: usize, t: &ToolUse, result: Option<&(usize, Outcome, &ToolResult)>) {
        let input = match &t.input {
            ToolInput::Json(v) => std::borrow::Cow::Borrowed(v),
            other => std::borrow::Cow::Owned(other.to_value()),
        };
        let command = command_of(&input);
        let outcome = result.map(|r| r.1);
        // The result's text is read only where it tells something: a failure's
        // cause, and whether a Write created its file.
        let needs_text = outcome == Some(Outcome::Error)
            || matches!(t.name.as_str(), "Write" | "write_file" | "create_file");
        // A result whose failure lives in its fields (a command's output
        // chunks, B1.2) tells its cause there.
        let text = match result {
            Some(r) if needs_text => match r.2.text() {
                t if t.trim().is_empty() => crate::outcome::field_cause(r.2).unwrap_or(t),
                t => t,
            },
            _ => String::new(),
        };
        if outcome != Some(Outcome::Error) {
            for (path, action) in touches_of(t, &input, command.as_deref(), &text) {
                self.touches.push(FileTouch {
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
            let first =
                first.unwrap_or_else(|| crate::render::one_line_clipped(&text, ERROR_LINE_CHARS));
            self.failures.push(FailureFact {
                call: self.calls.len(),
                first_line: first,
                last_line: last,
                fixed_by: None,
            });
        }
        self.calls.push(CallFact {
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

    /// How paths are shown depends on every path of the history: the style, then each
    /// touch's and argument's shown form.
    fn show_paths(&mut self) {
        self.style = PathStyle::of(self.touches.iter().map(|t| t.path.as_str()));
        for t in &mut self.touches {
            t.shown = self.style.show(&t.path);
        }
        for c in &mut self.calls {
            c.argument_line = c
                .argument
                .as_deref()
                .map(|a| crate::render::one_line_clipped(&self.style.show(a), ARG_CHARS));
        }
    }

    /// Fixes: walking back, the latest success of each call key seen so far is the first
    /// success after the failure at hand. A key holds the tool name, so only the calls of a
    /// tool that failed, from its first failure on, are keyed (`uses`: each call's block).
    fn find_fixes(&mut self, uses: &[Option<&ToolUse>]) {
        let first_failed = self.failures.first().map_or(self.calls.len(), |fl| fl.call);
        let failed_tools: HashSet<&str> = self
            .failures
            .iter()
            .filter_map(|fl| self.calls.get(fl.call))
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
        for (ci, c) in self.calls.iter().enumerate().skip(first_failed).rev() {
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
        for fl in &mut self.failures {
            if let Some(&s) = fix_of.get(&fl.call) {
                let c = &self.calls[s];
                fl.fixed_by = Some(Fix {
                    id: c.id.clone(),
                    message: c.message,
                });
            }
        }
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
