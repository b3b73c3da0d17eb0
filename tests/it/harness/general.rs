//! Fixtures of the general gateway's tests (area B): the test providers
//! file (with or without media models), a gateway or a [`Pair`] serving it,
//! the area's error envelope, and `Env` helpers of its routes.

use std::time::{Duration, Instant};

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
