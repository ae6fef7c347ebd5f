//! Head + tail truncation of text, on character (preferably line) boundaries.

use crate::render::{grapheme_ceil, grapheme_floor};
use crate::tokens::{TokenCounter, pieces};

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
/// truncated before. Cuts fall between grapheme clusters (never inside a UTF-8 sequence, an
/// emoji ZWJ sequence or a letter's combining marks), and on a line break when one is near.
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
    // A text not counted before is counted in chunks (where the counter adds up at piece
    // starts), so that the head's and the tail's counts below are read from the chunks' sums.
    let mut chunks = None;
    let tokens = known_tokens.unwrap_or_else(|| {
        counter.count_text_cached_or(text, &mut || {
            let c = Chunks::count(text, counter)?;
            let total = c.total;
            chunks = Some(c);
            Some(total)
        })
    });
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
    // Between grapheme clusters: a ZWJ emoji or a letter with its marks is kept whole or
    // cut out whole.
    let head_end = grapheme_floor(
        text,
        snap_back_to_line(text, byte_at_char(text, head_chars)),
    );
    let tail_start = snap_forward_to_line(text, byte_at_char_from_end(text, tail_chars));
    let tail_start = grapheme_ceil(text, keep_closing_lines(text, head_end, tail_start));
    if tail_start <= head_end {
        return None;
    }
    // Both offsets are char boundaries (byte_at_char, line starts, ASCII markers).
    let (Some(head), Some(tail)) = (text.get(..head_end), text.get(tail_start..)) else {
        return None;
    };
    let kept = Kept::count(text, (head, tail), counter, chunks.as_ref());
    // The middle is not tokenized: what goes is the whole minus what stays.
    let removed = tokens.saturating_sub(kept.head + kept.tail);
    let mark = format!("\n[… {} {TRUNCATION_MARK}\n", thousands(removed));
    let out = format!("{head}{mark}{tail}");
    // Summed from the parts where the counter adds up (kept in its cache for the block's count
    // later), else tokenized.
    let after = counter.count_text_cached_or(&out, &mut || kept.joined(&mark, counter));
    if after >= tokens {
        return None;
    }
    Some((out, tokens, after))
}

/// The counts of a cut's head and tail, each counted in two parts split at a piece start
/// ([`pieces`]) near the marker: `head = far + near`, `tail = near + far`. The cut text
/// (`head + mark + tail`) then counts `far` of both plus the joined `near + mark + near`, a few
/// bytes: the head and tail are not tokenized a second time.
struct Kept<'t> {
    /// Tokens of the head and of the tail.
    head: usize,
    tail: usize,
    /// The head's part from its last piece start, and the tail's up to its first one (`""`
    /// when the tail starts a piece right after the marker's line break).
    head_near: &'t str,
    tail_near: &'t str,
    /// Tokens of the two far parts; None when the counter does not add up at piece starts.
    far: Option<usize>,
}

impl<'t> Kept<'t> {
    /// The counts of `head` and `tail`, a prefix and a suffix of `text`; the far parts are read
    /// from `chunks` when the text was just counted in chunks (and kept in the counter's cache,
    /// where the next cut of the same text finds them), else counted (usually found cached).
    fn count(
        text: &str,
        (head, tail): (&'t str, &'t str),
        counter: &dyn TokenCounter,
        chunks: Option<&Chunks>,
    ) -> Kept<'t> {
        let count = |s: &str| {
            if s.is_empty() {
                0
            } else {
                counter.count_text_cached(s)
            }
        };
        if !counter.adds_at_piece_starts() {
            return Kept {
                head: count(head),
                tail: count(tail),
                head_near: head,
                tail_near: tail,
                far: None,
            };
        }
        let h = pieces::last_piece_start(head).unwrap_or(0);
        let t = if pieces::piece_start_after_line_break(tail) {
            0
        } else {
            pieces::first_piece_start(tail).unwrap_or(tail.len())
        };
        // Piece starts are char boundaries (ASCII on both sides).
        let (head_far, head_near) = (head.get(..h).unwrap_or(""), head.get(h..).unwrap_or(head));
        let (tail_near, tail_far) = (tail.get(..t).unwrap_or(tail), tail.get(t..).unwrap_or(""));
        let tail_from = text.len() - tail.len() + t;
        let (hf, tf) = match chunks {
            Some(c) => (
                known(counter, head_far, || c.prefix(text, h, counter)),
                known(counter, tail_far, || c.suffix(text, tail_from, counter)),
            ),
            None => (count(head_far), count(tail_far)),
        };
        Kept {
            head: hf + count(head_near),
            tail: count(tail_near) + tf,
            head_near,
            tail_near,
            far: Some(hf + tf),
        }
    }

    /// Tokens of `head + mark + tail`, where the counter adds up at piece starts: the far
    /// parts' counts and the joined near parts tokenized (the splits are piece starts of the
    /// cut text too: the bytes around each are the same there).
    fn joined(&self, mark: &str, counter: &dyn TokenCounter) -> Option<usize> {
        let far = self.far?;
        Some(far + counter.count_text(&format!("{}{mark}{}", self.head_near, self.tail_near)))
    }
}

/// The count of `part` from `sum` (exact), kept in the counter's cache; 0 for `""`.
fn known(counter: &dyn TokenCounter, part: &str, sum: impl Fn() -> usize) -> usize {
    if part.is_empty() {
        return 0;
    }
    counter.count_text_cached_or(part, &mut || Some(sum()))
}

/// A text counted in chunks that end at piece starts ([`pieces::piece_start`]): the count of
/// a prefix that ends, or a suffix that starts, at a piece start is the chunks' sum before it
/// plus the bytes from the nearest chunk end tokenized (under [`Chunks::BYTES`]).
struct Chunks {
    /// Byte offset of each chunk end (a piece start, ascending; the text's end last) and the
    /// tokens before it.
    ends: Vec<(usize, usize)>,
    /// Tokens of the whole text.
    total: usize,
}

impl Chunks {
    /// Bytes of a chunk, about: each ends at the first piece start this far past the last.
    const BYTES: usize = 1024;

    /// `text` counted chunk by chunk; None when the counter does not add up at piece starts.
    fn count(text: &str, counter: &dyn TokenCounter) -> Option<Chunks> {
        if !counter.adds_at_piece_starts() {
            return None;
        }
        let mut ends = Vec::with_capacity(text.len() / Self::BYTES + 1);
        let (mut from, mut total) = (0, 0);
        while from < text.len() {
            let end = (from + Self::BYTES..text.len())
                .find(|&at| pieces::piece_start(text, at))
                .unwrap_or(text.len());
            total += counter.count_text(text.get(from..end).unwrap_or(""));
            ends.push((end, total));
            from = end;
        }
        Some(Chunks { ends, total })
    }

    /// Tokens of `text[..at]`, `at` a piece start of `text`.
    fn prefix(&self, text: &str, at: usize, counter: &dyn TokenCounter) -> usize {
        // The last chunk end at or before `at` (0 before the first).
        let k = self.ends.partition_point(|&(end, _)| end <= at);
        let (end, before) = k.checked_sub(1).map_or((0, 0), |i| self.ends[i]);
        before + counter.count_text(text.get(end..at).unwrap_or(""))
    }

    /// Tokens of `text[at..]`, `at` a piece start of `text` (or its end).
    fn suffix(&self, text: &str, at: usize, counter: &dyn TokenCounter) -> usize {
        // The first chunk end at or after `at` (the text's end is the last).
        let j = self.ends.partition_point(|&(end, _)| end < at);
        let (end, before) = self
            .ends
            .get(j)
            .copied()
            .unwrap_or((text.len(), self.total));
        counter.count_text(text.get(at..end).unwrap_or("")) + self.total.saturating_sub(before)
    }
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
    // A marker near the end has its words in the last KEPT_CLOSING_BYTES: where they are not
    // there, the whole text is not read for one.
    let closing = text
        .as_bytes()
        .get(text.len().saturating_sub(KEPT_CLOSING_BYTES)..);
    if closing.is_some_and(crate::outcome::mentions_exit_marker)
        && let Some(m) = crate::outcome::exit_marker(text)
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

    proptest::proptest! {
        /// The head and the tail a cut keeps are each made of whole grapheme clusters of the
        /// text (the clusters' boundaries from unicode-segmentation's iterator), whatever mix of
        /// ZWJ emoji, flags, combining marks, CRLF and ASCII lines the text holds.
        #[test]
        fn a_cut_keeps_whole_grapheme_clusters(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "👩‍👩‍👧‍👦", "🇫🇷", "é́", "e\u{301}\u{302}", "a", "line\n", "\r\n", "🏳️‍🌈", "한", "ok ",
                ]),
                50..400,
            ),
            cap in 8usize..80,
        ) {
            use unicode_segmentation::UnicodeSegmentation;
            let text = parts.concat();
            if let Some((out, _, _)) = cut_middle(&text, cap, &Chars) {
                let at = out.find("\n[… ").expect("the marker");
                let head = out.get(..at).unwrap();
                let tail = out
                    .get(out.find(TRUNCATION_MARK).unwrap() + TRUNCATION_MARK.len() + 1..)
                    .unwrap();
                let bounds: std::collections::HashSet<usize> = text
                    .grapheme_indices(true)
                    .map(|(i, _)| i)
                    .chain([text.len()])
                    .collect();
                proptest::prop_assert!(text.starts_with(head));
                proptest::prop_assert!(text.ends_with(tail));
                proptest::prop_assert!(bounds.contains(&head.len()), "head ends inside a cluster at {}", head.len());
                proptest::prop_assert!(bounds.contains(&(text.len() - tail.len())), "tail starts inside a cluster");
            }
        }
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

    /// A counter that counts every text whole (it does not claim to add up at piece starts).
    struct Whole(crate::tokens::TiktokenCounter);
    impl TokenCounter for Whole {
        fn count_text(&self, text: &str) -> usize {
            self.0.count_text(text)
        }
    }

    /// Long texts of lines whose ends and starts put every kind of piece boundary at the cut:
    /// indented and blank lines, `/`, punctuation, digits, non-ASCII letters, an exit code.
    fn long_texts() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let line = proptest::collection::vec(
            prop_oneof![
                "[a-zA-Z]{1,8}",
                "[ \t]{1,4}",
                "[0-9]{1,4}",
                "[/.,:;)(\\]\\[{}`'\"_#-]{1,3}",
                Just("é".to_string()),
                Just("中文".to_string()),
                Just("\u{3000}".to_string()),
                Just("…".to_string()),
                Just("\r".to_string()),
            ],
            0..12,
        )
        .prop_map(|parts| parts.concat());
        (
            proptest::collection::vec(line, 20..120),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(lines, end, exit)| {
                let mut text = lines.join("\n");
                if exit {
                    text.push_str("\n\"exit_code\": 1");
                }
                if end {
                    text.push('\n');
                }
                text
            })
    }

    proptest::proptest! {
        /// Where the counter adds up at piece starts, the cut is the one counted whole (same
        /// text, same counts) and its count is the cut text's plain count, in both
        /// vocabularies and through the cache.
        #[test]
        fn a_summed_cut_count_is_the_plain_count(text in long_texts(), cap in 8usize..120) {
            use crate::tokens::{CachedCounter, TiktokenCounter, Tokenizer};
            for vocabulary in [Tokenizer::O200kBase, Tokenizer::Cl100kBase] {
                let plain = TiktokenCounter::new(vocabulary);
                let whole = cut_middle(&text, cap, &Whole(plain.clone()));
                let summed = cut_middle(&text, cap, &plain);
                proptest::prop_assert_eq!(&summed, &whole);
                let cached = CachedCounter::new(plain.clone());
                proptest::prop_assert_eq!(&cut_middle(&text, cap, &cached), &whole);
                if let Some((out, before, after)) = summed {
                    proptest::prop_assert_eq!(before, plain.count_text(&text));
                    proptest::prop_assert_eq!(after, plain.count_text(&out), "{:?}", out);
                    // The cache holds the cut text's count (found later without tokenizing).
                    let misses = cached.stats().misses;
                    proptest::prop_assert_eq!(cached.count_text_cached(&out), after);
                    proptest::prop_assert_eq!(cached.stats().misses, misses);
                    // The same cut again (a warm call) finds every count it needs cached.
                    proptest::prop_assert_eq!(&cut_middle(&text, cap, &cached), &whole);
                    proptest::prop_assert_eq!(cached.stats().misses, misses);
                }
            }
        }
    }

    #[test]
    fn only_the_bytes_next_to_the_marker_are_counted_again() {
        use crate::tokens::{TiktokenCounter, Tokenizer};
        let c = TiktokenCounter::new(Tokenizer::O200kBase);
        let head = "line 1: cargo build\nline 2: ok }\n";
        // The head's last piece start is the space after `ok` (a graphic, then a space); the
        // tail starts a piece after the marker's line break (a graphic after `\n`).
        let tail = "test result: ok\n";
        let text = format!("{head}lost\n{tail}");
        let kept = Kept::count(&text, (head, tail), &c, None);
        assert_eq!(kept.head_near, " }\n");
        assert_eq!(kept.tail_near, "");
        assert_eq!(kept.head, c.count_text(head));
        // A tail starting with indentation is counted from its first piece start on.
        let (head, tail) = ("ok done\n", "    at foo (a.js)\n");
        let text = format!("{head}lost\n{tail}");
        let kept = Kept::count(&text, (head, tail), &c, None);
        assert_eq!((kept.head_near, kept.tail_near), ("\n", "    at"));
        // The same from chunks (the text counted in parts): equal counts.
        let chunks = Chunks::count(&text, &c).unwrap();
        assert_eq!(chunks.total, c.count_text(&text));
        let summed = Kept::count(&text, (head, tail), &c, Some(&chunks));
        assert_eq!(
            (summed.head, summed.tail, summed.far),
            (kept.head, kept.tail, kept.far)
        );
        let (out, _, after) = cut_middle(&"word ".repeat(400), 50, &c).unwrap();
        assert_eq!(after, c.count_text(&out));
    }

    proptest::proptest! {
        /// The closing part kept is the one found by reading the whole text for an exit-code
        /// marker (before the quick test of the last bytes), wherever markers fall.
        #[test]
        fn the_quick_marker_test_keeps_what_the_whole_read_keeps(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    "[a-z ]{1,60}",
                    proptest::strategy::Just("\n".to_string()),
                    proptest::strategy::Just("\"exit_code\": 1".to_string()),
                    proptest::strategy::Just("<returncode>2".to_string()),
                    proptest::strategy::Just("Exit code: 3".to_string()),
                    proptest::strategy::Just("exited with code 4".to_string()),
                ],
                0..40,
            ),
            head in 0usize..2_000,
            tail in 0usize..2_000,
        ) {
            let text = parts.concat();
            let (head_end, tail_start) = (head.min(text.len()), tail.min(text.len()));
            let whole = {
                let mut start = tail_start;
                let near_end = |p: usize| p > head_end && text.len() - p <= KEPT_CLOSING_BYTES;
                let body = text.trim_end_matches(['\n', '\r']);
                let last_line = body.rfind('\n').map_or(0, |p| p + 1);
                if near_end(last_line) {
                    start = start.min(last_line);
                }
                if let Some(m) = crate::outcome::exit_marker(&text)
                    && near_end(m.start)
                {
                    start = start.min(m.start);
                }
                start
            };
            proptest::prop_assert_eq!(keep_closing_lines(&text, head_end, tail_start), whole);
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
