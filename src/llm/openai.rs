//! OpenAI Chat Completions client: `POST {base_url}/v1/chat/completions`. Also speaks to
//! compatible servers (llama.cpp's `llama-server`, Ollama, vLLM) through `base_url`.

use super::{
    LlmConfig, LlmError, Summarizer, SummaryRequest, http_client, post_json, snippet,
    with_extra_body,
};
use serde_json::{Value, json};

/// A summarizer on an OpenAI-compatible Chat Completions endpoint.
pub struct OpenAiClient {
    config: LlmConfig,
    key: Option<String>,
    http: reqwest::Client,
    breaker: super::breaker::Breaker,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("config", &self.config)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl OpenAiClient {
    /// A client for `config`, sending `key` as a Bearer token when given.
    ///
    /// # Errors
    /// [`LlmError::Client`] when the HTTP client cannot be built.
    pub fn new(config: LlmConfig, key: Option<String>) -> Result<OpenAiClient, LlmError> {
        let http = http_client(&config)?;
        let breaker = config.breaker();
        Ok(OpenAiClient {
            config,
            key,
            http,
            breaker,
        })
    }

    /// The request body for `request`: a system and a user message. `max_tokens` rather than
    /// `max_completion_tokens`, because the compatible servers read the older name.
    pub fn body(&self, request: &SummaryRequest) -> Value {
        let body = json!({
            "model": self.config.model,
            "max_tokens": request.max_output_tokens,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": request.system},
                {"role": "user", "content": request.user},
            ],
        });
        with_extra_body(body, &self.config)
    }
}

#[async_trait::async_trait]
impl Summarizer for OpenAiClient {
    fn model(&self) -> &str {
        &self.config.model
    }

    fn context_window(&self) -> usize {
        self.config.context_window
    }

    async fn complete(&self, request: &SummaryRequest) -> Result<String, LlmError> {
        let url = format!("{}/v1/chat/completions", self.config.base());
        let auth = self.key.as_ref().map(|k| format!("Bearer {k}"));
        let mut headers = Vec::new();
        if let Some(a) = &auth {
            headers.push(("authorization", a.as_str()));
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
        let message = value
            .pointer("/choices/0/message")
            .ok_or_else(|| decode("no choices[0].message"))?;
        // `content` is a string, or null when the model wrote nothing.
        let answer = match message.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(_) => return Err(decode("content is not a string")),
        };
        if answer.trim().is_empty() {
            return Err(LlmError::Empty { url });
        }
        Ok(answer)
    }
}
