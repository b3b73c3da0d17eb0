//! What a voice job's submit holds against its key's budget
//! ([`crate::money::hold_voice`], taken by `modes::jobs` before the
//! upstream call): the job's bound, what it is expected to be charged at
//! most when it completes.
//!
//! * **Measured**, when the gateway can measure the input: an `audio_url`
//!   naming the caller's own upload (an object of the gateway's store) of
//!   WAV or MP3 audio holds its seconds, measured from its bytes
//!   ([`gateway_base::audio`]), at the kind's `audio_seconds` price. The object is
//!   read into the spool and measured there (never whole in memory); one
//!   that is neither WAV nor MP3 is read no further than its first bytes.
//! * **Else the kind's ceiling** (`[job_ceilings]` of the table,
//!   `JobKind::ceiling`): that many units of the submit row's billing
//!   unit, at the dearest of the prices the job may be billed at (a
//!   `media_seconds` job is billed audio seconds, video seconds or images,
//!   as the provider reports its media).
//!
//! A kind without a price for any of its units holds nothing (and reads
//! nothing). The job is billed what the provider measured when it completes, even
//! beyond its hold: a hold that proves too small lets the key's spend go
//! past its budget by that one job; it never lowers the bill.

use futures_util::StreamExt;
use rust_decimal::Decimal;
use tokio::io::AsyncWriteExt;

use crate::ctx::Ctx;
use gateway_base::errors::ApiError;
use gateway_base::spec::{Billing, JobKind};
use gateway_base::spool::SpoolFile;

/// The first bytes that tell a WAV or an MP3 ([`gateway_base::audio::sniff_container`]).
const HEAD: usize = 12;

/// The amount a submit of a job of `kind` whose input is `audio_url` holds
/// (see the module docs).
pub async fn amount(
    ctx: &Ctx,
    kind: &'static JobKind,
    audio_url: Option<&str>,
) -> Result<Decimal, ApiError> {
    let units = billed_units(&kind.submit.billing);
    let prices = &ctx.gw.config.prices;
    let key = |unit: &Billing| format!("{}.{}", kind.kind, unit.as_str());
    if units.iter().all(|u| prices.price(&key(u)).is_none()) {
        // Unpriced: charged nothing, so nothing to measure or hold.
        return Ok(Decimal::ZERO);
    }
    let charge = |unit: Billing, quantity: Decimal| prices.charge(&key(&unit), quantity).charged;
    if units.contains(&Billing::AudioSeconds) {
        if let Some(seconds) = own_audio_seconds(ctx, audio_url).await? {
            return Ok(charge(Billing::AudioSeconds, seconds));
        }
    }
    let ceiling = Decimal::from(kind.ceiling.unwrap_or_default());
    Ok(units
        .iter()
        .map(|u| charge(*u, ceiling))
        .max()
        .unwrap_or_default())
}

/// The units a job billed by `billing` may be charged in
/// (`progress::job_quantity`).
fn billed_units(billing: &'static Billing) -> &'static [Billing] {
    match billing {
        Billing::MediaSeconds => &[
            Billing::AudioSeconds,
            Billing::VideoSeconds,
            Billing::Images,
        ],
        other => std::slice::from_ref(other),
    }
}

/// The seconds of the caller's own upload `url` names, when it is WAV or
/// MP3 audio that decodes; `None` for any other URL or content. A URL of
/// the gateway's whose object is not the caller's is a 400, as the submit
/// would answer it ([`crate::fetch::own_asset`]).
async fn own_audio_seconds(ctx: &Ctx, url: Option<&str>) -> Result<Option<Decimal>, ApiError> {
    let Some(url) = url else {
        return Ok(None);
    };
    let Some(asset) = crate::fetch::own_asset(&ctx.gw, ctx.user_id(), url).await? else {
        return Ok(None);
    };
    let key = asset.object_key;
    let body = ctx
        .gw
        .objects
        .get(&key, None)
        .await
        .map_err(|e| crate::generated::stored_failed(format!("reading {key}"), e))?;
    let reading = |e: std::io::Error| ApiError::internal(format!("reading {key}"), e);
    let writing = |e: std::io::Error| ApiError::internal("writing the spool file", e);
    let (path, mut file) = ctx
        .gw
        .spool
        .create_file(&format!("job-{}", ctx.request_id))
        .await
        .map_err(writing)?;
    let spool = SpoolFile { path };
    let (mut head, mut stream) = (Vec::with_capacity(HEAD), body.stream);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(reading)?;
        if head.len() < HEAD {
            head.extend_from_slice(&chunk[..chunk.len().min(HEAD - head.len())]);
            if head.len() == HEAD && audio_ext(&head).is_none() {
                return Ok(None);
            }
        }
        file.write_all(&chunk).await.map_err(writing)?;
    }
    file.flush().await.map_err(writing)?;
    let Some(ext) = audio_ext(&head) else {
        return Ok(None);
    };
    let path = spool.path.clone();
    // A WAV whose header is refused, or audio that does not decode, is not
    // measured: the kind's ceiling is held instead.
    let seconds = tokio::task::spawn_blocking(move || {
        gateway_base::audio::file_seconds(&path, ext).ok().flatten()
    })
    .await
    .ok()
    .flatten();
    Ok(seconds)
}

/// `wav` or `mp3`, when `head` starts one (what [`gateway_base::audio`] measures).
fn audio_ext(head: &[u8]) -> Option<&'static str> {
    gateway_base::audio::sniff_container(head).filter(|c| matches!(*c, "wav" | "mp3"))
}
