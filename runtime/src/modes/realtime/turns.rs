//! A realtime session's money: each response held before its
//! `response.create` goes upstream, and settled when its `response.done`
//! comes back, before that event is passed on.
//!
//! A response is a request of its own: its own request id (the session's
//! and its number, `res_….3`), its hold (the bound of
//! [`gateway_models::realtime::Conversation::response`] at the model's
//! prices), and when it is done one usage record, its debit, the end of
//! its hold and an audit record, committed together
//! ([`crate::sessions::commit_turn`]). A hold that does not fit refuses
//! that response with an `error` event (`insufficient_credits`) and nothing
//! goes upstream; the session goes on. A response the provider refused
//! (an `error` naming the `response.create`) releases its hold; so does
//! the session's end for a response never done (a crash leaves it to the
//! instance lease, as every hold).

use std::collections::VecDeque;
use std::time::Instant;

use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::modes::common::LivePayer;
use crate::money::{self, Settle};
use gateway_base::errors::ApiError;
use gateway_models::cost::Cost;
use gateway_models::realtime::{Conversation, RealtimeUsage, ResponseBound};
use gateway_store::Record;

/// A response held and sent, not yet done.
struct Turn {
    request_id: String,
    /// The `event_id` of its `response.create` (the gateway's when the
    /// caller gave none), which a refusal names.
    event_id: String,
    /// The provider's `resp_…`, once `response.created` said it.
    response_id: Option<String>,
    bound: ResponseBound,
    settle: Settle,
    started: Instant,
    /// Its span, a child of the session's.
    span: gateway_base::traces::Attempt,
}

/// The session's responses and what they cost.
pub(super) struct Turns {
    pub payer: LivePayer,
    pub conversation: Conversation,
    pending: VecDeque<Turn>,
    made: u64,
    /// Responses settled, and their charges.
    pub settled: u64,
    pub cost: Decimal,
}

impl Turns {
    pub fn new(payer: LivePayer) -> Turns {
        Turns {
            payer,
            conversation: Conversation::default(),
            pending: VecDeque::new(),
            made: 0,
            settled: 0,
            cost: Decimal::ZERO,
        }
    }

    /// Responses in flight.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// A `response.create`: held, its cap written into it, and handed back
    /// to go upstream; or the `error` event that refuses it.
    pub async fn create(&mut self, mut event: Value) -> Result<Value, Value> {
        self.made += 1;
        let request_id = self.payer.turn_id(self.made);
        let event_id = match event.get("event_id").and_then(Value::as_str) {
            Some(id) => id.to_owned(),
            None => {
                let id = format!("event_gw_{}", self.made);
                event["event_id"] = Value::String(id.clone());
                id
            }
        };
        let bound = self.conversation.response(&mut event);
        let p = &self.payer;
        let held = match money::realtime_bound_cost(&p.provider, &p.model, &bound) {
            Ok(amount) => p.hold(&request_id, amount).await,
            Err(e) => Err(e),
        };
        let settle = held.map_err(|e| refusal(&event_id, &e))?;
        let span = p.trace.turn(format!("response {}", self.made));
        self.pending.push_back(Turn {
            request_id,
            event_id,
            response_id: None,
            bound,
            settle,
            started: Instant::now(),
            span,
        });
        Ok(event)
    }

    /// A server event on its way to the caller: the conversation follows
    /// it, a `response.created` names its turn, a refusal of a
    /// `response.create` releases its hold, and a `response.done` is
    /// settled (committed) and carries its `cost` when it goes on.
    pub async fn server(&mut self, kind: &str, event: &mut Value) -> Result<(), ApiError> {
        self.conversation.server_event(kind, event);
        match kind {
            "response.created" => {
                let id = event.pointer("/response/id").and_then(Value::as_str);
                if let Some(t) = self.pending.iter_mut().find(|t| t.response_id.is_none()) {
                    t.response_id = id.map(str::to_owned);
                }
            }
            "error" => {
                let refused = event.pointer("/error/event_id").and_then(Value::as_str);
                if let Some(i) = self
                    .pending
                    .iter()
                    .position(|t| t.response_id.is_none() && refused == Some(t.event_id.as_str()))
                {
                    if let Some(t) = self.pending.remove(i) {
                        self.payer.trace.turn_end(t.span, "refused", None);
                        t.settle.abandon();
                    }
                }
            }
            "response.done" => self.done(event).await?,
            _ => {}
        }
        Ok(())
    }

    async fn done(&mut self, event: &mut Value) -> Result<(), ApiError> {
        let id = event.pointer("/response/id").and_then(Value::as_str);
        let at = self
            .pending
            .iter()
            .position(|t| t.response_id.is_some() && t.response_id.as_deref() == id)
            .or_else(|| self.pending.iter().position(|t| t.response_id.is_none()));
        let Some(turn) = at.and_then(|i| self.pending.remove(i)) else {
            tracing::warn!(response = ?id, "a realtime response.done with no response held; passed on unbilled");
            return Ok(());
        };
        let reported = event
            .pointer("/response/usage")
            .and_then(RealtimeUsage::of)
            .unwrap_or_default();
        let (used, beyond) = reported.at_most(&turn.bound);
        if beyond {
            tracing::error!(request_id = %turn.request_id, ?reported, bound = ?turn.bound, "a realtime response reported more than its bound; billed at the bound");
        }
        let status = event
            .pointer("/response/status")
            .and_then(Value::as_str)
            .unwrap_or("completed");
        let ended = match status {
            "completed" => "complete",
            "cancelled" => "stopped",
            other => other,
        };
        let audit = self.payer.audit(turn.request_id.clone(), turn.started);
        let tokens = used.tokens();
        let mut records = turn.settle.realtime_records(&used, ended);
        records.push(Record::Audit(audit));
        let cost = Cost::of(&records);
        crate::sessions::commit_turn(&self.payer.gw.store, records).await?;
        let charged = cost.as_ref().map_or_else(String::new, Cost::text);
        let counts = (tokens.prompt(), tokens.output, charged);
        self.payer.trace.turn_end(turn.span, ended, Some(counts));
        self.conversation.answered(&used);
        self.settled += 1;
        if let (Some(c), Some(r)) = (cost, event.get_mut("response")) {
            self.cost += c.charged;
            c.annotate(r);
        }
        Ok(())
    }

    /// The session ended: responses never done release their holds.
    pub fn end(&mut self) {
        for t in self.pending.drain(..) {
            self.payer.trace.turn_end(t.span, "unfinished", None);
            t.settle.abandon();
        }
    }
}

/// The `error` event refusing the `response.create` `event_id`: its code
/// `insufficient_credits` when the balance or the key's budget cannot
/// hold the response.
fn refusal(event_id: &str, e: &ApiError) -> Value {
    let (kind, code) = match e {
        ApiError::InsufficientCredits { .. } | ApiError::PaymentRequired(_) => {
            ("invalid_request_error", "insufficient_credits")
        }
        _ => ("server_error", "gateway_error"),
    };
    json!({
        "type": "error",
        "event_id": format!("event_gw_refusal_{event_id}"),
        "error": {
            "type": kind,
            "code": code,
            "message": e.to_string(),
            "param": null,
            "event_id": event_id,
        }
    })
}
