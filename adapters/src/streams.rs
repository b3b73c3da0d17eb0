//! The open streams, for `POST /completions/stop-stream/{stream_id}`.
//!
//! A stream lives in the instance relaying it: only that instance can end
//! it, by its local registration (a `watch` the relay listens to). Nothing
//! here outlives the process: a stream ends with its connection.
//!
//! **One instance** (no Redis): the registry is this process's map; a stop
//! for an id it does not hold answers 404.
//!
//! **Several instances** (`GATEWAY_REDIS_URL`, see [`crate::cluster`]): each
//! open stream is also registered in Redis, `{prefix}stream:{id}` → its
//! owner (`user id`, or `-`), with a [`TTL`] refreshed every [`REFRESH`]
//! while it is open and deleted when it ends (a crashed instance's entries
//! expire). A stop reaching an instance that does not hold the stream
//! claims it in Redis ([`CLAIM`]: atomically, only when the owner is the
//! caller's, and only once: the value becomes `!stopped`), then publishes
//! [`Event::StopStream`]; the holding instance stops its stream, which bills
//! what was streamed as usual. Unknown, finished, already stopped or another
//! user's: 404, exactly as on one instance. A stop reaching the holding
//! instance claims too, so two stops through two instances never both
//! succeed. Should the bus message be lost, the holder's next refresh finds
//! `!stopped` and stops the stream then ([`REFRESH`] later at worst).
//!
//! Redis down: streams still register locally and stop through the
//! instance holding them; a stop reaching another instance answers 404.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use rand::RngCore;
use tokio::sync::{oneshot, watch};

use crate::cluster::{Cluster, Event};

/// Life of a stream's Redis entry without a refresh.
pub const TTL: Duration = Duration::from_secs(30);
/// How often an open stream's Redis entry is refreshed.
pub const REFRESH: Duration = Duration::from_secs(5);

/// KEYS[1]: the stream's entry; ARGV[1]: the caller as owner. 1 when the
/// entry was the caller's and is now claimed (`!stopped`, TTL kept); 0 when
/// it is another caller's or claimed already; -1 when there is none.
pub const CLAIM: &str = r#"
local v = redis.call('GET', KEYS[1])
if not v then
  return -1
end
if v == ARGV[1] then
  redis.call('SET', KEYS[1], '!stopped', 'KEEPTTL')
  return 1
end
return 0
"#;

/// KEYS[1]: the stream's entry; ARGV[1]: its owner; ARGV[2]: TTL (s).
/// 0 when the stream was claimed meanwhile (stop it), else 1 (entry set
/// again with a fresh TTL: after a restart of Redis too).
pub const KEEP: &str = r#"
if redis.call('GET', KEYS[1]) == '!stopped' then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1
"#;

static CLAIM_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(CLAIM));
static KEEP_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(KEEP));

/// What a claim found in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    /// The caller's, claimed now.
    Claimed,
    /// Another caller's, or claimed already.
    Refused,
    /// No entry (finished, never registered, or Redis lost it).
    Missing,
}

struct Open {
    owner: Option<i64>,
    stop: watch::Sender<bool>,
    /// Registered in Redis too.
    shared: bool,
}

/// The registry of open streams.
pub struct Streams {
    open: Mutex<HashMap<String, Open>>,
    cluster: Option<Cluster>,
}

impl Default for Streams {
    fn default() -> Self {
        Streams::new(None)
    }
}

/// A registered stream: removed from the registry (and Redis) when dropped.
pub struct Registration {
    streams: Arc<Streams>,
    pub id: String,
    /// Becomes `true` when the stream is asked to stop.
    pub stop: watch::Receiver<bool>,
    /// Dropped with the registration: ends the Redis entry's keeper.
    _keeper: Option<oneshot::Sender<()>>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut open) = self.streams.open.lock() {
            open.remove(&self.id);
        }
        gateway_base::telemetry::open_streams(-1.0);
    }
}

/// `strm_` + 24 hex characters.
pub fn new_stream_id() -> String {
    let mut b = [0u8; 12];
    rand::thread_rng().fill_bytes(&mut b);
    format!("strm_{}", hex::encode(b))
}

/// An owner as stored in Redis.
fn owner_value(owner: Option<i64>) -> String {
    owner.map_or_else(|| "-".to_owned(), |id| id.to_string())
}

impl Streams {
    /// A registry; with `cluster`, streams are registered in Redis too.
    pub fn new(cluster: Option<Cluster>) -> Streams {
        Streams {
            open: Mutex::new(HashMap::new()),
            cluster,
        }
    }

    /// Registers a new stream of `owner` under a fresh id (in Redis too,
    /// with a cluster, before the id is handed out; a Redis failure leaves
    /// it registered here only).
    pub async fn register(self: &Arc<Self>, owner: Option<i64>) -> Registration {
        let id = new_stream_id();
        let (tx, rx) = watch::channel(false);
        let mut keeper = None;
        let mut shared = false;
        if let Some(cluster) = &self.cluster {
            let value = owner_value(owner);
            match refresh(cluster, &id, &value).await {
                Ok(_) => {
                    shared = true;
                    let (done, ended) = oneshot::channel();
                    keeper = Some(done);
                    tokio::spawn(keep(
                        self.clone(),
                        cluster.clone(),
                        id.clone(),
                        value,
                        ended,
                    ));
                }
                Err(e) => tracing::warn!(
                    error = %e,
                    "stream not registered in Redis: only this instance can stop it"
                ),
            }
        }
        self.open.lock().expect("stream registry").insert(
            id.clone(),
            Open {
                owner,
                stop: tx,
                shared,
            },
        );
        gateway_base::telemetry::open_streams(1.0);
        Registration {
            streams: self.clone(),
            id,
            stop: rx,
            _keeper: keeper,
        }
    }

    /// Asks `owner`'s stream `id` to stop; false when it is unknown,
    /// finished, already stopped or another caller's (see the module docs
    /// for streams held by another instance).
    pub async fn stop(&self, id: &str, owner: Option<i64>) -> bool {
        let here = {
            let open = self.open.lock().expect("stream registry");
            open.get(id).map(|o| (o.owner == owner, o.shared))
        };
        let cluster = match (here, &self.cluster) {
            (Some((false, _)), _) => return false,
            (Some((true, false)), _) | (Some((true, true)), None) => return self.stop_claimed(id),
            (None, None) => return false,
            (_, Some(c)) => c,
        };
        match claim(cluster, id, owner).await {
            // Held here: stopped here (an entry Redis lost is no reason not to).
            Ok(Claim::Claimed | Claim::Missing) if here.is_some() => self.stop_claimed(id),
            Ok(Claim::Claimed) => {
                cluster
                    .announce(Event::StopStream { id: id.to_owned() })
                    .await;
                true
            }
            // Claimed through another instance already (its stop is on the
            // way), or another caller's, unknown, finished.
            Ok(Claim::Refused | Claim::Missing) => false,
            // Redis down: a stream held here is still ours to stop.
            Err(e) if here.is_some() => {
                tracing::warn!(error = %e, "stream stopped here without claiming it in Redis");
                self.stop_claimed(id)
            }
            Err(e) => {
                tracing::warn!(error = %e, "stop of a stream not held here: Redis unreachable; answered 404");
                false
            }
        }
    }

    /// Stops stream `id` if held here, the caller already checked (owner
    /// compared here, or the stream claimed in Redis). False when not held.
    pub fn stop_claimed(&self, id: &str) -> bool {
        let removed = self.open.lock().expect("stream registry").remove(id);
        match removed {
            Some(o) => o.stop.send(true).is_ok(),
            None => false,
        }
    }

    /// How many streams are open here.
    pub fn len(&self) -> usize {
        self.open.lock().map(|o| o.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn entry(cluster: &Cluster, id: &str) -> String {
    cluster.key(&format!("stream:{id}"))
}

/// Sets (or refreshes) the stream's entry; `Ok(false)` when it was claimed.
async fn refresh(
    cluster: &Cluster,
    id: &str,
    owner: &str,
) -> Result<bool, crate::cluster::Unavailable> {
    let key = entry(cluster, id);
    let script = &*KEEP_SCRIPT;
    cluster
        .run(|mut c| async move {
            script
                .key(key)
                .arg(owner)
                .arg(TTL.as_secs())
                .invoke_async::<i64>(&mut c)
                .await
        })
        .await
        .map(|v| v == 1)
}

/// Claims `owner`'s stream `id` in Redis: [`Claim::Claimed`] once, for its owner only.
async fn claim(
    cluster: &Cluster,
    id: &str,
    owner: Option<i64>,
) -> Result<Claim, crate::cluster::Unavailable> {
    let key = entry(cluster, id);
    let script = &*CLAIM_SCRIPT;
    let owner = owner_value(owner);
    cluster
        .run(|mut c| async move { script.key(key).arg(owner).invoke_async::<i64>(&mut c).await })
        .await
        .map(|v| match v {
            1 => Claim::Claimed,
            -1 => Claim::Missing,
            _ => Claim::Refused,
        })
}

/// Keeps an open stream's entry alive until its registration is dropped,
/// then deletes it. A refresh that finds the stream claimed stops it here
/// (the bus message was lost).
async fn keep(
    streams: Arc<Streams>,
    cluster: Cluster,
    id: String,
    owner: String,
    mut ended: oneshot::Receiver<()>,
) {
    let mut every = tokio::time::interval(REFRESH);
    every.tick().await;
    loop {
        tokio::select! {
            _ = &mut ended => break,
            _ = every.tick() => {
                if let Ok(false) = refresh(&cluster, &id, &owner).await {
                    streams.stop_claimed(&id);
                }
            }
        }
    }
    let key = entry(&cluster, &id);
    let gone = cluster
        .run(|mut c| async move { redis::cmd("DEL").arg(key).query_async::<i64>(&mut c).await })
        .await;
    if let Err(e) = gone {
        tracing::debug!(error = %e, "stream entry left to expire in Redis");
    }
}
