//! `--seed-usage-rows N`: before the runs, N billed model requests of the
//! bench user are written straight into the gateway's SQLite file, spread
//! evenly over the last 365 days: for each, its usage row, its token detail
//! (`model_usage`) and its ledger line (a charge), as the gateway writes
//! them. One transaction, prepared statements. So that the runs show
//! whether a million rows of history slow the hot path (issue 27: the
//! history reads use indexed ranges, the writes' indexes grow).
//!
//! The SQL names only columns every schema since the history routes has;
//! the balance is left as granted.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{params, Connection};

/// What was seeded.
pub struct Seeded {
    pub rows: u64,
    pub took: Duration,
}

/// Seeds `n` requests of `user` (made with its first key) into `db`.
pub fn seed(db: &Path, user: i64, n: u64) -> Result<Seeded, String> {
    let started = Instant::now();
    let err = |e: rusqlite::Error| format!("seeding {}: {e}", db.display());
    let mut conn = Connection::open(db).map_err(err)?;
    conn.busy_timeout(Duration::from_secs(30)).map_err(err)?;
    let key: Option<i64> = conn
        .query_row(
            "SELECT MIN(id) FROM api_keys WHERE user_id = ?1",
            [user],
            |r| r.get(0),
        )
        .map_err(err)?;
    let now = chrono::Utc::now();
    let span = chrono::Duration::days(365).num_milliseconds();
    let tx = conn.transaction().map_err(err)?;
    {
        let mut usage = tx
            .prepare(
                "INSERT INTO usage (request_id, user_id, route_id, capability, product, unit, quantity,
                                    unit_price, markup_pct, charged, unpriced, once_key, created_at, api_key_id)
                 VALUES (?1, ?2, 'chat', 'chat', 'sim/sim-gpt', 'tokens', '150', '0.00000100', '0',
                         '0.00015000', 0, NULL, ?3, ?4)",
            )
            .map_err(err)?;
        let mut detail = tx
            .prepare(
                "INSERT INTO model_usage (request_id, user_id, route_id, model, input_tokens, output_tokens,
                                          counted, byok, ended, created_at, streamed, latency_ms)
                 VALUES (?1, ?2, 'chat', 'sim/sim-gpt', 100, 50, 0, 0, 'complete', ?3, 0, 12)",
            )
            .map_err(err)?;
        let mut ledger = tx
            .prepare(
                "INSERT INTO credit_ledger (user_id, amount, balance_after, kind, usage_id, note, created_at)
                 VALUES (?1, '-0.00015000', '1000000.00000000', 'charge', ?2, NULL, ?3)",
            )
            .map_err(err)?;
        for i in 0..n {
            // Oldest first, so that ids grow with time as the gateway's do.
            let back = span - span * (i as i64) / (n.max(1) as i64);
            let at = (now - chrono::Duration::milliseconds(back))
                .format("%Y-%m-%dT%H:%M:%S%.3fZ")
                .to_string();
            let request_id = format!("res_seed{i:016x}");
            usage
                .execute(params![request_id, user, at, key])
                .map_err(err)?;
            let usage_id = tx.last_insert_rowid();
            detail.execute(params![request_id, user, at]).map_err(err)?;
            ledger.execute(params![user, usage_id, at]).map_err(err)?;
        }
    }
    tx.commit().map_err(err)?;
    Ok(Seeded {
        rows: n,
        took: started.elapsed(),
    })
}
