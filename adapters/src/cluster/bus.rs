//! The bus's subscriber: one pub/sub connection per instance on
//! `{prefix}bus`, reconnecting with backoff (100 ms doubling to 5 s),
//! pinged every [`PING_EVERY`] so that a silently dead connection is noticed.
//! Each (re)subscription empties the caches the bus keeps fresh, since
//! messages may have been missed meanwhile; while it is down those caches
//! fall back to their TTL (30 s), as on a single instance.

use std::time::Duration;

use futures_util::StreamExt;

use std::sync::Arc;

use super::{Cluster, Listener, Message};

/// First delay before reconnecting; doubled after each failure up to [`MAX_BACKOFF`].
pub const MIN_BACKOFF: Duration = Duration::from_millis(100);
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How often the subscribed connection is pinged.
pub const PING_EVERY: Duration = Duration::from_secs(5);
/// A ping or a subscription not answered within this is a lost connection.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// Runs the subscriber until the task is aborted (at shutdown), handing
/// the other instances' events to `listener`.
pub async fn run(cluster: Cluster, listener: Arc<dyn Listener>) {
    let mut delay = MIN_BACKOFF;
    let mut failures: u64 = 0;
    loop {
        match subscribe(&cluster).await {
            Ok(pubsub) => {
                if failures > 0 {
                    tracing::info!(
                        redis = %cluster.location(),
                        failed_attempts = failures,
                        "cluster bus connected again; caches emptied (messages may have been missed)"
                    );
                } else {
                    tracing::info!(redis = %cluster.location(), channel = %cluster.channel(), "cluster bus subscribed");
                }
                failures = 0;
                delay = MIN_BACKOFF;
                listener.forget_cached();
                cluster.set_bus_connected(true);
                listen(&*listener, &cluster, pubsub).await;
                cluster.set_bus_connected(false);
                tracing::warn!(
                    redis = %cluster.location(),
                    "cluster bus connection lost; reconnecting (cached keys and owners expire within 30 s meanwhile)"
                );
            }
            Err(e) => {
                failures += 1;
                if failures == 1 {
                    tracing::warn!(
                        error = %e,
                        redis = %cluster.location(),
                        "Redis unreachable: serving anyway (rate limits fail open, other instances' changes are seen within 30 s); the cluster bus keeps reconnecting in the background"
                    );
                } else {
                    tracing::debug!(error = %e, failures, "cluster bus still not connected");
                }
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_BACKOFF);
    }
}

async fn subscribe(cluster: &Cluster) -> Result<redis::aio::PubSub, String> {
    let work = async {
        let mut pubsub = cluster.client().get_async_pubsub().await?;
        pubsub.subscribe(cluster.channel()).await?;
        Ok::<_, redis::RedisError>(pubsub)
    };
    match tokio::time::timeout(ANSWER_WITHIN, work).await {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(e)) => Err(cluster.describe(&e)),
        Err(_) => Err(format!("no answer within {} ms", ANSWER_WITHIN.as_millis())),
    }
}

/// Applies messages until the connection is lost.
async fn listen(listener: &dyn Listener, cluster: &Cluster, pubsub: redis::aio::PubSub) {
    let (mut sink, mut messages) = pubsub.split();
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    loop {
        tokio::select! {
            m = messages.next() => match m {
                Some(m) => receive(listener, cluster, m.get_payload_bytes()),
                None => return,
            },
            _ = ping.tick() => {
                let pong = tokio::time::timeout(ANSWER_WITHIN, sink.ping::<redis::Value>()).await;
                if !matches!(pong, Ok(Ok(_))) {
                    return;
                }
            }
        }
    }
}

/// One message of the bus.
fn receive(listener: &dyn Listener, cluster: &Cluster, payload: &[u8]) {
    match serde_json::from_slice::<Message>(payload) {
        Ok(m) if m.from == cluster.instance() => {}
        Ok(m) => listener.apply(m.event),
        Err(e) => {
            tracing::warn!(error = %e, "unreadable message on the cluster bus; caches emptied");
            listener.forget_cached();
        }
    }
}
