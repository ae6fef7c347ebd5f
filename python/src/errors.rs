//! Rust errors -> the exception classes of `compactor.errors`, located.
//!
//! The classes live in Python (so users can subclass, pickle and document them like any other
//! exception); this module imports them when it raises. Each carries the location as
//! attributes: `FormatError.path`, `InvalidInputError.violations`, `ConfigError.key`.

use compactor::config::ConfigError;
use compactor::format::FormatError;
use compactor::guard::Violation;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Builds `compactor.errors.<class>(message, **attrs)`; an error while doing so is raised
/// instead (it is a broken installation, not the caller's fault).
fn raise(py: Python<'_>, class: &str, message: String, attrs: &Bound<'_, PyDict>) -> PyErr {
    let built = py
        .import("compactor.errors")
        .and_then(|m| m.getattr(class))
        .and_then(|cls| cls.call((message,), Some(attrs)));
    match built {
        Ok(instance) => PyErr::from_value(instance),
        Err(e) => e,
    }
}

/// A malformed input: `FormatError(message, path=...)`. The path is the JSON path of the
/// element at fault (`messages[3].content[1].id`), `line N` for a JSONL log, or `None` when the
/// format could not be told.
pub fn format(py: Python<'_>, e: &FormatError) -> PyErr {
    let attrs = PyDict::new(py);
    let (path, detail) = match e {
        FormatError::Json { location, source } => (Some(location.clone()), source.to_string()),
        FormatError::Shape { path, message } => (Some(path.clone()), message.clone()),
        FormatError::Unrecognised(what) => (None, what.clone()),
        other => (None, other.to_string()),
    };
    let set = attrs
        .set_item("path", path)
        .and_then(|()| attrs.set_item("detail", detail));
    match set {
        Ok(()) => raise(py, "FormatError", e.to_string(), &attrs),
        Err(err) => err,
    }
}

/// A configuration that cannot be loaded: `ConfigError(message, key=...)`, the key dotted
/// (`budget.trigger`) when one is at fault.
pub fn config(py: Python<'_>, e: &ConfigError) -> PyErr {
    let attrs = PyDict::new(py);
    let key = config_key(e);
    match attrs.set_item("key", key) {
        Ok(()) => raise(py, "ConfigError", e.to_string(), &attrs),
        Err(err) => err,
    }
}

/// The dotted key at fault, looked up through the source that named it.
fn config_key(e: &ConfigError) -> Option<String> {
    match e {
        ConfigError::Invalid { key, .. } => Some(key.clone()),
        ConfigError::PresetNotFound { .. } => Some("strategy".to_string()),
        ConfigError::In { source, .. } => config_key(source),
        _ => None,
    }
}

/// An input that breaks the provider's rules: `InvalidInputError(message, violations=[...])`,
/// each violation a dict as [`violation`] makes it (the Python class turns them into
/// `Violation` objects).
pub fn invalid_input(py: Python<'_>, violations: &[Violation]) -> PyErr {
    let message = format!(
        "invalid input: {}",
        violations
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    );
    let attrs = PyDict::new(py);
    let list: PyResult<Vec<Bound<'_, PyAny>>> =
        violations.iter().map(|v| violation(py, v)).collect();
    match list.and_then(|l| attrs.set_item("violations", l)) {
        Ok(()) => raise(py, "InvalidInputError", message, &attrs),
        Err(err) => err,
    }
}

/// One violation as a dict: `path`, `message` (index), `block` (index or None), `rule`
/// (snake_case name), the rule's own fields (`id`, `role`, `ids`, `expected`, ...), `detail`
/// (what is wrong, in words) and `text` (`PATH: WHAT`).
pub fn violation<'py>(py: Python<'py>, v: &Violation) -> PyResult<Bound<'py, PyAny>> {
    let mut value = serde_json::to_value(&v.kind)
        .map_err(|e| PyRuntimeError::new_err(format!("violation not serializable: {e}")))?;
    if let serde_json::Value::Object(fields) = &mut value {
        fields.insert("path".into(), v.path.clone().into());
        fields.insert("message".into(), v.message.into());
        fields.insert("block".into(), v.block.into());
        fields.insert("detail".into(), v.kind.to_string().into());
        fields.insert("text".into(), v.to_string().into());
    }
    crate::values::to_py(py, &value)
}

/// A recall that gave nothing: `RecallError(message, kind=..., id=...)`, `kind` one of
/// `evicted`, `unknown`, `malformed`, `disabled`.
pub fn recall(py: Python<'_>, e: &compactor::recall::RecallError) -> PyErr {
    use compactor::recall::RecallError as E;
    let attrs = PyDict::new(py);
    let id = match e {
        E::Malformed(id) | E::Evicted(id) | E::Unknown(id) => Some(id.clone()),
        E::Disabled => None,
    };
    let set = attrs
        .set_item("kind", e.kind())
        .and_then(|()| attrs.set_item("id", id));
    match set {
        Ok(()) => raise(py, "RecallError", e.to_string(), &attrs),
        Err(err) => err,
    }
}
