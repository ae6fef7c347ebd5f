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

impl SessionState {
    /// The lines that fit in `max_tokens` (counted with `counter`'s cache, one count per
    /// line; a path, command or other line that cannot fit by
    /// [`TokenCounter::count_at_least`] is left out uncounted), by the priorities of the
    /// session state's module docs. The user's words and failures are kept even
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
        // (3) files: writes first, then reads; each path once per bucket. Whole paths when
        // every one fits; else each by its shortest tail that keeps its folder and tells it
        // apart from the state's other paths ([`distinct_tails`]), so more of them fit.
        let whole_cost: usize = self
            .files
            .iter()
            .map(|(p, a)| {
                // The buckets it is written in: each write, else each kind of read.
                let writes = a
                    .iter()
                    .filter(|x| {
                        matches!(
                            x,
                            FileAction::Created | FileAction::Edited | FileAction::Deleted
                        )
                    })
                    .count();
                let buckets = if writes > 0 { writes } else { a.len() };
                buckets * (counter.count_text_cached(p) + 1)
            })
            .sum();
        let short: Option<HashMap<&str, String>> = (used + whole_cost > max_tokens).then(|| {
            let all: Vec<&str> = self.files.iter().map(|(p, _)| p.as_str()).collect();
            all.iter().copied().zip(distinct_tails(&all)).collect()
        });
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
            let write = |a: &BTreeSet<FileAction>| {
                a.contains(&FileAction::Created)
                    || a.contains(&FileAction::Edited)
                    || a.contains(&FileAction::Deleted)
            };
            let mut paths: Vec<String> = Vec::new();
            for (p, a) in &self.files {
                let here = a.contains(&action)
                    && (matches!(
                        action,
                        FileAction::Created | FileAction::Edited | FileAction::Deleted
                    ) || !write(a));
                if here {
                    paths.push(form(p));
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
                    kept.push(p.as_str());
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
