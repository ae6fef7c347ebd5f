//! Cutting a text to fit a number of tokens, without re-encoding it for every try.
//!
//! ```text
//! text -> encode once (token ids; a prefix cut stops at the first pre-tokenizer piece past
//!         the cut) -> byte end of every token -> the cut at token n, moved to a char
//!         boundary -> one check count of the result (BPE of a piece may differ from the
//!         piece of the BPE at its edge) -> step one token back if over, or grow by whole
//!         chars while it still fits
//! ```
//!
//! Used through [`super::TokenCounter::prefix_within`] and
//! [`super::TokenCounter::suffix_within`]: a head + tail truncation asks each once instead of
//! searching with `count_text`.

use bpe_openai::Tokenizer;

/// The token ids of `text` as tiktoken's `encode_ordinary` gives them (the tests hold them to
/// tiktoken-rs), piece by pre-tokenizer piece, stopping after the first piece that brings
/// them past `limit` tokens: the encoding of a text is its pieces' encodings one after the
/// other, so what is returned is always the start of the whole text's encoding (all of it
/// when it has at most `limit` tokens).
pub(crate) fn encode_until(bpe: &Tokenizer, text: &str, limit: usize) -> Vec<u32> {
    let mut ids = Vec::new();
    for piece in bpe.split(text) {
        ids.extend(bpe.bpe.encode_via_backtracking(piece.as_bytes()));
        if ids.len() > limit {
            break;
        }
    }
    ids
}

/// Byte offsets where each token of `text` ends (`ends[i]` = bytes of tokens `0..=i`), for at
/// least `limit + 1` tokens when the text has that many ([`encode_until`]). Byte-level BPE
/// tokens may end inside a multi-byte char; callers move the offsets to char boundaries.
fn token_ends(bpe: &Tokenizer, text: &str, limit: usize) -> Vec<usize> {
    let mut at = 0;
    encode_until(bpe, text, limit)
        .into_iter()
        .map(|t| {
            at += bpe.bpe.token_len(t);
            at
        })
        .collect()
}

/// The largest char boundary `<= i` of `text`.
fn floor_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest char boundary `>= i` of `text`.
fn ceil_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The longest prefix of `text`, ending on a char boundary, of at most `max_tokens` tokens
/// (see the [module docs](self)).
pub(crate) fn prefix_within<'t>(bpe: &Tokenizer, text: &'t str, max_tokens: usize) -> &'t str {
    let ends = token_ends(bpe, text, max_tokens);
    if ends.len() <= max_tokens {
        return text;
    }
    let mut n = max_tokens;
    loop {
        let end = if n == 0 {
            0
        } else {
            floor_boundary(text, ends[n - 1])
        };
        let head = text.get(..end).unwrap_or("");
        if n == 0 || bpe.count(head) <= max_tokens {
            return grow_head(bpe, text, end, max_tokens);
        }
        n -= 1;
    }
}

/// The longest suffix of `text`, starting on a char boundary, of at most `max_tokens` tokens.
pub(crate) fn suffix_within<'t>(bpe: &Tokenizer, text: &'t str, max_tokens: usize) -> &'t str {
    let ends = token_ends(bpe, text, usize::MAX);
    if ends.len() <= max_tokens {
        return text;
    }
    // Token i starts where token i - 1 ends; keep tokens `len - n ..`.
    let mut n = max_tokens;
    loop {
        let first = ends.len() - n;
        let start = if n == 0 {
            text.len()
        } else {
            ceil_boundary(text, ends[first - 1])
        };
        let tail = text.get(start..).unwrap_or("");
        if n == 0 || bpe.count(tail) <= max_tokens {
            return grow_tail(bpe, text, start, max_tokens);
        }
        n -= 1;
    }
}

/// The head `text[..end]` (which fits) grown char by char while it still fits: a token cut
/// inside a multi-byte char drops that char, and the shorter piece may encode in fewer tokens
/// than the tokens it was cut from. Usually one or two check counts.
fn grow_head<'t>(bpe: &Tokenizer, text: &'t str, mut end: usize, max_tokens: usize) -> &'t str {
    while let Some(c) = text.get(end..).and_then(|rest| rest.chars().next()) {
        let next = end + c.len_utf8();
        match text.get(..next) {
            Some(head) if bpe.count(head) <= max_tokens => end = next,
            _ => break,
        }
    }
    text.get(..end).unwrap_or("")
}

/// The tail `text[start..]` (which fits) grown char by char to the left while it still fits.
fn grow_tail<'t>(bpe: &Tokenizer, text: &'t str, mut start: usize, max_tokens: usize) -> &'t str {
    while let Some(c) = text
        .get(..start)
        .and_then(|before| before.chars().next_back())
    {
        let prev = start - c.len_utf8();
        match text.get(prev..) {
            Some(tail) if bpe.count(tail) <= max_tokens => start = prev,
            _ => break,
        }
    }
    text.get(start..).unwrap_or("")
}

/// The generic form for any counter: a binary search over char boundaries with
/// `count` (about `log2(len)` encodes). A counter that can encode once overrides it.
pub(crate) fn prefix_by_search<'t>(
    count: &dyn Fn(&str) -> usize,
    text: &'t str,
    max_tokens: usize,
) -> &'t str {
    if count(text) <= max_tokens {
        return text;
    }
    let (mut lo, mut hi) = (0usize, text.len());
    // Invariant: the prefix to `lo` fits, the prefix to `hi` does not.
    while hi - lo > 1 {
        let mid = floor_boundary(text, lo + (hi - lo) / 2);
        let mid = if mid <= lo {
            ceil_boundary(text, lo + 1)
        } else {
            mid
        };
        if mid >= hi {
            break;
        }
        if count(text.get(..mid).unwrap_or("")) <= max_tokens {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    text.get(..lo).unwrap_or("")
}

/// The suffix form of [`prefix_by_search`].
pub(crate) fn suffix_by_search<'t>(
    count: &dyn Fn(&str) -> usize,
    text: &'t str,
    max_tokens: usize,
) -> &'t str {
    if count(text) <= max_tokens {
        return text;
    }
    // Invariant: the suffix from `hi` fits, the suffix from `lo` does not.
    let (mut lo, mut hi) = (0usize, text.len());
    while hi - lo > 1 {
        let mid = floor_boundary(text, lo + (hi - lo) / 2);
        let mid = if mid <= lo {
            ceil_boundary(text, lo + 1)
        } else {
            mid
        };
        if mid >= hi {
            break;
        }
        if count(text.get(mid..).unwrap_or("")) <= max_tokens {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    text.get(hi..).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use crate::tokens::{CachedCounter, TiktokenCounter, TokenCounter, Tokenizer};
    use proptest::prelude::*;

    fn text_strategy() -> impl Strategy<Value = String> {
        // ASCII words, runs of spaces and other whitespace (the pre-tokenizer's look-ahead),
        // newlines, contractions, and multi-byte chars (accents, CJK, emoji) that byte-level
        // BPE splits across tokens.
        proptest::collection::vec(
            prop_oneof![
                "[a-z]{1,8}",
                " {1,4}",
                "\n",
                Just("\r\n".to_string()),
                Just("\t\u{a0}".to_string()),
                Just("'LL".to_string()),
                "[0-9]{1,5}",
                Just("é".to_string()),
                Just("→".to_string()),
                Just("漢字".to_string()),
                Just("🦀".to_string()),
                Just("“quoted”".to_string()),
            ],
            0..60,
        )
        .prop_map(|parts| parts.concat())
    }

    fn counters() -> [Box<dyn TokenCounter>; 2] {
        [
            Box::new(TiktokenCounter::new(Tokenizer::O200kBase)),
            Box::new(CachedCounter::new(TiktokenCounter::new(
                Tokenizer::Cl100kBase,
            ))),
        ]
    }

    proptest! {
        #[test]
        fn a_cut_fits_is_a_char_boundary_piece_and_is_maximal_within_one_char(
            text in text_strategy(), n in 0usize..40,
        ) {
            for c in counters() {
                let total = c.count_text(&text);
                let head = c.prefix_within(&text, n);
                let tail = c.suffix_within(&text, n);
                prop_assert!(text.starts_with(head));
                prop_assert!(text.ends_with(tail));
                prop_assert!(c.count_text(head) <= n);
                prop_assert!(c.count_text(tail) <= n);
                if total <= n {
                    prop_assert_eq!(head, text.as_str());
                    prop_assert_eq!(tail, text.as_str());
                    continue;
                }
                // Maximal: one more char no longer fits, or the cut is within one token of n
                // (a char split over several tokens is taken whole or not at all).
                let next = text.get(head.len()..).and_then(|r| r.chars().next()).map_or(0, char::len_utf8);
                let longer = text.get(..head.len() + next).unwrap();
                prop_assert!(
                    c.count_text(longer) > n || c.count_text(head) + 1 >= n,
                    "head {:?} of {:?} at {}", head, text, n
                );
                let before = text.get(..text.len() - tail.len()).and_then(|b| b.chars().next_back()).map_or(0, char::len_utf8);
                let wider = text.get(text.len() - tail.len() - before..).unwrap();
                prop_assert!(
                    c.count_text(wider) > n || c.count_text(tail) + 1 >= n,
                    "tail {:?} of {:?} at {}", tail, text, n
                );
            }
        }

        #[test]
        fn the_encode_once_cut_matches_the_generic_search_within_one_token(
            text in text_strategy(), n in 0usize..40,
        ) {
            let c = TiktokenCounter::new(Tokenizer::O200kBase);
            let count = |s: &str| c.count_text(s);
            let fast = c.count_text(c.prefix_within(&text, n));
            let slow = c.count_text(super::prefix_by_search(&count, &text, n));
            prop_assert!(fast + 1 >= slow, "{} vs {}", fast, slow);
            let fast = c.count_text(c.suffix_within(&text, n));
            let slow = c.count_text(super::suffix_by_search(&count, &text, n));
            prop_assert!(fast + 1 >= slow, "{} vs {}", fast, slow);
        }
    }

    #[test]
    fn a_cut_of_a_known_text_keeps_whole_words() {
        let c = TiktokenCounter::new(Tokenizer::O200kBase);
        assert_eq!(c.count_text("hello world again"), 3);
        assert_eq!(c.prefix_within("hello world again", 2), "hello world");
        assert_eq!(c.suffix_within("hello world again", 1), " again");
        assert_eq!(c.prefix_within("hello world again", 0), "");
        assert_eq!(c.suffix_within("hello world again", 9), "hello world again");
    }
}
