//! `summary`: model summary of the older turns.
//!
//! ```text
//! conversation -> plan (pure: span pinned..cut, kept tail from a legal Cut)
//!              -> transcript (digest lines, thinking left out, no base64) + ledger (by code)
//!              -> cache? -> Summarizer (one call, or chunks + merge, or update of an old summary)
//!              -> plan: UnitEdit::Summarize { to, head + model text + ledger } for guard::apply
//!   any failure (error, timeout, empty, oversized, circuit open) -> Truncate, degraded = true
//! ```
//!
//! The summary message starts with [`SUMMARY_PREFIX`], so a later pass recognises it and sends
//! "old summary + newly dropped messages" instead of everything again. Its code-made ledger is
//! the span's `SessionState` (the user's words, files and what was done to them, failures with
//! cause and fix, commands with outcome, the rest as room allows; the same facts and rendering as
//! truncate's marker), budgeted to what the target leaves, never taken from the model, so no
//! failure can be lost or turned into a success by the summarizer. [`crate::guard::apply`]
//! writes the message from its parts and records the ledger's failures.

use super::truncate::{Truncate, TruncateConfig};
use super::{Budget, Compaction, Context, Strategy, StrategyError, digest_line};
use crate::conversation::{Block, Conversation, Message, Role};
use crate::facts::Facts;
use crate::guard::{CutKind, Layout, Marker, MessageTokens, UnitEdit};
use crate::llm::breaker::{Breaker, Policy};
use crate::llm::{Summarizer, SummaryRequest};
use crate::render::clip;
use crate::tokens::TokenCounter;
use moka::sync::Cache;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod checks;
mod chunking;
mod ledger;
mod plan;
mod transcript;

pub use checks::UNKNOWN_ID_MARK;
use checks::{degenerate, mark_unknown_ids};
use chunking::chunk;
pub use ledger::neutralize_ledger_header;
use ledger::{fit_ledger, ledger_state, split_summary, summary_parts};
pub use plan::{Plan, plan, summary_text};
pub use transcript::transcript;

/// The fixed first words of every summary message; a later pass recognises its summaries by them.
pub const SUMMARY_PREFIX: &str = "[compactor summary of messages ";

/// The default summary prompt (`strategies/prompts/summary.md`); `summary.prompt_file` replaces it.
pub const DEFAULT_PROMPT: &str = include_str!("../../../strategies/prompts/summary.md");

pub use crate::guard::write::LEDGER_HEADER;

/// Share of the summarizer's window the material may fill (token counts of another tokenizer
/// are an estimate).
const WINDOW_SAFETY: f64 = 0.85;
/// Tokens reserved for the wrapping text of a request.
const REQUEST_OVERHEAD: usize = 120;

/// Settings of [`Summary`] (`[summary]`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SummaryConfig {
    /// Share of the target kept verbatim as the most recent turns (0..1).
    pub keep_recent_share: f64,
    /// Extra instructions for every summary ("" = none); `--instructions` adds to them.
    pub instructions: String,
    /// A prompt file replacing the built-in prompt ("" = built in).
    pub prompt_file: String,
    /// Largest acceptable summary, in tokens; also the answer limit sent to the model.
    pub max_summary_tokens: usize,
    /// Consecutive failed summaries (a count) after which the model is not called for
    /// `cooldown_secs`; once that has passed, one more failure stops it again (0 = never).
    pub failure_threshold: u32,
    /// Cool-down of the circuit breaker, in seconds (negative: 0).
    pub cooldown_secs: f64,
    /// Bound of the in-process cache of model summaries, in bytes of their UTF-8 text (plus 8
    /// per entry); least recently used evicted first; 0 = no cache. A shared store
    /// (`[store]`) caches beside it.
    pub cache_bytes: u64,
}

impl Default for SummaryConfig {
    fn default() -> Self {
        SummaryConfig {
            keep_recent_share: 0.3,
            instructions: String::new(),
            prompt_file: String::new(),
            max_summary_tokens: 2_000,
            failure_threshold: 3,
            cooldown_secs: 300.0,
            cache_bytes: 4 * 1024 * 1024,
        }
    }
}

/// The model-summary strategy. Holds its cache and circuit breaker, so keep one value across
/// turns (the [`crate::Compactor`] does).
pub struct Summary {
    summarizer: Arc<dyn Summarizer>,
    config: SummaryConfig,
    prompt: String,
    fallback: Truncate,
    /// Model texts by [`cache_key`], bounded by bytes ([`SummaryConfig::cache_bytes`]).
    cache: Cache<u64, Arc<str>>,
    /// Counts failed summaries ([`breaker`]).
    breaker: Breaker,
}

impl std::fmt::Debug for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Summary")
            .field("model", &self.summarizer.model())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Why a summary was not made.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error(transparent)]
    Llm(#[from] crate::llm::LlmError),
    #[error("the summary is too long ({tokens} tokens > {max})")]
    Oversized { tokens: usize, max: usize },
    #[error("the summarizer's context window ({0} tokens) leaves no room for the transcript")]
    WindowTooSmall(usize),
    #[error("the summary repeats itself: {0}")]
    Degenerate(String),
}

impl Summary {
    /// A summary strategy on `summarizer` with the prompt `prompt` (usually [`DEFAULT_PROMPT`]),
    /// falling back to [`Truncate`] with `fallback`.
    pub fn new(
        summarizer: Arc<dyn Summarizer>,
        config: SummaryConfig,
        prompt: String,
        fallback: TruncateConfig,
    ) -> Summary {
        Summary {
            summarizer,
            prompt,
            fallback: Truncate { config: fallback },
            cache: summary_cache(config.cache_bytes),
            breaker: breaker(&config),
            config,
        }
    }

    fn instructions(&self, cx: &Context<'_>) -> Option<String> {
        let parts: Vec<&str> = [Some(self.config.instructions.as_str()), cx.instructions]
            .into_iter()
            .flatten()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n"))
    }

    fn fall_back(
        &self,
        conversation: &Conversation,
        budget: Budget,
        cx: &Context<'_>,
        reason: &str,
    ) -> Compaction {
        tracing::warn!(%reason, "summary failed: falling back to truncate");
        let mut c = self.fallback.run(conversation, budget, cx);
        let why = format!("summary failed ({reason}): fell back to truncate");
        c.notes.insert(0, why.clone());
        c.degraded = Some(why);
        c
    }

    async fn call(&self, system: &str, user: String) -> Result<String, Failure> {
        let request = SummaryRequest {
            system: system.to_string(),
            user,
            max_output_tokens: self.config.max_summary_tokens,
        };
        Ok(self.summarizer.complete(&request).await?)
    }

    /// Writes the model part of the summary: one call, an update of the earlier summary, or
    /// chunks and a merge. Returns the text and the number of calls.
    async fn write_summary(
        &self,
        previous: Option<&str>,
        transcript: &str,
        instructions: Option<&str>,
        counter: &dyn TokenCounter,
    ) -> Result<(String, usize), Failure> {
        let mut system = self.prompt.trim().to_string();
        if let Some(i) = instructions {
            system.push_str("\n\nAdditional instructions from the user for this summary:\n");
            system.push_str(i);
        }
        let window = self.summarizer.context_window();
        let room = ((window as f64 * WINDOW_SAFETY) as usize)
            .saturating_sub(counter.count_text(&system))
            .saturating_sub(self.config.max_summary_tokens)
            .saturating_sub(REQUEST_OVERHEAD);
        if room < 64 {
            return Err(Failure::WindowTooSmall(window));
        }
        let prev_tokens = previous.map_or(0, |p| counter.count_text(p));
        if counter.count_text(transcript) + prev_tokens <= room {
            let user = match previous {
                Some(p) => format!(
                    "Here is the earlier summary:\n<earlier_summary>\n{p}\n</earlier_summary>\n\nHere are the newer messages:\n<transcript>\n{transcript}</transcript>\n\nUpdate the summary with the newer messages."
                ),
                None => format!(
                    "Here is the transcript to summarize:\n<transcript>\n{transcript}</transcript>\n\nWrite the summary."
                ),
            };
            return Ok((self.call(&system, user).await?, 1));
        }
        // Too much for one request: summarize in chunks, then merge.
        let chunks = chunk(transcript, room, counter);
        let n = chunks.len();
        let mut partials: Vec<String> = previous.map(str::to_string).into_iter().collect();
        let mut calls = 0;
        for (i, c) in chunks.iter().enumerate() {
            let user = format!(
                "Here is part {} of {n} of a transcript to summarize:\n<transcript>\n{c}</transcript>\n\nWrite the summary of this part.",
                i + 1
            );
            partials.push(self.call(&system, user).await?);
            calls += 1;
        }
        let parts: String = partials
            .iter()
            .enumerate()
            .map(|(i, p)| format!("<part {}>\n{}\n</part {}>\n", i + 1, p.trim(), i + 1))
            .collect();
        if counter.count_text(&parts) <= room {
            let user = format!(
                "Here are {} partial summaries of consecutive parts of one conversation, oldest first:\n{parts}\nMerge them into one summary.",
                partials.len()
            );
            return Ok((self.call(&system, user).await?, calls + 1));
        }
        let joined = partials
            .iter()
            .enumerate()
            .map(|(i, p)| format!("Part {} of {}:\n{}", i + 1, partials.len(), p.trim()))
            .collect::<Vec<_>>()
            .join("\n\n");
        Ok((joined, calls))
    }

    /// The model's text for the span of `plan`: the cached one (noted), or the one the model
    /// writes, refused when over `max_summary_tokens` or looping; the breaker counts the
    /// outcome of a call.
    async fn model_text(
        &self,
        conversation: &Conversation,
        plan: &Plan,
        previous_model: Option<&str>,
        cx: &Context<'_>,
        notes: &mut Vec<String>,
    ) -> Result<String, Failure> {
        let counter = cx.counter;
        let span_start = plan.from + usize::from(plan.previous.is_some());
        let text = transcript(&conversation.messages[span_start..plan.to]);
        let instructions = self.instructions(cx);
        let key = cache_key(&[
            self.summarizer.model(),
            &self.prompt,
            instructions.as_deref().unwrap_or(""),
            previous_model.unwrap_or(""),
            &text,
        ]);
        if let Some(t) = self.cache.get(&key) {
            notes.push("summary: cache hit, no model call".to_string());
            return Ok(t.to_string());
        }
        let written = self
            .write_summary(previous_model, &text, instructions.as_deref(), counter)
            .await
            .and_then(|(t, calls)| {
                let tokens = counter.count_text(&t);
                if tokens > self.config.max_summary_tokens {
                    return Err(Failure::Oversized {
                        tokens,
                        max: self.config.max_summary_tokens,
                    });
                }
                if let Some(why) = degenerate(&t) {
                    return Err(Failure::Degenerate(why));
                }
                Ok((t, calls))
            });
        let (t, calls) = match written {
            Ok(written) => written,
            Err(e) => {
                self.breaker.record(Instant::now(), false);
                return Err(e);
            }
        };
        self.breaker.record(Instant::now(), true);
        notes.push(format!(
            "summary: {} model call(s) to {}{}",
            calls,
            self.summarizer.model(),
            if plan.previous.is_some() {
                ", updating the earlier summary"
            } else {
                ""
            }
        ));
        self.cache.insert(key, Arc::from(t.as_str()));
        Ok(t)
    }
}

/// The circuit breaker of failed summaries (a model error, an answer too long or looping, a
/// window too small; not a cache hit): open after [`SummaryConfig::failure_threshold`]
/// consecutive ones (0: never) for [`SummaryConfig::cooldown_secs`] (negative or NaN: 0; past
/// `Duration`'s range or infinite: for ever); cooled, every summary calls the model again and
/// one more failure opens it again ([`Policy::NoProbe`]).
fn breaker(config: &SummaryConfig) -> Breaker {
    let cooldown =
        Duration::try_from_secs_f64(config.cooldown_secs.max(0.0)).unwrap_or(Duration::MAX);
    Breaker::new(config.failure_threshold, cooldown, Policy::NoProbe)
}

/// The in-process summary cache: at most `max_bytes` of model text (each entry weighs its
/// text's UTF-8 bytes plus its 8-byte key), least recently used evicted first (`moka`'s
/// TinyLFU admission and LRU eviction, as the compaction memory in `crate::memory`). 0 bytes
/// keeps nothing.
fn summary_cache(max_bytes: u64) -> Cache<u64, Arc<str>> {
    Cache::builder()
        .max_capacity(max_bytes)
        .weigher(|_, text: &Arc<str>| u32::try_from(text.len() + 8).unwrap_or(u32::MAX))
        .build()
}

fn cache_key(parts: &[&str]) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update(&[0xff]);
    }
    h.digest()
}

#[async_trait::async_trait]
impl Strategy for Summary {
    fn name(&self) -> &str {
        "summary"
    }

    async fn compact(
        &self,
        conversation: &Conversation,
        budget: Budget,
        cx: &Context<'_>,
    ) -> Result<Compaction, StrategyError> {
        let Some(plan) = plan(
            conversation,
            cx.layout,
            cx.tokens,
            budget,
            self.config.keep_recent_share,
        ) else {
            return Ok(Compaction::unchanged(
                "summary: no legal cut point after the earlier summary: nothing to summarize",
            ));
        };
        if let Some(left) = self.breaker.open_for(Instant::now()) {
            let reason = format!(
                "circuit open after {} consecutive failures, {:.0} s of cool-down left",
                self.config.failure_threshold,
                left.as_secs_f64()
            );
            return Ok(self.fall_back(conversation, budget, cx, &reason));
        }
        let (previous_model, previous_ledger) = plan
            .previous
            .as_deref()
            .map(split_summary)
            .unwrap_or_default();
        let previous_model = plan.previous.as_ref().map(|_| previous_model.as_ref());
        let mut notes = Vec::new();
        let model_text = match self
            .model_text(conversation, &plan, previous_model, cx, &mut notes)
            .await
        {
            Ok(t) => t,
            Err(e) => return Ok(self.fall_back(conversation, budget, cx, &e.to_string())),
        };
        // Call ids the model wrote that the history does not hold are marked, so that an
        // invented id never reads as a call that happened.
        let (model_text, invented) =
            mark_unknown_ids(&model_text, conversation, previous_model.unwrap_or(""));
        let (model_text, forged) = neutralize_ledger_header(&model_text);
        if forged > 0 {
            notes.push(format!(
                "summary: the model's text imitated the code-made ledger header {forged} time(s); neutralized"
            ));
        }
        if invented > 0 {
            notes.push(format!(
                "summary: {invented} call id(s) in the model's text are not in the history; marked"
            ));
        }
        let facts = Facts::of(&conversation.messages);
        let earlier = plan.previous.as_ref().map(|_| previous_ledger.as_slice());
        let state = ledger_state(facts, plan.from, plan.to, earlier);
        let tokens_before = cx.tokens.span(plan.from..plan.to);
        let parts = summary_parts(
            plan.from,
            plan.to,
            tokens_before,
            &model_text,
            Marker::default(),
        );
        let parts = fit_ledger(parts, state, conversation, &plan, budget, cx);
        let user_words = parts.ledger.user_words().clone();
        if !user_words.is_verbatim() {
            notes.push(user_words.note());
        }
        Ok(Compaction {
            plan: vec![UnitEdit::Summarize {
                to: plan.to,
                summary: parts,
            }],
            notes,
            degraded: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;
    use crate::tokens::{Tokenizer, counter_for};
    use serde_json::{Value, json};

    fn conv(v: &Value) -> Conversation {
        Format::Anthropic.read(v).unwrap()
    }

    /// A session of two rounds (a read, a failed build, an edit); shared with the ledger's tests.
    pub(super) fn session() -> Conversation {
        conv(&json!({"messages": [
            {"role": "user", "content": "Fix the failing build. Do not touch vendor/."},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "SECRET PLAN", "signature": "sig"},
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "src/a.rs"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "fn main() {}"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "cargo build"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "is_error": true, "content": "error[E0425]: cannot find value"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t3", "name": "Edit", "input": {"file_path": "src/b.rs", "old_string": "x", "new_string": "y"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3", "content": "ok"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo"}}]},
            {"role": "assistant", "content": "Fixed."},
            {"role": "user", "content": "Now run the tests."},
            {"role": "assistant", "content": "Running them."}
        ]}))
    }

    #[test]
    fn transcript_has_words_calls_and_results_but_no_thinking_or_base64() {
        let c = session();
        let t = transcript(&c.messages[..8]);
        assert_eq!(
            t,
            "User: Fix the failing build. Do not touch vendor/.\n\
             [call t1 Read(src/a.rs)]\n\
             [result t1 Read: fn main() {}]\n\
             [call t2 Bash(cargo build)]\n\
             [result t2 Bash (error): error[E0425]: cannot find value]\n\
             [call t3 Edit(src/b.rs)]\n\
             [result t3 Edit: ok]\n\
             [image]\n\
             Assistant: Fixed.\n"
        );
    }

    #[test]
    fn plan_keeps_a_recent_tail_from_a_legal_cut_and_never_the_open_exchange() {
        let c = session();
        let counter = counter_for(Tokenizer::default());
        let tail: usize = c.messages[8..]
            .iter()
            .map(|m| counter.count_message(m))
            .sum();
        let budget = Budget {
            limit: tail * 4,
            target: tail * 2,
        };
        let tokens = MessageTokens::of(&c, counter.as_ref());
        let p = plan(
            &c,
            &Layout::of(&c, crate::format::Format::Anthropic),
            &tokens,
            budget,
            0.5,
        )
        .unwrap();
        assert_eq!(
            p,
            Plan {
                from: 0,
                to: 8,
                kind: CutKind::RoundStart,
                previous: None
            }
        );
        // A tiny share still keeps the newest message.
        let p = plan(
            &c,
            &Layout::of(&c, crate::format::Format::Anthropic),
            &tokens,
            budget,
            0.0,
        )
        .unwrap();
        assert_eq!(p.to, 9);
    }

    #[test]
    fn call_ids_the_history_does_not_hold_are_marked() {
        let c = conv(&json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_01EPom7jESzNbU8coiKjzVGS", "name": "Read", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01EPom7jESzNbU8coiKjzVGS", "content": "ok"}]},
        ]}));
        let text = "Read ran [call toolu_01EPom7jESzNbU8coiKjzVGS]; then \
                    [call toolu_01G5fXX8sk5nLjyGcqi6l7] and call_9xYzAbCdEfGh12 failed, \
                    call_00_InventedIdXyz12345 and toolu_vrtx_01AbCdEfGhIj too; \
                    toolu_01G5fXX8sk5nLjyGcqi6l7 again. \
                    call_count_total, call_retry_limit_2 and my_call_abcdefghij123 are code; \
                    so is toolu_short1. fc_0123456789abcdef came from the earlier summary.";
        let (marked, n) = mark_unknown_ids(text, &c, "fc_0123456789abcdef: grep");
        assert_eq!(n, 4);
        assert_eq!(
            marked,
            "Read ran [call toolu_01EPom7jESzNbU8coiKjzVGS]; then \
             [call toolu_01G5fXX8sk5nLjyGcqi6l7 (id not in the history)] and \
             call_9xYzAbCdEfGh12 (id not in the history) failed, \
             call_00_InventedIdXyz12345 (id not in the history) and \
             toolu_vrtx_01AbCdEfGhIj (id not in the history) too; \
             toolu_01G5fXX8sk5nLjyGcqi6l7 (id not in the history) again. \
             call_count_total, call_retry_limit_2 and my_call_abcdefghij123 are code; \
             so is toolu_short1. fc_0123456789abcdef came from the earlier summary."
        );
    }

    #[test]
    fn looping_text_is_degenerate_and_a_plain_summary_is_not() {
        let looping = format!(
            "## Work\n{}",
            "- **AddTodo**: Form with validation\n- **Filter**: Tab-style filtering\n".repeat(6)
        );
        assert_eq!(
            degenerate(&looping).as_deref(),
            Some("10 of its 13 lines repeat an earlier one")
        );
        let stutter = "the build failed again and ".repeat(20);
        assert_eq!(
            degenerate(&stutter).as_deref(),
            Some("only 5 of its 97 four-word phrases are distinct")
        );
        // Near-repeats that differ in case and in one word per line still loop.
        let drifting: String = (0..12)
            .map(|i| {
                let (head, tail) = if i % 2 == 0 {
                    ("Todo", "All")
                } else {
                    ("todo", "all")
                };
                format!(
                    "{head} List with Todo Item Filter and filter by {tail} item{} ",
                    i % 3
                )
            })
            .collect();
        assert_eq!(
            degenerate(&drifting).as_deref(),
            Some("only 19 of its 129 four-word phrases are distinct")
        );
        let plain = "## Requests\n- Fix the failing test in src/a.rs.\n## Errors\n\
                     - cargo test failed (exit 101): missing import; fixed by adding it.\n\
                     ## Files\n- src/a.rs (edited)\n- src/b.rs (read)\n## Next\n\
                     - Run cargo test again.\n- none\n- none";
        assert_eq!(degenerate(plain), None);
    }

    #[test]
    fn the_breaker_opens_after_3_failed_summaries_for_300_s_then_lets_every_summary_call() {
        let b = breaker(&SummaryConfig::default());
        let (s, ns) = (Duration::from_secs, Duration::from_nanos(1));
        let t0 = Instant::now();
        b.record(t0, false);
        b.record(t0, false);
        assert_eq!(b.open_for(t0), None);
        // A success forgets the failures before it.
        b.record(t0 + s(1), true);
        b.record(t0 + s(2), false);
        b.record(t0 + s(2), false);
        assert_eq!(b.open_for(t0 + s(2)), None);
        // The third consecutive failure opens it for 300 s, their last instant included.
        let t1 = t0 + s(3);
        b.record(t1, false);
        assert_eq!(b.open_for(t1), Some(s(300)));
        assert_eq!(b.open_for(t1 + s(300)), Some(Duration::ZERO));
        // Cooled: every summary calls the model, none is a probe.
        let t2 = t1 + s(300) + ns;
        assert_eq!(b.open_for(t2), None);
        // The failures were kept: one more opens it again, 300 s from it; a failure while open
        // (a summary begun before it opened) starts the 300 s again.
        b.record(t2 + s(10), false);
        assert_eq!(b.open_for(t2 + s(10)), Some(s(300)));
        b.record(t2 + s(110), false);
        assert_eq!(b.open_for(t2 + s(310)), Some(s(100)));
        // A success (a summary begun before it opened) closes it.
        b.record(t2 + s(311), true);
        assert_eq!(b.open_for(t2 + s(311)), None);
    }

    #[test]
    fn the_breakers_cool_down_is_clamped() {
        // Negative or NaN: 0 (open at the failure's instant only); infinite: for ever.
        let (t, ns) = (Instant::now(), Duration::from_nanos(1));
        for (secs, left) in [
            (-5.0, None),
            (f64::NAN, None),
            (f64::INFINITY, Some(Duration::MAX - ns)),
        ] {
            let b = breaker(&SummaryConfig {
                failure_threshold: 1,
                cooldown_secs: secs,
                ..SummaryConfig::default()
            });
            b.record(t, false);
            assert!(b.open_for(t).is_some(), "{secs}");
            assert_eq!(b.open_for(t + ns), left, "{secs}");
        }
    }

    #[test]
    fn the_cache_is_bounded_by_bytes_and_evicts() {
        let cache = summary_cache(10_000);
        let text: Arc<str> = Arc::from("x".repeat(992).as_str());
        for key in 0..100u64 {
            cache.insert(key, text.clone());
        }
        cache.run_pending_tasks();
        assert!(cache.weighted_size() <= 10_000, "{}", cache.weighted_size());
        assert!(
            (1..=10).contains(&cache.entry_count()),
            "{}",
            cache.entry_count()
        );
        // One text over the whole bound is never kept; 0 bytes keeps nothing.
        cache.insert(500, Arc::from("y".repeat(20_000).as_str()));
        cache.run_pending_tasks();
        assert_eq!(cache.get(&500), None);
        let off = summary_cache(0);
        off.insert(1, text);
        off.run_pending_tasks();
        assert_eq!(off.entry_count(), 0);
    }

    #[test]
    fn chunks_stay_within_room_on_line_boundaries() {
        let counter = counter_for(Tokenizer::default());
        let text: String = (0..50)
            .map(|i| format!("User: line {i} {}\n", "x".repeat(40)))
            .collect();
        let chunks = chunk(&text, 60, counter.as_ref());
        assert!(chunks.len() > 1);
        for c in &chunks {
            assert!(counter.count_text(c) <= 60 + c.lines().count());
            assert!(c.ends_with('\n'));
        }
        assert_eq!(chunks.concat(), text);
    }
}
