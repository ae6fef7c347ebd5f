//! `compactor show`: a history printed one line per message.

use super::Failure;
use super::input::load;
use super::output::write_stdout;
use compactor::format::Format;
use std::path::PathBuf;
use std::process::ExitCode;

/// The flags of `compactor show`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Input (`-` for stdin).
    file: PathBuf,
    /// The input format (default: detected).
    #[arg(long)]
    format: Option<Format>,
    /// Claude Code logs: keep everything, not only what follows the last compaction.
    #[arg(long)]
    whole_log: bool,
}

/// Prints the history, one line per message.
pub(crate) fn run(args: &Args) -> Result<ExitCode, Failure> {
    let loaded = load(&args.file, args.format, args.whole_log)?;
    let text = compactor::conversation_lines(&loaded.conversation);
    write_stdout(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
