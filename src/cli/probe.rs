//! `compactor probe`: a compacted history scored against the full one with the A/B fidelity
//! probes.

use super::Failure;
use super::input::load;
use super::output::write_stdout;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The flags of `compactor probe`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The full history (request body or session log).
    full: PathBuf,
    /// The compacted history to score.
    out: PathBuf,
    /// Print the probes and their survival as JSON.
    #[arg(long)]
    json: bool,
    /// Claude Code logs: keep everything, not only what follows the last compaction.
    #[arg(long)]
    whole_log: bool,
}

/// Scores OUT against FULL.
pub(crate) fn run(args: &Args) -> Result<ExitCode, Failure> {
    probe(&args.full, &args.out, args.json, args.whole_log)
}

/// `compactor probe FULL OUT`: the fidelity probes of FULL, scored on OUT.
fn probe(full: &Path, out: &Path, json: bool, whole_log: bool) -> Result<ExitCode, Failure> {
    use compactor::ab::probes::{Probes, fidelity};
    let full = load(full, None, whole_log)?;
    let compacted = load(out, None, whole_log)?;
    let probes = Probes::of(&full.conversation);
    let survival = probes.survival(&compacted.conversation);
    let mean = fidelity(&survival);
    let text = if json {
        let v = serde_json::json!({"probes": probes, "survival": survival, "fidelity": mean});
        let mut t = serde_json::to_string_pretty(&v).map_err(|e| Failure::Invalid(e.into()))?;
        t.push('\n');
        t
    } else {
        let mut t = String::new();
        for s in &survival {
            t.push_str(&format!("{:<14} {}\n", s.probe, s.cell()));
        }
        let mean = mean.map_or_else(|| "-".to_string(), |f| format!("{:.1}%", 100.0 * f));
        t.push_str(&format!("{:<14} {mean}\n", "fidelity"));
        t
    };
    write_stdout(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
