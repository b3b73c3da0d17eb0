//! What crosses back from an MCP server: each JSON-RPC message, whether it
//! came as one JSON answer or as a server-sent event, scrubbed of the
//! server's credentials; a `tools/list` result filtered to what the key may
//! call; the answer to a tool call settled (its records committed before
//! the message that carries it leaves). Streams stay streams: each event
//! is relayed as it comes.

use std::collections::HashMap;

use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::Value;

use super::calls::{self, Pending};
use crate::ctx::Caller;
use crate::services::Gateway;
use gateway_base::spec::EndpointSpec;
use gateway_models::mcp::{key_allows, McpServer};
use gateway_store::{OutsideRecordPhase, Record, User};

/// The state of one answer's relay.
pub struct Relay {
    pub gw: Gateway,
    pub spec: &'static EndpointSpec,
    pub server: McpServer,
    pub user: User,
    pub session: Option<String>,
    /// The requests sent, by id (JSON text): their methods.
    pub methods: HashMap<String, String>,
    /// The tool calls sent, by id (JSON text).
    pub pending: HashMap<String, Pending>,
    /// The catalogue the answer's request started with.
    pub catalogue: std::sync::Arc<gateway_models::providers::Providers>,
}

impl Relay {
    /// The relay of an answer to `user` on `server` in session `session`.
    pub fn new(ctx: &crate::ctx::Ctx, server: McpServer, user: User, session: &str) -> Relay {
        Relay {
            gw: ctx.gw.clone(),
            spec: ctx.spec,
            server,
            user,
            session: Some(session.to_owned()),
            methods: HashMap::new(),
            pending: HashMap::new(),
            catalogue: ctx.catalogue.clone(),
        }
    }

    fn caller<'a>(&'a self, request_id: &'a str) -> Caller<'a> {
        Caller {
            gw: &self.gw,
            user: Some(&self.user),
            request_id,
            route_id: self.spec.id,
            capability: self.spec.capability,
            started: std::time::Instant::now(),
            trace: &NO_SPAN,
            line: None,
            catalogue: &self.catalogue,
        }
    }

    /// One message from the server as the caller gets it (JSON text), and
    /// the records its answer to a tool call leaves.
    pub fn message(&mut self, mut v: Value) -> (String, Vec<Record>) {
        let id = v.get("id").map(Value::to_string);
        let is_answer = v.get("result").is_some() || v.get("error").is_some();
        let mut records = Vec::new();
        if let (Some(id), true) = (&id, is_answer) {
            if self.methods.get(id).map(String::as_str) == Some("tools/list") {
                self.filter_tools(&mut v);
            }
            if let Some(p) = self.pending.remove(id) {
                records = self.settle(p, Some(&v));
            }
        }
        (self.server.credentials.scrub(&v.to_string()), records)
    }

    /// The records of a call's end (`answer`: `None` when none came).
    pub fn settle(&self, p: Pending, answer: Option<&Value>) -> Vec<Record> {
        let id = p.request_id.clone();
        let c = self.caller(&id);
        let log = self.gw.config.mcp.log_arguments;
        calls::settle(&c, &self.server, self.session.as_deref(), p, answer, log)
    }

    /// The calls that got no answer: ended as errors (their holds released).
    pub fn unanswered(&mut self) -> Vec<Record> {
        let pending: Vec<Pending> = self.pending.drain().map(|(_, p)| p).collect();
        pending
            .into_iter()
            .flat_map(|p| self.settle(p, None))
            .collect()
    }

    /// Keeps in a `tools/list` result only the tools the server exposes
    /// and the key may call.
    fn filter_tools(&self, v: &mut Value) {
        let (server, allow) = (&self.server, self.user.mcp_tools.as_deref());
        if let Some(tools) = v.pointer_mut("/result/tools").and_then(Value::as_array_mut) {
            tools.retain(|t| {
                let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
                server.exposes(name) && key_allows(allow, &server.id, name)
            });
        }
    }
}

static NO_SPAN: std::sync::LazyLock<gateway_base::traces::Span> =
    std::sync::LazyLock::new(Default::default);

/// A whole JSON answer (one message or a list): each message relayed, the
/// records of the calls it answers.
pub fn whole(relay: &mut Relay, body: &[u8]) -> Result<(String, Vec<Record>), String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|_| "an answer that is not JSON".to_owned())?;
    let mut records = Vec::new();
    let text = match v {
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for m in items {
                let (t, r) = relay.message(m);
                records.extend(r);
                out.push(t);
            }
            format!("[{}]", out.join(","))
        }
        m => {
            let (t, r) = relay.message(m);
            records.extend(r);
            t
        }
    };
    records.extend(relay.unanswered());
    Ok((text, records))
}

/// A server-sent event stream relayed event by event (after `first`,
/// the gateway's own answers to requests it refused): each message
/// through [`Relay::message`], a tool call's records committed before the
/// event carrying its answer leaves; at the end, the calls left
/// unanswered are ended (their holds released, nothing charged).
pub fn events(
    relay: Relay,
    first: Vec<Value>,
    upstream: gateway_adapters::upstream::ByteStream,
) -> gateway_base::body::Body {
    use eventsource_stream::Eventsource;
    let events = upstream.eventsource();
    let first = futures_util::stream::iter(
        first
            .into_iter()
            .map(|v| Ok::<Bytes, std::io::Error>(Bytes::from(format!("data: {v}\n\n")))),
    );
    let stream = futures_util::stream::unfold(
        (relay, Box::pin(events), false),
        |(mut relay, mut events, done)| async move {
            if done {
                return None;
            }
            match events.next().await {
                Some(Ok(e)) => {
                    let bytes = relay_event(&mut relay, e).await;
                    Some((Ok::<Bytes, std::io::Error>(bytes), (relay, events, false)))
                }
                Some(Err(e)) => {
                    tracing::debug!(server = %relay.server.id, error = %e, "an MCP server's stream broke");
                    end(&mut relay).await;
                    None
                }
                None => {
                    end(&mut relay).await;
                    None
                }
            }
        },
    );
    let bytes: gateway_adapters::objects::ByteStream = Box::pin(first.chain(stream));
    gateway_adapters::objects::stream_body(bytes)
}

/// One event as the caller gets it (its records committed first).
async fn relay_event(relay: &mut Relay, e: eventsource_stream::Event) -> Bytes {
    let data = match serde_json::from_str::<Value>(&e.data) {
        Ok(v) => {
            let id = v.get("id").cloned().unwrap_or(Value::Null);
            let (text, records) = relay.message(v);
            match commit(relay, records).await {
                true => text,
                // Never an answer whose charge was not committed.
                false => calls::error(
                    &id,
                    calls::SERVER_ERROR,
                    "the call's records could not be kept",
                )
                .to_string(),
            }
        }
        Err(_) => relay.server.credentials.scrub(&e.data),
    };
    let mut out = String::with_capacity(data.len() + 32);
    if !e.id.is_empty() {
        out.push_str(&format!("id: {}\n", e.id));
    }
    if !e.event.is_empty() && e.event != "message" {
        out.push_str(&format!("event: {}\n", e.event));
    }
    if let Some(r) = e.retry {
        out.push_str(&format!("retry: {}\n", r.as_millis()));
    }
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

/// The stream's end: the calls left unanswered are ended.
async fn end(relay: &mut Relay) {
    let records = relay.unanswered();
    commit(relay, records).await;
}

/// Commits a streamed answer's records (a tool call's end); `false` when
/// they could not be.
async fn commit(relay: &Relay, records: Vec<Record>) -> bool {
    if records.is_empty() {
        return true;
    }
    let why = OutsideRecordPhase::ToolCall;
    match relay
        .gw
        .store
        .commit_outside_record_phase(why, records)
        .await
    {
        Ok(_) => true,
        Err(e) => {
            tracing::error!(server = %relay.server.id, error = %e, "an MCP tool call's records were not committed");
            false
        }
    }
}
