//! A/B harness: every strategy on every transcript, side by side in one process.
//!
//! ```text
//! files -> load (request body, case file, session log; unreadable => skipped with the reason)
//!       -> for each budget x strategy (own Settings, own Compactor):
//!            compact the whole transcript -> guard::validate + check_compaction -> probes survival
//!            replay the session call by call (one Compactor for the session)
//!       -> AbReport -> table / Markdown / JSON / HTML ([`output`], [`html`])
//! ```
//!
//! [`probes`] are computed once per transcript from the original history; `replay` runs once per
//! transcript without compaction (the baseline) and once per strategy and budget.

pub mod html;
pub mod output;
pub mod probes;
pub mod reference;
mod replay;
mod verdict;

#[cfg(test)]
mod fidelity_tests;

use crate::compactor::Compactor;
use crate::config::{Loader, Settings};
use crate::conversation::Conversation;
use crate::format::{self, Format};
use crate::guard::{self, ValidateOptions};
use probes::{Probes, Survival};
use replay::{Prices, ReplayStats};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Run options.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Options {
    /// Budgets in tokens; each transcript runs at each (a case file also at its own).
    pub budgets: Vec<usize>,
    /// At most this many model calls replayed per transcript, evenly spaced.
    pub replay_cap: usize,
    /// Prices for the cost estimate of a model the model table does not price.
    pub prices: Prices,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            budgets: vec![50_000, 20_000],
            replay_cap: 200,
            prices: replay::DEFAULT_PRICES,
        }
    }
}

/// A transcript to run, or why it cannot be.
#[derive(Debug, Clone)]
pub struct Transcript {
    /// The file name.
    pub name: String,
    /// The conversation and its format, or the reason it was skipped.
    pub loaded: Result<(Conversation, Format), String>,
    /// A case file's own budget.
    pub own_budget: Option<usize>,
}

impl Transcript {
    /// Loads a file: a failure case (`{"request", "format", "budget"}`), a request body or a
    /// session log. A file that cannot be loaded, or whose history the guard rejects, is kept
    /// with the reason so the report can say it was skipped.
    pub fn load(path: &Path, options: format::detect::ImportOptions) -> Transcript {
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into(),
        );
        let mut own_budget = None;
        let loaded = std::fs::read(path)
            .map_err(|e| format!("cannot read: {e}"))
            .and_then(|bytes| {
                let case: Option<serde_json::Value> = serde_json::from_slice(&bytes)
                    .ok()
                    .filter(|v: &serde_json::Value| v.get("request").is_some());
                match case {
                    Some(case) => {
                        own_budget = case
                            .get("budget")
                            .and_then(serde_json::Value::as_u64)
                            .map(|b| b as usize);
                        let hint = case
                            .get("format")
                            .and_then(serde_json::Value::as_str)
                            .map(str::parse::<Format>)
                            .transpose()?;
                        let body =
                            serde_json::to_vec(&case["request"]).map_err(|e| e.to_string())?;
                        format::load(&body, hint, options).map_err(|e| e.to_string())
                    }
                    None => format::load(&bytes, None, options).map_err(|e| e.to_string()),
                }
            })
            .and_then(|l| {
                let v = guard::validate(&l.conversation, l.format, ValidateOptions::default());
                // An old unusable image is repaired by every compaction: such an input runs.
                let v = guard::unrepaired(&l.conversation, l.format, v);
                match v.first() {
                    None => Ok((l.conversation, l.format)),
                    Some(first) => Err(format!(
                        "invalid input, compactor refuses it ({} violation(s); first: {first})",
                        v.len()
                    )),
                }
            });
        Transcript {
            name,
            loaded,
            own_budget,
        }
    }
}

/// Expands directories into their `.json`, `.jsonl`, `.yaml` and `.yml` files (sorted); files
/// are kept as given.
pub fn expand(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| {
                    f.extension().is_some_and(|x| {
                        ["json", "jsonl", "yaml", "yml"].contains(&&*x.to_string_lossy())
                    })
                })
                .collect();
            files.sort();
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// A strategy under test: a preset name or path, its settings, or why it cannot run.
#[derive(Debug, Clone)]
pub struct Arm {
    /// As given on the command line (`default`, `truncate`, `strategies/x.toml`).
    pub name: String,
    /// Settings, or the reason the strategy is skipped.
    pub settings: Result<Settings, String>,
}

impl Arm {
    /// Loads a preset with `base` (config file, env, preset dirs) and checks that it can run
    /// here. A preset that leads with the `summary` tier is a model-summary strategy: without a
    /// configured LLM it is skipped (its fallback tiers would only repeat another row).
    pub fn load(name: &str, base: &Loader) -> Arm {
        let loader = Loader {
            preset: Some(name.to_string()),
            ..base.clone()
        };
        let settings = loader.load().map_err(|e| e.to_string()).and_then(|s| {
            match Compactor::from_config(s.clone()) {
                Err(e) => Err(e.to_string()),
                Ok(c) => {
                    let leads_with_summary = s.policy.tiers.first().is_some_and(|t| t == "summary");
                    match c.skipped_tiers().iter().find(|_| leads_with_summary) {
                        Some(reason) => Err(reason.clone()),
                        None => Ok(s),
                    }
                }
            }
        });
        Arm {
            name: name.to_string(),
            settings,
        }
    }
}

/// The compaction of one whole transcript by one strategy at one budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactionResult {
    /// Tokens in.
    pub tokens_before: usize,
    /// Tokens out.
    pub tokens_after: usize,
    /// `status` of the report, or `error: …` when the compactor refused.
    pub status: String,
    /// The tiers applied (`microcompact+truncate`).
    pub applied: String,
    /// Violations the guard finds when re-run on the output (must be 0): serialized as their
    /// `PATH: WHAT` lines.
    #[serde(serialize_with = "crate::report::violation_lines")]
    pub violations: Vec<guard::Violation>,
    /// Survival of each probe.
    pub survival: Vec<Survival>,
    /// Mean share of the probes kept, when there is anything to probe.
    pub fidelity: Option<f64>,
    /// Wall time in milliseconds.
    pub millis: f64,
}

impl CompactionResult {
    /// Tokens saved, in percent of the input.
    pub fn reduction_pct(&self) -> f64 {
        if self.tokens_before == 0 {
            0.0
        } else {
            100.0 * (self.tokens_before as f64 - self.tokens_after as f64)
                / self.tokens_before as f64
        }
    }
}

/// One strategy at one budget on one transcript.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The strategy (arm name).
    pub strategy: String,
    /// The budget in tokens.
    pub budget: usize,
    /// Why the strategy did not run.
    pub skipped: Option<String>,
    /// The whole-transcript compaction.
    pub compaction: Option<CompactionResult>,
    /// The session replay.
    pub replay: Option<ReplayStats>,
}

/// Everything about one transcript.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileResult {
    /// The file name.
    pub name: String,
    /// Why it was skipped.
    pub skipped: Option<String>,
    /// Its request format.
    pub format: Option<String>,
    /// Messages in the history.
    pub messages: usize,
    /// The probes of the original history.
    pub probes: Option<Probes>,
    /// The replay without compaction.
    pub baseline: Option<ReplayStats>,
    /// Strategy x budget rows.
    pub rows: Vec<Row>,
}

/// The whole A/B run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AbReport {
    /// The options used.
    pub options: Options,
    /// The strategies, in order.
    pub strategies: Vec<String>,
    /// One entry per file, in order.
    pub files: Vec<FileResult>,
    /// Wall time of the run in milliseconds.
    pub millis: f64,
}

impl AbReport {
    /// Compacted outputs checked by the guard (whole-transcript compactions and changed replay
    /// requests) and how many of them are valid.
    pub fn validity(&self) -> (usize, usize) {
        let (mut valid, mut total) = (0, 0);
        for r in self.files.iter().flat_map(|f| &f.rows) {
            if let Some(c) = &r.compaction {
                total += 1;
                valid += usize::from(c.violations.is_empty());
            }
            if let Some(s) = &r.replay {
                total += s.calls_replayed;
                valid += s.calls_replayed - s.invalid_requests;
            }
        }
        (valid, total)
    }
}

/// Compacts `c` once with a fresh compactor and measures the output.
async fn compact_once(
    settings: &Settings,
    c: &Conversation,
    format: Format,
    budget: usize,
    probes: &Probes,
) -> Result<CompactionResult, String> {
    let compactor = Compactor::from_config(settings.clone()).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let out = compactor.compact(c, format, Some(budget)).await;
    let millis = t0.elapsed().as_secs_f64() * 1000.0;
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            let tokens = compactor.counter().count_conversation(c);
            return Ok(CompactionResult {
                tokens_before: tokens,
                tokens_after: tokens,
                status: format!("error: {e}"),
                applied: "none".into(),
                violations: Vec::new(),
                survival: probes.survival(c),
                fidelity: None,
                millis,
            });
        }
    };
    let output = out.conversation.as_ref();
    let mut violations = guard::validate(output, format, ValidateOptions::default());
    violations.extend(guard::check_compaction(c, output, format));
    let survival = probes.survival(output);
    let status = serde_json::to_value(out.report.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    Ok(CompactionResult {
        tokens_before: out.report.tokens_before,
        tokens_after: out.report.tokens_after,
        status,
        applied: out.report.applied(),
        violations,
        fidelity: probes::fidelity(&survival),
        survival,
        millis,
    })
}

/// Runs every arm on every transcript at every budget. `on_step` is called after each
/// transcript x budget x arm step (for a progress bar) with a short label.
pub async fn run(
    transcripts: &[Transcript],
    arms: &[Arm],
    options: &Options,
    on_step: &mut dyn FnMut(&str),
) -> AbReport {
    let started = Instant::now();
    // The baseline is counted and priced as the strategies are: with the first runnable
    // strategy's token rules and model table.
    let units = arms
        .iter()
        .find_map(|a| a.settings.as_ref().ok())
        .cloned()
        .unwrap_or_default();
    let units = match Compactor::from_config(units) {
        Ok(c) => c,
        Err(_) => Compactor::with_parts(
            Settings::default(),
            crate::tokens::counter_for(Default::default()),
            Vec::new(),
        ),
    };
    let mut files = Vec::new();
    for t in transcripts {
        let (c, format) = match &t.loaded {
            Err(reason) => {
                files.push(FileResult {
                    name: t.name.clone(),
                    skipped: Some(reason.clone()),
                    format: None,
                    messages: 0,
                    probes: None,
                    baseline: None,
                    rows: Vec::new(),
                });
                on_step(&t.name);
                continue;
            }
            Ok(x) => x,
        };
        let probes = Probes::of(c);
        let mut budgets = options.budgets.clone();
        if let Some(b) = t.own_budget.filter(|b| !budgets.contains(b)) {
            budgets.push(b);
        }
        let baseline = replay::replay(
            c,
            *format,
            None,
            &units,
            0,
            options.replay_cap,
            options.prices,
        )
        .await;
        let mut rows = Vec::new();
        for &budget in &budgets {
            for arm in arms {
                let mut row = Row {
                    strategy: arm.name.clone(),
                    budget,
                    skipped: None,
                    compaction: None,
                    replay: None,
                };
                match &arm.settings {
                    Err(reason) => row.skipped = Some(reason.clone()),
                    Ok(settings) => {
                        match compact_once(settings, c, *format, budget, &probes).await {
                            Err(reason) => row.skipped = Some(reason),
                            Ok(result) => row.compaction = Some(result),
                        }
                        if let Ok(session) = Compactor::from_config(settings.clone()) {
                            row.replay = Some(
                                replay::replay(
                                    c,
                                    *format,
                                    Some(&session),
                                    &session,
                                    budget,
                                    options.replay_cap,
                                    options.prices,
                                )
                                .await,
                            );
                        }
                    }
                }
                rows.push(row);
                on_step(&format!("{} {} {}", t.name, arm.name, budget));
            }
        }
        files.push(FileResult {
            name: t.name.clone(),
            skipped: None,
            format: Some(format.as_str().to_string()),
            messages: c.messages.len(),
            probes: Some(probes),
            baseline: Some(baseline),
            rows,
        });
    }
    AbReport {
        options: options.clone(),
        strategies: arms.iter().map(|a| a.name.clone()).collect(),
        files,
        millis: started.elapsed().as_secs_f64() * 1000.0,
    }
}

/// Progress steps of a run (for a progress bar's length).
pub fn steps(transcripts: &[Transcript], arms: &[Arm], options: &Options) -> u64 {
    transcripts
        .iter()
        .map(|t| match &t.loaded {
            Err(_) => 1,
            Ok(_) => {
                let extra = t.own_budget.is_some_and(|b| !options.budgets.contains(&b));
                (options.budgets.len() + usize::from(extra)) * arms.len()
            }
        })
        .sum::<usize>() as u64
}
