//! Calibration from recorded usage: what the provider counted for each request of a logged
//! session, against the counter's count of the prefix that request saw.
//!
//! ```text
//! Claude Code log:  assistant entry (first line of a message.id) -> message.usage
//!                   input_tokens + cache_read_input_tokens + cache_creation_input_tokens
//! Codex rollout:    event_msg token_count -> info.last_token_usage.input_tokens
//!                   (one request; total_token_usage sums the session; cached is a share)
//!   vs. the counter's tokens of every message logged before that request (running sums of
//!       cached per-block counts: linear in the log, never a recount of the prefix), without
//!       Codex reasoning items of earlier turns (the model drops them at a new user message)
//!   -> points per segment (a compaction starts a new segment), with the calls in the prefix
//!   -> least squares per model: actual = ratio x counted + tool_call x calls + c_segment
//! ```
//!
//! The log does not hold the system prompt and the tool definitions (Claude Code) or the tools
//! (Codex), but inside a segment they do not change, so each segment gets its own intercept
//! `c_segment` (what the request held that the log does not, plus framing) and all segments of
//! a model share the slopes `ratio` and `tool_call` (pooled within-segment estimates).
//!
//! Measured on ../shared/corpus: Claude (the six `cc_*` logs pooled) 1.105 per o200k token and
//! 172 per call; a ratio alone 1.32. Codex `gpt-5-codex` (`codex_rollout_01997e76`, 132
//! requests): a ratio alone 1.008 with a constant of 1,693 (it was 0.46 while reasoning items of
//! earlier turns were counted: their encrypted estimate is 101k tokens by the end, the
//! provider's whole input 93.5k).
//!
//! ```text
//! points.rs    the logs read as usage points (Claude Code logs, Codex rollouts)
//! fitting.rs   the least-squares fit per model, and its replay as an agent loop sees it
//! report.rs    the text report of `compactor calibrate`
//! ```

mod fitting;
mod points;
mod report;
pub use fitting::{ModelFit, SegmentFit, fit, replay};
pub use points::{UsagePoint, usage_points};
pub use report::render;

#[cfg(test)]
mod tests;
