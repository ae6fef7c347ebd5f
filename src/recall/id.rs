//! Recall ids: `rc_` and the 32 lowercase hex digits of the xxh3-128 hash of the kind and the
//! original's compact JSON bytes (serde_json, input key order), so one original always gets
//! one id, in every process.

use super::{RecallError, RecallKind};
use serde_json::Value;
use xxhash_rust::xxh3::Xxh3;

/// The prefix of every recall id.
pub const PREFIX: &str = "rc_";

/// A parsed recall id (its 128-bit hash).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecallId(pub u128);

impl RecallId {
    /// The id of `original` of `kind`, and the original's compact JSON bytes.
    pub fn of(kind: RecallKind, original: &Value) -> (RecallId, Vec<u8>) {
        let bytes = serde_json::to_vec(original).unwrap_or_default();
        let mut h = Xxh3::new();
        h.update(kind.as_str().as_bytes());
        h.update(&[0]);
        h.update(&bytes);
        (RecallId(h.digest128()), bytes)
    }

    /// Parses `rc_` + 32 hex digits.
    ///
    /// # Errors
    /// [`RecallError::Malformed`] for anything else.
    pub fn parse(s: &str) -> Result<RecallId, RecallError> {
        let malformed = || RecallError::Malformed(s.to_string());
        let hex = s.strip_prefix(PREFIX).ok_or_else(malformed)?;
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(malformed());
        }
        u128::from_str_radix(hex, 16)
            .map(RecallId)
            .map_err(|_| malformed())
    }
}

impl std::fmt::Display for RecallId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{PREFIX}{:032x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn same_content_same_id_other_kind_other_id() {
        let v = json!({"type": "tool_result", "tool_use_id": "t1", "content": "x"});
        let (a, bytes) = RecallId::of(RecallKind::Block, &v);
        let w = json!({"type": "tool_result", "tool_use_id": "t1", "content": "x"});
        let (b, _) = RecallId::of(RecallKind::Block, &w);
        let (c, _) = RecallId::of(RecallKind::Span, &v);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(
            bytes,
            br#"{"type":"tool_result","tool_use_id":"t1","content":"x"}"#
        );
        assert_eq!(a.to_string().len(), 35);
    }

    #[test]
    fn malformed_ids_are_refused() {
        for s in [
            "",
            "rc_",
            "rc_xyz",
            "xx_00000000000000000000000000000000",
            "rc_0000",
        ] {
            assert_eq!(
                RecallId::parse(s),
                Err(RecallError::Malformed(s.to_string())),
                "{s}"
            );
        }
        let ok = format!("rc_{}", "0a".repeat(16));
        assert_eq!(RecallId::parse(&ok).map(|i| i.to_string()), Ok(ok));
    }

    proptest! {
        #[test]
        fn display_parses_back(n in any::<u128>()) {
            let id = RecallId(n);
            prop_assert_eq!(RecallId::parse(&id.to_string()), Ok(id));
        }
    }
}
