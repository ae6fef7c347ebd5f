//! The informative lines of a failed call's output: the first (usually the finding itself) and
//! the last (usually the summary or the exit status), without the wrappers harnesses put
//! around them. One definition, read by the session state (markers, the summary ledger, the
//! probes) and by microcompact's placeholder of a cleared failure.

use crate::render::one_line_clipped;
use serde_json::Value;
use std::borrow::Cow;

/// Characters kept of one error line.
pub const ERROR_LINE_CHARS: usize = 160;

/// Wrappers stripped from a line before it is judged (Claude Code's `<tool_use_error>`).
const WRAPPERS: &[&str] = &[
    "<tool_use_error>",
    "</tool_use_error>",
    "<error>",
    "</error>",
];

/// The words every placeholder of microcompact's starts with (`[compactor: cleared … result of
/// … call ID (N tokens) …]`); a result that holds them is not cleared again, and the line is
/// not an error line.
pub const CLEARED_PREFIX: &str = "[compactor: cleared";

/// Frame lines Codex puts around a command's output (`Wall time: 0.2 seconds`, `Output:`, ...).
const FRAME_LINES: &[&str] = &[
    "Wall time:",
    "Output:",
    "Chunk ID:",
    "Original token count:",
    "Total output lines:",
];

/// The text of a call's output without its structured wrapper: the `output` string of Codex's
/// function-call output (`{"output": "...", "metadata": {...}}`), else `text` itself.
pub fn output_text(text: &str) -> Cow<'_, str> {
    if text.starts_with("{\"output\"")
        && let Ok(v) = serde_json::from_str::<Value>(text)
        && let Some(Value::String(s)) = v.get("output")
    {
        return Cow::Owned(s.clone());
    }
    Cow::Borrowed(text)
}

/// `<output>`, `</output>`, `<returncode>`: a tag alone on its line (mini-swe-agent's wrappers).
fn is_bare_tag(t: &str) -> bool {
    t.starts_with('<') && t.ends_with('>') && !t.contains(' ') && t.matches('<').count() == 1
}

/// `<total_tokens>…</total_tokens>`: a whole element of a tag the harness writes
/// ([`super::user::HARNESS_TAGS`]) on one line: the harness's note, not the call's output.
fn is_harness_element(t: &str) -> bool {
    super::user::HARNESS_TAGS.iter().any(|tag| {
        t.strip_prefix('<')
            .and_then(|r| r.strip_prefix(tag))
            .is_some_and(|r| r.starts_with('>'))
            && t.strip_suffix('>')
                .and_then(|r| r.strip_suffix(tag))
                .is_some_and(|r| r.ends_with("</"))
    })
}

/// Whether a line of a call's output says something by itself (see [`informative_lines`]).
pub fn is_informative(line: &str) -> bool {
    !uninformative(line)
}

/// A line says nothing by itself: blank, only punctuation or box drawing, a bare exit status
/// (`Exit code 1`, `exit code: 2`), a code fence, a bare tag, a harness element on its own line
/// (`<total_tokens>…</total_tokens>`), a Codex frame line, or the head
/// of microcompact's placeholder for a cleared result (the lines after it are the output's).
fn uninformative(line: &str) -> bool {
    let l = line.trim();
    if !l.chars().any(char::is_alphanumeric)
        || is_bare_tag(l)
        || is_harness_element(l)
        || FRAME_LINES.iter().any(|f| l.starts_with(f))
        || l.starts_with(CLEARED_PREFIX)
    {
        return true;
    }
    let lower = l.to_lowercase();
    let bare_exit = [
        "exit code",
        "exit status",
        "process exited with code",
        "returncode",
    ]
    .iter()
    .any(|p| {
        lower
            .strip_prefix(p)
            .is_some_and(|rest| rest.trim_matches([':', ' ', '=']).parse::<i64>().is_ok())
    });
    bare_exit || lower.starts_with("```") || tagged_number(l) || json_exit_code(l)
}

/// `"exit_code":2` (also `"exit_code": 2,`): Codex's metadata field alone on a line, the
/// evidence line microcompact keeps in a cleared failure's placeholder so the outcome can still
/// be read ([`crate::outcome`]); a status, not the error.
fn json_exit_code(l: &str) -> bool {
    l.strip_prefix("\"exit_code\"")
        .and_then(|r| r.trim_start().strip_prefix(':'))
        .is_some_and(|n| n.trim().trim_end_matches(',').trim().parse::<i64>().is_ok())
}

/// `<returncode>2</returncode>`: a number between tags (mini-swe-agent's exit status).
fn tagged_number(l: &str) -> bool {
    let Some(inner) = l
        .strip_prefix('<')
        .and_then(|r| r.split_once('>'))
        .map(|(_, r)| r)
    else {
        return false;
    };
    inner
        .split_once("</")
        .is_some_and(|(n, close)| n.trim().parse::<i64>().is_ok() && close.ends_with('>'))
}

fn clean(line: &str) -> String {
    let mut s = line.to_string();
    for w in WRAPPERS {
        s = s.replace(w, "");
    }
    one_line_clipped(&s, ERROR_LINE_CHARS)
}

/// The first and last informative lines of `text` (see the module docs), each clipped to
/// [`ERROR_LINE_CHARS`] characters; the last is `None` when the text has only one. Reads lines
/// from the start for the first and from the end for the last, so a long output is not
/// scanned whole.
pub fn informative_lines(text: &str) -> (Option<String>, Option<String>) {
    let body = output_text(text);
    let text = body.as_ref();
    let first = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i, clean(l)))
        .find(|(_, l)| !uninformative(l));
    let Some((first_at, first)) = first else {
        return (None, None);
    };
    let total = text.lines().count();
    let last = text
        .lines()
        .rev()
        .enumerate()
        .map(|(i, l)| (total - 1 - i, clean(l)))
        .take_while(|(i, _)| *i > first_at)
        .find(|(_, l)| !uninformative(l))
        .map(|(_, l)| l)
        .filter(|l| *l != first);
    (Some(first), last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_finding_and_the_summary_line_are_kept() {
        let out = "Exit code 1\n\n┃ [R] → lib/a.ex:12 Nested too deep\n  more\n\nUse mix credo explain to explain issues\n";
        assert_eq!(
            informative_lines(out),
            (
                Some("┃ [R] → lib/a.ex:12 Nested too deep".to_string()),
                Some("Use mix credo explain to explain issues".to_string())
            )
        );
    }

    #[test]
    fn wrappers_and_bare_exit_codes_are_skipped() {
        assert_eq!(
            informative_lines("<tool_use_error>File has not been read yet.</tool_use_error>"),
            (Some("File has not been read yet.".to_string()), None)
        );
        assert_eq!(informative_lines("Exit code 2\n"), (None, None));
    }

    #[test]
    fn the_harness_note_of_tokens_left_is_not_the_error() {
        // Claude Code puts `<total_tokens>N tokens left</total_tokens>` in the user's turn;
        // joined with the result's text it is neither the finding nor the summary line.
        let text = "<total_tokens>14000000 tokens left</total_tokens>\nmake: *** No rule to make target 'x'.  Stop.\n<total_tokens>13000000 tokens left</total_tokens>";
        assert_eq!(
            informative_lines(text),
            (
                Some("make: *** No rule to make target 'x'. Stop.".to_string()),
                None
            )
        );
        // Text around the element is the output's own.
        assert_eq!(
            informative_lines("saw <total_tokens>5</total_tokens> here").0,
            Some("saw <total_tokens>5</total_tokens> here".to_string())
        );
    }

    #[test]
    fn codex_wrappers_frames_and_our_placeholder_head_are_not_the_error() {
        let codex = r#"{"output":"Wall time: 1.2 seconds\nOutput:\n> tsc --noEmit\nsrc/a.ts(3,1): error TS2304\n","metadata":{"exit_code":2}}"#;
        assert_eq!(
            informative_lines(codex),
            (
                Some("> tsc --noEmit".to_string()),
                Some("src/a.ts(3,1): error TS2304".to_string())
            )
        );
        let cleared = "[compactor: cleared failed (error) result of shell call c1 (1,636 tokens) to save context; re-run the tool if it is needed]\n<returncode>2</returncode>\nls: cannot access 'x': No such file\n";
        let codex_cleared = "[compactor: cleared failed (error) result of shell call c2 (192 tokens) to save context; re-run the tool if it is needed]\n\"exit_code\":2\n> tsc --noEmit\nERR_PNPM_RECURSIVE_RUN_FIRST_FAIL\n";
        assert_eq!(
            informative_lines(codex_cleared),
            (
                Some("> tsc --noEmit".to_string()),
                Some("ERR_PNPM_RECURSIVE_RUN_FIRST_FAIL".to_string())
            )
        );
        assert!(!is_informative("\"exit_code\": 101,"));
        assert!(is_informative("\"exit_code\": unknown"));
        assert_eq!(
            informative_lines(cleared),
            (
                Some("ls: cannot access 'x': No such file".to_string()),
                None
            )
        );
    }
}
