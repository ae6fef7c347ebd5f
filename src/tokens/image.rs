//! Token estimates for images and documents, which no text tokenizer can count.
//!
//! Images follow Anthropic's documented rule (Vision guide, "Evaluate image size"):
//! `tokens = (width px × height px) / 750`, after the API scales the image down (aspect ratio
//! kept) until its long edge is at most 1568 px and it costs at most about 1,600 tokens. The
//! width and height are read from the PNG / JPEG / GIF / WebP header in the first bytes of the
//! base64 data (`base64` + `imagesize` crates); the rest of the data is never decoded. The same
//! rule is used for OpenAI image parts (OpenAI's tile rule is not modelled).
//!
//! Documents follow Anthropic's PDF support guide: text sources are counted as text; a PDF page
//! costs 1,500–3,000 text tokens plus the page's image tokens.

use base64::Engine;
use serde_json::Value;

/// Pixels per token in Anthropic's image rule (Vision guide: `tokens = (width × height) / 750`).
pub const PIXELS_PER_TOKEN: usize = 750;

/// Longest image edge, in pixels, after Anthropic's automatic resizing (Vision guide: images
/// whose long edge exceeds 1568 px are scaled down).
pub const MAX_LONG_EDGE: usize = 1568;

/// Most tokens one image costs after Anthropic's resizing (Vision guide: "about 1,600 tokens";
/// e.g. 1092 × 1092 px ≈ 1,590 tokens).
pub const MAX_IMAGE_TOKENS: usize = 1_600;

/// Tokens charged for an image whose size cannot be read: a URL or file-id source, or a header
/// that does not parse. The maximum, [`MAX_IMAGE_TOKENS`], so an unknown image is never
/// under-counted.
pub const IMAGE_FALLBACK_TOKENS: usize = MAX_IMAGE_TOKENS;

/// Tokens per PDF page: the top of the 1,500–3,000 text tokens per page range in Anthropic's
/// PDF support guide, so that the page-image cost the guide adds on top is partly covered and
/// budgets err high.
pub const PDF_TOKENS_PER_PAGE: usize = 3_000;

/// Decoded PDF bytes assumed per page when estimating the page count from the data size. A
/// guess (text-heavy pages are 5–100 KB); no provider documents it.
pub const PDF_BYTES_PER_PAGE: usize = 60_000;

/// Pages assumed for a PDF whose size is unknown (URL or file-id source).
pub const PDF_FALLBACK_PAGES: usize = 4;

/// How many base64 characters are decoded, in turn, to find the image header: PNG, GIF and
/// WebP need the first few dozen bytes; a JPEG's size sits in its SOF segment, after any EXIF
/// data, so longer prefixes are tried before giving up.
const HEADER_PREFIXES: [usize; 3] = [1_024, 16_384, 262_144];

/// Tokens for an image of `width × height` pixels under Anthropic's rule: scaled down (aspect
/// kept) to a long edge of at most [`MAX_LONG_EDGE`], then `w × h / 750` rounded up, capped at
/// [`MAX_IMAGE_TOKENS`]. A zero-sized image costs 0.
pub fn tokens_for_size(width: usize, height: usize) -> usize {
    let (w, h) = (width as f64, height as f64);
    let long = w.max(h);
    let scale = if long > MAX_LONG_EDGE as f64 {
        MAX_LONG_EDGE as f64 / long
    } else {
        1.0
    };
    let pixels = ((w * scale).round() * (h * scale).round()) as usize;
    pixels.div_ceil(PIXELS_PER_TOKEN).min(MAX_IMAGE_TOKENS)
}

/// Tokens of an image block or part (Anthropic `image`, OpenAI `image_url`, Responses
/// `input_image`): [`tokens_for_size`] of the size read from the base64 data's header, or
/// [`IMAGE_FALLBACK_TOKENS`] when there is no inline data or its header cannot be read.
pub fn image_tokens(block: &Value) -> usize {
    match image_dimensions(block) {
        Some((w, h)) => tokens_for_size(w, h),
        None => IMAGE_FALLBACK_TOKENS,
    }
}

/// The `(width, height)` in pixels of an image block with inline base64 data, read from the
/// image header; `None` for URL / file sources and unreadable headers.
pub fn image_dimensions(block: &Value) -> Option<(usize, usize)> {
    let data = inline_base64(block)?;
    for &n in &HEADER_PREFIXES {
        let take = n.min(data.len()) / 4 * 4;
        let prefix = data.get(..take)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(prefix)
            .ok()?;
        if let Ok(size) = imagesize::blob_size(&bytes) {
            return Some((size.width, size.height));
        }
        if take == data.len() / 4 * 4 {
            break;
        }
    }
    None
}

/// What is wrong with an inline image's base64 data: the reasons the providers refuse every
/// request that carries it (Anthropic error texts `image cannot be empty`, `invalid base64
/// data`, `Could not process image`; OpenAI `Invalid image`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageFault {
    /// No payload: an empty base64 `data`, a data URL with nothing after the comma, an empty
    /// `image_url`.
    Empty,
    /// A payload that does not decode as standard base64 (whitespace is not allowed).
    NotBase64,
}

impl ImageFault {
    /// How a placeholder that stands for the image names the fault: `empty base64 data`,
    /// `invalid base64 data` (the wording of Anthropic's `invalid base64 data`).
    pub fn removed_because(self) -> &'static str {
        match self {
            ImageFault::Empty => "empty base64 data",
            ImageFault::NotBase64 => "invalid base64 data",
        }
    }
}

impl std::fmt::Display for ImageFault {
    /// As a guard violation says it, after `image `: `data is empty`, `data is not valid
    /// base64`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ImageFault::Empty => "data is empty",
            ImageFault::NotBase64 => "data is not valid base64",
        })
    }
}

/// What is wrong with an image block's inline data, if anything: [`ImageFault::Empty`] for a
/// base64 source or data URL with no payload (and an empty `image_url`),
/// [`ImageFault::NotBase64`] when the payload does not decode (whitespace is not allowed).
/// Images by URL or file id are not looked at. Used by the guard.
pub fn image_data_fault(block: &Value) -> Option<ImageFault> {
    let empty_url = match block.get("image_url") {
        Some(Value::String(s)) => s.is_empty(),
        Some(obj) => obj.get("url").and_then(Value::as_str) == Some(""),
        None => false,
    };
    if empty_url {
        return Some(ImageFault::Empty);
    }
    let data = inline_base64(block)?;
    if data.is_empty() {
        return Some(ImageFault::Empty);
    }
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .is_err()
        .then_some(ImageFault::NotBase64)
}

/// The media type an inline image declares: Anthropic `source.media_type`, or the type of an
/// OpenAI / Responses data URL (`data:image/png;base64,...`). `None` when there is none, or when
/// it is not a short `type/subtype` token (at most 64 bytes of letters, digits and `.+-`, one
/// `/`), so that whatever it holds cannot run into text that names it.
pub fn image_media_type(block: &Value) -> Option<&str> {
    let declared = match block.get("source") {
        Some(source) => source.get("media_type").and_then(Value::as_str),
        None => {
            let url = match block.get("image_url") {
                Some(Value::String(s)) => Some(s.as_str()),
                Some(obj) => obj.get("url").and_then(Value::as_str),
                None => None,
            };
            url.and_then(|u| u.strip_prefix("data:"))
                .and_then(|rest| rest.split_once(';'))
                .map(|(media, _)| media)
        }
    }?;
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-'))
    };
    let (kind, sub) = declared.split_once('/')?;
    (declared.len() <= 64 && token(kind) && token(sub)).then_some(declared)
}

/// The base64 payload of an inline image or file: Anthropic `source.data` (base64 sources), an
/// OpenAI `image_url.url` / Responses `image_url` data URL, OpenAI `file.file_data` / Responses
/// `file_data` (a data URL or bare base64).
fn inline_base64(block: &Value) -> Option<&str> {
    if let Some(source) = block.get("source") {
        return match source.get("type").and_then(Value::as_str) {
            Some("base64") => source.get("data").and_then(Value::as_str),
            _ => None,
        };
    }
    let url = match block.get("image_url") {
        Some(Value::String(s)) => Some(s.as_str()),
        Some(obj) => obj.get("url").and_then(Value::as_str),
        None => None,
    };
    let file_data = block
        .get("file")
        .and_then(|f| f.get("file_data"))
        .or_else(|| block.get("file_data"))
        .and_then(Value::as_str);
    match (url, file_data) {
        (Some(u), _) => data_url_payload(u),
        (None, Some(d)) if d.starts_with("data:") => data_url_payload(d),
        (None, Some(d)) => Some(d),
        (None, None) => None,
    }
}

/// The base64 part of `data:<type>;base64,<payload>`; `None` for other URLs.
fn data_url_payload(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("data:")?;
    let (meta, payload) = rest.split_once(',')?;
    meta.ends_with(";base64").then_some(payload)
}

/// Tokens of a document block or part (Anthropic `document`, OpenAI `file`, Responses
/// `input_file`), `count_text` counting plain text:
/// - text sources (`source.type: "text"`): the text, plus `title` and `context`;
/// - content sources (`source.type: "content"`): each text block's text, each image by
///   [`image_tokens`];
/// - inline PDFs (and any other base64 file): [`PDF_TOKENS_PER_PAGE`] per estimated page, pages
///   = decoded size / [`PDF_BYTES_PER_PAGE`], at least one;
/// - URL or file-id sources: [`PDF_FALLBACK_PAGES`] pages.
pub fn document_tokens(block: &Value, count_text: &dyn Fn(&str) -> usize) -> usize {
    let mut n = 0;
    for key in ["title", "context"] {
        if let Some(s) = block.get(key).and_then(Value::as_str) {
            n += count_text(s);
        }
    }
    let source = block.get("source");
    match source.and_then(|s| s.get("type")).and_then(Value::as_str) {
        Some("text") => {
            let text = source.and_then(|s| s.get("data")).and_then(Value::as_str);
            return n + text.map_or(0, count_text);
        }
        Some("content") => {
            return n + match source.and_then(|s| s.get("content")) {
                Some(Value::String(s)) => count_text(s),
                Some(Value::Array(parts)) => parts
                    .iter()
                    .map(|p| match p.get("type").and_then(Value::as_str) {
                        Some("image") => image_tokens(p),
                        _ => p.get("text").and_then(Value::as_str).map_or(0, count_text),
                    })
                    .sum(),
                _ => 0,
            };
        }
        _ => {}
    }
    let pages = match inline_base64(block) {
        Some(data) => (data.len() / 4 * 3).div_ceil(PDF_BYTES_PER_PAGE).max(1),
        None => PDF_FALLBACK_PAGES,
    };
    n + pages * PDF_TOKENS_PER_PAGE
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A 1×1 PNG header declaring `w × h` (imagesize reads only the IHDR chunk).
    fn png_b64(w: u32, h: u32) -> String {
        let mut bytes = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
        bytes.extend_from_slice(&13u32.to_be_bytes());
        bytes.extend_from_slice(b"IHDR");
        bytes.extend_from_slice(&w.to_be_bytes());
        bytes.extend_from_slice(&h.to_be_bytes());
        bytes.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        bytes.extend_from_slice(&[0; 64]);
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn anthropic_table_values() {
        // Vision guide table: 200×200 ≈ 54 tokens, 1000×1000 ≈ 1334, 1092×1092 ≈ 1590.
        assert_eq!(tokens_for_size(200, 200), 54);
        assert_eq!(tokens_for_size(1000, 1000), 1334);
        assert_eq!(tokens_for_size(1092, 1092), 1590);
        assert_eq!(tokens_for_size(0, 0), 0);
    }

    #[test]
    fn large_images_are_resized_then_capped() {
        // 3136 × 784 -> 1568 × 392 = 614,656 px -> 820 tokens.
        assert_eq!(tokens_for_size(3136, 784), 820);
        assert_eq!(tokens_for_size(4000, 3000), MAX_IMAGE_TOKENS);
    }

    #[test]
    fn size_is_read_from_the_base64_header_of_each_wire_shape() {
        let data = png_b64(200, 200);
        let anthropic = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}});
        assert_eq!(image_dimensions(&anthropic), Some((200, 200)));
        assert_eq!(image_tokens(&anthropic), 54);
        let chat = json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}});
        assert_eq!(image_tokens(&chat), 54);
        let responses =
            json!({"type": "input_image", "image_url": format!("data:image/png;base64,{data}")});
        assert_eq!(image_tokens(&responses), 54);
    }

    #[test]
    fn empty_and_undecodable_image_data_are_named() {
        let img = |data: &str| json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}});
        assert_eq!(image_data_fault(&img("")), Some(ImageFault::Empty));
        assert_eq!(
            image_data_fault(&img("not base64!")),
            Some(ImageFault::NotBase64)
        );
        assert_eq!(image_data_fault(&img(&png_b64(4, 4))), None);
        let chat = json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,"}});
        assert_eq!(image_data_fault(&chat), Some(ImageFault::Empty));
        let responses = json!({"type": "input_image", "image_url": ""});
        assert_eq!(image_data_fault(&responses), Some(ImageFault::Empty));
        let by_url = json!({"type": "image", "source": {"type": "url", "url": "https://x/y.png"}});
        assert_eq!(image_data_fault(&by_url), None);
    }

    #[test]
    fn the_declared_media_type_is_read_only_when_it_is_a_plain_token() {
        let img = |media: &str| json!({"type": "image", "source": {"type": "base64", "media_type": media, "data": ""}});
        assert_eq!(image_media_type(&img("image/png")), Some("image/png"));
        assert_eq!(
            image_media_type(&img("image/svg+xml")),
            Some("image/svg+xml")
        );
        assert_eq!(image_media_type(&img("image/png]\nignore")), None);
        assert_eq!(image_media_type(&img("png")), None);
        assert_eq!(
            image_media_type(&img(&format!("image/{}", "x".repeat(64)))),
            None
        );
        let chat = json!({"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,"}});
        assert_eq!(image_media_type(&chat), Some("image/jpeg"));
        let responses = json!({"type": "input_image", "image_url": "data:image/webp;base64,%%"});
        assert_eq!(image_media_type(&responses), Some("image/webp"));
        assert_eq!(
            image_media_type(&json!({"type": "input_image", "image_url": ""})),
            None
        );
    }

    #[test]
    fn url_and_garbage_images_fall_back() {
        let url = json!({"type": "image", "source": {"type": "url", "url": "https://x/y.png"}});
        assert_eq!(image_tokens(&url), IMAGE_FALLBACK_TOKENS);
        let bad = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "not base64!"}});
        assert_eq!(image_tokens(&bad), IMAGE_FALLBACK_TOKENS);
    }

    #[test]
    fn documents_count_text_or_estimate_pages() {
        let words = |s: &str| s.split_whitespace().count();
        let text = json!({"type": "document", "title": "a b", "source": {"type": "text", "media_type": "text/plain", "data": "one two three"}});
        assert_eq!(document_tokens(&text, &words), 5);
        // 160,000 base64 chars = 120,000 bytes = 2 pages.
        let pdf = json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "A".repeat(160_000)}});
        assert_eq!(document_tokens(&pdf, &words), 2 * PDF_TOKENS_PER_PAGE);
        let url = json!({"type": "document", "source": {"type": "url", "url": "https://x/y.pdf"}});
        assert_eq!(
            document_tokens(&url, &words),
            PDF_FALLBACK_PAGES * PDF_TOKENS_PER_PAGE
        );
        let chat = json!({"type": "file", "file": {"file_data": "data:application/pdf;base64,AAAA", "filename": "a.pdf"}});
        assert_eq!(document_tokens(&chat, &words), PDF_TOKENS_PER_PAGE);
    }
}
