//! Recall on a [`Compactor`]: its store and key, and the originals it gives back.

use super::Compactor;

impl Compactor {
    /// The original that recall id `id` names: the JSON of the cleared block, or the array of
    /// the dropped messages' JSON, byte-identical to the input's (see [`crate::recall`]).
    ///
    /// # Errors
    /// [`RecallError::Malformed`](crate::recall::RecallError::Malformed) for an id not of the
    /// form `rc_` + 32 hex digits, `Evicted` for one evicted by the `[recall] max_bytes`
    /// bound, `Unknown` for one never kept here, `Disabled` when recall is off.
    pub fn recall(&self, id: &str) -> Result<crate::recall::Recalled, crate::recall::RecallError> {
        self.recall_for(crate::recall::Tenant::NONE, id)
    }

    /// [`Compactor::recall`] of an original kept for `tenant` (the service's compactions are
    /// its requests' tenants', [`crate::recall::scope::for_tenant`]); another tenant's id is
    /// unknown.
    ///
    /// # Errors
    /// As [`Compactor::recall`].
    pub fn recall_for(
        &self,
        tenant: crate::recall::Tenant,
        id: &str,
    ) -> Result<crate::recall::Recalled, crate::recall::RecallError> {
        match &self.recall {
            Some(store) => store.get_for(tenant, id),
            None => Err(crate::recall::RecallError::Disabled),
        }
    }

    /// Runs `f` with recall ids made under this pipeline's key ([`crate::recall::scope`]).
    pub(super) async fn keyed<F: std::future::Future>(&self, f: F) -> F::Output {
        match &self.recall {
            Some(store) => crate::recall::scope::keyed(store.key(), f).await,
            None => f.await,
        }
    }
}

/// The recall store `[recall]` asks for, its ids keyed by `secret`, else by the library's
/// public key (the service replaces it: `AppState`).
pub(super) fn recall_of(
    r: &crate::config::RecallSettings,
    secret: Option<&str>,
) -> Option<crate::recall::RecallStore> {
    if !r.enabled {
        return None;
    }
    let key = match secret {
        Some(s) => crate::recall::RecallKey::from_secret(s.as_bytes()),
        None => crate::recall::RecallKey::public(),
    };
    Some(crate::recall::RecallStore::new(r.max_bytes, key))
}
