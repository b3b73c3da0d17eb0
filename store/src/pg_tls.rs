//! TLS to PostgreSQL: `sslmode` and `sslrootcert` of `GATEWAY_DATABASE_URL`,
//! read as libpq documents them, over rustls (`tokio-postgres-rustls`,
//! which also gives SCRAM its channel binding; the verifiers are
//! [`gateway_base::tls`]'s).
//!
//! | `sslmode` | encrypted | the server's certificate |
//! |---|---|---|
//! | `disable` | no | — |
//! | `prefer` (default) | when the server offers TLS, else plain | with `sslrootcert`: its chain; else not checked |
//! | `require` | yes | with `sslrootcert`: its chain (libpq's rule); else not checked |
//! | `verify-ca` | yes | its chain up to `sslrootcert`'s CAs, not the host name |
//! | `verify-full` | yes | its chain and the host name (or IP address) of the URL |
//!
//! `sslrootcert=<path>` names a PEM file of CA certificates, read at start
//! (unreadable or not PEM: a configuration error of `GATEWAY_DATABASE_URL`);
//! `sslrootcert=system` takes the public web's CAs (webpki-roots) and, as in
//! libpq 16, `verify-full` as its default and only mode. Unlike libpq, the
//! gateway reads no `~/.postgresql/root.crt`: `verify-ca` and `verify-full`
//! need `sslrootcert`. Under `prefer` a server that declines TLS is spoken
//! to in plain text; a handshake that fails is an error, never a silent
//! fall-back.

use std::path::Path;
use std::sync::Arc;

use tokio_postgres::config::SslMode as DriverMode;
use tokio_postgres::NoTls;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{Result, StoreError};
use gateway_base::tls::{self, Verify};

/// libpq's `sslmode` values the gateway supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(v: &str) -> Option<SslMode> {
        Some(match v {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

impl std::fmt::Display for SslMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A PostgreSQL server to connect to: the driver's settings and the TLS
/// every connection to it uses.
#[derive(Clone)]
pub struct Target {
    pub(super) config: tokio_postgres::Config,
    pub(super) mode: SslMode,
    /// `None` under `sslmode=disable`.
    tls: Option<MakeRustlsConnect>,
}

impl Target {
    /// Reads a `postgres://` URL: `sslmode` and `sslrootcert` here (the CA
    /// file is read now), everything else by `tokio-postgres`.
    pub fn parse(url: &str) -> Result<Target> {
        let (rest, mode, rootcert) = split_tls(url)?;
        let mut config = rest
            .parse::<tokio_postgres::Config>()
            .map_err(|e| StoreError::caused("database URL", e))?;
        let system = rootcert.as_deref() == Some("system");
        let mode = mode.unwrap_or(if system {
            SslMode::VerifyFull
        } else {
            SslMode::Prefer
        });
        let roots = match rootcert.as_deref() {
            None => None,
            Some("system") if mode != SslMode::VerifyFull => {
                return Err(StoreError::msg(format!(
                    "sslrootcert=system needs sslmode=verify-full (not {mode}), as in libpq"
                )))
            }
            Some("system") => Some(tls::web_roots()),
            Some(path) => Some(
                tls::read_roots(Path::new(path))
                    .map_err(|e| StoreError::msg(format!("sslrootcert: {e}")))?,
            ),
        };
        let verify = match (mode, roots) {
            (SslMode::Disable, _) => None,
            (SslMode::Prefer | SslMode::Require, None) => Some(Verify::Nothing),
            (SslMode::Prefer | SslMode::Require | SslMode::VerifyCa, Some(r)) => {
                Some(Verify::Chain(Arc::new(r)))
            }
            (SslMode::VerifyFull, Some(r)) => Some(Verify::Full(Arc::new(r))),
            (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
                return Err(StoreError::msg(format!(
                    "sslmode={mode} needs sslrootcert=<PEM file of the CA> (or sslrootcert=system)"
                )))
            }
        };
        config.ssl_mode(match mode {
            SslMode::Disable => DriverMode::Disable,
            SslMode::Prefer => DriverMode::Prefer,
            _ => DriverMode::Require,
        });
        let tls = match verify {
            Some(v) => Some(MakeRustlsConnect::new(
                tls::client_config(&v).map_err(StoreError::msg)?,
            )),
            None => None,
        };
        Ok(Target { config, mode, tls })
    }

    /// Connects (on the caller's runtime), the connection's I/O spawned
    /// beside it.
    pub(super) async fn connect(
        self,
    ) -> std::result::Result<tokio_postgres::Client, tokio_postgres::Error> {
        match self.tls {
            None => {
                let (client, connection) = self.config.connect(NoTls).await?;
                drive(connection);
                Ok(client)
            }
            Some(tls) => {
                let (client, connection) = self.config.connect(tls).await?;
                drive(connection);
                Ok(client)
            }
        }
    }
}

/// Drives a connection's I/O until it ends.
fn drive<F>(connection: F)
where
    F: std::future::Future<Output = std::result::Result<(), tokio_postgres::Error>>
        + Send
        + 'static,
{
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "postgres connection ended");
        }
    });
}

/// The URL without `sslmode` and `sslrootcert`, and their values
/// (percent-decoded).
fn split_tls(url: &str) -> Result<(String, Option<SslMode>, Option<String>)> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), None, None));
    };
    let mut kept = Vec::new();
    let (mut mode, mut rootcert) = (None, None);
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_encoding::percent_decode_str(value).decode_utf8_lossy();
        match key {
            "sslmode" => {
                mode = Some(SslMode::parse(&value).ok_or_else(|| {
                    StoreError::msg(format!(
                        "sslmode={value:?}: expected disable, prefer, require, verify-ca or verify-full"
                    ))
                })?)
            }
            "sslrootcert" => rootcert = Some(value.into_owned()),
            _ => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, mode, rootcert))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_read_as_libpq_reads_them() {
        let t = Target::parse("postgres://u:pw@db.example:5432/app").unwrap();
        assert_eq!(t.mode, SslMode::Prefer, "libpq's default");
        assert!(t.tls.is_some());
        let t = Target::parse("postgres://u@h/app?sslmode=disable&connect_timeout=3").unwrap();
        assert_eq!(t.mode, SslMode::Disable);
        assert!(t.tls.is_none());
        assert_eq!(
            t.config.get_connect_timeout(),
            Some(&std::time::Duration::from_secs(3))
        );
        let t = Target::parse("postgres://u@h/app?sslmode=require").unwrap();
        assert_eq!(t.config.get_ssl_mode(), DriverMode::Require);
        let t = Target::parse("postgres://u@h/app?sslrootcert=system").unwrap();
        assert_eq!(t.mode, SslMode::VerifyFull);
    }

    #[test]
    fn what_cannot_be_honoured_is_refused() {
        let e = |url: &str| Target::parse(url).err().unwrap().to_string();
        assert!(e("postgres://u:secret@h/a?sslmode=allow").contains("expected disable"));
        assert!(e("postgres://u@h/a?sslmode=verify-full").contains("needs sslrootcert"));
        assert!(e("postgres://u@h/a?sslmode=verify-ca").contains("needs sslrootcert"));
        assert!(e("postgres://u@h/a?sslmode=require&sslrootcert=system").contains("verify-full"));
        let missing = e("postgres://u:secret@h/a?sslmode=verify-ca&sslrootcert=/no/such.pem");
        assert!(
            missing.contains("sslrootcert: cannot read /no/such.pem"),
            "{missing}"
        );
        assert!(!missing.contains("secret"));
    }
}
