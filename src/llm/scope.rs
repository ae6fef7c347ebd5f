//! What one request lends the summarizer while it compacts: a deadline, a place to count
//! calls, and a shared summary cache.
//!
//! ```text
//! service: scope::with(Scope { deadline, observer, cache }, compaction)
//!            -> summary strategy -> Summarizer::complete      (any client of llm::from_config)
//!                 cache hit?           -> the cached text, no call
//!                 else until deadline  -> attempts (each counted by the observer)
//!                 deadline passed      -> LlmError::Budget: the strategy falls back to truncate
//! ```
//! The scope is a tokio task-local, so the strategies and the pipeline between the service
//! and the client need not carry it: without a scope (the library, the CLI) there is no
//! deadline but the per-attempt timeout, nothing is counted and nothing shared.

use std::future::Future;
use std::sync::Arc;
use tokio::time::Instant;

/// Counts what the summarizer does (the service's `/metrics` implements it).
pub trait CallObserver: Send + Sync {
    /// One HTTP attempt was sent.
    fn sent(&self);
    /// One HTTP attempt failed (transport, timeout, error status, an answer over the cap).
    fn failed(&self);
    /// One attempt was refused by the open circuit breaker, without a call.
    fn refused(&self);
}

/// A summary cache shared beyond this process (the service's Redis store implements it).
/// Keys are 128-bit hashes of the model, the whole prompt and the answer limit
/// ([`request_key`](super::request_key)); values are the model's text.
#[async_trait::async_trait]
pub trait SummaryCache: Send + Sync {
    /// The cached text of `key`, if any (a store that cannot answer answers `None`).
    async fn get(&self, key: u128) -> Option<String>;
    /// Caches `text` under `key` (best effort: a store that cannot take it drops it).
    async fn put(&self, key: u128, text: &str);
}

/// One request's loan to the summarizer (see the module docs). `Default`: nothing.
#[derive(Clone, Default)]
pub struct Scope {
    /// When the summary tier must give up, so that the fallback still fits in the request's
    /// own time (`None`: only the per-attempt timeout).
    pub deadline: Option<Instant>,
    /// Where calls are counted.
    pub observer: Option<Arc<dyn CallObserver>>,
    /// A summary cache shared with other replicas.
    pub cache: Option<Arc<dyn SummaryCache>>,
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// Runs `f` with `scope` lent to every summarizer call made inside it (on this task).
pub async fn with<F: Future>(scope: Scope, f: F) -> F::Output {
    SCOPE.scope(scope, f).await
}

/// The scope of the running task, or an empty one.
pub(crate) fn current() -> Scope {
    SCOPE.try_with(Clone::clone).unwrap_or_default()
}
