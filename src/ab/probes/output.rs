//! An output read once for every probe: each text as normalized lines with their headings
//! and indents ([`Doc`]), and what the kept blocks say (results and their outcome, the paths
//! the calls name, the files they wrote, the person's own messages) ([`Output`]).

use super::items::{paths, strings_in};
use super::{How, is_write};
use crate::conversation::{Block, Conversation, Message, Outcome, Role};
use crate::facts::{Facts, has_phrase, mentions_path, person_text};
use crate::render::one_line;
use std::collections::{HashMap, HashSet};

/// The words of `s` that are not paths or file names (no `/`, no `.` inside), so that a path
/// (`test/new.rs`) is not its own context.
fn prose(s: &str) -> String {
    s.split_whitespace()
        .filter(|w| {
            let w = w.trim_end_matches(['.', ',', ':', ';', ')', '`', '*', '"', '\'']);
            !w.contains('/') && !w.contains('.')
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Words at the start of a line that may label it as the user's.
const LABEL_WORDS: usize = 4;

/// One text of the output, whitespace collapsed and lowercased, with where each of its
/// (non-blank) lines starts.
pub(super) struct Doc {
    /// The lines joined by one space.
    norm: String,
    /// Byte offset in `norm` of each line.
    starts: Vec<usize>,
    /// The lines.
    pub(super) lines: Vec<String>,
    /// Leading whitespace of each line, in characters.
    indent: Vec<usize>,
}

impl Doc {
    fn of(text: &str) -> Doc {
        let raw: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let lines: Vec<String> = raw.iter().map(|l| one_line(l).to_lowercase()).collect();
        let indent = raw
            .iter()
            .map(|l| l.chars().take_while(|c| c.is_whitespace()).count())
            .collect();
        let mut starts = Vec::with_capacity(lines.len());
        let mut at = 0;
        for l in &lines {
            starts.push(at);
            at += l.len() + 1;
        }
        Doc {
            norm: lines.join(" "),
            starts,
            lines,
            indent,
        }
    }

    /// The line holding byte `p` of `norm`.
    fn line_at(&self, p: usize) -> usize {
        self.starts.partition_point(|&s| s <= p).saturating_sub(1)
    }

    /// The nearest heading above line `i` (a line ending with `:`, or starting with `#`), if any.
    fn heading(&self, i: usize) -> Option<&str> {
        self.lines[..i]
            .iter()
            .rev()
            .find(|l| l.ends_with(':') || l.starts_with('#'))
            .map(String::as_str)
    }

    /// Line `i`, the next line when it is indented under it (a sub-item), and the heading
    /// above, joined: where an action word may be.
    fn context(&self, i: usize) -> String {
        let mut s = self.lines[i].clone();
        if let Some(next) = self.lines.get(i + 1)
            && self.indent.get(i + 1) > self.indent.get(i)
        {
            s.push(' ');
            s.push_str(next);
        }
        if let Some(h) = self.heading(i) {
            s.push(' ');
            s.push_str(h);
        }
        s
    }

    /// True when `needle` (normalized) occurs attributed to the user: `user` among the first
    /// [`LABEL_WORDS`] words of its line and before it (`[user] #1: …`, `- The user asked …`),
    /// or in the heading above it (`All user messages:`).
    fn attributed(&self, needle: &str) -> bool {
        if needle.is_empty() {
            return false;
        }
        self.norm.match_indices(needle).any(|(p, _)| {
            let i = self.line_at(p);
            let before = self.norm.get(self.starts[i]..p).unwrap_or("");
            let label: Vec<&str> = before.split_whitespace().take(LABEL_WORDS).collect();
            has_phrase(&label.join(" "), "user")
                || self.heading(i).is_some_and(|h| has_phrase(h, "user"))
                || self.item_of(i).is_some_and(|j| self.labelled_user(j))
        })
    }

    /// For an indented line (the continuation of a multi-line item, as the session state
    /// writes a long user message), the item's first line: the nearest unindented line above.
    fn item_of(&self, i: usize) -> Option<usize> {
        if self.indent.get(i).is_none_or(|&n| n == 0) {
            return None;
        }
        (0..i).rev().find(|&j| self.indent[j] == 0)
    }

    /// Whether line `j` starts with a label naming the user (`[user] #1: …`).
    fn labelled_user(&self, j: usize) -> bool {
        let label: Vec<&str> = self.lines[j].split_whitespace().take(2).collect();
        has_phrase(&label.join(" "), "user")
    }
}

/// The output, read once for every probe.
pub(super) struct Output<'a> {
    pub(super) docs: Vec<Doc>,
    /// Outcome of every result kept, by call id.
    pub(super) results: HashMap<&'a str, Outcome>,
    /// Paths named by the calls kept.
    pub(super) call_paths: HashSet<String>,
    /// Files the kept calls wrote.
    pub(super) written: HashSet<String>,
    /// The person's words in kept user messages, normalized.
    user_kept: Vec<String>,
    /// Whole text, whitespace collapsed, lowercased.
    pub(super) hay: String,
}

impl<'a> Output<'a> {
    pub(super) fn of(conv: &'a Conversation) -> Output<'a> {
        let docs = texts(conv).into_iter().map(Doc::of).collect();
        let results = conv
            .messages
            .iter()
            .flat_map(Message::tool_results)
            .map(|r| (r.tool_use_id.as_str(), r.outcome()))
            .collect();
        let facts = Facts::of(&conv.messages);
        let written = facts
            .touches
            .iter()
            .filter(|t| is_write(t.action))
            .map(|t| t.path.clone())
            .collect();
        let user_kept = conv
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .flat_map(|m| m.content.iter())
            .filter_map(|b| match b {
                Block::Text(t) => person_text(&t.text).map(|s| one_line(&s).to_lowercase()),
                _ => None,
            })
            .collect();
        Output {
            docs,
            results,
            call_paths: paths(conv).into_iter().collect(),
            written,
            user_kept,
            hay: haystack(conv).to_lowercase(),
        }
    }

    /// Some line naming `path` (by file name and `parents` folders) has one of `words` in its
    /// context ([`Doc::context`]).
    pub(super) fn path_with(&self, path: &str, parents: usize, words: &[&str]) -> bool {
        let path = path.to_lowercase();
        self.docs.iter().any(|d| {
            d.lines.iter().enumerate().any(|(i, l)| {
                mentions_path(l, &path, parents) && {
                    let ctx = prose(&d.context(i));
                    words.iter().any(|w| has_phrase(&ctx, w))
                }
            })
        })
    }

    /// How a user text (message, sentence) is told: one of the person's own messages
    /// (`originals`, normalized) is kept and holds it, or it is found attributed to the user.
    /// A user message of other text (a dump) does not count as kept.
    pub(super) fn user_text(&self, text: &str, originals: &HashSet<String>) -> Option<How> {
        let n = one_line(text).to_lowercase();
        if n.is_empty() {
            return None;
        }
        if self
            .user_kept
            .iter()
            .any(|u| originals.contains(u) && u.contains(&n))
        {
            return Some(How::Kept);
        }
        self.docs
            .iter()
            .any(|d| d.attributed(&n))
            .then_some(How::Line)
    }
}

/// Every text of a conversation a reader (or the model) sees: system prompt strings, text
/// blocks, tool names and input strings, result texts. Thinking is left out.
pub(super) fn texts(c: &Conversation) -> Vec<&str> {
    let mut out = Vec::new();
    if let Some(s) = &c.system {
        strings_in(s, &mut out);
    }
    for m in &c.messages {
        for b in &m.content {
            match b {
                Block::Text(t) => out.push(&t.text),
                Block::ToolUse(t) => {
                    out.push(&t.name);
                    match &t.input {
                        crate::conversation::ToolInput::Json(v) => strings_in(v, &mut out),
                        crate::conversation::ToolInput::Arguments(s)
                        | crate::conversation::ToolInput::Freeform(s) => out.push(s),
                    }
                }
                Block::ToolResult(r) => match &r.content {
                    Some(crate::conversation::ToolResultContent::Text(s)) => out.push(s),
                    Some(crate::conversation::ToolResultContent::Blocks(bs)) => {
                        out.extend(bs.iter().filter_map(|b| match b {
                            Block::Text(t) => Some(t.text.as_str()),
                            _ => None,
                        }))
                    }
                    None => {}
                },
                _ => {}
            }
        }
    }
    out
}

/// All of [`texts`] joined, whitespace runs collapsed. OpenAI `arguments` strings are searched
/// as parsed JSON strings too, so an escaped path (`"a\/b"`, `\n`) is found as written.
fn haystack(c: &Conversation) -> String {
    let mut parts: Vec<String> = texts(c).into_iter().map(str::to_string).collect();
    for t in c.messages.iter().flat_map(Message::tool_uses) {
        if let crate::conversation::ToolInput::Arguments(_) = &t.input {
            let v = t.input.to_value();
            let mut strings = Vec::new();
            strings_in(&v, &mut strings);
            parts.extend(strings.into_iter().map(str::to_string));
        }
    }
    one_line(&parts.join("\n"))
}
