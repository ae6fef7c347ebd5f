//! Whose compaction is running, and under which key its recall ids are made.
//!
//! ```text
//! service:   scope::for_tenant(tenant, compaction)          (proxy, API: from the request)
//! Compactor: scope::keyed(its store's key, pipeline)        (every compaction)
//!   -> strategies name ids made with key and tenant (wire.rs)
//!   -> the pipeline puts the originals in the store under (tenant, id) (store.rs)
//! ```
//! Like [`crate::llm::scope`], a tokio task-local, so the pipeline and the strategies between
//! the service and the store need not carry it. Without a scope (a strategy run on its own,
//! the library's own tests) the tenant is [`Tenant::NONE`] and the key the library's public
//! one ([`RecallKey::public`]).

use super::id::{RecallKey, Tenant};
use std::future::Future;

/// The recall context of one compaction.
#[derive(Clone, Debug)]
struct Scope {
    tenant: Tenant,
    key: Option<RecallKey>,
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// Runs `f` as a compaction of `tenant`: its originals are kept for that tenant only.
pub async fn for_tenant<F: Future>(tenant: Tenant, f: F) -> F::Output {
    let key = SCOPE.try_with(|s| s.key.clone()).ok().flatten();
    SCOPE.scope(Scope { tenant, key }, f).await
}

/// Runs `f` with ids made under `key` (the tenant of an enclosing scope is kept).
pub(crate) async fn keyed<F: Future>(key: RecallKey, f: F) -> F::Output {
    let tenant = tenant();
    SCOPE
        .scope(
            Scope {
                tenant,
                key: Some(key),
            },
            f,
        )
        .await
}

/// The tenant of the running compaction ([`Tenant::NONE`] outside a scope).
pub fn tenant() -> Tenant {
    SCOPE.try_with(|s| s.tenant).unwrap_or(Tenant::NONE)
}

/// The key of the running compaction, else the library's public one.
pub(crate) fn key() -> Option<RecallKey> {
    SCOPE
        .try_with(|s| s.key.clone())
        .ok()
        .flatten()
        .or_else(|| Some(RecallKey::public()))
}
