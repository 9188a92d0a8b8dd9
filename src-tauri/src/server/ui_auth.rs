//! Who may use the UI API: whoever holds the per-install secret, from a page
//! this server served. The secret lives in the data dir (`ui-token`, mode
//! 0600); `countersign serve` hands it to the browser in the URL fragment and
//! the CLI reads it from the file.
//!
//! A bearer token alone is not enough against a browser: a page on another
//! site could point a DNS name at 127.0.0.1 (rebinding) or post to us from
//! the person's browser (CSRF). So every `/api/` request must also name us in
//! `Host`, and a browser request must come from our own origin.

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use axum::extract::{OriginalUri, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::Shared;
use super::ui_api::ApiError;

/// The secret's file name in the data dir.
pub const TOKEN_FILE: &str = "ui-token";

/// Random bytes in a new secret (written as 64 hex digits).
const SECRET_BYTES: usize = 32;

/// Shortest secret accepted from the file (a hand-written one included).
const MIN_TOKEN_LEN: usize = 32;

/// The one path where the token may come in the query: `EventSource` cannot
/// set headers. Anywhere else a query token would only end up in logs.
const EVENTS_PATH: &str = "/api/events";

/// The per-install secret that unlocks the UI API.
#[derive(Clone)]
pub struct UiSecret {
    token: String,
}

impl std::fmt::Debug for UiSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UiSecret(…)")
    }
}

/// Why the secret could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot read or write the UI secret {0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("cannot get random bytes for the UI secret: {0}")]
    Random(String),
    #[error(
        "the UI secret {0} is not a regular file; remove it and a new one is made at the next start"
    )]
    NotAFile(PathBuf),
    #[error(
        "the UI secret {0} is malformed (expected at least {MIN_TOKEN_LEN} characters of A-Z, a-z, 0-9, `-` or `_`); \
         remove it and a new one is made at the next start"
    )]
    Malformed(PathBuf),
    #[error("no UI secret at {0}: no server has been started with this data dir")]
    Missing(PathBuf),
}

impl UiSecret {
    /// Reads the secret of the data dir, making one if there is none.
    ///
    /// A secret that other users could read (group or other permission bits
    /// set) may have leaked, so it is replaced by a fresh one rather than
    /// just re-permissioned.
    pub fn load_or_create(data_dir: &Path) -> Result<UiSecret, SecretError> {
        let path = data_dir.join(TOKEN_FILE);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if !meta.file_type().is_file() => Err(SecretError::NotAFile(path)),
            Ok(meta) if loose_permissions(&meta) => {
                tracing::warn!(
                    "{} was readable by other users; replacing it with a new secret",
                    path.display()
                );
                let secret = UiSecret::generate()?;
                secret.write_to(&path, Replace::Yes)?;
                Ok(secret)
            }
            Ok(_) => UiSecret::load(data_dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let secret = UiSecret::generate()?;
                match secret.write_to(&path, Replace::No) {
                    Ok(()) => Ok(secret),
                    // Another process made one first: use that.
                    Err(SecretError::Io(_, e)) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        UiSecret::load(data_dir)
                    }
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(SecretError::Io(path, e)),
        }
    }

    /// Reads the secret of the data dir; never creates one (the CLI's view).
    pub fn load(data_dir: &Path) -> Result<UiSecret, SecretError> {
        let path = data_dir.join(TOKEN_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(SecretError::Missing(path));
            }
            Err(e) => return Err(SecretError::Io(path, e)),
        };
        let token = text.trim();
        if token.len() < MIN_TOKEN_LEN
            || !token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(SecretError::Malformed(path));
        }
        Ok(UiSecret {
            token: token.to_owned(),
        })
    }

    /// The token, as it goes into `Authorization: Bearer …` and the UI URL.
    pub fn as_str(&self) -> &str {
        &self.token
    }

    /// Whether `candidate` is the token, in time independent of where they differ.
    pub fn matches(&self, candidate: &str) -> bool {
        bool::from(self.token.as_bytes().ct_eq(candidate.as_bytes()))
    }

    fn generate() -> Result<UiSecret, SecretError> {
        let mut bytes = [0u8; SECRET_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| SecretError::Random(e.to_string()))?;
        let token = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(UiSecret { token })
    }

    /// Writes the secret with [`write_private`]: `Replace::No` fails with
    /// `AlreadyExists` if `path` exists.
    fn write_to(&self, path: &Path, replace: Replace) -> Result<(), SecretError> {
        write_private(path, format!("{}\n", self.token).as_bytes(), replace)
            .map_err(|e| SecretError::Io(path.to_path_buf(), e))
    }
}

/// How [`write_private`] puts a file in place.
pub(crate) enum Replace {
    /// Over whatever is there.
    Yes,
    /// Only where nothing is: a second process making its own file at the
    /// same moment gets `AlreadyExists`.
    No,
}

/// Writes `contents` to `path`, readable by the owner only: into a synced
/// temporary file, then moved into place, so the file is never visible with
/// other permissions or half written. The folder is synced after, so the
/// new name survives a power loss too: a person's saved settings, or a key
/// peers have pinned, must not come back as they were before. (A failed
/// sync of the folder is logged: the file is in place.)
pub(crate) fn write_private(path: &Path, contents: &[u8], replace: Replace) -> std::io::Result<()> {
    let tmp = write_private_temp(path, contents)?;
    let placed = match replace {
        // A hard link fails if the target exists.
        Replace::No => std::fs::hard_link(&tmp, path),
        Replace::Yes => std::fs::rename(&tmp, path),
    };
    let _ = std::fs::remove_file(&tmp);
    placed?;
    crate::durable_fs::sync_parent(path);
    Ok(())
}

/// Creates `<path>.tmp-<random>` readable by the owner only (never anything
/// wider, even briefly), writes `contents` and syncs it. Returns its path.
pub(crate) fn write_private_temp(path: &Path, contents: &[u8]) -> std::io::Result<PathBuf> {
    let mut suffix = [0u8; 8];
    getrandom::fill(&mut suffix).map_err(std::io::Error::other)?;
    let suffix: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp-{suffix}"));
    let tmp = path.with_file_name(name);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut file = opts.open(&tmp)?;
    let written = file.write_all(contents).and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

#[cfg(unix)]
fn loose_permissions(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o077 != 0
}

#[cfg(not(unix))]
fn loose_permissions(_: &std::fs::Metadata) -> bool {
    false
}

/// The `Host` values and origins a UI API request may name.
#[derive(Debug, Clone)]
pub struct AllowedHosts {
    /// Lowercase `host[:port]` authorities.
    authorities: Vec<String>,
    /// Lowercase serialised origins (`http://127.0.0.1:7717`).
    origins: Vec<String>,
    /// Bound to every address: any IP literal with our port is us (an IP
    /// literal cannot be rebound to another site).
    any_ip_port: Option<u16>,
}

impl AllowedHosts {
    /// The loopback names and the bound address on its port, plus the host
    /// and origin of `public_url` if set.
    pub fn new(local_addr: SocketAddr, public_url: Option<&str>) -> AllowedHosts {
        let port = local_addr.port();
        let mut hosts = vec![local_addr.ip().to_string()];
        for h in ["localhost", "127.0.0.1", "::1"] {
            if !hosts.iter().any(|x| x == h) {
                hosts.push(h.to_owned());
            }
        }
        let mut authorities = Vec::new();
        let mut origins = Vec::new();
        for h in &hosts {
            let h = match h.parse::<IpAddr>() {
                Ok(IpAddr::V6(_)) => format!("[{h}]"),
                _ => h.clone(),
            };
            authorities.push(format!("{h}:{port}"));
            if port == 80 {
                // Browsers leave the default port out of `Host` and `Origin`.
                authorities.push(h.clone());
                origins.push(format!("http://{h}"));
            } else {
                origins.push(format!("http://{h}:{port}"));
            }
        }
        if let Some(url) = public_url.and_then(|u| url::Url::parse(u).ok())
            && let Some(host) = url.host_str()
        {
            let host = host.to_ascii_lowercase();
            if let Some(p) = url.port_or_known_default() {
                authorities.push(format!("{host}:{p}"));
            }
            if url.port().is_none() {
                authorities.push(host);
            }
            origins.push(url.origin().ascii_serialization().to_ascii_lowercase());
        }
        AllowedHosts {
            authorities,
            origins,
            any_ip_port: local_addr.ip().is_unspecified().then_some(port),
        }
    }

    fn allows_host(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        if self.authorities.contains(&host) {
            return true;
        }
        let Some(port) = self.any_ip_port else {
            return false;
        };
        host.parse::<SocketAddr>().is_ok_and(|a| a.port() == port)
    }

    fn allows_origin(&self, origin: &str) -> bool {
        let origin = origin.trim().to_ascii_lowercase();
        if self.origins.contains(&origin) {
            return true;
        }
        self.any_ip_port.is_some()
            && origin
                .strip_prefix("http://")
                .is_some_and(|a| self.allows_host(a))
    }
}

/// Checks one UI API request: `Host` names us, a browser request comes from
/// our origin, and it carries the secret. Host and origin are checked first,
/// so a foreign page learns nothing about the token.
pub fn check(
    secret: &UiSecret,
    allowed: &AllowedHosts,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    authority: Option<&str>,
) -> Result<(), ApiError> {
    // HTTP/2 carries the host in `:authority`, which lands in the URI.
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or(authority);
    match host {
        Some(h) if allowed.allows_host(h) => {}
        Some(h) => {
            return Err(ApiError::Forbidden(format!(
                "the UI API answers only requests addressed to this server, not to `{h}`"
            )));
        }
        None => {
            return Err(ApiError::Forbidden(
                "the UI API needs a Host header naming this server".into(),
            ));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !allowed.allows_origin(origin) {
            return Err(ApiError::Forbidden(format!(
                "the UI API answers only pages of this server, not `{origin}`"
            )));
        }
    }
    if headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site"))
    {
        return Err(ApiError::Forbidden(
            "the UI API answers only pages of this server, not cross-site requests".into(),
        ));
    }
    let from_header = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
    let from_query = || {
        (method == Method::GET && path == EVENTS_PATH)
            .then(|| {
                url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
                    .find(|(k, _)| k == "token")
                    .map(|(_, v)| v.into_owned())
            })
            .flatten()
    };
    match from_header.map(str::to_owned).or_else(from_query) {
        Some(t) if secret.matches(&t) => Ok(()),
        Some(_) => Err(ApiError::Unauthorized(
            "the UI token is wrong; use the one `countersign serve` printed".into(),
        )),
        None => Err(ApiError::Unauthorized(
            "the UI API needs `Authorization: Bearer <token>`; `countersign serve` prints the token"
                .into(),
        )),
    }
}

/// Middleware for every `/api/` route: refuses what [`check`] refuses, and
/// marks every answer uncacheable and not to be sniffed.
pub async fn guard(State(state): State<Shared>, req: Request, next: Next) -> Response {
    // Under `nest`, the URI is stripped of `/api`; the original names the route.
    let uri = req
        .extensions()
        .get::<OriginalUri>()
        .map_or_else(|| req.uri().clone(), |o| o.0.clone());
    let verdict = check(
        &state.ui_secret,
        &state.ui_hosts,
        req.method(),
        uri.path(),
        uri.query(),
        req.headers(),
        req.uri().authority().map(|a| a.as_str()),
    );
    let mut resp = match verdict {
        Ok(()) => next.run(req).await,
        Err(e) => {
            if matches!(e, ApiError::Forbidden(_)) {
                tracing::warn!("UI API request refused: {e}");
            }
            e.into_response()
        }
    };
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn secret() -> UiSecret {
        UiSecret {
            token: TOKEN.into(),
        }
    }

    fn local() -> AllowedHosts {
        AllowedHosts::new("127.0.0.1:7717".parse().unwrap(), None)
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    fn run(allowed: &AllowedHosts, path: &str, query: Option<&str>, h: &[(&str, &str)]) -> u16 {
        match check(
            &secret(),
            allowed,
            &Method::GET,
            path,
            query,
            &headers(h),
            None,
        ) {
            Ok(()) => 200,
            Err(e) => e.status().as_u16(),
        }
    }

    const BEARER: (&str, &str) = (
        "authorization",
        "Bearer 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    );

    #[test]
    fn token_is_required_and_must_match() {
        let a = local();
        let host = ("host", "127.0.0.1:7717");
        assert_eq!(run(&a, "/api/health", None, &[host]), 401);
        assert_eq!(
            run(
                &a,
                "/api/health",
                None,
                &[host, ("authorization", "Bearer nope")]
            ),
            401
        );
        assert_eq!(
            run(&a, "/api/health", None, &[host, ("authorization", TOKEN)]),
            401,
            "a bare token without the Bearer scheme"
        );
        assert_eq!(run(&a, "/api/health", None, &[host, BEARER]), 200);
        let lower = format!("bearer {TOKEN}");
        assert_eq!(
            run(&a, "/api/health", None, &[host, ("authorization", &lower)]),
            200
        );
    }

    #[test]
    fn query_token_counts_only_for_the_event_stream() {
        let a = local();
        let host = ("host", "localhost:7717");
        let q = format!("token={TOKEN}");
        assert_eq!(run(&a, "/api/events", Some(&q), &[host]), 200);
        assert_eq!(run(&a, "/api/health", Some(&q), &[host]), 401);
        assert_eq!(run(&a, "/api/events", Some("token=wrong"), &[host]), 401);
        let post = check(
            &secret(),
            &a,
            &Method::POST,
            "/api/events",
            Some(&q),
            &headers(&[host]),
            None,
        );
        assert!(matches!(post, Err(ApiError::Unauthorized(_))));
    }

    #[test]
    fn foreign_host_is_refused_before_the_token_is_looked_at() {
        let a = local();
        for host in [
            "evil.example:7717",
            "127.0.0.1:7718",
            "localhost",
            "127.0.0.1.evil.example:7717",
        ] {
            assert_eq!(
                run(&a, "/api/health", None, &[("host", host), BEARER]),
                403,
                "{host}"
            );
            assert_eq!(
                run(&a, "/api/health", None, &[("host", host)]),
                403,
                "{host}"
            );
        }
        assert_eq!(
            run(&a, "/api/health", None, &[BEARER]),
            403,
            "no Host at all"
        );
        for host in ["127.0.0.1:7717", "LOCALHOST:7717", "[::1]:7717"] {
            assert_eq!(
                run(&a, "/api/health", None, &[("host", host), BEARER]),
                200,
                "{host}"
            );
        }
    }

    #[test]
    fn http2_authority_stands_in_for_host() {
        let r = check(
            &secret(),
            &local(),
            &Method::GET,
            "/api/health",
            None,
            &headers(&[BEARER]),
            Some("127.0.0.1:7717"),
        );
        assert!(r.is_ok());
    }

    #[test]
    fn foreign_origin_and_cross_site_fetches_are_refused() {
        let a = local();
        let host = ("host", "127.0.0.1:7717");
        for origin in [
            "http://evil.example",
            "http://localhost:3000",
            "https://127.0.0.1:7717",
            "null",
        ] {
            assert_eq!(
                run(&a, "/api/health", None, &[host, BEARER, ("origin", origin)]),
                403,
                "{origin}"
            );
        }
        for origin in [
            "http://127.0.0.1:7717",
            "http://localhost:7717",
            "http://[::1]:7717",
        ] {
            assert_eq!(
                run(&a, "/api/health", None, &[host, BEARER, ("origin", origin)]),
                200,
                "{origin}"
            );
        }
        assert_eq!(
            run(
                &a,
                "/api/health",
                None,
                &[host, BEARER, ("sec-fetch-site", "cross-site")]
            ),
            403
        );
        assert_eq!(
            run(
                &a,
                "/api/health",
                None,
                &[host, BEARER, ("sec-fetch-site", "same-origin")]
            ),
            200
        );
    }

    #[test]
    fn public_url_adds_its_host_and_origin() {
        let a = AllowedHosts::new(
            "127.0.0.1:7717".parse().unwrap(),
            Some("https://Inbox.Example.com/"),
        );
        let h = |host, origin| {
            run(
                &a,
                "/api/health",
                None,
                &[("host", host), ("origin", origin), BEARER],
            )
        };
        assert_eq!(h("inbox.example.com", "https://inbox.example.com"), 200);
        assert_eq!(h("inbox.example.com:443", "https://inbox.example.com"), 200);
        assert_eq!(h("inbox.example.com", "http://inbox.example.com"), 403);
        assert_eq!(
            h("inbox.example.com:7717", "https://inbox.example.com"),
            403
        );
        let p = AllowedHosts::new(
            "127.0.0.1:7717".parse().unwrap(),
            Some("http://box.lan:8080"),
        );
        assert!(p.allows_host("box.lan:8080"));
        assert!(!p.allows_host("box.lan"));
        assert!(p.allows_origin("http://box.lan:8080"));
    }

    #[test]
    fn port_80_hosts_may_leave_the_port_out() {
        let a = AllowedHosts::new("127.0.0.1:80".parse().unwrap(), None);
        assert!(a.allows_host("localhost"));
        assert!(a.allows_host("localhost:80"));
        assert!(a.allows_origin("http://localhost"));
    }

    #[test]
    fn unspecified_bind_accepts_ip_literals_on_its_port_only() {
        let a = AllowedHosts::new("0.0.0.0:7717".parse().unwrap(), None);
        assert!(a.allows_host("192.168.1.20:7717"));
        assert!(a.allows_host("[fe80::1]:7717"));
        assert!(a.allows_origin("http://192.168.1.20:7717"));
        assert!(!a.allows_host("192.168.1.20:7718"));
        assert!(!a.allows_host("evil.example:7717"));
        assert!(!a.allows_origin("https://192.168.1.20:7717"));
        assert!(!local().allows_host("192.168.1.20:7717"));
    }

    #[cfg(unix)]
    fn mode(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn secret_is_created_private_and_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let a = UiSecret::load_or_create(dir.path()).unwrap();
        assert_eq!(a.as_str().len(), 64);
        assert!(a.as_str().bytes().all(|b| b.is_ascii_hexdigit()));
        #[cfg(unix)]
        assert_eq!(mode(&dir.path().join(TOKEN_FILE)), 0o600);
        let b = UiSecret::load_or_create(dir.path()).unwrap();
        assert_eq!(a.as_str(), b.as_str());
        assert_eq!(UiSecret::load(dir.path()).unwrap().as_str(), a.as_str());
        assert!(a.matches(b.as_str()));
        assert!(!a.matches(&b.as_str()[1..]));
        // No temporary files left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn readable_secret_is_replaced() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TOKEN_FILE);
        std::fs::write(&path, format!("{TOKEN}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let s = UiSecret::load_or_create(dir.path()).unwrap();
        assert_ne!(s.as_str(), TOKEN);
        assert_eq!(mode(&path), 0o600);
        // A private hand-written secret is kept as it is.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&path, format!("{TOKEN}\n")).unwrap();
        assert_eq!(
            UiSecret::load_or_create(dir.path()).unwrap().as_str(),
            TOKEN
        );
    }

    #[test]
    fn missing_or_malformed_secret_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            UiSecret::load(dir.path()),
            Err(SecretError::Missing(_))
        ));
        std::fs::write(dir.path().join(TOKEN_FILE), "short\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(
                dir.path().join(TOKEN_FILE),
                std::fs::Permissions::from_mode(0o600),
            )
            .unwrap();
        }
        let e = UiSecret::load_or_create(dir.path()).unwrap_err();
        assert!(matches!(e, SecretError::Malformed(_)), "{e}");
        assert!(e.to_string().contains("remove it"), "{e}");
    }
}
