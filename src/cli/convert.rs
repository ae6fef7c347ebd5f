//! `compactor convert`: a history written as a request body of another format, with the
//! top-level fields that format requires.

use super::Failure;
use super::input::load;
use super::output::{say, write_output};
use compactor::format::{self, Format, Source};
use std::path::PathBuf;
use std::process::ExitCode;

/// The flags of `compactor convert`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Input (`-` for stdin).
    file: PathBuf,
    /// Target format.
    #[arg(long)]
    to: Format,
    /// Output file (default: stdout).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// The input format (default: detected).
    #[arg(long)]
    format: Option<Format>,
    /// Claude Code logs: keep everything, not only what follows the last compaction.
    #[arg(long)]
    whole_log: bool,
    /// The output's `model` (default: the input's own, or the one a session log records;
    /// every provider requires one).
    #[arg(long)]
    model: Option<String>,
    /// `max_tokens` for an Anthropic output that lacks it (Anthropic requires one).
    #[arg(long)]
    max_tokens: Option<u64>,
}

/// Converts the history and says what could not cross.
pub(crate) fn run(args: Args) -> Result<ExitCode, Failure> {
    let Args {
        file,
        to,
        output,
        format,
        whole_log,
        model,
        max_tokens,
    } = args;
    let loaded = load(&file, format, whole_log)?;
    let mut converted = format::convert(&loaded.conversation, loaded.format, to);
    fill_required(&mut converted, to, model.as_deref(), max_tokens);
    write_output(output.as_deref(), &to.write(&converted))?;
    if !matches!(loaded.source, Source::Request(_)) || loaded.format != to {
        // The kebab-case names a user types: `claude-code -> openai-chat`.
        let from = match loaded.source {
            Source::Request(f) => f.to_string(),
            imported => imported.name().to_string(),
        };
        say!("{from} -> {to}: {} messages", converted.messages.len());
    }
    let dropped = format::Dropped::between(&loaded.conversation, &converted);
    if !dropped.is_empty() {
        say!(
            "warning: {} -> {to} dropped {dropped} (they cannot cross providers)",
            loaded.format
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Says on stderr when `--model` is not taken: a request body names its own model, which
/// `compact` keeps (the output is that request) and counts for.
pub(super) fn tell_model_not_taken(conversation: &compactor::Conversation, flag: Option<&str>) {
    let named = conversation
        .extra
        .get("model")
        .and_then(serde_json::Value::as_str);
    if let (Some(flag), Some(named)) = (flag, named)
        && flag != named
    {
        say!(
            "warning: --model {flag} not used: the request names model {named}, which it \
             keeps and is counted for"
        );
    }
}

/// Sets the top-level fields a request of `to` needs from the flags (`--model` replaces the
/// model the input names: the user's choice is taken; `max_tokens` where it lacks one), and
/// says on stderr which are still missing.
pub(super) fn fill_required(
    conversation: &mut compactor::Conversation,
    to: Format,
    model: Option<&str>,
    max_tokens: Option<u64>,
) {
    // Gemini names the model in the URL, not the body.
    if let Some(m) = model.filter(|_| to != Format::Gemini) {
        conversation
            .extra
            .insert("model".into(), serde_json::Value::String(m.into()));
    }
    if let Some(n) = max_tokens
        && to == Format::Anthropic
        && !conversation.extra.contains_key("max_tokens")
    {
        conversation.extra.insert("max_tokens".into(), n.into());
    }
    let missing = format::missing_fields(conversation, to);
    if !missing.is_empty() {
        let flags: Vec<String> = missing
            .iter()
            .map(|k| format!("--{}", k.replace('_', "-")))
            .collect();
        say!(
            "warning: the {to} request lacks {} (the provider requires it); give {}",
            missing.join(", "),
            flags.join(" / ")
        );
    }
}
