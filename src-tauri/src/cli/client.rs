//! The HTTP side of the CLI: find the running instance in the data dir and
//! call its UI API with the bearer token it wrote there.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::CliError;
use crate::server::instance::{INSTANCE_FILE, Instance, read_instance};
use crate::server::ui_auth::TOKEN_FILE;

/// Who decides, as recorded in the audit trail.
const ACTOR: &str = "cli";

/// A connection to the running instance's UI API.
pub struct Api {
    http: reqwest::Client,
    base: url::Url,
    token: String,
    data_dir: PathBuf,
}

impl Api {
    /// Finds the instance serving `data_dir`; fails with
    /// [`CliError::NoInstance`] when there is none.
    pub fn connect(data_dir: &Path) -> Result<Api, CliError> {
        let Instance { info, token } = read_instance(data_dir)?;
        let base = url::Url::parse(&info.url).map_err(|e| {
            CliError::Server(format!(
                "{} names `{}`, which is not a URL: {e}",
                data_dir.join(INSTANCE_FILE).display(),
                info.url
            ))
        })?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            // A decision on a peer's task may wait for that peer.
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| CliError::Server(format!("cannot build an HTTP client: {e}")))?;
        Ok(Api {
            http,
            base,
            token: token.as_str().to_owned(),
            data_dir: data_dir.to_owned(),
        })
    }

    /// The URL of `/api/<segments…>` with `query`; segments are escaped.
    fn url(&self, segments: &[&str], query: &[(&str, &str)]) -> url::Url {
        let mut u = self.base.clone();
        u.set_query(None);
        if let Ok(mut path) = u.path_segments_mut() {
            path.pop_if_empty().push("api").extend(segments);
        }
        if !query.is_empty() {
            u.query_pairs_mut().extend_pairs(query);
        }
        u
    }

    /// `GET /api/<segments…>?query`: the JSON body.
    pub async fn get(&self, segments: &[&str], query: &[(&str, &str)]) -> Result<Value, CliError> {
        let req = self.http.get(self.url(segments, query));
        self.send(req).await
    }

    /// `POST /api/<segments…>` with a JSON body, as the CLI actor.
    pub async fn post(&self, segments: &[&str], body: &Value) -> Result<Value, CliError> {
        let req = self
            .http
            .post(self.url(segments, &[]))
            .header("X-Countersign-Actor", ACTOR)
            .json(body);
        self.send(req).await
    }

    /// `DELETE /api/<segments…>`, as the CLI actor.
    pub async fn delete(&self, segments: &[&str]) -> Result<Value, CliError> {
        let req = self
            .http
            .delete(self.url(segments, &[]))
            .header("X-Countersign-Actor", ACTOR);
        self.send(req).await
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Result<Value, CliError> {
        let resp = req
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| self.transport_error(e))?;
        let status = resp.status();
        if status == reqwest::StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        let text = resp.text().await.map_err(|e| self.transport_error(e))?;
        let body: Option<Value> = serde_json::from_str(&text).ok();
        if status.is_success() {
            return body.ok_or_else(|| {
                CliError::Server(format!(
                    "the instance answered {status} with a body that is not JSON"
                ))
            });
        }
        Err(error_from(status.as_u16(), body, &self.data_dir))
    }

    fn transport_error(&self, e: reqwest::Error) -> CliError {
        if e.is_connect() {
            CliError::Unreachable {
                url: self.base.to_string(),
                data_dir: self.data_dir.clone(),
            }
        } else if e.is_timeout() {
            CliError::Server(format!(
                "the instance at {} did not answer in time",
                self.base
            ))
        } else {
            CliError::Cut {
                url: self.base.to_string(),
                reason: e.to_string(),
                then: String::new(),
            }
        }
    }
}

/// The error an API answer stands for: `{"error":{"code","message"}}`, with
/// the first decision beside it when a task was already decided.
fn error_from(status: u16, body: Option<Value>, data_dir: &Path) -> CliError {
    let body = body.unwrap_or(Value::Null);
    let message = body["error"]["message"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| format!("the instance answered HTTP {status}"));
    match status {
        401 | 403 => CliError::Unauthorized(format!(
            "the instance refused the token in {}: {message}",
            data_dir.join(TOKEN_FILE).display()
        )),
        404 => CliError::NotFound(message),
        409 if body.get("decision").is_some_and(Value::is_object) => CliError::AlreadyDecided {
            message,
            first: Box::new(body["decision"].clone()),
        },
        400..=499 => CliError::Invalid(message),
        // The instance's own answer that a peer failed it (a gateway's 502
        // carries no such body).
        502 if body["error"]["message"].is_string() => CliError::Peer(message),
        _ => CliError::Server(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::instance::{InstanceError, InstanceFile};
    use crate::server::ui_auth::UiSecret;
    use serde_json::json;

    #[test]
    fn api_errors_map_to_their_kind() {
        let dir = Path::new("/tmp/x");
        let err = |code: u16, extra: Value| {
            let mut body = json!({"error": {"code": code, "message": "m"}});
            if let Value::Object(o) = extra {
                body.as_object_mut().unwrap().extend(o);
            }
            error_from(code, Some(body), dir)
        };
        assert!(matches!(err(404, json!({})), CliError::NotFound(m) if m == "m"));
        assert!(matches!(
            err(409, json!({"decision": {"kind": "approve"}})),
            CliError::AlreadyDecided { .. }
        ));
        assert!(matches!(err(409, json!({})), CliError::Invalid(_)));
        assert!(matches!(err(400, json!({})), CliError::Invalid(_)));
        assert!(matches!(err(401, json!({})), CliError::Unauthorized(_)));
        assert!(matches!(err(500, json!({})), CliError::Server(_)));
        assert!(matches!(err(502, json!({})), CliError::Peer(m) if m == "m"));
        assert!(matches!(
            error_from(502, None, dir),
            CliError::Server(m) if m.contains("502")
        ));
    }

    #[test]
    fn a_missing_instance_file_means_not_running() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            Api::connect(dir.path()),
            Err(CliError::NoInstance(InstanceError::NotRunning(_)))
        ));
    }

    #[test]
    fn ids_are_escaped_in_paths() {
        let dir = tempfile::tempdir().unwrap();
        UiSecret::load_or_create(dir.path()).unwrap();
        let _announced = InstanceFile::write(dir.path(), "127.0.0.1:9".parse().unwrap()).unwrap();
        let api = Api::connect(dir.path()).unwrap();
        assert_eq!(api.token, UiSecret::load(dir.path()).unwrap().as_str());
        assert_eq!(
            api.url(&["tasks", "a/b c"], &[("limit", "5")]).as_str(),
            "http://127.0.0.1:9/api/tasks/a%2Fb%20c?limit=5"
        );
    }
}
