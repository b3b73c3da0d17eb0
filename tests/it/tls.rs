//! TLS to PostgreSQL and Redis, against servers the test starts itself
//! with certificates of a test CA (rcgen): a PostgreSQL with `ssl=on`
//! (`PgServer::start_tls`) and a `redis-server --tls-port`.
//!
//! The servers' certificates name `localhost` only, so that the same
//! server is the right host as `localhost` and a wrong one as `127.0.0.1`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use runtime::store::History;
use serde_json::json;

use crate::harness::postgres::PgServer;
use crate::harness::{llm_env, synth_body, Env, TempDir};

/// A certificate authority of the test's own.
struct Ca {
    cert_pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            cert_pem: cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A server certificate for `names` (its PEM, then its key's PEM).
    fn issue(&self, names: &[&str]) -> (String, String) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = rcgen::CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "server");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// Writes the CA's certificate to `dir/name`.
    fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, &self.cert_pem).unwrap();
        path
    }
}

/// `gateway serve` with `vars` (and a data directory): its exit status
/// and standard error, once it stopped by itself, or `None` when it was
/// still serving after 20 s (then killed).
fn serve(dir: &TempDir, vars: &[(&str, &str)]) -> Option<(bool, String)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GATEWAY_DATA_DIR", &dir.0)
        .env("GATEWAY_ADDR", "127.0.0.1:0")
        .envs(vars.iter().copied())
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    status.map(|s| (s.success(), err))
}

/// Which of the sessions named `application_name` are encrypted:
/// (encrypted, all).
fn encrypted_sessions(pg: &PgServer, application_name: &str) -> (u32, u32) {
    let answer = pg.psql(&format!(
        "SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_ssl s \
         JOIN pg_stat_activity a USING (pid) WHERE a.application_name = '{application_name}'"
    ));
    let (encrypted, all) = answer.split_once('|').unwrap();
    (encrypted.parse().unwrap(), all.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgresql_over_tls_is_verified_as_sslmode_says() {
    let ca = Ca::new("gateway test CA");
    let (cert, key) = ca.issue(&["localhost"]);
    let Some(pg) = PgServer::start_tls("tls::postgresql", &cert, &key) else {
        return;
    };
    let files = TempDir::new("tls-pg");
    let right_ca = ca.write(&files.0, "ca.pem");
    let wrong_ca = Ca::new("another CA").write(&files.0, "other-ca.pem");
    // The password is never checked (trust) and must never be printed.
    let url = |host: &str, app: &str, tls: &str| {
        format!(
            "postgres://postgres:hunter2@{host}:{}/postgres?hostaddr=127.0.0.1&application_name={app}&{tls}",
            pg.port()
        )
    };
    let verify_full = |ca: &Path| format!("sslmode=verify-full&sslrootcert={}", ca.display());
    let verify_ca = |ca: &Path| format!("sslmode=verify-ca&sslrootcert={}", ca.display());
    let refused = |url: &str, why: &str| {
        let location = runtime::store::Location::Postgres(url.to_owned());
        let e = runtime::store::Store::migrate(&location)
            .err()
            .unwrap_or_else(|| panic!("{url} was accepted"))
            .to_string();
        assert!(e.contains("GATEWAY_DATABASE_URL"), "{e}");
        assert!(e.contains("certificate was refused"), "{e}");
        assert!(e.contains(why), "{url}: {e}");
        assert!(!e.contains("hunter2"), "{e}");
    };
    let accepted = |url: &str| {
        let location = runtime::store::Location::Postgres(url.to_owned());
        let store =
            runtime::store::Store::open_at(&location).unwrap_or_else(|e| panic!("{url}: {e}"));
        store.audit_rows().unwrap();
        store
    };

    // A wrong CA, under each mode that checks the chain (require too,
    // when given a CA, as libpq does).
    refused(
        &url("localhost", "x", &verify_full(&wrong_ca)),
        "UnknownIssuer",
    );
    refused(
        &url("localhost", "x", &verify_ca(&wrong_ca)),
        "UnknownIssuer",
    );
    let require_wrong = format!("sslmode=require&sslrootcert={}", wrong_ca.display());
    refused(&url("localhost", "x", &require_wrong), "UnknownIssuer");
    // A wrong host name: refused under verify-full, not under verify-ca.
    refused(
        &url("127.0.0.1", "x", &verify_full(&right_ca)),
        "not valid for name",
    );
    let ca_only = accepted(&url("127.0.0.1", "gw_verify_ca", &verify_ca(&right_ca)));
    assert!(encrypted_sessions(&pg, "gw_verify_ca").0 >= 1);
    drop(ca_only);
    // require without a CA: encrypted, nothing checked; prefer (the
    // default) encrypts when the server offers it; disable does not.
    let require = accepted(&url("127.0.0.1", "gw_require", "sslmode=require"));
    let prefer = accepted(&url("127.0.0.1", "gw_prefer", "connect_timeout=5"));
    let plain = accepted(&url("127.0.0.1", "gw_disable", "sslmode=disable"));
    for (app, ssl) in [
        ("gw_require", true),
        ("gw_prefer", true),
        ("gw_disable", false),
    ] {
        let (encrypted, all) = encrypted_sessions(&pg, app);
        assert!(all >= 1, "{app}: no session");
        assert_eq!(encrypted, if ssl { all } else { 0 }, "{app}");
    }
    drop((require, prefer, plain));

    // A verified connection carries the gateway's traffic: a billed
    // request's records are written over it, and every connection of the
    // pool and the record writer is encrypted.
    let verified = url("localhost", "gw_served", &verify_full(&right_ca));
    let env = llm_env(move |c| c.database_url = Some(verified)).await;
    env.grant("5");
    let chat = json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": "Hello"}]});
    let a = env.api("/chat/completions", chat).await;
    a.expect(200);
    let voice = env.post("/tts/synthesize", synth_body("Hello there")).await;
    voice.expect(200);
    let ids: Vec<String> = [&a, &voice]
        .iter()
        .map(|a| a.header("x-request-id").unwrap().to_owned())
        .collect();
    let audit: Vec<String> = env.audit().into_iter().map(|r| r.request_id).collect();
    let usage: Vec<String> = env.usage().into_iter().map(|u| u.request_id).collect();
    for id in &ids {
        assert!(audit.contains(id), "{id} has no audit record");
        assert!(usage.contains(id), "{id} has no usage record");
    }
    let (encrypted, all) = encrypted_sessions(&pg, "gw_served");
    assert!(all >= 2, "the pool and the writer: {all}");
    assert_eq!(encrypted, all, "every session of the gateway is encrypted");
    // After a restart of the server, the reconnections are verified and
    // encrypted too (the pool's and the record writer's).
    pg.restart();
    let start = Instant::now();
    loop {
        let chat =
            json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": "Again"}]});
        let a = env.api("/chat/completions", chat).await;
        if a.status == 200 {
            break;
        }
        assert_eq!(a.status, 503, "{}", a.text);
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "no recovery after the restart"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    env.post("/tts/synthesize", synth_body("Hello again"))
        .await
        .expect(200);
    let (encrypted, all) = encrypted_sessions(&pg, "gw_served");
    assert!(all >= 1, "the gateway reconnected: {all}");
    assert_eq!(encrypted, all, "every reconnection is encrypted");
    drop(env);

    // At start-up, a refused certificate stops `gateway serve`, naming
    // the variable.
    let dir = TempDir::new("tls-pg-serve");
    let bad = url("localhost", "x", &verify_full(&wrong_ca));
    let (ok, err) = serve(&dir, &[("GATEWAY_DATABASE_URL", &bad)]).expect("it stops");
    assert!(!ok);
    assert!(err.contains("GATEWAY_DATABASE_URL"), "{err}");
    assert!(err.contains("UnknownIssuer"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    // So does a CA file that cannot be read.
    let missing = url(
        "localhost",
        "x",
        "sslmode=verify-ca&sslrootcert=/no/such/ca.pem",
    );
    let (ok, err) = serve(&dir, &[("GATEWAY_DATABASE_URL", &missing)]).expect("it stops");
    assert!(!ok);
    assert!(
        err.contains("GATEWAY_DATABASE_URL") && err.contains("/no/such/ca.pem"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
    drop(pg);
}

/// A `redis-server` of the test's own speaking TLS only, on a free
/// loopback port; killed on drop.
struct RedisTls {
    child: Child,
    port: u16,
    _dir: TempDir,
}

impl RedisTls {
    /// `None` (the test skips, saying so) when `redis-server` is missing.
    fn start(test: &str, ca: &Ca, names: &[&str]) -> Option<RedisTls> {
        if Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("SKIPPED {test}: no redis-server on this machine");
            return None;
        }
        let dir = TempDir::new("tls-redis");
        let (cert, key) = ca.issue(names);
        std::fs::write(dir.0.join("server.crt"), cert).unwrap();
        std::fs::write(dir.0.join("server.key"), key).unwrap();
        let ca_file = ca.write(&dir.0, "ca.pem");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let path = |n: &str| dir.0.join(n).to_string_lossy().into_owned();
        let child = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--dir", &dir.0.to_string_lossy()])
            .args(["--tls-cert-file", &path("server.crt")])
            .args(["--tls-key-file", &path("server.key")])
            .args(["--tls-ca-cert-file", &ca_file.to_string_lossy()])
            .args(["--tls-auth-clients", "no", "--requirepass", "hunter2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "redis-server did not listen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(RedisTls {
            child,
            port,
            _dir: dir,
        })
    }
}

impl Drop for RedisTls {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_over_tls_is_verified_and_carries_limits_and_the_bus() {
    let ca = Ca::new("gateway test CA");
    let Some(redis) = RedisTls::start("tls::redis", &ca, &["localhost"]) else {
        return;
    };
    let files = TempDir::new("tls-redis-files");
    let right_ca = ca.write(&files.0, "ca.pem");
    let wrong_ca = Ca::new("another CA").write(&files.0, "other-ca.pem");
    let url = |host: &str| format!("rediss://:hunter2@{host}:{}", redis.port);
    let prefix = runtime::cluster::testing::fresh_prefix("tls");
    let config = |host: &str, ca: Option<&Path>| {
        let c = runtime::cluster::RedisConfig::parse(&url(host), Some(&prefix)).unwrap();
        match ca {
            Some(ca) => c.with_ca_file(ca).unwrap(),
            None => c,
        }
    };
    let check = |c: runtime::cluster::RedisConfig| async move {
        runtime::cluster::Cluster::new(&c)
            .unwrap()
            .check_certificate(Duration::from_secs(5))
            .await
    };

    // Refused: a wrong CA, the public web's CAs (the default), a wrong host name.
    for (host, ca, why, names) in [
        (
            "localhost",
            Some(&*wrong_ca),
            "UnknownIssuer",
            "GATEWAY_REDIS_CA_FILE=",
        ),
        (
            "localhost",
            None,
            "UnknownIssuer",
            "GATEWAY_REDIS_CA_FILE unset",
        ),
        (
            "127.0.0.1",
            Some(&*right_ca),
            "not valid for name",
            "GATEWAY_REDIS_CA_FILE=",
        ),
    ] {
        let e = check(config(host, ca))
            .await
            .err()
            .unwrap_or_else(|| panic!("{host} {ca:?} was accepted"));
        assert!(e.contains("GATEWAY_REDIS_URL"), "{e}");
        assert!(e.contains(names), "{e}");
        assert!(e.contains(why), "{host} {ca:?}: {e}");
        assert!(!e.contains("hunter2"), "{e}");
    }
    // The right CA and host name.
    check(config("localhost", Some(&right_ca))).await.unwrap();

    // `gateway serve` stops at start-up on a refused certificate, naming
    // the variables; with the right CA it serves.
    let dir = TempDir::new("tls-redis-serve");
    let bad = [
        ("GATEWAY_REDIS_URL", url("localhost")),
        (
            "GATEWAY_REDIS_CA_FILE",
            wrong_ca.to_string_lossy().into_owned(),
        ),
    ];
    let bad: Vec<(&str, &str)> = bad.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (ok, err) = serve(&dir, &bad).expect("it stops");
    assert!(!ok);
    assert!(
        err.contains("GATEWAY_REDIS_URL") && err.contains("GATEWAY_REDIS_CA_FILE"),
        "{err}"
    );
    assert!(err.contains("UnknownIssuer"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    let (ok, err) = serve(
        &dir,
        &[
            ("GATEWAY_REDIS_URL", &url("localhost")),
            ("GATEWAY_REDIS_CA_FILE", "/no/such/ca.pem"),
        ],
    )
    .expect("it stops");
    assert!(!ok);
    assert!(
        err.contains("GATEWAY_REDIS_CA_FILE") && err.contains("/no/such/ca.pem"),
        "{err}"
    );

    // A verified connection carries the rate limits and the cluster bus.
    let verified = config("localhost", Some(&right_ca));
    let env = Env::with(move |c| {
        c.redis = Some(verified);
        c.rate_limits = runtime::ratelimit::Limits::parse(Some("tts=2/h")).unwrap();
    })
    .await;
    let voice = "/tts/voices/stock-voice-1";
    env.call("GET", voice, None).await.expect(200);
    env.call("GET", voice, None).await.expect(200);
    env.call("GET", voice, None).await.expect(429);
    assert_eq!(
        env.gw.gateway.limiter.store_failures(),
        0,
        "enforced in Redis"
    );
    let cluster = env.gw.gateway.cluster.as_ref().unwrap();
    let start = Instant::now();
    while !cluster.bus_connected() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the bus did not subscribe over TLS"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // What the limiter keeps is in that Redis, under the prefix.
    let pem = std::fs::read(&right_ca).unwrap();
    let client = redis::Client::build_with_tls(
        url("localhost").as_str(),
        redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(pem),
        },
    )
    .unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(!keys.is_empty(), "no rate-limit key under {prefix}");
}
