//! `transcription`: speech to text through an `stt` model, and translation
//! to English (on a row with `translate = true`). `multipart/form-data`
//! with `file` plus `model`, `language`, `prompt`, `response_format`,
//! `temperature` (and `byok_api_key`).
//!
//! The file is never held whole in memory: it is spooled chunk by chunk to
//! a private file in this instance's spool directory ([`gateway_base::spool`]) (the table's `[limits]
//! transcription` enforced
//! while streaming: 413 beyond), recognised by its first bytes (a file that
//! is neither audio nor video is 400, before any hold or upstream call),
//! measured where it can be (WAV from its samples, its header checked:
//! `audio::wav`; MP3 with `symphonia`), then streamed from disk to the
//! provider; the spool file is removed however the request ends.
//!
//! Billed by the audio's seconds at the model's `per_second` price: the
//! measured length, else the provider's reported `usage.seconds` or
//! `duration`. The hold is the measured length, else a bound from the
//! file's size ([`UNMEASURED_BYTES_PER_SECOND`]).

use http::StatusCode;
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};
use tokio::io::AsyncWriteExt;

use super::common::{self, file_too_large};
use crate::ctx::{Ctx, Outcome, Settlement};
use crate::model_call::pick_model;
use gateway_base::billing::quantity_from_upstream;
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::media;
use gateway_base::spec::Mode;
use gateway_base::spool::SpoolFile as Spool;
use gateway_models::cost::Cost;
use gateway_models::providers::speech::Upload;
use gateway_models::providers::{ModelType, Op};
use gateway_store::Record;

/// Largest text field.
const MAX_TEXT_FIELD: u64 = 8 * 1024;
/// Largest answer read from the provider.
const MAX_ANSWER_BYTES: usize = 16 << 20;
/// Text fields passed to the provider.
pub const FIELDS: [&str; 6] = [
    "model",
    "language",
    "prompt",
    "response_format",
    "temperature",
    "byok_api_key",
];
/// `response_format` values.
pub const FORMATS: [&str; 5] = ["json", "text", "srt", "verbose_json", "vtt"];
/// The hold of a file whose length cannot be measured: one second per this
/// many bytes (8 kbit/s, below any speech codec's rate).
pub const UNMEASURED_BYTES_PER_SECOND: u64 = 1000;

/// Largest file accepted: the table's `[limits] transcription`.
fn max_bytes(ctx: &Ctx) -> u64 {
    ctx.gw.table.limit(Mode::Transcription)
}

fn too_large(max: u64) -> ApiError {
    file_too_large(max)
}

/// A multipart error: too large beyond `max`, else malformed.
fn multipart_error(max: u64) -> impl Fn(multer::Error) -> ApiError {
    move |e| common::multipart_error(e, max)
}

/// What the form held.
struct Form {
    fields: Map<String, Value>,
    /// The spool, the file's name, its size and its first bytes.
    file: Option<(Spool, String, u64, Vec<u8>)>,
}

async fn read_form(ctx: &Ctx, req: Request) -> Result<Form, ApiError> {
    let max = max_bytes(ctx);
    let mut limits = multer::SizeLimit::new().for_field("file", max);
    for f in FIELDS {
        limits = limits.for_field(f, MAX_TEXT_FIELD);
    }
    let mut form = common::open_multipart(req, max, limits)?;
    let mut out = Form {
        fields: Map::new(),
        file: None,
    };
    while let Some(mut field) = form.next_field().await.map_err(multipart_error(max))? {
        match field.name() {
            Some("file") if out.file.is_none() => {
                let name = field
                    .file_name()
                    .map(str::to_owned)
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| "audio".into());
                let (spool, size, head) = spool_file(ctx, field).await?;
                out.file = Some((spool, name, size, head));
            }
            Some("file") => return Err(ApiError::BadRequest("only one file per request".into())),
            Some(name) if FIELDS.contains(&name) => {
                let name = name.to_owned();
                let text = field.text().await.map_err(multipart_error(max))?;
                out.fields.insert(name, Value::String(text));
            }
            _ => while field.chunk().await.map_err(multipart_error(max))?.is_some() {},
        }
    }
    Ok(out)
}

/// Writes the `file` part to a spool file (the table's limit at most): the
/// spool, the file's size and its first bytes.
async fn spool_file(
    ctx: &Ctx,
    mut field: multer::Field<'static>,
) -> Result<(Spool, u64, Vec<u8>), ApiError> {
    let max = max_bytes(ctx);
    let (path, mut file) = ctx
        .gw
        .spool
        .create_file(&format!("stt-{}", ctx.request_id))
        .await
        .map_err(|e| ApiError::internal("creating the spool file", e))?;
    let spool = Spool { path };
    let (mut size, mut head) = (0u64, Vec::new());
    while let Some(chunk) = field.chunk().await.map_err(multipart_error(max))? {
        size += chunk.len() as u64;
        if size > max {
            return Err(too_large(max));
        }
        if head.len() < 64 {
            head.extend_from_slice(&chunk[..chunk.len().min(64 - head.len())]);
        }
        file.write_all(&chunk)
            .await
            .map_err(|e| ApiError::internal("writing the spool file", e))?;
    }
    file.flush()
        .await
        .map_err(|e| ApiError::internal("writing the spool file", e))?;
    Ok((spool, size, head))
}

/// `transcription` (and translation, on a row with `translate = true`): the form
/// read and checked, the audio measured, the model picked and credit held,
/// the file sent, the answer billed.
pub async fn transcribe(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let op = if ctx.spec.translate {
        Op::Translation
    } else {
        Op::Transcription
    };
    let Form { mut fields, file } = read_form(ctx, req).await?;
    let (spool, file_name, size, head) =
        file.ok_or_else(|| ApiError::BadRequest("file is required".into()))?;
    let format = check_fields(&mut fields)?;
    let (container, measured) = measure(&spool, &head).await?;
    let bound = measured
        .unwrap_or_else(|| Decimal::from(size.div_ceil(UNMEASURED_BYTES_PER_SECOND).max(1)));
    let (settle, key) = pick_model(
        &ctx.caller(),
        fields.get("model").and_then(Value::as_str),
        fields.get("byok_api_key").and_then(Value::as_str),
        ModelType::Stt,
        |p, m| crate::money::seconds_cost(p, m, bound),
    )
    .await?;
    let upload = (spool, file_name, size);
    let fields = gateway_models::providers::openai::request(op, &settle.model.id, fields);
    let call = match settle
        .provider
        .adapter
        .transcription(op, &settle.model, fields)
    {
        Ok(call) => call,
        Err(e) => {
            settle.abandon();
            return Err(e);
        }
    };
    let (status, bytes) = send(ctx, &settle, &key, call, upload).await?;
    let (mut v, bytes, claimed) = read_answer(&settle, bytes, &format)?;
    let reported = claimed.or_else(|| {
        v.as_ref().and_then(|v| {
            quantity_from_upstream("usage.seconds", v.pointer("/usage/seconds"))
                .valid()
                .or_else(|| quantity_from_upstream("duration", v.get("duration")).valid())
        })
    });
    // Unmeasured audio: the provider's figure, at most the hold's bound.
    let reported = reported.map(|r| gateway_models::bounds::reported_at_most("seconds", r, bound));
    let seconds = match measured.or(reported) {
        Some(s) => s,
        None => {
            tracing::warn!(request_id = %ctx.request_id, container, "a transcription's length is unknown; recorded unpriced");
            Decimal::ZERO
        }
    };
    let records: Vec<Record> = settle.seconds_records("audio_seconds", seconds);
    let cost = Cost::of(&records).unwrap_or(Cost {
        charged: Decimal::ZERO,
        byok: false,
    });
    let response = answer(v.as_mut(), bytes, &format, seconds, cost)?;
    let mut out = Outcome::new(response, Some(status)).settled(Settlement::ByModeRecords);
    out.records = records;
    Ok(out)
}

/// The provider's answer for the caller's `format`: OpenAI's as it came
/// (its JSON read for `json` and `verbose_json`), or a voice vendor's
/// transcript ([`gateway_models::providers::Adapter::transcript`]) in
/// OpenAI's shape, with the seconds it claims. The JSON answer, the text
/// answer's bytes, and the claim.
fn read_answer(
    settle: &crate::money::Settle,
    bytes: bytes::Bytes,
    format: &str,
) -> Result<(Option<Value>, bytes::Bytes, Option<Decimal>), ApiError> {
    let not_json = || {
        ApiError::BadGateway("the model provider answered a transcription that is not JSON".into())
    };
    let verbose = format == "verbose_json";
    let json_answer = matches!(format, "json" | "verbose_json");
    let parsed = serde_json::from_slice::<Value>(&bytes).ok();
    let vendor = match &parsed {
        Some(v) => settle.provider.adapter.transcript(v)?,
        None => None,
    };
    let Some(t) = vendor else {
        return match json_answer {
            true => Ok((Some(parsed.ok_or_else(not_json)?), bytes, None)),
            false => Ok((None, bytes, None)),
        };
    };
    let claimed = quantity_from_upstream("duration", t.claimed_seconds.as_ref()).valid();
    match json_answer {
        true => Ok((Some(t.to_json(verbose)), bytes::Bytes::new(), claimed)),
        false => Ok((None, bytes::Bytes::from(t.text), claimed)),
    }
}

/// Checks `response_format` (its value, `json` when absent) and
/// `temperature` (made a number).
fn check_fields(fields: &mut Map<String, Value>) -> Result<String, ApiError> {
    let format = match fields.get("response_format").and_then(Value::as_str) {
        None => "json".to_owned(),
        Some(f) if FORMATS.contains(&f) => f.to_owned(),
        Some(_) => {
            return Err(ApiError::BadRequest(format!(
                "response_format: must be one of {}",
                FORMATS.join(", ")
            )))
        }
    };
    if let Some(t) = fields.get("temperature").and_then(Value::as_str) {
        match t.trim().parse::<f64>() {
            Ok(x) if (0.0..=1.0).contains(&x) => {
                fields.insert("temperature".into(), json!(x));
            }
            _ => {
                return Err(ApiError::BadRequest(
                    "temperature: must be a number from 0 to 1".into(),
                ))
            }
        }
    }
    Ok(format)
}

/// The file's container (400 when it is neither audio nor video) and, for
/// WAV and MP3, its measured seconds: 400 when it does not decode or its
/// WAV header is refused (`audio::wav`); none for a WAV of a compressed
/// format, which is billed as an unmeasured container.
async fn measure(spool: &Spool, head: &[u8]) -> Result<(&'static str, Option<Decimal>), ApiError> {
    let container = gateway_base::audio::sniff_container(head)
        .ok_or_else(|| ApiError::BadRequest("file: not an audio or video file".into()))?;
    if !matches!(container, "wav" | "mp3") {
        return Ok((container, None));
    }
    let (path, ext) = (spool.path.clone(), container);
    let secs = tokio::task::spawn_blocking(move || gateway_base::audio::file_seconds(&path, ext))
        .await
        .map_err(|e| ApiError::internal("measuring the audio", e))?
        .map_err(|why| ApiError::BadRequest(format!("file: {why}")))?;
    Ok((container, secs))
}

/// Sends the spooled file (streamed from disk) to the provider as `call`
/// says (a form with its fields, or the audio as the body); the spool is
/// removed once sent. The provider's status and answer.
async fn send(
    ctx: &Ctx,
    settle: &crate::money::Settle,
    key: &gateway_adapters::upstream::llm::ProviderKey,
    call: Upload,
    (spool, file_name, size): (Spool, String, u64),
) -> Result<(u16, bytes::Bytes), ApiError> {
    let p = &settle.provider;
    let opened = tokio::fs::File::open(&spool.path)
        .await
        .map_err(|e| ApiError::internal("reading the spool file", e))?;
    let body = reqwest::Body::wrap_stream(tokio_util::io::ReaderStream::new(opened));
    let content_type = media::content_type_for(&file_name);
    let path = match &call {
        Upload::Multipart { path, .. } | Upload::Raw { path } => path.clone(),
    };
    let request = ctx.gw.upstream.llm_call_as(
        gateway_base::spec::Method::Post,
        &p.base_url,
        &path,
        key,
        p.adapter.key_form(),
    );
    let request = match call {
        Upload::Multipart { fields, .. } => {
            let mut form = reqwest::multipart::Form::new();
            for (k, v) in fields {
                form = form.text(k, v);
            }
            let part = reqwest::multipart::Part::stream_with_length(body, size)
                .file_name(file_name.clone())
                .mime_str(content_type)
                .map_err(|e| ApiError::internal("building the file part", e))?;
            request.multipart(form.part("file", part))
        }
        Upload::Raw { .. } => request.body_stream(body, size, content_type),
    };
    let answer = request.send().await?;
    drop(spool);
    let status = answer.status();
    let bytes = answer.bytes(MAX_ANSWER_BYTES).await?;
    Ok((status, bytes))
}

/// The answer: the provider's JSON with a `billing` object, or its text
/// with the billed seconds in `X-Billed-Audio-Seconds`.
fn answer(
    v: Option<&mut Value>,
    bytes: bytes::Bytes,
    format: &str,
    seconds: Decimal,
    cost: Cost,
) -> Result<gateway_base::body::Response, ApiError> {
    let charged = cost.charged;
    if let Some(v) = v {
        cost.annotate(v);
        if let Some(obj) = v.as_object_mut() {
            obj.insert(
                "billing".into(),
                json!({
                    "unit": "audio_seconds",
                    "quantity": seconds.normalize().to_string(),
                    "charged": charged.normalize().to_string(),
                }),
            );
        }
        return Ok(gateway_base::body::json(StatusCode::OK, v));
    }
    let ct = if format == "vtt" {
        "text/vtt"
    } else {
        "text/plain; charset=utf-8"
    };
    let mut r = http::Response::new(gateway_base::body::full(bytes));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(ct),
    );
    r.headers_mut().insert(
        "x-billed-audio-seconds",
        http::HeaderValue::from_str(&seconds.normalize().to_string())
            .map_err(|e| ApiError::internal("the billed seconds header", e))?,
    );
    Ok(r)
}
