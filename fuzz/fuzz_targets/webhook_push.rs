//! The push receiver's body parser (`/webhooks/{subscription}`): any bytes
//! give a task id or a reason, and a task id is never empty.
#![no_main]

use countersign::server::webhooks::parse_push;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match parse_push(data, 64) {
        Ok(id) => {
            assert!(!id.is_empty(), "an empty task id was accepted");
            // JSON as the grammar has it: a number beyond f64's range
            // (which `Value` refuses) is still JSON, and still names the
            // task beside it.
            assert!(
                serde_json::from_slice::<serde::de::IgnoredAny>(data).is_ok(),
                "a task id came out of a body that is not JSON"
            );
        }
        Err(reason) => assert!(!reason.is_empty()),
    }
});
