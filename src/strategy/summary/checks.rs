//! Checks on the model's text: call ids the history does not hold are marked, looping text is
//! refused.

use super::*;

/// The mark put after a call id that a summary names but the history does not hold.
pub const UNKNOWN_ID_MARK: &str = "(id not in the history)";

/// `text` with [`UNKNOWN_ID_MARK`] after every call id that is neither a tool_use / tool_result
/// id of `conversation` nor written in `earlier` (an earlier summary), and the number of such
/// distinct ids. A call id: `toolu_`, `call_` or `fc_` (Anthropic, OpenAI Chat, OpenAI Responses)
/// at the start of a word, then 12 or more ASCII letters, digits and underscores with two
/// digits or both letter cases (`toolu_01AbC…`, `toolu_vrtx_01…`, DeepSeek's `call_00_AbC…`);
/// snake_case names (`call_count_total`) are code, not ids.
pub(super) fn mark_unknown_ids(
    text: &str,
    conversation: &Conversation,
    earlier: &str,
) -> (String, usize) {
    let known: HashSet<&str> = conversation
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            Block::ToolUse(t) => Some(t.id.as_str()),
            Block::ToolResult(r) => Some(r.tool_use_id.as_str()),
            _ => None,
        })
        .collect();
    let mut out = String::with_capacity(text.len());
    let mut marked = HashSet::new();
    let mut rest = text;
    while let Some((start, len)) = next_call_id(rest) {
        let end = start + len;
        let id = rest.get(start..end).unwrap_or("");
        out.push_str(rest.get(..end).unwrap_or(""));
        if !known.contains(id) && !earlier.contains(id) {
            out.push(' ');
            out.push_str(UNKNOWN_ID_MARK);
            marked.insert(id);
        }
        rest = rest.get(end..).unwrap_or("");
    }
    out.push_str(rest);
    (out, marked.len())
}

/// The first call id in `text` (see [`mark_unknown_ids`]): its byte offset and length.
pub(super) fn next_call_id(text: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    while from < text.len() {
        let found = ["toolu_", "call_", "fc_"]
            .iter()
            .filter_map(|p| text.get(from..)?.find(p).map(|i| (from + i, p.len())))
            .min()?;
        let (start, prefix) = found;
        let tail = text.get(start + prefix..).unwrap_or("");
        let n = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let word_start = start == 0
            || !text
                .get(..start)
                .unwrap_or("")
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        let body = &tail.as_bytes()[..n];
        let digits = body.iter().filter(|b| b.is_ascii_digit()).count();
        let mixed_case =
            body.iter().any(u8::is_ascii_uppercase) && body.iter().any(u8::is_ascii_lowercase);
        if word_start && n >= 12 && (digits >= 2 || mixed_case) {
            return Some((start, prefix + n));
        }
        from = start + prefix;
    }
    None
}

/// Why a model's text is degenerate, or `None`: the same lines or phrases over and over, the loop
/// small or quantized models fall into (seen with SmolLM2-135M on a corpus session, at
/// temperature 0 and still with a frequency penalty). Compared case-insensitively. Lines: at
/// least 8 non-empty ones and over half of them repeats of an earlier one. Phrases: at least 80
/// words and under 40% of the four-word sequences distinct (ordinary prose has nearly all of
/// them distinct).
pub(super) fn degenerate(text: &str) -> Option<String> {
    let lower = text.to_lowercase();
    let lines: Vec<&str> = lower
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.len() >= 8 {
        let distinct = lines.iter().collect::<HashSet<_>>().len();
        if distinct * 2 < lines.len() {
            return Some(format!(
                "{} of its {} lines repeat an earlier one",
                lines.len() - distinct,
                lines.len()
            ));
        }
    }
    let words: Vec<&str> = lower.split_whitespace().collect();
    if words.len() >= 80 {
        let phrases: Vec<&[&str]> = words.windows(4).collect();
        let distinct = phrases.iter().collect::<HashSet<_>>().len();
        if distinct * 5 < phrases.len() * 2 {
            return Some(format!(
                "only {distinct} of its {} four-word phrases are distinct",
                phrases.len()
            ));
        }
    }
    None
}
