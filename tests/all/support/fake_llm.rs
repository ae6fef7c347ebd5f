//! A fake LLM server on 127.0.0.1:0 speaking the Anthropic Messages and OpenAI Chat Completions
//! APIs. It answers from a script (one reply per request, in order, then the default reply) and
//! records every request so a test can assert what was sent. It never looks at the prompt text.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A normal answer with this text.
    Text(String),
    /// An error status, with a `retry-after` header when given.
    Status(u16, Option<&'static str>),
    /// Wait, then answer with this text (for timeouts).
    Delay(Duration, String),
    /// 200 with a body that is not JSON.
    Garbage,
    /// A well-formed answer with empty text.
    Empty,
    /// No answer: the connection is dropped once the request is read (a transport failure).
    Drop,
}

/// A request as received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `/v1/messages` or `/v1/chat/completions`.
    pub path: String,
    /// Headers, names lowercase.
    pub headers: HashMap<String, String>,
    /// The JSON body.
    pub body: Value,
}

impl Recorded {
    /// The material sent: the user message's text (both APIs).
    pub fn user_text(&self) -> String {
        let msgs = self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        msgs.iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The system prompt sent (Anthropic `system`, OpenAI system message).
    pub fn system_text(&self) -> String {
        if let Some(s) = self.body["system"].as_str() {
            return s.to_string();
        }
        let msgs = self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        msgs.iter()
            .filter(|m| m["role"] == "system")
            .map(|m| m["content"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

#[derive(Default)]
struct Inner {
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
}

/// The running server.
pub struct FakeLlm {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    inner: Arc<Inner>,
}

/// The answer when the script is empty.
pub const DEFAULT_SUMMARY: &str = "The user asked for the build to be fixed; work is ongoing.";

impl FakeLlm {
    /// Starts a server on a free loopback port, on the current runtime.
    pub async fn start(script: Vec<Reply>) -> FakeLlm {
        let inner = Arc::new(Inner {
            script: Mutex::new(script.into()),
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/messages", post(handle))
            .route("/v1/chat/completions", post(handle))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeLlm { url, inner }
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.requests.lock().unwrap().clone()
    }

    /// How many requests were received.
    pub fn count(&self) -> usize {
        self.inner.requests.lock().unwrap().len()
    }
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let recorded = Recorded {
        path: path.clone(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_lowercase(),
                    v.to_str().unwrap_or("").to_string(),
                )
            })
            .collect(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    inner.requests.lock().unwrap().push(recorded);
    let reply = inner
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| Reply::Text(DEFAULT_SUMMARY.into()));
    let anthropic = path == "/v1/messages";
    match reply {
        Reply::Text(t) => answer(anthropic, &t),
        Reply::Empty => answer(anthropic, ""),
        Reply::Delay(d, t) => {
            tokio::time::sleep(d).await;
            answer(anthropic, &t)
        }
        Reply::Garbage => (StatusCode::OK, "<html>upstream says hello</html>").into_response(),
        // Unwinding the connection's task drops its socket unanswered (no panic message:
        // resume_unwind skips the hook).
        Reply::Drop => std::panic::resume_unwind(Box::new("fake LLM: connection dropped")),
        Reply::Status(code, retry_after) => {
            let status = StatusCode::from_u16(code).unwrap();
            let body = json!({"error": {"type": "overloaded", "message": "try later"}}).to_string();
            match retry_after {
                Some(s) => (status, [("retry-after", s)], body).into_response(),
                None => (status, body).into_response(),
            }
        }
    }
}

fn answer(anthropic: bool, text: &str) -> Response {
    let body = if anthropic {
        json!({"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake",
               "content": if text.is_empty() { json!([]) } else { json!([{"type": "text", "text": text}]) },
               "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}})
    } else {
        json!({"id": "chatcmpl-fake", "object": "chat.completion", "model": "fake",
               "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop"}]})
    };
    axum::Json(body).into_response()
}
