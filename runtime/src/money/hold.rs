//! Holds: a request's most it can cost, taken from the caller's credit (or
//! its key's budget) before the upstream call, in one transaction of the
//! record writer; and how a hold ends when nothing settles it.

use rust_decimal::Decimal;

use crate::ctx::Caller;
use crate::services::Gateway;
use gateway_base::errors::ApiError;
use gateway_store::{Ledger, OutsideRecordPhase, Record, Reserved};

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
        hold_release(self.request_id.clone())
    }
}

impl Hold {
    /// Ends the hold now, moving no money: the request it bounded settled
    /// nothing (it failed). The same record as a settlement's end of a
    /// hold ([`hold_release`]), committed on its own in the next group
    /// commit without the request waiting for it; outside the async
    /// runtime (a hold dropped at shut-down), or when that commit fails,
    /// the release is owed to the record writer, which ends it as soon as
    /// the database answers.
    pub fn release(mut self) {
        self.release_now();
    }

    fn release_now(&mut self) {
        self.armed = false;
        let store = self.gw.store.clone();
        let id = std::mem::take(&mut self.request_id);
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            store.owe_release(id);
            return;
        };
        rt.spawn(async move {
            let end = vec![hold_release(id)];
            if let Err(e) = store
                .commit_outside_record_phase(OutsideRecordPhase::HoldEnd, end)
                .await
            {
                // The writer owes the release of a batch it could not commit.
                tracing::warn!(error = %e, "ending a credit hold failed; owed to the record writer");
            }
        });
    }
}

impl Drop for Hold {
    /// The safety net: a hold neither settled, kept nor released (a
    /// cancelled request) is released as it goes.
    fn drop(&mut self) {
        if self.armed {
            self.release_now();
        }
    }
}

/// Holds `amount` of the caller's credit for this request (nothing when
/// `byok`). Insufficient → 402 "Insufficient credits for this request",
/// with the balance and the required amount in the answer's headers.
pub async fn reserve(
    c: &Caller<'_>,
    amount: Decimal,
    byok: bool,
) -> Result<Option<Hold>, ApiError> {
    if byok {
        return Ok(None);
    }
    take(c, amount, true).await.map(Some)
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
    c: &Caller<'_>,
    amount: impl std::future::Future<Output = Result<Decimal, ApiError>>,
) -> Result<Option<Hold>, ApiError> {
    if c.budget_key().is_none() {
        return Ok(None);
    }
    take(c, amount.await?, false).await.map(Some)
}

/// Takes the hold (`check_balance`: see [`Record::Hold`]).
async fn take(c: &Caller<'_>, amount: Decimal, check_balance: bool) -> Result<Hold, ApiError> {
    let user = c.require_user("a credit hold")?;
    let committed =
        c.gw.store
            .commit_outside_record_phase(
                OutsideRecordPhase::Hold,
                vec![Record::Hold {
                    request_id: c.request_id.to_owned(),
                    user_id: user,
                    amount,
                    key_id: c.budget_key(),
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
            gw: c.gw.clone(),
            request_id: c.request_id.to_owned(),
            amount,
            armed: true,
        }),
        Reserved::Insufficient { available, .. } => Err(ApiError::InsufficientCredits {
            available,
            required: amount,
        }),
        Reserved::OverBudget { budget, used } => {
            Err(super::budgets::over_budget(budget, used, amount))
        }
    }
}

/// The record that ends the hold of `request_id` with the transaction
/// that commits it (a settlement, a job's end): the one maker of it.
pub fn hold_release(request_id: String) -> Record {
    Record::HoldRelease { request_id }
}
