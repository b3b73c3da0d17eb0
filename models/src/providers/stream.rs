//! The shared shape of a native provider's stream translation: the
//! provider's server-sent events become OpenAI chat completion chunks,
//! incrementally, as each upstream chunk arrives (never buffered: only the
//! unfinished last line is kept), ending with `data: [DONE]`.
//!
//! [`Translator`] does the framing (lines, `\r\n` or `\n`, `data:` JSON),
//! the chunk envelope (`id`, `object`, `created`, `model`, the role on the
//! first delta), the usage (kept for billing; sent as the last chunk when
//! the caller asked with `stream_options.include_usage`) and the end; a
//! [`Dialect`] (Anthropic's, Gemini's) says what each event means through
//! an [`Emit`].

use serde_json::{json, Value};

use super::usage::Tokens;

/// Most bytes of one unfinished SSE line kept; a longer line is dropped
/// (no provider event is that large).
const MAX_LINE: usize = 4 << 20;

/// A provider's stream turned into OpenAI's, chunk by chunk.
pub trait StreamTranslator: Send {
    /// Translates one upstream chunk, appending OpenAI's SSE bytes to `out`.
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>);
    /// The upstream ended: the usage chunk when asked and `[DONE]`, unless
    /// sent already.
    fn finish(&mut self, out: &mut Vec<u8>);
    /// The usage the provider reported so far, and whether it is the
    /// whole of it (the output count is final).
    fn usage(&self) -> Option<(Tokens, bool)>;
}

/// A stream passed through as the provider sent it (to a door of the
/// provider's own API), its translator reading it on the side for the
/// usage alone.
pub struct Tap {
    inner: Box<dyn StreamTranslator>,
    scratch: Vec<u8>,
}

impl Tap {
    pub fn new(inner: Box<dyn StreamTranslator>) -> Tap {
        Tap {
            inner,
            scratch: Vec::new(),
        }
    }
}

impl StreamTranslator for Tap {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        self.inner.feed(chunk, &mut self.scratch);
        self.scratch.clear();
        out.extend_from_slice(chunk);
    }

    fn finish(&mut self, _out: &mut Vec<u8>) {
        self.inner.finish(&mut self.scratch);
        self.scratch.clear();
    }

    fn usage(&self) -> Option<(Tokens, bool)> {
        self.inner.usage()
    }
}

/// What one provider's events mean.
pub trait Dialect: Send {
    /// One event's JSON (`data:` of the provider's stream).
    fn event(&mut self, v: &Value, e: &mut Emit<'_>);
}

/// The state every translation keeps, and what a dialect emits through.
#[derive(Debug)]
pub struct Emit<'a> {
    state: &'a mut State,
    out: &'a mut Vec<u8>,
}

#[derive(Debug, Default)]
struct State {
    id: String,
    model: String,
    created: i64,
    include_usage: bool,
    /// Text completions' chunks (`choices[].text`) rather than chat's.
    completion: bool,
    role_sent: bool,
    usage: Option<Tokens>,
    usage_final: bool,
    done: bool,
}

impl Emit<'_> {
    /// Sets the chunks' id (the provider's message id).
    pub fn id(&mut self, id: &str) {
        self.state.id = format!("chatcmpl-{id}");
    }

    fn chunk(&mut self, delta: Value, finish: Option<&str>) {
        if self.state.completion {
            if delta.get("tool_calls").is_some() {
                return;
            }
            let text = delta.get("content").cloned().unwrap_or(json!(""));
            let v = json!({
                "id": self.state.id, "object": "text_completion",
                "created": self.state.created, "model": self.state.model,
                "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": finish}],
            });
            self.data(&v);
            return;
        }
        let mut delta = delta;
        if !self.state.role_sent {
            self.state.role_sent = true;
            delta["role"] = json!("assistant");
        }
        let v = json!({
            "id": self.state.id, "object": "chat.completion.chunk",
            "created": self.state.created, "model": self.state.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        self.data(&v);
    }

    fn data(&mut self, v: &Value) {
        self.out.extend_from_slice(b"data: ");
        // Writing a `Value` into a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut *self.out, v);
        self.out.extend_from_slice(b"\n\n");
    }

    /// A delta of the one choice (`{"content": …}`, `{"tool_calls": […]}`).
    pub fn delta(&mut self, delta: Value) {
        if !self.state.done {
            self.chunk(delta, None);
        }
    }

    /// The choice's finish reason (OpenAI's: `stop`, `length`, …).
    pub fn finish(&mut self, reason: &str) {
        if !self.state.done {
            self.chunk(json!({}), Some(reason));
        }
    }

    /// The usage reported so far; `last`: the output count is final.
    pub fn usage(&mut self, t: Tokens, last: bool) {
        self.state.usage = Some(t);
        self.state.usage_final |= last;
    }

    /// The usage reported so far.
    pub fn usage_so_far(&self) -> Option<Tokens> {
        self.state.usage
    }

    /// A provider's error event: the relay's error event shape
    /// (`{"error": {"message", "code"}}`), then the end.
    pub fn error(&mut self, status: u16, message: &str) {
        if self.state.done {
            return;
        }
        let v = json!({"error": {"message": message, "code": status}, "success": false, "message": message});
        self.data(&v);
        self.end();
    }

    /// The end: the usage chunk when the caller asked for one, `[DONE]`.
    pub fn end(&mut self) {
        if std::mem::replace(&mut self.state.done, true) {
            return;
        }
        if self.state.include_usage {
            let u = self.state.usage.unwrap_or_default().to_openai();
            let v = json!({
                "id": self.state.id, "object": "chat.completion.chunk",
                "created": self.state.created, "model": self.state.model,
                "choices": [], "usage": u,
            });
            self.data(&v);
        }
        self.out.extend_from_slice(b"data: [DONE]\n\n");
    }
}

/// A [`StreamTranslator`] of dialect `D`.
pub struct Translator<D: Dialect> {
    dialect: D,
    state: State,
    line: Vec<u8>,
}

impl<D: Dialect> Translator<D> {
    pub fn new(dialect: D, model: &str, include_usage: bool) -> Translator<D> {
        Translator {
            dialect,
            state: State {
                id: format!("chatcmpl-{}", hex::encode(rand::random::<[u8; 12]>())),
                model: model.to_owned(),
                created: chrono::Utc::now().timestamp(),
                include_usage,
                ..State::default()
            },
            line: Vec::new(),
        }
    }

    /// Text completions' chunks (`choices[].text`, `text_completion`).
    pub fn for_completions(mut self) -> Translator<D> {
        self.state.completion = true;
        self
    }

    fn line_done(&mut self, out: &mut Vec<u8>) {
        let line = std::mem::take(&mut self.line);
        let Some(data) = line.trim_ascii().strip_prefix(b"data:") else {
            return;
        };
        let Ok(v) = serde_json::from_slice::<Value>(data.trim_ascii()) else {
            return;
        };
        let mut e = Emit {
            state: &mut self.state,
            out,
        };
        self.dialect.event(&v, &mut e);
    }
}

impl<D: Dialect> StreamTranslator for Translator<D> {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let mut rest = chunk;
        while let Some(i) = memchr::memchr(b'\n', rest) {
            if self.line.len() + i <= MAX_LINE {
                self.line.extend_from_slice(&rest[..i]);
            }
            rest = &rest[i + 1..];
            self.line_done(out);
        }
        if self.line.len() + rest.len() <= MAX_LINE {
            self.line.extend_from_slice(rest);
        }
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.line.is_empty() {
            self.line_done(out);
        }
        Emit {
            state: &mut self.state,
            out,
        }
        .end();
    }

    fn usage(&self) -> Option<(Tokens, bool)> {
        self.state.usage.map(|u| (u, self.state.usage_final))
    }
}

/// The arguments text of a tool call (OpenAI's `function.arguments` is a
/// JSON text).
pub fn arguments_text(input: &Value) -> String {
    match input {
        Value::Null => "{}".to_owned(),
        v => v.to_string(),
    }
}

/// A tool call's parsed arguments (an object; `{}` when not JSON).
pub fn parsed_arguments(arguments: Option<&Value>) -> Value {
    match arguments {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_else(|_| json!({})),
        Some(v @ Value::Object(_)) => v.clone(),
        _ => json!({}),
    }
}
