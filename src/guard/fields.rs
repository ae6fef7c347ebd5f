//! JSON numbers read as counts (of tokens): a budget, a request's `max_tokens`.

use super::{Violation, ViolationKind};
use crate::conversation::Conversation;
use crate::format::Format;
use serde_json::{Number, Value};

/// What a JSON number is, read as a count. The providers read such fields as integers: a
/// fraction or an exponent makes a number no integer, even when its value is whole (`1e3`,
/// `1000.0`), as Python's `json` reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    /// An integer from 0 to `u64::MAX` (`-0` is 0).
    Whole(u64),
    /// An integer below 0.
    Negative,
    /// An integer past `u64::MAX`.
    TooLarge,
    /// A number with a fraction or an exponent.
    NotInteger,
}

impl Count {
    /// `n` read as a count, exactly: serde_json keeps each number's digits
    /// (`arbitrary_precision`), so nothing passes through a float.
    pub(crate) fn of(n: &Number) -> Count {
        if let Some(u) = n.as_u64() {
            return Count::Whole(u);
        }
        // serde_json writes a number's exponent with a lowercase `e`; digits, a sign and a
        // fraction's point are all else a number holds.
        let text = n.as_str();
        if text.contains(['.', 'e', 'E']) {
            Count::NotInteger
        } else if n.as_i64() == Some(0) {
            Count::Whole(0)
        } else if text.starts_with('-') {
            Count::Negative
        } else {
            Count::TooLarge
        }
    }
}

/// The top-level fields of a `format` request that cap the answer's tokens: Anthropic
/// `max_tokens` (required); Chat Completions `max_tokens` (deprecated) and
/// `max_completion_tokens`; Responses `max_output_tokens` (both optional, `null` for none).
fn token_limits(format: Format) -> &'static [&'static str] {
    match format {
        Format::Anthropic => &["max_tokens"],
        Format::OpenAiChat => &["max_tokens", "max_completion_tokens"],
        Format::OpenAiResponses => &["max_output_tokens"],
        // Gemini's `generationConfig.maxOutputTokens` is inside the untouched envelope (D7).
        Format::Gemini => &[],
    }
}

/// The request's output token limits that the provider refuses: each one given must be an
/// integer of at least 1 (API references: "integer", "x >= 1"), written without a fraction or
/// an exponent, as the providers' JSON readers tell integers from floats; `-0` is 0. `null`
/// is none for OpenAI (Anthropic requires the integer). A model's own maximum is not checked,
/// nor a missing `max_tokens` (a bare message array has none).
pub fn check_token_limits(conversation: &Conversation, format: Format) -> Vec<Violation> {
    token_limits(format)
        .iter()
        .filter_map(|&field| {
            let value = conversation.extra.get(field)?;
            let found = match value {
                Value::Number(n) => match Count::of(n) {
                    Count::Whole(u) if u >= 1 => return None,
                    // Past u64: no integer the check can fault; the model's maximum applies.
                    Count::TooLarge => return None,
                    Count::Whole(_) | Count::Negative | Count::NotInteger => n.to_string(),
                },
                Value::Null if format != Format::Anthropic => return None,
                Value::Null => "null".into(),
                Value::Bool(_) => "a boolean".into(),
                Value::String(_) => "a string".into(),
                Value::Array(_) => "an array".into(),
                Value::Object(_) => "an object".into(),
            };
            Some(Violation {
                path: field.to_string(),
                message: None,
                block: None,
                kind: ViolationKind::BadTokenLimit {
                    field: field.to_string(),
                    found,
                },
                rule: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn count(text: &str) -> Count {
        Count::of(&serde_json::from_str::<Number>(text).unwrap())
    }

    #[test]
    fn a_count_is_an_integer_read_exactly() {
        for (text, expected) in [
            ("0", Count::Whole(0)),
            ("-0", Count::Whole(0)),
            ("60000", Count::Whole(60_000)),
            ("18446744073709551615", Count::Whole(u64::MAX)),
            ("18446744073709551616", Count::TooLarge),
            ("1000000000000000000000000000000", Count::TooLarge),
            ("-1", Count::Negative),
            ("-18446744073709551616", Count::Negative),
            ("1.5", Count::NotInteger),
            ("1000.0", Count::NotInteger),
            ("-0.0", Count::NotInteger),
            ("1e3", Count::NotInteger),
            ("1E3", Count::NotInteger),
            ("1e400", Count::NotInteger),
            ("-1e400", Count::NotInteger),
        ] {
            assert_eq!(count(text), expected, "{text}");
        }
    }

    fn faults(format: Format, body: &str) -> Vec<String> {
        let value: Value = serde_json::from_str(body).unwrap();
        check_token_limits(&format.read(&value).unwrap(), format)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_token_limit_must_be_an_integer_of_at_least_one() {
        let user = json!([{"role": "user", "content": "hi"}]);
        for n in ["1", "64000", "18446744073709551616"] {
            let body = format!(r#"{{"model": "m", "max_tokens": {n}, "messages": {user}}}"#);
            assert_eq!(
                faults(Format::Anthropic, &body),
                Vec::<String>::new(),
                "{n}"
            );
        }
        for (n, found) in [
            ("0", "0"),
            ("-0", "-0"),
            ("-5", "-5"),
            ("1.5", "1.5"),
            ("1024.0", "1024.0"),
            ("1e3", "1e+3"),
            ("1e400", "1e+400"),
            ("null", "null"),
            (r#""1024""#, "a string"),
        ] {
            let body = format!(r#"{{"model": "m", "max_tokens": {n}, "messages": {user}}}"#);
            assert_eq!(
                faults(Format::Anthropic, &body),
                vec![format!(
                    "max_tokens: max_tokens must be an integer of at least 1 (no fraction or \
                     exponent), not {found}"
                )],
                "{n}"
            );
        }
        // OpenAI: null is none; each limit of the format is checked.
        let body = format!(
            r#"{{"model": "m", "max_tokens": null, "max_completion_tokens": 2.0, "messages": {user}}}"#
        );
        assert_eq!(
            faults(Format::OpenAiChat, &body),
            vec![
                "max_completion_tokens: max_completion_tokens must be an integer of at least 1 \
                 (no fraction or exponent), not 2.0"
            ]
        );
        let body = r#"{"model": "m", "max_output_tokens": -0, "input": [{"role": "user", "content": "hi"}]}"#;
        assert_eq!(faults(Format::OpenAiResponses, body).len(), 1);
        // A bare message array has no limits.
        assert_eq!(faults(Format::Anthropic, &user.to_string()).len(), 0);
    }
}
