//! Where counts add up: the byte offsets at which the `o200k_base` and `cl100k_base`
//! pre-tokenizers start a piece whatever comes before, so that a text's count is the count of
//! the part before plus the count of the part after ([`piece_start`]). A strategy that builds a
//! text from parts it counted (a cut text: head, marker, tail; a marker: its lines) then
//! tokenizes only a few bytes around each join instead of the whole text again.
//!
//! ```text
//! count(s) = count(s[..at]) + count(s[at..])   when piece_start(s, at)
//! ```
//!
//! Why. tiktoken-rs (`CoreBPE::encode_ordinary`) cuts a text into pieces with its vocabulary's
//! split regex and encodes each piece on its own, so a count is the sum over the pieces. When
//! `s[..at]` alone splits into exactly the pieces `s` has before `at`, and `s[at..]` alone into
//! those from `at` on, the counts add up. The regexes (tiktoken-rs 0.12 `O200K_BASE_PAT_STR` and
//! the pattern of `cl100k_base()`), alternatives tried in order at each piece start:
//!
//! ```text
//! o200k   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|…|'d)?
//!         | [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|…|'d)?
//!         | \p{N}{1,3} |  ?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//! cl100k  '(?i:[sdmt]|ll|ve|re) | [^\r\n\p{L}\p{N}]?+\p{L}++ | \p{N}{1,3}+
//!         |  ?[^\s\p{L}\p{N}]++[\r\n]*+ | \s++$ | \s*[\r\n] | \s+(?!\S) | \s
//! ```
//!
//! Pieces are contiguous and a piece from `at` on depends only on `s[at..]` (no look-behind, and
//! `$` is the end of both), so `s[at..]` is safe as soon as a piece starts at `at`. The part
//! before differs from `s` only through what looks past its end: `(?!\S)` and cl100k's `\s++$`
//! (whitespace to the end of the text is one piece). Each rule of [`piece_start`] keeps both
//! the same:
//!
//! 1. an ASCII graphic byte, then a space or tab: no piece holds a space or tab after a graphic
//!    (a word or number holds no whitespace, a punctuation run takes only line breaks after it,
//!    a whitespace run holds no graphic). The part before ends in a graphic, so `\s++$` never
//!    matches at its end, and `(?!\S)` sees whitespace at `at` as it sees the end.
//! 2. an ASCII letter or digit, then `\r` or `\n`: as 1 (a punctuation run, which would take
//!    the line break, holds no letter or digit).
//! 3. `\n`, then an ASCII graphic other than `/`: a word's optional first character is never a
//!    line break, a punctuation run takes line breaks (and in o200k `/`) after it but nothing
//!    after those, and a whitespace run holds no graphic. The part before ends in `\n`: its last
//!    whitespace run, from where a piece starts in it, is one piece in both, `\s*[\r\n]` (or
//!    `\s*[\r\n]+`) up to the line break before `at` in `s` and `\s++$` alone, both to `at`.
//!
//! `tests::counts_add_up_at_every_piece_start` checks the rule against plain counts in both
//! vocabularies, on texts built to put whitespace runs, line breaks, `/`, digits, non-ASCII
//! letters and the truncation mark on either side of every offset.

use super::TokenCounter;

/// Whether a piece of both vocabularies' pre-tokenizers starts at byte `at` of `text` whatever
/// comes before it, so that `count(text) == count(&text[..at]) + count(&text[at..])` (see the
/// [module docs](self) for the rules and why). `at` is then a char boundary (both bytes around
/// it are ASCII). False at 0 and at the end (nothing to add).
pub fn piece_start(text: &str, at: usize) -> bool {
    let b = text.as_bytes();
    let (Some(&before), Some(&here)) = (at.checked_sub(1).and_then(|i| b.get(i)), b.get(at)) else {
        return false;
    };
    match here {
        b' ' | b'\t' => before.is_ascii_graphic(),
        b'\n' | b'\r' => before.is_ascii_alphanumeric(),
        _ => before == b'\n' && starts_after_line_break(here),
    }
}

/// Whether `text`, put right after a line break, starts a piece there whatever came before
/// (rule 3 of the [module docs](self): it starts with an ASCII graphic other than `/`).
pub fn piece_start_after_line_break(text: &str) -> bool {
    text.as_bytes()
        .first()
        .is_some_and(|&b| starts_after_line_break(b))
}

fn starts_after_line_break(first: u8) -> bool {
    first.is_ascii_graphic() && first != b'/'
}

/// The last [`piece_start`] of `text` (None when there is none).
pub fn last_piece_start(text: &str) -> Option<usize> {
    (1..text.len()).rev().find(|&at| piece_start(text, at))
}

/// The first [`piece_start`] of `text` (None when there is none).
pub fn first_piece_start(text: &str) -> Option<usize> {
    (1..text.len()).find(|&at| piece_start(text, at))
}

/// Exact tokens of `line` followed by `\n`, from `line`'s own count `line_tokens`: one more when
/// the line ends in an ASCII letter or digit (the line break is then a piece of its own, rule
/// 2), else the line's last piece-start-to-end part counted with and without the line break (a
/// few bytes; the whole line when it has no piece start). Only for a counter that
/// [adds up at piece starts](TokenCounter::adds_at_piece_starts).
pub fn line_break_tokens(counter: &dyn TokenCounter, line: &str, line_tokens: usize) -> usize {
    if line
        .as_bytes()
        .last()
        .is_some_and(u8::is_ascii_alphanumeric)
    {
        return line_tokens + 1;
    }
    let at = last_piece_start(line).unwrap_or(0);
    let end = line.get(at..).unwrap_or(line);
    (line_tokens + counter.count_text(&format!("{end}\n"))).saturating_sub(counter.count_text(end))
}

/// Exact tokens of `text`, a text of lines, from the (cached) counts of its lines: the text is
/// cut where a line break is followed by a [`piece_start`] (rule 3), and each part is counted as
/// its text without the last line break ([`TokenCounter::count_text_cached`]: a line a render
/// already counted is found in the cache) plus that line break ([`line_break_tokens`]). A part
/// that does not end in a line break (only the last can) is counted as it is. None when the
/// counter does not add up at piece starts.
pub fn count_by_lines(counter: &dyn TokenCounter, text: &str) -> Option<usize> {
    if !counter.adds_at_piece_starts() {
        return None;
    }
    let b = text.as_bytes();
    let mut total = 0;
    let mut from = 0;
    for at in memchr::memchr_iter(b'\n', b)
        .map(|nl| nl + 1)
        .filter(|&at| at == b.len() || piece_start(text, at))
    {
        let part = text.get(from..at).unwrap_or("");
        total += match part.strip_suffix('\n') {
            Some(line) => line_break_tokens(counter, line, counter.count_text_cached(line)),
            None => counter.count_text_cached(part),
        };
        from = at;
    }
    if let Some(rest) = text.get(from..).filter(|r| !r.is_empty()) {
        total += counter.count_text_cached(rest);
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    // The words of every truncation marker (`strategy::text_cut::TRUNCATION_MARK`).
    const TRUNCATION_MARK: &str = "tokens truncated …]";
    use crate::tokens::{CachedCounter, TiktokenCounter, Tokenizer};
    use proptest::prelude::*;

    fn vocabularies() -> [TiktokenCounter; 2] {
        [
            TiktokenCounter::new(Tokenizer::O200kBase),
            TiktokenCounter::new(Tokenizer::Cl100kBase),
        ]
    }

    /// Texts that put every kind of boundary next to every other: whitespace runs with and
    /// without line breaks, `/` after line breaks and punctuation, digits, non-ASCII letters,
    /// marks and spaces, contractions, and the truncation mark.
    fn texts() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                "[a-zA-Z]{1,6}",
                "[ \t]{1,3}",
                "[\n\r]{1,2}",
                "[ \t\n\r]{1,4}",
                "[0-9]{1,5}",
                "[/.,:;)(\\]\\[{}`'\"_#-]{1,3}",
                Just("/".to_string()),
                Just("\n/".to_string()),
                Just(" /".to_string()),
                Just("'s".to_string()),
                Just("'LL".to_string()),
                Just("é".to_string()),
                Just("É".to_string()),
                Just("中文".to_string()),
                Just("\u{301}".to_string()),
                Just("\u{a0}".to_string()),
                Just("\u{3000}".to_string()),
                Just("…".to_string()),
                Just("🦀".to_string()),
                Just(format!("\n[… 1,234 {TRUNCATION_MARK}\n")),
                Just(format!("[… 7 {TRUNCATION_MARK}")),
            ],
            0..24,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// The rule, against plain counts in both vocabularies: at every offset where
        /// `piece_start` holds, the two parts' counts add up to the whole's.
        #[test]
        fn counts_add_up_at_every_piece_start(text in texts()) {
            for c in vocabularies() {
                let whole = c.count_text(&text);
                for at in 0..=text.len() {
                    if !piece_start(&text, at) {
                        continue;
                    }
                    let (Some(left), Some(right)) = (text.get(..at), text.get(at..)) else {
                        panic!("piece start {at} of {text:?} is not a char boundary");
                    };
                    prop_assert_eq!(
                        c.count_text(left) + c.count_text(right),
                        whole,
                        "{:?} | {:?} ({})", left, right, c.tokenizer()
                    );
                }
            }
        }

        /// A line's count with its line break, and a text of lines summed from its lines,
        /// equal the plain counts (both vocabularies, cached and not).
        #[test]
        fn lines_sum_to_the_plain_count(lines in proptest::collection::vec(texts(), 0..6), end in any::<bool>()) {
            let mut text = lines.join("\n");
            if end {
                text.push('\n');
            }
            for c in vocabularies() {
                for line in &lines {
                    prop_assert_eq!(
                        line_break_tokens(&c, line, c.count_text(line)),
                        c.count_text(&format!("{line}\n")),
                        "{:?}", line
                    );
                }
                prop_assert_eq!(count_by_lines(&c, &text), Some(c.count_text(&text)), "{:?}", text);
                let cached = CachedCounter::new(c.clone());
                prop_assert_eq!(count_by_lines(&cached, &text), Some(c.count_text(&text)));
            }
        }
    }

    #[test]
    fn the_rules_name_these_offsets() {
        // "x y": a space after a graphic; "a\nb": a line break after a letter, and a graphic
        // after a line break.
        assert!(piece_start("x y", 1));
        assert!(piece_start("a\nb", 1));
        assert!(piece_start("a\nb", 2));
        // Not: a space after a space, a line break after punctuation (`.\n` is one piece), a
        // `/` after a line break (o200k's `.\n/`), the ends.
        assert!(!piece_start("x  y", 2));
        assert!(!piece_start("a.\nb", 2));
        assert!(!piece_start("a\n/b", 2));
        assert!(!piece_start("xy", 0));
        assert!(!piece_start("xy", 2));
        assert_eq!(last_piece_start("ab cd ef"), Some(5));
        assert_eq!(first_piece_start("ab cd ef"), Some(2));
        assert_eq!(first_piece_start("abc"), None);
    }

    #[test]
    fn a_counter_that_does_not_add_up_gets_no_sum() {
        struct Chars;
        impl TokenCounter for Chars {
            fn count_text(&self, text: &str) -> usize {
                text.chars().count()
            }
        }
        assert_eq!(count_by_lines(&Chars, "a\nb\n"), None);
    }
}
