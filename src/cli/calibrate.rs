//! `compactor calibrate`: each model's token ratio fitted from recorded usage.

use super::Failure;
use super::input::read_input;
use super::output::{say, write_output, write_stdout};
use anyhow::Context;
use compactor::tokens::{CachedCounter, TiktokenCounter, Tokenizer};
use std::path::PathBuf;
use std::process::ExitCode;

/// The flags of `compactor calibrate`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Claude Code session logs (`message.usage`) and Codex rollouts (token_count events).
    #[arg(required = true)]
    logs: Vec<PathBuf>,
    /// The vocabulary counted with: o200k_base (default) or cl100k_base.
    #[arg(long, default_value = "o200k_base")]
    tokenizer: Tokenizer,
    /// Print the fit as JSON.
    #[arg(long)]
    json: bool,
}

/// Fits the logs and prints the report.
pub(crate) fn run(args: &Args) -> Result<ExitCode, Failure> {
    calibrate(&args.logs, args.tokenizer, args.json)
}

/// `compactor calibrate`: reads every log, fits, prints the text report (or JSON).
fn calibrate(logs: &[PathBuf], tokenizer: Tokenizer, json: bool) -> Result<ExitCode, Failure> {
    use compactor::tokens::calibrate;
    let counter = CachedCounter::new(TiktokenCounter::new(tokenizer));
    let mut points = Vec::new();
    for path in logs {
        let bytes = read_input(path)?;
        let text = String::from_utf8_lossy(&bytes);
        let p = calibrate::usage_points(&text, &counter)
            .with_context(|| format!("{}", path.display()))
            .map_err(Failure::Unreadable)?;
        points.push(p);
    }
    let names: Vec<String> = logs.iter().map(|p| p.display().to_string()).collect();
    let fits = calibrate::fit(&points);
    if json {
        write_output(
            None,
            &serde_json::json!({"tokenizer": tokenizer, "models": fits}),
        )?;
    } else {
        let text = calibrate::render(&fits, &names, &points, tokenizer);
        write_stdout(text.as_bytes())?;
    }
    if fits.is_empty() {
        say!("error: no usage records with a spread of prompt sizes in these logs");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
