//! `--seed-usage-rows N`: before the runs, N billed model requests of the
//! bench user are written into the gateway's database, spread evenly over
//! the last 365 days: for each, its usage record and its token detail
//! (`model_usage`), committed through the runtime's store, which writes
//! them as it writes a request's (the usage row, the ledger line of its
//! charge and the debit of the balance, in one transaction). So that the
//! runs show whether a million rows of history slow the hot path (issue 27:
//! the history reads use indexed ranges, the writes' indexes grow).
//!
//! Going through the store rather than SQL of its own keeps the bench from
//! holding a second copy of the schema's columns that could drift from the
//! store's, and seeds whichever database the gateway will use (its SQLite
//! file, or the PostgreSQL schema of the run).

use std::time::{Duration, Instant};

use runtime::store::{Keys, Location, ModelUsageRecord, Record, Store, UsageRecord};
use rust_decimal::Decimal;

/// What was seeded.
pub struct Seeded {
    pub rows: u64,
    pub took: Duration,
}

/// Requests committed per transaction: each commit is one group of the
/// store's writer, and a bounded one keeps the records of a million
/// requests out of memory at once.
const CHUNK: u64 = 10_000;

/// Seeds `n` requests of `user` (made with its first key) into the
/// database at `at`.
pub async fn seed(at: &Location, user: i64, n: u64) -> Result<Seeded, String> {
    let started = Instant::now();
    let err = |e: runtime::store::StoreError| format!("seeding {at:?}: {e}");
    // No flush per commit: history written before the gateway starts needs
    // to survive the bench, not a power cut.
    let store = Store::open_at_with(at, false).map_err(err)?;
    let key = store.keys_of(user).map_err(err)?.first().map(|k| k.id);
    let now = chrono::Utc::now();
    let span = chrono::Duration::days(365).num_milliseconds();
    for first in (0..n).step_by(CHUNK as usize) {
        let records = (first..n.min(first + CHUNK))
            .flat_map(|i| {
                // Oldest first, so that ids grow with time as the gateway's do.
                let back = span - span * (i as i64) / (n.max(1) as i64);
                let at = runtime::store::rfc3339(now - chrono::Duration::milliseconds(back));
                request(format!("res_seed{i:016x}"), user, key, at)
            })
            .collect();
        store.commit(records).await.map_err(err)?;
    }
    Ok(Seeded {
        rows: n,
        took: started.elapsed(),
    })
}

/// The records of one billed chat request: 100 prompt and 50 completion
/// tokens of `sim/sim-gpt` at 0.000001 a token, answered whole in 12 ms.
fn request(request_id: String, user: i64, key: Option<i64>, at: String) -> [Record; 2] {
    let usage = UsageRecord {
        price_version: None,
        request_id: request_id.clone(),
        user_id: Some(user),
        route_id: "chat".into(),
        capability: "chat".into(),
        product: "sim/sim-gpt".into(),
        unit: "tokens".into(),
        quantity: Decimal::from(150),
        unit_price: Some(Decimal::new(100, 8)),
        markup_pct: Decimal::ZERO,
        charged: Decimal::new(15_000, 8),
        once_key: None,
        created_at: at.clone(),
        // No key budget: the charge comes off the balance only.
        key_id: None,
        api_key_id: key,
    };
    let detail = ModelUsageRecord {
        request_id,
        user_id: Some(user),
        route_id: "chat".into(),
        model: "sim/sim-gpt".into(),
        input_tokens: 100,
        output_tokens: 50,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        counted: false,
        byok: false,
        ended: "complete".into(),
        streamed: false,
        latency_ms: Some(12),
        attempts: 1,
        route: None,
        created_at: at,
    };
    [Record::Usage(usage), Record::ModelUsage(detail)]
}
