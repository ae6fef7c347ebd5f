//! `compactor validate`: a history checked against its provider's rules (exit 1 on a violation).

use super::Failure;
use super::input::load;
use super::output::{say, write_stdout};
use compactor::format::Format;
use compactor::guard::{self, ValidateOptions};
use std::path::PathBuf;
use std::process::ExitCode;

/// The flags of `compactor validate`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Request body, message array or session log (`-` for stdin).
    file: PathBuf,
    /// The format (default: detected).
    #[arg(long)]
    format: Option<Format>,
    /// Reject a history that ends with calls still waiting for results.
    #[arg(long)]
    strict: bool,
    /// Claude Code logs: keep everything, not only what follows the last compaction.
    #[arg(long)]
    whole_log: bool,
}

/// Loads the history and prints `valid …` or one line per violation.
pub(crate) fn run(args: &Args) -> Result<ExitCode, Failure> {
    let loaded = load(&args.file, args.format, args.whole_log)?;
    let options = ValidateOptions {
        allow_open_tail: !args.strict,
    };
    // As `/v1/validate`: the request's own token limits, then the history.
    let mut violations = guard::check_token_limits(&loaded.conversation, loaded.format);
    violations.extend(guard::validate(
        &loaded.conversation,
        loaded.format,
        options,
    ));
    if violations.is_empty() {
        write_stdout(
            format!(
                "valid {} ({} messages)\n",
                loaded.format,
                loaded.conversation.messages.len()
            )
            .as_bytes(),
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let lines: String = violations.iter().map(|v| format!("{v}\n")).collect();
    write_stdout(lines.as_bytes())?;
    say!(
        "{} violation(s) in {}",
        violations.len(),
        args.file.display()
    );
    Ok(ExitCode::from(1))
}
