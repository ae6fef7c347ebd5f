//! The Redis side of the shared store: one multiplexed connection, bounded by time, with LRU
//! eviction by bytes done in Lua next to the data.
//!
//! ```text
//! put(key, value)  SET key value EX ttl; sizes[key] = len; lru[key] = ++seq; bytes += len - old
//!                  then evict the least recently used until bytes <= max_bytes
//! get(key)         GET key; on a hit: EXPIRE key ttl; lru[key] = ++seq  (TTL: "unused for")
//! any failure      -> down: no call for retry_secs, then one reconnect attempt
//! ```
//! All keys carry the hash tag `{PREFIX}`, so on a Redis Cluster they sit in one slot and the
//! scripts stay legal.

use super::StoreSettings;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Script};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// Why a store operation gave no answer (logged; the caller goes on with its local store).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Redis answered with an error, or the connection failed.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// No answer within `store.timeout_ms`.
    #[error("redis: no answer within {0:?}")]
    Timeout(Duration),
    /// Redis failed recently; it is not tried again before `store.retry_secs`.
    #[error("redis is down (retrying after {0:?})")]
    Down(Duration),
}

/// Stores `ARGV[1]` under `KEYS[1]` for `ARGV[2]` seconds and evicts the least recently used
/// entries while the total is over `ARGV[3]` bytes. `KEYS[2]`: the LRU sorted set (scored by
/// `KEYS[5]`, a use counter, so order is exact even within one millisecond), `KEYS[3]`: the
/// sizes hash, `KEYS[4]`: the byte total. An entry that expired is still counted until the
/// eviction reaches it: unused for the whole TTL, it is among the least recently used.
/// Returns the total.
const PUT: &str = r"
local key, lru, sizes, total, seq = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local value, ttl, max = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local function evict(k)
  local size = tonumber(redis.call('HGET', sizes, k) or '0')
  redis.call('DEL', k)
  redis.call('HDEL', sizes, k)
  redis.call('ZREM', lru, k)
  return redis.call('DECRBY', total, size)
end
local old = tonumber(redis.call('HGET', sizes, key) or '0')
redis.call('SET', key, value, 'EX', ttl)
redis.call('HSET', sizes, key, #value)
redis.call('ZADD', lru, redis.call('INCR', seq), key)
local bytes = redis.call('INCRBY', total, #value - old)
while bytes > max do
  local oldest = redis.call('ZRANGE', lru, 0, 0)
  if #oldest == 0 then break end
  bytes = evict(oldest[1])
end
return bytes
";

/// `GET KEYS[1]`; on a hit its TTL is renewed (`ARGV[1]` seconds) and it becomes the most
/// recently used in `KEYS[2]` (scored by the counter `KEYS[3]`).
const GET: &str = r"
local v = redis.call('GET', KEYS[1])
if v then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[2], 'XX', redis.call('INCR', KEYS[3]), KEYS[1])
end
return v
";

/// Stores several values at once, in one round trip, and evicts by bytes as [`PUT`] does.
/// `KEYS[1..4]`: the LRU set, the sizes hash, the byte total, the use counter; `KEYS[4 + i]`
/// for `i` in `1..=ARGV[3]`: the values' keys, each with `ARGV[2 + 2i]` = `set` (replace) or
/// `nx` (only when absent: a recall original keeps its first value) and `ARGV[3 + 2i]` = the
/// value; `ARGV[1]` the TTL, `ARGV[2]` the byte bound. One more key after the values: an index
/// sorted set, given `ARGV[4 + 2n]` (score), `ARGV[5 + 2n]` (member) and `ARGV[6 + 2n]` (the
/// last rank to trim), with the TTL. Returns the total.
const PUT_MANY: &str = r"
local lru, sizes, total, seq = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ttl, max, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local bytes = tonumber(redis.call('GET', total) or '0')
for i = 1, n do
  local key, mode, value = KEYS[4 + i], ARGV[2 + 2 * i], ARGV[3 + 2 * i]
  if mode == 'set' or redis.call('EXISTS', key) == 0 then
    local old = tonumber(redis.call('HGET', sizes, key) or '0')
    redis.call('SET', key, value, 'EX', ttl)
    redis.call('HSET', sizes, key, #value)
    redis.call('ZADD', lru, redis.call('INCR', seq), key)
    bytes = redis.call('INCRBY', total, #value - old)
  end
end
if #KEYS > 4 + n then
  local index, base = KEYS[5 + n], 3 + 2 * n
  redis.call('ZADD', index, ARGV[base + 1], ARGV[base + 2])
  redis.call('ZREMRANGEBYRANK', index, 0, tonumber(ARGV[base + 3]))
  redis.call('EXPIRE', index, ttl)
end
while bytes > max do
  local oldest = redis.call('ZRANGE', lru, 0, 0)
  if #oldest == 0 then break end
  local k = oldest[1]
  local size = tonumber(redis.call('HGET', sizes, k) or '0')
  redis.call('DEL', k)
  redis.call('HDEL', sizes, k)
  redis.call('ZREM', lru, k)
  bytes = redis.call('DECRBY', total, size)
end
return bytes
";

/// One value of a batch written by [`Redis::put_many`].
#[derive(Debug, Clone)]
pub struct Put {
    /// The full key.
    pub key: String,
    /// The value.
    pub value: Vec<u8>,
    /// Only when the key is absent (a recall original keeps its first value).
    pub if_absent: bool,
}

/// An index entry added with a batch ([`Redis::put_many`]).
#[derive(Debug, Clone)]
pub struct IndexAdd {
    /// The full key of the sorted set.
    pub index: String,
    /// The member.
    pub member: String,
    /// Its score.
    pub score: u64,
    /// How many of the highest scores are kept.
    pub keep: usize,
}

/// A Redis connection that knows when it is down.
pub struct Redis {
    client: Client,
    settings: StoreSettings,
    conn: Mutex<Conn>,
    put: Script,
    put_many: Script,
    get: Script,
    up: AtomicBool,
    errors: AtomicU64,
    /// Operations Redis refused for its `maxmemory` (OOM answers), since the start.
    oom: AtomicU64,
    /// When the last OOM was logged (one WARN per `retry_secs`).
    oom_logged: std::sync::Mutex<Option<Instant>>,
}

enum Conn {
    Ready(MultiplexedConnection),
    /// Failed at this instant; no attempt before `retry_secs` have passed.
    Down(Instant),
    /// Never tried.
    Fresh,
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password: never printed.
        f.debug_struct("Redis")
            .field("up", &self.is_up())
            .field("errors", &self.errors())
            .finish_non_exhaustive()
    }
}

impl Redis {
    /// A store on `settings.redis_url` (not connected until first used).
    ///
    /// # Errors
    /// The redis crate's error for a URL it cannot parse.
    pub fn open(url: &str, settings: StoreSettings) -> Result<Redis, redis::RedisError> {
        Ok(Redis {
            client: Client::open(url)?,
            settings,
            conn: Mutex::new(Conn::Fresh),
            put: Script::new(PUT),
            put_many: Script::new(PUT_MANY),
            get: Script::new(GET),
            up: AtomicBool::new(true),
            errors: AtomicU64::new(0),
            oom: AtomicU64::new(0),
            oom_logged: std::sync::Mutex::new(None),
        })
    }

    /// Whether the last operation reached Redis (true before the first one).
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Operations that failed since the start.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Operations Redis refused because it reached its `maxmemory` (OOM), since the start.
    pub fn oom(&self) -> u64 {
        self.oom.load(Ordering::Relaxed)
    }

    /// The operation timeout (`[store] timeout_ms`), also each request's budget for its reads
    /// and its writes.
    pub fn budget(&self) -> Duration {
        self.timeout()
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.settings.timeout_ms)
    }

    /// Seconds an entry lives without use (`[store] ttl_secs`).
    pub fn ttl_secs(&self) -> u64 {
        self.settings.ttl_secs
    }

    /// The full name of `key` (`{PREFIX}:key`).
    pub fn key(&self, key: &str) -> String {
        format!("{{{}}}:{key}", self.settings.key_prefix)
    }

    async fn connection(&self) -> Result<MultiplexedConnection, StoreError> {
        let mut conn = self.conn.lock().await;
        let retry = Duration::from_secs(self.settings.retry_secs);
        match &*conn {
            Conn::Ready(c) => return Ok(c.clone()),
            Conn::Down(at) if at.elapsed() < retry => {
                return Err(StoreError::Down(retry - at.elapsed()));
            }
            Conn::Down(_) | Conn::Fresh => {}
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(self.timeout())
            .set_response_timeout(self.timeout());
        match tokio::time::timeout(
            self.timeout(),
            self.client
                .get_multiplexed_async_connection_with_config(&config),
        )
        .await
        {
            Ok(Ok(c)) => {
                *conn = Conn::Ready(c.clone());
                Ok(c)
            }
            Ok(Err(e)) => {
                *conn = Conn::Down(Instant::now());
                Err(e.into())
            }
            Err(_) => {
                *conn = Conn::Down(Instant::now());
                Err(StoreError::Timeout(self.timeout()))
            }
        }
    }

    /// Runs `op` on the connection within the timeout, marking the store down or up.
    async fn run<T, F, Fut>(&self, op: F) -> Result<T, StoreError>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = Result<T, redis::RedisError>>,
    {
        let result = match self.connection().await {
            Ok(c) => match tokio::time::timeout(self.timeout(), op(c)).await {
                Ok(r) => r.map_err(StoreError::from),
                Err(_) => Err(StoreError::Timeout(self.timeout())),
            },
            Err(e) => Err(e),
        };
        match &result {
            Ok(_) => {
                if !self.up.swap(true, Ordering::Relaxed) {
                    tracing::info!("shared store: redis reachable again");
                }
            }
            // Redis answered, with a refusal: it is up, and says why (an OOM is no outage).
            Err(StoreError::Redis(e)) if answered(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                if e.code() == Some("OOM") {
                    self.oom.fetch_add(1, Ordering::Relaxed);
                    let mut last = self
                        .oom_logged
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let quiet = Duration::from_secs(self.settings.retry_secs.max(1));
                    if last.is_none_or(|at| at.elapsed() >= quiet) {
                        *last = Some(Instant::now());
                        tracing::warn!(
                            "shared store: redis is out of memory (its maxmemory is reached): writes are refused, reads go on; raise maxmemory or lower [store] max_bytes"
                        );
                    }
                } else {
                    tracing::warn!(error = %e, "shared store: redis refused an operation");
                }
            }
            Err(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                if !matches!(e, StoreError::Down(_)) {
                    let mut conn = self.conn.lock().await;
                    *conn = Conn::Down(Instant::now());
                }
                if self.up.swap(false, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "shared store: redis unreachable, using the local store only");
                }
            }
        }
        result
    }

    /// Stores `puts` and adds `index` in one round trip (one script call), then evicts by
    /// bytes. Nothing is sent for an empty batch.
    ///
    /// # Errors
    /// [`StoreError`] when Redis cannot answer in time or refuses (OOM).
    pub async fn put_many(
        &self,
        puts: &[Put],
        index: Option<&IndexAdd>,
    ) -> Result<u64, StoreError> {
        if puts.is_empty() && index.is_none() {
            return Ok(0);
        }
        let s = &self.settings;
        let mut call = self.put_many.prepare_invoke();
        call.key(self.key("lru"))
            .key(self.key("sizes"))
            .key(self.key("bytes"))
            .key(self.key("seq"))
            .arg(s.ttl_secs)
            .arg(s.max_bytes)
            .arg(puts.len());
        for p in puts {
            call.key(&p.key)
                .arg(if p.if_absent { "nx" } else { "set" })
                .arg(p.value.as_slice());
        }
        if let Some(i) = index {
            let stop = -i64::try_from(i.keep).unwrap_or(i64::MAX) - 1;
            call.key(&i.index).arg(i.score).arg(&i.member).arg(stop);
        }
        self.run(|mut c| async move { call.invoke_async(&mut c).await })
            .await
    }

    /// Sets `key` (full name) to `value` unless it exists, and gives back what it holds then
    /// (the value set, or the one another replica set first), outside the LRU and with no TTL.
    ///
    /// # Errors
    /// [`StoreError`] when Redis cannot answer in time.
    pub async fn get_or_set(&self, key: &str, value: &str) -> Result<String, StoreError> {
        self.run(|mut c| async move {
            redis::pipe()
                .cmd("SET")
                .arg(key)
                .arg(value)
                .arg("NX")
                .ignore()
                .cmd("GET")
                .arg(key)
                .query_async::<(String,)>(&mut c)
                .await
                .map(|(v,)| v)
        })
        .await
    }

    /// The value of `key` (full name), renewing its TTL and LRU time on a hit.
    ///
    /// # Errors
    /// [`StoreError`] when Redis cannot answer in time.
    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let (lru, seq) = (self.key("lru"), self.key("seq"));
        let ttl = self.settings.ttl_secs;
        self.run(|mut c| async move {
            self.get
                .key(key)
                .key(&lru)
                .key(&seq)
                .arg(ttl)
                .invoke_async(&mut c)
                .await
        })
        .await
    }

    /// Stores `value` under `key` (full name) with the TTL, then evicts by bytes.
    ///
    /// # Errors
    /// [`StoreError`] when Redis cannot answer in time.
    pub async fn put(&self, key: &str, value: &[u8]) -> Result<u64, StoreError> {
        let (lru, sizes, total, seq) = (
            self.key("lru"),
            self.key("sizes"),
            self.key("bytes"),
            self.key("seq"),
        );
        let s = &self.settings;
        self.run(|mut c| async move {
            self.put
                .key(key)
                .key(&lru)
                .key(&sizes)
                .key(&total)
                .key(&seq)
                .arg(value)
                .arg(s.ttl_secs)
                .arg(s.max_bytes)
                .invoke_async(&mut c)
                .await
        })
        .await
    }

    /// The members of `index` with scores in `min..=max`, highest first.
    ///
    /// # Errors
    /// [`StoreError`] when Redis cannot answer in time.
    pub async fn index_range(
        &self,
        index: &str,
        min: u64,
        max: u64,
    ) -> Result<Vec<String>, StoreError> {
        self.run(|mut c| async move {
            redis::cmd("ZRANGEBYSCORE")
                .arg(index)
                .arg(min)
                .arg(max)
                .query_async::<Vec<String>>(&mut c)
                .await
                .map(|mut v| {
                    v.reverse();
                    v
                })
        })
        .await
    }

    /// The store's own byte total (what the eviction counts).
    ///
    /// # Errors
    /// [`StoreError`] when Redis cannot answer in time.
    pub async fn bytes(&self) -> Result<u64, StoreError> {
        let total = self.key("bytes");
        self.run(|mut c| async move {
            redis::cmd("GET")
                .arg(&total)
                .query_async::<Option<u64>>(&mut c)
                .await
                .map(Option::unwrap_or_default)
        })
        .await
    }
}

/// Whether `e` is Redis's own answer (an error reply such as OOM or READONLY), not a failure
/// to reach it: the connection is fine and the store stays up.
fn answered(e: &redis::RedisError) -> bool {
    !(e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal())
        && e.code().is_some()
}
