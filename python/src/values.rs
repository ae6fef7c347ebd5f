//! Python values <-> JSON values. Knows nothing of formats or errors of the library: reading a
//! body as a conversation is `input`'s.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde::Serialize;
use serde_json::Value;

/// A Python value (dict, list, tuple, str, int, float, bool, None) as JSON. Integers of any
/// size stay exact (the library keeps numbers as written: serde_json `arbitrary_precision`),
/// which is why this walks the value itself instead of going through serde.
///
/// # Errors
/// `TypeError` naming the value that has no JSON form (an object, bytes, a set, a dict key
/// that is not a string, NaN or an infinity).
pub fn to_json(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    let no_json = |what: String| {
        PyTypeError::new_err(format!(
            "expected plain JSON values (dict, list, str, int, float, bool, None): {what}"
        ))
    };
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        let digits = obj.str()?.to_string();
        return digits
            .parse::<serde_json::Number>()
            .map(Value::Number)
            .map_err(|e| no_json(format!("int {digits}: {e}")));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let x = f.value();
        return serde_json::Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| no_json(format!("float {x} has no JSON form")));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_string()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = serde_json::Map::new();
        for (k, v) in d.iter() {
            let Ok(key) = k.cast::<PyString>() else {
                return Err(no_json(format!("dict key {} is not a str", k.repr()?)));
            };
            map.insert(key.to_str()?.to_string(), to_json(&v)?);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return l
            .iter()
            .map(|v| to_json(&v))
            .collect::<PyResult<_>>()
            .map(Value::Array);
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return t
            .iter()
            .map(|v| to_json(&v))
            .collect::<PyResult<_>>()
            .map(Value::Array);
    }
    Err(no_json(format!(
        "a {} value",
        obj.get_type().name()?.to_string()
    )))
}

/// A JSON value as a Python value: objects become dicts in key order, integers ints of any
/// size, other numbers floats.
///
/// # Errors
/// Only what Python itself raises while building the values (out of memory).
pub fn json_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                let text = n.to_string();
                if text.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
                    // An integer past 64 bits: Python's int parses it exactly.
                    py.get_type::<PyInt>().call1((text,))?
                } else {
                    PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any()
                }
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for v in items {
                list.append(json_to_py(py, v)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, json_to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// A serializable Rust value (a report, a violation) as a Python value, through its JSON form.
pub fn to_py<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let json = serde_json::to_value(value).map_err(|e| PyValueError::new_err(e.to_string()))?;
    json_to_py(py, &json)
}
