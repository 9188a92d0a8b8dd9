//! The UI API's queue, task, decision, file and history endpoints, over
//! real HTTP against the real binary.
mod common;
use common::*;

use reqwest::StatusCode;
use serde_json::{Value, json};

const CONFIG: &str = r#"
[[agents]]
id = "inbox"
[[agents]]
id = "ops"
"#;

struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    fn new(s: &Server) -> Api {
        Api {
            http: reqwest::Client::new(),
            base: s.base.clone(),
            token: s.ui_token(),
        }
    }

    async fn get(&self, path: &str) -> (StatusCode, reqwest::header::HeaderMap, String) {
        let r = self
            .http
            .get(format!("{}/api{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        let (status, headers) = (r.status(), r.headers().clone());
        (status, headers, r.text().await.unwrap())
    }

    async fn json(&self, path: &str) -> Value {
        let (status, headers, body) = self.get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert_eq!(headers["content-type"], "application/json", "{path}");
        serde_json::from_str(&body).unwrap()
    }

    async fn decide(&self, task: &str, body: Value) -> (StatusCode, Value) {
        let r = self
            .http
            .post(format!("{}/api/tasks/{task}/decision", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status(), r.json().await.unwrap())
    }
}

async fn park(c: &Client, agent: &str, message: Value) -> String {
    let r = c
        .rpc_ok(agent, "SendMessage", json!({"message": message}))
        .await;
    assert_eq!(
        r["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{r}"
    );
    r["task"]["id"].as_str().unwrap().to_owned()
}

/// A request that escapes its markdown shows the characters it escaped,
/// read once: the preview is stored as shown, not cleaned again on read.
#[tokio::test]
async fn escaped_markdown_previews_as_the_characters_it_escapes() {
    let s = Server::start(Some(CONFIG));
    let (c, api) = (s.client(), Api::new(&s));
    park(
        &c,
        "inbox",
        message("m1", r"Deploy \*all\* regions &lt;b&gt; now?"),
    )
    .await;
    let q = api.json("/queue").await;
    assert_eq!(q["items"][0]["preview"], "Deploy *all* regions <b> now?");
}

#[tokio::test]
async fn queue_lists_filters_searches_and_counts_parked_tasks() {
    let s = Server::start(Some(CONFIG));
    let (c, api) = (s.client(), Api::new(&s));
    let a = park(
        &c,
        "inbox",
        message("m1", "Pay invoice 1042?\nAmount: 300 EUR"),
    )
    .await;
    let b = park(
        &c,
        "ops",
        message(
            "m2",
            "## Restart the **API** servers in [`eu-west`](https://status.example.com)?\n\nAll of them.",
        ),
    )
    .await;
    let q = api.json("/queue").await;
    assert_eq!(q["total"], 2);
    assert_eq!(
        q["items"][0]["taskId"],
        a.as_str(),
        "oldest first by default"
    );
    assert_eq!(q["items"][0]["preview"], "Pay invoice 1042?");
    assert_eq!(q["items"][0]["state"], "input-required");
    assert_eq!(
        q["items"][0]["source"], "served",
        "asked here, not of a peer"
    );
    assert_eq!(q["counts"], json!({"inbox": 1, "ops": 1}));
    let q = api.json("/queue?sort=newest&limit=1").await;
    assert_eq!(q["items"][0]["taskId"], b.as_str());
    assert_eq!(
        q["items"][0]["preview"], "Restart the API servers in eu-west?",
        "a markdown heading is previewed as its text, without inline markup"
    );
    assert!(q["nextCursor"].is_string());
    let next = api
        .json(&format!(
            "/queue?sort=newest&limit=1&cursor={}",
            q["nextCursor"].as_str().unwrap()
        ))
        .await;
    assert_eq!(next["items"][0]["taskId"], a.as_str());
    assert!(next.get("nextCursor").is_none());
    assert_eq!(api.json("/queue?agent=ops").await["total"], 1);
    assert_eq!(
        api.json("/queue?q=invoice").await["items"][0]["taskId"],
        a.as_str()
    );
    assert_eq!(
        api.json("/queue?q=restart%20serv").await["items"][0]["taskId"],
        b.as_str()
    );
    assert_eq!(api.json("/queue?state=auth-required").await["total"], 0);
    for bad in [
        "/queue?sort=sideways",
        "/queue?limit=0",
        "/queue?limit=x",
        "/queue?state=completed",
        "/queue?cursor=zzz",
    ] {
        let (status, _, body) = api.get(bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["error"]["code"], 400, "{bad}");
    }
    let tasks = api.json("/tasks").await;
    assert_eq!(tasks["items"].as_array().unwrap().len(), 2);
    assert_eq!(tasks["items"][0]["parked"], true);
}

/// The counts are remembered between commits; every change must show at
/// once, whichever filter was read before it.
#[tokio::test]
async fn queue_counts_follow_every_change() {
    let s = Server::start(Some(CONFIG));
    let (c, api) = (s.client(), Api::new(&s));
    let counts = |q: &Value| (q["total"].clone(), q["counts"].clone());
    let a = park(&c, "inbox", message("c1", "first")).await;
    for _ in 0..2 {
        assert_eq!(
            counts(&api.json("/queue").await),
            (json!(1), json!({"inbox": 1}))
        );
        assert_eq!(api.json("/queue?agent=ops").await["total"], 0);
    }
    park(&c, "ops", message("c2", "second")).await;
    assert_eq!(
        counts(&api.json("/queue").await),
        (json!(2), json!({"inbox": 1, "ops": 1}))
    );
    assert_eq!(api.json("/queue?agent=ops").await["total"], 1);
    assert_eq!(api.json("/queue?q=second").await["total"], 1);
    let (status, _) = api.decide(&a, json!({"kind": "approve"})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        counts(&api.json("/queue").await),
        (json!(1), json!({"ops": 1}))
    );
    assert_eq!(api.json("/queue?agent=inbox").await["total"], 0);
    assert_eq!(api.json("/queue?q=second").await["total"], 1);
}

/// A message of 50,000 nested quotes once held the task's page for
/// seconds (the sanitiser's HTML parse grows with the square of the depth);
/// the page now nests 32 levels at most and keeps the text.
#[tokio::test]
async fn deeply_nested_markdown_is_flattened_not_rendered_level_by_level() {
    let s = Server::start(Some(CONFIG));
    let (c, api) = (s.client(), Api::new(&s));
    let text = format!("{}deep", "> ".repeat(50_000));
    let id = park(
        &c,
        "inbox",
        json!({"messageId": "nest-1", "role": "ROLE_USER", "parts": [{"text": text}]}),
    )
    .await;
    let d = api.json(&format!("/tasks/{id}")).await;
    let html = d["rendered"]["history"][0]["parts"][0]["html"]
        .as_str()
        .unwrap_or_else(|| panic!("no rendered part: {d}"));
    assert_eq!(html.matches("<blockquote>").count(), 32);
    assert!(html.contains("deep"));
    // The message itself is kept as sent.
    let stored = c.rpc_ok("inbox", "GetTask", json!({"id": id})).await;
    assert_eq!(stored["history"][0]["parts"][0]["text"], text.as_str());
}

#[tokio::test]
async fn long_runs_of_escaped_characters_render_whole() {
    // Text full of characters the HTML writer escapes (`&`, `°`): its time
    // grew with the square of such a run's length (1 MiB of `&`: 17 s).
    let s = Server::start(Some(CONFIG));
    let (c, api) = (s.client(), Api::new(&s));
    let amps = "&".repeat(100_000);
    let degrees = "°".repeat(100_000);
    let url = format!("https://example.com/?{}", "a=1&".repeat(5_000));
    let text = format!("{amps}\n\n`{degrees}`\n\n[report]({url})");
    let id = park(
        &c,
        "inbox",
        json!({"messageId": "amp-1", "role": "ROLE_USER", "parts": [{"text": text}]}),
    )
    .await;
    let d = api.json(&format!("/tasks/{id}")).await;
    let html = d["rendered"]["history"][0]["parts"][0]["html"]
        .as_str()
        .unwrap_or_else(|| panic!("no rendered part: {d}"));
    assert_eq!(html.matches("&amp;").count(), 100_000);
    assert_eq!(html.matches('°').count(), 100_000);
    assert!(!html.contains("<!--"));
    // A link target of 20 KB: the text stays, the link goes.
    assert!(
        html.ends_with("<p>report</p>\n"),
        "{}",
        &html[html.len() - 60..]
    );
}

#[tokio::test]
async fn task_detail_renders_agent_content_safely() {
    let s = Server::start(Some(CONFIG));
    let (c, api) = (s.client(), Api::new(&s));
    let id = park(
        &c,
        "inbox",
        json!({"messageId": "x1", "role": "ROLE_USER", "parts": [
            {"text": "# Deploy?\n<script>alert(1)</script>\n[click](javascript:alert(2))", "mediaType": "text/markdown"},
            {"data": {"env": "prod"}},
            {"raw": "aGVsbG8=", "filename": "notes.txt", "mediaType": "text/plain"}
        ]}),
    )
    .await;
    let d = api.json(&format!("/tasks/{id}")).await;
    assert_eq!(d["task"]["id"], id.as_str());
    assert_eq!(d["openTurn"]["state"], "input-required");
    let parts = &d["rendered"]["history"][0]["parts"];
    let html = parts[0]["html"].as_str().unwrap();
    assert!(html.contains("<h1>Deploy?</h1>"), "{html}");
    assert!(!html.contains("<script"), "{html}");
    assert!(
        html.contains("&lt;script&gt;"),
        "raw HTML is shown as text: {html}"
    );
    assert!(!html.contains("javascript:"), "{html}");
    assert_eq!(parts[1]["kind"], "data");
    assert!(
        parts[1]["json"]
            .as_str()
            .unwrap()
            .contains("\"env\": \"prod\"")
    );
    assert_eq!(parts[2]["kind"], "file");
    assert_eq!(parts[2]["size"], 5);
    let url = parts[2]["url"].as_str().unwrap();
    let (status, headers, body) = api.get(url.trim_start_matches("/api")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, "hello");
    assert_eq!(headers["content-type"], "text/plain");
    assert!(
        headers["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment; filename=\"notes.txt\"")
    );
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let (status, _, _) = api.get(&format!("/tasks/{id}/files/message/x1/9")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = api.get("/tasks/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn decisions_answer_once_and_say_so_after() {
    let s = Server::start(Some(CONFIG));
    let (c, api) = (s.client(), Api::new(&s));
    let id = park(&c, "inbox", message("m1", "Approve?")).await;
    let (status, body) = api.decide(&id, json!({"kind": "reply"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = api
        .decide(&id, json!({"kind": "approve", "bogus": 1}))
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "unknown fields are refused: {body}"
    );
    let (status, body) = api
        .decide(&id, json!({"kind": "approve", "text": "ok"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"]["delivery"], "delivered");
    assert_eq!(body["decision"]["actor"], "ui");
    let first = body["decision"]["id"].clone();
    let (status, body) = api.decide(&id, json!({"kind": "reject"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["decision"]["id"], first);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already decided")
    );
    // The caller sees the outcome.
    let t = c.rpc_ok("inbox", "GetTask", json!({"id": id})).await;
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED");
    let (status, _) = api.decide("no-such-task", json!({"kind": "approve"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn history_lists_decisions_and_exports_jsonl_and_csv() {
    let s = Server::start(Some(CONFIG));
    let (c, api) = (s.client(), Api::new(&s));
    let a = park(&c, "inbox", message("m1", "Ship release 7?")).await;
    let b = park(&c, "ops", message("m2", "Drop the cache?")).await;
    api.decide(&a, json!({"kind": "approve"})).await;
    api.decide(&b, json!({"kind": "reject", "text": "peak hours"}))
        .await;
    let h = api.json("/history").await;
    assert_eq!(h["items"].as_array().unwrap().len(), 2);
    assert_eq!(h["items"][0]["decision"]["taskId"], b.as_str());
    assert_eq!(
        api.json("/history?q=peak").await["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        api.json("/history?agent=inbox").await["items"][0]["turn"]["preview"],
        "Ship release 7?"
    );
    let (status, headers, body) = api.get("/history/export?format=jsonl").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/x-ndjson");
    assert!(
        headers["content-disposition"]
            .to_str()
            .unwrap()
            .contains("countersign-history.jsonl")
    );
    assert_eq!(
        body.lines()
            .filter(|l| serde_json::from_str::<Value>(l).is_ok())
            .count(),
        2
    );
    let (status, headers, body) = api.get("/history/export?format=csv").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    assert_eq!(body.lines().count(), 3);
    let (status, _, _) = api.get("/history/export?format=xml").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_approvals_over_http_decide_once() {
    let s = Server::start(Some(CONFIG));
    let (c, api) = (s.client(), Api::new(&s));
    let id = park(&c, "inbox", message("m1", "Approve?")).await;
    let api = std::sync::Arc::new(api);
    let mut handles = Vec::new();
    for i in 0..50 {
        let (api, id) = (api.clone(), id.clone());
        handles.push(tokio::spawn(async move {
            api.decide(
                &id,
                json!({"kind": "approve", "text": format!("click {i}")}),
            )
            .await
        }));
    }
    let mut winners = Vec::new();
    let mut conflicts = Vec::new();
    for h in handles {
        let (status, body) = h.await.unwrap();
        match status {
            StatusCode::OK => winners.push(body["decision"]["id"].clone()),
            StatusCode::CONFLICT => conflicts.push(body["decision"]["id"].clone()),
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(winners.len(), 1);
    assert_eq!(conflicts.len(), 49);
    assert!(
        conflicts.iter().all(|d| *d == winners[0]),
        "every refusal names the first decision"
    );
    let d = api.json(&format!("/tasks/{id}")).await;
    assert_eq!(d["decisions"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_crash_between_parking_and_deciding_loses_nothing() {
    let mut s = Server::start(Some(CONFIG));
    let c = s.client();
    let id = park(&c, "inbox", message("m1", "Still there after a crash?")).await;
    let dir = s.data_dir.clone();
    s.kill9();
    let s2 = Server::start_in(&dir, Some(CONFIG), &[]);
    let api = Api::new(&s2);
    let q = api.json("/queue").await;
    assert_eq!(q["items"][0]["taskId"], id.as_str());
    let (status, body) = api.decide(&id, json!({"kind": "approve"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let t = s2
        .client()
        .rpc_ok("inbox", "GetTask", json!({"id": id}))
        .await;
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED");
}
