//! Property tests: for everything v0.3 can express, v1.0 → v0.3 → v1.0 is
//! the identity.
use countersign::a2a::types::{
    Artifact, Message, Part, PartContent, Role, StreamResponse, Task, TaskArtifactUpdateEvent,
    TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use countersign::a2a::v0_3::{Dialect, decode_event, decode_task, encode_event, encode_task};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn ident() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9-]{1,12}"
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        "[ -~]{0,10}".prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn metadata() -> impl Strategy<Value = Option<Map<String, Value>>> {
    prop::option::of(
        prop::collection::btree_map("[a-z]{1,6}", json_leaf(), 1..3)
            .prop_map(|m| m.into_iter().collect()),
    )
}

fn media_type() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![
        Just("text/plain".to_string()),
        Just("application/json".to_string()),
        Just("image/png".to_string())
    ])
}

fn part() -> impl Strategy<Value = Part> {
    prop_oneof![
        ("[ -~]{0,20}", metadata(), media_type()).prop_map(|(t, md, mt)| Part {
            content: PartContent::Text(t),
            metadata: md,
            filename: None,
            media_type: mt
        }),
        (json_value(), metadata(), media_type()).prop_map(|(d, md, mt)| Part {
            content: PartContent::Data(d),
            metadata: md,
            filename: None,
            media_type: mt
        }),
        (
            prop::collection::vec(any::<u8>(), 0..16),
            prop::option::of("[a-z]{1,8}\\.txt"),
            media_type(),
            metadata()
        )
            .prop_map(|(bytes, name, mt, md)| {
                use base64::Engine as _;
                Part {
                    content: PartContent::Raw(
                        base64::engine::general_purpose::STANDARD.encode(bytes),
                    ),
                    metadata: md,
                    filename: name,
                    media_type: mt,
                }
            }),
        (
            "https://example\\.com/[a-z]{1,8}",
            prop::option::of("[a-z]{1,8}\\.pdf"),
            media_type()
        )
            .prop_map(|(u, name, mt)| Part {
                content: PartContent::Url(u),
                metadata: None,
                filename: name,
                media_type: mt
            }),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    (
        ident(),
        prop::option::of(ident()),
        prop::option::of(ident()),
        any::<bool>(),
        prop::collection::vec(part(), 1..4),
        metadata(),
        prop::collection::vec("https://ext\\.example/[a-z]{1,5}", 0..2),
        prop::collection::vec(ident(), 0..2),
    )
        .prop_map(|(id, ctx, task, user, parts, md, ext, refs)| Message {
            message_id: id,
            context_id: ctx,
            task_id: task,
            role: if user { Role::User } else { Role::Agent },
            parts,
            metadata: md,
            extensions: ext,
            reference_task_ids: refs,
        })
}

fn state() -> impl Strategy<Value = TaskState> {
    prop::sample::select(TaskState::ALL.to_vec())
}

fn status() -> impl Strategy<Value = TaskStatus> {
    (
        state(),
        prop::option::of(message()),
        prop::option::of(Just("2025-11-09T10:30:00.000Z".to_string())),
    )
        .prop_map(|(state, message, timestamp)| TaskStatus {
            state,
            message,
            timestamp,
        })
}

fn artifact() -> impl Strategy<Value = Artifact> {
    (
        ident(),
        prop::option::of("[ -~]{1,10}"),
        prop::option::of("[ -~]{1,10}"),
        prop::collection::vec(part(), 1..3),
        metadata(),
    )
        .prop_map(|(id, name, description, parts, md)| Artifact {
            artifact_id: id,
            name,
            description,
            parts,
            metadata: md,
            extensions: Vec::new(),
        })
}

fn task() -> impl Strategy<Value = Task> {
    (
        ident(),
        ident(),
        status(),
        prop::option::of(prop::collection::vec(artifact(), 0..3)),
        prop::collection::vec(message(), 0..3),
        metadata(),
    )
        .prop_map(|(id, ctx, status, artifacts, history, md)| Task {
            id,
            context_id: ctx,
            status,
            artifacts,
            history,
            metadata: md,
        })
}

proptest! {
    #[test]
    fn tasks_survive_v0_3(t in task()) {
        let wire = encode_task(&t, Dialect::V03);
        prop_assert_eq!(decode_task(&wire).unwrap(), t);
    }

    #[test]
    fn events_survive_v0_3(t in task(), a in artifact(), append in any::<bool>(), last in any::<bool>(), fin in any::<bool>()) {
        let events = [
            StreamResponse::Task(t.clone()),
            StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: t.id.clone(), context_id: t.context_id.clone(), status: t.status.clone(), metadata: t.metadata.clone(),
            }),
            StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: t.id.clone(), context_id: t.context_id.clone(), artifact: a, append, last_chunk: last, metadata: None,
            }),
        ];
        for ev in events {
            let wire = encode_event(&ev, Dialect::V03, fin);
            prop_assert_eq!(decode_event(&wire).unwrap(), ev);
        }
    }
}
