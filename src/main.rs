//! The `compactor` command line.

use anyhow::Context;
use clap::{Parser, Subcommand};
use compactor::format::{self, Format, Source};
use compactor::guard::{self, ValidateOptions};
use compactor::tokens::{Breakdown, CachedCounter, TiktokenCounter, Tokenizer};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
        #[arg(long)]
        budget: Option<usize>,
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
        #[arg(long = "budget")]
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

/// A failure with the exit status it maps to.
enum Failure {
    /// Exit 2: the input could not be read or parsed.
    Unreadable(anyhow::Error),
    /// Exit 1: the input was read but is invalid, or the command failed.
    Invalid(anyhow::Error),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(Failure::Invalid(e)) => {
            eprintln!("error: {}", describe(&e));
            ExitCode::from(1)
        }
        Err(Failure::Unreadable(e)) => {
            eprintln!("error: {}", describe(&e));
            ExitCode::from(2)
        }
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
    format::load(&bytes, hint, format::detect::ImportOptions { whole_log })
        .with_context(|| format!("{}", path.display()))
        .map_err(Failure::Unreadable)
}

fn write_output(path: Option<&Path>, value: &serde_json::Value) -> Result<(), Failure> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| Failure::Invalid(e.into()))?;
    text.push('\n');
    match path {
        Some(p) if p != Path::new("-") => std::fs::write(p, text)
            .with_context(|| format!("writing {}", p.display()))
            .map_err(Failure::Invalid),
        _ => std::io::stdout()
            .write_all(text.as_bytes())
            .context("writing stdout")
            .map_err(Failure::Invalid),
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
            let violations = guard::validate(&loaded.conversation, loaded.format, options);
            if violations.is_empty() {
                println!(
                    "valid {} ({} messages)",
                    loaded.format,
                    loaded.conversation.messages.len()
                );
                return Ok(ExitCode::SUCCESS);
            }
            for v in &violations {
                println!("{v}");
            }
            eprintln!("{} violation(s) in {}", violations.len(), file.display());
            Ok(ExitCode::from(1))
        }
        Command::Convert {
            file,
            to,
            output,
            format,
            whole_log,
        } => {
            let loaded = load(&file, format, whole_log)?;
            let converted = format::convert(&loaded.conversation, loaded.format, to);
            write_output(output.as_deref(), &to.write(&converted))?;
            if !matches!(loaded.source, Source::Request(_)) || loaded.format != to {
                eprintln!(
                    "{:?} -> {to}: {} messages",
                    loaded.source,
                    converted.messages.len()
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
        } => {
            let hint = match format.as_str() {
                "auto" => None,
                f => Some(
                    f.parse::<Format>()
                        .map_err(|e| Failure::Unreadable(anyhow::anyhow!(e)))?,
                ),
            };
            let bytes = read_input(&input)?;
            let loaded = format::load(&bytes, hint, format::detect::ImportOptions { whole_log })
                .with_context(|| format!("{}", input.display()))
                .map_err(Failure::Unreadable)?;
            let loader = compactor::config::Loader {
                file: config,
                preset: strategy,
                ..Default::default()
            };
            let settings = loader.load().map_err(|e| Failure::Invalid(e.into()))?;
            let engine = compactor::Compactor::from_config(settings)
                .map_err(|e| Failure::Invalid(e.into()))?;
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
                        .map_err(Failure::Invalid)?,
                    _ => std::io::stdout()
                        .write_all(&bytes)
                        .context("writing stdout")
                        .map_err(Failure::Invalid)?,
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
                    .map_err(Failure::Invalid)?;
            }
            eprintln!("{}", result.report.summary_line());
            Ok(ExitCode::SUCCESS)
        }
        Command::Count {
            file,
            format,
            tokenizer,
            json,
            whole_log,
        } => {
            let loaded = load(&file, format, whole_log)?;
            let counter = CachedCounter::new(TiktokenCounter::new(tokenizer));
            let breakdown = Breakdown::new(&counter, &loaded.conversation, loaded.format);
            if json {
                let value = serde_json::json!({
                    "format": loaded.format,
                    "tokenizer": tokenizer,
                    "breakdown": breakdown,
                });
                write_output(None, &value)?;
            } else {
                let text = format!(
                    "{} ({}, {tokenizer})\n{breakdown}",
                    file.display(),
                    loaded.format
                );
                std::io::stdout()
                    .lock()
                    .write_all(text.as_bytes())
                    .context("writing stdout")
                    .map_err(Failure::Invalid)?;
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
        } => {
            use compactor::ab::{self, output::Timing};
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
                ..Default::default()
            };
            let arms: Vec<ab::Arm> = strategies.iter().map(|s| ab::Arm::load(s, &base)).collect();
            let paths = ab::expand(&files)
                .context("listing inputs")
                .map_err(Failure::Unreadable)?;
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
                    std::io::stdout()
                        .write_all(text.as_bytes())
                        .context("writing stdout")
                        .map_err(Failure::Invalid)
                } else {
                    std::fs::write(path, text)
                        .with_context(|| format!("writing {}", path.display()))
                        .map_err(Failure::Invalid)
                }
            };
            let markdown_to_stdout = markdown.as_deref() == Some(Path::new("-"));
            if !markdown_to_stdout {
                print!("{}", ab::output::text(&report, timing));
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
            let (valid, total) = report.validity();
            if valid < total {
                eprintln!(
                    "error: {} of {total} compacted outputs invalid",
                    total - valid
                );
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
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
            let mut out = std::io::stdout().lock();
            let text = compactor::render::conversation_lines(&loaded.conversation);
            out.write_all(text.as_bytes())
                .context("writing stdout")
                .map_err(Failure::Invalid)?;
            Ok(ExitCode::SUCCESS)
        }
    }
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
        ..Default::default()
    };
    let state = compactor::server::AppState::new(loader).map_err(|e| Failure::Invalid(e.into()))?;
    let addr = match listen {
        Some(a) => a,
        None => state
            .settings()
            .server
            .listen
            .parse()
            .context("server.listen")
            .map_err(Failure::Invalid)?,
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

/// `compactor probe FULL OUT`: the fidelity probes of FULL, scored on OUT.
fn probe(full: &Path, out: &Path, json: bool, whole_log: bool) -> Result<ExitCode, Failure> {
    use compactor::ab::probes::{Probes, fidelity};
    let full = load(full, None, whole_log)?;
    let compacted = load(out, None, whole_log)?;
    let flag = full.format.has_error_flag();
    let probes = Probes::of(&full.conversation, flag);
    let survival = probes.survival(&compacted.conversation, flag);
    let mean = fidelity(&survival);
    let mut stdout = std::io::stdout().lock();
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
    stdout
        .write_all(text.as_bytes())
        .context("writing stdout")
        .map_err(Failure::Invalid)?;
    Ok(ExitCode::SUCCESS)
}
