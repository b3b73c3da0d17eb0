//! Tool calls (`tools/call`) on their way through: what may be sent (the
//! server exposes the tool, the key's allow-list names it, the server's
//! rate limit), what is held before (a priced tool's price), and the
//! records of its end: its call record, and when it succeeded and is
//! priced, its usage record and debit, with the end of its hold.

use std::time::Instant;

use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::ctx::Caller;
use crate::ctx::Metered;
use crate::money::{self, Bill, Hold};
use gateway_base::billing::Charge;
use gateway_base::errors::ApiError;
use gateway_models::mcp::{key_allows, McpServer};
use gateway_store::{McpCallRecord, Record, User};

/// JSON-RPC's code of a request the gateway refuses (the tool not allowed,
/// no credit, over the rate limit): the server never saw it.
pub const REFUSED: i64 = -32001;
/// JSON-RPC's code of a server that could not be reached or answered
/// wrong.
pub const SERVER_ERROR: i64 = -32603;

/// A tool call sent upstream, waiting for its answer.
pub struct Pending {
    /// Its request id (the request's own, `.n` when it carried several).
    pub request_id: String,
    pub tool: String,
    pub price: Option<Decimal>,
    pub hold: Option<Hold>,
    pub started: Instant,
    pub arguments: Option<String>,
    /// Its trace span, a child of its request's (nothing when traces are off).
    pub span: gateway_base::traces::Attempt,
}

/// A JSON-RPC error answer to request `id`.
pub fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Whether `tool` may be called through `server` by `user`'s key, and
/// held (`c` is the call's own: its request id names the hold);
/// `Err`: the JSON-RPC error answer that refuses it.
pub async fn admit(
    c: &Caller<'_>,
    server: &McpServer,
    user: &User,
    id: &Value,
    tool: &str,
    request_id: String,
    arguments: Option<String>,
) -> Result<Pending, Value> {
    let name = format!("{}/{tool}", server.id);
    if !server.exposes(tool) || !key_allows(user.mcp_tools.as_deref(), &server.id, tool) {
        return Err(error(
            id,
            REFUSED,
            &format!("tool {name} is not allowed for this API key"),
        ));
    }
    // A server of the door's own capability was counted with the request.
    let capability = static_capability(c, server);
    if capability != c.capability {
        let limited = c.gw.limiter.enforce(user.id, capability).await;
        if let Err(ApiError::RateLimited { message, .. }) = limited {
            return Err(error(id, REFUSED, &message));
        }
    }
    let price = server.price_of(tool);
    let hold = match price {
        Some(p) => match money::reserve(c, p, false).await {
            Ok(h) => h,
            Err(e) => {
                let message = match e.status().as_u16() {
                    402 => format!("payment required: {name} costs {p} USD, which the balance or the key's budget cannot hold"),
                    _ => e.message(),
                };
                return Err(error(id, REFUSED, &message));
            }
        },
        None => None,
    };
    Ok(Pending {
        request_id,
        tool: tool.to_owned(),
        price,
        hold,
        started: Instant::now(),
        arguments,
        span: c.trace.turn(format!("tools/call {name}")),
    })
}

/// The capability of `server`'s calls as the table names it (checked at
/// start-up: one of the table's).
fn static_capability(c: &Caller<'_>, server: &McpServer) -> &'static str {
    c.gw.table
        .capabilities
        .iter()
        .find(|k| k.name == server.capability)
        .map_or(c.capability, |k| k.name)
}

/// The records of a call's end: `answer` its JSON-RPC answer (`None`: none
/// came). Charged when priced and answered without an error.
pub fn settle(
    c: &Caller<'_>,
    server: &McpServer,
    session: Option<&str>,
    p: Pending,
    answer: Option<&Value>,
    log_arguments: bool,
) -> Vec<Record> {
    let outcome: &'static str = match answer {
        None => "error",
        Some(a) if a.get("error").is_some() => "error",
        Some(a) if a["result"]["isError"] == json!(true) => "tool_error",
        Some(_) => "ok",
    };
    gateway_base::telemetry::mcp_call(&server.id, outcome, p.started.elapsed());
    let mut records = Vec::new();
    let user = c.user_id().unwrap_or_default();
    let charged = match (p.price, outcome) {
        (Some(price), "ok") => {
            records.extend(usage(c, server, &p, price));
            Some(gateway_base::billing::format_money(price))
        }
        _ => None,
    };
    let usage = charged.clone().map(|c| (0, 0, c));
    gateway_base::traces::Span::default().turn_end(p.span, outcome, usage);
    if let Some(h) = p.hold {
        records.push(h.into_release());
    }
    records.push(Record::McpCall(McpCallRecord {
        request_id: p.request_id,
        user_id: user,
        session_id: session.map(str::to_owned),
        server: server.id.clone(),
        tool: p.tool,
        duration_ms: p.started.elapsed().as_millis() as u64,
        outcome: outcome.to_owned(),
        charged,
        arguments: p.arguments.filter(|_| log_arguments),
        result: answer.filter(|_| log_arguments).map(Value::to_string),
        created_at: gateway_store::now_rfc3339(),
    }));
    records
}

/// A refused call's record (never sent, nothing charged).
pub fn refused(
    c: &Caller<'_>,
    server: &McpServer,
    session: Option<&str>,
    request_id: String,
    tool: &str,
) -> Record {
    gateway_base::telemetry::mcp_call(&server.id, "refused", std::time::Duration::ZERO);
    Record::McpCall(McpCallRecord {
        request_id,
        user_id: c.user_id().unwrap_or_default(),
        session_id: session.map(str::to_owned),
        server: server.id.clone(),
        tool: tool.to_owned(),
        duration_ms: 0,
        outcome: "refused".into(),
        charged: None,
        arguments: None,
        result: None,
        created_at: gateway_store::now_rfc3339(),
    })
}

/// The usage record (and debit) of a priced call that succeeded: one
/// call of `mcp:{server}/{tool}` at its price (the servers file's price is
/// what the caller pays).
fn usage(c: &Caller<'_>, server: &McpServer, p: &Pending, price: Decimal) -> Vec<Record> {
    let product = format!("mcp:{}/{}", server.id, p.tool);
    let metered = Metered {
        product: product.clone(),
        unit: "calls",
        quantity: Decimal::ONE,
        once_key: None,
        user_id: None,
        route_id: None,
        capability: None,
        key_id: None,
    };
    let charge = Charge {
        price_key: format!("{product}.calls"),
        quantity: Decimal::ONE,
        unit_price: Some(price),
        charged: price,
    };
    money::settle(Bill::Metered {
        metered,
        charge,
        request_id: p.request_id.clone(),
        markup_pct: Decimal::ZERO,
        user_id: c.user_id(),
        route_id: c.route_id,
        capability: c.capability,
        // The budgeted key's spend is its hold's, moved at its release (as
        // a model call's).
        key_id: None,
        api_key_id: c.user.and_then(|u| u.key_id),
    })
}
