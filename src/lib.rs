//! # compactor
//!
//! Compacts the message history of an LLM agent to a token budget of the target model, without
//! ever producing a request the provider rejects and without silently losing the session's
//! facts (what the user asked, which files were touched, which calls failed and why).
//!
//! ## Where to start
//!
//! - [`Compactor`]: built from [`config::Settings`] ([`config::Loader`] reads files, presets
//!   and the environment); [`Compactor::compact`] returns a [`Compacted`] (the output and its
//!   [`Report`]) or a [`CompactError`].
//! - [`Format`]: read a request body into a [`Conversation`] and write it back
//!   ([`Format::read`], [`Format::write`], [`Format::write_bytes`]); [`format::load`] also
//!   detects the format and imports session logs, [`format::convert()`] changes format.
//! - [`guard::validate`]: the provider rules a history must keep, as typed
//!   [`guard::Violation`]s.
//! - The traits to plug in your own code, below; [`Registry`] names strategies for the
//!   configuration.
//! - [`recall`]: what compaction replaced, given back by id; [`models`]: the table of context
//!   windows and prices; [`report`]: what a compaction did.
//! - `server::app` (feature `server`): the HTTP service and compacting proxy as an axum
//!   `Router`.
//!
//! Everything else (the facts a marker keeps, the compaction memory, the pipeline and its
//! policy, the fast body scanner) is internal to the crate.
//!
//! ## Data flow
//!
//! One straight line, each step once ([`Compactor`] runs it):
//!
//! ```text
//! bytes (request body / Claude Code .jsonl / Codex rollout / trajectory)
//!   -> format adapter (read)   format::load, Format::read: Conversation + Format;
//!                              unknown fields and blocks kept verbatim
//!   -> outcome policy          each tool result ok | failed | unknown, from the wire's own signal
//!   -> guard repair            an unusable inline image outside the newest exchange -> a text
//!                              placeholder (guard::plan_repairs); one inside it refuses the input
//!   -> token counter (cached)  TokenCounter: target-model tokens per block, counted once
//!   -> guard layout            units (rounds, tool exchanges), pinned prefix, legal cuts
//!   -> policy                  under the trigger: untouched; over it: tiers down to the target
//!   -> Strategy                plans edits on whole units (drop, clear, cap, summarize)
//!   -> guard                   applies them, keeps partners together, verifies provider rules
//!                              and the typed facts; a bad plan is an error, never a silent discard
//!   -> format adapter (write)  Format::write: same format out as in
//!   -> Report                  tokens before/after (model tokens), tiers, edits, timings
//! ```
//!
//! ## Plug-in traits
//!
//! Three traits are the places to plug in your own code; all are object safe, so configuration
//! can choose them at run time (`Box<dyn Strategy>`, `Arc<dyn TokenCounter>`,
//! `Arc<dyn Summarizer>`):
//! - [`Strategy`]: how to make a conversation smaller (built in: `truncate`, `microcompact`,
//!   `summary`). A strategy only proposes; the guard builds and checks every output.
//! - [`tokens::TokenCounter`]: how many tokens a text, block or conversation costs (built in:
//!   tiktoken's `o200k_base` / `cl100k_base` vocabularies encoded by bpe-openai, calibrated per
//!   model, behind a bounded cache).
//! - [`llm::Summarizer`]: who writes the narrative summary of an older span for the `summary`
//!   strategy (built in: one HTTP client speaking the Anthropic and OpenAI protocols).
//!
//! A strategy gets a [`strategy::Context`] (the guard's [`guard::Layout`]: units, legal cuts,
//! protected messages) and a [`Budget`], and returns a [`strategy::Compaction`]: a plan of
//! [`guard::UnitEdit`]s whose text the guard writes ([`mod@guard::write`]) and whose output
//! it builds and checks. `Settings::default()` is the built-in defaults only, no environment.
//!
//! ## Cargo features
//!
//! - `server`: the HTTP service and compacting proxy (`compactor::server`: axum, hyper, tower,
//!   prometheus).
//! - `ab`: the A/B harness (`compactor::ab`) and its progress bars.
//! - `cli` (default): the `compactor` binary; turns on `server` and `ab`.
//!
//! `default-features = false` builds the library alone: no axum, prometheus, indicatif or clap.
//!
//! ## Example
//!
//! Read a request, check it against the provider rules, and compact it to a budget:
//!
//! ```
//! use compactor::{Compactor, Format, config::Settings, guard};
//! let body = serde_json::json!({"messages": [
//!     {"role": "user", "content": "list files"},
//!     {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]},
//!     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.rs"}]}
//! ]});
//! let conversation = Format::Anthropic.read(&body).unwrap();
//! assert!(guard::validate(&conversation, Format::Anthropic, Default::default()).is_empty());
//!
//! let compactor = Compactor::from_config(Settings::default()).unwrap();
//! let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! let out = runtime
//!     .block_on(compactor.compact(&conversation, Format::Anthropic, Some(20_000)))
//!     .unwrap();
//! // Far under the budget: nothing to do, the conversation comes back as it was.
//! assert_eq!(Format::Anthropic.write(&out.conversation), body);
//! ```

#[cfg(feature = "ab")]
pub mod ab;
mod compactor;
pub mod config;
pub mod conversation;
pub mod cost;
pub(crate) mod facts;
pub mod format;
pub mod guard;
pub mod llm;
pub(crate) mod memory;
pub mod models;
pub(crate) mod outcome;
pub(crate) mod pipeline;
pub(crate) mod policy;
pub mod recall;
pub mod registry;
pub(crate) mod render;
pub mod report;
pub(crate) mod rules;
#[cfg(feature = "server")]
pub mod server;
pub mod strategy;
pub mod tokens;

pub use compactor::{CompactError, Compacted, Compactor, SharedCompacted};
pub use conversation::{Block, Conversation, Message, Role};
pub use format::Format;
pub use outcome::OutcomePolicy;
pub use registry::Registry;
pub use render::conversation_lines;
pub use report::{Report, Status};
pub use rules::markdown as rules_markdown;
pub use strategy::{Budget, Strategy};
