//! How long the markdown renderer takes on hostile input (release build):
//!
//!     cargo bench --no-default-features --bench render [-- KIB [FILTER]]
//!
//! An agent's text part can be as large as a request body (1 MiB by
//! default), and the UI renders it when someone opens the task. Each case
//! below is KIB KiB (default 200) of one shape that has made markdown
//! parsers or HTML sanitisers slow: deep nesting, long runs of delimiters,
//! unclosed constructs, wide tables, raw HTML. Prints one Markdown table:
//! the best and the median of five renders, the rate, and the size of the
//! HTML out. Ordinary prose is the first row, for scale. FILTER keeps only
//! the inputs whose name contains it.
use std::time::{Duration, Instant};

use countersign::render::markdown;

/// `unit` repeated until the text is at least `bytes` long.
fn repeat(unit: &str, bytes: usize) -> String {
    unit.repeat(bytes.div_ceil(unit.len().max(1)))
}

fn cases(bytes: usize) -> Vec<(&'static str, String)> {
    let prose = "Deploy **v2.4.1** to `prod-eu` after the [canary](https://example.com/canary) \
                 passes; roll back with _care_ if error rates rise above 1%.\n\n\
                 - check the dashboards\n- tell #ops\n\n";
    // Each line one level deeper than the last.
    let nested_lists: String = {
        let mut s = String::new();
        let mut depth = 0;
        while s.len() < bytes {
            s.push_str(&" ".repeat(depth * 2));
            s.push_str("- item\n");
            depth = (depth + 1) % 2000;
        }
        s
    };
    let wide_table: String = {
        let cols = 2000;
        let row = |cell: &str| format!("|{}\n", cell.repeat(cols));
        let mut s = row(" h |");
        s.push_str(&row("---|"));
        while s.len() < bytes {
            s.push_str(&row(" c |"));
        }
        s
    };
    let code_spans: String = {
        // Opening backtick runs of growing length that never close.
        let mut s = String::new();
        let mut n = 1;
        while s.len() < bytes {
            s.push_str(&"`".repeat(n));
            s.push_str(" x ");
            n = n % 200 + 1;
        }
        s
    };
    vec![
        (
            "prose (paragraphs, emphasis, links, lists)",
            repeat(prose, bytes),
        ),
        ("blockquotes nested on one line", repeat("> ", bytes)),
        ("lists nested one level per line", nested_lists),
        (
            "emphasis openers never closed (`*a `)",
            repeat("*a ", bytes),
        ),
        ("strong/emphasis mix (`**a_`)", repeat("**a_", bytes)),
        ("link openers never closed (`[a](`)", repeat("[a](", bytes)),
        ("brackets only (`[`)", repeat("[", bytes)),
        (
            "inline links (`[x](https://…)`)",
            repeat("[x](https://example.com/a?b=c) ", bytes),
        ),
        ("code span openers of growing length", code_spans),
        ("raw HTML tags (`<div>`)", repeat("<div>", bytes)),
        ("unclosed HTML comment openers", repeat("<!-- a ", bytes)),
        ("entities (`&amp;`)", repeat("&amp;", bytes)),
        ("ampersands (`&`)", repeat("&", bytes)),
        ("degree signs (`°`)", repeat("°", bytes)),
        (
            "inline code of ampersands",
            format!("`{}`", repeat("&", bytes)),
        ),
        (
            "code block of ampersands",
            format!("```\n{}\n```", repeat("&", bytes)),
        ),
        (
            "image alt text of ampersands",
            format!("![{}](https://example.com/a.png)", repeat("&", bytes)),
        ),
        (
            "link title of ampersands",
            format!("[a](https://example.com/ \"{}\")", repeat("&", bytes)),
        ),
        (
            "link URL of ampersands",
            format!("[a](https://example.com/?{})", repeat("&", bytes)),
        ),
        ("table 2000 columns wide", wide_table),
        (
            "footnote references and definitions",
            repeat("x[^a] \n\n[^a]: note\n", bytes),
        ),
        ("one line, no spaces", repeat("a", bytes)),
    ]
}

fn main() {
    // `cargo bench` passes `--bench` along; the rest are ours.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let kib: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(200);
    let filter = args.get(1).map_or("", String::as_str);
    let bytes = kib * 1024;
    println!("markdown render, {kib} KiB per input, five renders each\n");
    println!("| input | best ms | median ms | MB/s | HTML out KiB |");
    println!("|---|---:|---:|---:|---:|");
    for (name, text) in cases(bytes).into_iter().filter(|(n, _)| n.contains(filter)) {
        let mut times: Vec<Duration> = Vec::with_capacity(5);
        let mut out = 0;
        for _ in 0..5 {
            let t = Instant::now();
            let html = markdown(&text);
            times.push(t.elapsed());
            out = html.len();
        }
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "| {name} | {:.1} | {:.1} | {:.0} | {} |",
            ms(times[0]),
            ms(times[2]),
            text.len() as f64 / times[2].as_secs_f64() / 1e6,
            out / 1024
        );
    }
}
