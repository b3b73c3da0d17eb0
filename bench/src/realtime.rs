//! The `realtime` scenario: sessions × turns over WebSocket. Each of `c`
//! sessions opens a realtime socket, sets text output, and runs turns back
//! to back (a user item, then `response.create` capped at
//! [`TURN_TOKENS`]); a turn's latency is from its `response.create` to its
//! `response.done`, its "first byte" the first event after the create.
//!
//! | target | socket |
//! |---|---|
//! | direct | the simulator's `GET /v1/realtime?model=gpt-realtime` (`Authorization: Bearer`) |
//! | gateway | `GET /api/v1/realtime?model=sim/gpt-realtime`: each response held before it goes upstream and billed (usage, debit, audit) before its `response.done` is passed on |
//!
//! There is no forwarder row: the bare forwarder relays HTTP, not
//! WebSockets. The added latency per turn is the gateway's percentiles
//! minus the direct ones of the same run. The sessions' opening is not
//! timed (a turn is what a session repeats).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use crate::load::Outcome;
use crate::measure::Probe;
use crate::plan::{Env, Plan};
use crate::row::{Row, Target};

/// Output tokens of a turn (the simulator's reply is 12 words).
const TURN_TOKENS: u64 = 12;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Where a session connects, with which key.
pub struct Socket {
    pub addr: SocketAddr,
    pub pid: u32,
    pub path: &'static str,
    pub key: String,
}

impl Socket {
    /// The simulator's realtime socket.
    pub fn direct(addr: SocketAddr, pid: u32, key: &str) -> Socket {
        Socket {
            addr,
            pid,
            path: "/v1/realtime?model=gpt-realtime",
            key: key.to_owned(),
        }
    }

    /// The gateway's.
    pub fn gateway(addr: SocketAddr, pid: u32, key: &str) -> Socket {
        Socket {
            addr,
            pid,
            path: "/api/v1/realtime?model=sim/gpt-realtime",
            key: key.to_owned(),
        }
    }
}

/// The scenario's rows: each concurrency of `plan`, direct and gateway.
pub async fn rows(env: &Env, plan: &Plan) -> Vec<Row> {
    let mut rows = Vec::new();
    for &c in &plan.concurrency {
        for &target in plan.targets.iter().filter(|t| **t != Target::Forwarder) {
            let (addr, pid) = env.endpoint(target);
            let socket = match target {
                Target::Gateway => Socket::gateway(addr, pid, &env.key),
                _ => Socket::direct(addr, pid, crate::procs::SIM_KEY),
            };
            rows.push(row(target, &socket, env.sim.1, c, plan.warmup, plan.duration).await);
        }
    }
    rows
}

/// One row: `concurrency` sessions turning for `warmup` + `duration`.
async fn row(
    target: Target,
    socket: &Socket,
    sim_pid: u32,
    concurrency: usize,
    warmup: Duration,
    duration: Duration,
) -> Row {
    let phase = Arc::new(AtomicU8::new(0));
    let mut sessions = Vec::new();
    for i in 0..concurrency {
        let (addr, path, key, phase) =
            (socket.addr, socket.path, socket.key.clone(), phase.clone());
        sessions.push(tokio::spawn(async move {
            session(i, addr, path, &key, &phase).await
        }));
    }
    tokio::time::sleep(warmup).await;
    let (probe, sim_probe) = (Probe::start(socket.pid), Probe::start(sim_pid));
    let started = Instant::now();
    phase.store(1, Ordering::Release);
    tokio::time::sleep(duration).await;
    phase.store(2, Ordering::Release);
    let mut outcome = Outcome::empty();
    for s in sessions {
        match s.await {
            Ok(o) => {
                let _ = outcome.hist.add(&o.hist);
                let _ = outcome.ttfb.add(&o.ttfb);
                outcome.ok += o.ok;
                outcome.errors += o.errors;
                outcome
                    .error_samples
                    .extend(o.error_samples.into_iter().take(3));
            }
            Err(e) => {
                outcome.errors += 1;
                outcome.error_samples.push(e.to_string());
            }
        }
    }
    outcome.elapsed = started.elapsed();
    let (m, sim_m) = (probe.finish(), sim_probe.finish());
    let row = Row::from_outcome(
        "realtime",
        target,
        concurrency,
        &outcome,
        (target != Target::Direct).then_some(m),
        sim_m,
    );
    eprintln!("  {}", row.progress_line());
    row
}

/// One session: turns until the phase is over; the measured ones counted.
async fn session(i: usize, addr: SocketAddr, path: &str, key: &str, phase: &AtomicU8) -> Outcome {
    let mut o = Outcome::empty();
    let mut ws = match open(addr, path, key).await {
        Ok(ws) => ws,
        Err(e) => {
            o.errors += 1;
            o.error_samples.push(e);
            return o;
        }
    };
    let mut n = 0u64;
    while phase.load(Ordering::Acquire) < 2 {
        n += 1;
        let measured = phase.load(Ordering::Acquire) == 1;
        match turn(&mut ws, &format!("Hello {i} {n}")).await {
            Ok((first, all)) if measured => {
                let _ = o.ttfb.record(first.as_nanos() as u64);
                let _ = o.hist.record(all.as_nanos() as u64);
                o.ok += 1;
            }
            Ok(_) => {}
            Err(e) => {
                o.errors += 1;
                if o.error_samples.len() < 3 {
                    o.error_samples.push(e);
                }
                return o;
            }
        }
    }
    let _ = ws.close(None).await;
    o
}

async fn open(addr: SocketAddr, path: &str, key: &str) -> Result<Ws, String> {
    let mut req = format!("ws://{addr}{path}")
        .into_client_request()
        .map_err(|e| e.to_string())?;
    req.headers_mut().insert(
        "authorization",
        format!("Bearer {key}")
            .parse()
            .map_err(|_| "bad key".to_owned())?,
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    until(&mut ws, "session.created").await?;
    send(&mut ws, json!({"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"]}})).await?;
    until(&mut ws, "session.updated").await?;
    Ok(ws)
}

async fn send(ws: &mut Ws, v: Value) -> Result<(), String> {
    ws.send(Message::Text(v.to_string().into()))
        .await
        .map_err(|e| format!("send: {e}"))
}

/// Reads events until one of type `kind`: the time to the first event.
async fn until(ws: &mut Ws, kind: &str) -> Result<(), String> {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(30), ws.next())
            .await
            .map_err(|_| format!("no {kind} in 30 s"))?
            .ok_or_else(|| format!("closed before {kind}"))?
            .map_err(|e| e.to_string())?;
        if let Message::Text(t) = m {
            let v: Value = serde_json::from_str(t.as_str()).map_err(|e| e.to_string())?;
            match v["type"].as_str() {
                Some(k) if k == kind => return Ok(()),
                Some("error") => return Err(format!("error event: {v}")),
                _ => {}
            }
        }
    }
}

/// One turn: (time to the first event after the create, time to
/// `response.done`).
async fn turn(ws: &mut Ws, text: &str) -> Result<(Duration, Duration), String> {
    send(
        ws,
        json!({"type": "conversation.item.create", "item": {"type": "message", "role": "user",
        "content": [{"type": "input_text", "text": text}]}}),
    )
    .await?;
    until(ws, "conversation.item.done").await?;
    let start = Instant::now();
    send(
        ws,
        json!({"type": "response.create", "response": {"max_output_tokens": TURN_TOKENS}}),
    )
    .await?;
    until(ws, "response.created").await?;
    let first = start.elapsed();
    until(ws, "response.done").await?;
    Ok((first, start.elapsed()))
}
