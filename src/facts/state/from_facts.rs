//! A state made from the facts of a span: each request with what followed it (its `[then]`
//! line), the files and what was done to them, the failures with their fix, the commands
//! deduplicated by outcome, and the other calls and replies, one line per item. Earlier
//! compactor markers in the span are merged in ([`super::merge`]).

use super::{Request, SessionState};
use crate::conversation::Outcome;
use crate::facts::{ARG_CHARS, CallFact, Facts, FailureFact, ReplyFact, SummaryKind, UserFact};
use crate::render::{clip, one_line_clipped};
use foldhash::{HashMap, HashMapExt};
use std::ops::Range;

/// Characters kept of a command or argument in a `[then]` line, and of that line.
const THEN_ARG_CHARS: usize = 60;
const THEN_CHARS: usize = 200;

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
        st.add_requests(users, calls, replies, range.end);
        for t in in_range(&facts.touches, &range, |t| t.message) {
            st.touch(t.shown.clone(), t.action);
        }
        st.add_failures(facts, &range);
        st.add_commands(calls);
        // One line per item of the range, most never shown (a render keeps what fits): each
        // is joined from its parts at its final length, not grown through `format!`.
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

    /// Each of the user's words in `users` as a request (numbered after the merged ones) with
    /// its `[then]` line: what its round of `calls` did, or the first of `replies`; a round
    /// runs to the next request, the last one to `end`.
    fn add_requests(
        &mut self,
        users: &[UserFact],
        calls: &[CallFact],
        replies: &[ReplyFact],
        end: usize,
    ) {
        let first_number = self.requests.iter().map(|r| r.number).max().unwrap_or(0) + 1;
        for (k, u) in users.iter().enumerate() {
            let end = users.get(k + 1).map_or(end, |n| n.message);
            let round = in_range(calls, &(u.message + 1..end), |c| c.message);
            let settled =
                !round.is_empty() && round.iter().all(|c| c.outcome == Some(Outcome::Success));
            let then = if round.is_empty() {
                in_range(replies, &(u.message + 1..end), |r| r.message)
                    .first()
                    .map(|r| ["answered: ", &clip(&r.line, ARG_CHARS)].concat())
                    .unwrap_or_else(|| "continued in the messages below".into())
            } else {
                round_line(round)
            };
            self.requests.push(Request {
                number: first_number + k,
                text: u.text.clone(),
                then: Some(then),
                settled,
                shortened: false,
            });
        }
    }

    /// The failures of the calls in `range` (in call order, so in message order of their
    /// calls), each with its fix.
    fn add_failures(&mut self, facts: &Facts, range: &Range<usize>) {
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
            self.failures.push((c.id.clone(), line));
        }
    }

    /// The commands of `calls`, deduplicated by (command, outcome): count and last id.
    fn add_commands(&mut self, calls: &[CallFact]) {
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
        for (cmd, word, n, id) in groups {
            let times = if n > 1 {
                format!("×{n}, last ")
            } else {
                String::new()
            };
            self.commands
                .push(["[ran ", word, "] ", cmd, " (", &times, id, ")"].concat());
        }
    }
}

/// A round's `[then]` line: its first two calls with their outcome, then how many calls it
/// made and how many failed.
fn round_line(round: &[CallFact]) -> String {
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
}

fn outcome_word(o: Option<Outcome>) -> &'static str {
    match o {
        Some(Outcome::Success) => "ok",
        Some(Outcome::Error) => "failed",
        Some(Outcome::Unknown) => "unknown",
        None => "no result",
    }
}

/// The items of `items` (in message order, by `message`) whose message is in `range`.
fn in_range<'a, T>(items: &'a [T], range: &Range<usize>, message: impl Fn(&T) -> usize) -> &'a [T] {
    let from = items.partition_point(|x| message(x) < range.start);
    let to = items.partition_point(|x| message(x) < range.end).max(from);
    &items[from..to]
}

/// `Bash, command cargo test: error: first | last -> fixed by toolu_x at message N`, from the
/// call's command and argument lines ([`crate::facts::CallFact::command_line`],
/// [`crate::facts::CallFact::argument_line`]).
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
