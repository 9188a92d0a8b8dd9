//! The renderer against a corpus of XSS vectors: whatever an agent sends, the
//! HTML it becomes holds no active content.
//!
//! Every output is checked by `common/active_content.rs`, the way a browser
//! would read it; the markdown fuzz target uses the same checker.

use countersign::a2a::types::Part;
use countersign::render::{self, RenderedPart};
use scraper::Html;

#[path = "common/active_content.rs"]
mod active_content;
use active_content::{plain_text_problems, problems};

/// One attack: its category, the agent's text, and a piece of it that must
/// still be visible as text after rendering.
struct Vector {
    category: Category,
    input: &'static str,
    visible: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Category {
    Script,
    EventHandler,
    JavascriptUrl,
    DataUrl,
    Svg,
    Frame,
    Style,
    EntityOrCase,
    MarkdownLink,
    Markup,
    CommentOrCdata,
    NestedMarkdown,
}

const CATEGORIES: [Category; 12] = [
    Category::Script,
    Category::EventHandler,
    Category::JavascriptUrl,
    Category::DataUrl,
    Category::Svg,
    Category::Frame,
    Category::Style,
    Category::EntityOrCase,
    Category::MarkdownLink,
    Category::Markup,
    Category::CommentOrCdata,
    Category::NestedMarkdown,
];

const fn v(category: Category, input: &'static str, visible: &'static str) -> Vector {
    Vector {
        category,
        input,
        visible,
    }
}

use Category::*;

#[rustfmt::skip]
const CORPUS: &[Vector] = &[
    // Script tags, inline and as HTML blocks.
    v(Script, "<script>alert(1)</script>", "<script>alert(1)</script>"),
    v(Script, "<script>\nalert(1)\n</script>\n", "<script>"),
    v(Script, "hi <SCRIPT SRC=https://evil.example/x.js></SCRIPT>", "<SCRIPT SRC=https://evil.example/x.js>"),
    v(Script, "<scr<script>ipt>alert(1)</scr</script>ipt>", "<scr<script>ipt>"),
    v(Script, "\"><script>alert(document.cookie)</script>", "\"><script>"),
    v(Script, "<script type=module>import('https://evil.example')</script>", "<script type=module>"),
    v(Script, "<textarea></textarea><script>alert(1)</script>", "<script>alert(1)</script>"),
    v(Script, "<template><script>alert(1)</script></template>", "<template>"),
    // Event handlers.
    v(EventHandler, "<img src=x onerror=alert(1)>", "<img src=x onerror=alert(1)>"),
    v(EventHandler, "<IMG SRC=x OnErRoR=alert(1)>", "OnErRoR"),
    v(EventHandler, "<img src=x onerror\n=alert(1)>", "onerror"),
    v(EventHandler, "<body onload=alert(1)>", "<body onload=alert(1)>"),
    v(EventHandler, "<div onmouseover=\"alert(1)\">hover</div>", "hover"),
    v(EventHandler, "<input autofocus onfocus=alert(1)>", "onfocus"),
    v(EventHandler, "<details open ontoggle=alert(1)>", "ontoggle"),
    v(EventHandler, "<a href=\"https://ok.example\" onclick=\"alert(1)\">x</a>", "onclick"),
    v(EventHandler, "<marquee onstart=alert(1)>x</marquee>", "onstart"),
    v(EventHandler, "<video><source onerror=\"alert(1)\"></video>", "<source"),
    v(EventHandler, "[x](https://ok.example/\"onmouseover=\"alert(1))", "x"),
    v(EventHandler, "![x](https://ok.example/a.png\"onerror=\"alert(1))", ""),
    v(EventHandler, "[x](https://ok.example \"t\\\" onmouseover=\\\"alert(1)\")", "x"),
    // javascript: and friends.
    v(JavascriptUrl, "[x](javascript:alert(1))", "x"),
    v(JavascriptUrl, "[x](JaVaScRiPt:alert(1))", "x"),
    v(JavascriptUrl, "[x](javascript:alert(1)//https://ok.example)", "x"),
    v(JavascriptUrl, "![x](javascript:alert(1))", ""),
    v(JavascriptUrl, "[x](vbscript:msgbox(1))", "x"),
    v(JavascriptUrl, "[x](livescript:alert(1))", "x"),
    v(JavascriptUrl, "<a href=\"javascript:alert(1)\">x</a>", "<a href=\"javascript:alert(1)\">"),
    v(JavascriptUrl, "<a href=\"java\tscript:alert(1)\">x</a>", "script:alert(1)"),
    v(JavascriptUrl, "<javascript:alert(1)>", "javascript:alert(1)"),
    v(JavascriptUrl, "<JAVASCRIPT:alert(1)>", "JAVASCRIPT:alert(1)"),
    // data: URLs.
    v(DataUrl, "![x](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)", ""),
    v(DataUrl, "![x](DATA:image/png;base64,iVBORw0KGgo=)", ""),
    v(DataUrl, "[x](data:text/html,<script>alert(1)</script>)", "x"),
    v(DataUrl, "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)", "x"),
    v(DataUrl, "<data:text/html,alert(1)>", "data:text/html,alert(1)"),
    v(DataUrl, "<object data=\"data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==\">", "<object"),
    // SVG and MathML.
    v(Svg, "<svg onload=alert(1)>", "<svg onload=alert(1)>"),
    v(Svg, "<svg><script>alert(1)</script></svg>", "<svg><script>"),
    v(Svg, "<svg><a xlink:href=\"javascript:alert(1)\"><text x=\"20\" y=\"20\">x</text></a></svg>", "xlink:href"),
    v(Svg, "<svg><animate onbegin=alert(1) attributeName=x dur=1s>", "<animate"),
    v(Svg, "<svg><set attributeName=href to=javascript:alert(1) /></svg>", "<set"),
    v(Svg, "<math href=\"javascript:alert(1)\">x</math>", "<math"),
    v(Svg, "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>", "<mglyph>"),
    // Frames, plug-ins and forms.
    v(Frame, "<iframe src=\"javascript:alert(1)\"></iframe>", "<iframe"),
    v(Frame, "<iframe srcdoc=\"<script>alert(1)</script>\">", "srcdoc"),
    v(Frame, "<object data=\"javascript:alert(1)\">", "<object"),
    v(Frame, "<embed src=\"javascript:alert(1)\">", "<embed"),
    v(Frame, "<frameset><frame src=\"javascript:alert(1)\">", "<frame "),
    v(Frame, "<form action=\"javascript:alert(1)\"><button>x</button></form>", "<form"),
    v(Frame, "<button formaction=javascript:alert(1)>x</button>", "formaction"),
    v(Frame, "<isindex action=javascript:alert(1) type=image>", "<isindex"),
    // Style.
    v(Style, "<style>@import 'https://evil.example/x.css';</style>", "@import"),
    v(Style, "<div style=\"background:url(javascript:alert(1))\">x</div>", "style="),
    v(Style, "<p style=\"width:expression(alert(1))\">x</p>", "expression"),
    v(Style, "<table background=\"javascript:alert(1)\"><tr><td>x</td></tr></table>", "background"),
    // Entity and case tricks.
    v(EntityOrCase, "&lt;script&gt;alert(1)&lt;/script&gt;", "<script>alert(1)</script>"),
    v(EntityOrCase, "[x](&#106;avascript:alert(1))", "x"),
    v(EntityOrCase, "[x](&#x6A;&#x61;vascript:alert(1))", "x"),
    v(EntityOrCase, "[x](javascript&colon;alert(1))", "x"),
    v(EntityOrCase, "[x](jav&#x09;ascript:alert(1))", "x"),
    v(EntityOrCase, "[x](jav&#x0A;ascript:alert(1))", "x"),
    v(EntityOrCase, "[x](&#0000106&#0000097&#0000118&#0000097&#0000115&#0000099&#0000114&#0000105&#0000112&#0000116&#0000058alert(1))", "x"),
    v(EntityOrCase, "[x](javascript\\:alert(1))", "x"),
    v(EntityOrCase, "<a href=\"&#x6A;avascript:alert(1)\">x</a>", "&#x6A;avascript"),
    v(EntityOrCase, "<ScRiPt>alert(1)</sCrIpT>", "<ScRiPt>"),
    v(EntityOrCase, "[x](\u{FF4A}avascript:alert(1))", "x"),
    v(EntityOrCase, "[x](java\u{200B}script:alert(1))", "x"),
    v(EntityOrCase, "\u{FF1C}script\u{FF1E}alert(1)\u{FF1C}/script\u{FF1E}", "\u{FF1C}script\u{FF1E}"),
    v(EntityOrCase, "<img src=x on\u{0}error=alert(1)>", "error=alert(1)"),
    // Markdown link and image tricks.
    v(MarkdownLink, "[x][ref]\n\n[ref]: javascript:alert(1)", "x"),
    v(MarkdownLink, "[x]\n\n[x]: JAVASCRIPT:alert(1) \"t\"", "x"),
    v(MarkdownLink, "[x](<javascript:alert(1)>)", "x"),
    v(MarkdownLink, "[x]( javascript:alert(1) )", "x"),
    v(MarkdownLink, "![x][img]\n\n[img]: data:image/svg+xml,<svg/onload=alert(1)>", ""),
    v(MarkdownLink, "[![x](https://ok.example/a.png)](javascript:alert(1))", ""),
    v(MarkdownLink, "[x](https://ok.example \"<script>alert(1)</script>\")", "x"),
    v(MarkdownLink, "![<img src=x onerror=alert(1)>](https://ok.example/a.png)", ""),
    v(MarkdownLink, "[x](//evil.example/steal)", "x"),
    v(MarkdownLink, "[x](/api/tasks/t1/decision?approve=1)", "x"),
    v(MarkdownLink, "<img srcset=\"javascript:alert(1) 1x, https://ok.example/a.png 2x\">", "srcset"),
    // Other active or page-changing markup.
    v(Markup, "<meta http-equiv=\"refresh\" content=\"0;url=javascript:alert(1)\">", "http-equiv"),
    v(Markup, "<base href=\"javascript:alert(1)//\">", "<base"),
    v(Markup, "<link rel=import href=https://evil.example/x.html>", "rel=import"),
    v(Markup, "<link rel=stylesheet href=https://evil.example/x.css>", "rel=stylesheet"),
    v(Markup, "<video poster=javascript:alert(1)>", "poster"),
    v(Markup, "<picture><source srcset=\"javascript:alert(1)\"></picture>", "<picture>"),
    v(Markup, "<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\">", "<noscript>"),
    v(Markup, "<xmp><img src=x onerror=alert(1)></xmp>", "<xmp>"),
    v(Markup, "<a id=config name=config>x</a>", "<a id=config"),
    // Comments, CDATA, processing instructions, doctypes.
    v(CommentOrCdata, "<!-- --><script>alert(1)</script> -->", "<!--"),
    v(CommentOrCdata, "<!--<img src=\"--><img src=x onerror=alert(1)//\">", "<!--"),
    v(CommentOrCdata, "<![CDATA[<script>alert(1)</script>]]>", "<![CDATA["),
    v(CommentOrCdata, "<?xml version=\"1.0\"?><script>alert(1)</script>", "<?xml"),
    v(CommentOrCdata, "<!DOCTYPE html><script>alert(1)</script>", "<!DOCTYPE html>"),
    v(CommentOrCdata, "a <!-- b --> c", "<!-- b -->"),
    // Markdown inside HTML, HTML inside markdown constructs.
    v(NestedMarkdown, "<div>\n\n[x](javascript:alert(1))\n\n</div>", "<div>"),
    v(NestedMarkdown, "<a href=\"javascript:alert(1)\">\n\n**bold**\n\n</a>", "bold"),
    v(NestedMarkdown, "**<img src=x onerror=alert(1)>**", "<img src=x onerror=alert(1)>"),
    v(NestedMarkdown, "`<script>alert(1)</script>`", "<script>alert(1)</script>"),
    v(NestedMarkdown, "```html\n<script>alert(1)</script>\n```", "<script>alert(1)</script>"),
    v(NestedMarkdown, "```\" onmouseover=\"alert(1)\nx\n```", "x"),
    v(NestedMarkdown, "| a |\n|---|\n| <script>alert(1)</script> |", "<script>alert(1)</script>"),
    v(NestedMarkdown, "- [x] <img src=x onerror=alert(1)>", "<img src=x onerror=alert(1)>"),
    v(NestedMarkdown, "x[^a\"onmouseover=\"alert(1)]\n\n[^a\"onmouseover=\"alert(1)]: y", "y"),
    v(NestedMarkdown, "x[^<script>]\n\n[^<script>]: y", "y"),
    v(NestedMarkdown, "> <iframe src=javascript:alert(1)>", "<iframe"),
    v(NestedMarkdown, "~~<svg onload=alert(1)>~~", "<svg onload=alert(1)>"),
];

fn visible_text(html: &str) -> String {
    Html::parse_fragment(html).root_element().text().collect()
}

#[test]
fn corpus_has_at_least_forty_vectors_in_every_category() {
    assert!(CORPUS.len() >= 40, "only {} vectors", CORPUS.len());
    for category in CATEGORIES {
        let n = CORPUS.iter().filter(|v| v.category == category).count();
        assert!(n >= 3, "{category:?} has only {n} vectors");
    }
}

#[test]
fn no_vector_leaves_active_content_in_markdown() {
    let mut failures = Vec::new();
    for vector in CORPUS {
        let html = render::markdown(vector.input);
        for problem in problems(&html) {
            failures.push(format!(
                "{:?} {:?}\n  -> {html:?}\n  {problem}",
                vector.category, vector.input
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn no_vector_leaves_any_markup_in_plain_text() {
    for vector in CORPUS {
        let html = render::plain(vector.input);
        let found = plain_text_problems(&html);
        assert!(
            found.is_empty(),
            "{:?} -> {html:?}: {found:?}",
            vector.input
        );
        let doc = Html::parse_fragment(&html);
        let shown: String = doc.root_element().text().collect();
        assert_eq!(
            shown,
            vector
                .input
                .replace("\r\n", "\n")
                .replace('\r', "\n")
                .replace('\0', "\u{FFFD}"),
            "plain text must show the input exactly"
        );
    }
}

#[test]
fn escaped_markup_stays_visible_as_text() {
    let mut failures = Vec::new();
    for vector in CORPUS {
        let shown = visible_text(&render::markdown(vector.input));
        if !shown.contains(vector.visible) {
            failures.push(format!(
                "{:?}: {:?} not in {shown:?}",
                vector.input, vector.visible
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn text_parts_of_any_media_type_are_inert() {
    for media_type in [
        None,
        Some("text/markdown"),
        Some("text/plain"),
        Some("text/html"),
    ] {
        for vector in CORPUS {
            let part = Part {
                media_type: media_type.map(str::to_owned),
                ..Part::text(vector.input)
            };
            let html = match render::part(&part, || unreachable!("not a file")) {
                RenderedPart::Markdown { html } | RenderedPart::Text { html, .. } => html,
                other => panic!("text part rendered as {other:?}"),
            };
            let found = problems(&html);
            assert!(
                found.is_empty(),
                "{media_type:?} {:?}: {found:?}",
                vector.input
            );
        }
    }
}

#[test]
fn benign_markdown_passes_the_same_checks() {
    let html = render::markdown(
        "# Plan\n\n| a | b |\n|:-|-:|\n| 1 | 2 |\n\n- [x] done\n- [ ] todo\n\n\
         ~~old~~ [site](https://example.com) [mail](mailto:a@example.com) \
         ![img](https://example.com/a.png)\n\nNote.[^1]\n\n[^1]: Source.\n\n\
         ```rust\nfn main() {}\n```\n",
    );
    assert_eq!(problems(&html), Vec::<String>::new(), "{html}");
    for needle in [
        "<table>",
        "<del>old</del>",
        "href=\"https://example.com\"",
        "href=\"mailto:a@example.com\"",
        "src=\"https://example.com/a.png\"",
        "class=\"language-rust\"",
        "href=\"#fn-1\"",
        "id=\"fn-1\"",
        "type=\"checkbox\"",
    ] {
        assert!(html.contains(needle), "{needle} missing from {html}");
    }
}

#[test]
fn the_checker_catches_active_content() {
    // Guard against a vacuous test: the checks must flag what they look for.
    for bad in [
        "<script>alert(1)</script>",
        "<p onclick=alert(1)>x</p>",
        "<P OnClick=alert(1)>x</P>",
        "<a href=\"java&#x09;script:alert(1)\" rel=\"noopener noreferrer\">x</a>",
        "<a href=\" JAVASCRIPT:alert(1)\" rel=\"noopener noreferrer\">x</a>",
        "<a href=\"https://ok.example\">no rel</a>",
        "<img src=\"http://plain.example/a.png\">",
        "<img src=\"data:image/png;base64,AAAA\">",
        "<p style=\"color:red\">x</p>",
        "<svg><circle/></svg>",
        "<math></math>",
        "<iframe></iframe>",
        "<object></object>",
        "<embed>",
        "<form></form>",
        "<meta charset=utf-8>",
        "<base href=https://ok.example>",
        "<link rel=import>",
        "<style>p{}</style>",
        "<img srcset=\"x 1x\">",
        "<!-- c -->",
        "<code class=\"x\">y</code>",
        "<div id=\"config\">x</div>",
        "<input type=\"checkbox\">",
    ] {
        assert!(!problems(bad).is_empty(), "checker missed {bad:?}");
    }
    for bad in ["<b>x</b>", "a<br class=\"x\">b", "<!-- c -->", "<p>x</p>"] {
        assert!(
            !plain_text_problems(bad).is_empty(),
            "plain-text checker missed {bad:?}"
        );
    }
    assert_eq!(
        plain_text_problems("a<br>b &lt;i&gt;"),
        Vec::<String>::new()
    );
}
