//! `compactor rules`: the provider rule tables ([`compactor::rules_markdown`]) as Markdown, the text of
//! docs/rules.md.

use super::Failure;
use super::output::write_text;
use std::path::PathBuf;
use std::process::ExitCode;

/// The flags of `compactor rules`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Output file (default: stdout).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// Prints every table: roles, block and item types, pairs, rules with their source and the
/// provider's error text, what is carried across a dropped round, detection signals.
pub(crate) fn run(args: &Args) -> Result<ExitCode, Failure> {
    write_text(args.output.as_deref(), &compactor::rules_markdown())?;
    Ok(ExitCode::SUCCESS)
}
