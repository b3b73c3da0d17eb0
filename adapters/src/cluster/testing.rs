//! For tests (and the `testing` feature): the one place that decides
//! whether a test needing Redis runs, skips or fails.

use std::io::Write;
use std::time::Duration;

/// The Redis the tests use. Default `redis://127.0.0.1:6379`.
pub const GATEWAY_TEST_REDIS_URL: &str = "GATEWAY_TEST_REDIS_URL";
/// `1`: a test needing Redis fails when Redis is unreachable, instead of skipping.
pub const GATEWAY_TEST_REQUIRE_REDIS: &str = "GATEWAY_TEST_REQUIRE_REDIS";

/// The URL of the tests' Redis when it answers a PING. When it does not:
/// `None` and a line on stderr saying that `test` is skipped (written past
/// the test harness's capture, so it shows), or a panic when
/// [`GATEWAY_TEST_REQUIRE_REDIS`] is `1`.
pub async fn redis_or_skip(test: &str) -> Option<String> {
    let url = std::env::var(GATEWAY_TEST_REDIS_URL)
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let ping = async {
        let client = redis::Client::open(url.as_str())?;
        let mut c = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut c).await
    };
    let error = match tokio::time::timeout(Duration::from_secs(2), ping).await {
        Ok(Ok(_)) => return Some(url),
        Ok(Err(e)) => e.to_string(),
        Err(_) => "no answer within 2 s".to_owned(),
    };
    let required = std::env::var(GATEWAY_TEST_REQUIRE_REDIS).is_ok_and(|v| v.trim() == "1");
    assert!(
        !required,
        "{test}: Redis at {url} is unreachable ({error}) and {GATEWAY_TEST_REQUIRE_REDIS}=1"
    );
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: Redis at {url} is unreachable ({error}); set {GATEWAY_TEST_REQUIRE_REDIS}=1 to fail instead"
    );
    None
}

/// A fresh prefix (`gwtest:<tag>:<random>:`), so that tests sharing one
/// Redis never see each other's keys and messages.
pub fn fresh_prefix(tag: &str) -> String {
    use rand::RngCore;
    let mut b = [0u8; 8];
    rand::thread_rng().fill_bytes(&mut b);
    format!("gwtest:{tag}:{}:", hex::encode(b))
}

/// A TCP forwarder to a Redis that can be cut (every connection dropped,
/// new ones refused) and healed: a network partition between one instance
/// and Redis. Point the instance at [`Partition::url`].
pub struct Partition {
    pub url: String,
    cut: tokio::sync::watch::Sender<bool>,
}

impl Partition {
    /// A forwarder on a free loopback port to the Redis of `redis_url`.
    pub async fn to(redis_url: &str) -> Partition {
        let target = reqwest::Url::parse(redis_url).expect("a redis:// URL");
        let target = format!(
            "{}:{}",
            target.host_str().expect("a host"),
            target.port().unwrap_or(6379)
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let url = format!("redis://{}", listener.local_addr().expect("bound"));
        let (cut, cut_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if *cut_rx.borrow() {
                    continue; // dropped: refused
                }
                let mut cut = cut_rx.clone();
                let target = target.clone();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        Partition { url, cut }
    }

    /// Cuts (`true`) or heals (`false`) the link.
    pub fn cut(&self, on: bool) {
        self.cut.send_replace(on);
    }
}
