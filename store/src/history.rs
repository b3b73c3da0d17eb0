//! Reads of a user's history for the history routes (`modes::history`):
//! one request's generation, usage totals over a range of days, the
//! ledger newest first by cursor. Each reads an indexed range
//! (`usage_by_request`, `model_usage_by_request`, `usage_by_user`,
//! `ledger_by_user`), never the whole table; money is summed in Rust.

use std::collections::BTreeMap;

use rust_decimal::Decimal;

use super::sql::{p, Row};
use super::{AuditRecord, Result, Store};

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
    /// The price version that priced it (a model request's).
    pub price_version: Option<String>,
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
    /// The batch a request was a line of (its id; `""` for requests that
    /// were not): read from the usage record's once-key, `batch_…#n`.
    Batch,
    /// An MCP tool (`server/tool`): every call sent, from the calls'
    /// records (free ones too), with what each was charged.
    Tool,
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

/// A usage row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRow {
    pub id: i64,
    pub request_id: String,
    pub user_id: Option<i64>,
    pub route_id: String,
    pub product: String,
    pub unit: String,
    pub quantity: Decimal,
    pub unit_price: Option<Decimal>,
    pub charged: Decimal,
    pub unpriced: bool,
    pub once_key: Option<String>,
    pub created_at: String,
    pub price_version: Option<String>,
}

/// A model request's token detail as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelUsageRow {
    pub request_id: String,
    pub user_id: Option<i64>,
    pub route_id: String,
    pub model: String,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub counted: bool,
    pub byok: bool,
    pub ended: String,
    /// Upstream attempts.
    pub attempts: i64,
    /// The route the caller named.
    pub route: Option<String>,
}

/// What happened, read back: usage and token records, their totals,
/// a generation's detail, pages of the credit ledger, trending models,
/// and the audit trail.
pub trait History {
    /// Every usage row, oldest first.
    fn usage_rows(&self) -> Result<Vec<UsageRow>>;

    /// One user's usage rows, oldest first.
    fn usage_rows_of(&self, user_id: i64) -> Result<Vec<UsageRow>>;

    /// Every model-usage row, oldest first.
    fn model_usage_rows(&self) -> Result<Vec<ModelUsageRow>>;

    /// Models ranked by requests since `since` (RFC 3339), most first.
    fn trending_models(&self, since: &str, limit: usize) -> Result<Vec<(String, i64)>>;

    /// `user_id`'s billed request `request_id` (`None`: unknown, another
    /// user's, or a free request's: `usage_by_request` leaves those out).
    fn generation(&self, user_id: i64, request_id: &str) -> Result<Option<Generation>>;

    /// `user_id`'s billed usage (every unit but `free`) recorded in
    /// `[from, to)` (stored timestamps), totalled per group.
    fn usage_totals_of(
        &self,
        user_id: i64,
        from: &str,
        to: &str,
        by: GroupBy,
    ) -> Result<BTreeMap<String, UsageTotals>>;

    /// Up to `limit` of `user_id`'s ledger lines older than the line
    /// `before` (every line when `None`), newest first.
    fn ledger_page(&self, user_id: i64, before: Option<i64>, limit: u32)
        -> Result<Vec<LedgerLine>>;

    /// Audit rows, oldest first (for tests and operators).
    fn audit_rows(&self) -> Result<Vec<AuditRecord>>;
}

impl History for Store {
    fn usage_rows(&self) -> Result<Vec<UsageRow>> {
        usage_rows_where(self, None)
    }

    fn usage_rows_of(&self, user_id: i64) -> Result<Vec<UsageRow>> {
        usage_rows_where(self, Some(user_id))
    }

    fn model_usage_rows(&self) -> Result<Vec<ModelUsageRow>> {
        self.with(|db| {
            db.rows(
                "SELECT request_id, user_id, route_id, model, input_tokens, output_tokens, counted, byok, ended,
                        cache_read_tokens, cache_write_tokens, attempts, route
                 FROM model_usage ORDER BY id",
                &[],
                |r| {
                    Ok(ModelUsageRow {
                        request_id: r.get(0)?,
                        user_id: r.get(1)?,
                        route_id: r.get(2)?,
                        model: r.get(3)?,
                        input_tokens: r.get(4)?,
                        output_tokens: r.get(5)?,
                        counted: r.get(6)?,
                        byok: r.get(7)?,
                        ended: r.get(8)?,
                        cache_read_tokens: r.get(9)?,
                        cache_write_tokens: r.get(10)?,
                        attempts: r.get(11)?,
                        route: r.get(12)?,
                    })
                },
            )
        })
    }

    fn trending_models(&self, since: &str, limit: usize) -> Result<Vec<(String, i64)>> {
        self.with(|db| {
            db.rows(
                "SELECT model, COUNT(*) AS n FROM model_usage WHERE created_at >= ?1
                 GROUP BY model ORDER BY n DESC, model LIMIT ?2",
                p![since, limit],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
    }

    fn generation(&self, user_id: i64, request_id: &str) -> Result<Option<Generation>> {
        let rows = self.with(|db| {
            db.rows(
                "SELECT route_id, product, unit, quantity, charged, created_at, price_version FROM usage_records
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
                        r.get::<Option<String>>(6)?,
                    ))
                },
            )
        })?;
        let Some((route_id, product, unit, quantity, _, created_at, price_version)) =
            rows.first().cloned()
        else {
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
            price_version,
        }))
    }

    fn usage_totals_of(
        &self,
        user_id: i64,
        from: &str,
        to: &str,
        by: GroupBy,
    ) -> Result<BTreeMap<String, UsageTotals>> {
        if by == GroupBy::Tool {
            return super::mcp::call_totals(self, user_id, from, to);
        }
        let rows = self.with(|db| {
            db.rows(
                "SELECT created_at, product, route_id, unit, quantity, charged, api_key_id, once_key FROM usage_records
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
                        r.get::<Option<String>>(7)?,
                    ))
                },
            )
        })?;
        let mut groups: BTreeMap<String, UsageTotals> = BTreeMap::new();
        for (at, product, route, unit, quantity, charged, key, once) in rows {
            let key = match by {
                GroupBy::Day => at.get(..10).unwrap_or(&at).to_owned(),
                GroupBy::Model => product,
                GroupBy::Route => route,
                GroupBy::Key => key.map(|k| k.to_string()).unwrap_or_default(),
                GroupBy::Batch => once
                    .as_deref()
                    .filter(|k| k.starts_with("batch_"))
                    .and_then(|k| k.split_once('#'))
                    .map(|(batch, _)| batch.to_owned())
                    .unwrap_or_default(),
                GroupBy::Tool => product,
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

    fn ledger_page(
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

    fn audit_rows(&self) -> Result<Vec<AuditRecord>> {
        self.with(|db| {
            db.rows(
                "SELECT request_id, user_id, route_id, method, path, status, upstream_status, latency_ms, created_at
                 FROM audit ORDER BY id",
                &[],
                |r| {
                    Ok(AuditRecord {
                        request_id: r.get(0)?,
                        user_id: r.get(1)?,
                        route_id: r.get(2)?,
                        method: r.get(3)?,
                        path: r.get(4)?,
                        status: r.get(5)?,
                        upstream_status: r.get(6)?,
                        latency_ms: r.get::<i64>(7)? as u64,
                        created_at: r.get(8)?,
                    })
                },
            )
        })
    }
}

/// Every usage row, or one user's, oldest first.
fn usage_rows_where(store: &Store, user_id: Option<i64>) -> Result<Vec<UsageRow>> {
    let row = |r: &Row<'_>| {
        Ok(UsageRow {
            id: r.get(0)?,
            request_id: r.get(1)?,
            user_id: r.get(2)?,
            route_id: r.get(3)?,
            product: r.get(4)?,
            unit: r.get(5)?,
            quantity: r.dec(6)?,
            unit_price: r.opt_dec(7)?,
            charged: r.dec(8)?,
            unpriced: r.get(9)?,
            once_key: r.get(10)?,
            created_at: r.get(11)?,
            price_version: r.get(12)?,
        })
    };
    const COLS: &str = "SELECT id, request_id, user_id, route_id, product, unit, quantity, unit_price, charged, unpriced, once_key, created_at, price_version FROM usage_records";
    store.with(|db| match user_id {
        None => db.rows(&format!("{COLS} ORDER BY created_at, id"), &[], row),
        Some(u) => db.rows(
            &format!("{COLS} WHERE user_id = ?1 ORDER BY created_at, id"),
            p![u],
            row,
        ),
    })
}
