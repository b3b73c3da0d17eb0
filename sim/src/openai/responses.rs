//! OpenAI's Responses API: `POST /v1/responses` and the stored response's
//! routes (`GET` / `DELETE /v1/responses/{id}`, `GET
//! /v1/responses/{id}/input_items`, `POST /v1/responses/{id}/cancel`).
//!
//! A request is read by [`super::responses_input`] (unknown fields and
//! hosted tools refused), answered by [`super::responses_answer`] (the
//! chat model's reply in output items), streamed by
//! [`super::responses_stream`], and kept by API key (the credential the
//! request presents) in [`super::responses_store`] unless `store` is
//! false: a later `previous_response_id` continues it (its turns counted
//! as input, as OpenAI bills them); an unknown one is a 404
//! `previous_response_not_found`. A `background` response answers
//! `queued` at once, turns `in_progress` after a quarter of
//! [`background_ms`](crate::shared::Shared::background_ms) and is
//! generated at its end; `cancel` before then makes it `cancelled` (a
//! response made without `background` cannot be cancelled: 400). A
//! background request is answered whole, even with `stream`.
//! `max_output_tokens` may be as low as 1 (OpenAI asks for 16), so a test
//! can cut the short simulated reply.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use http::header::AUTHORIZATION;
use http::{HeaderMap, StatusCode};
use serde_json::{json, Map, Value};

use super::errors::{error_body, fields, invalid, missing, oai_error};
use super::responses_answer::{effort, generate, Ask, Output};
use super::responses_input as input;
use super::responses_store::{page, StoredResponse};
use super::responses_stream;
use super::video::unix_now;
use super::wire::short_id;
use crate::request::Req;
use crate::response::{json_response, Resp};
use crate::shared::Shared;

/// `POST /v1/responses`.
pub(super) fn create(sh: &Arc<Shared>, req: &Req) -> Result<Resp, Resp> {
    let f = fields(req)?;
    input::check_fields(&f)?;
    let tools = input::tools(&f)?;
    let items = input::items(&f)?;
    let max = match f.get("max_output_tokens") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().filter(|n| *n > 0).ok_or_else(|| {
            invalid(
                "max_output_tokens",
                "'max_output_tokens' must be a positive integer.",
            )
        })?),
    };
    let store = f.get("store").and_then(Value::as_bool) != Some(false);
    let background = f.get("background").and_then(Value::as_bool) == Some(true);
    if background && !store {
        return Err(invalid(
            "background",
            "Background mode requires 'store' to be true.",
        ));
    }
    let key = api_key(&req.headers);
    let previous = f.get("previous_response_id").and_then(Value::as_str);
    let mut history = match previous {
        Some(id) => earlier(sh, &key, id)?,
        None => Vec::new(),
    };
    history.extend(input::messages(&items));
    if history.is_empty() {
        return Err(missing("input"));
    }
    let mut messages = input::instructions(&f);
    messages.extend(history.iter().cloned());
    let chat = input::chat_body(&f, messages, &tools);
    let model = f.get("model").and_then(Value::as_str).unwrap_or("sim-gpt");
    let out = generate(&Ask {
        model,
        reasoning: f.get("reasoning"),
        max,
        chat: &chat,
        strict: sh.strict_tokens.load(Ordering::Relaxed),
    });
    history.extend(input::messages(&out.items));
    let response = object(&f, model, &tools, out);
    if store {
        let id = response["id"].as_str().unwrap_or_default().to_owned();
        let stored = StoredResponse {
            status: if background {
                "queued"
            } else {
                status_of(&response)
            },
            answer: response.clone(),
            input: items,
            history,
        };
        let rendered = stored.render();
        let mut st = sh.store.lock().unwrap();
        st.responses.by_id.insert((key.clone(), id.clone()), stored);
        drop(st);
        if background {
            run_background(sh, key, id);
            return Ok(json_response(StatusCode::OK, &rendered));
        }
    }
    if f.get("stream").and_then(Value::as_bool) == Some(true) {
        let frames = responses_stream::frames(&response);
        return Ok(crate::llm::sse_cut(sh, frames, req.break_after));
    }
    Ok(json_response(StatusCode::OK, &response))
}

/// The response object's `status`, as a static string.
fn status_of(response: &Value) -> &'static str {
    if response["status"] == "incomplete" {
        "incomplete"
    } else {
        "completed"
    }
}

/// The response object of `out`: OpenAI's `Response`, the request's
/// settings echoed with OpenAI's defaults.
fn object(f: &Map<String, Value>, model: &str, tools: &[Value], out: Output) -> Value {
    let get = |k: &str, default: Value| {
        f.get(k)
            .filter(|v| !v.is_null())
            .cloned()
            .unwrap_or(default)
    };
    let created = unix_now();
    let (status, incomplete, completed_at) = if out.cut {
        (
            "incomplete",
            json!({"reason": "max_output_tokens"}),
            Value::Null,
        )
    } else {
        ("completed", Value::Null, json!(created))
    };
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| {
            let mut t = t.clone();
            for (k, v) in [("description", Value::Null), ("strict", json!(true))] {
                t.as_object_mut().map(|o| o.entry(k).or_insert(v));
            }
            t
        })
        .collect();
    let reasoning = f.get("reasoning");
    let text = json!({
        "format": f.get("text").and_then(|t| t.get("format")).cloned().unwrap_or(json!({"type": "text"})),
        "verbosity": f.get("text").and_then(|t| t.get("verbosity")).cloned().unwrap_or(json!("medium")),
    });
    json!({
        "id": short_id("resp_"),
        "object": "response",
        "created_at": created,
        "status": status,
        "background": get("background", json!(false)),
        "completed_at": completed_at,
        "error": null,
        "incomplete_details": incomplete,
        "instructions": get("instructions", Value::Null),
        "max_output_tokens": get("max_output_tokens", Value::Null),
        "max_tool_calls": get("max_tool_calls", Value::Null),
        "model": model,
        "output": out.items,
        "parallel_tool_calls": get("parallel_tool_calls", json!(true)),
        "previous_response_id": get("previous_response_id", Value::Null),
        "prompt_cache_key": get("prompt_cache_key", Value::Null),
        "reasoning": {
            "effort": effort(model, reasoning),
            "summary": reasoning.and_then(|r| r.get("summary")).cloned().unwrap_or(Value::Null),
        },
        "safety_identifier": get("safety_identifier", Value::Null),
        "service_tier": "default",
        "store": get("store", json!(true)),
        "temperature": get("temperature", json!(1.0)),
        "text": text,
        "tool_choice": get("tool_choice", json!("auto")),
        "tools": tools,
        "top_logprobs": get("top_logprobs", json!(0)),
        "top_p": get("top_p", json!(1.0)),
        "truncation": get("truncation", json!("disabled")),
        "usage": out.usage,
        "user": get("user", Value::Null),
        "metadata": get("metadata", json!({})),
    })
}

/// The conversation up to stored response `id` of `key`, or OpenAI's 404
/// `previous_response_not_found`.
fn earlier(sh: &Shared, key: &str, id: &str) -> Result<Vec<Value>, Resp> {
    let st = sh.store.lock().unwrap();
    match st.responses.by_id.get(&(key.to_owned(), id.to_owned())) {
        Some(r) => Ok(r.history.clone()),
        None => Err(not_found(
            &format!("Previous response with id '{id}' not found."),
            Some("previous_response_id"),
            Some("previous_response_not_found"),
        )),
    }
}

/// Moves background response `id` of `key` to `in_progress` after a
/// quarter of [`Shared::background_ms`], then to its answer's status at
/// its end, unless it was cancelled (or deleted) meanwhile.
fn run_background(sh: &Arc<Shared>, key: String, id: String) {
    let total = Duration::from_millis(sh.background_ms.load(Ordering::Relaxed));
    let shared = sh.clone();
    sh.spawn(async move {
        let set = |to: Option<&'static str>| {
            let mut st = shared.store.lock().unwrap();
            if let Some(r) = st.responses.by_id.get_mut(&(key.clone(), id.clone())) {
                if r.pending() {
                    r.status = to.unwrap_or_else(|| status_of(&r.answer));
                }
            }
        };
        tokio::time::sleep(total / 4).await;
        set(Some("in_progress"));
        tokio::time::sleep(total - total / 4).await;
        set(None);
    });
}

/// The credential a request presents (`Authorization` bearer or token,
/// else `x-access-token`; empty without one): responses are kept apart by it.
fn api_key(headers: &HeaderMap) -> String {
    if let Some(v) = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        let v = v.trim();
        let (_, rest) = v.split_once(' ').unwrap_or(("", v));
        let rest = rest.trim();
        return rest
            .strip_prefix("token=")
            .unwrap_or(rest)
            .trim_matches('"')
            .to_owned();
    }
    headers
        .get("x-access-token")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned())
        .unwrap_or_default()
}

/// A 404 in OpenAI's shape for a missing response (type
/// `invalid_request_error`, as OpenAI answers it).
fn not_found(message: &str, param: Option<&str>, code: Option<&str>) -> Resp {
    let mut body = error_body(StatusCode::NOT_FOUND, message, param, code);
    body["error"]["type"] = json!("invalid_request_error");
    json_response(StatusCode::NOT_FOUND, &body)
}

/// 404 for an unknown response id.
fn unknown(id: &str) -> Resp {
    not_found(&format!("Response with id '{id}' not found."), None, None)
}

/// Runs `f` on stored response `id` of the request's key, or 404.
fn with<T>(
    sh: &Shared,
    req: &Req,
    id: &str,
    f: impl FnOnce(&mut StoredResponse) -> T,
) -> Result<T, Resp> {
    let mut st = sh.store.lock().unwrap();
    let r = st
        .responses
        .by_id
        .get_mut(&(api_key(&req.headers), id.to_owned()))
        .ok_or_else(|| unknown(id))?;
    Ok(f(r))
}

/// `GET /v1/responses/{id}`: the response as it stands.
pub(super) fn get(sh: &Shared, req: &Req, id: &str) -> Result<Resp, Resp> {
    let r = with(sh, req, id, |r| r.render())?;
    Ok(json_response(StatusCode::OK, &r))
}

/// `DELETE /v1/responses/{id}`: forgets it.
pub(super) fn delete(sh: &Shared, req: &Req, id: &str) -> Result<Resp, Resp> {
    let key = (api_key(&req.headers), id.to_owned());
    if sh
        .store
        .lock()
        .unwrap()
        .responses
        .by_id
        .remove(&key)
        .is_none()
    {
        return Err(unknown(id));
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({"id": id, "object": "response", "deleted": true}),
    ))
}

/// `POST /v1/responses/{id}/cancel`: an unfinished background response
/// becomes `cancelled` (a finished one is answered as it is); one made
/// without `background` is a 400.
pub(super) fn cancel(sh: &Shared, req: &Req, id: &str) -> Result<Resp, Resp> {
    let r = with(sh, req, id, |r| {
        if r.answer["background"] != true {
            return None;
        }
        if r.pending() {
            r.status = "cancelled";
        }
        Some(r.render())
    })?;
    let r = r.ok_or_else(|| {
        oai_error(
            StatusCode::BAD_REQUEST,
            "Cannot cancel a synchronous response.",
            None,
            None,
        )
    })?;
    Ok(json_response(StatusCode::OK, &r))
}

/// `GET /v1/responses/{id}/input_items?after=&limit=&order=`: the
/// request's input items, a page (`limit` 1 to 100, default 20; `order`
/// `desc`, the default, or `asc`) in OpenAI's list shape.
pub(super) fn input_items(sh: &Shared, req: &Req, id: &str) -> Result<Resp, Resp> {
    let limit = match req.query_param("limit") {
        None => 20,
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|l| (1..=100).contains(l))
            .ok_or_else(|| invalid("limit", "'limit' must be an integer from 1 to 100."))?,
    };
    let asc = match req.query_param("order").as_deref() {
        None | Some("desc") => false,
        Some("asc") => true,
        Some(_) => return Err(invalid("order", "'order' must be 'asc' or 'desc'.")),
    };
    let after = req.query_param("after");
    let list = with(sh, req, id, |r| {
        page(&r.input, after.as_deref(), limit, asc)
    })?;
    Ok(json_response(StatusCode::OK, &list))
}
