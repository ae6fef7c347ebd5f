//! `compactor count`: the tokens of a history, in total and by role, block type and tool, and
//! in the target model's tokens.

use super::Failure;
use super::input::load;
use super::output::{write_output, write_stdout};
use compactor::format::Format;
use compactor::tokens::{Breakdown, CachedCounter, TiktokenCounter, Tokenizer};
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
    /// The BPE vocabulary: o200k_base (default) or cl100k_base.
    #[arg(long, default_value = "o200k_base")]
    tokenizer: Tokenizer,
    /// Print the breakdown as JSON.
    #[arg(long)]
    json: bool,
    /// Claude Code logs: keep everything, not only what follows the last compaction.
    #[arg(long)]
    whole_log: bool,
    /// Also give the total in this model's tokens (`[tokens.models]` of the built-in
    /// config, or --config); the input's own `model` when not given.
    #[arg(long)]
    model: Option<String>,
    /// A config file (TOML) for `--model`'s rules.
    #[arg(long)]
    config: Option<PathBuf>,
}

/// Counts the history and prints the breakdown (text or JSON).
pub(crate) fn run(args: Args) -> Result<ExitCode, Failure> {
    let loaded = load(&args.file, args.format, args.whole_log)?;
    let basis = model_basis(&loaded.conversation, args.model, args.config)?;
    let tokenizer = basis.as_ref().map_or(args.tokenizer, |b| b.tokenizer);
    let counter = CachedCounter::new(TiktokenCounter::new(tokenizer));
    let breakdown = Breakdown::new(&counter, &loaded.conversation, loaded.format);
    let model_total = basis.as_ref().map(|b| {
        let counted =
            compactor::tokens::TokenCounter::count_conversation(&counter, &loaded.conversation);
        (b, b.to_model(counted))
    });
    if args.json {
        let value = serde_json::json!({
            "format": loaded.format,
            "tokenizer": tokenizer,
            "model_tokens": model_total.map(|(b, n)| serde_json::json!({"total": n, "counting": b})),
            "breakdown": breakdown,
        });
        write_output(None, &value)?;
    } else {
        let mut text = format!(
            "{} ({}, {tokenizer})\n{breakdown}",
            args.file.display(),
            loaded.format
        );
        if let Some((b, n)) = model_total {
            text.push_str(&format!("model tokens: {n} ({})\n", b.describe()));
        }
        write_stdout(text.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The counting basis for `count --model`: the flag's model, else the input's own `model`,
/// with the rules of the built-in config (or `config`). `None` when neither names a model.
fn model_basis(
    conversation: &compactor::Conversation,
    model: Option<String>,
    config: Option<PathBuf>,
) -> Result<Option<compactor::tokens::ModelTokens>, Failure> {
    let body = conversation.extra.get("model").and_then(|m| m.as_str());
    let Some(model) = model.or(body.map(str::to_string)) else {
        return Ok(None);
    };
    let settings = compactor::config::Loader {
        file: config,
        ..compactor::config::Loader::from_environment()
    }
    .load()
    .map_err(|e| Failure::Invalid(e.into()))?;
    let t = &settings.tokens;
    let calibration = compactor::tokens::Calibration::new(t.tokenizer, "", t.models.clone(), false);
    Ok(Some(calibration.resolve(Some(&model))))
}
