//! The built UI served at `/`: its security headers and caching, no token
//! needed for the files (the API still wants one), a plain page when the UI
//! is not built, and no way out of the UI directory.
mod common;
use common::*;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

fn ui_dir(root: &Path) -> std::path::PathBuf {
    let ui = root.join("ui");
    std::fs::create_dir_all(ui.join("assets")).unwrap();
    std::fs::write(
        ui.join("index.html"),
        "<!doctype html><title>Countersign</title><script type=\"module\" src=\"/assets/app-1a2b.js\"></script>",
    )
    .unwrap();
    std::fs::write(ui.join("assets/app-1a2b.js"), "console.log('ui')").unwrap();
    std::fs::write(root.join("secret.txt"), "TOP-SECRET").unwrap();
    ui
}

fn config_with(dir: &Path) -> String {
    format!(
        "[ui]\ndir = \"{}\"\n\n[[agents]]\nid = \"inbox\"\n",
        dir.display()
    )
}

/// One raw HTTP/1.1 GET, so the path reaches the server exactly as written
/// (clients normalise `..` away). Returns the status line and the whole answer.
fn raw_get(base: &str, path: &str) -> (String, String) {
    let addr = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    (out.lines().next().unwrap_or("").to_owned(), out)
}

#[tokio::test]
async fn ui_files_are_served_with_a_strict_policy_and_no_token() {
    let tmp = tempfile::tempdir().unwrap();
    let ui = ui_dir(tmp.path());
    let s = Server::start(Some(&config_with(&ui)));
    let http = reqwest::Client::new();

    let r = http.get(format!("{}/", s.base)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let h = r.headers().clone();
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    let csp = h["content-security-policy"].to_str().unwrap();
    for directive in [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "object-src 'none'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ] {
        assert!(csp.contains(directive), "{directive} in {csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["referrer-policy"], "no-referrer");
    assert_eq!(h["cache-control"], "no-cache");
    assert!(r.text().await.unwrap().contains("/assets/app-1a2b.js"));

    let r = http
        .get(format!("{}/assets/app-1a2b.js", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    assert!(
        r.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("immutable")
    );
    assert_eq!(r.text().await.unwrap(), "console.log('ui')");

    // The page needs no token; the API behind it still does.
    let r = http
        .get(format!("{}/api/health", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // Unknown paths keep answering the A2A 404.
    let r = http
        .get(format!("{}/assets/missing.js", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = http.post(format!("{}/", s.base)).send().await.unwrap();
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn paths_out_of_the_ui_directory_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let ui = ui_dir(tmp.path());
    let s = Server::start(Some(&config_with(&ui)));
    for path in [
        "/../secret.txt",
        "/assets/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/assets/%2e%2e/%2e%2e/secret.txt",
        "/assets/..%2f..%2fsecret.txt",
        "/..%5csecret.txt",
        "/assets/%2E%2E%2F%2E%2E%2Fsecret.txt",
    ] {
        let (status, whole) = raw_get(&s.base, path);
        assert!(!whole.contains("TOP-SECRET"), "{path} leaked: {whole}");
        assert!(
            status.contains(" 404") || status.contains(" 400"),
            "{path}: {status}"
        );
    }
    let (status, _) = raw_get(&s.base, "/assets/app-1a2b.js");
    assert!(status.contains(" 200"), "{status}");
}

#[tokio::test]
async fn without_a_built_ui_the_root_says_how_to_build_it() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Server::start(Some(&config_with(&tmp.path().join("nothing-here"))));
    let r = reqwest::get(format!("{}/", s.base)).await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );
    let body = r.text().await.unwrap();
    assert!(body.contains("not built"), "{body}");
    assert!(body.contains("npm run build"), "{body}");
    assert!(!body.contains("<script"), "{body}");
}
