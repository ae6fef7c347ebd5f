//! `compactor compact`: a history compacted to a token budget, in the format it came in.

use super::convert::{fill_required, tell_model_not_taken};
use super::input::{load_bytes, read_input};
use super::output::{say, write_output, write_stdout};
use super::{Failure, parse_budget};
use anyhow::Context;
use compactor::format::{Format, Source};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The flags of `compactor compact`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Request body, message array or session log (`-` for stdin).
    input: PathBuf,
    /// Output file (default: stdout).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// The input format: auto, anthropic, openai-chat, openai-responses, gemini.
    #[arg(long, default_value = "auto")]
    format: String,
    /// The budget in tokens (default: from the config, context window minus reserve).
    #[arg(long, value_parser = parse_budget)]
    budget: Option<usize>,
    /// The target model: of a request body that names none (sets `[tokens] model`, so the
    /// budget is in this model's tokens), and of an imported session log (its output's
    /// `model`, replacing the one the log records). A request body's own `model` is kept.
    #[arg(long)]
    model: Option<String>,
    /// `max_tokens` for an Anthropic output that lacks it (an imported session log).
    #[arg(long)]
    max_tokens: Option<u64>,
    /// A strategy preset: a name from strategies/ (default, truncate, microcompact) or a path.
    #[arg(long)]
    strategy: Option<String>,
    /// A config file (TOML), layered over the built-in defaults.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Write the JSON report here.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Extra instructions for a model summary.
    #[arg(long)]
    instructions: Option<String>,
    /// Claude Code logs: keep everything, not only what follows the last compaction.
    #[arg(long)]
    whole_log: bool,
    /// Where the originals the output names by recall id are kept for `compactor recall ID`
    /// (default: `[recall] dir`, else `$XDG_CACHE_HOME/compactor/recall` or
    /// `~/.cache/compactor/recall`).
    #[arg(long)]
    recall_dir: Option<PathBuf>,
}

/// Compacts the history, writes it (the input itself when nothing changed) and the report.
pub(crate) fn run(args: Args) -> Result<ExitCode, Failure> {
    let Args {
        input,
        output,
        format,
        budget,
        model,
        max_tokens,
        strategy,
        config,
        report,
        instructions,
        whole_log,
        recall_dir,
    } = args;
    let hint = match format.as_str() {
        "auto" => None,
        f => Some(
            f.parse::<Format>()
                .map_err(|e| Failure::Unreadable(anyhow::anyhow!(e)))?,
        ),
    };
    let bytes = read_input(&input)?;
    let loader = compactor::config::Loader {
        file: config,
        preset: strategy,
        ..compactor::config::Loader::from_environment()
    };
    let mut settings = loader.load().map_err(|e| Failure::Unreadable(e.into()))?;
    if let Some(m) = &model {
        settings.tokens.model = m.clone();
    }
    let engine =
        compactor::Compactor::from_config(settings).map_err(|e| Failure::Unreadable(e.into()))?;
    let mut loaded = load_bytes(&input, &bytes, hint, whole_log)?;
    if matches!(loaded.source, Source::Request(_)) {
        tell_model_not_taken(&loaded.conversation, model.as_deref());
    } else {
        // A session log is written as a new request: `--model` is its model, else the one
        // the log records; budgets are in that model's tokens.
        fill_required(
            &mut loaded.conversation,
            loaded.format,
            model.as_deref(),
            max_tokens,
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
        .map_err(Failure::Invalid)?;
    let result = runtime
        .block_on(engine.compact_with(
            &loaded.conversation,
            loaded.format,
            budget,
            instructions.as_deref(),
        ))
        .with_context(|| format!("{}", input.display()))
        .map_err(Failure::Invalid)?;
    let unchanged = matches!(result.conversation, std::borrow::Cow::Borrowed(_));
    if unchanged && matches!(loaded.source, Source::Request(_)) {
        // Byte for byte: the input as it came.
        match output.as_deref() {
            Some(p) if p != Path::new("-") => std::fs::write(p, &bytes)
                .with_context(|| format!("writing {}", p.display()))
                .map_err(Failure::Write)?,
            _ => write_stdout(&bytes)?,
        }
    } else {
        write_output(
            output.as_deref(),
            &loaded.format.write(&result.conversation),
        )?;
    }
    if let Some(path) = report {
        let json =
            serde_json::to_string_pretty(&result.report).map_err(|e| Failure::Invalid(e.into()))?;
        std::fs::write(&path, json + "\n")
            .with_context(|| format!("writing {}", path.display()))
            .map_err(Failure::Write)?;
    }
    for w in result.report.warnings() {
        say!("warning: {w}");
    }
    say!("{}", result.report.summary_line());
    super::recall::keep(&engine, &result.report, recall_dir);
    Ok(ExitCode::SUCCESS)
}
