//! Anthropic Messages API client: `POST {base_url}/v1/messages`.

use super::{
    LlmConfig, LlmError, Summarizer, SummaryRequest, http_client, post_json, snippet,
    with_extra_body,
};
use serde_json::{Value, json};

/// The `anthropic-version` header sent with every request.
pub const API_VERSION: &str = "2023-06-01";

/// A summarizer on the Anthropic Messages API.
pub struct AnthropicClient {
    config: LlmConfig,
    key: Option<String>,
    http: reqwest::Client,
    breaker: super::breaker::Breaker,
}

impl std::fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicClient")
            .field("config", &self.config)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl AnthropicClient {
    /// A client for `config`, sending `key` as `x-api-key` when given.
    ///
    /// # Errors
    /// [`LlmError::Client`] when the HTTP client cannot be built.
    pub fn new(config: LlmConfig, key: Option<String>) -> Result<AnthropicClient, LlmError> {
        let http = http_client(&config)?;
        let breaker = config.breaker();
        Ok(AnthropicClient {
            config,
            key,
            http,
            breaker,
        })
    }

    /// The request body for `request` (Messages API; the wire quirk: `system` is top level).
    pub fn body(&self, request: &SummaryRequest) -> Value {
        let body = json!({
            "model": self.config.model,
            "max_tokens": request.max_output_tokens,
            "system": request.system,
            "messages": [{"role": "user", "content": request.user}],
        });
        with_extra_body(body, &self.config)
    }
}

#[async_trait::async_trait]
impl Summarizer for AnthropicClient {
    fn model(&self) -> &str {
        &self.config.model
    }

    fn context_window(&self) -> usize {
        self.config.context_window
    }

    async fn complete(&self, request: &SummaryRequest) -> Result<String, LlmError> {
        let url = format!("{}/v1/messages", self.config.base());
        let mut headers = vec![("anthropic-version", API_VERSION)];
        if let Some(k) = &self.key {
            headers.push(("x-api-key", k.as_str()));
        }
        let text = post_json(
            &self.http,
            &self.config,
            &self.breaker,
            &url,
            &headers,
            &self.body(request),
        )
        .await?;
        let decode = |message: &str| LlmError::Decode {
            url: url.clone(),
            message: message.into(),
            body: snippet(&text),
        };
        let value: Value = serde_json::from_str(&text).map_err(|_| decode("not JSON"))?;
        let content = value
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| decode("no content array"))?;
        let answer: Vec<&str> = content
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect();
        let answer = answer.join("\n");
        if answer.trim().is_empty() {
            return Err(LlmError::Empty { url });
        }
        Ok(answer)
    }
}
