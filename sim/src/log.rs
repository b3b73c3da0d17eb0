//! The request log: every provider request (not the control plane) is recorded
//! so tests can prove what the gateway sent, or that it sent nothing.
//!
//! Appending is cheap (a header-map clone and a reference-counted body under a
//! short lock); JSON is only built when the log is read. The log keeps the most
//! recent [`CAPACITY`] entries.
//!
//! WebSocket sessions log their upgrade request here like any request, and
//! every message their client sends in [`ClientEvents`] (`GET
//! /__sim/realtime/events`), so a test can see what a gateway forwarded
//! upstream over a socket, and what it did not.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderMap, Method};
use serde_json::{json, Map, Value};

use crate::request::Req;

/// How many entries are kept (oldest dropped first).
pub const CAPACITY: usize = 10_000;

/// Bodies larger than this are logged by length only.
const MAX_TEXT: usize = 256 * 1024;

/// What was kept of a request body.
#[derive(Clone, Debug)]
enum Body {
    /// UTF-8 JSON, form or text body.
    Text(Bytes),
    /// Anything else: only its length.
    Binary,
    /// Multipart: one summary per part.
    Multipart(Vec<PartInfo>),
}

#[derive(Clone, Debug)]
struct PartInfo {
    /// Field name.
    name: String,
    /// File name, for file parts.
    filename: Option<String>,
    /// Part content type.
    content_type: Option<String>,
    /// Bytes in the part.
    size: usize,
    /// The value of a small UTF-8 part without a file name.
    text: Option<String>,
}

#[derive(Clone, Debug)]
struct Entry {
    /// When it arrived.
    at: SystemTime,
    /// Request method.
    method: Method,
    /// Path without query string.
    path: String,
    /// Raw query string.
    query: Option<String>,
    /// All headers, credentials included.
    headers: HeaderMap,
    /// `Content-Type` value.
    content_type: Option<String>,
    /// Body length in bytes.
    body_len: usize,
    /// What was kept of the body.
    body: Body,
}

/// Bounded, ordered request log.
#[derive(Default)]
pub struct RequestLog {
    /// Oldest first, at most [`CAPACITY`].
    entries: Mutex<VecDeque<Entry>>,
}

impl RequestLog {
    /// Records one request.
    pub fn push(&self, req: &Req) {
        let body = if let Some(parts) = &req.parts {
            Body::Multipart(
                parts
                    .iter()
                    .map(|p| PartInfo {
                        name: p.name.clone(),
                        filename: p.filename.clone(),
                        content_type: p.content_type.clone(),
                        size: p.data.len(),
                        text: if p.filename.is_none() && p.data.len() <= 4096 {
                            std::str::from_utf8(&p.data).ok().map(str::to_owned)
                        } else {
                            None
                        },
                    })
                    .collect(),
            )
        } else if is_textual(req.content_type.as_deref())
            && req.body.len() <= MAX_TEXT
            && std::str::from_utf8(&req.body).is_ok()
        {
            Body::Text(req.body.clone())
        } else {
            Body::Binary
        };
        let entry = Entry {
            at: SystemTime::now(),
            method: req.method.clone(),
            path: req.path.clone(),
            query: req.query.clone(),
            headers: req.headers.clone(),
            content_type: req.content_type.clone(),
            body_len: req.body.len(),
            body,
        };
        let mut entries = self.entries.lock().unwrap();
        if entries.len() >= CAPACITY {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// Empties the log.
    pub fn clear(&self) {
        self.entries.lock().unwrap().clear();
    }

    /// Number of entries held.
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap().len()
    }

    /// True when nothing is logged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entries, oldest first, as JSON objects:
    /// `{method, path, query, headers, content_type, body_len, body?, json?, parts?, at}`.
    pub fn render(&self) -> Vec<Value> {
        let entries: Vec<Entry> = self.entries.lock().unwrap().iter().cloned().collect();
        entries.iter().map(render_entry).collect()
    }
}

fn is_textual(content_type: Option<&str>) -> bool {
    match content_type {
        None => true,
        Some(ct) => {
            let ct = ct.to_ascii_lowercase();
            ct.contains("json") || ct.contains("x-www-form-urlencoded") || ct.starts_with("text/")
        }
    }
}

fn render_entry(e: &Entry) -> Value {
    let mut headers = Map::new();
    for (name, value) in &e.headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match headers.get_mut(name.as_str()) {
            Some(Value::String(existing)) => {
                existing.push_str(", ");
                existing.push_str(&value);
            }
            _ => {
                headers.insert(name.as_str().to_owned(), Value::String(value));
            }
        }
    }
    let at = chrono::DateTime::<chrono::Utc>::from(e.at)
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut out = json!({
        "at": at,
        "method": e.method.as_str(),
        "path": e.path,
        "query": e.query,
        "headers": headers,
        "content_type": e.content_type,
        "body_len": e.body_len,
    });
    let obj = out.as_object_mut().expect("object");
    match &e.body {
        Body::Text(bytes) => {
            let text = std::str::from_utf8(bytes).unwrap_or_default();
            obj.insert("body".into(), Value::String(text.to_owned()));
            if let Ok(v) = serde_json::from_str::<Value>(text) {
                obj.insert("json".into(), v);
            }
        }
        Body::Binary => {
            obj.insert("body".into(), Value::Null);
        }
        Body::Multipart(parts) => {
            obj.insert("body".into(), Value::Null);
            let parts: Vec<Value> = parts
                .iter()
                .map(|p| {
                    json!({
                        "name": p.name,
                        "filename": p.filename,
                        "content_type": p.content_type,
                        "size": p.size,
                        "value": p.text,
                    })
                })
                .collect();
            obj.insert("parts".into(), Value::Array(parts));
        }
    }
    out
}

/// The messages WebSocket clients sent, oldest first (at most
/// [`CAPACITY`]): `{at, api, session_id, kind, event, bytes}` where `api`
/// is `openai-realtime` or `deepgram-live`, `kind` is `text` or `binary`,
/// `event` the text message as JSON (a string when it is not JSON; `null`
/// for a binary one) and `bytes` its length.
#[derive(Default)]
pub struct ClientEvents {
    /// Oldest first.
    entries: Mutex<VecDeque<Value>>,
}

impl ClientEvents {
    /// Records a text message (`Some(text)`) or a binary one of `bytes`.
    pub fn push(&self, api: &str, session_id: &str, text: Option<&str>, bytes: usize) {
        let event = match text {
            Some(t) => serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_owned())),
            None => Value::Null,
        };
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let kind = if text.is_some() { "text" } else { "binary" };
        let entry = json!({"at": at, "api": api, "session_id": session_id, "kind": kind, "event": event, "bytes": bytes});
        let mut entries = self.entries.lock().unwrap();
        if entries.len() >= CAPACITY {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// Every entry, oldest first.
    pub fn render(&self) -> Vec<Value> {
        self.entries.lock().unwrap().iter().cloned().collect()
    }

    /// Forgets every entry.
    pub fn clear(&self) {
        self.entries.lock().unwrap().clear();
    }
}
