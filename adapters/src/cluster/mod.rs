//! Several gateway instances behaving as one: the Redis they share
//! (`GATEWAY_REDIS_URL`, every key and channel under `GATEWAY_REDIS_PREFIX`).
//!
//! * [`Cluster`] — the connection: one auto-reconnecting
//!   [`ConnectionManager`] per instance, every round trip bounded by
//!   [`TIMEOUT`] so that a dead Redis never stalls a request.
//! * [`bus`] — pub/sub on `{prefix}bus`: one subscriber connection per
//!   instance, reconnecting with backoff, applying the other instances'
//!   [`Event`]s.
//! * What rides on it: cache invalidation (announced by the services'
//!   `credentials_changed` and `owners_changed`, applied by the [`Listener`]
//!   the composition root installs), stop-stream ([`crate::streams`]); the shared
//!   rate-limit store (`ratelimit::RedisStore`) uses the same connection.
//!
//! # Messages
//!
//! One JSON object per message on `{prefix}bus`:
//! `{"from": "<instance id>", "event": {"type": ...}}` with the types of
//! [`Event`]: `credentials` (drop the API-key cache), `owners` (`changes`:
//! `[{"kind", "id"}]`, drop those owner-cache entries), `stop_stream`
//! (`id`: stop that stream if held here). An instance ignores its own
//! messages (it applied the change before publishing it); a message it
//! cannot read empties its caches, which is right whatever it meant.
//!
//! # When Redis is down
//!
//! Nothing waits for it longer than [`TIMEOUT`]: rate limits fail open,
//! invalidations are not delivered (each cache entry still expires after
//! its 30 s TTL, as with a single instance), a stop of a stream held by
//! another instance answers 404. The bus reconnects in the background and,
//! once back, empties the caches (it may have missed messages).
//!
//! Without `GATEWAY_REDIS_URL` none of this exists: no connection, no task,
//! no extra work on any request.
//!
//! # TLS
//!
//! `rediss://` connects over rustls and verifies the server's certificate
//! and host name: against the public web's CAs (webpki-roots), or only the
//! CAs of [`GATEWAY_REDIS_CA_FILE`] (PEM, read at start). Every connection
//! (the shared one, the bus's subscriber, their reconnections) is made by
//! the one `redis::Client` built here, so all of them use it. A refused
//! certificate is a configuration error, not an outage: `gateway serve`
//! checks it before listening ([`Cluster::check_certificate`]) and every
//! later failure's text names the variables.

pub mod bus;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::RngCore;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use serde::{Deserialize, Serialize};

/// Longest wait for one Redis round trip on a request's path, connecting
/// included; past it the caller goes on without Redis (fail open).
pub const TIMEOUT: Duration = Duration::from_millis(250);

/// Default of `GATEWAY_REDIS_PREFIX`.
pub const DEFAULT_PREFIX: &str = "gateway:";

/// The CAs (a PEM file) that a `rediss://` server's certificate must chain
/// to, instead of the public web's. Default: unset (webpki-roots).
pub const GATEWAY_REDIS_CA_FILE: &str = "GATEWAY_REDIS_CA_FILE";

/// Where the shared Redis is (`GATEWAY_REDIS_URL`, `GATEWAY_REDIS_PREFIX`,
/// `GATEWAY_REDIS_CA_FILE`).
#[derive(Clone, PartialEq, Eq)]
pub struct RedisConfig {
    /// `redis://[user:password@]host[:port][/db]`, `rediss://...` (TLS) or
    /// `unix:///path`.
    pub url: String,
    /// Put before every key and channel name.
    pub prefix: String,
    /// The private CA of a `rediss://` URL: its file and its PEM text.
    pub ca: Option<(std::path::PathBuf, Vec<u8>)>,
}

impl RedisConfig {
    /// Checks the URL (without connecting); `prefix` defaults to [`DEFAULT_PREFIX`].
    pub fn parse(url: &str, prefix: Option<&str>) -> Result<RedisConfig, String> {
        let url = url.trim();
        redis::Client::open(url).map_err(|e| {
            format!("not a usable Redis URL ({e}); expected redis://[:password@]host[:port][/db], rediss://... (TLS) or unix:///path")
        })?;
        Ok(RedisConfig {
            url: url.to_owned(),
            prefix: prefix.unwrap_or(DEFAULT_PREFIX).trim().to_owned(),
            ca: None,
        })
    }

    /// Whether the URL asks for TLS (`rediss://`).
    pub fn is_tls(&self) -> bool {
        self.url.starts_with("rediss://")
    }

    /// Reads the CA file of [`GATEWAY_REDIS_CA_FILE`] (the error is its
    /// variable's: unreadable, not PEM, no certificate, or a URL that is
    /// not `rediss://`).
    pub fn with_ca_file(mut self, path: &std::path::Path) -> Result<RedisConfig, String> {
        if !self.is_tls() {
            return Err(
                "set, but GATEWAY_REDIS_URL is not rediss:// (TLS); the CA would not be used"
                    .to_owned(),
            );
        }
        let pem =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        gateway_base::tls::roots_of(&pem).map_err(|e| format!("{}: {e}", path.display()))?;
        self.ca = Some((path.to_owned(), pem));
        Ok(self)
    }

    /// What the server's certificate was checked against, for errors.
    fn trusted(&self) -> String {
        match &self.ca {
            Some((path, _)) => format!("the CA of {GATEWAY_REDIS_CA_FILE}={}", path.display()),
            None => format!("the public web's CAs ({GATEWAY_REDIS_CA_FILE} unset)"),
        }
    }

    /// The URL with its password (if any) masked, for logs.
    pub fn redacted(&self) -> String {
        match reqwest::Url::parse(&self.url) {
            Ok(mut u) if u.password().is_some() => {
                let _ = u.set_password(Some("***"));
                u.to_string()
            }
            Ok(u) => u.to_string(),
            Err(_) => "<unparsable>".to_owned(),
        }
    }
}

impl std::fmt::Debug for RedisConfig {
    // Never the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &self.redacted())
            .field("prefix", &self.prefix)
            .field("ca", &self.ca.as_ref().map(|(path, _)| path))
            .finish()
    }
}

/// Redis could not answer (unreachable, too slow, an error reply).
#[derive(Debug, Clone, thiserror::Error)]
#[error("Redis: {0}")]
pub struct Unavailable(pub String);

/// Something another instance must learn (see the module docs for the wire format).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A key revoked, or a user disabled, enabled or deleted: drop the
    /// API-key lookup cache.
    Credentials,
    /// Resources created, deleted or re-owned: drop their owner-cache entries.
    Owners { changes: Vec<OwnerRef> },
    /// Stop the stream `id` where it is held (already claimed in Redis).
    StopStream { id: String },
    /// Reload the configuration files; put the result under the reply
    /// `request` ([`Cluster::put_reply`]).
    Reload { request: String },
}

/// One owned resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerRef {
    pub kind: String,
    pub id: String,
}

/// A message on the bus.
#[derive(Debug, Serialize, Deserialize)]
pub struct Message {
    /// The publishing instance ([`Cluster::instance`]).
    pub from: String,
    pub event: Event,
}

/// The shared Redis of this instance (cheap to clone).
#[derive(Clone)]
pub struct Cluster(Arc<Inner>);

struct Inner {
    config: RedisConfig,
    client: redis::Client,
    /// Created on first use (it needs the Tokio runtime), then shared.
    manager: tokio::sync::OnceCell<ConnectionManager>,
    /// Random id of this instance, on its messages.
    instance: String,
    /// Whether the bus is subscribed right now.
    subscribed: AtomicBool,
}

impl Cluster {
    /// The shared Redis of `config`; connects on first use, never here.
    pub fn new(config: &RedisConfig) -> Result<Cluster, Unavailable> {
        if config.is_tls() {
            // The Redis client builds its rustls configuration from the
            // process's provider.
            gateway_base::tls::install_provider();
        }
        let client = match &config.ca {
            Some((_, pem)) => redis::Client::build_with_tls(
                config.url.as_str(),
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem.clone()),
                },
            ),
            None => redis::Client::open(config.url.as_str()),
        }
        .map_err(|e| Unavailable(format!("bad URL: {e}")))?;
        let mut id = [0u8; 8];
        rand::thread_rng().fill_bytes(&mut id);
        Ok(Cluster(Arc::new(Inner {
            config: config.clone(),
            client,
            manager: tokio::sync::OnceCell::new(),
            instance: hex::encode(id),
            subscribed: AtomicBool::new(false),
        })))
    }

    /// `prefix` + `name`: a key or channel of this gateway.
    pub fn key(&self, name: &str) -> String {
        let prefix = &self.0.config.prefix;
        let mut k = String::with_capacity(prefix.len() + name.len());
        k.push_str(prefix);
        k.push_str(name);
        k
    }

    /// The bus channel, `{prefix}bus`.
    pub fn channel(&self) -> String {
        self.key("bus")
    }

    /// This instance's id on the bus.
    pub fn instance(&self) -> &str {
        &self.0.instance
    }

    /// The URL (password masked) for logs.
    pub fn location(&self) -> String {
        self.0.config.redacted()
    }

    /// Whether the bus is subscribed now (invalidations are being received).
    pub fn bus_connected(&self) -> bool {
        self.0.subscribed.load(Ordering::Acquire)
    }

    fn set_bus_connected(&self, on: bool) {
        self.0.subscribed.store(on, Ordering::Release);
    }

    pub(crate) fn client(&self) -> &redis::Client {
        &self.0.client
    }

    async fn manager(&self) -> Result<ConnectionManager, redis::RedisError> {
        let manager = self
            .0
            .manager
            .get_or_try_init(|| async {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(TIMEOUT))
                    .set_response_timeout(Some(TIMEOUT))
                    .set_number_of_retries(1)
                    .set_min_delay(Duration::from_millis(50))
                    .set_max_delay(Duration::from_secs(1));
                ConnectionManager::new_lazy_with_config(self.0.client.clone(), config)
            })
            .await?;
        Ok(manager.clone())
    }

    /// Whether Redis answers `PING` (within [`TIMEOUT`]): a readiness probe.
    pub async fn ping(&self) -> Result<(), String> {
        self.run(|mut c| async move { redis::cmd("PING").query_async::<String>(&mut c).await })
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// Runs `f` on the shared connection, the whole within [`TIMEOUT`].
    pub async fn run<T, F, Fut>(&self, f: F) -> Result<T, Unavailable>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let work = async {
            let conn = self.manager().await?;
            f(conn).await
        };
        match tokio::time::timeout(TIMEOUT, work).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Unavailable(self.describe(&e))),
            Err(_) => Err(Unavailable(format!(
                "no answer within {} ms",
                TIMEOUT.as_millis()
            ))),
        }
    }

    /// A Redis error's text; a refused server certificate names the
    /// variables to look at.
    pub(crate) fn describe(&self, e: &redis::RedisError) -> String {
        match gateway_base::tls::refused_certificate(e) {
            Some(why) => format!(
                "GATEWAY_REDIS_URL ({}): the server's certificate was refused, checked against {} ({why})",
                self.location(),
                self.0.config.trusted()
            ),
            None => e.to_string(),
        }
    }

    /// For a `rediss://` URL, one connection made now (within `wait`): a
    /// refused server certificate is an error naming the variables
    /// (`gateway serve` then stops before listening). Anything else, an
    /// unreachable Redis included, is `Ok`: the gateway serves without it
    /// (rate limits fail open) and connects when it can.
    pub async fn check_certificate(&self, wait: Duration) -> Result<(), String> {
        if !self.0.config.is_tls() {
            return Ok(());
        }
        let attempt = async {
            let mut c = self.0.client.get_multiplexed_async_connection().await?;
            redis::cmd("PING").query_async::<redis::Value>(&mut c).await
        };
        match tokio::time::timeout(wait, attempt).await {
            Ok(Err(e)) if gateway_base::tls::refused_certificate(&e).is_some() => {
                Err(self.describe(&e))
            }
            _ => Ok(()),
        }
    }

    /// Puts this instance's `value` under the reply `name` (a hash by
    /// instance, kept a minute): how an instance answers a request made
    /// over the bus.
    pub async fn put_reply(&self, name: &str, value: &str) -> Result<(), Unavailable> {
        let (key, field, value) = (
            self.key(&format!("reply:{name}")),
            self.instance().to_owned(),
            value.to_owned(),
        );
        self.run(|mut c| async move {
            redis::pipe()
                .cmd("HSET")
                .arg(&key)
                .arg(field)
                .arg(value)
                .cmd("EXPIRE")
                .arg(&key)
                .arg(60)
                .query_async::<()>(&mut c)
                .await
        })
        .await
    }

    /// The replies put under `name` so far, by instance.
    pub async fn replies(&self, name: &str) -> Result<Vec<(String, String)>, Unavailable> {
        let key = self.key(&format!("reply:{name}"));
        self.run(|mut c| async move {
            redis::cmd("HGETALL")
                .arg(key)
                .query_async::<Vec<(String, String)>>(&mut c)
                .await
        })
        .await
    }

    /// Publishes `event` on the bus.
    pub async fn publish(&self, event: Event) -> Result<(), Unavailable> {
        let message = Message {
            from: self.0.instance.clone(),
            event,
        };
        let payload = serde_json::to_string(&message).map_err(|e| Unavailable(e.to_string()))?;
        let channel = self.channel();
        self.run(|mut c| async move {
            redis::cmd("PUBLISH")
                .arg(channel)
                .arg(payload)
                .query_async::<i64>(&mut c)
                .await
        })
        .await
        .map(|_| ())
    }

    /// [`publish`](Self::publish), a failure logged (the other instances'
    /// caches then expire by their TTL).
    pub async fn announce(&self, event: Event) {
        let what = event_name(&event);
        if let Err(e) = self.publish(event).await {
            tracing::warn!(
                error = %e,
                event = what,
                "could not tell the other instances; their cached entries expire within 30 s"
            );
        }
    }
}

fn event_name(event: &Event) -> &'static str {
    match event {
        Event::Credentials => "credentials",
        Event::Owners { .. } => "owners",
        Event::StopStream { .. } => "stop_stream",
        Event::Reload { .. } => "reload",
    }
}

/// What this instance does with the bus: installed by the composition root
/// (`crate::start`), so that the cluster knows no cache of its own.
pub trait Listener: Send + Sync + 'static {
    /// Applies another instance's event.
    fn apply(&self, event: Event);
    /// Drops everything cached that the bus keeps fresh: after a
    /// (re)subscription (messages may have been missed) or an unreadable
    /// message.
    fn forget_cached(&self);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_as_documented() {
        let m = Message {
            from: "ab".into(),
            event: Event::Owners {
                changes: vec![OwnerRef {
                    kind: "voice".into(),
                    id: "v1".into(),
                }],
            },
        };
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"from":"ab","event":{"type":"owners","changes":[{"kind":"voice","id":"v1"}]}}"#
        );
        let m: Message =
            serde_json::from_str(r#"{"from":"x","event":{"type":"stop_stream","id":"strm_1"}}"#)
                .unwrap();
        assert_eq!(
            m.event,
            Event::StopStream {
                id: "strm_1".into()
            }
        );
        let m: Message =
            serde_json::from_str(r#"{"from":"x","event":{"type":"credentials"}}"#).unwrap();
        assert_eq!(m.event, Event::Credentials);
    }

    #[test]
    fn urls_are_checked_and_never_logged_with_their_password() {
        let c = RedisConfig::parse("redis://:s3cret@127.0.0.1:6379/0", None).unwrap();
        assert_eq!(c.prefix, DEFAULT_PREFIX);
        assert!(!format!("{c:?}").contains("s3cret"), "{c:?}");
        assert!(c.redacted().contains("127.0.0.1:6379"));
        assert!(RedisConfig::parse("http://127.0.0.1", None).is_err());
        assert!(RedisConfig::parse("redis://", None).is_err());
        let c = RedisConfig::parse("redis://127.0.0.1", Some("gw1:")).unwrap();
        assert_eq!(c.prefix, "gw1:");
    }
}
