//! The HTTP+JSON request bodies, as the 1.0 routes (`/a2a/{agent}/…`) and
//! the 0.3 routes (`/a2a/{agent}/v1/…`) read them: content type, bytes,
//! JSON object, then the operation. Input: one byte choosing the binding,
//! route and content type, then the body.
#![no_main]

use axum::http::{HeaderValue, Method, Uri};
use countersign::a2a::Error;
use countersign::server::ops::Op;
use countersign::server::rest::{build_op, decode_body, route};
use countersign::server::rest_v0_3;
use libfuzzer_sys::fuzz_target;

const PATHS: &[&str] = &[
    "message:send",
    "message:stream",
    "tasks/task-1:cancel",
    "tasks/task-1/pushNotificationConfigs",
    "tenant-a/message:send",
];

const CONTENT_TYPES: &[Option<&str>] = &[
    Some("application/json"),
    Some("application/a2a+json; charset=utf-8"),
    Some("text/plain"),
    None,
];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    let path = PATHS[usize::from(sel) % PATHS.len()];
    let ct = CONTENT_TYPES[usize::from(sel / 8) % CONTENT_TYPES.len()];
    let v0_3 = sel & 0x80 != 0;
    let ct = ct.map(HeaderValue::from_static);
    let uri: Uri = "/a2a/agent".parse().expect("a fixed URI parses");
    let Some(r) = route(path) else {
        panic!("{path} is a route");
    };
    let value = match decode_body(body, ct.as_ref(), 64) {
        Ok(v) => v,
        Err(e) => return check(&e),
    };
    assert!(value.is_object());
    let op = if v0_3 {
        rest_v0_3::build_op(r, &Method::POST, &uri, value).map(|(op, _)| op)
    } else {
        build_op(r, &Method::POST, &uri, value)
    };
    match op {
        Ok(Op::SendMessage(req) | Op::SendStreamingMessage(req)) => {
            // What was accepted serialises as 1.0 and reads back the same.
            let json = serde_json::to_value(&req).expect("a request serialises");
            let back: countersign::a2a::types::SendMessageRequest =
                serde_json::from_value(json).expect("a serialised request parses");
            assert_eq!(req, back);
        }
        Ok(_) => {}
        Err(e) => check(&e),
    }
});

/// A refused body is a client error: 400, 413 or 415, never 404/405/500.
fn check(e: &Error) {
    let status = e.http_status();
    assert!(
        matches!(status, 400 | 413 | 415),
        "status {status} for a bad body: {e:?}"
    );
}
