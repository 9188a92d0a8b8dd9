mod common;
use common::*;
use serde_json::json;

#[tokio::test]
async fn tck_agent_completes_a_task_over_json_rpc() {
    let s = Server::start(Some(TCK_CONFIG));
    let c = s.client();
    let r = c.send_text("tck", "tck-complete-task-1", "hello").await;
    assert_eq!(state(&r["task"]), "TASK_STATE_COMPLETED");
    let got = c
        .rpc_ok("tck", "GetTask", json!({"id": r["task"]["id"]}))
        .await;
    assert_eq!(got["id"], r["task"]["id"]);
}
