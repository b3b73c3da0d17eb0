//! Audit records (DESIGN: records committed before the answer): one per
//! successful voice request with user, route, method, path, upstream status,
//! latency, request id and time; none for failures.

use crate::harness::*;

#[tokio::test]
async fn success_writes_one_complete_audit_row() {
    let env = Env::start().await;
    let a = env.get("/tts/voices/stock-voice-1").await;
    a.expect(200);
    let request_id = a.header("x-request-id").unwrap().to_owned();
    // The row is durable by the time the answer arrived: read it right away.
    let rows = env.audit();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r.request_id, request_id);
    assert_eq!(r.user_id, Some(env.user_id));
    assert_eq!(r.route_id, "tts.voices.get");
    assert_eq!(r.method, "GET");
    assert_eq!(r.path, "/api/v1/voice/tts/voices/stock-voice-1");
    assert_eq!((r.status, r.upstream_status), (200, Some(200)));
    assert!(chrono_like(&r.created_at), "{}", r.created_at);
}

fn chrono_like(s: &str) -> bool {
    s.len() >= 20 && s.as_bytes()[4] == b'-' && s.ends_with('Z')
}

#[tokio::test]
async fn concurrent_successes_are_all_recorded() {
    let env = Env::start().await;
    let mut tasks = Vec::new();
    for _ in 0..40 {
        let (client, url, key) = (
            env.client.clone(),
            env.voice("/tts/voices"),
            env.key.clone(),
        );
        tasks.push(tokio::spawn(async move {
            client
                .get(url)
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    let rows = env.audit();
    assert_eq!(rows.len(), 40);
    let mut ids: Vec<_> = rows.iter().map(|r| r.request_id.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 40, "request ids are unique");
}
