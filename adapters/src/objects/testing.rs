//! An S3-compatible server on loopback, in-process, for tests.
//!
//! Compiled in this crate's tests and, for other crates, behind the
//! `testing` feature:
//!
//! ```toml
//! [dev-dependencies]
//! runtime = { path = "../runtime", features = ["testing"] }
//! ```
//!
//! ```ignore
//! let s3 = runtime::objects::testing::S3TestServer::start()?;   // no runtime needed
//! let store = s3.store("audio").await?;                          // bucket created
//! // or hand s3.env("audio") to a gateway process.
//! ```
//!
//! The server is `s3s-fs` (files in a fresh temporary directory) behind
//! `s3s`, which checks SigV4 signatures — of requests and of presigned
//! URLs, expiry included — with the fixed [`ACCESS_KEY`] / [`SECRET_KEY`].
//! It runs on its own thread with its own Tokio runtime, so it serves
//! whatever the test does (blocking calls included) and works from sync or
//! async tests. Dropping the handle stops it and removes its directory.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::config::{
    GATEWAY_OBJECT_STORE, GATEWAY_S3_ACCESS_KEY, GATEWAY_S3_BUCKET, GATEWAY_S3_ENDPOINT,
    GATEWAY_S3_PATH_STYLE, GATEWAY_S3_REGION, GATEWAY_S3_SECRET_KEY,
};
use super::s3::{S3Config, S3Store};
use super::types::ObjectError;

/// Access key the test server accepts.
pub const ACCESS_KEY: &str = "gateway-test-access";
/// Secret key of [`ACCESS_KEY`].
pub const SECRET_KEY: &str = "gateway-test-secret-0123456789";
/// Region used in [`S3TestServer::config`].
pub const REGION: &str = "us-east-1";

/// A running test S3 server. Stops when dropped.
pub struct S3TestServer {
    addr: SocketAddr,
    root: PathBuf,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl S3TestServer {
    /// Starts a server on `127.0.0.1:<free port>` over a new empty directory.
    pub fn start() -> std::io::Result<S3TestServer> {
        let root = std::env::temp_dir().join(format!(
            "gateway-s3-test-{}-{}",
            std::process::id(),
            hex::encode(rand::random::<[u8; 6]>())
        ));
        std::fs::create_dir_all(&root)?;
        let fs = s3s_fs::FileSystem::new(&root)
            .map_err(|e| std::io::Error::other(format!("s3s-fs: {e:?}")))?;
        let service = {
            let mut builder = s3s::service::S3ServiceBuilder::new(fs);
            builder.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
            builder.build()
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (shutdown, mut stop) = tokio::sync::oneshot::channel::<()>();
        let thread_root = root.clone();
        let thread = std::thread::Builder::new()
            .name("s3-test-server".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        eprintln!("s3 test server: no runtime: {e}");
                        return;
                    }
                };
                rt.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    loop {
                        let socket = tokio::select! {
                            accepted = listener.accept() => match accepted {
                                Ok((socket, _)) => socket,
                                Err(_) => continue,
                            },
                            _ = &mut stop => break,
                        };
                        let _ = socket.set_nodelay(true);
                        let service = service.clone();
                        tokio::spawn(async move {
                            let io = hyper_util::rt::TokioIo::new(socket);
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(io, service)
                                .await;
                        });
                    }
                });
                // Dropping the runtime ends the connections still open.
                drop(rt);
                let _ = std::fs::remove_dir_all(&thread_root);
            })?;
        Ok(S3TestServer {
            addr,
            root,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the server keeps its files (one directory per bucket).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A path-style configuration for `bucket` on this server.
    pub fn config(&self, bucket: &str) -> S3Config {
        S3Config {
            endpoint: self.endpoint(),
            region: REGION.into(),
            bucket: bucket.into(),
            access_key: ACCESS_KEY.into(),
            secret_key: SECRET_KEY.into(),
            path_style: true,
            timeout: super::s3::DEFAULT_REQUEST_TIMEOUT,
        }
    }

    /// A store for `bucket`, created on the server if missing.
    pub async fn store(&self, bucket: &str) -> Result<S3Store, ObjectError> {
        let store = S3Store::new(self.config(bucket))?;
        store.ensure_bucket().await?;
        Ok(store)
    }

    /// The environment selecting this server for `bucket`
    /// (`GATEWAY_OBJECT_STORE=s3`, `GATEWAY_S3_*`), e.g. for a gateway
    /// process. The bucket must exist: create it with [`S3TestServer::store`].
    pub fn env(&self, bucket: &str) -> Vec<(&'static str, String)> {
        vec![
            (GATEWAY_OBJECT_STORE, "s3".into()),
            (GATEWAY_S3_ENDPOINT, self.endpoint()),
            (GATEWAY_S3_REGION, REGION.into()),
            (GATEWAY_S3_BUCKET, bucket.into()),
            (GATEWAY_S3_ACCESS_KEY, ACCESS_KEY.into()),
            (GATEWAY_S3_SECRET_KEY, SECRET_KEY.into()),
            (GATEWAY_S3_PATH_STYLE, "true".into()),
        ]
    }
}

impl Drop for S3TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
