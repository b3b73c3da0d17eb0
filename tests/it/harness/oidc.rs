//! The OpenID Connect provider of the sign-in tests: `oauth2-mock-server`
//! (npm; nobody on the team wrote it), run by `tests/oidc/mock.mjs` on a
//! free loopback port, one per test. `scripts/setup-tools.sh` installs it
//! (`npm ci` in `tests/oidc`); when it is missing the harness runs the same
//! `npm ci` once.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

/// A running mock provider; stopped when dropped.
pub struct OidcServer {
    child: std::process::Child,
    /// Its issuer URL (`http://127.0.0.1:<port>`).
    pub issuer: String,
    /// Its control server: what the next sign-ins get (see `mock.mjs`).
    control: String,
}

fn oidc_dir() -> PathBuf {
    super::workspace_root().join("tests").join("oidc")
}

/// `npm ci` in `tests/oidc` unless the package is there.
fn ensure_installed() {
    super::npm_installed(&oidc_dir(), "oauth2-mock-server");
}

impl OidcServer {
    /// Starts a provider and waits until it listens.
    pub async fn start() -> OidcServer {
        ensure_installed();
        let mut child = std::process::Command::new("node")
            .arg("mock.mjs")
            .current_dir(oidc_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node (v20.19 or later) runs tests/oidc/mock.mjs");
        let stdout = child.stdout.take().unwrap();
        // Its first line (on a thread: `node` may take a moment to start).
        let line = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
                .map(|_| line)
        });
        let line = tokio::time::timeout(Duration::from_secs(60), line)
            .await
            .expect("the mock provider started within a minute")
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the mock provider's first line {line:?}: {e}"));
        OidcServer {
            child,
            issuer: v["issuer"].as_str().unwrap().to_owned(),
            control: v["control"].as_str().unwrap().to_owned(),
        }
    }

    /// What the next sign-ins get: the ID token's claims (`sub`, `email`,
    /// `email_verified`, `preferred_username`), `tamper` (claims
    /// overwritten in the signed ID token), `refuse` (the token endpoint
    /// refuses the code).
    pub async fn set(&self, next: Value) {
        let r = reqwest::Client::new()
            .post(&self.control)
            .json(&next)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }

    /// Stops the provider (its port then refuses connections).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for OidcServer {
    fn drop(&mut self) {
        self.stop();
    }
}
