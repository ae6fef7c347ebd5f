//! The JSON API: compact, count tokens, validate; health and metrics.
//!
//! ```text
//! body (read whole by server::body) -> compaction pool: parse the JSON, read the history,
//!   compact / count / validate, write the answer's JSON, drop the parsed copies
//!   -> the answer's bytes back on the async worker
//! ```
//! A 4 MB body of 20,000 messages is tens of milliseconds of parsing: on the async workers
//! it would stall `/healthz` (docs/service.md, "Nothing stalls it").

use super::error::parse_json;
use super::unique::Unique;
use super::{AppError, AppState};
use crate::conversation::Conversation;
use crate::format::{Format, detect::guess_format};
use crate::guard::Count;
use crate::guard::{self, ValidateOptions};
use crate::tokens::TokenCounter;
use axum::Json;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Number, Value, json};
use std::borrow::Cow;

/// The body of `/v1/compact`, `/v1/count_tokens` and `/v1/validate`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApiRequest {
    /// A whole request body (`{"model", "system", "messages", ...}`) or a message array; a key
    /// twice in one of its objects is refused ([`Unique`]).
    #[serde(default)]
    request: Option<Unique>,
    /// A bare message array (instead of `request`), read as `request`.
    #[serde(default)]
    messages: Option<Unique>,
    /// `anthropic`, `openai-chat`, `openai-responses`; detected when absent.
    #[serde(default)]
    format: Option<String>,
    /// Budget in tokens (default: the preset's): an integer, read exactly ([`token_budget`]).
    #[serde(default, deserialize_with = "token_budget")]
    budget: Option<usize>,
    /// A preset name (default: the configured one).
    #[serde(default)]
    strategy: Option<String>,
    /// Extra instructions for a model summary.
    #[serde(default)]
    instructions: Option<String>,
    /// `/v1/validate`: reject a history that ends with calls waiting for results.
    #[serde(default)]
    strict: bool,
}

/// `budget`: an integer from 0 (refused by `/v1/compact` with its own words) to `usize::MAX`,
/// read from the number's digits (a number past u64 is no float to serde here); `null` is none.
/// Anything else is refused naming the value and the range.
fn token_budget<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let Some(n) = Option::<Number>::deserialize(d)? else {
        return Ok(None);
    };
    let range = format!("a token budget is an integer from 1 to {}", usize::MAX);
    let why = match Count::of(&n) {
        Count::Whole(u) => match usize::try_from(u) {
            Ok(budget) => return Ok(Some(budget)),
            Err(_) => "is out of range",
        },
        Count::Negative | Count::TooLarge => "is out of range",
        Count::NotInteger => "is not an integer (no fraction or exponent)",
    };
    Err(D::Error::custom(format!("budget {n} {why}: {range}")))
}

impl ApiRequest {
    /// The request value, its format, and the conversation read from it.
    fn read(&self) -> Result<(&Value, Format, Conversation), AppError> {
        let value = match (&self.request, &self.messages) {
            (Some(Unique(v)), None) | (None, Some(Unique(v))) => v,
            (Some(_), Some(_)) => {
                return Err(AppError::bad_request(
                    "invalid_request",
                    "give either \"request\" or \"messages\", not both",
                ));
            }
            (None, None) => {
                return Err(AppError::bad_request(
                    "invalid_request",
                    "missing \"request\" (a request body) or \"messages\" (a message array)",
                ));
            }
        };
        if self.messages.is_some() && !value.is_array() {
            return Err(AppError::BadRequest {
                code: "invalid_request",
                message: "\"messages\" must be an array".into(),
                location: Some("messages".into()),
            });
        }
        if !value.is_object() && !value.is_array() {
            return Err(AppError::BadRequest {
                code: "invalid_request",
                message: format!(
                    "\"request\" must be a request body (a JSON object) or a message array, \
                     found {}",
                    json_kind(value)
                ),
                location: Some("request".into()),
            });
        }
        let field = if self.messages.is_some() {
            "messages"
        } else {
            "request"
        };
        let format = match &self.format {
            Some(f) => f.parse::<Format>().map_err(|e| AppError::BadRequest {
                code: "unknown_format",
                message: e,
                location: Some("format".into()),
            })?,
            // A format that cannot be told is the whole value's fault: located at it.
            None => guess_format(value).map_err(|e| match AppError::from(e) {
                AppError::BadRequest {
                    code,
                    message,
                    location: None,
                } => AppError::BadRequest {
                    code,
                    message,
                    location: Some(field.into()),
                },
                other => other,
            })?,
        };
        let conversation = format.read(value)?;
        Ok((value, format, conversation))
    }
}

/// What a JSON value is, in words: `a number`, `a string`, `a boolean`, `null`.
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Runs `job` on the compaction pool; a panic there is a JSON 500 (`internal`, cause logged).
async fn on_pool<T, F, Fut>(state: &AppState, job: F) -> Result<T, AppError>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T, AppError>>,
{
    // The summary time budget starts when the compaction does, not while it waits for a worker.
    let lender = state.clone();
    match state
        .pool()
        .run(move || crate::llm::scope::with(lender.llm_scope(), job()))
        .await
    {
        Ok(result) => result,
        Err(e) => {
            state.metrics().panicked(&e);
            Err(AppError::Internal(e.to_string()))
        }
    }
}

/// The JSON answer of an API route, written on the pool.
fn json_answer(value: &Value) -> Result<Bytes, AppError> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(|e| AppError::Internal(format!("writing the answer: {e}")))
}

/// `bytes` as an `application/json` answer.
fn json_response(bytes: Bytes) -> Response {
    ([(CONTENT_TYPE, "application/json")], bytes).into_response()
}

/// `POST /v1/compact`: `{"request": <compacted body, same format>, "report": ...}`.
pub(crate) async fn compact(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let body = body?;
    // Whose originals: kept for the request's tenant (super::tenant).
    let tenant = super::tenant::of(&state, &headers);
    let st = state.clone();
    on_pool(&state, move || async move {
        let req: ApiRequest = parse_json(&body)?;
        if req.budget == Some(0) {
            return Err(AppError::BadRequest {
                code: "invalid_request",
                message: "a budget is the number of tokens the compacted request may hold \
                          (system prompt, tools and messages); it must be at least 1 (leave \
                          \"budget\" out to use the configured one)"
                    .into(),
                location: Some("budget".into()),
            });
        }
        let compactor = st.compactor(req.strategy.as_deref())?;
        let answer = compact_now(&st, &compactor, &req);
        json_answer(&crate::recall::scope::for_tenant(tenant, answer).await?)
    })
    .await
    .map(json_response)
}

async fn compact_now(
    state: &AppState,
    compactor: &crate::compactor::Compactor,
    req: &ApiRequest,
) -> Result<Value, AppError> {
    let (value, format, conversation) = req.read()?;
    let compacted = compactor
        .compact_with(
            &conversation,
            format,
            req.budget,
            req.instructions.as_deref(),
        )
        .await?;
    state.metrics().record(&compacted.report);
    if let (Some(store), Some(local)) = (state.store(), compactor.recall_store()) {
        let puts = store.recall_puts(
            local,
            crate::recall::scope::tenant(),
            &compacted.report.recall,
        );
        store.write_off_path(puts, None);
    }
    let request = match &compacted.conversation {
        Cow::Borrowed(_) => value.clone(),
        Cow::Owned(c) => format.write(c),
    };
    Ok(json!({"request": request, "report": compacted.report}))
}

/// `POST /v1/count_tokens`: `{"tokens", "by_role", "messages", "model_tokens"}`;
/// `model_tokens` is [`crate::Compactor::model_count`] of the request's own `model` (else
/// `[tokens] model`): the figure `/v1/compact` and the proxy budget with.
pub(crate) async fn count_tokens(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let body = body?;
    let st = state.clone();
    on_pool(&state, move || async move {
        let req: ApiRequest = parse_json(&body)?;
        let compactor = st.compactor(req.strategy.as_deref())?;
        let (_, _, conversation) = req.read()?;
        let mut answer = token_breakdown(compactor.counter(), &conversation);
        answer["model_tokens"] = json!(compactor.model_count(&conversation, None));
        json_answer(&answer)
    })
    .await
    .map(json_response)
}

/// The token count of a conversation: the total (system prompt, tools and messages), the
/// messages' tokens by role (the top-level system prompt under `system`), and the message count.
pub(crate) fn token_breakdown(counter: &dyn TokenCounter, conversation: &Conversation) -> Value {
    let mut by_role: Map<String, Value> = Map::new();
    let mut add = |role: &str, n: usize| {
        let entry = by_role.entry(role.to_string()).or_insert(json!(0));
        *entry = json!(entry.as_u64().unwrap_or(0) + n as u64);
    };
    if let Some(system) = &conversation.system {
        add("system", counter.count_text(&system.to_string()));
    }
    for m in &conversation.messages {
        add(m.role.as_str(), counter.count_message(m));
    }
    json!({
        "tokens": counter.count_conversation(conversation),
        "by_role": by_role,
        "messages": conversation.messages.len(),
    })
}

/// `POST /v1/validate`: `{"valid", "format", "violations": [{path, message, block, kind, text}]}`.
pub(crate) async fn validate(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let body = body?;
    on_pool(&state, move || async move {
        let req: ApiRequest = parse_json(&body)?;
        json_answer(&validate_now(&req)?)
    })
    .await
    .map(json_response)
}

fn validate_now(req: &ApiRequest) -> Result<Value, AppError> {
    let (_, format, conversation) = req.read()?;
    // The request's own fields first (they stand before the messages), then the history.
    let mut violations = guard::check_token_limits(&conversation, format);
    violations.extend(guard::validate(
        &conversation,
        format,
        ValidateOptions {
            allow_open_tail: !req.strict,
        },
    ));
    let located: Vec<Value> = violations
        .iter()
        .map(|v| {
            let mut j = serde_json::to_value(v).unwrap_or(Value::Null);
            if let Value::Object(o) = &mut j {
                o.insert("text".into(), Value::String(v.to_string()));
            }
            j
        })
        .collect();
    Ok(json!({
        "valid": violations.is_empty(),
        "format": format.as_str(),
        "violations": located,
    }))
}

/// `GET /healthz`.
pub(crate) async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

/// `GET /metrics`: Prometheus text exposition.
pub(crate) async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    for (preset, c) in state.compactors() {
        state
            .metrics()
            .memory(&preset, c.memory().bytes(), c.memory().max_bytes());
    }
    for (tokenizer, bytes, max) in state.token_cache_bytes() {
        state.metrics().token_cache(tokenizer.as_str(), bytes, max);
    }
    let replay = state.replay();
    state
        .metrics()
        .replay_cache(replay.bytes(), replay.max_bytes());
    let reads = state.reads();
    state.metrics().read_cache(reads.bytes(), reads.max_bytes());
    if let Some(recall) = state.default_compactor().recall_store() {
        state.metrics().recall(recall.stats());
    }
    if let Some(store) = state.store() {
        let bytes = store.bytes().await.ok();
        let max = state.settings().store.max_bytes;
        state
            .metrics()
            .store(store.is_up(), store.errors(), bytes, max);
        state
            .metrics()
            .store_refusals(store.over_budget_count(), store.oom());
    }
    let proxy = state.default_compactor();
    let ratios: Vec<(String, f64)> = proxy
        .learned_ratios()
        .into_iter()
        .map(|(model, ratio, _, _)| (model, ratio))
        .collect();
    let (used, max) = proxy.learned_ratio_bytes();
    state.metrics().token_ratios(&ratios, used, max);
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        state.metrics().render(),
    )
}
