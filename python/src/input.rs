//! A request body (already JSON) read as a conversation in its format: the one place the
//! package turns the library's format errors into Python exceptions while reading input.
//!
//! It sits above both `values` (Python <-> JSON, which imports no other module here) and
//! `errors` (library errors -> Python exceptions, which builds its attributes with `values`).

use compactor::Conversation;
use compactor::format::{Format, detect::guess_format};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde_json::Value;

/// A format name (`anthropic`, `openai-chat`, `openai-responses`, or the CLI's aliases).
///
/// # Errors
/// `ValueError` for an unknown name.
pub fn format_named(name: &str) -> PyResult<Format> {
    name.parse::<Format>().map_err(PyValueError::new_err)
}

/// Reads a request body or a bare message list in `format`, guessed when `None` (see
/// `compactor::format::detect::guess_format`).
///
/// # Errors
/// `FormatError` with the JSON path of the first malformed element.
pub fn read(
    py: Python<'_>,
    value: &Value,
    format: Option<&str>,
) -> PyResult<(Conversation, Format)> {
    let format = match format {
        Some(name) => format_named(name)?,
        None => guess_format(value).map_err(|e| crate::errors::format(py, &e))?,
    };
    let conversation = format
        .read(value)
        .map_err(|e| crate::errors::format(py, &e))?;
    Ok((conversation, format))
}
