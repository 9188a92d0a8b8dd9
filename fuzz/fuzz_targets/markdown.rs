//! The markdown renderer (`render::markdown`) and the plain-text one: never
//! panic, and what they produce, read by an HTML5 parser as a browser would,
//! holds no active content. The checker is the XSS corpus test's (an
//! allowlist of elements, attributes, classes and URL schemes). The queue's
//! preview of the same text (its first line, markdown read as text) never
//! panics and stays one line of at most 200 characters.
#![no_main]

use countersign::render;
use libfuzzer_sys::fuzz_target;

#[path = "../../tests/common/active_content.rs"]
mod active_content;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let html = render::markdown(&text);
    let found = active_content::problems(&html);
    assert!(
        found.is_empty(),
        "{found:?}\ninput: {text:?}\noutput: {html}"
    );
    let plain = render::plain(&text);
    let found = active_content::plain_text_problems(&plain);
    assert!(
        found.is_empty(),
        "plain text: {found:?}\ninput: {text:?}\noutput: {plain}"
    );
    let preview = countersign::store::queue::text_preview(&text);
    assert!(
        preview.chars().count() <= 200 && !preview.contains('\n'),
        "preview: {preview:?}\ninput: {text:?}"
    );
});
