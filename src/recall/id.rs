//! Recall ids and tenants, both keyed MACs under one per-deployment [`RecallKey`].
//!
//! ```text
//! id      = "rc_" + hex(first 16 bytes of HMAC-SHA256(key, kind || 0x00 || tenant || original)))
//! tenant  = first 16 bytes of HMAC-SHA256(key, "tenant" || 0x00 || credential)
//! ```
//! `kind` is `block` or `span`, `tenant` its 16 bytes (zero for the library's own compactions,
//! [`Tenant::NONE`]), `original` the compact JSON bytes of what the id stands for. Without the
//! key nobody can compute an id from a block they can guess, nor make two originals share an
//! id (xxh3, the hash before, was neither secret nor collision-resistant: issue 35). One key
//! gives one original one id, so the same history compacts to the same bytes wherever the key
//! is the same (prompt caching and the proxy's prefix reuse need a stable output).
//!
//! The key is the deployment's: `[recall] secret_env` names the variable holding it; without
//! one the service generates it once and keeps it in Redis (`[store]`), and a service without
//! either draws one at random for its lifetime ([`RecallKey::process`]). The library and the
//! CLI without a secret use a fixed public key ([`RecallKey::public`]): reproducible outputs,
//! computable ids (their store is the caller's own process).

use super::{RecallError, RecallKind};
use ring::hmac;
use std::sync::OnceLock;

/// The prefix of every recall id.
pub const PREFIX: &str = "rc_";

/// Bytes of a secret the service generates ([`RecallKey::generate`]).
pub const SECRET_BYTES: usize = 32;

/// A parsed recall id (its 128 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecallId(pub u128);

/// Whose originals: a keyed hash of the provider credential (or of a configured tenant
/// header) of the request that made them. The key itself is never kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tenant(pub u128);

impl Tenant {
    /// The tenant of the library's own compactions and of requests that carry no credential.
    pub const NONE: Tenant = Tenant(0);
}

impl std::fmt::Display for Tenant {
    /// 32 hex digits (Redis keys; never logged).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// The per-deployment MAC key of recall ids and tenants. Cheap to clone.
#[derive(Clone)]
pub struct RecallKey {
    key: hmac::Key,
}

impl std::fmt::Debug for RecallKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is a secret: never printed.
        f.write_str("RecallKey(..)")
    }
}

/// The first 16 bytes of a MAC tag as a number.
fn first_128(tag: &hmac::Tag) -> u128 {
    let mut out = [0u8; 16];
    for (o, b) in out.iter_mut().zip(tag.as_ref()) {
        *o = *b;
    }
    u128::from_be_bytes(out)
}

impl RecallKey {
    /// The key of `secret` (any length; a short one is as weak as it is short).
    pub fn from_secret(secret: &[u8]) -> RecallKey {
        RecallKey {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
        }
    }

    /// A new random secret of `SECRET_BYTES` bytes from the system's generator, as lowercase
    /// hex (what the service keeps in Redis), or `None` when the generator failed.
    pub fn generate() -> Option<String> {
        use ring::rand::SecureRandom;
        let mut bytes = [0u8; SECRET_BYTES];
        ring::rand::SystemRandom::new().fill(&mut bytes).ok()?;
        Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The key of the library and the CLI when no secret is configured: fixed and public, so
    /// their outputs are the same in every process (reproducible compactions, pinned test
    /// figures). Its ids can be computed by anyone; the service never uses it (it draws
    /// [`RecallKey::process`] or reads the deployment's secret).
    pub fn public() -> RecallKey {
        RecallKey::from_secret(b"compactor: public recall key (no [recall] secret_env)")
    }

    /// This process's own key, drawn at random once (used where no secret is configured; ids
    /// then hold only as long as the process: its in-process store forgets them at exit
    /// anyway). `None` when the system's generator failed.
    pub fn process() -> Option<RecallKey> {
        static KEY: OnceLock<Option<RecallKey>> = OnceLock::new();
        KEY.get_or_init(|| RecallKey::generate().map(|s| RecallKey::from_secret(s.as_bytes())))
            .clone()
    }

    /// The id of `original` (its compact JSON bytes) of `kind`, kept for `tenant`.
    pub fn id(&self, kind: RecallKind, tenant: Tenant, original: &[u8]) -> RecallId {
        let mut cx = hmac::Context::with_key(&self.key);
        cx.update(kind.as_str().as_bytes());
        cx.update(&[0]);
        cx.update(&tenant.0.to_be_bytes());
        cx.update(original);
        RecallId(first_128(&cx.sign()))
    }

    /// Whether `id` is the id of `original` of `kind` for `tenant` (compared in constant
    /// time): what Redis gives back is checked so before it is served.
    pub fn verify(&self, id: RecallId, kind: RecallKind, tenant: Tenant, original: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        let made = self.id(kind, tenant, original).0.to_be_bytes();
        made.ct_eq(&id.0.to_be_bytes()).into()
    }

    /// The tenant of a provider credential (an API key) or of a tenant header's value.
    pub fn tenant(&self, credential: &[u8]) -> Tenant {
        let mut cx = hmac::Context::with_key(&self.key);
        cx.update(b"tenant\0");
        cx.update(credential);
        // Zero is kept for [`Tenant::NONE`]: a credential that hashed to it is moved off it.
        Tenant(first_128(&cx.sign()).max(1))
    }
}

impl RecallId {
    /// Parses `rc_` + 32 hex digits (either case).
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

    const ORIGINAL: &[u8] = br#"{"type":"tool_result","tool_use_id":"t1","content":"x"}"#;

    #[test]
    fn one_key_one_original_one_id_and_every_input_of_the_mac_counts() {
        let key = RecallKey::from_secret(b"deployment secret");
        let a = key.id(RecallKind::Block, Tenant::NONE, ORIGINAL);
        assert_eq!(
            a,
            RecallKey::from_secret(b"deployment secret").id(
                RecallKind::Block,
                Tenant::NONE,
                ORIGINAL
            )
        );
        let others = [
            key.id(RecallKind::Span, Tenant::NONE, ORIGINAL),
            key.id(RecallKind::Block, Tenant(7), ORIGINAL),
            key.id(RecallKind::Block, Tenant::NONE, b"{}"),
            RecallKey::from_secret(b"another").id(RecallKind::Block, Tenant::NONE, ORIGINAL),
        ];
        for other in others {
            assert_ne!(a, other);
        }
        assert_eq!(a.to_string().len(), 35);
        assert!(key.verify(a, RecallKind::Block, Tenant::NONE, ORIGINAL));
        assert!(!key.verify(a, RecallKind::Block, Tenant::NONE, b"{\"planted\":1}"));
        assert!(!key.verify(a, RecallKind::Block, Tenant(7), ORIGINAL));
    }

    #[test]
    fn tenants_are_keyed_and_never_none() {
        let key = RecallKey::from_secret(b"s");
        let a = key.tenant(b"sk-ant-a");
        assert_eq!(a, key.tenant(b"sk-ant-a"));
        assert_ne!(a, key.tenant(b"sk-ant-b"));
        assert_ne!(a, RecallKey::from_secret(b"t").tenant(b"sk-ant-a"));
        assert_ne!(a, Tenant::NONE);
    }

    #[test]
    fn generated_secrets_are_64_hex_digits_and_differ() {
        let (a, b) = (
            RecallKey::generate().unwrap(),
            RecallKey::generate().unwrap(),
        );
        assert_eq!(a.len(), 2 * SECRET_BYTES);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
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
