//! The `/docs` page: a readable HTML reference rendered from the OpenAPI
//! document ([`crate::openapi::document`]) at compile time. Self-contained:
//! inline CSS, no script, no network asset. The expansion embeds it as
//! `pub static DOCS_HTML: &str`; the runtime serves it as is.

use std::fmt::Write;

use serde_json::Value;

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A schema in one line: `string, max 10000 characters, one of: a, b`.
fn describe(schema: &Value) -> String {
    if let Some(r) = schema["$ref"].as_str() {
        return r.rsplit('/').next().unwrap_or(r).to_owned();
    }
    let mut parts = vec![schema["type"].as_str().unwrap_or("any").to_owned()];
    if let Some(n) = schema["maxLength"].as_u64() {
        parts.push(format!("at most {n} characters"));
    }
    if let Some(n) = schema.get("minimum") {
        parts.push(format!("≥ {n}"));
    }
    if let Some(n) = schema.get("maximum") {
        parts.push(format!("≤ {n}"));
    }
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<String> = values
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .collect();
        parts.push(format!("one of: {}", values.join(", ")));
    }
    parts.join(", ")
}

fn field_table(out: &mut String, caption: &str, rows: &[(String, bool, String)]) {
    if rows.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<table><caption>{}</caption><tr><th>name</th><th>required</th><th>schema</th></tr>",
        escape(caption)
    );
    for (name, required, schema) in rows {
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            escape(name),
            if *required { "yes" } else { "no" },
            escape(schema)
        );
    }
    out.push_str("</table>");
}

/// The HTML page of an OpenAPI document.
pub fn page(doc: &Value) -> String {
    let title = doc["info"]["title"].as_str().unwrap_or("API");
    let mut toc = String::new();
    let mut body = String::new();
    let mut count = 0usize;
    let empty = serde_json::Map::new();
    for (path, item) in doc["paths"].as_object().unwrap_or(&empty) {
        for (method, op) in item.as_object().unwrap_or(&empty) {
            count += 1;
            let id = op["operationId"].as_str().unwrap_or_default();
            let anchor = escape(id);
            let method = method.to_ascii_uppercase();
            let summary = op["summary"].as_str().unwrap_or_default();
            let _ = write!(
                toc,
                "<li class=\"route\"><a href=\"#{anchor}\"><span class=\"m\">{method}</span> <code>{}</code></a> {}</li>",
                escape(path),
                escape(summary)
            );
            let _ = write!(
                body,
                "<section id=\"{anchor}\"><h2><span class=\"m\">{method}</span> <code>{}</code></h2><p>{}</p>",
                escape(path),
                escape(summary)
            );
            let security: Vec<String> = op["security"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_object()?.keys().next().cloned())
                        .collect()
                })
                .unwrap_or_default();
            let auth = if security.is_empty() {
                "none".to_owned()
            } else {
                security.join(" or ")
            };
            let x = &op["x-gateway"];
            let _ = write!(
                body,
                "<p class=\"facts\">id <code>{anchor}</code> · auth {} · mode {} · billing {} · rate limit <code>{}</code></p>",
                escape(&auth),
                escape(x["mode"].as_str().unwrap_or_default()),
                escape(x["billing"].as_str().unwrap_or_default()),
                escape(x["capability"].as_str().unwrap_or_default()),
            );
            let params: Vec<(String, bool, String)> = op["parameters"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|p| {
                            (
                                format!(
                                    "{} ({})",
                                    p["name"].as_str().unwrap_or_default(),
                                    p["in"].as_str().unwrap_or_default()
                                ),
                                p["required"].as_bool().unwrap_or(false),
                                describe(&p["schema"]),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            field_table(&mut body, "Parameters", &params);
            for (media, content) in op["requestBody"]["content"].as_object().unwrap_or(&empty) {
                let schema = &content["schema"];
                let required: Vec<&str> = schema["required"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let fields: Vec<(String, bool, String)> = schema["properties"]
                    .as_object()
                    .unwrap_or(&empty)
                    .iter()
                    .map(|(name, s)| (name.clone(), required.contains(&name.as_str()), describe(s)))
                    .collect();
                if fields.is_empty() {
                    let _ = write!(
                        body,
                        "<p>Body: <code>{}</code>, any object.</p>",
                        escape(media)
                    );
                } else {
                    field_table(&mut body, &format!("Body ({media})"), &fields);
                }
            }
            let responses = &op["responses"];
            let _ = write!(
                body,
                "<p class=\"facts\">success: {} · errors: {}</p></section>",
                escape(&describe(
                    &responses["2XX"]["content"]["application/json"]["schema"]
                )),
                escape(&describe(&responses["4XX"])),
            );
        }
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>\
body{{font-family:system-ui,sans-serif;max-width:70em;margin:auto;padding:1em;color:#222}}\
code{{font-family:ui-monospace,monospace}}.m{{font-weight:bold;display:inline-block;min-width:4.5em}}\
section{{border-top:1px solid #ccc;padding:.5em 0}}table{{border-collapse:collapse;margin:.5em 0}}\
td,th{{border:1px solid #ddd;padding:.2em .5em;text-align:left}}caption{{text-align:left;font-weight:bold}}\
.facts{{color:#555;font-size:.9em}}ul{{list-style:none;padding:0}}\
</style></head><body><h1>{title}</h1><p>{} operations. The machine-readable document is \
<a href=\"/openapi.json\">/openapi.json</a>.</p><nav><ul id=\"routes\">{toc}</ul></nav>{body}</body></html>\n",
        count,
        title = escape(title),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn the_page_lists_each_operation_with_its_fields() {
        let doc = serde_json::json!({
            "info": {"title": "T"},
            "paths": {"/a/{id}": {"post": {
                "operationId": "a.b", "summary": "Do <it>",
                "security": [{"bearerAuth": []}],
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "requestBody": {"content": {"application/json": {"schema": {
                    "type": "object",
                    "properties": {"text": {"type": "string", "maxLength": 5}},
                    "required": ["text"],
                }}}},
                "responses": {"4XX": {"$ref": "#/components/responses/ErrorDetail"}},
                "x-gateway": {"mode": "proxy", "billing": "free", "capability": "c"},
            }}},
        });
        let html = page(&doc);
        assert!(html.contains("<section id=\"a.b\">"), "{html}");
        assert!(html.contains("<code>/a/{id}</code>"));
        assert!(html.contains("Do &lt;it&gt;"));
        assert!(html.contains("<code>text</code></td><td>yes</td><td>string, at most 5 characters"));
        assert!(html.contains("errors: ErrorDetail"));
        assert!(html.contains("auth bearerAuth"));
    }
}
