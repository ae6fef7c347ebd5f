//! The service: an HTTP API over the compactor and a drop-in compacting proxy.
//!
//! ```text
//! request -> trace -> timeout -> body limit -> concurrency limit -> auth -> route
//!   /v1/compact, /v1/count_tokens, /v1/validate     JSON in, JSON out (api.rs)
//!   /v1/messages, /v1/chat/completions,             compact the outbound copy, forward to the
//!   /v1/responses                                   configured upstream, stream back (proxy.rs)
//!   /healthz, /metrics
//! ```
//! [`app`] builds the router from an [`AppState`], so tests drive it without a port; [`serve`]
//! binds it and shuts down gracefully on ctrl-c / SIGTERM.

mod api;
pub mod config;
pub mod error;
pub mod metrics;
mod proxy;
pub mod usage;

use crate::compactor::Compactor;
use crate::config::{ConfigError, Loader, Settings};
use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
pub use error::{ApiJson, AppError};
use metrics::Metrics;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower::ServiceBuilder;
use tower_http::trace::TraceLayer;

/// The header carrying the service token (on every route but `/healthz`).
pub const TOKEN_HEADER: &str = "x-compactor-token";

/// Shared state: settings, one [`Compactor`] per preset (built on first use and kept so its
/// caches stay warm), the prefix memory of the proxy, metrics and the upstream HTTP client.
/// Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    loader: Loader,
    settings: Settings,
    auth_token: Option<String>,
    default: Arc<Compactor>,
    presets: Mutex<HashMap<String, Arc<Compactor>>>,
    metrics: Metrics,
    client: reqwest::Client,
}

impl AppState {
    /// Loads the settings with `loader` and reads the token from `server.auth_token_env`.
    ///
    /// # Errors
    /// [`ConfigError`] for bad settings, a missing token variable, or a client that cannot be built.
    pub fn new(loader: Loader) -> Result<AppState, ConfigError> {
        let settings = loader.load()?;
        let auth_token = match &settings.server.auth_token_env {
            None => None,
            Some(var) => match std::env::var(var) {
                Ok(token) if !token.is_empty() => Some(token),
                _ => {
                    return Err(ConfigError::Invalid {
                        key: "server.auth_token_env".into(),
                        message: format!("the environment variable {var} is not set or empty"),
                    });
                }
            },
        };
        AppState::from_parts(settings, loader, auth_token)
    }

    /// A state from settings already loaded; `loader` builds the other presets on demand.
    ///
    /// # Errors
    /// [`ConfigError`] when the default pipeline or the HTTP client cannot be built.
    pub fn from_parts(
        settings: Settings,
        loader: Loader,
        auth_token: Option<String>,
    ) -> Result<AppState, ConfigError> {
        let default = Arc::new(Compactor::from_config(settings.clone())?);
        let internal = |message: String| ConfigError::Invalid {
            key: "server".into(),
            message,
        };
        let metrics = Metrics::new().map_err(|e| internal(format!("metrics: {e}")))?;
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| internal(format!("HTTP client: {e}")))?;
        let mut presets = HashMap::new();
        presets.insert(settings.preset.clone(), default.clone());
        Ok(AppState {
            inner: Arc::new(Inner {
                loader,
                settings,
                auth_token,
                default,
                presets: Mutex::new(presets),
                metrics,
                client,
            }),
        })
    }

    /// The settings in force.
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The compactor of the configured preset (the proxy's policy).
    pub fn default_compactor(&self) -> Arc<Compactor> {
        self.inner.default.clone()
    }

    /// The compactor of preset `name` (`None`: the configured one), built on first use.
    ///
    /// # Errors
    /// [`AppError::NotFound`] (`unknown_strategy`) for a name that is no preset; preset names
    /// are plain names, never paths.
    pub fn compactor(&self, name: Option<&str>) -> Result<Arc<Compactor>, AppError> {
        let Some(name) = name else {
            return Ok(self.default_compactor());
        };
        let unknown = || AppError::NotFound {
            code: "unknown_strategy",
            message: format!("no strategy preset {name:?}"),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(unknown());
        }
        if let Some(c) = self.lock_presets().get(name) {
            return Ok(c.clone());
        }
        let settings = Loader {
            preset: Some(name.to_string()),
            ..self.inner.loader.clone()
        }
        .load()?;
        let built = Arc::new(Compactor::from_config(settings)?);
        Ok(self
            .lock_presets()
            .entry(name.to_string())
            .or_insert(built)
            .clone())
    }

    fn lock_presets(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Compactor>>> {
        // A panic while holding the lock cannot leave the map half-written: keep going.
        self.inner
            .presets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The router with every route and layer (trace outermost, then timeout, body limit,
/// concurrency limit).
pub fn app(state: AppState) -> Router {
    let server = &state.settings().server;
    let timeout = Duration::from_secs(server.request_timeout_secs);
    let body_limit = server.body_limit_bytes;
    let concurrency = server.concurrency_limit;
    let protected = Router::new()
        .route("/v1/compact", post(api::compact))
        .route("/v1/count_tokens", post(api::count_tokens))
        .route("/v1/validate", post(api::validate))
        .route("/v1/messages", post(proxy::anthropic))
        .route("/v1/chat/completions", post(proxy::openai_chat))
        .route("/v1/responses", post(proxy::openai_responses))
        .route("/metrics", get(api::metrics))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/healthz", get(api::healthz))
        .merge(protected)
        .fallback(not_found)
        .with_state(state)
        .layer(
            ServiceBuilder::new()
                .layer(TraceLayer::new_for_http().make_span_with(|req: &Request| {
                    // Method and path only: headers carry API keys.
                    tracing::info_span!("request", method = %req.method(), path = %req.uri().path())
                }))
                .layer(HandleErrorLayer::new(|e: tower::BoxError| async move {
                    if e.is::<tower::timeout::error::Elapsed>() {
                        AppError::Timeout
                    } else {
                        AppError::Internal(e.to_string())
                    }
                }))
                .timeout(timeout)
                .layer(DefaultBodyLimit::max(body_limit))
                .concurrency_limit(concurrency),
        )
}

async fn not_found() -> AppError {
    AppError::NotFound {
        code: "not_found",
        message: "no such route".into(),
    }
}

/// The proxy routes take the token from `x-compactor-token` only: their `authorization` is the
/// provider's key.
fn is_proxy_route(path: &str) -> bool {
    matches!(
        path,
        "/v1/messages" | "/v1/chat/completions" | "/v1/responses"
    )
}

async fn require_token(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(expected) = &state.inner.auth_token else {
        return next.run(req).await;
    };
    let headers = req.headers();
    let given = headers
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            if is_proxy_route(req.uri().path()) {
                return None;
            }
            headers
                .get(AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
        });
    match given {
        Some(token) if constant_time_eq(token.as_bytes(), expected.as_bytes()) => {
            next.run(req).await
        }
        _ => AppError::Unauthorized.into_response(),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Binds `listen` and serves [`app`] until ctrl-c or SIGTERM, letting requests in flight finish.
///
/// # Errors
/// The I/O error of binding or serving.
pub async fn serve(state: AppState, listen: std::net::SocketAddr) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    tracing::info!(addr = %listener.local_addr()?, "compactor serve: listening");
    axum::serve(listener, app(state))
        .with_graceful_shutdown(shutdown_signal())
        .await
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing requests in flight");
}
