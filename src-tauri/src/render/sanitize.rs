//! The HTML allow-list: the last word on what rendered markdown may contain.
//!
//! `markdown.rs` already escapes raw HTML, so only pulldown-cmark's own
//! markup should reach this point; the allow-list is the second wall, and it
//! is written for that markup alone: no `style`, no `id` but footnotes', no
//! event handlers, no `class` but the few markdown emits.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use ammonia::{Builder, UrlRelative};

/// Schemes a link may point to.
const LINK_SCHEMES: [&str; 3] = ["http", "https", "mailto"];

/// Prefix for footnote ids, so agent-chosen labels cannot clobber ids (and
/// `window` properties) of the UI around the rendered HTML.
const FOOTNOTE_ID_PREFIX: &str = "fn-";

/// Built once: an ammonia `Builder` is immutable after configuration.
static POLICY: LazyLock<Builder<'static>> = LazyLock::new(policy);

/// Sanitises HTML produced from markdown.
pub(super) fn clean(html: &str) -> String {
    POLICY.clean(html).to_string()
}

fn policy() -> Builder<'static> {
    #[rustfmt::skip]
    let tags = [
        "a", "blockquote", "br", "code", "del", "div", "em", "h1", "h2", "h3",
        "h4", "h5", "h6", "hr", "img", "input", "li", "ol", "p", "pre",
        "strong", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
    ];
    let tag_attributes = HashMap::from([
        ("a", HashSet::from(["href", "title"])),
        ("img", HashSet::from(["src", "alt", "title"])),
        ("ol", HashSet::from(["start"])),
        // Only language-* survives the attribute filter below.
        ("code", HashSet::from(["class"])),
        // Footnote definitions; prefixed with FOOTNOTE_ID_PREFIX.
        ("div", HashSet::from(["id"])),
        ("input", HashSet::from(["checked"])),
    ]);
    let alignment = || HashSet::from(["left", "center", "right"]);
    let tag_attribute_values = HashMap::from([
        ("th", HashMap::from([("align", alignment())])),
        ("td", HashMap::from([("align", alignment())])),
        (
            "input",
            HashMap::from([("type", HashSet::from(["checkbox"]))]),
        ),
    ]);
    // A task-list marker can never be ticked by the reader. (One entry: more
    // would come out in hash order, and the same input would not always give
    // the same HTML.)
    let set_tag_attribute_values = HashMap::from([("input", HashMap::from([("disabled", "")]))]);
    let allowed_classes = HashMap::from([
        ("div", HashSet::from(["footnote-definition"])),
        (
            "sup",
            HashSet::from(["footnote-reference", "footnote-definition-label"]),
        ),
    ]);

    let mut b = Builder::empty();
    b.tags(HashSet::from(tags))
        .generic_attributes(HashSet::new())
        .tag_attributes(tag_attributes)
        .tag_attribute_values(tag_attribute_values)
        .set_tag_attribute_values(set_tag_attribute_values)
        .allowed_classes(allowed_classes)
        .url_schemes(HashSet::from(LINK_SCHEMES))
        .url_relative(UrlRelative::Custom(Box::new(fragment_only)))
        .link_rel(Some("noopener noreferrer"))
        .id_prefix(Some(FOOTNOTE_ID_PREFIX))
        .strip_comments(true)
        .attribute_filter(|element, attribute, value| match (element, attribute) {
            ("code", "class") => code_language_class(value).map(Cow::Owned),
            ("img", "src") => is_https(value).then_some(Cow::Borrowed(value)),
            _ => Some(Cow::Borrowed(value)),
        });
    b
}

/// The one kind of relative URL kept: an in-page `#fragment` (footnote
/// references), pointed at the prefixed ids. Paths would resolve against the
/// UI's own origin, so they are dropped.
fn fragment_only(url: &str) -> Option<Cow<'_, str>> {
    let fragment = url.strip_prefix('#')?;
    if fragment.starts_with(FOOTNOTE_ID_PREFIX) {
        Some(Cow::Borrowed(url))
    } else {
        Some(Cow::Owned(format!("#{FOOTNOTE_ID_PREFIX}{fragment}")))
    }
}

/// `language-NAME` with NAME in `[a-z0-9+#-]` (lowercased), or nothing.
fn code_language_class(class: &str) -> Option<String> {
    let name = class.trim().strip_prefix("language-")?.to_ascii_lowercase();
    is_language_name(&name).then(|| format!("language-{name}"))
}

/// A code block language as the UI may name it in a class.
pub(super) fn is_language_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '+' | '#' | '-'))
}

fn is_https(src: &str) -> bool {
    url::Url::parse(src).is_ok_and(|u| u.scheme() == "https")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_language_classes_survive_on_code() {
        assert_eq!(
            code_language_class("language-Rust").as_deref(),
            Some("language-rust")
        );
        assert_eq!(
            code_language_class("language-c++").as_deref(),
            Some("language-c++")
        );
        assert_eq!(code_language_class("language-a\"b"), None);
        assert_eq!(code_language_class("hljs"), None);
        assert_eq!(code_language_class("language-"), None);
    }

    #[test]
    fn relative_urls_other_than_fragments_are_dropped() {
        assert_eq!(fragment_only("#1").as_deref(), Some("#fn-1"));
        assert_eq!(fragment_only("#fn-1").as_deref(), Some("#fn-1"));
        assert_eq!(fragment_only("/api/tasks"), None);
        assert_eq!(fragment_only("x.html"), None);
    }

    #[test]
    fn sanitiser_removes_what_markdown_never_emits() {
        let out = clean(
            r#"<p style="color:red" onclick="x()">a<script>b</script><span>c</span></p><img src="http://x/y.png" alt="z">"#,
        );
        assert_eq!(out, r#"<p>ac</p><img alt="z">"#);
    }
}
