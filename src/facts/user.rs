//! What a person wrote, told apart from what the harness put in a user message, and the
//! sentences of it that constrain the work.
//!
//! Harness text recognised (and left out): `<system-reminder>`, `<task-notification>`,
//! `<local-command-stdout>` / `-stderr>` / `-caveat>`, `<user-prompt-submit-hook>` (Claude Code),
//! `<environment_context>`, `<user_instructions>` (Codex). A slash command
//! (`<command-name>/review</command-name>…<command-args>src/</command-args>`) counts as the
//! person's words `/review src/`. Any other text starting with `<` (mini-swe-agent's
//! `<pr_description>` task) is the person's.

/// Tags whose whole element the harness writes.
const HARNESS_TAGS: &[&str] = &[
    "system-reminder",
    "task-notification",
    "local-command-stdout",
    "local-command-stderr",
    "local-command-caveat",
    "user-prompt-submit-hook",
    "environment_context",
    "user_instructions",
    "command-message",
    "command-contents",
];

/// First words of lines the harness appends to one of its elements (Claude Code follows a
/// `<task-notification>` with where to read the background task's output).
const HARNESS_LINE_PREFIXES: &[&str] = &["Read the output file to retrieve the result:"];

/// Words that make a sentence an instruction or constraint (whole words, case-insensitive).
pub const INSTRUCTION_WORDS: &[&str] = &[
    "must",
    "never",
    "always",
    "don't",
    "do not",
    "only",
    "make sure",
    "ensure",
    "should not",
    "shouldn't",
    "avoid",
    "required",
    "hard rule",
];

/// The first words of the summary message Claude Code writes after an auto-compaction (the
/// entry marked `isCompactSummary: true` in its session log).
pub const CLAUDE_CODE_SUMMARY_PREFIX: &str =
    "This session is being continued from a previous conversation";

/// The first words of the summary message Codex puts in a compacted history (its
/// `SUMMARY_PREFIX` template).
pub const CODEX_SUMMARY_PREFIX: &str = "Another language model started to solve this problem";

/// The element `<tag>…</tag>` in `s` from byte `from` on: (start, end) byte offsets of the
/// whole element, end past the closing tag (or the end of `s` when it is not closed).
fn element(s: &str, tag: &str, from: usize) -> Option<(usize, usize)> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = from + s.get(from..)?.find(&open)?;
    let inner = start + open.len();
    let end = s
        .get(inner..)
        .and_then(|rest| rest.find(&close))
        .map_or(s.len(), |i| inner + i + close.len());
    Some((start, end))
}

/// The text inside `<tag>…</tag>`, when `s` has that element.
fn inner<'a>(s: &'a str, tag: &str) -> Option<&'a str> {
    let (start, end) = element(s, tag, 0)?;
    let open = tag.len() + 2;
    let close = if s.get(..end)?.ends_with('>') && end - start >= open + tag.len() + 3 {
        tag.len() + 3
    } else {
        0
    };
    s.get(start + open..end - close)
}

/// The person's words in one user text block, or `None` when the block holds only harness text
/// (or an earlier summary, see [`summary_kind`]).
pub fn person_text(text: &str) -> Option<String> {
    let t = text.trim();
    if summary_kind(t).is_some() {
        return None;
    }
    if let Some(name) = inner(t, "command-name") {
        let args = inner(t, "command-args").unwrap_or("").trim();
        let s = format!("{} {args}", name.trim());
        return Some(s.trim().to_string());
    }
    let mut s = t.to_string();
    for tag in HARNESS_TAGS {
        while let Some((a, b)) = element(&s, tag, 0) {
            s.replace_range(a..b, "");
        }
    }
    let kept: Vec<&str> = s
        .lines()
        .filter(|l| {
            !HARNESS_LINE_PREFIXES
                .iter()
                .any(|p| l.trim_start().starts_with(p))
        })
        .collect();
    let s = kept.join("\n");
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// Who wrote an earlier summary carried in a user message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryKind {
    /// compactor's own marker ([`super::MARKER_PREFIX`]).
    Compactor,
    /// Claude Code's auto-compaction summary ([`CLAUDE_CODE_SUMMARY_PREFIX`]).
    ClaudeCode,
    /// Codex's compaction summary ([`CODEX_SUMMARY_PREFIX`]).
    Codex,
}

/// The first words of the summary strategy's message (the same text as
/// `strategy::summary::SUMMARY_PREFIX`; a test keeps them equal).
pub const COMPACTOR_SUMMARY_PREFIX: &str = "[compactor summary of messages ";

/// The kind of earlier summary `text` is, by its fixed first words.
pub fn summary_kind(text: &str) -> Option<SummaryKind> {
    let t = text.trim_start();
    if t.starts_with(super::MARKER_PREFIX) || t.starts_with(COMPACTOR_SUMMARY_PREFIX) {
        Some(SummaryKind::Compactor)
    } else if t.starts_with(CLAUDE_CODE_SUMMARY_PREFIX) {
        Some(SummaryKind::ClaudeCode)
    } else if t.starts_with(CODEX_SUMMARY_PREFIX) {
        Some(SummaryKind::Codex)
    } else {
        None
    }
}

/// Splits text into sentences: at line breaks and after `.`, `!`, `?`, `:` followed by a space.
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let bytes = line.as_bytes();
        for (i, ch) in line.char_indices() {
            if matches!(ch, '.' | '!' | '?') && bytes.get(i + 1) == Some(&b' ') {
                out.extend(line.get(start..=i).map(str::trim));
                start = i + 1;
            }
        }
        out.extend(line.get(start..).map(str::trim));
    }
    out.retain(|s| !s.is_empty());
    out
}

/// True when `phrase` occurs in `lower` as whole words.
pub fn has_phrase(lower: &str, phrase: &str) -> bool {
    let word_char = |c: char| c.is_alphanumeric() || c == '_';
    lower.match_indices(phrase).any(|(i, _)| {
        let before = lower.get(..i).and_then(|h| h.chars().next_back());
        let after = lower.get(i + phrase.len()..).and_then(|t| t.chars().next());
        !before.is_some_and(word_char) && !after.is_some_and(word_char)
    })
}

/// True when a sentence holds one of the [`INSTRUCTION_WORDS`].
pub fn is_constraint(sentence: &str) -> bool {
    let lower = sentence.to_lowercase().replace('’', "'");
    INSTRUCTION_WORDS.iter().any(|w| has_phrase(&lower, w))
}

/// A long text shortened around its constraints: the first sentence (what is asked), every
/// constraint sentence ([`is_constraint`]) and the last sentence, verbatim, in their order,
/// joined by ` … `. Returns the text unchanged when it has three sentences or fewer.
pub fn around_constraints(text: &str) -> String {
    let all = sentences(text);
    if all.len() <= 3 {
        return text.to_string();
    }
    let last = all.len() - 1;
    let kept: Vec<&str> = all
        .iter()
        .enumerate()
        .filter(|(i, s)| *i == 0 || *i == last || is_constraint(s))
        .map(|(_, s)| *s)
        .collect();
    kept.join(" … ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn harness_elements_are_not_the_persons_words() {
        assert_eq!(
            person_text("<system-reminder>be brief</system-reminder>\nFix the bug."),
            Some("Fix the bug.".to_string())
        );
        assert_eq!(
            person_text("<task-notification>\n<task-id>b7</task-id>\n</task-notification>"),
            None
        );
        assert_eq!(
            person_text(
                "<task-notification>\n<status>completed</status>\n</task-notification>\nRead the output file to retrieve the result: /tmp/t/b7.output"
            ),
            None
        );
        assert_eq!(
            person_text("<pr_description>Astroid crashes</pr_description>"),
            Some("<pr_description>Astroid crashes</pr_description>".to_string())
        );
    }

    #[test]
    fn a_slash_command_keeps_its_arguments() {
        assert_eq!(
            person_text(
                "<command-message>review</command-message>\n<command-name>/review</command-name>\n<command-args>src/auth.rs only</command-args>"
            ),
            Some("/review src/auth.rs only".to_string())
        );
    }

    #[test]
    fn summaries_are_told_by_their_first_words() {
        assert_eq!(
            summary_kind(
                "This session is being continued from a previous conversation that ran out of context."
            ),
            Some(SummaryKind::ClaudeCode)
        );
        assert_eq!(
            person_text("This session is being continued from a previous conversation x"),
            None
        );
        assert_eq!(summary_kind("continue"), None);
        assert_eq!(
            COMPACTOR_SUMMARY_PREFIX,
            crate::strategy::summary::SUMMARY_PREFIX
        );
    }

    #[test]
    fn a_long_request_keeps_its_constraint_sentences() {
        let text = "Migrate billing. Read models.py first. Then write a plan. Keep commits small. \
                    Hard rule: never edit migrations/legacy/. Report at the end.";
        assert_eq!(
            around_constraints(text),
            "Migrate billing. … Hard rule: never edit migrations/legacy/. … Report at the end."
        );
        assert_eq!(around_constraints("One. Two."), "One. Two.");
    }
}
