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
//! * **released**: a model call that fails after its hold hands its bill
//!   back ([`Settle::abandon`], the model call's last phase,
//!   [`crate::model_call`]), and any other end (an error answered with
//!   `?`, a cancelled handler) releases it in `Hold`'s `Drop`, the safety
//!   net: a plain delete of the hold row that moves no money. A release
//!   that fails (the database unreachable) is owed to the record writer,
//!   which deletes the hold when the database answers again, as it does
//!   the holds of any batch that failed to commit (`store::writer`); a process that dies leaves the hold to expire by
//!   itself (`balances::HOLD_TTL_HOURS`).

//!
//! # One door
//!
//! What a request owes is a [`Bill`]: a quantity its row's price key
//! prices ([`Bill::Metered`]: the voice API, a job's observation) or what a
//! model call used at its model's prices ([`Bill::Model`]). [`settle`] is
//! the one function that turns a bill into records: the usage record (the
//! record writer debits the balance by its `charged` in the same
//! transaction), a model call's token record, and the end of its hold
//! ([`hold_release`], the one maker of that record). The request pipeline's
//! record phase, a model call, a stream's end ([`crate::relay`]), the job
//! follower and the video observer all settle through it. A hold that
//! nothing settles ends through [`Hold`] alone (released now, or in its
//! `Drop`).
//!
//! * [`bill`] — `Bill`, `Settle` and [`settle`];
//! * [`hold`] — taking a hold ([`reserve`], [`hold_voice`]) and `Hold`;
//! * [`prices`] — what a call may cost and did cost;
//! * [`budgets`] — the 402 that names a key's budget.

pub mod bill;
pub mod budgets;
pub mod hold;
pub mod prices;

pub use bill::{settle, Bill, Served, Settle};
pub use budgets::over_budget;
pub use hold::{hold_release, hold_voice, reserve, Hold};
pub use prices::{
    bound_cost, chars_cost, image_cost, pricing_failed, realtime_bound_cost, seconds_cost,
    token_cost,
};
