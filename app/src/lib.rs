//! Everything of the `gateway` binary but its routes: start-up, the CLI
//! commands and the demo, for the route table the `server` crate generates
//! from `endpoints.toml` and hands in as [`Routes`]. Kept out of `server`
//! so that an edit of the table recompiles the generated routes only, not
//! this crate (CONTRIBUTING.md, "How to add an upstream endpoint": the rebuild's
//! figures).
//!
//! # Layout
//!
//! * [`cli`] — the subcommands (`serve`, `users`, `keys`, `routes`, `demo`).
//! * [`demo`] — the embedded demo: simulator + gateway on a fresh data dir.
//! * [`signal`] — SIGINT / SIGTERM, the end of `serve` and `demo`.
//! * [`start`] — binds nothing itself: takes a listener and a configuration,
//!   returns a handle to the running gateway.

pub mod backup;
pub mod cli;
pub mod demo;
pub mod ops;
pub mod signal;

use std::net::SocketAddr;

use runtime::config::Config;
use runtime::router::RouteFn;
use runtime::spec::Table;
use runtime::store::Instances;
use runtime::{Gateway, StartError};
use tokio::net::TcpListener;

pub use runtime;

/// The generated routes: the table and its matcher (`server::routes`'s
/// `TABLE` and `route`).
#[derive(Clone, Copy)]
pub struct Routes {
    pub table: &'static Table,
    pub route: RouteFn,
}

/// A gateway serving on a listener; dropping it does not stop it, [`Running::stop`] does.
pub struct Running {
    pub addr: SocketAddr,
    pub gateway: Gateway,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Asks it to stop (a SIGTERM) without waiting for the end.
    pub fn begin_stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }

    /// Stops accepting, drains requests in flight, and waits for the end.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.task).await;
        self.gateway.stop_traces().await;
    }

    /// The base URL, e.g. `http://127.0.0.1:8080`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Builds the gateway of a configuration (database, object store, client)
/// without serving: what the CLI's one-shot commands use.
pub fn gateway(routes: Routes, config: Config) -> Result<Gateway, StartError> {
    Gateway::new(config, routes.table)
}

/// Starts a gateway on `listener` with `config`, with its background tasks
/// (the batch executor; retention sweeper, job follower, nightly
/// reconciliation, the cluster bus when configured).
pub fn start(
    routes: Routes,
    mut config: Config,
    listener: TcpListener,
) -> Result<Running, StartError> {
    let addr = listener
        .local_addr()
        .map_err(|e| StartError::Store(runtime::store::StoreError::driver(e)))?;
    config.addr = addr;
    let gateway = gateway(routes, config)?;
    // Before it serves: the holds of this instance's previous run are
    // released, and every hold from now on names it.
    let identity = register_instance(&gateway)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let gw = gateway.clone();
    let mut background = Vec::new();
    // Batches are run by every instance: lines claimed from the database.
    background.push(tokio::spawn(runtime::batches::run(
        gw.clone(),
        identity.id.clone(),
    )));
    // The catalogue reloaded on SIGHUP; its first price version recorded.
    background.push(tokio::spawn(runtime::reload::on_sighup(gw.clone())));
    let first = gw.clone();
    background.push(tokio::spawn(async move {
        if let Err(e) = runtime::reload::record_version(&first, &first.catalogue()).await {
            tracing::warn!(error = %e, "the catalogue's price version is not recorded");
        }
    }));
    // Spend alerts: charged users checked, due deliveries sent.
    background.push(tokio::spawn(runtime::alerts::run(gw.clone())));
    background.push(tokio::spawn(runtime::instance::keep_lease(
        gw.store.clone(),
        identity,
        gw.config.instance_lease,
    )));
    // Learn the account's stock voices now rather than on the first request
    // that names an unowned voice (best effort: that request retries).
    let warm = gw.clone();
    background.push(tokio::spawn(async move {
        if let Err(e) = runtime::owners::is_stock(&warm, "").await {
            tracing::info!(error = %e, "stock voices not read at start-up; read on first use");
        }
    }));
    // The cluster bus (with GATEWAY_REDIS_URL): connects, and reconnects,
    // in the background; an unreachable Redis delays nothing.
    if gw.cluster.is_some() {
        background.push(tokio::spawn(runtime::start::bus(gw.clone())));
    }
    if let Some(every) = gw.config.sweep_interval {
        background.push(tokio::spawn(runtime::retention::run_periodically(
            gw.clone(),
            every,
        )));
    }
    if let Some(every) = gw.config.job_follow_interval {
        background.push(tokio::spawn(runtime::follower::run_periodically(
            gw.clone(),
            every,
        )));
    }
    if let Some(at) = gw.config.reconcile_at {
        background.push(tokio::spawn(runtime::reconcile::run_nightly(
            gw.clone(),
            at,
        )));
    }
    let task = tokio::spawn(async move {
        runtime::server::serve(listener, gw, routes.route, async {
            let _ = stopped.await;
        })
        .await;
        for t in background {
            t.abort();
        }
    });
    Ok(Running {
        addr,
        gateway,
        stop: Some(stop),
        task,
    })
}

/// This instance's identity (`runtime::instance`), registered in the
/// database: the holds of its previous run are released.
fn register_instance(gw: &Gateway) -> Result<runtime::instance::Identity, StartError> {
    let identity =
        runtime::instance::Identity::of(gw.config.instance_id.as_deref(), &gw.config.data_dir)
            .map_err(|e| {
                runtime::config::ConfigError::new(
                    runtime::config::GATEWAY_INSTANCE_ID,
                    format!("the data directory's instance id: {e}"),
                )
            })?;
    let released = gw
        .store
        .start_instance(&identity.id, gw.config.instance_lease)?;
    tracing::info!(instance = %identity.id, released_holds = released, "instance registered");
    Ok(identity)
}

/// The route listing of `gateway routes`: one line per row.
pub fn route_listing(routes: Routes) -> String {
    let mut out = String::new();
    for spec in routes.table.routes {
        out.push_str(spec.listing_line().trim_end());
        out.push('\n');
    }
    out
}
