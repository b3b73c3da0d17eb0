//! `/mcp/{server}`: one server of the servers file, its messages relayed
//! both ways.

use http::StatusCode;
use serde_json::{json, Value};

use super::door::{self, SESSION};
use super::relay::Relay;
use crate::ctx::{Ctx, Outcome};
use gateway_base::body::{self, Request, Response};
use gateway_base::errors::ApiError;
use gateway_base::spec::{Method, PathParams};
use gateway_models::mcp::McpServer;
use gateway_store::{McpSessions, User};

/// The row's method on the server named by `{server}`.
pub async fn serve(ctx: &mut Ctx, req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    let name = params
        .get("server")
        .map(|v| v.into_owned())
        .unwrap_or_default();
    let server = ctx
        .gw
        .mcp
        .load()
        .get(&name)
        .cloned()
        .ok_or_else(|| ApiError::NotFound(format!("no MCP server {name:?}")))?;
    let user = ctx
        .user
        .clone()
        .ok_or_else(|| ApiError::bug("an MCP request without a user"))?;
    match ctx.spec.method {
        Method::Post => post(ctx, req, server, user).await,
        Method::Get => get(ctx, req, server, user).await,
        _ => delete(ctx, req, server, user).await,
    }
}

/// `POST`: the caller's messages, the server's answer relayed.
async fn post(
    ctx: &mut Ctx,
    req: Request,
    server: McpServer,
    user: User,
) -> Result<Outcome, ApiError> {
    let (req, messages) = door::read_messages(ctx, req).await?;
    let initialize = messages.iter().any(|m| m["method"] == "initialize");
    let row = match initialize {
        true => door::open(ctx, &user, &server.id).await?,
        false => door::session(ctx, &req, &user, &server.id).await?,
    };
    let mut relay = Relay::new(ctx, server.clone(), user, &row.id);
    let (forward, refusals, records) = door::gate(ctx, &mut relay, messages).await;
    if forward.is_empty() {
        return Ok(door::answered(&row.id, refusals, records));
    }
    let up = door::upstream_id(&row, &server.id);
    let body = match forward.len() {
        1 => forward.into_iter().next().unwrap_or_default(),
        _ => Value::Array(forward),
    };
    let call =
        door::upstream_call(ctx, &req, &server, http::Method::POST, up.as_deref()).json(&body);
    let answer = match call.try_send().await {
        Ok(a) => a,
        Err(f) => {
            if initialize {
                // No session was made at the server: none is kept here.
                let (uid, id, now) = (row.user_id, row.id.clone(), gateway_store::now_rfc3339());
                ctx.gw
                    .store
                    .blocking(move |s| s.end_mcp_session(uid, &id, &now))
                    .await?;
            }
            return Ok(door::failed(
                &mut relay, &row.id, refusals, records, &f.error,
            ));
        }
    };
    if initialize {
        if let Some(id) = answer.header(SESSION).and_then(|v| v.to_str().ok()) {
            let upstream = json!({ server.id.clone(): id }).to_string();
            let key = row.id.clone();
            ctx.gw
                .store
                .blocking(move |s| s.set_mcp_upstream(&key, &upstream))
                .await?;
        }
    }
    door::relay_answer(relay, &row.id, answer, refusals, records).await
}

/// `GET`: the server's own stream of the caller's session, relayed.
async fn get(
    ctx: &mut Ctx,
    req: Request,
    server: McpServer,
    user: User,
) -> Result<Outcome, ApiError> {
    let row = door::session(ctx, &req, &user, &server.id).await?;
    let up = door::upstream_id(&row, &server.id);
    let call = door::upstream_call(ctx, &req, &server, http::Method::GET, up.as_deref());
    let answer = call
        .try_send()
        .await
        .map_err(|f| ApiError::BadGateway(door::server_failed(&server, &f.error)))?;
    let relay = Relay::new(ctx, server, user, &row.id);
    door::relay_answer(relay, &row.id, answer, Vec::new(), Vec::new()).await
}

/// `DELETE`: the session ended, at the server too.
async fn delete(
    ctx: &mut Ctx,
    req: Request,
    server: McpServer,
    user: User,
) -> Result<Outcome, ApiError> {
    let row = door::session(ctx, &req, &user, &server.id).await?;
    let up = door::upstream_id(&row, &server.id);
    if up.is_some() {
        let call = door::upstream_call(ctx, &req, &server, http::Method::DELETE, up.as_deref());
        if let Err(f) = call.try_send().await {
            tracing::debug!(server = %server.id, error = %server.credentials.scrub(&f.error.message()), "the MCP server refused the session's end");
        }
    }
    let (uid, id, now) = (user.id, row.id.clone(), gateway_store::now_rfc3339());
    ctx.gw
        .store
        .blocking(move |s| s.end_mcp_session(uid, &id, &now))
        .await?;
    let mut resp = Response::new(body::empty());
    *resp.status_mut() = StatusCode::NO_CONTENT;
    Ok(Outcome::new(resp, None))
}
