//! The browser UI's files (`ui/dist`, built by `npm run build` in `ui/`),
//! served at `/` from a directory read at run time, so the crate never needs
//! Node to compile. The files need no token: the token travels in the URL
//! fragment, which the browser never sends; `/api/` still asks for it.
//!
//! Every answer carries a strict Content-Security-Policy (the UI is built to
//! need no inline script or style), `nosniff` and no referrer. Hashed assets
//! are cached for a year; `index.html` is revalidated every time.

use std::path::{Component, Path, PathBuf};

use axum::extract::State;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use super::Shared;

/// The policy every UI page runs under.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self' https: data: blob:; connect-src 'self'; object-src 'none'; \
    base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

/// The environment variable naming the UI directory.
pub const DIR_ENV: &str = "COUNTERSIGN_UI_DIR";

/// Shown at `/` when no built UI is found. No script, no style.
const NOT_BUILT: &str = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
    <title>Countersign</title></head><body>\
    <h1>The Countersign UI is not built</h1>\
    <p>Build it once with <code>npm ci &amp;&amp; npm run build</code> in the <code>ui/</code> \
    directory of the source tree (or run <code>scripts/start.sh</code>, which does), then reload \
    this page. A built UI elsewhere can be named with <code>[ui] dir</code> in the config or \
    <code>COUNTERSIGN_UI_DIR</code>.</p>\
    <p>The UI API under <code>/api/</code>, the A2A endpoints and the CLI work without it.</p>\
    </body></html>\n";

/// Where the UI's files are read from, if anywhere.
#[derive(Debug, Clone)]
pub struct UiFiles {
    dir: Option<PathBuf>,
}

impl UiFiles {
    /// Picks the UI directory: `configured` (`[ui] dir`) if set, else
    /// `$COUNTERSIGN_UI_DIR`, used as given even if missing; otherwise the
    /// first that exists of `<exe dir>/../share/countersign/ui`,
    /// `<exe dir>/../lib/Countersign/ui` (the .deb) and the source tree's
    /// `ui/dist`.
    pub fn locate(configured: Option<PathBuf>) -> UiFiles {
        let explicit = configured.or_else(|| {
            std::env::var_os(DIR_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        });
        if let Some(dir) = explicit {
            if !dir.join("index.html").is_file() {
                tracing::warn!(
                    "no index.html in the UI directory {}; `/` explains how to build it",
                    dir.display()
                );
            }
            return UiFiles { dir: Some(dir) };
        }
        let beside_exe = std::env::current_exe().ok().and_then(|exe| {
            exe.parent().map(|d| {
                [
                    d.join("..").join("share").join("countersign").join("ui"),
                    // Where the .deb puts the app's resources.
                    d.join("..").join("lib").join("Countersign").join("ui"),
                ]
            })
        });
        let source_tree = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/ui/dist"));
        let dir = beside_exe
            .into_iter()
            .flatten()
            .chain(std::iter::once(source_tree))
            .find(|d| d.join("index.html").is_file());
        if dir.is_none() {
            tracing::info!("no built UI found; `/` explains how to build it");
        }
        UiFiles { dir }
    }

    /// A UI served from exactly `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> UiFiles {
        UiFiles {
            dir: Some(dir.into()),
        }
    }

    /// The file a request path names, if it is safely inside the UI
    /// directory and exists: no `..`, no hidden files, no escape through
    /// a symbolic link.
    fn resolve(&self, path: &str) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        let rel = relative_path(path)?;
        let root = dir.canonicalize().ok()?;
        let file = root.join(rel).canonicalize().ok()?;
        (file.starts_with(&root) && file.is_file()).then_some(file)
    }
}

/// A request path as a relative file path, or `None` when any segment is
/// empty, `.`, `..`, hidden, or holds a separator or NUL once decoded.
fn relative_path(path: &str) -> Option<PathBuf> {
    let trimmed = path.strip_prefix('/')?;
    let mut out = PathBuf::new();
    for raw in trimmed.split('/') {
        let seg = percent_decode(raw)?;
        if seg.is_empty()
            || seg.starts_with('.')
            || seg.contains(['/', '\\', '\0', ':'])
            || !matches!(
                Path::new(&seg).components().next(),
                Some(Component::Normal(_))
            )
        {
            return None;
        }
        out.push(seg);
    }
    Some(out)
}

/// Decodes `%XX` escapes; `None` for a malformed escape or invalid UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// The headers of every UI answer.
fn secure(mut resp: Response, cache: &'static str) -> Response {
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    resp
}

fn file_response(method: &Method, bytes: Vec<u8>, content_type: &'static str) -> Response {
    let len = bytes.len();
    let body = if method == Method::HEAD {
        Vec::new()
    } else {
        bytes
    };
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    resp
}

/// The router's fallback: a UI file for `GET`/`HEAD`, else the usual 404.
pub async fn serve(State(state): State<Shared>, method: Method, uri: Uri) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return super::not_found(uri).await;
    }
    let path = uri.path();
    if path == "/" || path == "/index.html" {
        return index(&state, &method).await;
    }
    let Some(file) = state.ui_files.resolve(path) else {
        return super::not_found(uri).await;
    };
    match tokio::fs::read(&file).await {
        Ok(bytes) => {
            // Vite names what it emits under assets/ by content hash: a new
            // build is a new name, so these never go stale.
            let cache = if path.starts_with("/assets/") {
                "public, max-age=31536000, immutable"
            } else {
                "no-cache"
            };
            secure(file_response(&method, bytes, content_type(&file)), cache)
        }
        Err(e) => {
            tracing::warn!("cannot read UI file {}: {e}", file.display());
            super::not_found(uri).await
        }
    }
}

async fn index(state: &Shared, method: &Method) -> Response {
    let html = match &state.ui_files.dir {
        Some(dir) => tokio::fs::read(dir.join("index.html")).await.ok(),
        None => None,
    };
    let bytes = html.unwrap_or_else(|| NOT_BUILT.as_bytes().to_vec());
    secure(
        file_response(method, bytes, "text/html; charset=utf-8"),
        "no-cache",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_paths_map_only_to_plain_relative_files() {
        assert_eq!(
            relative_path("/assets/index-abc.js"),
            Some(PathBuf::from("assets/index-abc.js"))
        );
        assert_eq!(relative_path("/a%20b.txt"), Some(PathBuf::from("a b.txt")));
        for bad in [
            "/../etc/passwd",
            "/assets/../../x",
            "/%2e%2e/x",
            "/assets/%2E%2E/%2e%2e/x",
            "/assets/..%2f..%2fx",
            "/assets/%5c..%5cx",
            "/.env",
            "/assets//x",
            "/assets/x%00.js",
            "/C:%5cwindows",
            "/%zz",
            "assets/x",
        ] {
            assert_eq!(relative_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn symlinks_out_of_the_ui_dir_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let ui = tmp.path().join("ui");
        std::fs::create_dir_all(ui.join("assets")).unwrap();
        std::fs::write(ui.join("assets/app.js"), "ok").unwrap();
        std::fs::write(tmp.path().join("secret"), "no").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(tmp.path().join("secret"), ui.join("assets/leak.js")).unwrap();
        let files = UiFiles::at(&ui);
        assert!(files.resolve("/assets/app.js").is_some());
        assert!(files.resolve("/assets/leak.js").is_none());
        assert!(files.resolve("/assets").is_none(), "a directory is no file");
        assert!(files.resolve("/missing.js").is_none());
    }
}
