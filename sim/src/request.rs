//! The buffered request every handler sees: method, path, query, headers,
//! body, and the parts of `multipart/form-data` bodies, with accessors for
//! query parameters and body fields.

use std::convert::Infallible;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, Method, StatusCode};
use serde_json::{Map, Value};

use crate::response::{error, Resp};

/// One multipart part.
#[derive(Clone, Debug)]
pub struct Part {
    /// Field name.
    pub name: String,
    /// File name, for file parts.
    pub filename: Option<String>,
    /// Part content type.
    pub content_type: Option<String>,
    /// Contents.
    pub data: Bytes,
}

/// A buffered request.
#[derive(Clone, Debug)]
pub struct Req {
    /// Method.
    pub method: Method,
    /// Path without query string.
    pub path: String,
    /// Raw query string.
    pub query: Option<String>,
    /// Headers.
    pub headers: HeaderMap,
    /// `Content-Type` header value.
    pub content_type: Option<String>,
    /// Raw body.
    pub body: Bytes,
    /// Parts, for `multipart/form-data` bodies that parse.
    pub parts: Option<Vec<Part>>,
    /// An OpenAI stream is cut off (the connection broken, no `[DONE]`)
    /// after this many events: a `stream_error` fault on an OpenAI path.
    pub break_after: Option<usize>,
}

impl Req {
    /// A request to one of the named providers (`/p/{name}/...`) with that
    /// prefix removed from its path, so it is routed as the plain path is;
    /// the log and the faults saw the whole path.
    pub fn unprefixed(&mut self) {
        let Some(rest) = self.path.strip_prefix("/p/") else {
            return;
        };
        if let Some(i) = rest.find('/') {
            self.path = rest[i..].to_owned();
        }
    }

    /// Buffers `parts` + `body`, parsing multipart bodies.
    pub async fn new(parts: http::request::Parts, body: Bytes) -> Req {
        let content_type = parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let multipart = match content_type.as_deref() {
            Some(ct) if ct.to_ascii_lowercase().starts_with("multipart/") => {
                parse_multipart(ct, body.clone()).await
            }
            _ => None,
        };
        Req {
            method: parts.method,
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().map(str::to_owned),
            headers: parts.headers,
            content_type,
            body,
            parts: multipart,
            break_after: None,
        }
    }

    /// A query parameter (first occurrence, decoded).
    pub fn query_param(&self, name: &str) -> Option<String> {
        let q = self.query.as_deref()?;
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(q).ok()?;
        pairs.into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// True for JSON bodies (or bodies without a content type that start like JSON).
    fn is_json(&self) -> bool {
        match &self.content_type {
            Some(ct) => ct.to_ascii_lowercase().contains("json"),
            None => self
                .body
                .iter()
                .find(|b| !b.is_ascii_whitespace())
                .is_some_and(|b| *b == b'{'),
        }
    }

    /// The body's fields as an object: a JSON object, the text parts of a
    /// multipart body, or a URL-encoded form. An empty body is an empty object.
    pub fn fields(&self) -> Result<Map<String, Value>, Resp> {
        if let Some(parts) = &self.parts {
            let mut m = Map::new();
            for p in parts.iter().filter(|p| p.filename.is_none()) {
                if let Ok(s) = std::str::from_utf8(&p.data) {
                    m.insert(p.name.clone(), Value::String(s.to_owned()));
                }
            }
            return Ok(m);
        }
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Map::new());
        }
        if self.is_json() {
            return match serde_json::from_slice::<Value>(&self.body) {
                Ok(Value::Object(m)) => Ok(m),
                Ok(_) => Err(error(
                    StatusCode::BAD_REQUEST,
                    "request body must be a JSON object",
                    None,
                )),
                Err(e) => Err(error(
                    StatusCode::BAD_REQUEST,
                    &format!("invalid JSON body: {e}"),
                    None,
                )),
            };
        }
        if self
            .content_type
            .as_deref()
            .is_some_and(|ct| ct.to_ascii_lowercase().contains("x-www-form-urlencoded"))
        {
            let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(&self.body)
                .map_err(|_| error(StatusCode::BAD_REQUEST, "invalid form body", None))?;
            return Ok(pairs
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect());
        }
        Err(error(
            StatusCode::BAD_REQUEST,
            "unsupported request body",
            None,
        ))
    }

    /// The first part named `name`.
    pub fn part(&self, name: &str) -> Option<&Part> {
        self.parts.as_ref()?.iter().find(|p| p.name == name)
    }
}

async fn parse_multipart(content_type: &str, body: Bytes) -> Option<Vec<Part>> {
    let boundary = multer::parse_boundary(content_type).ok()?;
    let stream = futures_util::stream::once(async move { Ok::<Bytes, Infallible>(body) });
    let mut mp = multer::Multipart::new(stream, boundary);
    let mut parts = Vec::new();
    while let Some(field) = mp.next_field().await.ok()? {
        let name = field.name().unwrap_or_default().to_owned();
        let filename = field.file_name().map(str::to_owned);
        let content_type = field.content_type().map(|m| m.to_string());
        let data = field.bytes().await.ok()?;
        parts.push(Part {
            name,
            filename,
            content_type,
            data,
        });
    }
    Some(parts)
}
