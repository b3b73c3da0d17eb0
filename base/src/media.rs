//! The media types the gateway knows: one table of file extension, kind of
//! media and content type, read by uploads (which extensions are accepted),
//! fetched and mirrored files (a content type from a file name), and the
//! modes that store produced audio or images (a content type from a format,
//! an extension from a content type). A leaf: it imports nothing of the
//! crate.

/// One known media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaType {
    /// Lower-case file extension.
    pub ext: &'static str,
    /// `audio`, `video` or `image`.
    pub kind: &'static str,
    pub content_type: &'static str,
    /// Whether an upload may have this extension (spec A10).
    pub uploadable: bool,
}

const fn m(ext: &'static str, kind: &'static str, content_type: &'static str) -> MediaType {
    MediaType {
        ext,
        kind,
        content_type,
        uploadable: true,
    }
}

/// Every known media type; the first row of a content type is its
/// extension.
pub const MEDIA_TYPES: &[MediaType] = &[
    m("mp3", "audio", "audio/mpeg"),
    m("wav", "audio", "audio/wav"),
    m("m4a", "audio", "audio/mp4"),
    m("flac", "audio", "audio/flac"),
    m("ogg", "audio", "audio/ogg"),
    m("webm", "video", "video/webm"),
    m("mp4", "video", "video/mp4"),
    m("mov", "video", "video/quicktime"),
    m("mkv", "video", "video/x-matroska"),
    m("png", "image", "image/png"),
    m("jpg", "image", "image/jpeg"),
    m("jpeg", "image", "image/jpeg"),
    m("webp", "image", "image/webp"),
    // OpenAI's raw speech (24 kHz, 16-bit, mono): produced, never uploaded.
    MediaType {
        uploadable: false,
        ..m("pcm", "audio", "audio/pcm")
    },
];

/// Content type of anything unknown.
pub const OCTET_STREAM: &str = "application/octet-stream";

/// The media type of an extension (any case).
pub fn by_ext(ext: &str) -> Option<&'static MediaType> {
    MEDIA_TYPES.iter().find(|t| t.ext.eq_ignore_ascii_case(ext))
}

/// The lower-case extension of a file name (empty without one).
pub fn extension_of(file_name: &str) -> String {
    file_name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default()
}

/// Content type for a file name's extension; [`OCTET_STREAM`] when unknown.
pub fn content_type_for(file_name: &str) -> &'static str {
    by_ext(&extension_of(file_name)).map_or(OCTET_STREAM, |t| t.content_type)
}

/// The media type of a content type (its first row).
pub fn by_content_type(content_type: &str) -> Option<&'static MediaType> {
    MEDIA_TYPES
        .iter()
        .find(|t| t.content_type.eq_ignore_ascii_case(content_type))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_table_both_ways() {
        assert_eq!(content_type_for("Take 1.WAV"), "audio/wav");
        assert_eq!(content_type_for("a.jpeg"), "image/jpeg");
        assert_eq!(content_type_for("noext"), OCTET_STREAM);
        assert_eq!(by_content_type("image/jpeg").unwrap().ext, "jpg");
        assert_eq!(by_ext("pcm").unwrap().content_type, "audio/pcm");
        assert!(!by_ext("pcm").unwrap().uploadable);
        assert!(by_content_type("image/gif").is_none());
    }
}
