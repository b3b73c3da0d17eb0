//! The one door of money: what a request owes ([`Bill`]) and the one
//! function that turns it into records ([`settle`]).

use rust_decimal::Decimal;

use super::hold::Hold;
use super::prices::{raw_token_cost, realtime_raw_cost};
use crate::ctx::{Caller, Metered};
use gateway_base::billing::{with_markup, Charge};
use gateway_models::providers::{Model, Provider, Tokens};
use gateway_models::realtime::RealtimeUsage;
use gateway_store::{ModelUsageRecord, Record, UsageRecord};

/// What a request owes.
pub enum Bill {
    /// A quantity its row's price key prices (the voice API's rows, a
    /// job's observation), charged as `charge` says.
    Metered {
        metered: Metered,
        charge: Charge,
        /// What produced the charge (the request, or a job's observation).
        request_id: String,
        markup_pct: Decimal,
        /// Whose credit is charged when the metered quantity names no one.
        user_id: Option<i64>,
        route_id: &'static str,
        capability: &'static str,
        /// The budgeted key whose spend the charge counts in (the caller's
        /// for its own charge, a job's for the job's).
        key_id: Option<i64>,
        /// The API key the request came with, when it is the payer's.
        api_key_id: Option<i64>,
    },
    /// What a model call used, at its model's prices, never beyond its hold.
    Model {
        settle: Settle,
        usage: Usage,
        /// How the answer ended (`complete`, `stopped`, ...).
        ended: String,
    },
}

/// The records that settle `bill`, to be committed together: its usage
/// record (the record writer debits the payer's balance by its `charged`
/// in the same transaction), a model call's token record, and the end of
/// its hold. The one function that writes usage records.
pub fn settle(bill: Bill) -> Vec<Record> {
    match bill {
        Bill::Metered {
            metered,
            charge,
            request_id,
            markup_pct,
            user_id,
            route_id,
            capability,
            key_id,
            api_key_id,
        } => vec![Record::Usage(UsageRecord {
            request_id,
            user_id: metered.user_id.or(user_id),
            route_id: metered.route_id.unwrap_or(route_id).to_owned(),
            capability: metered.capability.unwrap_or(capability).to_owned(),
            product: metered.product,
            unit: metered.unit.to_owned(),
            quantity: metered.quantity,
            unit_price: charge.unit_price,
            markup_pct,
            charged: charge.charged,
            once_key: metered.once_key,
            created_at: gateway_store::now_rfc3339(),
            key_id,
            api_key_id,
            price_version: None,
        })],
        Bill::Model {
            mut settle,
            usage,
            ended,
        } => {
            if let Some(a) = settle.admission.take() {
                a.settle(usage.tokens.prompt() + usage.tokens.output);
            }
            model_records(settle, usage, &ended)
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
    /// A batch line's once-key: its model is at its batch price
    /// ([`Model::at_batch_price`]) and its usage record is written once.
    pub line: Option<String>,
    /// The request as counted against its `rpm`/`tpm` limits: its tokens
    /// corrected to what it used when it settles.
    pub admission: Option<gateway_adapters::ratelimit::Admission>,
    /// The price version of the catalogue the request started with.
    pub price_version: Option<String>,
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
    /// For the request of `c`.
    pub fn new(c: &Caller<'_>, p: &Provider, m: &Model, byok: bool, hold: Option<Hold>) -> Settle {
        Settle {
            request_id: c.request_id.to_owned(),
            user_id: c.user_id(),
            route_id: c.route_id,
            capability: c.capability,
            provider: p.clone(),
            model: at_price(c.line.is_some(), m.clone()),
            byok,
            hold,
            bound: None,
            started: Some(c.started),
            streamed: false,
            api_key_id: c.user.and_then(|u| u.key_id),
            served: Served::default(),
            line: c.line.map(str::to_owned),
            admission: None,
            price_version: c.catalogue.price_version(),
        }
    }

    /// `m` as this request pays for it (a batch line, at its batch price).
    pub fn priced(&self, m: Model) -> Model {
        at_price(self.line.is_some(), m)
    }

    /// A bill that no answer took (the model call failed): its hold, if
    /// any, ends now ([`Hold::release`]); nothing is recorded or charged.
    pub fn abandon(self) {
        if let Some(h) = self.hold {
            h.release();
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
        settle(Bill::Model {
            settle: self,
            usage: tokens,
            ended: ended.to_owned(),
        })
    }

    /// The records of a realtime response's usage `u` (already within its
    /// bound), each kind at its price ([`super::prices`]), ended as `ended`.
    pub fn realtime_records(self, u: &RealtimeUsage, ended: &str) -> Vec<Record> {
        let tokens = u.tokens();
        let usage = Usage {
            unit: "tokens",
            quantity: Decimal::from(tokens.prompt() + tokens.output),
            raw_cost: Some(realtime_raw_cost(&self.model, u)),
            tokens,
            counted: true,
        };
        settle(Bill::Model {
            settle: self,
            usage,
            ended: ended.to_owned(),
        })
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
        settle(Bill::Model {
            settle: self,
            usage,
            ended: "complete".to_owned(),
        })
    }

    /// The records of `seconds` of audio or video at the model's
    /// `per_second` (or `per_minute`) price.
    pub fn seconds_records(self, unit: &'static str, seconds: Decimal) -> Vec<Record> {
        let raw = self.model.seconds_cost(seconds);
        self.quantity_records(unit, seconds, raw)
    }

    /// The records of `chars` characters of speech input at the model's
    /// `per_1k_chars` price (unit `characters`).
    pub fn chars_records(self, chars: u64) -> Vec<Record> {
        let raw = self.model.chars_cost(chars);
        self.quantity_records("characters", Decimal::from(chars), raw)
    }

    /// The records of `quantity` of `unit`, costing `raw` before markup
    /// (`None`: unpriced).
    fn quantity_records(
        self,
        unit: &'static str,
        quantity: Decimal,
        raw: Option<Decimal>,
    ) -> Vec<Record> {
        let usage = Usage {
            unit,
            quantity,
            raw_cost: raw,
            tokens: Tokens::default(),
            counted: false,
        };
        settle(Bill::Model {
            settle: self,
            usage,
            ended: "complete".to_owned(),
        })
    }
}

/// `m`, at its batch price when `line` (a batch's line).
fn at_price(line: bool, m: Model) -> Model {
    match line {
        true => m.at_batch_price(),
        false => m,
    }
}

/// What a request used, before markup.
pub struct Usage {
    unit: &'static str,
    quantity: Decimal,
    /// `None`: the model has no price for it (recorded unpriced, charged 0).
    raw_cost: Option<Decimal>,
    tokens: Tokens,
    counted: bool,
}
/// What `usage` is charged: its cost with the markup, never beyond the
/// hold (logged when it would be), nothing with BYOK.
fn charge(
    usage: &Usage,
    markup: Decimal,
    hold: Option<&Hold>,
    byok: bool,
    request_id: &str,
) -> Decimal {
    let mut charged = usage
        .raw_cost
        .map_or(Decimal::ZERO, |raw| with_markup(raw, markup));
    if let Some(h) = hold {
        if charged > h.amount {
            tracing::warn!(request_id = %request_id, %charged, held = %h.amount, "usage beyond the hold; charging the hold");
            charged = h.amount;
        }
    }
    if byok {
        charged = Decimal::ZERO;
    }
    charged
}

fn model_records(bill: Settle, usage: Usage, ended: &str) -> Vec<Record> {
    let Settle {
        request_id,
        user_id,
        route_id,
        capability,
        provider,
        model,
        byok,
        hold,
        started,
        streamed,
        api_key_id,
        served,
        line,
        price_version,
        ..
    } = bill;
    let charged = charge(
        &usage,
        provider.markup_pct,
        hold.as_ref(),
        byok,
        &request_id,
    );
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
            once_key: line,
            created_at: now.clone(),
            // The key of the hold, if any, at its release.
            key_id: None,
            api_key_id,
            price_version,
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
