//! Fetching a caller's `audio_url` to send it upstream as a file, without SSRF.
//!
//! Only `http`/`https` URLs are fetched; a host that resolves to a loopback,
//! private, link-local, unspecified or multicast address is refused unless
//! `GATEWAY_ALLOW_PRIVATE_FETCH` is on (tests and the demo, where everything
//! is on 127.0.0.1). The connection is pinned to the address that was
//! checked, so a second DNS answer cannot swap it (no DNS rebinding), and
//! redirects are not followed. The body is streamed, never buffered.

use std::net::SocketAddr;

use gateway_base::errors::ApiError;
use gateway_store::Assets;

pub use gateway_base::net::is_private;

/// Checks a URL the gateway will not fetch itself now (an `audio_url` the
/// upstream fetches, a `callback_uri` delivered later) against the same
/// policy as fetched URLs: `http`/`https` with a host, and, unless
/// `allow_private`, no host that resolves to a private, loopback or
/// link-local address. A host that does not resolve here passes (the
/// upstream resolves it itself; a callback's name may resolve later, and
/// delivery checks again with [`pinned_client`]).
pub async fn check_url(url: &str, allow_private: bool) -> Result<(), Refusal> {
    match resolve(url, allow_private).await {
        Ok(_) | Err(Refusal::Unresolved) => Ok(()),
        Err(r) => Err(r),
    }
}

/// The URL parsed, its host and the addresses it resolves to, checked by the
/// policy (see the module docs).
async fn resolve(
    url: &str,
    allow_private: bool,
) -> Result<(reqwest::Url, String, Vec<SocketAddr>), Refusal> {
    let parsed = reqwest::Url::parse(url).map_err(|_| Refusal::NotHttp("is not a valid URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(Refusal::NotHttp("must be an http or https URL"));
    }
    let host = parsed
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or(Refusal::NotHttp("has no host"))?
        .to_owned();
    let port = parsed.port_or_known_default().unwrap_or(80);
    let lookup_host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((lookup_host.as_str(), port))
        .await
        .map_err(|_| Refusal::Unresolved)?
        .collect();
    if addrs.is_empty() {
        return Err(Refusal::Unresolved);
    }
    if !allow_private && addrs.iter().any(|a| is_private(a.ip())) {
        return Err(Refusal::Private);
    }
    Ok((parsed, host, addrs))
}

/// A fetched media body, ready to stream.
pub struct Fetched {
    pub response: reqwest::Response,
    /// File name for the multipart part (last path segment of the URL).
    pub file_name: String,
    /// Content type the origin declared, or one guessed from the extension.
    pub content_type: String,
}

/// Why a URL is not reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not an http(s) URL with a host (permanent).
    NotHttp(&'static str),
    /// The host resolves to a private, loopback or link-local address (permanent).
    Private,
    /// The host does not resolve (may be temporary).
    Unresolved,
}

impl Refusal {
    /// The end of a sentence starting with the URL's name ("audio_url ...").
    pub fn describe(&self) -> &'static str {
        match self {
            Refusal::NotHttp(why) => why,
            Refusal::Private => {
                "points to a private or loopback address, which the gateway does not reach"
            }
            Refusal::Unresolved => "host could not be resolved",
        }
    }
}

/// A client that can reach only `url`'s host, pinned to the address that was
/// checked (no DNS rebinding between the check and the connection), with no
/// redirects: the one way the gateway reaches callers' URLs (fetched audio,
/// job callbacks).
pub async fn pinned_client(
    url: &str,
    allow_private: bool,
    timeout: std::time::Duration,
) -> Result<(reqwest::Client, reqwest::Url), Refusal> {
    let (parsed, host, addrs) = resolve(url, allow_private).await?;
    let addr = addrs[0];
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .tcp_nodelay(true)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .resolve(&host, addr)
        .build()
        .map_err(|_| Refusal::NotHttp("cannot be reached"))?;
    Ok((client, parsed))
}

/// Opens `url` for streaming, refusing private targets unless allowed.
pub async fn open(
    url: &str,
    allow_private: bool,
    timeout: std::time::Duration,
) -> Result<Fetched, ApiError> {
    let bad = |m: &str| ApiError::BadRequest(format!("audio_url {m}"));
    let (client, parsed) = pinned_client(url, allow_private, timeout)
        .await
        .map_err(|r| bad(r.describe()))?;
    let response = client.get(parsed.clone()).send().await.map_err(|e| {
        if e.is_timeout() {
            bad("timed out")
        } else {
            bad("could not be fetched")
        }
    })?;
    if !response.status().is_success() {
        return Err(bad(&format!(
            "could not be fetched (status {})",
            response.status().as_u16()
        )));
    }
    let file_name = parsed
        .path_segments()
        .and_then(|mut s| s.next_back().map(str::to_owned))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "audio".to_owned());
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .unwrap_or_else(|| gateway_base::media::content_type_for(&file_name).to_owned());
    Ok(Fetched {
        response,
        file_name,
        content_type,
    })
}

/// The asset behind one of the gateway's own object URLs, checked: it must
/// belong to `user_id` and not be deleted. `Ok(None)` when the URL is not one
/// of the gateway's.
pub async fn own_asset(
    gw: &crate::services::Gateway,
    user_id: Option<i64>,
    url: &str,
) -> Result<Option<gateway_store::AssetRow>, ApiError> {
    let Some(key) = gw.objects.key_of_url(url) else {
        return Ok(None);
    };
    let asset = gw
        .store
        .blocking(move |store| store.asset_by_key(&key))
        .await?;
    match asset {
        Some(a) if a.deleted_at.is_none() && a.owner_id.is_some() && a.owner_id == user_id => {
            Ok(Some(a))
        }
        _ => Err(ApiError::BadRequest(
            "audio_url refers to a stored object that does not exist, has expired, or is not yours"
                .into(),
        )),
    }
}

/// Checks an `audio_url` that the upstream will fetch itself: one of the
/// gateway's own URLs must be the caller's object; any other URL must pass
/// the fetch policy ([`check_url`]: http(s) only, no private, loopback or
/// link-local address unless `GATEWAY_ALLOW_PRIVATE_FETCH`), else 400.
pub async fn check_own(
    gw: &crate::services::Gateway,
    user_id: Option<i64>,
    url: Option<&str>,
) -> Result<(), ApiError> {
    if let Some(url) = url {
        if own_asset(gw, user_id, url).await?.is_none() {
            check_url(url, gw.config.allow_private_fetch)
                .await
                .map_err(|r| ApiError::BadRequest(format!("audio_url {}", r.describe())))?;
        }
    }
    Ok(())
}

/// Tells whether a fetched body outgrew its limit, to explain a failed
/// upstream call that was streaming it.
#[derive(Clone, Default)]
pub struct SizeGuard {
    limit: u64,
    exceeded: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl SizeGuard {
    /// `e`, or 413 when the fetched body was cut off at its limit.
    pub fn explain(&self, e: ApiError) -> ApiError {
        if self.exceeded.load(std::sync::atomic::Ordering::Acquire) {
            too_large(self.limit)
        } else {
            e
        }
    }
}

fn too_large(limit: u64) -> ApiError {
    ApiError::PayloadTooLarge(format!("audio_url is larger than {} MiB", limit >> 20))
}

/// Opens `url` as a streaming multipart file part: the gateway's own URLs
/// are read straight from the object store (no HTTP round trip, owner
/// checked); any other URL is fetched with [`open`], its body capped at
/// `max_fetch_bytes` (the upload limit) while it streams: a declared length
/// beyond it is refused (413) before anything is sent upstream, a body that
/// grows beyond it is cut off and the guard explains the failed call (413).
pub async fn open_as_part(
    gw: &crate::services::Gateway,
    user_id: Option<i64>,
    url: &str,
) -> Result<(reqwest::multipart::Part, SizeGuard), ApiError> {
    use futures_util::{StreamExt, TryStreamExt};
    if let Some(asset) = own_asset(gw, user_id, url).await? {
        let body = gw
            .objects
            .get(&asset.object_key, None)
            .await
            .map_err(|e| ApiError::internal(format!("reading {}", asset.object_key), e))?;
        let name = asset.file_name.clone().unwrap_or_else(|| {
            asset
                .object_key
                .rsplit('/')
                .next()
                .unwrap_or("audio")
                .to_owned()
        });
        let part = reqwest::multipart::Part::stream_with_length(
            reqwest::Body::wrap_stream(body.stream),
            body.total_size,
        )
        .file_name(name)
        .mime_str(&asset.content_type)
        .map_err(|e| ApiError::internal("building a multipart part", e))?;
        return Ok((part, SizeGuard::default()));
    }
    let cfg = &gw.config;
    let limit = cfg.max_fetch_bytes;
    let fetched = open(url, cfg.allow_private_fetch, cfg.upstream_timeout).await?;
    let len = fetched.response.content_length();
    if len.is_some_and(|n| n > limit) {
        return Err(too_large(limit));
    }
    let guard = SizeGuard {
        limit,
        exceeded: Default::default(),
    };
    let flag = guard.exceeded.clone();
    let mut seen = 0u64;
    let stream = fetched
        .response
        .bytes_stream()
        .map_err(std::io::Error::other)
        .map(move |chunk| {
            let chunk = chunk?;
            seen += chunk.len() as u64;
            if seen > limit {
                flag.store(true, std::sync::atomic::Ordering::Release);
                return Err(std::io::Error::other("audio_url body over the limit"));
            }
            Ok(chunk)
        });
    let body = reqwest::Body::wrap_stream(stream);
    let part = match len {
        Some(n) => reqwest::multipart::Part::stream_with_length(body, n),
        None => reqwest::multipart::Part::stream(body),
    };
    let part = part
        .file_name(fetched.file_name)
        .mime_str(&fetched.content_type)
        .map_err(|e| ApiError::internal("building a multipart part", e))?;
    Ok((part, guard))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn urls_the_gateway_does_not_fetch_follow_the_same_policy() {
        for url in [
            "file:///etc/passwd",
            "ftp://example.com/a.wav",
            "gopher://x/",
            "http://127.0.0.1/a.wav",
            "http://[::1]/a.wav",
            "http://[::127.0.0.1]/a.wav",
            "http://[::ffff:127.0.0.1]/a.wav",
            "http://[64:ff9b::a9fe:a9fe]/latest/meta-data",
            "http://[2002:7f00:1::]/a.wav",
            "http://169.254.169.254/latest/meta-data",
            "http://localhost:8080/a.wav",
        ] {
            assert!(check_url(url, false).await.is_err(), "{url}");
        }
        assert_eq!(
            check_url("http://127.0.0.1/a.wav", true).await,
            Ok(()),
            "allowed by GATEWAY_ALLOW_PRIVATE_FETCH"
        );
        assert!(check_url("file:///etc/passwd", true).await.is_err());
        assert_eq!(check_url("https://8.8.8.8/a.wav", false).await, Ok(()));
    }

    #[tokio::test]
    async fn loopback_refused_unless_allowed() {
        let e = open(
            "http://127.0.0.1:9/x.wav",
            false,
            std::time::Duration::from_secs(1),
        )
        .await
        .err()
        .unwrap();
        assert!(
            e.message().contains("private or loopback"),
            "{}",
            e.message()
        );
        let e = open(
            "file:///etc/passwd",
            true,
            std::time::Duration::from_secs(1),
        )
        .await
        .err()
        .unwrap();
        assert!(e.message().contains("http"), "{}", e.message());
    }
}
