//! Budgets per key, the request's side: the 402 that names the key's
//! budget. Every route a budget bounds holds (model calls,
//! [`crate::money::reserve`]; billed voice requests and voice jobs'
//! submits, [`crate::money::hold_voice`], a job's amount from
//! [`crate::job_bound`]) and is checked in the credit hold's own
//! transaction (`store::budgets`).

use rust_decimal::Decimal;

use gateway_base::billing::format_money;
use gateway_base::errors::ApiError;
use gateway_store::Budget;

/// 402: the key's budget cannot cover the request. `used`: what the key
/// spent and holds in the current period (above the budget when a charge
/// went past its hold); `amount`: what the request would hold.
pub fn over_budget(budget: Budget, used: Decimal, amount: Decimal) -> ApiError {
    let per = match budget.period.as_str() {
        "total" => "in total".to_owned(),
        p => format!("per {p}"),
    };
    ApiError::PaymentRequired(format!(
        "This API key's budget is exhausted: its budget is {} USD {per}, {} USD of it is spent or held, and this request may cost up to {}",
        budget.usd,
        format_money(used),
        format_money(amount),
    ))
}
