//! Errors as JSON: `{"error": {"code", "message", "location"?}}`, and the JSON extractor whose
//! rejection is such an error.

use crate::compactor::CompactError;
use crate::config::ConfigError;
use crate::format::FormatError;
use crate::guard::Violation;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// An error answered to the client. Internal causes are logged, never sent.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// 400: the request is malformed; `location` says where (`messages[3].content[1]`,
    /// `line 1 column 7`).
    #[error("{code}: {message}")]
    BadRequest {
        /// Machine-readable code (`invalid_json`, `invalid_request`, `unknown_format`).
        code: &'static str,
        /// What is wrong.
        message: String,
        /// Where, when known.
        location: Option<String>,
    },
    /// 400: the history breaks the provider's rules.
    #[error("invalid history")]
    InvalidHistory(Vec<Violation>),
    /// 401: the service token is missing or wrong.
    #[error("unauthorized")]
    Unauthorized,
    /// 404: no such route or strategy.
    #[error("{code}: {message}")]
    NotFound {
        /// `not_found` or `unknown_strategy`.
        code: &'static str,
        /// What was not found.
        message: String,
    },
    /// 405: the route exists, but not with this method (the method is named).
    #[error("method not allowed: {0}")]
    MethodNotAllowed(String),
    /// 408: the request took longer than `server.request_timeout_secs`.
    #[error("timeout")]
    Timeout,
    /// 408: the client's request body stalled or came too slowly (the bound is named).
    #[error("body timeout: {0}")]
    BodyTimeout(super::body::Stall),
    /// 413: the body is over `server.body_limit_bytes`.
    #[error("payload too large")]
    PayloadTooLarge,
    /// 431: the request's headers are over `server.max_header_bytes` (their size is named).
    #[error("request headers too large: {0} bytes")]
    HeadersTooLarge(usize),
    /// 431: the request has more header fields than `server.max_headers` (their count is
    /// named).
    #[error("too many request headers: {0}")]
    TooManyHeaders(usize),
    /// 501: a protocol upgrade (`Upgrade: websocket`) the service does not tunnel; the route
    /// is named.
    #[error("upgrade not supported on {0}")]
    UpgradeNotSupported(String),
    /// 502: the upstream could not be reached (the cause is logged).
    #[error("upstream unreachable: {0}")]
    Upstream(String),
    /// 500: a bug or a broken configuration (the cause is logged, not shown).
    #[error("internal: {0}")]
    Internal(String),
}

impl AppError {
    /// A 400 with a code, a message and an optional location.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> AppError {
        AppError::BadRequest {
            code,
            message: message.into(),
            location: None,
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::BadRequest { .. } | AppError::InvalidHistory(_) => StatusCode::BAD_REQUEST,
            AppError::Unauthorized => StatusCode::UNAUTHORIZED,
            AppError::NotFound { .. } => StatusCode::NOT_FOUND,
            AppError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            AppError::Timeout | AppError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            AppError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::HeadersTooLarge(_) | AppError::TooManyHeaders(_) => {
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
            }
            AppError::UpgradeNotSupported(_) => StatusCode::NOT_IMPLEMENTED,
            AppError::Upstream(_) => StatusCode::BAD_GATEWAY,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        let (code, message, location): (&str, String, Option<String>) = match self {
            AppError::BadRequest {
                code,
                message,
                location,
            } => (code, message.clone(), location.clone()),
            AppError::InvalidHistory(violations) => (
                "invalid_history",
                violations
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
                violations.first().map(|v| v.path.clone()),
            ),
            AppError::Unauthorized => (
                "unauthorized",
                "a valid service token is required (x-compactor-token or authorization: Bearer)"
                    .into(),
                None,
            ),
            AppError::NotFound { code, message } => (code, message.clone(), None),
            AppError::MethodNotAllowed(method) => (
                "method_not_allowed",
                format!("this route does not take {method}"),
                None,
            ),
            AppError::Timeout => (
                "timeout",
                "the request timed out (server.request_timeout_secs)".into(),
                None,
            ),
            AppError::BodyTimeout(stall) => ("body_timeout", stall.to_string(), None),
            AppError::PayloadTooLarge => (
                "payload_too_large",
                "the request body is over the limit (server.body_limit_bytes)".into(),
                None,
            ),
            AppError::HeadersTooLarge(n) => (
                "headers_too_large",
                format!(
                    "the request headers are {n} bytes, over the limit (server.max_header_bytes)"
                ),
                None,
            ),
            AppError::TooManyHeaders(n) => (
                "too_many_headers",
                format!("the request has {n} header fields, over the limit (server.max_headers)"),
                None,
            ),
            AppError::UpgradeNotSupported(route) => (
                "upgrade_not_supported",
                format!(
                    "{route}: the service does not tunnel protocol upgrades (Upgrade: websocket); \
                     connect to the provider directly for it"
                ),
                None,
            ),
            AppError::Upstream(_) => (
                "upstream_unreachable",
                "the upstream could not be reached".into(),
                None,
            ),
            AppError::Internal(_) => ("internal", "internal error".into(), None),
        };
        let mut error = json!({"code": code, "message": message});
        if let Some(location) = location {
            error["location"] = Value::String(location);
        }
        json!({ "error": error })
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        match &self {
            AppError::Internal(cause) => tracing::error!(%cause, "internal error"),
            AppError::Upstream(cause) => tracing::warn!(%cause, "upstream unreachable"),
            _ => {}
        }
        (self.status(), axum::Json(self.body())).into_response()
    }
}

impl From<FormatError> for AppError {
    fn from(e: FormatError) -> Self {
        match e {
            FormatError::Json { location, source } => AppError::BadRequest {
                code: "invalid_json",
                message: source.to_string(),
                location: Some(location),
            },
            FormatError::Shape { path, message } => AppError::BadRequest {
                code: "invalid_request",
                message,
                location: Some(path),
            },
            FormatError::Unrecognised(message) => AppError::bad_request("unknown_format", message),
        }
    }
}

impl From<CompactError> for AppError {
    fn from(e: CompactError) -> Self {
        match e {
            CompactError::InvalidInput(violations) => AppError::InvalidHistory(violations),
        }
    }
}

impl From<ConfigError> for AppError {
    fn from(e: ConfigError) -> Self {
        match e {
            ConfigError::PresetNotFound { name, .. } => AppError::NotFound {
                code: "unknown_strategy",
                message: format!("no strategy preset {name:?}"),
            },
            other => AppError::Internal(other.to_string()),
        }
    }
}

impl From<BytesRejection> for AppError {
    fn from(r: BytesRejection) -> Self {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            AppError::PayloadTooLarge
        } else {
            AppError::bad_request("unreadable_body", r.body_text())
        }
    }
}

/// A JSON body; rejections are [`AppError`]s (`invalid_json` with `line L column C`,
/// `invalid_request`, `payload_too_large`).
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await?;
        parse_json(&bytes).map(ApiJson)
    }
}

/// A JSON body read into `T`; errors as [`ApiJson`]'s (`invalid_json` with `line L column C`,
/// `invalid_request` with the offending field's path).
///
/// # Errors
/// [`AppError::BadRequest`].
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, AppError> {
    // Read straight from the bytes, not through a `Value` first: `serde_json::from_value`
    // hands a number to the struct's `Value` fields as an f64 or i64, and `-0` came back `0`.
    let not_json = |e: serde_json::Error| AppError::BadRequest {
        code: "invalid_json",
        message: format!("the body is not JSON: {e}"),
        location: Some(format!("line {} column {}", e.line(), e.column())),
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let read: Result<T, _> = serde_path_to_error::deserialize(&mut de);
    let value = read.map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.classify() != serde_json::error::Category::Data {
            return not_json(inner);
        }
        // The path of the offending field (`budget`), beside serde's message (which ends with
        // the line and column serde_json found it at).
        let mut message = inner.to_string();
        if message.starts_with("unknown field") {
            message.push_str(" (a whole request body goes under \"request\")");
        }
        AppError::BadRequest {
            code: "invalid_request",
            message,
            location: (path != ".").then_some(path),
        }
    })?;
    // Nothing but whitespace after the value.
    de.end().map_err(not_json)?;
    Ok(value)
}
