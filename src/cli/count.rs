//! `compactor count`: the tokens of a history, in total and by role, block type and tool, and
//! in the target model's tokens (the figure `compact` budgets with,
//! [`compactor::Compactor::model_count`]).

use super::Failure;
use super::input::load;
use super::output::{write_output, write_stdout};
use compactor::format::Format;
use compactor::tokens::{Breakdown, Tokenizer};
use std::path::PathBuf;
use std::process::ExitCode;

/// The flags of `compactor count`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Input (`-` for stdin).
    file: PathBuf,
    /// The input format (default: detected).
    #[arg(long)]
    format: Option<Format>,
    /// The BPE vocabulary of a model no `[tokens.models]` rule names, and of no model: sets
    /// `[tokens] tokenizer` (o200k_base or cl100k_base; default: the configured one,
    /// o200k_base). A model's rule names its own.
    #[arg(long)]
    tokenizer: Option<Tokenizer>,
    /// Print the breakdown as JSON.
    #[arg(long)]
    json: bool,
    /// Claude Code logs: keep everything, not only what follows the last compaction.
    #[arg(long)]
    whole_log: bool,
    /// The model whose tokens the total is given in (`[tokens.models]` rules); default: the
    /// input's own `model`, else `[tokens] model`.
    #[arg(long)]
    model: Option<String>,
    /// A config file (TOML), layered over the built-in defaults as for `compact`: its
    /// `[tokens]` settings count here as they budget there.
    #[arg(long)]
    config: Option<PathBuf>,
}

/// Counts the history and prints the breakdown and the model tokens (text or JSON).
pub(crate) fn run(args: Args) -> Result<ExitCode, Failure> {
    let loaded = load(&args.file, args.format, args.whole_log)?;
    let mut settings = compactor::config::Loader {
        file: args.config,
        ..compactor::config::Loader::from_environment()
    }
    .load()
    .map_err(|e| Failure::Unreadable(e.into()))?;
    if let Some(t) = args.tokenizer {
        settings.tokens.tokenizer = t;
    }
    // The pipeline's counting without its tiers: the calibration and counters of `[tokens]`.
    let counter = compactor::tokens::counter_for(settings.tokens.tokenizer);
    let engine = compactor::Compactor::with_parts(settings, counter, Vec::new());
    let count = engine.model_count(&loaded.conversation, args.model.as_deref());
    let tokenizer = count.counting.tokenizer;
    // The same cached counter: the breakdown's blocks are not tokenized again.
    let breakdown = Breakdown::new(
        engine.counter_of(tokenizer),
        &loaded.conversation,
        loaded.format,
    );
    if args.json {
        let value = serde_json::json!({
            "format": loaded.format,
            "tokenizer": tokenizer,
            "model_tokens": count,
            "breakdown": breakdown,
        });
        write_output(None, &value)?;
    } else {
        let hint = if count.counting.model.is_none() {
            "; give --model"
        } else {
            ""
        };
        let text = format!(
            "{} ({}, {tokenizer})\n{breakdown}model tokens: {} ({}{hint})\n",
            args.file.display(),
            loaded.format,
            compactor::strategy::thousands(count.total),
            count.describe(),
        );
        write_stdout(text.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}
