//! Budgets per key, the request's side: the 402 that names the key's
//! budget, and the check of the voice jobs' submits, whose charge has no
//! bound before the job completes. Held routes (model calls, and the voice
//! rows whose charge has a bound: `credits::hold_voice`) check in the
//! credit hold's own transaction ([`crate::credits::reserve`],
//! `store::budgets`).

use rust_decimal::Decimal;

use crate::billing::format_money;
use crate::ctx::Ctx;
use crate::errors::ApiError;
use crate::spec::{Area, Billing};
use crate::store::Budget;

/// 402: the key's budget cannot cover the request. `used`: what the key
/// spent and holds in the current period; `amount`: what the request
/// would hold (`None`: a metered request, whose cost is known after).
pub fn over_budget(budget: Budget, used: Decimal, amount: Option<Decimal>) -> ApiError {
    let per = match budget.period.as_str() {
        "total" => "in total".to_owned(),
        p => format!("per {p}"),
    };
    let wants = amount.map_or(String::new(), |a| {
        format!(", and this request may cost up to {}", format_money(a))
    });
    ApiError::PaymentRequired(format!(
        "This API key's budget is exhausted: its budget is {} USD {per}, {} USD of it is spent or held{wants}",
        budget.usd,
        format_money(used),
    ))
}

/// A voice job's submit, made with a key that has a budget, is refused
/// (402) once the key's spend and holds reached the budget. Its cost is
/// known only when the job completes, so the check is on what is left
/// (above 0), before the upstream call, and nothing is held; the job keeps
/// the key and its charge then counts. (Voice rows whose charge has a bound
/// hold it: `credits::hold_voice`.)
pub async fn check_metered(ctx: &Ctx) -> Result<(), ApiError> {
    let billed = ctx.spec.area == Area::Voice && ctx.spec.billing != Billing::Free;
    let Some(key_id) = ctx
        .user
        .as_ref()
        .and_then(|u| u.budget_key)
        .filter(|_| billed)
    else {
        return Ok(());
    };
    let Some(b) = ctx.gw.store.blocking(move |s| s.key_budget(key_id)).await? else {
        return Ok(());
    };
    let used = b.spent + b.held;
    if used >= b.budget.usd {
        return Err(over_budget(b.budget, used, None));
    }
    Ok(())
}
