//! Test harness: start a simulator and a gateway, call them, read what they wrote.
//! The fixtures several test files share live here too: [`general`] (the
//! general gateway's providers file, envelopes, `Env` helpers, an LLM pair),
//! [`receiver`] (a callback receiver), [`oidc`] (the sign-in tests'
//! OpenID Connect provider, oauth2-mock-server), [`node`] (chromium and
//! npm packages for the browser tests).

mod general;
mod node;
mod oidc;
mod receiver;
mod redis_server;
mod scripts;

pub use general::*;
pub use node::*;
pub use oidc::*;
pub use receiver::*;
pub use redis_server::*;
pub use scripts::*;

use std::path::PathBuf;
use std::time::Duration;

pub mod postgres;

use runtime::config::Config;
use runtime::store::{Accounts, Assets, AuditRecord, History, Ledger, Store};
use serde_json::{json, Value};
use tokio::net::TcpListener;

/// The `gateway` binary of this build.
pub const BIN: &str = env!("CARGO_BIN_EXE_gateway");

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A decimal literal.
pub fn d(s: &str) -> rust_decimal::Decimal {
    s.parse().unwrap()
}

/// The upstream key the simulator expects; must never appear in an answer.
pub const PROVIDER_KEY: &str = "sk-test-provider-key-0123456789";

/// The PostgreSQL server the suite runs on instead of SQLite files, when set
/// (`postgres://postgres@127.0.0.1:5432/postgres`): every test directory
/// then gets a schema of its own there.
pub const TEST_DATABASE_URL: &str = "GATEWAY_TEST_DATABASE_URL";

/// The suite's PostgreSQL server, if it runs on one.
pub fn test_database_url() -> Option<String> {
    std::env::var(TEST_DATABASE_URL)
        .ok()
        .filter(|v| !v.trim().is_empty())
}

/// The suite's PostgreSQL server for a test that needs one: `None` (the
/// test is skipped, and says so) when the suite runs on SQLite. The test
/// command runs the suite again on PostgreSQL (and fails when
/// `GATEWAY_TEST_REQUIRE_POSTGRES=1` and none answers), where it runs.
pub fn require_postgres(what: &str) -> Option<String> {
    let url = test_database_url();
    if url.is_none() {
        eprintln!("SKIPPED {what} on this run: no PostgreSQL ({TEST_DATABASE_URL} not set)");
    }
    url
}

/// A temporary directory removed on drop, with the database of the gateway
/// that uses it: `gateway.db` inside it, or (on PostgreSQL) a fresh schema
/// made on first use and dropped with the directory.
pub struct TempDir(pub PathBuf, std::sync::OnceLock<Option<PgSchema>>);

/// A PostgreSQL schema made for one test directory.
pub struct PgSchema {
    base: String,
    name: String,
    /// The URL whose connections use the schema.
    pub url: String,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "gw-it-{tag}-{}-{:016x}",
            std::process::id(),
            rand_u64()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p, std::sync::OnceLock::new())
    }

    /// `GATEWAY_DATABASE_URL` of this directory's gateway (PostgreSQL), or
    /// `None` on SQLite (`$GATEWAY_DATA_DIR/gateway.db`).
    pub fn database_url(&self) -> Option<String> {
        self.1
            .get_or_init(|| {
                let base = test_database_url()?;
                let name = format!("gwt_{}_{:016x}", std::process::id(), rand_u64());
                let url = runtime::store::create_pg_schema(&base, &name)
                    .unwrap_or_else(|e| panic!("{TEST_DATABASE_URL}: {e}"));
                Some(PgSchema { base, name, url })
            })
            .as_ref()
            .map(|s| s.url.clone())
    }

    /// This directory's database.
    pub fn database(&self) -> runtime::store::Location {
        match self.database_url() {
            Some(url) => runtime::store::Location::Postgres(url),
            None => runtime::store::Location::Sqlite(self.0.join("gateway.db")),
        }
    }

    /// The variables pointing a `gateway` command at this directory
    /// (`GATEWAY_DATA_DIR`) and its database (`Command::envs`).
    /// `gateway` (the binary) on this directory's data, with no other
    /// environment than `PATH`; on SQLite whatever the suite runs on when
    /// `sqlite` (the embedded default's own commands).
    pub fn cli(&self, sqlite: bool) -> std::process::Command {
        let mut c = std::process::Command::new(BIN);
        let vars = self.gateway_env().into_iter();
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(vars.filter(|(k, _)| !sqlite || *k != "GATEWAY_DATABASE_URL"));
        c
    }

    pub fn gateway_env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        let mut vars = vec![("GATEWAY_DATA_DIR", self.0.clone().into_os_string())];
        if let Some(url) = self.database_url() {
            vars.push(("GATEWAY_DATABASE_URL", url.into()));
        }
        vars
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        if let Some(Some(s)) = self.1.get() {
            if let Err(e) = runtime::store::drop_pg_schema(&s.base, &s.name) {
                eprintln!("schema {} left behind: {e}", s.name);
            }
        }
    }
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    );
    h.finish()
}

/// A running simulator + gateway, a user and its key.
pub struct Env {
    pub sim: sim::Sim,
    pub gw: server::Running,
    pub dir: TempDir,
    pub key: String,
    pub user_id: i64,
    pub client: reqwest::Client,
}

/// A test configuration pointing at the simulator.
pub fn config_for(sim: &sim::Sim, dir: &TempDir) -> Config {
    let mut c = Config::with_data_dir(&dir.0);
    c.database_url = dir.database_url();
    c.provider_api_key = Some(PROVIDER_KEY.to_owned());
    c.provider_base_url = sim.base_url();
    c.provider_synth_url = sim.synth_url();
    c.allow_private_fetch = true;
    c.upstream_timeout = Duration::from_secs(10);
    // The job follower is off unless a test turns it on (`follow_fast`), so
    // that tests counting upstream calls, charges and copies see only their own.
    c.job_follow_interval = None;
    // A model call is not retried unless a test turns retries on
    // (`routing.rs`), so that tests of one upstream failure's answer see
    // that failure; every candidate of a route is still tried once.
    c.routing.retry_max = 0;
    c
}

/// Turns the job follower on with short delays (tests).
pub fn follow_fast(c: &mut Config) {
    c.job_follow_interval = Some(Duration::from_millis(100));
    c.job_follow_first_delay = Duration::from_millis(200);
    c.job_follow_max_delay = Duration::from_millis(800);
}

pub async fn start_sim() -> sim::Sim {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    sim::start(
        l,
        sim::SimConfig {
            api_key: Some(PROVIDER_KEY.to_owned()),
            ..Default::default()
        },
    )
    .await
}

impl Env {
    /// Default configuration (business plan off).
    pub async fn start() -> Env {
        Env::with(|_| {}).await
    }

    /// Configuration adjusted by `f` before start.
    pub async fn with(f: impl FnOnce(&mut Config)) -> Env {
        Env::on_sim(start_sim().await, f).await
    }

    /// A gateway on a simulator already started (and perhaps prepared), its
    /// configuration adjusted by `f` before start.
    pub async fn on_sim(sim: sim::Sim, f: impl FnOnce(&mut Config)) -> Env {
        Env::on_dir(sim, TempDir::new("env"), f).await
    }

    /// [`Env::on_sim`] on a data directory (and database) prepared before.
    pub async fn on_dir(sim: sim::Sim, dir: TempDir, f: impl FnOnce(&mut Config)) -> Env {
        let mut config = config_for(&sim, &dir);
        f(&mut config);
        let store = Store::open_at(&config.database()).unwrap();
        let user_id = store.create_user("alice@example.com", false).unwrap();
        let key = runtime::auth::create_key(&store, user_id).unwrap();
        drop(store);
        let gw = server::start(config, TcpListener::bind("127.0.0.1:0").await.unwrap()).unwrap();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let env = Env {
            sim,
            gw,
            dir,
            key,
            user_id,
            client,
        };
        // What `server::start` starts in the background, awaited here so that
        // no test sees the stock-voice list being read in its request log.
        let _ = runtime::owners::is_stock(&env.gw.gateway, "").await;
        env.clear_sim_log().await;
        env
    }

    /// `http://gateway/api/v1/voice` + `path`.
    pub fn voice(&self, path: &str) -> String {
        format!("{}/api/v1/voice{}", self.gw.url(), path)
    }

    /// `http://gateway` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.gw.url(), path)
    }

    /// The store of the gateway (the same SQLite file).
    pub fn store(&self) -> &Store {
        &self.gw.gateway.store
    }

    /// Creates another user with a key.
    pub fn new_user(&self, email: &str) -> (i64, String) {
        let id = self.store().create_user(email, false).unwrap();
        let key = runtime::auth::create_key(self.store(), id).unwrap();
        (id, key)
    }

    /// Sends a request to the voice API with the env's key.
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Answer {
        self.call_as(&self.key, method, &self.voice(path), body)
            .await
    }

    /// Sends a request with `key` to a full URL.
    pub async fn call_as(&self, key: &str, method: &str, url: &str, body: Option<Value>) -> Answer {
        let mut rb = self
            .client
            .request(method.parse().unwrap(), url)
            .bearer_auth(key);
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        Answer::from(rb.send().await.expect("gateway answered")).await
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.call("GET", path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Answer {
        self.call("POST", path, Some(body)).await
    }

    // ---- simulator control ----

    pub async fn sim_requests(&self) -> Vec<Value> {
        let v: Value = self
            .client
            .get(format!("{}/__sim/requests", self.sim.url()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["requests"].as_array().cloned().unwrap_or_default()
    }

    pub async fn clear_sim_log(&self) {
        self.client
            .delete(format!("{}/__sim/requests", self.sim.url()))
            .send()
            .await
            .unwrap();
    }

    pub async fn fault(&self, spec: Value) {
        let r = self
            .client
            .post(format!("{}/__sim/faults", self.sim.url()))
            .json(&spec)
            .send()
            .await
            .unwrap();
        assert!(
            r.status().is_success(),
            "fault injection refused: {}",
            r.text().await.unwrap()
        );
    }

    /// Asserts that the gateway made no upstream call since the log was cleared.
    pub async fn assert_no_upstream_call(&self) {
        let reqs = self.sim_requests().await;
        assert!(reqs.is_empty(), "expected no upstream call, got {reqs:#?}");
    }

    pub fn audit(&self) -> Vec<AuditRecord> {
        self.store().audit_rows().unwrap()
    }
}

/// A gateway answer: status, headers, body as JSON (or text in `Value::String`).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
    pub json: Value,
}

impl Answer {
    pub async fn from(r: reqwest::Response) -> Answer {
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().await.unwrap();
        let json = serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.clone()));
        Answer {
            status,
            headers,
            text,
            json,
        }
    }

    /// The voice API's error message.
    pub fn detail(&self) -> &str {
        self.json["detail"]
            .as_str()
            .unwrap_or_else(|| panic!("no detail in {} {}", self.status, self.text))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts the status, printing the body on failure.
    #[track_caller]
    pub fn expect(&self, status: u16) -> &Answer {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {}",
            self.text
        );
        assert!(
            !self.text.contains(PROVIDER_KEY),
            "upstream key leaked: {}",
            self.text
        );
        self
    }
}

/// Minimal valid body for a few routes.
/// Runs `pg` (PostgreSQL) or `lite` (SQLite) on the env's database through
/// a connection of the test's own.
pub async fn own_sql(env: &Env, pg: &str, lite: &str) {
    own_sql_in(&env.dir, pg, lite).await
}

/// [`own_sql`] on the database of `dir`.
pub async fn own_sql_in(dir: &TempDir, pg: &str, lite: &str) {
    match dir.database_url() {
        Some(url) => {
            let (client, driver) = own_pg(&url).await;
            client.batch_execute(pg).await.unwrap();
            drop(client);
            let _ = driver.await;
        }
        None => own_lite_in(dir).execute_batch(lite).unwrap(),
    }
}

/// The text columns of the rows `sql` reads from the env's database, through
/// a connection of the test's own (columns read as text on both).
pub async fn own_query(env: &Env, sql: &str) -> Vec<Vec<String>> {
    match env.dir.database_url() {
        Some(url) => {
            let (client, driver) = own_pg(&url).await;
            let rows = client.query(sql, &[]).await.unwrap();
            drop(client);
            let _ = driver.await;
            rows.iter()
                .map(|r| (0..r.len()).map(|i| r.get(i)).collect())
                .collect()
        }
        None => {
            let conn = own_lite(env);
            let mut st = conn.prepare(sql).unwrap();
            let n = st.column_count();
            let rows = st
                .query_map([], |r| (0..n).map(|i| r.get(i)).collect())
                .unwrap();
            rows.map(Result::unwrap).collect()
        }
    }
}

/// A PostgreSQL connection of the test's own, and its driver task.
async fn own_pg(
    url: &str,
) -> (
    tokio_postgres::Client,
    tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>,
) {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    (client, tokio::spawn(conn))
}

/// A SQLite connection of the test's own to the env's database file.
fn own_lite(env: &Env) -> rusqlite::Connection {
    own_lite_in(&env.dir)
}

/// A SQLite connection of the test's own to `dir`'s database file.
fn own_lite_in(dir: &TempDir) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(dir.0.join("gateway.db")).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    conn
}

pub fn synth_body(text: &str) -> Value {
    json!({"voice_uuid": "stock-voice-1", "text": text, "output_format": "wav"})
}

impl Env {
    /// Credits the env's user (same code path as `gateway credits grant`).
    pub fn grant(&self, amount: &str) {
        self.store()
            .grant_credit(self.user_id, amount.parse().unwrap(), Some("test"))
            .unwrap();
    }

    /// The env user's balance.
    pub fn balance(&self) -> rust_decimal::Decimal {
        self.store().balance(self.user_id).unwrap()
    }

    /// Directory of the local object store.
    pub fn objects_dir(&self) -> PathBuf {
        self.dir.0.join("objects")
    }

    /// Every stored object (relative keys): the object files, the store's
    /// own `.`-files skipped, and the live packed objects (see
    /// [`Env::packed_keys`]).
    pub fn object_keys(&self) -> Vec<String> {
        fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
            let Ok(rd) = std::fs::read_dir(dir) else {
                return;
            };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') || name.ends_with(".meta") {
                    continue;
                }
                let p = e.path();
                if p.is_dir() {
                    walk(root, &p, out);
                } else {
                    out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.objects_dir(), &self.objects_dir(), &mut out);
        out.extend(self.packed_keys());
        out.sort();
        out
    }

    /// The live packed objects: the keys of the records read from the real
    /// segment files under `objects/.packs`, kept when their asset record
    /// says this segment and offset and is not deleted.
    pub fn packed_keys(&self) -> Vec<String> {
        let dir = self.objects_dir().join(runtime::objects::pack::PACKS_DIR);
        let mut out = Vec::new();
        for seg in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = seg.file_name().to_string_lossy().into_owned();
            for r in runtime::objects::pack::read_records(&seg.path()).unwrap_or_default() {
                let live = self.store().asset_by_key(&r.key).unwrap().is_some_and(|a| {
                    a.deleted_at.is_none()
                        && a.pack.as_deref() == Some(name.as_str())
                        && a.pack_offset == Some(r.offset)
                });
                if live {
                    out.push(r.key);
                }
            }
        }
        out.sort();
        out
    }

    /// Forces a simulator job to complete now.
    pub async fn complete_job(&self, upstream_id: &str) {
        self.end_job(upstream_id, "complete").await;
    }

    /// Forces a simulator job to fail now.
    pub async fn fail_job(&self, upstream_id: &str) {
        self.end_job(upstream_id, "fail").await;
    }

    async fn end_job(&self, upstream_id: &str, how: &str) {
        let url = format!("{}/__sim/jobs/{upstream_id}/{how}", self.sim.url());
        let r = self.client.post(url).send().await.unwrap();
        assert!(
            r.status().is_success(),
            "{how} {upstream_id}: {}",
            r.text().await.unwrap()
        );
    }

    /// Stops the gateway and starts it again on the same simulator, data
    /// directory and database, with `config` (from [`config_for`]).
    pub async fn restart(self, config: Config) -> Env {
        self.gw.stop().await;
        let gw = server::start(config, TcpListener::bind("127.0.0.1:0").await.unwrap()).unwrap();
        Env { gw, ..self }
    }

    /// Uploads `bytes` as `file_name` with an optional purpose.
    pub async fn upload(&self, file_name: &str, bytes: Vec<u8>, purpose: Option<&str>) -> Answer {
        let mut form = reqwest::multipart::Form::new();
        if let Some(p) = purpose {
            form = form.text("purpose", p.to_owned());
        }
        form = form.part(
            "file",
            reqwest::multipart::Part::bytes(bytes).file_name(file_name.to_owned()),
        );
        self.post_form(&self.voice("/uploads"), form).await
    }

    /// Posts a multipart form to a full URL with the env's key.
    pub async fn post_form(&self, url: &str, form: reqwest::multipart::Form) -> Answer {
        let r = self
            .client
            .post(url)
            .bearer_auth(&self.key)
            .multipart(form)
            .send()
            .await
            .unwrap();
        Answer::from(r).await
    }

    /// Usage rows of the database.
    pub fn usage(&self) -> Vec<runtime::store::UsageRow> {
        self.store().usage_rows().unwrap()
    }
}

/// A small real WAV file of `secs` seconds (16 kHz mono).
pub fn wav(secs: f64) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: 16000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut w = hound::WavWriter::new(&mut buf, spec).unwrap();
        for i in 0..(secs * 16000.0) as usize {
            w.write_sample(((i as f64 * 0.05).sin() * 8000.0) as i16)
                .unwrap();
        }
        w.finalize().unwrap();
    }
    buf.into_inner()
}

// ---- several instances ----

pub use runtime::cluster::testing::{fresh_prefix, redis_or_skip, Partition};

/// Two gateway instances behaving as one behind a load balancer: one
/// simulator, one database (PostgreSQL when the suite runs on it, else one
/// SQLite file), one S3-compatible server and bucket (the in-process
/// `objects::testing` server), one JWT secret, one Redis under a fresh
/// prefix (`GATEWAY_REDIS_PREFIX`, so tests never meet). `a` is an
/// ordinary [`Env`] (its user, key, simulator, data); `b` serves the same data.
pub struct Pair {
    pub a: Env,
    pub b: server::Running,
    pub redis_url: String,
    pub prefix: String,
    pub s3: runtime::objects::testing::S3TestServer,
}

/// The pair's bucket.
pub const PAIR_BUCKET: &str = "pair";

impl Pair {
    /// A pair on a fresh simulator, each configuration adjusted by `f`;
    /// `None` (the test skips, saying so) when Redis is unreachable, unless
    /// `GATEWAY_TEST_REQUIRE_REDIS=1`.
    pub async fn start(test: &str, f: impl Fn(&mut Config)) -> Option<Pair> {
        Pair::on_sim(test, start_sim().await, f).await
    }

    /// [`start`](Self::start) on a simulator already started.
    pub async fn on_sim(test: &str, sim: sim::Sim, f: impl Fn(&mut Config)) -> Option<Pair> {
        Pair::on_sim_b(test, sim, f, |_| {}).await
    }

    /// [`on_sim`](Self::on_sim), instance B's configuration adjusted by
    /// `b` after `f`.
    pub async fn on_sim_b(
        test: &str,
        sim: sim::Sim,
        f: impl Fn(&mut Config),
        b: impl FnOnce(&mut Config),
    ) -> Option<Pair> {
        let redis_url = redis_or_skip(test).await?;
        let prefix = fresh_prefix("it");
        let redis = runtime::cluster::RedisConfig::parse(&redis_url, Some(&prefix)).unwrap();
        let s3 = runtime::objects::testing::S3TestServer::start().unwrap();
        s3.store(PAIR_BUCKET).await.unwrap(); // creates the bucket
        let objects = runtime::objects::ObjectConfig::from_lookup(|name| {
            s3.env(PAIR_BUCKET)
                .into_iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v)
        })
        .unwrap();
        let shared = |c: &mut Config| {
            c.redis = Some(redis.clone());
            c.objects = objects.clone();
            f(c);
        };
        let a = Env::on_sim(sim, shared).await;
        let mut config = config_for(&a.sim, &a.dir);
        shared(&mut config);
        b(&mut config);
        let b = server::start(config, TcpListener::bind("127.0.0.1:0").await.unwrap()).unwrap();
        let pair = Pair {
            a,
            b,
            redis_url,
            prefix,
            s3,
        };
        // Subscribed before the test starts, so that no message is missed.
        for gw in [&pair.a.gw.gateway, &pair.b.gateway] {
            let cluster = gw.cluster.as_ref().expect("configured");
            let start = std::time::Instant::now();
            while !cluster.bus_connected() {
                assert!(
                    start.elapsed() < Duration::from_secs(5),
                    "the cluster bus did not connect"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        Some(pair)
    }

    /// Keys of the objects in the pair's bucket.
    pub fn s3_keys(&self) -> Vec<String> {
        fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                let name = e.file_name().to_string_lossy().into_owned();
                if p.is_dir() {
                    walk(root, &p, out);
                } else if !name.starts_with('.') && !name.contains(".s3s") {
                    out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
                }
            }
        }
        let root = self.s3.root().join(PAIR_BUCKET);
        let mut out = Vec::new();
        walk(&root, &root, &mut out);
        out
    }

    /// `http://instance A` + `path`.
    pub fn url_a(&self, path: &str) -> String {
        self.a.url(path)
    }

    /// `http://instance B` + `path`.
    pub fn url_b(&self, path: &str) -> String {
        format!("{}{}", self.b.url(), path)
    }

    /// A command on the pair's Redis (the test's own connection).
    pub async fn redis<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        let client = redis::Client::open(self.redis_url.as_str()).unwrap();
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        cmd.query_async(&mut c).await.unwrap()
    }
}
