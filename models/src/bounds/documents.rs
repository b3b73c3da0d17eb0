//! Inline documents of a chat body: what the provider makes of a PDF it
//! is sent inline (see the parent module and README "Credits"); with the
//! chat body's [`Shape`] and the walk of its content parts, which the
//! parent's checks share.
//!
//! A provider bills a PDF by its pages, not by its bytes: OpenAI and
//! Anthropic render every page as an image and extract its text (Anthropic
//! documents 1,500–3,000 tokens of text per page, plus the page's image),
//! Gemini counts 258 tokens a page. A thousand nearly empty pages fit in a
//! few tens of KB, and a page's text, stored compressed (Flate), can
//! decompress to far more bytes than the file carries. So a PDF counts
//! [`PAGE_TOKENS`] per page (the largest image rule, `IMAGE_TOKENS`,
//! for the page's rendering) plus the bytes of its text content after
//! decompression (every page's content streams, and a form's content each
//! time a page draws it, forms in forms likewise: an upper bound of the
//! text drawn, and one token per byte bounds any tokenizer), read with
//! `lopdf`. Not bounded: a font whose `ToUnicode` map turns one code into
//! several characters (a ligature: a few; a crafted map: more) can make
//! the extracted text longer than the codes that draw it — a known gap.
//!
//! The work is bounded: a PDF of more than [`MAX_PAGES`] pages, whose
//! pages draw more than [`MAX_TEXT_BYTES`] of text, whose forms draw forms
//! more than 8 deep (a form drawing itself), or that does not
//! parse (an encrypted one among them: its text cannot be read) is
//! refused. Beyond the decoded PDF, at most one page's content is held at
//! a time, and never more than [`MAX_TEXT_BYTES`].

use base64::Engine;
use std::collections::HashMap;

use lopdf::{Dictionary, Document, Object, ObjectId, Stream};
use serde_json::{Map, Value};

use gateway_base::errors::ApiError;

/// The API an upstream chat body speaks ([`crate::providers::Adapter::shape`]; here, where its parts are walked),
/// which says where an image can be: only there is an object read as an
/// image; anywhere else (tools and their schemas, examples, defaults,
/// enums, metadata, a message object itself, unknown fields) it counts its
/// bytes whatever its `type` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// OpenAI's chat: an `image_url` part of a message's `content` list.
    OpenAi,
    /// Anthropic's Messages: an `image` block of a message's `content`,
    /// of a `tool_result` block's `content`, or of `system` (which
    /// Anthropic refuses: never more than an image).
    Anthropic,
    /// Gemini's: an `inlineData` / `fileData` part of an `image/` type in
    /// `contents[].parts` or `systemInstruction.parts`.
    Gemini,
    /// OpenAI's Responses (a body passed to a provider that serves
    /// `/responses`): an `input_image` part of an `input` item's `content`,
    /// or of a function call output's `output` list.
    Responses,
}

/// The parts of a chat body's content lists in `shape`, each with its
/// path: messages' (Gemini: contents') parts, an Anthropic `tool_result`
/// block's own blocks, Gemini's `systemInstruction` parts.
pub(super) fn content_parts(body: &Map<String, Value>, shape: Shape) -> Vec<(String, &Value)> {
    let (list, field) = match shape {
        Shape::OpenAi | Shape::Anthropic => ("messages", "content"),
        Shape::Gemini => ("contents", "parts"),
        Shape::Responses => ("input", "content"),
    };
    let items = body
        .get(list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    let mut parts: Vec<(String, &Value)> = Vec::new();
    for (i, item) in items.enumerate() {
        // A Responses function call output's `output` list holds parts too.
        let field = match item.get(field) {
            None if shape == Shape::Responses => "output",
            _ => field,
        };
        let Some(ps) = item.get(field).and_then(Value::as_array) else {
            continue;
        };
        for (j, part) in ps.iter().enumerate() {
            let at = format!("{list}[{i}].{field}[{j}]");
            // An Anthropic `tool_result` block's own content blocks.
            if let Some(inner) = part.get("content").and_then(Value::as_array) {
                for (k, b) in inner.iter().enumerate() {
                    parts.push((format!("{at}.content[{k}]"), b));
                }
            }
            parts.push((at, part));
        }
    }
    let system = body.get("systemInstruction").and_then(|s| s.get("parts"));
    if let Some(ps) = system.and_then(Value::as_array) {
        for (j, part) in ps.iter().enumerate() {
            parts.push((format!("systemInstruction.parts[{j}]"), part));
        }
    }
    parts
}

/// What a chat body's inline documents add to its bytes' count: each
/// inline PDF ([`inline_document`]) counts [`Pdf::tokens`] instead of the
/// bytes of its base64 data (already counted as text by the parent's `input_tokens`):
/// (tokens to add, bytes to take back). 400 naming the part when a PDF is
/// not readable or too long, or an inline document is a video.
pub(super) fn inline_documents(
    body: &Map<String, Value>,
    shape: Shape,
) -> Result<(u64, u64), ApiError> {
    let (mut add, mut back) = (0u64, 0u64);
    for (at, part) in content_parts(body, shape) {
        let Some((field, media, data)) = inline_document(shape, part) else {
            continue;
        };
        let pdf = media == Some("application/pdf") || data.starts_with("JVBERi");
        if media.is_some_and(|m| m.starts_with("video/")) {
            return Err(ApiError::BadRequest(format!(
                "{at}.{field}: an inline video cannot be used through the gateway (it is billed by its frames, which its bytes do not bound)"
            )));
        }
        if !pdf && media.is_some_and(read_as_text) {
            continue; // text or audio: its bytes bound its tokens
        }
        if !pdf {
            return Err(ApiError::BadRequest(format!(
                "{at}.{field}: an inline document of type {} cannot be used through the gateway (only PDF, text and audio are bounded: another document's text may be compressed, or its pages rendered)",
                media.unwrap_or("unsaid")
            )));
        }
        let read = Pdf::from_base64(data)
            .map_err(|e| ApiError::BadRequest(format!("{at}.{field}: {e}")))?;
        add = add.saturating_add(read.tokens());
        back = back.saturating_add(data.len() as u64 + 2); // base64: no escapes
    }
    Ok((add, back))
}

/// Whether an inline document of `media` type counts its bytes: text (the
/// types the providers read as plain text: its base64 is longer than the
/// text) and audio (billed by seconds, below its bytes: parent module).
fn read_as_text(media: &str) -> bool {
    const TEXT: [&str; 6] = [
        "application/json",
        "application/xml",
        "application/rtf",
        "application/x-javascript",
        "application/x-typescript",
        "application/x-python-code",
    ];
    media.starts_with("text/") || media.starts_with("audio/") || TEXT.contains(&media)
}

/// The inline document of `part` in `shape`, if it is one: the field named
/// in an error, its media type (`None`: unsaid) and its base64 data. An
/// OpenAI `file` / `input_file` part's `file_data` (a `data:` URL, or bare
/// base64); an Anthropic `document` block of a `base64` source; a Gemini
/// `inlineData` part of a type other than `image/`.
fn inline_document(shape: Shape, part: &Value) -> Option<(&'static str, Option<&str>, &str)> {
    let str_at = |ptr: &str| part.pointer(ptr).and_then(Value::as_str);
    match shape {
        Shape::OpenAi | Shape::Responses => {
            let (field, url) = match str_at("/type")? {
                "file" => ("file.file_data", str_at("/file/file_data")?),
                "input_file" => ("file_data", str_at("/file_data")?),
                _ => return None,
            };
            Some(
                match url
                    .strip_prefix("data:")
                    .and_then(|r| r.split_once(";base64,"))
                {
                    Some((media, data)) => (field, Some(media), data),
                    None => (field, None, url),
                },
            )
        }
        Shape::Anthropic => {
            let base64 =
                str_at("/type") == Some("document") && str_at("/source/type") == Some("base64");
            base64.then_some((
                "source.data",
                str_at("/source/media_type"),
                str_at("/source/data")?,
            ))
        }
        Shape::Gemini => {
            let (key, data) = ["inlineData", "inline_data"]
                .into_iter()
                .find_map(|k| part.get(k).map(|d| (k, d)))?;
            let media = ["mimeType", "mime_type"]
                .into_iter()
                .find_map(|k| data.get(k))
                .and_then(Value::as_str);
            let field = if key == "inlineData" {
                "inlineData"
            } else {
                "inline_data"
            };
            match media {
                Some(m) if m.starts_with("image/") => None,
                _ => Some((field, media, data.get("data")?.as_str()?)),
            }
        }
    }
}

/// Tokens counted per page for its rendering: a page is read as an image
/// (OpenAI, Anthropic; Gemini counts 258 a page, less): the parent's
/// `IMAGE_TOKENS`, which it checks (this module imports nothing of it).
pub const PAGE_TOKENS: u64 = 1600;
/// Most pages of an inline PDF (Gemini reads up to 1,000; OpenAI and
/// Anthropic fewer).
pub const MAX_PAGES: u64 = 1000;
/// Most bytes an inline PDF's content may decompress to (a book's worth of
/// text is a few MB; past this it is a decompression bomb).
pub const MAX_TEXT_BYTES: usize = 32 << 20;

/// Why a PDF is refused (the message of the 400 naming its part).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    /// Not base64, does not parse, is encrypted, or its content is larger
    /// than [`MAX_TEXT_BYTES`] decompressed.
    NotPdf,
    /// More than [`MAX_PAGES`] pages.
    TooManyPages,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::NotPdf => write!(
                f,
                "not a readable PDF (it must parse, be unencrypted, and the text its pages draw must come to at most {} MB decompressed, forms at most {MAX_FORM_DEPTH} deep)",
                MAX_TEXT_BYTES >> 20
            ),
            Unreadable::TooManyPages => write!(f, "too many pages (at most {MAX_PAGES})"),
        }
    }
}

/// What an inline PDF can make the provider count: its pages, and the
/// bytes of its content decompressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pdf {
    pub pages: u64,
    pub text_bytes: u64,
}

impl Pdf {
    /// Reads a PDF given as standard base64 (the `data` of a base64 source,
    /// the part after `;base64,` of a `data:` URL).
    pub fn from_base64(data: &str) -> Result<Pdf, Unreadable> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|_| Unreadable::NotPdf)?;
        Pdf::read(&bytes)
    }

    /// Reads a PDF's page count and content bytes, within the limits.
    pub fn read(bytes: &[u8]) -> Result<Pdf, Unreadable> {
        let options = lopdf::LoadOptions {
            max_decompressed_size: Some(MAX_TEXT_BYTES),
            ..Default::default()
        };
        let doc =
            Document::load_mem_with_options(bytes, options).map_err(|_| Unreadable::NotPdf)?;
        if doc.is_encrypted() || doc.catalog().is_err() {
            return Err(Unreadable::NotPdf);
        }
        let mut pages = 0u64;
        let mut left = MAX_TEXT_BYTES;
        for page in doc.page_iter() {
            pages += 1;
            if pages > MAX_PAGES {
                return Err(Unreadable::TooManyPages);
            }
            left = left
                .checked_sub(page_text_bytes(&doc, page, left)?)
                .ok_or(Unreadable::NotPdf)?;
        }
        if pages == 0 {
            return Err(Unreadable::NotPdf);
        }
        Ok(Pdf {
            pages,
            text_bytes: (MAX_TEXT_BYTES - left) as u64,
        })
    }

    /// The tokens it counts ([`PAGE_TOKENS`] a page, a token a byte of
    /// content).
    pub fn tokens(&self) -> u64 {
        self.pages
            .saturating_mul(PAGE_TOKENS)
            .saturating_add(self.text_bytes)
    }
}

/// Most levels of forms drawn in forms (deeper is refused).
const MAX_FORM_DEPTH: usize = 8;

/// Bytes of text one page can draw, within `left`: its content streams
/// decompressed, plus what each form it draws (`/Name Do`) draws, once per
/// drawing (a form drawn a thousand times has its text extracted a
/// thousand times), forms in forms likewise.
fn page_text_bytes(doc: &Document, page: ObjectId, left: usize) -> Result<usize, Unreadable> {
    let content = doc
        .get_page_content_with_limit(page, left)
        .map_err(|_| Unreadable::NotPdf)?;
    let (own, inherited) = doc
        .get_page_resources(page)
        .map_err(|_| Unreadable::NotPdf)?;
    let resources: Vec<&Dictionary> = own
        .into_iter()
        .chain(
            inherited
                .iter()
                .filter_map(|id| doc.get_dictionary(*id).ok()),
        )
        .collect();
    let mut forms = Forms {
        doc,
        drawn: HashMap::new(),
    };
    forms.drawn(&content, &resources, left, 0)
}

/// Forms already measured, by object (those with resources of their own,
/// whose bound does not depend on where they are drawn).
struct Forms<'a> {
    doc: &'a Document,
    drawn: HashMap<ObjectId, usize>,
}

impl<'a> Forms<'a> {
    /// Bytes `content` can draw with `resources`: its own, plus for each
    /// form it draws what that form can draw (a name its resources do not
    /// hold draws nothing). More than `left`: refused.
    fn drawn(
        &mut self,
        content: &[u8],
        resources: &[&'a Dictionary],
        left: usize,
        depth: usize,
    ) -> Result<usize, Unreadable> {
        let mut used = content.len();
        for name in drawn_names(content) {
            if used > left {
                break;
            }
            let room = left - used;
            let forms: Vec<(Option<ObjectId>, &'a Stream)> = resources
                .iter()
                .filter_map(|r| {
                    r.get_deref(b"XObject", self.doc)
                        .and_then(Object::as_dict)
                        .ok()
                })
                .flat_map(|x| x.iter())
                .filter(|(k, _)| k.as_slice() == name.as_slice())
                .filter_map(|(_, v)| form(self.doc, v))
                .collect();
            let mut most = 0;
            for (id, stream) in forms {
                most = most.max(self.form(id, stream, resources, room, depth)?);
            }
            used = used.saturating_add(most);
        }
        (used <= left).then_some(used).ok_or(Unreadable::NotPdf)
    }

    /// What one form draws (its resources, else those it is drawn with).
    fn form(
        &mut self,
        id: Option<ObjectId>,
        stream: &'a Stream,
        outer: &[&'a Dictionary],
        left: usize,
        depth: usize,
    ) -> Result<usize, Unreadable> {
        if depth >= MAX_FORM_DEPTH {
            return Err(Unreadable::NotPdf);
        }
        let own = stream.dict.get_deref(b"Resources", self.doc);
        let own = own.and_then(Object::as_dict).ok();
        if let Some(n) = id
            .filter(|_| own.is_some())
            .and_then(|id| self.drawn.get(&id))
        {
            return Ok(*n);
        }
        let content = match stream.dict.get(b"Filter") {
            Ok(_) => stream.decompressed_content_with_limit(left),
            Err(_) => Ok(stream.content.clone()),
        };
        let content = content.map_err(|_| Unreadable::NotPdf)?;
        let resources: Vec<&'a Dictionary> = match own {
            Some(r) => vec![r],
            None => outer.to_vec(),
        };
        let n = self.drawn(&content, &resources, left, depth + 1)?;
        if let (Some(id), Some(_)) = (id, own) {
            self.drawn.insert(id, n);
        }
        Ok(n)
    }
}

/// The form (`/Subtype /Form` XObject) `v` refers to, with its object.
fn form<'a>(doc: &'a Document, v: &'a Object) -> Option<(Option<ObjectId>, &'a Stream)> {
    let (id, o) = doc.dereference(v).ok()?;
    let stream = o.as_stream().ok()?;
    let subtype = stream.dict.get(b"Subtype").and_then(Object::as_name).ok()?;
    (subtype == b"Form").then_some((id, stream))
}

/// The names a content stream draws (`/Name Do`), read token by token
/// without skipping strings: text that looks like a drawing only adds to
/// the count, and no binary data can hide a real one.
fn drawn_names(content: &[u8]) -> Vec<Vec<u8>> {
    let delimiter = |b: u8| b.is_ascii_whitespace() || b"()<>[]{}/%\0".contains(&b);
    let mut out = Vec::new();
    let (mut i, mut last_name) = (0, None);
    while i < content.len() {
        if delimiter(content[i]) && content[i] != b'/' {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        while i < content.len() && !delimiter(content[i]) {
            i += 1;
        }
        let token = &content[start..i];
        if token.first() == Some(&b'/') {
            last_name = Some(unescape(&token[1..]));
        } else if token == b"Do" {
            out.extend(last_name.take());
        } else {
            last_name = None;
        }
    }
    out
}

/// A name's `#xx` escapes decoded.
fn unescape(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len());
    let mut i = 0;
    while i < name.len() {
        let hex = name
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (name[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'#', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// A PDF of `pages` pages, each drawing `text` (Flate-compressed): for
/// tests (this crate's and the integration tests').
#[cfg(any(test, feature = "testing"))]
pub fn sample(pages: usize, text: &[u8]) -> Vec<u8> {
    use lopdf::dictionary;
    let mut doc = Document::with_version("1.5");
    let tree = doc.new_object_id();
    let kids: Vec<Object> = (0..pages)
        .map(|_| {
            let mut s = Stream::new(dictionary! {}, text.to_vec());
            s.compress().unwrap();
            let content = doc.add_object(s);
            doc.add_object(dictionary! {"Type" => "Page", "Parent" => tree,
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()], "Contents" => content})
                .into()
        })
        .collect();
    doc.objects.insert(
        tree,
        Object::Dictionary(
            dictionary! {"Type" => "Pages", "Kids" => kids, "Count" => pages as i64},
        ),
    );
    let catalog = doc.add_object(dictionary! {"Type" => "Catalog", "Pages" => tree});
    doc.trailer.set("Root", catalog);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sample as pdf;

    #[test]
    fn pages_and_decompressed_text_count() {
        let small = Pdf::read(&pdf(300, b"")).unwrap();
        // lopdf ends each content stream with a newline.
        assert_eq!(
            small,
            Pdf {
                pages: 300,
                text_bytes: 300
            }
        );
        assert_eq!(small.tokens(), 300 * PAGE_TOKENS + 300);
        let text = b"BT /F1 1 Tf (aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa) Tj ET\n".repeat(20_000);
        let bytes = pdf(2, &text);
        let big = Pdf::read(&bytes).unwrap();
        assert_eq!(big.pages, 2);
        assert!(big.text_bytes >= 2 * text.len() as u64, "{big:?}");
        assert!(big.text_bytes > 50 * bytes.len() as u64, "{big:?}");
    }

    /// One page drawing a form (`text`) `times` times; `nested`: the form
    /// draws itself too.
    fn forms(text: &[u8], times: usize, nested: bool) -> Vec<u8> {
        use lopdf::dictionary;
        let mut doc = Document::with_version("1.5");
        let form_id = doc.new_object_id();
        let mut body = text.to_vec();
        if nested {
            body.extend_from_slice(b" /F#6d1 Do");
        }
        let resources = dictionary! {"XObject" => dictionary! {"Fm1" => form_id}};
        let form = Stream::new(
            dictionary! {"Type" => "XObject", "Subtype" => "Form", "Resources" => resources.clone()},
            body,
        );
        doc.objects.insert(form_id, Object::Stream(form));
        let draw = b"q /Fm1 Do Q\n".repeat(times);
        let content = doc.add_object(Stream::new(dictionary! {}, draw));
        let tree = doc.new_object_id();
        let page = doc.add_object(dictionary! {"Type" => "Page", "Parent" => tree,
        "Resources" => resources, "Contents" => content});
        doc.objects.insert(
            tree,
            Object::Dictionary(
                dictionary! {"Type" => "Pages", "Kids" => vec![page.into()], "Count" => 1},
            ),
        );
        let catalog = doc.add_object(dictionary! {"Type" => "Catalog", "Pages" => tree});
        doc.trailer.set("Root", catalog);
        let mut out = Vec::new();
        doc.save_to(&mut out).unwrap();
        out
    }

    #[test]
    fn a_form_counts_each_time_it_is_drawn() {
        let text = b"BT (a line of text drawn by a form) Tj ET\n".repeat(250);
        let bytes = forms(&text, 500, false);
        let read = Pdf::read(&bytes).unwrap();
        assert!(read.text_bytes >= 500 * text.len() as u64, "{read:?}");
        // A form drawing itself: refused past its depth.
        assert_eq!(Pdf::read(&forms(&text, 1, true)), Err(Unreadable::NotPdf));
        // Not drawn: its text is not counted.
        let plain = Pdf::read(&forms(&text, 0, false)).unwrap();
        assert!(plain.text_bytes < 10, "{plain:?}");
    }

    #[test]
    fn unreadable_and_long_pdfs_are_refused() {
        assert_eq!(Pdf::read(b"%PDF-1.5 nothing"), Err(Unreadable::NotPdf));
        assert_eq!(Pdf::from_base64("not base64!"), Err(Unreadable::NotPdf));
        assert_eq!(
            Pdf::read(&pdf(MAX_PAGES as usize + 1, b"")),
            Err(Unreadable::TooManyPages)
        );
        let bomb = vec![b' '; MAX_TEXT_BYTES / 2 + 1];
        assert_eq!(Pdf::read(&pdf(2, &bomb)), Err(Unreadable::NotPdf));
    }
}
