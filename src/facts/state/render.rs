//! A state written as lines within a budget, by the priorities of the [`super`] docs: the
//! user's words (shortened, or a run of them left out, past their room) and earlier
//! summaries, failures always, files, commands, then the rest; with the count of what was
//! left out.

use super::words::{LeftOut, UserWords, left_out_line};
use super::{Request, SHORTENED_TAG, SessionState, indent_rest};
use crate::facts::{FileAction, SummaryKind, distinct_tails, shorten_around_constraints};
use crate::tokens::TokenCounter;
use foldhash::{HashMap, HashSet, HashSetExt};
use std::collections::BTreeSet;

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

/// The running budget of one render: what the lines written so far cost, and how many items
/// were left out.
struct Budget<'a> {
    counter: &'a dyn TokenCounter,
    max_tokens: usize,
    /// Counter tokens spent (titles and the omitted-items line reserved up front).
    used: usize,
    /// Items left out (this pass and earlier ones).
    omitted: usize,
}

impl Budget<'_> {
    /// A line's cost in counter tokens: its count plus one for its line break.
    fn cost(&self, line: &str) -> usize {
        self.counter.count_text_cached(line) + 1
    }

    /// The lines of `lines` that fit, newest (last) first, in their order; each one left out
    /// counted. Once the room is small most lines cannot fit by their floor
    /// ([`TokenCounter::count_at_least`]): those are left out without tokenizing them; once
    /// it is spent (a line takes its line break at least), without reading them.
    fn pick(&mut self, lines: &[&str]) -> Vec<String> {
        let mut keep = vec![false; lines.len()];
        for (i, l) in lines.iter().enumerate().rev() {
            if self.used >= self.max_tokens
                || self.used + self.counter.count_at_least(l) + 1 > self.max_tokens
            {
                self.omitted += 1;
                continue;
            }
            let c = self.cost(l);
            if self.used + c <= self.max_tokens {
                keep[i] = true;
                self.used += c;
            } else {
                self.omitted += 1;
            }
        }
        lines
            .iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .map(|(l, _)| l.to_string())
            .collect()
    }
}

/// The user's words section of a render: its lines and what was done to the words.
struct WordsSection {
    lines: Vec<String>,
    user_words: UserWords,
}

/// Each request's lines of one render, made when first needed: with a ceiling on the words,
/// only the first request and the newest that fit are ever written, so only theirs are made.
struct RequestsLines<'s> {
    state: &'s SessionState,
    /// Each request's words whole and its `[then]` line, as made while summing (taken when its
    /// lines are made, rather than made again).
    whole: Vec<Option<(String, Option<String>)>>,
    /// The words are shortened around their constraints.
    shorten: bool,
    made: Vec<Option<RequestLines>>,
}

impl RequestsLines<'_> {
    /// The cost of request `k`'s lines, made now if they were not.
    fn cost_of(&mut self, k: usize, budget: &Budget) -> usize {
        let state = self.state;
        let (whole, shorten) = (&mut self.whole, self.shorten);
        let made = self.made[k].get_or_insert_with(|| {
            let r = &state.requests[k];
            let (summed, then) = match whole.get_mut(k).and_then(Option::take) {
                Some((line, then)) => (Some(line), then),
                None => (None, state.then_line(r)),
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
                cost: lines.iter().map(|l| budget.cost(l)).sum(),
                lines,
                shortened,
                repeats,
            }
        });
        made.cost
    }
}

impl SessionState {
    /// The lines that fit in `max_tokens` (counted with `counter`'s cache, one count per
    /// line; a path, command or other line that cannot fit by
    /// [`TokenCounter::count_at_least`] is left out uncounted), by the priorities of the
    /// session state's module docs. The user's words and failures are kept even
    /// past the limit (a long request shortened around its constraints first).
    pub fn render(&self, max_tokens: usize, counter: &dyn TokenCounter) -> Rendered {
        let mut budget = Budget {
            counter,
            max_tokens,
            used: 0,
            omitted: self.carried_omitted,
        };
        budget.used = self.reserved_cost(&budget);
        // The words' title is known once the words are: what the longer one adds is kept out of
        // the words' room, and spent when it is the one written.
        let marked_title = usize::from(!self.requests.is_empty())
            * budget
                .cost(WORDS_TITLE_MARKED)
                .saturating_sub(budget.cost(TITLES[0]));
        // Failures are kept whatever they cost: what they take is not the words' to take.
        let fails = self.failure_lines();
        let fails_cost = fails.iter().map(|l| budget.cost(l)).sum::<usize>();
        let room = self.words_ceiling.map_or(usize::MAX, |c| {
            c.saturating_sub(budget.used + fails_cost + marked_title)
        });
        // (1) the user's words.
        let words = self.words_section(&mut budget, room, marked_title);
        let sums = self.summary_lines(&mut budget);
        // (2) failures: always (their lines made above).
        budget.used += fails_cost;
        // (3) files.
        let files = self.file_lines(&mut budget);
        // (4) commands, newest first; (5) the rest, newest first.
        let commands: Vec<&str> = self.commands.iter().map(String::as_str).collect();
        let commands = budget.pick(&commands);
        let mut seen = HashSet::with_capacity(self.rest.len());
        let rest: Vec<&str> = self
            .rest
            .iter()
            .map(String::as_str)
            .filter(|l| seen.insert(*l))
            .collect();
        let rest = budget.pick(&rest);
        // The words are called verbatim only when every line of them is.
        let words_title = if words.user_words.is_verbatim() {
            TITLES[0]
        } else {
            WORDS_TITLE_MARKED
        };
        let sections = [words.lines, sums, files, fails, commands, rest];
        Rendered {
            lines: assemble(words_title, sections, budget.omitted),
            omitted: budget.omitted,
            failures: self.failures.iter().map(|(id, _)| id.clone()).collect(),
            tokens: budget.used,
            user_words: words.user_words,
        }
    }

    /// What is spent before any item: the section titles of the parts there are, and the line
    /// counting what was left out.
    fn reserved_cost(&self, budget: &Budget) -> usize {
        let present = [
            !self.requests.is_empty(),
            !self.summaries.is_empty(),
            !self.files.is_empty(),
            !self.failures.is_empty(),
            !self.commands.is_empty(),
            !self.rest.is_empty(),
        ];
        TITLES
            .iter()
            .zip(present)
            .filter(|(_, p)| *p)
            .map(|(t, _)| budget.cost(t))
            .sum::<usize>()
            + budget.cost("[… 999 more items omitted]")
    }

    /// One `[failed id] line` per failure.
    fn failure_lines(&self) -> Vec<String> {
        self.failures
            .iter()
            .map(|(id, l)| format!("[failed {id}] {l}"))
            .collect()
    }

    /// Request `r`'s `[then]` line is shed (a settled round's, when the state sheds them).
    fn shed(&self, r: &Request) -> bool {
        self.shed_settled && r.settled && r.then.is_some()
    }

    /// Request `r`'s `[then]` line; none when it has none or it is shed.
    fn then_line(&self, r: &Request) -> Option<String> {
        let t = r.then.as_ref().filter(|_| !self.shed(r))?;
        Some(format!("[then] #{}: {t}", r.number))
    }

    /// (1) The user's words: full first; shortened around constraints when they take more
    /// than half the budget; past `room` (what the ceiling leaves after the failures), the
    /// first request (the task) and the newest ones, the ones between left out by one line
    /// that names them. Spends what is written, and `marked_title` when a line is shortened
    /// or a repeat left out; counts each shed `[then]` line as omitted.
    fn words_section(&self, budget: &mut Budget, room: usize, marked_title: usize) -> WordsSection {
        // A shed `[then]` line is counted as omitted whether or not its request is written.
        budget.omitted += self.requests.iter().filter(|r| self.shed(r)).count();
        let mut lines = self.requests_lines(budget, room);
        let (keep, left_out) = Self::kept_requests(&mut lines, budget, room);
        let n = self.requests.len();
        for k in (0..n).filter(|&k| keep[k]) {
            lines.cost_of(k, budget);
        }
        let words: Vec<Option<RequestLines>> = lines
            .made
            .into_iter()
            .zip(&keep)
            .map(|(w, &kept)| w.filter(|_| kept))
            .collect();
        let user_words = self.user_words(&words, &left_out);
        // The longer title is spent for a shortened line or a repeat left out (a left-out run
        // alone does not spend it, as before the split).
        if !user_words.shortened.is_empty() || user_words.repeats_left_out > 0 {
            budget.used += marked_title;
        }
        let mut head = Vec::new();
        // The line naming the left-out run, after the first request (alone when there is none).
        let mut run_line = user_words.left_out.map(left_out_line);
        for (k, w) in words.into_iter().enumerate() {
            if let Some(w) = w {
                budget.used += w.cost;
                head.extend(w.lines);
            }
            if k == 0
                && let Some(l) = run_line.take()
            {
                budget.used += budget.cost(&l);
                head.push(l);
            }
        }
        if let Some(l) = run_line {
            budget.used += budget.cost(&l);
            head.push(l);
        }
        WordsSection {
            lines: head,
            user_words,
        }
    }

    /// The requests' lines to be made, with each one's words whole summed first: shortened
    /// when the words whole take more than half the budget, or more than `room` with their
    /// `[then]` lines, summed until either is known (the sums only grow).
    fn requests_lines(&self, budget: &Budget, room: usize) -> RequestsLines<'_> {
        let n = self.requests.len();
        let mut whole: Vec<Option<(String, Option<String>)>> = Vec::with_capacity(n);
        let (mut full_cost, mut then_cost) = (0usize, 0usize);
        let mut shorten = false;
        for r in &self.requests {
            let line = user_line(r, &r.text, r.shortened);
            let then = self.then_line(r);
            full_cost += budget.cost(&line);
            then_cost += then.as_deref().map_or(0, |l| budget.cost(l));
            whole.push(Some((line, then)));
            if full_cost.saturating_mul(2) > budget.max_tokens
                || full_cost.saturating_add(then_cost) > room
            {
                shorten = true;
                break;
            }
        }
        RequestsLines {
            state: self,
            whole,
            shorten,
            made: (0..n).map(|_| None).collect(),
        }
    }

    /// Which requests are kept (all, or the first and the newest that fit in `room` after it;
    /// whether all fit is summed until it is known), and the numbers of those left out.
    fn kept_requests(
        lines: &mut RequestsLines,
        budget: &Budget,
        room: usize,
    ) -> (Vec<bool>, Vec<usize>) {
        let state = lines.state;
        let requests = &state.requests;
        let n = requests.len();
        let mut total = 0usize;
        let over = (0..n).any(|k| {
            total += lines.cost_of(k, budget);
            total > room
        });
        let mut keep = vec![true; n];
        let mut left_out: Vec<usize> = Vec::new();
        if over && n > 2 {
            let gap = budget.cost("[… 99999 earlier requests left out: #99999–#99999]");
            let mut spent = lines.cost_of(0, budget) + gap;
            let mut newest = n;
            while newest > 1 && spent + lines.cost_of(newest - 1, budget) <= room {
                newest -= 1;
                spent += lines.cost_of(newest, budget);
            }
            // At least the newest request, whatever it costs.
            newest = newest.min(n - 1).max(1);
            for (k, r) in requests.iter().enumerate().take(newest).skip(1) {
                keep[k] = false;
                left_out.push(r.number);
            }
        }
        (keep, left_out)
    }

    /// What the written `words` (one per request, none when left out) did to the user's
    /// words, with the run `left_out` this pass joined to the one earlier records left out.
    fn user_words(&self, words: &[Option<RequestLines>], left_out: &[usize]) -> UserWords {
        let kept = || {
            self.requests
                .iter()
                .zip(words)
                .filter_map(|(r, w)| Some((r, w.as_ref()?)))
        };
        let this_pass = match (left_out.first(), left_out.last()) {
            (Some(&first), Some(&last)) => Some(LeftOut {
                count: left_out.len(),
                first,
                last,
            }),
            _ => None,
        };
        UserWords {
            shortened: kept()
                .filter(|(_, w)| w.shortened)
                .map(|(r, _)| r.number)
                .collect(),
            // One run with what earlier records left out (they left out the requests after
            // their first, so the runs meet).
            left_out: match (self.carried_left_out, this_pass) {
                (Some(c), Some(t)) => Some(c.joined(t)),
                (c, t) => c.or(t),
            },
            repeats_left_out: kept().map(|(_, w)| w.repeats).sum(),
        }
    }

    /// Earlier summaries, carried forward whole (each a [`summary_item`]).
    fn summary_lines(&self, budget: &mut Budget) -> Vec<String> {
        let mut sums = Vec::new();
        for (kind, text) in &self.summaries {
            let l = summary_item(*kind, text);
            budget.used += budget.cost(&l);
            sums.push(l);
        }
        sums
    }

    /// (3) Files: writes first, then reads; each path once per bucket, as many as fit per
    /// bucket line and the rest counted ([`Self::shown_paths`] says in which form).
    fn file_lines(&self, budget: &mut Budget) -> Vec<String> {
        let short = self.shown_paths(budget);
        let form = |p: &str| -> String {
            short
                .as_ref()
                .and_then(|m| m.get(p))
                .cloned()
                .unwrap_or_else(|| p.to_string())
        };
        let mut files = Vec::new();
        for action in [
            FileAction::Created,
            FileAction::Edited,
            FileAction::Deleted,
            FileAction::Read,
            FileAction::Searched,
        ] {
            let paths: Vec<String> = self
                .files
                .iter()
                .filter(|(_, a)| a.contains(&action) && (is_write(action) || !has_write(a)))
                .map(|(p, _)| form(p))
                .collect();
            if paths.is_empty() {
                continue;
            }
            // As many paths as fit, the rest counted.
            let mut kept: Vec<&str> = Vec::new();
            let mut line_cost = budget.cost(&format!("[{}] ", action.word()));
            let max_tokens = budget.max_tokens;
            for p in &paths {
                // A path that cannot fit by its floor is not counted (nor read once the room
                // is spent: a path takes its separator at least).
                if budget.used + line_cost >= max_tokens
                    || budget.used + line_cost + budget.counter.count_at_least(p) + 1 > max_tokens
                {
                    budget.omitted += 1;
                    continue;
                }
                let c = budget.cost(p);
                if budget.used + line_cost + c <= max_tokens {
                    kept.push(p.as_str());
                    line_cost += c;
                } else {
                    budget.omitted += 1;
                }
            }
            if !kept.is_empty() {
                budget.used += line_cost;
                files.push(format!("[{}] {}", action.word(), kept.join(", ")));
            }
        }
        files
    }

    /// The form each path is shown in: whole (`None`) when every one fits; else each by its
    /// shortest tail that keeps its folder and tells it apart from the state's other paths
    /// ([`distinct_tails`]), so more of them fit.
    fn shown_paths(&self, budget: &Budget) -> Option<HashMap<&str, String>> {
        let whole_cost: usize = self
            .files
            .iter()
            .map(|(p, a)| {
                // The buckets it is written in: each write, else each kind of read.
                let writes = a.iter().filter(|x| is_write(**x)).count();
                let buckets = if writes > 0 { writes } else { a.len() };
                buckets * budget.cost(p)
            })
            .sum();
        (budget.used + whole_cost > budget.max_tokens).then(|| {
            let all: Vec<&str> = self.files.iter().map(|(p, _)| p.as_str()).collect();
            all.iter().copied().zip(distinct_tails(&all)).collect()
        })
    }
}

/// `action` writes the file (created, edited, deleted).
fn is_write(action: FileAction) -> bool {
    matches!(
        action,
        FileAction::Created | FileAction::Edited | FileAction::Deleted
    )
}

/// Some action of `actions` writes the file.
fn has_write(actions: &BTreeSet<FileAction>) -> bool {
    actions.iter().any(|a| is_write(*a))
}

/// The marker's body: each non-empty section under its title (the words' under `words_title`,
/// the others under [`TITLES`]'), then the count of items omitted when there are any.
fn assemble(words_title: &str, sections: [Vec<String>; 6], omitted: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for (title, items) in std::iter::once(&words_title)
        .chain(&TITLES[1..])
        .zip(sections)
    {
        if !items.is_empty() {
            lines.push(title.to_string());
            lines.extend(items);
        }
    }
    if omitted > 0 {
        lines.push(format!("[… {omitted} more items omitted]"));
    }
    lines
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

/// `[user] #N: text`, or `[user] #N (shortened): text` when `text` is not the request whole.
fn user_line(r: &Request, text: &str, shortened: bool) -> String {
    let tag = if shortened { SHORTENED_TAG } else { "" };
    format!("[user] #{}{tag}: {}", r.number, indent_rest(text))
}
