//! The `countersign` command line, run as a person would run it.

mod common;
use common::*;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_countersign");

/// What a finished run printed.
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// A `countersign` command with no configuration from the environment.
fn countersign(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("COUNTERSIGN_CONFIG")
        .env_remove("COUNTERSIGN_DATA_DIR")
        .env("RUST_LOG", "countersign=info");
    cmd
}

/// Runs `countersign args…` to its end (killed and failed after 30 s, so a
/// server that starts when it should not cannot hang the suite).
fn run(args: &[&str]) -> Run {
    let mut child = countersign(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn countersign");
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let status = wait_for(&mut child, &format!("countersign {args:?}"));
    Run {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Waits for a child to exit; kills it and fails after 30 s.
fn wait_for(child: &mut Child, what: &str) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not exit within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `serve` with `config` written to a file in a fresh dir; returns the
/// run and the config file's path.
fn serve_with_config(config: &str) -> (Run, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("countersign.toml");
    std::fs::write(&path, config).unwrap();
    let data = dir.path().join("data");
    let r = run(&[
        "serve",
        "--config",
        path.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
        "--bind",
        "127.0.0.1:0",
    ]);
    (r, path.to_str().unwrap().to_owned(), dir)
}

#[test]
fn version_flag_prints_the_version_and_exits_zero() {
    let r = run(&["--version"]);
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(
        r.stdout.trim(),
        format!("countersign {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn help_names_the_serve_command_and_its_options() {
    let r = run(&["--help"]);
    assert!(r.status.success(), "{}", r.stderr);
    assert!(r.stdout.contains("serve"), "{}", r.stdout);

    let r = run(&["serve", "--help"]);
    assert!(r.status.success(), "{}", r.stderr);
    for word in ["serve", "--config", "--data-dir", "--bind", "--insecure"] {
        assert!(
            r.stdout.contains(word),
            "`serve --help` should mention {word}:\n{}",
            r.stdout
        );
    }
}

#[test]
fn unknown_flags_and_unparseable_bind_addresses_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let r = run(&["serve", "--data-dir", data, "--frobnicate"]);
    assert!(!r.status.success());
    assert!(r.stderr.contains("--frobnicate"), "{}", r.stderr);

    let r = run(&["serve", "--data-dir", data, "--bind", "localhost:nope"]);
    assert!(!r.status.success());
    assert!(r.stderr.contains("--bind"), "{}", r.stderr);
    assert!(!r.stdout.contains("listening on"), "{}", r.stdout);
}

#[test]
fn options_before_a_command_apply_to_it_and_an_unknown_word_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    // The same as `tasks --data-dir DIR`: that dir has no running server.
    for args in [
        vec!["--data-dir", data, "tasks"],
        vec![&format!("--data-dir={data}"), "tasks", "--parked"],
    ] {
        let r = run(&args);
        assert_eq!(r.status.code(), Some(1), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("no Countersign server is running"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(r.stderr.contains(data), "{}", r.stderr);
    }
    // An option the command does not take is refused by name.
    let r = run(&["--bind", "127.0.0.1:0", "tasks", "--data-dir", data]);
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("unexpected argument '--bind'"),
        "{}",
        r.stderr
    );
    // A word that is no command and no link says so.
    let r = run(&["--data-dir", data, "taks"]);
    assert_eq!(r.status.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("`taks` is neither a command nor a countersign://task/ID link"),
        "{}",
        r.stderr
    );
}

#[tokio::test]
async fn first_stdout_line_announces_the_real_address() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = countersign(&[
        "serve",
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--bind",
        "127.0.0.1:0",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the server should announce itself");
    let port = line
        .strip_suffix('\n')
        .and_then(|l| l.strip_prefix("listening on http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    let port: u16 = port
        .parse()
        .unwrap_or_else(|_| panic!("not a port: {line:?}"));
    assert_ne!(port, 0, "the announced port must be the one bound");

    let resp = reqwest::get(format!(
        "http://127.0.0.1:{port}/.well-known/agent-card.json"
    ))
    .await
    .expect("the announced port answers");
    assert_eq!(resp.status(), 200);

    Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let st = wait_for(&mut child, "server after SIGTERM");
    assert!(st.success(), "{st:?}");
}

/// Checks a refused config: non-zero exit, and stderr names the file, the
/// line and the field.
fn assert_config_error(config: &str, line: usize, field: &str) {
    let (r, path, _dir) = serve_with_config(config);
    assert!(
        !r.status.success(),
        "a bad config must not start:\n{config}\n{}",
        r.stderr
    );
    assert!(
        !r.stdout.contains("listening on"),
        "started anyway: {}",
        r.stdout
    );
    let where_ = format!("{path}:{line}");
    assert!(
        r.stderr.contains(&where_),
        "stderr should name `{where_}`:\n{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(field),
        "stderr should name `{field}`:\n{}",
        r.stderr
    );
}

#[test]
fn a_typo_in_a_config_field_names_the_file_line_and_field() {
    assert_config_error(
        "[[agents]]\nid = \"helper\"\nnmae = \"Helper\"\n",
        3,
        "nmae",
    );
    assert_config_error(
        "bind = \"127.0.0.1:0\"\n\n[limits]\nmax_body_byte = 1024\n",
        4,
        "max_body_byte",
    );
}

#[test]
fn a_bad_agent_id_in_the_config_names_the_file_line_and_field() {
    assert_config_error(
        "[[agents]]\nid = \"ok\"\n\n[[agents]]\nid = \"Not A Slug\"\n",
        5,
        "agents[1].id",
    );
    assert_config_error(
        "[[agents]]\nid = \"twin\"\n[[agents]]\nid = \"twin\"\n",
        4,
        "agents[1].id",
    );
}

#[test]
fn an_invalid_regex_in_the_config_names_the_file_line_and_field() {
    assert_config_error(
        "[[agents]]\nid = \"s\"\nbackend = \"scripted\"\n\n[[agents.rules]]\ntext = \"(unclosed\"\nsteps = [{ complete = \"x\" }]\n",
        6,
        "agents[0].rules[0].text",
    );
}

#[test]
fn a_value_of_the_wrong_type_in_the_config_names_the_file_line_and_field() {
    assert_config_error("[limits]\nmax_parts = \"many\"\n", 2, "max_parts");
}

#[test]
fn a_missing_config_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.toml");
    let r = run(&[
        "serve",
        "--config",
        path.to_str().unwrap(),
        "--data-dir",
        dir.path().join("data").to_str().unwrap(),
        "--bind",
        "127.0.0.1:0",
    ]);
    assert!(!r.status.success());
    assert!(r.stderr.contains(path.to_str().unwrap()), "{}", r.stderr);
    assert!(r.stderr.contains("cannot read"), "{}", r.stderr);
    assert!(!r.stdout.contains("listening on"));
}

#[test]
fn a_database_file_that_is_not_one_is_named_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("countersign.db");
    let garbage: Vec<u8> = (0..5000u32).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(&db, &garbage).unwrap();
    let r = run(&[
        "serve",
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--bind",
        "127.0.0.1:0",
    ]);
    assert!(!r.status.success());
    assert!(!r.stdout.contains("listening on"), "{}", r.stdout);
    let line = r.stderr.lines().last().unwrap_or_default();
    assert_eq!(
        line,
        format!(
            "countersign: {} is not a Countersign database (not an SQLite file, or its header is \
             damaged); it was left as it is: move it away, or give another --data-dir",
            db.display()
        )
    );
    assert_eq!(
        std::fs::read(&db).unwrap(),
        garbage,
        "the file is untouched"
    );
}

#[test]
fn binding_beyond_loopback_without_credentials_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // The check comes before anything is opened or bound.
    let r = run(&[
        "serve",
        "--data-dir",
        data.to_str().unwrap(),
        "--bind",
        "0.0.0.0:0",
    ]);
    assert!(!r.status.success(), "{}", r.stdout);
    assert!(!r.stdout.contains("listening on"), "{}", r.stdout);
    assert!(r.stderr.contains("0.0.0.0"), "{}", r.stderr);
    assert!(r.stderr.contains("credentials"), "says why: {}", r.stderr);
    assert!(
        r.stderr.contains("--insecure"),
        "names the way out: {}",
        r.stderr
    );
    assert!(
        !data.exists(),
        "it should stop before creating the data dir"
    );
}

const SLOW: &str = r#"
[[agents]]
id = "slow"
backend = "scripted"

[[agents.rules]]
message_id_prefix = "slow"
steps = [{ delay_ms = 1500 }, { complete = "finished after the delay" }]
"#;

/// A blocking SendMessage is in flight when `signal` arrives: it still gets
/// its answer, the process exits 0, and the task is there after a restart.
async fn in_flight_send_survives(signal: &'static str) {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start_in(dir.path(), Some(SLOW), &[]);
    let c = s.client();
    let sender = c.clone();
    let pending =
        tokio::spawn(async move { sender.send_text("slow", "slow-1", "take your time").await });

    // The task is committed before its run starts: wait until it is listed.
    let mut id = None;
    for _ in 0..500 {
        let list = c.rpc_ok("slow", "ListTasks", json!({})).await;
        if let Some(t) = list["tasks"].as_array().and_then(|t| t.first()) {
            id = Some(t["id"].as_str().unwrap().to_owned());
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let id = id.expect("the task should appear in ListTasks");

    let mut s = s;
    let status = tokio::task::spawn_blocking(move || s.stop_with(signal))
        .await
        .unwrap();
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
    assert!(
        status.success(),
        "SIG{signal} should end the server cleanly: {status:?}\n{log}"
    );
    assert!(log.contains("database closed"), "{log}");

    let answer = pending.await.expect("the in-flight request got its answer");
    assert_eq!(answer["task"]["id"], json!(id));
    assert_eq!(state(&answer["task"]), "TASK_STATE_COMPLETED", "{answer}");

    let s = Server::start_in(dir.path(), Some(SLOW), &[]);
    let task = s
        .client()
        .rpc_ok("slow", "GetTask", json!({"id": id}))
        .await;
    assert_eq!(state(&task), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "finished after the delay"
    );
}

/// A second server on a data dir in use refuses to start, naming the
/// first; it does not touch the first one's running work (its restart
/// recovery would have failed it), and the dir is free once the first stops.
#[tokio::test]
async fn a_second_server_on_the_same_data_dir_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = Server::start_in(dir.path(), Some(SLOW), &[]);
    let c = first.client();
    let sent = c
        .rpc_ok(
            "slow",
            "SendMessage",
            json!({"message": message("slow-2", "take your time"),
                   "configuration": {"returnImmediately": true}}),
        )
        .await;
    let id = sent["task"]["id"].as_str().unwrap().to_owned();
    assert_ne!(state(&sent["task"]), "TASK_STATE_COMPLETED", "{sent}");

    let config = dir.path().join("config.toml");
    let data = dir.path().to_owned();
    let second = tokio::task::spawn_blocking(move || {
        run(&[
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
            "--bind",
            "127.0.0.1:0",
        ])
    })
    .await
    .unwrap();
    assert!(!second.status.success(), "{:?}", second.status);
    assert!(
        second.stdout.is_empty(),
        "it never listened: {}",
        second.stdout
    );
    for part in [
        "another Countersign server is using the data dir",
        &format!("process {}", first.pid()),
        &first.base,
    ] {
        assert!(
            second.stderr.contains(part),
            "{part:?} in {}",
            second.stderr
        );
    }

    // The first goes on: its running task finishes as scripted.
    let mut task = json!(null);
    for _ in 0..300 {
        task = c.rpc_ok("slow", "GetTask", json!({"id": id})).await;
        if state(&task) != "TASK_STATE_WORKING" && state(&task) != "TASK_STATE_SUBMITTED" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(state(&task), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "finished after the delay"
    );

    assert!(first.terminate().success());
    let again = Server::start_in(dir.path(), Some(SLOW), &[]);
    again
        .client()
        .rpc_ok("slow", "GetTask", json!({"id": id}))
        .await;
}

#[tokio::test]
async fn sigterm_lets_an_in_flight_blocking_send_finish_and_exits_zero() {
    in_flight_send_survives("TERM").await;
}

#[tokio::test]
async fn sigint_lets_an_in_flight_blocking_send_finish_and_exits_zero() {
    in_flight_send_survives("INT").await;
}

#[tokio::test]
async fn without_a_config_the_human_inbox_agent_parks_every_task() {
    let s = Server::start(None);
    let c = s.client();

    let card: serde_json::Value = reqwest::get(s.url("/.well-known/agent-card.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = card["supportedInterfaces"][0]["url"].as_str().unwrap();
    assert!(url.ends_with("/a2a/inbox"), "{card}");

    let r = c.send_text("inbox", "ask-1", "may I deploy?").await;
    let task = &r["task"];
    assert_eq!(state(task), "TASK_STATE_INPUT_REQUIRED", "{r}");
    let status_msg = &task["status"]["message"];
    assert_eq!(status_msg["role"], "ROLE_AGENT", "{task}");
    assert!(
        status_msg["parts"][0]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "a parked task says what it waits for: {task}"
    );
    let id = task["id"].as_str().unwrap().to_owned();
    let ctx = task["contextId"].as_str().unwrap().to_owned();

    let follow = json!({"message": {"messageId": "ask-2", "role": "ROLE_USER", "taskId": id, "contextId": ctx, "parts": [{"text": "it is urgent"}]}});
    let r = c.rpc_ok("inbox", "SendMessage", follow).await;
    assert_eq!(state(&r["task"]), "TASK_STATE_INPUT_REQUIRED", "{r}");
    let got = c.rpc_ok("inbox", "GetTask", json!({"id": id})).await;
    assert_eq!(state(&got), "TASK_STATE_INPUT_REQUIRED");
    let ids: Vec<&str> = got["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["messageId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.first(), Some(&"ask-1"), "{got}");
    assert_eq!(
        ids.last(),
        Some(&"ask-2"),
        "the follow-up is appended: {got}"
    );
    assert_eq!(
        got["status"]["message"], task["status"]["message"],
        "the task stays parked as it was"
    );

    // `inbox` is the only agent.
    let resp = reqwest::Client::new()
        .post(s.url("/a2a/other"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
}
