//! What the MCP door's methods share, for one server or the virtual one:
//! the caller's messages read, its session found or opened, a server
//! called with its credentials and the session's own id, tool calls gated
//! ([`super::calls`]), and the server's answer relayed ([`super::relay`]).

use http::{HeaderValue, StatusCode};
use serde_json::{json, Value};

use super::calls;
use super::relay::{self, Relay};
use crate::ctx::{Caller, Ctx, Later, Outcome, Settlement};
use gateway_base::body::{self, Request, Response};
use gateway_base::errors::ApiError;
use gateway_models::mcp::McpServer;
use gateway_store::{McpSessionRow, McpSessions, Record, User};

/// The session header, both ways.
pub const SESSION: &str = "mcp-session-id";
/// Headers of the caller's passed on to the server.
pub const PASSED: [&str; 2] = ["mcp-protocol-version", "last-event-id"];

/// The caller's session named by its `Mcp-Session-Id` (400 without one,
/// 404 when it is not the caller's open session of this server).
pub async fn session(
    ctx: &Ctx,
    req: &Request,
    user: &User,
    server: &str,
) -> Result<McpSessionRow, ApiError> {
    let id = req
        .headers()
        .get(SESSION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .ok_or_else(|| {
            ApiError::BadRequest("Mcp-Session-Id: required (initialize first)".into())
        })?;
    let uid = user.id;
    let key = id.clone();
    let row = ctx
        .gw
        .store
        .blocking(move |s| s.mcp_session(uid, &key))
        .await?;
    row.filter(|r| r.server == server)
        .ok_or_else(|| ApiError::NotFound(format!("no MCP session {id}")))
}

/// The server's own session id of `row`.
pub fn upstream_id(row: &McpSessionRow, server: &str) -> Option<String> {
    let v: Value = serde_json::from_str(&row.upstream).ok()?;
    v.get(server).and_then(Value::as_str).map(str::to_owned)
}

/// A call to `server` with the caller's passed headers and the server's
/// session id.
pub fn upstream_call(
    ctx: &Ctx,
    req: &Request,
    server: &McpServer,
    method: http::Method,
    up: Option<&str>,
) -> gateway_adapters::upstream::Call {
    let timeout = ctx.gw.config.mcp.call_timeout;
    let mut call = ctx
        .gw
        .upstream
        .mcp_call(method, &server.url, &server.credentials, timeout);
    for name in PASSED {
        if let Some(v) = req.headers().get(name) {
            call = call.with_header(http::HeaderName::from_static(name), v.clone());
        }
    }
    if let Some(v) = up.and_then(|u| HeaderValue::from_str(u).ok()) {
        call = call.with_header(http::HeaderName::from_static(SESSION), v);
    }
    call
}

/// The request's JSON-RPC messages (one or a list), and the request
/// with its body read (its headers still there).
pub async fn read_messages(ctx: &Ctx, req: Request) -> Result<(Request, Vec<Value>), ApiError> {
    let (parts, body) = req.into_parts();
    let bytes = crate::shape::read_limited(body, ctx.gw.config.max_json_bytes).await?;
    let req = Request::from_parts(parts, gateway_base::body::ReqBody::whole(bytes.clone()));
    let parsed: Value = serde_json::from_slice(&bytes).map_err(|_| {
        ApiError::BadRequest("the body is not JSON (a JSON-RPC message or a list of them)".into())
    })?;
    let messages: Vec<Value> = match parsed {
        Value::Array(a) => a,
        m => vec![m],
    };
    if messages.is_empty() || messages.iter().any(|m| !m.is_object()) {
        return Err(ApiError::BadRequest(
            "each message is a JSON-RPC object".into(),
        ));
    }
    Ok((req, messages))
}

/// Opens a session of the caller's on `server` (429 past the limit).
pub async fn open(ctx: &Ctx, user: &User, server: &str) -> Result<McpSessionRow, ApiError> {
    let row = McpSessionRow {
        id: format!("mcp_{}", &crate::ctx::new_request_id()[4..]),
        user_id: user.id,
        key_id: user.key_id,
        server: server.to_owned(),
        upstream: "{}".into(),
        created_at: gateway_store::now_rfc3339(),
        ended_at: None,
    };
    let max = ctx.gw.config.mcp.sessions_per_user;
    let r = row.clone();
    if !ctx
        .gw
        .store
        .blocking(move |s| s.open_mcp_session(&r, max))
        .await?
    {
        return Err(ApiError::RateLimited {
            message: format!("at most {max} open MCP sessions per user (GATEWAY_MCP_MAX_SESSIONS)"),
            retry_after: 60,
        });
    }
    Ok(row)
}

/// The messages to send, the refusals to answer, and the refused calls'
/// records: each tool call admitted or refused ([`calls::admit`]).
pub async fn gate(
    ctx: &Ctx,
    relay: &mut Relay,
    messages: Vec<Value>,
) -> (Vec<Value>, Vec<Value>, Vec<Record>) {
    let calls_n = messages
        .iter()
        .filter(|m| m["method"] == "tools/call" && m.get("id").is_some())
        .count();
    let (mut forward, mut refusals, mut records) = (Vec::new(), Vec::new(), Vec::new());
    let mut n = 0;
    for m in messages {
        let Some(id) = m.get("id").filter(|_| m.get("method").is_some()).cloned() else {
            forward.push(m);
            continue;
        };
        let method = m["method"].as_str().unwrap_or_default().to_owned();
        relay.methods.insert(id.to_string(), method.clone());
        if method != "tools/call" {
            forward.push(m);
            continue;
        }
        n += 1;
        let call_id = match calls_n {
            1 => ctx.request_id.clone(),
            _ => format!("{}.{n}", ctx.request_id),
        };
        let tool = m["params"]["name"].as_str().unwrap_or_default().to_owned();
        let arguments = m["params"].get("arguments").map(Value::to_string);
        let c = Caller {
            request_id: &call_id,
            ..ctx.caller()
        };
        match calls::admit(
            &c,
            &relay.server,
            &relay.user,
            &id,
            &tool,
            call_id.clone(),
            arguments,
        )
        .await
        {
            Ok(p) => {
                relay.pending.insert(id.to_string(), p);
                forward.push(m);
            }
            Err(refusal) => {
                let id = call_id.clone();
                records.push(calls::refused(
                    &c,
                    &relay.server,
                    relay.session.as_deref(),
                    id,
                    &tool,
                ));
                refusals.push(refusal);
            }
        }
    }
    (forward, refusals, records)
}

/// The answer of a message all of whose requests were refused.
pub fn answered(session: &str, refusals: Vec<Value>, records: Vec<Record>) -> Outcome {
    let v = match refusals.len() {
        1 => refusals.into_iter().next().unwrap_or_default(),
        _ => Value::Array(refusals),
    };
    let mut out = Outcome::new(with_session(body::json(StatusCode::OK, &v), session), None);
    out.records = records;
    out
}

/// The answer when the server failed: each request sent gets a JSON-RPC
/// error naming the server (with the refusals); nothing is charged.
pub fn failed(
    relay: &mut Relay,
    session: &str,
    mut refusals: Vec<Value>,
    mut records: Vec<Record>,
    e: &ApiError,
) -> Outcome {
    let message = server_failed(&relay.server, e);
    tracing::warn!(server = %relay.server.id, error = %message, "an MCP server failed");
    let ids: Vec<String> = relay.methods.keys().cloned().collect();
    for id in ids {
        if refusals.iter().any(|r| r["id"].to_string() == id) {
            continue;
        }
        let v: Value = serde_json::from_str(&id).unwrap_or(Value::Null);
        refusals.push(calls::error(&v, calls::SERVER_ERROR, &message));
    }
    records.extend(relay.unanswered());
    if refusals.is_empty() {
        let mut out = Outcome::new(
            body::json(
                StatusCode::BAD_GATEWAY,
                &json!({"error": {"message": message}}),
            ),
            None,
        );
        out.records = records;
        return out;
    }
    answered(session, refusals, records)
}

/// The server's answer relayed: a whole JSON answer read, transformed and
/// answered with its calls' records; a stream relayed event by event.
pub async fn relay_answer(
    mut relay: Relay,
    session: &str,
    answer: gateway_adapters::upstream::Answer,
    refusals: Vec<Value>,
    mut records: Vec<Record>,
) -> Result<Outcome, ApiError> {
    let status = StatusCode::from_u16(answer.status()).unwrap_or(StatusCode::OK);
    let kind = answer
        .header("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if kind.starts_with("text/event-stream") {
        let priced = relay.pending.values().any(|p| p.price.is_some());
        // The refusals lead the stream, each an event of its own.
        let body = relay::events(relay, refusals, answer.byte_stream());
        let mut resp = http::Response::new(body);
        *resp.status_mut() = status;
        resp.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        let mut out = Outcome::new(with_session(resp, session), Some(status.as_u16()));
        out.records = records;
        // A priced call's usage is written by the stream, at its answer.
        if priced {
            out = out.settled(Settlement::Later(Later::Stream));
        }
        return Ok(out);
    }
    if status == StatusCode::ACCEPTED || relay.methods.is_empty() {
        let mut out = Outcome::new(
            with_session(Response::new(body::empty()), session),
            Some(status.as_u16()),
        );
        *out.response.status_mut() = status;
        records.extend(relay.unanswered());
        out.records = records;
        return Ok(out);
    }
    let bytes = answer
        .bytes(gateway_adapters::upstream::MAX_JSON_ANSWER)
        .await?;
    let (text, settled) = relay::whole(&mut relay, &bytes).map_err(|why| {
        ApiError::BadGateway(format!("MCP server {} answered {why}", relay.server.id))
    })?;
    let priced = settled.iter().any(|r| matches!(r, Record::Usage(_)));
    records.extend(settled);
    let text = match refusals.is_empty() {
        true => text,
        false => merge(&text, refusals),
    };
    let mut out = Outcome::new(
        with_session(body::json_text(status, text), session),
        Some(status.as_u16()),
    );
    out.records = records;
    if priced {
        out = out.settled(Settlement::ByModeRecords);
    }
    Ok(out)
}

/// An answer's messages with the refusals beside them (a list).
pub fn merge(text: &str, refusals: Vec<Value>) -> String {
    let mut all: Vec<Value> = match serde_json::from_str(text) {
        Ok(Value::Array(a)) => a,
        Ok(v) => vec![v],
        Err(_) => Vec::new(),
    };
    all.extend(refusals);
    Value::Array(all).to_string()
}

pub fn with_session(mut resp: Response, session: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(session) {
        resp.headers_mut().insert(SESSION, v);
    }
    resp
}

/// What a failed call to `server` says (its credentials scrubbed).
pub fn server_failed(server: &McpServer, e: &ApiError) -> String {
    let why = server.credentials.scrub(&e.message());
    format!("MCP server {} failed: {why}", server.id)
}
