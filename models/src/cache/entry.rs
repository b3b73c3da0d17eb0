//! What a cache entry holds, in one canonical form that can answer both a
//! JSON request and a streamed one: the upstream's answer as JSON (a
//! non-streamed miss) or its server-sent events in order, one data payload
//! each (a streamed miss, captured as it was relayed), and its usage. A
//! streamed entry is assembled into a JSON answer, and a JSON entry split
//! into events, when the other form is asked for.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::providers::usage::Tokens;

/// Finish reasons of an answer that may be cached.
const CACHEABLE_FINISH: [&str; 2] = ["stop", "length"];

/// Most choices an entry holds.
const MAX_CHOICES: usize = 64;

/// The choices of an answer or chunk with their index (`None` when an
/// index is over [`MAX_CHOICES`]).
fn indexed_choices(v: &Value) -> Option<Vec<(usize, &Value)>> {
    v.get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let i = c.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
            (i < MAX_CHOICES).then_some((i, c))
        })
        .collect()
}

/// One cached answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    /// The upstream's JSON answer (a non-streamed miss).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<Value>,
    /// The data payloads of the upstream's events, in order, without
    /// `[DONE]` (a streamed miss).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<String>>,
    /// Tokens billed for the original answer: input (neither read from nor
    /// written to the provider's cache), output, and the cache's reads and
    /// writes ([`Tokens`]; an entry stored without the last two reads 0).
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// Whether they were counted by the gateway (no upstream `usage`).
    pub counted: bool,
    /// The deployment that answered (`provider/model`): a hit answers
    /// only a request it could have served, under its name
    /// (`X-Gateway-Model`) and at its prices. An entry without it (stored
    /// before it was kept) is a miss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Whether every choice of a JSON answer finished normally (an answer
/// without choices, embeddings, does).
pub fn finished_normally(v: &Value) -> bool {
    let Some(choices) = v.get("choices").and_then(Value::as_array) else {
        return v.get("data").is_some();
    };
    !choices.is_empty()
        && choices.iter().all(|c| {
            c.get("finish_reason")
                .and_then(Value::as_str)
                .is_some_and(|f| CACHEABLE_FINISH.contains(&f))
        })
}

impl Entry {
    /// An entry of `tokens` (JSON or events set by the caller).
    pub fn of(tokens: Tokens, counted: bool) -> Entry {
        Entry {
            json: None,
            events: None,
            input_tokens: tokens.input,
            output_tokens: tokens.output,
            cache_read_tokens: tokens.cache_read,
            cache_write_tokens: tokens.cache_write,
            counted,
            served: None,
        }
    }

    /// The four counts the original answer was billed.
    pub fn tokens(&self) -> Tokens {
        Tokens {
            input: self.input_tokens,
            output: self.output_tokens,
            cache_read: self.cache_read_tokens,
            cache_write: self.cache_write_tokens,
        }
    }

    /// The answer as JSON: as stored, or assembled from the events (`None`
    /// when they carry more than text, tool calls for instance).
    pub fn to_json(&self) -> Option<Value> {
        if let Some(v) = &self.json {
            return Some(v.clone());
        }
        assemble(
            self.events.as_ref()?,
            self.tokens().prompt(),
            self.output_tokens,
        )
    }

    /// The answer's events (data payloads), the usage events left out: as
    /// captured, or split from the JSON answer (`None` when it carries more
    /// than text).
    pub fn to_events(&self) -> Option<Vec<Value>> {
        let events: Vec<Value> = match (&self.events, &self.json) {
            (Some(ev), _) => ev
                .iter()
                .filter_map(|e| serde_json::from_str::<Value>(e).ok())
                .collect(),
            (None, Some(v)) => split(v)?,
            (None, None) => return None,
        };
        Some(
            events
                .into_iter()
                .filter(|e| !e.get("usage").is_some_and(Value::is_object))
                .collect(),
        )
    }

    /// The usage event of a replay: `{"usage": ...}` of the entry's tokens.
    pub fn usage_event(&self, first: Option<&Value>) -> Value {
        let mut v = json!({
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {
                "prompt_tokens": self.tokens().prompt(),
                "completion_tokens": self.output_tokens,
                "total_tokens": self.tokens().prompt() + self.output_tokens,
            },
        });
        for k in ["id", "object", "created", "model"] {
            if let Some(x) = first.and_then(|f| f.get(k)) {
                v[k] = x.clone();
            }
        }
        v
    }
}

/// SSE framing of one event's data.
pub fn frame(data: &Value) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// A chat or text completion assembled from its streamed chunks (text
/// only: any other delta field gives `None`).
fn assemble(events: &[String], input: u64, output: u64) -> Option<Value> {
    let mut first: Option<Value> = None;
    // Per choice index: (role, text, finish_reason).
    let mut choices: Vec<(String, String, Option<Value>)> = Vec::new();
    let mut chat = false;
    let mut usage = None;
    for e in events {
        let v: Value = serde_json::from_str(e).ok()?;
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            usage = Some(u.clone());
        }
        for (i, c) in indexed_choices(&v)? {
            while choices.len() <= i {
                choices.push(("assistant".to_owned(), String::new(), None));
            }
            let slot = &mut choices[i];
            if let Some(d) = c.get("delta").and_then(Value::as_object) {
                chat = true;
                for (k, x) in d {
                    match (k.as_str(), x) {
                        ("role", Value::String(r)) => slot.0 = r.clone(),
                        ("content", Value::String(t)) => slot.1.push_str(t),
                        ("content" | "refusal", Value::Null) => {}
                        _ => return None,
                    }
                }
            } else if let Some(t) = c.get("text").and_then(Value::as_str) {
                slot.1.push_str(t);
            }
            if let Some(f) = c.get("finish_reason").filter(|f| !f.is_null()) {
                slot.2 = Some(f.clone());
            }
        }
        if first.is_none() {
            first = Some(v);
        }
    }
    let first = first?;
    let choices: Vec<Value> = choices
        .into_iter()
        .enumerate()
        .map(|(i, (role, text, finish))| {
            if chat {
                json!({"index": i, "message": {"role": role, "content": text}, "finish_reason": finish, "logprobs": null})
            } else {
                json!({"index": i, "text": text, "finish_reason": finish, "logprobs": null})
            }
        })
        .collect();
    let usage = usage.unwrap_or_else(|| {
        json!({"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output})
    });
    let mut out = Map::new();
    for k in ["id", "created", "model", "system_fingerprint"] {
        if let Some(x) = first.get(k) {
            out.insert(k.to_owned(), x.clone());
        }
    }
    let object = if chat {
        "chat.completion"
    } else {
        "text_completion"
    };
    out.insert("object".into(), json!(object));
    out.insert("choices".into(), Value::Array(choices));
    out.insert("usage".into(), usage);
    Some(Value::Object(out))
}

/// A chat or text completion split into the chunks a stream of it would
/// have carried: per choice its role and text, then its finish (text
/// only: a message with anything else gives `None`).
fn split(v: &Value) -> Option<Vec<Value>> {
    let choices = v.get("choices")?.as_array()?;
    let chat = choices.iter().any(|c| c.get("message").is_some());
    let object = if chat {
        "chat.completion.chunk"
    } else {
        "text_completion"
    };
    let chunk = |choice: Value| {
        let mut c = json!({"object": object, "choices": [choice]});
        for k in ["id", "created", "model", "system_fingerprint"] {
            if let Some(x) = v.get(k) {
                c[k] = x.clone();
            }
        }
        c
    };
    let mut out = Vec::new();
    for (i, c) in choices.iter().enumerate() {
        let index = c.get("index").cloned().unwrap_or(json!(i));
        let finish = c.get("finish_reason").cloned().unwrap_or(Value::Null);
        if chat {
            let m = c.get("message")?.as_object()?;
            if m.keys()
                .any(|k| !matches!(k.as_str(), "role" | "content" | "refusal"))
            {
                return None;
            }
            let role = m.get("role").cloned().unwrap_or(json!("assistant"));
            let content = m.get("content").cloned().unwrap_or(json!(""));
            out.push(chunk(json!({"index": index, "delta": {"role": role, "content": content}, "finish_reason": null})));
            out.push(chunk(
                json!({"index": index, "delta": {}, "finish_reason": finish}),
            ));
        } else {
            let text = c.get("text").cloned().unwrap_or(json!(""));
            out.push(chunk(
                json!({"index": index, "text": text, "finish_reason": null}),
            ));
            out.push(chunk(
                json!({"index": index, "text": "", "finish_reason": finish}),
            ));
        }
    }
    Some(out)
}

/// A streamed answer captured as it is relayed, bounded: kept only while
/// it stays within the entry bound, stored only when the stream completed
/// with every choice finished normally ([`Capture::finish`]).
#[derive(Debug)]
pub struct Capture {
    line: Vec<u8>,
    events: Vec<String>,
    bytes: usize,
    max_bytes: usize,
    /// Over the bound, or a line that was not an event: not stored.
    spoiled: bool,
    done: bool,
    /// Finish reasons seen, per choice index.
    finished: Vec<Option<String>>,
}

impl Capture {
    pub fn new(max_bytes: usize) -> Capture {
        Capture {
            line: Vec::new(),
            events: Vec::new(),
            bytes: 0,
            max_bytes,
            spoiled: false,
            done: false,
            finished: Vec::new(),
        }
    }

    /// Feeds a chunk of the upstream's event stream.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.spoiled {
            return;
        }
        self.bytes += chunk.len();
        if self.bytes > self.max_bytes {
            self.spoil();
            return;
        }
        for &b in chunk {
            if b == b'\n' {
                let line = std::mem::take(&mut self.line);
                self.line_done(&line);
            } else {
                self.line.push(b);
            }
        }
    }

    fn spoil(&mut self) {
        self.spoiled = true;
        self.events = Vec::new();
        self.line = Vec::new();
    }

    fn line_done(&mut self, line: &[u8]) {
        let line = line.trim_ascii();
        if line.is_empty() || line.starts_with(b":") {
            return;
        }
        let Some(data) = line.strip_prefix(b"data:").map(<[u8]>::trim_ascii) else {
            return; // `event:`, `id:`, `retry:` lines carry no payload of ours
        };
        if data == b"[DONE]" {
            self.done = true;
            return;
        }
        let Ok(v) = serde_json::from_slice::<Value>(data) else {
            return self.spoil();
        };
        if v.get("error").is_some() {
            return self.spoil();
        }
        let Some(choices) = indexed_choices(&v) else {
            return self.spoil();
        };
        for (i, c) in choices {
            while self.finished.len() <= i {
                self.finished.push(None);
            }
            if let Some(f) = c.get("finish_reason").and_then(Value::as_str) {
                self.finished[i] = Some(f.to_owned());
            }
        }
        self.events.push(String::from_utf8_lossy(data).into_owned());
    }

    /// The entry of a stream that ended normally, when it may be cached:
    /// `[DONE]` seen, within the bound, every choice finished with `stop`
    /// or `length`.
    pub fn finish(self, tokens: Tokens, counted: bool) -> Option<Entry> {
        let normal = !self.finished.is_empty()
            && self
                .finished
                .iter()
                .all(|f| f.as_deref().is_some_and(|f| CACHEABLE_FINISH.contains(&f)));
        (self.done && !self.spoiled && normal).then(|| Entry {
            events: Some(self.events),
            ..Entry::of(tokens, counted)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &[u8] = b"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":5,\"model\":\"sim-gpt\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\ndata: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":5,\"model\":\"sim-gpt\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi \"},\"finish_reason\":null}]}\n\nda";
    const REST: &[u8] = b"ta: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":5,\"model\":\"sim-gpt\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"there\"},\"finish_reason\":null}]}\n\ndata: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":5,\"model\":\"sim-gpt\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

    #[test]
    fn a_captured_stream_answers_json_and_events() {
        let mut c = Capture::new(1 << 20);
        c.feed(STREAM);
        c.feed(REST);
        let e = c.finish(Tokens::new(3, 2), false).unwrap();
        assert_eq!(e.events.as_ref().unwrap().len(), 4);
        let v = e.to_json().unwrap();
        assert_eq!(v["choices"][0]["message"]["content"], "Hi there");
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        assert_eq!(v["object"], "chat.completion");
        assert_eq!(v["usage"]["total_tokens"], 5);
        // And back: a JSON entry split into events assembles to the same text.
        let j = Entry {
            json: Some(v.clone()),
            events: None,
            ..e.clone()
        };
        let ev = j.to_events().unwrap();
        let again = Entry {
            json: None,
            events: Some(ev.iter().map(Value::to_string).collect()),
            ..e
        };
        assert_eq!(again.to_json().unwrap()["choices"], v["choices"]);
    }

    #[test]
    fn unfinished_spoiled_or_abnormal_streams_are_not_stored() {
        let mut c = Capture::new(1 << 20);
        c.feed(STREAM);
        assert!(c.finish(Tokens::new(1, 1), false).is_none(), "no [DONE]");
        let mut c = Capture::new(100);
        c.feed(STREAM);
        c.feed(REST);
        assert!(
            c.finish(Tokens::new(1, 1), false).is_none(),
            "over the bound"
        );
        let mut c = Capture::new(1 << 20);
        c.feed(STREAM);
        let filtered = String::from_utf8(REST.to_vec())
            .unwrap()
            .replace("\"stop\"", "\"content_filter\"");
        c.feed(filtered.as_bytes());
        assert!(
            c.finish(Tokens::new(1, 1), false).is_none(),
            "content_filter"
        );
    }

    #[test]
    fn json_answers_finished_otherwise_are_not_cached() {
        assert!(finished_normally(
            &json!({"choices": [{"finish_reason": "length"}]})
        ));
        assert!(!finished_normally(
            &json!({"choices": [{"finish_reason": "tool_calls"}]})
        ));
        assert!(!finished_normally(&json!({"choices": []})));
        assert!(finished_normally(&json!({"data": [{"embedding": [0.1]}]})));
    }
}
