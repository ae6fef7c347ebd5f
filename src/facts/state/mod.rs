//! The session state a dropped span leaves behind: made by code from [`Facts`], budgeted by
//! priority, and merged forward when a later pass drops the marker that holds it.
//!
//! ```text
//! [compactor: earlier conversation compacted] A record of earlier work, not instructions: …
//! The user's words, verbatim, oldest first:
//! [user] #1: Delete the build/ directory and rerun the release script.
//! [then] #1: ran rm -rf build/ && ./release.sh: ok
//! Files:
//! [edited] src/a.rs, lib/web/b.ex
//! Failures (first and last error line):
//! [failed toolu_02] Bash, command cargo test: error: … | … -> fixed by toolu_05 at message 9
//! Commands:
//! [ran ok] cargo build (×2, last toolu_05)
//! [… 4 more items omitted: 3 calls, 1 reply]
//! ```
//!
//! Priorities, in the order the budget is spent: (1) the user's words (every request verbatim;
//! a long one around its constraint sentences) and earlier summaries (whole); (2) failures,
//! always kept; (3) files and what was done to them; (4) commands with outcome, deduplicated;
//! (5) other calls and replies, newest first, with a count of what was left out. Calls are
//! written as `tool, argument`, never as `Name(args)` a model could imitate.

use super::{ARG_CHARS, Facts, MARKER_PREFIX};
use super::{FailureFact, FileAction, SummaryKind, shorten_around_constraints};
use crate::conversation::Outcome;
use crate::render::{clip, one_line_clipped};
use crate::tokens::TokenCounter;
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use serde::Serialize;
use std::collections::BTreeSet;
use std::ops::Range;

/// What a `[user]` line says after its number when its request is not verbatim.
const SHORTENED_TAG: &str = " (shortened)";

/// Characters kept of a command or argument in a `[then]` line, and of that line.
const THEN_ARG_CHARS: usize = 60;
const THEN_CHARS: usize = 200;

/// The title of the user's words when some line is not verbatim (a `(shortened)` tag, a run
/// named as left out); [`TITLES`]' first when every line is.
const WORDS_TITLE_MARKED: &str = "The user's words, oldest first, verbatim except where marked:";

/// The section titles, in the order the marker writes them.
const TITLES: [&str; 6] = [
    "The user's words, verbatim, oldest first:",
    "Earlier summaries, carried forward:",
    "Files and what was done to them:",
    "Failures (first and last error line, and the fix when one followed):",
    "Commands and their outcome:",
    "Other calls and replies:",
];

/// A user request with what followed it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Request {
    number: usize,
    text: String,
    then: Option<String>,
    /// The round's calls all succeeded (known outcomes, none failed). False when unknown (a
    /// merged earlier state) or when the round had no calls.
    settled: bool,
    /// `text` is already a shortening of the person's words (read back from an earlier marker
    /// whose line said so).
    shortened: bool,
}

/// The session state of a span, ready to be written into a marker message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionState {
    requests: Vec<Request>,
    summaries: Vec<(SummaryKind, String)>,
    /// Shown path -> actions, in first-touch order.
    files: Vec<(String, BTreeSet<FileAction>)>,
    /// Position of each shown path in `files`.
    file_index: HashMap<String, usize>,
    /// (id, line without tag) of each failure.
    failures: Vec<(String, String)>,
    /// Whole command lines (`[ran ok] …`).
    commands: Vec<String>,
    /// Whole lines of the rest (`[call …]`, `[assistant] …`).
    rest: Vec<String>,
    /// Items earlier passes left out.
    carried_omitted: usize,
    /// Requests an earlier record left out (its `[… N earlier requests left out: #a–#b]`
    /// line), carried into this record's run.
    carried_left_out: Option<LeftOut>,
    /// Leave out the `[then]` lines of settled rounds (all calls succeeded): the last resort
    /// when the marker with them does not fit the budget ([`SessionState::shedding_settled`]).
    shed_settled: bool,
    /// Counter tokens the whole output can give the record, past which the user's words are
    /// not kept whole ([`SessionState::with_words_ceiling`]); `None`: no ceiling.
    words_ceiling: Option<usize>,
}

/// The lines a state keeps within a budget, and how many items it left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// The marker's body lines.
    pub lines: Vec<String>,
    /// Items left out (this pass and earlier ones).
    pub omitted: usize,
    /// Ids of the failures written.
    pub failures: Vec<String>,
    /// Counter tokens the lines were budgeted at: each line's count plus one for its line
    /// break, with the section titles and the omitted-items line reserved. An estimate of the
    /// lines joined (usually a little above it), made without tokenizing them again.
    pub tokens: usize,
    /// What the lines did to the user's words (which requests are not there verbatim).
    pub user_words: UserWords,
}

/// The lines a render writes for one request (its `[user]` line and its `[then]` line), their
/// cost in counter tokens (one more per line break), and what was done to its words.
struct RequestLines {
    lines: Vec<String>,
    cost: usize,
    shortened: bool,
    /// Sentences the shortening left out as repeats of a kept one.
    repeats: usize,
}

/// What a record of a dropped span did to the user's requests, by request number (`#N` in
/// its lines, counted from the session's first request). Empty when every request of the span
/// is written verbatim.
///
/// The user's words come first in a record ([`SessionState::render`]) and are kept even past
/// its room: a request is shortened when the requests whole would take more than half the
/// room, and left out only when, shortened, they take more than the words' ceiling leaves
/// after the section titles and the failures (the ceiling: what the whole output can give the
/// record, [`SessionState::with_words_ceiling`]): the first request (the task) and the newest
/// ones are kept, the ones between named by a line `[… N earlier requests left out: #a–#b]`
/// (one run, with the requests earlier records had left out).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UserWords {
    /// Requests written shortened around their constraint sentences (first sentence, every
    /// sentence with an instruction word, last sentence; [`super::around_constraints`]), each line
    /// tagged `(shortened)`.
    pub shortened: Vec<usize>,
    /// Requests left out of the record: one run between the first and the newest kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_out: Option<LeftOut>,
    /// Sentences this record's shortening of the written requests left out as repeats of a
    /// kept one (`Always run tests. [… 39 repeats left out]`;
    /// [`super::Shortened::repeats_left_out`]), summed over those requests.
    #[serde(skip_serializing_if = "is_zero")]
    pub repeats_left_out: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The run of requests a record left out ([`UserWords::left_out`]), by request number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    /// How many requests (this record's and those earlier records had left out).
    pub count: usize,
    /// The first one's number.
    pub first: usize,
    /// The last one's number.
    pub last: usize,
}

impl LeftOut {
    /// One run of both: the counts added, from the first of either to the last of either.
    pub fn joined(self, other: LeftOut) -> LeftOut {
        LeftOut {
            count: self.count + other.count,
            first: self.first.min(other.first),
            last: self.last.max(other.last),
        }
    }
}

impl UserWords {
    /// Whether every request of the span is written verbatim.
    pub fn is_verbatim(&self) -> bool {
        self.shortened.is_empty() && self.left_out.is_none() && self.repeats_left_out == 0
    }

    /// The report's note: `the record's user words: 2 requests shortened around their
    /// constraint sentences (#3, #7); 4980 requests left out (#2–#4981), the first and the
    /// newest kept`.
    pub fn note(&self) -> String {
        let list = |ns: &[usize]| match ns {
            [a, .., b] if ns.len() > 3 => format!("#{a}–#{b}"),
            _ => ns
                .iter()
                .map(|n| format!("#{n}"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let mut parts = Vec::new();
        if !self.shortened.is_empty() {
            let repeats = match self.repeats_left_out {
                0 => String::new(),
                n => format!(", {n} repeated sentences left out"),
            };
            parts.push(format!(
                "{} requests shortened around their constraint sentences ({}){repeats}",
                self.shortened.len(),
                list(&self.shortened)
            ));
        }
        if let Some(l) = self.left_out {
            parts.push(format!(
                "{} requests left out (#{}–#{}), the first and the newest kept",
                l.count, l.first, l.last
            ));
        }
        format!("the record's user words: {}", parts.join("; "))
    }
}

fn outcome_word(o: Option<Outcome>) -> &'static str {
    match o {
        Some(Outcome::Success) => "ok",
        Some(Outcome::Error) => "failed",
        Some(Outcome::Unknown) => "unknown",
        None => "no result",
    }
}

/// Indents every line after the first by two spaces, so a multi-line text stays one item.
fn indent_rest(s: &str) -> String {
    s.trim().lines().collect::<Vec<_>>().join("\n  ")
}

impl SessionState {
    /// The state of `facts` in `range` of messages. Failures name their fix when a later
    /// identical call in the whole history succeeded. Earlier compactor markers in the range are
    /// merged in (their requests, files, failures, commands and the rest).
    pub fn of(facts: &Facts, range: Range<usize>) -> SessionState {
        let mut st = SessionState::default();
        let inr = |m: usize| range.contains(&m);
        for s in facts.summaries.iter().filter(|s| inr(s.message)) {
            if s.kind == SummaryKind::Compactor && st.merge_marker(&s.text) {
                continue;
            }
            st.summaries.push((s.kind, s.text.clone()));
        }
        // The facts are in message order: each kind's facts in `range` are one slice, found by
        // binary search (a state costs in proportion to its range, not to the whole history).
        let users = in_range(&facts.user, &range, |u| u.message);
        let calls = in_range(&facts.calls, &range, |c| c.message);
        let replies = in_range(&facts.replies, &range, |r| r.message);
        let first_number = st.requests.iter().map(|r| r.number).max().unwrap_or(0) + 1;
        for (k, u) in users.iter().enumerate() {
            let end = users.get(k + 1).map_or(range.end, |n| n.message);
            let round = in_range(calls, &(u.message + 1..end), |c| c.message);
            let settled =
                !round.is_empty() && round.iter().all(|c| c.outcome == Some(Outcome::Success));
            let then = if round.is_empty() {
                in_range(replies, &(u.message + 1..end), |r| r.message)
                    .first()
                    .map(|r| ["answered: ", &clip(&r.line, ARG_CHARS)].concat())
                    .unwrap_or_else(|| "continued in the messages below".into())
            } else {
                let failed = round
                    .iter()
                    .filter(|c| c.outcome == Some(Outcome::Error))
                    .count();
                let mut parts: Vec<String> = round
                    .iter()
                    .map(|c| match (&c.command_line, &c.argument_line) {
                        (Some(cmd), _) => [
                            "ran ",
                            &clip(cmd, THEN_ARG_CHARS),
                            ": ",
                            outcome_word(c.outcome),
                        ]
                        .concat(),
                        (None, Some(a)) => [
                            &c.tool,
                            " ",
                            &clip(a, THEN_ARG_CHARS),
                            ": ",
                            outcome_word(c.outcome),
                        ]
                        .concat(),
                        (None, None) => [&c.tool, ": ", outcome_word(c.outcome)].concat(),
                    })
                    .take(2)
                    .collect();
                parts.push(format!("{} calls, {failed} failed", round.len()));
                one_line_clipped(&parts.join("; "), THEN_CHARS)
            };
            st.requests.push(Request {
                number: first_number + k,
                text: u.text.clone(),
                then: Some(then),
                settled,
                shortened: false,
            });
        }
        for t in in_range(&facts.touches, &range, |t| t.message) {
            st.touch(t.shown.clone(), t.action);
        }
        // Failures are in call order, so in message order of their calls.
        let first_call = facts.calls.partition_point(|c| c.message < range.start);
        let from = facts.failures.partition_point(|f| f.call < first_call);
        for f in &facts.failures[from..] {
            let Some(c) = facts.call_of(f) else {
                continue;
            };
            if c.message >= range.end {
                break;
            }
            let line = failure_line(
                f,
                &c.tool,
                c.command_line.as_deref(),
                c.argument_line.as_deref(),
                range.end,
            );
            st.failures.push((c.id.clone(), line));
        }
        // Commands, deduplicated by (command, outcome): count and last id.
        let mut groups: Vec<(&str, &'static str, usize, &str)> = Vec::new();
        let mut group_of: HashMap<(&str, &'static str), usize> =
            HashMap::with_capacity(calls.len());
        for c in calls {
            let Some(cmd) = c.command_line.as_deref() else {
                continue;
            };
            let word = outcome_word(c.outcome);
            match group_of.get(&(cmd, word)) {
                Some(&g) => {
                    groups[g].2 += 1;
                    groups[g].3 = &c.id;
                }
                None => {
                    group_of.insert((cmd, word), groups.len());
                    groups.push((cmd, word, 1, &c.id));
                }
            }
        }
        // One line per item of the range, most never shown (a render keeps what fits): each
        // is joined from its parts at its final length, not grown through `format!`.
        for (cmd, word, n, id) in groups {
            let times = if n > 1 {
                format!("×{n}, last ")
            } else {
                String::new()
            };
            st.commands
                .push(["[ran ", word, "] ", cmd, " (", &times, id, ")"].concat());
        }
        for c in calls.iter().filter(|c| c.command.is_none()) {
            let (sep, arg) = c.argument_line.as_deref().map_or(("", ""), |a| (", ", a));
            st.rest.push(
                [
                    "[call ",
                    &c.id,
                    "] ",
                    &c.tool,
                    sep,
                    arg,
                    ": ",
                    outcome_word(c.outcome),
                ]
                .concat(),
            );
        }
        for r in replies {
            st.rest.push(["[assistant] ", &r.line].concat());
        }
        st
    }

    /// Records `action` on the shown path `shown` (a new path goes last).
    fn touch(&mut self, shown: String, action: FileAction) {
        match self.file_index.get(&shown) {
            Some(&i) => {
                self.files[i].1.insert(action);
            }
            None => {
                self.file_index.insert(shown.clone(), self.files.len());
                self.files.push((shown, BTreeSet::from([action])));
            }
        }
    }

    /// Merges an earlier marker's lines into this state; false when `text` holds no line of a
    /// state (a summary-strategy message), which is then carried whole instead.
    fn merge_marker(&mut self, text: &str) -> bool {
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

    /// The lines that fit in `max_tokens` (counted with `counter`'s cache, one count per
    /// line; a path, command or other line that cannot fit by
    /// [`TokenCounter::count_at_least`] is left out uncounted), by the priorities of the module
    /// docs. The user's words and failures are kept even
    /// past the limit (a long request shortened around its constraints first).
    pub fn render(&self, max_tokens: usize, counter: &dyn TokenCounter) -> Rendered {
        let cost = |l: &str| counter.count_text_cached(l) + 1;
        // The section titles of the parts there are, and the line counting what was left out,
        // are part of the budget.
        let present = [
            !self.requests.is_empty(),
            !self.summaries.is_empty(),
            !self.files.is_empty(),
            !self.failures.is_empty(),
            !self.commands.is_empty(),
            !self.rest.is_empty(),
        ];
        let mut used = TITLES
            .iter()
            .zip(present)
            .filter(|(_, p)| *p)
            .map(|(t, _)| cost(t))
            .sum::<usize>()
            + cost("[… 999 more items omitted]");
        // The words' title is known once the words are: what the longer one adds is kept out of
        // the words' room, and spent when it is the one written.
        let marked_title =
            usize::from(present[0]) * cost(WORDS_TITLE_MARKED).saturating_sub(cost(TITLES[0]));
        let mut omitted = self.carried_omitted;
        // (1) the user's words: full first; shortened around constraints when they take more
        // than half the budget; past what the ceiling leaves after the failures, the first
        // request (the task) and the newest ones, the ones between left out by one line that
        // names them.
        let mut user_words = UserWords::default();
        // Failures are kept whatever they cost: what they take is not the words' to take.
        let fails: Vec<String> = self
            .failures
            .iter()
            .map(|(id, l)| format!("[failed {id}] {l}"))
            .collect();
        let fails_cost = fails.iter().map(|l| cost(l)).sum::<usize>();
        let room = self.words_ceiling.map_or(usize::MAX, |c| {
            c.saturating_sub(used + fails_cost + marked_title)
        });
        // Each request's `[then]` line (none when shed), whole or shortened alike; a shed one is
        // counted as omitted whether or not its request is written.
        let shed = |r: &Request| self.shed_settled && r.settled && r.then.is_some();
        omitted += self.requests.iter().filter(|r| shed(r)).count();
        let then_line = |r: &Request| -> Option<String> {
            let t = r.then.as_ref().filter(|_| !shed(r))?;
            Some(format!("[then] #{}: {t}", r.number))
        };
        // Shortened when the words whole take more than half the budget, or more than the room
        // with their `[then]` lines: summed until either is known (the sums only grow).
        let n = self.requests.len();
        // The lines made while summing (each request's words whole, its `[then]` line), kept for
        // the requests written below rather than made again.
        let mut whole: Vec<Option<(String, Option<String>)>> = Vec::with_capacity(n);
        let (mut full_cost, mut then_cost) = (0usize, 0usize);
        let mut shorten = false;
        for r in &self.requests {
            let line = user_line(r, &r.text, r.shortened);
            let then = then_line(r);
            full_cost += cost(&line);
            then_cost += then.as_deref().map_or(0, cost);
            whole.push(Some((line, then)));
            if full_cost.saturating_mul(2) > max_tokens
                || full_cost.saturating_add(then_cost) > room
            {
                shorten = true;
                break;
            }
        }
        // A request's lines, made when first needed: with a ceiling on the words, only the first
        // request and the newest that fit are ever written, so only theirs are made.
        let mut words: Vec<Option<RequestLines>> = (0..n).map(|_| None).collect();
        let mut lines_at = |k: usize| -> usize {
            let made = words[k].get_or_insert_with(|| {
                let r = &self.requests[k];
                let (summed, then) = match whole.get_mut(k).and_then(Option::take) {
                    Some((line, then)) => (Some(line), then),
                    None => (None, then_line(r)),
                };
                let (line, shortened, repeats) = if shorten {
                    let short = shorten_around_constraints(&r.text);
                    let shortened = r.shortened || short.text != r.text;
                    let line = user_line(r, &short.text, shortened);
                    (line, shortened, short.repeats_left_out)
                } else {
                    let line = summed.unwrap_or_else(|| user_line(r, &r.text, r.shortened));
                    (line, r.shortened, 0)
                };
                let lines: Vec<String> = std::iter::once(line).chain(then).collect();
                RequestLines {
                    cost: lines.iter().map(|l| cost(l)).sum(),
                    lines,
                    shortened,
                    repeats,
                }
            });
            made.cost
        };
        // Requests kept: all, or the first and the newest that fit after it. Whether all fit is
        // summed until it is known.
        let mut total = 0usize;
        let over = (0..n).any(|k| {
            total += lines_at(k);
            total > room
        });
        let mut keep = vec![true; n];
        let mut left_out: Vec<usize> = Vec::new();
        if over && n > 2 {
            let gap = cost("[… 99999 earlier requests left out: #99999–#99999]");
            let mut spent = lines_at(0) + gap;
            let mut newest = n;
            while newest > 1 && spent + lines_at(newest - 1) <= room {
                newest -= 1;
                spent += lines_at(newest);
            }
            // At least the newest request, whatever it costs.
            newest = newest.min(n - 1).max(1);
            for (k, r) in self.requests.iter().enumerate().take(newest).skip(1) {
                keep[k] = false;
                left_out.push(r.number);
            }
        }
        for k in (0..n).filter(|&k| keep[k]) {
            lines_at(k);
        }
        let words: Vec<Option<RequestLines>> = words
            .into_iter()
            .zip(&keep)
            .map(|(w, &kept)| w.filter(|_| kept))
            .collect();
        let kept = || {
            self.requests
                .iter()
                .zip(&words)
                .filter_map(|(r, w)| Some((r, w.as_ref()?)))
        };
        user_words.shortened = kept()
            .filter(|(_, w)| w.shortened)
            .map(|(r, _)| r.number)
            .collect();
        user_words.repeats_left_out = kept().map(|(_, w)| w.repeats).sum();
        if !user_words.is_verbatim() {
            used += marked_title;
        }
        let this_pass = match (left_out.first(), left_out.last()) {
            (Some(&first), Some(&last)) => Some(LeftOut {
                count: left_out.len(),
                first,
                last,
            }),
            _ => None,
        };
        // One run with what earlier records left out (they left out the requests after their
        // first, so the runs meet).
        user_words.left_out = match (self.carried_left_out, this_pass) {
            (Some(c), Some(t)) => Some(c.joined(t)),
            (c, t) => c.or(t),
        };
        let mut head = Vec::new();
        for (k, w) in words.into_iter().enumerate() {
            if let Some(w) = w {
                used += w.cost;
                head.extend(w.lines);
            }
            // The line naming the left-out run, after the first request.
            if k == 0
                && let Some(run) = user_words.left_out
            {
                let l = left_out_line(run);
                used += cost(&l);
                head.push(l);
            }
        }
        if self.requests.is_empty()
            && let Some(run) = user_words.left_out
        {
            let l = left_out_line(run);
            used += cost(&l);
            head.push(l);
        }
        let mut sums = Vec::new();
        for (kind, text) in &self.summaries {
            let name = match kind {
                SummaryKind::Compactor => "compactor",
                SummaryKind::ClaudeCode => "Claude Code",
                SummaryKind::Codex => "Codex",
            };
            let l = format!("[summary {name}]\n  {}", indent_rest(text));
            used += cost(&l);
            sums.push(l);
        }
        // (2) failures: always (their lines made above).
        used += fails_cost;
        // (3) files: writes first, then reads; each path once per bucket.
        let mut files = Vec::new();
        for action in [
            FileAction::Created,
            FileAction::Edited,
            FileAction::Deleted,
            FileAction::Read,
            FileAction::Searched,
        ] {
            let write = |a: &BTreeSet<FileAction>| {
                a.contains(&FileAction::Created)
                    || a.contains(&FileAction::Edited)
                    || a.contains(&FileAction::Deleted)
            };
            let mut paths: Vec<&str> = Vec::new();
            for (p, a) in &self.files {
                let here = a.contains(&action)
                    && (matches!(
                        action,
                        FileAction::Created | FileAction::Edited | FileAction::Deleted
                    ) || !write(a));
                if here {
                    paths.push(p);
                }
            }
            if paths.is_empty() {
                continue;
            }
            // As many paths as fit, the rest counted.
            let mut kept: Vec<&str> = Vec::new();
            let mut line_cost = cost(&format!("[{}] ", action.word()));
            for p in &paths {
                // A path that cannot fit by its floor is not counted (nor read once the room
                // is spent: a path takes its separator at least).
                if used + line_cost >= max_tokens
                    || used + line_cost + counter.count_at_least(p) + 1 > max_tokens
                {
                    omitted += 1;
                    continue;
                }
                let c = counter.count_text_cached(p) + 1;
                if used + line_cost + c <= max_tokens {
                    kept.push(p);
                    line_cost += c;
                } else {
                    omitted += 1;
                }
            }
            if !kept.is_empty() {
                used += line_cost;
                files.push(format!("[{}] {}", action.word(), kept.join(", ")));
            }
        }
        // (4) commands, newest first; (5) the rest, newest first.
        let pick = |lines: &[&str], used: &mut usize, omitted: &mut usize| -> Vec<String> {
            let mut keep = vec![false; lines.len()];
            for (i, l) in lines.iter().enumerate().rev() {
                // Once the room is small most lines cannot fit by their floor
                // (`count_at_least`): those are left out without tokenizing them; once it is
                // spent (a line takes its line break at least), without reading them.
                if *used >= max_tokens || *used + counter.count_at_least(l) + 1 > max_tokens {
                    *omitted += 1;
                    continue;
                }
                let c = cost(l);
                if *used + c <= max_tokens {
                    keep[i] = true;
                    *used += c;
                } else {
                    *omitted += 1;
                }
            }
            lines
                .iter()
                .zip(keep)
                .filter(|(_, k)| *k)
                .map(|(l, _)| l.to_string())
                .collect()
        };
        let commands: Vec<&str> = self.commands.iter().map(String::as_str).collect();
        let commands = pick(&commands, &mut used, &mut omitted);
        let mut seen = HashSet::with_capacity(self.rest.len());
        let rest: Vec<&str> = self
            .rest
            .iter()
            .map(String::as_str)
            .filter(|l| seen.insert(*l))
            .collect();
        let rest = pick(&rest, &mut used, &mut omitted);

        let mut lines = Vec::new();
        let mut section = |title: &str, items: Vec<String>| {
            if !items.is_empty() {
                lines.push(title.to_string());
                lines.extend(items);
            }
        };
        // The words are called verbatim only when every line of them is.
        let words_title = if user_words.is_verbatim() {
            TITLES[0]
        } else {
            WORDS_TITLE_MARKED
        };
        for (title, items) in std::iter::once(&words_title)
            .chain(&TITLES[1..])
            .zip([head, sums, files, fails, commands, rest])
        {
            section(title, items);
        }
        if omitted > 0 {
            lines.push(format!("[… {omitted} more items omitted]"));
        }
        Rendered {
            lines,
            omitted,
            failures: self.failures.iter().map(|(id, _)| id.clone()).collect(),
            tokens: used,
            user_words,
        }
    }

    /// The same state without the `[then]` lines of rounds whose calls all succeeded (they are
    /// counted as omitted); failed or unknown outcomes keep theirs. For a budget the full
    /// marker does not fit.
    pub fn shedding_settled(mut self) -> SessionState {
        self.shed_settled = true;
        self
    }

    /// The same state with a ceiling on the user's words: `tokens` (counter tokens) is what the
    /// whole output can give the record at most, past its usual room. Without one the words
    /// are kept whatever they cost (shortened around their constraints past half the room);
    /// with one, past what the ceiling leaves after the failures the first request and the
    /// newest are kept and the ones between left out, by one line naming them ([`UserWords`]).
    pub fn with_words_ceiling(mut self, tokens: usize) -> SessionState {
        self.words_ceiling = Some(tokens);
        self
    }

    /// The marker message text: the fixed prefix, one sentence saying it is a record, then the
    /// lines of [`SessionState::render`].
    pub fn marker_text(
        &self,
        removed_messages: usize,
        removed_tokens: usize,
        max_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> String {
        self.marker(removed_messages, removed_tokens, max_tokens, counter)
            .0
    }

    /// [`SessionState::marker_text`] and the ids of the failures it writes (typed, so the
    /// guard records which failures the marker keeps without reading its text).
    pub fn marker(
        &self,
        removed_messages: usize,
        removed_tokens: usize,
        max_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> (String, Vec<String>) {
        let (s, rendered) =
            self.marker_sized(removed_messages, removed_tokens, max_tokens, counter);
        (s, rendered.failures)
    }

    /// The marker's text and what its render kept ([`Rendered`], its `lines` moved into the
    /// text and left empty; its `tokens` an estimate of the whole text's counter tokens: the
    /// header's count plus the lines' budget), for a caller that compares many candidate
    /// markers without tokenizing each whole.
    pub fn marker_sized(
        &self,
        removed_messages: usize,
        removed_tokens: usize,
        max_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> (String, Rendered) {
        let mut s = format!(
            "{MARKER_PREFIX} A record of earlier work, not instructions to act on: {removed_messages} earlier messages ({removed_tokens} tokens) were replaced by this session state, made by code.\n"
        );
        let head = counter.count_text_cached(&s);
        let mut rendered = self.render(max_tokens.saturating_sub(head), counter);
        for l in std::mem::take(&mut rendered.lines) {
            s.push_str(&l);
            s.push('\n');
        }
        rendered.tokens += head;
        (s, rendered)
    }
}

/// The item a state writes for an earlier summary (see [`SessionState::render`]):
/// `[summary compactor]` (or `Claude Code`, `Codex`), then its text with every line indented by
/// two spaces, so that the whole text stays one item when the state is read back
/// ([`SessionState::of`] merges it as that earlier summary, whole).
pub fn summary_item(kind: SummaryKind, text: &str) -> String {
    let name = match kind {
        SummaryKind::Compactor => "compactor",
        SummaryKind::ClaudeCode => "Claude Code",
        SummaryKind::Codex => "Codex",
    };
    format!("[summary {name}]\n  {}", indent_rest(text))
}

/// The items of `items` (in message order, by `message`) whose message is in `range`.
fn in_range<'a, T>(items: &'a [T], range: &Range<usize>, message: impl Fn(&T) -> usize) -> &'a [T] {
    let from = items.partition_point(|x| message(x) < range.start);
    let to = items.partition_point(|x| message(x) < range.end).max(from);
    &items[from..to]
}

/// `[… N earlier requests left out: #a–#b]` (`[… 1 earlier request left out: #a]`).
fn left_out_line(run: LeftOut) -> String {
    if run.count == 1 && run.first == run.last {
        format!("[… 1 earlier request left out: #{}]", run.first)
    } else {
        format!(
            "[… {} earlier requests left out: #{}–#{}]",
            run.count, run.first, run.last
        )
    }
}

/// The run a [`left_out_line`] names, read back from its tag (`… N earlier requests left
/// out`) and body (`#a–#b` or `#a`).
fn left_out_of(tag: &str, body: &str) -> Option<LeftOut> {
    let words = tag.trim_start_matches('…').trim();
    let (n, rest) = words.split_once(' ')?;
    if rest != "earlier requests left out" && rest != "earlier request left out" {
        return None;
    }
    let count = n.parse().ok()?;
    let body = body.trim();
    let (first, last) = body.split_once('–').unwrap_or((body, body));
    let number = |x: &str| x.trim().strip_prefix('#')?.parse().ok();
    Some(LeftOut {
        count,
        first: number(first)?,
        last: number(last)?,
    })
}

/// `[user] #N: text`, or `[user] #N (shortened): text` when `text` is not the request whole.
fn user_line(r: &Request, text: &str, shortened: bool) -> String {
    let tag = if shortened { SHORTENED_TAG } else { "" };
    format!("[user] #{}{tag}: {}", r.number, indent_rest(text))
}

/// `Bash, command cargo test: error: first | last -> fixed by toolu_x at message N`, from the
/// call's command and argument lines ([`super::CallFact::command_line`],
/// [`super::CallFact::argument_line`]).
fn failure_line(
    f: &FailureFact,
    tool: &str,
    command_line: Option<&str>,
    argument_line: Option<&str>,
    kept_from: usize,
) -> String {
    let what = match (command_line, argument_line) {
        (Some(c), _) => format!(", command {c}"),
        (None, Some(a)) => format!(", {a}"),
        (None, None) => String::new(),
    };
    let mut s = format!("{tool}{what}: error: {}", f.first_line);
    if let Some(l) = &f.last_line {
        s.push_str(" | ");
        s.push_str(l);
    }
    if let Some(fix) = &f.fixed_by {
        let place = if fix.message >= kept_from {
            "kept below".to_string()
        } else {
            format!("at message {}", fix.message)
        };
        s.push_str(&format!(" -> fixed by {} {place}", fix.id));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{Message, Role};
    use crate::facts::test_blocks::{call, result};
    use crate::tokens::TiktokenCounter;
    use serde_json::json;

    fn session() -> Vec<Message> {
        vec![
            Message::text(Role::User, "Fix the build. Never touch vendor/."),
            Message::new(
                Role::Assistant,
                vec![call("t1", "Bash", json!({"command": "cargo build"}))],
            ),
            Message::new(
                Role::User,
                vec![result(
                    "t1",
                    "Exit code 101\nerror[E0425]: cannot find `b`\nerror: could not compile",
                    true,
                )],
            ),
            Message::new(
                Role::Assistant,
                vec![call(
                    "t2",
                    "Edit",
                    json!({"file_path": "/p/q/src/a.rs", "old_string": "a", "new_string": "b"}),
                )],
            ),
            Message::new(Role::User, vec![result("t2", "ok", false)]),
            Message::new(
                Role::Assistant,
                vec![call("t3", "Bash", json!({"command": "cargo build"}))],
            ),
            Message::new(Role::User, vec![result("t3", "Finished", false)]),
            Message::text(Role::User, "Now commit."),
        ]
    }

    fn counter() -> TiktokenCounter {
        TiktokenCounter::new(crate::tokens::Tokenizer::default())
    }

    /// A session of `n` user requests, each answered by the assistant.
    fn chat(n: usize, text: impl Fn(usize) -> String) -> Vec<Message> {
        (1..=n)
            .flat_map(|k| {
                [
                    Message::text(Role::User, text(k)),
                    Message::text(Role::Assistant, format!("done {k}")),
                ]
            })
            .collect()
    }

    proptest::proptest! {
        /// However many requests and whatever the room: every request of the span is written
        /// verbatim, tagged shortened, or one of a single left-out run from #2 that a line
        /// names; the first and the newest are always written; the user's lines stay within
        /// the ceiling unless that is less than the first and the newest.
        #[test]
        fn every_request_is_written_tagged_or_named_as_left_out(
            n in 1usize..400,
            room in 40usize..6_000,
            long_every in 1usize..6,
        ) {
            let text = |k: usize| {
                if k.is_multiple_of(long_every) {
                    format!("Request {k} asks for a thing. It goes on. And on. You must keep file{k}.rs. The last word {k}.")
                } else {
                    format!("Request {k}: short.")
                }
            };
            let msgs = chat(n, text);
            let facts = Facts::of(&msgs, true);
            let c = counter();
            let r = SessionState::of(&facts, 0..msgs.len()).with_words_ceiling(room).render(room / 2, &c);
            let user: Vec<&String> = r.lines.iter().filter(|l| l.starts_with("[user] #")).collect();
            let written: Vec<usize> = user
                .iter()
                .map(|l| l.strip_prefix("[user] #").unwrap().split([' ', ':']).next().unwrap().parse().unwrap())
                .collect();
            // Written, in order, then the left-out run between the first and the rest.
            let mut all = written.clone();
            if let Some(l) = r.user_words.left_out {
                all.extend(l.first..=l.last);
            }
            all.sort_unstable();
            proptest::prop_assert_eq!(all, (1..=n).collect::<Vec<_>>());
            proptest::prop_assert_eq!(written.first(), Some(&1));
            proptest::prop_assert_eq!(written.last(), Some(&n));
            if let Some(LeftOut { count, first: a, last: b }) = r.user_words.left_out {
                proptest::prop_assert_eq!(a, 2);
                proptest::prop_assert_eq!(b - a + 1, count);
                let named = if a == b {
                    "[… 1 earlier request left out: #2]".to_string()
                } else {
                    format!("[… {count} earlier requests left out: #2–#{b}]")
                };
                proptest::prop_assert!(r.lines.contains(&named), "{:?}", r.lines);
                let users_cost: usize = user.iter().map(|l| c.count_text(l) + 1).sum::<usize>()
                    + c.count_text(&named) + 1;
                let two = user.iter().take(1).chain(user.last()).map(|l| c.count_text(l) + 1).sum::<usize>();
                proptest::prop_assert!(users_cost <= room.max(two + c.count_text(&named) + 1), "{} of {}", users_cost, room);
            } else {
                proptest::prop_assert_eq!(written.len(), n);
            }
            // A line is tagged shortened exactly when its request is typed as shortened, and
            // then it is not the request's text.
            for (l, k) in user.iter().zip(&written) {
                let tagged = l.starts_with(&format!("[user] #{k} (shortened): "));
                proptest::prop_assert_eq!(tagged, r.user_words.shortened.contains(k));
                let whole = format!("[user] #{k}: {}", text(*k));
                proptest::prop_assert_eq!(tagged, **l != whole, "{}", l);
            }
            // The title says verbatim exactly when no line is tagged or names a left-out run.
            let marked = user.iter().any(|l| l.contains(" (shortened): "))
                || r.lines.iter().any(|l| l.contains(" left out: #"));
            let title = if marked {
                "The user's words, oldest first, verbatim except where marked:"
            } else {
                "The user's words, verbatim, oldest first:"
            };
            proptest::prop_assert_eq!(r.lines.first().map(String::as_str), Some(title));
        }
    }

    #[test]
    fn a_shortened_request_stays_tagged_when_merged_forward() {
        const ROOM: usize = 200;
        let long = format!(
            "Port the parser to nom. {}Never change the public API. Report the timings.",
            "It is slow and old. ".repeat(30)
        );
        let msgs = chat(3, |k| {
            if k == 2 {
                long.clone()
            } else {
                format!("Request {k}.")
            }
        });
        let c = counter();
        let facts = Facts::of(&msgs, true);
        // A room small enough that the words whole take more than half of it.
        let first = SessionState::of(&facts, 0..msgs.len()).marker_text(6, 100, ROOM, &c);
        assert!(
            first.contains("[user] #2 (shortened): Port the parser to nom. … Never change the public API. … Report the timings."),
            "{first}"
        );
        // The next pass reads it back: still shortened, once, with its number.
        let again = Facts::of(&[Message::text(Role::User, first)], true);
        let state = SessionState::of(&again, 0..1);
        let r = state.render(2_000, &c);
        assert_eq!(r.user_words.shortened, vec![2]);
        assert!(
            r.lines.contains(&"[user] #2 (shortened): Port the parser to nom. … Never change the public API. … Report the timings.".to_string()),
            "{:?}",
            r.lines
        );
    }

    #[test]
    fn a_left_out_run_is_carried_into_the_next_record() {
        let c = counter();
        let msgs = chat(600, |k| format!("Please handle ticket {k} now."));
        let facts = Facts::of(&msgs, true);
        let first = SessionState::of(&facts, 0..msgs.len())
            .with_words_ceiling(1_000)
            .marker_text(msgs.len(), 0, 500, &c);
        let run1 = SessionState::of(&facts, 0..msgs.len())
            .with_words_ceiling(1_000)
            .render(500, &c)
            .user_words
            .left_out
            .expect("a run left out");
        // The next pass: the record, then 100 new requests, all dropped with a tight ceiling.
        let mut again = vec![Message::text(Role::User, first)];
        again.extend(chat(100, |k| format!("And then ticket {}.", 600 + k)));
        let facts = Facts::of(&again, true);
        let r = SessionState::of(&facts, 0..again.len())
            .with_words_ceiling(600)
            .render(300, &c);
        let run2 = r.user_words.left_out.expect("a run left out");
        // One run from #2: the earlier one and this pass's, counted together.
        assert_eq!(run2.first, 2);
        assert!(run2.count > run1.count, "{run1:?} {run2:?}");
        assert!(run2.last > 600, "{run2:?}");
        let named = format!(
            "[… {} earlier requests left out: #2–#{}]",
            run2.count, run2.last
        );
        assert_eq!(r.lines[1..4].last(), Some(&named), "{:?}", &r.lines[..6]);
        // Every request is written or inside the run: none is lost without a mention.
        let written: Vec<usize> = r
            .lines
            .iter()
            .filter_map(|l| l.strip_prefix("[user] #"))
            .map(|l| l.split([' ', ':']).next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(written[0], 1);
        assert_eq!(written[1], run2.last + 1);
        assert_eq!(*written.last().unwrap(), 700);
        assert_eq!(run2.count + written.len(), 700);
        // Not counted again as other omitted items.
        assert!(
            !r.lines
                .iter()
                .any(|l| l.contains("more items omitted") && l.contains(&run1.count.to_string()))
        );
    }

    #[test]
    fn failures_are_counted_before_the_user_words_take_their_share() {
        let c = counter();
        let mut msgs = Vec::new();
        for k in 1..=300 {
            msgs.push(Message::text(
                Role::User,
                format!("Please handle ticket {k} now."),
            ));
            if k % 7 == 0 {
                let id = format!("t{k}");
                msgs.push(Message::new(
                    Role::Assistant,
                    vec![call(&id, "Bash", json!({"command": format!("deploy {k}")}))],
                ));
                msgs.push(Message::new(
                    Role::User,
                    vec![result(
                        &id,
                        "error: the deploy failed because the host is down",
                        true,
                    )],
                ));
            }
            msgs.push(Message::text(Role::Assistant, format!("done {k}")));
        }
        let facts = Facts::of(&msgs, true);
        let ceiling = 3_000;
        let r = SessionState::of(&facts, 0..msgs.len())
            .with_words_ceiling(ceiling)
            .render(1_500, &c);
        assert_eq!(r.failures.len(), 42);
        assert!(r.user_words.left_out.is_some());
        let text = r.lines.join("\n");
        assert!(c.count_text(&text) <= ceiling, "{}", c.count_text(&text));
    }

    #[test]
    fn five_thousand_requests_keep_the_task_and_the_newest_within_the_room() {
        let msgs = chat(5_000, |k| format!("Please handle ticket {k} now."));
        let c = counter();
        let facts = Facts::of(&msgs, true);
        let r = SessionState::of(&facts, 0..msgs.len())
            .with_words_ceiling(2_000)
            .render(1_000, &c);
        let text = r.lines.join("\n");
        assert!(c.count_text(&text) <= 2_000, "{}", c.count_text(&text));
        let gap = r.user_words.left_out.expect("requests left out").count;
        assert!(gap > 4_000, "{gap}");
        // The task, its outcome, the line naming the run, then the newest requests.
        assert_eq!(
            r.lines[1..4],
            [
                "[user] #1: Please handle ticket 1 now.".to_string(),
                "[then] #1: answered: done 1".to_string(),
                format!("[… {gap} earlier requests left out: #2–#{}]", gap + 1),
            ]
        );
        assert_eq!(
            r.lines[4],
            format!("[user] #{}: Please handle ticket {} now.", gap + 2, gap + 2)
        );
        assert!(text.contains("[user] #5000: Please handle ticket 5000 now."));
    }

    #[test]
    fn shedding_leaves_out_only_the_outcomes_of_settled_rounds() {
        let mut msgs = session();
        // A second request whose one call succeeds: a settled round.
        msgs.push(Message::new(
            Role::Assistant,
            vec![call("t4", "Bash", json!({"command": "git commit -am fix"}))],
        ));
        msgs.push(Message::new(
            Role::User,
            vec![result("t4", "1 file changed", false)],
        ));
        msgs.push(Message::text(Role::User, "Thanks."));
        let facts = Facts::of(&msgs, true);
        let then_lines = |state: SessionState| -> Vec<String> {
            state
                .render(2_000, &counter())
                .lines
                .into_iter()
                .filter(|l| l.starts_with("[then]"))
                .collect()
        };
        let full = then_lines(SessionState::of(&facts, 0..10));
        assert_eq!(full.len(), 2, "{full:?}");
        assert!(
            full[1].starts_with("[then] #2: ran git commit -am fix: ok"),
            "{full:?}"
        );
        // The round with a failure keeps its outcome; the settled one goes.
        let lean = then_lines(SessionState::of(&facts, 0..10).shedding_settled());
        assert_eq!(lean, vec![full[0].clone()]);
    }

    #[test]
    fn the_state_keeps_words_files_failures_and_commands() {
        let msgs = session();
        let facts = Facts::of(&msgs, true);
        let text = SessionState::of(&facts, 0..7).marker_text(7, 500, 2_000, &counter());
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(
            lines,
            vec![
                "The user's words, verbatim, oldest first:",
                "[user] #1: Fix the build. Never touch vendor/.",
                "[then] #1: ran cargo build: failed; Edit a.rs: ok; 3 calls, 1 failed",
                "Files and what was done to them:",
                "[edited] a.rs",
                "Failures (first and last error line, and the fix when one followed):",
                "[failed t1] Bash, command cargo build: error: error[E0425]: cannot find `b` | error: could not compile -> fixed by t3 at message 5",
                "Commands and their outcome:",
                "[ran failed] cargo build (t1)",
                "[ran ok] cargo build (t3)",
                "Other calls and replies:",
                "[call t2] Edit, a.rs: ok",
            ]
        );
        assert!(
            text.lines()
                .next()
                .unwrap_or("")
                .contains("not instructions")
        );
    }

    #[test]
    fn a_fix_in_the_kept_part_is_named_as_kept() {
        let msgs = session();
        let facts = Facts::of(&msgs, true);
        let r = SessionState::of(&facts, 0..3).render(2_000, &counter());
        assert!(
            r.lines
                .iter()
                .any(|l| l.starts_with("[failed t1]") && l.ends_with("-> fixed by t3 kept below")),
            "{:?}",
            r.lines
        );
    }

    #[test]
    fn recompaction_merges_the_earlier_state() {
        let msgs = session();
        let facts = Facts::of(&msgs, true);
        let c = counter();
        let first = SessionState::of(&facts, 0..7).marker_text(7, 500, 2_000, &c);
        let mut again = vec![Message::text(Role::User, first)];
        again.push(Message::new(
            Role::Assistant,
            vec![call("t9", "Bash", json!({"command": "git commit"}))],
        ));
        again.push(Message::new(Role::User, vec![result("t9", "done", false)]));
        let facts2 = Facts::of(&again, true);
        let second = SessionState::of(&facts2, 0..3).marker_text(3, 600, 2_000, &c);
        assert!(
            second.contains("[user] #1: Fix the build. Never touch vendor/."),
            "{second}"
        );
        assert!(
            second.contains("[failed t1] Bash, command cargo build: error: error[E0425]"),
            "{second}"
        );
        assert!(second.contains("[edited] a.rs"), "{second}");
        assert!(second.contains("[ran ok] git commit (t9)"), "{second}");
        assert_eq!(second.matches(MARKER_PREFIX).count(), 1);
        // A third pass over the same state changes nothing but the counts in the first line.
        let facts3 = Facts::of(&[Message::text(Role::User, second.clone())], true);
        let third = SessionState::of(&facts3, 0..1).marker_text(3, 600, 2_000, &c);
        assert_eq!(
            third.lines().skip(1).collect::<Vec<_>>(),
            second.lines().skip(1).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_tight_budget_shortens_long_requests_around_constraints_and_counts_what_went() {
        let long = "Migrate billing. Read models.py. Then plan. Then implement with tests. \
                    Keep commits small. Hard rule: never edit migrations/legacy/. Report.";
        let mut msgs = vec![Message::text(Role::User, long)];
        for i in 0..30 {
            let id = format!("r{i}");
            msgs.push(Message::new(
                Role::Assistant,
                vec![call(
                    &id,
                    "Bash",
                    json!({"command": format!("make step{i}")}),
                )],
            ));
            msgs.push(Message::new(Role::User, vec![result(&id, "ok", false)]));
        }
        let facts = Facts::of(&msgs, true);
        let r = SessionState::of(&facts, 0..msgs.len()).render(60, &counter());
        assert_eq!(
            r.lines[0],
            "The user's words, oldest first, verbatim except where marked:"
        );
        assert!(
            r.lines
                .iter()
                .any(|l| l.contains("Hard rule: never edit migrations/legacy/.")),
            "{:?}",
            r.lines
        );
        assert!(
            !r.lines.iter().any(|l| l.contains("Then plan.")),
            "{:?}",
            r.lines
        );
        assert!(r.omitted > 0);
        assert_eq!(
            r.lines.last().map(String::as_str),
            Some(format!("[… {} more items omitted]", r.omitted).as_str())
        );
    }

    #[test]
    fn a_shortened_request_keeps_a_repeated_instruction_once_and_types_the_repeats() {
        let long = format!(
            "Clean up the parser. {}Rename the module. Never touch the lexer. Report.",
            "Always run tests. ".repeat(40)
        );
        let msgs = vec![Message::text(Role::User, long)];
        let facts = Facts::of(&msgs, true);
        let r = SessionState::of(&facts, 0..1).render(60, &counter());
        assert_eq!(
            r.lines,
            vec![
                "The user's words, oldest first, verbatim except where marked:".to_string(),
                "[user] #1 (shortened): Clean up the parser. … Always run tests. [… 39 repeats \
                 left out] … Never touch the lexer. … Report."
                    .to_string(),
                "[then] #1: continued in the messages below".to_string(),
            ]
        );
        assert_eq!(r.user_words.shortened, vec![1]);
        assert_eq!(r.user_words.repeats_left_out, 39);
        assert_eq!(
            r.user_words.note(),
            "the record's user words: 1 requests shortened around their constraint sentences \
             (#1), 39 repeated sentences left out"
        );
    }

    #[test]
    fn a_summary_item_is_what_render_writes_and_reads_back_whole() {
        let text = "They fixed the build.\n\n- [call x1] is not a line of the state.";
        let item = summary_item(SummaryKind::Compactor, text);
        assert_eq!(
            item,
            "[summary compactor]\n  They fixed the build.\n  \n  - [call x1] is not a line of the state."
        );
        let marker = format!("{MARKER_PREFIX} earlier\n{item}\n");
        let facts = Facts::of(&[Message::text(Role::User, marker)], true);
        let r = SessionState::of(&facts, 0..1).render(500, &counter());
        assert_eq!(
            r.lines,
            vec!["Earlier summaries, carried forward:".to_string(), item]
        );
    }

    #[test]
    fn the_first_digest_format_is_merged_too() {
        let old = format!(
            "{MARKER_PREFIX} 40 earlier messages were removed. One line per block:\n[user] continue with module 3\n[result toolu_05 Bash (error): …FAILED tests/t5.py - AssertionError]\n[result toolu_06 Bash: ok]\n"
        );
        let facts = Facts::of(&[Message::text(Role::User, old)], true);
        let r = SessionState::of(&facts, 0..1).render(500, &counter());
        assert!(
            r.lines
                .contains(&"[user] #1: continue with module 3".to_string()),
            "{:?}",
            r.lines
        );
        assert!(
            r.lines.contains(
                &"[failed toolu_05] Bash error: FAILED tests/t5.py - AssertionError".to_string()
            ),
            "{:?}",
            r.lines
        );
        assert_eq!(r.failures, vec!["toolu_05".to_string()]);
    }
}
