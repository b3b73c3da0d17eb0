//! Credits of the general gateway: a request's maximum cost is held
//! against the caller's balance before the upstream call
//! ([`reserve`]: one atomic step in the store's group-commit writer, 402
//! when it does not fit),
//! and settled to its actual usage after the answer ([`Settle::records`]:
//! the usage record, its debit and the end of the hold, one transaction).
//! BYOK requests hold nothing and are charged nothing, but their usage is
//! recorded. Every charge is [`gateway_base::billing::with_markup`] of its cost.
//!
//! # The settlement contract
//!
//! A model request says how it settles in its outcome
//! ([`crate::ctx::Settlement`]), and its [`Hold`] ends in exactly one of
//! three ways:
//!
//! * **settled**: [`Settle`] turns the hold into the records that end it
//!   ([`Hold::into_release`], with the usage record and its debit, never
//!   more than was held). They are committed by the pipeline's record phase
//!   with the answer (`Settlement::ByModeRecords`), or, for a stream
//!   (`Settlement::Later(Later::Stream)`), by [`crate::relay`] when the
//!   stream ends, before its last event leaves: `Relay::finish` on a
//!   normal end, stop or time-out (retried while the database is
//!   unreachable; the last event waits for it, see `relay`), and
//!   `Relay`'s `Drop` when the caller hangs up (the body is dropped), both
//!   through the one door for such commits
//!   ([`gateway_store::Store::commit_outside_record_phase`]);
//! * **kept**: [`Hold::keep`] hands it to a job: a video's
//!   (`Settlement::Later(Later::Job)`), which settles or releases it under
//!   the submit's request id when it ends ([`crate::videos`]), or a voice
//!   job's, written with the job's record and released when the job ends
//!   ([`crate::progress`]);
//! * **dropped**: any other end (an error answered with `?`, an upstream
//!   failure, a cancelled handler) releases it in `Hold`'s `Drop`, a plain
//!   delete of the hold row that moves no money. This is the safety net of
//!   every error path; a release that fails (the database unreachable) is
//!   owed to the record writer, which deletes the hold when the database
//!   answers again, as it does the holds of any batch that failed to commit
//!   (`store::writer`); a process that dies leaves the hold to expire by
//!   itself (`balances::HOLD_TTL_HOURS`).

use rust_decimal::Decimal;

use crate::ctx::Ctx;
use crate::services::Gateway;
use gateway_base::billing::with_markup;
use gateway_base::errors::ApiError;
use gateway_models::providers::{Model, Provider, Tokens};
use gateway_store::{Ledger, ModelUsageRecord, OutsideRecordPhase, Record, Reserved, UsageRecord};

const MTOK: Decimal = Decimal::from_parts(1_000_000, 0, 0, false, 0);

/// The charge of `input` + `output` tokens of `m`, markup included, 8 places.
pub fn token_cost(p: &Provider, m: &Model, input: u64, output: u64) -> Decimal {
    with_markup(raw_token_cost(m, Tokens::new(input, output)), p.markup_pct)
}

/// The most a request's [`gateway_models::bounds::Bound`] can cost on `m` of `p`
/// (its tokens and its images), markup included: what is held. Its input
/// is priced at the highest of the input and cache prices, so that the hold
/// stays an upper bound however the provider splits the prompt between
/// input, cache reads and cache writes.
/// `Err`: 500 "pricing calculation failed" (spec §7), when a price is so
/// large that the cost overflows a decimal; nothing is held or sent then.
pub fn bound_cost(
    p: &Provider,
    m: &Model,
    b: &gateway_models::bounds::Bound,
) -> Result<Decimal, ApiError> {
    let per =
        |price: Option<Decimal>, n: u64| price.unwrap_or_default().checked_mul(Decimal::from(n));
    let input_price = [
        m.input_per_mtok,
        m.cache_read_per_mtok,
        m.cache_write_per_mtok,
    ]
    .into_iter()
    .flatten()
    .max();
    let tokens = per(input_price, b.input)
        .zip(per(m.output_per_mtok, b.output))
        .and_then(|(i, o)| (i / MTOK).checked_add(o / MTOK))
        .and_then(|raw| checked_markup(raw, p.markup_pct));
    let images = per(m.per_image, b.images).and_then(|raw| checked_markup(raw, p.markup_pct));
    tokens
        .zip(images)
        .and_then(|(t, i)| t.checked_add(i))
        .ok_or_else(|| pricing_failed(p, m))
}

/// `raw` with `markup_pct` added and rounded as [`with_markup`] does;
/// `None` when it overflows.
fn checked_markup(raw: Decimal, markup_pct: Decimal) -> Option<Decimal> {
    let factor = Decimal::ONE.checked_add(markup_pct.checked_div(Decimal::ONE_HUNDRED)?)?;
    raw.checked_mul(factor)
        .map(gateway_base::billing::round_charge)
}

/// 500 "pricing calculation failed": the cost of a request on `m` of `p`
/// cannot be computed (what overflowed is logged).
pub fn pricing_failed(p: &Provider, m: &Model) -> ApiError {
    ApiError::bug(format!(
        "the cost of a request on {}/{} overflows a decimal",
        p.id, m.id
    ))
    .saying("pricing calculation failed")
}

/// The cost of `t` on `m` before markup: each of the four counts at its
/// own price (cache prices default to the input price), so a cached or
/// written prompt token is never billed again as input.
fn raw_token_cost(m: &Model, t: Tokens) -> Decimal {
    let at = |price: Option<Decimal>, n: u64| price.unwrap_or_default() * Decimal::from(n) / MTOK;
    at(m.input_per_mtok, t.input)
        + at(m.output_per_mtok, t.output)
        + at(m.cache_read_price(), t.cache_read)
        + at(m.cache_write_price(), t.cache_write)
}

/// A live credit hold: settled ([`Hold::into_release`]), kept by a job
/// ([`Hold::keep`]), or released when dropped (see the module's contract).
pub struct Hold {
    gw: Gateway,
    request_id: String,
    pub amount: Decimal,
    armed: bool,
}

impl Hold {
    /// Keeps the hold past this request (a job's, settled or released when
    /// the job finishes), returning its request id: a video job's hold goes
    /// on by that id; a voice job's is renamed when the job is recorded
    /// (`store::JobRecord::hold`).
    pub fn keep(mut self) -> String {
        self.armed = false;
        std::mem::take(&mut self.request_id)
    }

    /// The record that ends the hold with the settling transaction.
    pub fn into_release(mut self) -> Record {
        self.armed = false;
        Record::HoldRelease {
            request_id: self.request_id.clone(),
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let store = self.gw.store.clone();
        let id = std::mem::take(&mut self.request_id);
        let release = move || {
            if let Err(e) = store.release_hold(&id) {
                tracing::warn!(error = %e, "releasing a credit hold failed; owed to the record writer");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn_blocking(release);
            }
            Err(_) => release(),
        }
    }
}

/// Holds `amount` of the caller's credit for this request (nothing when
/// `byok`). Insufficient → 402 "Insufficient credits for this request",
/// with the balance and the required amount in the answer's headers.
pub async fn reserve(ctx: &Ctx, amount: Decimal, byok: bool) -> Result<Option<Hold>, ApiError> {
    if byok {
        return Ok(None);
    }
    take(ctx, amount, true).await.map(Some)
}

/// A billed voice request made with a key that has a budget holds
/// `amount`, what it is expected to be charged at most, against the key's
/// budget only (the voice API never refuses for the balance): over budget
/// → 402 naming it. `None`: the caller's key has no budget, nothing is held
/// and `amount` is never run (a future does nothing until awaited: no unit
/// is priced, no input measured). The charge is what is measured, even
/// beyond the hold: a hold that proves too small lets the key's spend go
/// past its budget by that one request, and the next is refused. The hold
/// ends as a model call's does (see the module's contract): released with
/// the request's usage record ([`Hold::into_release`]), kept by a job
/// ([`Hold::keep`]), or released when dropped.
pub async fn hold_voice(
    ctx: &Ctx,
    amount: impl std::future::Future<Output = Result<Decimal, ApiError>>,
) -> Result<Option<Hold>, ApiError> {
    if ctx.user.as_ref().and_then(|u| u.budget_key).is_none() {
        return Ok(None);
    }
    take(ctx, amount.await?, false).await.map(Some)
}

/// Takes the hold (`check_balance`: see [`Record::Hold`]).
async fn take(ctx: &Ctx, amount: Decimal, check_balance: bool) -> Result<Hold, ApiError> {
    let user = ctx.require_user("a credit hold")?;
    let committed = ctx
        .gw
        .store
        .commit_outside_record_phase(
            OutsideRecordPhase::Hold,
            vec![Record::Hold {
                request_id: ctx.request_id.clone(),
                user_id: user,
                amount,
                key_id: ctx.user.as_ref().and_then(|u| u.budget_key),
                check_balance,
            }],
        )
        .await?;
    let r = committed
        .holds
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::bug("a hold without its outcome"))?;
    match r {
        Reserved::Held => Ok(Hold {
            gw: ctx.gw.clone(),
            request_id: ctx.request_id.clone(),
            amount,
            armed: true,
        }),
        Reserved::Insufficient { available, .. } => Err(ApiError::InsufficientCredits {
            available,
            required: amount,
        }),
        Reserved::OverBudget { budget, used } => {
            Err(crate::budgets::over_budget(budget, used, amount))
        }
    }
}

/// What a finished model request settles.
pub struct Settle {
    pub request_id: String,
    pub user_id: Option<i64>,
    pub route_id: &'static str,
    pub capability: &'static str,
    pub provider: Provider,
    pub model: Model,
    pub byok: bool,
    pub hold: Option<Hold>,
    /// What the request could make the provider do: reported tokens and
    /// images are billed at most at it ([`gateway_models::bounds::Bound`]).
    pub bound: Option<gateway_models::bounds::Bound>,
    /// When the request arrived (its generation's latency runs to the
    /// settlement); `None` for a job's, settled by an observer.
    pub started: Option<std::time::Instant>,
    /// Answered as a stream (set by the streaming mode).
    pub streamed: bool,
    /// The API key the request came with ([`UsageRecord::api_key_id`]).
    pub api_key_id: Option<i64>,
    /// What served it, after how many attempts ([`gateway_models::routing`]).
    pub served: Served,
}

/// What served a model request.
#[derive(Debug, Clone)]
pub struct Served {
    /// Upstream attempts made, the answered one included.
    pub attempts: u32,
    /// The route the caller named, if any.
    pub route: Option<String>,
}

impl Default for Served {
    fn default() -> Served {
        Served {
            attempts: 1,
            route: None,
        }
    }
}

impl Settle {
    /// From a request's context.
    pub fn new(ctx: &Ctx, p: &Provider, m: &Model, byok: bool, hold: Option<Hold>) -> Settle {
        Settle {
            request_id: ctx.request_id.clone(),
            user_id: ctx.user_id(),
            route_id: ctx.spec.id,
            capability: ctx.spec.capability,
            provider: p.clone(),
            model: m.clone(),
            byok,
            hold,
            bound: None,
            started: Some(ctx.started),
            streamed: false,
            api_key_id: ctx.user.as_ref().and_then(|u| u.key_id),
            served: Served::default(),
        }
    }

    /// The usage record (with its debit), the token detail and the end of
    /// the hold, to be committed together. The charge never exceeds the
    /// hold, so concurrent requests cannot overdraw a balance.
    pub fn records(self, input: u64, output: u64, counted: bool, ended: &str) -> Vec<Record> {
        self.token_records(Tokens::new(input, output), counted, ended)
    }

    /// [`Settle::records`] of the four counts: each billed at its price.
    /// The prompt (input and cache tokens together) is bounded by the
    /// bound's input: beyond it, the bound is billed as input.
    pub fn token_records(self, t: Tokens, counted: bool, ended: &str) -> Vec<Record> {
        let t = match &self.bound {
            Some(b) => {
                let (prompt, output) = b.tokens(t.prompt(), t.output);
                if prompt < t.prompt() {
                    Tokens::new(prompt, output)
                } else {
                    Tokens { output, ..t }
                }
            }
            None => t,
        };
        let raw = raw_token_cost(&self.model, t);
        let priced = self.model.input_per_mtok.is_some() || self.model.output_per_mtok.is_some();
        let tokens = Usage {
            unit: "tokens",
            quantity: Decimal::from(t.prompt() + t.output),
            raw_cost: priced.then_some(raw),
            tokens: t,
            counted,
        };
        self.settle(tokens, ended)
    }

    /// The records of `n` images at the model's `per_image` price.
    pub fn image_records(self, n: u64) -> Vec<Record> {
        let n = self.bound.map_or(n, |b| b.images(n));
        let raw = self.model.per_image.map(|p| p * Decimal::from(n));
        let usage = Usage {
            unit: "images",
            quantity: Decimal::from(n),
            raw_cost: raw,
            tokens: Tokens::default(),
            counted: false,
        };
        self.settle(usage, "complete")
    }

    /// The records of `seconds` of audio or video at the model's
    /// `per_second` price.
    pub fn seconds_records(self, unit: &'static str, seconds: Decimal) -> Vec<Record> {
        let raw = self.model.per_second.map(|p| p * seconds);
        let usage = Usage {
            unit,
            quantity: seconds,
            raw_cost: raw,
            tokens: Tokens::default(),
            counted: false,
        };
        self.settle(usage, "complete")
    }

    fn settle(self, usage: Usage, ended: &str) -> Vec<Record> {
        let Settle {
            request_id,
            user_id,
            route_id,
            capability,
            provider,
            model,
            byok,
            hold,
            bound: _,
            started,
            streamed,
            api_key_id,
            served,
        } = self;
        let mut charged = usage
            .raw_cost
            .map_or(Decimal::ZERO, |raw| with_markup(raw, provider.markup_pct));
        if let Some(h) = &hold {
            if charged > h.amount {
                tracing::warn!(request_id = %request_id, %charged, held = %h.amount, "usage beyond the hold; charging the hold");
                charged = h.amount;
            }
        }
        if byok {
            charged = Decimal::ZERO;
        }
        let unit_price = usage.raw_cost.map(|raw| {
            if usage.quantity.is_zero() {
                Decimal::ZERO
            } else {
                (raw / usage.quantity).round_dp(12)
            }
        });
        let now = gateway_store::now_rfc3339();
        let name = format!("{}/{}", provider.id, model.id);
        let mut out = vec![
            Record::Usage(UsageRecord {
                request_id: request_id.clone(),
                user_id,
                route_id: route_id.to_owned(),
                capability: capability.to_owned(),
                product: name.clone(),
                unit: usage.unit.to_owned(),
                quantity: usage.quantity,
                unit_price,
                markup_pct: provider.markup_pct,
                charged,
                once_key: None,
                created_at: now.clone(),
                // The key of the hold, if any, at its release.
                key_id: None,
                api_key_id,
            }),
            Record::ModelUsage(ModelUsageRecord {
                request_id,
                user_id,
                route_id: route_id.to_owned(),
                model: name,
                input_tokens: usage.tokens.input,
                output_tokens: usage.tokens.output,
                cache_read_tokens: usage.tokens.cache_read,
                cache_write_tokens: usage.tokens.cache_write,
                counted: usage.counted,
                byok,
                ended: ended.to_owned(),
                streamed,
                latency_ms: started.map(|s| s.elapsed().as_millis() as u64),
                attempts: served.attempts,
                route: served.route,
                created_at: now,
            }),
        ];
        if let Some(h) = hold {
            out.push(h.into_release());
        }
        out
    }
}

/// What a request used, before markup.
struct Usage {
    unit: &'static str,
    quantity: Decimal,
    /// `None`: the model has no price for it (recorded unpriced, charged 0).
    raw_cost: Option<Decimal>,
    tokens: Tokens,
    counted: bool,
}

/// The charge of `n` images of `m`, markup included, 8 places.
pub fn image_cost(p: &Provider, m: &Model, n: u64) -> Decimal {
    with_markup(
        m.per_image.unwrap_or_default() * Decimal::from(n),
        p.markup_pct,
    )
}

/// The charge of `seconds` of `m`, markup included, 8 places; `Err`: 500
/// "pricing calculation failed" when it overflows ([`pricing_failed`]).
pub fn seconds_cost(p: &Provider, m: &Model, seconds: Decimal) -> Result<Decimal, ApiError> {
    m.per_second
        .unwrap_or_default()
        .checked_mul(seconds)
        .and_then(|raw| checked_markup(raw, p.markup_pct))
        .ok_or_else(|| pricing_failed(p, m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gateway_models::bounds::Bound;
    use gateway_models::providers::ModelType;
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn the_hold_bounds_every_split_of_the_prompt_between_input_and_cache() {
        let m = Model {
            id: "claude-sim".into(),
            kind: ModelType::Chat,
            context_window: None,
            aliases: vec![],
            input_per_mtok: Some(d("3.00")),
            output_per_mtok: Some(d("15.00")),
            cache_read_per_mtok: Some(d("0.30")),
            cache_write_per_mtok: Some(d("3.75")),
            per_image: None,
            per_second: None,
            max_output_tokens: None,
            cache_ttl_secs: None,
            cache_hit_price_pct: Default::default(),
        };
        let p = Provider {
            id: "claude".into(),
            kind: "anthropic".into(),
            base_url: "http://127.0.0.1:1".into(),
            key: None,
            api_key_env: "UNSET".into(),
            markup_pct: d("10"),
            models: vec![],
            adapter: std::sync::Arc::new(gateway_models::providers::anthropic::Anthropic),
        };
        let b = Bound {
            input: 1000,
            output: 100,
            images: 0,
        };
        let hold = bound_cost(&p, &m, &b).unwrap();
        let charge = |t: Tokens| with_markup(raw_token_cost(&m, t), p.markup_pct);
        for (input, read, write) in [(1000, 0, 0), (0, 1000, 0), (0, 0, 1000), (200, 500, 300)] {
            let t = Tokens {
                input,
                output: 100,
                cache_read: read,
                cache_write: write,
            };
            assert!(charge(t) <= hold, "{t:?}: {} > {hold}", charge(t));
        }
        // The dearest split (all written to the cache) is exactly the hold.
        let all_written = Tokens {
            input: 0,
            output: 100,
            cache_read: 0,
            cache_write: 1000,
        };
        assert_eq!(charge(all_written), hold);
        // Each count at its own price: 200 × 3 + 100 × 15 + 500 × 0.3 + 300 × 3.75 per million.
        let mixed = Tokens {
            input: 200,
            output: 100,
            cache_read: 500,
            cache_write: 300,
        };
        assert_eq!(raw_token_cost(&m, mixed), d("0.003375"));
    }
}
