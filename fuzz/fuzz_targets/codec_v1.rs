//! The A2A 1.0 wire model (ProtoJSON via serde): whatever parses must
//! serialise, and parse back to the same value. Input: one byte choosing the
//! message type, then the JSON.
#![no_main]

use countersign::a2a::card::AgentCard;
use countersign::a2a::types::{
    ListTasksResponse, Message, SendMessageRequest, SendMessageResponse, StreamResponse, Task,
    TaskPushNotificationConfig,
};
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    let Ok(value) = countersign::server::parse_json(body, 64) else {
        return;
    };
    match which % 8 {
        0 => round_trip::<SendMessageRequest>(value),
        1 => round_trip::<Task>(value),
        2 => round_trip::<Message>(value),
        3 => round_trip::<StreamResponse>(value),
        4 => round_trip::<SendMessageResponse>(value),
        5 => round_trip::<TaskPushNotificationConfig>(value),
        6 => round_trip::<ListTasksResponse>(value),
        _ => round_trip::<AgentCard>(value),
    }
});

/// parse → model → serialise → parse: the second model equals the first,
/// and serialising it again gives the same JSON.
fn round_trip<T: DeserializeOwned + Serialize + PartialEq + Debug>(value: serde_json::Value) {
    let Ok(first) = serde_json::from_value::<T>(value) else {
        return;
    };
    let json = serde_json::to_value(&first).expect("a parsed model serialises");
    let second: T = match serde_json::from_value(json.clone()) {
        Ok(s) => s,
        Err(e) => panic!("serialised model does not parse back: {e}\n{json}"),
    };
    assert_eq!(first, second, "round trip changed the model");
    let again = serde_json::to_value(&second).expect("a parsed model serialises");
    assert_eq!(json, again, "serialising is not stable");
}
