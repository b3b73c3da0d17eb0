//! `gateway check-config`: everything `serve` would read, checked without
//! starting — the environment (every bad variable), the providers file
//! (every mistake of its providers and models, each with its line), the
//! sign-in providers file (read with the environment), the MCP servers
//! file, the rate limits against the table — and, with `--connect`, every
//! dependency asked: the database, Redis, the object store, SMTP and each
//! provider's model list. Nothing is written: it runs on a data directory
//! it may not write.

use crate::config::Config;
use gateway_base::spec::{Method, Table};
use gateway_models::providers::Providers;

/// What the files `config` names hold: their problems, one line each
/// (empty: none), and the catalogue when the providers file is sound
/// (what `connect` asks the providers of).
pub struct Files {
    pub problems: Vec<String>,
    pub catalogue: Option<Providers>,
}

/// The files `config` names, read and checked ([`Files`]).
/// `config`'s prices get the table's defaults, as at start-up.
pub fn files(config: &mut Config, table: &'static Table) -> Files {
    let mut problems = Vec::new();
    let mut catalogue = None;
    match config.prices.clone().with_defaults(table.prices) {
        Ok(p) => config.prices = p,
        Err(e) => problems.push(format!("{}: {}", crate::config::GATEWAY_PRICES, e.0)),
    }
    if let Err(e) =
        gateway_adapters::ratelimit::Quotas::resolve(table.capabilities, &config.rate_limits)
    {
        problems.push(format!(
            "{}: {e}",
            gateway_adapters::ratelimit::GATEWAY_RATE_LIMITS
        ));
    }
    if let Some(path) = &config.providers_file {
        match Providers::load(path, config.prices.markup_pct) {
            Ok(p) => catalogue = Some(p),
            Err(e) => problems.extend(e.0.lines().map(str::to_owned)),
        }
    }
    if let Err(e) = crate::config_files::mcp_servers(config, table) {
        problems.push(e.to_string());
    }
    Files {
        problems,
        catalogue,
    }
}

/// Each dependency asked, in order: (what, its answer or why it failed);
/// each provider of `catalogue` (the one [`files`] read) for its models.
pub async fn connect(
    config: &Config,
    catalogue: Option<&Providers>,
) -> Vec<(String, Result<String, String>)> {
    let mut out = Vec::new();
    let location = config.database();
    let db = tokio::task::spawn_blocking(move || gateway_store::probe(&location)).await;
    out.push((
        "database".to_owned(),
        match db {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        },
    ));
    if let Some(r) = &config.redis {
        let answer = match gateway_adapters::cluster::Cluster::new(r) {
            Ok(c) => c
                .ping()
                .await
                .map(|()| format!("{} answers PING", c.location())),
            Err(e) => Err(e.to_string()),
        };
        out.push(("redis".to_owned(), answer));
    }
    out.push(("objects".to_owned(), objects(config).await));
    if let Some(url) = &config.accounts.smtp_url {
        out.push(("smtp".to_owned(), smtp(url).await));
    }
    if let Some(providers) = catalogue {
        let up = gateway_adapters::upstream::Upstream::new(config.upstream_settings());
        for p in &providers.providers {
            out.push((format!("provider {}", p.id), provider(&up, p).await));
        }
    }
    out
}

async fn objects(config: &Config) -> Result<String, String> {
    use gateway_adapters::objects::config::{ObjectBackend, OBJECTS_DIR};
    if config.objects.backend == ObjectBackend::Local {
        // Not opened: opening makes its directory and keys.
        let dir = config.data_dir.join(OBJECTS_DIR);
        return match std::fs::metadata(&dir) {
            Ok(m) if m.is_dir() && !m.permissions().readonly() => {
                Ok(format!("{} is a writable directory", dir.display()))
            }
            Ok(_) => Err(format!("{} is not a writable directory", dir.display())),
            Err(_) => Ok(format!(
                "{} does not exist yet (made at start-up)",
                dir.display()
            )),
        };
    }
    let public = config.public_base();
    let store = gateway_adapters::objects::open(
        &config.objects,
        &config.data_dir,
        &public,
        config.db_sync_full,
    )
    .map_err(|e| e.to_string())?;
    store.ready().await.map_err(|e| e.to_string())?;
    Ok(format!("{} store answers", store.backend()))
}

async fn smtp(url: &str) -> Result<String, String> {
    use lettre::{AsyncSmtpTransport, Tokio1Executor};
    let t: AsyncSmtpTransport<Tokio1Executor> = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
        .map_err(|e| format!("GATEWAY_SMTP_URL: {e}"))?
        .build();
    match t.test_connection().await {
        Ok(true) => Ok("the SMTP server answers".into()),
        Ok(false) => Err("the SMTP server did not accept the connection".into()),
        Err(e) => Err(e.to_string()),
    }
}

async fn provider(
    up: &gateway_adapters::upstream::Upstream,
    p: &gateway_models::providers::Provider,
) -> Result<String, String> {
    let Some(key) = &p.key else {
        return Err(format!(
            "{} is unset: only BYOK calls can reach it",
            p.api_key_env
        ));
    };
    let call = up.llm_call_as(
        Method::Get,
        &p.base_url,
        p.adapter.models_path(),
        key,
        p.adapter.key_form(),
    );
    match call.try_send().await {
        Ok(a) if (200..300).contains(&a.status()) => {
            Ok(format!("{} lists its models ({})", p.base_url, a.status()))
        }
        Ok(a) => Err(format!(
            "{}{} answered {}",
            p.base_url,
            p.adapter.models_path(),
            a.status()
        )),
        Err(e) => Err(e.to_string()),
    }
}
