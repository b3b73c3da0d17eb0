//! `GET /account/billing_usage`: usage counters per day over a date range.

use std::sync::Arc;

use chrono::NaiveDate;
use serde_json::json;

use super::handler::R;
use crate::request::Req;
use crate::response::{bad_field, ok, Resp};
use crate::shared::Shared;

/// `GET /account/billing_usage?start_date=&end_date=` (both `YYYY-MM-DD`).
pub(super) fn billing_usage(sh: &Arc<Shared>, req: &Req) -> R {
    let date = |key: &str| -> Result<NaiveDate, Resp> {
        let s = req
            .query_param(key)
            .ok_or_else(|| bad_field(key, "is required"))?;
        NaiveDate::parse_from_str(&s, "%Y-%m-%d").map_err(|_| bad_field(key, "must be YYYY-MM-DD"))
    };
    let (start, end) = (date("start_date")?, date("end_date")?);
    if start > end {
        return Err(bad_field("end_date", "must not be before start_date"));
    }
    let items = sh.store.lock().unwrap().billing.range(start, end);
    Ok(ok(
        json!({"success": true, "start_date": start.to_string(), "end_date": end.to_string(), "items": items}),
    ))
}
