//! `compactor models`: the model table in force (built in, then `--config`): per family its
//! context window, maximum output, default budget, prices and token rule, with the source of
//! its figures.

use super::Failure;
use super::output::write_stdout;
use std::path::PathBuf;
use std::process::ExitCode;

/// The flags of `compactor models`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// A config file (TOML) layered over the built-in table (`[models."PATTERN"]` entries).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Only the entry that applies to this model name.
    #[arg(long)]
    model: Option<String>,
}

/// Prints one line per entry: pattern, window, max output, the default budget it gives, prices
/// (USD per million model tokens) and the `[tokens.models]` rule of the family, then its source.
pub(crate) fn run(args: &Args) -> Result<ExitCode, Failure> {
    let settings = compactor::config::Loader {
        file: args.config.clone(),
        ..compactor::config::Loader::from_environment()
    }
    .load()
    .map_err(|e| Failure::Unreadable(e.into()))?;
    let counter = compactor::tokens::counter_for(settings.tokens.tokenizer);
    let engine = compactor::Compactor::with_parts(settings, counter, Vec::new());
    let entries: Vec<(&str, &compactor::models::ModelEntry)> = match &args.model {
        Some(m) => engine.model_entry(Some(m)).into_iter().collect(),
        None => engine.models().entries().collect(),
    };
    let mut out = String::from(
        "pattern  window  max output  default budget  input  cache write  cache read  output  (USD per million model tokens)  token rule\n",
    );
    for (pattern, e) in entries {
        let budget = engine.settings().budget.budget_for(None, Some(e));
        let basis = engine.model_tokens(Some(pattern.trim_end_matches('*')));
        let rule = match basis.pattern {
            Some(p) => format!(
                "[tokens.models] {p}: {} x{:.3} +{} per call",
                basis.tokenizer.as_str(),
                basis.rule_ratio,
                basis.tool_call
            ),
            None => format!("{} as counted", basis.tokenizer.as_str()),
        };
        out += &format!(
            "{pattern}  {}  {}  {}  {}  {}  {}  {}  {rule}\n    source: {}\n",
            e.context_window,
            e.max_output,
            budget,
            e.input,
            e.cache_write,
            e.cache_read,
            e.output,
            e.source
        );
    }
    if let Some(m) = args.model.as_ref().filter(|_| out.lines().count() == 1) {
        out += &format!(
            "{m}: no entry; window {} (budget {}), costs in input-token equivalents\n",
            compactor::models::DEFAULT_CONTEXT_WINDOW,
            engine.settings().budget.budget(None)
        );
    }
    write_stdout(out.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
