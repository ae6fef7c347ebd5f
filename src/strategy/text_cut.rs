//! Head + tail truncation of text, on character (preferably line) boundaries.

use crate::tokens::TokenCounter;

/// The words of every truncation marker; text that already holds one is never cut again.
pub const TRUNCATION_MARK: &str = "tokens truncated …]";

/// Formats a count with thousands separators: `12345` -> `12,345`.
pub fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Shortens `text` to about `max_tokens` tokens, keeping its head and tail and putting
/// `[… N tokens truncated …]` between them. Returns `None` when the text already fits or was
/// truncated before. Cuts fall on character boundaries (never inside a UTF-8 sequence), and on
/// a line break when one is near.
pub fn cut_middle(
    text: &str,
    max_tokens: usize,
    counter: &dyn TokenCounter,
) -> Option<(String, usize, usize)> {
    cut_middle_known(text, max_tokens, counter, None)
}

/// [`cut_middle`] with the text's token count when the caller already has it (from the
/// per-block cache), so a long text is not tokenized again. A text of at most `max_tokens`
/// bytes fits without counting (a token covers at least one byte).
pub fn cut_middle_known(
    text: &str,
    max_tokens: usize,
    counter: &dyn TokenCounter,
    known_tokens: Option<usize>,
) -> Option<(String, usize, usize)> {
    if text.len() <= max_tokens || text.contains(TRUNCATION_MARK) {
        return None;
    }
    let tokens = known_tokens.unwrap_or_else(|| counter.count_text_cached(text));
    if tokens <= max_tokens {
        return None;
    }
    let chars = text.chars().count();
    // Characters per token of this very text, so dense text (code, emoji) keeps fewer chars.
    let per_token = chars as f64 / tokens.max(1) as f64;
    let marker_tokens = 12;
    let keep_tokens = max_tokens.saturating_sub(marker_tokens).max(2);
    let keep_chars = ((keep_tokens as f64 * per_token) * 0.9) as usize;
    let head_chars = keep_chars * 3 / 5;
    let tail_chars = keep_chars - head_chars;
    let head_end = snap_back_to_line(text, byte_at_char(text, head_chars));
    let tail_start = snap_forward_to_line(text, byte_at_char_from_end(text, tail_chars));
    let tail_start = keep_closing_lines(text, head_end, tail_start);
    if tail_start <= head_end {
        return None;
    }
    // Both offsets are char boundaries (byte_at_char, line starts, ASCII markers).
    let (Some(head), Some(tail)) = (text.get(..head_end), text.get(tail_start..)) else {
        return None;
    };
    // The middle is not tokenized: what goes is the whole minus what stays.
    let removed =
        tokens.saturating_sub(counter.count_text_cached(head) + counter.count_text_cached(tail));
    let out = format!(
        "{}\n[… {} {TRUNCATION_MARK}\n{}",
        head,
        thousands(removed),
        tail
    );
    let after = counter.count_text_cached(&out);
    if after >= tokens {
        return None;
    }
    Some((out, tokens, after))
}

/// Longest closing part, in bytes, that a cut keeps whole in its tail: the last line of the
/// text, or everything from an exit-code marker on.
pub const KEPT_CLOSING_BYTES: usize = 240;

/// Moves the tail's start back so that the tail keeps what a result ends with: its last
/// line (a test run's `1 failed, 3 passed`, a build's `error: could not compile`) and an
/// exit-code marker near the end (Codex `"exit_code": 1` metadata after the output), each when
/// it is at most [`KEPT_CLOSING_BYTES`] from the end and after the head. Without this a cap
/// could cut a failure's only signal. Offsets stay on char boundaries: a line starts after
/// `\n`, a marker is ASCII.
fn keep_closing_lines(text: &str, head_end: usize, tail_start: usize) -> usize {
    let mut start = tail_start;
    let near_end = |p: usize| p > head_end && text.len() - p <= KEPT_CLOSING_BYTES;
    let body = text.trim_end_matches(['\n', '\r']);
    let last_line = body.rfind('\n').map_or(0, |p| p + 1);
    if near_end(last_line) {
        start = start.min(last_line);
    }
    if let Some(m) = crate::outcome::exit_marker(text)
        && near_end(m.start)
    {
        start = start.min(m.start);
    }
    start
}

/// Byte offset of the `n`th character (or the end).
fn byte_at_char(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(b, _)| b)
}

/// Byte offset of the character `n` characters before the end (`text.len()` for 0, 0 when
/// the text is shorter): `byte_at_char(text, chars - n)` without walking the head.
fn byte_at_char_from_end(text: &str, n: usize) -> usize {
    match n.checked_sub(1) {
        None => text.len(),
        Some(k) => text.char_indices().rev().nth(k).map_or(0, |(b, _)| b),
    }
}

/// Moves a cut back to just after a line break if one lies in the last fifth before it. Only
/// that fifth is searched (a line break is one byte, never inside a UTF-8 sequence).
fn snap_back_to_line(text: &str, at: usize) -> usize {
    if !text.is_char_boundary(at) {
        return at;
    }
    let from = at.saturating_sub((at / 5).max(1));
    match text
        .as_bytes()
        .get(from..at)
        .and_then(|w| memchr::memrchr(b'\n', w))
    {
        Some(off) => from + off + 1,
        None => at,
    }
}

/// Moves a cut forward to just after a line break if one lies in the next fifth after it.
/// Only that fifth is searched.
fn snap_forward_to_line(text: &str, at: usize) -> usize {
    if !text.is_char_boundary(at) {
        return at;
    }
    let window = ((text.len() - at) / 5).max(1);
    let to = text.len().min(at + window + 1);
    match text
        .as_bytes()
        .get(at..to)
        .and_then(|w| memchr::memchr(b'\n', w))
    {
        Some(off) => at + off + 1,
        None => at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Chars;
    impl TokenCounter for Chars {
        fn count_text(&self, text: &str) -> usize {
            text.chars().count()
        }
    }

    #[test]
    fn keeps_head_and_tail_and_names_the_cut() {
        let text: String = (0..200).map(|i| format!("line {i}\n")).collect();
        let (out, before, after) = cut_middle(&text, 200, &Chars).unwrap();
        assert!(out.starts_with("line 0\n"));
        assert!(out.ends_with("line 199\n"));
        assert!(out.contains(TRUNCATION_MARK));
        assert_eq!(before, text.chars().count());
        assert!(after <= 200, "{after}");
    }

    #[test]
    fn never_splits_a_character_and_never_cuts_twice() {
        let text = "👩‍👩‍👧‍👦é́".repeat(300);
        let (out, _, _) = cut_middle(&text, 100, &Chars).unwrap();
        assert!(out.chars().count() < text.chars().count());
        assert!(cut_middle(&out, 10, &Chars).is_none());
    }

    #[test]
    fn an_exit_code_at_the_end_of_one_long_line_stays_in_the_tail() {
        let inner = "“quoted” → naïve failed ".repeat(300);
        let text = format!(
            "{{\"output\": \"{inner}\", \"metadata\": {{\"exit_code\": 1, \"duration_seconds\": 0.5}}}}"
        );
        let (out, _, after) = cut_middle(&text, 40, &Chars).unwrap();
        assert!(
            out.ends_with("\"exit_code\": 1, \"duration_seconds\": 0.5}}"),
            "{out}"
        );
        assert!(after < text.chars().count());
        assert_eq!(crate::outcome::exit_marker(&out).map(|m| m.code), Some(1));
    }

    #[test]
    fn the_last_line_stays_in_the_tail() {
        let mut text: String = (0..200)
            .map(|i| format!("{}\n", "x".repeat(i % 7 + 30)))
            .collect();
        text.push_str("test result: FAILED. 3 passed; 1 failed\n");
        let (out, _, _) = cut_middle(&text, 20, &Chars).unwrap();
        assert!(
            out.ends_with("test result: FAILED. 3 passed; 1 failed\n"),
            "{out}"
        );
    }

    proptest::proptest! {
        /// The bounded searches give what the plain ones give: the char at `chars - n`, and a
        /// line break within a fifth of the cut searched over the whole text.
        #[test]
        fn bounded_searches_agree_with_whole_text_searches(
            text in "[ab\né€]{0,80}",
            n in 0usize..90,
            at_char in 0usize..90,
        ) {
            let chars = text.chars().count();
            proptest::prop_assert_eq!(
                byte_at_char_from_end(&text, n),
                byte_at_char(&text, chars.saturating_sub(n))
            );
            let at = byte_at_char(&text, at_char);
            let back = match text.get(..at).and_then(|t| t.rfind('\n')) {
                Some(nl) if at - nl <= (at / 5).max(1) => nl + 1,
                _ => at,
            };
            proptest::prop_assert_eq!(snap_back_to_line(&text, at), back);
            let forward = match text.get(at..).and_then(|t| t.find('\n')) {
                Some(off) if off <= ((text.len() - at) / 5).max(1) => at + off + 1,
                _ => at,
            };
            proptest::prop_assert_eq!(snap_forward_to_line(&text, at), forward);
        }
    }

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(12345), "12,345");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
