//! # compactor
//!
//! Compacts the message history of an LLM agent to a token budget, without ever producing a
//! request the provider rejects and without silently losing facts.
//!
//! ```text
//! bytes (request body / Claude Code .jsonl / Codex rollout / trajectory)
//!   -> format adapter (read)      Conversation + Format, unknown fields kept verbatim
//!   -> guard                      units (rounds, tool exchanges), legal cut points
//!   -> format adapter (write)     same format out as in
//! ```
//!
//! Pluggable pieces:
//! - [`format`]: provider formats (Anthropic, OpenAI Chat, OpenAI Responses) and session-log
//!   importers (Claude Code, Codex, mini-swe-agent).
//! - [`guard`]: units, cut points, [`guard::validate`] and [`guard::check_compaction`].
//!
//! ```
//! use compactor::{format::Format, guard};
//! let body = serde_json::json!({"messages": [
//!     {"role": "user", "content": "list files"},
//!     {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]},
//!     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.rs"}]}
//! ]});
//! let conversation = Format::Anthropic.read(&body).unwrap();
//! assert!(guard::validate(&conversation, Format::Anthropic, Default::default()).is_empty());
//! ```

#[cfg(feature = "ab")]
pub mod ab;
pub mod compactor;
pub mod config;
pub mod conversation;
pub mod facts;
pub mod format;
pub mod guard;
pub mod llm;
pub mod memory;
pub mod outcome;
pub mod render;
pub mod report;
#[cfg(feature = "server")]
pub mod server;
pub mod strategy;
pub mod tokens;

pub use compactor::{CompactError, Compacted, Compactor};
pub use conversation::{Block, Conversation, Message, Role};
pub use format::Format;
pub use report::{Report, Status};
pub use strategy::{Budget, Strategy};
