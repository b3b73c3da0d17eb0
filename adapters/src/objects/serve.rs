//! Answering the local store's presigned URLs: `GET`/`HEAD /objects/{key}`.
//!
//! Self-contained: the server hands over every request whose path starts
//! with `/objects/` and sends back what [`serve_presigned`] answers.
//!
//! * 403 `{"detail": ...}` when `expires`/`signature` are missing, malformed,
//!   do not match the key and expiry (any change to the URL), or expired;
//! * 404 when the object is gone, 405 for other methods;
//! * 200 with `Content-Type`, `Content-Length`, `Accept-Ranges: bytes` and
//!   `Cache-Control: private, max-age=<seconds left>`;
//! * one `Range: bytes=a-b | a- | -n` → 206 with `Content-Range`; a range
//!   starting past the end → 416 with `Content-Range: bytes */size`; several
//!   ranges, or a header that does not parse, are ignored (200, RFC 9110).
//!
//! The body is streamed from the file in 64 KiB chunks.

use bytes::Bytes;
use futures_util::TryStreamExt;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, Response, StatusCode, Uri};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};

use super::local::{LocalStore, OpenObject};
use super::signing::{self, decode_key, SignatureError};
use super::types::{validate_key, ByteStream, ObjectError};
use gateway_base::body::{self, Body, BoxError};

pub use super::signing::PATH_PREFIX;

/// Answers a request for a presigned URL of `store` (see the module docs).
/// `uri` is the request target (path and query).
pub async fn serve_presigned(
    store: &LocalStore,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Response<Body> {
    match answer(store, method, uri, headers).await {
        Ok(resp) | Err(resp) => resp,
    }
}

/// The phases of [`serve_presigned`]: the method, the URL's signature, the
/// object, the range, the body, the headers; each phase that refuses gives
/// the answer in `Err`.
async fn answer(
    store: &LocalStore,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<Response<Body>, Response<Body>> {
    if method != Method::GET && method != Method::HEAD {
        return Err(method_not_allowed());
    }
    let signed = authorize(store, uri)?;
    let object = open(store, &signed.key).await?;
    let size = object.meta.size;
    let (status, start, end) = pick_range(headers, size)?;
    let length = end.map_or(0, |e| e + 1 - start);
    let content_type = header_value(object.meta.content_type.clone());
    let body = match (method == Method::HEAD, end) {
        (true, _) | (false, None) => body::empty(),
        (false, Some(end)) => match object.stream(start, end).await {
            Ok(stream) => stream_body(stream),
            Err(e) => return Err(internal_error(&signed.key, &e)),
        },
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, content_type);
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(
        header::CACHE_CONTROL,
        header_value(format!("private, max-age={}", signed.seconds_left)),
    );
    guard_origin(h);
    if status == StatusCode::PARTIAL_CONTENT {
        if let Some(end) = end {
            h.insert(
                header::CONTENT_RANGE,
                header_value(format!("bytes {start}-{end}/{size}")),
            );
        }
    }
    Ok(resp)
}

/// 405, naming the methods a presigned URL answers.
fn method_not_allowed() -> Response<Body> {
    let mut resp = detail(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    resp.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    resp
}

/// What a valid presigned URL grants: one key, for so many more seconds.
struct Signed {
    key: String,
    seconds_left: u64,
}

/// Checks the URL's key, expiry and signature; any change to the URL, or a
/// URL past its expiry, is refused with 403 (404 outside the prefix).
fn authorize(store: &LocalStore, uri: &Uri) -> Result<Signed, Response<Body>> {
    let Some(raw_key) = uri.path().strip_prefix(PATH_PREFIX) else {
        return Err(detail(StatusCode::NOT_FOUND, "not found"));
    };
    let key = decode_key(raw_key).ok_or_else(|| forbidden(SignatureError::Malformed))?;
    let (expires, signature) = query_params(uri.query().unwrap_or(""))
        .ok_or_else(|| forbidden(SignatureError::Malformed))?;
    let now = signing::now_unix();
    let expires = signing::verify(
        store.signing_key(),
        &key,
        expires.as_deref(),
        signature.as_deref(),
        now,
    )
    .map_err(forbidden)?;
    if validate_key(&key).is_err() {
        // Never signed by us; unreachable unless the signing key leaked.
        return Err(forbidden(SignatureError::Invalid));
    }
    Ok(Signed {
        key,
        seconds_left: expires.saturating_sub(now),
    })
}

/// The object under `key`: 404 when it is gone.
async fn open(store: &LocalStore, key: &str) -> Result<OpenObject, Response<Body>> {
    match store.open(key).await {
        Ok(o) => Ok(o),
        Err(ObjectError::NotFound) => Err(detail(StatusCode::NOT_FOUND, "object not found")),
        Err(e) => Err(internal_error(key, &e)),
    }
}

/// The status and the inclusive bytes to send (`None`: an empty object):
/// the whole object unless one satisfiable range is asked for; 416 when it
/// starts past the end.
fn pick_range(
    headers: &HeaderMap,
    size: u64,
) -> Result<(StatusCode, u64, Option<u64>), Response<Body>> {
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .map(|v| parse_range(v, size));
    match range {
        None | Some(RangeAsk::Ignore) => Ok((StatusCode::OK, 0, size.checked_sub(1))),
        Some(RangeAsk::Unsatisfiable) => {
            let mut resp = detail(StatusCode::RANGE_NOT_SATISFIABLE, "range not satisfiable");
            resp.headers_mut().insert(
                header::CONTENT_RANGE,
                header_value(format!("bytes */{size}")),
            );
            resp.headers_mut()
                .insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
            Err(resp)
        }
        Some(RangeAsk::Bytes(s, e)) => Ok((StatusCode::PARTIAL_CONTENT, s, Some(e))),
    }
}

/// Objects may hold content uploaded by callers: never let a browser run it
/// on the gateway's origin.
fn guard_origin(h: &mut HeaderMap) {
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
}

/// 500, with the cause in the log only.
fn internal_error(key: &str, e: &ObjectError) -> Response<Body> {
    tracing::error!(key = %key, error = %e, "serving a local object");
    detail(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
}

/// A response body streaming `stream` (e.g. an [`super::ObjectBody`]'s).
pub fn stream_body(stream: ByteStream) -> Body {
    let frames = SyncStream(std::sync::Mutex::new(stream))
        .map_ok(Frame::data)
        .map_err(|e| -> BoxError { Box::new(e) });
    BodyExt::boxed(StreamBody::new(frames))
}

/// Makes a `Send` stream `Sync`, as [`Body`] requires. Polling goes through
/// `Mutex::get_mut`, which takes no lock (polling has `&mut` access).
struct SyncStream(std::sync::Mutex<ByteStream>);

impl futures_util::Stream for SyncStream {
    type Item = std::io::Result<Bytes>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let stream = self
            .get_mut()
            .0
            .get_mut()
            .unwrap_or_else(|p| p.into_inner());
        stream.as_mut().poll_next(cx)
    }
}

fn header_value(s: String) -> HeaderValue {
    HeaderValue::from_str(&s)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"))
}

/// A JSON `{"detail": ...}` answer.
fn detail(status: StatusCode, message: &str) -> Response<Body> {
    let mut resp = Response::new(body::full(Bytes::from(
        serde_json::json!({ "detail": message }).to_string(),
    )));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn forbidden(e: SignatureError) -> Response<Body> {
    detail(StatusCode::FORBIDDEN, e.detail())
}

/// `(expires, signature)` of the query; `None` when either appears twice.
fn query_params(query: &str) -> Option<(Option<String>, Option<String>)> {
    let (mut expires, mut signature) = (None, None);
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        let slot = match name.as_ref() {
            "expires" => &mut expires,
            "signature" => &mut signature,
            _ => continue,
        };
        if slot.replace(value.into_owned()).is_some() {
            return None;
        }
    }
    Some((expires, signature))
}

/// What a `Range` header asks of an object of a given size.
#[derive(Debug, PartialEq, Eq)]
enum RangeAsk {
    /// Not a single byte range we understand: serve the whole object.
    Ignore,
    /// Starts past the end (or a zero-length suffix): 416.
    Unsatisfiable,
    /// Inclusive bytes, clamped to the object.
    Bytes(u64, u64),
}

fn parse_range(value: &str, size: u64) -> RangeAsk {
    let value = value.trim();
    let Some(spec) = value
        .get(..6)
        .filter(|p| p.eq_ignore_ascii_case("bytes="))
        .map(|_| value[6..].trim())
    else {
        return RangeAsk::Ignore;
    };
    if spec.contains(',') {
        return RangeAsk::Ignore;
    }
    let Some((first, last)) = spec.split_once('-') else {
        return RangeAsk::Ignore;
    };
    let (first, last) = (first.trim(), last.trim());
    let number = |s: &str| -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    if first.is_empty() {
        let Some(n) = number(last) else {
            return RangeAsk::Ignore;
        };
        if n == 0 || size == 0 {
            return RangeAsk::Unsatisfiable;
        }
        return RangeAsk::Bytes(size.saturating_sub(n), size - 1);
    }
    let Some(start) = number(first) else {
        return RangeAsk::Ignore;
    };
    let end = if last.is_empty() {
        None
    } else {
        match number(last) {
            Some(e) if e >= start => Some(e),
            _ => return RangeAsk::Ignore,
        }
    };
    if start >= size {
        return RangeAsk::Unsatisfiable;
    }
    RangeAsk::Bytes(start, end.unwrap_or(u64::MAX).min(size - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        use RangeAsk::*;
        assert_eq!(parse_range("bytes=0-9", 100), Bytes(0, 9));
        assert_eq!(parse_range("bytes=10-", 100), Bytes(10, 99));
        assert_eq!(parse_range("bytes=-10", 100), Bytes(90, 99));
        assert_eq!(parse_range("bytes=-1000", 100), Bytes(0, 99));
        assert_eq!(parse_range("bytes=50-1000", 100), Bytes(50, 99));
        assert_eq!(parse_range("Bytes = 1-2", 100), Ignore);
        assert_eq!(parse_range("BYTES=1-2", 100), Bytes(1, 2));
        assert_eq!(parse_range("bytes=100-", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=-0", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=0-", 0), Unsatisfiable);
        assert_eq!(parse_range("bytes=5-4", 100), Ignore);
        assert_eq!(parse_range("bytes=0-1,5-6", 100), Ignore);
        assert_eq!(parse_range("items=0-1", 100), Ignore);
        assert_eq!(parse_range("bytes=a-b", 100), Ignore);
        assert_eq!(parse_range("bytes=+1-2", 100), Ignore);
    }

    #[test]
    fn keys_and_queries() {
        assert_eq!(decode_key("a/b%20c/d.mp3").as_deref(), Some("a/b c/d.mp3"));
        assert_eq!(decode_key("a%2Fb"), None);
        assert_eq!(decode_key("%FF"), None);
        assert_eq!(
            query_params("expires=1&signature=ab"),
            Some((Some("1".into()), Some("ab".into())))
        );
        assert_eq!(query_params("expires=1&expires=2&signature=ab"), None);
        assert_eq!(query_params("x=1"), Some((None, None)));
    }
}
