//! The bounded pool that compaction runs on, off the async worker threads.
//!
//! ```text
//! handler -> acquire one of `server.compaction_workers` permits (waits when all are taken)
//!         -> tokio blocking thread: block_on(the compaction, LLM calls included)
//!         -> Ok(value) | Err(Panicked)   a panic is caught here and becomes a value
//! ```
//! Compaction of a 20k-message history is seconds of CPU; on the async workers it would stall
//! `/healthz` and every pass-through stream. The permits bound how many blocking threads the
//! compactions hold at once, whatever tokio's own blocking-pool ceiling is.

use std::future::Future;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Why a job gave no value.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The job panicked; the message is the panic payload when it is a string.
    #[error("the compaction panicked: {0}")]
    Panicked(String),
    /// The runtime is shutting down and refused the job.
    #[error("the compaction pool is closed")]
    Closed,
}

/// A semaphore-bounded front to tokio's blocking pool. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Pool {
    permits: Arc<Semaphore>,
    size: usize,
}

impl Pool {
    /// A pool running at most `size` jobs at once (`size` >= 1, checked by the config).
    pub fn new(size: usize) -> Pool {
        Pool {
            permits: Arc::new(Semaphore::new(size.max(1))),
            size: size.max(1),
        }
    }

    /// Jobs running now (permits taken).
    pub fn busy(&self) -> usize {
        self.size - self.permits.available_permits()
    }

    /// The configured number of workers.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Runs the future that `make` builds on a blocking thread and returns its output.
    ///
    /// # Errors
    /// [`PoolError::Panicked`] when the job panicked (the panic does not reach the caller),
    /// [`PoolError::Closed`] when the runtime refused it.
    pub async fn run<T, F, Fut>(&self, make: F) -> Result<T, PoolError>
    where
        T: Send + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T>,
    {
        let _permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| PoolError::Closed)?;
        let handle = tokio::runtime::Handle::current();
        let joined = tokio::task::spawn_blocking(move || handle.block_on(make())).await;
        match joined {
            Ok(value) => Ok(value),
            Err(e) if e.is_panic() => Err(PoolError::Panicked(panic_text(&*e.into_panic()))),
            Err(_) => Err(PoolError::Closed),
        }
    }
}

/// The text of a panic payload (`panic!("...")` gives a `&str` or a `String`).
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-text panic payload".to_string()
    }
}
