//! Reading recorded usage: each request of a Claude Code session log or a Codex rollout as a
//! [`UsagePoint`], the provider's count beside the counter's count of the prefix it saw.

use crate::conversation::{Block, Role};
use crate::format::FormatError;
use crate::format::anthropic::read_blocks;
use crate::format::json_kind;
use crate::format::openai_responses::read_item;
use crate::tokens::{MESSAGE_OVERHEAD, TokenCounter};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashSet;

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
        if self.last_role.as_ref() != Some(&role) {
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
