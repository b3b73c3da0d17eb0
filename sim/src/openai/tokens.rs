//! The simulator's token count of a request body: every field a real
//! provider puts in front of its model is counted (messages of every role
//! and part, `name`, `tool_calls`, `tool_call_id`, `function_call`,
//! `tools`, `functions`, `response_format`; a completion's `prompt`; an
//! embedding's `input`).
//!
//! Two tokenizers: by default one token per whitespace-separated word (the
//! figures the tests have always seen); with `strict_tokens` set
//! (`POST /__sim/config {"strict_tokens": true}`) the worst case of any
//! byte-level tokenizer: one token per byte of text (schemas and arguments
//! as the JSON text the provider renders them to), 4 per message, 3 for the
//! reply's priming, 1445 per image part (85 with `detail: low`: OpenAI's
//! rule for the largest high-detail image), an inline PDF (`file` part)
//! by its pages and text ([`Tokenizer::pdf`]: 1445 a page for OpenAI, 1600
//! for Anthropic's `document`, 258 for Gemini's `inlineData`, plus a token
//! a byte of content). Tests compare a gateway's credit hold against the
//! strict count.
//!
//! The Anthropic ([`crate::anthropic`]) and Gemini ([`crate::gemini`])
//! simulations count with the same tokenizer ([`Tokenizer::text`],
//! [`Tokenizer::json`]): text by words (strict: bytes), schemas, tool
//! inputs and tool results as their JSON text, each image
//! [`Tokenizer::image`] (85; strict 1600, Anthropic's largest image and
//! the gateway's `bounds::IMAGE_TOKENS`), and with `strict_tokens` 4 + the
//! role per message and 3 per request, as above. Their modules say which
//! fields count.

use serde_json::Value;

/// Token counting of one kind.
#[derive(Clone, Copy)]
pub struct Tokenizer {
    pub strict: bool,
}

/// Tokens of an image part with `detail: low`.
const LOW_DETAIL_IMAGE: u64 = 85;
/// Tokens of the largest high-detail image (85 + 170 × 8 tiles).
const HIGH_DETAIL_IMAGE: u64 = 1445;

/// Tokens of an image of the Anthropic or Gemini API with `strict_tokens`.
pub const NATIVE_STRICT_IMAGE: u64 = 1600;

/// Tokens of a PDF's page with `strict_tokens`, by provider: OpenAI and
/// Anthropic read each page as an image (their largest image's count),
/// Gemini counts 258 a page.
pub const OPENAI_PDF_PAGE: u64 = HIGH_DETAIL_IMAGE;
pub const ANTHROPIC_PDF_PAGE: u64 = NATIVE_STRICT_IMAGE;
pub const GEMINI_PDF_PAGE: u64 = 258;

impl Tokenizer {
    /// Tokens of an image part of the Anthropic or Gemini API.
    pub fn image(self) -> u64 {
        if self.strict {
            NATIVE_STRICT_IMAGE
        } else {
            LOW_DETAIL_IMAGE
        }
    }

    /// Tokens of an inline PDF (standard base64) as a provider counts it:
    /// with `strict`, `per_page` a page (its image) and a token a byte of
    /// its text (each page's content streams, decompressed); by words, a
    /// low-detail image a page. `None`: not a readable PDF.
    pub fn pdf(self, data: &str, per_page: u64) -> Option<u64> {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .ok()?;
        let doc = lopdf::Document::load_mem(&bytes).ok()?;
        let pages: Vec<_> = doc.page_iter().collect();
        if !self.strict {
            return Some(pages.len() as u64 * LOW_DETAIL_IMAGE);
        }
        let text: usize = pages.iter().map(|p| doc.get_page_content(*p).len()).sum();
        Some(pages.len() as u64 * per_page + text as u64)
    }

    /// Tokens of a text: words, or with `strict` bytes.
    pub fn text(self, s: &str) -> u64 {
        if self.strict {
            s.len() as u64
        } else {
            s.split_whitespace().count() as u64
        }
    }

    /// A JSON value the provider renders to text (schemas, arguments).
    pub fn json(self, v: &Value) -> u64 {
        match v {
            Value::String(s) => self.text(s),
            other => self.text(&other.to_string()),
        }
    }

    /// A message's `content`: a string or a list of parts.
    fn content(self, v: &Value) -> u64 {
        match v {
            Value::String(s) => self.text(s),
            Value::Array(parts) => parts.iter().map(|p| self.part(p)).sum(),
            Value::Null => 0,
            other => self.json(other),
        }
    }

    fn part(self, p: &Value) -> u64 {
        match p.get("type").and_then(Value::as_str) {
            Some("image_url") => {
                let low = p.pointer("/image_url/detail").and_then(Value::as_str) == Some("low");
                match (self.strict, low) {
                    (_, true) => LOW_DETAIL_IMAGE,
                    (true, false) => HIGH_DETAIL_IMAGE,
                    (false, false) => LOW_DETAIL_IMAGE,
                }
            }
            Some("file") => p
                .pointer("/file/file_data")
                .and_then(Value::as_str)
                .and_then(|u| u.strip_prefix("data:application/pdf;base64,"))
                .and_then(|data| self.pdf(data, OPENAI_PDF_PAGE))
                .unwrap_or_else(|| self.json(p)),
            Some("text") => p
                .get("text")
                .and_then(Value::as_str)
                .map_or(0, |t| self.text(t)),
            _ => match p {
                Value::String(s) => self.text(s),
                other => self.json(other),
            },
        }
    }

    fn message(self, m: &Value) -> u64 {
        let field = |k: &str| m.get(k).and_then(Value::as_str).map_or(0, |s| self.text(s));
        let mut n = m.get("content").map_or(0, |c| self.content(c));
        if self.strict {
            n += 4 + field("role");
        }
        n += field("name") + field("tool_call_id");
        for call in m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            n += call
                .get("id")
                .and_then(Value::as_str)
                .map_or(0, |s| self.text(s));
            n += call.get("function").map_or(0, |f| self.function_call(f));
        }
        n + m.get("function_call").map_or(0, |f| self.function_call(f))
    }

    fn function_call(self, f: &Value) -> u64 {
        f.get("name")
            .and_then(Value::as_str)
            .map_or(0, |s| self.text(s))
            + f.get("arguments").map_or(0, |a| self.json(a))
    }

    /// Prompt tokens of a chat request.
    pub fn chat(self, body: &Value) -> u64 {
        let mut n: u64 = body
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|m| self.message(m))
            .sum();
        for k in ["tools", "functions"] {
            for t in body.get(k).and_then(Value::as_array).into_iter().flatten() {
                n += self.json(t);
            }
        }
        if let Some(rf) = body.get("response_format").filter(|v| v.is_object()) {
            n += self.json(rf);
        }
        if self.strict {
            n += 3;
        }
        n
    }

    /// Prompt tokens of a completion's `prompt` or an embedding's `input`:
    /// a string, a list of strings, or token arrays (one per number).
    pub fn texts(self, v: &Value) -> u64 {
        match v {
            Value::String(s) => self.text(s),
            Value::Array(items) => items
                .iter()
                .map(|i| match i {
                    Value::String(s) => self.text(s),
                    Value::Number(_) => 1,
                    Value::Array(t) => t.len() as u64,
                    other => self.json(other),
                })
                .sum(),
            Value::Null => 0,
            other => self.json(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_counted_field_counts() {
        let body = json!({"messages": [
            {"role": "user", "content": "Hello there", "name": "alice"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
            {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "u"}}]}],
            "tools": [{"type": "function", "function": {"name": "f", "description": "does f"}}]});
        let words = Tokenizer { strict: false };
        assert_eq!(
            words.chat(&json!({"messages": [{"role": "user", "content": "Hello there"}]})),
            2
        );
        assert!(words.chat(&body) > 2 + 1);
        let strict = Tokenizer { strict: true };
        assert!(strict.chat(&body) > HIGH_DETAIL_IMAGE + "Hello there".len() as u64);
    }
}
