//! Fixtures of the general gateway's tests (area B): the test providers
//! file (with or without media models), a gateway or a [`Pair`] serving it,
//! the area's error envelope, and `Env` helpers of its routes.

use std::time::{Duration, Instant};

use runtime::store::{History, Ledger};
use rust_decimal::Decimal;
use serde_json::{json, Value};

use super::{start_sim, Answer, Env, Pair, PROVIDER_KEY};

/// The environment variable the test providers file names for the key.
pub const LLM_KEY_VAR: &str = "GW_IT_SIM_LLM_KEY";

/// The test providers file for a simulator's `/v1`.
pub fn providers_toml(llm_url: &str) -> String {
    format!(
        r#"
[[provider]]
id = "sim"
kind = "openai"
base_url = "{llm_url}"
api_key_env = "{LLM_KEY_VAR}"

[[provider.model]]
id = "sim-gpt"
type = "chat"
context_window = 8192
aliases = ["gpt"]
input_per_mtok = "2.00"
output_per_mtok = "8.00"

[[provider.model]]
id = "sim-instruct"
type = "completion"
context_window = 4096
input_per_mtok = "1.00"
output_per_mtok = "2.00"

[[provider.model]]
id = "sim-embed"
type = "embedding"
input_per_mtok = "0.10"

[[provider.model]]
id = "sim-image"
type = "image"
per_image = "0.04"
"#
    )
}

/// A gateway on a simulator with the test providers file.
pub async fn llm_env(f: impl FnOnce(&mut runtime::config::Config)) -> Env {
    env_with_providers(providers_toml, f).await
}

/// A gateway on a simulator with the providers file `toml_for(llm_url)`.
pub async fn env_with_providers(
    toml_for: impl FnOnce(&str) -> String,
    f: impl FnOnce(&mut runtime::config::Config),
) -> Env {
    std::env::set_var(LLM_KEY_VAR, PROVIDER_KEY);
    let sim = start_sim().await;
    let toml = toml_for(&sim.llm_url());
    Env::on_sim(sim, move |c| {
        let path = c.data_dir.join("providers.toml");
        std::fs::write(&path, toml).unwrap();
        c.providers_file = Some(path);
        f(c);
    })
    .await
}

impl Env {
    /// `POST /api/v1` + `path` with the env's key.
    pub async fn api(&self, path: &str, body: Value) -> Answer {
        self.call_as(
            &self.key,
            "POST",
            &self.url(&format!("/api/v1{path}")),
            Some(body),
        )
        .await
    }

    pub async fn sim_config(&self, v: Value) {
        let r = self
            .client
            .post(format!("{}/__sim/config", self.sim.url()))
            .json(&v)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }

    /// Starts a streamed chat; the response with its headers, unread.
    pub async fn stream_chat(&self, key: &str, body: Value) -> reqwest::Response {
        self.client
            .post(self.url("/api/v1/chat/completions"))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// Waits until the user holds no credit (a failed request's hold is
    /// released in the background as it fails).
    pub async fn wait_no_holds(&self) {
        let start = Instant::now();
        while self.store().held(self.user_id).unwrap() != Decimal::ZERO {
            assert!(start.elapsed() < Duration::from_secs(5), "a hold stayed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until the model-usage rows number `n`.
    pub async fn wait_model_usage(&self, n: usize) -> Vec<runtime::store::ModelUsageRow> {
        let start = Instant::now();
        loop {
            let rows = self.store().model_usage_rows().unwrap();
            if rows.len() >= n || start.elapsed() > Duration::from_secs(10) {
                return rows;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Asserts that the provider's first call carried the caller's own key
/// `byok` and that the key was not forwarded in the body.
pub async fn assert_called_with_byok(env: &Env, byok: &str) {
    let reqs = env.sim_requests().await;
    assert_eq!(
        reqs[0]["headers"]["authorization"],
        format!("Bearer {byok}")
    );
    assert!(reqs[0]["json"].get("byok_api_key").is_none());
}

/// Once `n` model calls are recorded: all were BYOK, and nothing was
/// charged, debited or left on a balance that had none.
pub async fn assert_byok_billed_nothing(env: &Env, n: usize) {
    let rows = env.wait_model_usage(n).await;
    assert!(rows.iter().all(|r| r.byok));
    assert!(env.usage().iter().all(|u| u.charged.is_zero()));
    assert_eq!(env.balance(), Decimal::ZERO);
    assert!(env.store().ledger(env.user_id).unwrap().is_empty());
}

/// Asserts a stream's answer started: 200, server-sent events, an `X-Stream-Id`.
#[track_caller]
pub fn assert_stream_started(r: &reqwest::Response) {
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let id = r.headers()["x-stream-id"].to_str().unwrap();
    assert!(id.starts_with("strm_"), "{id}");
}

/// Reads a streamed answer until `marker` has come `n` times, then hangs
/// up (drops the connection); what was read.
pub async fn hang_up_after(r: reqwest::Response, marker: &str, n: usize) -> String {
    use futures_util::StreamExt;
    let mut s = r.bytes_stream();
    let mut text = String::new();
    while text.matches(marker).count() < n {
        text.push_str(&String::from_utf8_lossy(&s.next().await.unwrap().unwrap()));
    }
    text
}

/// The one model-usage row of a stream the client hung up on, its output
/// tokens at least `min` and below `max`.
pub async fn hung_up_row(env: &Env, row: usize, min: i64, max: i64) {
    let rows = env.wait_model_usage(row + 1).await;
    assert_eq!(rows.len(), row + 1, "no usage recorded after the hang-up");
    assert_eq!(rows[row].ended, "disconnected");
    let out = rows[row].output_tokens;
    assert!(out >= min && out < max, "{:?}", rows[row]);
}

/// Asserts format 2 with `status`; returns the message.
#[track_caller]
pub fn envelope(a: &Answer, status: u16) -> String {
    a.expect(status);
    assert_eq!(a.json["success"], json!(false), "{}", a.text);
    assert_eq!(a.json["data"], json!(""), "{}", a.text);
    assert!(a.json["request_id"].as_str().unwrap().starts_with("res_"));
    a.json["message"].as_str().unwrap().to_owned()
}

/// The test providers file plus media models.
pub fn media_toml(llm_url: &str) -> String {
    format!(
        r#"{}
[[provider.model]]
id = "sim-video"
type = "video"
per_second = "0.10"

[[provider.model]]
id = "sim-tts"
type = "tts"
per_second = "0.01"

[[provider.model]]
id = "sim-whisper"
type = "stt"
per_second = "0.006"
"#,
        providers_toml(llm_url)
    )
}

pub async fn media_env() -> Env {
    media_env_with(|_| {}).await
}

pub async fn media_env_with(f: impl FnOnce(&mut runtime::config::Config)) -> Env {
    env_with_providers(media_toml, f).await
}

/// Asserts that nothing was charged, nothing is held and no media stored.
pub async fn nothing_charged(env: &Env, balance: Decimal) {
    env.wait_no_holds().await;
    assert_eq!(env.balance(), balance);
    assert!(
        env.usage().iter().all(|u| u.charged == Decimal::ZERO),
        "{:?}",
        env.usage()
    );
}

/// A pair serving the test providers file.
pub async fn llm_pair(test: &str) -> Option<Pair> {
    llm_pair_with(test, |_| {}).await
}

/// A pair serving the test providers file, each configuration adjusted by `f`.
pub async fn llm_pair_with(test: &str, f: impl Fn(&mut runtime::config::Config)) -> Option<Pair> {
    std::env::set_var(LLM_KEY_VAR, PROVIDER_KEY);
    let sim = start_sim().await;
    let toml = providers_toml(&sim.llm_url());
    Pair::on_sim(test, sim, move |c| {
        let path = c.data_dir.join("providers.toml");
        std::fs::write(&path, &toml).unwrap();
        c.providers_file = Some(path);
        f(c);
    })
    .await
}

/// The test providers file plus native providers on the simulator: `claude`
/// (`kind = "anthropic"`) and `gem` (`kind = "gemini"`), with cache prices
/// and a 10 % markup.
pub fn native_toml(llm_url: &str) -> String {
    let base = llm_url.trim_end_matches("/v1");
    format!(
        r#"{}
[[provider]]
id = "claude"
kind = "anthropic"
base_url = "{base}"
api_key_env = "{LLM_KEY_VAR}"
markup_pct = "10"

[[provider.model]]
id = "claude-sim"
type = "chat"
max_output_tokens = 64
input_per_mtok = "3.00"
output_per_mtok = "15.00"
cache_read_per_mtok = "0.30"
cache_write_per_mtok = "3.75"

[[provider.model]]
id = "claude-instruct"
type = "completion"
input_per_mtok = "3.00"
output_per_mtok = "15.00"

[[provider]]
id = "gem"
kind = "gemini"
base_url = "{base}"
api_key_env = "{LLM_KEY_VAR}"
markup_pct = "10"

[[provider.model]]
id = "gemini-sim"
type = "chat"
input_per_mtok = "1.25"
output_per_mtok = "10.00"
cache_read_per_mtok = "0.31"

[[provider.model]]
id = "gemini-embed"
type = "embedding"
input_per_mtok = "0.15"
"#,
        providers_toml(llm_url)
    )
}

/// A gateway on a simulator with [`native_toml`].
pub async fn native_env() -> Env {
    env_with_providers(native_toml, |_| {}).await
}

/// Prices per million tokens of a native test model: input, output, cache
/// read, cache write (as [`native_toml`] says).
pub fn native_prices(model: &str) -> [Decimal; 4] {
    let d = |s: &str| s.parse::<Decimal>().unwrap();
    match model {
        "claude/claude-sim" => [d("3.00"), d("15.00"), d("0.30"), d("3.75")],
        "claude/claude-instruct" => [d("3.00"), d("15.00"), d("3.00"), d("3.00")],
        "gem/gemini-sim" => [d("1.25"), d("10.00"), d("0.31"), d("1.25")],
        // tests/it/responses.rs's: an `openai` provider serving the
        // Responses API itself, and one without it.
        "oai/gpt-native" => [d("1.25"), d("10.00"), d("0.125"), d("1.25")],
        "plain/gpt-plain" => [d("2.00"), d("8.00"), d("2.00"), d("2.00")],
        other => panic!("no prices for {other}"),
    }
}

/// Asserts that the usage record of model-usage row `row` charged exactly
/// its four token counts at the model's four prices, with the 10 % markup,
/// to the 8th decimal; returns the row.
pub async fn assert_charge_is_four_counts(env: &Env, row: usize) -> runtime::store::ModelUsageRow {
    let rows = env.wait_model_usage(row + 1).await;
    let m = rows[row].clone();
    let [pi, po, pr, pw] = native_prices(&m.model);
    let n = |v: i64| Decimal::from(v);
    let raw = (n(m.input_tokens) * pi
        + n(m.output_tokens) * po
        + n(m.cache_read_tokens) * pr
        + n(m.cache_write_tokens) * pw)
        / Decimal::from(1_000_000);
    let expected = runtime::billing::with_markup(raw, Decimal::from(10));
    let start = Instant::now();
    let usage = loop {
        let u = env.usage();
        if let Some(u) = u.into_iter().find(|u| u.request_id == m.request_id) {
            break u;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no usage record of {m:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(usage.charged, expected.round_dp(8), "{m:?} {usage:?}");
    assert_eq!(
        usage.quantity,
        n(m.input_tokens + m.output_tokens + m.cache_read_tokens + m.cache_write_tokens)
    );
    m
}
