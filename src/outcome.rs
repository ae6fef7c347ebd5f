//! The outcome policy: what each tool result came to, read once from the format's own signal.
//!
//! ```text
//! format adapter (read) -> OutcomePolicy::of(format).classify(result) -> ToolResult.outcome
//!                          (typed, once)                                 carried by every strategy
//! ```
//!
//! One rule per wire format, never a guess shared by all:
//! - **Anthropic** ([`OutcomePolicy::Anthropic`]): `is_error` decides. The Messages API docs
//!   define `is_error: true` as "the tool execution resulted in an error", so `true` is
//!   [`Outcome::Error`] and `false` or absent is [`Outcome::Success`]. One addition: Claude Code
//!   wraps a refused or failed call's text in `<tool_use_error>…</tool_use_error>`; a result whose
//!   text starts with that wrapper is an error even without the flag. Nothing else in the text
//!   counts: a `Glob` listing that starts with `error.rs` is a success.
//! - **OpenAI Chat and Responses** ([`OutcomePolicy::ExitCode`]): the fields a rule table names
//!   for the item's type first ([`from_fields`]: Responses `apply_patch_call_output.status`,
//!   `shell_call_output.output[].outcome`, `mcp_call.error`; rule B1.2), else an exit code that
//!   the agent harness wrote in the text ([`exit_marker`]); without either the outcome is
//!   [`Outcome::Unknown`], shown as unknown, never as a success.
//!
//! Every scanner here searches bytes (`memchr::memmem`) for ASCII markers and only slices at
//! the ends of those markers, so no text (multi-byte, astral, combining, right-to-left) can make
//! it slice inside a character.

use crate::conversation::{Block, Conversation, Object, Outcome, ToolResult};
use crate::rules::{FailureSignal, Table};
use memchr::memmem;
use serde_json::Value;

/// How a format tells a tool result's outcome. Pick it with `OutcomePolicy::of` (a format
/// name) or `Format::outcome_policy`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutcomePolicy {
    /// Anthropic Messages (and imported Claude Code logs): `is_error`, plus the
    /// `<tool_use_error>` wrapper; absent flag = success.
    Anthropic,
    /// OpenAI Chat and Responses (and imported Codex rollouts, mini-swe-agent trajectories): an
    /// exit code written by the harness, else unknown.
    ExitCode,
}

/// Claude Code's wrapper around the text of a refused or failed call.
pub const TOOL_USE_ERROR_TAG: &str = "<tool_use_error>";

impl OutcomePolicy {
    /// The outcome of one result under this policy. Reads the result's `is_error` and text
    /// only; the result's current [`ToolResult::outcome`] is ignored.
    pub fn classify(self, r: &ToolResult) -> Outcome {
        match self {
            OutcomePolicy::Anthropic => match r.is_error {
                Some(true) => Outcome::Error,
                Some(false) => Outcome::Success,
                None if has_tool_use_error(&r.text_ref()) => Outcome::Error,
                None => Outcome::Success,
            },
            OutcomePolicy::ExitCode => {
                if r.is_error == Some(true) {
                    return Outcome::Error;
                }
                if let Some(f) = in_any_table(&r.extra) {
                    return f.outcome;
                }
                match exit_marker(&r.text_ref()) {
                    Some(m) if m.code == 0 => Outcome::Success,
                    Some(_) => Outcome::Error,
                    None => Outcome::Unknown,
                }
            }
        }
    }

    /// `r` with its [`ToolResult::outcome`] set by [`OutcomePolicy::classify`].
    pub fn apply(self, mut r: ToolResult) -> ToolResult {
        r.outcome = self.classify(&r);
        r
    }

    /// Classifies every tool result of `c` again (for conversations built by hand rather than
    /// read by a format adapter).
    pub fn assign(self, c: &mut Conversation) {
        for m in &mut c.messages {
            for b in &mut m.content {
                if let Block::ToolResult(r) = b {
                    r.outcome = self.classify(r);
                }
            }
        }
    }
}

/// What an item's own fields say about its call ([`from_fields`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldOutcome {
    /// [`Outcome::Error`] or [`Outcome::Success`] (fields that say nothing give no
    /// `FieldOutcome`).
    pub outcome: Outcome,
    /// Why it failed, as the fields tell it (the output's text, a command's stderr, the
    /// error); `None` for a success or when no field tells.
    pub cause: Option<String>,
}

/// The outcome the fields of `item` (an input item or a tool result's other fields, with its
/// wire `type`) tell under `table`'s failure rules ([`crate::rules::FailureRule`], rule B1.2):
/// a failure when any rule of the item's type says so, a success when none does and one says
/// success, else `None` (the fields say nothing; the text may, [`exit_marker`]).
pub fn from_fields(table: &Table, item: &Object) -> Option<FieldOutcome> {
    let kind = item.get("type").and_then(Value::as_str)?;
    let mut success = false;
    for rule in table.failure_rules(kind) {
        match verdict(&rule.signal, item) {
            Some((Outcome::Error, cause)) => {
                return Some(FieldOutcome {
                    outcome: Outcome::Error,
                    cause,
                });
            }
            Some((Outcome::Success, _)) => success = true,
            _ => {}
        }
    }
    success.then_some(FieldOutcome {
        outcome: Outcome::Success,
        cause: None,
    })
}

/// [`from_fields`] under the first table that has failure rules for the item's type (the
/// types of different tables do not collide): for readers that do not know the format (the
/// facts, [`OutcomePolicy::classify`]).
pub fn in_any_table(item: &Object) -> Option<FieldOutcome> {
    let kind = item.get("type").and_then(Value::as_str)?;
    crate::rules::tables()
        .into_iter()
        .find(|t| t.failure_rules(kind).next().is_some())
        .and_then(|t| from_fields(t, item))
}

/// The cause of a failed result that its fields tell ([`FieldOutcome::cause`]), when it has
/// no text of its own (a `shell_call_output` keeps its output in chunks).
pub fn field_cause(r: &ToolResult) -> Option<String> {
    in_any_table(&r.extra).and_then(|f| f.cause)
}

/// What one signal says of `item`: `(outcome, cause)`, or `None` when it says nothing.
fn verdict(signal: &FailureSignal, item: &Object) -> Option<(Outcome, Option<String>)> {
    let text_of = |v: Option<&Value>| -> Option<String> {
        match v? {
            Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
            Value::Null | Value::String(_) => None,
            Value::Object(o) => match o.get("message") {
                Some(Value::String(m)) => Some(m.clone()),
                _ => Some(Value::Object(o.clone()).to_string()),
            },
            other => Some(other.to_string()),
        }
    };
    match signal {
        FailureSignal::Status {
            field,
            failed,
            ok,
            cause,
        } => {
            let v = item.get(*field).and_then(Value::as_str)?;
            if failed.contains(&v) {
                Some((Outcome::Error, text_of(item.get(*cause))))
            } else if ok.contains(&v) {
                Some((Outcome::Success, None))
            } else {
                None
            }
        }
        FailureSignal::Present { field } => {
            let cause = text_of(item.get(*field))?;
            Some((Outcome::Error, Some(cause)))
        }
        FailureSignal::Outcomes {
            list,
            outcome,
            exit_code,
            timeout,
            text,
        } => {
            let chunks = item.get(*list).and_then(Value::as_array)?;
            let mut all_ok = !chunks.is_empty();
            for chunk in chunks {
                let Some(oc) = chunk.get(*outcome).and_then(Value::as_object) else {
                    all_ok = false;
                    continue;
                };
                let what = if oc.get("type").and_then(Value::as_str) == Some(*timeout) {
                    Some("timed out".to_string())
                } else {
                    match oc.get(*exit_code).and_then(Value::as_i64) {
                        Some(0) => None,
                        Some(n) => Some(format!("exit code {n}")),
                        None => {
                            all_ok = false;
                            None
                        }
                    }
                };
                if let Some(what) = what {
                    let said = text.iter().find_map(|k| text_of(chunk.get(*k)));
                    let cause = match said {
                        Some(t) => format!("{what}\n{t}"),
                        None => what,
                    };
                    return Some((Outcome::Error, Some(cause)));
                }
            }
            all_ok.then_some((Outcome::Success, None))
        }
    }
}

/// True when `text` (leading whitespace aside) starts with Claude Code's `<tool_use_error>`.
pub fn has_tool_use_error(text: &str) -> bool {
    text.trim_start().starts_with(TOOL_USE_ERROR_TAG)
}

/// An exit code found in a tool result's text, with where its marker sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitMarker {
    /// The exit code (0 = success).
    pub code: i64,
    /// Byte offset where the marker starts (a char boundary: markers are ASCII).
    pub start: usize,
    /// Byte offset just after the code's last digit (a char boundary).
    pub end: usize,
}

/// Which harness wrote a marker: decides where in the text it is trusted.
#[derive(Clone, Copy)]
enum Place {
    /// Codex structured output `{"output": …, "metadata": {"exit_code": N, …}}`: the metadata
    /// follows the output, so the last occurrence is the harness's.
    Last,
    /// mini-swe-agent `<returncode>N</returncode>` opens the observation: the first occurrence.
    First,
    /// A harness line (`Exit code: N`, Codex sandbox denials `…, exit code: N, stdout: …`,
    /// `Process exited with code N`): trusted in the frame only, the first
    /// [`FRAME_HEAD_LINES`] lines or the last [`FRAME_TAIL_LINES`], where harnesses put them;
    /// the same words inside a command's own output in between say nothing about the call.
    Frame,
}

/// Lines at the start of a result in which a harness line is trusted.
pub const FRAME_HEAD_LINES: usize = 5;
/// Lines at the end of a result in which a harness line is trusted.
pub const FRAME_TAIL_LINES: usize = 3;

/// Exit-code markers, most trusted first. Sources: Codex CLI function-call output metadata
/// (`"exit_code"`) and its text form (`Exit code: N`, sandbox `exit code: N`, unified exec
/// `Process exited with code N`), mini-swe-agent's observation template (`<returncode>`).
const MARKERS: &[(&str, Place)] = &[
    ("\"exit_code\":", Place::Last),
    ("<returncode>", Place::First),
    ("Exit code: ", Place::Frame),
    ("exit code: ", Place::Frame),
    ("Exit code ", Place::Frame),
    ("exited with code ", Place::Frame),
];

/// The exit code a harness wrote into `text`, if any: the first marker of [`MARKERS`]
/// (Codex metadata, then `<returncode>`, then harness lines in the frame) that is followed by
/// an integer. Never panics and never slices inside a character.
pub fn exit_marker(text: &str) -> Option<ExitMarker> {
    let bytes = text.as_bytes();
    let (head_end, tail_start) = frame(bytes);
    for (marker, place) in MARKERS {
        let needle = marker.as_bytes();
        let found = match place {
            Place::Last => {
                memmem::rfind_iter(bytes, needle).find_map(|p| code_at(bytes, p, needle))
            }
            Place::First => {
                memmem::find_iter(bytes, needle).find_map(|p| code_at(bytes, p, needle))
            }
            Place::Frame => memmem::find_iter(&bytes[..head_end], needle)
                .find_map(|p| code_at(bytes, p, needle))
                .or_else(|| {
                    memmem::rfind_iter(bytes, needle)
                        .take_while(|&p| p >= tail_start.max(head_end))
                        .find_map(|p| code_at(bytes, p, needle))
                }),
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Whether the words of any exit-code marker ([`MARKERS`]) occur in `bytes`: where none does
/// in a part of a text, no marker [`exit_marker`] finds in that text starts there (a marker's
/// words lie wholly after its start). A quick test before reading a long text whole.
pub fn mentions_exit_marker(bytes: &[u8]) -> bool {
    MARKERS
        .iter()
        .any(|(m, _)| memmem::find(bytes, m.as_bytes()).is_some())
}

/// The integer right after the marker at `start` (spaces allowed before it), as an
/// [`ExitMarker`].
fn code_at(bytes: &[u8], start: usize, needle: &[u8]) -> Option<ExitMarker> {
    let mut i = start + needle.len();
    while bytes.get(i).is_some_and(|b| *b == b' ' || *b == b'\t') {
        i += 1;
    }
    let digits_from = i;
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    let first_digit = i;
    while bytes.get(i).is_some_and(u8::is_ascii_digit) && i - first_digit < 18 {
        i += 1;
    }
    if i == first_digit || bytes.get(i).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    // ASCII only between digits_from and i, so this is valid UTF-8.
    let code = std::str::from_utf8(bytes.get(digits_from..i)?)
        .ok()?
        .parse()
        .ok()?;
    Some(ExitMarker {
        code,
        start,
        end: i,
    })
}

/// (end of the first [`FRAME_HEAD_LINES`] lines, start of the last [`FRAME_TAIL_LINES`] lines)
/// as byte offsets; trailing line breaks do not count as lines.
fn frame(bytes: &[u8]) -> (usize, usize) {
    let head_end = memchr::memchr_iter(b'\n', bytes)
        .nth(FRAME_HEAD_LINES - 1)
        .map_or(bytes.len(), |p| p + 1);
    let mut body_end = bytes.len();
    while body_end > 0 && matches!(bytes[body_end - 1], b'\n' | b'\r') {
        body_end -= 1;
    }
    let tail_start = memchr::memrchr_iter(b'\n', &bytes[..body_end])
        .nth(FRAME_TAIL_LINES - 1)
        .map_or(0, |p| p + 1);
    (head_end, tail_start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{Object, ToolResultContent};
    use proptest::prelude::*;

    fn result(text: &str, is_error: Option<bool>) -> ToolResult {
        ToolResult {
            tool_use_id: "t".into(),
            content: Some(ToolResultContent::Text(text.into())),
            is_error,
            extra: Object::new(),
            outcome: Outcome::Unknown,
            rewritten: None,
        }
    }

    fn anthropic(text: &str, is_error: Option<bool>) -> Outcome {
        OutcomePolicy::Anthropic.classify(&result(text, is_error))
    }

    fn openai(text: &str) -> Outcome {
        OutcomePolicy::ExitCode.classify(&result(text, None))
    }

    #[test]
    fn anthropic_is_error_decides_and_text_starting_with_error_is_a_success() {
        assert_eq!(anthropic("all good", Some(true)), Outcome::Error);
        assert_eq!(anthropic("Exit code: 1", Some(false)), Outcome::Success);
        assert_eq!(anthropic("error.rs\nsrc/error.rs", None), Outcome::Success);
        assert_eq!(anthropic("Exit code: 1\nfailed", None), Outcome::Success);
        assert_eq!(
            anthropic(
                "<tool_use_error>File does not exist.</tool_use_error>",
                None
            ),
            Outcome::Error
        );
    }

    #[test]
    fn openai_reads_each_harness_marker_and_nothing_else() {
        let codex_ok = r#"{"output":"x","metadata":{"exit_code":0,"duration_seconds":0.0}}"#;
        let codex_bad = r#"{"output":"x","metadata":{"exit_code": 1,"duration_seconds":0.0}}"#;
        assert_eq!(openai(codex_ok), Outcome::Success);
        assert_eq!(openai(codex_bad), Outcome::Error);
        assert_eq!(
            openai("<returncode>2</returncode>\n<output>\nls: no\n</output>"),
            Outcome::Error
        );
        assert_eq!(
            openai("<returncode>0</returncode>\n<output>\n</output>"),
            Outcome::Success
        );
        assert_eq!(
            openai("Exit code: 3\nWall time: 0.1 seconds\nOutput:\n"),
            Outcome::Error
        );
        assert_eq!(
            openai(
                "failed in sandbox Seatbelt with execution error: sandbox denied exec error, exit code: 2, stdout: , stderr: "
            ),
            Outcome::Error
        );
        assert_eq!(
            openai("Chunk ID: a\nWall time: 1 s\nProcess exited with code 0\nOutput:\nok"),
            Outcome::Success
        );
        assert_eq!(openai("build log\n...\nExit code 101"), Outcome::Error);
        assert_eq!(openai("error: could not compile"), Outcome::Unknown);
        assert_eq!(openai("Error: file not found"), Outcome::Unknown);
        assert_eq!(openai("Exit code: none"), Outcome::Unknown);
    }

    #[test]
    fn codex_metadata_wins_over_words_in_the_commands_own_output() {
        let text = r#"{"output":"Exit code: 1\nexit code: 7","metadata":{"exit_code":0}}"#;
        assert_eq!(openai(text), Outcome::Success);
    }

    #[test]
    fn harness_lines_in_the_middle_of_long_output_are_not_trusted() {
        let middle: String = (0..20).map(|i| format!("line {i}\n")).collect();
        let text = format!("{middle}Exit code: 1 was expected\n{middle}");
        assert_eq!(openai(&text), Outcome::Unknown);
        let text = format!("{middle}{middle}Exit code: 1\n");
        assert_eq!(openai(&text), Outcome::Error);
    }

    #[test]
    fn an_exit_code_at_the_end_of_long_non_ascii_output_is_read() {
        let text = format!("{}\nExit code: 3", "é".repeat(5_000));
        assert_eq!(openai(&text), Outcome::Error);
        let text = format!("{}\nExit code: 0", "é".repeat(5_000));
        assert_eq!(openai(&text), Outcome::Success);
    }

    #[test]
    #[allow(clippy::string_slice)] // ASCII offsets of the test's own text
    fn the_marker_range_covers_the_marker_and_the_code() {
        let text = "→ out\n<returncode>12</returncode>";
        let m = exit_marker(text).unwrap();
        assert_eq!(m.code, 12);
        assert_eq!(&text[m.start..m.end], "<returncode>12");
    }

    #[test]
    fn assign_classifies_every_result_of_a_conversation() {
        use crate::conversation::{Message, Role};
        let mut c = Conversation::default();
        c.messages.push(Message::new(
            Role::Tool,
            vec![Block::ToolResult(result("Exit code: 1", None))],
        ));
        OutcomePolicy::ExitCode.assign(&mut c);
        let r = c.messages[0].tool_results().next().unwrap();
        assert_eq!(r.outcome, Outcome::Error);
    }

    /// Text that every scanner must survive: astral, combining, right-to-left, arrows, curly
    /// quotes, accented capitals, with lines.
    fn nasty() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("→".to_string()),
            Just("É".to_string()),
            Just("“".to_string()),
            Just("”".to_string()),
            Just("👩‍👩‍👧".to_string()),
            Just("\u{05D0}\u{05D1}".to_string()),
            Just("e\u{0301}".to_string()),
            Just("\n".to_string()),
            Just("exit".to_string()),
            Just("code".to_string()),
            Just(" ".to_string()),
            any::<char>().prop_map(String::from),
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
    }

    /// The marker texts, each written with its code.
    fn marked(i: usize, code: i64) -> String {
        match i {
            0 => format!("{{\"output\":\"o\",\"metadata\":{{\"exit_code\":{code}}}}}"),
            1 => format!("<returncode>{code}</returncode>"),
            2 => format!("Exit code: {code}"),
            3 => format!("exit code: {code}"),
            4 => format!("Exit code {code}"),
            _ => format!("Process exited with code {code}"),
        }
    }

    proptest! {
        #[test]
        fn no_text_makes_a_scanner_panic(text in nasty(), flag in proptest::option::of(any::<bool>())) {
            let r = result(&text, flag);
            let _ = OutcomePolicy::Anthropic.classify(&r);
            let _ = OutcomePolicy::ExitCode.classify(&r);
            let _ = has_tool_use_error(&text);
            if let Some(m) = exit_marker(&text) {
                prop_assert!(text.is_char_boundary(m.start) && text.is_char_boundary(m.end));
            }
        }

        #[test]
        fn a_marker_right_after_any_character_is_read(
            before in nasty(),
            last in prop_oneof![Just('É'), Just('→'), Just('“'), Just('🙂'), any::<char>()],
            after in nasty(),
            which in 0usize..6,
            code in -3i64..300,
        ) {
            // The marker opens the second line: inside the frame whatever `before` holds.
            let head: String = before.lines().next().unwrap_or("").to_string();
            let tail: String = after.lines().next().unwrap_or("").to_string();
            let text = format!("{head}\n{last}{}\n{tail}", marked(which, code));
            let m = exit_marker(&text);
            prop_assert_eq!(m.map(|m| m.code), Some(code), "{:?}", text);
            let want = if code == 0 { Outcome::Success } else { Outcome::Error };
            prop_assert_eq!(openai(&text), want);
        }
    }
}
