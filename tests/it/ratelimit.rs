//! Rate limits (spec §8): per user, per capability; 429 with `Retry-After`
//! and no upstream call when exceeded; a failing limiter store fails open.

use std::sync::Arc;

use runtime::ratelimit::{CheckFuture, LimiterStore, Limits, Quota, StoreUnavailable};

use crate::harness::*;

#[tokio::test]
async fn the_61st_request_in_a_period_is_429_for_that_user_and_capability_only() {
    // 60 an hour rather than 60 a minute: a minute's quota refills one
    // request a second, and 60 requests on a loaded machine can take longer.
    let env =
        Env::with(|c| c.rate_limits = Limits::parse(Some("tts=60/h,projects=60/h")).unwrap()).await;
    for i in 0..60 {
        let a = env.get("/tts/voices/stock-voice-1").await;
        assert_eq!(a.status, 200, "request {}: {}", i + 1, a.text);
    }
    env.clear_sim_log().await;
    let a = env.get("/tts/voices/stock-voice-1").await;
    a.expect(429);
    let retry: u64 = a
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!(
        (1..=60).contains(&retry),
        "one request's refill is a minute: {retry}"
    );
    assert!(a.detail().contains("rate limit"), "{}", a.text);
    env.assert_no_upstream_call().await;
    assert_eq!(env.audit().len(), 60, "no record for the refused request");
    // The same capability through another route is the same bucket.
    env.post("/tts/synthesize", synth_body("hi"))
        .await
        .expect(429);
    // Other capabilities and other users are unaffected.
    env.get("/projects").await.expect(200);
    let (_, bob) = env.new_user("bob@example.com");
    env.call_as(&bob, "GET", &env.voice("/tts/voices/stock-voice-1"), None)
        .await
        .expect(200);
}

/// A store that is always down (a shared store out of reach).
struct Down;

impl LimiterStore for Down {
    fn check<'a>(&'a self, _user: i64, _capability: &'a str, _quota: &'a Quota) -> CheckFuture<'a> {
        Box::pin(async { Err(StoreUnavailable("connection refused".into())) })
    }
}

#[tokio::test]
async fn a_failing_limiter_store_lets_requests_through() {
    let env = Env::with(|c| {
        c.rate_limits = Limits::parse(Some("tts=1/h")).unwrap();
        c.limiter_store = Some(Arc::new(Down));
    })
    .await;
    for _ in 0..5 {
        env.get("/tts/voices/stock-voice-1").await.expect(200);
    }
    assert!(env.gw.gateway.limiter.store_failures() >= 5);
}

#[test]
fn bad_limit_configuration_names_the_variable() {
    let e = runtime::config::Config::from_lookup(|k| {
        (k == "GATEWAY_RATE_LIMITS").then(|| "tts=sixty/m".to_owned())
    })
    .err()
    .unwrap();
    assert_eq!(e.name, "GATEWAY_RATE_LIMITS");
    // Capability names are the route table's: checked when the gateway
    // starts, before anything is opened.
    let dir = TempDir::new("ratelimit-config");
    let data = dir.0.join("data");
    let config = runtime::config::Config::from_lookup(|k| match k {
        "GATEWAY_RATE_LIMITS" => Some("nosuch=5/m".to_owned()),
        "GATEWAY_DATA_DIR" => Some(data.display().to_string()),
        _ => None,
    })
    .unwrap();
    let e = match server::gateway(config).err().unwrap() {
        runtime::StartError::Config(e) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(e.name, "GATEWAY_RATE_LIMITS");
    assert!(e.reason.contains("nosuch"), "{}", e.reason);
    assert!(!data.exists(), "no database was opened");
}
