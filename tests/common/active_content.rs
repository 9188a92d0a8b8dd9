//! What "no active content" means for the renderer's HTML, checked the way
//! a browser would read it: the output is parsed by an HTML5 parser
//! (html5ever through `scraper`), so attribute names are case-folded and
//! values entity-decoded before they are checked; URLs are then parsed with
//! the WHATWG URL parser, which strips tabs, newlines and surrounding
//! controls as browsers do.
//!
//! One checker for the XSS corpus test (`tests/render_xss.rs`) and the
//! markdown fuzz target (`fuzz/fuzz_targets/markdown.rs`), which include
//! this file by path.

use scraper::{Html, Node};

/// The only elements rendered markdown may contain (plus the `<html>` and
/// `<body>` the parser wraps a fragment in; their attributes are checked too).
const ALLOWED_ELEMENTS: &[&str] = &[
    "html",
    "body",
    "a",
    "blockquote",
    "br",
    "code",
    "del",
    "div",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "img",
    "input",
    "li",
    "ol",
    "p",
    "pre",
    "strong",
    "sup",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
];

/// Named by the issue: none of these may ever appear.
const FORBIDDEN_ELEMENTS: &[&str] = &[
    "script", "iframe", "frame", "frameset", "object", "embed", "svg", "math", "style", "form",
    "meta", "base", "link", "template", "noscript", "xmp", "textarea", "button", "source",
];

/// Attributes that load, run or restyle something, beyond `on*` and URLs.
const FORBIDDEN_ATTRIBUTES: &[&str] = &[
    "style",
    "srcset",
    "srcdoc",
    "formaction",
    "action",
    "background",
    "poster",
    "data",
    "name",
    "http-equiv",
    "xmlns",
];

/// Everything wrong with one rendered output, as a browser would see it.
pub fn problems(html: &str) -> Vec<String> {
    let mut found = Vec::new();
    let doc = Html::parse_fragment(html);
    for node in doc.tree.nodes() {
        match node.value() {
            Node::Element(el) => {
                let name = el.name().to_ascii_lowercase();
                if FORBIDDEN_ELEMENTS.contains(&name.as_str()) {
                    found.push(format!("forbidden element <{name}>"));
                } else if !ALLOWED_ELEMENTS.contains(&name.as_str()) {
                    found.push(format!("unexpected element <{name}>"));
                }
                for (attr, value) in el.attrs() {
                    let attr = attr.to_ascii_lowercase();
                    if attr.starts_with("on") {
                        found.push(format!("event handler {attr} on <{name}>"));
                    }
                    if FORBIDDEN_ATTRIBUTES.contains(&attr.as_str()) {
                        found.push(format!("attribute {attr} on <{name}>"));
                    }
                    match attr.as_str() {
                        "href" if !is_allowed_href(value) => {
                            found.push(format!("href {value:?} on <{name}>"));
                        }
                        "src" if !is_allowed_src(value) => {
                            found.push(format!("src {value:?} on <{name}>"));
                        }
                        "id" if !value.starts_with("fn-") => {
                            found.push(format!("unprefixed id {value:?}"));
                        }
                        "class" if !is_allowed_class(&name, value) => {
                            found.push(format!("class {value:?} on <{name}>"));
                        }
                        "type" if value != "checkbox" => {
                            found.push(format!("type {value:?} on <{name}>"));
                        }
                        _ => {}
                    }
                }
                if name == "a" && el.attr("rel") != Some("noopener noreferrer") {
                    found.push(format!("<a> without rel=noopener noreferrer: {html}"));
                }
                if name == "input" && el.attr("disabled").is_none() {
                    found.push("enabled <input>".into());
                }
            }
            Node::Comment(_) => found.push("comment".into()),
            Node::Doctype(_) => found.push("doctype".into()),
            Node::ProcessingInstruction(_) => found.push("processing instruction".into()),
            Node::Document | Node::Fragment | Node::Text(_) => {}
        }
    }
    found
}

/// Links: http, https, mailto, or an in-page footnote fragment.
fn is_allowed_href(value: &str) -> bool {
    if let Some(fragment) = value.strip_prefix('#') {
        return fragment.starts_with("fn-");
    }
    url::Url::parse(value).is_ok_and(|u| matches!(u.scheme(), "http" | "https" | "mailto"))
}

/// Images: https only.
fn is_allowed_src(value: &str) -> bool {
    url::Url::parse(value).is_ok_and(|u| u.scheme() == "https")
}

fn is_allowed_class(element: &str, class: &str) -> bool {
    match element {
        "code" => class.strip_prefix("language-").is_some_and(|lang| {
            !lang.is_empty()
                && lang.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '+' | '#' | '-')
                })
        }),
        "div" => class == "footnote-definition",
        "sup" => matches!(class, "footnote-reference" | "footnote-definition-label"),
        _ => false,
    }
}

/// Everything wrong with plain-text output: it may hold line breaks and
/// text, nothing else (no other element, no attribute, no comment).
pub fn plain_text_problems(html: &str) -> Vec<String> {
    let mut found = Vec::new();
    for node in Html::parse_fragment(html).tree.nodes() {
        match node.value() {
            Node::Element(el) => {
                if !matches!(el.name(), "html" | "body" | "br") {
                    found.push(format!("element <{}>", el.name()));
                }
                if let Some((attr, _)) = el.attrs().next() {
                    found.push(format!("attribute {attr} on <{}>", el.name()));
                }
            }
            Node::Comment(_) => found.push("comment".into()),
            _ => {}
        }
    }
    found
}
