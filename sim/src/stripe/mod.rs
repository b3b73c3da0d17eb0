//! Stripe's side of buying credits: Checkout Sessions in Stripe's real
//! paths and shapes, and the signed webhook a payment sends.
//!
//! | Method | Path | What |
//! |---|---|---|
//! | POST | `/v1/checkout/sessions` | form-encoded (bracket keys: `line_items[0][price_data][unit_amount]`, `metadata[user_id]`, ...), `Authorization: Bearer <secret key>`; `Idempotency-Key` replays the first answer → the session object |
//! | GET | `/v1/checkout/sessions/{id}` | the session object; unknown: 404 `resource_missing` |
//! | GET | `/c/pay/{id}` | a stand-in for Stripe's payment page (text saying how to pay) |
//! | GET / POST | `/__sim/stripe/config` | `{"secret_key"?, "webhook_url"?, "webhook_secret"?}` (null clears) → the config, secrets as `<set>` |
//! | GET | `/__sim/stripe/sessions` | `{"sessions": [...]}` |
//! | POST | `/__sim/stripe/sessions/{id}/pay` (`latest`: the newest session) | the session becomes `complete` / `paid`; a `checkout.session.completed` event is signed and POSTed to `webhook_url` (awaited) → `{"event", "signature", "status"}` |
//! | POST | `/__sim/stripe/sessions/{id}/expire` | the session becomes `expired`; `checkout.session.expired` sent the same way |
//!
//! Errors are Stripe's shape: `{"error": {"type", "message", "code"?, "param"?}}`
//! (401 `invalid_request_error` for a missing or wrong key: with no
//! `secret_key` configured any `sk_...` key is accepted). To make Stripe
//! refuse or stall, add a fault (`POST /__sim/faults`) on
//! `/v1/checkout/sessions` (a `status` with a body in this shape, or
//! `"timeout"` / `delay_ms`). Events are signed as Stripe signs them:
//! `Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "{t}.{body}">`.

pub mod state;

use std::collections::HashMap;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use http::header::AUTHORIZATION;
use http::StatusCode;
use serde_json::{json, Map, Value};
use sha2::Sha256;

use crate::request::Req;
use crate::response::{full, json_response, ok, Resp};
use crate::shared::Shared;

pub use state::StripeSim;

fn stripe_error(status: StatusCode, kind: &str, message: &str, param: Option<&str>) -> Resp {
    let mut e = json!({"type": kind, "message": message});
    if let Some(p) = param {
        e["param"] = json!(p);
    }
    if status == StatusCode::NOT_FOUND {
        e["code"] = json!("resource_missing");
    }
    json_response(status, &json!({ "error": e }))
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// `t=<t>,v1=<hex>` of `body`.
pub fn sign(secret: &str, body: &[u8], t: i64) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// Stripe's API paths; `None` for any other path.
pub fn route(sh: &Arc<Shared>, req: &Req) -> Option<Resp> {
    let path = req.path.trim_end_matches('/');
    if let Some(id) = path.strip_prefix("/c/pay/") {
        return Some(full(format!(
            "Simulated Stripe Checkout for {id}: POST /__sim/stripe/sessions/{id}/pay to pay it.\n"
        )));
    }
    let rest = path.strip_prefix("/v1/checkout/sessions")?;
    if let Err(r) = sh.stripe.authorize(req) {
        return Some(r);
    }
    Some(match (req.method.as_str(), rest) {
        ("POST", "") => sh.stripe.create(sh, req),
        ("GET", id) if id.len() > 1 => {
            let id = &id[1..];
            match sh.stripe.state.lock().unwrap().sessions.get(id) {
                Some(s) => ok(s.clone()),
                None => stripe_error(
                    StatusCode::NOT_FOUND,
                    "invalid_request_error",
                    &format!("No such checkout.session: '{id}'"),
                    Some("id"),
                ),
            }
        }
        _ => stripe_error(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "Unrecognized request URL",
            None,
        ),
    })
}

impl StripeSim {
    fn authorize(&self, req: &Req) -> Result<(), Resp> {
        let given = req
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        let st = self.state.lock().unwrap();
        let good = match &st.secret_key {
            Some(k) => given == k,
            None => given.starts_with("sk_"),
        };
        if good {
            Ok(())
        } else {
            Err(stripe_error(
                StatusCode::UNAUTHORIZED,
                "invalid_request_error",
                "Invalid API Key provided",
                None,
            ))
        }
    }

    /// `POST /v1/checkout/sessions`.
    fn create(&self, sh: &Shared, req: &Req) -> Resp {
        let form: HashMap<String, String> = form_pairs(&req.body);
        let need = |k: &str| form.get(k).filter(|v| !v.is_empty());
        for k in [
            "mode",
            "success_url",
            "cancel_url",
            "line_items[0][price_data][currency]",
            "line_items[0][price_data][unit_amount]",
            "line_items[0][price_data][product_data][name]",
            "line_items[0][quantity]",
        ] {
            if need(k).is_none() {
                return stripe_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    &format!("Missing required param: {k}."),
                    Some(k),
                );
            }
        }
        let amount: i64 = match form["line_items[0][price_data][unit_amount]"].parse() {
            Ok(n) if n >= 50 => n,
            _ => {
                return stripe_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "Invalid integer: unit_amount must be at least 50 cents",
                    Some("line_items[0][price_data][unit_amount]"),
                )
            }
        };
        let quantity: i64 = form["line_items[0][quantity]"].parse().unwrap_or(0);
        let key = req
            .headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut st = self.state.lock().unwrap();
        if let Some(id) = key.as_ref().and_then(|k| st.idempotent.get(k)) {
            return ok(st.sessions[id].clone());
        }
        st.seq += 1;
        let id = format!(
            "cs_test_{:08}{}",
            st.seq,
            &uuid::Uuid::new_v4().simple().to_string()[..16]
        );
        let metadata: Map<String, Value> = form
            .iter()
            .filter_map(|(k, v)| {
                let name = k.strip_prefix("metadata[")?.strip_suffix(']')?;
                Some((name.to_owned(), json!(v)))
            })
            .collect();
        let created = now();
        let session = json!({
            "id": id,
            "object": "checkout.session",
            "mode": form["mode"],
            "status": "open",
            "payment_status": "unpaid",
            "amount_subtotal": amount * quantity,
            "amount_total": amount * quantity,
            "currency": form["line_items[0][price_data][currency]"],
            "client_reference_id": form.get("client_reference_id"),
            "metadata": metadata,
            "success_url": form["success_url"],
            "cancel_url": form["cancel_url"],
            "url": format!("{}/c/pay/{id}", sh.root),
            "created": created,
            "expires_at": created + 24 * 3600,
            "livemode": false,
        });
        st.sessions.insert(id.clone(), session.clone());
        st.order.push(id.clone());
        if let Some(k) = key {
            st.idempotent.insert(k, id);
        }
        ok(session)
    }
}

/// Form fields, percent-decoded (bracket keys kept as they are).
fn form_pairs(body: &[u8]) -> HashMap<String, String> {
    serde_urlencoded::from_bytes::<Vec<(String, String)>>(body)
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// `/__sim/stripe/...` (async: paying sends the webhook and waits for its answer).
pub async fn control(sh: &Arc<Shared>, req: &Req) -> Resp {
    let path = req.path.trim_end_matches('/');
    let segs: Vec<&str> = path
        .trim_start_matches("/__sim/stripe")
        .trim_start_matches('/')
        .split('/')
        .collect();
    match (req.method.as_str(), segs.as_slice()) {
        ("GET", ["config"]) => ok(sh.stripe.config_json()),
        ("POST", ["config"]) => {
            let v: Value = serde_json::from_slice(&req.body).unwrap_or(json!({}));
            {
                let mut guard = sh.stripe.state.lock().unwrap();
                let st = &mut *guard;
                let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
                for (k, slot) in [
                    ("secret_key", &mut st.secret_key),
                    ("webhook_url", &mut st.webhook_url),
                    ("webhook_secret", &mut st.webhook_secret),
                ] {
                    if v.get(k).is_some() {
                        *slot = text(k);
                    }
                }
            }
            ok(sh.stripe.config_json())
        }
        ("GET", ["sessions"]) => {
            let st = sh.stripe.state.lock().unwrap();
            let list: Vec<Value> = st.order.iter().map(|id| st.sessions[id].clone()).collect();
            ok(json!({ "sessions": list }))
        }
        ("POST", ["sessions", id, action @ ("pay" | "expire")]) => {
            let (kind, status, payment) = if *action == "pay" {
                ("checkout.session.completed", "complete", "paid")
            } else {
                ("checkout.session.expired", "expired", "unpaid")
            };
            let session = {
                let mut guard = sh.stripe.state.lock().unwrap();
                let st = &mut *guard;
                // `latest`: the newest session (the demo's one-line pay).
                let id = match *id {
                    "latest" => st.order.last().map(String::as_str).unwrap_or_default(),
                    id => id,
                };
                let Some(s) = st.sessions.get_mut(id) else {
                    return stripe_error(
                        StatusCode::NOT_FOUND,
                        "invalid_request_error",
                        &format!("No such checkout.session: '{id}'"),
                        Some("id"),
                    );
                };
                s["status"] = json!(status);
                s["payment_status"] = json!(payment);
                if status != "open" {
                    s["url"] = Value::Null;
                }
                s.clone()
            };
            sh.stripe.send_event(sh, kind, session).await
        }
        _ => stripe_error(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "unknown control route",
            None,
        ),
    }
}

impl StripeSim {
    /// Builds, signs and POSTs an event to the configured URL; answers what happened.
    async fn send_event(&self, sh: &Shared, kind: &str, object: Value) -> Resp {
        let (url, secret) = {
            let st = self.state.lock().unwrap();
            (st.webhook_url.clone(), st.webhook_secret.clone())
        };
        let event = json!({
            "id": format!("evt_{}", uuid::Uuid::new_v4().simple()),
            "object": "event",
            "api_version": "2024-06-20",
            "created": now(),
            "type": kind,
            "livemode": false,
            "data": { "object": object },
        });
        let body = serde_json::to_vec(&event).expect("serializable");
        let signature = secret.as_deref().map(|s| sign(s, &body, now()));
        let mut answer = json!({ "event": event, "signature": signature, "status": null });
        let Some(url) = url else {
            answer["error"] = json!("no webhook_url configured");
            return ok(answer);
        };
        let mut post = sh
            .client
            .post(&url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(sig) = &signature {
            post = post.header("Stripe-Signature", sig);
        }
        match post.send().await {
            Ok(r) => answer["status"] = json!(r.status().as_u16()),
            Err(e) => answer["error"] = json!(e.to_string()),
        }
        ok(answer)
    }
}
