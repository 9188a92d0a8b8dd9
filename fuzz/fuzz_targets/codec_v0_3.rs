//! The A2A 0.3 translations (`a2a::v0_3` for the JSON-RPC shapes and the
//! pre-0.3 `tasks/send` ones, `a2a::v0_3_rest` for 0.3 HTTP+JSON): whatever
//! decodes to the 1.0 model must encode back and decode to the same model,
//! and read back as 1.0 too: a 1.0 client (a Countersign peer among them)
//! reads what a 0.3 one sent. Input: one byte choosing the shape, then the
//! JSON.
#![no_main]

use countersign::a2a::Error;
use countersign::a2a::v0_3::{self, Dialect};
use countersign::a2a::v0_3_rest as rest;
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::fmt::Debug;

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    let Ok(v) = countersign::server::parse_json(body, 64) else {
        return;
    };
    match which % 14 {
        // 0.3 JSON-RPC.
        0 => round_trip(
            &v,
            |v| v0_3::decode_send_params(v, Dialect::V03),
            v0_3::encode_send_params,
        ),
        // Pre-0.3 `tasks/send` params decode to the same model as 0.3 ones.
        1 => {
            if let Ok(first) = v0_3::decode_send_params(&v, Dialect::Legacy) {
                reads_as_1_0(&first);
                let again =
                    v0_3::decode_send_params(&v0_3::encode_send_params(&first), Dialect::V03);
                same(&first, again, &v);
            }
        }
        2 => round_trip(&v, v0_3::decode_task, |t| {
            v0_3::encode_task(t, Dialect::V03)
        }),
        // Pre-0.3 messages (parts with `type`) carry no context or task id
        // (they sit beside the message in the params), extensions or task
        // references: the round trip holds for the rest. Pre-0.3 tasks are only
        // ever written, never read, so they have no round trip.
        3 => {
            if let Ok(mut first) = v0_3::decode_message(&v, Dialect::Legacy) {
                reads_as_1_0(&first);
                first.context_id = None;
                first.task_id = None;
                first.extensions.clear();
                first.reference_task_ids.clear();
                let encoded = v0_3::encode_message(&first, Dialect::Legacy);
                same(
                    &first,
                    v0_3::decode_message(&encoded, Dialect::Legacy),
                    &encoded,
                );
            }
        }
        4 => round_trip(&v, v0_3::decode_event, |e| {
            v0_3::encode_event(e, Dialect::V03, false)
        }),
        5 => round_trip(&v, v0_3::decode_event, |e| {
            v0_3::encode_event(e, Dialect::V03, true)
        }),
        6 => round_trip(
            &v,
            |v| v0_3::decode_message(v, Dialect::V03),
            |m| v0_3::encode_message(m, Dialect::V03),
        ),
        7 => round_trip(&v, v0_3::decode_part, |p| {
            v0_3::encode_part(p, Dialect::V03)
        }),
        8 => round_trip(&v, v0_3::decode_push_config, v0_3::encode_push_config),
        // 0.3 HTTP+JSON.
        9 => round_trip(&v, rest::decode_send, rest::encode_send),
        10 => round_trip(&v, rest::decode_task, rest::encode_task),
        11 => round_trip(&v, rest::decode_event, |e| rest::encode_event(e, false)),
        12 => round_trip(&v, rest::decode_send_response, rest::encode_send_response),
        _ => round_trip(
            &v,
            |v| rest::decode_push_config(v, "task-1"),
            rest::encode_push_config,
        ),
    }
});

/// decode → encode → decode gives the first model again, and the model
/// reads back as 1.0.
fn round_trip<T: PartialEq + Debug + Serialize + DeserializeOwned>(
    v: &Value,
    decode: impl Fn(&Value) -> Result<T, Error>,
    encode: impl Fn(&T) -> Value,
) {
    let Ok(first) = decode(v) else {
        return;
    };
    reads_as_1_0(&first);
    let encoded = encode(&first);
    same(&first, decode(&encoded), &encoded);
}

/// What a 0.3 decoder accepted, written as 1.0, reads back the same.
fn reads_as_1_0<T: PartialEq + Debug + Serialize + DeserializeOwned>(first: &T) {
    let json = serde_json::to_value(first).expect("a model serialises");
    match serde_json::from_value::<T>(json.clone()) {
        Ok(back) => assert_eq!(first, &back, "the model changed as 1.0 via {json}"),
        Err(e) => panic!("taken as 0.3, refused as 1.0: {e}\n{json}"),
    }
}

fn same<T: PartialEq + Debug>(first: &T, again: Result<T, Error>, encoded: &Value) {
    match again {
        Ok(second) => assert_eq!(
            first, &second,
            "the model changed across encode/decode via {encoded}"
        ),
        Err(e) => panic!("our own encoding does not decode: {e}\n{encoded}"),
    }
}
