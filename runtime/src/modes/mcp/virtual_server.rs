//! `/mcp`: every server the caller's key may use, as one server. Its
//! tools are named `{server}__{tool}`; a call goes to its server (the
//! name given back its own) and its answer is relayed as it comes; one
//! session of the gateway's own holds each server's.
//!
//! What the virtual server answers itself: `initialize` (each server
//! initialized behind it; its capabilities are tools), `ping`,
//! `tools/list` (each server's list, filtered by what it exposes and the
//! key may call, names prefixed); notifications go to every server; any
//! other method is a JSON-RPC error (-32601: ask the server itself, at
//! `/mcp/{server}`). A message carries one `tools/call` at most. `GET` is
//! a 405 (no stream of its own); `DELETE` ends every server's session.

use std::collections::BTreeMap;

use futures_util::StreamExt;
use http::StatusCode;
use serde_json::{json, Map, Value};

use super::calls;
use super::door::{self, SESSION};
use super::relay::Relay;
use crate::ctx::{Ctx, Outcome};
use gateway_base::body::{self, Request, Response};
use gateway_base::errors::ApiError;
use gateway_base::spec::Method;
use gateway_models::mcp::{key_allows, McpServer, VIRTUAL_SEPARATOR};
use gateway_store::{McpSessionRow, McpSessions, User};

/// JSON-RPC's "method not found".
const NO_METHOD: i64 = -32601;

/// A request of the virtual server.
pub async fn serve(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let user = ctx
        .user
        .clone()
        .ok_or_else(|| ApiError::bug("an MCP request without a user"))?;
    match ctx.spec.method {
        Method::Post => post(ctx, req, user).await,
        Method::Get => Err(ApiError::MethodNotAllowed("POST, DELETE")),
        _ => delete(ctx, req, user).await,
    }
}

fn status(s: StatusCode) -> Response {
    let mut r = Response::new(body::empty());
    *r.status_mut() = s;
    r
}

/// The servers the key may use a tool of.
fn usable(ctx: &Ctx, user: &User) -> Vec<McpServer> {
    let allow = user.mcp_tools.as_deref();
    let servers = ctx.gw.mcp.load();
    servers
        .servers
        .iter()
        .filter(|s| match allow {
            None => true,
            Some(list) => list
                .iter()
                .any(|a| a.split_once('/').is_some_and(|(x, _)| x == s.id)),
        })
        .cloned()
        .collect()
}

async fn post(ctx: &mut Ctx, req: Request, user: User) -> Result<Outcome, ApiError> {
    let (req, messages) = door::read_messages(ctx, req).await?;
    let servers = usable(ctx, &user);
    if let Some(init) = messages.iter().find(|m| m["method"] == "initialize") {
        return initialize(ctx, &req, &user, &servers, init).await;
    }
    let row = door::session(ctx, &req, &user, "").await?;
    let ups: Map<String, Value> = serde_json::from_str(&row.upstream).unwrap_or_default();
    let calls: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .collect();
    if let [call] = calls[..] {
        let call = call.clone();
        return tool_call(ctx, &req, user, &row, &ups, call).await;
    }
    let mut answers = Vec::new();
    for m in &messages {
        let Some(id) = m.get("id").filter(|_| m.get("method").is_some()) else {
            // A notification (or a client's answer): to every server.
            for s in &servers {
                let up = ups.get(&s.id).and_then(Value::as_str);
                let _ = ask(ctx, &req, s, up, m).await;
            }
            continue;
        };
        answers.push(match m["method"].as_str().unwrap_or_default() {
            "ping" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            "tools/list" => tools(ctx, &req, &user, &servers, &ups, id).await,
            "tools/call" => calls::error(id, calls::REFUSED, "one tools/call per message on the virtual server"),
            other => calls::error(id, NO_METHOD, &format!("{other}: not answered by the virtual server; ask the server at /mcp/{{server}}")),
        });
    }
    let resp = match answers.len() {
        0 => status(StatusCode::ACCEPTED),
        1 => body::json(StatusCode::OK, &answers[0]),
        _ => body::json(StatusCode::OK, &Value::Array(answers)),
    };
    Ok(Outcome::new(door::with_session(resp, &row.id), None))
}

/// `initialize`: a session of the gateway's, each server initialized
/// behind it (a server that fails is left out, and said in the log).
async fn initialize(
    ctx: &Ctx,
    req: &Request,
    user: &User,
    servers: &[McpServer],
    init: &Value,
) -> Result<Outcome, ApiError> {
    let row = door::open(ctx, user, "").await?;
    let mut ups = Map::new();
    for s in servers {
        match ask(ctx, req, s, None, init).await {
            Ok((_, Some(session))) => {
                ups.insert(s.id.clone(), Value::String(session));
            }
            Ok((_, None)) => {}
            Err(e) => {
                tracing::warn!(server = %s.id, error = %e, "an MCP server of the virtual server did not initialize")
            }
        }
    }
    let (key, upstream) = (row.id.clone(), Value::Object(ups).to_string());
    ctx.gw
        .store
        .blocking(move |s| s.set_mcp_upstream(&key, &upstream))
        .await?;
    let version = init["params"]["protocolVersion"].clone();
    let answer = json!({"jsonrpc": "2.0", "id": init["id"], "result": {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "gateway", "version": env!("CARGO_PKG_VERSION")},
    }});
    Ok(Outcome::new(
        door::with_session(body::json(StatusCode::OK, &answer), &row.id),
        None,
    ))
}

/// `tools/list`: every usable server's tools the key may call, prefixed.
async fn tools(
    ctx: &Ctx,
    req: &Request,
    user: &User,
    servers: &[McpServer],
    ups: &Map<String, Value>,
    id: &Value,
) -> Value {
    let mut all = Vec::new();
    for s in servers {
        let up = ups.get(&s.id).and_then(Value::as_str);
        let list = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
        let Ok((answer, _)) = ask(ctx, req, s, up, &list).await else {
            continue;
        };
        let items = answer["result"]["tools"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for mut t in items {
            let name = t["name"].as_str().unwrap_or_default().to_owned();
            if s.exposes(&name) && key_allows(user.mcp_tools.as_deref(), &s.id, &name) {
                t["name"] = json!(format!("{}{VIRTUAL_SEPARATOR}{name}", s.id));
                all.push(t);
            }
        }
    }
    json!({"jsonrpc": "2.0", "id": id, "result": {"tools": all}})
}

/// A `tools/call` of `{server}__{tool}`: sent to its server as `tool`,
/// gated and relayed as on the server's own door.
async fn tool_call(
    ctx: &Ctx,
    req: &Request,
    user: User,
    row: &McpSessionRow,
    ups: &Map<String, Value>,
    mut call: Value,
) -> Result<Outcome, ApiError> {
    let id = call["id"].clone();
    let name = call["params"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let server = name
        .split_once(VIRTUAL_SEPARATOR)
        .and_then(|(s, t)| ctx.gw.mcp.load().get(s).map(|s| (s.clone(), t.to_owned())));
    let Some((server, tool)) = server else {
        let e = calls::error(
            &id,
            calls::REFUSED,
            &format!("no tool {name} on the virtual server"),
        );
        return Ok(Outcome::new(
            door::with_session(body::json(StatusCode::OK, &e), &row.id),
            None,
        ));
    };
    call["params"]["name"] = json!(tool);
    let mut relay = Relay::new(ctx, server.clone(), user, &row.id);
    let (forward, refusals, records) = door::gate(ctx, &mut relay, vec![call]).await;
    if forward.is_empty() {
        return Ok(door::answered(&row.id, refusals, records));
    }
    let up = ups.get(&server.id).and_then(Value::as_str);
    let c = door::upstream_call(ctx, req, &server, http::Method::POST, up).json(&forward[0]);
    match c.try_send().await {
        Ok(answer) => door::relay_answer(relay, &row.id, answer, refusals, records).await,
        Err(f) => Ok(door::failed(
            &mut relay, &row.id, refusals, records, &f.error,
        )),
    }
}

/// Sends `message` to `server` (in its session `up`) and reads the answer
/// to it, JSON or a stream's event of the same id; and the server's
/// session id, when it gave one.
async fn ask(
    ctx: &Ctx,
    req: &Request,
    server: &McpServer,
    up: Option<&str>,
    message: &Value,
) -> Result<(Value, Option<String>), String> {
    let call = door::upstream_call(ctx, req, server, http::Method::POST, up).json(message);
    let answer = call
        .try_send()
        .await
        .map_err(|f| door::server_failed(server, &f.error))?;
    let session = answer
        .header(SESSION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let sse = answer
        .header("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    if answer.status() == 202 || message.get("id").is_none() {
        return Ok((Value::Null, session));
    }
    if !sse {
        let v: Value = answer
            .json("an MCP answer")
            .await
            .map_err(|e| e.message())?;
        return Ok((v, session));
    }
    use eventsource_stream::Eventsource;
    let mut events = answer.byte_stream().eventsource();
    while let Some(Ok(e)) = events.next().await {
        let v: Value = serde_json::from_str(&e.data).unwrap_or(Value::Null);
        if v.get("id") == message.get("id")
            && (v.get("result").is_some() || v.get("error").is_some())
        {
            return Ok((v, session));
        }
    }
    Err(format!(
        "MCP server {} ended its stream without an answer",
        server.id
    ))
}

/// `DELETE`: every server's session ended, then the gateway's.
async fn delete(ctx: &mut Ctx, req: Request, user: User) -> Result<Outcome, ApiError> {
    let row = door::session(ctx, &req, &user, "").await?;
    let ups: BTreeMap<String, Value> = serde_json::from_str(&row.upstream).unwrap_or_default();
    let servers = ctx.gw.mcp.load_full();
    for (id, up) in &ups {
        if let (Some(s), Some(up)) = (servers.get(id), up.as_str()) {
            let c = door::upstream_call(ctx, &req, s, http::Method::DELETE, Some(up));
            let _ = c.try_send().await;
        }
    }
    let (uid, id, now) = (user.id, row.id.clone(), gateway_store::now_rfc3339());
    ctx.gw
        .store
        .blocking(move |s| s.end_mcp_session(uid, &id, &now))
        .await?;
    Ok(Outcome::new(status(StatusCode::NO_CONTENT), None))
}
