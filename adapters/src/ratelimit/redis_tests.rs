//! The Redis store against a real Redis (`cluster::testing`: skipped with a
//! printed line when none answers, unless `GATEWAY_TEST_REQUIRE_REDIS=1`).
//! Each test works under a fresh prefix.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::cluster::testing::{fresh_prefix, redis_or_skip};
use crate::cluster::RedisConfig;
use gateway_base::spec::QuotaSpec;

const CAPS: &[Capability] = &[
    Capability {
        name: "tts",
        quota: Some(QuotaSpec {
            count: 60,
            per_secs: 60,
        }),
    },
    Capability {
        name: "stt",
        quota: Some(QuotaSpec {
            count: 30,
            per_secs: 60,
        }),
    },
    Capability {
        name: "webhook",
        quota: None,
    },
];

fn cluster(url: &str, prefix: &str) -> Cluster {
    Cluster::new(&RedisConfig::parse(url, Some(prefix)).unwrap()).unwrap()
}

fn limiter(cluster: &Cluster, spec: &str) -> RateLimiter {
    RateLimiter::redis(CAPS, &Limits::parse(Some(spec)).unwrap(), cluster.clone()).unwrap()
}

/// The Redis of the tests, or `None` (skipped).
async fn redis(test: &str) -> Option<String> {
    redis_or_skip(&format!("ratelimit::redis_tests::{test}")).await
}

#[tokio::test]
async fn the_burst_passes_then_the_next_is_refused_with_retry_after() {
    let Some(url) = redis("the_burst_passes").await else {
        return;
    };
    let c = cluster(&url, &fresh_prefix("rl-burst"));
    let rl = limiter(&c, "tts=3/m");
    for i in 0..3 {
        assert_eq!(rl.check(7, "tts").await, Ok(()), "request {}", i + 1);
    }
    // One request every 20 s: the 4th waits about 20 s.
    let retry = rl.check(7, "tts").await.unwrap_err();
    assert!((19..=20).contains(&retry), "{retry}");
    match rl.enforce(7, "tts").await.unwrap_err() {
        ApiError::RateLimited { retry_after, .. } => assert!((19..=20).contains(&retry_after)),
        other => panic!("{other:?}"),
    }
    // Other users and capabilities have budgets of their own; unlimited
    // capabilities are not counted.
    assert_eq!(rl.check(8, "tts").await, Ok(()));
    assert_eq!(rl.check(7, "stt").await, Ok(()));
    for _ in 0..10 {
        assert_eq!(rl.check(7, "webhook").await, Ok(()));
    }
    assert_eq!(rl.store_failures(), 0);
}

#[tokio::test]
async fn retry_after_is_whole_seconds_rounded_up() {
    let Some(url) = redis("retry_after_is_whole_seconds").await else {
        return;
    };
    let c = cluster(&url, &fresh_prefix("rl-retry"));
    let rl = limiter(&c, "tts=1/h");
    rl.check(1, "tts").await.unwrap();
    // A few ms under an hour is an hour.
    assert_eq!(rl.check(1, "tts").await, Err(3600));
    let rl = limiter(&c, "stt=5/s");
    for _ in 0..5 {
        rl.check(1, "stt").await.unwrap();
    }
    // At most 200 ms to wait: 1 s, never 0.
    assert_eq!(rl.check(1, "stt").await, Err(1));
}

#[tokio::test]
async fn one_request_is_replenished_every_period_over_count() {
    let Some(url) = redis("one_request_is_replenished").await else {
        return;
    };
    let c = cluster(&url, &fresh_prefix("rl-replenish"));
    let rl = limiter(&c, "tts=2/s");
    let start = Instant::now();
    rl.check(3, "tts").await.unwrap();
    rl.check(3, "tts").await.unwrap();
    assert!(rl.check(3, "tts").await.is_err());
    // One request every 500 ms.
    tokio::time::sleep(Duration::from_millis(550).saturating_sub(start.elapsed())).await;
    assert_eq!(rl.check(3, "tts").await, Ok(()), "one replenished");
    assert!(rl.check(3, "tts").await.is_err(), "only one");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(rl.check(3, "tts").await, Ok(()), "the whole burst again");
    assert_eq!(rl.check(3, "tts").await, Ok(()));
    assert!(rl.check(3, "tts").await.is_err());
}

#[tokio::test]
async fn instances_on_one_prefix_share_a_budget_and_other_prefixes_do_not() {
    let Some(url) = redis("instances_on_one_prefix").await else {
        return;
    };
    let prefix = fresh_prefix("rl-shared");
    let (a, b) = (
        limiter(&cluster(&url, &prefix), "tts=2/h"),
        limiter(&cluster(&url, &prefix), "tts=2/h"),
    );
    let other = limiter(&cluster(&url, &fresh_prefix("rl-other")), "tts=2/h");
    a.check(5, "tts").await.unwrap();
    b.check(5, "tts").await.unwrap();
    assert!(a.check(5, "tts").await.is_err(), "A sees B's request");
    assert!(b.check(5, "tts").await.is_err());
    assert_eq!(other.check(5, "tts").await, Ok(()), "another prefix");
    assert_eq!(other.check(5, "tts").await, Ok(()));
}

#[tokio::test]
async fn concurrent_checks_never_exceed_the_burst() {
    let Some(url) = redis("concurrent_checks").await else {
        return;
    };
    let c = cluster(&url, &fresh_prefix("rl-concurrent"));
    let rl = Arc::new(limiter(&c, "tts=10/h"));
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let rl = rl.clone();
            tokio::spawn(async move { rl.check(1, "tts").await.is_ok() })
        })
        .collect();
    let mut allowed = 0;
    for t in tasks {
        allowed += usize::from(t.await.unwrap());
    }
    assert_eq!(allowed, 10);
    assert_eq!(rl.store_failures(), 0);
}

#[tokio::test]
async fn state_is_kept_on_the_redis_clock_and_expires_when_replenished() {
    let Some(url) = redis("state_is_kept_on_the_redis_clock").await else {
        return;
    };
    let c = cluster(&url, &fresh_prefix("rl-ttl"));
    let store = RedisStore::new(c.clone());
    let quota = Quota::per_minute(2);
    assert_eq!(
        store.check(9, "tts", &quota).await.unwrap(),
        Decision::Allow
    );
    let key = store.key(9, "tts", &quota);
    let (tat, ttl_ms, time): (String, i64, (String, String)) = c
        .run(|mut conn| async move {
            redis::pipe()
                .get(&key)
                .pttl(&key)
                .cmd("TIME")
                .query_async(&mut conn)
                .await
        })
        .await
        .unwrap();
    // Theoretical arrival time: Redis's now + 30 s (one emission interval), in µs.
    let now_us = time.0.parse::<i64>().unwrap() * 1_000_000 + time.1.parse::<i64>().unwrap();
    let ahead = tat.parse::<i64>().unwrap() - now_us;
    assert!((29_000_000..=30_000_000).contains(&ahead), "{ahead} µs");
    // It expires when the user's burst is whole again: idle users cost nothing.
    assert!((29_000..=30_000).contains(&ttl_ms), "{ttl_ms} ms");
}

#[tokio::test]
async fn quotas_without_state_never_ask_redis() {
    // A closed port: any question to Redis would fail.
    let c = cluster(&closed_port_url().await, &fresh_prefix("rl-stateless"));
    let store = RedisStore::new(c);
    let zero = Quota {
        count: 0,
        per: Duration::from_secs(60),
    };
    assert_eq!(
        store.check(1, "x", &zero).await.unwrap(),
        Decision::Deny {
            retry_after: Duration::from_secs(60)
        }
    );
    let instant = Quota {
        count: 5,
        per: Duration::ZERO,
    };
    assert_eq!(
        store.check(1, "y", &instant).await.unwrap(),
        Decision::Allow
    );
}

/// `redis://` on a loopback port nothing listens on.
async fn closed_port_url() -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("redis://127.0.0.1:{port}")
}

#[tokio::test]
async fn an_unreachable_redis_fails_open_at_once_with_a_warning() {
    let c = cluster(&closed_port_url().await, &fresh_prefix("rl-down"));
    let rl = limiter(&c, "tts=1/d");
    let start = Instant::now();
    for _ in 0..20 {
        assert_eq!(rl.check(1, "tts").await, Ok(()), "fail open");
    }
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(rl.store_failures(), 20);
    assert_eq!(rl.warnings.load(Ordering::Relaxed), 1, "one warning line");
    assert_eq!(rl.suppressed.load(Ordering::Relaxed), 19);
}

#[tokio::test]
async fn a_silent_redis_costs_one_timeout_then_rests() {
    // Accepts connections (the kernel's backlog) and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}", silent.local_addr().unwrap());
    let rl = limiter(&cluster(&url, &fresh_prefix("rl-silent")), "tts=1/d");
    let start = Instant::now();
    assert_eq!(rl.check(1, "tts").await, Ok(()));
    let first = start.elapsed();
    assert!(
        first >= crate::cluster::TIMEOUT && first < crate::cluster::TIMEOUT * 4,
        "{first:?}"
    );
    let start = Instant::now();
    for _ in 0..10 {
        assert_eq!(rl.check(1, "tts").await, Ok(()));
    }
    assert!(
        start.elapsed() < Duration::from_millis(100),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(rl.store_failures(), 11);
    drop(silent);
}

#[tokio::test]
async fn limits_hold_again_once_redis_is_back() {
    let Some(url) = redis("limits_hold_again").await else {
        return;
    };
    let partition = crate::cluster::testing::Partition::to(&url).await;
    let rl = limiter(
        &cluster(&partition.url, &fresh_prefix("rl-back")),
        "tts=2/h",
    );
    assert_eq!(rl.check(1, "tts").await, Ok(()));
    partition.cut(true);
    // Refused connections: every check fails open.
    for _ in 0..5 {
        assert_eq!(rl.check(1, "tts").await, Ok(()));
    }
    assert!(rl.store_failures() >= 1);
    partition.cut(false);
    // The connection comes back by itself: the second request of the
    // budget passes, the third is refused again.
    let start = Instant::now();
    loop {
        let failures = rl.store_failures();
        let r = rl.check(1, "tts").await;
        if rl.store_failures() == failures {
            assert_eq!(r, Ok(()), "the second of the budget");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "Redis not back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let retry = rl.check(1, "tts").await.unwrap_err();
    assert!((1790..=1800).contains(&retry), "{retry}");
}
