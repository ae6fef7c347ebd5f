//! Restorable compaction: what `microcompact` clears and `truncate` drops stays recoverable by
//! a recall id (the rule for context compression: drop the content, keep what restores it).
//!
//! The guard's writers ([`crate::guard::write`]) name a [`RecallId`] in what they write (the
//! placeholder of a cleared tool_result, the mark of a capped block, the marker of a dropped
//! span) and keep the original with it, as an [`Entry`] of the sealed value; a strategy only
//! says whether ids are named ([`crate::strategy::Context::recall`]).
//! [`crate::guard::apply`] returns the entries of the edits it applied, in plan order
//! ([`crate::guard::Applied::recall`]), so what the report lists ([`RecallRef`]) is what the
//! output names. The pipeline puts the entries of the outputs it takes into the
//! [`RecallStore`] (bounded by bytes, evictions recorded) and lists them in the report.
//! [`crate::Compactor::recall`] gives an original back, byte-identical to the input's JSON of
//! that block or those messages.
//!
//! Ids are keyed MACs of the content (`id`): the same history compacts to the same bytes
//! under one key (prompt caching and the proxy's prefix reuse depend on it), and nobody
//! without the key can compute or collide them. Originals are kept per tenant ([`scope`]).
//! A [`RecallDir`] keeps originals as files for a process that ends (the CLI: `compactor
//! compact` writes, `compactor recall` reads).

mod dir;
pub(crate) mod id;
pub mod scope;
mod store;
pub(crate) mod wire;

pub use dir::{RecallDir, RecallDirError};
pub use id::{RecallId, RecallKey, Tenant};
pub use store::{RecallStats, RecallStore};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

/// What a recall id stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecallKind {
    /// One content block (a cleared tool_result; OpenAI Chat: the whole `tool` message).
    Block,
    /// A span of whole messages (dropped by `truncate`).
    Span,
}

impl RecallKind {
    /// The kind named `block` or `span`.
    pub fn parse(s: &str) -> Option<RecallKind> {
        match s {
            "block" => Some(RecallKind::Block),
            "span" => Some(RecallKind::Span),
            _ => None,
        }
    }

    /// `block` or `span`.
    pub fn as_str(self) -> &'static str {
        match self {
            RecallKind::Block => "block",
            RecallKind::Span => "span",
        }
    }
}

/// One recallable original as the report lists it (the original itself is in the store).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecallRef {
    /// The recall id written into the output (`rc_` + 32 hex digits).
    pub id: String,
    /// Block or span.
    pub kind: RecallKind,
    /// Bytes of the original's compact JSON (what the store is bounded by).
    pub bytes: usize,
    /// Message index in the tier's input: the block's message, or the span's first message.
    pub message: usize,
    /// The block index (a block), or one past the span's last message (a span).
    pub end: usize,
    /// The JSON path of the original in the tier's input (`messages[3].content[1]`,
    /// `messages[1..5]`).
    pub path: String,
}

/// A recallable original as a guard writer named it: its reference and the JSON it stands
/// for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its reference.
    pub reference: RecallRef,
    /// The original as compact JSON text, written once: the block's JSON (a block) or an
    /// array of the messages' JSON (a span). Its bytes are what the id is a MAC of.
    pub original: Arc<str>,
}

/// A recalled original.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recalled {
    /// The id asked for.
    pub id: String,
    /// Block or span.
    pub kind: RecallKind,
    /// The original JSON: the block, or the array of messages.
    pub original: Value,
}

impl Recalled {
    /// The recalled original of `id` from its compact JSON (`None` when it is no JSON: a
    /// value that cannot have been kept by this service).
    pub fn parse(id: RecallId, kind: RecallKind, original: &str) -> Option<Recalled> {
        Some(Recalled {
            id: id.to_string(),
            kind,
            original: serde_json::from_str(original).ok()?,
        })
    }
}

/// Why a recall gave nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecallError {
    /// The id is not of the form `rc_` + 32 hex digits.
    #[error("malformed recall id {0:?}: expected rc_ and 32 hex digits")]
    Malformed(String),
    /// The id was stored but evicted (the store's byte bound) or expired (Redis TTL).
    #[error("recall id {0} was evicted from the recall store")]
    Evicted(String),
    /// The id was never stored here (or its eviction record is gone too).
    #[error("recall id {0} is unknown")]
    Unknown(String),
    /// Recall is off (`[recall] enabled = false`).
    #[error("recall is disabled ([recall] enabled = false)")]
    Disabled,
}

impl RecallError {
    /// `malformed`, `evicted`, `unknown` or `disabled`.
    pub fn kind(&self) -> &'static str {
        match self {
            RecallError::Malformed(_) => "malformed",
            RecallError::Evicted(_) => "evicted",
            RecallError::Unknown(_) => "unknown",
            RecallError::Disabled => "disabled",
        }
    }
}
