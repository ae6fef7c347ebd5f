//! The guard: the one place that knows what a legal conversation is.
//!
//! Every strategy works on the guard's [`Units`] (rounds, tool exchanges, legal [`Cut`]s) and
//! every compaction output passes [`validate`] and [`check_compaction`] before it is returned;
//! an output that fails is discarded and the input kept.
//!
//! ```text
//! strategy output -> validate(format)   provider rules, pairing
//!                 -> check_compaction   what must survive (system, newest turn, thinking, failures)
//!                 -> accepted | rejected (input returned, report says why)
//! ```
//!
//! - A *round* starts at a clean user message (role user, no tool_result) and runs to the next.
//! - A *tool exchange* is a run of assistant messages issuing tool calls (parallel calls are one
//!   exchange) plus the messages carrying their results. Exchanges are atomic.
//! - A plain drop may cut only at a round start; a cut at an exchange boundary inside a round
//!   needs a user-role marker or summary message in front; no cut falls inside an exchange
//!   (including the open last one) or at the very end.

pub mod cache;
mod envelope;
mod preserve;
pub mod refs;
mod units;
mod validate;
mod violation;

pub use envelope::{check_envelope, settle};
pub use preserve::check_compaction;
pub use units::{Cut, CutKind, Exchange, Round, Units, is_clean_user};
pub use validate::{ValidateOptions, validate};
pub use violation::{Violation, ViolationKind};
