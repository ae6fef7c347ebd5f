//! `compactor ab`: strategies compared side by side on transcripts (compaction, fidelity
//! probes, replay), or against a reference summary at equal tokens.

use super::input::load;
use super::output::{say, write_stdout};
use super::{Failure, parse_budget};
use anyhow::Context;
use compactor::format;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The flags of `compactor ab`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Transcripts: request bodies, failure cases, session logs, or directories of them.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Strategy presets (names or paths), comma separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "default,truncate,microcompact"
    )]
    strategies: Vec<String>,
    /// A budget in tokens; repeat for several (default: 50000 and 20000).
    #[arg(long = "budget", value_parser = parse_budget)]
    budgets: Vec<usize>,
    /// Replay at most this many model calls per file, evenly spaced.
    #[arg(long, default_value_t = 200)]
    replay_cap: usize,
    /// Price of uncached input, USD per million tokens.
    #[arg(long, default_value_t = 3.00)]
    price_input: f64,
    /// Price of cached input (a cache read), USD per million tokens.
    #[arg(long, default_value_t = 0.30)]
    price_cached: f64,
    /// Price of input written to the prompt cache, USD per million tokens.
    #[arg(long, default_value_t = 3.75)]
    price_cache_write: f64,
    /// Price of output, USD per million tokens.
    #[arg(long, default_value_t = 15.00)]
    price_output: f64,
    /// Write the full report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the tables as Markdown here (`-` for stdout).
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Write an HTML report with charts here.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Leave wall times out of the tables (deterministic output).
    #[arg(long)]
    no_timings: bool,
    /// A config file (TOML), layered under every preset.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Claude Code logs: keep everything, not only what follows the last compaction.
    #[arg(long)]
    whole_log: bool,
    /// Compare with this reference summary at equal tokens: a Claude Code session log (its
    /// `isCompactSummary` message) or a compaction sub-agent log (`*_acompact_*`, its last
    /// answer). The one FILE is the session: its history before the summary is compacted
    /// by each strategy to the summary's size (see src/ab/reference.rs).
    #[arg(long)]
    reference: Option<PathBuf>,
}

/// Runs every strategy on every transcript, prints the tables and writes the reports.
pub(crate) fn run(args: Args) -> Result<ExitCode, Failure> {
    let Args {
        files,
        strategies,
        budgets,
        replay_cap,
        price_input,
        price_cached,
        price_cache_write,
        price_output,
        json,
        markdown,
        html,
        no_timings,
        config,
        whole_log,
        reference,
    } = args;
    use compactor::ab::{self, output::Timing};
    if let Some(reference) = reference {
        let base = compactor::config::Loader {
            file: config,
            ..Default::default()
        };
        return ab_reference(&files, &reference, &strategies, &base, json.as_deref());
    }
    let options = ab::Options {
        budgets: if budgets.is_empty() {
            ab::Options::default().budgets
        } else {
            budgets
        },
        replay_cap,
        prices: compactor::models::Prices {
            input: price_input,
            cache_write: price_cache_write,
            cache_read: price_cached,
            output: price_output,
        },
    };
    let base = compactor::config::Loader {
        file: config,
        ..compactor::config::Loader::from_environment()
    };
    fail_fast(&strategies, &base, &files)?;
    let arms: Vec<ab::Arm> = strategies.iter().map(|s| ab::Arm::load(s, &base)).collect();
    let transcripts = transcripts(&files, whole_log)?;
    let report = run_with_progress(&transcripts, &arms, &options)?;
    let timing = if no_timings {
        Timing::Hide
    } else {
        Timing::Show
    };
    let outputs = Outputs {
        json,
        markdown,
        html,
    };
    outputs.write(&report, timing)?;
    verdict(&report)
}

/// Fails fast (exit 2, one message) on a strategy that names no preset or a bad config, and
/// on an input that is not there, rather than print empty tables.
fn fail_fast(
    strategies: &[String],
    base: &compactor::config::Loader,
    files: &[PathBuf],
) -> Result<(), Failure> {
    for s in strategies {
        compactor::config::Loader {
            preset: Some(s.clone()),
            ..base.clone()
        }
        .load()
        .with_context(|| format!("--strategies {s}"))
        .map_err(Failure::Unreadable)?;
    }
    if let Some(missing) = files.iter().find(|f| !f.exists()) {
        return Err(Failure::Unreadable(anyhow::anyhow!(
            "{}: no such file or directory",
            missing.display()
        )));
    }
    Ok(())
}

/// The transcripts of `files` (directories listed), each loaded (a log whole when
/// `whole_log`); an error when there are none.
fn transcripts(
    files: &[PathBuf],
    whole_log: bool,
) -> Result<Vec<compactor::ab::Transcript>, Failure> {
    use compactor::ab;
    let paths = ab::expand(files)
        .context("listing inputs")
        .map_err(Failure::Unreadable)?;
    if paths.is_empty() {
        return Err(Failure::Unreadable(anyhow::anyhow!(
            "no transcripts (.json, .jsonl, .yaml) in {}",
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let import = format::detect::ImportOptions { whole_log };
    Ok(paths
        .iter()
        .map(|p| ab::Transcript::load(p, import))
        .collect())
}

/// Runs the comparison, with a progress bar on a terminal's stderr.
fn run_with_progress(
    transcripts: &[compactor::ab::Transcript],
    arms: &[compactor::ab::Arm],
    options: &compactor::ab::Options,
) -> Result<compactor::ab::AbReport, Failure> {
    use compactor::ab;
    let bar = indicatif::ProgressBar::new(ab::steps(transcripts, arms, options));
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {wide_msg}")
    {
        bar.set_style(style);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
        .map_err(Failure::Invalid)?;
    let report = runtime.block_on(ab::run(transcripts, arms, options, &mut |label| {
        bar.set_message(label.to_string());
        bar.inc(1);
    }));
    bar.finish_and_clear();
    Ok(report)
}

/// Where the reports go besides the text tables on stdout (`-`: stdout, instead of them).
struct Outputs {
    json: Option<PathBuf>,
    markdown: Option<PathBuf>,
    html: Option<PathBuf>,
}

impl Outputs {
    /// Prints the tables (unless the Markdown goes to stdout) and writes each report asked for.
    fn write(
        &self,
        report: &compactor::ab::AbReport,
        timing: compactor::ab::output::Timing,
    ) -> Result<(), Failure> {
        use compactor::ab;
        let write = |path: &Path, text: String| -> Result<(), Failure> {
            if path == Path::new("-") {
                write_stdout(text.as_bytes())
            } else {
                std::fs::write(path, text)
                    .with_context(|| format!("writing {}", path.display()))
                    .map_err(Failure::Write)
            }
        };
        let markdown_to_stdout = self.markdown.as_deref() == Some(Path::new("-"));
        if !markdown_to_stdout {
            write_stdout(ab::output::text(report, timing).as_bytes())?;
        }
        if let Some(p) = &self.markdown {
            write(p, ab::output::markdown(report, timing))?;
        }
        if let Some(p) = &self.json {
            let text =
                serde_json::to_string_pretty(report).map_err(|e| Failure::Invalid(e.into()))?;
            write(p, text + "\n")?;
        }
        if let Some(p) = &self.html {
            write(p, ab::html::page(report, timing))?;
        }
        Ok(())
    }
}

/// The exit: an error when no transcript could be read, 1 when some compacted output is
/// invalid (said on stderr), else success.
fn verdict(report: &compactor::ab::AbReport) -> Result<ExitCode, Failure> {
    if report.files.iter().all(|f| f.skipped.is_some()) {
        let reasons: Vec<String> = report
            .files
            .iter()
            .map(|f| format!("{}: {}", f.name, f.skipped.as_deref().unwrap_or_default()))
            .collect();
        return Err(Failure::Unreadable(anyhow::anyhow!(
            "no transcript could be read ({})",
            reasons.join("; ")
        )));
    }
    let (valid, total) = report.validity();
    if valid < total {
        say!(
            "error: {} of {total} compacted outputs invalid",
            total - valid
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// `compactor ab SESSION --reference SUMMARY_LOG`: each strategy and the digest against the
/// reference summary at its size (Markdown on stdout, the report as JSON to `json`).
fn ab_reference(
    files: &[PathBuf],
    reference: &Path,
    strategies: &[String],
    base: &compactor::config::Loader,
    json: Option<&Path>,
) -> Result<ExitCode, Failure> {
    use compactor::ab::{self, reference as r};
    let [session] = files else {
        return Err(Failure::Unreadable(anyhow::anyhow!(
            "--reference compares one session: give one FILE, not {}",
            files.len()
        )));
    };
    let full = load(session, None, true)?;
    let refc = load(reference, None, true)?;
    let summary = r::reference_summary(&refc.conversation).ok_or_else(|| {
        Failure::Unreadable(anyhow::anyhow!(
            "{}: no Claude Code summary message and no assistant answer",
            reference.display()
        ))
    })?;
    let history = r::before_summary(&full.conversation);
    let arms: Vec<ab::Arm> = strategies.iter().map(|s| ab::Arm::load(s, base)).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
        .map_err(Failure::Invalid)?;
    let report = runtime.block_on(r::compare(&history, full.format, &summary, &arms));
    write_stdout(r::markdown(&report).as_bytes())?;
    if let Some(p) = json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| Failure::Invalid(e.into()))?;
        std::fs::write(p, text + "\n")
            .with_context(|| format!("writing {}", p.display()))
            .map_err(Failure::Write)?;
    }
    Ok(ExitCode::SUCCESS)
}
