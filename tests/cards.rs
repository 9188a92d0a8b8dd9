//! Agent directory, gateway root card, card signatures and their key, over
//! the real binary.

mod common;

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use common::{Client, Server, run_cli};
use countersign::a2a::signing::{self, CardKey, SignError};
use serde_json::{Value, json};

const TWO_AGENTS: &str = r#"
[[agents]]
id = "first"
name = "First agent"
description = "The first one."
[agents.extended_card]
description = "The first one, for callers with credentials."

[[agents]]
id = "second"
name = "Second agent"

[[access.credentials]]
name = "ci"
bearer = "0123456789abcdef0123"
"#;

async fn get(c: &Client, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut rb = c.http.get(format!("{}{path}", c.base));
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    rb.send().await.unwrap()
}

/// Verifies `card` with the keys published at its signatures' `jku`.
async fn verify_with_jwks(c: &Client, card: &Value) -> Result<String, SignError> {
    let headers = signing::signature_headers(card);
    let jku = headers[0].as_ref().unwrap()["jku"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(jku, format!("{}/.well-known/jwks.json", c.base));
    let jwks: Value = c.http.get(&jku).send().await.unwrap().json().await.unwrap();
    signing::verify(card, &signing::jwks_keys(&jwks))
}

#[tokio::test]
async fn directory_lists_every_card_with_caching_headers() {
    let s = Server::start(Some(TWO_AGENTS));
    let c = s.client();
    let resp = get(&c, "/a2a/agents", &[]).await;
    assert_eq!(resp.status(), 200);
    let h = resp.headers().clone();
    assert!(h["cache-control"].to_str().unwrap().contains("max-age="));
    assert!(h.get("last-modified").is_some());
    assert!(h["vary"].to_str().unwrap().contains("Host"));
    let etag = h["etag"].to_str().unwrap().to_owned();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["total"], 2);
    let agents = body["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2);
    assert_eq!(agents[0]["name"], "First agent");
    assert_eq!(agents[1]["name"], "Second agent");
    assert_eq!(
        agents[1]["supportedInterfaces"][0]["url"],
        format!("{}/a2a/second", c.base)
    );
    // Each entry is the card its own URL serves, signature included.
    let own: Value = get(&c, "/a2a/second/.well-known/agent-card.json", &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(agents[1], own);
    for a in agents {
        verify_with_jwks(&c, a).await.unwrap();
    }

    // Conditional requests: the tag, `*`, a list holding it, its weak form.
    let weak = format!("W/{etag}");
    let list = format!("\"nope\", {etag}");
    for inm in [etag.as_str(), "*", list.as_str(), weak.as_str()] {
        let resp = get(&c, "/a2a/agents", &[("If-None-Match", inm)]).await;
        assert_eq!(resp.status(), 304, "If-None-Match: {inm}");
        assert_eq!(resp.headers()["etag"].to_str().unwrap(), etag);
        assert!(resp.headers().get("cache-control").is_some());
        assert!(resp.bytes().await.unwrap().is_empty());
    }
    for inm in ["\"nope\"", "\"nope\", W/\"other\""] {
        let resp = get(&c, "/a2a/agents", &[("If-None-Match", inm)]).await;
        assert_eq!(resp.status(), 200, "If-None-Match: {inm}");
    }
    // The strict shape has its own tag (Vary: A2A-Version).
    let strict = get(&c, "/a2a/agents", &[("A2A-Version", "1.0")]).await;
    assert_eq!(strict.status(), 200);
    assert_ne!(strict.headers()["etag"].to_str().unwrap(), etag);
    let strict: Value = strict.json().await.unwrap();
    assert!(strict["agents"][0].get("preferredTransport").is_none());
    assert!(strict["agents"][0].get("signatures").is_some());
    // The same request gives the same bytes: the signatures are deterministic.
    let again = get(&c, "/a2a/agents", &[]).await;
    assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);
}

#[tokio::test]
async fn every_served_card_verifies_with_the_published_key() {
    let s = Server::start(Some(TWO_AGENTS));
    let c = s.client();
    let jwks_resp = get(&c, "/.well-known/jwks.json", &[]).await;
    assert_eq!(jwks_resp.status(), 200);
    assert!(
        jwks_resp.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("max-age=")
    );
    let jwks_etag = jwks_resp.headers()["etag"].to_str().unwrap().to_owned();
    let jwks: Value = jwks_resp.json().await.unwrap();
    let kid = jwks["keys"][0]["kid"].as_str().unwrap().to_owned();
    assert_eq!(jwks["keys"][0]["kty"], "EC");
    assert_eq!(jwks["keys"][0]["crv"], "P-256");
    assert!(jwks["keys"][0].get("d").is_none(), "private part published");
    assert_eq!(
        get(
            &c,
            "/.well-known/jwks.json",
            &[("If-None-Match", &jwks_etag)]
        )
        .await
        .status(),
        304
    );

    for (path, version, sigs) in [
        ("/a2a/first/.well-known/agent-card.json", None, 2),
        ("/a2a/first/.well-known/agent-card.json", Some("1.0"), 1),
        ("/.well-known/agent-card.json", None, 2),
        ("/.well-known/agent.json", None, 2),
        ("/a2a/second/.well-known/agent.json", None, 2),
    ] {
        let headers: Vec<(&str, &str)> = version.map(|v| ("A2A-Version", v)).into_iter().collect();
        let card: Value = get(&c, path, &headers).await.json().await.unwrap();
        assert_eq!(
            card["signatures"].as_array().map(Vec::len),
            Some(sigs),
            "{path} {version:?}: {card}"
        );
        let h = signing::signature_headers(&card);
        for header in &h {
            let header = header.as_ref().unwrap();
            assert_eq!(header["alg"], "ES256");
            assert_eq!(header["typ"], "JOSE");
            assert_eq!(header["kid"], json!(kid));
        }
        assert_eq!(verify_with_jwks(&c, &card).await, Ok(kid.clone()), "{path}");

        // Exactly the JSON served is covered: the last signature alone
        // verifies the full card, and any change breaks every signature.
        let mut last_only = card.clone();
        let last = card["signatures"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        last_only["signatures"] = json!([last]);
        assert!(verify_with_jwks(&c, &last_only).await.is_ok(), "{path}");
        let mut changed = card.clone();
        changed["description"] = json!("Something else entirely.");
        assert_eq!(
            verify_with_jwks(&c, &changed).await,
            Err(SignError::Invalid)
        );
        if card.get("url").is_some() {
            let mut changed = card.clone();
            changed["url"] = json!("http://127.0.0.1:9/a2a/first");
            assert_eq!(
                verify_with_jwks(&c, &last_only_of(&changed)).await,
                Err(SignError::Invalid),
                "{path}: a 0.3 field changed"
            );
        }
    }

    // The extended card (JSON-RPC, 1.0) is signed too.
    let ext = c
        .http
        .post(format!("{}/a2a/first", c.base))
        .header("A2A-Version", "1.0")
        .bearer_auth("0123456789abcdef0123")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}))
        .send()
        .await
        .unwrap();
    let ext: Value = ext.json().await.unwrap();
    let card = &ext["result"];
    assert_eq!(
        card["description"], "The first one, for callers with credentials.",
        "{ext}"
    );
    assert_eq!(verify_with_jwks(&c, card).await, Ok(kid.clone()));
}

fn last_only_of(card: &Value) -> Value {
    let mut out = card.clone();
    let last = card["signatures"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    out["signatures"] = json!([last]);
    out
}

#[tokio::test]
async fn the_key_is_kept_in_the_data_dir_or_taken_from_config() {
    let dir = tempfile::tempdir().unwrap();
    let kid_of = |c: Client| async move {
        let jwks: Value = get(&c, "/.well-known/jwks.json", &[])
            .await
            .json()
            .await
            .unwrap();
        jwks["keys"][0]["kid"].as_str().unwrap().to_owned()
    };
    let mut s = Server::start_in(dir.path(), None, &[]);
    let first = kid_of(s.client()).await;
    s.terminate();
    let key_file = dir.path().join("card-key.pem");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let pem = std::fs::read_to_string(&key_file).unwrap();
    assert_eq!(CardKey::from_pem(&pem).unwrap().public().kid, first);
    // A restart signs with the same key.
    let mut s = Server::start_in(dir.path(), None, &[]);
    assert_eq!(kid_of(s.client()).await, first);
    s.terminate();

    // A configured key wins.
    let key = CardKey::generate().unwrap();
    let other = tempfile::tempdir().unwrap();
    let path = other.path().join("signing.pem");
    std::fs::write(&path, key.to_pem().unwrap()).unwrap();
    let config = format!("[cards]\nsigning_key = {:?}\n", path.display().to_string());
    let s = Server::start(Some(&config));
    assert_eq!(kid_of(s.client()).await, key.public().kid);
    let card: Value = get(&s.client(), "/.well-known/agent-card.json", &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        signing::verify(&card, &[key.public().clone()]),
        Ok(key.public().kid.clone())
    );
    drop(s);

    // A configured file that is no key: a clear error, no server.
    std::fs::write(&path, "not a key").unwrap();
    let cfg_dir = tempfile::tempdir().unwrap();
    let cfg = cfg_dir.path().join("c.toml");
    std::fs::write(&cfg, &config).unwrap();
    let run = run_cli(
        cfg_dir.path(),
        &[
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--config",
            cfg.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    )
    .await;
    assert_ne!(run.code, Some(0));
    assert!(
        run.stderr.contains("card signing key") && run.stderr.contains("signing.pem"),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn gateway_root_card_points_to_the_directory() {
    let config =
        format!("[cards]\nroot = \"gateway\"\ngateway_name = \"Team gateway\"\n{TWO_AGENTS}");
    let s = Server::start(Some(&config));
    let c = s.client();
    let resp = get(
        &c,
        "/.well-known/agent-card.json",
        &[("A2A-Version", "1.0")],
    )
    .await;
    assert_eq!(resp.status(), 200);
    let etag = resp.headers()["etag"].to_str().unwrap().to_owned();
    let card: Value = resp.json().await.unwrap();
    assert_eq!(card["name"], "Team gateway");
    let iface = &card["supportedInterfaces"][0];
    assert_eq!(iface["url"], format!("{}/a2a/agents", c.base));
    assert_eq!(iface["protocolBinding"], "urn:countersign:agent-directory");
    let skills: Vec<&str> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(skills, ["first", "second"]);
    assert!(card["securitySchemes"].get("bearer").is_some());
    verify_with_jwks(&c, &card).await.unwrap();
    assert_eq!(
        get(
            &c,
            "/.well-known/agent-card.json",
            &[("A2A-Version", "1.0"), ("If-None-Match", &etag)]
        )
        .await
        .status(),
        304
    );
    // Without A2A-Version too: no 0.3 `url` that would pass the directory
    // off as a JSON-RPC endpoint.
    let plain: Value = get(&c, "/.well-known/agent-card.json", &[])
        .await
        .json()
        .await
        .unwrap();
    assert!(
        plain.get("url").is_none() && plain.get("preferredTransport").is_none(),
        "{plain}"
    );
    assert_eq!(plain["name"], "Team gateway");
    // The interface leads to the directory.
    let dir: Value = get(&c, "/a2a/agents", &[]).await.json().await.unwrap();
    assert_eq!(dir["total"], 2);
    // The agents' own cards are unchanged.
    let first: Value = get(&c, "/a2a/first/.well-known/agent-card.json", &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(first["name"], "First agent");
}

#[tokio::test]
async fn an_agent_cannot_take_the_directory_path() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "[[agents]]\nid = \"agents\"\n").unwrap();
    let run = run_cli(
        dir.path(),
        &[
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--config",
            cfg.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    )
    .await;
    assert_ne!(run.code, Some(0));
    assert!(run.stderr.contains("reserved"), "{}", run.stderr);
}

#[test]
fn protected_headers_decode() {
    // The helper the tests above rely on reads what `sign` writes.
    let key = CardKey::generate().unwrap();
    let card = json!({"name": "x", "signatures": [key.sign(&json!({"name": "x"}), None).unwrap()]});
    let h = signing::signature_headers(&card);
    let raw = card["signatures"][0]["protected"].as_str().unwrap();
    let decoded: Value = serde_json::from_slice(&B64.decode(raw).unwrap()).unwrap();
    assert_eq!(Value::Object(h[0].clone().unwrap()), decoded);
}

#[tokio::test]
async fn a_card_follows_the_host_and_shape_asked_for_and_repeats_exactly() {
    let s = Server::start(Some(TWO_AGENTS));
    let c = s.client();
    let path = "/a2a/first/.well-known/agent-card.json";
    let port = c.base.rsplit(':').next().unwrap().to_owned();
    let localhost = format!("localhost:{port}");
    let mut seen = Vec::new();
    for (host, version) in [
        (None, None),
        (Some(localhost.as_str()), None),
        (None, Some("1.0")),
        (Some(localhost.as_str()), Some("1.0")),
    ] {
        let mut headers = Vec::new();
        if let Some(h) = host {
            headers.push(("Host", h));
        }
        if let Some(v) = version {
            headers.push(("A2A-Version", v));
        }
        // Asked twice: the same bytes and ETag (the second is remembered).
        let a = get(&c, path, &headers).await;
        let etag = a.headers()["etag"].clone();
        let body = a.bytes().await.unwrap();
        let b = get(&c, path, &headers).await;
        assert_eq!(b.headers()["etag"], etag);
        assert_eq!(b.bytes().await.unwrap(), body);
        let card: Value = serde_json::from_slice(&body).unwrap();
        let url = card["supportedInterfaces"][0]["url"].as_str().unwrap();
        match host {
            Some(h) => assert!(url.starts_with(&format!("http://{h}/")), "{url}"),
            None => assert!(url.starts_with(&c.base), "{url}"),
        }
        // The 0.3 fields are there exactly when the caller is not 1.x.
        assert_eq!(
            card.get("protocolVersion").is_some(),
            version.is_none(),
            "{card}"
        );
        seen.push(etag);
    }
    seen.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    seen.dedup();
    assert_eq!(seen.len(), 4, "each host and shape has its own card");
}
