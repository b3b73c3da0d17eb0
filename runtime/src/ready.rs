//! `GET /readyz`: whether this instance can serve — the readiness probe a
//! load balancer asks (`/healthz` stays the liveness probe: the process
//! answers).
//!
//! 200 when the database, Redis (when configured) and the object store
//! each answer within [`PROBE_TIMEOUT`]; 503 naming each that does not;
//! 503 `draining` as soon as a graceful shutdown has begun (the instance
//! still serves during `GATEWAY_SHUTDOWN_DELAY_SECS`, so that a balancer
//! that probes it stops sending before the drain).

use std::sync::atomic::Ordering;
use std::time::Duration;

use http::{header, HeaderValue, StatusCode};
use serde_json::{json, Map, Value};

use crate::router::Response;
use crate::services::Gateway;
use gateway_base::body;

/// How long each dependency has to answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The readiness answer (see the module docs).
pub async fn answer(gw: &Gateway) -> Response {
    if gw.draining.load(Ordering::Relaxed) {
        return reply(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "draining"}),
        );
    }
    let store = gw.store.clone();
    let database = probe(async move {
        store
            .blocking(|s| s.ping())
            .await
            .map_err(|e| e.to_string())
    });
    let redis = async {
        match &gw.cluster {
            Some(c) => Some(probe(c.ping()).await),
            None => None,
        }
    };
    let objects = probe(async { gw.objects.ready().await.map_err(|e| e.to_string()) });
    let (database, redis, objects) = tokio::join!(database, redis, objects);
    let mut checks = Map::new();
    let mut failing = Vec::new();
    for (name, r) in [
        ("database", Some(database)),
        ("redis", redis),
        ("objects", Some(objects)),
    ] {
        let v = match r {
            None => json!("not configured"),
            Some(Ok(())) => json!("ok"),
            Some(Err(e)) => {
                failing.push(name);
                json!(format!("unavailable: {e}"))
            }
        };
        checks.insert(name.to_owned(), v);
    }
    match failing.is_empty() {
        true => reply(StatusCode::OK, json!({"status": "ready", "checks": checks})),
        false => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "unready", "failing": failing, "checks": Value::Object(checks)}),
        ),
    }
}

async fn probe(f: impl std::future::Future<Output = Result<(), String>>) -> Result<(), String> {
    match tokio::time::timeout(PROBE_TIMEOUT, f).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {} s", PROBE_TIMEOUT.as_secs())),
    }
}

fn reply(status: StatusCode, v: Value) -> Response {
    let mut r = body::json(status, &v);
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
