//! PostgreSQL runs: with `GATEWAY_DATABASE_URL` set, each gateway the bench
//! starts gets a fresh schema of that database (created here, named
//! `gateway_bench_<pid>_<n>`, dropped at the end), as the tests do, so a run
//! never sees another's rows. The URL must be reachable without TLS from
//! the bench (the gateway itself reads it as usual).

use tokio_postgres::NoTls;

/// The variable naming the database.
pub const URL_VAR: &str = "GATEWAY_DATABASE_URL";

/// A schema made for one gateway, dropped by [`Schema::drop_now`].
pub struct Schema {
    base: String,
    /// Its name.
    pub name: String,
    /// The URL whose connections use it (`search_path`).
    pub url: String,
}

impl Schema {
    /// Creates the schema `gateway_bench_<pid>_<n>` in the database at `base`.
    pub async fn create(base: &str, n: usize) -> Result<Schema, String> {
        let name = format!("gateway_bench_{}_{n}", std::process::id());
        run(
            base,
            &format!("DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}"),
        )
        .await?;
        let sep = if base.contains('?') { '&' } else { '?' };
        Ok(Schema {
            base: base.to_owned(),
            url: format!("{base}{sep}options=-c%20search_path%3D{name}"),
            name,
        })
    }

    /// Drops the schema and everything in it (a failure is printed).
    pub async fn drop_now(self) {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name);
        if let Err(e) = run(&self.base, &sql).await {
            eprintln!("note: dropping schema {}: {e}", self.name);
        }
    }
}

/// Runs `sql` (no parameters) on a new connection to `url`.
async fn run(url: &str, sql: &str) -> Result<(), String> {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| format!("{URL_VAR}: connect: {e}"))?;
    let task = tokio::spawn(conn);
    let done = client
        .batch_execute(sql)
        .await
        .map_err(|e| format!("{URL_VAR}: {e}"));
    drop(client);
    let _ = task.await;
    done
}
