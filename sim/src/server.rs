//! Serving: the accept loop and the per-request pipeline.
//!
//! Each accepted socket gets `TCP_NODELAY` and a hyper 1 HTTP/1.1 connection
//! (keep-alive, upgrades served: WebSockets). A request then goes through:
//!
//! 1. `/__sim/...` (except media) → [`crate::control`], untouched by the rest;
//! 2. buffer the body, parse multipart parts, append to the [request log](crate::log);
//! 3. [fault rules](crate::faults) (a `reset` makes the service fail, so hyper
//!    closes the connection without writing a response);
//!    (matched on the whole path; then a named provider's `/p/{name}`
//!    prefix is dropped, so `/p/a/v1/chat/completions` is served as
//!    `/v1/chat/completions`: several providers, each failing apart);
//!    a `GET` with `Upgrade: websocket` to `/v1/realtime` or `/v1/listen`
//!    is then answered by [`crate::realtime`] or
//!    [`crate::voice::deepgram_live`] (credentials, then `101` and the
//!    session: [`crate::upgrade`]);
//! 4. Anthropic's `/v1/messages...` → [`crate::anthropic`], Google's
//!    `/v1beta/...` → [`crate::gemini`] and the voice vendors' paths
//!    (ElevenLabs, Deepgram, Cartesia) → [`crate::voice`] (each checks its
//!    own key header), and Stripe's paths → [`crate::stripe`] (its own
//!    secret key);
//! 5. credentials when `api_key` is configured (media needs none);
//! 6. [`crate::resources::route`] (or media).
//!
//! The request type is in [`crate::request`], response helpers in
//! [`crate::response`] and the shared state in [`crate::shared`]; they are
//! re-exported here under their old paths.

use std::sync::Arc;
use std::time::Duration;

use http::header::CONTENT_TYPE;
use http::{HeaderName, HeaderValue, Request, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;

use crate::faults::Effect;
use crate::shared::wait_stopped;

pub use crate::request::{Part, Req};
pub use crate::response::{
    bad_field, error, error_code, full, json_response, not_found, ok, ok_item, Body, FrameStream,
    Resp,
};
pub use crate::shared::{AudioKey, Rendered, Shared};

/// Accepts connections until the simulator stops.
pub async fn accept_loop(listener: TcpListener, sh: Arc<Shared>) {
    let mut stop = sh.shutdown.subscribe();
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = wait_stopped(&mut stop) => break,
        };
        let _ = stream.set_nodelay(true);
        let conn_sh = sh.clone();
        sh.spawn(async move {
            let svc = hyper::service::service_fn(move |req| handle(conn_sh.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), svc)
                .with_upgrades()
                .await;
        });
    }
}

/// The error a `reset` fault returns: hyper then drops the connection without
/// writing any response.
#[derive(Debug)]
pub struct Reset;

impl std::fmt::Display for Reset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection reset (injected fault)")
    }
}

impl std::error::Error for Reset {}

/// Handles one request (the whole pipeline described in the module docs).
pub async fn handle(sh: Arc<Shared>, mut req: Request<Incoming>) -> Result<Resp, Reset> {
    let upgrade = crate::upgrade::requested(req.method(), req.headers())
        .then(|| hyper::upgrade::on(&mut req));
    let is_media = req.uri().path().starts_with("/__sim/media/");
    let control =
        !is_media && (req.uri().path().starts_with("/__sim/") || req.uri().path() == "/__sim");
    let (parts, body) = req.into_parts();
    let body = body.collect().await.map_err(|_| Reset)?.to_bytes();
    let mut req = Req::new(parts, body).await;
    if control && req.path.starts_with("/__sim/stripe/") {
        return Ok(crate::stripe::control(&sh, &req).await);
    }
    if control {
        return Ok(crate::control::handle(&sh, &req));
    }
    sh.log.push(&req);
    let mut stream_error = None;
    let mut body_break = None;
    if let Some(fault) = sh.faults.take(&req.method, &req.path) {
        if let Some(d) = fault.delay {
            tokio::time::sleep(d).await;
        }
        match fault.effect {
            Effect::Proceed => {}
            Effect::Respond {
                status,
                body,
                headers,
            } => return Ok(fault_answer(status, body, headers, &req.path)),
            Effect::StreamError { status, after } => stream_error = Some((status, after)),
            Effect::BodyBreak(after) => body_break = Some(after),
            Effect::Reset => return Err(Reset),
            Effect::Timeout => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                return Err(Reset);
            }
        }
    }
    // Several named providers on one port: `/p/{name}/v1/...` is served
    // as `/v1/...` after its own faults (matched on the whole path).
    req.unprefixed();
    if let Some(resp) = upgrade.and_then(|on| websocket(&sh, &req, on)) {
        return Ok(resp);
    }
    if is_media {
        return Ok(crate::control::media(&sh, &req));
    }
    // Stripe's paths carry Stripe's secret key, not the provider's.
    if let Some(resp) = crate::stripe::route(&sh, &req) {
        return Ok(resp);
    }
    // Anthropic's and Google's APIs check their own key headers.
    if crate::anthropic::owns(&req.path) {
        let resp = crate::anthropic::route(&sh, &req, stream_error);
        return Ok(break_body(resp, body_break).await);
    }
    if crate::gemini::owns(&req.path) {
        let resp = crate::gemini::route(&sh, &req, stream_error);
        return Ok(break_body(resp, body_break).await);
    }
    // The voice vendors' APIs check their own key headers too.
    if let Some(vendor) = crate::voice::owner(&req.path) {
        let resp = crate::voice::route(&sh, &req, vendor).await;
        return Ok(break_body(resp, body_break).await);
    }
    if !sh.authorized(&req.headers) {
        return Ok(error(
            StatusCode::UNAUTHORIZED,
            "Invalid or missing API token",
            None,
        ));
    }
    if req.path.starts_with("/v1/") {
        req.break_after = stream_error.map(|(_, after)| after);
        return Ok(break_body(crate::openai::route(&sh, &req), body_break).await);
    }
    Ok(crate::resources::route(&sh, &req))
}

/// A WebSocket API's answer to an upgrade request on its path (it checks
/// its own credentials): OpenAI's Realtime API, Deepgram's live
/// transcription. `None`: not a WebSocket path, served as plain HTTP.
fn websocket(sh: &Arc<Shared>, req: &Req, on: hyper::upgrade::OnUpgrade) -> Option<Resp> {
    match req.path.trim_end_matches('/') {
        "/v1/realtime" => Some(crate::realtime::connect(sh, req, on)),
        "/v1/listen" => Some(crate::voice::deepgram_live::connect(sh, req, on)),
        _ => None,
    }
}

/// The answer of a `Respond` fault: its body (text when a string, JSON
/// otherwise; the path's provider's default without one), status and
/// extra headers.
fn fault_answer(
    status: StatusCode,
    body: Option<Value>,
    headers: Vec<(HeaderName, HeaderValue)>,
    path: &str,
) -> Resp {
    let body = body.unwrap_or_else(|| default_body(status, path));
    let mut resp = match body {
        Value::String(text) => {
            let mut r = full(text);
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            r
        }
        other => json_response(StatusCode::OK, &other),
    };
    *resp.status_mut() = status;
    for (k, v) in headers {
        resp.headers_mut().insert(k, v);
    }
    resp
}

/// The body of an injected error answer without a `body`, in the shape of
/// the provider the path belongs to: Anthropic's under `/v1/messages`,
/// Google's under `/v1beta/`, a voice vendor's on its paths
/// ([`crate::voice::error_body`]), the voice provider's otherwise (also under
/// OpenAI's `/v1/`, as before). It lives with the pipeline rather than with
/// the fault rules because only the pipeline knows which provider owns a
/// path; the rules stay plain data that the shared state can hold.
pub fn default_body(status: StatusCode, path: &str) -> Value {
    if crate::anthropic::owns(path) {
        crate::anthropic::error_body(status, "injected fault")
    } else if crate::gemini::owns(path) {
        crate::gemini::error_body(status, "injected fault")
    } else if let Some(body) = crate::voice::error_body(status, path, "injected fault") {
        body
    } else {
        serde_json::json!({
            "success": false,
            "message": "injected fault",
            "error": error_code(status),
        })
    }
}

/// `resp` with its whole body broken off after `after` bytes (a
/// `body_break` fault): the full `Content-Length` announced, part of the
/// body sent, then the connection dropped. A streamed body is unaffected.
async fn break_body(resp: Resp, after: Option<usize>) -> Resp {
    let Some(after) = after else { return resp };
    let (mut parts, body) = resp.into_parts();
    let http_body_util::Either::Left(whole) = body else {
        return http::Response::from_parts(parts, body);
    };
    let bytes = whole
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    parts
        .headers
        .insert(http::header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    let frames: Vec<Result<hyper::body::Frame<bytes::Bytes>, std::io::Error>> = vec![
        Ok(hyper::body::Frame::data(
            bytes.slice(..after.min(bytes.len())),
        )),
        Err(std::io::Error::other("body broken off (injected fault)")),
    ];
    let stream: FrameStream = Box::pin(futures_util::stream::iter(frames));
    http::Response::from_parts(
        parts,
        http_body_util::Either::Right(http_body_util::StreamBody::new(stream)),
    )
}
