//! `compactor._native`: the Rust library behind the `compactor` Python package.
//!
//! ```text
//! Python value (dict / list / str) --values::to_json--> serde_json::Value --Format::read--> Conversation
//!   -> compactor (GIL released) -> Format::write -> serde_json::Value --values::json_to_py--> Python value
//! ```
//!
//! Every function takes and returns plain Python values; no JSON text crosses the boundary.
//! Errors are raised as the classes of `compactor.errors`, with their location (JSON path,
//! message index, config key) as attributes. The Python package (`compactor/__init__.py`)
//! wraps these functions in typed results; call it rather than this module.

mod count;
mod errors;
mod functions;
mod input;
mod pipeline;
mod values;

use pyo3::prelude::*;

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<pipeline::Compactor>()?;
    m.add_function(wrap_pyfunction!(functions::validate, m)?)?;
    m.add_function(wrap_pyfunction!(functions::convert, m)?)?;
    m.add_function(wrap_pyfunction!(functions::count, m)?)?;
    m.add_function(wrap_pyfunction!(functions::count_text, m)?)?;
    m.add_function(wrap_pyfunction!(functions::load, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
