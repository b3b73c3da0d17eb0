//! `provider-sim`: runs the provider simulator as a standalone server.
//!
//! ```text
//! provider-sim --addr 127.0.0.1:9100 [--api-key K] [--webhook-url U] [--webhook-secret S] [--job-ms N]
//! ```
//!
//! Prints `listening on ADDR` once bound and serves until SIGINT or SIGTERM.

use std::io::Write as _;
use std::time::Duration;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "provider-sim",
    about = "Voice provider simulator (main API, synthesis cluster, control plane)"
)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9100")]
    addr: String,
    /// Require this credential (Bearer, Token token=, or x-access-token).
    #[arg(long, env = "SIM_API_KEY")]
    api_key: Option<String>,
    /// Where completion webhooks are POSTed.
    #[arg(long, env = "SIM_WEBHOOK_URL")]
    webhook_url: Option<String>,
    /// HMAC key of the X-Provider-Signature header.
    #[arg(long, env = "SIM_WEBHOOK_SECRET")]
    webhook_secret: Option<String>,
    /// Job duration in milliseconds.
    #[arg(long, default_value_t = 300)]
    job_ms: u64,
    /// Seconds of synthesized audio per input character.
    #[arg(long, default_value_t = 0.06)]
    seconds_per_char: f64,
}

#[tokio::main]
async fn main() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let args = Args::parse();
    let listener = match tokio::net::TcpListener::bind(&args.addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("provider-sim: cannot listen on {}: {e}", args.addr);
            std::process::exit(1);
        }
    };
    let config = sim::SimConfig {
        job_duration: Duration::from_millis(args.job_ms),
        webhook_url: args.webhook_url,
        webhook_secret: args.webhook_secret,
        api_key: args.api_key,
        seconds_per_char: args.seconds_per_char,
        ..Default::default()
    };
    let sim = sim::start(listener, config).await;
    println!("listening on {}", sim.addr);
    let _ = std::io::stdout().flush();
    shutdown_signal().await;
    sim.shutdown().await;
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
