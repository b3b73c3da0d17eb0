//! Google's Gemini API (`/v1beta`), on the same port ([`crate::Sim::url`]
//! is its base). Logged and faultable like every provider call. Field names
//! are accepted in camelCase and snake_case, as Google's JSON parser does.
//!
//! | Method | Path | Notes |
//! |---|---|---|
//! | POST | `/v1beta/models/{model}:generateContent` | `contents` (roles `user` / `model` / `function`; parts `text`, `inlineData` / `fileData` images, `functionCall`, `functionResponse`) required; `systemInstruction`, `generationConfig` (`maxOutputTokens` ≥ 1, `stopSequences`, `temperature`…; `responseMimeType: application/json` with `responseJsonSchema` or `responseSchema`: the text is the schema's smallest instance), `tools[].functionDeclarations`, `toolConfig.functionCallingConfig` (`AUTO` / `ANY` / `NONE`, `allowedFunctionNames`), `cachedContent` |
//! | POST | `/v1beta/models/{model}:streamGenerateContent` | the same; `?alt=sse`: server-sent events (`data: {…}\r\n\r\n`, Google's separators), one GenerateContentResponse per word, `finishReason` and `usageMetadata` in the last; without `alt=sse` a JSON array of the same chunks |
//! | POST | `/v1beta/models/{model}:countTokens` | `{"totalTokens": N}` |
//! | POST | `/v1beta/models/{model}:embedContent` | `content.parts[].text` → `{"embedding": {"values"}}` (`outputDimensionality`, default 16; the OpenAI simulation's deterministic unit vectors) |
//! | POST | `/v1beta/models/{model}:batchEmbedContents` | `requests[]` (each `model`, when given, `models/{model}`) → `{"embeddings": [{"values"}]}` |
//! | POST | `/v1beta/cachedContents` | `model`, `contents`, `systemInstruction`… → `{"name": "cachedContents/…", "usageMetadata": {"totalTokenCount"}}` |
//!
//! **Key**: `x-goog-api-key` is required (the `?key=` query form is not
//! accepted: keys stay out of URLs); missing → 403 `PERMISSION_DENIED`; when
//! `api_key` is configured, another key → 401 `UNAUTHENTICATED` (Google
//! itself answers 400 `INVALID_ARGUMENT` with reason `API_KEY_INVALID`,
//! which the 401's `details` carry too).
//!
//! **Answers** follow [`crate::llm`]'s rules: a text part (`finishReason`
//! `STOP`, or `MAX_TOKENS` when `maxOutputTokens` cut it; a stop sequence
//! cuts it with `STOP`, as Google does), or a `functionCall` part
//! `{name, args}` (`STOP`) when a function is picked.
//!
//! **Tokens** ([`Tokenizer`]): each `systemInstruction` and content part —
//! text its text, an `inlineData` PDF [`Tokenizer::pdf`], `inlineData` / `fileData` [`Tokenizer::image`],
//! `functionCall` name + args JSON, `functionResponse` name + response
//! JSON — and each function declaration's JSON; strict: 4 + role per
//! content and 3 per request. A `cachedContent` adds its tokens (counted the
//! same way when created) to `promptTokenCount` and reports them as
//! `cachedContentTokenCount`; an unknown one is 403 `PERMISSION_DENIED`.
//! `candidatesTokenCount`: the words of the text, or name + args of a call,
//! at most `maxOutputTokens`.
//!
//! Errors: `{"error": {"code", "message", "status"}}` ([`error_body`]); a
//! `stream_error` fault ([`crate::faults`]) ends an SSE stream with
//! `data: {"error": {…}}`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Value};

use crate::llm::{self, Finish};
use crate::openai::tokens::{Tokenizer, GEMINI_PDF_PAGE};
use crate::request::Req;
use crate::response::{json_response, Resp};
use crate::shared::Shared;

type R = Result<Resp, Resp>;

/// True for the paths this module answers.
pub fn owns(path: &str) -> bool {
    path.starts_with("/v1beta/")
}

/// Google's status name of an HTTP status.
pub fn status_name(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        500 => "INTERNAL",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    }
}

/// `{"error": {"code", "message", "status"}}`.
pub fn error_body(status: StatusCode, message: &str) -> Value {
    json!({"error": {"code": status.as_u16(), "message": message, "status": status_name(status)}})
}

fn err(status: StatusCode, message: &str) -> Resp {
    json_response(status, &error_body(status, message))
}

fn bad(message: &str) -> Resp {
    err(StatusCode::BAD_REQUEST, message)
}

/// A field by its camelCase or snake_case name.
fn get<'a>(v: &'a Value, camel: &str) -> Option<&'a Value> {
    if let Some(x) = v.get(camel) {
        return Some(x);
    }
    let mut snake = String::new();
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            snake.push('_');
            snake.push(c.to_ascii_lowercase());
        } else {
            snake.push(c);
        }
    }
    v.get(snake)
}

fn list<'a>(v: &'a Value, camel: &str) -> &'a [Value] {
    get(v, camel)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Answers one request under `/v1beta/`; `stream_error` is a `stream_error`
/// fault that matched it.
pub fn route(sh: &Arc<Shared>, req: &Req, stream_error: Option<(StatusCode, usize)>) -> Resp {
    route_inner(sh, req, stream_error).unwrap_or_else(|e| e)
}

fn route_inner(sh: &Arc<Shared>, req: &Req, stream_error: Option<(StatusCode, usize)>) -> R {
    let got = req
        .headers
        .get("x-goog-api-key")
        .and_then(|v| v.to_str().ok());
    match (got, sh.config.read().unwrap().api_key.as_deref()) {
        (None, _) => return Err(err(StatusCode::FORBIDDEN, "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.")),
        (Some(g), Some(want)) if g.trim() != want => {
            let mut body = error_body(StatusCode::UNAUTHORIZED, "API key not valid. Please pass a valid API key.");
            body["error"]["details"] = json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]);
            return Err(json_response(StatusCode::UNAUTHORIZED, &body));
        }
        _ => {}
    }
    let body = match serde_json::from_slice::<Value>(&req.body) {
        Ok(v @ Value::Object(_)) => v,
        _ => return Err(bad("Invalid JSON payload received.")),
    };
    let tok = Tokenizer {
        strict: sh.strict_tokens.load(Ordering::Relaxed),
    };
    let rest = req.path.trim_start_matches("/v1beta/");
    if req.method == http::Method::POST && rest == "cachedContents" {
        return cache_create(sh, tok, &body);
    }
    let (model, method) = rest
        .strip_prefix("models/")
        .and_then(|m| m.rsplit_once(':'))
        .ok_or_else(|| err(StatusCode::NOT_FOUND, &format!("Not found: {}", req.path)))?;
    if req.method != http::Method::POST {
        return Err(err(
            StatusCode::NOT_FOUND,
            &format!("Not found: {} {}", req.method, req.path),
        ));
    }
    match method {
        "generateContent" => generate(sh, tok, model, &body, None),
        "streamGenerateContent" => {
            let sse = req.query_param("alt").as_deref() == Some("sse");
            generate(sh, tok, model, &body, Some((sse, stream_error)))
        }
        "countTokens" => {
            validate(&body)?;
            let n = prompt_tokens(tok, &body);
            Ok(json_response(StatusCode::OK, &json!({"totalTokens": n})))
        }
        "embedContent" => {
            let values = embed(&body)?;
            Ok(json_response(
                StatusCode::OK,
                &json!({"embedding": {"values": values}}),
            ))
        }
        "batchEmbedContents" => {
            let reqs = list(&body, "requests");
            if reqs.is_empty() {
                return Err(bad(
                    "* BatchEmbedContentsRequest.requests: requests is not specified",
                ));
            }
            let mut out = Vec::new();
            for r in reqs {
                let named = get(r, "model").and_then(Value::as_str);
                if named.is_some_and(|n| n != format!("models/{model}")) {
                    return Err(bad(&format!(
                        "Model {} differs from the batch's models/{model}.",
                        named.unwrap_or_default()
                    )));
                }
                out.push(json!({"values": embed(r)?}));
            }
            Ok(json_response(StatusCode::OK, &json!({"embeddings": out})))
        }
        _ => Err(err(
            StatusCode::NOT_FOUND,
            &format!("Method {method} not found for models/{model}."),
        )),
    }
}

fn embed(r: &Value) -> Result<Vec<f64>, Resp> {
    let parts = get(r, "content").map(|c| list(c, "parts")).unwrap_or(&[]);
    let text: Vec<&str> = parts
        .iter()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    if text.is_empty() {
        return Err(bad(
            "* EmbedContentRequest.content: contents is not specified",
        ));
    }
    let dims = match get(r, "outputDimensionality") {
        None => 16,
        Some(d) => match d.as_u64() {
            Some(d @ 1..=4096) => d as usize,
            _ => return Err(bad("outputDimensionality must be between 1 and 4096")),
        },
    };
    Ok(crate::openai::unit_vector(&text.join(" "), dims))
}

fn part_tokens(tok: Tokenizer, p: &Value) -> u64 {
    let inline = get(p, "inlineData");
    let pdf = inline.filter(|d| get(d, "mimeType") == Some(&json!("application/pdf")));
    if let Some(t) = p.get("text").and_then(Value::as_str) {
        tok.text(t)
    } else if let Some(d) = pdf {
        get(d, "data")
            .and_then(Value::as_str)
            .and_then(|data| tok.pdf(data, GEMINI_PDF_PAGE))
            .unwrap_or_else(|| tok.json(p))
    } else if inline.is_some() || get(p, "fileData").is_some() {
        tok.image()
    } else if let Some(c) = get(p, "functionCall").or_else(|| get(p, "functionResponse")) {
        let name = c
            .get("name")
            .and_then(Value::as_str)
            .map_or(0, |n| tok.text(n));
        name + c
            .get("args")
            .or_else(|| c.get("response"))
            .map_or(0, |a| tok.json(a))
    } else {
        tok.json(p)
    }
}

/// Prompt tokens of a request or cached content (rule in the module docs),
/// without its `cachedContent`.
fn prompt_tokens(tok: Tokenizer, body: &Value) -> u64 {
    let mut n = 0;
    if let Some(sys) = get(body, "systemInstruction") {
        n += list(sys, "parts")
            .iter()
            .map(|p| part_tokens(tok, p))
            .sum::<u64>();
    }
    for c in list(body, "contents") {
        let role = c.get("role").and_then(Value::as_str).unwrap_or("user");
        n += list(c, "parts")
            .iter()
            .map(|p| part_tokens(tok, p))
            .sum::<u64>();
        if tok.strict {
            n += 4 + tok.text(role);
        }
    }
    for t in list(body, "tools") {
        n += list(t, "functionDeclarations")
            .iter()
            .map(|d| tok.json(d))
            .sum::<u64>();
    }
    n + if tok.strict { 3 } else { 0 }
}

fn validate(body: &Value) -> Result<(), Resp> {
    let contents = list(body, "contents");
    if contents.is_empty() {
        return Err(bad(
            "* GenerateContentRequest.contents: contents is not specified",
        ));
    }
    for (i, c) in contents.iter().enumerate() {
        if !matches!(
            c.get("role").and_then(Value::as_str),
            None | Some("user" | "model" | "function")
        ) {
            return Err(bad(&format!(
                "Please use a valid role: user, model. (contents[{i}])"
            )));
        }
        let parts = list(c, "parts");
        if parts.is_empty() {
            return Err(bad(&format!(
                "* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty."
            )));
        }
        for p in parts {
            if let Some(d) = get(p, "inlineData") {
                if get(d, "mimeType").and_then(Value::as_str).is_none()
                    || d.get("data").and_then(Value::as_str).is_none()
                {
                    return Err(bad(&format!("* GenerateContentRequest.contents[{i}].parts: inline_data needs mime_type and data")));
                }
            }
        }
    }
    if let Some(m) = get(body, "generationConfig").and_then(|g| get(g, "maxOutputTokens")) {
        if m.as_u64().is_none_or(|m| m < 1) {
            return Err(bad("* GenerateContentRequest.generation_config.max_output_tokens: must be a positive integer"));
        }
    }
    Ok(())
}

fn cache_create(sh: &Arc<Shared>, tok: Tokenizer, body: &Value) -> R {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("* CachedContent.model: model is not specified"))?;
    validate(body)?;
    let n = prompt_tokens(tok, body);
    let name = format!(
        "cachedContents/{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    sh.store
        .lock()
        .unwrap()
        .cached_contents
        .insert(name.clone(), n);
    let now = chrono::Utc::now();
    let expire = now + chrono::Duration::hours(1);
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "name": name, "model": model, "createTime": now.to_rfc3339(), "updateTime": now.to_rfc3339(),
            "expireTime": expire.to_rfc3339(), "usageMetadata": {"totalTokenCount": n},
        }),
    ))
}

/// The model's parts, finishReason and candidate tokens.
fn answer(body: &Value) -> (Vec<Value>, &'static str, u64) {
    let contents = list(body, "contents");
    let last = contents
        .iter()
        .rev()
        .find(|c| c.get("role").and_then(Value::as_str) != Some("model"));
    let parts = last.map(|c| list(c, "parts")).unwrap_or(&[]);
    let user_text: Vec<&str> = parts
        .iter()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    let responses: Vec<String> = parts
        .iter()
        .filter_map(|p| get(p, "functionResponse"))
        .map(|r| {
            r.get("response")
                .map_or_else(String::new, |v| v.to_string().replace([',', ':'], " "))
        })
        .collect();
    let decls: Vec<&Value> = list(body, "tools")
        .iter()
        .flat_map(|t| list(t, "functionDeclarations"))
        .collect();
    let names: Vec<String> = decls
        .iter()
        .filter_map(|d| d.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    let fcc = get(body, "toolConfig").and_then(|t| get(t, "functionCallingConfig"));
    let mode = fcc
        .and_then(|f| f.get("mode"))
        .and_then(Value::as_str)
        .unwrap_or("AUTO");
    let allowed = fcc.map(|f| list(f, "allowedFunctionNames")).unwrap_or(&[]);
    let forced = (mode == "ANY").then(|| match allowed {
        [one] => one.as_str().unwrap_or(""),
        _ => "",
    });
    let gc = get(body, "generationConfig")
        .cloned()
        .unwrap_or(Value::Null);
    let max = get(&gc, "maxOutputTokens").and_then(Value::as_u64);
    let pick = responses
        .is_empty()
        .then(|| llm::pick_tool(&names, &user_text.join(" "), forced, mode == "NONE"))
        .flatten();
    if let Some(name) = pick {
        let schema = decls
            .iter()
            .find(|d| d.get("name").and_then(Value::as_str) == Some(name.as_str()))
            .and_then(|d| d.get("parameters"))
            .cloned()
            .unwrap_or(Value::Null);
        let args = llm::sample_args(&schema);
        let out = Tokenizer { strict: false };
        let n = (out.text(&name) + out.json(&args)).min(max.unwrap_or(u64::MAX));
        return (
            vec![json!({"functionCall": {"name": name, "args": args}})],
            "STOP",
            n,
        );
    }
    // Structured output (`responseMimeType: application/json` with
    // `responseJsonSchema` or the older `responseSchema`): the text is the
    // schema's smallest instance, as OpenAI's and Anthropic's sides answer.
    let schema = (get(&gc, "responseMimeType").and_then(Value::as_str) == Some("application/json"))
        .then(|| get(&gc, "responseJsonSchema").or_else(|| get(&gc, "responseSchema")))
        .flatten();
    if let Some(s) = schema {
        let text = crate::schema::instance(s).to_string();
        let n = Tokenizer { strict: false }.text(&text);
        return (vec![json!({"text": text})], "STOP", n);
    }
    let stops: Vec<String> = list(&gc, "stopSequences")
        .iter()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect();
    let result = (!responses.is_empty()).then(|| responses.join(" "));
    let reply = llm::text_reply(&user_text.join(" "), result.as_deref(), max, &stops);
    let finish = if reply.finish == Finish::MaxTokens {
        "MAX_TOKENS"
    } else {
        "STOP"
    };
    let pieces = if reply.pieces.is_empty() {
        vec![String::new()]
    } else {
        reply.pieces.clone()
    };
    let n = reply.tokens();
    (
        pieces.into_iter().map(|t| json!({"text": t})).collect(),
        finish,
        n,
    )
}

fn generate(
    sh: &Arc<Shared>,
    tok: Tokenizer,
    model: &str,
    body: &Value,
    stream: Option<(bool, Option<(StatusCode, usize)>)>,
) -> R {
    validate(body)?;
    let cached = match body
        .get("cachedContent")
        .or_else(|| body.get("cached_content"))
        .and_then(Value::as_str)
    {
        None => 0,
        Some(name) => *sh
            .store
            .lock()
            .unwrap()
            .cached_contents
            .get(name)
            .ok_or_else(|| {
                err(
                    StatusCode::FORBIDDEN,
                    &format!("CachedContent not found (or permission denied): {name}"),
                )
            })?,
    };
    let prompt = prompt_tokens(tok, body) + cached;
    let (parts, finish, out) = answer(body);
    let mut usage = json!({"promptTokenCount": prompt, "candidatesTokenCount": out, "totalTokenCount": prompt + out});
    if cached > 0 {
        usage["cachedContentTokenCount"] = json!(cached);
    }
    let id = llm::new_id("");
    let chunk = |parts: Vec<Value>, last: bool| {
        let mut cand = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        let mut c = json!({"candidates": [], "modelVersion": model, "responseId": id});
        if last {
            cand["finishReason"] = json!(finish);
            c["usageMetadata"] = usage.clone();
        }
        c["candidates"] = json!([cand]);
        c
    };
    let Some((sse, stream_error)) = stream else {
        let joined = if parts.iter().all(|p| p.get("text").is_some()) {
            let text: String = parts.iter().filter_map(|p| p["text"].as_str()).collect();
            vec![json!({"text": text})]
        } else {
            parts
        };
        return Ok(json_response(StatusCode::OK, &chunk(joined, true)));
    };
    let count = parts.len();
    let chunks: Vec<Value> = parts
        .into_iter()
        .enumerate()
        .map(|(i, p)| chunk(vec![p], i + 1 == count))
        .collect();
    if !sse {
        return Ok(json_response(StatusCode::OK, &chunks));
    }
    let mut frames: Vec<String> = Vec::new();
    for (i, c) in chunks.iter().enumerate() {
        if let Some((status, after)) = stream_error {
            // Fewer chunks than `after`: the error replaces the last one.
            if i == after.min(count - 1) {
                let msg = status
                    .canonical_reason()
                    .unwrap_or("The service is currently unavailable.");
                frames.push(format!("data: {}\r\n\r\n", error_body(status, msg)));
                break;
            }
        }
        frames.push(format!("data: {c}\r\n\r\n"));
    }
    Ok(llm::sse(sh, frames))
}
