//! `[store]`: the compaction memory and the summary cache shared across replicas on Redis.
//!
//! ```text
//! proxy request over the trigger
//!   -> prefetch: the longest compaction of this history that another replica remembered and
//!      this one does not (index by the history's first message, then one GET) -> local memory
//!   -> compact (the pipeline finds it in its local memory: same prefix, byte for byte)
//!   -> publish: the output remembered for this history -> Redis (+ index)
//! summary tier -> llm scope cache: GET summary by request hash, else call and SET
//! recall ids   -> the originals a compaction cleared or dropped, set by (tenant, id) if
//!                 absent; a recall the local store cannot answer reads them back, checked
//!                 against the id (recall.rs)
//! writes       -> one script call per request (the remembered output, its index entry and
//!                 the recall originals), in a task of its own: the request is forwarded
//!                 without waiting; over the budget (timeout_ms): a WARN and
//!                 compactor_store_over_budget_total
//! Redis down   -> every operation fails fast for store.retry_secs; the local memory serves
//!                 alone; /metrics compactor_store_up 0, compactor_store_errors_total, a log line
//! ```
//! Without `redis_url` (the default) nothing here runs: the in-process memory is the store.
//! Keys are the pipeline's own content hashes (`PrefixHashes`) with the preset and the
//! format; values are the compacted request as the format writes it, so every replica reads
//! back exactly what the first one sent. Entries expire after `ttl_secs` without use, and the
//! least recently used go first when the total passes `max_bytes`.

pub mod recall;
pub mod redis;

pub use crate::config::store::StoreSettings;
use crate::conversation::Conversation;
use crate::format::Format;
use crate::guard::FailureRecord;
use crate::llm::scope::SummaryCache;
use crate::memory::{Memory, PrefixHashes};
use redis::{IndexAdd, Put};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Index entries kept per history root (its newest compactions by length).
const INDEX_KEEP: usize = 64;

/// The shared store of one service.
#[derive(Debug)]
pub struct SharedStore {
    redis: redis::Redis,
    max_entry_bytes: u64,
    /// Requests whose reads or writes ran past the budget, since the start.
    over_budget: AtomicU64,
}

impl SharedStore {
    /// The store `settings` name, or `None` without a `redis_url`.
    ///
    /// # Errors
    /// The message of a URL the redis crate cannot parse (never the URL itself).
    pub fn from_settings(settings: &StoreSettings) -> Result<Option<SharedStore>, String> {
        let Some(url) = settings.url() else {
            return Ok(None);
        };
        let redis = redis::Redis::open(url, settings.clone()).map_err(|e| e.to_string())?;
        Ok(Some(SharedStore {
            redis,
            max_entry_bytes: settings.max_entry_bytes,
            over_budget: AtomicU64::new(0),
        }))
    }

    /// Operations Redis refused for its `maxmemory`, since the start.
    pub fn oom(&self) -> u64 {
        self.redis.oom()
    }

    /// Requests whose store reads or writes ran past their budget (`timeout_ms`).
    pub fn over_budget_count(&self) -> u64 {
        self.over_budget.load(Ordering::Relaxed)
    }

    /// Counts and logs one request's `what` (reads, writes) cut by its budget.
    fn over_budget(&self, what: &str) {
        self.over_budget.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            budget_ms = self.redis.budget().as_millis() as u64,
            "shared store: {what} over the request's budget: given up"
        );
    }

    /// Sends one request's writes (`puts`, `index`) in one round trip from a task of its own,
    /// so the request goes on without waiting; the whole write gets the budget
    /// (`timeout_ms`), past which it is given up, counted and logged.
    pub fn write_off_path(self: &Arc<Self>, puts: Vec<Put>, index: Option<IndexAdd>) {
        if puts.is_empty() && index.is_none() {
            return;
        }
        let store = self.clone();
        tokio::spawn(async move {
            let write = store.redis.put_many(&puts, index.as_ref());
            if tokio::time::timeout(store.redis.budget(), write)
                .await
                .is_err()
            {
                store.over_budget("writes");
            }
        });
    }

    /// Whether Redis answered the last operation.
    pub fn is_up(&self) -> bool {
        self.redis.is_up()
    }

    /// Operations that failed since the start.
    pub fn errors(&self) -> u64 {
        self.redis.errors()
    }

    /// The bytes Redis holds for this service, as its eviction counts them.
    ///
    /// # Errors
    /// [`redis::StoreError`] when Redis cannot answer.
    pub async fn bytes(&self) -> Result<u64, redis::StoreError> {
        self.redis.bytes().await
    }

    fn entry_key(&self, preset: &str, format: Format, len: usize, hash: u64) -> String {
        self.redis
            .key(&format!("m:{preset}:{}:{len}:{hash:016x}", format.as_str()))
    }

    fn index_key(&self, preset: &str, format: Format, root: u64) -> String {
        self.redis
            .key(&format!("i:{preset}:{}:{root:016x}", format.as_str()))
    }

    /// Loads into `memory` the longest compaction of this history that Redis holds and
    /// `memory` does not (a longer prefix than any it remembers). Returns its length.
    /// Failures are logged and counted; the memory is then left as it was.
    pub async fn prefetch(
        &self,
        memory: &Memory,
        preset: &str,
        format: Format,
        hashes: &PrefixHashes,
    ) -> Option<usize> {
        let reads = self.prefetch_reads(memory, preset, format, hashes);
        match tokio::time::timeout(self.redis.budget(), reads).await {
            Ok(found) => found,
            Err(_) => {
                self.over_budget("reads");
                None
            }
        }
    }

    async fn prefetch_reads(
        &self,
        memory: &Memory,
        preset: &str,
        format: Format,
        hashes: &PrefixHashes,
    ) -> Option<usize> {
        let n = hashes.messages();
        let local = memory.longest(hashes);
        if local == Some(n) {
            return None;
        }
        let root = hashes.key(1)?;
        let from = local.map_or(1, |l| l + 1) as u64;
        let index = self.index_key(preset, format, root);
        let members = self.redis.index_range(&index, from, n as u64).await.ok()?;
        for member in members {
            let Some((len, hash)) = member.split_once(':').and_then(|(l, h)| {
                Some((l.parse::<usize>().ok()?, u64::from_str_radix(h, 16).ok()?))
            }) else {
                continue;
            };
            if hashes.key(len) != Some(hash) {
                continue;
            }
            let key = self.entry_key(preset, format, len, hash);
            let Ok(Some(bytes)) = self.redis.get(&key).await else {
                continue;
            };
            match decode(&bytes, format) {
                Some((output, degraded, failures)) => {
                    memory.remember_prefix(hashes, len, &output, degraded.as_deref(), &failures);
                    return Some(len);
                }
                None => tracing::warn!("shared store: a remembered entry that does not decode"),
            }
        }
        None
    }

    /// The write that shares the compaction `memory` remembers for the whole history hashed
    /// in `hashes` (`output`), with its degraded reason, and its index entry. `None` when the
    /// memory holds none, or when it is over `max_entry_bytes`.
    pub fn memory_put(
        &self,
        memory: &Memory,
        preset: &str,
        format: Format,
        hashes: &PrefixHashes,
        output: &Conversation,
    ) -> Option<(Put, IndexAdd)> {
        let n = hashes.messages();
        let (Some(degraded), Some(failures), Some(hash), Some(root)) = (
            memory.degraded_at(hashes, n),
            memory.failures_at(hashes, n),
            hashes.key(n),
            hashes.key(1),
        ) else {
            return None;
        };
        let failures: Vec<Value> = failures
            .iter()
            .map(|f| json!({"id": f.id, "message": f.message}))
            .collect();
        let value = json!({
            "format": format.as_str(),
            "degraded": degraded,
            "failures": failures,
            "request": format.write(output),
        })
        .to_string();
        if value.len() as u64 > self.max_entry_bytes {
            return None;
        }
        Some((
            Put {
                key: self.entry_key(preset, format, n, hash),
                value: value.into_bytes(),
                if_absent: false,
            },
            IndexAdd {
                index: self.index_key(preset, format, root),
                member: format!("{n}:{hash:016x}"),
                score: n as u64,
                keep: INDEX_KEEP,
            },
        ))
    }
}

/// A stored entry back as `(output, degraded, failure records)`; `None` for one of another
/// format or shape. An entry without `failures` (written before they were stored) has none, so
/// a continuation that dropped a failure is refused by the guard and compacted afresh.
fn decode(
    bytes: &[u8],
    format: Format,
) -> Option<(Conversation, Option<String>, Vec<FailureRecord>)> {
    let value: Value = serde_json::from_slice(bytes).ok()?;
    if value.get("format")?.as_str()? != format.as_str() {
        return None;
    }
    let degraded = value
        .get("degraded")
        .and_then(Value::as_str)
        .map(str::to_string);
    let failures = match value.get("failures") {
        None => Vec::new(),
        Some(list) => list
            .as_array()?
            .iter()
            .map(|f| {
                Some(FailureRecord {
                    id: f.get("id")?.as_str()?.to_string(),
                    message: usize::try_from(f.get("message")?.as_u64()?).ok()?,
                })
            })
            .collect::<Option<Vec<_>>>()?,
    };
    let output = format.read(value.get("request")?).ok()?;
    Some((output, degraded, failures))
}

#[async_trait::async_trait]
impl SummaryCache for SharedStore {
    async fn get(&self, key: u128) -> Option<String> {
        let bytes = self
            .redis
            .get(&self.redis.key(&format!("s:{key:032x}")))
            .await
            .ok()??;
        String::from_utf8(bytes).ok()
    }

    async fn put(&self, key: u128, text: &str) {
        let _ = self
            .redis
            .put(&self.redis.key(&format!("s:{key:032x}")), text.as_bytes())
            .await;
    }
}
