//! The payment modes: buying credits through Stripe Checkout (format 1
//! errors). The calls to Stripe are [`gateway_adapters::stripe`]'s; the purchases and
//! the crediting are the store's ([`gateway_store::Store::credit_purchase`]).
//!
//! * `stripe_checkout` — `POST /stripe/checkout` `{"amount_usd": "25.00",
//!   "success_url", "cancel_url"}`: a decimal string with at most 2 places,
//!   at least [`MIN_USD`] (spec §8) and at most [`MAX_USD`] (Stripe's
//!   largest USD amount), else 400 with `details.reason`
//!   (`invalid_amount`, `amount_below_minimum`, `amount_above_maximum`,
//!   `invalid_url`). Creates a Checkout Session (one line item in cents,
//!   the user as `client_reference_id` and in `metadata`; the request id as
//!   `Idempotency-Key`), records the purchase `pending` with the amount
//!   asked, and answers `{checkout_url, session_id, amount_usd,
//!   expires_at}`. Nothing is credited yet. Stripe unreachable or too slow:
//!   503 with `Retry-After: 30`; Stripe refusing: 500 "checkout session
//!   creation failed"; either way nothing is recorded.
//! * `stripe_webhook` — `POST /stripe/webhook` (no gateway credentials):
//!   the `Stripe-Signature` is verified on the raw body before anything is
//!   parsed (400 `invalid_signature`, nothing stored).
//!   `checkout.session.completed` (or `async_payment_succeeded`) with
//!   `payment_status: "paid"` for a pending purchase: the session is read
//!   back from Stripe, and when Stripe too says it is paid for the recorded
//!   amount, the purchase is credited exactly once, by the amount recorded
//!   at checkout. `checkout.session.expired` marks a pending purchase
//!   expired. Every other event, a repeat, or an unknown session: 200, and
//!   nothing more happens. Answer `{"received": true, "outcome": ...}`.
//! * `stripe_purchases` — `GET /stripe/purchases?limit=`: the caller's
//!   purchases, newest first. A pending purchase whose session is past its
//!   `expires_at` is listed `expired` (Stripe can no longer pay it) before
//!   Stripe's `checkout.session.expired` event has arrived.
//!
//! Without `STRIPE_SECRET_KEY` every payment route answers 503 saying so
//! (the webhook also without `STRIPE_WEBHOOK_SECRET`).

use http::StatusCode;
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};

use super::common::{account_of, query_u32, read_body, OrgRight};
use crate::ctx::{Ctx, Outcome};
use gateway_adapters::stripe::{self, CheckoutRequest, Event, StripeError};
use gateway_base::body::{self, Request};
use gateway_base::errors::ApiError;
use gateway_store::{Credited, PurchaseRow, Purchases};

/// The smallest purchase, in USD (spec §8).
pub const MIN_USD: Decimal = Decimal::from_parts(1000, 0, 0, false, 2);
/// The largest purchase, in USD (Stripe's largest amount in USD).
pub const MAX_USD: Decimal = Decimal::from_parts(99_999_999, 0, 0, false, 2);
/// `Retry-After` when Stripe cannot be reached (spec §7: 30 to 60 s): what
/// format 1 gives every 503 without a figure of its own.
pub const RETRY_AFTER_SECS: u64 = gateway_base::errors::FORMAT1_RETRY_AFTER_SECS.0;
/// Largest webhook body read.
pub const MAX_WEBHOOK_BODY: usize = 1 << 20;
/// The line item's name on Stripe's payment page.
const PRODUCT_NAME: &str = "Gateway credit";

fn ok(v: Value) -> Outcome {
    Outcome::new(body::json(StatusCode::OK, &v), None)
}

/// 503 unless `STRIPE_SECRET_KEY` is set.
fn configured(ctx: &Ctx) -> Result<(), ApiError> {
    if ctx.gw.stripe.configured() {
        Ok(())
    } else {
        Err(ApiError::Unavailable(
            "payments are not configured: STRIPE_SECRET_KEY is not set".into(),
        ))
    }
}

/// A failed call to Stripe as the caller sees it: unreachable, 503 (format
/// 1 adds `Retry-After: 30`, [`RETRY_AFTER_SECS`]); refused, a 500 saying
/// `what` (Stripe's answer goes to the log only).
fn stripe_error(e: StripeError, what: &'static str) -> ApiError {
    match e {
        StripeError::Unreachable(_) => ApiError::Unavailable(
            "the payment processor is unreachable; retry after a short delay".into(),
        ),
        refused @ StripeError::Refused { .. } => {
            ApiError::internal("calling Stripe", refused).saying(what)
        }
    }
}

fn reason(reason: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::BadRequestReason {
        reason,
        message: message.into(),
    }
}

/// `amount_usd`: digits with at most 2 decimal places, within the limits.
pub fn parse_amount(v: Option<&Value>) -> Result<Decimal, ApiError> {
    let text = v.and_then(Value::as_str).unwrap_or_default().trim();
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let well_formed = !whole.is_empty()
        && whole.len() <= 9
        && digits(whole)
        && frac.len() <= 2
        && digits(frac)
        && !(text.contains('.') && frac.is_empty());
    let amount = well_formed
        .then(|| text.parse::<Decimal>().ok())
        .flatten()
        .ok_or_else(|| {
            reason(
                "invalid_amount",
                "amount_usd must be a decimal string with at most 2 decimal places, e.g. \"25.00\"",
            )
        })?;
    if amount < MIN_USD {
        return Err(reason(
            "amount_below_minimum",
            format!("amount_usd must be at least {MIN_USD} USD (the minimum credit purchase)"),
        ));
    }
    if amount > MAX_USD {
        return Err(reason(
            "amount_above_maximum",
            format!("amount_usd must be at most {MAX_USD} USD"),
        ));
    }
    Ok(amount.round_dp(2))
}

/// A required absolute http(s) URL of the body.
fn url_field<'a>(obj: &'a Map<String, Value>, name: &str) -> Result<&'a str, ApiError> {
    let text = obj.get(name).and_then(Value::as_str).unwrap_or_default();
    match reqwest::Url::parse(text) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => Ok(text),
        _ => Err(reason(
            "invalid_url",
            format!("{name} must be an absolute http(s) URL"),
        )),
    }
}

fn rfc3339_of_unix(secs: i64) -> Option<String> {
    chrono::DateTime::from_timestamp(secs, 0).map(gateway_store::rfc3339)
}

/// A purchase's status as listed: `pending` past the session's expiry is
/// `expired`, whether or not Stripe's event has arrived.
fn shown_status(p: &gateway_store::PurchaseRow, now: chrono::DateTime<chrono::Utc>) -> &str {
    let lapsed = p
        .expires_at
        .as_deref()
        .and_then(|e| chrono::DateTime::parse_from_rfc3339(e).ok())
        .is_some_and(|e| e <= now);
    if p.status == "pending" && lapsed {
        "expired"
    } else {
        &p.status
    }
}

/// `POST /stripe/checkout`.
pub async fn checkout(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let caller = ctx.require_user("a checkout")?;
    configured(ctx)?;
    let obj = read_body(ctx, req).await?;
    // With `organization_id`, the organization's balance is credited (its
    // owners, admins and billing members buy for it).
    let user_id = match obj.get("organization_id") {
        None | Some(Value::Null) => caller,
        Some(v) => {
            let org = v
                .as_i64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                .ok_or_else(|| {
                    ApiError::BadRequest("organization_id: an organization's id".into())
                })?;
            account_of(ctx, Some(&org.to_string()), OrgRight::Billing)
                .await?
                .id
        }
    };
    let amount = parse_amount(obj.get("amount_usd"))?;
    let amount_usd = format!("{amount:.2}");
    let cents = (amount * Decimal::ONE_HUNDRED)
        .trunc()
        .try_into()
        .map_err(|_| ApiError::bug("an amount in cents beyond i64"))?;
    let ask = CheckoutRequest {
        unit_amount_cents: cents,
        product_name: PRODUCT_NAME,
        success_url: url_field(&obj, "success_url")?,
        cancel_url: url_field(&obj, "cancel_url")?,
        user_id,
        amount_usd: &amount_usd,
    };
    const FAILED: &str = "checkout session creation failed";
    let session = ctx
        .gw
        .stripe
        .create_session(&ask, &ctx.request_id)
        .await
        .map_err(|e| stripe_error(e, FAILED))?;
    let Some(checkout_url) = session.url.clone() else {
        return Err(
            ApiError::bug(format!("Stripe's session {} has no url", session.id)).saying(FAILED),
        );
    };
    let expires_at = session.expires_at.and_then(rfc3339_of_unix);
    let (sid, exp) = (session.id.clone(), expires_at.clone());
    ctx.gw
        .store
        .blocking(move |s| s.insert_purchase(user_id, &sid, amount, exp.as_deref()))
        .await?;
    Ok(ok(json!({
        "checkout_url": checkout_url,
        "session_id": session.id,
        "amount_usd": amount_usd,
        "expires_at": expires_at,
    })))
}

/// `POST /stripe/webhook`.
pub async fn webhook(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    configured(ctx)?;
    let secret = ctx
        .gw
        .stripe
        .config()
        .webhook_secret
        .clone()
        .ok_or_else(|| {
            ApiError::Unavailable(
                "payments are not configured: STRIPE_WEBHOOK_SECRET is not set".into(),
            )
        })?;
    let signature = req
        .headers()
        .get(stripe::SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let raw = crate::shape::read_limited(req.into_body(), MAX_WEBHOOK_BODY).await?;
    let now = chrono::Utc::now().timestamp();
    stripe::verify_signature(&secret, signature.as_deref(), &raw, now)
        .map_err(|m| reason("invalid_signature", m))?;
    // Verified: only now is the body read as an event.
    let event: Event = serde_json::from_slice(&raw)
        .map_err(|_| ApiError::BadRequest("not a Stripe event".into()))?;
    let session_id = event
        .data
        .object
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let outcome = match event.kind.as_str() {
        "checkout.session.completed" | "checkout.session.async_payment_succeeded" => {
            paid(ctx, &event, &session_id).await?
        }
        "checkout.session.expired" => {
            let sid = session_id.clone();
            match ctx
                .gw
                .store
                .blocking(move |s| s.expire_purchase(&sid))
                .await?
            {
                true => "expired",
                false => "ignored",
            }
        }
        _ => "ignored",
    };
    tracing::info!(event = %event.id, kind = %event.kind, session = %session_id, outcome, "Stripe event");
    Ok(ok(json!({ "received": true, "outcome": outcome })))
}

/// A paid session's event: credited once, by the recorded amount, when
/// Stripe confirms the session is paid for it.
async fn paid(ctx: &Ctx, event: &Event, session_id: &str) -> Result<&'static str, ApiError> {
    if event
        .data
        .object
        .get("payment_status")
        .and_then(Value::as_str)
        != Some("paid")
    {
        return Ok("not_paid");
    }
    let sid = session_id.to_owned();
    let purchase: Option<PurchaseRow> = ctx.gw.store.blocking(move |s| s.purchase(&sid)).await?;
    let Some(purchase) = purchase else {
        tracing::warn!(session = %session_id, event = %event.id, "a paid Stripe session no purchase names");
        return Ok("unknown_session");
    };
    if purchase.status != "pending" {
        return Ok("already_credited");
    }
    // Stripe's own word on the session, not the event's alone.
    let session = ctx
        .gw
        .stripe
        .retrieve_session(session_id)
        .await
        .map_err(|e| stripe_error(e, "payment confirmation failed"))?;
    let cents = (purchase.amount_usd * Decimal::ONE_HUNDRED).trunc();
    if session.payment_status.as_deref() != Some("paid") {
        return Ok("not_paid");
    }
    if session.amount_total.map(Decimal::from) != Some(cents) {
        tracing::error!(session = %session_id, recorded = %purchase.amount_usd, stripe_cents = ?session.amount_total,
            "a paid Stripe session's amount is not the amount recorded at checkout; not credited");
        return Ok("amount_mismatch");
    }
    let (sid, eid) = (session_id.to_owned(), event.id.clone());
    let credited = ctx
        .gw
        .store
        .blocking(move |s| s.credit_purchase(&sid, &eid))
        .await?;
    Ok(match credited {
        Credited::Now { .. } => "credited",
        Credited::Already => "already_credited",
        Credited::Unknown => "unknown_session",
    })
}

/// `GET /stripe/purchases`.
pub async fn purchases(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let user_id = ctx.require_user("a purchase list")?;
    configured(ctx)?;
    let limit = query_u32(ctx, "limit", 50).clamp(1, 100);
    let rows = ctx
        .gw
        .store
        .blocking(move |s| s.purchases_of(user_id, limit))
        .await?;
    let now = chrono::Utc::now();
    let data: Vec<Value> = rows
        .iter()
        .map(|p| {
            json!({
                "session_id": p.session_id,
                "amount_usd": format!("{:.2}", p.amount_usd),
                "status": shown_status(p, now),
                "created_at": p.created_at,
                "expires_at": p.expires_at,
                "paid_at": p.paid_at,
            })
        })
        .collect();
    Ok(ok(json!({ "data": data })))
}
