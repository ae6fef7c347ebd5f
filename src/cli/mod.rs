//! The commands of the `compactor` binary, one module each (its flags as an `Args` struct and
//! its `run`), and what they share: reading an input ([`input`]), writing an output
//! ([`output`]), the [`Failure`] each maps to an exit status, and the `--budget` flag's parser.

pub(crate) mod ab;
pub(crate) mod calibrate;
pub(crate) mod compact;
pub(crate) mod config;
pub(crate) mod convert;
pub(crate) mod count;
mod input;
pub(crate) mod models;
mod output;
pub(crate) mod probe;
pub(crate) mod recall;
pub(crate) mod rules;
pub(crate) mod serve;
pub(crate) mod show;
pub(crate) mod validate;

pub(crate) use output::say;

/// A failure with the exit status it maps to (the table in README.md, "Exit codes").
pub(crate) enum Failure {
    /// Exit 2: the input could not be read or parsed, or the command line or configuration is
    /// wrong (clap's own usage errors exit 2 too).
    Unreadable(anyhow::Error),
    /// Exit 1: the input was read but is invalid, or the command failed.
    Invalid(anyhow::Error),
    /// Exit 3: an output (file or stdout) could not be written.
    Write(anyhow::Error),
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
