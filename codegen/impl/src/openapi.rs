//! The OpenAPI 3.1 document of a validated [`Table`], as data.
//!
//! [`document`] builds it from the resolved rows only: one operation per row
//! (path and query parameters, the JSON body typed from the row's field
//! rules, the area's error shape, the security scheme of its `auth`, and the
//! success shape where the gateway defines it, and the `links` from an
//! operation that creates something to those taking its id: [`crate::links`]).
//! The expansion embeds the
//! rendered text as `pub static OPENAPI_JSON: &str`; the runtime serves it
//! at `/openapi.json` and renders nothing itself.

use serde_json::{json, Map, Value};

use crate::table::*;

/// The OpenAPI document of `table`.
pub fn document(table: &Table) -> Value {
    let mut paths = Map::new();
    for row in &table.rows {
        let item = paths
            .entry(row.path.replace("*}", "}"))
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(item) = item else {
            unreachable!("path items are objects")
        };
        item.insert(
            row.method.as_str().to_ascii_lowercase(),
            operation(table, row),
        );
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "AI-API gateway",
            "version": "1",
            "description": "Generated from endpoints.toml: one operation per row of the route table.",
        },
        "tags": [
            {"name": "voice", "description": "Voice-audio API (errors: {\"detail\"})"},
            {"name": "gateway", "description": "General AI gateway"},
        ],
        "paths": Value::Object(paths),
        "components": components(),
    })
}

/// [`document`] rendered as compact JSON text.
pub fn document_text(table: &Table) -> String {
    document(table).to_string()
}

fn operation(table: &Table, row: &Row) -> Value {
    let mut op = Map::new();
    op.insert("operationId".into(), json!(row.id));
    if !row.summary.is_empty() {
        op.insert("summary".into(), json!(row.summary));
    }
    op.insert("tags".into(), json!([row.area.as_str()]));
    let mut parameters: Vec<Value> = row
        .params
        .iter()
        .map(|p| {
            json!({
                "name": p, "in": "path", "required": true,
                "schema": {"type": "string", "minLength": 1},
            })
        })
        .collect();
    parameters.extend(row.query.iter().map(|f| {
        json!({
            "name": f.name, "in": "query", "required": f.required,
            "schema": field_schema(f),
        })
    }));
    if row.mode == Mode::StripeWebhook {
        parameters.push(json!({
            "name": "Stripe-Signature", "in": "header", "required": false,
            "description": "`t=<unix>,v1=<hex>`: HMAC-SHA256 of `{t}.{raw body}` with STRIPE_WEBHOOK_SECRET (300 s tolerance); without a valid one the answer is 400",
            "schema": {"type": "string"},
        }));
    }
    if !parameters.is_empty() {
        op.insert("parameters".into(), Value::Array(parameters));
    }
    if let Some(body) = request_body(row) {
        op.insert("requestBody".into(), body);
    }
    op.insert("security".into(), security(row.auth));
    op.insert("responses".into(), responses(table, row));
    let mut ext = Map::new();
    ext.insert("mode".into(), json!(row.mode.as_str()));
    ext.insert("billing".into(), json!(row.billing.as_str()));
    ext.insert("capability".into(), json!(row.capability));
    if let Some(gate) = row.gate {
        ext.insert("gate".into(), json!(gate.as_str()));
    }
    op.insert("x-gateway".into(), Value::Object(ext));
    Value::Object(op)
}

/// The JSON Schema of one field rule.
pub fn field_schema(f: &FieldRule) -> Value {
    let mut s = Map::new();
    let ty = match f.ty {
        FieldType::String => Some("string"),
        FieldType::Integer => Some("integer"),
        FieldType::Number => Some("number"),
        FieldType::Boolean => Some("boolean"),
        FieldType::Object => Some("object"),
        FieldType::Array => Some("array"),
        FieldType::Any => None,
    };
    if let Some(ty) = ty {
        s.insert("type".into(), json!(ty));
    }
    if let Some(n) = f.max_len {
        s.insert("maxLength".into(), json!(n));
    }
    let number = |v: f64| {
        if f.ty == FieldType::Integer && v.fract() == 0.0 {
            json!(v as i64)
        } else {
            json!(v)
        }
    };
    if let Some(v) = f.min {
        s.insert("minimum".into(), number(v));
    }
    if let Some(v) = f.max {
        s.insert("maximum".into(), number(v));
    }
    if !f.one_of.is_empty() {
        s.insert("enum".into(), json!(f.one_of));
    }
    Value::Object(s)
}

fn object_schema(rules: &[FieldRule]) -> Value {
    let mut props = Map::new();
    for f in rules {
        props.insert(f.name.clone(), field_schema(f));
    }
    let required: Vec<&str> = rules
        .iter()
        .filter(|f| f.required)
        .map(|f| f.name.as_str())
        .collect();
    let mut s = json!({"type": "object", "properties": Value::Object(props)});
    if !required.is_empty() {
        s["required"] = json!(required);
    }
    s
}

/// A multipart form of a `file` part and text fields (`(name, schema)`);
/// `required`: the fields besides `file` that must be present.
fn multipart_form(fields: Value, required: &[&str]) -> Value {
    let mut properties =
        json!({"file": {"type": "string", "contentMediaType": "application/octet-stream"}});
    if let (Some(p), Value::Object(f)) = (properties.as_object_mut(), fields) {
        p.extend(f);
    }
    let mut required_fields = vec!["file"];
    required_fields.extend_from_slice(required);
    json!({
        "required": true,
        "content": {"multipart/form-data": {"schema": {
            "type": "object",
            "properties": properties,
            "required": required_fields,
        }}},
    })
}

fn request_body(row: &Row) -> Option<Value> {
    match row.mode {
        Mode::Upload => return Some(multipart_form(json!({"purpose": {"type": "string"}}), &[])),
        Mode::FileUpload => {
            let purpose = json!({"purpose": {"type": "string", "enum": ["batch", "user_data"]}});
            return Some(multipart_form(purpose, &["purpose"]));
        }
        Mode::MediaUpload => {
            let file_type = json!({"file_type": {"type": "string", "enum": ["image", "audio"]}});
            return Some(multipart_form(file_type, &["file_type"]));
        }
        // runtime::modes::transcription's form: the audio file and its text fields.
        Mode::Transcription => {
            let fields = json!({
                "model": {"type": "string"},
                "language": {"type": "string"},
                "prompt": {"type": "string"},
                "response_format": {"type": "string", "enum": ["json", "text", "srt", "verbose_json", "vtt"]},
                "temperature": {"type": "string"},
                "byok_api_key": {"type": "string"},
            });
            return Some(multipart_form(fields, &[]));
        }
        _ => {}
    }
    if !row.body.is_empty() {
        let mut media = json!({"schema": object_schema(&row.body)});
        if let Some(example) = &row.example {
            media["example"] = serde_json::from_str(example).expect("validated JSON");
        }
        return Some(json!({
            "required": true,
            "content": {"application/json": media},
        }));
    }
    match row.method {
        Method::Post | Method::Put | Method::Patch => Some(json!({
            "required": false,
            "content": {"application/json": {"schema": {"type": "object"}}},
        })),
        Method::Get | Method::Delete => None,
    }
}

fn security(auth: Auth) -> Value {
    match auth {
        Auth::Bearer => json!([{"bearerAuth": []}]),
        Auth::XApiKey => json!([{"bearerAuth": []}, {"xApiKey": []}]),
        Auth::GoogApiKey => json!([{"bearerAuth": []}, {"googApiKey": []}]),
        Auth::WebSocket => json!([{"bearerAuth": []}]),
        Auth::AccessToken => json!([{"accessToken": []}]),
        Auth::Admin => json!([{"adminKey": []}, {"accessToken": []}]),
        Auth::Signature => json!([{"webhookSignature": []}]),
        Auth::None => json!([]),
    }
}

/// The component name of an area's error response.
pub fn error_component(format: ErrorFormat) -> &'static str {
    match format {
        ErrorFormat::Detail => "ErrorDetail",
        ErrorFormat::Error => "ErrorFormat1",
        ErrorFormat::Envelope => "ErrorEnvelope",
        ErrorFormat::Anthropic => "ErrorAnthropic",
        ErrorFormat::Gemini => "ErrorGemini",
        ErrorFormat::OpenAi => "ErrorOpenAi",
    }
}

fn responses(table: &Table, row: &Row) -> Value {
    let success = match row.mode {
        Mode::Synthesize => json!({"$ref": "#/components/schemas/SynthesisResponse"}),
        Mode::Upload => json!({"$ref": "#/components/schemas/UploadResponse"}),
        _ => json!({}),
    };
    let error = json!({"$ref": format!("#/components/responses/{}", error_component(row.errors))});
    let mut content = json!({"application/json": {"schema": success}});
    if matches!(
        row.mode,
        Mode::Chat | Mode::Completion | Mode::Messages | Mode::Gemini | Mode::Responses
    ) {
        // `"stream": true`: server-sent events (found by schemathesis); the
        // schema is one event's (`data: {...}` lines, then `data: [DONE]`).
        content["text/event-stream"] = json!({"schema": {
            "type": "object",
            "properties": {"data": {"type": "string"}, "event": {"type": "string"}, "id": {"type": "string"}},
            "required": ["data"],
        }});
    }
    if row.mode == Mode::Speech {
        // `"stream": true`: the audio itself, in its format (found by
        // schemathesis).
        for t in ["audio/mpeg", "audio/wav", "audio/pcm"] {
            content[t] = json!({"schema": {"type": "string", "format": "binary"}});
        }
    }
    if row.mode == Mode::FileContent {
        // The file as it was uploaded, in the type it was given.
        content["*/*"] = json!({"schema": {"type": "string", "format": "binary"}});
    }
    if row.mode == Mode::UsageTotals {
        // `format=csv`: the same totals as CSV text (found by schemathesis).
        content["text/csv"] = json!({"schema": {"type": "string"}});
    }
    let mut ok = json!({
        "description": "Success",
        "headers": {"X-Request-Id": {"$ref": "#/components/headers/X-Request-Id"}},
        "content": content,
    });
    if let Some(links) = crate::links::links(table, row) {
        ok["links"] = links;
    }
    let mut responses = json!({
        "2XX": ok,
        "4XX": error.clone(),
        "5XX": error,
    });
    if row.mode == Mode::OauthAuthorize {
        // The sign-in's redirect to the provider's authorization endpoint.
        responses["302"] = json!({
            "description": "Redirect to the provider's authorization endpoint",
            "headers": {
                "Location": {"schema": {"type": "string"}},
                "X-Request-Id": {"$ref": "#/components/headers/X-Request-Id"},
            },
        });
    }
    if matches!(row.mode, Mode::Realtime | Mode::SttStream) {
        // A WebSocket: the upgrade's answer; the session's messages are
        // the protocol's (docs/models.md, "Realtime sessions").
        responses["101"] = json!({
            "description": "Switching Protocols: the WebSocket session (a GET with `Upgrade: websocket`)",
            "headers": {
                "Sec-WebSocket-Accept": {"schema": {"type": "string"}},
                "X-Request-Id": {"$ref": "#/components/headers/X-Request-Id"},
            },
        });
    }
    if row.mode == Mode::StripeWebhook {
        // Stripe's webhook: every unsigned (or badly signed) body, which
        // is all a caller without the secret can send, is answered 400.
        responses["400"] = json!({
            "description": "Stripe-Signature missing, malformed, stale or wrong: nothing is read or stored",
            "headers": {"X-Request-Id": {"$ref": "#/components/headers/X-Request-Id"}},
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorFormat1"}}},
        });
    }
    responses
}

fn error_response(description: &str, schema: &str) -> Value {
    json!({
        "description": description,
        "headers": {"X-Request-Id": {"$ref": "#/components/headers/X-Request-Id"}},
        "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}},
    })
}

fn components() -> Value {
    let s = |t: &str| json!({"type": t});
    json!({
        "headers": {
            "X-Request-Id": {
                "description": "The request id (`res_` + 24 hex characters), also in the audit record and the logs.",
                "schema": {"type": "string"},
            },
        },
        "responses": {
            "ErrorDetail": error_response("Error (voice area)", "ErrorDetail"),
            "ErrorFormat1": error_response("Error (format 1)", "ErrorFormat1"),
            "ErrorEnvelope": error_response("Error (format 2, envelope)", "ErrorEnvelope"),
            "ErrorAnthropic": error_response("Error (Anthropic's shape)", "ErrorAnthropic"),
            "ErrorGemini": error_response("Error (Google's shape)", "ErrorGemini"),
            "ErrorOpenAi": error_response("Error (format 2 with OpenAI's error object)", "ErrorOpenAi"),
        },
        "schemas": {
            "ErrorDetail": {
                "type": "object",
                "properties": {"detail": s("string")},
                "required": ["detail"],
            },
            "ErrorFormat1": {
                "type": "object",
                "properties": {
                    "error": s("string"),
                    "message": s("string"),
                    "status_code": s("integer"),
                    "details": {},
                },
                "required": ["error", "message", "status_code", "details"],
            },
            "ErrorEnvelope": {
                "type": "object",
                "properties": {
                    "request_id": s("string"),
                    "success": {"const": false},
                    "message": s("string"),
                    "data": {"const": ""},
                },
                "required": ["request_id", "success", "message", "data"],
            },
            "ErrorAnthropic": {
                "type": "object",
                "properties": {
                    "type": {"const": "error"},
                    "error": {
                        "type": "object",
                        "properties": {"type": s("string"), "message": s("string")},
                        "required": ["type", "message"],
                    },
                },
                "required": ["type", "error"],
            },
            "ErrorGemini": {
                "type": "object",
                "properties": {
                    "error": {
                        "type": "object",
                        "properties": {"code": s("integer"), "message": s("string"), "status": s("string")},
                        "required": ["code", "message", "status"],
                    },
                },
                "required": ["error"],
            },
            "ErrorOpenAi": {
                "type": "object",
                "properties": {
                    "request_id": s("string"),
                    "success": {"const": false},
                    "message": s("string"),
                    "data": s("string"),
                    "error": {
                        "type": "object",
                        "properties": {"message": s("string"), "type": s("string")},
                        "required": ["message", "type"],
                    },
                },
                "required": ["request_id", "success", "message", "data", "error"],
            },
            "SynthesisResponse": {
                "type": "object",
                "properties": {
                    "request_id": {"type": "string", "pattern": "^res_[0-9a-f]{24}$"},
                    "voice_uuid": s("string"),
                    "audio_url": s("string"),
                    "audio_content": s("string"),
                    "audio_duration": s("number"),
                    "expires_at": s("string"),
                    "billing": {
                        "type": "object",
                        "properties": {
                            "unit": s("string"),
                            "quantity": s("number"),
                            "charged": s("string"),
                        },
                    },
                    "raw_response": s("object"),
                    "resemble_url": s("string"),
                },
                "required": ["request_id", "audio_url", "billing"],
            },
            "UploadResponse": {
                "type": "object",
                "properties": {
                    "url": s("string"),
                    "asset_id": s("integer"),
                    "asset_class": s("string"),
                    "purpose": s("string"),
                    "expires_at": {"type": ["string", "null"]},
                    "expires_in": s("integer"),
                    "file_name": s("string"),
                    "file_type": s("string"),
                    "extension": s("string"),
                    "size_bytes": s("integer"),
                },
                "required": ["url", "asset_id", "expires_in"],
            },
        },
        "securitySchemes": {
            "bearerAuth": {
                "type": "http", "scheme": "bearer",
                "description": "An API key, or an access token (JWT) from /auth/login",
            },
            "accessToken": {
                "type": "http", "scheme": "bearer", "bearerFormat": "JWT",
                "description": "An access token (JWT) from /auth/login",
            },
            "xApiKey": {
                "type": "apiKey", "in": "header", "name": "x-api-key",
                "description": "An API key, as Anthropic's clients send it",
            },
            "googApiKey": {
                "type": "apiKey", "in": "header", "name": "x-goog-api-key",
                "description": "An API key, as Google's clients send it",
            },
            "adminKey": {
                "type": "apiKey", "in": "header", "name": "X-Admin-Key",
                "description": "The operator's admin key (GATEWAY_ADMIN_KEY)",
            },
            "webhookSignature": {
                "type": "apiKey", "in": "header", "name": "X-Provider-Signature",
                "description": "`sha256=<hex>`: HMAC-SHA256 of the raw body with the webhook secret",
            },
        },
    })
}
