//! Command line: `gateway serve | users | keys | routes | demo`.
//!
//! Every subcommand reads the same environment (`GATEWAY_DATA_DIR`,
//! `GATEWAY_DB`, ...) as `serve`, so a user created by `gateway users create`
//! is the one `gateway serve` authenticates. Commands that create something
//! print only that thing on stdout (an id, a key), so scripts can capture it;
//! everything else goes to stderr.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use runtime::config::Config;
use runtime::store::{Accounts, Keys, Ledger, Store, Webhooks};

pub use crate::signal::shutdown_signal;

#[derive(Parser, Debug)]
#[command(
    name = "gateway",
    version,
    about = "Gateway for AI voice and model APIs"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve the API (configuration from the environment; see docs/configuration.md).
    Serve,
    /// Manage users.
    Users {
        #[command(subcommand)]
        command: UsersCommand,
    },
    /// Manage API keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Print the generated route table: method, path, mode, billing, gate.
    Routes,
    /// Manage credit balances.
    Credits {
        #[command(subcommand)]
        command: CreditsCommand,
    },
    /// Delete expired objects once (the server also sweeps periodically).
    Sweep,
    /// Check everything `serve` reads (the environment, the providers,
    /// sign-in providers and MCP servers files), listing every problem;
    /// exits non-zero on any. --connect also asks the database, Redis, the
    /// object store, SMTP and each provider's model list.
    CheckConfig {
        #[arg(long)]
        connect: bool,
    },
    /// Copy the embedded default (the SQLite database, consistently, while
    /// it serves; the local object store; the data directory's keys) into
    /// a new or empty directory.
    Backup {
        #[arg(long)]
        to: std::path::PathBuf,
    },
    /// Put a backup back into the data directory (the gateway stopped;
    /// --force replaces an existing database).
    Restore {
        #[arg(long)]
        from: std::path::PathBuf,
        #[arg(long)]
        force: bool,
    },
    /// Compare a day's usage with the upstream's billing usage; store and log the result.
    Reconcile {
        /// UTC day, YYYY-MM-DD.
        #[arg(long)]
        date: String,
    },
    /// Run the demo: simulator + gateway on a fresh data directory.
    Demo,
}

#[derive(Subcommand, Debug)]
pub enum UsersCommand {
    /// Create a user; prints its id.
    Create {
        #[arg(long)]
        email: String,
        #[arg(long)]
        admin: bool,
    },
    /// Disable a user (its keys answer 403).
    Disable {
        #[arg(long)]
        user: i64,
    },
    /// Enable a disabled user.
    Enable {
        #[arg(long)]
        user: i64,
    },
    /// Print the user's callback secret (the HMAC key of its job callbacks),
    /// creating it on first use.
    CallbackSecret {
        #[arg(long)]
        user: i64,
    },
    /// Delete a user: its credentials answer 401; with --purge its account
    /// is erased (keys revoked, objects, files, media and stored responses
    /// deleted, personal fields erased; usage, ledger and audit kept under
    /// an anonymous id).
    Delete {
        #[arg(long)]
        user: i64,
        #[arg(long)]
        purge: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum CreditsCommand {
    /// Add credit (USD) to a user or an organization (--org); prints the
    /// new balance.
    Grant {
        #[arg(long, required_unless_present = "org", conflicts_with = "org")]
        user: Option<i64>,
        #[arg(long)]
        org: Option<i64>,
        /// Decimal amount, e.g. 10.00.
        #[arg(long)]
        amount: String,
    },
    /// Print a user's balance.
    Balance {
        #[arg(long)]
        user: i64,
    },
}

#[derive(Subcommand, Debug)]
pub enum KeysCommand {
    /// Create an API key for a user; prints the key (shown only once).
    Create {
        #[arg(long)]
        user: i64,
        /// Limit the key to these models of the general gateway
        /// (comma-separated `provider/model` or `provider/*`); others answer 403.
        #[arg(long)]
        models: Option<String>,
        /// Cap what the key's requests spend per period (USD, at most 8
        /// places); over it they answer 402. Needs --budget-period.
        #[arg(long, requires = "budget_period")]
        budget_usd: Option<String>,
        /// The budget's period: `day` (UTC), `month` (calendar, UTC) or `total`.
        #[arg(long, requires = "budget_usd", value_parser = ["day", "month", "total"])]
        budget_period: Option<String>,
        /// Limit the key's MCP tool calls to these (comma-separated
        /// `server/tool` or `server/*`); others are refused.
        #[arg(long)]
        mcp_tools: Option<String>,
    },
    /// List a user's API keys (never the keys), one per line: id, prefix,
    /// state, name, then budget, period, spent, held and period end (`-`
    /// where there is no budget), the MCP allow-list (`-`: every tool), rpm
    /// and tpm (`-`: no limit).
    List {
        #[arg(long)]
        user: i64,
    },
    /// Revoke an API key.
    Revoke {
        #[arg(long)]
        key: String,
    },
    /// Set a live key's budget (by its id, as `keys list` prints it), or
    /// remove it (--no-budget); set its MCP allow-list (--mcp-tools), or
    /// remove it (--no-mcp-tools); set its requests and tokens per minute
    /// (--rpm, --tpm; 0 removes the limit). What it spent in the period stays.
    Update {
        id: i64,
        #[arg(long, requires = "budget_period", conflicts_with = "no_budget")]
        budget_usd: Option<String>,
        #[arg(long, requires = "budget_usd", value_parser = ["day", "month", "total"])]
        budget_period: Option<String>,
        #[arg(long, required_unless_present_any = ["budget_usd", "mcp_tools", "no_mcp_tools", "rpm", "tpm"])]
        no_budget: bool,
        #[arg(long, conflicts_with = "no_mcp_tools")]
        mcp_tools: Option<String>,
        #[arg(long)]
        no_mcp_tools: bool,
        #[arg(long)]
        rpm: Option<u64>,
        #[arg(long)]
        tpm: Option<u64>,
    },
}

/// `GATEWAY_LOG_FORMAT`: `text` (the default) or `json`.
pub const GATEWAY_LOG_FORMAT: &str = "GATEWAY_LOG_FORMAT";

/// Sets up logging to stderr (`RUST_LOG`, default `info`) in the format of
/// `GATEWAY_LOG_FORMAT`: `text` (default), or `json`: one JSON object per
/// line, the fields of the current span (a request's `request_id` and
/// `route`) on every line logged while serving it.
pub fn init_tracing() -> Result<(), String> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let format = std::env::var(GATEWAY_LOG_FORMAT).unwrap_or_default();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format.trim() {
        "" | "text" => {
            let _ = builder.try_init();
        }
        "json" => {
            let _ = builder
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(false)
                .try_init();
        }
        other => {
            return Err(format!(
                "{GATEWAY_LOG_FORMAT}=`{other}`: expected `text` or `json`"
            ))
        }
    }
    Ok(())
}

/// Entry point of the binary, serving `routes`.
pub fn main(routes: crate::Routes) -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = init_tracing() {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    match run(routes, cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

type CliResult = Result<(), Box<dyn std::error::Error>>;

fn open_store(config: &Config) -> Result<Store, Box<dyn std::error::Error>> {
    Ok(Store::open_at(&config.database())?)
}

/// Runs one subcommand.
pub fn run(routes: crate::Routes, command: Command) -> CliResult {
    match command {
        Command::Routes => {
            // A closed pipe (`gateway routes | head`) is not an error.
            use std::io::Write;
            match std::io::stdout()
                .lock()
                .write_all(crate::route_listing(routes).as_bytes())
            {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                _ => Ok(()),
            }
        }
        Command::Serve => {
            let config = Config::from_env()?;
            runtime_block_on(serve(routes, config))
        }
        Command::Demo => runtime_block_on(crate::demo::run(routes)),
        Command::Users {
            command: UsersCommand::Delete { user, purge: true },
        } => runtime_block_on(crate::ops::erase_user(routes, user)),
        Command::Users { command } => users(command),
        Command::Credits { command } => credits(command),
        Command::Sweep => runtime_block_on(async {
            let gw = crate::gateway(routes, Config::from_env()?)?;
            let report = runtime::retention::sweep_once(&gw).await;
            println!("deleted {} failed {}", report.deleted, report.failed);
            if report.failed > 0 {
                return Err(format!("{} objects could not be deleted", report.failed).into());
            }
            Ok(())
        }),
        Command::Reconcile { date } => runtime_block_on(reconcile(routes, date)),
        Command::CheckConfig { connect } => crate::ops::check_config(routes, connect),
        Command::Backup { to } => crate::backup::backup(&Config::from_env()?, &to),
        Command::Restore { from, force } => {
            crate::backup::restore(&Config::from_env()?, &from, force)
        }
        Command::Keys { command } => keys(command),
    }
}

/// `gateway users ...`.
fn users(command: UsersCommand) -> CliResult {
    let config = Config::from_env()?;
    let store = open_store(&config)?;
    match command {
        UsersCommand::Create { email, admin } => {
            let email = email.trim();
            if email.is_empty() || !email.contains('@') {
                return Err(format!("not an email address: {email:?}").into());
            }
            let id = store.create_user(email, admin)?;
            println!("{id}");
        }
        UsersCommand::Disable { user } => {
            set_disabled(&store, user, true)?;
            tell_running_instances(&config)?;
        }
        UsersCommand::Enable { user } => {
            set_disabled(&store, user, false)?;
            tell_running_instances(&config)?;
        }
        UsersCommand::CallbackSecret { user } => match store.callback_secret(user)? {
            Some(secret) => println!("{secret}"),
            None => return Err(format!("no user with id {user}").into()),
        },
        UsersCommand::Delete { user, .. } => {
            if !store.delete_user(user)? {
                return Err(format!("no live user with id {user}").into());
            }
            tell_running_instances(&config)?;
            eprintln!("deleted");
        }
    }
    Ok(())
}

/// `gateway credits ...`.
fn credits(command: CreditsCommand) -> CliResult {
    let config = Config::from_env()?;
    let store = open_store(&config)?;
    match command {
        CreditsCommand::Grant { user, org, amount } => {
            let user = match (user, org) {
                (Some(u), _) => u,
                (None, Some(o)) if runtime::store::Organizations::is_org(&store, o)? => o,
                _ => {
                    return Err(
                        format!("no organization with id {}", org.unwrap_or_default()).into(),
                    )
                }
            };
            let amount = rust_decimal::Decimal::from_str_exact(amount.trim())
                .map_err(|e| format!("amount {amount:?} is not a decimal: {e}"))?;
            if amount <= rust_decimal::Decimal::ZERO {
                return Err("amount must be positive".into());
            }
            runtime::billing::check_grant(store.balance(user)?, amount)?;
            let balance = store.grant_credit(user, amount, Some("gateway credits grant"))?;
            println!("{}", runtime::billing::format_money(balance));
        }
        CreditsCommand::Balance { user } => {
            if store.user(user)?.is_none() {
                return Err(format!("no user with id {user}").into());
            }
            println!("{}", runtime::billing::format_money(store.balance(user)?));
        }
    }
    Ok(())
}

/// `gateway reconcile DATE`.
async fn reconcile(routes: crate::Routes, date: String) -> CliResult {
    let gw = crate::gateway(routes, Config::from_env()?)?;
    let rows = runtime::reconcile::reconcile(&gw, &date)
        .await
        .map_err(|e| e.message())?;
    for r in rows {
        println!(
            "{} {:<20} gateway {:>14} upstream {:>14} drift {:>8}% {}",
            r.day,
            r.product,
            r.gateway_total,
            r.upstream_total
                .map(|d| d.to_string())
                .unwrap_or_else(|| "-".into()),
            r.drift_pct
                .map(|d| d.to_string())
                .unwrap_or_else(|| "-".into()),
            r.status
        );
    }
    Ok(())
}

/// `gateway keys ...`.
fn keys(command: KeysCommand) -> CliResult {
    let config = Config::from_env()?;
    let store = open_store(&config)?;
    match command {
        KeysCommand::Create {
            user,
            models,
            budget_usd,
            budget_period,
            mcp_tools,
        } => {
            let budget = match (budget_usd, budget_period) {
                (Some(usd), Some(period)) => Some(runtime::store::Budget::parse(&usd, &period)?),
                _ => None,
            };
            let tools = mcp_tools.as_deref().map(allow_list).transpose()?;
            let (id, key) = runtime::auth::create_named_key(&store, user, None, budget)
                .map_err(|e| e.message())?;
            if let Some(m) = models.as_deref() {
                store.set_key_models(&runtime::auth::hash_key(&key), Some(m))?;
            }
            if let Some(t) = tools.as_deref() {
                store.set_key_mcp_tools(Some(user), id, Some(t))?;
            }
            println!("{key}");
        }
        KeysCommand::List { user } => {
            if store.user(user)?.is_none() {
                return Err(format!("no user with id {user}").into());
            }
            for k in store.keys_of(user)? {
                println!("{}", key_line(&k));
            }
        }
        KeysCommand::Update {
            id,
            budget_usd,
            budget_period,
            no_budget,
            mcp_tools,
            no_mcp_tools,
            rpm,
            tpm,
        } => {
            let budget = match (budget_usd, budget_period) {
                (Some(usd), Some(period)) => Some(runtime::store::Budget::parse(&usd, &period)?),
                _ => None,
            };
            let tools = mcp_tools.as_deref().map(allow_list).transpose()?;
            let missing = || format!("no live key with id {id}");
            if (budget.is_some() || no_budget) && !store.set_key_budget(None, id, budget)? {
                return Err(missing().into());
            }
            if (tools.is_some() || no_mcp_tools)
                && !store.set_key_mcp_tools(None, id, tools.as_deref())?
            {
                return Err(missing().into());
            }
            use runtime::store::KeyLimit;
            for (which, v) in [(KeyLimit::Rpm, rpm), (KeyLimit::Tpm, tpm)] {
                let Some(v) = v else { continue };
                if !store.set_key_limit(None, id, which, (v > 0).then_some(v))? {
                    return Err(missing().into());
                }
            }
            eprintln!("updated");
            tell_running_instances(&config)?;
        }
        KeysCommand::Revoke { key } => {
            if !store.revoke_key_hash(&runtime::auth::hash_key(key.trim()))? {
                return Err("no such live key".into());
            }
            eprintln!("revoked");
            tell_running_instances(&config)?;
        }
    }
    Ok(())
}

fn set_disabled(store: &Store, user: i64, disabled: bool) -> CliResult {
    if !store.set_user_disabled(user, disabled)? {
        return Err(format!("no user with id {user}").into());
    }
    eprintln!(
        "user {user} {}",
        if disabled { "disabled" } else { "enabled" }
    );
    Ok(())
}

/// After a revoke, disable or enable: with `GATEWAY_REDIS_URL`, running
/// instances drop their cached key lookups now (the cluster bus); without
/// it, or if Redis does not answer, they see the change within 30 s.
fn tell_running_instances(config: &Config) -> CliResult {
    let Some(redis) = &config.redis else {
        return Ok(());
    };
    runtime_block_on(async {
        let cluster = runtime::cluster::Cluster::new(redis)?;
        match cluster.publish(runtime::cluster::Event::Credentials).await {
            Ok(()) => eprintln!("running instances told"),
            Err(e) => {
                eprintln!("warning: {e}; running instances see the change within 30 s")
            }
        }
        Ok(())
    })
}

fn runtime_block_on(f: impl std::future::Future<Output = CliResult>) -> CliResult {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(f)
}

/// `gateway serve`.
pub async fn serve(routes: crate::Routes, config: Config) -> CliResult {
    if config.provider_api_key.is_none() {
        tracing::warn!("PROVIDER_API_KEY is not set: voice routes will answer 503 (upstream integration not configured)");
    }
    if config.webhook_secret.is_none() {
        tracing::warn!("PROVIDER_WEBHOOK_SECRET is not set: inbound webhooks are refused (503) until it is set; jobs are still followed by polling");
    }
    // Migrate before listening: no request meets a half-migrated database.
    runtime::store::Store::migrate(&config.database())?;
    // A rediss:// server whose certificate is refused is a configuration
    // error (an unreachable Redis is not: limits fail open).
    if let Some(redis) = &config.redis {
        runtime::cluster::Cluster::new(redis)?
            .check_certificate(std::time::Duration::from_secs(3))
            .await?;
    }
    let listener = tokio::net::TcpListener::bind(config.addr).await?;
    let addr = listener.local_addr()?;
    let public_url = config
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}"));
    if let Some(w) = config.unreachable_objects_warning(&public_url) {
        tracing::warn!("{w}");
    }
    let running = crate::start(routes, config, listener)?;
    tracing::info!("listening on {addr}");
    shutdown_signal().await;
    tracing::info!("signal received, shutting down");
    running.stop().await;
    Ok(())
}

/// One line of `gateway keys list`.
fn key_line(k: &runtime::store::KeyRow) -> String {
    use runtime::billing::format_money;
    let dash = || "-".to_owned();
    let b = k.budget.as_ref();
    [
        k.id.to_string(),
        k.prefix.clone().unwrap_or_else(dash),
        if k.revoked_at.is_some() {
            "revoked"
        } else {
            "active"
        }
        .to_owned(),
        k.name.clone().unwrap_or_else(dash),
        b.map_or_else(dash, |b| b.budget.usd.to_string()),
        b.map_or_else(dash, |b| b.budget.period.as_str().to_owned()),
        b.map_or_else(dash, |b| format_money(b.spent)),
        b.map_or_else(dash, |b| format_money(b.held)),
        b.and_then(|b| b.period_end)
            .map_or_else(dash, runtime::store::rfc3339),
        k.mcp_tools.as_ref().map_or_else(dash, |t| t.join(",")),
        k.rpm.map_or_else(dash, |n| n.to_string()),
        k.tpm.map_or_else(dash, |n| n.to_string()),
    ]
    .join("\t")
}

/// A key's MCP allow-list as given on the command line (each entry
/// `server/tool` or `server/*`), as stored.
fn allow_list(list: &str) -> Result<String, String> {
    let entries: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    for e in &entries {
        runtime::mcp::check_allow_entry(e).map_err(|why| format!("--mcp-tools: {why}"))?;
    }
    Ok(entries.join(","))
}
