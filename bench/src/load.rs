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
//! [`run_windows`] drives several loads at once on one clock and cuts the
//! measurement into windows (the soak's minutes, [`crate::soak`]): a request
//! belongs to the window in which it was sent, each window has histograms
//! of its own, and the connections live on from one window to the next.
//! [`run`] is one load in one window.
//!
//! What a run measured is an [`Outcome`] ([`crate::outcome`]); uploads are
//! [`crate::upload`]'s.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE, HOST};
use http::{Method, Request, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

pub use crate::outcome::{new_histogram, Outcome, Windows};

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
    /// The time of window `k` (from 0) is up and the next one starts now
    /// (the last window's: nothing more is sent); requests it sent may
    /// still be in flight.
    WindowEnd(usize),
    /// Every recorded request has completed.
    MeasureEnd,
}

/// The run's phase: warm-up, then window `k` as `k + 1`, then stop.
const WARMUP: u32 = 0;
const STOP: u32 = u32::MAX;

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
pub(crate) async fn exchange<B>(
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

/// When a windowed run measures: after `warmup`, for `duration`, cut into
/// windows of `window` (the last one shorter when it does not divide).
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    /// Unrecorded warm-up.
    pub warmup: Duration,
    /// Measured time, all windows together.
    pub duration: Duration,
    /// Length of a window.
    pub window: Duration,
}

impl Schedule {
    /// How many windows (at least one).
    pub fn windows(&self) -> usize {
        let (d, w) = (self.duration.as_nanos(), self.window.as_nanos());
        if w == 0 {
            return 1;
        }
        (d.div_ceil(w) as usize).max(1)
    }

    /// When window `k` ends, from the start of the measurement.
    fn end_of(&self, k: usize) -> Duration {
        let k = u32::try_from(k + 1).unwrap_or(u32::MAX);
        self.window.saturating_mul(k).min(self.duration)
    }
}

/// State shared by the workers of one run.
struct Shared {
    phase: AtomicU32,
    start: Instant,
    windows: Windows,
}

/// Runs `spec` against `load.addr`: warm-up, then measurement; `on` is told
/// when the measurement window opens and when its last request has ended.
pub async fn run(load: &Load, spec: &Spec, mut on: impl FnMut(Event)) -> Outcome {
    let schedule = Schedule {
        warmup: load.warmup,
        duration: load.duration,
        window: load.duration,
    };
    let mut outcomes = run_windows(&[(load.clone(), spec.clone())], schedule, |ev, _| on(ev)).await;
    outcomes
        .pop()
        .and_then(|mut w| w.pop())
        .unwrap_or_else(Outcome::empty)
}

/// Runs every `(load, spec)` at once on one clock (their own `warmup` and
/// `duration` are not read: `schedule`'s are), measuring in windows; `on`
/// is told when the measurement opens, when each window's time is up, and
/// when the last request has ended. Returns each load's windows, in order
/// (a window's `elapsed` is its length; the last one's lasts until its
/// last request ended). A warm-up's errors count in the first window.
pub async fn run_windows(
    loads: &[(Load, Spec)],
    schedule: Schedule,
    mut on: impl FnMut(Event, &Windows),
) -> Vec<Vec<Outcome>> {
    let shared = Arc::new(Shared {
        phase: AtomicU32::new(WARMUP),
        start: Instant::now(),
        windows: Windows::new(loads.len()),
    });
    let mut workers = Vec::new();
    for (which, (load, spec)) in loads.iter().enumerate() {
        let spec = Arc::new(spec.clone());
        for i in 0..load.concurrency.max(1) {
            let w = worker(i, which, load.clone(), spec.clone(), shared.clone());
            workers.push((which, tokio::spawn(w)));
        }
    }
    tokio::time::sleep(schedule.warmup).await;
    on(Event::MeasureStart, &shared.windows);
    let t0 = Instant::now();
    shared.phase.store(1, Ordering::SeqCst);
    let n = schedule.windows();
    let mut ends = Vec::with_capacity(n);
    for k in 0..n {
        tokio::time::sleep_until((t0 + schedule.end_of(k)).into()).await;
        ends.push(t0.elapsed());
        let next = u32::try_from(k + 2).ok().filter(|_| k + 1 < n);
        shared.phase.store(next.unwrap_or(STOP), Ordering::SeqCst);
        on(Event::WindowEnd(k), &shared.windows);
    }
    for (which, w) in workers {
        if let Err(e) = w.await {
            let msg = format!("worker panicked: {e}");
            shared.windows.with(which, n - 1, |o| o.error(msg));
        }
    }
    if let Some(last) = ends.last_mut() {
        *last = t0.elapsed();
    }
    on(Event::MeasureEnd, &shared.windows);
    shared.windows.take(&ends)
}

/// One worker: one connection at a time, requests until the run stops;
/// what it measures goes to the window its request was sent in.
async fn worker(index: usize, which: usize, load: Load, spec: Arc<Spec>, shared: Arc<Shared>) {
    let mut out = Outcome::empty();
    // The window `out` holds (the warm-up's errors count in the first).
    let mut window = 0;
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
        let w = phase.saturating_sub(1) as usize;
        if w != window {
            shared.windows.add(which, window, &out);
            out.clear();
            window = w;
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
        let Some(s) = s else { continue };
        sender = send(&load, &spec, s, intended, phase != WARMUP, &mut out).await;
    }
    shared.windows.add(which, window, &out);
}

/// Sends `spec` once on `s` and counts the answer in `out` (its latency
/// from `intended` only when `record`); gives the connection back when it
/// may serve the next request.
async fn send(
    load: &Load,
    spec: &Spec,
    mut s: SendRequest<Full<Bytes>>,
    intended: Instant,
    record: bool,
    out: &mut Outcome,
) -> Option<SendRequest<Full<Bytes>>> {
    let req = spec.request(load.addr, Full::new(spec.body.clone()));
    let result = tokio::time::timeout(load.timeout, exchange(&mut s, req, 300)).await;
    let latency = intended.elapsed();
    match result {
        Ok(Ok((status, _, n, first))) if status.is_success() => {
            if record {
                out.hist.saturating_record(latency.as_nanos() as u64);
                let ttfb = first.map_or(latency, |f| f.saturating_duration_since(intended));
                out.ttfb.saturating_record(ttfb.as_nanos() as u64);
                out.ok += 1;
                out.bytes += n;
            }
            Some(s)
        }
        Ok(Ok((status, body, _, _))) => {
            out.error(format!(
                "{} {} -> {status}: {}",
                spec.method,
                spec.path,
                String::from_utf8_lossy(&body)
            ));
            Some(s)
        }
        Ok(Err(e)) => {
            out.error(format!("{} {}: {e}", spec.method, spec.path));
            None
        }
        Err(_) => {
            out.error(format!(
                "{} {}: timed out after {:?}",
                spec.method, spec.path, load.timeout
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server answering every request (no body) `200 ok`, keeping connections alive.
    async fn server() -> SocketAddr {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut c, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (mut buf, mut chunk) = (Vec::new(), [0u8; 1024]);
                    while let Ok(n @ 1..) = c.read(&mut chunk).await {
                        buf.extend_from_slice(&chunk[..n]);
                        while let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            buf.drain(..i + 4);
                            let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                            if c.write_all(ok).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn windows_cut_open_loops_on_one_clock() {
        let addr = server().await;
        let ms = Duration::from_millis;
        let (warmup, duration, timeout) = (ms(50), ms(500), ms(5000));
        let load = |rate| Load {
            addr,
            concurrency: 4,
            warmup,
            duration,
            rate: Some(rate),
            timeout,
        };
        let spec = Spec::get("/x", Vec::new());
        let schedule = Schedule {
            warmup,
            duration,
            window: ms(200),
        };
        assert_eq!((schedule.windows(), schedule.end_of(2)), (3, duration));
        let mut events = Vec::new();
        let loads = [(load(200.0), spec.clone()), (load(100.0), spec)];
        let out = run_windows(&loads, schedule, |e, _| events.push(e)).await;
        use Event::*;
        assert_eq!(
            events,
            [
                MeasureStart,
                WindowEnd(0),
                WindowEnd(1),
                WindowEnd(2),
                MeasureEnd
            ]
        );
        for (windows, rate) in out.iter().zip([200.0, 100.0]) {
            assert_eq!(windows.len(), 3);
            assert!(windows
                .iter()
                .all(|w| w.errors == 0 && w.ok > 0 && !w.hist.is_empty()));
            assert!(windows[0].elapsed >= ms(190) && windows[1].elapsed >= ms(190));
            let total: u64 = windows.iter().map(|w| w.ok).sum();
            let want = rate * 0.5;
            assert!(
                (total as f64 - want).abs() <= want * 0.25,
                "{total} requests at {rate}/s"
            );
        }
    }
}
