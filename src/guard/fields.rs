//! JSON numbers read as counts (of tokens): a budget, a request's `max_tokens`.

use serde_json::Number;

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

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

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
}
