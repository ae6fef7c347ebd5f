//! The `compactor` command line.

use anyhow::Context;
use clap::{Parser, Subcommand};
use compactor::format::{self, Format, Source};
use compactor::guard::{self, ValidateOptions};
use compactor::tokens::{Breakdown, CachedCounter, TiktokenCounter, TokenCounter, Tokenizer};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
    Validate {
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
    },
    /// Write a history (or imported session log) as a request body of another format.
    Convert {
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
        /// `model` for an output that lacks it (every provider requires one).
        #[arg(long)]
        model: Option<String>,
        /// `max_tokens` for an Anthropic output that lacks it (Anthropic requires one).
        #[arg(long)]
        max_tokens: Option<u64>,
    },
    /// Compact a history to a token budget; the output keeps the input's format.
    Compact {
        /// Request body, message array or session log (`-` for stdin).
        input: PathBuf,
        /// Output file (default: stdout).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// The input format: auto, anthropic, openai-chat, openai-responses.
        #[arg(long, default_value = "auto")]
        format: String,
        /// The budget in tokens (default: from the config, context window minus reserve).
        #[arg(long, value_parser = parse_budget)]
        budget: Option<usize>,
        /// The target model when the input names none (sets `[tokens] model`, so the budget is
        /// in this model's tokens), and the `model` written into an output that lacks it (an
        /// imported session log).
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
    },
    /// Count the tokens of a history: the total, then by role, block type and tool, and the
    /// largest blocks.
    Count {
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
    },
    /// Compare strategies side by side on transcripts: compaction, fidelity probes, replay.
    Ab {
        /// Transcripts: request bodies, failure cases, session logs, or directories of them.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Strategy presets (names or paths), comma separated.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "default,truncate,microcompact"
        )]
        strategies: Vec<String>,
        /// A budget in tokens; repeat for several (default: 50000 and 20000).
        #[arg(long = "budget", value_parser = parse_budget)]
        budgets: Vec<usize>,
        /// Replay at most this many model calls per file, evenly spaced.
        #[arg(long, default_value_t = 200)]
        replay_cap: usize,
        /// Price of uncached input, USD per million tokens.
        #[arg(long, default_value_t = 3.00)]
        price_input: f64,
        /// Price of cached input, USD per million tokens.
        #[arg(long, default_value_t = 0.30)]
        price_cached: f64,
        /// Price of output, USD per million tokens.
        #[arg(long, default_value_t = 15.00)]
        price_output: f64,
        /// Write the full report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write the tables as Markdown here (`-` for stdout).
        #[arg(long)]
        markdown: Option<PathBuf>,
        /// Write an HTML report with charts here.
        #[arg(long)]
        html: Option<PathBuf>,
        /// Leave wall times out of the tables (deterministic output).
        #[arg(long)]
        no_timings: bool,
        /// A config file (TOML), layered under every preset.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Claude Code logs: keep everything, not only what follows the last compaction.
        #[arg(long)]
        whole_log: bool,
        /// Compare with this reference summary at equal tokens: a Claude Code session log (its
        /// `isCompactSummary` message) or a compaction sub-agent log (`*_acompact_*`, its last
        /// answer). The one FILE is the session: its history before the summary is compacted
        /// by each strategy to the summary's size (see src/ab/reference.rs).
        #[arg(long)]
        reference: Option<PathBuf>,
    },
    /// Run the HTTP service: the JSON API and the compacting proxy (see docs/service.md).
    Serve {
        /// A config file (TOML), layered over the built-in defaults; its `[server]` section
        /// sets the address, limits and upstreams.
        #[arg(long)]
        config: Option<PathBuf>,
        /// The strategy preset of the proxy and the default of the API.
        #[arg(long)]
        strategy: Option<String>,
        /// Address to bind (overrides `server.listen`, default 127.0.0.1:8787).
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
    },
    /// Fit each model's token ratio from recorded usage (Claude Code logs, Codex rollouts):
    /// prints per model the ratio, the per-segment constants, the fit's error and a config
    /// snippet for `[tokens.models]`.
    Calibrate {
        /// Claude Code session logs (`message.usage`) and Codex rollouts (token_count events).
        #[arg(required = true)]
        logs: Vec<PathBuf>,
        /// The vocabulary counted with: o200k_base (default) or cl100k_base.
        #[arg(long, default_value = "o200k_base")]
        tokenizer: Tokenizer,
        /// Print the fit as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Score a compacted history (any tool's, or hand-written) against the full one with the
    /// A/B fidelity probes: one line per probe, `kept/total`, then the mean.
    Probe {
        /// The full history (request body or session log).
        full: PathBuf,
        /// The compacted history to score.
        out: PathBuf,
        /// Print the probes and their survival as JSON.
        #[arg(long)]
        json: bool,
        /// Claude Code logs: keep everything, not only what follows the last compaction.
        #[arg(long)]
        whole_log: bool,
    },
    /// Print one line per message.
    Show {
        /// Input (`-` for stdin).
        file: PathBuf,
        /// The input format (default: detected).
        #[arg(long)]
        format: Option<Format>,
        /// Claude Code logs: keep everything, not only what follows the last compaction.
        #[arg(long)]
        whole_log: bool,
    },
}

/// `eprintln!` that cannot panic: a line stderr does not take (`2>/dev/full`, a closed pipe)
/// is dropped, the command goes on.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// A failure with the exit status it maps to (the table in README.md, "Exit codes").
enum Failure {
    /// Exit 2: the input could not be read or parsed, or the command line or configuration is
    /// wrong (clap's own usage errors exit 2 too).
    Unreadable(anyhow::Error),
    /// Exit 1: the input was read but is invalid, or the command failed.
    Invalid(anyhow::Error),
    /// Exit 3: an output (file or stdout) could not be written.
    Write(anyhow::Error),
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

/// `--budget N`: a positive number of tokens.
fn parse_budget(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err(
            "a budget is the number of tokens the compacted request may hold \
                       (system prompt, tools and messages); it must be at least 1 (leave \
                       --budget out to use the configured one)"
                .into(),
        ),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("expected a number of tokens: {e}")),
    }
}

/// A format error is exit 1 when the input was JSON of the wrong shape (located), exit 2 when
/// it could not be read as JSON at all.
fn format_failure(e: anyhow::Error) -> Failure {
    match e.downcast_ref::<format::FormatError>() {
        Some(format::FormatError::Shape { path, .. }) if path != "input" => Failure::Invalid(e),
        _ => Failure::Unreadable(e),
    }
}

/// Tells on stderr what loading left out: the messages before the last `compact_boundary` of
/// a Claude Code log (and their tokens), a cut-off last line.
fn tell_load_notes(path: &Path, loaded: &format::detect::Loaded) {
    if let Some(line) = loaded.notes.skipped_last_line {
        say!(
            "warning: {}: line {line} is cut off (the log is still being written?): skipped",
            path.display()
        );
    }
    if let Some(before) = &loaded.notes.before_boundary {
        let counter = CachedCounter::new(TiktokenCounter::new(Tokenizer::default()));
        let tokens: usize = before.iter().map(|m| counter.count_message(m)).sum();
        say!(
            "note: {}: read from the last compact_boundary; {} earlier messages ({} tokens) \
             left out; --whole-log reads everything",
            path.display(),
            before.len(),
            compactor::strategy::thousands(tokens)
        );
    }
}

/// Fills the top-level fields a request of `to` needs (`model`, `max_tokens`) from the flags,
/// and says on stderr which are still missing.
fn fill_required(
    conversation: &mut compactor::Conversation,
    to: Format,
    model: Option<&str>,
    max_tokens: Option<u64>,
) {
    if let Some(m) = model
        && !conversation.extra.contains_key("model")
    {
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

fn read_input(path: &Path) -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    if path == Path::new("-") {
        std::io::stdin()
            .read_to_end(&mut bytes)
            .context("reading stdin")
            .map_err(Failure::Unreadable)?;
    } else {
        bytes = std::fs::read(path)
            .with_context(|| format!("reading {}", path.display()))
            .map_err(Failure::Unreadable)?;
    }
    Ok(bytes)
}

fn load(
    path: &Path,
    hint: Option<Format>,
    whole_log: bool,
) -> Result<format::detect::Loaded, Failure> {
    let bytes = read_input(path)?;
    load_bytes(path, &bytes, hint, whole_log)
}

fn load_bytes(
    path: &Path,
    bytes: &[u8],
    hint: Option<Format>,
    whole_log: bool,
) -> Result<format::detect::Loaded, Failure> {
    let loaded = format::load(bytes, hint, format::detect::ImportOptions { whole_log })
        .map_err(anyhow::Error::from)
        .map_err(|e| format_failure(e.context(path.display().to_string())))?;
    tell_load_notes(path, &loaded);
    Ok(loaded)
}

/// Writes `text` to stdout. A closed pipe (`compactor validate … | head -1`) ends the output
/// quietly and the command keeps its own exit status, as ripgrep does; any other write error
/// (a full disk: `> /dev/full`) is exit 3.
fn write_stdout(bytes: &[u8]) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::Write(
            anyhow::Error::from(e).context("writing stdout"),
        )),
        _ => Ok(()),
    }
}

fn write_output(path: Option<&Path>, value: &serde_json::Value) -> Result<(), Failure> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| Failure::Invalid(e.into()))?;
    text.push('\n');
    match path {
        Some(p) if p != Path::new("-") => std::fs::write(p, text)
            .with_context(|| format!("writing {}", p.display()))
            .map_err(Failure::Write),
        _ => write_stdout(text.as_bytes()),
    }
}

fn run(cli: Cli) -> Result<ExitCode, Failure> {
    match cli.command {
        Command::Validate {
            file,
            format,
            strict,
            whole_log,
        } => {
            let loaded = load(&file, format, whole_log)?;
            let options = ValidateOptions {
                allow_open_tail: !strict,
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
            say!("{} violation(s) in {}", violations.len(), file.display());
            Ok(ExitCode::from(1))
        }
        Command::Convert {
            file,
            to,
            output,
            format,
            whole_log,
            model,
            max_tokens,
        } => {
            let loaded = load(&file, format, whole_log)?;
            let mut converted = format::convert(&loaded.conversation, loaded.format, to);
            fill_required(&mut converted, to, model.as_deref(), max_tokens);
            write_output(output.as_deref(), &to.write(&converted))?;
            if !matches!(loaded.source, Source::Request(_)) || loaded.format != to {
                say!(
                    "{:?} -> {to}: {} messages",
                    loaded.source,
                    converted.messages.len()
                );
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
        Command::Compact {
            input,
            output,
            format,
            budget,
            strategy,
            config,
            report,
            instructions,
            whole_log,
            model,
            max_tokens,
        } => {
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
            let engine = compactor::Compactor::from_config(settings)
                .map_err(|e| Failure::Unreadable(e.into()))?;
            let mut loaded = load_bytes(&input, &bytes, hint, whole_log)?;
            if !matches!(loaded.source, Source::Request(_)) {
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
                let json = serde_json::to_string_pretty(&result.report)
                    .map_err(|e| Failure::Invalid(e.into()))?;
                std::fs::write(&path, json + "\n")
                    .with_context(|| format!("writing {}", path.display()))
                    .map_err(Failure::Write)?;
            }
            for w in result.report.warnings() {
                say!("warning: {w}");
            }
            say!("{}", result.report.summary_line());
            Ok(ExitCode::SUCCESS)
        }
        Command::Count {
            file,
            format,
            tokenizer,
            json,
            whole_log,
            model,
            config,
        } => {
            let loaded = load(&file, format, whole_log)?;
            let basis = model_basis(&loaded.conversation, model, config)?;
            let tokenizer = basis.as_ref().map_or(tokenizer, |b| b.tokenizer);
            let counter = CachedCounter::new(TiktokenCounter::new(tokenizer));
            let breakdown = Breakdown::new(&counter, &loaded.conversation, loaded.format);
            let model_total = basis.as_ref().map(|b| {
                let counted = compactor::tokens::TokenCounter::count_conversation(
                    &counter,
                    &loaded.conversation,
                );
                (b, b.to_model(counted))
            });
            if json {
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
                    file.display(),
                    loaded.format
                );
                if let Some((b, n)) = model_total {
                    text.push_str(&format!("model tokens: {n} ({})\n", b.describe()));
                }
                write_stdout(text.as_bytes())?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve {
            config,
            strategy,
            listen,
        } => serve(config, strategy, listen),
        Command::Ab {
            files,
            strategies,
            budgets,
            replay_cap,
            price_input,
            price_cached,
            price_output,
            json,
            markdown,
            html,
            no_timings,
            config,
            whole_log,
            reference,
        } => {
            use compactor::ab::{self, output::Timing};
            if let Some(reference) = reference {
                let base = compactor::config::Loader {
                    file: config,
                    ..Default::default()
                };
                return ab_reference(&files, &reference, &strategies, &base, json.as_deref());
            }
            let options = ab::Options {
                budgets: if budgets.is_empty() {
                    ab::Options::default().budgets
                } else {
                    budgets
                },
                replay_cap,
                prices: ab::replay::Prices {
                    input: price_input,
                    cached_input: price_cached,
                    output: price_output,
                },
            };
            let base = compactor::config::Loader {
                file: config,
                ..compactor::config::Loader::from_environment()
            };
            // Fail fast (exit 2, one message) on a strategy that names no preset or a bad
            // config, and on an input that is not there, rather than print empty tables.
            for s in &strategies {
                compactor::config::Loader {
                    preset: Some(s.clone()),
                    ..base.clone()
                }
                .load()
                .with_context(|| format!("--strategies {s}"))
                .map_err(Failure::Unreadable)?;
            }
            if let Some(missing) = files.iter().find(|f| !f.exists()) {
                return Err(Failure::Unreadable(anyhow::anyhow!(
                    "{}: no such file or directory",
                    missing.display()
                )));
            }
            let arms: Vec<ab::Arm> = strategies.iter().map(|s| ab::Arm::load(s, &base)).collect();
            let paths = ab::expand(&files)
                .context("listing inputs")
                .map_err(Failure::Unreadable)?;
            if paths.is_empty() {
                return Err(Failure::Unreadable(anyhow::anyhow!(
                    "no transcripts (.json, .jsonl, .yaml) in {}",
                    files
                        .iter()
                        .map(|f| f.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            let import = format::detect::ImportOptions { whole_log };
            let transcripts: Vec<ab::Transcript> = paths
                .iter()
                .map(|p| ab::Transcript::load(p, import))
                .collect();
            let bar = indicatif::ProgressBar::new(ab::steps(&transcripts, &arms, &options));
            if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
            }
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {wide_msg}")
            {
                bar.set_style(style);
            }
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("starting the runtime")
                .map_err(Failure::Invalid)?;
            let report = runtime.block_on(ab::run(&transcripts, &arms, &options, &mut |label| {
                bar.set_message(label.to_string());
                bar.inc(1);
            }));
            bar.finish_and_clear();
            let timing = if no_timings {
                Timing::Hide
            } else {
                Timing::Show
            };
            let write = |path: &Path, text: String| -> Result<(), Failure> {
                if path == Path::new("-") {
                    write_stdout(text.as_bytes())
                } else {
                    std::fs::write(path, text)
                        .with_context(|| format!("writing {}", path.display()))
                        .map_err(Failure::Write)
                }
            };
            let markdown_to_stdout = markdown.as_deref() == Some(Path::new("-"));
            if !markdown_to_stdout {
                write_stdout(ab::output::text(&report, timing).as_bytes())?;
            }
            if let Some(p) = &markdown {
                write(p, ab::output::markdown(&report, timing))?;
            }
            if let Some(p) = &json {
                let text = serde_json::to_string_pretty(&report)
                    .map_err(|e| Failure::Invalid(e.into()))?;
                write(p, text + "\n")?;
            }
            if let Some(p) = &html {
                write(p, ab::html::page(&report, timing))?;
            }
            if report.files.iter().all(|f| f.skipped.is_some()) {
                let reasons: Vec<String> = report
                    .files
                    .iter()
                    .map(|f| format!("{}: {}", f.name, f.skipped.as_deref().unwrap_or_default()))
                    .collect();
                return Err(Failure::Unreadable(anyhow::anyhow!(
                    "no transcript could be read ({})",
                    reasons.join("; ")
                )));
            }
            let (valid, total) = report.validity();
            if valid < total {
                say!(
                    "error: {} of {total} compacted outputs invalid",
                    total - valid
                );
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Calibrate {
            logs,
            tokenizer,
            json,
        } => calibrate(&logs, tokenizer, json),
        Command::Probe {
            full,
            out,
            json,
            whole_log,
        } => probe(&full, &out, json, whole_log),
        Command::Show {
            file,
            format,
            whole_log,
        } => {
            let loaded = load(&file, format, whole_log)?;
            let text = compactor::render::conversation_lines(&loaded.conversation);
            write_stdout(text.as_bytes())?;
            Ok(ExitCode::SUCCESS)
        }
    }
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

fn serve(
    config: Option<PathBuf>,
    strategy: Option<String>,
    listen: Option<std::net::SocketAddr>,
) -> Result<ExitCode, Failure> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,tower_http=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let loader = compactor::config::Loader {
        file: config,
        preset: strategy,
        ..compactor::config::Loader::from_environment()
    };
    let state =
        compactor::server::AppState::new(loader).map_err(|e| Failure::Unreadable(e.into()))?;
    let addr = match listen {
        Some(a) => a,
        None => state
            .settings()
            .server
            .listen
            .parse()
            .context("server.listen")
            .map_err(Failure::Unreadable)?,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
        .map_err(Failure::Invalid)?;
    runtime
        .block_on(compactor::server::serve(state, addr))
        .with_context(|| format!("serving on {addr}"))
        .map_err(Failure::Invalid)?;
    Ok(ExitCode::SUCCESS)
}

/// `compactor ab SESSION --reference SUMMARY_LOG`: each strategy and the digest against the
/// reference summary at its size (Markdown on stdout, the report as JSON to `json`).
fn ab_reference(
    files: &[PathBuf],
    reference: &Path,
    strategies: &[String],
    base: &compactor::config::Loader,
    json: Option<&Path>,
) -> Result<ExitCode, Failure> {
    use compactor::ab::{self, reference as r};
    let [session] = files else {
        return Err(Failure::Unreadable(anyhow::anyhow!(
            "--reference compares one session: give one FILE, not {}",
            files.len()
        )));
    };
    let full = load(session, None, true)?;
    let refc = load(reference, None, true)?;
    let summary = r::reference_summary(&refc.conversation).ok_or_else(|| {
        Failure::Unreadable(anyhow::anyhow!(
            "{}: no Claude Code summary message and no assistant answer",
            reference.display()
        ))
    })?;
    let history = r::before_summary(&full.conversation);
    let arms: Vec<ab::Arm> = strategies.iter().map(|s| ab::Arm::load(s, base)).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
        .map_err(Failure::Invalid)?;
    let report = runtime.block_on(r::compare(&history, full.format, &summary, &arms));
    write_stdout(r::markdown(&report).as_bytes())?;
    if let Some(p) = json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| Failure::Invalid(e.into()))?;
        std::fs::write(p, text + "\n")
            .with_context(|| format!("writing {}", p.display()))
            .map_err(Failure::Write)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `compactor probe FULL OUT`: the fidelity probes of FULL, scored on OUT.
fn probe(full: &Path, out: &Path, json: bool, whole_log: bool) -> Result<ExitCode, Failure> {
    use compactor::ab::probes::{Probes, fidelity};
    let full = load(full, None, whole_log)?;
    let compacted = load(out, None, whole_log)?;
    let flag = full.format.has_error_flag();
    let probes = Probes::of(&full.conversation, flag);
    let survival = probes.survival(&compacted.conversation, flag);
    let mean = fidelity(&survival);
    let text = if json {
        let v = serde_json::json!({"probes": probes, "survival": survival, "fidelity": mean});
        let mut t = serde_json::to_string_pretty(&v).map_err(|e| Failure::Invalid(e.into()))?;
        t.push('\n');
        t
    } else {
        let mut t = String::new();
        for s in &survival {
            t.push_str(&format!("{:<14} {}\n", s.probe, s.cell()));
        }
        let mean = mean.map_or_else(|| "-".to_string(), |f| format!("{:.1}%", 100.0 * f));
        t.push_str(&format!("{:<14} {mean}\n", "fidelity"));
        t
    };
    write_stdout(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
