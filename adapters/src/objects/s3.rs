//! S3 (or any S3-compatible store) through `rust-s3`.
//!
//! * **put** streams the body through a counting adapter into
//!   `rust-s3`'s streaming upload: bodies under 8 MiB are one `PUT`, larger
//!   ones a multipart upload of 8 MiB parts, at most two in flight (so a put
//!   holds at most ~3 parts in memory, whatever the object's size). Past
//!   `max_bytes`, or when the body fails, reading stops with an error:
//!   a single `PUT` is never sent and a multipart upload is aborted (by
//!   `rust-s3`), so nothing appears under the key and an object already
//!   there stays as it was.
//! * **get** is one `GET` (with `Range` when asked), streamed from the
//!   response; its headers give the content type and sizes.
//! * **presign_get** is a real SigV4 presigned `GET` URL, computed locally.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, Stream, TryStreamExt};
use s3::command::Command;
use s3::creds::Credentials;
use s3::error::S3Error;
use s3::request::tokio_backend::ReqwestRequest;
use s3::request::Request as _;
use s3::{Bucket, BucketConfiguration, Region};

use super::store::ObjectStore;
use super::types::{
    ceil_secs, check_content_type, validate_key, ByteRange, ByteStream, ObjectBody, ObjectError,
    ObjectMeta,
};

/// Default time allowed to a control request (head, delete, one part of an
/// upload), and to the start of a download (its response headers):
/// [`S3Config::timeout`], `GATEWAY_S3_TIMEOUT_SECS`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Parts of a multipart upload in flight at once (each holds 8 MiB).
const UPLOAD_CONCURRENCY: usize = 2;
/// Longest validity of a SigV4 presigned URL (7 days).
const MAX_PRESIGN_SECS: u64 = 604_800;

/// Where and how to reach the bucket.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Config {
    /// Base URL of the S3 API, e.g. `https://s3.eu-west-1.amazonaws.com` or
    /// `http://127.0.0.1:9000`.
    pub endpoint: String,
    /// Signing region, e.g. `us-east-1`.
    pub region: String,
    /// Bucket name.
    pub bucket: String,
    /// Access key id.
    pub access_key: String,
    /// Secret access key.
    pub secret_key: String,
    /// Path-style addressing (`endpoint/bucket/key`) rather than
    /// virtual-hosted (`bucket.endpoint/key`). Most self-hosted stores need it.
    pub path_style: bool,
    /// Time allowed to a control request (head, delete, one part of an
    /// upload) and to the start of a download: a store that stalls fails
    /// after it (`GATEWAY_S3_TIMEOUT_SECS`, default
    /// [`DEFAULT_REQUEST_TIMEOUT`]).
    pub timeout: Duration,
}

impl std::fmt::Debug for S3Config {
    // Hand-written so that the secret key never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Config")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("bucket", &self.bucket)
            .field("access_key", &self.access_key)
            .field("secret_key", &"<set>")
            .field("path_style", &self.path_style)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Objects in an S3 bucket.
pub struct S3Store {
    /// For control requests and uploads (per-request time-out).
    bucket: Box<Bucket>,
    /// For downloads: no total time-out, since a body may take long to
    /// stream to a slow reader (the start is bounded by [`S3Config::timeout`]).
    stream_bucket: Box<Bucket>,
    config: S3Config,
}

impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Store")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// An upload's failure: [`ObjectError::Unavailable`] when the store could
/// not be reached, timed out or failed on its side (5xx): trying again
/// later may help; else [`ObjectError::Backend`] (a refusal: credentials,
/// bucket, request).
fn upload_error(key: &str, e: S3Error) -> ObjectError {
    let text = format!("uploading {key}: {e}");
    match e {
        S3Error::Reqwest(_) | S3Error::Io(_) | S3Error::HttpFail => ObjectError::Unavailable(text),
        S3Error::HttpFailWithBody(code, _) if code >= 500 => ObjectError::Unavailable(text),
        _ => ObjectError::Backend(text),
    }
}

fn s3_error(e: S3Error) -> ObjectError {
    match e {
        S3Error::HttpFailWithBody(404, _) => ObjectError::NotFound,
        other => ObjectError::Backend(other.to_string()),
    }
}

impl S3Store {
    /// A store for `config`'s bucket. Makes no request (see [`S3Store::ensure_bucket`]).
    pub fn new(config: S3Config) -> Result<S3Store, ObjectError> {
        let endpoint = config.endpoint.trim_end_matches('/').to_owned();
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(ObjectError::Backend(format!(
                "S3 endpoint {endpoint:?} is not an http(s) URL"
            )));
        }
        if config.bucket.is_empty() {
            return Err(ObjectError::Backend("S3 bucket name is empty".into()));
        }
        let region = Region::Custom {
            region: config.region.clone(),
            endpoint,
        };
        let credentials = Credentials::new(
            Some(&config.access_key),
            Some(&config.secret_key),
            None,
            None,
            None,
        )
        .map_err(|e| ObjectError::Backend(format!("S3 credentials: {e}")))?;
        let mut bucket = Bucket::new(&config.bucket, region, credentials).map_err(s3_error)?;
        if config.path_style {
            bucket = bucket.with_path_style();
        }
        bucket.set_request_timeout(Some(config.timeout));
        let mut stream_bucket = bucket.clone();
        stream_bucket.set_request_timeout(None);
        Ok(S3Store {
            bucket,
            stream_bucket,
            config,
        })
    }

    /// The configuration the store was made from.
    pub fn config(&self) -> &S3Config {
        &self.config
    }

    /// Whether the bucket is there and readable with our credentials:
    /// `Ok`, [`ObjectError::NotFound`] when it does not exist.
    pub async fn check_bucket(&self) -> Result<(), ObjectError> {
        self.bucket
            .list_page(String::new(), None, None, None, Some(1))
            .await
            .map(|_| ())
            .map_err(s3_error)
    }

    /// Creates the bucket unless it exists already.
    pub async fn ensure_bucket(&self) -> Result<(), ObjectError> {
        match self.check_bucket().await {
            Err(ObjectError::NotFound) => {}
            other => return other,
        }
        let mut bucket_config = BucketConfiguration::default();
        // us-east-1 is the one region that takes no location constraint.
        if self.config.region != "us-east-1" {
            bucket_config.set_location_constraint(self.bucket.region());
        }
        let request = ReqwestRequest::new(
            &self.bucket,
            "",
            Command::CreateBucket {
                config: bucket_config,
            },
        )
        .await
        .map_err(s3_error)?;
        match request.response_data(false).await {
            Ok(data) if (200..300).contains(&data.status_code()) => Ok(()),
            Ok(data) => Err(ObjectError::Backend(format!(
                "creating bucket: HTTP {}",
                data.status_code()
            ))),
            // Created meanwhile by someone else: fine if we can use it.
            Err(S3Error::HttpFailWithBody(409, _)) => self.check_bucket().await,
            Err(e) => Err(ObjectError::Backend(format!(
                "creating bucket {}: {e}",
                self.config.bucket
            ))),
        }
    }

    async fn put_inner(
        &self,
        key: &str,
        content_type: &str,
        body: ByteStream,
        max_bytes: Option<u64>,
    ) -> Result<u64, ObjectError> {
        validate_key(key)?;
        let content_type = check_content_type(content_type)?;
        let failure = Arc::new(Mutex::new(None));
        let limited = Limited {
            inner: body,
            seen: 0,
            max_bytes,
            failure: failure.clone(),
        };
        let mut reader = tokio_util::io::StreamReader::new(limited);
        let result = self
            .bucket
            .put_object_stream_builder(key)
            .with_content_type(content_type)
            .with_max_concurrent_chunks(UPLOAD_CONCURRENCY)
            .execute_stream(&mut reader)
            .await;
        // Our own reason (too large, body failed) wins over how rust-s3 reports it.
        if let Some(reason) = failure.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(reason);
        }
        let response = result.map_err(|e| upload_error(key, e))?;
        match response.status_code() {
            200..300 => {}
            code @ 500.. => {
                return Err(ObjectError::Unavailable(format!(
                    "uploading {key}: HTTP {code}"
                )))
            }
            code => {
                return Err(ObjectError::Backend(format!(
                    "uploading {key}: HTTP {code}"
                )))
            }
        }
        Ok(response.uploaded_bytes() as u64)
    }

    async fn get_inner(
        &self,
        key: &str,
        range: Option<ByteRange>,
    ) -> Result<ObjectBody, ObjectError> {
        validate_key(key)?;
        if let Some(r) = range {
            if r.end.is_some_and(|end| end < r.start) {
                return Err(ObjectError::RangeNotSatisfiable {
                    size: self.head_inner(key).await?.size,
                });
            }
        }
        let command = match range {
            None => Command::GetObject,
            Some(r) => Command::GetObjectRange {
                start: r.start,
                end: r.end,
            },
        };
        let request = ReqwestRequest::new(&self.stream_bucket, key, command)
            .await
            .map_err(s3_error)?;
        let response = match tokio::time::timeout(self.config.timeout, request.response()).await {
            Err(_) => return Err(ObjectError::Backend(format!("reading {key}: timed out"))),
            Ok(Err(S3Error::HttpFailWithBody(416, _))) => {
                return Err(ObjectError::RangeNotSatisfiable {
                    size: self.head_inner(key).await?.size,
                });
            }
            Ok(Err(e)) => return Err(s3_error(e)),
            Ok(Ok(r)) => r,
        };
        let headers = response.headers();
        let header =
            |name: http::header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
        let content_type = header(http::header::CONTENT_TYPE)
            .unwrap_or("application/octet-stream")
            .to_owned();
        let (total_size, served) = match (response.status().as_u16(), range) {
            (200, None) => {
                let len = header(http::header::CONTENT_LENGTH).and_then(|v| v.parse().ok());
                (
                    len.ok_or_else(|| {
                        ObjectError::Backend(format!("reading {key}: no Content-Length"))
                    })?,
                    None,
                )
            }
            (206, Some(_)) => {
                let (start, end, total) = header(http::header::CONTENT_RANGE)
                    .and_then(parse_content_range)
                    .ok_or_else(|| {
                        ObjectError::Backend(format!("reading {key}: bad Content-Range"))
                    })?;
                (total, Some((start, end)))
            }
            (status, _) => {
                return Err(ObjectError::Backend(format!(
                    "reading {key}: unexpected HTTP {status}"
                )));
            }
        };
        let stream = response.bytes_stream().map_err(std::io::Error::other);
        Ok(ObjectBody {
            stream: Box::pin(stream),
            total_size,
            range: served,
            content_type,
        })
    }

    async fn head_inner(&self, key: &str) -> Result<ObjectMeta, ObjectError> {
        validate_key(key)?;
        let (head, _status) = self.bucket.head_object(key).await.map_err(s3_error)?;
        Ok(ObjectMeta {
            size: head
                .content_length
                .and_then(|l| u64::try_from(l).ok())
                .unwrap_or(0),
            content_type: head
                .content_type
                .unwrap_or_else(|| "application/octet-stream".into()),
        })
    }
}

/// `bytes a-b/total` → `(a, b, total)`.
fn parse_content_range(v: &str) -> Option<(u64, u64, u64)> {
    let (range, total) = v.strip_prefix("bytes ")?.split_once('/')?;
    let (start, end) = range.split_once('-')?;
    Some((
        start.trim().parse().ok()?,
        end.trim().parse().ok()?,
        total.trim().parse().ok()?,
    ))
}

/// The upload body: counts bytes and turns "over the limit" into a read
/// error, remembering why it failed so that the put reports it exactly.
struct Limited {
    inner: ByteStream,
    seen: u64,
    max_bytes: Option<u64>,
    failure: Arc<Mutex<Option<ObjectError>>>,
}

impl Limited {
    fn fail(&self, reason: ObjectError) {
        let mut slot = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(reason);
        }
    }
}

impl Stream for Limited {
    type Item = std::io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.inner.as_mut().poll_next(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => {
                self.fail(ObjectError::Body(std::io::Error::new(
                    e.kind(),
                    e.to_string(),
                )));
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(Some(Ok(chunk))) => {
                self.seen += chunk.len() as u64;
                match self.max_bytes {
                    Some(limit) if self.seen > limit => {
                        self.fail(ObjectError::TooLarge { limit });
                        Poll::Ready(Some(Err(std::io::Error::other("object too large"))))
                    }
                    _ => Poll::Ready(Some(Ok(chunk))),
                }
            }
        }
    }
}

impl ObjectStore for S3Store {
    fn backend(&self) -> &'static str {
        "s3"
    }

    fn put<'a>(
        &'a self,
        key: &'a str,
        content_type: &'a str,
        body: ByteStream,
        max_bytes: Option<u64>,
    ) -> BoxFuture<'a, Result<u64, ObjectError>> {
        Box::pin(self.put_inner(key, content_type, body, max_bytes))
    }

    fn get<'a>(
        &'a self,
        key: &'a str,
        range: Option<ByteRange>,
    ) -> BoxFuture<'a, Result<ObjectBody, ObjectError>> {
        Box::pin(self.get_inner(key, range))
    }

    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), ObjectError>> {
        Box::pin(async move {
            validate_key(key)?;
            match self.bucket.delete_object(key).await.map_err(s3_error) {
                Ok(_) | Err(ObjectError::NotFound) => Ok(()),
                Err(e) => Err(e),
            }
        })
    }

    fn exists<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<bool, ObjectError>> {
        Box::pin(async move {
            match self.head_inner(key).await {
                Ok(_) => Ok(true),
                Err(ObjectError::NotFound) => Ok(false),
                Err(e) => Err(e),
            }
        })
    }

    fn presign_get(&self, key: &str, expires_in: Duration) -> Result<String, ObjectError> {
        validate_key(key)?;
        let secs = ceil_secs(expires_in).max(1);
        if secs > MAX_PRESIGN_SECS {
            return Err(ObjectError::Backend(format!(
                "S3 presigned URLs last at most {MAX_PRESIGN_SECS} s"
            )));
        }
        // rust-s3's presigning is async only because it reads the credentials
        // behind an async lock; with static credentials it never waits, so it
        // completes on its first poll (`unconstrained`: tokio's cooperative
        // budget must not make that poll return Pending).
        let future = tokio::task::unconstrained(self.bucket.presign_get(key, secs as u32, None));
        match future.now_or_never() {
            Some(result) => {
                result.map_err(|e| ObjectError::Backend(format!("presigning {key}: {e}")))
            }
            None => Err(ObjectError::Backend("presigning would have waited".into())),
        }
    }

    fn head<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<ObjectMeta, ObjectError>> {
        Box::pin(self.head_inner(key))
    }

    fn key_of_url(&self, url: &str) -> Option<String> {
        // Path-style `{endpoint}/{bucket}/{key}`, virtual-hosted `{scheme}://{bucket}.{host}/{key}`.
        let rest = url.strip_prefix(&self.bucket.url())?.strip_prefix('/')?;
        let path = rest.split(['?', '#']).next().unwrap_or(rest);
        let key = percent_encoding::percent_decode_str(path)
            .decode_utf8()
            .ok()?
            .into_owned();
        validate_key(&key).ok()?;
        Some(key)
    }

    fn rename<'a>(&'a self, from: &'a str, to: &'a str) -> BoxFuture<'a, Result<(), ObjectError>> {
        Box::pin(async move {
            validate_key(from)?;
            validate_key(to)?;
            if from == to {
                return self.head_inner(from).await.map(|_| ());
            }
            // `x-amz-copy-source` must be URL-encoded; rust-s3 sends it as given.
            let source = s3::signing::uri_encode(from, false);
            self.bucket
                .copy_object_internal(&source, to)
                .await
                .map_err(|e| match s3_error(e) {
                    ObjectError::NotFound => ObjectError::NotFound,
                    ObjectError::Backend(msg) if msg.contains("NoSuchKey") => ObjectError::NotFound,
                    other => ObjectError::Backend(format!("copying {from} to {to}: {other}")),
                })?;
            self.bucket
                .delete_object(from)
                .await
                .map_err(s3_error)
                .map(|_| ())
                .or_else(|e| match e {
                    ObjectError::NotFound => Ok(()),
                    other => Err(other),
                })
        })
    }
}
