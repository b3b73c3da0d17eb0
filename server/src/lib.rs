//! The `gateway` binary's library: the router generated from
//! `endpoints.toml`, and the binary's start-up and CLI (crate `app`) bound
//! to it, so that tests drive exactly what the binary runs.
//!
//! This crate holds only what the table generates ([`routes`]) and the
//! thin functions below: an edit of the table recompiles this crate, the
//! `gateway` binary's `main` and the integration tests, never `app` or
//! `runtime` (CONTRIBUTING.md, "How to add an upstream endpoint").
//!
//! * [`routes`] — generated from `endpoints.toml` by `codegen::routes!`:
//!   one `static EndpointSpec` per row, one handler per row, `ROUTES`, `route()`.
//! * [`cli`] — the subcommands (`serve`, `users`, `keys`, `routes`, `demo`).
//! * [`start`] — binds nothing itself: takes a listener and a configuration,
//!   returns a handle to the running gateway.

/// The generated router (see `endpoints.toml`).
pub mod routes {
    codegen::routes!("../endpoints.toml");
}

use runtime::config::Config;
use runtime::{Gateway, StartError};
use tokio::net::TcpListener;

pub use app::{demo, runtime, Running};

/// The generated routes, as `app` takes them.
pub const ROUTES: app::Routes = app::Routes {
    table: &routes::TABLE,
    route: routes::route,
};

/// The CLI (`app::cli`) with this table.
pub mod cli {
    pub use app::cli::{init_tracing, shutdown_signal, Cli, Command};

    /// Entry point of the binary.
    pub fn main() -> std::process::ExitCode {
        app::cli::main(super::ROUTES)
    }
}

/// Builds the gateway of a configuration (database, object store, client)
/// without serving: what the CLI's one-shot commands use.
pub fn gateway(config: Config) -> Result<Gateway, StartError> {
    app::gateway(ROUTES, config)
}

/// Starts a gateway on `listener` with `config` and its background tasks
/// (`app::start`).
pub fn start(config: Config, listener: TcpListener) -> Result<app::Running, StartError> {
    app::start(ROUTES, config, listener)
}

/// The route listing of `gateway routes`: one line per row.
pub fn route_listing() -> String {
    app::route_listing(ROUTES)
}
