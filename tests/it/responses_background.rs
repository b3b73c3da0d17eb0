//! Background responses of the Responses API (`background: true`) over
//! HTTP: answered `queued` at once and run inside the gateway, polled to
//! their end and billed once; re-attached to mid-way from a sequence
//! number; cancelled mid-way, billed what was produced; and a restart of
//! the instance running one marks it failed, its hold released, nothing
//! charged.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{config_for, env_with_providers, Env};

/// The instance id of the gateways here (a restart takes it back).
const INSTANCE: &str = "background-responses";

/// A gateway on [`crate::responses`]' providers, with credit.
async fn env() -> Env {
    let env = env_with_providers(crate::responses::responses_toml, |c| {
        c.instance_id = Some(INSTANCE.into());
    })
    .await;
    env.grant("5");
    env
}

/// Starts a background response on `model`; its `queued` answer.
async fn start(env: &Env, model: &str) -> Value {
    let a = env
        .api(
            "/responses",
            json!({"model": model, "input": "Tell me a long story", "background": true}),
        )
        .await;
    a.expect(200);
    assert_eq!(a.json["status"], "queued", "{}", a.text);
    assert_eq!(a.json["background"], true, "{}", a.text);
    a.json.clone()
}

/// `GET /responses/{id}` (and a query) with the env's key.
async fn get(env: &Env, id: &str, query: &str) -> crate::harness::Answer {
    let url = env.url(&format!("/api/v1/responses/{id}{query}"));
    env.call_as(&env.key, "GET", &url, None).await
}

/// Polls response `id` until `done` holds of it (10 s at most).
async fn poll(env: &Env, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let a = get(env, id, "").await;
        a.expect(200);
        if done(&a.json) {
            return a.json;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "stuck: {}",
            a.text
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Response `id`'s kept events (the database's count).
async fn kept_events(env: &Env, id: &str) -> usize {
    let sql =
        format!("SELECT CAST(COUNT(*) AS TEXT) FROM response_events WHERE response_id = '{id}'");
    crate::harness::own_query(env, &sql).await[0][0]
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_background_response_runs_to_its_end_and_is_billed_once() {
    let env = env().await;
    let models = [
        "oai/gpt-native",
        "plain/gpt-plain",
        "claude/claude-sim",
        "gem/gemini-sim",
    ];
    for (i, model) in models.into_iter().enumerate() {
        let queued = start(&env, model).await;
        let id = queued["id"].as_str().unwrap();
        let done = poll(&env, id, |v| v["status"] == "completed").await;
        assert_eq!(done["id"], id, "{model}");
        let text = done["output"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["type"] == "message");
        assert!(text.is_some(), "{model}: {done}");
        let rows = env.wait_model_usage(i + 1).await;
        let m = crate::harness::assert_charge_is_four_counts(&env, i).await;
        assert_eq!(m.model, model, "{rows:?}");
        assert_eq!(
            m.output_tokens,
            done["usage"]["output_tokens"].as_i64().unwrap(),
            "{model}"
        );
        let usage = env.usage();
        let billed: Vec<_> = usage
            .iter()
            .filter(|u| u.request_id == m.request_id)
            .collect();
        assert_eq!(billed.len(), 1, "billed once: {usage:?}");
        let cost = done["usage"]["cost"].to_string();
        assert_eq!(cost, format!("{:.8}", billed[0].charged), "{model}");
        assert!(kept_events(&env, id).await > 4, "{model}");
    }
    env.wait_no_holds().await;
    // The native run went to the provider as a stream of the gateway's.
    let reqs = env.sim_requests().await;
    let native = reqs.iter().find(|r| r["path"] == "/v1/responses").unwrap();
    assert_eq!(native["json"]["stream"], true);
    assert!(native["json"].get("background").is_none(), "{native}");
}

#[tokio::test]
async fn a_client_reattaches_to_a_running_response_from_a_sequence_number() {
    let env = env().await;
    env.sim_config(json!({"stream_delay_ms": 60})).await;
    let queued = start(&env, "plain/gpt-plain").await;
    let id = queued["id"].as_str().unwrap().to_owned();
    poll(&env, &id, |v| v["status"] == "in_progress").await;
    let start = Instant::now();
    while kept_events(&env, &id).await < 5 {
        assert!(start.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let a = get(&env, &id, "?stream=true&starting_after=3").await;
    a.expect(200);
    let seqs: Vec<i64> = a
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| {
            serde_json::from_str::<Value>(d).unwrap()["sequence_number"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs.first(), Some(&4), "{}", a.text);
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert!(a.text.contains("event: response.completed"), "{}", a.text);
    let done = poll(&env, &id, |v| v["status"] == "completed").await;
    assert_eq!(done["usage"]["output_tokens"], 12);
}

#[tokio::test]
async fn a_cancelled_response_is_billed_what_was_produced() {
    let env = env().await;
    env.sim_config(json!({"stream_delay_ms": 150})).await;
    let queued = start(&env, "plain/gpt-plain").await;
    let id = queued["id"].as_str().unwrap().to_owned();
    let start = Instant::now();
    while kept_events(&env, &id).await < 6 {
        assert!(start.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let url = env.url(&format!("/api/v1/responses/{id}/cancel"));
    let a = env.call_as(&env.key, "POST", &url, None).await;
    a.expect(200);
    assert_eq!(a.json["status"], "cancelled", "{}", a.text);
    let rows = env.wait_model_usage(1).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(
        rows[0].output_tokens > 0 && rows[0].output_tokens < 12,
        "{rows:?}"
    );
    let charged: Vec<_> = env
        .usage()
        .into_iter()
        .filter(|u| u.route_id == "responses")
        .collect();
    assert_eq!(charged.len(), 1, "{charged:?}");
    env.wait_no_holds().await;
    assert_eq!(poll(&env, &id, |_| true).await["status"], "cancelled");
    // Cancelling again answers it as it is.
    let again = env.call_as(&env.key, "POST", &url, None).await;
    again.expect(200);
    assert_eq!(again.json["status"], "cancelled");
}

#[tokio::test]
async fn a_restart_during_a_run_marks_it_failed_and_charges_nothing() {
    let env = env().await;
    env.sim_config(json!({"stream_delay_ms": 2000})).await;
    let balance = env.balance();
    let queued = start(&env, "plain/gpt-plain").await;
    let id = queued["id"].as_str().unwrap().to_owned();
    poll(&env, &id, |v| v["status"] == "in_progress").await;
    let mut config = config_for(&env.sim, &env.dir);
    config.providers_file = Some(config.data_dir.join("providers.toml"));
    config.instance_id = Some(INSTANCE.into());
    let env = env.restart(config).await;
    let failed = poll(&env, &id, |v| v["status"] == "failed").await;
    assert_eq!(failed["error"]["code"], "server_error", "{failed}");
    env.wait_no_holds().await;
    assert_eq!(env.balance(), balance);
    assert!(env
        .usage()
        .iter()
        .all(|u| u.route_id != "responses" || u.charged.is_zero()));
}
