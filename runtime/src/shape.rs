//! Request shaping: from the gateway's request shape to the upstream's.
//!
//! One function per mapping a row can declare (`upstream.md`): fill the
//! upstream path template, rename fields (`text` → `data`), drop fields the
//! gateway consumes, set fixed fields (`{"fill": false}`), and read JSON
//! bodies with a size limit. The row says what; this module says how.

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use serde_json::{Map, Value};

use gateway_adapters::upstream::encode_segment;
use gateway_base::errors::ApiError;
use gateway_base::spec::{EndpointSpec, PathParams};

/// Reads a JSON object body of at most `limit` bytes. An empty body is `{}`.
pub async fn read_json_object(
    body: gateway_base::body::ReqBody,
    limit: usize,
) -> Result<Map<String, Value>, ApiError> {
    let bytes = read_limited(body, limit).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::BadRequest(
            "request body must be a JSON object".into(),
        )),
        Err(e) => Err(ApiError::BadRequest(format!(
            "request body is not valid JSON: {e}"
        ))),
    }
}

/// 413 at once when the body's declared length (`Content-Length`) is over
/// `limit`: nothing is read, and since hyper sends `100 Continue` only when
/// the body is first polled, a client that asked for it never gets it.
pub fn refuse_declared_over(
    body: &gateway_base::body::ReqBody,
    limit: u64,
) -> Result<(), ApiError> {
    use http_body::Body as _;
    let declared = body.size_hint().lower();
    if declared > limit {
        return Err(ApiError::PayloadTooLarge(format!(
            "request body is larger than {limit} bytes (Content-Length: {declared})"
        )));
    }
    Ok(())
}

/// Reads a whole body of at most `limit` bytes (413 beyond, and at once when
/// `Content-Length` already says so).
pub async fn read_limited(
    body: gateway_base::body::ReqBody,
    limit: usize,
) -> Result<Bytes, ApiError> {
    refuse_declared_over(&body, limit as u64)?;
    match Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(ApiError::PayloadTooLarge(
            format!("request body is larger than {limit} bytes"),
        )),
        Err(e) if gateway_base::body::ReqBody::timed_out(&*e) => Err(body_timed_out()),
        Err(e) => Err(ApiError::BadRequest(format!(
            "could not read the request body: {e}"
        ))),
    }
}

/// The 408 of a body that arrived too slowly.
pub fn body_timed_out() -> ApiError {
    ApiError::RequestTimeout("the request body did not arrive in time".into())
}

/// Fills the upstream path template: each `{name}` from the route's path
/// parameters, the query (`from_query`) or the body (`from_body`), each value
/// percent-encoded as one path segment. Variables taken from the query or
/// the body are removed from them.
pub fn upstream_path(
    spec: &EndpointSpec,
    template: &str,
    params: &PathParams,
    query: &mut Vec<(String, String)>,
    body: Option<&mut Map<String, Value>>,
) -> Result<String, ApiError> {
    let up = spec.upstream.as_ref();
    let from_query = up.map(|u| u.from_query).unwrap_or(&[]);
    let from_body = up.map(|u| u.from_body).unwrap_or(&[]);
    let mut body = body;
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .map(|c| open + c)
            .unwrap_or(rest.len() - 1);
        let name = &rest[open + 1..close];
        let value: String = if let Some(v) = params.get(name) {
            v.into_owned()
        } else if from_query.contains(&name) {
            let pos = query
                .iter()
                .position(|(k, _)| k == name)
                .ok_or_else(|| ApiError::BadRequest(format!("{name} is required")))?;
            query.remove(pos).1
        } else if from_body.contains(&name) {
            let v = body
                .as_deref_mut()
                .and_then(|b| b.remove(name))
                .ok_or_else(|| ApiError::BadRequest(format!("{name} is required")))?;
            match v {
                Value::String(s) => s,
                other => other.to_string(),
            }
        } else {
            // The generator refuses such rows; reaching here is a bug.
            return Err(ApiError::bug(format!(
                "row {}: template variable {name} has no source",
                spec.id
            )));
        };
        if value.is_empty() {
            return Err(ApiError::BadRequest(format!("{name} must not be empty")));
        }
        out.push_str(&encode_segment(&value));
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Applies the row's `drop`, `rename` and `set` to a JSON body.
pub fn shape_body(spec: &EndpointSpec, body: &mut Map<String, Value>) -> Result<(), ApiError> {
    for name in spec.drop {
        body.remove(*name);
    }
    for r in spec.rename {
        if let Some(v) = body.remove(r.from) {
            body.insert(r.to.to_owned(), v);
        }
    }
    if let Some(set) = spec.set {
        let fixed: Map<String, Value> = serde_json::from_str(set).map_err(|e| {
            ApiError::internal(format!("row {}: set is not a JSON object", spec.id), e)
        })?;
        body.extend(fixed);
    }
    Ok(())
}

/// Non-file body fields as multipart text parts.
pub fn text_parts(body: Map<String, Value>) -> reqwest::multipart::Form {
    let mut form = reqwest::multipart::Form::new();
    for (k, v) in body {
        let text = match v {
            Value::String(s) => s,
            Value::Null => continue,
            other => other.to_string(),
        };
        form = form.text(k, text);
    }
    form
}

/// Applies the row's `rename` to query parameter names.
pub fn shape_query(spec: &EndpointSpec, query: &mut [(String, String)]) {
    for (k, _) in query.iter_mut() {
        if let Some(r) = spec.rename.iter().find(|r| r.from == k) {
            *k = r.to.to_owned();
        }
    }
}

/// The `uuid`/`id` of an upstream answer: top level or inside `item`.
pub fn upstream_id(v: &Value) -> Option<String> {
    let pick = |o: &Value| {
        ["uuid", "id"].iter().find_map(|k| match o.get(*k) {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        })
    };
    pick(v).or_else(|| v.get("item").and_then(pick))
}

/// Looks up a dotted path (`item.enhanced_audio_url`) in a JSON value; also
/// tries the last component at top level, since the upstream answers both ways.
pub fn dotted<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    let mut ok = true;
    for part in path.split('.') {
        match cur.get(part) {
            Some(next) => cur = next,
            None => {
                ok = false;
                break;
            }
        }
    }
    if ok {
        return Some(cur);
    }
    path.rsplit('.').next().and_then(|last| v.get(last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_and_dotted_paths() {
        assert_eq!(upstream_id(&json!({"uuid": "a"})).as_deref(), Some("a"));
        assert_eq!(
            upstream_id(&json!({"item": {"uuid": "b"}})).as_deref(),
            Some("b")
        );
        assert_eq!(upstream_id(&json!({"item": {}})), None);
        let v = json!({"item": {"u": "x"}, "t": "y"});
        assert_eq!(dotted(&v, "item.u"), Some(&json!("x")));
        assert_eq!(dotted(&v, "item.t"), Some(&json!("y")));
        assert_eq!(dotted(&v, "item.z"), None);
    }
}
