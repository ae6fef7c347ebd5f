//! Reading a command's input: the bytes of a file or stdin, loaded as a history of its format,
//! with what loading left out told on stderr.

use super::Failure;
use super::output::say;
use anyhow::Context;
use compactor::format::{self, Format};
use compactor::tokens::{CachedCounter, TiktokenCounter, TokenCounter, Tokenizer};
use std::io::Read;
use std::path::Path;

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
    if let Some(why) = &loaded.notes.detected {
        say!("note: {}: {why}", path.display());
    }
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

pub(super) fn read_input(path: &Path) -> Result<Vec<u8>, Failure> {
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

pub(super) fn load(
    path: &Path,
    hint: Option<Format>,
    whole_log: bool,
) -> Result<format::detect::Loaded, Failure> {
    let bytes = read_input(path)?;
    load_bytes(path, &bytes, hint, whole_log)
}

pub(super) fn load_bytes(
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
