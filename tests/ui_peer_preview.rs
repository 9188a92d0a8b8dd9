//! `POST /api/peers/preview`: a peer's card read before it is added, and
//! nothing stored.
mod common;
use common::*;

use serde_json::{Value, json};

#[tokio::test]
async fn preview_reads_the_card_and_stores_nothing() {
    let us = Server::start(None);
    let peer = Server::start(Some(
        "[[agents]]\nid = \"deployer\"\nname = \"Deploy Bot\"\n",
    ));
    let http = reqwest::Client::new();
    let token = us.ui_token();
    let post = |body: Value| {
        http.post(format!("{}/api/peers/preview", us.base))
            .bearer_auth(&token)
            .json(&body)
            .send()
    };

    let r = post(json!({"url": format!("{}/a2a/deployer", peer.base)}))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["card"]["name"], "Deploy Bot");

    let peers: Value = http
        .get(format!("{}/api/peers", us.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(peers["peers"], json!([]), "a preview adds no peer");

    let r = post(json!({"url": format!("{}/a2a/nobody", peer.base)}))
        .await
        .unwrap();
    assert_eq!(r.status(), 502);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"]["message"].as_str().unwrap().contains("the peer"),
        "{v}"
    );
    let r = post(json!({"nope": 1})).await.unwrap();
    assert_eq!(r.status(), 400);
}
