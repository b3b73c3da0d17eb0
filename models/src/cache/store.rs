//! Where entries live: Redis when the instances share one
//! (`GATEWAY_REDIS_URL`: `{prefix}cache:<key>`, the TTL Redis's own), else
//! this process's memory, bounded by bytes, with `quick_cache`'s eviction
//! (S3-FIFO: entries read again are kept over those read once, scan resistant) and each
//! entry's expiry checked when it is read. An entry is the JSON text of an
//! [`super::Entry`], in both.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use gateway_adapters::cluster::{Cluster, Unavailable};

/// A stored entry in memory: its text and when it expires.
#[derive(Clone)]
pub struct Stored {
    text: Bytes,
    expires: Instant,
}

/// Weighs an entry by its bytes.
#[derive(Clone)]
pub struct ByBytes;

impl quick_cache::Weighter<String, Stored> for ByBytes {
    fn weight(&self, key: &String, v: &Stored) -> u64 {
        (key.len() + v.text.len()) as u64
    }
}

/// Counts evictions and the bytes held.
#[derive(Clone)]
pub struct Counting {
    bytes: Arc<AtomicI64>,
}

impl quick_cache::Lifecycle<String, Stored> for Counting {
    type RequestState = ();

    fn begin_request(&self) -> Self::RequestState {}

    fn on_evict(&self, _state: &mut Self::RequestState, key: String, v: Stored) {
        let w = (key.len() + v.text.len()) as i64;
        let now = self.bytes.fetch_sub(w, Ordering::Relaxed) - w;
        gateway_base::telemetry::cache_evicted(now.max(0) as f64);
    }
}

type Memory =
    quick_cache::sync::Cache<String, Stored, ByBytes, quick_cache::DefaultHashBuilder, Counting>;

/// The store of one gateway.
pub enum Store {
    Memory {
        cache: Memory,
        bytes: Arc<AtomicI64>,
    },
    Redis(Cluster),
}

impl Store {
    /// In memory, at most `max_bytes`.
    pub fn memory(max_bytes: u64) -> Store {
        let bytes = Arc::new(AtomicI64::new(0));
        let cache = Memory::with(
            // A guess of the entries' number (a few KiB each).
            (max_bytes / 4096).clamp(16, 1 << 20) as usize,
            max_bytes,
            ByBytes,
            Default::default(),
            Counting {
                bytes: bytes.clone(),
            },
        );
        Store::Memory { cache, bytes }
    }

    /// The entry text of `key`, if any and not expired.
    pub async fn get(&self, key: &str) -> Result<Option<Bytes>, Unavailable> {
        match self {
            Store::Memory { cache, bytes } => {
                let Some(s) = cache.get(key) else {
                    return Ok(None);
                };
                if s.expires <= Instant::now() {
                    if let Some((k, v)) = cache.remove(key) {
                        let w = (k.len() + v.text.len()) as i64;
                        let now = bytes.fetch_sub(w, Ordering::Relaxed) - w;
                        gateway_base::telemetry::cache_bytes(now.max(0) as f64);
                    }
                    return Ok(None);
                }
                Ok(Some(s.text))
            }
            Store::Redis(cluster) => {
                let k = cluster.key(&format!("cache:{key}"));
                cluster
                    .run(|mut c| async move {
                        redis::cmd("GET")
                            .arg(k)
                            .query_async::<Option<Vec<u8>>>(&mut c)
                            .await
                    })
                    .await
                    .map(|o| o.map(Bytes::from))
            }
        }
    }

    /// Stores `text` under `key` for `ttl`.
    pub async fn put(&self, key: &str, text: Bytes, ttl: Duration) -> Result<(), Unavailable> {
        match self {
            Store::Memory { cache, bytes } => {
                let w = (key.len() + text.len()) as i64;
                let old = cache.get(key);
                cache.insert(
                    key.to_owned(),
                    Stored {
                        text,
                        expires: Instant::now() + ttl,
                    },
                );
                let replaced = old.map_or(0, |o| (key.len() + o.text.len()) as i64);
                let now = bytes.fetch_add(w - replaced, Ordering::Relaxed) + w - replaced;
                gateway_base::telemetry::cache_bytes(now.max(0) as f64);
                Ok(())
            }
            Store::Redis(cluster) => {
                let k = cluster.key(&format!("cache:{key}"));
                let ms = ttl.as_millis().max(1) as u64;
                cluster
                    .run(|mut c| async move {
                        redis::cmd("SET")
                            .arg(k)
                            .arg(text.as_ref())
                            .arg("PX")
                            .arg(ms)
                            .query_async::<()>(&mut c)
                            .await
                    })
                    .await
            }
        }
    }
}
