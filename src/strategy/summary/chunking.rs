//! Splitting a transcript too long for one model call into chunks on line boundaries.

use super::*;

/// Splits a transcript into pieces of at most `room` tokens, on line boundaries (a single line
/// over `room` is clipped).
pub(super) fn chunk(transcript: &str, room: usize, counter: &dyn TokenCounter) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut used = 0;
    for line in transcript.lines() {
        let mut line = line.to_string();
        let mut cost = counter.count_text(&line) + 1;
        while cost > room {
            let chars = line.chars().count() / 2;
            line = clip(&line, chars.max(1));
            cost = counter.count_text(&line) + 1;
        }
        if used + cost > room && !current.is_empty() {
            out.push(std::mem::take(&mut current));
            used = 0;
        }
        current.push_str(&line);
        current.push('\n');
        used += cost;
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}
