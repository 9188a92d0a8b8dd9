//! The JSON-RPC request parser, as `POST /a2a/{agent}` runs it: body bytes to
//! envelope, then the dialect the method picks (under a requested version)
//! and the operation. Input: one byte for the `A2A-Version` asked for, then
//! the body. The server's `parse_call` (with its fast path for plain 1.0
//! requests and a 0.3 client's plain sends and task reads) must answer
//! exactly as these general steps do.
#![no_main]

use countersign::a2a::v0_3::Dialect;
use countersign::server::Version;
use countersign::server::jsonrpc::{error_body, parse_call, parse_envelope, to_call};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&v, body)) = data.split_first() else {
        return;
    };
    let version = match v % 3 {
        0 => None,
        1 => Some(Version::V1),
        _ => Some(Version::V03),
    };
    let served = format!("{:?}", parse_call(body, 64, version));
    let (id, method, params) = match parse_envelope(body, 64) {
        Ok(x) => x,
        Err((id, e)) => {
            assert!(id.is_null() || id.is_string() || id.is_number());
            check_error(&id, &e);
            // The one known difference: a number beyond f64's range in a
            // field the fast path skips (as it skips any unknown field). The
            // general path holds the whole body as JSON values, cannot hold
            // that number and refuses the body.
            if served.starts_with("Ok(") && format!("{e:?}").contains("number out of range") {
                return;
            }
            assert_eq!(served, format!("{:?}", Err::<(), _>((id, e))));
            return;
        }
    };
    assert!(id.is_null() || id.is_string() || id.is_number());
    assert!(params.is_object(), "params are always an object: {params}");
    match to_call(&method, params, version) {
        // The pre-0.3 dialect makes up a message id when the request has
        // none, so only 1.0 and 0.3 operations (the fast path's) compare in
        // full.
        Ok((dialect, op)) if dialect != Dialect::Legacy => {
            assert_eq!(served, format!("{:?}", Ok::<_, ()>((id, dialect, op))));
        }
        Ok((dialect, _)) => {
            let head = format!("Ok(({id:?}, {dialect:?}, ");
            assert!(served.starts_with(&head), "{served} is not {head}…");
        }
        Err(e) => {
            check_error(&id, &e);
            assert_eq!(served, format!("{:?}", Err::<(), _>((id, e))));
        }
    }
});

/// Every refusal renders as a JSON-RPC error object with a standard code.
fn check_error(id: &Value, e: &countersign::a2a::Error) {
    let body = error_body(id, e);
    let code = body["error"]["code"].as_i64().unwrap_or(0);
    assert!(
        (-32700..=-32000).contains(&code),
        "code {code} outside the JSON-RPC server range for {e:?}"
    );
    assert_eq!(body["jsonrpc"], "2.0");
}
