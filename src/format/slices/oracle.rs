//! serde_json's own answer to where a request body's message items lie, the independent oracle
//! of the byte scanner (`scanner.rs`): the body parsed by serde_json (validity and nesting),
//! the message array taken as a `&RawValue` and its items as `Vec<&RawValue>`, each span read
//! from where the borrowed text lies in the body. `spans_tests.rs` holds the scanner to it on
//! the corpus, the cases and random bodies; `benches/slices.rs` times both. Not the service's
//! reader: it is several times slower than the scanner (figures in `super`'s module docs).
//! Needs serde_json's `raw_value` feature (on in Cargo.toml; only this oracle and its bench use it).

use serde::Deserialize;
use serde::Deserializer as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;
use std::fmt;
use std::ops::Range;

/// What `super::scanner::spans` gives for `body` (the message array and its items, in byte
/// offsets of `body`), found by serde_json: `None` when `body` is not JSON, nests deeper than
/// the scanner's limit (`depth + 1` for a bare array, whose items the scanner counts one level
/// deeper), or is neither a bare array nor an object with exactly one `key` whose value is an
/// array.
pub fn spans(body: &[u8], key: &str) -> Option<(Range<usize>, Vec<Range<usize>>)> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let bare = value.is_array();
    if nesting(&value) + usize::from(bare) > super::scanner::MAX_DEPTH {
        return None;
    }
    raw_spans(body, key)
}

/// [`spans`] but for the nesting check: the message array as a `&RawValue` (the body itself
/// when it is an array), then its items as `Vec<&RawValue>` (a second pass over the array).
pub fn raw_spans(body: &[u8], key: &str) -> Option<(Range<usize>, Vec<Range<usize>>)> {
    let array: &RawValue = if starts_array(body) {
        serde_json::from_slice(body).ok()?
    } else {
        message_array(body, key)?
    };
    if !array.get().starts_with('[') {
        return None;
    }
    let items: Vec<&RawValue> = serde_json::from_str(array.get()).ok()?;
    let items = items.iter().map(|i| span(body, i)).collect::<Option<_>>()?;
    Some((span(body, array)?, items))
}

/// Whether the first byte past JSON whitespace opens an array.
fn starts_array(body: &[u8]) -> bool {
    body.iter()
        .find(|c| !matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        .is_some_and(|&c| c == b'[')
}

/// The message items of `body` in one serde_json pass (`Vec<&RawValue>` straight from the
/// body): what a RawValue reader would cost at least, with neither the array's own span nor
/// the nesting check that [`spans`] and the scanner give.
pub fn items(body: &[u8], key: &str) -> Option<Vec<Range<usize>>> {
    let items: Vec<&RawValue> = if starts_array(body) {
        serde_json::from_slice(body).ok()?
    } else {
        message_array(body, key)?
    };
    items.iter().map(|i| span(body, i)).collect()
}

/// Where `raw`, borrowed from `body`, lies in it.
fn span(body: &[u8], raw: &RawValue) -> Option<Range<usize>> {
    let text = raw.get();
    let start = text.as_ptr().addr().checked_sub(body.as_ptr().addr())?;
    Some(start..start + text.len())
}

/// Levels of arrays and objects in `value` (a scalar is 0, `[]` is 1).
fn nesting(value: &Value) -> usize {
    let inner = match value {
        Value::Array(items) => items.iter().map(nesting).max(),
        Value::Object(map) => map.values().map(nesting).max(),
        _ => return 0,
    };
    1 + inner.unwrap_or(0)
}

/// The value of `key` in the JSON object `body`, read as `T` (borrowing from `body`); `None`
/// when `body` is not such an object, has no `key` or has it twice.
fn message_array<'de, T: Deserialize<'de>>(body: &'de [u8], key: &str) -> Option<T> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let found = de.deserialize_map(Field::<T>(key, std::marker::PhantomData));
    de.end().ok()?;
    found.ok()?
}

/// Visits a JSON object for the value of one key (read as `T`), passing over the others.
struct Field<'k, T>(&'k str, std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for Field<'_, T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an object with one `{}`", self.0)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut found = None;
        while let Some(is_key) = map.next_key_seed(KeyIs(self.0))? {
            if !is_key {
                map.next_value::<IgnoredAny>()?;
            } else if found.replace(map.next_value::<T>()?).is_some() {
                return Err(de::Error::custom(format_args!("`{}` twice", self.0)));
            }
        }
        Ok(found)
    }
}

/// Reads an object key (escapes resolved) and tells whether it is the one looked for.
struct KeyIs<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }
}
