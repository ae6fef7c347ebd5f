//! What `count` gives Python, for the module function and `Compactor.count` alike: the
//! breakdown in counted tokens and, under `model_tokens`, the size in the target model's tokens
//! with its counting (`compactor::Compactor::model_count`, the figure compaction budgets with).

use crate::values::to_py;
use compactor::Conversation;
use compactor::format::Format;
use compactor::tokens::Breakdown;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// `{"total", "system", "tools", "messages", …, "model_tokens": {"total", "counted",
/// "tool_calls", "counting"}}`: the breakdown's figures are tokens of
/// `model_tokens.counting.tokenizer` (counted tokens, no framing); `model_tokens.total` is model
/// tokens. `model`: the model to count for (else the body's, else `[tokens] model`). The GIL is
/// released while counting.
///
/// # Errors
/// Only what Python raises while building the dict.
pub fn counted<'py>(
    py: Python<'py>,
    engine: &compactor::Compactor,
    conversation: &Conversation,
    format: Format,
    model: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let value = py.detach(|| {
        let count = engine.model_count(conversation, model);
        // The same cached counter: the breakdown's blocks are not tokenized again.
        let counter = engine.counter_of(count.counting.tokenizer);
        let breakdown = Breakdown::new(counter, conversation, format);
        let mut value = serde_json::to_value(&breakdown)?;
        if let Some(map) = value.as_object_mut() {
            map.insert("model_tokens".into(), serde_json::to_value(&count)?);
        }
        Ok::<_, serde_json::Error>(value)
    });
    to_py(
        py,
        &value.map_err(|e| PyValueError::new_err(e.to_string()))?,
    )
}
