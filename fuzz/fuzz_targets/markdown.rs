//! The markdown renderer (`render::markdown`) and the plain-text one: never
//! panic, and what they produce, read by an HTML5 parser as a browser would,
//! holds no active content: no script-capable or embedding elements, no event
//! handler or style attributes, no links or images but to safe schemes.
#![no_main]

use countersign::render;
use libfuzzer_sys::fuzz_target;
use scraper::{Html, Node};

const FORBIDDEN_ELEMENTS: &[&str] = &[
    "script", "iframe", "frame", "frameset", "object", "embed", "applet", "svg", "math", "style",
    "form", "meta", "base", "link", "template", "noscript", "xmp", "textarea", "button", "source",
    "video", "audio", "portal", "select", "option",
];

const FORBIDDEN_ATTRIBUTES: &[&str] = &[
    "style",
    "srcset",
    "srcdoc",
    "formaction",
    "action",
    "background",
    "poster",
    "data",
    "http-equiv",
    "xmlns",
];

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let html = render::markdown(&text);
    let found = problems(&html);
    assert!(
        found.is_empty(),
        "{found:?}\ninput: {text:?}\noutput: {html}"
    );
    let plain = render::plain(&text);
    let doc = Html::parse_fragment(&plain);
    for node in doc.tree.nodes() {
        if let Node::Element(el) = node.value() {
            let name = el.name();
            assert!(
                matches!(name, "html" | "head" | "body" | "br"),
                "plain text produced <{name}>\ninput: {text:?}\noutput: {plain}"
            );
        }
    }
});

/// Active content in `html`, as a browser would parse it.
fn problems(html: &str) -> Vec<String> {
    let mut found = Vec::new();
    let doc = Html::parse_fragment(html);
    for node in doc.tree.nodes() {
        let Node::Element(el) = node.value() else {
            continue;
        };
        let name = el.name().to_ascii_lowercase();
        if FORBIDDEN_ELEMENTS.contains(&name.as_str()) {
            found.push(format!("element <{name}>"));
        }
        for (attr, value) in el.attrs() {
            let attr = attr.to_ascii_lowercase();
            if attr.starts_with("on") || FORBIDDEN_ATTRIBUTES.contains(&attr.as_str()) {
                found.push(format!("attribute {attr} on <{name}>"));
            }
            let ok = match attr.as_str() {
                "href" => {
                    value.starts_with("#fn-") || scheme_in(value, &["http", "https", "mailto"])
                }
                "src" | "cite" | "action" | "xlink:href" => scheme_in(value, &["https"]),
                _ => true,
            };
            if !ok {
                found.push(format!("{attr}={value:?} on <{name}>"));
            }
        }
    }
    found
}

/// Whether `value` is an absolute URL with one of `schemes` (so never
/// `javascript:`, `data:` or `vbscript:`, however spelt).
fn scheme_in(value: &str, schemes: &[&str]) -> bool {
    url::Url::parse(value).is_ok_and(|u| schemes.contains(&u.scheme()))
}
