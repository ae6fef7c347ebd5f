//! The service: an HTTP API over the compactor and a drop-in compacting proxy.
//!
//! ```text
//! request -> trace -> panic boundary -> timeout -> body limit -> header limits (431)
//!         -> body::admit: a body read whole (bounded: time, gap, size, shared buffer) then
//!            one global concurrency place; or the place, then the body streamed (gap and
//!            minimum rate) -- held until the answer's body ends; not /healthz, /metrics
//!         -> auth -> route
//!   /v1/compact, /v1/count_tokens, /v1/validate     JSON in, JSON out (api.rs)
//!   GET /v1/recall/{id}                             a cleared or dropped original (recall.rs)
//!   POST /v1/messages, /v1/chat/completions,        compact the outbound copy, forward to the
//!   /v1/responses, /v1/messages/count_tokens        configured upstream, stream back (proxy.rs)
//!   /healthz, /metrics
//!   HEAD /, HEAD /api/hello, no provider header     a client's start-up probe: 200 here
//!   any other method or path                        forwarded as it came (passthrough.rs)
//! ```
//! Compaction runs on a bounded blocking pool (`pool`); a panic there becomes a JSON 500 on
//! the API routes and the original body forwarded on the proxy routes; a panic anywhere else
//! is a JSON 500 (`tower_http::catch_panic`). [`app`] builds the router from an [`AppState`],
//! so tests drive it without a port; [`serve`] binds it with the connection limits and
//! timeouts of [`listen`] and shuts down on ctrl-c / SIGTERM within a deadline. It says what
//! it does: a start-up line (`startup`), one line per proxied body (docs/service.md, "What it
//! says").

mod api;
pub(crate) mod body;
pub mod error;
mod gemini;
mod guarded;
pub mod listen;
pub(crate) mod metrics;
mod passthrough;
pub(crate) mod pool;
mod proxy;
pub(crate) mod reads;
mod recall;
pub(crate) mod replay;
mod shapes;
mod startup;
pub mod store;
mod tenant;
mod throttle;
mod unique;
mod upstream;
pub(crate) mod usage;

use crate::compactor::Compactor;
use crate::config::{ConfigError, Loader, Settings};
use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
pub use error::{ApiJson, AppError};
use metrics::Metrics;
use pool::Pool;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
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
    client: upstream::UpstreamClient,
    pool: Pool,
    limit: Arc<Semaphore>,
    /// Room for the request bodies being read whole (`server.body_buffer_bytes`, see [`body`]).
    body_buffer: Arc<Semaphore>,
    /// The shared store, when `[store] redis_url` is set.
    store: Option<Arc<store::SharedStore>>,
    /// The token count caches of the pipelines the state built, one per vocabulary, shared
    /// by every preset that counts with it (not the cache of a pipeline given to
    /// [`AppState::with_compactor`]); each bounded by `server.token_cache_bytes`.
    token_caches: Mutex<HashMap<crate::tokens::Tokenizer, Arc<TokenCache>>>,
    /// What the proxy sent for bodies it has seen byte for byte.
    replay: replay::ReplayCache,
    /// The last body of each agent session and its conversation.
    reads: reads::ReadCache,
    /// The rate limit of the proxy's WARN for a history that breaks a provider rule (one per
    /// rule a minute).
    throttle: throttle::Throttle,
    /// The shapes the rule table does not know, seen so far (one WARN each).
    shapes: shapes::Shapes,
}

/// The bytes of one token cache entry as [`crate::tokens::CachedCounter::with_max_bytes`]
/// estimates them (its `ENTRY_BYTES`).
const TOKEN_ENTRY_BYTES: u64 = 128;

/// The token count cache the service builds for its pipelines (`server.token_cache_bytes`).
type TokenCache = crate::tokens::CachedCounter<crate::tokens::TiktokenCounter>;

/// The vocabulary a pipeline counting with `t` uses for a model of the other one.
fn other_vocabulary(t: crate::tokens::Tokenizer) -> crate::tokens::Tokenizer {
    use crate::tokens::Tokenizer::{Cl100kBase, O200kBase};
    match t {
        O200kBase => Cl100kBase,
        Cl100kBase => O200kBase,
    }
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
        let bound = |t| {
            Arc::new(TokenCache::with_max_bytes(
                crate::tokens::TiktokenCounter::new(t),
                settings.server.token_cache_bytes,
            ))
        };
        let tokenizer = settings.tokens.tokenizer;
        let (cache, other) = (bound(tokenizer), bound(other_vocabulary(tokenizer)));
        let default = Compactor::from_config(settings.clone())?
            .with_memory_bytes(settings.server.memory_bytes)
            .with_counter(cache.clone())
            .with_other_counter(other.clone());
        let caches = vec![(tokenizer, cache), (other_vocabulary(tokenizer), other)];
        AppState::build(settings, loader, auth_token, default, caches)
    }

    /// A state whose configured preset is served by `default` (a pipeline built with
    /// [`Compactor::with_parts`], e.g. with a strategy of one's own); `loader` builds the
    /// other presets on demand.
    ///
    /// # Errors
    /// [`ConfigError`] when the metrics or the HTTP client cannot be built.
    pub fn with_compactor(
        settings: Settings,
        loader: Loader,
        auth_token: Option<String>,
        default: Compactor,
    ) -> Result<AppState, ConfigError> {
        AppState::build(settings, loader, auth_token, default, Vec::new())
    }

    fn build(
        settings: Settings,
        loader: Loader,
        auth_token: Option<String>,
        default: Compactor,
        token_caches: Vec<(crate::tokens::Tokenizer, Arc<TokenCache>)>,
    ) -> Result<AppState, ConfigError> {
        // Never the library's public key: without a configured secret, a key of this process
        // (replaced by the deployment's from Redis in `prepare`).
        if settings.recall.secret_env.is_none()
            && let Some(store) = default.recall_store()
        {
            match crate::recall::RecallKey::process() {
                Some(key) => store.set_key(key),
                None => {
                    return Err(ConfigError::Invalid {
                        key: "recall.secret_env".into(),
                        message: "no random recall key could be drawn: set a secret".into(),
                    });
                }
            }
        }
        let default = Arc::new(default);
        let store = store::SharedStore::from_settings(&settings.store)
            .map_err(|message| ConfigError::Invalid {
                key: "store.redis_url".into(),
                message,
            })?
            .map(Arc::new);
        let internal = |message: String| ConfigError::Invalid {
            key: "server".into(),
            message,
        };
        let metrics = Metrics::new().map_err(|e| internal(format!("metrics: {e}")))?;
        let client =
            upstream::client().map_err(|e| internal(format!("upstream HTTP client: {e}")))?;
        let mut presets = HashMap::new();
        presets.insert(settings.preset.clone(), default.clone());
        let pool = Pool::new(settings.server.compaction_workers);
        let settings_replay_bytes = settings.server.replay_cache_bytes;
        let reads = reads::ReadCache::with_max_bytes(settings.server.read_cache_bytes);
        let limit = Arc::new(Semaphore::new(
            settings
                .server
                .concurrency_limit
                .min(Semaphore::MAX_PERMITS),
        ));
        let body_buffer = body::buffer(&settings.server);
        Ok(AppState {
            inner: Arc::new(Inner {
                loader,
                settings,
                auth_token,
                default,
                presets: Mutex::new(presets),
                metrics,
                client,
                pool,
                limit,
                body_buffer,
                store,
                token_caches: Mutex::new(token_caches.into_iter().collect()),
                replay: replay::ReplayCache::with_max_bytes(settings_replay_bytes),
                reads,
                throttle: throttle::Throttle::new(Duration::from_secs(60)),
                shapes: shapes::Shapes::default(),
            }),
        })
    }

    /// The shared store, when one is configured.
    pub fn store(&self) -> Option<&Arc<store::SharedStore>> {
        self.inner.store.as_ref()
    }

    /// Whether `token` is the service token (compared in constant time).
    pub(crate) fn is_service_token(&self, token: &str) -> bool {
        self.inner
            .auth_token
            .as_ref()
            .is_some_and(|t| constant_time_eq(t.as_bytes(), token.as_bytes()))
    }

    /// Readies what needs the network before the service answers: with a shared store and no
    /// `[recall] secret_env`, the recall key becomes the deployment's secret kept in Redis
    /// (set by the first replica that starts, read by the others), so every replica makes and
    /// checks the same ids. When Redis cannot answer, the replica keeps its own key and says
    /// so (its ids are then its own: recall of them on another replica answers 404).
    pub async fn prepare(&self) {
        if self.settings().recall.secret_env.is_some() {
            return;
        }
        let (Some(store), Some(local)) = (
            self.store(),
            self.default_compactor().recall_store().cloned(),
        ) else {
            return;
        };
        match store.recall_secret().await {
            Some(secret) => local.set_key(crate::recall::RecallKey::from_secret(secret.as_bytes())),
            None => tracing::warn!(
                "recall: the shared secret could not be read from redis: this replica's recall ids are its own until restarted (set [recall] secret_env to not depend on it)"
            ),
        }
    }

    /// What one request lends the summarizer: the summary time budget from now
    /// (`config::ServerSettings::summary_budget`), the call counters of `/metrics`, and the shared
    /// summary cache when a store is configured.
    pub fn llm_scope(&self) -> crate::llm::scope::Scope {
        let budget = self.settings().server.summary_budget();
        crate::llm::scope::Scope {
            deadline: Some(tokio::time::Instant::now() + budget),
            observer: Some(Arc::new(self.metrics().clone())),
            cache: self
                .inner
                .store
                .clone()
                .map(|s| s as Arc<dyn crate::llm::scope::SummaryCache>),
        }
    }

    /// The estimated bytes of each token count cache the state built and its bound, by
    /// vocabulary: `(tokenizer, used, max)`.
    pub fn token_cache_bytes(&self) -> Vec<(crate::tokens::Tokenizer, u64, u64)> {
        let per = TOKEN_ENTRY_BYTES;
        let max = (self.settings().server.token_cache_bytes as u64 / per) * per;
        let mut out: Vec<_> = self
            .lock_token_caches()
            .iter()
            .map(|(t, cache)| (*t, cache.stats().entries as u64 * per, max))
            .collect();
        out.sort_by_key(|(t, _, _)| t.as_str());
        out
    }

    /// The token count cache of `tokenizer`, built on first use with the bound of
    /// `server.token_cache_bytes`.
    fn token_cache(&self, tokenizer: crate::tokens::Tokenizer) -> Arc<TokenCache> {
        let max = self.settings().server.token_cache_bytes;
        self.lock_token_caches()
            .entry(tokenizer)
            .or_insert_with(|| {
                Arc::new(TokenCache::with_max_bytes(
                    crate::tokens::TiktokenCounter::new(tokenizer),
                    max,
                ))
            })
            .clone()
    }

    fn lock_token_caches(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<crate::tokens::Tokenizer, Arc<TokenCache>>> {
        // A panic while holding the lock cannot leave the map half-written: keep going.
        self.inner
            .token_caches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The proxy's read cache (`server.read_cache_bytes`).
    pub fn reads(&self) -> &reads::ReadCache {
        &self.inner.reads
    }

    /// The shapes the rule table does not know, seen so far.
    pub(crate) fn shapes(&self) -> &shapes::Shapes {
        &self.inner.shapes
    }

    /// The rate limit of the proxy's WARN lines.
    pub(crate) fn throttle(&self) -> &throttle::Throttle {
        &self.inner.throttle
    }

    /// The proxy's replay cache (`server.replay_cache_bytes`).
    pub fn replay(&self) -> &replay::ReplayCache {
        &self.inner.replay
    }

    /// The settings in force.
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The bounded pool compactions run on.
    pub fn pool(&self) -> &Pool {
        &self.inner.pool
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
        let bytes = self.inner.settings.server.memory_bytes;
        // The token cache of its vocabulary, shared with the other presets and bounded by
        // `server.token_cache_bytes` like the default pipeline's.
        let cache = self.token_cache(settings.tokens.tokenizer);
        let other = self.token_cache(other_vocabulary(settings.tokens.tokenizer));
        // A preset that cannot run here (summary without `[llm]`) is the caller's choice
        // refused, named: not an internal error.
        let built = Compactor::from_config(settings).map_err(|e| match e {
            ConfigError::Invalid { .. } => {
                AppError::bad_request("strategy_unavailable", format!("strategy {name}: {e}"))
            }
            other => other.into(),
        })?;
        let mut built = built
            .with_memory_bytes(bytes)
            .with_counter(cache)
            .with_other_counter(other);
        // One recall store for every preset and the proxy: an id answers wherever it was made.
        if let Some(store) = self.inner.default.recall_store() {
            built = built.with_recall_store(store.clone());
        }
        let built = Arc::new(built);
        Ok(self
            .lock_presets()
            .entry(name.to_string())
            .or_insert(built)
            .clone())
    }

    /// Every pipeline built so far, by preset name.
    pub(crate) fn compactors(&self) -> Vec<(String, Arc<Compactor>)> {
        self.lock_presets()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn lock_presets(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Compactor>>> {
        // A panic while holding the lock cannot leave the map half-written: keep going.
        self.inner
            .presets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The router with every route and layer (trace outermost, then the panic boundary, timeout,
/// body limit, the header limits, the body bounds and the global concurrency limit of
/// `body`).
pub fn app(state: AppState) -> Router {
    let server = &state.settings().server;
    let timeout = Duration::from_secs(server.request_timeout_secs);
    let body_limit = server.body_limit_bytes;
    let api = |m: MethodRouter<AppState>| m.fallback(method_not_allowed);
    let proxy = |m: MethodRouter<AppState>| m.fallback(passthrough::forward);
    let protected = Router::new()
        .route("/v1/compact", api(post(api::compact)))
        .route("/v1/count_tokens", api(post(api::count_tokens)))
        .route("/v1/validate", api(post(api::validate)))
        .route("/metrics", api(get(api::metrics)))
        .route("/v1/recall/{id}", api(get(recall::recall)))
        // Near misses of the recall route (no id, a trailing or extra segment) are answered
        // here, never passed through: no upstream has such a route to give them.
        .route("/v1/recall", api(get(recall::no_id)))
        .route("/v1/recall/", api(get(recall::no_id)))
        .route("/v1/recall/{id}/", api(get(recall::no_id)))
        .route("/v1/recall/{id}/{*rest}", api(get(recall::no_id)))
        .route("/v1/recall//{*rest}", api(get(recall::no_id)))
        .route("/v1/messages", proxy(post(proxy::anthropic)))
        .route("/v1/messages/count_tokens", proxy(post(proxy::anthropic)))
        .route("/v1/chat/completions", proxy(post(proxy::openai_chat)))
        .route("/v1/responses", proxy(post(proxy::openai_responses)))
        .route("/v1beta/models/{action}", proxy(post(gemini::route)))
        .route("/v1/models/{action}", proxy(post(gemini::route)))
        .route("/v1alpha/models/{action}", proxy(post(gemini::route)))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/healthz", api(get(api::healthz)))
        .merge(protected)
        .fallback(passthrough::forward)
        .layer(middleware::from_fn_with_state(state.clone(), body::admit))
        .layer(middleware::from_fn_with_state(state.clone(), limit_headers))
        .with_state(state)
        .layer(
            ServiceBuilder::new()
                .layer(
                    TraceLayer::new_for_http()
                        .make_span_with(|req: &Request| {
                            // Method and path only: headers and query strings carry API
                            // keys; a recall id is a capability, never logged.
                            let path = req.uri().path();
                            let path = if path.starts_with("/v1/recall/") {
                                "/v1/recall/{id}"
                            } else {
                                path
                            };
                            tracing::info_span!("request", method = %req.method(), path = %path)
                        })
                        // A 5xx is mostly the upstream's own answer passed through: a WARN,
                        // not an ERROR line per request (our own faults log at ERROR).
                        .on_failure(
                            tower_http::trace::DefaultOnFailure::new().level(tracing::Level::WARN),
                        ),
                )
                .layer(CatchPanicLayer::custom(
                    |payload: Box<dyn std::any::Any + Send>| {
                        AppError::Internal(format!("panic: {}", pool::panic_text(&*payload)))
                            .into_response()
                    },
                ))
                .layer(HandleErrorLayer::new(|e: tower::BoxError| async move {
                    if e.is::<tower::timeout::error::Elapsed>() {
                        AppError::Timeout
                    } else {
                        AppError::Internal(e.to_string())
                    }
                }))
                .timeout(timeout)
                .layer(DefaultBodyLimit::max(body_limit)),
        )
}

/// A JSON 405 naming the method, for a route that exists with other methods.
async fn method_not_allowed(method: Method) -> AppError {
    AppError::MethodNotAllowed(method.to_string())
}

/// Refuses a request whose header names and values add up to more than
/// `server.max_header_bytes`, or that has more than `server.max_headers` fields, with a JSON
/// 431 (hyper's own limits, set at four times these in [`listen`], answer with an empty body).
async fn limit_headers(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let server = &state.settings().server;
    let headers = req.headers();
    if headers.len() > server.max_headers {
        return AppError::TooManyHeaders(headers.len()).into_response();
    }
    let size: usize = headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len())
        .sum();
    if size > server.max_header_bytes {
        return AppError::HeadersTooLarge(size).into_response();
    }
    next.run(req).await
}

/// The proxy routes take the token from `x-compactor-token` only: their `authorization` is the
/// provider's key.
fn is_proxy_route(path: &str) -> bool {
    matches!(
        path,
        "/v1/messages" | "/v1/chat/completions" | "/v1/responses" | "/v1/messages/count_tokens"
    ) || passthrough::is_gemini_path(path)
}

/// Whether the request carries the service token (always, when none is configured). On a
/// `proxy` request (the proxy and pass-through routes) only `x-compactor-token` counts.
fn authorized(state: &AppState, headers: &HeaderMap, proxy: bool) -> bool {
    let Some(expected) = &state.inner.auth_token else {
        return true;
    };
    let given = headers
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            if proxy {
                return None;
            }
            headers
                .get(AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(bearer_token)
        });
    given.is_some_and(|token| constant_time_eq(token.as_bytes(), expected.as_bytes()))
}

/// The token of an `authorization: Bearer TOKEN` value. The scheme is case-insensitive
/// (RFC 9110 11.1: `bearer`, `BEARER`), one or more spaces before the token.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches(' '))
        .filter(|t| !t.is_empty())
}

async fn require_token(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if authorized(&state, req.headers(), is_proxy_route(req.uri().path())) {
        next.run(req).await
    } else {
        AppError::Unauthorized.into_response()
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Binds `listen` and serves [`app`] until ctrl-c or SIGTERM, with the connection cap,
/// timeouts and shutdown deadline of `[server]` ([`listen::serve_on`]).
///
/// # Errors
/// The I/O error of binding or serving.
pub async fn serve(state: AppState, listen: std::net::SocketAddr) -> std::io::Result<()> {
    exposure(&state, listen)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    listen::raise_open_file_limit();
    let listener = tokio::net::TcpListener::bind(listen).await?;
    listen::serve_on(state, listener, shutdown_signal()).await
}

/// Whether the service may listen on `addr`: a non-loopback address without a token is
/// refused unless `server.allow_unauthenticated` (then it is logged at WARN).
///
/// # Errors
/// The reason, naming the address and the keys that allow it.
pub fn exposure(state: &AppState, addr: std::net::SocketAddr) -> Result<(), String> {
    if addr.ip().is_loopback() || state.inner.auth_token.is_some() {
        return Ok(());
    }
    if state.settings().server.allow_unauthenticated {
        tracing::warn!(%addr, "listening beyond loopback without a token (server.allow_unauthenticated): every route, recall and /metrics included, is open to whoever reaches it");
        return Ok(());
    }
    Err(format!(
        "refusing to listen on {addr} without a token: set server.auth_token_env (and its \
         variable), listen on loopback, or set server.allow_unauthenticated = true"
    ))
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
}
