//! Budgets per key, the request's side: the 402 that names the key's
//! budget, and the check of the routes that meter after the call (the voice
//! API). Held routes check in the credit hold's own transaction
//! ([`crate::credits::reserve`], `store::budgets`).

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

/// A billed voice row's request, made with a key that has a budget, is
/// refused (402) once the key's spend and holds reached the budget. Its
/// cost is known only after the call, so the check is on what is left
/// (above 0), before the upstream call; its charge then counts.
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
