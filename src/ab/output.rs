//! The A/B report as tables: aligned text for the terminal, Markdown, and the cells the HTML page
//! reuses. Rendering without wall times ([`Timing::Hide`]) gives a deterministic text for
//! snapshots.

use super::probes::{PROBE_NAMES, Survival};
use super::{AbReport, FileResult, Row};
use crate::strategy::thousands;

/// Whether wall times appear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// Add the `ms` columns.
    Show,
    /// Leave them out (deterministic output).
    Hide,
}

/// A table: a title, a header row and rows of cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Table {
    /// Its title.
    pub title: String,
    /// Column names.
    pub header: Vec<String>,
    /// Rows of cells, as many as the header.
    pub rows: Vec<Vec<String>>,
    /// What each column means (`column: meaning`), shown under the table.
    pub notes: Vec<String>,
}

impl Table {
    fn new(title: &str, header: &[&str]) -> Table {
        Table {
            title: title.into(),
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn explained(mut self, notes: &[&str]) -> Table {
        self.notes = notes.iter().map(|s| s.to_string()).collect();
        self
    }

    /// A Markdown table under a `###` title (pipes in cells escaped).
    pub fn markdown(&self) -> String {
        let esc = |s: &String| s.replace('|', "\\|");
        let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
        let mut out = format!("### {}\n\n", self.title);
        out += &line(self.header.iter().map(esc).collect());
        out += &line(self.header.iter().map(|_| "---".to_string()).collect());
        for r in &self.rows {
            out += &line(r.iter().map(esc).collect());
        }
        if !self.notes.is_empty() {
            out += "\n";
            for n in &self.notes {
                out += &format!("- {n}\n");
            }
        }
        out
    }

    /// Columns aligned with spaces, for a terminal.
    pub fn text(&self) -> String {
        let width = |i: usize| {
            self.rows
                .iter()
                .map(|r| r[i].chars().count())
                .chain([self.header[i].chars().count()])
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..self.header.len()).map(width).collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
                .collect();
            padded.join("  ").trim_end().to_string() + "\n"
        };
        let mut out = format!("{}\n", self.title);
        out += &line(&self.header);
        out += &line(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>());
        for r in &self.rows {
            out += &line(r);
        }
        out
    }
}

fn pct(x: f64) -> String {
    format!("{x:.1}%")
}

fn ms(x: f64) -> String {
    format!("{x:.0}")
}

const DASH: &str = "–";

/// The report's tables: the verdict, skipped files, whole-transcript compaction (figures, then
/// the probes), how the probes matched, session replay. Each is a few columns wide and says
/// what its columns mean ([`Table::notes`]).
pub(crate) fn tables(r: &AbReport, timing: Timing) -> Vec<Table> {
    let show = timing == Timing::Show;
    let mut skipped = Table::new("Skipped files", &["file", "reason"]);
    for f in r.files.iter().filter(|f| f.skipped.is_some()) {
        skipped.rows.push(vec![
            f.name.clone(),
            format!("skipped: {}", f.skipped.clone().unwrap_or_default()),
        ]);
    }
    let mut head = vec![
        "file",
        "strategy",
        "budget",
        "tokens before",
        "after",
        "saved",
        "status",
        "valid",
        "fidelity",
    ];
    if show {
        head.push("ms");
    }
    let mut compaction = Table::new("Whole transcript compacted once", &head).explained(&[
        "tokens before / after: the transcript's tokens in the model's tokens (its [tokens.models] rule), before and after one compaction at the budget",
        "saved: the share of tokens the compaction removed",
        "status: the report's status and the tiers that ran; OVER BUDGET marks an output still over the budget",
        "valid: whether the guard accepts the output (provider rules and what must be kept)",
        "fidelity: the mean share of the probes (next table) the output still tells",
    ]);
    let mut head = vec!["file", "strategy", "budget"];
    head.extend(PROBE_NAMES.iter().map(|(_, h)| *h));
    let mut kept = Table::new("What the compaction kept (probes found / probes)", &head).explained(&[
        "each cell: probes of the original history the output still tells / probes there were (– none to probe)",
        "paths, edited: files touched and files edited, by name in a file or edit context",
        "commands: commands run, with their outcome; failures: failed calls with their id and error text; fixes: a failure told with its later fix",
        "user messages, instructions: the user's words, attributed to the user; identifiers: ids and names verbatim; last request: the newest user request verbatim",
    ]);
    let mut head = vec![
        "file",
        "strategy",
        "budget",
        "calls",
        "tokens sent",
        "vs none",
        "prefix changes",
        "cached",
        "over budget",
        "cost USD",
        "valid",
    ];
    if show {
        head.push("ms");
    }
    let mut replay = Table::new("Session replay (one compactor per session)", &head).explained(&[
        "calls: model calls replayed (each assistant turn is one call)",
        "tokens sent: input tokens of every call, in the model's tokens (none, the baseline, counted in the same units)",
        "vs none: tokens sent as a share of the baseline's",
        "prefix changes: calls whose request does not start with the previous request (a prompt-cache rewrite)",
        "cached: share of the input read from the prompt cache (the prefix shared with the previous call)",
        "over budget: calls whose request was still over the budget (OVER marks the row)",
        "cost USD: each call's cached prefix at the cache-read price, the rest at the cache-write price, its output at the output price, plus summary calls",
        "valid: every replayed request accepted by the guard",
    ]);
    for f in r.files.iter().filter(|f| f.skipped.is_none()) {
        if let Some(b) = &f.baseline {
            let mut cells = vec![
                f.name.clone(),
                "none".into(),
                DASH.into(),
                calls_cell(b),
                thousands(b.tokens_sent),
                DASH.into(),
                b.prefix_changes.to_string(),
                pct(b.cached_pct()),
                DASH.into(),
                format!("{:.4}", b.cost_usd),
                DASH.into(),
            ];
            if show {
                cells.push(ms(b.millis));
            }
            replay.rows.push(cells);
        }
        for row in &f.rows {
            compaction.rows.push(compaction_cells(f, row, show));
            kept.rows.push(probe_cells(f, row));
            replay.rows.push(replay_cells(f, row, show));
        }
    }
    let mut out = vec![verdicts(r), presets(r)];
    if !skipped.rows.is_empty() {
        out.push(skipped);
    }
    out.push(compaction);
    out.push(kept);
    out.push(matches(r));
    out.push(replay);
    out
}

/// The benchmark of each preset over all files at each budget: replay cost and tokens against
/// the baseline, prefix reuse, over-budget calls and mean fidelity.
pub(crate) fn presets(r: &AbReport) -> Table {
    let mut t = Table::new(
        "Per preset over all files (the cost benchmark)",
        &["strategy", "budget", "cost USD", "vs none", "tokens sent", "vs none", "prefix reuse", "over budget", "fidelity"],
    )
    .explained(&[
        "cost USD, tokens sent: summed over the files' session replays (none: the history sent as it is, same units)",
        "prefix reuse: replayed calls after the first whose request starts with the previous request (the prompt cache reads it)",
        "over budget: replayed calls still over the budget, summed; fidelity: the mean over the files of the whole-transcript compaction's fidelity",
    ]);
    let files = || r.files.iter().filter(|f| f.skipped.is_none());
    let base_cost: f64 = files()
        .filter_map(|f| f.baseline.as_ref())
        .map(|b| b.cost_usd)
        .sum();
    let base_tokens: usize = files()
        .filter_map(|f| f.baseline.as_ref())
        .map(|b| b.tokens_sent)
        .sum();
    let vs = |a: f64, b: f64| {
        if b > 0.0 {
            pct(100.0 * a / b)
        } else {
            DASH.into()
        }
    };
    t.rows.push(vec![
        "none".into(),
        DASH.into(),
        format!("{base_cost:.4}"),
        DASH.into(),
        thousands(base_tokens),
        DASH.into(),
        DASH.into(),
        DASH.into(),
        DASH.into(),
    ]);
    let mut keys: Vec<(String, usize)> = Vec::new();
    for row in files().flat_map(|f| &f.rows) {
        let k = (row.strategy.clone(), row.budget);
        if row.replay.is_some() && !keys.contains(&k) {
            keys.push(k);
        }
    }
    for (strategy, budget) in keys {
        let rows: Vec<&Row> = files()
            .flat_map(|f| &f.rows)
            .filter(|x| x.strategy == strategy && x.budget == budget)
            .collect();
        let replays = rows.iter().filter_map(|x| x.replay.as_ref());
        let (mut cost, mut tokens, mut calls, mut changes, mut over) = (0.0, 0, 0, 0, 0);
        for s in replays {
            cost += s.cost_usd;
            tokens += s.tokens_sent;
            calls += s.calls_replayed.saturating_sub(1);
            changes += s.prefix_changes;
            over += s.over_budget;
        }
        let fid: Vec<f64> = rows
            .iter()
            .filter_map(|x| x.compaction.as_ref().and_then(|c| c.fidelity))
            .collect();
        let fidelity = match fid.len() {
            0 => DASH.into(),
            n => pct(100.0 * fid.iter().sum::<f64>() / n as f64),
        };
        let reuse = match calls {
            0 => DASH.into(),
            n => pct(100.0 * (n - changes.min(n)) as f64 / n as f64),
        };
        t.rows.push(vec![
            strategy,
            thousands(budget),
            format!("{cost:.4}"),
            vs(cost, base_cost),
            thousands(tokens),
            vs(tokens as f64, base_tokens as f64),
            reuse,
            match over {
                0 => "0".into(),
                n => format!("OVER {n}"),
            },
            fidelity,
        ]);
    }
    t
}

/// The verdict table: over all files first, then per file and budget.
pub(crate) fn verdicts(r: &AbReport) -> Table {
    let mut t = Table::new(
        "Verdict: the cheapest strategy that stayed valid and kept fidelity",
        &["file", "budget", "verdict"],
    )
    .explained(&[
        "a strategy qualifies when every output and replayed request is valid, nothing is over the budget, and its fidelity is within 5 points of the best qualifying one",
        "verdict: the qualifying strategy of least replay cost, its cost against none (the history sent as it is) and the next qualifying strategy",
        "all files: the strategy of least summed cost among those that qualified on every file",
    ]);
    for v in super::verdict::overall(r) {
        t.rows
            .push(vec!["all files".into(), thousands(v.budget), v.line()]);
    }
    for f in r.files.iter().filter(|f| f.skipped.is_none()) {
        for v in super::verdict::of_file(f) {
            t.rows
                .push(vec![f.name.clone(), thousands(v.budget), v.line()]);
        }
    }
    t
}

/// How the probes matched, summed over the files, per strategy and budget: `kept` (the original
/// block is in the output), `line` (a text line tells it with its context), `shortened`,
/// `verbatim`, and `stale` (a failure told without its later fix).
fn matches(r: &AbReport) -> Table {
    let mut head = vec!["strategy", "budget"];
    head.extend(PROBE_NAMES.iter().map(|(_, h)| *h));
    let mut t = Table::new("How the probes matched (all files)", &head).explained(&[
        "kept: the original block is in the output; line: a text line tells it with its context; shortened: kept but cut; verbatim: a user message word for word; stale: a failure told without its later fix",
    ]);
    let mut keys: Vec<(String, usize)> = Vec::new();
    for row in r.files.iter().flat_map(|f| &f.rows) {
        let k = (row.strategy.clone(), row.budget);
        if row.compaction.is_some() && !keys.contains(&k) {
            keys.push(k);
        }
    }
    for (strategy, budget) in keys {
        let mut sums: Vec<Survival> = Vec::new();
        let rows = r.files.iter().flat_map(|f| &f.rows);
        for c in rows
            .filter(|row| row.strategy == strategy && row.budget == budget)
            .filter_map(|row| row.compaction.as_ref())
        {
            for s in &c.survival {
                match sums.iter_mut().find(|x| x.probe == s.probe) {
                    Some(x) => {
                        for (h, n) in &s.how {
                            *x.how.entry(*h).or_insert(0) += n;
                        }
                    }
                    None => sums.push(s.clone()),
                }
            }
        }
        let mut cells = vec![strategy, thousands(budget)];
        for (name, _) in PROBE_NAMES {
            let cell = sums
                .iter()
                .find(|s| s.probe == *name)
                .map(Survival::how_cell)
                .filter(|c| !c.is_empty());
            cells.push(cell.unwrap_or_else(|| DASH.into()));
        }
        t.rows.push(cells);
    }
    t
}

fn calls_cell(s: &super::ReplayStats) -> String {
    if s.calls_replayed < s.calls_total {
        format!("{} of {}", s.calls_replayed, s.calls_total)
    } else {
        s.calls_total.to_string()
    }
}

/// A row for a strategy that did not run: the reason goes in column `at` (the status column,
/// or the last one), so the number columns stay narrow.
fn skipped_cells(f: &FileResult, row: &Row, reason: &str, width: usize, at: usize) -> Vec<String> {
    let mut cells = vec![f.name.clone(), row.strategy.clone(), thousands(row.budget)];
    cells.resize(width, DASH.into());
    cells[at.min(width - 1)] = format!("skipped: {reason}");
    cells
}

fn probe_cells(f: &FileResult, row: &Row) -> Vec<String> {
    let mut cells = vec![f.name.clone(), row.strategy.clone(), thousands(row.budget)];
    match &row.compaction {
        Some(c) => cells.extend(c.survival.iter().map(Survival::cell)),
        None => cells.resize(3 + PROBE_NAMES.len(), DASH.into()),
    }
    cells
}

fn compaction_cells(f: &FileResult, row: &Row, show: bool) -> Vec<String> {
    let width = 9 + usize::from(show);
    let Some(c) = &row.compaction else {
        let reason = row.skipped.clone().unwrap_or_default();
        return skipped_cells(f, row, &reason, width, 6);
    };
    let status = match c.applied.as_str() {
        "none" => c.status.clone(),
        applied => format!("{} by {applied}", c.status),
    };
    let status = match c.status == "over_budget" {
        true => format!("OVER BUDGET: {status}"),
        false => status,
    };
    let mut cells = vec![
        f.name.clone(),
        row.strategy.clone(),
        thousands(row.budget),
        thousands(c.tokens_before),
        thousands(c.tokens_after),
        pct(c.reduction_pct()),
        status,
        if c.violations.is_empty() {
            "yes".into()
        } else {
            format!("NO ({})", c.violations.len())
        },
    ];
    cells.push(c.fidelity.map_or_else(|| DASH.into(), |x| pct(100.0 * x)));
    if show {
        cells.push(ms(c.millis));
    }
    cells
}

fn replay_cells(f: &FileResult, row: &Row, show: bool) -> Vec<String> {
    let width = 11 + usize::from(show);
    let Some(s) = &row.replay else {
        let reason = row.skipped.clone().unwrap_or_default();
        return skipped_cells(f, row, &reason, width, width - 1);
    };
    let vs = f.baseline.as_ref().map_or_else(
        || DASH.into(),
        |b| {
            if b.tokens_sent == 0 {
                DASH.into()
            } else {
                pct(100.0 * s.tokens_sent as f64 / b.tokens_sent as f64)
            }
        },
    );
    let mut cells = vec![
        f.name.clone(),
        row.strategy.clone(),
        thousands(row.budget),
        calls_cell(s),
        thousands(s.tokens_sent),
        vs,
        s.prefix_changes.to_string(),
        pct(s.cached_pct()),
        match s.over_budget {
            0 => "0".to_string(),
            n => format!("OVER {n}"),
        },
        format!("{:.4}", s.cost_usd),
        if s.invalid_requests == 0 {
            "yes".into()
        } else {
            format!("NO ({})", s.invalid_requests)
        },
    ];
    if show {
        cells.push(ms(s.millis));
    }
    cells
}

/// The lines above the tables: what ran, with which settings, and the guard's verdict.
pub(crate) fn preamble(r: &AbReport, timing: Timing) -> Vec<String> {
    let o = &r.options;
    let budgets: Vec<String> = o.budgets.iter().map(|b| thousands(*b)).collect();
    let loaded = r.files.iter().filter(|f| f.skipped.is_none()).count();
    let (valid, total) = r.validity();
    let share = if total == 0 {
        100.0
    } else {
        100.0 * valid as f64 / total as f64
    };
    let mut lines = vec![
        format!(
            "Strategies: {}. Budgets: {} tokens (a case file also runs at its own budget).",
            r.strategies.join(", "),
            budgets.join(", ")
        ),
        format!(
            "Files: {} given, {loaded} run, {} skipped.",
            r.files.len(),
            r.files.len() - loaded
        ),
        format!(
            "Replay: each assistant turn is one model call; at most {} calls per file, evenly \
             spaced. Tokens are the model's (the [tokens.models] rule of the session's model), \
             the baseline's too. Each call reads the prefix it shares with the previous call \
             from the prompt cache and writes the rest; prices are the [models] table's for the \
             session's model, else (USD per million tokens) input {:.2}, cache write {:.2}, \
             cache read {:.2}, output {:.2}.",
            o.replay_cap,
            o.prices.input,
            o.prices.cache_write,
            o.prices.cache_read,
            o.prices.output
        ),
        "Fidelity: the mean share of each probe of the original history the output tells with \
         its meaning: a touched path or edited file by name in a file / edit context, a command \
         with its outcome, a failure with its id and error text (not under `no errors`), a fix \
         with its failure (else `stale`), the user's messages and instructions attributed to the \
         user (or kept), identifiers verbatim."
            .to_string(),
        format!("Guard: {valid} of {total} compacted outputs valid ({share:.1}%)."),
    ];
    if timing == Timing::Show {
        lines.push(format!("Wall time: {:.1} s.", r.millis / 1000.0));
    }
    lines
}

/// The report as Markdown.
pub fn markdown(r: &AbReport, timing: Timing) -> String {
    let mut out = String::from("## compactor A/B\n\n");
    for l in preamble(r, timing) {
        out += &format!("{l}\n");
    }
    for t in tables(r, timing) {
        out += "\n";
        out += &t.markdown();
    }
    out
}

/// The report as aligned text for a terminal.
pub fn text(r: &AbReport, timing: Timing) -> String {
    let mut out = String::new();
    for l in preamble(r, timing) {
        out += &format!("{l}\n");
    }
    for t in tables(r, timing) {
        out += "\n";
        out += &t.text();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn tables_render_as_markdown_and_aligned_text() {
        let mut t = Table::new("T", &["a", "long header"]);
        t.rows.push(vec!["x|y".into(), "1".into()]);
        assert_eq!(
            t.markdown(),
            "### T\n\n| a | long header |\n| --- | --- |\n| x\\|y | 1 |\n"
        );
        assert_eq!(t.text(), "T\na    long header\n---  -----------\nx|y  1\n");
    }
}
