//! Session replay: walk a transcript as the agent did, one model call per assistant turn, and
//! compact before each call with one [`Compactor`] kept for the whole session.
//!
//! ```text
//! messages[..i] where messages[i] starts an assistant turn  = one model call
//!   -> compactor.compact (remembers its last outputs: the prefix stays stable)
//!   -> request sent: tokens, tokens shared with the previous request (prompt cache), valid?
//! ```
//!
//! A *prefix change* (prompt-cache miss) is a call whose request does not start with the whole
//! previous request. Cached input tokens are those of the leading messages both requests share
//! (plus system prompt and tools), the way a provider's automatic prefix cache reads them. The
//! first call is a cold start, neither a change nor cached.

use crate::compactor::Compactor;
use crate::conversation::{Conversation, Role};
use crate::format::Format;
use crate::guard::{self, ValidateOptions};
use crate::strategy::Edit;
use crate::tokens::{ModelTokens, TokenCounter};
use serde::Serialize;
use std::borrow::Cow;
use std::time::Instant;

pub use crate::models::Prices;

/// The prices `compactor ab` uses for a model the table does not price (Claude Sonnet 4's
/// published prices, USD per million tokens; `--price-*` flags override them).
pub const DEFAULT_PRICES: Prices = Prices {
    input: 3.00,
    cache_write: 3.75,
    cache_read: 0.30,
    output: 15.00,
};

/// What a replay of one transcript sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReplayStats {
    /// Model calls in the transcript.
    pub calls_total: usize,
    /// Calls replayed (at most the cap, evenly spaced).
    pub calls_replayed: usize,
    /// Input tokens sent, all calls, in the model's tokens (the same units as the reports:
    /// the counter's tokens through the model's token rule).
    pub tokens_sent: usize,
    /// Of those, tokens in a prefix shared with the previous request (cache reads).
    pub tokens_cached: usize,
    /// Calls whose request was still over the budget.
    pub over_budget: usize,
    /// Calls whose request did not extend the previous one.
    pub prefix_changes: usize,
    /// Output tokens of the model (the assistant turns of the transcript).
    pub output_tokens: usize,
    /// Requests the guard rejects (must be 0).
    pub invalid_requests: usize,
    /// Calls where compaction refused the input (sent as is).
    pub errors: usize,
    /// LLM summary calls made by the strategy.
    pub summary_calls: usize,
    /// Input tokens of those calls.
    pub summary_input_tokens: usize,
    /// Output tokens of those calls.
    pub summary_output_tokens: usize,
    /// Estimated cost in USD: each call's cached prefix read at the cache-read price, the rest
    /// written to the cache, its output at the output price (plus the summary calls).
    pub cost_usd: f64,
    /// Where the prices come from: the model table's pattern, or `flags`.
    pub priced_by: String,
    /// Tokens sent per replayed call, in order.
    pub tokens_per_call: Vec<usize>,
    /// Wall time in milliseconds.
    pub millis: f64,
}

impl ReplayStats {
    /// Share of input tokens read from the cache, in percent.
    pub fn cached_pct(&self) -> f64 {
        if self.tokens_sent == 0 {
            0.0
        } else {
            100.0 * self.tokens_cached as f64 / self.tokens_sent as f64
        }
    }
}

/// The model calls of a transcript: `(i, j)` where `messages[i..j]` is one assistant turn
/// (consecutive assistant messages, as Responses items come, are one call) and `messages[..i]`
/// the request. A turn at index 0 has no request and is left out.
pub fn model_calls(c: &Conversation) -> Vec<(usize, usize)> {
    let m = &c.messages;
    let mut out = Vec::new();
    let mut i = 1;
    while i < m.len() {
        if m[i].role == Role::Assistant && m[i - 1].role != Role::Assistant {
            let mut j = i;
            while j < m.len() && m[j].role == Role::Assistant {
                j += 1;
            }
            out.push((i, j));
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// `cap` of `0..n`, evenly spaced, first and last included; all of them when `n <= cap`.
pub fn spaced(n: usize, cap: usize) -> Vec<usize> {
    match cap {
        _ if n <= cap => (0..n).collect(),
        0 => Vec::new(),
        1 => vec![n - 1],
        _ => (0..cap).map(|k| k * (n - 1) / (cap - 1)).collect(),
    }
}

/// Leading messages `a` and `b` share.
fn common_prefix(a: &Conversation, b: &Conversation) -> usize {
    a.messages
        .iter()
        .zip(&b.messages)
        .take_while(|(x, y)| x == y)
        .count()
}

/// Tokens of the context around the messages (system prompt and tools).
fn context_tokens(counter: &dyn TokenCounter, c: &Conversation) -> usize {
    counter.count_system(c.system.as_ref()) + counter.count_tools(c.tools())
}

/// Cost of `read` cached, `write` uncached (written to the cache) and `output` tokens.
fn cost(p: Prices, read: usize, write: usize, output: usize) -> f64 {
    (read as f64 * p.cache_read + write as f64 * p.cache_write + output as f64 * p.output) / 1e6
}

/// One request of a replay.
struct Sent {
    conversation: Conversation,
    /// Counted tokens.
    tokens: usize,
}

/// Accumulates what each call sent. Counts are the counter's (framed as the model's token
/// rule asks); the stats are in model tokens (`basis`).
struct Tally<'a> {
    counter: &'a dyn TokenCounter,
    basis: ModelTokens,
    prices: Prices,
    context: usize,
    budget: usize,
    previous: Option<Sent>,
    stats: ReplayStats,
}

impl Tally<'_> {
    /// One call: `request` of `tokens` counted tokens, answered by `output` counted tokens.
    fn send(&mut self, request: Conversation, tokens: usize, output: usize) {
        let cached = match &self.previous {
            None => 0,
            Some(prev) => {
                let common = common_prefix(&prev.conversation, &request);
                if common == prev.conversation.messages.len() {
                    prev.tokens
                } else {
                    self.stats.prefix_changes += 1;
                    self.context
                        + request.messages[..common]
                            .iter()
                            .map(|m| self.counter.count_message(m))
                            .sum::<usize>()
                }
            }
        };
        let model = self.basis.to_model(tokens);
        let scale = |n: usize| (n as f64 * self.basis.ratio).ceil() as usize;
        let cached = scale(cached.min(tokens)).min(model);
        let output = scale(output);
        let s = &mut self.stats;
        s.calls_replayed += 1;
        s.tokens_sent += model;
        s.tokens_cached += cached;
        s.output_tokens += output;
        s.over_budget += usize::from(self.budget > 0 && model > self.budget);
        s.tokens_per_call.push(model);
        s.cost_usd += cost(self.prices, cached, model - cached, output);
        self.previous = Some(Sent {
            conversation: request,
            tokens,
        });
    }
}

/// Replays `c` through `compactor` (one instance for the whole session, so its memory keeps the
/// prefix stable), or without compaction when `compactor` is `None` (the baseline). `units`
/// counts and prices: the model's token rule (so the baseline is in the same model tokens as
/// the strategies) and its prices in the model table, else `prices`. `budget`: calls over it
/// are counted (0: none is).
pub async fn replay(
    c: &Conversation,
    format: Format,
    compactor: Option<&Compactor>,
    units: &Compactor,
    budget: usize,
    cap: usize,
    prices: Prices,
) -> ReplayStats {
    let started = Instant::now();
    let model = c.extra.get("model").and_then(serde_json::Value::as_str);
    let basis = units.model_tokens(model);
    let framed = basis.framed(units.counter_of(basis.tokenizer));
    let counter: &dyn TokenCounter = &framed;
    let (prices, priced_by) = match units.model_entry(model) {
        Some((pattern, e)) => (e.prices(), format!("[models] {pattern}")),
        None => (prices, "flags".to_string()),
    };
    let calls = model_calls(c);
    let picked = spaced(calls.len(), cap);
    let mut tally = Tally {
        counter,
        basis,
        prices,
        context: context_tokens(counter, c),
        budget,
        previous: None,
        stats: ReplayStats {
            calls_total: calls.len(),
            priced_by,
            ..Default::default()
        },
    };
    let mut prefix = Conversation {
        messages: Vec::new(),
        ..c.clone()
    };
    // Tokens of the uncompacted prefix, grown message by message.
    let mut prefix_tokens = tally.context;
    for k in picked {
        let (i, j) = calls[k];
        for m in &c.messages[prefix.messages.len()..i] {
            prefix_tokens += counter.count_message(m);
            prefix.messages.push(m.clone());
        }
        let output: usize = c.messages[i..j]
            .iter()
            .map(|m| counter.count_message(m))
            .sum();
        let Some(compactor) = compactor else {
            tally.send(prefix.clone(), prefix_tokens, output);
            continue;
        };
        match compactor.compact(&prefix, format, Some(budget)).await {
            Ok(out) => {
                for e in out.report.tiers.iter().flat_map(|t| &t.edits) {
                    if let Edit::Summarized {
                        tokens_before,
                        summary_tokens,
                        ..
                    } = e
                    {
                        tally.stats.summary_calls += 1;
                        tally.stats.summary_input_tokens += tokens_before;
                        tally.stats.summary_output_tokens += summary_tokens;
                    }
                }
                let tokens = out.report.counted_after;
                let request = match out.conversation {
                    Cow::Borrowed(b) => b.clone(),
                    Cow::Owned(o) => {
                        let options = ValidateOptions {
                            allow_open_tail: false,
                        };
                        if !guard::validate(&o, format, options).is_empty() {
                            tally.stats.invalid_requests += 1;
                        }
                        o
                    }
                };
                tally.send(request, tokens, output);
            }
            Err(_) => {
                tally.stats.errors += 1;
                tally.send(prefix.clone(), prefix_tokens, output);
            }
        }
    }
    let mut stats = tally.stats;
    // A summary call reads its span uncached and writes the summary.
    stats.cost_usd += (stats.summary_input_tokens as f64 * prices.input
        + stats.summary_output_tokens as f64 * prices.output)
        / 1e6;
    stats.millis = started.elapsed().as_secs_f64() * 1000.0;
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Loader;
    use crate::conversation::{Block, Message, ToolInput, ToolResult, ToolResultContent, ToolUse};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn turn(k: usize, result_chars: usize) -> [Message; 2] {
        let id = format!("toolu_{k}");
        [
            Message::new(
                Role::Assistant,
                vec![Block::ToolUse(ToolUse {
                    id: id.clone(),
                    name: "Read".into(),
                    input: ToolInput::Json(json!({"file_path": format!("src/f{k}.rs")})),
                    extra: Default::default(),
                })],
            ),
            Message::new(
                Role::User,
                vec![Block::ToolResult(ToolResult {
                    tool_use_id: id,
                    content: Some(ToolResultContent::Text("x".repeat(result_chars))),
                    is_error: None,
                    extra: Default::default(),
                    outcome: Default::default(),
                    rewritten: None,
                })],
            ),
        ]
    }

    /// user, then `n` tool turns, then a final assistant answer: `n + 1` model calls.
    fn session(n: usize, result_chars: usize) -> Conversation {
        let mut messages = vec![Message::text(Role::User, "read the files")];
        for k in 0..n {
            messages.extend(turn(k, result_chars));
        }
        messages.push(Message::text(Role::Assistant, "done"));
        let mut c = Conversation {
            messages,
            ..Default::default()
        };
        // Built by hand, so classified here as the Anthropic reader would.
        crate::outcome::OutcomePolicy::Anthropic.assign(&mut c);
        c
    }

    #[test]
    fn each_assistant_turn_is_one_call() {
        assert_eq!(model_calls(&session(2, 4)), vec![(1, 2), (3, 4), (5, 6)]);
        // Responses items: reasoning + function_call are one turn.
        let c = Conversation {
            messages: vec![
                Message::text(Role::User, "hi"),
                Message::text(Role::Assistant, "a"),
                Message::text(Role::Assistant, "b"),
                Message::text(Role::Tool, "r"),
                Message::text(Role::Assistant, "c"),
            ],
            ..Default::default()
        };
        assert_eq!(model_calls(&c), vec![(1, 3), (4, 5)]);
    }

    #[test]
    fn spacing_keeps_first_and_last() {
        assert_eq!(spaced(3, 5), vec![0, 1, 2]);
        assert_eq!(spaced(10, 4), vec![0, 3, 6, 9]);
        assert_eq!(spaced(10, 1), vec![9]);
        assert_eq!(spaced(10, 0), Vec::<usize>::new());
    }

    #[test]
    fn baseline_replay_only_appends_so_every_call_after_the_first_is_cached() {
        let c = session(2, 40);
        let units = Compactor::from_config(crate::config::Settings::default()).unwrap();
        let counter = units.counter();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let prices = Prices {
            input: 1.0,
            cache_write: 1.5,
            cache_read: 0.5,
            output: 2.0,
        };
        let s = rt.block_on(replay(&c, Format::Anthropic, None, &units, 0, 10, prices));
        // No model named: the counter's tokens are the model's.
        let tokens: Vec<usize> = model_calls(&c)
            .iter()
            .map(|&(i, _)| {
                c.messages[..i]
                    .iter()
                    .map(|m| counter.count_message(m))
                    .sum()
            })
            .collect();
        assert_eq!(s.tokens_per_call, tokens);
        assert_eq!(s.calls_total, 3);
        assert_eq!(s.calls_replayed, 3);
        assert_eq!(s.prefix_changes, 0);
        assert_eq!(s.over_budget, 0);
        assert_eq!(s.priced_by, "flags");
        assert_eq!(s.tokens_sent, tokens.iter().sum::<usize>());
        assert_eq!(s.tokens_cached, tokens[0] + tokens[1]);
        let output: usize = [1, 3, 5]
            .iter()
            .map(|&i| counter.count_message(&c.messages[i]))
            .sum();
        assert_eq!(s.output_tokens, output);
        // What was not read from the cache was written to it.
        let expected = (1.5 * (s.tokens_sent - s.tokens_cached) as f64
            + 0.5 * s.tokens_cached as f64
            + 2.0 * output as f64)
            / 1e6;
        assert!((s.cost_usd - expected).abs() < 1e-15);
    }

    #[test]
    fn the_baseline_of_a_claude_session_is_in_claude_tokens_and_priced_by_the_table() {
        let mut c = session(3, 400);
        c.extra
            .insert("model".into(), json!("claude-sonnet-4-5-20250929"));
        let units = Compactor::from_config(crate::config::Settings::default()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let s = rt.block_on(replay(
            &c,
            Format::Anthropic,
            None,
            &units,
            0,
            10,
            DEFAULT_PRICES,
        ));
        // Each call's request counted as the pipeline counts it (its `tokens_before`).
        let before: Vec<usize> = model_calls(&c)
            .iter()
            .map(|&(i, _)| {
                let prefix = Conversation {
                    messages: c.messages[..i].to_vec(),
                    ..c.clone()
                };
                let out = rt
                    .block_on(units.compact(&prefix, Format::Anthropic, Some(1_000_000)))
                    .unwrap();
                out.report.tokens_before
            })
            .collect();
        assert_eq!(s.tokens_per_call, before);
        // Claude: 1.105 per o200k token and 172 per call, so more than the o200k count.
        let o200k: usize = c.messages[..7]
            .iter()
            .map(|m| units.counter().count_message(m))
            .sum();
        assert_eq!(before.len(), 4);
        assert!(before[3] > o200k + 3 * 172, "{before:?} vs {o200k}");
        assert_eq!(s.priced_by, "[models] claude-sonnet-4*");
    }

    #[test]
    fn compacting_replay_counts_prefix_changes_and_stays_valid() {
        // 12 turns of ~250-token results against a 1,000-token budget: compaction kicks in,
        // and each re-compaction is one prefix change.
        let c = session(12, 1000);
        let settings = Loader {
            file: None,
            text: None,
            preset: Some("truncate".into()),
            env: false,
            preset_dirs: Vec::new(),
            strategies: Vec::new(),
        }
        .load()
        .unwrap();
        let compactor = Compactor::from_config(settings).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let s = rt.block_on(replay(
            &c,
            Format::Anthropic,
            Some(&compactor),
            &compactor,
            1000,
            200,
            DEFAULT_PRICES,
        ));
        assert_eq!(s.calls_replayed, 13);
        assert_eq!(s.invalid_requests, 0);
        assert_eq!(s.errors, 0);
        assert_eq!(s.summary_calls, 0);
        // o200k_base: each turn adds 141 tokens; over the trigger (800) the history is cut
        // under the target (600), then each turn appends to the remembered output until the
        // budget (1,000), not the trigger, is passed; that re-compaction goes deeper than the
        // target, where its cache write pays back at 141 tokens a turn. The marker's last line
        // names the dropped span's recall id (about 40 tokens); the marker message carries the
        // request's words (the first user message's) before it.
        assert_eq!(
            s.tokens_per_call,
            vec![
                6, 147, 288, 429, 570, 711, 509, 650, 791, 932, 279, 420, 561
            ]
        );
        // Cut at calls 7 and 11: two changes of the sent prefix (three before continuations
        // went on to the budget); every other call reads the whole previous request.
        assert_eq!((s.prefix_changes, s.tokens_cached), (2, 4089));
    }
}
