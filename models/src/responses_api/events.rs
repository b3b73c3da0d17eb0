//! Chat completion chunks (OpenAI's server-sent events, as the relay
//! passes them) → the Responses event stream, one upstream chunk at a time
//! (nothing is held back but an unfinished line). Each event is written
//! `event: <type>\ndata: <json>\n\n`, its `sequence_number` counting from
//! 0:
//!
//! `response.created` and `response.in_progress` (the response, status
//! `in_progress`, no output) at the first upstream line; then per output
//! item, in order: a reasoning delta (`reasoning_content` or `reasoning`)
//! opens a `reasoning` item (`response.reasoning_summary_part.added`,
//! `…_summary_text.delta`s, `…_summary_text.done`,
//! `…_summary_part.done`), a text delta a `message` item
//! (`response.content_part.added`, `response.output_text.delta`s,
//! `response.output_text.done`, `response.content_part.done`), a tool
//! call (by its `index`) a `function_call` item
//! (`response.function_call_arguments.delta`s and `.done`); each item
//! between `response.output_item.added` and `.done`, closed when the next
//! one opens or the choice finishes.
//!
//! The last event comes from [`Translator::finish`] (the upstream ended),
//! so that the runtime keeps the response before the caller sees it
//! ([`crate::restream::restream_kept`], [`Translator::outcome`]):
//! `response.completed`, or `response.incomplete` for a `finish_reason`
//! of `length` or `content_filter`, with the whole response (every item,
//! the usage chunk's usage, [`super::answer::usage`]). A stream that ends
//! with no `finish_reason` (stopped by the caller, or broken off without
//! an error event) ends `response.incomplete` with no reason: what was
//! produced is delivered and billed, so it did not fail, and no limit
//! cut it. An error event of the relay (or the provider), `data:
//! {"error": …}`, is the `error` event at once, then at the end
//! `response.failed` (`error: {code, message}`); nothing else follows it.

use serde_json::{json, Value};

use super::answer::{self, item_id, Echo};

/// Most bytes of one unfinished line kept.
const MAX_LINE: usize = 1 << 20;

/// The output item being written.
#[derive(Debug)]
enum Open {
    Reasoning {
        id: String,
        text: String,
    },
    Text {
        id: String,
        text: String,
    },
    /// A tool call, by its index in the chunks' `tool_calls`.
    Call {
        index: u64,
        id: String,
        call_id: Value,
        name: String,
        args: String,
    },
}

impl Open {
    /// The whole item, of `status`.
    fn done(self, status: &str) -> Value {
        match self {
            Open::Reasoning { id, text } => answer::reasoning_item(&id, &text),
            Open::Text { id, text } => {
                answer::message_item(&id, status, vec![answer::text_part(&text)])
            }
            Open::Call {
                id,
                call_id,
                name,
                args,
                ..
            } => answer::call_item(&id, status, &call_id, &name, &args),
        }
    }
}

/// The translation of one stream.
#[derive(Debug)]
pub struct Translator {
    echo: Echo,
    line: Vec<u8>,
    seq: u64,
    started: bool,
    /// No more events but the last (an `[DONE]`, a finish or an error seen).
    ended: bool,
    open: Option<Open>,
    /// The items closed, in order.
    output: Vec<Value>,
    finish: Option<String>,
    usage: Option<Value>,
    /// The upstream's error: (code, message).
    failed: Option<(&'static str, String)>,
    /// The final response, once finished.
    outcome: Option<Value>,
}

impl Translator {
    /// A translator of the response `echo` describes.
    pub fn new(echo: Echo) -> Translator {
        Translator {
            echo,
            line: Vec::new(),
            seq: 0,
            started: false,
            ended: false,
            open: None,
            output: Vec::new(),
            finish: None,
            usage: None,
            failed: None,
            outcome: None,
        }
    }

    /// The Responses events of an upstream chunk.
    pub fn feed(&mut self, chunk: &[u8]) -> String {
        let mut out = String::new();
        for &b in chunk {
            if b == b'\n' {
                let line = std::mem::take(&mut self.line);
                self.line_done(&line, &mut out);
            } else if self.line.len() < MAX_LINE {
                self.line.push(b);
            }
        }
        out
    }

    /// The last events once the upstream ended (nothing after an end).
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        if self.outcome.is_some() {
            return out;
        }
        self.start(&mut out);
        if self.failed.is_some() {
            // Nothing follows the error but `response.failed`.
            if let Some(item) = self.open.take() {
                self.output.push(item.done("incomplete"));
            }
        } else {
            self.close("incomplete", &mut out);
        }
        let ended_as = self.finish.clone();
        let usage = self.usage.as_ref().map(answer::usage);
        let output = std::mem::take(&mut self.output);
        let (name, response) = match self.failed.take() {
            Some((code, message)) => {
                let mut r = self.echo.response("failed", output, usage);
                r["error"] = json!({"code": code, "message": message});
                ("response.failed", r)
            }
            None => {
                let r = self.echo.finished(ended_as.as_deref(), output, usage);
                let name = match r["status"].as_str() {
                    Some("completed") => "response.completed",
                    _ => "response.incomplete",
                };
                (name, r)
            }
        };
        self.event(name, json!({ "response": response }), &mut out);
        self.outcome = Some(response);
        out
    }

    /// The final response object, once [`Translator::finish`]ed.
    pub fn outcome(&self) -> Option<Value> {
        self.outcome.clone()
    }

    fn event(&mut self, name: &str, mut data: Value, out: &mut String) {
        data["type"] = name.into();
        data["sequence_number"] = self.seq.into();
        self.seq += 1;
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }

    fn start(&mut self, out: &mut String) {
        if !std::mem::replace(&mut self.started, true) {
            let r = self.echo.response("in_progress", Vec::new(), None);
            self.event("response.created", json!({ "response": r }), out);
            self.event("response.in_progress", json!({ "response": r }), out);
        }
    }

    /// The index the open item has (or the next one will have).
    fn index(&self) -> usize {
        self.output.len()
    }

    /// Opens `item` (closing the one open), announcing it.
    fn open(&mut self, item: Open, out: &mut String) {
        self.close("completed", out);
        let index = self.index();
        let shown = match &item {
            Open::Reasoning { id, .. } => json!({"id": id, "type": "reasoning", "summary": []}),
            Open::Text { id, .. } => answer::message_item(id, "in_progress", Vec::new()),
            Open::Call {
                id, call_id, name, ..
            } => answer::call_item(id, "in_progress", call_id, name, ""),
        };
        self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": shown}),
            out,
        );
        match &item {
            Open::Reasoning { id, .. } => self.event(
                "response.reasoning_summary_part.added",
                json!({"item_id": id, "output_index": index, "summary_index": 0,
                    "part": {"type": "summary_text", "text": ""}}),
                out,
            ),
            Open::Text { id, .. } => self.event(
                "response.content_part.added",
                json!({"item_id": id, "output_index": index, "content_index": 0,
                    "part": answer::text_part("")}),
                out,
            ),
            Open::Call { .. } => {}
        }
        self.open = Some(item);
    }

    /// Closes the open item, of `status` (`completed`; `incomplete` when
    /// the choice ended short).
    fn close(&mut self, status: &str, out: &mut String) {
        let Some(item) = self.open.take() else {
            return;
        };
        let index = self.index();
        match &item {
            Open::Reasoning { id, text } => {
                let at = json!({"item_id": id, "output_index": index, "summary_index": 0});
                let mut d = at.clone();
                d["text"] = text.as_str().into();
                self.event("response.reasoning_summary_text.done", d, out);
                let mut d = at;
                d["part"] = json!({"type": "summary_text", "text": text});
                self.event("response.reasoning_summary_part.done", d, out);
            }
            Open::Text { id, text } => {
                let at = json!({"item_id": id, "output_index": index, "content_index": 0});
                let mut d = at.clone();
                d["text"] = text.as_str().into();
                d["logprobs"] = json!([]);
                self.event("response.output_text.done", d, out);
                let mut d = at;
                d["part"] = answer::text_part(text);
                self.event("response.content_part.done", d, out);
            }
            Open::Call { id, args, .. } => self.event(
                "response.function_call_arguments.done",
                json!({"item_id": id, "output_index": index, "arguments": args}),
                out,
            ),
        }
        let done = item.done(status);
        self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": done}),
            out,
        );
        self.output.push(done);
    }

    fn line_done(&mut self, line: &[u8], out: &mut String) {
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        let data = data.trim_ascii();
        if data == b"[DONE]" {
            self.ended = true;
            return;
        }
        let Ok(v) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        if self.failed.is_some() || self.outcome.is_some() {
            return;
        }
        self.start(out);
        if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
            return self.error(e, out);
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(u.clone());
        }
        if self.ended {
            return;
        }
        let Some(choice) = v.get("choices").and_then(|c| c.get(0)) else {
            return;
        };
        self.delta(choice.get("delta").unwrap_or(&Value::Null), out);
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.close(answer::ending(Some(f)).0, out);
            self.finish = Some(f.to_owned());
            self.ended = true;
        }
    }

    fn delta(&mut self, delta: &Value, out: &mut String) {
        let text = |k: &str| {
            delta
                .get(k)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
        };
        if let Some(t) = text("reasoning_content").or_else(|| text("reasoning")) {
            if !matches!(self.open, Some(Open::Reasoning { .. })) {
                let id = item_id("rs");
                self.open(
                    Open::Reasoning {
                        id,
                        text: String::new(),
                    },
                    out,
                );
            }
            self.piece(t, out);
        }
        if let Some(t) = text("content") {
            if !matches!(self.open, Some(Open::Text { .. })) {
                let id = item_id("msg");
                self.open(
                    Open::Text {
                        id,
                        text: String::new(),
                    },
                    out,
                );
            }
            self.piece(t, out);
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.tool_call(call, out);
        }
    }

    fn tool_call(&mut self, call: &Value, out: &mut String) {
        let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
        let f = call.get("function").unwrap_or(&Value::Null);
        let same = matches!(self.open, Some(Open::Call { index: i, .. }) if i == index);
        if !same || call.get("id").is_some_and(Value::is_string) {
            let call_id = match call.get("id") {
                Some(Value::String(s)) => s.as_str().into(),
                _ => item_id("call").into(),
            };
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let id = item_id("fc");
            let args = String::new();
            self.open(
                Open::Call {
                    index,
                    id,
                    call_id,
                    name,
                    args,
                },
                out,
            );
        }
        if let Some(a) = f
            .get("arguments")
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty())
        {
            self.piece(a, out);
        }
    }

    /// A piece of the open item's text (or arguments).
    fn piece(&mut self, t: &str, out: &mut String) {
        let index = self.index();
        let (name, data) = match &mut self.open {
            Some(Open::Reasoning { id, text }) => {
                text.push_str(t);
                (
                    "response.reasoning_summary_text.delta",
                    json!({"item_id": id, "output_index": index, "summary_index": 0, "delta": t}),
                )
            }
            Some(Open::Text { id, text }) => {
                text.push_str(t);
                (
                    "response.output_text.delta",
                    json!({"item_id": id, "output_index": index,
                    "content_index": 0, "delta": t, "logprobs": []}),
                )
            }
            Some(Open::Call { id, args, .. }) => {
                args.push_str(t);
                (
                    "response.function_call_arguments.delta",
                    json!({"item_id": id, "output_index": index, "delta": t}),
                )
            }
            None => return,
        };
        self.event(name, data, out);
    }

    /// The upstream's error event: `error` now, `response.failed` at the
    /// end.
    fn error(&mut self, e: &Value, out: &mut String) {
        let status = e.get("code").and_then(Value::as_u64);
        let code = match status {
            Some(429) => "rate_limit_exceeded",
            _ => "server_error",
        };
        let message = e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("the model provider's stream failed")
            .to_owned();
        self.event(
            "error",
            json!({"code": code, "message": message, "param": null}),
            out,
        );
        self.failed = Some((code, message));
        self.ended = true;
    }
}

impl crate::restream::Rechunk for Translator {
    fn feed(&mut self, chunk: &[u8]) -> String {
        Translator::feed(self, chunk)
    }

    fn finish(&mut self) -> String {
        Translator::finish(self)
    }

    fn outcome(&mut self) -> Option<Value> {
        Translator::outcome(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo() -> Echo {
        let body = json!({"model": "p/m", "stream": true});
        Echo::of(body.as_object().unwrap(), "resp_1".into(), 1)
    }

    /// Each event's type and data, checking the `event:` line names it.
    fn events(s: &str) -> Vec<(String, Value)> {
        s.split_terminator("\n\n")
            .map(|e| {
                let (name, data) = e.split_once('\n').unwrap();
                let name = name.strip_prefix("event: ").unwrap();
                let v: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
                assert_eq!(v["type"], name);
                (name.to_owned(), v)
            })
            .collect()
    }

    fn chunk(delta: Value, finish: Option<&str>) -> String {
        let v = json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {v}\n\n")
    }

    const TEXT: [&str; 3] = ["Hel", "lo, ", "wörld"];

    fn text_stream() -> String {
        let mut s = chunk(json!({"role": "assistant", "content": ""}), None);
        s += &chunk(json!({"reasoning_content": "Think"}), None);
        for t in TEXT {
            s += &chunk(json!({ "content": t }), None);
        }
        s += &chunk(json!({}), Some("stop"));
        s += "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":4,\"cost\":0.00100000}}\n\ndata: [DONE]\n\n";
        s
    }

    #[test]
    fn byte_by_byte_and_whole_chunks_give_the_same_events() {
        let s = text_stream();
        let mut whole = Translator::new(echo());
        let mut a = whole.feed(s.as_bytes());
        assert!(!a.contains("response.completed"), "held for the end");
        a += &whole.finish();
        let mut bytes = Translator::new(echo());
        let mut b = String::new();
        for i in 0..s.len() {
            b += &bytes.feed(&s.as_bytes()[i..i + 1]);
        }
        b += &bytes.finish();
        let (a, b) = (events(&a), events(&b));
        let names = |e: &[(String, Value)]| e.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(&a), names(&b));
        assert_eq!(
            names(&a),
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.reasoning_summary_part.added",
                "response.reasoning_summary_text.delta",
                "response.reasoning_summary_text.done",
                "response.reasoning_summary_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        for (i, (_, v)) in a.iter().enumerate() {
            assert_eq!(v["sequence_number"], i, "{v}");
        }
        let deltas: String = a
            .iter()
            .filter(|(n, _)| n == "response.output_text.delta")
            .map(|(_, v)| v["delta"].as_str().unwrap())
            .collect();
        assert_eq!(deltas, TEXT.concat());
        let text_delta = &a[10].1;
        assert_eq!(text_delta["output_index"], 1);
        assert_eq!(text_delta["content_index"], 0);
        assert_eq!(text_delta["logprobs"], json!([]));
        assert_eq!(text_delta["item_id"], a[8].1["item"]["id"]);
        let done = &a.last().unwrap().1["response"];
        assert_eq!(done["status"], "completed");
        assert_eq!(done["output"][1]["content"][0]["text"], TEXT.concat());
        assert_eq!(done["output"][0]["summary"][0]["text"], "Think");
        assert_eq!(done["usage"]["input_tokens"], 5);
        assert!(done["usage"].to_string().contains("\"cost\":0.00100000"));
        assert_eq!(whole.outcome().as_ref(), Some(done));
    }

    #[test]
    fn a_tool_call_in_pieces_is_a_function_call_item() {
        let mut t = Translator::new(echo());
        let mut s = t.feed(
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "weather", "arguments": ""}}]}),
                None,
            )
            .as_bytes(),
        );
        for piece in ["{\"ci", "ty\":\"Oslo\"}"] {
            s += &t.feed(
                chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                    None,
                )
                .as_bytes(),
            );
        }
        s += &t.feed(
            chunk(
                json!({"tool_calls": [{"index": 1, "id": "call_2",
            "function": {"name": "time", "arguments": "{}"}}]}),
                None,
            )
            .as_bytes(),
        );
        s += &t.feed(chunk(json!({}), Some("tool_calls")).as_bytes());
        s += &t.finish();
        let e = events(&s);
        let names: Vec<&str> = e.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        assert_eq!(e[2].1["item"]["status"], "in_progress");
        assert_eq!(e[5].1["arguments"], "{\"city\":\"Oslo\"}");
        let item = &e[6].1["item"];
        assert_eq!(item["call_id"], "call_1");
        assert_eq!(item["name"], "weather");
        assert_eq!(item["status"], "completed");
        assert_eq!(e[7].1["output_index"], 1);
        let r = &e[11].1["response"];
        assert_eq!(r["output"].as_array().unwrap().len(), 2);
        assert_eq!(r["usage"], Value::Null);
    }

    #[test]
    fn an_error_event_fails_the_response_and_ends_it() {
        let mut t = Translator::new(echo());
        let mut s = t.feed(chunk(json!({"content": "Hi"}), None).as_bytes());
        s += &t.feed(b"data: {\"error\":{\"message\":\"upstream timed out\",\"code\":504},\"success\":false}\n\n");
        s += &t.feed(chunk(json!({"content": "more"}), None).as_bytes());
        let before_end = events(&s).len();
        s += &t.finish();
        s += &t.finish();
        let e = events(&s);
        let names: Vec<&str> = e.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "error",
                "response.failed",
            ]
        );
        assert_eq!(before_end, 6);
        assert_eq!(
            e[5].1,
            json!({"type": "error", "code": "server_error", "message": "upstream timed out",
                "param": null, "sequence_number": 5})
        );
        let r = &e[6].1["response"];
        assert_eq!(r["status"], "failed");
        assert_eq!(
            r["error"],
            json!({"code": "server_error", "message": "upstream timed out"})
        );
        assert_eq!(r["output"][0]["status"], "incomplete");
        assert_eq!(t.outcome().unwrap()["status"], "failed");
    }

    #[test]
    fn a_cut_or_broken_stream_ends_incomplete() {
        let mut t = Translator::new(echo());
        let mut s = t.feed(chunk(json!({"content": "Hel"}), Some("length")).as_bytes());
        s += &t.finish();
        let r = events(&s).pop().unwrap().1;
        assert_eq!(r["type"], "response.incomplete");
        assert_eq!(
            r["response"]["incomplete_details"],
            json!({"reason": "max_output_tokens"})
        );
        assert_eq!(r["response"]["output"][0]["status"], "incomplete");
        let mut t = Translator::new(echo());
        let mut s = t.feed(chunk(json!({"content": "Hel"}), None).as_bytes());
        s += &t.finish();
        let e = events(&s);
        let r = &e.last().unwrap().1;
        assert_eq!(r["type"], "response.incomplete");
        assert_eq!(r["response"]["incomplete_details"], json!({"reason": null}));
        assert_eq!(e[e.len() - 2].1["item"]["status"], "incomplete");
        // Nothing at all: still a whole stream.
        let mut t = Translator::new(echo());
        let names: Vec<String> = events(&t.finish()).into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            [
                "response.created",
                "response.in_progress",
                "response.incomplete"
            ]
        );
    }
}
