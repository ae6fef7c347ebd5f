//! The A/B verdict: for each file and budget, and over all files, the cheapest strategy that
//! stayed valid and kept fidelity, and by how much it beats sending the history as it is.
//!
//! ```text
//! a row qualifies: it ran; every output and replayed request valid; the whole-transcript
//!                  compaction within the budget; no replayed call over the budget; fidelity
//!                  within FIDELITY_SLACK of the best qualifying fidelity at that budget
//! verdict        : the qualifying row of least replay cost; its cost vs `none` (the baseline)
//!                  and vs the next qualifying row
//! overall        : per budget, the strategy of least summed cost among those that qualified
//!                  on every file where any strategy ran
//! ```

use super::{AbReport, FileResult, Row};
use serde::Serialize;

/// How far under the best fidelity at a budget a strategy may be and still count as keeping
/// fidelity (a share: 0.05 = 5 points).
pub const FIDELITY_SLACK: f64 = 0.05;

/// The verdict for one file (or all files) at one budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The budget in model tokens.
    pub budget: usize,
    /// The cheapest qualifying strategy, if any qualified.
    pub winner: Option<String>,
    /// Its replay cost, in USD.
    pub cost: f64,
    /// The baseline's (`none`) replay cost, in USD.
    pub baseline: f64,
    /// The next cheapest qualifying strategy and its cost.
    pub next: Option<(String, f64)>,
    /// The strategies that did not qualify, each with why.
    pub disqualified: Vec<(String, String)>,
}

impl Verdict {
    /// One line: `at 50,000: truncate, $0.99 (-12.3% vs none; microcompact $1.02, +3.0%)`.
    pub fn line(&self) -> String {
        let budget = crate::strategy::thousands(self.budget);
        let Some(w) = &self.winner else {
            return format!(
                "at {budget}: no strategy stayed valid, within the budget and faithful"
            );
        };
        let vs = |a: f64, b: f64| {
            if b > 0.0 {
                format!("{:+.1}%", 100.0 * (a - b) / b)
            } else {
                "–".to_string()
            }
        };
        let next = self.next.as_ref().map_or(String::new(), |(n, c)| {
            format!("; next {n} ${c:.4}, {} more", vs(*c, self.cost))
        });
        format!(
            "at {budget}: {w}, ${:.4} ({} vs none ${:.4}{next})",
            self.cost,
            vs(self.cost, self.baseline),
            self.baseline
        )
    }
}

/// Why `row` does not qualify (before the fidelity comparison), or `None`.
fn unfit(row: &Row) -> Option<String> {
    if let Some(why) = &row.skipped {
        return Some(format!("skipped: {why}"));
    }
    let (Some(c), Some(r)) = (&row.compaction, &row.replay) else {
        return Some("did not run".into());
    };
    if !c.violations.is_empty() || r.invalid_requests > 0 {
        return Some("invalid output".into());
    }
    if c.status.starts_with("error") || r.errors > 0 {
        return Some("refused the input".into());
    }
    if c.status == "over_budget" || r.over_budget > 0 {
        return Some(format!("over budget ({} calls)", r.over_budget));
    }
    None
}

/// The verdicts of one file, one per budget in the order the rows come.
pub fn of_file(f: &FileResult) -> Vec<Verdict> {
    let baseline = f.baseline.as_ref().map_or(0.0, |b| b.cost_usd);
    let mut budgets: Vec<usize> = Vec::new();
    for r in &f.rows {
        if !budgets.contains(&r.budget) {
            budgets.push(r.budget);
        }
    }
    budgets
        .into_iter()
        .map(|budget| {
            let rows: Vec<&Row> = f.rows.iter().filter(|r| r.budget == budget).collect();
            let mut disqualified = Vec::new();
            let fit: Vec<&Row> = rows
                .iter()
                .copied()
                .filter(|r| match unfit(r) {
                    Some(why) => {
                        disqualified.push((r.strategy.clone(), why));
                        false
                    }
                    None => true,
                })
                .collect();
            let fidelity = |r: &Row| {
                r.compaction
                    .as_ref()
                    .and_then(|c| c.fidelity)
                    .unwrap_or(1.0)
            };
            let best = fit.iter().map(|r| fidelity(r)).fold(0.0, f64::max);
            let mut kept: Vec<(String, f64)> = Vec::new();
            for r in fit {
                if fidelity(r) + FIDELITY_SLACK < best {
                    disqualified.push((
                        r.strategy.clone(),
                        format!(
                            "fidelity {:.1}% < best {:.1}%",
                            100.0 * fidelity(r),
                            100.0 * best
                        ),
                    ));
                } else {
                    let cost = r.replay.as_ref().map_or(f64::INFINITY, |s| s.cost_usd);
                    kept.push((r.strategy.clone(), cost));
                }
            }
            kept.sort_by(|a, b| a.1.total_cmp(&b.1));
            let mut kept = kept.into_iter();
            let first = kept.next();
            Verdict {
                budget,
                cost: first.as_ref().map_or(0.0, |w| w.1),
                winner: first.map(|w| w.0),
                baseline,
                next: kept.next(),
                disqualified,
            }
        })
        .collect()
}

/// The verdicts over all files, one per budget: among the strategies that won or qualified on
/// every file where any strategy qualified, the one of least summed replay cost.
pub fn overall(r: &AbReport) -> Vec<Verdict> {
    let mut budgets: Vec<usize> = Vec::new();
    for row in r.files.iter().flat_map(|f| &f.rows) {
        if !budgets.contains(&row.budget) {
            budgets.push(row.budget);
        }
    }
    budgets
        .into_iter()
        .map(|budget| {
            let mut totals: Vec<(String, f64, bool)> = r
                .strategies
                .iter()
                .map(|s| (s.clone(), 0.0, true))
                .collect();
            let mut baseline = 0.0;
            for f in &r.files {
                let Some(v) = of_file(f).into_iter().find(|v| v.budget == budget) else {
                    continue;
                };
                if v.winner.is_none() {
                    continue;
                }
                baseline += v.baseline;
                for (name, total, ok) in &mut totals {
                    let out = v.disqualified.iter().any(|(s, _)| s == name);
                    let cost = f
                        .rows
                        .iter()
                        .find(|row| row.budget == budget && &row.strategy == name)
                        .and_then(|row| row.replay.as_ref())
                        .map(|s| s.cost_usd);
                    match cost {
                        Some(c) if !out => *total += c,
                        _ => *ok = false,
                    }
                }
            }
            let disqualified = totals
                .iter()
                .filter(|t| !t.2)
                .map(|t| (t.0.clone(), "did not qualify on every file".to_string()))
                .collect();
            let mut kept: Vec<(String, f64)> = totals
                .into_iter()
                .filter(|t| t.2)
                .map(|t| (t.0, t.1))
                .collect();
            kept.sort_by(|a, b| a.1.total_cmp(&b.1));
            let mut kept = kept.into_iter();
            let first = kept.next();
            Verdict {
                budget,
                cost: first.as_ref().map_or(0.0, |w| w.1),
                winner: first.map(|w| w.0),
                baseline,
                next: kept.next(),
                disqualified,
            }
        })
        .collect()
}
