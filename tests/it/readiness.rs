//! Readiness (#46): `GET /readyz` is 200 when the database, Redis (when
//! configured) and the object store answer; 503 naming each that does
//! not; 503 `draining` as soon as a graceful shutdown has begun, while the
//! instance still serves (`GATEWAY_SHUTDOWN_DELAY_SECS`). `/healthz` stays
//! the liveness probe.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::postgres::PgServer;
use crate::harness::*;

async fn readyz(env: &Env) -> Answer {
    Answer::from(env.client.get(env.url("/readyz")).send().await.unwrap()).await
}

#[tokio::test]
async fn ready_then_draining_once_a_shutdown_begins_while_it_still_serves() {
    let mut env = Env::with(|c| c.shutdown_delay = Duration::from_secs(3)).await;
    let a = readyz(&env).await;
    a.expect(200);
    assert_eq!(
        a.json,
        json!({"status": "ready", "checks": {"database": "ok", "redis": "not configured", "objects": "ok"}})
    );
    env.gw.begin_stop();
    let start = Instant::now();
    loop {
        let a = readyz(&env).await;
        if a.status == 503 {
            assert_eq!(a.json, json!({"status": "draining"}));
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(2), "never draining");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Still serving during the delay: liveness and requests.
    let h = env.client.get(env.url("/healthz")).send().await.unwrap();
    assert_eq!(h.status(), 200);
    let a = env
        .call_as(&env.key, "GET", &env.url("/api/v1/models"), None)
        .await;
    a.expect(200);
}

#[tokio::test]
async fn unready_naming_an_unreachable_redis() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let env = Env::with(move |c| {
        c.redis = Some(
            runtime::cluster::RedisConfig::parse(&format!("redis://127.0.0.1:{port}"), None)
                .unwrap(),
        );
    })
    .await;
    let a = readyz(&env).await;
    a.expect(503);
    assert_eq!(a.json["failing"], json!(["redis"]), "{}", a.text);
    assert_eq!(a.json["checks"]["database"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unready_while_postgresql_is_stopped_and_ready_when_it_is_back() {
    let Some(pg) = PgServer::start("readyz") else {
        return;
    };
    let url = pg.url();
    let env = Env::with(move |c| c.database_url = Some(url)).await;
    readyz(&env).await.expect(200);
    pg.stop();
    let a = readyz(&env).await;
    a.expect(503);
    assert_eq!(a.json["failing"], json!(["database"]), "{}", a.text);
    assert!(a.json["checks"]["database"]
        .as_str()
        .unwrap()
        .starts_with("unavailable"));
    pg.start_again();
    let start = Instant::now();
    while readyz(&env).await.status != 200 {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "never ready again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
