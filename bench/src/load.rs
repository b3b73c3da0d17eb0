//! The load generator, on the project's own HTTP stack (hyper 1 client
//! connections over tokio).
//!
//! * **Closed loop** (default): `concurrency` workers, each with its own
//!   keep-alive connection (`TCP_NODELAY`), each sending its next request as
//!   soon as the previous answer's body has been read to the end.
//! * **Open loop** (`rate`): the same workers send on a fixed schedule
//!   (request *k* of the run at `start + k / rate`, dealt round-robin to the
//!   workers); latency is measured from the scheduled time, so a server that
//!   falls behind is charged for the queueing it causes (no coordinated
//!   omission).
//!
//! A run warms up first (requests sent, nothing recorded), then measures for
//! its duration. Latencies go to an HDR histogram in nanoseconds (3
//! significant digits). A request counts as an error when it fails at the
//! network level, times out, or answers anything but 2xx — in the warm-up
//! too; the connection is then replaced.
//!
//! Uploads use [`GeneratedBody`], a multipart body produced as a stream of
//! one reused chunk: a 500 MiB upload never exists in memory.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, HOST};
use http::{Method, Request, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Error samples kept per run.
const MAX_ERROR_SAMPLES: usize = 5;
/// Size of the chunk a generated upload is made of.
const UPLOAD_CHUNK: usize = 256 * 1024;
/// Multipart boundary of uploads.
const BOUNDARY: &str = "gateway-bench-boundary-7d1f3c";

/// One request, sent again and again.
#[derive(Clone, Debug)]
pub struct Spec {
    /// Method.
    pub method: Method,
    /// Path and query.
    pub path: String,
    /// Extra headers (authorization, content type).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Body (empty for GET).
    pub body: Bytes,
}

impl Spec {
    /// A GET of `path` with `headers`.
    pub fn get(path: impl Into<String>, headers: Vec<(HeaderName, HeaderValue)>) -> Spec {
        Spec {
            method: Method::GET,
            path: path.into(),
            headers,
            body: Bytes::new(),
        }
    }

    /// A POST of a JSON body.
    pub fn post_json(
        path: impl Into<String>,
        mut headers: Vec<(HeaderName, HeaderValue)>,
        body: &serde_json::Value,
    ) -> Spec {
        headers.push((CONTENT_TYPE, HeaderValue::from_static("application/json")));
        Spec {
            method: Method::POST,
            path: path.into(),
            headers,
            body: Bytes::from(body.to_string()),
        }
    }

    fn request<B>(&self, addr: SocketAddr, body: B) -> Request<B> {
        let mut b = Request::builder()
            .method(self.method.clone())
            .uri(self.path.as_str())
            .header(HOST, addr.to_string());
        for (k, v) in &self.headers {
            b = b.header(k, v);
        }
        b.body(body).expect("valid request parts")
    }
}

/// How to load one target.
#[derive(Clone, Debug)]
pub struct Load {
    /// Where to send.
    pub addr: SocketAddr,
    /// Workers (= connections).
    pub concurrency: usize,
    /// Unrecorded warm-up.
    pub warmup: Duration,
    /// Measured time.
    pub duration: Duration,
    /// Open loop at this many requests/s; closed loop when `None`.
    pub rate: Option<f64>,
    /// Longest time one request may take before it counts as an error.
    pub timeout: Duration,
}

/// Measurement-window boundaries, reported to the caller (to sample CPU time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Recording starts now.
    MeasureStart,
    /// Every recorded request has completed.
    MeasureEnd,
}

/// What a run measured.
#[derive(Debug)]
pub struct Outcome {
    /// Latencies of successful measured requests (ns).
    pub hist: Histogram<u64>,
    /// Times to the first byte of the answer's body (ns).
    pub ttfb: Histogram<u64>,
    /// Successful measured requests.
    pub ok: u64,
    /// Failed requests (warm-up included).
    pub errors: u64,
    /// The first few error messages.
    pub error_samples: Vec<String>,
    /// From the start of the measurement to the end of its last request.
    pub elapsed: Duration,
    /// Response body bytes read in the measurement.
    pub bytes: u64,
}

impl Outcome {
    /// Nothing measured yet.
    pub fn empty() -> Outcome {
        Outcome {
            hist: new_histogram(),
            ttfb: new_histogram(),
            ok: 0,
            errors: 0,
            error_samples: Vec::new(),
            elapsed: Duration::ZERO,
            bytes: 0,
        }
    }

    fn error(&mut self, msg: String) {
        self.errors += 1;
        if self.error_samples.len() < MAX_ERROR_SAMPLES {
            self.error_samples.push(msg);
        }
    }

    fn merge(&mut self, o: Outcome) {
        let _ = self.hist.add(&o.hist);
        let _ = self.ttfb.add(&o.ttfb);
        self.ok += o.ok;
        self.bytes += o.bytes;
        self.errors += o.errors;
        for m in o.error_samples {
            if self.error_samples.len() < MAX_ERROR_SAMPLES {
                self.error_samples.push(m);
            }
        }
    }

    /// Successful requests per second.
    pub fn rps(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.ok as f64 / s
        } else {
            0.0
        }
    }
}

/// A latency histogram: 1 µs to 10 min, in ns, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1_000, 600_000_000_000, 3).expect("valid histogram bounds")
}

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

/// Opens a keep-alive HTTP/1.1 connection with `TCP_NODELAY`.
pub async fn connect<B>(addr: SocketAddr) -> Result<SendRequest<B>, String>
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    stream
        .set_nodelay(true)
        .map_err(|e| format!("TCP_NODELAY: {e}"))?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// Sends `req` on `sender` and reads the whole answer: status and body
/// (only its first `keep` bytes are kept; all are counted), and when its
/// first body byte arrived.
async fn exchange<B>(
    sender: &mut SendRequest<B>,
    req: Request<B>,
    keep: usize,
) -> Result<(StatusCode, Vec<u8>, u64, Option<Instant>), String>
where
    B: Body + Send + 'static,
{
    sender
        .ready()
        .await
        .map_err(|e| format!("connection: {e}"))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| format!("request: {e}"))?;
    let status = resp.status();
    let mut body = resp.into_body();
    let mut kept = Vec::new();
    let mut n = 0u64;
    let mut first = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("response body: {e}"))?;
        if let Some(d) = frame.data_ref() {
            if first.is_none() && !d.is_empty() {
                first = Some(Instant::now());
            }
            n += d.len() as u64;
            if kept.len() < keep {
                kept.extend_from_slice(&d[..d.len().min(keep - kept.len())]);
            }
        }
    }
    Ok((status, kept, n, first))
}

/// One request on a fresh connection, for set-up steps: status and body.
pub async fn call(
    addr: SocketAddr,
    spec: &Spec,
    timeout: Duration,
) -> Result<(StatusCode, Vec<u8>), String> {
    let fut = async {
        let mut sender = connect::<Full<Bytes>>(addr).await?;
        let (status, body, _, _) = exchange(
            &mut sender,
            spec.request(addr, Full::new(spec.body.clone())),
            usize::MAX,
        )
        .await?;
        Ok((status, body))
    };
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| format!("{} {}: timed out", spec.method, spec.path))?
}

/// Like [`call`], but a non-2xx answer is an error; returns the body as JSON.
pub async fn call_json(
    addr: SocketAddr,
    spec: &Spec,
    timeout: Duration,
) -> Result<serde_json::Value, String> {
    let (status, body) = call(addr, spec, timeout).await?;
    if !status.is_success() {
        return Err(format!(
            "{} {} -> {status}: {}",
            spec.method,
            spec.path,
            String::from_utf8_lossy(&body)
        ));
    }
    serde_json::from_slice(&body)
        .map_err(|e| format!("{} {}: answer is not JSON ({e})", spec.method, spec.path))
}

/// State shared by the workers of one run.
struct Shared {
    phase: AtomicU8,
    start: Instant,
}

/// Runs `spec` against `load.addr`: warm-up, then measurement; `on` is told
/// when the measurement window opens and when its last request has ended.
pub async fn run(load: &Load, spec: &Spec, mut on: impl FnMut(Event)) -> Outcome {
    let shared = Arc::new(Shared {
        phase: AtomicU8::new(WARMUP),
        start: Instant::now(),
    });
    let spec = Arc::new(spec.clone());
    let workers: Vec<_> = (0..load.concurrency.max(1))
        .map(|i| tokio::spawn(worker(i, load.clone(), spec.clone(), shared.clone())))
        .collect();
    tokio::time::sleep(load.warmup).await;
    on(Event::MeasureStart);
    let t0 = Instant::now();
    shared.phase.store(MEASURE, Ordering::SeqCst);
    tokio::time::sleep(load.duration).await;
    shared.phase.store(STOP, Ordering::SeqCst);
    let mut total = Outcome::empty();
    for w in workers {
        match w.await {
            Ok(o) => total.merge(o),
            Err(e) => total.error(format!("worker panicked: {e}")),
        }
    }
    total.elapsed = t0.elapsed();
    on(Event::MeasureEnd);
    total
}

/// One worker: one connection at a time, requests until the run stops.
async fn worker(index: usize, load: Load, spec: Arc<Spec>, shared: Arc<Shared>) -> Outcome {
    let mut out = Outcome::empty();
    let mut sender: Option<SendRequest<Full<Bytes>>> = None;
    let workers = load.concurrency.max(1) as u64;
    let mut k: u64 = 0;
    loop {
        // Open loop: wait for this worker's next slot; latency counts from it.
        let intended = match load.rate {
            Some(rate) if rate > 0.0 => {
                let slot = k * workers + index as u64;
                let at = shared.start + Duration::from_secs_f64(slot as f64 / rate);
                tokio::time::sleep_until(at.into()).await;
                at
            }
            _ => Instant::now(),
        };
        k += 1;
        let phase = shared.phase.load(Ordering::SeqCst);
        if phase == STOP {
            break;
        }
        let s = match sender.take() {
            Some(s) if !s.is_closed() => Some(s),
            _ => match connect(load.addr).await {
                Ok(s) => Some(s),
                Err(e) => {
                    out.error(e);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    None
                }
            },
        };
        let Some(mut s) = s else { continue };
        let req = spec.request(load.addr, Full::new(spec.body.clone()));
        let result = tokio::time::timeout(load.timeout, exchange(&mut s, req, 300)).await;
        let latency = intended.elapsed();
        match result {
            Ok(Ok((status, _, n, first))) if status.is_success() => {
                if phase == MEASURE {
                    out.hist.saturating_record(latency.as_nanos() as u64);
                    let ttfb = first.map_or(latency, |f| f.saturating_duration_since(intended));
                    out.ttfb.saturating_record(ttfb.as_nanos() as u64);
                    out.ok += 1;
                    out.bytes += n;
                }
                sender = Some(s);
            }
            Ok(Ok((status, body, _, _))) => {
                out.error(format!(
                    "{} {} -> {status}: {}",
                    spec.method,
                    spec.path,
                    String::from_utf8_lossy(&body)
                ));
                sender = Some(s);
            }
            Ok(Err(e)) => out.error(format!("{} {}: {e}", spec.method, spec.path)),
            Err(_) => out.error(format!(
                "{} {}: timed out after {:?}",
                spec.method, spec.path, load.timeout
            )),
        }
    }
    out
}

/// One piece of a [`GeneratedBody`].
enum Part {
    /// Bytes as they are.
    Bytes(Bytes),
    /// `remaining` bytes of filler, produced chunk by chunk.
    Fill(u64),
}

/// A request body made of fixed parts and generated filler, produced on
/// demand (constant memory whatever its length), with an exact length.
pub struct GeneratedBody {
    parts: VecDeque<Part>,
    chunk: Bytes,
}

impl GeneratedBody {
    fn len(&self) -> u64 {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Bytes(b) => b.len() as u64,
                Part::Fill(n) => *n,
            })
            .sum()
    }
}

impl Body for GeneratedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        loop {
            match this.parts.front_mut() {
                None => return Poll::Ready(None),
                Some(Part::Bytes(_)) => {
                    let Some(Part::Bytes(b)) = this.parts.pop_front() else {
                        unreachable!()
                    };
                    if !b.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(b))));
                    }
                }
                Some(Part::Fill(remaining)) => {
                    if *remaining == 0 {
                        this.parts.pop_front();
                        continue;
                    }
                    let n = (*remaining).min(this.chunk.len() as u64);
                    *remaining -= n;
                    return Poll::Ready(Some(Ok(Frame::data(this.chunk.slice(..n as usize)))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.len() == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len())
    }
}

/// What an upload sends as its file.
#[derive(Clone, Debug)]
pub enum FileContent {
    /// This many generated bytes.
    Generated(u64),
    /// These bytes.
    Bytes(Bytes),
}

/// A multipart upload request: form field `file` named `file_name`, an
/// optional `purpose` field before it.
pub fn upload_request(
    addr: SocketAddr,
    path: &str,
    headers: &[(HeaderName, HeaderValue)],
    file_name: &str,
    purpose: Option<&str>,
    content: &FileContent,
) -> Request<GeneratedBody> {
    let mut head = String::new();
    if let Some(p) = purpose {
        head.push_str(&format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n{p}\r\n"
        ));
    }
    head.push_str(&format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
    ));
    let mut parts = VecDeque::from([Part::Bytes(Bytes::from(head))]);
    parts.push_back(match content {
        FileContent::Generated(n) => Part::Fill(*n),
        FileContent::Bytes(b) => Part::Bytes(b.clone()),
    });
    parts.push_back(Part::Bytes(Bytes::from(format!("\r\n--{BOUNDARY}--\r\n"))));
    // Filler: a repeating byte pattern (not all zeros, in case anything compresses).
    let chunk: Bytes = (0..UPLOAD_CHUNK)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    let body = GeneratedBody { parts, chunk };
    let len = body.len();
    let mut b = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header(HOST, addr.to_string())
        .header(
            CONTENT_TYPE,
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .header(CONTENT_LENGTH, len);
    for (k, v) in headers {
        b = b.header(k, v);
    }
    b.body(body).expect("valid request parts")
}

/// Sends one upload on a fresh connection: status, answer, time taken.
pub async fn upload(
    addr: SocketAddr,
    req: Request<GeneratedBody>,
    timeout: Duration,
) -> Result<(StatusCode, Vec<u8>, Duration), String> {
    let started = Instant::now();
    let fut = async {
        let mut sender = connect::<GeneratedBody>(addr).await?;
        let (status, body, _, _) = exchange(&mut sender, req, 64 * 1024).await?;
        Ok::<_, String>((status, body))
    };
    let (status, body) = tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| format!("upload timed out after {timeout:?}"))??;
    Ok((status, body, started.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn generated_body_is_exact_and_streamed() {
        let req = upload_request(
            "127.0.0.1:1".parse().unwrap(),
            "/up",
            &[],
            "a.wav",
            Some("x"),
            &FileContent::Generated(3 * UPLOAD_CHUNK as u64 + 5),
        );
        let declared: u64 = req.headers()[CONTENT_LENGTH]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let mut body = req.into_body();
        assert_eq!(body.size_hint().exact(), Some(declared));
        let mut n = 0u64;
        let mut frames = 0;
        let mut all = Vec::new();
        while let Some(f) = body.frame().await {
            let d = f.unwrap().into_data().unwrap();
            n += d.len() as u64;
            frames += 1;
            if all.len() < 400 {
                all.extend_from_slice(&d[..d.len().min(400)]);
            }
        }
        assert_eq!(n, declared);
        assert!(frames >= 6, "streamed in chunks");
        assert!(body.is_end_stream());
        let text = String::from_utf8_lossy(&all);
        assert!(
            text.contains("name=\"purpose\"\r\n\r\nx\r\n") && text.contains("filename=\"a.wav\"")
        );
    }
}
