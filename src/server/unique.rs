//! A JSON value read with each object's keys once: a key twice is refused where it stands.
//!
//! serde_json's `Value` keeps the last of two equal keys without a word. A body with a key
//! twice means two things at once: the service would compact or check the one serde kept,
//! while a provider reading the body another way (or a proxy forwarding it as it came) may
//! take the other. The API routes refuse it instead, naming the key by its JSON path.

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};
use std::fmt;

/// A JSON value whose objects hold each key once.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unique(pub(crate) Value);

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueVisitor).map(Unique)
    }
}

/// With `arbitrary_precision` serde_json hands a number to a visitor as a map of one entry:
/// this key and the number's digits (what serde_json's own `Value` reads it from).
const NUMBER_KEY: &str = "$serde_json::private::Number";

/// Builds the `Value` serde_json's own visitor builds, refusing a repeated key.
struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Unique::deserialize(d).map(|u| u.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(Unique(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.is_empty() && key == NUMBER_KEY {
                let digits: String = map.next_value()?;
                return digits
                    .parse::<Number>()
                    .map(Value::Number)
                    .map_err(de::Error::custom);
            }
            match object.entry(key) {
                Entry::Vacant(slot) => {
                    slot.insert(map.next_value::<Unique>()?.0);
                }
                // Refused from inside the value's place, so the error's path ends with the key.
                Entry::Occupied(first) => match map.next_value_seed(Twice(first.key()))? {},
            }
        }
        Ok(Value::Object(object))
    }
}

/// The value of a key met before: an error, read nothing.
struct Twice<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for Twice<'_> {
    type Value = std::convert::Infallible;

    fn deserialize<D: Deserializer<'de>>(self, _: D) -> Result<Self::Value, D::Error> {
        Err(de::Error::custom(format!(
            "the key {:?} appears twice in this object: a body means one value by a key, and \
             the service and the provider could read different ones",
            self.0
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::AppError;
    use crate::server::error::parse_json;
    use pretty_assertions::assert_eq;

    #[derive(Debug, Deserialize)]
    struct Body {
        request: Unique,
    }

    fn read(text: &str) -> Result<Value, AppError> {
        parse_json::<Body>(text.as_bytes()).map(|b| b.request.0)
    }

    #[test]
    fn a_value_without_a_repeated_key_reads_as_serde_json_reads_it() {
        let text = r#"{"b": [1, -0, 2.50, 1E400, 18446744073709551616, -1.0e-7], "a": null,
            "c": {"z": true, "y": "\u00e9\ud83d\ude00", "x": [], "w": {}}, "d": [[{"k": 1}]]}"#;
        let expected: Value = serde_json::from_str(text).unwrap();
        let got = read(&format!(r#"{{"request": {text}}}"#)).unwrap();
        assert_eq!(got, expected);
        // The same text out, keys in their order.
        assert_eq!(got.to_string(), expected.to_string());
        assert_eq!(read(r#"{"request": 7}"#).unwrap(), Value::from(7));
    }

    #[test]
    fn a_repeated_key_is_refused_at_its_path() {
        for (text, path) in [
            (r#"{"request": {"a": 1, "a": 1}}"#, "request.a"),
            (
                r#"{"request": {"messages": [{"role": "user", "content": [{"type": "text", "text": "a", "text": "b"}]}]}}"#,
                "request.messages[0].content[0].text",
            ),
            (
                r#"{"request": [{}, {"x": {"k": 1, "j": 2, "k": {}}}]}"#,
                "request[1].x.k",
            ),
        ] {
            let Err(AppError::BadRequest {
                code,
                message,
                location,
            }) = read(text)
            else {
                panic!("{text}: read");
            };
            assert_eq!(code, "invalid_request", "{text}");
            assert_eq!(location.as_deref(), Some(path), "{text}");
            let key = path.rsplit('.').next().unwrap();
            assert!(
                message.starts_with(&format!("the key {key:?} appears twice in this object")),
                "{message}"
            );
            assert!(message.contains(" at line 1 column "), "{message}");
        }
    }
}
