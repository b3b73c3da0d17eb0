//! Reloading the catalogue without a restart: `SIGHUP`, or `POST
//! /admin/reload` (every instance, through the bus, with Redis).
//!
//! The providers file, the MCP servers file and the sign-in providers file
//! are read again whole, all or none installed (the environment itself is
//! read at start only: a file a variable names is read again). A sound file replaces the
//! catalogue for the requests that start from then on (an `ArcSwap`);
//! a request in flight keeps the catalogue it started with (`Ctx::catalogue`:
//! its deployments, prices and hold), so a stream that began before a
//! price change is billed at the old price. A file with mistakes changes
//! nothing, and every mistake is answered and logged. Each catalogue's
//! prices are recorded under their version (a digest of them: the same
//! prices keep the version), which every usage record names.

use std::sync::Arc;
use std::time::Duration;

use gateway_models::providers::Providers;
use gateway_store::PriceVersions;
use serde_json::{json, Value};

use crate::services::Gateway;

/// How long `POST /admin/reload` waits for the other instances' answers.
pub const REPLY_WAIT: Duration = Duration::from_secs(2);

/// What a reload did.
#[derive(Debug, Clone)]
pub struct Reloaded {
    pub version: String,
    pub previous: String,
    pub models: usize,
}

/// Reads the providers file and the MCP servers file again (those the
/// configuration names) and, when both are sound, installs them (the
/// price version recorded first). `Err`: every mistake, nothing changed.
pub async fn reload(gw: &Gateway) -> Result<Reloaded, Vec<String>> {
    let g = gw.clone();
    let (providers, mcp, sign_in) = tokio::task::spawn_blocking(move || read(&g))
        .await
        .map_err(|e| vec![e.to_string()])??;
    if providers.is_none() && mcp.is_none() && sign_in.is_none() {
        return Err(vec![
            "nothing to reload: none of GATEWAY_PROVIDERS, GATEWAY_MCP_SERVERS, GATEWAY_OAUTH_PROVIDERS is set".into(),
        ]);
    }
    if let Some(list) = sign_in {
        gw.oidc
            .store(Arc::new(crate::config_files::sign_in(&gw.config, &list)));
    }
    if let Some(p) = &providers {
        record_version(gw, p).await.map_err(|e| vec![e])?;
    }
    if let Some(m) = mcp {
        gw.mcp.store(Arc::new(m));
    }
    let previous = gw.catalogue().version.clone();
    if let Some(p) = providers {
        gw.providers.store(Arc::new(p));
    }
    let now = gw.catalogue();
    Ok(Reloaded {
        version: now.version.clone(),
        previous,
        models: now.models().count(),
    })
}

/// The files read, every mistake of each collected.
#[allow(clippy::type_complexity)]
fn read(
    gw: &Gateway,
) -> Result<
    (
        Option<Providers>,
        Option<gateway_models::mcp::McpServers>,
        Option<Vec<gateway_adapters::oidc::ProviderConfig>>,
    ),
    Vec<String>,
> {
    let mut errors = Vec::new();
    // The sign-in providers file the environment names, read again (none
    // named: the providers the gateway started with stay).
    use gateway_adapters::oidc::config::{from_lookup, GATEWAY_OAUTH_PROVIDERS};
    let sign_in = std::env::var(GATEWAY_OAUTH_PROVIDERS).ok().and_then(|_| {
        from_lookup(|n| std::env::var(n).ok())
            .map_err(|bad| errors.extend(bad.into_iter().map(|(n, why)| format!("{n}: {why}"))))
            .ok()
    });
    let providers = gw.config.providers_file.as_ref().and_then(|path| {
        Providers::load(path, gw.config.prices.markup_pct)
            .map_err(|e| errors.extend(e.0.lines().map(str::to_owned)))
            .ok()
    });
    let mcp = gw.config.mcp.servers_file.as_ref().and_then(|_| {
        crate::config_files::mcp_servers(&gw.config, gw.table)
            .map_err(|e| errors.push(e.to_string()))
            .ok()
    });
    match errors.is_empty() {
        true => Ok((providers, mcp, sign_in)),
        false => Err(errors),
    }
}

/// Records the prices of `catalogue` under its version (once).
pub async fn record_version(gw: &Gateway, catalogue: &Providers) -> Result<(), String> {
    let Some(version) = catalogue.price_version() else {
        return Ok(());
    };
    let prices = catalogue.prices().to_string();
    gw.store
        .blocking(move |s| s.record_price_version(&version, &prices))
        .await
        .map_err(|e| format!("recording the price version: {e}"))
}

/// A reload's result as JSON (and logged).
pub fn outcome(instance: &str, r: &Result<Reloaded, Vec<String>>) -> Value {
    match r {
        Ok(r) => {
            tracing::info!(version = %r.version, previous = %r.previous, models = r.models, "catalogue reloaded");
            json!({"instance": instance, "reloaded": true, "version": r.version,
                   "previous_version": r.previous, "changed": r.version != r.previous, "models": r.models})
        }
        Err(errors) => {
            tracing::warn!(errors = %errors.join("; "), "catalogue not reloaded: the file has mistakes");
            json!({"instance": instance, "reloaded": false, "errors": errors})
        }
    }
}

/// This instance reloaded, and with Redis every other one through the bus:
/// each instance's outcome (the others' that answer within [`REPLY_WAIT`]).
pub async fn everywhere(gw: &Gateway) -> Vec<Value> {
    let me = gw
        .cluster
        .as_ref()
        .map_or("this instance", |c| c.instance())
        .to_owned();
    let mine = outcome(&me, &reload(gw).await);
    let Some(cluster) = &gw.cluster else {
        return vec![mine];
    };
    let request = uuid::Uuid::new_v4().simple().to_string();
    if let Err(e) = cluster
        .publish(gateway_adapters::cluster::Event::Reload {
            request: request.clone(),
        })
        .await
    {
        tracing::warn!(error = %e, "the other instances could not be asked to reload");
        return vec![mine];
    }
    tokio::time::sleep(REPLY_WAIT).await;
    let mut all = vec![mine];
    if let Ok(replies) = cluster.replies(&request).await {
        all.extend(
            replies
                .into_iter()
                .filter_map(|(_, v)| serde_json::from_str(&v).ok()),
        );
    }
    all
}

/// The bus asked this instance to reload: its outcome put under `request`.
pub fn on_request(gw: Gateway, request: String) {
    tokio::spawn(async move {
        let Some(cluster) = gw.cluster.clone() else {
            return;
        };
        let out = outcome(cluster.instance(), &reload(&gw).await);
        if let Err(e) = cluster.put_reply(&request, &out.to_string()).await {
            tracing::warn!(error = %e, "a reload's outcome could not be told");
        }
    });
}

/// Reloads on every `SIGHUP` (a background task of `serve`).
pub async fn on_sighup(gw: Gateway) {
    let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
        return;
    };
    while hup.recv().await.is_some() {
        let me = gw
            .cluster
            .as_ref()
            .map_or("this instance", |c| c.instance())
            .to_owned();
        outcome(&me, &reload(&gw).await);
    }
}
