//! Several instances behaving as one (#14): two gateways on one database,
//! one object store and one Redis ([`Pair`]), driven over HTTP. A rate limit
//! is shared; a stream is stopped through the instance that does not hold
//! it; a revoke, a disable or a delete made through one instance (or the
//! CLI) is seen by the other within a second; with Redis unreachable,
//! requests still pass. Tests needing Redis skip (saying so) when it is
//! unreachable, unless `GATEWAY_TEST_REQUIRE_REDIS=1`.

use std::future::Future;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use runtime::store::Ledger;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::*;

const VOICE: &str = "/api/v1/voice/tts/voices/stock-voice-1";
const ADMIN_KEY: &str = "admin-key-scaleout-0123456789";

/// Polls `probe` every 20 ms until it holds; how long that took. Fails
/// past `limit`.
async fn within<F, Fut>(limit: Duration, what: &str, mut probe: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if probe().await {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Pair {
    /// `method` `url` with `key` (a key or a token), JSON `body`.
    async fn send(&self, key: &str, method: &str, url: &str, body: Option<Value>) -> Answer {
        self.a.call_as(key, method, url, body).await
    }
}

#[tokio::test]
async fn a_rate_limit_is_shared_by_the_instances() {
    let Some(p) = Pair::start("scaleout::a_rate_limit_is_shared", |c| {
        c.rate_limits = runtime::ratelimit::Limits::parse(Some("tts=3/h")).unwrap();
    })
    .await
    else {
        return;
    };
    let key = p.a.key.clone();
    for url in [p.url_a(VOICE), p.url_b(VOICE), p.url_a(VOICE)] {
        p.send(&key, "GET", &url, None).await.expect(200);
    }
    p.a.clear_sim_log().await;
    // The quota is spent across both: B refuses the 4th, and so does A.
    for url in [p.url_b(VOICE), p.url_a(VOICE)] {
        let a = p.send(&key, "GET", &url, None).await;
        a.expect(429);
        let retry: u64 = a.header("retry-after").unwrap().parse().unwrap();
        // One request every 1200 s.
        assert!((1190..=1200).contains(&retry), "{retry}");
    }
    p.a.assert_no_upstream_call().await;
    // Another user has a budget of their own on both.
    let (_, bob) = p.a.new_user("bob@example.com");
    p.send(&bob, "GET", &p.url_b(VOICE), None).await.expect(200);
    assert_eq!(p.a.gw.gateway.limiter.store_failures(), 0);
    assert_eq!(p.b.gateway.limiter.store_failures(), 0);
}

/// Starts a slow stream on instance A: its id and the unread rest.
async fn stream_on_a(
    p: &Pair,
) -> (
    String,
    String,
    impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>>,
) {
    let body = json!({
        "model": "sim/sim-gpt",
        "messages": [{"role": "user", "content": "Hello there"}],
        "stream": true,
        "max_tokens": 50,
    });
    let r = p.a.stream_chat(&p.a.key, body).await;
    assert_eq!(r.status(), 200);
    let id = r.headers()["x-stream-id"].to_str().unwrap().to_owned();
    let mut s = r.bytes_stream();
    let mut text = String::new();
    while text.matches("data: ").count() < 3 {
        text.push_str(&String::from_utf8_lossy(&s.next().await.unwrap().unwrap()));
    }
    (id, text, s)
}

#[tokio::test]
async fn a_stream_on_one_instance_is_stopped_through_the_other_and_billed() {
    let Some(p) = llm_pair("scaleout::a_stream_on_one_instance_is_stopped").await else {
        return;
    };
    p.a.grant("1");
    p.a.sim_config(json!({"stream_delay_ms": 200})).await;
    let (id, mut text, mut s) = stream_on_a(&p).await;
    assert_eq!(p.a.gw.gateway.streams.len(), 1);
    assert!(p.b.gateway.streams.is_empty(), "B does not hold it");
    let entry = redis::cmd("GET")
        .arg(format!("{}stream:{id}", p.prefix))
        .clone();
    let owner: Option<String> = p.redis(&entry).await;
    assert_eq!(owner, Some(p.a.user_id.to_string()), "registered in Redis");
    let p = &p;
    let stop = |key: String, url: String| async move { p.send(&key, "POST", &url, None).await };
    let stop_path = format!("/api/v1/completions/stop-stream/{id}");
    // Another user cannot stop it, through either instance.
    let (_, bob) = p.a.new_user("bob@example.com");
    envelope(&stop(bob.clone(), p.url_b(&stop_path)).await, 404);
    envelope(&stop(bob, p.url_a(&stop_path)).await, 404);
    assert_eq!(p.a.gw.gateway.streams.len(), 1, "still open");
    // Its owner stops it through B.
    let stopped_at = Instant::now();
    let a = stop(p.a.key.clone(), p.url_b(&stop_path)).await;
    a.expect(200);
    assert_eq!(a.json, json!({"success": true}));
    while let Some(c) = s.next().await {
        text.push_str(&String::from_utf8_lossy(&c.unwrap()));
    }
    assert!(
        stopped_at.elapsed() < Duration::from_secs(1),
        "{:?}",
        stopped_at.elapsed()
    );
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    // Billed by A for what was streamed.
    let rows = p.a.wait_model_usage(1).await;
    assert_eq!(rows[0].ended, "stopped");
    assert!(
        rows[0].output_tokens >= 2 && rows[0].output_tokens < 50,
        "{:?}",
        rows[0]
    );
    let charged: Decimal =
        p.a.usage()
            .into_iter()
            .filter(|u| u.product == "sim/sim-gpt")
            .map(|u| u.charged)
            .sum();
    assert!(charged > Decimal::ZERO);
    assert_eq!(p.a.balance(), Decimal::ONE - charged);
    assert_eq!(p.a.store().held(p.a.user_id).unwrap(), Decimal::ZERO);
    // Stopped once: again through either instance is 404.
    envelope(&stop(p.a.key.clone(), p.url_b(&stop_path)).await, 404);
    envelope(&stop(p.a.key.clone(), p.url_a(&stop_path)).await, 404);
    // Its Redis entry goes with it.
    within(Duration::from_secs(2), "the entry is deleted", || async {
        p.redis::<Option<String>>(&entry).await.is_none()
    })
    .await;

    // A stream stopped through the instance holding it is claimed too:
    // a stop through the other instance is then a 404.
    let (id, _, s) = stream_on_a(p).await;
    let stop_path = format!("/api/v1/completions/stop-stream/{id}");
    stop(p.a.key.clone(), p.url_a(&stop_path)).await.expect(200);
    envelope(&stop(p.a.key.clone(), p.url_b(&stop_path)).await, 404);
    drop(s);
    // An unknown id is 404 on both.
    envelope(
        &stop(
            p.a.key.clone(),
            p.url_b("/api/v1/completions/stop-stream/strm_nope"),
        )
        .await,
        404,
    );
}

/// The id of the only key of the env's user (through instance A), and an
/// access token of that user.
async fn key_id_and_token(p: &Pair) -> (i64, String) {
    let token = p.a.gw.gateway.auth.issue(p.a.user_id).access_token;
    let keys = p.send(&token, "GET", &p.url_a("/api/v1/keys"), None).await;
    keys.expect(200);
    (keys.json["data"][0]["id"].as_i64().unwrap(), token)
}

#[tokio::test]
async fn a_key_revoked_on_one_instance_is_refused_by_the_other_within_a_second() {
    let Some(p) = Pair::start("scaleout::a_key_revoked", |_| {}).await else {
        return;
    };
    let key = p.a.key.clone();
    // B has looked the key up: cached for 30 s.
    p.send(&key, "GET", &p.url_b(VOICE), None).await.expect(200);
    let (id, token) = key_id_and_token(&p).await;
    p.send(
        &token,
        "DELETE",
        &p.url_a(&format!("/api/v1/keys/{id}")),
        None,
    )
    .await
    .expect(200);
    within(
        Duration::from_secs(1),
        "B refuses the revoked key",
        || async {
            let a = p.send(&key, "GET", &p.url_b(VOICE), None).await;
            a.status == 401 && a.detail() == "API key revoked"
        },
    )
    .await;
    p.send(&key, "GET", &p.url_a(VOICE), None).await.expect(401);
}

#[tokio::test]
async fn a_user_disabled_on_one_instance_is_refused_by_the_other_within_a_second() {
    let Some(p) = Pair::start("scaleout::a_user_disabled", |c| {
        c.accounts.admin_key = Some(ADMIN_KEY.into());
    })
    .await
    else {
        return;
    };
    let key = p.a.key.clone();
    p.send(&key, "GET", &p.url_b(VOICE), None).await.expect(200);
    let p = &p;
    let admin = |what: &'static str| {
        let url = p.url_a(&format!("/api/v1/admin/users/{}/{what}", p.a.user_id));
        async move {
            p.a.client
                .post(url)
                .header("x-admin-key", ADMIN_KEY)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(admin("disable").await, 200);
    within(
        Duration::from_secs(1),
        "B refuses the disabled user",
        || async { p.send(&key, "GET", &p.url_b(VOICE), None).await.status == 403 },
    )
    .await;
    assert_eq!(admin("enable").await, 200);
    within(
        Duration::from_secs(1),
        "B serves the enabled user",
        || async { p.send(&key, "GET", &p.url_b(VOICE), None).await.status == 200 },
    )
    .await;
}

#[tokio::test]
async fn a_key_revoked_with_the_cli_is_refused_by_running_instances_at_once() {
    let Some(p) = Pair::start("scaleout::a_key_revoked_with_the_cli", |_| {}).await else {
        return;
    };
    let key = p.a.key.clone();
    for url in [p.url_a(VOICE), p.url_b(VOICE)] {
        p.send(&key, "GET", &url, None).await.expect(200);
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(["keys", "revoke", "--key", &key])
        .env_clear()
        .envs(p.a.dir.gateway_env())
        .env("GATEWAY_REDIS_URL", &p.redis_url)
        .env("GATEWAY_REDIS_PREFIX", &p.prefix)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("running instances told"), "{stderr}");
    for url in [p.url_a(VOICE), p.url_b(VOICE)] {
        within(
            Duration::from_secs(1),
            "the revoked key is refused",
            || async { p.send(&key, "GET", &url, None).await.status == 401 },
        )
        .await;
    }
}

#[tokio::test]
async fn a_resource_deleted_on_one_instance_is_forgotten_by_the_other() {
    let Some(p) = Pair::start("scaleout::a_resource_deleted", |_| {}).await else {
        return;
    };
    let key = p.a.key.clone();
    let project = p
        .send(
            &key,
            "POST",
            &p.url_a("/api/v1/voice/projects"),
            Some(json!({"fields": {"name": "shared"}})),
        )
        .await
        .expect(200)
        .json["item"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let item = format!("/api/v1/voice/projects/{project}");
    // B has looked its owner up (cached for 30 s).
    p.send(&key, "GET", &p.url_b(&item), None).await.expect(200);
    p.send(&key, "DELETE", &p.url_a(&item), None)
        .await
        .expect(200);
    // B reads the owner again: 404 with no upstream call (a stale owner
    // would have sent the GET upstream).
    within(Duration::from_secs(1), "B forgets the owner", || async {
        p.a.clear_sim_log().await;
        let a = p.send(&key, "GET", &p.url_b(&item), None).await;
        a.status == 404 && p.a.sim_requests().await.is_empty()
    })
    .await;
}

#[tokio::test]
async fn with_redis_unreachable_requests_still_pass() {
    // Accepts connections (the kernel's backlog) and never answers: the
    // worst case, a Redis that times out rather than refuses.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}", silent.local_addr().unwrap());
    let env = Env::with(|c| {
        c.redis =
            Some(runtime::cluster::RedisConfig::parse(&url, Some(&fresh_prefix("down"))).unwrap());
        c.rate_limits = runtime::ratelimit::Limits::parse(Some("tts=1/h")).unwrap();
    })
    .await;
    let start = Instant::now();
    for _ in 0..5 {
        env.get("/tts/voices/stock-voice-1").await.expect(200);
    }
    // One check waits out the time-out (250 ms); then the store rests.
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    assert!(env.gw.gateway.limiter.store_failures() >= 5);
    let cluster = env.gw.gateway.cluster.as_ref().unwrap();
    assert!(!cluster.bus_connected());
    // A revoke still takes effect at once on this instance.
    let token = env.gw.gateway.auth.issue(env.user_id).access_token;
    let keys = env
        .call_as(&token, "GET", &env.url("/api/v1/keys"), None)
        .await;
    let id = keys.json["data"][0]["id"].as_i64().unwrap();
    env.call_as(
        &token,
        "DELETE",
        &env.url(&format!("/api/v1/keys/{id}")),
        None,
    )
    .await
    .expect(200);
    env.get("/tts/voices/stock-voice-1").await.expect(401);
    drop(silent);
}

#[tokio::test]
async fn a_reconnected_instance_forgets_what_it_may_have_missed() {
    let test = "scaleout::a_reconnected_instance_forgets";
    let Some(url) = redis_or_skip(test).await else {
        return;
    };
    let partition = Partition::to(&url).await;
    let b_url = partition.url.clone();
    let Some(p) = Pair::on_sim_b(
        test,
        start_sim().await,
        |_| {},
        |c| {
            c.redis.as_mut().unwrap().url = b_url;
        },
    )
    .await
    else {
        return;
    };
    let key = p.a.key.clone();
    p.send(&key, "GET", &p.url_b(VOICE), None).await.expect(200);
    let b_bus = p.b.gateway.cluster.clone().unwrap();
    // B loses Redis: it notices (the connection ends) and keeps serving.
    partition.cut(true);
    within(Duration::from_secs(5), "B sees the bus down", || async {
        !b_bus.bus_connected()
    })
    .await;
    let (id, token) = key_id_and_token(&p).await;
    p.send(
        &token,
        "DELETE",
        &p.url_a(&format!("/api/v1/keys/{id}")),
        None,
    )
    .await
    .expect(200);
    // B missed the message: its cached lookup stands (at most 30 s, as
    // on a single instance).
    tokio::time::sleep(Duration::from_millis(200)).await;
    p.send(&key, "GET", &p.url_b(VOICE), None).await.expect(200);
    // Back: B resubscribes and, having perhaps missed messages, forgets
    // its cached lookups.
    partition.cut(false);
    within(Duration::from_secs(10), "B's bus reconnects", || async {
        b_bus.bus_connected()
    })
    .await;
    let a = p.send(&key, "GET", &p.url_b(VOICE), None).await;
    a.expect(401);
    assert_eq!(a.detail(), "API key revoked");
}

#[tokio::test]
async fn a_claimed_stream_stops_even_if_the_bus_message_is_lost() {
    let Some(p) = llm_pair("scaleout::a_claimed_stream_stops_even_if").await else {
        return;
    };
    p.a.grant("1");
    p.a.sim_config(json!({"stream_delay_ms": 300})).await;
    let (id, mut text, mut s) = stream_on_a(&p).await;
    // Claimed as another instance would, without its message on the bus.
    let claimed: i64 = p
        .redis(
            redis::cmd("EVAL")
                .arg(runtime::streams::CLAIM)
                .arg(1)
                .arg(format!("{}stream:{id}", p.prefix))
                .arg(p.a.user_id.to_string()),
        )
        .await;
    assert_eq!(claimed, 1);
    // The holder's next refresh (every 5 s) finds it claimed.
    let start = Instant::now();
    while let Some(c) = s.next().await {
        text.push_str(&String::from_utf8_lossy(&c.unwrap()));
    }
    assert!(
        start.elapsed() < runtime::streams::REFRESH + Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert_eq!(p.a.wait_model_usage(1).await[0].ended, "stopped");
}
