//! Serving: the accept loop, the per-request pipeline and response helpers.
//!
//! Each accepted socket gets `TCP_NODELAY` and a hyper 1 HTTP/1.1 connection
//! (keep-alive). A request then goes through:
//!
//! 1. `/__sim/...` (except media) → [`crate::control`], untouched by the rest;
//! 2. buffer the body, parse multipart parts, append to the [request log](crate::log);
//! 3. [fault rules](crate::faults) (a `reset` makes the service fail, so hyper
//!    closes the connection without writing a response);
//! 4. credentials when `api_key` is configured (media needs none);
//! 5. [`crate::resources::route`] (or media).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full, StreamBody};
use hyper::body::Frame;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::faults::Effect;
use crate::resources::Store;
use crate::SimConfig;

/// A streamed response body's frames.
pub type FrameStream =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send>>;

/// Response body: whole bytes, or a stream (server-sent events).
pub type Body = Either<Full<Bytes>, StreamBody<FrameStream>>;

/// Response type of every handler.
pub type Resp = Response<Body>;

/// A response with a whole body.
pub fn full(bytes: impl Into<Bytes>) -> Resp {
    Response::new(Either::Left(Full::new(bytes.into())))
}

/// Cache key of rendered synthesis audio: (mp3?, sample rate, bits, duration ms).
pub type AudioKey = (bool, u32, u16, u64);

/// Rendered synthesis audio, cached by [`AudioKey`].
#[derive(Debug)]
pub struct Rendered {
    /// The audio file.
    pub bytes: Bytes,
    /// Base64 of the audio file.
    pub base64: String,
    /// Exact duration in seconds (ms precision).
    pub duration: f64,
    /// Sample rate actually used.
    pub sample_rate: u32,
}

/// State shared by the server, handlers and background tasks.
pub struct Shared {
    /// Bound address.
    pub addr: SocketAddr,
    /// `http://ADDR`, the prefix of media URLs.
    pub root: String,
    /// Run-time configuration (`POST /__sim/config` changes it).
    pub config: RwLock<SimConfig>,
    /// Resources, jobs, media and billing.
    pub store: Mutex<Store>,
    /// Request log.
    pub log: crate::log::RequestLog,
    /// Fault rules.
    pub faults: crate::faults::Faults,
    /// Outbound HTTP client (webhooks, URL probes).
    pub client: reqwest::Client,
    /// Delay between server-sent events of streamed completions (ms).
    pub stream_delay_ms: std::sync::atomic::AtomicU64,
    /// Rendered synthesis audio.
    pub audio_cache: Mutex<HashMap<AudioKey, Arc<Rendered>>>,
    /// Webhook delivery records (see [`crate::webhook`]).
    webhooks: Mutex<Vec<Value>>,
    /// Becomes true when the simulator stops.
    shutdown: watch::Sender<bool>,
}

impl Shared {
    /// Fresh state with stock voices seeded.
    pub fn new(addr: SocketAddr, config: SimConfig) -> Arc<Shared> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("HTTP client");
        Arc::new(Shared {
            addr,
            root: format!("http://{addr}"),
            config: RwLock::new(config),
            store: Mutex::new(Store::new()),
            log: Default::default(),
            faults: Default::default(),
            client,
            stream_delay_ms: std::sync::atomic::AtomicU64::new(15),
            audio_cache: Mutex::new(HashMap::new()),
            webhooks: Mutex::new(Vec::new()),
            shutdown: watch::channel(false).0,
        })
    }

    /// A copy of the current configuration.
    pub fn config(&self) -> SimConfig {
        self.config.read().unwrap().clone()
    }

    /// Signals the accept loop, connections and background tasks to stop.
    pub fn stop(&self) {
        self.shutdown.send_replace(true);
    }

    /// True once [`Shared::stop`] was called.
    pub fn stopped(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Spawns a task that is cancelled when the simulator stops.
    pub fn spawn<F>(&self, fut: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let mut rx = self.shutdown.subscribe();
        tokio::spawn(async move {
            tokio::select! {
                _ = wait_stopped(&mut rx) => {}
                _ = fut => {}
            }
        });
    }

    /// Records a webhook delivery (see [`crate::webhook`]).
    pub fn record_webhook(&self, entry: Value) {
        let mut w = self.webhooks.lock().unwrap();
        if w.len() >= 10_000 {
            w.remove(0);
        }
        w.push(entry);
    }

    /// Webhook deliveries so far.
    pub fn webhook_log(&self) -> Vec<Value> {
        self.webhooks.lock().unwrap().clone()
    }

    /// Forgets recorded webhook deliveries.
    pub fn clear_webhooks(&self) {
        self.webhooks.lock().unwrap().clear();
    }

    /// Credential check: `Authorization: Bearer K`, `Authorization: Token token=K`
    /// or `x-access-token: K`; always true without a configured key.
    pub fn authorized(&self, headers: &HeaderMap) -> bool {
        let cfg = self.config.read().unwrap();
        let Some(key) = cfg.api_key.as_deref() else {
            return true;
        };
        if let Some(v) = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) {
            let v = v.trim();
            let (scheme, rest) = v.split_once(' ').unwrap_or((v, ""));
            let rest = rest.trim();
            if scheme.eq_ignore_ascii_case("bearer") && rest == key {
                return true;
            }
            if scheme.eq_ignore_ascii_case("token") {
                let token = rest
                    .strip_prefix("token=")
                    .unwrap_or(rest)
                    .trim_matches('"');
                if token == key {
                    return true;
                }
            }
        }
        headers
            .get("x-access-token")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() == key)
    }
}

async fn wait_stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|stopped| *stopped).await;
}

/// Accepts connections until the simulator stops.
pub async fn accept_loop(listener: TcpListener, sh: Arc<Shared>) {
    let mut stop = sh.shutdown.subscribe();
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = wait_stopped(&mut stop) => break,
        };
        let _ = stream.set_nodelay(true);
        let conn_sh = sh.clone();
        sh.spawn(async move {
            let svc = hyper::service::service_fn(move |req| handle(conn_sh.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// The error a `reset` fault returns: hyper then drops the connection without
/// writing any response.
#[derive(Debug)]
pub struct Reset;

impl std::fmt::Display for Reset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection reset (injected fault)")
    }
}

impl std::error::Error for Reset {}

/// Handles one request (the whole pipeline described in the module docs).
pub async fn handle(sh: Arc<Shared>, req: Request<Incoming>) -> Result<Resp, Reset> {
    let is_media = req.uri().path().starts_with("/__sim/media/");
    let control =
        !is_media && (req.uri().path().starts_with("/__sim/") || req.uri().path() == "/__sim");
    let (parts, body) = req.into_parts();
    let body = body.collect().await.map_err(|_| Reset)?.to_bytes();
    let req = Req::new(parts, body).await;
    if control {
        return Ok(crate::control::handle(&sh, &req));
    }
    sh.log.push(&req);
    if let Some(fault) = sh.faults.take(&req.method, &req.path) {
        if let Some(d) = fault.delay {
            tokio::time::sleep(d).await;
        }
        match fault.effect {
            Effect::Proceed => {}
            Effect::Respond {
                status,
                body,
                headers,
            } => {
                let mut resp = match body {
                    Value::String(text) => {
                        let mut r = full(text);
                        r.headers_mut()
                            .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
                        r
                    }
                    other => json_response(StatusCode::OK, &other),
                };
                *resp.status_mut() = status;
                for (k, v) in headers {
                    resp.headers_mut().insert(k, v);
                }
                return Ok(resp);
            }
            Effect::Reset => return Err(Reset),
            Effect::Timeout => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                return Err(Reset);
            }
        }
    }
    if is_media {
        return Ok(crate::control::media(&sh, &req));
    }
    if !sh.authorized(&req.headers) {
        return Ok(error(
            StatusCode::UNAUTHORIZED,
            "Invalid or missing API token",
            None,
        ));
    }
    if req.path.starts_with("/v1/") {
        return Ok(crate::openai::route(&sh, &req));
    }
    Ok(crate::resources::route(&sh, &req))
}

/// One multipart part.
#[derive(Clone, Debug)]
pub struct Part {
    /// Field name.
    pub name: String,
    /// File name, for file parts.
    pub filename: Option<String>,
    /// Part content type.
    pub content_type: Option<String>,
    /// Contents.
    pub data: Bytes,
}

/// A buffered request.
#[derive(Clone, Debug)]
pub struct Req {
    /// Method.
    pub method: Method,
    /// Path without query string.
    pub path: String,
    /// Raw query string.
    pub query: Option<String>,
    /// Headers.
    pub headers: HeaderMap,
    /// `Content-Type` header value.
    pub content_type: Option<String>,
    /// Raw body.
    pub body: Bytes,
    /// Parts, for `multipart/form-data` bodies that parse.
    pub parts: Option<Vec<Part>>,
}

impl Req {
    /// Buffers `parts` + `body`, parsing multipart bodies.
    pub async fn new(parts: http::request::Parts, body: Bytes) -> Req {
        let content_type = parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let multipart = match content_type.as_deref() {
            Some(ct) if ct.to_ascii_lowercase().starts_with("multipart/") => {
                parse_multipart(ct, body.clone()).await
            }
            _ => None,
        };
        Req {
            method: parts.method,
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().map(str::to_owned),
            headers: parts.headers,
            content_type,
            body,
            parts: multipart,
        }
    }

    /// A query parameter (first occurrence, decoded).
    pub fn query_param(&self, name: &str) -> Option<String> {
        let q = self.query.as_deref()?;
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(q).ok()?;
        pairs.into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// True for JSON bodies (or bodies without a content type that start like JSON).
    fn is_json(&self) -> bool {
        match &self.content_type {
            Some(ct) => ct.to_ascii_lowercase().contains("json"),
            None => self
                .body
                .iter()
                .find(|b| !b.is_ascii_whitespace())
                .is_some_and(|b| *b == b'{'),
        }
    }

    /// The body's fields as an object: a JSON object, the text parts of a
    /// multipart body, or a URL-encoded form. An empty body is an empty object.
    pub fn fields(&self) -> Result<Map<String, Value>, Resp> {
        if let Some(parts) = &self.parts {
            let mut m = Map::new();
            for p in parts.iter().filter(|p| p.filename.is_none()) {
                if let Ok(s) = std::str::from_utf8(&p.data) {
                    m.insert(p.name.clone(), Value::String(s.to_owned()));
                }
            }
            return Ok(m);
        }
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Map::new());
        }
        if self.is_json() {
            return match serde_json::from_slice::<Value>(&self.body) {
                Ok(Value::Object(m)) => Ok(m),
                Ok(_) => Err(error(
                    StatusCode::BAD_REQUEST,
                    "request body must be a JSON object",
                    None,
                )),
                Err(e) => Err(error(
                    StatusCode::BAD_REQUEST,
                    &format!("invalid JSON body: {e}"),
                    None,
                )),
            };
        }
        if self
            .content_type
            .as_deref()
            .is_some_and(|ct| ct.to_ascii_lowercase().contains("x-www-form-urlencoded"))
        {
            let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(&self.body)
                .map_err(|_| error(StatusCode::BAD_REQUEST, "invalid form body", None))?;
            return Ok(pairs
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect());
        }
        Err(error(
            StatusCode::BAD_REQUEST,
            "unsupported request body",
            None,
        ))
    }

    /// The first part named `name`.
    pub fn part(&self, name: &str) -> Option<&Part> {
        self.parts.as_ref()?.iter().find(|p| p.name == name)
    }
}

async fn parse_multipart(content_type: &str, body: Bytes) -> Option<Vec<Part>> {
    let boundary = multer::parse_boundary(content_type).ok()?;
    let stream = futures_util::stream::once(async move { Ok::<Bytes, Infallible>(body) });
    let mut mp = multer::Multipart::new(stream, boundary);
    let mut parts = Vec::new();
    while let Some(field) = mp.next_field().await.ok()? {
        let name = field.name().unwrap_or_default().to_owned();
        let filename = field.file_name().map(str::to_owned);
        let content_type = field.content_type().map(|m| m.to_string());
        let data = field.bytes().await.ok()?;
        parts.push(Part {
            name,
            filename,
            content_type,
            data,
        });
    }
    Some(parts)
}

/// A JSON response.
pub fn json_response<T: Serialize + ?Sized>(status: StatusCode, body: &T) -> Resp {
    let mut r = full(serde_json::to_vec(body).expect("serializable"));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// `200` with `body`.
pub fn ok(body: Value) -> Resp {
    json_response(StatusCode::OK, &body)
}

/// `{"success": true, "item": item}`.
pub fn ok_item(item: Value) -> Resp {
    ok(json!({"success": true, "item": item}))
}

/// Snake-case error code of a status (`not_found`, `bad_request`, ...).
pub fn error_code(status: StatusCode) -> String {
    status
        .canonical_reason()
        .unwrap_or("error")
        .to_ascii_lowercase()
        .replace(['-', ' '], "_")
        .replace('\'', "")
}

/// An upstream-style error:
/// `{"success": false, "message", "error", "errors": {field: [msg]}}`.
pub fn error(status: StatusCode, message: &str, field: Option<(&str, &str)>) -> Resp {
    let mut errors = Map::new();
    if let Some((f, m)) = field {
        errors.insert(f.to_owned(), json!([m]));
    }
    json_response(
        status,
        &json!({"success": false, "message": message, "error": error_code(status), "errors": errors}),
    )
}

/// 404 for an unknown `what`.
pub fn not_found(what: &str) -> Resp {
    error(StatusCode::NOT_FOUND, &format!("{what} not found"), None)
}

/// 400 for a missing or invalid field.
pub fn bad_field(field: &str, message: &str) -> Resp {
    error(
        StatusCode::BAD_REQUEST,
        &format!("{field} {message}"),
        Some((field, message)),
    )
}
