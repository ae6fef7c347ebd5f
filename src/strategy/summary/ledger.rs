//! The code-made ledger beside the model's text: files, commands and their outcomes, failures
//! by id; merged with an earlier summary's ledger; and the summary message that holds both.

use super::*;

/// Splits a summary message into (the model's part, the ledger lines).
///
/// The split is structural: the ledger is what follows the *last* [`LEDGER_HEADER`] line,
/// which [`summary_message`] writes after the model's text, and the model's text can never hold
/// that header ([`neutralize_ledger_header`]). A model that writes the header itself gets no
/// line into the ledger.
pub(super) fn split_summary(text: &str) -> (&str, Vec<&str>) {
    let body = text.split_once("\n\n").map_or("", |(_, rest)| rest);
    let header_line = format!("\n{LEDGER_HEADER}\n");
    let at = body
        .rfind(&header_line)
        .map(|p| (p, p + header_line.len()))
        .or_else(|| {
            body.starts_with(header_line.trim_start_matches('\n'))
                .then_some((0, header_line.len() - 1))
        });
    match at {
        Some((end, start)) => (
            body.get(..end).unwrap_or("").trim(),
            body.get(start..)
                .unwrap_or("")
                .lines()
                .filter(|l| l.starts_with("- "))
                .collect(),
        ),
        None => (body.trim(), Vec::new()),
    }
}

/// The words of [`LEDGER_HEADER`] that the model's text may not hold (any case).
pub(super) const LEDGER_MARK: &str = "made by code";
/// What [`LEDGER_MARK`] becomes in the model's text.
pub(super) const LEDGER_MARK_NEUTRAL: &str = "made by the summarizing model";

/// The model's text with every `made by code` (ASCII case-insensitive) turned into
/// `made by the summarizing model`, so that it can never produce [`LEDGER_HEADER`] and no line
/// of it reads as code-made; with the number of replacements. Byte search on ASCII words: every
/// cut is on a char boundary.
pub fn neutralize_ledger_header(text: &str) -> (String, usize) {
    let lower = text.as_bytes().to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    let mut n = 0;
    for p in memchr::memmem::find_iter(&lower, LEDGER_MARK.as_bytes()) {
        if p < from {
            continue;
        }
        out.push_str(text.get(from..p).unwrap_or(""));
        out.push_str(LEDGER_MARK_NEUTRAL);
        from = p + LEDGER_MARK.len();
        n += 1;
    }
    out.push_str(text.get(from..).unwrap_or(""));
    (out, n)
}

/// Keys of a tool input that name a file.
pub(super) const PATH_KEYS: &[&str] = &["file_path", "path", "notebook_path", "filename"];
/// Words in a tool name that mean it changes files.
pub(super) const WRITE_WORDS: &[&str] = &[
    "write", "edit", "patch", "create", "replace", "insert", "delete", "move", "rename",
];
/// Headers of an apply_patch envelope that name a changed file.
pub(super) const PATCH_HEADERS: &[&str] = &[
    "*** Add File: ",
    "*** Update File: ",
    "*** Delete File: ",
    "*** Move to: ",
];

/// The code-made ledger of `messages`, one fact a line (`- read: …`, `- wrote: …`,
/// `- ran: …`, `- failed: …`, `- cancelled: …`), in order of first appearance. A call whose
/// result failed is listed as failed (with its id and the word error), never as a read or write.
pub fn ledger(messages: &[Message], has_error_flag: bool) -> Vec<String> {
    let tools: HashMap<&str, &str> = messages
        .iter()
        .flat_map(Message::tool_uses)
        .map(|t| (t.id.as_str(), t.name.as_str()))
        .collect();
    let results: HashMap<&str, (&Message, &crate::conversation::ToolResult)> = messages
        .iter()
        .flat_map(|m| {
            m.tool_results()
                .map(move |r| (r.tool_use_id.as_str(), (m, r)))
        })
        .collect();
    let mut lines: Vec<String> = Vec::new();
    let mut push = |l: String| {
        if !lines.contains(&l) {
            lines.push(l);
        }
    };
    for call in messages.iter().flat_map(Message::tool_uses) {
        let result = results.get(call.id.as_str());
        let outcome = result.map(|(_, r)| r.outcome(has_error_flag));
        let input = call.input.to_value();
        if outcome != Some(Outcome::Error) {
            let writes = is_write(&call.name);
            for p in paths(&input) {
                push(format!("- {}: {p}", if writes { "wrote" } else { "read" }));
            }
            for p in patch_paths(call) {
                push(format!("- wrote: {p}"));
            }
        }
        if command_of(&input).is_some() {
            let status = outcome.map_or("no result", Outcome::as_str);
            push(format!(
                "- ran: {} {} -> {status}",
                call.id,
                call_summary(call, 120)
            ));
        }
        let call_line = digest_line(Role::Assistant, &Block::ToolUse(call.clone()), &tools, true)
            .unwrap_or_default();
        match result {
            Some((m, r)) if outcome == Some(Outcome::Error) => {
                let text = r.text().to_lowercase();
                let cancelled = ["interrupt", "cancel", "abort"]
                    .iter()
                    .any(|w| text.contains(w));
                let result_line = digest_line(
                    m.role,
                    &Block::ToolResult((*r).clone()),
                    &tools,
                    has_error_flag,
                )
                .unwrap_or_default();
                let label = if cancelled {
                    "cancelled (failed)"
                } else {
                    "failed"
                };
                push(format!("- {label}: {call_line} -> {result_line}"));
            }
            None => push(format!(
                "- cancelled: {call_line} -> no result (counts as failed, not as done)"
            )),
            _ => {}
        }
    }
    lines
}

pub(super) fn is_write(tool: &str) -> bool {
    let t = tool.to_lowercase();
    WRITE_WORDS.iter().any(|w| t.contains(w))
}

pub(super) fn paths(input: &Value) -> Vec<String> {
    let Value::Object(obj) = input else {
        return Vec::new();
    };
    PATH_KEYS
        .iter()
        .filter_map(|k| obj.get(*k).and_then(Value::as_str))
        .filter(|p| !p.is_empty())
        .map(|p| clip(&one_line(p), 200))
        .collect()
}

pub(super) fn patch_paths(call: &ToolUse) -> Vec<String> {
    let mut strings = Vec::new();
    match &call.input {
        ToolInput::Freeform(s) => strings.push(s.clone()),
        other => collect_strings(&other.to_value(), &mut strings),
    }
    let mut out = Vec::new();
    for s in &strings {
        for line in s.lines() {
            for h in PATCH_HEADERS {
                if let Some(p) = line.trim_start().strip_prefix(h) {
                    let p = clip(p.trim(), 200);
                    if !p.is_empty() && !out.contains(&p) {
                        out.push(p);
                    }
                }
            }
        }
    }
    out
}

pub(super) fn collect_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|x| collect_strings(x, out)),
        Value::Object(obj) => obj.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}

pub(super) fn command_of(input: &Value) -> Option<&Value> {
    input.get("command").or_else(|| input.get("cmd"))
}

/// Merges earlier ledger lines with new ones (no duplicates), keeping every failure and at most
/// [`MAX_COMMAND_LINES`] command lines of known success or unknown outcome (the newest). What
/// is left out is counted by outcome, with the counts an earlier ledger already carried: a
/// command of unknown outcome is never counted as successful.
pub(super) fn merge_ledgers(earlier: &[&str], new: Vec<String>) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    let mut omitted = Omitted::default();
    for l in earlier.iter().map(|l| l.to_string()).chain(new) {
        if let Some(o) = Omitted::parse(&l) {
            omitted.success += o.success;
            omitted.unknown += o.unknown;
        } else if !all.contains(&l) {
            all.push(l);
        }
    }
    let commands = all.iter().filter(|l| plain_command(l).is_some()).count();
    let mut skip = commands.saturating_sub(MAX_COMMAND_LINES);
    all.retain(|l| match plain_command(l) {
        Some(outcome) if skip > 0 => {
            skip -= 1;
            match outcome {
                Outcome::Success => omitted.success += 1,
                _ => omitted.unknown += 1,
            }
            false
        }
        _ => true,
    });
    all.extend(omitted.lines());
    all
}

/// Command lines a ledger left out, by outcome.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Omitted {
    success: usize,
    unknown: usize,
}

pub(super) const OMITTED_SUCCESS: (&str, &str) = ("- (", " older successful commands not listed)");
pub(super) const OMITTED_UNKNOWN: (&str, &str) =
    ("- (", " older commands of unknown outcome not listed)");

impl Omitted {
    fn lines(self) -> Vec<String> {
        let mut out = Vec::new();
        for (n, (open, close)) in [
            (self.success, OMITTED_SUCCESS),
            (self.unknown, OMITTED_UNKNOWN),
        ] {
            if n > 0 {
                out.push(format!("{open}{n}{close}"));
            }
        }
        out
    }

    /// The counts of one of our own "not listed" lines.
    fn parse(l: &str) -> Option<Omitted> {
        let count = |(open, close): (&str, &str)| {
            l.strip_prefix(open)?
                .strip_suffix(close)?
                .parse::<usize>()
                .ok()
        };
        if let Some(n) = count(OMITTED_SUCCESS) {
            return Some(Omitted {
                success: n,
                unknown: 0,
            });
        }
        count(OMITTED_UNKNOWN).map(|n| Omitted {
            success: 0,
            unknown: n,
        })
    }
}

/// The outcome of a `- ran:` line that may be left out of a long ledger: a known success or
/// an unknown outcome (failures and calls without result are always kept).
pub(super) fn plain_command(l: &str) -> Option<Outcome> {
    if !l.starts_with("- ran: ") {
        return None;
    }
    [Outcome::Success, Outcome::Unknown]
        .into_iter()
        .find(|o| l.ends_with(&format!("-> {}", o.as_str())))
}

/// The summary message: the prefix naming what it replaces, the model's text (with any
/// imitation of the ledger header neutralized, [`neutralize_ledger_header`]), then the ledger
/// under [`LEDGER_HEADER`].
pub fn summary_message(
    from: usize,
    to: usize,
    tokens: usize,
    model_text: &str,
    ledger: &[String],
) -> Message {
    let mut s = format!(
        "{SUMMARY_PREFIX}{from}–{} ({} messages, {tokens} tokens), written by a model and replacing them] This is background on the earlier conversation for the turns that follow, not a new request.\n\n{}\n",
        to.saturating_sub(1),
        to - from,
        neutralize_ledger_header(model_text.trim()).0
    );
    if !ledger.is_empty() {
        s.push('\n');
        s.push_str(LEDGER_HEADER);
        s.push('\n');
        for l in ledger {
            s.push_str(l);
            s.push('\n');
        }
    }
    Message::text(Role::User, s)
}
