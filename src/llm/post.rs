//! One POST to the summarizer's endpoint, retried:
//!
//! ```text
//! post_json -> attempt: breaker admits? (open: LlmError::CircuitOpen, no retry)
//!                       -> send, read the body up to max_answer_bytes
//!                       -> 2xx: the body | 429/5xx, transport failure: retried | else: the error
//!           -> retries (backon): at most `llm.retries`, after 0.5 s, 1 s, 2 s, … (32 s at most)
//!              or the server's `retry-after` seconds (60 s at most)
//! ```
//! Every attempt is counted by the scope's observer ([`scope::CallObserver`]) and reported to
//! the breaker ([`breaker::Ticket`]); an attempt dropped at the scope's deadline counts as
//! failed in both.

use super::{LlmConfig, LlmError, breaker, scope, snippet};
use backon::{ExponentialBuilder, Retryable};
use std::sync::Arc;
use std::time::Duration;

/// Longest wait honoured from a `retry-after` header.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The first backoff wait; each later one doubles it.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest backoff wait (the seventh and later).
const MAX_BACKOFF: Duration = Duration::from_secs(32);

/// A failed attempt: its error, and whether it may be retried.
struct Failed {
    error: LlmError,
    next: Next,
}

/// What may follow a failed attempt.
enum Next {
    /// Nothing: the error is final (a refused request, a timeout, an answer over the cap, an
    /// open circuit).
    Stop,
    /// Another attempt (429, 5xx, transport failure), after the server's `retry-after` wait
    /// when it sent one, else after the backoff.
    Retry { after: Option<Duration> },
}

/// Posts `body` to `url` with `headers`, retrying 429 and 5xx answers and transport failures
/// (connection refused, reset or cut: [`LlmError::Transport`]; not timeouts, not answers over
/// the cap) up to `config.retries` times with exponential backoff (0.5 s, 1 s, 2 s, …) or the
/// server's `retry-after` seconds.
/// Every attempt passes `breaker` first (an open circuit also stops the retries) and is counted
/// by the scope's observer. Returns the body of the first successful answer, read up to
/// `config.max_answer_bytes`.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    config: &LlmConfig,
    breaker: &breaker::Breaker,
    url: &str,
    headers: &[(&str, &str)],
    body: &serde_json::Value,
) -> Result<String, LlmError> {
    let observer = scope::current().observer;
    let backoff = ExponentialBuilder::new()
        .with_min_delay(FIRST_BACKOFF)
        .with_factor(2.0)
        .with_max_delay(MAX_BACKOFF)
        .with_max_times(usize::try_from(config.retries).unwrap_or(usize::MAX));
    let mut attempt = 0u32;
    let send = || {
        let request = Request {
            client,
            config,
            url,
            headers,
            body,
        };
        request.attempt(breaker, observer.as_ref())
    };
    send.retry(backoff)
        .sleep(tokio::time::sleep)
        .when(|f: &Failed| matches!(f.next, Next::Retry { .. }))
        .adjust(|f: &Failed, planned: Option<Duration>| match f.next {
            Next::Retry { after: Some(after) } => planned.map(|_| after),
            _ => planned,
        })
        .notify(|f: &Failed, backoff: Duration| {
            match &f.error {
                LlmError::Status { status, .. } => {
                    tracing::warn!(status = *status, attempt, ?backoff, "summarizer: retrying");
                }
                e => tracing::warn!(error = %e, attempt, ?backoff, "summarizer: retrying"),
            }
            attempt += 1;
        })
        .await
        .map_err(|f| f.error)
}

/// What one attempt sends, and where.
#[derive(Clone, Copy)]
struct Request<'a> {
    client: &'a reqwest::Client,
    config: &'a LlmConfig,
    url: &'a str,
    headers: &'a [(&'a str, &'a str)],
    body: &'a serde_json::Value,
}

impl Request<'_> {
    /// One attempt: admitted by `breaker`, counted by `observer`, its outcome reported to both.
    async fn attempt(
        self,
        breaker: &breaker::Breaker,
        observer: Option<&Arc<dyn scope::CallObserver>>,
    ) -> Result<String, Failed> {
        let ticket = breaker.admit().await.map_err(|refused| {
            if let Some(o) = observer {
                o.refused();
            }
            Failed {
                error: LlmError::CircuitOpen {
                    url: self.url.to_string(),
                    why: match refused {
                        breaker::Refused::Open(left) => {
                            format!("{:.0} s of cool-down left", left.as_secs_f64())
                        }
                        breaker::Refused::Probing => "a probe is already out".into(),
                    },
                },
                next: Next::Stop,
            }
        })?;
        // Counted as failed unless it succeeds, also when dropped at the deadline.
        let counted = Counted::sent(observer.cloned());
        let (status, retry_after, text) = match self.send().await {
            Ok(answer) => answer,
            Err(error) => {
                ticket.failed();
                // A connection refused, reset or cut is as transient as a 503: retried.
                let next = match error {
                    LlmError::Transport { .. } => Next::Retry { after: None },
                    _ => Next::Stop,
                };
                return Err(Failed { error, next });
            }
        };
        if status.is_success() {
            ticket.succeeded();
            counted.succeeded();
            return Ok(text);
        }
        let transient = status.as_u16() == 429 || status.is_server_error();
        if transient {
            ticket.failed();
        } else {
            // The model is up; the request was refused: not the model's health.
            ticket.succeeded();
        }
        drop(counted);
        Err(Failed {
            error: LlmError::Status {
                status: status.as_u16(),
                url: self.url.to_string(),
                body: snippet(&text),
            },
            next: if transient {
                Next::Retry { after: retry_after }
            } else {
                Next::Stop
            },
        })
    }

    /// Sends the request once: the status, the `retry-after` wait and the body (at most
    /// `config.max_answer_bytes`, else [`LlmError::TooLarge`]).
    async fn send(self) -> Result<(reqwest::StatusCode, Option<Duration>, String), LlmError> {
        let Request {
            client,
            config,
            url,
            headers,
            body,
        } = self;
        let mut req = client.post(url).json(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut response = req.send().await.map_err(|e| transport(e, url, config))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| Duration::from_secs_f64(s).min(MAX_RETRY_AFTER));
        let limit = config.max_answer_bytes;
        let too_large = || LlmError::TooLarge {
            url: url.to_string(),
            limit,
        };
        if response.content_length().is_some_and(|n| n > limit as u64) {
            return Err(too_large());
        }
        let mut bytes: Vec<u8> = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| transport(e, url, config))?
        {
            if bytes.len() + chunk.len() > limit {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok((
            status,
            retry_after,
            String::from_utf8_lossy(&bytes).into_owned(),
        ))
    }
}

/// One attempt as the scope's observer sees it: sent now, failed when dropped before
/// [`Counted::succeeded`].
struct Counted(Option<Arc<dyn scope::CallObserver>>);

impl Counted {
    fn sent(observer: Option<Arc<dyn scope::CallObserver>>) -> Counted {
        if let Some(o) = &observer {
            o.sent();
        }
        Counted(observer)
    }

    fn succeeded(mut self) {
        self.0 = None;
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some(o) = &self.0 {
            o.failed();
        }
    }
}

fn transport(e: reqwest::Error, url: &str, config: &LlmConfig) -> LlmError {
    if e.is_timeout() {
        LlmError::Timeout {
            url: url.to_string(),
            timeout: config.timeout(),
        }
    } else {
        LlmError::Transport {
            url: url.to_string(),
            source: e,
        }
    }
}

/// Builds the HTTP client: the attempt timeout; no proxy from the environment for loopback
/// servers.
pub(crate) fn http_client(config: &LlmConfig) -> Result<reqwest::Client, LlmError> {
    let base = config.base();
    let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
        .iter()
        .any(|p| base.starts_with(p));
    let mut builder = reqwest::Client::builder()
        .timeout(config.timeout())
        .connect_timeout(config.timeout().min(Duration::from_secs(10)));
    if loopback {
        builder = builder.no_proxy();
    }
    builder.build().map_err(LlmError::Client)
}
