//! The open streams, for `POST /completions/stop-stream/{stream_id}`.
//!
//! Process-local on purpose: a stream lives in the instance relaying it,
//! so only that instance can end it. With several instances behind a load
//! balancer the stop request must reach the instance that holds the stream
//! (sticky routing on the `X-Stream-Id`, or a shared bus carrying the stop
//! signal); a stop that reaches another instance answers 404. Nothing
//! here must outlive the process: a stream ends with its connection.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rand::RngCore;
use tokio::sync::watch;

/// The registry of open streams.
#[derive(Default)]
pub struct Streams {
    open: Mutex<HashMap<String, (Option<i64>, watch::Sender<bool>)>>,
}

/// A registered stream: removed from the registry when dropped.
pub struct Registration {
    streams: Arc<Streams>,
    pub id: String,
    /// Becomes `true` when the stream is asked to stop.
    pub stop: watch::Receiver<bool>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut open) = self.streams.open.lock() {
            open.remove(&self.id);
        }
        crate::telemetry::open_streams(-1.0);
    }
}

/// `strm_` + 24 hex characters.
pub fn new_stream_id() -> String {
    let mut b = [0u8; 12];
    rand::thread_rng().fill_bytes(&mut b);
    format!("strm_{}", hex::encode(b))
}

impl Streams {
    /// Registers a new stream of `owner` under a fresh id.
    pub fn register(self: &Arc<Self>, owner: Option<i64>) -> Registration {
        let id = new_stream_id();
        let (tx, rx) = watch::channel(false);
        self.open
            .lock()
            .expect("stream registry")
            .insert(id.clone(), (owner, tx));
        crate::telemetry::open_streams(1.0);
        Registration {
            streams: self.clone(),
            id,
            stop: rx,
        }
    }

    /// Asks `owner`'s stream `id` to stop; false when it is unknown,
    /// finished, already stopped or another caller's.
    pub fn stop(&self, id: &str, owner: Option<i64>) -> bool {
        let mut open = self.open.lock().expect("stream registry");
        match open.get(id) {
            Some((o, _)) if *o == owner => {
                let (_, tx) = open.remove(id).expect("present");
                tx.send(true).is_ok()
            }
            _ => false,
        }
    }

    /// How many streams are open.
    pub fn len(&self) -> usize {
        self.open.lock().map(|o| o.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
