//! What [`super::apply`] applied, for the report: one typed [`Edit`] per edit of a plan it
//! built (a cap of a call input that microcompact clears along with its result is not
//! listed), derived from the edit and what the guard wrote for it, never described twice.

use super::SummaryParts;
use crate::conversation::Conversation;
use crate::facts::UserWords;
use crate::guard::write::{Capped, Cleared, Marker};
use serde::Serialize;

/// One change, typed, as applied. Message indices refer to the plan's *input* (the
/// strategy's).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "edit", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Edit {
    /// A block's text shortened to head + tail with a marker.
    Truncated {
        /// Message index.
        message: usize,
        /// Block index.
        block: usize,
        /// What was cut: `tool_result`, `tool_use_input` or `text`.
        what: &'static str,
        /// Call id for tool blocks.
        id: Option<String>,
        /// Tokens of the block before.
        tokens_before: usize,
        /// Tokens of the block after.
        tokens_after: usize,
    },
    /// A stale tool result's content replaced with a placeholder.
    Cleared {
        /// Message index.
        message: usize,
        /// Block index.
        block: usize,
        /// The call id (kept in the output).
        id: String,
        /// The tool's name.
        tool: String,
        /// Tokens removed.
        tokens: usize,
    },
    /// Whole messages dropped, replaced by one marker message with a digest.
    Dropped {
        /// First dropped message.
        from: usize,
        /// One past the last dropped message.
        to: usize,
        /// Tool calls among them.
        calls: usize,
        /// Tokens removed (before the marker is added).
        tokens: usize,
        /// The span's user requests the marker does not hold verbatim (omitted from the
        /// serialized edit when it holds them all).
        #[serde(skip_serializing_if = "UserWords::is_verbatim")]
        user_words: UserWords,
    },
    /// Messages replaced by a model-written summary.
    Summarized {
        /// First summarized message.
        from: usize,
        /// One past the last summarized message.
        to: usize,
        /// Tokens of the summarized messages.
        tokens_before: usize,
        /// Tokens of the summary message.
        summary_tokens: usize,
        /// The span's user requests the summary's ledger does not hold verbatim (omitted from
        /// the serialized edit when it holds them all).
        #[serde(skip_serializing_if = "UserWords::is_verbatim")]
        user_words: UserWords,
    },
}

impl Edit {
    /// The report's edit of a block the guard capped ([`crate::guard::write::cap`]).
    pub(super) fn truncated(c: &Capped) -> Edit {
        Edit::Truncated {
            message: c.message(),
            block: c.block(),
            what: c.what(),
            id: c.id().map(str::to_string),
            tokens_before: c.tokens_before(),
            tokens_after: c.tokens_after(),
        }
    }

    /// The report's edit of a result the guard cleared ([`crate::guard::write::clear`]):
    /// `tokens` is what the block lost.
    pub(super) fn cleared(c: &Cleared) -> Edit {
        Edit::Cleared {
            message: c.message(),
            block: c.block(),
            id: c.id().to_string(),
            tool: c.tool().to_string(),
            tokens: c.tokens_before().saturating_sub(c.tokens_after()),
        }
    }

    /// The report's edit of a drop of messages `span` of `input` behind `marker`: the calls
    /// among them, and the tokens the marker states it replaced.
    pub(super) fn dropped(
        input: &Conversation,
        span: std::ops::Range<usize>,
        marker: &Marker,
    ) -> Edit {
        let calls = input
            .messages
            .get(span.clone())
            .unwrap_or_default()
            .iter()
            .map(|m| m.tool_uses().count())
            .sum();
        Edit::Dropped {
            from: span.start,
            to: span.end,
            calls,
            tokens: marker.removed_tokens,
            user_words: marker.user_words.clone(),
        }
    }

    /// The report's edit of a summary of messages `span`.
    pub(super) fn summarized(span: std::ops::Range<usize>, summary: &SummaryParts) -> Edit {
        Edit::Summarized {
            from: span.start,
            to: span.end,
            tokens_before: summary.tokens_before,
            summary_tokens: summary.tokens,
            user_words: summary.ledger.user_words.clone(),
        }
    }
}
