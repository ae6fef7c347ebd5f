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
    /// 410: what was asked for was kept and is gone (a recall id evicted from the recall
    /// store).
    #[error("{code}: {message}")]
    Gone {
        /// `recall_evicted`.
        code: &'static str,
        /// What is gone.
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
            AppError::Gone { .. } => StatusCode::GONE,
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
            AppError::NotFound { code, message } | AppError::Gone { code, message } => {
                (code, message.clone(), None)
            }
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
/// A UTF-8 byte-order mark before the body is skipped. Beyond serde's own words: nesting past
/// [`MAX_DEPTH`] levels, an unpaired UTF-16 surrogate escape (`"\ud800"`) and a number past a
/// 64-bit float in an integer field are `invalid_request` at the JSON path where they stand (they are JSON by RFC 8259's grammar, but not a body this service reads).
///
/// # Errors
/// [`AppError::BadRequest`].
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, AppError> {
    // A byte-order mark (editors on Windows write one) is read past, as the CLI does: RFC 8259
    // (8.1) lets a parser ignore it. Lines and columns count from after it.
    let bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
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
        let location = (path != ".").then_some(path);
        if inner.classify() != serde_json::error::Category::Data {
            return match Unreadable::of(&inner) {
                Some(why) => AppError::BadRequest {
                    code: "invalid_request",
                    message: format!("{why}, at line {} column {}", inner.line(), inner.column()),
                    location,
                },
                None => not_json(inner),
            };
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
            location,
        }
    })?;
    // Nothing but whitespace after the value.
    de.end().map_err(not_json)?;
    Ok(value)
}

/// A UTF-8 byte-order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// How deep arrays and objects may nest in a body: serde_json's recursion limit (128) counts
/// the level it refuses, so 127 levels are read.
pub const MAX_DEPTH: usize = 127;

/// A syntax error of serde_json that is JSON all the same (RFC 8259's grammar allows it), but
/// not a body this service can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unreadable {
    /// Arrays and objects nested past [`MAX_DEPTH`].
    TooDeep,
    /// A `\uD800`-`\uDFFF` escape without its other half: no Unicode text.
    UnpairedSurrogate,
    /// A number past a 64-bit float in a field that takes a smaller one (an integer field).
    NumberOutOfRange,
}

impl Unreadable {
    /// Which of them `e` is. serde_json tells its error codes only in their display text
    /// (`recursion limit exceeded at line 1 column 129`), so the text's start is matched; the
    /// tests of every case fail if serde_json words them otherwise.
    fn of(e: &serde_json::Error) -> Option<Unreadable> {
        let text = e.to_string();
        [
            ("recursion limit exceeded", Unreadable::TooDeep),
            // A high surrogate followed by no `\u` escape.
            (
                "unexpected end of hex escape",
                Unreadable::UnpairedSurrogate,
            ),
            // A low surrogate alone, or a high one followed by an escape that is no low one.
            (
                "lone leading surrogate in hex escape",
                Unreadable::UnpairedSurrogate,
            ),
            ("number out of range", Unreadable::NumberOutOfRange),
        ]
        .into_iter()
        .find(|(start, _)| text.starts_with(start))
        .map(|(_, kind)| kind)
    }
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::TooDeep => write!(
                f,
                "the body nests arrays and objects deeper than {MAX_DEPTH} levels, the most \
                 this service reads"
            ),
            Unreadable::UnpairedSurrogate => f.write_str(
                "the string holds an unpaired UTF-16 surrogate escape (\\uD800 to \\uDFFF \
                 without its other half), which is no Unicode text",
            ),
            Unreadable::NumberOutOfRange => f.write_str(
                "the number is past the range of a 64-bit float, far more than this field \
                 takes",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        #[serde(default)]
        request: Option<Value>,
        #[serde(default)]
        #[allow(dead_code)] // read only to be refused
        limit: Option<u32>,
    }

    /// The code, message and location of `parse_json`'s error for `body`.
    fn refused(body: &[u8]) -> (&'static str, String, Option<String>) {
        match parse_json::<Body>(body) {
            Err(AppError::BadRequest {
                code,
                message,
                location,
            }) => (code, message, location),
            other => panic!("{}: {other:?}", String::from_utf8_lossy(body)),
        }
    }

    /// `{"request": ` and `levels - 1` arrays inside each other: `levels` levels in all.
    fn nested(levels: usize) -> String {
        let inner = levels - 1;
        format!(
            "{{\"request\": {}{}}}",
            "[".repeat(inner),
            "]".repeat(inner)
        )
    }

    #[test]
    fn nesting_up_to_the_limit_is_read_and_past_it_is_named_with_its_path() {
        assert!(parse_json::<Body>(nested(MAX_DEPTH).as_bytes()).is_ok());
        let (code, message, location) = refused(nested(MAX_DEPTH + 1).as_bytes());
        assert_eq!(code, "invalid_request");
        assert_eq!(
            message,
            "the body nests arrays and objects deeper than 127 levels, the most this service \
             reads, at line 1 column 139"
        );
        // `request` and then index 0 of every array down to the refused one.
        let path = location.unwrap();
        assert!(path.starts_with("request[0][0]"), "{path}");
        assert_eq!(path.matches("[0]").count(), MAX_DEPTH - 1);
    }

    #[test]
    fn an_unpaired_surrogate_escape_is_named_with_its_path_line_and_column() {
        for escape in [r"\ud800", r"\udc00", r"\ud800\u0041", r"\ud800x"] {
            let body = format!(r#"{{"request": {{"text": "ab{escape}"}}}}"#);
            let (code, message, location) = refused(body.as_bytes());
            assert_eq!(code, "invalid_request", "{escape}");
            assert_eq!(location.as_deref(), Some("request.text"), "{escape}");
            assert!(
                message.starts_with(
                    "the string holds an unpaired UTF-16 surrogate escape (\\uD800 to \\uDFFF \
                     without its other half), which is no Unicode text, at line 1 column "
                ),
                "{escape}: {message}"
            );
        }
        // A pair is one character.
        let read: Body = parse_json(br#"{"request": "\ud83d\ude00"}"#).unwrap();
        assert_eq!(read.request, Some(json!("\u{1f600}")));
    }

    #[test]
    fn a_byte_order_mark_before_the_body_is_read_past() {
        let read: Body = parse_json(b"\xEF\xBB\xBF{\"request\": 1}").unwrap();
        assert_eq!(read.request, Some(json!(1)));
        // Only at the start: one inside is no JSON.
        let (code, _, location) = refused(b"{\"request\": \xEF\xBB\xBF1}");
        assert_eq!(code, "invalid_json");
        assert_eq!(location.as_deref(), Some("line 1 column 13"));
    }

    #[test]
    fn a_number_past_a_float_in_an_integer_field_is_named_with_the_field() {
        let (code, message, location) = refused(br#"{"limit": 1e400}"#);
        assert_eq!(code, "invalid_request");
        assert_eq!(location.as_deref(), Some("limit"));
        assert_eq!(
            message,
            "the number is past the range of a 64-bit float, far more than this field takes, at \
             line 1 column 15"
        );
        // Inside a value any number is kept, as written.
        let read: Body = parse_json(br#"{"request": [1e400, -0]}"#).unwrap();
        assert_eq!(read.request.unwrap().to_string(), "[1e+400,-0]");
    }

    #[test]
    fn text_that_is_no_json_stays_invalid_json_with_line_and_column() {
        let (code, message, location) = refused(b"{\"request\": [1,}");
        assert_eq!(code, "invalid_json");
        assert!(message.starts_with("the body is not JSON: "), "{message}");
        assert_eq!(location.as_deref(), Some("line 1 column 16"));
    }
}
