//! The engine (bpe-openai) against the oracle (tiktoken-rs `encode_ordinary`, a dev-dependency
//! only): the same token ids for both vocabularies, on texts made to stress the pre-tokenizer
//! (its look-ahead emulation, letter categories, contractions, digit runs, punctuation with
//! `/` and line breaks), and whatever chars come (controls, NUL, marks, emoji). The corpus
//! half is `tests/all/tokens_oracle.rs`.

use super::cut::encode_until;
use super::{TiktokenCounter, TokenCounter, Tokenizer, engine};
use proptest::prelude::*;
use tiktoken_rs::CoreBPE;

const VOCABULARIES: [Tokenizer; 2] = [Tokenizer::O200kBase, Tokenizer::Cl100kBase];

fn oracle(tokenizer: Tokenizer) -> &'static CoreBPE {
    match tokenizer {
        Tokenizer::O200kBase => tiktoken_rs::o200k_base_singleton(),
        Tokenizer::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
    }
}

/// Parts the pre-tokenizers treat apart: each is a case of a split rule.
const PARTS: &[&str] = &[
    // Whitespace runs (before letters, line breaks, digits, the end): `\s+(?!\S)`, emulated
    // by `\s+\s` with the look-ahead char dropped and `\s+$`.
    " ",
    "  ",
    "   ",
    "\t",
    "\t ",
    " \t",
    "\u{a0}",
    "\u{3000}",
    "\u{2003}",
    "\u{85}",
    "\u{2028}",
    "\u{b}",
    "\u{c}",
    // Line breaks.
    "\n",
    "\n\n",
    "\r",
    "\r\n",
    " \r\n",
    "\r\n\r\n",
    // Letters by category: Lu, Ll, Lt, Lm, Lo, and marks (Mn, Mc, Me).
    "A",
    "Zeta",
    "ÄÖ",
    "Σ",
    "a",
    "word",
    "ß",
    "σς",
    "ǅ",
    "ᾈ",
    "ʰ",
    "ー",
    "々",
    "中文",
    "あ",
    "א",
    "ก",
    "\u{301}",
    "\u{903}",
    "\u{20dd}",
    "e\u{301}",
    "HTTPServer",
    "camelCase",
    // Digits: ASCII runs (split by three), other Nd, Nl, No.
    "1",
    "12",
    "2024",
    "1234567",
    "٣٤",
    "Ⅻ",
    "½",
    "²",
    // Contractions in mixed case, and a curly apostrophe that is none.
    "'s",
    "'S",
    "'ll",
    "'LL",
    "'Ll",
    "'re",
    "'VE",
    "'m",
    "'D",
    "'t",
    "'x",
    "’s",
    "'",
    // Punctuation, with a trailing `/` and line breaks (o200k: `[\r\n/]*`).
    ".",
    ",",
    "/",
    "//",
    "...",
    "-->",
    "]/",
    "!\n",
    "?/\n",
    "{",
    "}\n\n",
    "\"",
    "`",
    "_",
    "—",
    "…",
    "“",
    "::",
    "=>",
    "#",
    "@",
    // Emoji: plain, with a skin tone, a ZWJ family, a flag, a variation selector.
    "🦀",
    "👍🏽",
    "👨‍👩‍👧",
    "🇫🇷",
    "\u{fe0f}",
    // NUL and other controls, format chars, a private-use char, the replacement char.
    "\0",
    "\u{1}",
    "\u{7f}",
    "\u{1b}[0m",
    "\u{200b}",
    "\u{200d}",
    "\u{feff}",
    "\u{ad}",
    "\u{e000}",
    "\u{fffd}",
];

fn text() -> impl Strategy<Value = String> {
    let part = prop_oneof![
        6 => proptest::sample::select(PARTS).prop_map(str::to_string),
        2 => "[a-zA-Z]{1,12}",
        1 => "[ \t\r\n]{1,6}",
        1 => "[0-9]{1,7}",
        1 => any::<char>().prop_map(String::from),
    ];
    proptest::collection::vec(part, 0..48).prop_map(|parts| parts.concat())
}

/// Compares the engine with the oracle on `text`, both vocabularies; every id and the count.
fn agrees(text: &str) -> Result<(), TestCaseError> {
    for vocabulary in VOCABULARIES {
        let expected = oracle(vocabulary).encode_ordinary(text);
        let bpe = engine(vocabulary);
        // The pieces cover the text: none is skipped (a skipped piece would be uncounted).
        prop_assert_eq!(bpe.split(text).collect::<String>(), text, "{}", vocabulary);
        prop_assert_eq!(
            encode_until(bpe, text, usize::MAX),
            expected.clone(),
            "{} {:?}",
            vocabulary,
            text
        );
        prop_assert_eq!(
            TiktokenCounter::new(vocabulary).count_text(text),
            expected.len(),
            "{} {:?}",
            vocabulary,
            text
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn the_engine_encodes_as_tiktoken_does(text in text()) {
        agrees(&text)?;
    }

    #[test]
    fn any_string_encodes_as_tiktoken_does(text in any::<String>()) {
        agrees(&text)?;
    }

    /// What a prefix cut reads: the start of the whole encoding, past `limit` when it can be.
    #[test]
    fn an_encoding_stopped_early_is_the_start_of_the_whole(text in text(), limit in 0usize..40) {
        for vocabulary in VOCABULARIES {
            let whole = oracle(vocabulary).encode_ordinary(&text);
            let start = encode_until(engine(vocabulary), &text, limit);
            prop_assert!(whole.starts_with(&start), "{} {:?}", vocabulary, text);
            prop_assert!(start.len() > limit || start.len() == whole.len());
        }
    }
}

#[test]
fn known_look_ahead_cases_encode_as_tiktoken_does() {
    for text in [
        "",
        " ",
        "a  b",
        "a   \n b",
        "x \u{a0}y",
        "  \t\r\n\r\n  end  ",
        "\u{3000}\u{3000}中",
        "don'T YOU'LL we'Re",
        "path/to/file.rs:12\n",
        "}/\n\n/",
        "\0\0\0 \0",
        "1234567890 ٣٤٥٦",
        "   ",
        "\n ",
        " \n",
    ] {
        agrees(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    }
}

/// The look-ahead emulation (`\s+\s`, its last char dropped; `\s+$`) on every pair of Unicode
/// whitespace chars, alone and before each kind of char a piece can start with: bpe-openai's
/// `assert_ne!` in its split (a look-ahead piece must keep a char) sits on this path.
#[test]
fn every_whitespace_pair_before_every_kind_of_char_encodes_as_tiktoken_does() {
    let spaces: Vec<char> = (0..=0x3000u32)
        .filter_map(char::from_u32)
        .filter(|c| c.is_whitespace())
        .collect();
    assert_eq!(spaces.len(), 25, "Unicode White_Space");
    let after = [
        "", "a", "A", "ǅ", "ʰ", "中", "\u{301}", "1", "'s", ".", "/", "\0", "🦀",
    ];
    for a in &spaces {
        for b in &spaces {
            for rest in after {
                for text in [format!("{a}{b}{rest}"), format!("x{a}{a}{b}{rest}")] {
                    agrees(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
                }
            }
        }
    }
}
