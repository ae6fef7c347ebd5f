//! The informative lines of a failed call's output: the first (usually the finding itself) and
//! the last (usually the summary or the exit status), without the wrappers harnesses put
//! around them.

use crate::render::one_line_clipped;

/// Characters kept of one error line.
pub const ERROR_LINE_CHARS: usize = 160;

/// Wrappers stripped from a line before it is judged (Claude Code's `<tool_use_error>`).
const WRAPPERS: &[&str] = &[
    "<tool_use_error>",
    "</tool_use_error>",
    "<error>",
    "</error>",
];

/// A line says nothing by itself: blank, only punctuation or box drawing, a bare exit status
/// (`Exit code 1`, `exit code: 2`), or a code fence.
fn uninformative(line: &str) -> bool {
    let l = line.trim();
    if !l.chars().any(char::is_alphanumeric) {
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
    bare_exit || lower.starts_with("```")
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
}
