//! Markdown to safe HTML: pulldown-cmark events, rewritten so raw HTML becomes
//! text, then written out and sanitised.

use std::collections::VecDeque;

use pulldown_cmark::{Alignment, CodeBlockKind, CowStr, Event, Options, Parser, Tag, TagEnd};

use super::sanitize;

/// Renders agent markdown as HTML safe to insert into the UI.
///
/// CommonMark plus tables, task lists, strikethrough and footnotes. Raw HTML
/// (inline or block) is shown as escaped text, so a reader sees what the agent
/// sent instead of having it vanish; the output then passes the allow-list in
/// `sanitize.rs`. Footnote ids are prefixed with `fn-`; two documents on one
/// page that both use `[^1]` share that id, and the first one wins.
pub fn markdown(text: &str) -> String {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_FOOTNOTES;
    let events = Rewrite::default().run(DepthCap::new(Parser::new_ext(text, options)));
    let mut html = String::with_capacity(text.len() + text.len() / 2);
    pulldown_cmark::html::push_html(&mut html, bounded_runs(events.into_iter()));
    sanitize::clean(&html)
}

/// The longest run of text written without markup in between. The
/// sanitiser's HTML writer (html5ever 0.40) escapes a text node in time
/// growing with its length times the number of `&` (or characters U+0080
/// to U+00BF) in it: 1 MiB of `&` took 17 s. Longer runs are cut by an
/// empty comment, which the sanitiser strips: the text nodes on either side
/// stay apart and are written one after the other, so the HTML out is the
/// same, in linear time.
const MAX_TEXT_RUN: usize = 1024;

/// Attribute values (a link's or image's title, an image's description)
/// longer than this are cut, for the reason given at [`MAX_TEXT_RUN`];
/// nobody reads a tooltip of 4 KiB.
const MAX_ATTRIBUTE: usize = 4096;

/// A link or image whose target is longer than this loses its markup and
/// keeps its text, as one with a forbidden scheme does. Real links are far
/// shorter; a signed storage URL is 1–2 KiB.
const MAX_URL: usize = 8192;

/// The empty comment that cuts a long run of text (see [`MAX_TEXT_RUN`]).
const RUN_BREAK: &str = "<!---->";

/// Cuts runs of text longer than [`MAX_TEXT_RUN`] bytes with [`RUN_BREAK`];
/// an inline code span that long becomes its markup around such runs.
/// (Inside an image, whose text becomes its `alt`, the writer skips markup,
/// cuts included.) An adapter, so the events are not copied again.
struct BoundedRuns<'a, I> {
    events: I,
    /// Bytes of text since the last markup.
    run: usize,
    /// Events of a cut event still to hand out.
    queued: VecDeque<Event<'a>>,
}

fn bounded_runs<'a, I: Iterator<Item = Event<'a>>>(events: I) -> BoundedRuns<'a, I> {
    BoundedRuns {
        events,
        run: 0,
        queued: VecDeque::new(),
    }
}

impl<'a, I: Iterator<Item = Event<'a>>> Iterator for BoundedRuns<'a, I> {
    type Item = Event<'a>;

    fn next(&mut self) -> Option<Event<'a>> {
        loop {
            if let Some(event) = self.queued.pop_front() {
                return Some(event);
            }
            match self.events.next()? {
                Event::Text(text) if self.run + text.len() <= MAX_TEXT_RUN => {
                    self.run += text.len();
                    return Some(Event::Text(text));
                }
                Event::Text(text) => push_text(&text, &mut self.run, &mut self.queued),
                Event::SoftBreak => {
                    self.run += 1;
                    return Some(Event::SoftBreak);
                }
                Event::Code(code) if code.len() > MAX_TEXT_RUN => {
                    self.queued.push_back(html("<code>"));
                    self.run = 0;
                    push_text(&code, &mut self.run, &mut self.queued);
                    self.queued.push_back(html("</code>"));
                    self.run = 0;
                }
                // Anything else is (or ends) an element: a new text node.
                other => {
                    self.run = 0;
                    return Some(other);
                }
            }
        }
    }
}

/// Pushes `text`, cut by [`RUN_BREAK`] so that no run of text (`run` bytes
/// so far) grows past [`MAX_TEXT_RUN`]. Never cuts a character. (Nor a line
/// end: the parser hands over every CR and CRLF as a lone LF.)
fn push_text<'a>(text: &str, run: &mut usize, out: &mut VecDeque<Event<'a>>) {
    let mut rest = text;
    while *run + rest.len() > MAX_TEXT_RUN {
        // A line break may have taken the run one byte past the limit.
        let cut = prefix(rest, MAX_TEXT_RUN.saturating_sub(*run)).len();
        if cut > 0 {
            out.push_back(Event::Text(CowStr::from(rest[..cut].to_owned())));
        }
        out.push_back(html(RUN_BREAK));
        *run = 0;
        rest = &rest[cut..];
    }
    if !rest.is_empty() {
        *run += rest.len();
        out.push_back(Event::Text(CowStr::from(rest.to_owned())));
    }
}

/// Elements nested deeper than this are flattened into their parent: an
/// HTML5 parser (the sanitiser's) takes time growing with the square of
/// the nesting depth, and a 400 KB message of `> > > …` took 39 s.
/// Legitimate markdown nests a few levels.
const MAX_NESTING: usize = 32;

/// Drops the tags of elements nested deeper than [`MAX_NESTING`], keeping
/// what they hold; a dropped block ends with a line break, so its lines
/// stay apart.
struct DepthCap<I> {
    events: I,
    depth: usize,
}

impl<I> DepthCap<I> {
    fn new(events: I) -> Self {
        Self { events, depth: 0 }
    }
}

impl<'a, I: Iterator<Item = Event<'a>>> Iterator for DepthCap<I> {
    type Item = Event<'a>;

    fn next(&mut self) -> Option<Event<'a>> {
        loop {
            match self.events.next()? {
                Event::Start(tag) => {
                    self.depth += 1;
                    if self.depth <= MAX_NESTING {
                        return Some(Event::Start(tag));
                    }
                }
                Event::End(end) => {
                    let depth = self.depth;
                    self.depth = depth.saturating_sub(1);
                    if depth <= MAX_NESTING {
                        return Some(Event::End(end));
                    }
                    if !is_inline(end) {
                        return Some(Event::HardBreak);
                    }
                }
                other => return Some(other),
            }
        }
    }
}

fn is_inline(end: TagEnd) -> bool {
    matches!(
        end,
        TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::Link
            | TagEnd::Image
    )
}

/// The event rewrite between parser and HTML writer.
#[derive(Default)]
struct Rewrite {
    in_html_block: bool,
    /// A line of an HTML block ended; break before the next one.
    pending_break: bool,
    table: Table,
    /// Per open link or image: whether its markup is kept (see [`MAX_URL`]).
    targets: Vec<bool>,
    /// Kept images open; their text becomes the outermost one's `alt`.
    images: usize,
    /// Bytes of `alt` text so far (see [`MAX_ATTRIBUTE`]).
    alt_len: usize,
}

/// Where the writer is inside a table: cells are written here, with an
/// `align` attribute instead of pulldown-cmark's `style`.
#[derive(Default)]
struct Table {
    alignments: Vec<Alignment>,
    in_head: bool,
    cell: usize,
}

impl Rewrite {
    fn run<'a>(mut self, events: impl Iterator<Item = Event<'a>>) -> Vec<Event<'a>> {
        let mut out = Vec::new();
        for event in events {
            self.event(event, &mut out);
        }
        out
    }

    fn event<'a>(&mut self, event: Event<'a>, out: &mut Vec<Event<'a>>) {
        if self.images > 0
            && let Event::Text(t) | Event::Code(t) | Event::InlineHtml(t) = &event
        {
            let left = MAX_ATTRIBUTE.saturating_sub(self.alt_len);
            if t.len() > left {
                if left > 0 {
                    out.push(Event::Text(format!("{}…", prefix(t, left)).into()));
                }
                self.alt_len = usize::MAX;
                return;
            }
            self.alt_len += t.len();
        }
        match event {
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) => {
                let keep = dest_url.len() <= MAX_URL;
                self.targets.push(keep);
                if keep {
                    out.push(Event::Start(Tag::Link {
                        link_type,
                        dest_url,
                        title: capped(title),
                        id,
                    }));
                }
            }
            Event::Start(Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            }) => {
                let keep = dest_url.len() <= MAX_URL;
                self.targets.push(keep);
                if keep {
                    if self.images == 0 {
                        self.alt_len = 0;
                    }
                    self.images += 1;
                    out.push(Event::Start(Tag::Image {
                        link_type,
                        dest_url,
                        title: capped(title),
                        id,
                    }));
                }
            }
            Event::End(end @ (TagEnd::Link | TagEnd::Image)) => {
                if self.targets.pop().unwrap_or(true) {
                    if end == TagEnd::Image {
                        self.images = self.images.saturating_sub(1);
                    }
                    out.push(Event::End(end));
                }
            }
            // Block HTML: a paragraph of its source text, lines kept.
            Event::Start(Tag::HtmlBlock) => {
                self.in_html_block = true;
                out.push(Event::Start(Tag::Paragraph));
            }
            Event::End(TagEnd::HtmlBlock) => {
                self.in_html_block = false;
                self.pending_break = false;
                out.push(Event::End(TagEnd::Paragraph));
            }
            Event::Html(html) | Event::InlineHtml(html) if self.in_html_block => {
                self.html_block_lines(&html, out);
            }
            // Inline HTML: the writer escapes text.
            Event::Html(html) | Event::InlineHtml(html) => out.push(Event::Text(html)),

            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                out.push(Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(
                    language(&info).into(),
                ))));
            }

            Event::Start(Tag::Table(alignments)) => {
                self.table = Table {
                    alignments,
                    in_head: false,
                    cell: 0,
                };
                out.push(html("<table>"));
            }
            Event::Start(Tag::TableHead) => {
                self.table.in_head = true;
                self.table.cell = 0;
                out.push(html("<thead><tr>"));
            }
            Event::End(TagEnd::TableHead) => {
                self.table.in_head = false;
                out.push(html("</tr></thead><tbody>\n"));
            }
            Event::Start(Tag::TableRow) => {
                self.table.cell = 0;
                out.push(html("<tr>"));
            }
            Event::End(TagEnd::TableRow) => out.push(html("</tr>\n")),
            Event::Start(Tag::TableCell) => {
                let name = if self.table.in_head { "th" } else { "td" };
                let align = match self.table.alignments.get(self.table.cell) {
                    Some(Alignment::Left) => " align=\"left\"",
                    Some(Alignment::Center) => " align=\"center\"",
                    Some(Alignment::Right) => " align=\"right\"",
                    Some(Alignment::None) | None => "",
                };
                out.push(html(format!("<{name}{align}>")));
            }
            Event::End(TagEnd::TableCell) => {
                self.table.cell += 1;
                out.push(html(if self.table.in_head { "</th>" } else { "</td>" }));
            }
            Event::End(TagEnd::Table) => out.push(html("</tbody></table>\n")),

            other => out.push(other),
        }
    }

    /// Lines of raw block HTML as text separated by hard breaks.
    fn html_block_lines<'a>(&mut self, source: &str, out: &mut Vec<Event<'a>>) {
        for line in source.split_inclusive('\n') {
            if std::mem::take(&mut self.pending_break) {
                out.push(Event::HardBreak);
            }
            let text = line.trim_end_matches(['\n', '\r']);
            if !text.is_empty() {
                out.push(Event::Text(CowStr::from(text.to_owned())));
            }
            self.pending_break = line.ends_with('\n');
        }
    }
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn prefix(text: &str, max: usize) -> &str {
    let mut cut = max.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// An attribute value cut to [`MAX_ATTRIBUTE`] bytes, marked with `…`.
fn capped(value: CowStr<'_>) -> CowStr<'_> {
    if value.len() <= MAX_ATTRIBUTE {
        return value;
    }
    format!("{}…", prefix(&value, MAX_ATTRIBUTE)).into()
}

/// Markup this module writes itself (never agent text).
fn html<'a>(s: impl Into<CowStr<'a>>) -> Event<'a> {
    Event::Html(s.into())
}

/// The language of a fenced code block's info string (` ```Rust,ignore ` →
/// `rust`), or empty when it is not a plain language name.
fn language(info: &str) -> String {
    let first = info
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | '{' | '}'))
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if sanitize::is_language_name(&first) {
        first
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The rendering without [`bounded_runs`]: what `markdown` gave before
    /// long runs were cut.
    fn unbounded(text: &str) -> String {
        let events = Rewrite::default().run(DepthCap::new(Parser::new_ext(
            text,
            Options::ENABLE_TABLES
                | Options::ENABLE_TASKLISTS
                | Options::ENABLE_STRIKETHROUGH
                | Options::ENABLE_FOOTNOTES,
        )));
        let mut html = String::new();
        pulldown_cmark::html::push_html(&mut html, events.into_iter());
        sanitize::clean(&html)
    }

    #[test]
    fn long_runs_of_text_render_as_if_uncut() {
        let amps = "&".repeat(3 * MAX_TEXT_RUN + 7);
        let cases = [
            amps.clone(),
            "°".repeat(2 * MAX_TEXT_RUN),
            format!("a{}", "é°&".repeat(MAX_TEXT_RUN)),
            format!("`{amps}` and *{amps}*"),
            format!("```\n{amps}\n<b>&</b>\n```\n"),
            format!("    {amps}\r\n    {amps}\r\n"),
            format!("{}\r\nx", "y".repeat(MAX_TEXT_RUN - 1)),
            // A line break takes the run past the limit.
            format!("{}\nb", "a".repeat(MAX_TEXT_RUN)),
            format!("| {amps} |\n|---|\n| {amps} |\n"),
            format!("<div>{amps}</div>\n\n{amps} <span>{amps}</span>"),
            format!("> {amps}\n> {amps}\n\n- {amps}\n- [x] {amps}\n"),
            format!("[^n]\n\n[^n]: {amps}\n"),
        ];
        for text in &cases {
            let out = markdown(text);
            assert_eq!(out, unbounded(text), "{:.60}", text);
            assert!(!out.contains("<!--"), "a cut survived: {:.60}", out);
        }
        // The cuts are there before the sanitiser: no run is longer.
        for text in [
            amps.clone(),
            format!("`{amps}`"),
            format!("```\n{amps}\n```"),
        ] {
            let events = Rewrite::default().run(DepthCap::new(Parser::new(&text)));
            let cut: Vec<_> = bounded_runs(events.into_iter()).collect();
            let breaks = cut.iter().filter(|e| **e == html(RUN_BREAK)).count();
            assert_eq!(breaks, 3, "{text:.20}: {cut:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn cut_runs_never_change_the_html(
            text in "[&°a \r\n`*_\\[\\]()!<>|#>-]{0,3000}",
        ) {
            prop_assert_eq!(markdown(&text), unbounded(&text));
        }
    }

    #[test]
    fn long_attribute_values_are_cut_and_long_targets_dropped() {
        let long = "&".repeat(3 * MAX_ATTRIBUTE);
        let out = markdown(&format!(
            "![{long} *{long}* `{long}`](https://example.com/a.png \"{long}\")"
        ));
        let alt = out.split("alt=\"").nth(1).and_then(|s| s.split('"').next());
        let alt = alt.unwrap_or_else(|| panic!("no alt: {out:.200}"));
        assert!(alt.ends_with('…'), "{alt:.40}");
        assert_eq!(alt.matches("&amp;").count(), MAX_ATTRIBUTE);
        let title = out
            .split("title=\"")
            .nth(1)
            .and_then(|s| s.split('"').next());
        let title = title.unwrap_or_else(|| panic!("no title: {out:.200}"));
        assert_eq!(title.matches("&amp;").count(), MAX_ATTRIBUTE, "{title:.40}");
        let out = markdown(&format!("[a](https://example.com/ \"{long}\")"));
        let title = out
            .split("title=\"")
            .nth(1)
            .and_then(|s| s.split('"').next());
        let title = title.unwrap_or_else(|| panic!("no title: {out:.200}"));
        assert!(title.ends_with('…'), "{title:.40}");
        assert_eq!(title.matches("&amp;").count(), MAX_ATTRIBUTE, "{title:.40}");

        // Short values are untouched.
        assert_eq!(
            markdown("![a & b](https://example.com/a.png \"t & u\")"),
            unbounded("![a & b](https://example.com/a.png \"t & u\")")
        );

        // A target over the limit: the text stays, the link goes.
        let url = format!("https://example.com/?{}", "a=1&".repeat(MAX_URL / 4));
        let out = markdown(&format!("see [the report]({url}) now"));
        assert_eq!(out, "<p>see the report now</p>\n");
        let out = markdown(&format!("![chart]({url}) [**x**](https://example.com/)"));
        assert_eq!(
            out,
            "<p>chart <a href=\"https://example.com/\" rel=\"noopener noreferrer\"><strong>x</strong></a></p>\n"
        );
        // A link around a dropped image keeps its own markup.
        let out = markdown(&format!("[![chart]({url})](https://example.com/)"));
        assert_eq!(
            out,
            "<p><a href=\"https://example.com/\" rel=\"noopener noreferrer\">chart</a></p>\n"
        );
    }

    #[test]
    fn tables_use_align_attributes_not_styles() {
        let out = markdown("| a | b | c |\n|:--|:-:|--:|\n| 1 | 2 | 3 |\n");
        assert_eq!(
            out,
            "<table><thead><tr><th align=\"left\">a</th><th align=\"center\">b</th>\
             <th align=\"right\">c</th></tr></thead><tbody>\n\
             <tr><td align=\"left\">1</td><td align=\"center\">2</td><td align=\"right\">3</td></tr>\n\
             </tbody></table>\n"
        );
    }

    #[test]
    fn task_lists_are_disabled_checkboxes() {
        assert_eq!(
            markdown("- [x] done\n- [ ] todo\n"),
            "<ul>\n<li><input type=\"checkbox\" checked=\"\" disabled=\"\">\ndone</li>\n\
             <li><input type=\"checkbox\" disabled=\"\">\ntodo</li>\n</ul>\n"
        );
    }

    #[test]
    fn nesting_deeper_than_the_cap_is_flattened_keeping_the_text() {
        let out = markdown(&format!("{}deep", "> ".repeat(10_000)));
        assert_eq!(out.matches("<blockquote>").count(), MAX_NESTING);
        assert_eq!(out.matches("</blockquote>").count(), MAX_NESTING);
        assert!(out.contains("deep"), "{out}");

        let out = markdown(&format!("{}x", "- ".repeat(10_000)));
        assert_eq!(out.matches("<ul>").count(), MAX_NESTING / 2);
        assert!(out.contains('x'), "{out}");

        let out = markdown(&format!("{}x{}", "*".repeat(1_000), "*".repeat(1_000)));
        let tags = out.matches("<em>").count() + out.matches("<strong>").count();
        assert!(tags <= MAX_NESTING, "{tags} nested tags");
        assert!(out.contains('x'), "{out}");
    }

    #[test]
    fn flattened_blocks_keep_their_lines_apart() {
        let q = "> ".repeat(MAX_NESTING);
        let out = markdown(&format!("{q}- one\n{q}- two\n"));
        assert!(out.contains("one<br>"), "{out}");
        assert!(out.contains("two"), "{out}");
        assert!(!out.contains("<li>"), "{out}");
    }

    #[test]
    fn nesting_within_the_cap_is_kept() {
        // The paragraph inside is the last level.
        let out = markdown(&format!("{}x", "> ".repeat(MAX_NESTING - 1)));
        assert_eq!(out.matches("<blockquote>").count(), MAX_NESTING - 1);
        assert!(out.contains("<p>x</p>"), "{out}");
    }

    #[test]
    fn strikethrough_is_del() {
        assert_eq!(markdown("~~gone~~"), "<p><del>gone</del></p>\n");
    }

    #[test]
    fn footnotes_link_to_prefixed_ids() {
        let out = markdown("Claim.[^src]\n\n[^src]: The source.\n");
        assert!(
            out.contains(r##"<sup class="footnote-reference"><a href="#fn-src" rel="noopener noreferrer">1</a></sup>"##),
            "{out}"
        );
        assert!(
            out.contains(r#"<div class="footnote-definition" id="fn-src"><sup class="footnote-definition-label">1</sup>"#),
            "{out}"
        );
        assert!(out.contains("The source."), "{out}");
    }

    #[test]
    fn code_blocks_are_marked_with_their_language() {
        assert_eq!(
            markdown("```Rust,ignore\nfn main() {}\n```\n"),
            "<pre><code class=\"language-rust\">fn main() {}\n</code></pre>\n"
        );
        assert_eq!(
            markdown("```c++\nx\n```\n"),
            "<pre><code class=\"language-c++\">x\n</code></pre>\n"
        );
        // Not a language name: no class at all.
        assert_eq!(
            markdown("```\"onmouseover=x\nx\n```\n"),
            "<pre><code>x\n</code></pre>\n"
        );
        assert_eq!(
            markdown("    indented\n"),
            "<pre><code>indented\n</code></pre>\n"
        );
    }

    #[test]
    fn links_get_rel_noopener_noreferrer() {
        assert_eq!(
            markdown("[docs](https://example.com/a?b=1&c=2 \"Title\")"),
            "<p><a href=\"https://example.com/a?b=1&amp;c=2\" title=\"Title\" rel=\"noopener noreferrer\">docs</a></p>\n"
        );
    }

    #[test]
    fn mailto_and_http_links_are_allowed() {
        assert_eq!(
            markdown("[mail](mailto:a@example.com) <http://example.com>"),
            "<p><a href=\"mailto:a@example.com\" rel=\"noopener noreferrer\">mail</a> \
             <a href=\"http://example.com\" rel=\"noopener noreferrer\">http://example.com</a></p>\n"
        );
        assert!(markdown("<a@example.com>").contains("href=\"mailto:a@example.com\""));
    }

    #[test]
    fn other_link_targets_lose_their_href_and_keep_their_text() {
        for target in ["ftp://x/y", "/api/tasks/t1", "relative.html", "tel:123"] {
            assert_eq!(
                markdown(&format!("[text]({target})")),
                "<p><a rel=\"noopener noreferrer\">text</a></p>\n",
                "{target}"
            );
        }
    }

    #[test]
    fn images_load_only_over_https() {
        assert_eq!(
            markdown("![chart](https://example.com/c.png \"t\")"),
            "<p><img src=\"https://example.com/c.png\" alt=\"chart\" title=\"t\"></p>\n"
        );
        for src in [
            "http://example.com/c.png",
            "c.png",
            "data:image/png;base64,AAAA",
        ] {
            assert_eq!(
                markdown(&format!("![chart]({src})")),
                "<p><img alt=\"chart\"></p>\n",
                "{src}"
            );
        }
    }

    #[test]
    fn raw_html_is_shown_as_text() {
        assert_eq!(
            markdown("a <b>bold</b> c"),
            "<p>a &lt;b&gt;bold&lt;/b&gt; c</p>\n"
        );
        assert_eq!(
            markdown("<div>\n<p>x</p>\n</div>\n"),
            "<p>&lt;div&gt;<br>\n&lt;p&gt;x&lt;/p&gt;<br>\n&lt;/div&gt;</p>\n"
        );
    }

    #[test]
    fn headings_quotes_lists_and_rules_survive() {
        let out = markdown("# T\n\n> q\n\n1. a\n2. b\n\n---\n\n**s** *e* `c`  \nz");
        for needle in [
            "<h1>T</h1>",
            "<blockquote>\n<p>q</p>\n</blockquote>",
            "<ol>\n<li>a</li>\n<li>b</li>\n</ol>",
            "<hr>",
            "<strong>s</strong>",
            "<em>e</em>",
            "<code>c</code>",
            "<br>",
        ] {
            assert!(out.contains(needle), "{needle} missing from {out}");
        }
        assert!(markdown("3. c\n").contains("<ol start=\"3\">"));
    }
}
