//! Inline documents of a chat body: what the provider makes of a PDF it
//! is sent inline (see the parent module and README "Credits").
//!
//! A provider bills a PDF by its pages, not by its bytes: OpenAI and
//! Anthropic render every page as an image and extract its text (Anthropic
//! documents 1,500–3,000 tokens of text per page, plus the page's image),
//! Gemini counts 258 tokens a page. A thousand nearly empty pages fit in a
//! few tens of KB, and a page's text, stored compressed (Flate), can
//! decompress to far more bytes than the file carries. So a PDF counts
//! [`PAGE_TOKENS`] per page (the largest image rule, `IMAGE_TOKENS`,
//! for the page's rendering) plus the bytes of its text content after
//! decompression (every page's content streams, and the content of the
//! forms its resources name: an upper bound of the text drawn, and one
//! token per byte bounds any tokenizer), read with `lopdf`.
//!
//! The work is bounded: a PDF of more than [`MAX_PAGES`] pages, whose
//! content decompresses to more than [`MAX_TEXT_BYTES`], or that does not
//! parse (an encrypted one among them: its text cannot be read) is
//! refused. Beyond the decoded PDF, at most one page's content is held at
//! a time, and never more than [`MAX_TEXT_BYTES`].

use base64::Engine;
use lopdf::{Document, Object, ObjectId};

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
                "not a readable PDF (it must parse, be unencrypted, and its content must decompress to at most {} MB)",
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

/// Bytes of one page's content decompressed: its content streams, and
/// each form (`/Subtype /Form` XObject) its resources name, within `left`.
fn page_text_bytes(doc: &Document, page: ObjectId, left: usize) -> Result<usize, Unreadable> {
    let content = doc
        .get_page_content_with_limit(page, left)
        .map_err(|_| Unreadable::NotPdf)?
        .len();
    let mut used = content;
    let (own, inherited) = doc
        .get_page_resources(page)
        .map_err(|_| Unreadable::NotPdf)?;
    let resources = own.into_iter().chain(
        inherited
            .iter()
            .filter_map(|id| doc.get_dictionary(*id).ok()),
    );
    for res in resources {
        let Ok(xobjects) = res.get_deref(b"XObject", doc).and_then(Object::as_dict) else {
            continue;
        };
        for (_, x) in xobjects.iter() {
            let Ok(stream) = doc.dereference(x).and_then(|(_, o)| o.as_stream()) else {
                continue;
            };
            let form = stream.dict.get(b"Subtype").and_then(Object::as_name);
            if form.ok() != Some(b"Form".as_slice()) {
                continue;
            }
            let room = left.checked_sub(used).ok_or(Unreadable::NotPdf)?;
            let bytes = match stream.dict.get(b"Filter") {
                Ok(_) => stream
                    .decompressed_content_with_limit(room)
                    .map_err(|_| Unreadable::NotPdf)?
                    .len(),
                Err(_) => stream.content.len(),
            };
            used = used.saturating_add(bytes);
        }
    }
    (used <= left).then_some(used).ok_or(Unreadable::NotPdf)
}

/// A PDF of `pages` pages, each drawing `text` (Flate-compressed): for
/// tests (this crate's and the integration tests').
#[cfg(any(test, feature = "testing"))]
pub fn sample(pages: usize, text: &[u8]) -> Vec<u8> {
    use lopdf::{dictionary, Stream};
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
