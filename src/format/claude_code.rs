//! Claude Code session logs (JSONL under `~/.claude/projects/`).
//!
//! One JSON entry per line. Entries of `type` `user` / `assistant` hold the API message under
//! `message`; every other type (`progress`, `file-history-snapshot`, `queue-operation`, `system`,
//! `summary`, ...) is bookkeeping of the client and is skipped, except the `system` line with
//! `subtype: "compact_boundary"`, which marks an auto-compaction.
//!
//! How the log maps onto the request the model saw:
//! - One API response is logged as several assistant lines sharing one `message.id` (one line per
//!   content block). They are joined into one assistant message. The results of its first calls
//!   may be logged *between* those lines; all result lines answering one response are joined into
//!   one user message, tool_result blocks first, in call order.
//! - Consecutive user entries (tool results, then a text the user typed) are one user message.
//! - `isSidechain: true` entries belong to a sub-agent and are not part of the main conversation,
//!   unless the whole file is sidechain entries (a sub-agent's own log).
//! - After the last `compact_boundary` the model saw only what follows: the next user entry
//!   (`isCompactSummary: true`) carries the summary, then the live conversation.
//!   [`ImportOptions::whole_log`] keeps the whole log instead.
//! - `isMeta: true` user entries (slash-command expansions, hook `<system-reminder>` context,
//!   the local-command caveat) *are* sent to the model by Claude Code, so they are kept: the
//!   compaction sub-agent logs in the corpus show them inside the prompt the model answered.
//! - Whitespace-only text blocks are dropped (the API rejects them); a message left with no
//!   block is dropped.
//! - Only `role` and `content` of a logged message reach the output: `id`, `model`, `usage`,
//!   `stop_reason`, `type` are response metadata a request body does not carry. Blocks are kept
//!   as logged. The model of the last assistant response goes to `Conversation.extra["model"]`;
//!   the system prompt is not in the log.

use super::FormatError;
use super::anthropic::read_blocks;
use super::json_kind;
use crate::conversation::{Block, ContentForm, Conversation, Message, Object, Role};
use serde_json::Value;

/// Options for importing a Claude Code session log.
#[derive(Debug, Clone, Copy, Default)]
pub struct ImportOptions {
    /// Keep the whole log instead of starting at the last `compact_boundary` (what the model
    /// saw last).
    pub whole_log: bool,
}

/// True when the text looks like a Claude Code session log: some line carries a `sessionId` or
/// `parentUuid` key. Every line is looked at, since a log may open with any number of
/// `summary` / `file-history-snapshot` lines, which carry neither.
pub fn looks_like_log(text: &str) -> bool {
    text.lines()
        .any(|l| l.contains("\"sessionId\"") || l.contains("\"parentUuid\""))
}

/// A log as imported, with what the import left out.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The conversation the model saw (from the last `compact_boundary` on, unless
    /// [`ImportOptions::whole_log`]).
    pub conversation: Conversation,
    /// The messages before the last `compact_boundary` that were left out (`None` when the log
    /// has no boundary or the whole log was read).
    pub before_boundary: Option<Vec<Message>>,
    /// 1-based number of the last line when it was skipped because it is cut off (the log is
    /// still being written: the line does not end in a newline and its JSON ends early).
    pub skipped_last_line: Option<usize>,
}

/// One user / assistant entry of the log, already decoded.
struct Entry {
    role: Role,
    /// `message.id` of an assistant entry.
    id: Option<String>,
    model: Option<String>,
    blocks: Vec<Block>,
    /// The content was a plain string.
    string_form: bool,
    sidechain: bool,
}

/// A line that matters for the conversation, in log order.
enum Line {
    Entry(Entry),
    /// A `compact_boundary` system line and whether it is a sidechain line.
    Boundary {
        sidechain: bool,
    },
}

/// Imports a session log as an Anthropic conversation, also saying what was left out: the
/// messages before the last `compact_boundary` and a cut-off last line.
///
/// # Errors
/// [`FormatError`] naming the line of the first malformed entry other than a cut-off last one:
/// `line 17: not valid JSON: ...`, `line 17: message.content[2]: content block has no "type"`, ...
pub fn import_log(text: &str, options: ImportOptions) -> Result<Imported, FormatError> {
    let (lines, skipped_last_line) = parse_lines(text)?;
    let (earlier, entries) = select(lines, options);
    let model = entries
        .iter()
        .rev()
        .filter(|e| e.role == Role::Assistant)
        .filter_map(|e| e.model.as_deref())
        .find(|m| *m != "<synthetic>")
        .map(str::to_string);
    let messages = join(entries);
    let mut extra = Object::new();
    if let Some(model) = model {
        extra.insert("model".into(), Value::String(model));
    }
    let conversation = Conversation {
        system: None,
        messages,
        extra,
        bare: false,
    };
    Ok(Imported {
        conversation,
        before_boundary: earlier.map(join),
        skipped_last_line,
    })
}

/// The lines that matter, and the number of a cut-off last line that was skipped.
fn parse_lines(text: &str) -> Result<(Vec<Line>, Option<usize>), FormatError> {
    let mut out = Vec::new();
    let last = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .last()
        .map(|(n, _)| n + 1);
    let unterminated = !text.trim_end_matches([' ', '\t']).ends_with('\n');
    let mut skipped = None;
    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let value: Value = match serde_json::from_str(raw) {
            Ok(v) => v,
            // A log still being written ends in a partial line: its JSON stops early.
            Err(e) if e.is_eof() && unterminated && Some(line) == last => {
                skipped = Some(line);
                continue;
            }
            Err(source) => {
                return Err(FormatError::Json {
                    location: format!("line {line}"),
                    source,
                });
            }
        };
        let Value::Object(obj) = value else {
            return Err(FormatError::shape(
                format!("line {line}"),
                format!("expected a JSON object, found {}", json_kind(&value)),
            ));
        };
        let sidechain = obj.get("isSidechain").and_then(Value::as_bool) == Some(true);
        let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "user" | "assistant" => out.push(Line::Entry(entry(&obj, kind, line, sidechain)?)),
            "system" if obj.get("subtype").and_then(Value::as_str) == Some("compact_boundary") => {
                out.push(Line::Boundary { sidechain });
            }
            _ => {}
        }
    }
    Ok((out, skipped))
}

fn entry(obj: &Object, kind: &str, line: usize, sidechain: bool) -> Result<Entry, FormatError> {
    let at = format!("line {line}");
    let message = match obj.get("message") {
        Some(Value::Object(m)) => m,
        Some(other) => {
            return Err(FormatError::shape(
                format!("{at}: message"),
                format!("expected an object, found {}", json_kind(other)),
            ));
        }
        None => {
            return Err(FormatError::shape(
                at,
                format!("{kind} entry has no \"message\""),
            ));
        }
    };
    let role = match message.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some(other) => {
            return Err(FormatError::shape(
                format!("{at}: message.role"),
                format!("expected \"user\" or \"assistant\", found {other:?}"),
            ));
        }
        None => return Err(FormatError::shape(at, "message has no string \"role\"")),
    };
    if role.as_str() != kind {
        return Err(FormatError::shape(
            format!("{at}: message.role"),
            format!("a {kind} entry holds a {role} message"),
        ));
    }
    let (blocks, string_form) = match message.get("content") {
        Some(Value::String(s)) => (vec![Block::text(s.clone())], true),
        Some(Value::Array(bs)) => (read_blocks(bs, &format!("{at}: message.content"))?, false),
        Some(other) => {
            return Err(FormatError::shape(
                format!("{at}: message.content"),
                format!(
                    "expected a string or an array of blocks, found {}",
                    json_kind(other)
                ),
            ));
        }
        None => return Err(FormatError::shape(at, "message has no \"content\"")),
    };
    let blocks = blocks
        .into_iter()
        .filter(|b| !matches!(b, Block::Text(t) if t.text.trim().is_empty()))
        .collect();
    let text_of = |key: &str| message.get(key).and_then(Value::as_str).map(str::to_string);
    Ok(Entry {
        role,
        id: text_of("id"),
        model: text_of("model"),
        blocks,
        string_form,
        sidechain,
    })
}

/// Keeps the entries that make up the conversation: the main chain (or the sidechain when the
/// file holds nothing else), from the last compact boundary on unless `whole_log`. Also returns
/// the entries of that chain before the boundary, when one was used.
fn select(lines: Vec<Line>, options: ImportOptions) -> (Option<Vec<Entry>>, Vec<Entry>) {
    let all_sidechain = lines.iter().all(|l| match l {
        Line::Entry(e) => e.sidechain,
        Line::Boundary { .. } => true,
    });
    let wanted = |sidechain: bool| sidechain == all_sidechain;
    let start = if options.whole_log {
        0
    } else {
        lines
            .iter()
            .rposition(|l| matches!(l, Line::Boundary { sidechain } if wanted(*sidechain)))
            .map_or(0, |i| i + 1)
    };
    let (mut earlier, mut kept) = (Vec::new(), Vec::new());
    for (i, l) in lines.into_iter().enumerate() {
        if let Line::Entry(e) = l
            && wanted(e.sidechain)
        {
            if i < start {
                earlier.push(e)
            } else {
                kept.push(e)
            }
        }
    }
    ((start > 0).then_some(earlier), kept)
}

/// Joins entries into alternating messages (see the module docs).
fn join(entries: Vec<Entry>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::new();
    // Index in `out` and `message.id` of the assistant response being assembled.
    let mut open: Option<(usize, String)> = None;
    for e in entries {
        if e.blocks.is_empty() {
            continue;
        }
        match e.role {
            Role::Assistant => {
                let joins = match (&open, &e.id) {
                    // The same response, possibly with its first results logged in between.
                    (Some((i, id)), Some(eid)) => id == eid && *i + 2 >= out.len(),
                    _ => false,
                };
                if joins {
                    if let Some((i, _)) = &open {
                        out[*i].content.extend(e.blocks);
                    }
                } else if let Some(last) = out.last_mut().filter(|m| m.role == Role::Assistant) {
                    // Two responses in a row without a user turn between (an interrupted
                    // response, or an API error entry): one assistant message.
                    last.content.extend(e.blocks);
                    if let Some(id) = e.id {
                        open = Some((out.len() - 1, id));
                    }
                } else {
                    out.push(Message::new(Role::Assistant, e.blocks));
                    open = e.id.map(|id| (out.len() - 1, id));
                }
            }
            _ => match out.last_mut() {
                Some(last) if last.role == Role::User => {
                    last.form = ContentForm::Blocks;
                    last.content.extend(e.blocks);
                }
                _ => {
                    let mut m = Message::new(Role::User, e.blocks);
                    if e.string_form && m.content.len() == 1 {
                        m.form = ContentForm::String;
                    }
                    out.push(m);
                }
            },
        }
    }
    order_results(&mut out);
    out
}

/// Puts the tool_result blocks of every user message first, in the call order of the assistant
/// message before it (results of unknown calls after those, in log order).
fn order_results(messages: &mut [Message]) {
    for i in 0..messages.len() {
        if messages[i].role != Role::User || !messages[i].has_tool_results() {
            continue;
        }
        let calls: Vec<String> = match i.checked_sub(1).map(|p| &messages[p]) {
            Some(p) if p.role == Role::Assistant => p.tool_uses().map(|t| t.id.clone()).collect(),
            _ => Vec::new(),
        };
        let content = std::mem::take(&mut messages[i].content);
        let (mut results, rest): (Vec<Block>, Vec<Block>) = content
            .into_iter()
            .partition(|b| matches!(b, Block::ToolResult(_)));
        results.sort_by_key(|b| match b {
            Block::ToolResult(r) => calls
                .iter()
                .position(|c| *c == r.tool_use_id)
                .unwrap_or(calls.len()),
            _ => calls.len(),
        });
        results.extend(rest);
        messages[i].content = results;
    }
}

#[cfg(test)]
#[allow(clippy::needless_pass_by_value)] // the entry builders read best with `json!` arguments
mod tests {
    use super::*;
    use crate::format::Format;
    use serde_json::json;

    fn import(text: &str, options: ImportOptions) -> Result<Conversation, FormatError> {
        import_log(text, options).map(|i| i.conversation)
    }

    fn user(content: Value) -> Value {
        json!({"type": "user", "sessionId": "s", "isSidechain": false, "uuid": "u",
               "message": {"role": "user", "content": content}})
    }

    fn assistant(id: &str, block: Value) -> Value {
        json!({"type": "assistant", "sessionId": "s", "isSidechain": false,
               "message": {"id": id, "type": "message", "role": "assistant", "model": "claude-x",
                           "content": [block], "stop_reason": null, "usage": {"input_tokens": 1}}})
    }

    fn call(id: &str) -> Value {
        json!({"type": "tool_use", "id": id, "name": "Read", "input": {"p": id}})
    }

    fn result(id: &str) -> Value {
        user(json!([{"type": "tool_result", "tool_use_id": id, "content": "ok"}]))
    }

    fn sidechain(mut v: Value) -> Value {
        v["isSidechain"] = Value::Bool(true);
        v
    }

    fn log(entries: &[Value]) -> String {
        entries.iter().map(|e| format!("{e}\n")).collect()
    }

    fn body(entries: &[Value], options: ImportOptions) -> Value {
        Format::Anthropic.write(&import(&log(entries), options).unwrap())
    }

    fn text(t: &str) -> Value {
        json!({"type": "text", "text": t})
    }

    fn tr(id: &str) -> Value {
        json!({"type": "tool_result", "tool_use_id": id, "content": "ok"})
    }

    #[test]
    fn split_parallel_calls_are_joined_and_results_put_in_call_order() {
        let b = body(
            &[
                user(json!("go")),
                assistant("m1", text("two reads")),
                assistant("m1", call("a")),
                assistant("m1", call("b")),
                result("b"),
                result("a"),
            ],
            ImportOptions::default(),
        );
        assert_eq!(
            b,
            json!({"model": "claude-x", "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [text("two reads"), call("a"), call("b")]},
                {"role": "user", "content": [tr("a"), tr("b")]}
            ]})
        );
    }

    #[test]
    fn results_logged_between_the_lines_of_one_response_are_joined() {
        let b = body(
            &[
                user(json!("go")),
                assistant("m1", call("a")),
                result("a"),
                assistant("m1", call("b")),
                result("b"),
                assistant("m2", text("done")),
            ],
            ImportOptions::default(),
        );
        assert_eq!(
            b["messages"],
            json!([
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [call("a"), call("b")]},
                {"role": "user", "content": [tr("a"), tr("b")]},
                {"role": "assistant", "content": [text("done")]}
            ])
        );
    }

    #[test]
    fn a_text_after_tool_results_joins_their_user_message() {
        let b = body(
            &[
                user(json!("go")),
                assistant("m1", call("a")),
                user(json!("also this")),
                result("a"),
            ],
            ImportOptions::default(),
        );
        assert_eq!(
            b["messages"][2],
            json!({"role": "user", "content": [tr("a"), text("also this")]})
        );
    }

    #[test]
    fn sidechain_entries_stay_out_of_the_main_conversation() {
        let b = body(
            &[
                user(json!("go")),
                assistant("m1", call("task")),
                sidechain(user(json!("sub task"))),
                sidechain(assistant("s1", text("sub answer"))),
                result("task"),
            ],
            ImportOptions::default(),
        );
        assert_eq!(
            b["messages"],
            json!([
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [call("task")]},
                {"role": "user", "content": [tr("task")]}
            ])
        );
    }

    #[test]
    fn a_sub_agents_own_log_is_its_conversation() {
        let b = body(
            &[
                sidechain(user(json!("sub task"))),
                sidechain(assistant("s1", text("sub answer"))),
            ],
            ImportOptions::default(),
        );
        assert_eq!(
            b["messages"],
            json!([
                {"role": "user", "content": "sub task"},
                {"role": "assistant", "content": [text("sub answer")]}
            ])
        );
    }

    #[test]
    fn the_conversation_starts_at_the_last_compact_boundary_unless_whole_log() {
        let mut summary = user(json!("Summary of before"));
        summary["isCompactSummary"] = Value::Bool(true);
        let entries = [
            user(json!("old")),
            assistant("m1", text("old answer")),
            json!({"type": "system", "subtype": "compact_boundary", "sessionId": "s", "isSidechain": false}),
            summary,
            assistant("m2", text("new answer")),
        ];
        let live = body(&entries, ImportOptions::default());
        assert_eq!(
            live["messages"],
            json!([
                {"role": "user", "content": "Summary of before"},
                {"role": "assistant", "content": [text("new answer")]}
            ])
        );
        let whole = body(&entries, ImportOptions { whole_log: true });
        assert_eq!(whole["messages"].as_array().unwrap().len(), 4);
        assert_eq!(
            whole["messages"][0],
            json!({"role": "user", "content": "old"})
        );
    }

    #[test]
    fn the_messages_before_the_boundary_are_reported_as_left_out() {
        let entries = [
            user(json!("old")),
            assistant("m1", text("old answer")),
            json!({"type": "system", "subtype": "compact_boundary", "sessionId": "s", "isSidechain": false}),
            user(json!("new")),
        ];
        let live = import_log(&log(&entries), ImportOptions::default()).unwrap();
        let before = live.before_boundary.unwrap();
        assert_eq!(before.len(), 2);
        assert_eq!(before[1].role, Role::Assistant);
        assert_eq!(live.conversation.messages.len(), 1);
        let whole = import_log(&log(&entries), ImportOptions { whole_log: true }).unwrap();
        assert!(whole.before_boundary.is_none());
        let none = import_log(&log(&entries[..2]), ImportOptions::default()).unwrap();
        assert!(none.before_boundary.is_none());
    }

    #[test]
    fn many_leading_summary_lines_still_make_a_log() {
        let mut entries: Vec<Value> = (0..60)
            .map(|i| json!({"type": "summary", "summary": format!("s{i}"), "leafUuid": format!("l{i}")}))
            .collect();
        entries.push(user(json!("hi")));
        entries.push(assistant("m1", text("hello")));
        let text = log(&entries);
        assert!(looks_like_log(&text));
        let loaded = crate::format::load(text.as_bytes(), None, ImportOptions::default()).unwrap();
        assert_eq!(loaded.format, Format::Anthropic);
        assert_eq!(loaded.conversation.messages.len(), 2);
    }

    #[test]
    #[allow(clippy::string_slice)] // ASCII offsets of the test's own text
    fn a_cut_off_last_line_is_skipped_and_reported_but_a_bad_inner_line_is_an_error() {
        let full = log(&[user(json!("hi")), assistant("m1", text("hello"))]);
        let partial = user(json!("half written")).to_string();
        let text = format!("{full}{}", &partial[..partial.len() / 2]);
        let imported = import_log(&text, ImportOptions::default()).unwrap();
        assert_eq!(imported.skipped_last_line, Some(3));
        assert_eq!(imported.conversation.messages.len(), 2);
        let loaded = crate::format::load(text.as_bytes(), None, ImportOptions::default()).unwrap();
        assert_eq!(loaded.notes.skipped_last_line, Some(3));
        // The same cut line followed by a newline is not a log being written: an error.
        let err = import_log(&format!("{text}\n"), ImportOptions::default()).unwrap_err();
        assert!(
            err.to_string().starts_with("line 3: not valid JSON"),
            "{err}"
        );
    }

    #[test]
    fn whitespace_text_is_dropped_and_bookkeeping_entries_skipped() {
        let b = body(
            &[
                json!({"type": "file-history-snapshot", "messageId": "x", "snapshot": {}}),
                user(json!("go")),
                json!({"type": "progress", "sessionId": "s", "data": {}}),
                assistant("m1", text("\n\n")),
                assistant(
                    "m1",
                    json!({"type": "thinking", "thinking": "t", "signature": "sig"}),
                ),
                assistant("m1", text("answer")),
                json!({"type": "summary", "summary": "x", "leafUuid": "u"}),
                user(json!("  \n")),
            ],
            ImportOptions::default(),
        );
        assert_eq!(
            b["messages"],
            json!([
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "t", "signature": "sig"}, text("answer")]}
            ])
        );
    }

    #[test]
    fn an_interrupted_turn_stays_an_open_tail() {
        let c = import(
            &log(&[
                user(json!("go")),
                assistant("m1", call("a")),
                assistant("m1", call("b")),
            ]),
            ImportOptions::default(),
        )
        .unwrap();
        assert_eq!(c.messages.len(), 2);
        let lenient = crate::guard::validate(&c, Format::Anthropic, Default::default());
        assert!(lenient.is_empty(), "{lenient:?}");
        let strict = crate::guard::validate(
            &c,
            Format::Anthropic,
            crate::guard::ValidateOptions {
                allow_open_tail: false,
            },
        );
        assert!(!strict.is_empty());
    }

    #[test]
    fn bad_lines_are_named() {
        let good = user(json!("go")).to_string();
        let err = |text: &str| {
            import(text, ImportOptions::default())
                .unwrap_err()
                .to_string()
        };
        assert!(err(&format!("{good}\n{{oops\n")).starts_with("line 2: not valid JSON"));
        assert_eq!(
            err(&format!("{good}\n\n[1]\n")),
            "line 3: expected a JSON object, found an array"
        );
        assert_eq!(
            err(&format!(
                "{good}\n{}\n",
                json!({"type": "user", "sessionId": "s"})
            )),
            "line 2: user entry has no \"message\""
        );
        let bad_block = assistant(
            "m",
            json!({"type": "tool_use", "id": 5, "name": "x", "input": {}}),
        );
        assert_eq!(
            err(&format!("{good}\n{bad_block}\n")),
            "line 2: message.content[0].id: expected a string, found a number"
        );
    }
}
