//! One-shot functions: validate, convert, count, load.

use crate::input::{format_named, read};
use crate::values::{to_json, to_py};
use compactor::config::Loader;
use compactor::format::detect::ImportOptions;
use compactor::guard::{self, ValidateOptions};
use compactor::tokens::{TokenCounter, Tokenizer, counter_for};
use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use std::path::PathBuf;

/// The guard's verdict on `body`: a list of violation dicts (see `errors::violation`), empty
/// when the provider accepts it. `strict`: the history may not end with calls still waiting
/// for their results.
#[pyfunction]
#[pyo3(signature = (body, format=None, strict=false))]
pub fn validate<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    format: Option<&str>,
    strict: bool,
) -> PyResult<Bound<'py, PyList>> {
    let value = to_json(body)?;
    let (conversation, format) = read(py, &value, format)?;
    let options = ValidateOptions {
        allow_open_tail: !strict,
    };
    let violations = py.detach(|| guard::validate(&conversation, format, options));
    let items: PyResult<Vec<_>> = violations
        .iter()
        .map(|v| crate::errors::violation(py, v))
        .collect();
    PyList::new(py, items?)
}

/// `body` written as a request body of format `to` (tool calls, results and failures mapped).
#[pyfunction]
#[pyo3(signature = (body, to, format=None))]
pub fn convert<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    to: &str,
    format: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let target = format_named(to)?;
    let value = to_json(body)?;
    let (conversation, from) = read(py, &value, format)?;
    let out = py.detach(|| target.write(&compactor::format::convert(&conversation, from, target)));
    to_py(py, &out)
}

fn tokenizer_named(name: Option<&str>) -> PyResult<Tokenizer> {
    match name {
        None => Ok(Tokenizer::default()),
        Some(n) => n.parse::<Tokenizer>().map_err(PyValueError::new_err),
    }
}

/// Tokens of `body`, split up, and its model tokens (as `Compactor.count`, `count::counted`),
/// with a fresh pipeline of the built-in configuration and the `COMPACTOR__…` environment
/// (as `compactor count`); `tokenizer` sets `[tokens] tokenizer`, `model` the model counted
/// for.
///
/// # Errors
/// `ValueError` for an unknown tokenizer, `ConfigError` for a bad environment variable,
/// `FormatError` for a body of no known format.
#[pyfunction]
#[pyo3(signature = (body, format=None, tokenizer=None, model=None))]
pub fn count<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    format: Option<&str>,
    tokenizer: Option<&str>,
    model: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut settings = Loader::from_environment()
        .load()
        .map_err(|e| crate::errors::config(py, &e))?;
    if let Some(t) = tokenizer {
        settings.tokens.tokenizer = tokenizer_named(Some(t))?;
    }
    let value = to_json(body)?;
    let (conversation, format) = read(py, &value, format)?;
    let counter = counter_for(settings.tokens.tokenizer);
    let engine = compactor::Compactor::with_parts(settings, counter, Vec::new());
    crate::count::counted(py, &engine, &conversation, format, model)
}

/// Tokens of a plain text (BPE of `tokenizer`, special-token markers read as text).
#[pyfunction]
#[pyo3(signature = (text, tokenizer=None))]
pub fn count_text(py: Python<'_>, text: &str, tokenizer: Option<&str>) -> PyResult<usize> {
    let counter = counter_for(tokenizer_named(tokenizer)?);
    Ok(py.detach(|| counter.count_text(text)))
}

/// Loads a file (a path) or its bytes: a request body of any format, or a session log (Claude
/// Code JSONL, Codex rollout, mini-swe-agent trajectory) imported as a request. Returns
/// `(body, format, source)`; `source` is `request`, `claude-code`, `codex-rollout` or
/// `trajectory`.
#[pyfunction]
#[pyo3(signature = (source, format=None, whole_log=false))]
pub fn load<'py>(
    py: Python<'py>,
    source: &Bound<'py, PyAny>,
    format: Option<&str>,
    whole_log: bool,
) -> PyResult<(Bound<'py, PyAny>, &'static str, &'static str)> {
    let bytes = if let Ok(b) = source.cast::<PyBytes>() {
        b.as_bytes().to_vec()
    } else if let Ok(path) = source.extract::<PathBuf>() {
        std::fs::read(&path).map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))?
    } else {
        return Err(PyTypeError::new_err("load() takes a path or bytes"));
    };
    let hint = format.map(format_named).transpose()?;
    let loaded = py
        .detach(|| compactor::format::load(&bytes, hint, ImportOptions { whole_log }))
        .map_err(|e| crate::errors::format(py, &e))?;
    let body = py.detach(|| loaded.format.write(&loaded.conversation));
    let origin = loaded.source.name();
    Ok((to_py(py, &body)?, loaded.format.as_str(), origin))
}
