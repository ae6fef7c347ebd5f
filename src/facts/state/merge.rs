//! An earlier marker read back into a state: its requests (with their `(shortened)` tags),
//! summaries, files, failures, commands, left-out runs and the rest, so a later pass carries
//! them forward. The first digest format (`[result ID TOOL (error): text]`) is read too.

use super::words::left_out_of;
use super::{Request, SHORTENED_TAG, SessionState};
use crate::facts::{FileAction, SummaryKind};

impl SessionState {
    /// Merges an earlier marker's lines into this state; false when `text` holds no line of a
    /// state (a summary-strategy message), which is then carried whole instead.
    pub(super) fn merge_marker(&mut self, text: &str) -> bool {
        let mut merged = false;
        let mut lines = text.lines().skip(1).peekable();
        while let Some(line) = lines.next() {
            let mut item = line.to_string();
            while let Some(more) = lines.peek().filter(|l| l.starts_with("  ")) {
                item.push('\n');
                item.push_str(more);
                lines.next();
            }
            let Some(rest) = item.strip_prefix('[') else {
                continue;
            };
            let Some((mut tag, mut body)) = rest.split_once(']') else {
                continue;
            };
            // The first digest wrote whole lines in brackets: `[result ID TOOL (error): text]`.
            if body.trim().is_empty()
                && let Some((t, b)) = rest
                    .trim_end()
                    .strip_suffix(']')
                    .and_then(|r| r.split_once(": "))
            {
                (tag, body) = (t, b);
            }
            let body = body.trim_start();
            merged = true;
            let number_of = |b: &str| -> Option<(usize, String)> {
                let (n, t) = b.strip_prefix('#')?.split_once(": ")?;
                Some((n.parse().ok()?, t.to_string()))
            };
            match tag {
                "user" => {
                    // `#N (shortened): …` was shortened by an earlier pass.
                    let (shortened, body) = match body.split_once(SHORTENED_TAG) {
                        Some((n, t)) if n.starts_with('#') && !n.contains(' ') => {
                            (true, format!("{n}{t}"))
                        }
                        _ => (false, body.to_string()),
                    };
                    let (number, text) =
                        number_of(&body).unwrap_or_else(|| (self.requests.len() + 1, body.clone()));
                    let text = text.replace("\n  ", "\n");
                    self.requests.push(Request {
                        number,
                        text,
                        then: None,
                        settled: false,
                        shortened,
                    });
                }
                "then" => {
                    if let Some((n, t)) = number_of(body)
                        && let Some(r) = self.requests.iter_mut().find(|r| r.number == n)
                    {
                        r.then = Some(t);
                    }
                }
                t if t.starts_with("summary") => {
                    let kind = match t {
                        "summary Claude Code" => SummaryKind::ClaudeCode,
                        "summary Codex" => SummaryKind::Codex,
                        _ => SummaryKind::Compactor,
                    };
                    self.summaries.push((kind, body.replace("\n  ", "\n")));
                }
                "created" | "edited" | "deleted" | "read" | "searched" => {
                    let action = match tag {
                        "created" => FileAction::Created,
                        "edited" => FileAction::Edited,
                        "deleted" => FileAction::Deleted,
                        "read" => FileAction::Read,
                        _ => FileAction::Searched,
                    };
                    for p in body.split(", ").filter(|p| !p.is_empty()) {
                        self.touch(p.to_string(), action);
                    }
                }
                t if let Some(id) = t.strip_prefix("failed ") => {
                    self.failures.push((id.to_string(), body.to_string()));
                }
                t if t.starts_with("ran ") => self.commands.push(item.clone()),
                t if t.starts_with('…')
                    && let Some(run) = left_out_of(t, body) =>
                {
                    self.carried_left_out = Some(match self.carried_left_out {
                        Some(c) => c.joined(run),
                        None => run,
                    });
                }
                t if t.starts_with('…') => {
                    let n = t.trim_start_matches('…').split_whitespace().next();
                    self.carried_omitted += n.and_then(|n| n.parse().ok()).unwrap_or(0);
                }
                // The first digest's lines: `[result ID TOOL (error): …]` is a failure.
                t if (t.starts_with("result ") || t.starts_with("call "))
                    && t.contains("(error)") =>
                {
                    let id = t.split_whitespace().nth(1).unwrap_or("").to_string();
                    let what = t.split_whitespace().skip(2).collect::<Vec<_>>().join(" ");
                    let what = what.replace("(error)", "").replace(':', "");
                    let line = format!(
                        "{} error: {}",
                        what.trim(),
                        body.trim_start_matches(['…', ' '])
                    );
                    self.failures.push((id, line));
                }
                _ => self.rest.push(item.clone()),
            }
        }
        merged
    }
}
