//! Agent content turned into what the UI shows: safe HTML for text, pretty
//! JSON for data, and name/type/size/URL for files.
//!
//! Agent strings are hostile until this module has handled them; the UI only
//! inserts [`RenderedPart`] `html` as HTML and puts every other field in a
//! text node. The policy, in one place:
//!
//! - **Markdown** (CommonMark plus tables, task lists, strikethrough and
//!   footnotes) goes through pulldown-cmark. Raw HTML in it is shown as
//!   escaped text, never passed through; the result is then sanitised by an
//!   ammonia allow-list of the tags markdown produces (see `sanitize.rs`).
//! - **Links** keep only `http`, `https` and `mailto` targets (plus in-page
//!   `#fragment`s for footnotes) and always get `rel="noopener noreferrer"`;
//!   a link with any other target keeps its text and loses its `href`.
//! - **Images** load only over `https`: no `http` (plaintext, and mixed
//!   content in the desktop webview), no `data:`, no relative paths.
//! - **Size**: titles and image descriptions are cut at 4 KiB; a link or
//!   image whose target is over 8 KiB keeps only its text; long runs of
//!   text are cut for the sanitiser's sake, invisibly (see `markdown.rs`).
//! - **Text parts** are markdown when their media type is absent or
//!   `text/markdown`; any other declared type (`text/plain`, `text/csv`,
//!   `text/html`, …) is shown as written: escaped, line breaks kept.
//!
//! Knows nothing of HTTP: the URL that serves a file part comes from the
//! caller.

mod markdown;
mod parts;
mod sanitize;

pub use markdown::markdown;
pub use parts::{
    FileRef, PartOf, RenderedArtifact, RenderedMessage, RenderedPart, artifact, message, part,
};

/// Plain text as HTML: every character escaped, each line break a `<br>`.
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // CRLF, CR and LF all end a line.
            '\r' if chars.peek() == Some(&'\n') => {}
            '\r' | '\n' => out.push_str("<br>\n"),
            // Browsers drop NUL from text; show that something was there.
            '\0' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_escaped_with_line_breaks_kept() {
        assert_eq!(
            plain("a <b> & \"c\" 'd'\r\nsecond\rthird\0\n"),
            "a &lt;b&gt; &amp; &quot;c&quot; &#39;d&#39;<br>\nsecond<br>\nthird\u{FFFD}<br>\n"
        );
    }

    #[test]
    fn plain_text_keeps_markdown_syntax_literal() {
        assert_eq!(plain("**not bold** [x](y)"), "**not bold** [x](y)");
    }
}
