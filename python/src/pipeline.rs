//! `Compactor`: one configured pipeline an agent keeps across turns (token cache and memory of
//! earlier compactions stay warm).

use crate::input::read;
use crate::values::{to_json, to_py};
use compactor::config::{ConfigText, Loader};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The process's async runtime (one thread, driven by the calling thread): the pipeline is
/// async because the summary tier calls an LLM over HTTP.
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the async runtime: {e}")))?;
    Ok(RUNTIME.get_or_init(|| rt))
}

/// A budget as the CLI and the API take it: `None` (the configured one) or at least 1 token.
///
/// # Errors
/// `ValueError` for 0 or a negative number, saying what a budget is.
pub fn checked_budget(budget: Option<i64>) -> PyResult<Option<usize>> {
    match budget {
        None => Ok(None),
        Some(b) if b >= 1 => usize::try_from(b)
            .map(Some)
            .map_err(|e| PyValueError::new_err(format!("budget {b}: {e}"))),
        Some(b) => Err(PyValueError::new_err(format!(
            "budget {b}: a budget is the number of tokens the compacted request may hold \
             (system prompt, tools and messages); it must be at least 1 (None uses the \
             configured one)"
        ))),
    }
}

/// A configured compaction pipeline (see `compactor.Compactor` for the documented wrapper).
#[pyclass(module = "compactor._native", name = "Compactor", frozen)]
pub struct Compactor {
    inner: compactor::Compactor,
}

#[pymethods]
impl Compactor {
    /// `config`: None (built-in defaults), a path to a TOML/JSON config file, or a dict of the
    /// same sections (`{"budget": {"tokens": 20000}}`). `strategy`: a preset name or path.
    #[new]
    #[pyo3(signature = (config=None, strategy=None))]
    fn new(
        py: Python<'_>,
        config: Option<&Bound<'_, PyAny>>,
        strategy: Option<String>,
    ) -> PyResult<Self> {
        let mut loader = Loader {
            preset: strategy,
            ..Loader::from_environment()
        };
        // A dict is a config file's content: layered where `--config FILE` goes, and named
        // `config dict` in errors.
        match config {
            None => {}
            Some(c) if c.is_instance_of::<PyDict>() => {
                loader.text = Some(ConfigText {
                    name: "config dict".into(),
                    json: to_json(c)?.to_string(),
                });
            }
            Some(c) => loader.file = Some(c.extract::<PathBuf>()?),
        }
        let settings = loader.load().map_err(|e| crate::errors::config(py, &e))?;
        let inner = compactor::Compactor::from_config(settings)
            .map_err(|e| crate::errors::config(py, &e))?;
        Ok(Compactor { inner })
    }

    /// Compacts `body` (a request dict or a bare message list). Returns `(body, report, changed)`:
    /// the output in the input's shape and format (the input object itself when unchanged),
    /// the report as a dict, and whether the output differs from the input.
    #[pyo3(signature = (body, budget=None, format=None))]
    fn compact<'py>(
        &self,
        py: Python<'py>,
        body: &Bound<'py, PyAny>,
        budget: Option<i64>,
        format: Option<&str>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, bool)> {
        let budget = checked_budget(budget)?;
        let value = to_json(body)?;
        let (conversation, format) = read(py, &value, format)?;
        let rt = runtime()?;
        let inner = &self.inner;
        let outcome = py.detach(|| {
            rt.block_on(inner.compact(&conversation, format, budget))
                .map(|c| {
                    let written = match &c.conversation {
                        Cow::Owned(out) => Some(format.write(out)),
                        Cow::Borrowed(_) => None,
                    };
                    (written, c.report)
                })
        });
        let (written, report) = outcome.map_err(|e| match e {
            compactor::CompactError::InvalidInput(v) => crate::errors::invalid_input(py, &v),
            // `CompactError` is non-exhaustive: a kind added later is still an error here.
            other => pyo3::exceptions::PyRuntimeError::new_err(other.to_string()),
        })?;
        let report = to_py(py, &report)?;
        Ok(match written {
            Some(out) => (to_py(py, &out)?, report, true),
            None => (body.clone(), report, false),
        })
    }

    /// Tokens of `body` with this pipeline's (cached) counters, split up: `total`, `system`,
    /// `tools`, `messages`, `by_role`, `by_block_type`, `by_tool`, `largest`, and
    /// `model_tokens` (`count::counted`): the figure `compact` budgets with, for `model`
    /// (else the body's, else `[tokens] model`).
    #[pyo3(signature = (body, format=None, model=None))]
    fn count<'py>(
        &self,
        py: Python<'py>,
        body: &Bound<'py, PyAny>,
        format: Option<&str>,
        model: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let value = to_json(body)?;
        let (conversation, format) = read(py, &value, format)?;
        crate::count::counted(py, &self.inner, &conversation, format, model)
    }

    /// `(limit, target)` in tokens for an explicit budget, or the configured one.
    #[pyo3(signature = (budget=None))]
    fn budget(&self, budget: Option<i64>) -> PyResult<(usize, usize)> {
        let b = self.inner.budget(checked_budget(budget)?);
        Ok((b.limit, b.target))
    }

    /// The original recall id `id` names, as a dict `{id, kind, original}` (`original`: the
    /// cleared block's JSON, or the list of the dropped messages' JSON, as the input had them).
    /// Raises `RecallError` (`.kind`: evicted, unknown, malformed, disabled).
    fn recall<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyAny>> {
        let got = self
            .inner
            .recall(id)
            .map_err(|e| crate::errors::recall(py, &e))?;
        to_py(py, &got)
    }

    /// The preset in force (`default`, `truncate`, ...).
    #[getter]
    fn strategy(&self) -> String {
        self.inner.settings().preset.clone()
    }

    /// Tiers of the settings that cannot run here, with the reason.
    #[getter]
    fn skipped_tiers(&self) -> Vec<String> {
        self.inner.skipped_tiers().to_vec()
    }
}
