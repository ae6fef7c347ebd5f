//! The guard: the one place that knows what a legal conversation is.
//!
//! The guard computes a [`Layout`] once per input (units: rounds, tool exchanges, legal
//! [`Cut`]s; the pinned prefix; the protected messages), every strategy plans from it, and
//! [`apply`] builds the output of a plan ([`UnitEdit`]s; the text of a cap or a clear is the
//! guard's own, written by [`mod@write`]), refusing a faulty one with a
//! [`PlanError`] that names the edit and recording kept failures as [`FailureRecord`]s. Every
//! output then passes [`validate`] and [`check_compaction_with`] before it is returned.
//!
//! ```text
//! plan            -> apply(layout)      legal cut, partners together, marker, typed records
//! output          -> settle(format)     request-wide limits (cache_control count)
//!                 -> validate(format)   provider rules, pairing, references
//!                 -> check_compaction   what must survive (system, newest turn, thinking, failures)
//!                 -> check_envelope     top-level fields, compaction items, breakpoint count
//!                 -> accepted | rejected (input returned, report says why)
//! ```
//!
//! - A *round* starts at a clean user message (role user, no tool_result) and runs to the next.
//! - A *tool exchange* is a run of assistant messages issuing tool calls (parallel calls are one
//!   exchange) plus the messages carrying their results. Exchanges are atomic.
//! - A plain drop may cut only at a round start; a cut at an exchange boundary inside a round
//!   needs a user-role marker or summary message in front; no cut falls inside an exchange
//!   (including the open last one) or at the very end.
//!
//! ## The rules and where they come from
//!
//! | rule | checked by | source |
//! |---|---|---|
//! | call ids unique; each result answers an earlier call, once | [`validate`] | Anthropic "Tool use" docs; OpenAI Chat / Responses API references (`tool_call_id`, `call_id`) |
//! | Anthropic: first message user; each tool_use answered in the very next message; tool_result blocks first in it (text, images or markers before or between them are refused, located at the result) | [`validate`] | Anthropic "Tool use" docs; error text `tool_use ids were found without tool_result blocks immediately after` |
//! | OpenAI Chat: tool messages follow their assistant tool_calls directly (a user message between parallel tool messages is refused where it stands); legacy `function` message right after its `function_call`, same `name` | [`validate`] | Chat Completions API reference (tool messages; deprecated `function_call` / `function` role) |
//! | Responses: each `*_call_output` pairs with its call by `call_id`; a reasoning item stays with the item after it | [`validate`], [`Units`] | Responses API reference; error text `Item 'rs_…' of type 'reasoning' was provided without its required following item` |
//! | Anthropic server tools: `*_tool_result` after its `server_tool_use` in the same turn (same message or a `pause_turn` continuation), `tool_use.caller.tool_id` names a kept `server_tool_use`; the whole chain is one exchange; opaque payloads pass through verbatim | [`validate`], [`Units`] via `refs` | Anthropic "Server tools", "Web search tool", "Programmatic tool calling" docs |
//! | Responses MCP approvals: `mcp_approval_response` / `mcp_call` name a kept `mcp_approval_request`, one unit; `computer_call_output` acknowledges only its call's pending safety checks | [`validate`], [`Units`] via `refs` | OpenAI "Remote MCP servers" and "Computer use" guides |
//! | provider compaction items (Anthropic `compaction` block, Responses `compaction` item): the latest kept byte-identical and in place; what precedes it (the provider ignores it) is dropped first | [`Units`], [`check_envelope`] | Anthropic "Compaction" docs (`compact_20260112`); OpenAI Responses compaction (`compaction` item) |
//! | Anthropic `cache_control`: at most 4, none on an empty text block; compaction never adds one; a surplus in the input is removed from every output by [`settle`] (history first, then `tools`), and the report says which | [`validate`], [`settle`], [`check_envelope`] via `cache` | Anthropic "Prompt caching" docs; error texts `A maximum of 4 blocks with cache_control may be provided. Found N.`, `cache_control cannot be set for empty text blocks` |
//! | envelope: every top-level field other than the history byte-identical | [`check_envelope`] | Anthropic and OpenAI "Prompt caching" docs (exact prefix match over tools and system) |
//! | inline base64 image data not empty and decodable; compaction replaces a bad image outside the newest exchange ([`Units::newest_exchange`]) by a text placeholder of its format (`plan_repairs`, [`UnitEdit::RepairImage`]) and refuses the input for one inside it | [`validate`], [`apply`] | Anthropic error texts `image cannot be empty`, `invalid base64 data`, `Could not process image`; OpenAI `Invalid image`; anthropics/claude-code#35897, #5240 (every later request fails) |
//! | a request's output token limit (`max_tokens`, `max_completion_tokens`, `max_output_tokens`) is an integer of at least 1 (`/v1/validate` only; compaction passes it through) | [`check_token_limits`] | Anthropic Messages and OpenAI Chat / Responses API references (integer, at least 1) |
//! | what a compaction must keep (system prompt, newest message, thinking blocks, open tool loop, failures) | [`check_compaction`] | Anthropic "Extended thinking" docs (signatures); this project's preservation rules |

pub(crate) mod cache;
mod carry;
mod context;
mod continuation;
mod edit;
mod envelope;
mod fields;
mod layout;
mod preserve;
pub(crate) mod refs;
mod repair;
mod units;
mod validate;
mod violation;
pub mod write;

pub use crate::facts::UserWords;
pub use crate::tokens::image::ImageFault;
pub(crate) use carry::{Carried, CarryError, Kept};
pub(crate) use context::ContextRules;
pub(crate) use continuation::{Prefix, continue_prefix};
pub use edit::{
    Applied, Edit, FailureRecord, IMAGE_REMOVED_PREFIX, ImageRepair, PlanError, SummaryParts,
    UnitEdit, apply,
};
pub use write::Marker;
// `settle`, `check_envelope` and `check_compaction_with` are public only while
// tests/all/strategy_props.rs judges strategy outputs with them (issue 38 item 5 rewrites it).
pub use envelope::{check_envelope, settle};
#[cfg(feature = "server")]
pub(crate) use fields::Count;
pub use fields::check_token_limits;
pub use layout::{Layout, MessageTokens};
pub use preserve::{check_compaction, check_compaction_with};
pub(crate) use repair::plan_repairs;
#[cfg(feature = "ab")]
pub(crate) use repair::unrepaired;
pub use units::{Cut, CutKind, Exchange, Round, Units};
pub(crate) use validate::{Junction, has_reference, validate_continuation};
pub use validate::{ValidateOptions, validate};
pub use violation::{SystemRule, Violation, ViolationKind};

#[cfg(test)]
mod junction_tests;
