//! `gateway demo`: the product on its embedded default, in one command.
//!
//! Starts the provider simulator in-process on a free loopback port, then
//! the gateway on `GATEWAY_ADDR` (default 127.0.0.1:8080; a free port if that
//! one is taken) with a fresh data directory under the system temp dir and
//! the simulator as its upstream; creates a user, an API key and a token
//! pair, and prints curl commands that work as printed. Runs until Ctrl-C.

use std::net::SocketAddr;

use runtime::config::Config;
use runtime::store::{Accounts, Ledger, Store};
use tokio::net::TcpListener;

/// Upstream key the demo's simulator expects and its gateway sends.
const DEMO_PROVIDER_KEY: &str = "demo-provider-key";

/// Stripe's secret key and webhook secret between the demo's gateway and
/// the simulator's Stripe side (test-mode shapes, no real Stripe).
const DEMO_STRIPE_KEY: &str = "sk_test_demo_gateway";
const DEMO_STRIPE_WEBHOOK_SECRET: &str = "whsec_demo_gateway";

/// The demo's inbound webhook secret (`PROVIDER_WEBHOOK_SECRET` when set):
/// without one the gateway refuses every inbound webhook.
const DEMO_PROVIDER_WEBHOOK_SECRET: &str = "demo-provider-webhook-secret";

/// Variable holding the provider key named by the demo's providers file.
const DEMO_LLM_KEY_VAR: &str = "DEMO_LLM_KEY";

/// The demo's providers file: the simulator's models, through each kind of
/// adapter: `sim` (`openai`, its `/v1`), `claude` (`anthropic`, its
/// `/v1/messages`), `gem` (`gemini`, its `/v1beta`) and the voice vendors
/// `eleven`, `dg` and `cart`, with the `narrator` voice and a route over
/// two of them.
fn demo_providers(llm_url: &str) -> String {
    let base = llm_url.trim_end_matches("/v1");
    format!(
        r#"[[provider]]
id = "sim"
kind = "openai"
base_url = "{llm_url}"
api_key_env = "{DEMO_LLM_KEY_VAR}"

[[provider.model]]
id = "sim-gpt"
type = "chat"
context_window = 8192
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
id = "gpt-realtime"
type = "realtime"
input_per_mtok = "4.00"
output_per_mtok = "16.00"
input_audio_per_mtok = "32.00"
output_audio_per_mtok = "64.00"
cache_read_per_mtok = "0.40"

[[provider.model]]
id = "sim-image"
type = "image"
per_image = "0.04"

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

[[provider]]
id = "claude"
kind = "anthropic"
base_url = "{base}"
api_key_env = "{DEMO_LLM_KEY_VAR}"

[[provider.model]]
id = "claude-sim"
type = "chat"
max_output_tokens = 1024
input_per_mtok = "3.00"
output_per_mtok = "15.00"
cache_read_per_mtok = "0.30"
cache_write_per_mtok = "3.75"

[[provider]]
id = "gem"
kind = "gemini"
base_url = "{base}"
api_key_env = "{DEMO_LLM_KEY_VAR}"

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
{}"#,
        voice_vendors(base)
    )
}

/// The demo's voice vendors: ElevenLabs, Deepgram and Cartesia on the
/// simulator, the `narrator` voice mapped for each, and the `narration`
/// route from ElevenLabs to Cartesia.
fn voice_vendors(base: &str) -> String {
    format!(
        r#"
[[provider]]
id = "eleven"
kind = "elevenlabs"
base_url = "{base}"
api_key_env = "{DEMO_LLM_KEY_VAR}"

[[provider.model]]
id = "eleven_flash_v2_5"
type = "tts"
per_1k_chars = "0.30"

[[provider.model]]
id = "scribe_v1"
type = "stt"
per_minute = "0.0067"

[[provider]]
id = "dg"
kind = "deepgram"
base_url = "{base}"
api_key_env = "{DEMO_LLM_KEY_VAR}"

[[provider.model]]
id = "aura-2-thalia-en"
type = "tts"
per_1k_chars = "0.030"

[[provider.model]]
id = "nova-3"
type = "stt"
per_minute = "0.0043"

[[provider]]
id = "cart"
kind = "cartesia"
base_url = "{base}"
api_key_env = "{DEMO_LLM_KEY_VAR}"

[[provider.model]]
id = "sonic-2"
type = "tts"
per_1k_chars = "0.05"

[[voice]]
name = "narrator"
eleven = "21m00Tcm4TlvDq8ikWAM"
cart = "694f9389-aac1-45b6-b726-9d9369183238"
dg = "aura-2-thalia-en"
sim = "alloy"

[[route]]
model = "narration"
strategy = "priority"
targets = [{{ model = "eleven/eleven_flash_v2_5" }}, {{ model = "cart/sonic-2" }}]
"#
    )
}

pub async fn run(routes: crate::Routes) -> Result<(), Box<dyn std::error::Error>> {
    let data_dir = std::env::temp_dir().join(format!(
        "gateway-demo-{}",
        chrono::Utc::now().format("%Y%m%d-%H%M%S")
    ));
    runtime::store::create_private_dir(&data_dir)?;

    let sim_listener = TcpListener::bind("127.0.0.1:0").await?;
    let sim = sim::start(
        sim_listener,
        sim::SimConfig {
            api_key: Some(DEMO_PROVIDER_KEY.to_owned()),
            ..Default::default()
        },
    )
    .await;

    let mut config = Config::from_env()?;
    config.data_dir = data_dir.clone();
    config.db_path = data_dir.join("gateway.db");
    config.provider_api_key = Some(DEMO_PROVIDER_KEY.to_owned());
    config.provider_base_url = sim.base_url();
    config.provider_synth_url = sim.synth_url();
    config.allow_private_fetch = true;
    if config.webhook_secret.is_none() {
        config.webhook_secret = Some(DEMO_PROVIDER_WEBHOOK_SECRET.to_owned());
    }
    // The general gateway: one provider, the simulator's OpenAI-compatible /v1.
    std::env::set_var(DEMO_LLM_KEY_VAR, DEMO_PROVIDER_KEY);
    let providers = data_dir.join("providers.toml");
    std::fs::write(&providers, demo_providers(&sim.llm_url()))?;
    config.providers_file = Some(providers);
    // Buying credits: the simulator speaks Stripe's side.
    config.stripe = runtime::stripe::StripeConfig {
        secret_key: Some(DEMO_STRIPE_KEY.to_owned()),
        webhook_secret: Some(DEMO_STRIPE_WEBHOOK_SECRET.to_owned()),
        api_base: Some(sim.url()),
    };

    let store = Store::open_at(&config.database())?;
    let user = store.create_user("demo@example.com", false)?;
    let (key_id, key) = runtime::auth::create_named_key(&store, user, Some("demo"), None)
        .map_err(|e| e.message())?;
    store.grant_credit(user, rust_decimal::Decimal::TEN, Some("demo credit"))?;
    drop(store);

    let listener = match TcpListener::bind(config.addr).await {
        Ok(l) => l,
        Err(_) => TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?,
    };
    let running = crate::start(routes, config, listener)?;
    let base = running.url();
    sim.shared().stripe.configure(
        Some(DEMO_STRIPE_KEY.to_owned()),
        Some(format!("{base}/api/v1/stripe/webhook")),
        Some(DEMO_STRIPE_WEBHOOK_SECRET.to_owned()),
    );
    // Access-token routes (`/keys`, `/auth/logout`) take a token, not a key.
    let tokens = running.gateway.auth.issue(user);
    tracing::info!("listening on {}", running.addr);

    print_welcome(&Welcome {
        base: &base,
        sim_url: &sim.url(),
        data_dir: &data_dir,
        user,
        key_id,
        key: &key,
        tokens: &tokens,
    });

    crate::signal::shutdown_signal().await;
    running.stop().await;
    drop(sim);
    Ok(())
}

/// What the demo's welcome names.
struct Welcome<'a> {
    base: &'a str,
    sim_url: &'a str,
    data_dir: &'a std::path::Path,
    user: i64,
    key_id: i64,
    key: &'a str,
    tokens: &'a runtime::auth::TokenPair,
}

/// Prints the demo's welcome: the key, the tokens and every call to try.
fn print_welcome(w: &Welcome<'_>) {
    println!(
        r#"
Gateway demo running on {base} (simulated voice provider at {sim_url})
Data directory: {data}

API key of the demo user (id {user}, 10.00 USD of credit; key id {key_id}):
  export KEY={key}

Access and refresh tokens of the same user (for the access-token routes,
/keys and /auth/logout; the access token expires in {ttl} s, and
POST /api/v1/auth/refresh {{"refresh_token": "$REFRESH"}} renews both):
  export TOKEN={access}
  export REFRESH={refresh}

Try:
  curl -s {base}/api/v1/voice/tts/voices -H "Authorization: Bearer $KEY"

  curl -s {base}/api/v1/voice/tts/voices/stock-voice-1 -H "Authorization: Bearer $KEY"

  curl -s {base}/api/v1/voice/tts/synthesize -H "Authorization: Bearer $KEY" \
-H 'Content-Type: application/json' \
-d '{{"voice_uuid": "stock-voice-1", "text": "Hello from the gateway", "output_format": "wav"}}'

  curl -s {base}/api/v1/models

  curl -s {base}/api/v1/chat/completions -H "Authorization: Bearer $KEY" \
-H 'Content-Type: application/json' \
-d '{{"model": "sim/sim-gpt", "messages": [{{"role": "user", "content": "Hello"}}]}}'

  curl -sN {base}/api/v1/chat/completions -H "Authorization: Bearer $KEY" \
-H 'Content-Type: application/json' \
-d '{{"model": "sim/sim-gpt", "stream": true, "messages": [{{"role": "user", "content": "Hello"}}]}}'

The same chat through native providers (Anthropic's and Gemini's APIs, translated):
  curl -s {base}/api/v1/chat/completions -H "Authorization: Bearer $KEY" \
-H 'Content-Type: application/json' \
-d '{{"model": "claude/claude-sim", "messages": [{{"role": "user", "content": "Hello"}}]}}'

  curl -sN {base}/api/v1/chat/completions -H "Authorization: Bearer $KEY" \
-H 'Content-Type: application/json' \
-d '{{"model": "gem/gemini-sim", "stream": true, "messages": [{{"role": "user", "content": "Hello"}}]}}'

Anthropic's Messages API (any chat model; the key in x-api-key, as Anthropic's SDKs
send it with base URL {base}/api):
  curl -s {base}/api/v1/messages -H "x-api-key: $KEY" \
-H 'Content-Type: application/json' \
-d '{{"model": "sim/sim-gpt", "max_tokens": 64, "messages": [{{"role": "user", "content": "Hello"}}]}}'

  curl -s {base}/api/v1/messages -H "x-api-key: $KEY" \
-H 'Content-Type: application/json' \
-d '{{"model": "claude/claude-sim", "max_tokens": 64, "messages": [{{"role": "user", "content": "Hello"}}]}}'

Speech from ElevenLabs, Deepgram and Cartesia (one voice name mapped per vendor,
billed per character; a route that fails over from one vendor to the next):
  curl -s {base}/api/v1/audio/tts/generations -H "Authorization: Bearer $KEY" \
-H 'Content-Type: application/json' \
-d '{{"model": "eleven/eleven_flash_v2_5", "input": "Hello from the gateway", "voice": "narrator"}}'
  curl -s {base}/api/v1/audio/tts/generations -H "Authorization: Bearer $KEY" \
-H 'Content-Type: application/json' \
-d '{{"model": "dg/aura-2-thalia-en", "input": "Hello from the gateway", "response_format": "wav"}}'
  curl -s {base}/api/v1/audio/tts/generations -H "Authorization: Bearer $KEY" \
-H 'Content-Type: application/json' \
-d '{{"model": "narration", "input": "Hello from the gateway", "voice": "narrator"}}'

OpenAI's Responses API (any chat model; OpenAI's SDKs with base URL {base}/api/v1),
the response stored, then read back by its id:
  curl -s {base}/api/v1/responses -H "Authorization: Bearer $KEY" \
-H 'Content-Type: application/json' \
-d '{{"model": "claude/claude-sim", "instructions": "Be brief.", "input": "Hello"}}'

Buy credit (Stripe Checkout; the simulator plays Stripe): a session for 25.00 USD,
then pay it (`latest`: the newest session, or its session_id; the simulator
sends Stripe's signed checkout.session.completed event
to the gateway, which credits 25.00 once), then the purchases and the balance:
  curl -s {base}/api/v1/stripe/checkout -H "Authorization: Bearer $KEY" \
-H 'Content-Type: application/json' \
-d '{{"amount_usd": "25.00", "success_url": "https://example.com/paid", "cancel_url": "https://example.com/cancelled"}}'

  curl -s -X POST {sim_url}/__sim/stripe/sessions/latest/pay

  curl -s {base}/api/v1/stripe/purchases -H "Authorization: Bearer $KEY"

  curl -s {base}/api/v1/auth/me -H "Authorization: Bearer $KEY"

  {exe} routes   # every route of the table
Press Ctrl-C to stop.
"#,
        sim_url = w.sim_url,
        exe = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "gateway".into()),
        data = w.data_dir.display(),
        base = w.base,
        user = w.user,
        key_id = w.key_id,
        key = w.key,
        access = w.tokens.access_token,
        refresh = w.tokens.refresh_token,
        ttl = w.tokens.expires_in,
    );
}
