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

use super::{MESSAGE_OVERHEAD, TokenCounter};
use crate::conversation::{Block, Role};
use crate::format::FormatError;
use crate::format::anthropic::read_blocks;
use crate::format::json_kind;
use crate::format::openai_responses::read_item;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

/// One recorded request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsagePoint {
    /// The model that answered.
    pub model: String,
    /// Segment number in its log (0 before the first compaction, +1 after each).
    pub segment: usize,
    /// 1-based line of the log holding the usage.
    pub line: usize,
    /// The counter's tokens of the logged prefix the request saw.
    pub counted: usize,
    /// Messages in that prefix.
    pub messages: usize,
    /// tool_use blocks (calls) in that prefix.
    pub tool_calls: usize,
    /// Input tokens the provider counted for the request (model tokens).
    pub actual: u64,
}

/// Reads the usage points of a Claude Code session log or a Codex rollout (detected by the
/// first entry). Sidechain entries of a log that also holds a main chain are left out (they are
/// other requests, with another prefix); a log of sidechain entries only is read as such.
///
/// # Errors
/// [`FormatError`] naming the line: not JSON, not an object, a malformed `message.content`.
pub fn usage_points<C: TokenCounter + ?Sized>(
    text: &str,
    counter: &C,
) -> Result<Vec<UsagePoint>, FormatError> {
    let mut entries = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(raw).map_err(|source| FormatError::Json {
            location: format!("line {}", n + 1),
            source,
        })?;
        let Value::Object(obj) = value else {
            return Err(FormatError::shape(
                format!("line {}", n + 1),
                format!("expected a JSON object, found {}", json_kind(&value)),
            ));
        };
        entries.push((n + 1, obj));
    }
    let codex = entries
        .first()
        .is_some_and(|(_, e)| crate::format::codex::is_rollout_entry(e));
    if codex {
        codex_points(&entries, counter)
    } else {
        claude_code_points(&entries, counter)
    }
}

type Entries = [(usize, serde_json::Map<String, Value>)];

/// Running sums of one segment: counted tokens and messages so far.
#[derive(Default)]
struct Prefix {
    counted: usize,
    messages: usize,
    tool_calls: usize,
    last_role: Option<Role>,
}

impl Prefix {
    fn add<C: TokenCounter + ?Sized>(&mut self, counter: &C, role: Role, blocks: &[Block]) {
        if blocks.is_empty() {
            return;
        }
        if self.last_role != Some(role) {
            self.messages += 1;
            self.counted += MESSAGE_OVERHEAD;
            self.last_role = Some(role);
        }
        self.counted += blocks.iter().map(|b| counter.count_block(b)).sum::<usize>();
        self.tool_calls += blocks
            .iter()
            .filter(|b| matches!(b, Block::ToolUse(_)))
            .count();
    }
}

fn claude_code_points<C: TokenCounter + ?Sized>(
    entries: &Entries,
    counter: &C,
) -> Result<Vec<UsagePoint>, FormatError> {
    let kind = |e: &serde_json::Map<String, Value>| {
        e.get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let side = |e: &serde_json::Map<String, Value>| {
        e.get("isSidechain").and_then(Value::as_bool) == Some(true)
    };
    let all_sidechain = entries
        .iter()
        .filter(|(_, e)| matches!(kind(e).as_str(), "user" | "assistant"))
        .all(|(_, e)| side(e));
    let mut out = Vec::new();
    let mut prefix = Prefix::default();
    let mut segment = 0;
    let mut seen: HashSet<String> = HashSet::new();
    for (line, e) in entries {
        if side(e) != all_sidechain {
            continue;
        }
        let k = kind(e);
        if k == "system" && e.get("subtype").and_then(Value::as_str) == Some("compact_boundary") {
            segment += 1;
            prefix = Prefix::default();
            continue;
        }
        let role = match k.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            _ => continue,
        };
        let Some(message) = e.get("message") else {
            continue;
        };
        if role == Role::Assistant {
            let id = message.get("id").and_then(Value::as_str).unwrap_or("");
            let model = message.get("model").and_then(Value::as_str).unwrap_or("");
            let first_line_of_response = !id.is_empty() && seen.insert(id.to_string());
            if first_line_of_response
                && !model.is_empty()
                && model != "<synthetic>"
                && let Some(usage) = message.get("usage")
            {
                let field = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
                let actual = field("input_tokens")
                    + field("cache_read_input_tokens")
                    + field("cache_creation_input_tokens");
                if actual > 0 && prefix.messages > 0 {
                    out.push(UsagePoint {
                        model: model.to_string(),
                        segment,
                        line: *line,
                        counted: prefix.counted,
                        messages: prefix.messages,
                        tool_calls: prefix.tool_calls,
                        actual,
                    });
                }
            }
        }
        let at = format!("line {line}: message.content");
        let blocks = match message.get("content") {
            Some(Value::String(s)) => vec![Block::text(s.clone())],
            Some(Value::Array(bs)) => read_blocks(bs, &at)?,
            _ => continue,
        };
        // Whitespace-only text blocks are not sent (the importer drops them too).
        let blocks: Vec<Block> = blocks
            .into_iter()
            .filter(|b| !matches!(b, Block::Text(t) if t.text.trim().is_empty()))
            .collect();
        prefix.add(counter, role, &blocks);
    }
    Ok(out)
}

/// Whether a Responses item is the model's own output (it belongs to the answer, not to the
/// request that produced it).
fn is_model_output(item: &Value) -> bool {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "message" => item.get("role").and_then(Value::as_str) == Some("assistant"),
        "reasoning" | "function_call" | "custom_tool_call" | "local_shell_call"
        | "web_search_call" | "computer_call" => true,
        _ => false,
    }
}

fn codex_points<C: TokenCounter + ?Sized>(
    entries: &Entries,
    counter: &C,
) -> Result<Vec<UsagePoint>, FormatError> {
    let mut out = Vec::new();
    let mut model = String::new();
    let mut segment = 0;
    let mut system = 0;
    let mut prefix = Prefix::default();
    // Counted tokens of the reasoning items since the last user message: the model drops them
    // from its context when the user speaks again (OpenAI "Reasoning models": reasoning items
    // of earlier turns are discarded; visible in this log as the only drops of
    // `last_token_usage.input_tokens` without a compaction, each at a new user message).
    let mut turn_reasoning = 0usize;
    // The prefix as it was after the last item that was not the model's output: the request
    // of the next token count ended there (counted, messages, tool calls).
    let mut request = (0usize, 0usize, 0usize);
    let mut last_point: Option<(usize, usize)> = None;
    for (line, e) in entries {
        let payload = e.get("payload");
        match e.get("type").and_then(Value::as_str) {
            Some("session_meta") => {
                let instructions = payload.and_then(|p| p.get("instructions"));
                system = counter.count_system(instructions.filter(|i| !i.is_null()));
            }
            Some("turn_context") => {
                if let Some(m) = payload.and_then(|p| p.get("model")).and_then(Value::as_str) {
                    model = m.to_string();
                }
            }
            Some("compacted") => {
                segment += 1;
                prefix = Prefix::default();
                turn_reasoning = 0;
                request = (0, 0, 0);
            }
            Some("response_item") => {
                let Some(item) = payload else { continue };
                let message = read_item(item, &format!("line {line}: payload"))?;
                let kind = item.get("type").and_then(Value::as_str);
                if kind == Some("message") && message.role == Role::User {
                    prefix.counted = prefix.counted.saturating_sub(turn_reasoning);
                    turn_reasoning = 0;
                }
                let before = prefix.counted;
                prefix.add(counter, message.role, &message.content);
                if kind == Some("reasoning") {
                    turn_reasoning += prefix.counted - before;
                }
                if !is_model_output(item) {
                    request = (prefix.counted, prefix.messages, prefix.tool_calls);
                }
            }
            Some("event_msg")
                if payload.and_then(|p| p.get("type")).and_then(Value::as_str)
                    == Some("token_count") =>
            {
                // `last_token_usage` is the one request this event closes; `total_token_usage`
                // sums every request of the session so far. `input_tokens` includes the
                // cached part (`cached_input_tokens` is a share of it, not an addition).
                let actual = payload
                    .and_then(|p| p.pointer("/info/last_token_usage/input_tokens"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                // A repeated event for the same request says nothing new.
                let same = last_point == Some((segment, request.0));
                if actual > 0 && request.1 > 0 && !model.is_empty() && !same {
                    out.push(UsagePoint {
                        model: model.clone(),
                        segment,
                        line: *line,
                        counted: system + request.0,
                        messages: request.1,
                        tool_calls: request.2,
                        actual,
                    });
                    last_point = Some((segment, request.0));
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// One segment's share of a fit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SegmentFit {
    /// Which log (its index in the input of [`fit`]) and segment.
    pub source: usize,
    /// Segment number in that log.
    pub segment: usize,
    /// Points in it.
    pub points: usize,
    /// The segment's own least-squares slope (model tokens per counted token); `None` with
    /// fewer than 2 distinct counts.
    pub slope: Option<f64>,
    /// `c_segment` under the pooled ratio: model tokens the log does not hold (system prompt,
    /// tools, framing).
    pub intercept: f64,
}

/// The fit of one model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelFit {
    /// The model name.
    pub model: String,
    /// Points used.
    pub points: usize,
    /// The pooled within-segment slope: model tokens per counted token, with `tool_call` per
    /// call beside it.
    pub ratio: f64,
    /// Model tokens per tool call (tool_use block) the count does not see, fitted with `ratio`;
    /// 0 when the calls do not vary apart from the tokens, the joint fit would make it
    /// negative, or it lowers the rms error by less than a quarter (then `ratio` is the linear
    /// one).
    pub tool_call: f64,
    /// The slope of the fit without a per-call term (`actual = ratio × counted + c_segment`):
    /// what a ratio alone has to be to describe these logs.
    pub linear_ratio: f64,
    /// Root mean square error of the fit with `linear_ratio` alone.
    pub linear_rms_error: f64,
    /// Per segment.
    pub segments: Vec<SegmentFit>,
    /// Root mean square of `(estimate − actual) / actual` under the fit.
    pub rms_error: f64,
    /// Largest `|estimate − actual| / actual`.
    pub max_error: f64,
}

/// Sums of one model's within-segment deviations: `x` counted, `z` tool calls, `y` actual.
#[derive(Default)]
struct Moments {
    xx: f64,
    xz: f64,
    zz: f64,
    xy: f64,
    zy: f64,
}

/// Least squares per model with one intercept per segment of each log (`logs[i]` are the
/// points of log `i`): `actual = ratio × counted + tool_call × tool_calls + c_segment`, both
/// slopes shared by every segment of the model (pooled within-segment estimates). Models whose
/// segments have no spread in `counted` get no fit.
pub fn fit(logs: &[Vec<UsagePoint>]) -> Vec<ModelFit> {
    // model -> (source, segment) -> points
    let mut by_model: BTreeMap<&str, BTreeMap<(usize, usize), Vec<&UsagePoint>>> = BTreeMap::new();
    for (source, points) in logs.iter().enumerate() {
        for p in points {
            by_model
                .entry(p.model.as_str())
                .or_default()
                .entry((source, p.segment))
                .or_default()
                .push(p);
        }
    }
    let mut out = Vec::new();
    for (model, segments) in by_model {
        let mut m = Moments::default();
        let mut stats = Vec::new();
        for ((source, segment), points) in &segments {
            let n = points.len() as f64;
            let mean =
                |f: &dyn Fn(&UsagePoint) -> f64| points.iter().map(|p| f(p)).sum::<f64>() / n;
            let mx = mean(&|p| p.counted as f64);
            let mz = mean(&|p| p.tool_calls as f64);
            let my = mean(&|p| p.actual as f64);
            let (mut xy, mut xx) = (0.0, 0.0);
            for p in points {
                let dx = p.counted as f64 - mx;
                let dz = p.tool_calls as f64 - mz;
                let dy = p.actual as f64 - my;
                xy += dx * dy;
                xx += dx * dx;
                m.xz += dx * dz;
                m.zz += dz * dz;
                m.zy += dz * dy;
            }
            m.xy += xy;
            m.xx += xx;
            stats.push((
                *source,
                *segment,
                points,
                (mx, mz, my),
                (xx > 0.0).then(|| xy / xx),
            ));
        }
        if m.xx <= 0.0 {
            continue;
        }
        let linear_ratio = m.xy / m.xx;
        let det = m.xx * m.zz - m.xz * m.xz;
        let joint = (det > 1e-9 * m.xx * m.zz.max(1.0)).then(|| {
            (
                (m.xy * m.zz - m.zy * m.xz) / det,
                (m.zy * m.xx - m.xy * m.xz) / det,
            )
        });
        // (rms, max, per-segment fits) of the line `ratio × counted + tool_call × calls + c`.
        let evaluate = |ratio: f64, tool_call: f64| {
            let (mut sq, mut max, mut n) = (0.0f64, 0.0f64, 0usize);
            let mut fits = Vec::new();
            for (source, segment, points, (mx, mz, my), slope) in &stats {
                let intercept = my - ratio * mx - tool_call * mz;
                for p in points.iter() {
                    let estimate =
                        ratio * p.counted as f64 + tool_call * p.tool_calls as f64 + intercept;
                    let e = (estimate - p.actual as f64) / p.actual as f64;
                    sq += e * e;
                    max = max.max(e.abs());
                    n += 1;
                }
                fits.push(SegmentFit {
                    source: *source,
                    segment: *segment,
                    points: points.len(),
                    slope: *slope,
                    intercept,
                });
            }
            ((sq / n.max(1) as f64).sqrt(), max, fits, n)
        };
        let linear = evaluate(linear_ratio, 0.0);
        let linear_rms_error = linear.0;
        // The per-call term is kept when it is physical (both slopes positive) and explains
        // the data clearly better (rms error down by a quarter or more); otherwise it is the
        // fit's noise (for an OpenAI model counted exactly, the calls only stand in for
        // whatever else grows with them) and the ratio alone is reported.
        let (ratio, tool_call, (rms_error, max_error, fits, n)) = match joint {
            Some((r, k)) if r > 0.0 && k >= 0.0 => {
                let with_calls = evaluate(r, k);
                if with_calls.0 <= 0.75 * linear_rms_error {
                    (r, k, with_calls)
                } else {
                    (linear_ratio, 0.0, linear)
                }
            }
            _ => (linear_ratio, 0.0, linear),
        };
        out.push(ModelFit {
            model: model.to_string(),
            points: n,
            ratio,
            tool_call,
            linear_ratio,
            linear_rms_error,
            segments: fits,
            rms_error,
            max_error,
        });
    }
    out
}

/// Replays the points of one log as an agent loop would see them: inside each segment the
/// first `warmup` points fix the segment's constant (mean of
/// `actual − ratio × counted − tool_call × tool_calls`), and every later point is estimated as
/// `ratio × counted + tool_call × tool_calls + constant`. Returns `(point, estimate)` for the
/// points after the warm-up.
pub fn replay(
    points: &[UsagePoint],
    ratio: f64,
    tool_call: f64,
    warmup: usize,
) -> Vec<(&UsagePoint, f64)> {
    let line = |p: &UsagePoint| ratio * p.counted as f64 + tool_call * p.tool_calls as f64;
    let mut out = Vec::new();
    let mut segments: BTreeMap<usize, Vec<&UsagePoint>> = BTreeMap::new();
    for p in points {
        segments.entry(p.segment).or_default().push(p);
    }
    for points in segments.values() {
        if points.len() <= warmup || warmup == 0 {
            continue;
        }
        let constant = points[..warmup]
            .iter()
            .map(|p| p.actual as f64 - line(p))
            .sum::<f64>()
            / warmup as f64;
        for p in &points[warmup..] {
            out.push((*p, line(p) + constant));
        }
    }
    out
}

/// The text report of `compactor calibrate`: per model the ratio, the error of the fit, each
/// segment's slope and constant (with the log it comes from, `names[source]`), and a
/// `[tokens.models]` snippet to paste.
pub fn render(
    fits: &[ModelFit],
    names: &[String],
    logs: &[Vec<UsagePoint>],
    tokenizer: super::Tokenizer,
) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for (name, points) in names.iter().zip(logs) {
        let _ = writeln!(out, "{name}: {} usage records", points.len());
    }
    for f in fits {
        let _ = writeln!(
            out,
            "\n{}: ratio {:.4} model tokens per {tokenizer} token and {:.0} per tool call over {} \
             requests; error rms {:.2}%, max {:.2}% (a ratio alone: {:.4}, rms {:.2}%)",
            f.model,
            f.ratio,
            f.tool_call,
            f.points,
            f.rms_error * 100.0,
            f.max_error * 100.0,
            f.linear_ratio,
            f.linear_rms_error * 100.0
        );
        for s in &f.segments {
            let slope = s
                .slope
                .map_or_else(|| "-".to_string(), |v| format!("{v:.4}"));
            let _ = writeln!(
                out,
                "  {} segment {}: {} requests, own slope {slope}, constant {:.0} model tokens",
                names.get(s.source).map_or("?", String::as_str),
                s.segment,
                s.points,
                s.intercept
            );
        }
        let pattern = family_pattern(&f.model);
        let _ = writeln!(
            out,
            "  # The constant is what each request held that the log does not (system prompt, \
             tools, framing);\n  # a request the counter sees whole needs only the framing as \
             overhead.\n  [tokens.models.\"{pattern}\"]\n  tokenizer = \"{tokenizer}\"\n  \
             ratio = {:.3}\n  tool_call = {:.0}",
            f.ratio, f.tool_call
        );
    }
    out
}

/// `claude-opus-4-6` -> `claude-opus-4-6*`: the snippet names the model itself (and its dated
/// versions); widen it by hand to a family.
fn family_pattern(model: &str) -> String {
    format!("{model}*")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::{TiktokenCounter, Tokenizer};
    use serde_json::json;

    fn line(v: &Value) -> String {
        format!("{v}\n")
    }

    fn assistant(id: &str, text: &str, input: u64) -> String {
        line(
            &json!({"type": "assistant", "message": {"id": id, "model": "claude-x", "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "usage": {"input_tokens": 3, "cache_read_input_tokens": input, "cache_creation_input_tokens": 7}}}),
        )
    }

    fn user(text: &str) -> String {
        line(&json!({"type": "user", "message": {"role": "user", "content": text}}))
    }

    #[test]
    fn claude_code_points_count_the_prefix_each_response_saw_and_restart_after_a_compaction() {
        let c = TiktokenCounter::new(Tokenizer::O200kBase);
        let hw = c.count_text("hello world");
        let log = [
            user("hello world"),
            assistant("m1", "hello world", 100),
            // A second line of the same response: no new point.
            assistant("m1", "hello world", 100),
            user("hello world"),
            assistant("m2", "hello world", 200),
            line(&json!({"type": "system", "subtype": "compact_boundary"})),
            user("hello world"),
            assistant("m3", "hello world", 50),
        ]
        .concat();
        let points = usage_points(&log, &c).unwrap();
        let got: Vec<_> = points
            .iter()
            .map(|p| (p.segment, p.line, p.counted, p.messages, p.actual))
            .collect();
        let m = MESSAGE_OVERHEAD;
        assert_eq!(
            got,
            vec![
                (0, 2, m + hw, 1, 110),
                (0, 5, 3 * m + 4 * hw, 3, 210),
                (1, 8, m + hw, 1, 60),
            ]
        );
    }

    #[test]
    fn a_bad_line_is_named() {
        let c = TiktokenCounter::new(Tokenizer::O200kBase);
        let log = [user("x"), "[1]\n".to_string()].concat();
        assert_eq!(
            usage_points(&log, &c).unwrap_err().to_string(),
            "line 2: expected a JSON object, found an array"
        );
    }

    #[test]
    fn codex_points_end_the_prefix_before_the_models_own_items() {
        let c = TiktokenCounter::new(Tokenizer::O200kBase);
        let item = |v: Value| line(&json!({"type": "response_item", "payload": v}));
        let count = |n: u64| {
            line(
                &json!({"type": "event_msg", "payload": {"type": "token_count",
                "info": {"last_token_usage": {"input_tokens": n}}}}),
            )
        };
        let log = [
            line(&json!({"type": "session_meta", "payload": {"instructions": "hello world"}})),
            line(&json!({"type": "turn_context", "payload": {"model": "gpt-5"}})),
            item(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello world"}]})),
            item(json!({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"})),
            count(500),
            count(500),
            item(json!({"type": "function_call_output", "call_id": "c1", "output": "hello world"})),
            item(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]})),
            count(900),
        ]
        .concat();
        let points = usage_points(&log, &c).unwrap();
        let hw = c.count_text("hello world");
        let m = MESSAGE_OVERHEAD;
        let call = c.count_text("shell") + c.count_text("{}");
        let got: Vec<_> = points
            .iter()
            .map(|p| (p.model.as_str(), p.counted, p.actual))
            .collect();
        assert_eq!(
            got,
            vec![
                ("gpt-5", hw + m + hw, 500),
                ("gpt-5", hw + m + hw + m + call + m + hw, 900),
            ]
        );
    }

    #[test]
    fn codex_reasoning_of_an_earlier_turn_leaves_the_prefix_at_the_next_user_message() {
        let c = TiktokenCounter::new(Tokenizer::O200kBase);
        let item = |v: Value| line(&json!({"type": "response_item", "payload": v}));
        let count = |n: u64| {
            line(
                &json!({"type": "event_msg", "payload": {"type": "token_count",
                "info": {"last_token_usage": {"input_tokens": n}}}}),
            )
        };
        let user = |t: &str| {
            item(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}),
            )
        };
        let reasoning = json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "think think"}]});
        let log = [
            line(&json!({"type": "turn_context", "payload": {"model": "gpt-5"}})),
            user("hello world"),
            count(100),
            item(reasoning),
            item(json!({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"})),
            item(json!({"type": "function_call_output", "call_id": "c1", "output": "hello world"})),
            count(200),
            user("again"),
            count(300),
        ]
        .concat();
        let points = usage_points(&log, &c).unwrap();
        let m = MESSAGE_OVERHEAD;
        let hw = c.count_text("hello world");
        let think = c.count_text("think think");
        let call = c.count_text("shell") + c.count_text("{}");
        let got: Vec<_> = points.iter().map(|p| (p.counted, p.tool_calls)).collect();
        let second = m + hw + m + think + call + m + hw;
        assert_eq!(
            got,
            vec![
                (m + hw, 0),
                (second, 1),
                // The reasoning item is gone from the third request; the call stays (the user
                // text joins the user-role message of the call's output).
                (second - think + c.count_text("again"), 1),
            ]
        );
    }

    #[test]
    fn the_fit_separates_a_per_call_cost_from_the_ratio() {
        // The provider counts 1.1 per token plus 170 per call; calls do not grow in step with
        // tokens (a few large results, many small ones).
        let sizes = [
            900usize, 150, 4000, 200, 300, 6000, 120, 80, 2500, 400, 90, 3000,
        ];
        let mut pts = Vec::new();
        let (mut counted, mut calls) = (1000usize, 0usize);
        for (i, s) in sizes.iter().enumerate() {
            counted += s;
            calls += 1 + i % 2;
            let actual = (1.1 * counted as f64 + 170.0 * calls as f64) as u64 + 12_000;
            pts.push(UsagePoint {
                tool_calls: calls,
                ..point(0, counted, actual)
            });
        }
        let f = &fit(std::slice::from_ref(&pts))[0];
        assert!((f.ratio - 1.1).abs() < 1e-3, "{}", f.ratio);
        assert!((f.tool_call - 170.0).abs() < 0.5, "{}", f.tool_call);
        assert!((f.segments[0].intercept - 12_000.0).abs() < 2.0);
        assert!(f.linear_ratio > 1.15, "{}", f.linear_ratio);
        for (p, e) in replay(&pts, f.ratio, f.tool_call, 3) {
            assert!((e - p.actual as f64).abs() < 2.0);
        }
    }

    fn point(source_segment: usize, counted: usize, actual: u64) -> UsagePoint {
        UsagePoint {
            model: "m".into(),
            segment: source_segment,
            line: 0,
            counted,
            messages: 1,
            tool_calls: 0,
            actual,
        }
    }

    #[test]
    fn the_fit_recovers_a_shared_slope_with_one_intercept_per_segment() {
        let a: Vec<_> = (1..10)
            .map(|i| point(0, i * 1000, (1.4 * (i * 1000) as f64) as u64 + 5000))
            .chain((1..5).map(|i| point(1, i * 700, (1.4 * (i * 700) as f64) as u64 + 9000)))
            .collect();
        let fits = fit(std::slice::from_ref(&a));
        assert_eq!(fits.len(), 1);
        let f = &fits[0];
        assert!((f.ratio - 1.4).abs() < 1e-3, "{}", f.ratio);
        assert!((f.segments[0].intercept - 5000.0).abs() < 2.0);
        assert!((f.segments[1].intercept - 9000.0).abs() < 2.0);
        assert!(f.max_error < 1e-3);
        let replayed = replay(&a, f.ratio, f.tool_call, 2);
        assert_eq!(replayed.len(), 7 + 2);
        for (p, e) in replayed {
            assert!((e - p.actual as f64).abs() < 2.0);
        }
    }
}
