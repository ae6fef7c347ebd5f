//! Python values <-> JSON values <-> conversations.

use compactor::Conversation;
use compactor::format::{Format, detect::guess_format};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use serde::Serialize;
use serde_json::Value;

/// A Python value (dict, list, tuple, str, int, float, bool, None) as JSON.
///
/// # Errors
/// `TypeError` naming the value that has no JSON form (an object, bytes, a set...).
pub fn to_json(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    pythonize::depythonize(obj).map_err(|e| {
        PyTypeError::new_err(format!(
            "expected plain JSON values (dict, list, str, int, float, bool, None): {e}"
        ))
    })
}

/// A serializable Rust value as a Python value (objects become dicts, in key order).
pub fn to_py<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    pythonize::pythonize(py, value).map_err(|e| PyValueError::new_err(e.to_string()))
}

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
