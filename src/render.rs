//! One-line renderings of messages and blocks, for humans and snapshots.
//!
//! The same renderer serves `compactor show`, test snapshots and the rule-made digests of the
//! strategies, so a line like `[call Bash(cargo test)]` means the same everywhere.

use crate::conversation::{Block, Conversation, Message, Outcome, ToolResultContent, ToolUse};
use serde_json::Value;

/// Keys whose value best names what a call does, in order of preference.
const SALIENT_KEYS: &[&str] = &[
    "file_path",
    "path",
    "command",
    "cmd",
    "pattern",
    "url",
    "query",
    "notebook_path",
    "description",
    "prompt",
];

/// `Name(argument)`: the tool name and its most telling argument, cut to `max_chars` characters.
/// `Bash(cargo test)`, `Read(src/a.rs)`, `shell(rg "TeamSheet")`.
pub fn call_summary(t: &ToolUse, max_chars: usize) -> String {
    let input = t.input.to_value();
    let arg = match &input {
        Value::Object(obj) => SALIENT_KEYS
            .iter()
            .find_map(|k| obj.get(*k))
            .or_else(|| obj.values().find(|v| v.is_string()))
            .map(value_text)
            .unwrap_or_default(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    format!("{}({})", t.name, one_line_clipped(&arg, max_chars))
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            // Codex shell commands: ["bash", "-lc", "rg foo"] -> the script.
            let strs: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            match strs.as_slice() {
                [_, flag, script] if flag.starts_with('-') => (*script).to_string(),
                _ => strs.join(" "),
            }
        }
        other => other.to_string(),
    }
}

/// Collapses whitespace runs (newlines included) into single spaces.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `clip(&one_line(s), max_chars)`, collapsing no more of `s` than the clip keeps (a digest
/// line of a 1 MB tool result reads its first words only), in one pass and one allocation.
/// A short ASCII line that is already one line (the usual command) is copied as it is.
pub fn one_line_clipped(s: &str, max_chars: usize) -> String {
    let b = s.as_bytes();
    if b.len() <= max_chars
        && b.first() != Some(&b' ')
        && b.last() != Some(&b' ')
        && b.windows(2).all(|w| w != b"  ")
        // ASCII without the control whitespace `char::is_whitespace` knows (tab to CR).
        && b.iter().all(|&c| c.is_ascii() && !(0x09..=0x0d).contains(&c))
    {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len().min(max_chars.saturating_mul(4) + 4));
    let mut chars = 0;
    for word in s.split_whitespace() {
        if !out.is_empty() {
            if chars == max_chars {
                out.push('…');
                return out;
            }
            out.push(' ');
            chars += 1;
        }
        let room = max_chars - chars;
        match word.char_indices().nth(room) {
            Some((cut, _)) => {
                let cut = grapheme_floor(word, cut);
                out.push_str(word.get(..cut).unwrap_or(word));
                out.push('…');
                return out;
            }
            None => {
                out.push_str(word);
                chars += word.chars().count();
            }
        }
    }
    out
}

/// The last `max_chars` characters of `one_line(s)`, or `None` when it is no longer than that.
/// Collapses only the end of `s`.
pub fn one_line_tail(s: &str, max_chars: usize) -> Option<String> {
    let mut words = Vec::new();
    let mut chars = 0;
    for word in s.split_whitespace().rev() {
        if !words.is_empty() {
            chars += 1;
        }
        chars += word.chars().count();
        words.push(word);
        if chars > max_chars {
            break;
        }
    }
    if chars <= max_chars {
        return None;
    }
    words.reverse();
    let joined = words.join(" ");
    let skip = joined.chars().count() - max_chars;
    Some(joined.chars().skip(skip).collect())
}

/// Cuts `s` to at most `max_chars` characters, ending with `…` when cut. Character-safe.
pub fn clip(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        None => s.to_string(),
        Some((pos, _)) => {
            let pos = grapheme_floor(s, pos);
            format!("{}…", s.get(..pos).unwrap_or(s))
        }
    }
}

/// `at` moved back to the nearest grapheme cluster boundary (Unicode UAX #29, extended
/// clusters, by `unicode-segmentation`), so text cut there keeps an emoji ZWJ sequence, a flag
/// or a letter with its combining marks whole or leaves it out whole. `at` past the end is
/// the end; a position inside a UTF-8 sequence moves back too.
pub fn grapheme_floor(text: &str, at: usize) -> usize {
    // The cursor takes char boundaries only (it panics inside a UTF-8 sequence).
    let at = text.floor_char_boundary(at);
    let mut cursor = unicode_segmentation::GraphemeCursor::new(at, text.len(), true);
    // The whole text is the one chunk given, so the cursor never asks for more context.
    match cursor.is_boundary(text, 0) {
        Ok(true) => at,
        _ => cursor.prev_boundary(text, 0).ok().flatten().unwrap_or(0),
    }
}

/// `at` moved forward to the nearest grapheme cluster boundary (see [`grapheme_floor`]).
pub fn grapheme_ceil(text: &str, at: usize) -> usize {
    let at = text.ceil_char_boundary(at);
    let mut cursor = unicode_segmentation::GraphemeCursor::new(at, text.len(), true);
    match cursor.is_boundary(text, 0) {
        Ok(true) => at,
        _ => cursor
            .next_boundary(text, 0)
            .ok()
            .flatten()
            .unwrap_or(text.len()),
    }
}

/// A short description of one block: `text "Hello…"`, `tool_use Read(src/a.rs)`,
/// `tool_result toolu_01 FAILED 1234 chars`, `thinking`, `image`. A tool result is marked by
/// its [`Outcome`] (the format's own signal, read once): `FAILED`, `(outcome unknown)` where
/// the wire does not say (an OpenAI tool message without an exit code), nothing for success.
pub fn block_summary(b: &Block) -> String {
    match b {
        Block::Text(t) => format!("text {:?}", one_line_clipped(&t.text, 40)),
        Block::ToolUse(t) => format!("tool_use {}", call_summary(t, 40)),
        Block::ToolResult(r) => {
            let err = match r.outcome {
                Outcome::Error => " FAILED",
                Outcome::Unknown => " (outcome unknown)",
                _ => "",
            };
            let images = match &r.content {
                Some(ToolResultContent::Blocks(bs)) => {
                    bs.iter().filter(|b| matches!(b, Block::Image(_))).count()
                }
                _ => 0,
            };
            let img = if images > 0 {
                format!(" +{images} image")
            } else {
                String::new()
            };
            format!(
                "tool_result {}{err} {} chars{img}",
                r.tool_use_id,
                r.text().chars().count()
            )
        }
        other => other.kind().to_string(),
    }
}

/// One line for a message: `12 assistant tool_use Read(src/a.rs) · tool_use Grep(TODO)`.
pub fn message_line(index: usize, m: &Message) -> String {
    let blocks: Vec<String> = m.content.iter().map(block_summary).collect();
    let body = if blocks.is_empty() {
        "(empty)".to_string()
    } else {
        blocks.join(" · ")
    };
    format!("{index:>3} {} {body}", m.role)
}

/// The whole conversation, one line per message.
pub fn conversation_lines(c: &Conversation) -> String {
    let mut out = String::new();
    if let Some(s) = &c.system {
        let text = crate::format::system_text(s);
        out.push_str(&format!("  - system {:?}\n", clip(&one_line(&text), 60)));
    }
    for (i, m) in c.messages.iter().enumerate() {
        out.push_str(&message_line(i, m));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn clips_and_grapheme_bounds_keep_clusters_whole() {
        let family = "👩\u{200d}👩\u{200d}👧";
        let text = format!("ab{family}cd");
        // Inside the family (after its first woman): back to before it, or on past it.
        let inside = 2 + "👩\u{200d}".len();
        assert_eq!(grapheme_floor(&text, inside), 2);
        assert_eq!(grapheme_ceil(&text, inside), 2 + family.len());
        // Inside a UTF-8 sequence, and past the end.
        assert_eq!(grapheme_floor(&text, 3), 2);
        assert_eq!(grapheme_ceil(&text, 1_000), text.len());
        assert_eq!(grapheme_floor(&text, 2), 2);
        // A clip at 3 chars would end after the first woman: the family goes whole.
        assert_eq!(clip(&text, 3), "ab…");
        assert_eq!(clip("e\u{301}\u{302}x", 2), "…");
    }

    proptest! {
        /// The shortcuts give what collapsing the whole text first gives.
        #[test]
        fn clipped_and_tail_agree_with_collapsing_everything(
            s in "[a-cé \n\t\r\u{0b}\u{0c}\u{1f}\u{a0}\u{3000}]{0,120}",
            max in 0usize..130,
        ) {
            let whole = one_line(&s);
            prop_assert_eq!(one_line_clipped(&s, max), clip(&whole, max));
            let n = whole.chars().count();
            let tail = (n > max).then(|| whole.chars().skip(n - max).collect::<String>());
            prop_assert_eq!(one_line_tail(&s, max), tail);
        }

        /// Plain ASCII lines (the shortcut's case: spaces at the ends, doubled, or none).
        #[test]
        fn clipped_ascii_lines_agree_with_collapsing_everything(
            s in "[a-c ]{0,40}",
            max in 0usize..50,
        ) {
            prop_assert_eq!(one_line_clipped(&s, max), clip(&one_line(&s), max));
        }
    }
}
