//! Property tests: the fast readers of a 0.3 client's requests
//! (`fast_send_params`, `fast_task_query`) read only what the general
//! readers read the same way. Texts are built member by member from values
//! that fit, values of the wrong type, nulls, escapes and repeated members,
//! in any order; whenever a fast reader gives an answer, the general reader
//! of the parsed text gives the same one.
use countersign::a2a::v0_3::{
    Dialect, decode_send_params, decode_task_query, fast_send_params, fast_task_query,
};
use proptest::prelude::*;
use serde_json::Value;

/// How often a member appears in an object.
#[derive(Clone, Copy)]
enum Times {
    /// Mostly once; sometimes missing or twice.
    Mostly,
    /// As often missing as present; sometimes twice.
    Maybe,
    /// Mostly missing.
    Rarely,
}

/// One member: its key, how often it appears, and its values (most often
/// one of those that fit, sometimes one of the odd ones).
struct Member {
    key: &'static str,
    times: Times,
    fit: Vec<BoxedStrategy<String>>,
    odd: Vec<BoxedStrategy<String>>,
}

fn member(key: &'static str, times: Times, fit: &[&'static str], odd: &[&'static str]) -> Member {
    Member {
        key,
        times,
        fit: lit(fit),
        odd: lit(odd),
    }
}

fn lit(texts: &[&'static str]) -> Vec<BoxedStrategy<String>> {
    texts.iter().map(|t| Just(t.to_string()).boxed()).collect()
}

/// An object of `members`, each written as often as its `Times` says, in
/// any order.
fn object(members: Vec<Member>) -> BoxedStrategy<String> {
    let each: Vec<BoxedStrategy<Vec<String>>> = members
        .into_iter()
        .map(|m| {
            let key = m.key;
            let value = if m.odd.is_empty() {
                prop::strategy::Union::new(m.fit).boxed()
            } else {
                prop::strategy::Union::new_weighted(vec![
                    (15, prop::strategy::Union::new(m.fit).boxed()),
                    (1, prop::strategy::Union::new(m.odd).boxed()),
                ])
                .boxed()
            };
            let count = match m.times {
                Times::Mostly => {
                    prop_oneof![1 => Just(0usize), 40 => Just(1), 1 => Just(2)].boxed()
                }
                Times::Maybe => {
                    prop_oneof![20 => Just(0usize), 20 => Just(1), 1 => Just(2)].boxed()
                }
                Times::Rarely => {
                    prop_oneof![50 => Just(0usize), 8 => Just(1), 1 => Just(2)].boxed()
                }
            };
            count
                .prop_flat_map(move |n| prop::collection::vec(value.clone(), n))
                .prop_map(move |vs| vs.into_iter().map(|v| format!("\"{key}\":{v}")).collect())
                .boxed()
        })
        .collect();
    each.prop_map(|lists| lists.concat())
        .prop_shuffle()
        .prop_map(|ms| format!("{{{}}}", ms.join(",")))
        .boxed()
}

const METADATA: &[&str] = &[
    r#"{"mediaType":"text/markdown"}"#,
    r#"{"mediaType":"a/b","k":1}"#,
    r#"{"k":{"mediaType":"x"}}"#,
    r#"{}"#,
    "null",
];
const ODD_METADATA: &[&str] = &[r#"{"mediaType":5}"#, "[]", r#""m""#];
const STRINGS: &[&str] = &[r#"["e"]"#, r#"["a","b"]"#, "[]", "null"];
const ODD_STRINGS: &[&str] = &["[1]", r#""e""#, "{}"];
const ID: &[&str] = &[r#""m-1""#, r#""\u006d""#, "null"];
const ODD_ID: &[&str] = &[r#""""#, "5", "{}"];

fn part() -> BoxedStrategy<String> {
    let kind = prop_oneof![
        3 => Just("text"),
        2 => Just("data"),
        1 => Just("file"),
        1 => Just("odd"),
    ];
    kind.prop_flat_map(|kind| {
        let kinds: &[&str] = match kind {
            "text" => &[r#""text""#],
            "data" => &[r#""data""#],
            "file" => &[r#""file""#],
            _ => &[r#""x""#, r#""te\u0078t""#, "null", "1"],
        };
        object(vec![
            member("kind", Times::Mostly, kinds, &[]),
            member("type", Times::Rarely, &[r#""text""#], &[r#""data""#]),
            member(
                "text",
                if kind == "text" {
                    Times::Mostly
                } else {
                    Times::Rarely
                },
                &[r#""hi""#, r#""a\nb \u00e9""#, r#""""#],
                &["null", "1"],
            ),
            member(
                "data",
                if kind == "data" {
                    Times::Mostly
                } else {
                    Times::Rarely
                },
                &[r#"{"a":[1,2.5]}"#, "[1]", r#""s""#, "0", "{}"],
                &["null"],
            ),
            member(
                "file",
                if kind == "file" {
                    Times::Mostly
                } else {
                    Times::Rarely
                },
                &[r#"{"uri":"http://x/f"}"#, r#"{"bytes":"aGk="}"#],
                &["1"],
            ),
            member("metadata", Times::Maybe, METADATA, ODD_METADATA),
        ])
    })
    .boxed()
}

fn parts() -> BoxedStrategy<String> {
    prop_oneof![
        12 => prop::collection::vec(part(), 1..4).prop_map(|ps| format!("[{}]", ps.join(","))),
        1 => Just("[]".to_string()),
        1 => Just("null".to_string()),
        1 => Just(r#""x""#.to_string()),
    ]
    .boxed()
}

fn message() -> BoxedStrategy<String> {
    object(vec![
        member(
            "messageId",
            Times::Mostly,
            &[r#""m-1""#, r#""\u006d""#],
            ODD_ID,
        ),
        member(
            "role",
            Times::Mostly,
            &[
                r#""user""#,
                r#""agent""#,
                r#""ROLE_USER""#,
                r#""ROLE_AGENT""#,
            ],
            &[r#""system""#, r#""us\u0065r""#, "null", "1"],
        ),
        Member {
            key: "parts",
            times: Times::Mostly,
            fit: vec![parts()],
            odd: Vec::new(),
        },
        member("contextId", Times::Maybe, ID, ODD_ID),
        member("taskId", Times::Maybe, ID, ODD_ID),
        member("kind", Times::Maybe, &[r#""message""#], &["3"]),
        member("metadata", Times::Maybe, METADATA, ODD_METADATA),
        member("extensions", Times::Maybe, STRINGS, ODD_STRINGS),
        member("referenceTaskIds", Times::Maybe, STRINGS, ODD_STRINGS),
    ])
}

const HISTORY_LENGTH: &[&str] = &["3", "0", "-1", "null"];
const ODD_HISTORY_LENGTH: &[&str] = &["1.5", "99999999999", r#""3""#];

fn configuration() -> BoxedStrategy<String> {
    object(vec![
        member("acceptedOutputModes", Times::Maybe, STRINGS, ODD_STRINGS),
        member(
            "historyLength",
            Times::Maybe,
            HISTORY_LENGTH,
            ODD_HISTORY_LENGTH,
        ),
        member("blocking", Times::Maybe, &["true", "false", "null"], &["0"]),
        member(
            "pushNotificationConfig",
            Times::Maybe,
            &["null"],
            &[r#"{"url":"http://127.0.0.1:1/h"}"#, "1"],
        ),
    ])
}

fn send_params() -> BoxedStrategy<String> {
    object(vec![
        Member {
            key: "message",
            times: Times::Mostly,
            fit: vec![message()],
            odd: lit(&["null"]),
        },
        Member {
            key: "configuration",
            times: Times::Maybe,
            fit: vec![configuration()],
            odd: lit(&["null", "[]"]),
        },
        member("metadata", Times::Maybe, METADATA, ODD_METADATA),
        member("id", Times::Maybe, ID, ODD_ID),
        member("extra", Times::Maybe, &["1", "[{}]"], &[]),
    ])
}

fn general<T>(text: &str, read: impl Fn(&Value) -> T) -> T {
    let v: Value = serde_json::from_str(text).expect("the texts are JSON");
    read(&v)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn fast_sends_read_as_the_general_reader_does(text in send_params()) {
        if let Some(fast) = fast_send_params(&text) {
            let slow = general(&text, |v| decode_send_params(v, Dialect::V03));
            prop_assert_eq!(Ok(fast), slow, "{}", text);
        }
    }

    #[test]
    fn fast_task_queries_read_as_the_general_reader_does(text in object(vec![
        member("id", Times::Mostly, ID, ODD_ID),
        member("historyLength", Times::Maybe, HISTORY_LENGTH, ODD_HISTORY_LENGTH),
        member("metadata", Times::Maybe, METADATA, ODD_METADATA),
    ])) {
        if let Some(fast) = fast_task_query(&text) {
            prop_assert_eq!(Ok(fast), general(&text, decode_task_query), "{}", text);
        }
    }
}

/// The texts 0.3 clients send do take the fast readers (so the properties
/// above test something), and odd ones do not.
#[test]
fn plain_0_3_requests_take_the_fast_readers() {
    let plain = [
        r#"{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}"#,
        r#"{"message":{"messageId":"m","role":"agent","contextId":"c","taskId":"t","parts":[{"kind":"data","data":{"a":1},"metadata":{"mediaType":"application/json"}}],"extensions":["e"],"referenceTaskIds":["r"],"metadata":{"k":1}},"configuration":{"blocking":false,"historyLength":2,"acceptedOutputModes":["text/plain"],"pushNotificationConfig":null},"metadata":{"q":2}}"#,
    ];
    for text in plain {
        let fast = fast_send_params(text);
        assert!(fast.is_some(), "missed: {text}");
        assert_eq!(
            Ok(fast.unwrap()),
            general(text, |v| decode_send_params(v, Dialect::V03))
        );
    }
    let sent = fast_send_params(plain[1]).unwrap();
    assert_eq!(
        sent.message.parts[0].media_type.as_deref(),
        Some("application/json")
    );
    assert!(sent.message.parts[0].metadata.is_none());
    assert!(sent.configuration.unwrap().return_immediately);
    let odd = [
        // A file part, a part without `kind`, a push config: read the general way.
        r#"{"message":{"messageId":"m","role":"user","parts":[{"kind":"file","file":{"uri":"http://x/f"}}]}}"#,
        r#"{"message":{"messageId":"m","role":"user","parts":[{"text":"hi"}]}}"#,
        r#"{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]},"configuration":{"pushNotificationConfig":{"url":"http://127.0.0.1:1/h"}}}"#,
        // A member twice, an escaped role, no parts, an empty id.
        r#"{"message":{"messageId":"m","messageId":"n","role":"user","parts":[{"kind":"text","text":"hi"}]}}"#,
        r#"{"message":{"messageId":"m","role":"\u0075ser","parts":[{"kind":"text","text":"hi"}]}}"#,
        r#"{"message":{"messageId":"m","role":"user","parts":[]}}"#,
        r#"{"message":{"messageId":"","role":"user","parts":[{"kind":"text","text":"hi"}]}}"#,
    ];
    for text in odd {
        assert!(fast_send_params(text).is_none(), "took: {text}");
    }
    assert_eq!(
        fast_task_query(r#"{"id":"t","historyLength":0}"#),
        Some(("t".to_string(), Some(0)))
    );
    assert_eq!(fast_task_query(r#"{"id":""}"#), None);
    assert_eq!(fast_task_query(r#"{"id":"t","id":"u"}"#), None);
}
