//! How each record is written inside the record writer's transaction
//! ([`super::writer`]): one statement, or a few, per kind of [`Record`],
//! with the money rules applied where a charge is written.

use rust_decimal::Decimal;

use super::balances::Balances;
use super::records::*;
use super::sql::{p, Db};
use super::{Result, StoreError};

/// Writes a group of batches inside one transaction, noting what each
/// batch's caller learns of it. One [`Balances`] serves the whole group:
/// each user's balance is read (and locked) once and written once.
pub(super) fn write_in(
    tx: &mut Db<'_>,
    instance: Option<&str>,
    group: &[&[Record]],
) -> Result<Vec<Committed>> {
    let mut balances = Balances::of_instance(instance);
    balances.lock_in_order(tx, group.iter().flat_map(|b| b.iter()))?;
    let mut results = Vec::with_capacity(group.len());
    for records in group {
        let mut committed = Committed::default();
        write_batch(tx, &mut balances, records, &mut committed)?;
        results.push(committed);
    }
    balances.flush(tx)?;
    Ok(results)
}

/// Writes a batch (one request's records, or one commit's), noting in
/// `committed` what the caller learns of it. A usage record that charges
/// nothing is folded into its request's audit row ([`folded_usage`]): one
/// row, read as an audit record and, through the `usage_records` view, as
/// a usage record.
fn write_batch(
    tx: &mut Db<'_>,
    balances: &mut Balances,
    records: &[Record],
    committed: &mut Committed,
) -> Result<()> {
    let folded = folded_usage(records);
    for (i, record) in records.iter().enumerate() {
        match (record, folded) {
            (Record::Audit(a), Some((audit, usage))) if i == audit => {
                let Record::Usage(u) = &records[usage] else {
                    unreachable!("folded_usage names a usage record")
                };
                insert_audit(tx, a, Some(u))?;
            }
            (Record::Usage(_), Some((_, usage))) if i == usage => {
                committed.usage_written.push(true)
            }
            _ => write_record(tx, balances, record, committed)?,
        }
    }
    Ok(())
}

/// The audit record and the usage record of `records` written as one row
/// (their indexes): the first usage record of the audit's request, route
/// and user that charges nothing and has no once-key (a once-keyed record
/// must meet its unique index; a charge is referenced by its ledger line).
/// The row's time is the audit record's (both are taken as the request
/// ends).
fn folded_usage(records: &[Record]) -> Option<(usize, usize)> {
    let (audit, a) = records.iter().enumerate().find_map(|(i, r)| match r {
        Record::Audit(a) => Some((i, a)),
        _ => None,
    })?;
    let usage = records.iter().position(|r| {
        matches!(r, Record::Usage(u) if u.charged.is_zero()
            && u.once_key.is_none()
            && u.request_id == a.request_id
            && u.user_id == a.user_id
            && u.route_id == a.route_id)
    })?;
    Some((audit, usage))
}

/// Writes one record of a batch, noting in `committed` what the caller
/// learns of it (asset ids, whether a usage record was written).
fn write_record(
    tx: &mut Db<'_>,
    balances: &mut Balances,
    record: &Record,
    committed: &mut Committed,
) -> Result<()> {
    match record {
        Record::Audit(a) => insert_audit(tx, a, None)?,
        Record::Usage(u) => committed.usage_written.push(insert_usage(tx, balances, u)?),
        Record::Asset(a) => committed.asset_ids.push(insert_asset(tx, a)?),
        Record::JobCreate(j) => insert_job(tx, j)?,
        Record::JobUpdate(j) => update_job(tx, j)?,
        Record::OwnerAdd {
            kind,
            upstream_id,
            owner_id,
            parent,
            at,
        } => {
            tx.defer(
                "INSERT INTO resources (kind, upstream_id, owner_id, parent, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)
                 ON CONFLICT (kind, upstream_id) DO NOTHING",
                p![kind, upstream_id, owner_id, parent, at],
            )?;
        }
        Record::OwnerRemove { kind, upstream_id } => {
            tx.defer(
                "DELETE FROM resources WHERE kind = ?1 AND upstream_id = ?2",
                p![kind, upstream_id],
            )?;
        }
        Record::OwnerStatus {
            kind,
            upstream_id,
            status,
            at,
        } => {
            tx.defer(
                "UPDATE resources SET status = ?3, updated_at = ?4 WHERE kind = ?1 AND upstream_id = ?2",
                p![kind, upstream_id, status, at],
            )?;
        }
        Record::ModelUsage(m) => {
            tx.defer(
                "INSERT INTO model_usage (request_id, user_id, route_id, model, input_tokens, output_tokens, counted, byok, ended, created_at, streamed, latency_ms, cache_read_tokens, cache_write_tokens, attempts, route)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
                p![m.request_id, m.user_id, m.route_id, m.model, m.input_tokens, m.output_tokens, m.counted, m.byok, m.ended, m.created_at, m.streamed, m.latency_ms, m.cache_read_tokens, m.cache_write_tokens, m.attempts, m.route],
            )?;
        }
        Record::Hold {
            request_id,
            user_id,
            amount,
            key_id,
            check_balance,
        } => committed.holds.push(balances.hold(
            tx,
            *user_id,
            request_id,
            *amount,
            *key_id,
            *check_balance,
        )?),
        Record::HoldRelease { request_id } => balances.release(tx, request_id)?,
        Record::SyncFile(_) => {}
        Record::BatchCreate(b) => super::batches::insert_batch(tx, b)?,
        Record::BatchLine(l) => super::batches::end_line(tx, l)?,
        Record::McpCall(c) => super::mcp::insert_call(tx, c)?,
        Record::ResponseSave(r) => save_response(tx, r, balances.instance())?,
        Record::WebhookEvent(e) => {
            tx.defer(
                "INSERT INTO webhook_events (body_sha256, body, event, kind, upstream_id, signed, outcome, received_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (body_sha256) DO NOTHING",
                p![e.body_sha256, e.body, e.event, e.kind, e.upstream_id, e.signed, e.outcome, e.received_at],
            )?;
        }
    }
    Ok(())
}

fn insert_audit(tx: &mut Db<'_>, a: &AuditRecord, u: Option<&UsageRecord>) -> Result<()> {
    tx.defer(
        "INSERT INTO audit (request_id, user_id, route_id, method, path, status, upstream_status, latency_ms, created_at,
                            capability, product, unit, quantity, unit_price, markup_pct, unpriced, api_key_id, price_version)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
        p![
            a.request_id,
            a.user_id,
            a.route_id,
            a.method,
            a.path,
            a.status,
            a.upstream_status,
            a.latency_ms,
            a.created_at,
            u.map(|u| &u.capability),
            u.map(|u| &u.product),
            u.map(|u| &u.unit),
            u.map(|u| u.quantity.to_string()),
            u.and_then(|u| u.unit_price).map(|p| p.to_string()),
            u.map(|u| u.markup_pct.to_string()),
            u.map(|u| u.unit_price.is_none()),
            u.and_then(|u| u.api_key_id),
            u.and_then(|u| u.price_version.as_ref())
        ],
    )?;
    Ok(())
}

/// Inserts a usage record and debits its charge; `false` when its once-key was taken.
fn insert_usage(tx: &mut Db<'_>, balances: &mut Balances, u: &UsageRecord) -> Result<bool> {
    let usage_id: Option<i64> = tx.row(
        "INSERT INTO usage (request_id, user_id, route_id, capability, product, unit, quantity, unit_price,
                            markup_pct, charged, unpriced, once_key, created_at, api_key_id, price_version)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
         ON CONFLICT (once_key) DO NOTHING RETURNING id",
        p![
            u.request_id,
            u.user_id,
            u.route_id,
            u.capability,
            u.product,
            u.unit,
            u.quantity.to_string(),
            u.unit_price.map(|p| p.to_string()),
            u.markup_pct.to_string(),
            gateway_base::billing::format_money(u.charged),
            u.unit_price.is_none(),
            u.once_key,
            u.created_at,
            u.api_key_id,
            u.price_version
        ],
        |r| r.get(0),
    )?;
    let Some(usage_id) = usage_id else {
        // Already charged under this key: the request still gets its usage
        // record, with nothing to bill.
        let zero = UsageRecord {
            quantity: Decimal::ZERO,
            charged: Decimal::ZERO,
            once_key: None,
            ..u.clone()
        };
        insert_usage(tx, balances, &zero)?;
        return Ok(false);
    };
    if let (Some(user), false) = (u.user_id, u.charged.is_zero()) {
        balances.apply(
            tx,
            user,
            -u.charged,
            "charge",
            Some(usage_id),
            None,
            &u.created_at,
        )?;
        balances
            .keys
            .charge(tx, u.key_id, &u.request_id, u.charged)?;
    }
    Ok(true)
}

fn insert_asset(tx: &mut Db<'_>, a: &AssetRecord) -> Result<i64> {
    tx.row(
        "INSERT INTO assets (owner_id, object_key, class, purpose, size_bytes, content_type, file_name, source, created_at, expires_at, pack, pack_offset)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) RETURNING id",
        p![
            a.owner_id,
            a.object_key,
            a.class,
            a.purpose,
            a.size_bytes,
            a.content_type,
            a.file_name,
            a.source,
            a.created_at,
            a.expires_at,
            a.pack,
            a.pack_offset
        ],
        |r| r.get(0),
    )?
    .ok_or_else(|| StoreError::msg("asset insert returned no id"))
}

fn insert_job(tx: &mut Db<'_>, j: &JobRecord) -> Result<()> {
    if let Some(submit) = &j.hold {
        tx.defer(
            "UPDATE credit_holds SET request_id = ?1, instance = NULL WHERE request_id = ?2",
            p![job_hold_id(&j.kind, &j.job_id), submit],
        )?;
    }
    tx.defer(
        "INSERT INTO jobs (job_id, kind, upstream_id, user_id, submit_route, status, media_type, callback_uri, created_at, updated_at, follow_next_at, key_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10, ?11)",
        p![j.job_id, j.kind, j.upstream_id, j.user_id, j.submit_route, j.status, j.media_type, j.callback_uri, j.created_at, j.follow_at, j.key_id],
    )?;
    Ok(())
}

fn update_job(tx: &mut Db<'_>, j: &JobUpdate) -> Result<()> {
    tx.defer(
        "UPDATE jobs SET status = ?3, media_type = COALESCE(?4, media_type), result = COALESCE(?5, result),
                billed = CASE WHEN ?6 > billed THEN ?6 ELSE billed END, updated_at = ?7,
                follow_next_at = CASE WHEN ?3 IN ('completed', 'failed') THEN NULL ELSE follow_next_at END
         WHERE kind = ?1 AND job_id = ?2",
        p![j.kind, j.job_id, j.status, j.media_type, j.result, j.billed, j.updated_at],
    )?;
    Ok(())
}

/// A stored response made, or brought up to date (its status, answer and
/// serving deployment; what it was asked is written once). A background
/// one names the instance running it (`instance`, this writer's); a
/// cancelled or failed run keeps that status whatever its end writes.
fn save_response(tx: &mut Db<'_>, r: &super::ResponseRow, instance: Option<&str>) -> Result<()> {
    let instance = instance.filter(|_| r.background);
    tx.defer(
        "INSERT INTO responses (id, user_id, key_id, previous_id, model, served, upstream_id, status, background, request_id, input, body, created_at, updated_at, expires_at, instance)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
         ON CONFLICT (id) DO UPDATE SET served = excluded.served, upstream_id = excluded.upstream_id,
             status = CASE WHEN responses.status IN ('cancelled', 'failed') THEN responses.status ELSE excluded.status END,
             body = excluded.body, updated_at = excluded.updated_at",
        p![r.id, r.user_id, r.key_id, r.previous_id, r.model, r.served, r.upstream_id, r.status, r.background, r.request_id, r.input, r.body, r.created_at, r.updated_at, r.expires_at, instance],
    )
}
