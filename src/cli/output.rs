//! Writing a command's output: text or JSON to a file or stdout (a closed pipe ends it quietly),
//! and `say!`, a line on stderr that cannot panic.

use super::Failure;
use anyhow::Context;
use std::io::Write;
use std::path::Path;

/// `eprintln!` that cannot panic: a line stderr does not take (`2>/dev/full`, a closed pipe)
/// is dropped, the command goes on.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use say;

/// Writes `text` to stdout. A closed pipe (`compactor validate … | head -1`) ends the output
/// quietly and the command keeps its own exit status, as ripgrep does; any other write error
/// (a full disk: `> /dev/full`) is exit 3.
pub(super) fn write_stdout(bytes: &[u8]) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::Write(
            anyhow::Error::from(e).context("writing stdout"),
        )),
        _ => Ok(()),
    }
}

pub(super) fn write_output(path: Option<&Path>, value: &serde_json::Value) -> Result<(), Failure> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| Failure::Invalid(e.into()))?;
    text.push('\n');
    write_text(path, &text)
}

/// Writes `text` to the file, or to stdout for none or `-`.
pub(super) fn write_text(path: Option<&Path>, text: &str) -> Result<(), Failure> {
    match path {
        Some(p) if p != Path::new("-") => std::fs::write(p, text)
            .with_context(|| format!("writing {}", p.display()))
            .map_err(Failure::Write),
        _ => write_stdout(text.as_bytes()),
    }
}
