//! The desktop app in a real window, driven over WebDriver (WebKitWebDriver)
//! under Xvfb and a private session bus, with a stand-in
//! notification service that records what the app shows. An A2A client
//! sends a task to the `human` agent; it appears in the window and raises
//! one notification; the test approves it with the keyboard and the client
//! sees it completed; the tray count follows; tasks parked together raise
//! one notification, with a sound when asked; a muted agent raises none; a
//! second launch hands over to the first and exits. Opened on a data dir a
//! `countersign serve` uses, the app exits and says why in a notification.
//!
//! Needs the desktop build and its environment: run `tests/desktop/run.sh`
//! (it sets COUNTERSIGN_DESKTOP_TESTS=1). Without it the test says why and
//! passes, so `cargo test` on a machine without a display still works.
#![cfg(feature = "desktop")]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A WebDriver session on the app, through WebKitWebDriver (webkit2gtk-driver),
/// which starts the app itself. What tauri-driver adds on Linux is a proxy
/// that renames one capability (`tauri:options` to
/// `webkitgtk:browserOptions`) and sets `TAURI_WEBVIEW_AUTOMATION`; doing both
/// here spares building tauri-driver from source on every new machine.
struct Driver {
    _driver: Kill,
    base: String,
    session: String,
    http: reqwest::Client,
}

impl Driver {
    async fn start(env: &[(&str, String)]) -> Driver {
        let port = free_port();
        let mut cmd = Command::new(
            std::env::var("WEBKIT_WEBDRIVER").unwrap_or_else(|_| "WebKitWebDriver".into()),
        );
        cmd.args([format!("--port={port}"), "--host=127.0.0.1".to_owned()])
            // Tauri lets a driver automate its webview only when asked to.
            .env("TAURI_WEBVIEW_AUTOMATION", "true")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let driver = Kill(
            cmd.spawn()
                .expect("WebKitWebDriver (apt-get install webkit2gtk-driver)"),
        );
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while http.get(format!("{base}/status")).send().await.is_err() {
            assert!(Instant::now() < deadline, "WebKitWebDriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "webkitgtk:browserOptions": {"binary": env!("CARGO_BIN_EXE_countersign"), "args": []}
        }}});
        let resp: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let session = resp["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {resp}"))
            .to_owned();
        Driver {
            _driver: driver,
            base,
            session,
            http,
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let mut req = self.http.request(method, url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        req.send().await.unwrap().json().await.unwrap()
    }

    async fn find(&self, css: &str) -> Option<String> {
        let v = self
            .call(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v["value"][ELEMENT].as_str().map(str::to_owned)
    }

    async fn wait_for(&self, css: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            if let Some(e) = self.find(css).await {
                return e;
            }
            if Instant::now() >= deadline {
                // What the window showed instead, for whoever reads the failure.
                let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/desktop/output");
                self.screenshot(&out.join("failure.png")).await;
                let source = self.call(reqwest::Method::GET, "/source", None).await;
                let _ = std::fs::write(
                    out.join("failure.html"),
                    source["value"].as_str().unwrap_or_default(),
                );
                let last = self
                    .call(
                        reqwest::Method::POST,
                        "/element",
                        Some(json!({"using": "css selector", "value": css})),
                    )
                    .await;
                panic!("`{css}` never appeared (see tests/desktop/output/failure.*): {last}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn click(&self, element: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{element}/click"),
            Some(json!({})),
        )
        .await;
    }

    /// Presses keys one after the other (W3C actions).
    async fn press(&self, keys: &[&str]) {
        let mut actions = Vec::new();
        for k in keys {
            actions.push(json!({"type": "keyDown", "value": k}));
            actions.push(json!({"type": "keyUp", "value": k}));
        }
        self.call(
            reqwest::Method::POST,
            "/actions",
            Some(json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})),
        )
        .await;
    }

    async fn screenshot(&self, path: &Path) {
        use base64::Engine as _;
        let v = self.call(reqwest::Method::GET, "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v["value"].as_str().unwrap_or_default())
            .unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }

    async fn end(self) {
        let _ = self
            .http
            .delete(format!("{}/session/{}", self.base, self.session))
            .send()
            .await;
    }
}

fn notifications(record: &Path) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Every notification shown, once one with `summary` is among them (at
/// most 30 s).
async fn until_shown(record: &Path, summary: &str) -> Vec<Value> {
    until(summary, Duration::from_secs(30), async || {
        let n = notifications(record);
        n.iter().any(|n| n["summary"] == summary).then_some(n)
    })
    .await
}

async fn until<T>(what: &str, within: Duration, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: timed out");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One JSON-RPC call to the `inbox` agent: the whole answer, error or not.
async fn rpc_answer(http: &reqwest::Client, base: &str, method: &str, params: Value) -> Value {
    http.post(format!("{base}/a2a/inbox"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn rpc(http: &reqwest::Client, base: &str, method: &str, params: Value) -> Value {
    let v = rpc_answer(http, base, method, params).await;
    assert!(v.get("error").is_none(), "{method}: {v}");
    v["result"].clone()
}

async fn send(http: &reqwest::Client, base: &str, id: &str, text: &str) -> String {
    let t = rpc(
        http,
        base,
        "SendMessage",
        json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]},
               "configuration": {"returnImmediately": true}}),
    )
    .await;
    t["task"]["id"].as_str().unwrap().to_owned()
}

/// The stand-in notification service on this session bus, recording to
/// `record`.
fn notification_service(record: &Path) -> Kill {
    let python = std::env::var("DESKTOP_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut server = Command::new(python)
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/desktop/notification_server.py"))
        .arg(record)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    assert_eq!(first_line(&mut server), "ready");
    Kill(server)
}

/// The first line a child prints on its (piped) stdout, trimmed.
fn first_line(child: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim().to_owned()
}

fn desktop_tests_enabled() -> bool {
    if std::env::var("COUNTERSIGN_DESKTOP_TESTS").as_deref() != Ok("1") {
        eprintln!(
            "skipped: run tests/desktop/run.sh (needs Xvfb, a session bus and WebKitWebDriver)"
        );
        return false;
    }
    true
}

/// Opened while `countersign serve` uses its data dir, the app does not
/// start a second server on it: it exits and says why in a notification
/// (opened from a menu, there is no terminal to read).
#[tokio::test]
async fn the_desktop_app_on_a_data_dir_in_use_says_why_it_cannot_start() {
    if !desktop_tests_enabled() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let record = tmp.path().join("notifications.jsonl");
    let _service = notification_service(&record);
    let mut serve = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = first_line(&mut serve)
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    let _serve = Kill(serve);

    let app = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .env("COUNTERSIGN_DATA_DIR", &data)
        .env("COUNTERSIGN_BIND", "127.0.0.1:0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::task::spawn_blocking(move || app.wait_with_output()),
    )
    .await
    .expect("the app exits")
    .unwrap()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{:?}\n{stderr}", out.status);
    assert!(
        stderr.contains("another Countersign server is using the data dir"),
        "{stderr}"
    );
    let shown = notifications(&record);
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(shown[0]["summary"], "Countersign cannot start");
    let body = shown[0]["body"].as_str().unwrap();
    assert!(
        body.contains("another Countersign server is using the data dir"),
        "{body}"
    );
    assert!(body.contains(&url), "{body}");
}

#[tokio::test]
async fn the_desktop_app_parks_notifies_and_takes_a_keyboard_decision() {
    if !desktop_tests_enabled() {
        return;
    }
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/desktop/output");
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let record = tmp.path().join("notifications.jsonl");
    let tray = tmp.path().join("tray.log");
    std::fs::write(
        data.join("ui-settings.json"),
        r#"{"notifications": {"enabled": true, "sound": false, "onlyWhenHidden": false}}"#,
    )
    .unwrap();

    let _server = notification_service(&record);

    let env = [
        ("COUNTERSIGN_DATA_DIR", data.display().to_string()),
        ("COUNTERSIGN_BIND", "127.0.0.1:0".to_owned()),
        ("COUNTERSIGN_TRAY_LOG", tray.display().to_string()),
        ("RUST_LOG", "countersign=debug".to_owned()),
    ];
    let driver = Driver::start(&env).await;
    let http = reqwest::Client::new();
    let base = until("the app's server", Duration::from_secs(30), async || {
        let text = std::fs::read_to_string(data.join("instance.json")).ok()?;
        let v: Value = serde_json::from_str(&text).ok()?;
        v["url"].as_str().map(str::to_owned)
    })
    .await;

    // A caller asks; the task appears in the window and raises one notification.
    let task = send(
        &http,
        &base,
        "m-desk-1",
        "Ship v3 to production?\nThe changelog is attached.",
    )
    .await;
    let row = driver
        .wait_for(
            &format!("[data-task-id=\"{task}\"]"),
            Duration::from_secs(20),
        )
        .await;
    let shown = until("one notification", Duration::from_secs(10), async || {
        let n = notifications(&record);
        (!n.is_empty()).then_some(n)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let shown_after = notifications(&record);
    assert_eq!(shown_after.len(), 1, "exactly one: {shown_after:?}");
    assert_eq!(shown[0]["summary"], "Inbox");
    assert_eq!(shown[0]["body"], "Ship v3 to production?");
    assert_eq!(shown[0]["app"], "Countersign");
    assert_eq!(shown[0]["actions"], json!(["default", "Open"]));
    // Silent: the settings ask for no sound.
    assert_eq!(shown[0]["hints"]["suppress-sound"], true, "{:?}", shown[0]);
    driver.screenshot(&out.join("window-parked.png")).await;

    // The tray says one is waiting.
    until("the tray count", Duration::from_secs(10), async || {
        let t = std::fs::read_to_string(&tray).ok()?;
        (t.lines().last()? == "1").then_some(())
    })
    .await;

    // Open it with the keyboard, then approve: `a`, Enter.
    driver.click(&row).await;
    driver.press(&["\u{E007}"]).await;
    driver
        .wait_for(
            "[data-testid=\"decision-bar\"], .decision-bar",
            Duration::from_secs(10),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    driver.press(&["a"]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    driver.press(&["\u{E007}"]).await;
    until(
        "the client sees it completed",
        Duration::from_secs(20),
        async || {
            let t = rpc(&http, &base, "GetTask", json!({"id": task})).await;
            (t["status"]["state"] == "TASK_STATE_COMPLETED").then_some(())
        },
    )
    .await;
    until(
        "the tray count back to 0",
        Duration::from_secs(10),
        async || {
            let t = std::fs::read_to_string(&tray).ok()?;
            (t.lines().last()? == "0").then_some(())
        },
    )
    .await;

    // With a sound; one task after a quiet spell is shown at once, and the
    // two that park right after it wait for the grouping window and are
    // shown as one.
    let token = std::fs::read_to_string(data.join("ui-token")).unwrap();
    let settings = async |notifications: Value| {
        let put = http
            .put(format!("{base}/api/settings"))
            .bearer_auth(token.trim())
            .json(&json!({ "notifications": notifications }))
            .send()
            .await
            .unwrap();
        assert!(put.status().is_success(), "{}", put.text().await.unwrap());
    };
    settings(json!({"enabled": true, "sound": true, "onlyWhenHidden": false})).await;
    let renew = send(&http, &base, "m-desk-3", "Renew the certificate?").await;
    tokio::join!(
        send(&http, &base, "m-desk-4", "Merge the hotfix?"),
        send(&http, &base, "m-desk-5", "Close the incident?"),
    );
    let shown = until(
        "two more notifications",
        Duration::from_secs(10),
        async || {
            let n = notifications(&record);
            (n.len() >= 3).then_some(n)
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(notifications(&record).len(), 3, "{shown:?}");
    assert_eq!(shown[1]["summary"], "Inbox");
    assert_eq!(shown[1]["body"], "Renew the certificate?");
    assert_eq!(shown[1]["hints"]["sound-name"], "message-new-instant");
    assert_eq!(shown[2]["summary"], "2 tasks are waiting");
    assert_eq!(shown[2]["body"], "From Inbox");
    // Both offer "Open" (clicked at the end).
    assert_eq!(shown[2]["actions"], json!(["default", "Open"]));
    let grouped = shown;

    // Muted agent: the task still appears, no notification.
    settings(
        json!({"enabled": true, "sound": false, "onlyWhenHidden": false,
                    "mutedAgents": ["inbox"]}),
    )
    .await;
    let quiet = send(&http, &base, "m-desk-2", "Rotate the keys?").await;
    driver
        .wait_for(
            &format!("[data-task-id=\"{quiet}\"]"),
            Duration::from_secs(20),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(notifications(&record).len(), 3, "muted: no notification");

    // A second launch, with a link, hands it to the running app and exits:
    // the first window shows that task.
    let mut second = Command::new(env!("CARGO_BIN_EXE_countersign"));
    second.arg(format!("countersign://task/{quiet}"));
    for (k, v) in &env {
        second.env(k, v);
    }
    let mut second = second
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = until(
        "the second launch exits",
        Duration::from_secs(20),
        async || second.try_wait().ok().flatten(),
    )
    .await;
    assert!(status.success(), "{status:?}");
    // The first still answers, in the window (now on the linked task) and
    // over A2A.
    driver
        .wait_for(".decision-bar", Duration::from_secs(10))
        .await;
    let url = driver.call(reqwest::Method::GET, "/url", None).await;
    assert!(
        url["value"]
            .as_str()
            .unwrap_or("")
            .ends_with(&format!("#/task/{quiet}")),
        "{url}"
    );
    rpc(&http, &base, "GetTask", json!({"id": quiet})).await;
    driver.screenshot(&out.join("window-after.png")).await;

    // A click on a single task's notification opens that task; on the
    // group's, the queue. (Last: under Xvfb with no window manager,
    // WebKitWebDriver's screenshots stopped answering when these clicks
    // came before the second launch, though the page kept working.)
    let click = |n: &Value| {
        let mut path = record.clone().into_os_string();
        path.push(".click");
        std::fs::write(path, format!("{}\n", n["id"])).unwrap();
    };
    let shows = async |what: &str, hash: String| {
        until(what, Duration::from_secs(10), async || {
            let url = driver.call(reqwest::Method::GET, "/url", None).await;
            url["value"].as_str()?.ends_with(&hash).then_some(())
        })
        .await
    };
    click(&grouped[1]);
    shows("the task, after a click", format!("#/task/{renew}")).await;
    click(&grouped[2]);
    shows("the queue, after a click", "#/queue".to_owned()).await;
    driver.end().await;
}

/// On a full disk the app tells the person it cannot save, and again once
/// it can: agents' work is refused meanwhile, whatever the notification
/// settings say.
#[tokio::test]
async fn the_desktop_app_says_when_it_cannot_save() {
    if !desktop_tests_enabled() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let record = tmp.path().join("notifications.jsonl");
    // Task notifications off: only the storage ones are shown.
    std::fs::write(
        data.join("ui-settings.json"),
        r#"{"notifications": {"enabled": false, "sound": false, "onlyWhenHidden": false}}"#,
    )
    .unwrap();
    let _service = notification_service(&record);
    // Files of at most 2 MiB: the database fills after a few hundred tasks.
    // The app of the test before may still be shutting down: a launch
    // meanwhile is a second instance, which hands over and exits at once.
    let log = tmp.path().join("app.log");
    let deadline = Instant::now() + Duration::from_secs(30);
    let (app, base) = loop {
        let mut app = common::limited_command(2048)
            .env("COUNTERSIGN_DATA_DIR", &data)
            .env("COUNTERSIGN_BIND", "127.0.0.1:0")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        if let Some(base) = first_line(&mut app).strip_prefix("listening on ") {
            break (app, base.to_owned());
        }
        let _ = app.wait();
        assert!(
            Instant::now() < deadline,
            "the app did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let pid = app.id();
    let _app = Kill(app);
    let http = reqwest::Client::new();
    let post = async |id: String, text: &str| -> Value {
        let message = json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]});
        let params = json!({"message": message, "configuration": {"returnImmediately": true}});
        rpc_answer(&http, &base, "SendMessage", params).await
    };
    let big = "a request that takes room ".repeat(240);
    let mut refused = 0;
    for n in 0..3000 {
        let v = post(format!("full-{n}"), &big).await;
        if v.get("error").is_some() {
            refused += 1;
            if refused >= 3 {
                break;
            }
        }
    }
    assert_eq!(refused, 3, "the disk never filled");
    let shown = until_shown(&record, "Countersign cannot save").await;
    let cannot = shown
        .iter()
        .find(|n| n["summary"] == "Countersign cannot save")
        .unwrap();
    let body = cannot["body"].as_str().unwrap_or_default();
    assert!(body.contains("nothing saved is lost"), "{body}");

    let lifted = Command::new("prlimit")
        .arg("--pid")
        .arg(pid.to_string())
        .arg("--fsize=unlimited:")
        .status()
        .unwrap();
    assert!(lifted.success());
    until(
        "a write with room again",
        Duration::from_secs(10),
        async || {
            let v = post("after".into(), "After there was room again").await;
            v.get("result").map(|_| ())
        },
    )
    .await;
    // Told once saving has worked for a few seconds.
    let shown = until_shown(&record, "Countersign saves again").await;
    // One of each, whatever flips a nearly full disk made in between.
    let cannot = shown
        .iter()
        .filter(|n| n["summary"] == "Countersign cannot save")
        .count();
    assert_eq!(cannot, 1, "{shown:?}");
    assert!(
        shown.iter().all(|n| n["summary"]
            .as_str()
            .is_some_and(|s| s.starts_with("Countersign"))),
        "{shown:?}"
    );
}
