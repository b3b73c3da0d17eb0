//! Reads of a user's history for the history routes (`modes::history`):
//! one request's generation, usage totals over a range of days, the
//! ledger newest first by cursor. Each reads an indexed range
//! (`usage_by_request`, `model_usage_by_request`, `usage_by_user`,
//! `ledger_by_user`), never the whole table; money is summed in Rust.

use std::collections::BTreeMap;

use rust_decimal::Decimal;

use super::sql::p;
use super::{Result, Store};

/// One request as `GET /generations/{request_id}` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    pub request_id: String,
    pub route_id: String,
    /// The usage record's product: `provider/model` for a model request.
    pub product: String,
    pub unit: String,
    pub quantity: Decimal,
    /// The sum of the request's usage records' charges.
    pub charged: Decimal,
    pub created_at: String,
    /// The token detail of a model request.
    pub model: Option<ModelDetail>,
}

/// A model request's token detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelDetail {
    pub model: String,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub byok: bool,
    pub ended: String,
    pub streamed: bool,
    pub latency_ms: Option<i64>,
}

/// How usage totals are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    /// The UTC day (`YYYY-MM-DD`).
    Day,
    /// The usage record's product (`provider/model`, or the voice product).
    Model,
    /// The route's id.
    Route,
    /// The API key the request came with (its id; `""` for requests made
    /// with an access token and for charges a job's observer made later).
    Key,
}

/// The totals of one group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageTotals {
    pub requests: u64,
    pub tokens: Decimal,
    pub seconds: Decimal,
    pub images: Decimal,
    pub cost: Decimal,
}

/// A ledger line, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerLine {
    pub id: i64,
    pub amount: Decimal,
    pub balance_after: Decimal,
    pub kind: String,
    pub usage_id: Option<i64>,
    /// The request of a charge (its usage record's), else `None`.
    pub request_id: Option<String>,
    pub note: Option<String>,
    pub created_at: String,
}

impl Store {
    /// `user_id`'s billed request `request_id` (`None`: unknown, another
    /// user's, or a free request's: `usage_by_request` leaves those out).
    pub fn generation(&self, user_id: i64, request_id: &str) -> Result<Option<Generation>> {
        let rows = self.with(|db| {
            db.rows(
                "SELECT route_id, product, unit, quantity, charged, created_at FROM usage
                 WHERE request_id = ?1 AND user_id = ?2 AND unit != 'free' ORDER BY id",
                p![request_id, user_id],
                |r| {
                    Ok((
                        r.get::<String>(0)?,
                        r.get::<String>(1)?,
                        r.get::<String>(2)?,
                        r.dec(3)?,
                        r.dec(4)?,
                        r.get::<String>(5)?,
                    ))
                },
            )
        })?;
        let Some((route_id, product, unit, quantity, _, created_at)) = rows.first().cloned() else {
            return Ok(None);
        };
        let charged = rows.iter().map(|r| r.4).sum();
        let model = self.with(|db| {
            db.row(
                "SELECT model, input_tokens, output_tokens, byok, ended, streamed, latency_ms
                 FROM model_usage WHERE request_id = ?1 AND user_id = ?2 ORDER BY id LIMIT 1",
                p![request_id, user_id],
                |r| {
                    Ok(ModelDetail {
                        model: r.get(0)?,
                        input_tokens: r.get(1)?,
                        output_tokens: r.get(2)?,
                        byok: r.get(3)?,
                        ended: r.get(4)?,
                        streamed: r.get(5)?,
                        latency_ms: r.get(6)?,
                    })
                },
            )
        })?;
        Ok(Some(Generation {
            request_id: request_id.to_owned(),
            route_id,
            product,
            unit,
            quantity,
            charged,
            created_at,
            model,
        }))
    }

    /// `user_id`'s billed usage (every unit but `free`) recorded in
    /// `[from, to)` (stored timestamps), totalled per group.
    pub fn usage_totals_of(
        &self,
        user_id: i64,
        from: &str,
        to: &str,
        by: GroupBy,
    ) -> Result<BTreeMap<String, UsageTotals>> {
        let rows = self.with(|db| {
            db.rows(
                "SELECT created_at, product, route_id, unit, quantity, charged, api_key_id FROM usage
                 WHERE user_id = ?1 AND created_at >= ?2 AND created_at < ?3 AND unit != 'free'",
                p![user_id, from, to],
                |r| {
                    Ok((
                        r.get::<String>(0)?,
                        r.get::<String>(1)?,
                        r.get::<String>(2)?,
                        r.get::<String>(3)?,
                        r.dec(4)?,
                        r.dec(5)?,
                        r.get::<Option<i64>>(6)?,
                    ))
                },
            )
        })?;
        let mut groups: BTreeMap<String, UsageTotals> = BTreeMap::new();
        for (at, product, route, unit, quantity, charged, key) in rows {
            let key = match by {
                GroupBy::Day => at.get(..10).unwrap_or(&at).to_owned(),
                GroupBy::Model => product,
                GroupBy::Route => route,
                GroupBy::Key => key.map(|k| k.to_string()).unwrap_or_default(),
            };
            let t = groups.entry(key).or_default();
            t.requests += 1;
            t.cost += charged;
            match unit.as_str() {
                "tokens" => t.tokens += quantity,
                "images" => t.images += quantity,
                u if u.ends_with("seconds") => t.seconds += quantity,
                _ => {}
            }
        }
        Ok(groups)
    }

    /// Up to `limit` of `user_id`'s ledger lines older than the line
    /// `before` (every line when `None`), newest first.
    pub fn ledger_page(
        &self,
        user_id: i64,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<LedgerLine>> {
        self.with(|db| {
            db.rows(
                "SELECT l.id, l.amount, l.balance_after, l.kind, l.usage_id, l.note, l.created_at,
                        u.request_id
                 FROM credit_ledger l LEFT JOIN usage u ON u.id = l.usage_id
                 WHERE l.user_id = ?1 AND l.id < ?2 ORDER BY l.id DESC LIMIT ?3",
                p![user_id, before.unwrap_or(i64::MAX), limit],
                |r| {
                    Ok(LedgerLine {
                        id: r.get(0)?,
                        amount: r.dec(1)?,
                        balance_after: r.dec(2)?,
                        kind: r.get(3)?,
                        usage_id: r.get(4)?,
                        note: r.get(5)?,
                        created_at: r.get(6)?,
                        request_id: r.get(7)?,
                    })
                },
            )
        })
    }
}
