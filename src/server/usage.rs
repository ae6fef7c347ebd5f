//! The proxy learns each model's token ratio from the provider's own count of the requests it
//! forwarded.
//!
//! ```text
//! upstream answer bytes --(passed on unchanged, as they come)--> client
//!        \-> UsageTap: JSON body (bounded) or SSE `data:` lines -> usage.input tokens
//!             at the end of the body -> Compactor::observe_usage(model, counted, actual)
//!   /metrics: gauge compactor_model_token_ratio{model}, one per learned ratio kept (the
//!             table is bounded by `[tokens] learned_bytes`, and so are the series)
//! ```
//!
//! Where the count is: Anthropic Messages `usage` of the JSON answer, or of the SSE
//! `message_start` event (`message.usage`) and `message_delta` (`usage`); the input is
//! `input_tokens + cache_read_input_tokens + cache_creation_input_tokens` (Anthropic "Prompt
//! caching": the three together are the prompt). OpenAI Chat `usage.prompt_tokens` (a stream's
//! last chunk with `stream_options.include_usage`); OpenAI Responses `usage.input_tokens`
//! (stream: `response.completed` -> `response.usage`), which already includes cached tokens.
//! Gemini `usageMetadata.promptTokenCount` (every chunk of a stream).

use crate::compactor::Compactor;
use serde_json::Value;
use std::sync::Arc;

/// Bytes of a non-streamed answer kept to read its `usage`; a longer body is not read.
pub const JSON_LIMIT: usize = 4 << 20;
/// Longest SSE line kept while waiting for its end; a longer line is skipped.
pub const LINE_LIMIT: usize = 1 << 20;

/// The input tokens the provider counted, from one answer object or SSE event (see the
/// [module docs](self)). `None` when it holds no usage.
pub fn input_tokens(v: &Value) -> Option<u64> {
    // Gemini: `usageMetadata.promptTokenCount` of the answer (each SSE chunk of a stream
    // repeats it), cached tokens included (Gemini API reference, UsageMetadata).
    if let Some(prompt) = v
        .pointer("/usageMetadata/promptTokenCount")
        .and_then(Value::as_u64)
    {
        return Some(prompt);
    }
    let usage = [
        v.get("usage"),
        v.pointer("/message/usage"),
        v.pointer("/response/usage"),
    ]
    .into_iter()
    .flatten()
    .find(|u| u.is_object())?;
    let field = |k: &str| usage.get(k).and_then(Value::as_u64);
    if let Some(prompt) = field("prompt_tokens") {
        return Some(prompt);
    }
    let input = field("input_tokens")?;
    Some(
        input
            + field("cache_read_input_tokens").unwrap_or(0)
            + field("cache_creation_input_tokens").unwrap_or(0),
    )
}

/// Watches one upstream answer as it streams by and, when the body ends (the tap is
/// dropped), feeds the largest input count seen to the compactor.
pub struct UsageTap {
    compactor: Arc<Compactor>,
    model: String,
    counted: usize,
    sse: bool,
    buffer: Vec<u8>,
    overflow: bool,
    seen: Option<u64>,
}

impl UsageTap {
    /// A tap for the answer to a request of `model` that the counter counted `counted` tokens
    /// of; `sse` when the answer is `text/event-stream`.
    pub fn new(compactor: Arc<Compactor>, model: String, counted: usize, sse: bool) -> UsageTap {
        UsageTap {
            compactor,
            model,
            counted,
            sse,
            buffer: Vec::new(),
            overflow: false,
            seen: None,
        }
    }

    /// Looks at the next chunk of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        if !self.sse {
            if self.buffer.len() + chunk.len() > JSON_LIMIT {
                self.overflow = true;
                self.buffer = Vec::new();
            }
            if !self.overflow {
                self.buffer.extend_from_slice(chunk);
            }
            return;
        }
        let mut rest = chunk;
        while let Some(end) = memchr::memchr(b'\n', rest) {
            let (line, tail) = rest.split_at(end);
            if !self.overflow {
                self.buffer.extend_from_slice(line);
                self.event_line();
            }
            self.buffer.clear();
            self.overflow = false;
            rest = tail.get(1..).unwrap_or_default();
        }
        if self.buffer.len() + rest.len() > LINE_LIMIT {
            self.overflow = true;
            self.buffer.clear();
        } else if !self.overflow {
            self.buffer.extend_from_slice(rest);
        }
    }

    fn event_line(&mut self) {
        let line = self.buffer.strip_suffix(b"\r").unwrap_or(&self.buffer);
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        if let Ok(v) = serde_json::from_slice::<Value>(data.trim_ascii()) {
            self.take(&v);
        }
    }

    fn take(&mut self, v: &Value) {
        if let Some(n) = input_tokens(v) {
            self.seen = Some(self.seen.map_or(n, |s| s.max(n)));
        }
    }

    fn finish(&mut self) {
        if !self.sse && !self.overflow {
            if let Ok(v) = serde_json::from_slice::<Value>(&self.buffer) {
                self.take(&v);
            }
        } else if self.sse && !self.overflow && !self.buffer.is_empty() {
            self.event_line();
        }
        let Some(actual) = self.seen else { return };
        if let Some(o) = self
            .compactor
            .observe_usage(&self.model, self.counted, actual)
        {
            tracing::debug!(model = %self.model, counted = self.counted, actual, sample = o.sample, accepted = o.accepted, ratio = o.ratio, "proxy: usage observed");
        }
    }
}

impl Drop for UsageTap {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A tap that learns the model's ratio from a successful answer's usage (see
/// this module); `None` without a model or for an error answer.
pub(crate) fn learning_tap(
    state: &super::AppState,
    status: axum::http::StatusCode,
    headers: &axum::http::HeaderMap,
    probe: Option<(String, usize)>,
) -> Option<UsageTap> {
    let (model, counted) = probe?;
    if !status.is_success() {
        return None;
    }
    let compactor = state.default_compactor();
    let basis = compactor.model_tokens(Some(&model));
    if basis.source == crate::tokens::RatioSource::Counter {
        return None;
    }
    let sse = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    Some(UsageTap::new(compactor, model, counted, sse))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn input_tokens_are_read_from_each_providers_usage() {
        let anthropic = json!({"usage": {"input_tokens": 3, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20, "output_tokens": 9}});
        assert_eq!(input_tokens(&anthropic), Some(123));
        let start = json!({"type": "message_start", "message": {"usage": {"input_tokens": 50}}});
        assert_eq!(input_tokens(&start), Some(50));
        let chat = json!({"choices": [], "usage": {"prompt_tokens": 77, "completion_tokens": 5}});
        assert_eq!(input_tokens(&chat), Some(77));
        let responses = json!({"type": "response.completed", "response": {"usage": {"input_tokens": 88, "input_tokens_details": {"cached_tokens": 80}}}});
        assert_eq!(input_tokens(&responses), Some(88));
        assert_eq!(input_tokens(&json!({"usage": null})), None);
        assert_eq!(input_tokens(&json!({"type": "ping"})), None);
    }
}
