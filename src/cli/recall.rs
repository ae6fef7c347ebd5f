//! `compactor recall ID`: an original that `compactor compact` cleared or dropped, read back
//! from the recall directory `compact` wrote it to (`--recall-dir`, `[recall] dir`, else the
//! user's cache directory).

use super::Failure;
use super::output::{say, write_output};
use compactor::recall::{RecallDir, RecallDirError, RecallError};
use std::path::PathBuf;
use std::process::ExitCode;

/// The flags of `compactor recall`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The recall id (`rc_` and 32 hex digits) from a placeholder or marker of the output.
    id: String,
    /// The recall directory `compact` wrote (default: `[recall] dir`, else
    /// `$XDG_CACHE_HOME/compactor/recall` or `~/.cache/compactor/recall`).
    #[arg(long)]
    recall_dir: Option<PathBuf>,
    /// A config file (TOML), layered over the built-in defaults: its `[recall] dir`.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Output file (default: stdout).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// Prints `{"id", "kind", "original"}` of the id (as `GET /v1/recall/{id}` answers).
pub(crate) fn run(args: Args) -> Result<ExitCode, Failure> {
    let settings = compactor::config::Loader {
        file: args.config,
        ..compactor::config::Loader::from_environment()
    }
    .load()
    .map_err(|e| Failure::Unreadable(e.into()))?;
    let dir = directory(args.recall_dir, &settings.recall).ok_or_else(|| {
        Failure::Unreadable(anyhow::anyhow!(
            "no recall directory: give --recall-dir DIR (the one compact wrote) or set [recall] dir"
        ))
    })?;
    let recalled = dir.read(&args.id).map_err(|e| match e {
        RecallDirError::Recall(RecallError::Unknown(id)) => Failure::Invalid(anyhow::anyhow!(
            "recall id {id} is unknown: {} holds no such original (written by `compactor \
             compact` with another --recall-dir, or pruned past [recall] max_bytes); the \
             service's ids are recalled with GET /v1/recall/{{id}}",
            dir.path().display()
        )),
        other => Failure::Unreadable(other.into()),
    })?;
    let value = serde_json::to_value(&recalled).map_err(|e| Failure::Invalid(e.into()))?;
    write_output(args.output.as_deref(), &value)?;
    Ok(ExitCode::SUCCESS)
}

/// The recall directory: `flag`, else `[recall] dir`, else `$XDG_CACHE_HOME/compactor/recall`,
/// else `$HOME/.cache/compactor/recall`; `None` when none of them is set.
pub(super) fn directory(
    flag: Option<PathBuf>,
    settings: &compactor::config::RecallSettings,
) -> Option<RecallDir> {
    let set = |v: Option<std::ffi::OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    flag.or_else(|| (!settings.dir.is_empty()).then(|| PathBuf::from(&settings.dir)))
        .or_else(|| set(std::env::var_os("XDG_CACHE_HOME")).map(|c| c.join("compactor/recall")))
        .or_else(|| set(std::env::var_os("HOME")).map(|h| h.join(".cache/compactor/recall")))
        .map(RecallDir::new)
}

/// After `compact`: writes every original the output names (`report.recall`) to the recall
/// directory, prunes it to `[recall] max_bytes`, and says where on stderr. A directory that
/// cannot be written is a warning: the output itself was written.
pub(super) fn keep(
    engine: &compactor::Compactor,
    report: &compactor::report::Report,
    flag: Option<PathBuf>,
) {
    let settings = &engine.settings().recall;
    if !settings.enabled || report.recall.is_empty() {
        return;
    }
    let n = report.recall.len();
    let Some(dir) = directory(flag, settings) else {
        say!(
            "warning: no recall directory (give --recall-dir DIR or set [recall] dir): the \
             output's {n} recall id(s) cannot be recalled"
        );
        return;
    };
    let written = report.recall.iter().try_for_each(|r| {
        let recalled = engine.recall(&r.id).map_err(RecallDirError::from)?;
        dir.write(&recalled)
    });
    match written.and_then(|()| dir.prune(settings.max_bytes)) {
        Ok(_) => say!(
            "note: {} kept in {}: compactor recall ID prints one back",
            if n == 1 {
                "1 original".to_string()
            } else {
                format!("{n} originals")
            },
            dir.path().display()
        ),
        Err(e) => say!(
            "warning: recall directory {}: {e}: the output's recall ids cannot all be recalled",
            dir.path().display()
        ),
    }
}
