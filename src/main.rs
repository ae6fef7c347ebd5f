//! The `compactor` command line: its shape (the commands and their flags, read by clap), the
//! exit status of a failure, and the dispatch to the command's module under `src/cli/` (one
//! small `run` per command; the reading, writing and failure types they share are there too).

use clap::{Parser, Subcommand};
use cli::{Failure, say};
use std::process::ExitCode;

mod cli;

/// The allocator of the binary (see Cargo.toml: the proxy's body work is allocation-bound).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "compactor",
    version,
    about = "Compacts LLM agent message histories to a token budget, safely."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a history against the provider's rules. Exit 0 valid, 1 violations, 2 unreadable.
    Validate(cli::validate::Args),
    /// Write a history (or imported session log) as a request body of another format.
    Convert(cli::convert::Args),
    /// Compact a history to a token budget; the output keeps the input's format.
    Compact(cli::compact::Args),
    /// Count the tokens of a history: the total, then by role, block type and tool, and the
    /// largest blocks.
    Count(cli::count::Args),
    /// Compare strategies side by side on transcripts: compaction, fidelity probes, replay.
    Ab(cli::ab::Args),
    /// Run the HTTP service: the JSON API and the compacting proxy (see docs/service.md).
    Serve(cli::serve::Args),
    /// Print the effective settings, one `key = value` line each, with where each value came
    /// from: default, file, preset, environment or flag.
    Config(cli::config::Args),
    /// Fit each model's token ratio from recorded usage (Claude Code logs, Codex rollouts):
    /// prints per model the ratio, the per-segment constants, the fit's error and a config
    /// snippet for `[tokens.models]`.
    Calibrate(cli::calibrate::Args),
    /// Score a compacted history (any tool's, or hand-written) against the full one with the
    /// A/B fidelity probes: one line per probe, `kept/total`, then the mean.
    Probe(cli::probe::Args),
    /// Print one line per message.
    Show(cli::show::Args),
    /// Print an original that `compact` cleared or dropped, by the recall id its output names
    /// (read from the recall directory `compact` wrote).
    Recall(cli::recall::Args),
    /// Print the provider rule tables (roles, block and item types, pairs, placement rules
    /// with their source and the provider's error text, what stays in force across a dropped
    /// round): the text of docs/rules.md.
    Rules(cli::rules::Args),
    /// The model table: each family's context window, max output, default budget, prices
    /// (USD per million tokens) and token rule, with the source of its figures.
    Models(cli::models::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (e, code) = match run(cli) {
        Ok(code) => return code,
        Err(Failure::Invalid(e)) => (e, 1),
        Err(Failure::Unreadable(e)) => (e, 2),
        Err(Failure::Write(e)) => (e, 3),
    };
    say!("error: {}", describe(&e));
    ExitCode::from(code)
}

/// The error and its causes joined by `: `, leaving out a cause whose text the message before
/// already holds (the library's errors name their source in their own message).
fn describe(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

fn run(cli: Cli) -> Result<ExitCode, Failure> {
    match cli.command {
        Command::Validate(args) => cli::validate::run(&args),
        Command::Convert(args) => cli::convert::run(args),
        Command::Compact(args) => cli::compact::run(args),
        Command::Count(args) => cli::count::run(args),
        Command::Ab(args) => cli::ab::run(args),
        Command::Serve(args) => cli::serve::run(args),
        Command::Config(args) => cli::config::run(args),
        Command::Calibrate(args) => cli::calibrate::run(&args),
        Command::Probe(args) => cli::probe::run(&args),
        Command::Show(args) => cli::show::run(&args),
        Command::Recall(args) => cli::recall::run(args),
        Command::Rules(args) => cli::rules::run(&args),
        Command::Models(args) => cli::models::run(&args),
    }
}
