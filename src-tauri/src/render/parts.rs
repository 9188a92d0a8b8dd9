//! Presentation of messages, artifacts and their parts for the UI.

use base64::Engine as _;
use serde::Serialize;

use crate::a2a::types::{Artifact, Message, Part, PartContent, Role};

/// A part as the UI shows it. Only `html` is HTML (already sanitised); every
/// other string is agent text for a text node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum RenderedPart {
    /// A text part with a declared media type other than markdown, as written.
    Text {
        html: String,
        media_type: Option<String>,
    },
    /// A text part in markdown (no media type, or `text/markdown`).
    Markdown { html: String },
    /// A data part as pretty-printed JSON.
    Data {
        json: String,
        media_type: Option<String>,
    },
    /// A file part (`raw` or `url`): what it is and where the UI fetches it.
    File {
        filename: Option<String>,
        media_type: Option<String>,
        /// Decoded length of `raw` content; unknown for `url` parts.
        size: Option<u64>,
        /// Supplied by the caller, which knows the routes.
        url: String,
    },
}

/// A message with its parts rendered.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RenderedMessage {
    pub message_id: String,
    pub role: Role,
    pub parts: Vec<RenderedPart>,
}

/// An artifact with its parts rendered; `name` and `description` are text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RenderedArtifact {
    pub artifact_id: String,
    pub name: Option<String>,
    pub description: Option<String>,
    pub parts: Vec<RenderedPart>,
}

/// What holds a file part: the message or artifact, by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartOf<'a> {
    /// A message, by `messageId`.
    Message(&'a str),
    /// An artifact, by `artifactId`.
    Artifact(&'a str),
}

/// A file part and where it sits, handed to the caller's URL builder.
#[derive(Debug, Clone, Copy)]
pub struct FileRef<'a> {
    /// The message or artifact holding the part.
    pub parent: PartOf<'a>,
    /// Position of the part in its parent's `parts`.
    pub index: usize,
    /// The part itself (a `url` part's own URL is in its content).
    pub part: &'a Part,
}

/// Renders one part. `file_url` is called only for a file part and returns
/// the URL the UI fetches it from; the caller vouches for that URL.
pub fn part(part: &Part, file_url: impl FnOnce() -> String) -> RenderedPart {
    let media_type = part.media_type.clone();
    match &part.content {
        PartContent::Text(text) if is_markdown(media_type.as_deref()) => RenderedPart::Markdown {
            html: super::markdown(text),
        },
        PartContent::Text(text) => RenderedPart::Text {
            html: super::plain(text),
            media_type,
        },
        PartContent::Data(value) => RenderedPart::Data {
            // Serialising a `Value` cannot fail; the fallback is never used.
            json: serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string()),
            media_type,
        },
        PartContent::Raw(raw) => RenderedPart::File {
            filename: part.filename.clone(),
            media_type,
            size: decoded_len(raw),
            url: file_url(),
        },
        PartContent::Url(_) => RenderedPart::File {
            filename: part.filename.clone(),
            media_type,
            size: None,
            url: file_url(),
        },
    }
}

/// Renders a message's parts; `file_url` names the URL of each file part.
pub fn message(message: &Message, file_url: impl Fn(FileRef<'_>) -> String) -> RenderedMessage {
    RenderedMessage {
        message_id: message.message_id.clone(),
        role: message.role,
        parts: parts(
            PartOf::Message(&message.message_id),
            &message.parts,
            file_url,
        ),
    }
}

/// Renders an artifact's parts; `file_url` names the URL of each file part.
pub fn artifact(artifact: &Artifact, file_url: impl Fn(FileRef<'_>) -> String) -> RenderedArtifact {
    RenderedArtifact {
        artifact_id: artifact.artifact_id.clone(),
        name: artifact.name.clone(),
        description: artifact.description.clone(),
        parts: parts(
            PartOf::Artifact(&artifact.artifact_id),
            &artifact.parts,
            file_url,
        ),
    }
}

fn parts(
    parent: PartOf<'_>,
    parts: &[Part],
    file_url: impl Fn(FileRef<'_>) -> String,
) -> Vec<RenderedPart> {
    parts
        .iter()
        .enumerate()
        .map(|(index, p)| {
            part(p, || {
                file_url(FileRef {
                    parent,
                    index,
                    part: p,
                })
            })
        })
        .collect()
}

/// Markdown unless the agent declared another type: most agents send
/// markdown-ish text with no media type at all.
fn is_markdown(media_type: Option<&str>) -> bool {
    let Some(media_type) = media_type else {
        return true;
    };
    let essence = crate::a2a::media_type_essence(media_type);
    essence.is_empty() || essence == "text/markdown" || essence == "text/x-markdown"
}

/// Byte length of base64 content, decoded the way the wire model accepts it.
fn decoded_len(raw: &str) -> Option<u64> {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    STANDARD
        .decode(raw.as_bytes())
        .or_else(|_| URL_SAFE.decode(raw.as_bytes()))
        .ok()
        .map(|bytes| bytes.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text_part(text: &str, media_type: Option<&str>) -> Part {
        Part {
            media_type: media_type.map(str::to_owned),
            ..Part::text(text)
        }
    }

    fn no_url() -> String {
        unreachable!("only file parts ask for a URL")
    }

    #[test]
    fn text_is_markdown_unless_another_type_is_declared() {
        for media_type in [
            None,
            Some("text/markdown"),
            Some("Text/Markdown; charset=utf-8"),
        ] {
            assert_eq!(
                part(&text_part("**b**", media_type), no_url),
                RenderedPart::Markdown {
                    html: "<p><strong>b</strong></p>\n".into()
                },
                "{media_type:?}"
            );
        }
        for media_type in ["text/plain", "text/csv", "text/html", "application/json"] {
            assert_eq!(
                part(&text_part("**b** <i>\nx", Some(media_type)), no_url),
                RenderedPart::Text {
                    html: "**b** &lt;i&gt;<br>\nx".into(),
                    media_type: Some(media_type.into()),
                },
            );
        }
    }

    #[test]
    fn data_parts_are_pretty_json() {
        let rendered = part(&Part::data(json!({"b": 1, "a": [true]})), no_url);
        assert_eq!(
            rendered,
            RenderedPart::Data {
                json: "{\n  \"b\": 1,\n  \"a\": [\n    true\n  ]\n}".into(),
                media_type: None,
            }
        );
    }

    #[test]
    fn file_parts_carry_name_type_size_and_the_callers_url() {
        let raw = Part {
            content: PartContent::Raw("aGVsbG8=".into()),
            metadata: None,
            filename: Some("hello.txt".into()),
            media_type: Some("text/plain".into()),
        };
        let linked = Part {
            content: PartContent::Url("https://example.com/r.pdf".into()),
            filename: Some("r.pdf".into()),
            media_type: Some("application/pdf".into()),
            ..raw.clone()
        };
        let mut msg = Message::agent(vec![Part::text("see files"), raw, linked]);
        msg.message_id = "m1".into();
        let rendered = message(&msg, |f| {
            let PartOf::Message(id) = f.parent else {
                panic!("parent is the message")
            };
            format!("/api/tasks/t1/files/{id}/{}", f.index)
        });
        assert_eq!(rendered.parts.len(), 3);
        assert_eq!(
            rendered.parts[1],
            RenderedPart::File {
                filename: Some("hello.txt".into()),
                media_type: Some("text/plain".into()),
                size: Some(5),
                url: "/api/tasks/t1/files/m1/1".into(),
            }
        );
        assert_eq!(
            rendered.parts[2],
            RenderedPart::File {
                filename: Some("r.pdf".into()),
                media_type: Some("application/pdf".into()),
                size: None,
                url: "/api/tasks/t1/files/m1/2".into(),
            }
        );
    }

    #[test]
    fn presentation_serialises_with_kind_tags_in_camel_case() {
        let art = Artifact {
            artifact_id: "a1".into(),
            name: Some("report".into()),
            description: None,
            parts: vec![
                Part::text("# Hi"),
                Part {
                    content: PartContent::Url("https://x/y".into()),
                    metadata: None,
                    filename: None,
                    media_type: Some("image/png".into()),
                },
            ],
            metadata: None,
            extensions: Vec::new(),
        };
        let rendered = artifact(&art, |f| {
            assert_eq!(f.parent, PartOf::Artifact("a1"));
            format!("/files/{}", f.index)
        });
        assert_eq!(
            serde_json::to_value(&rendered).unwrap(),
            json!({
                "artifactId": "a1",
                "name": "report",
                "description": null,
                "parts": [
                    {"kind": "markdown", "html": "<h1>Hi</h1>\n"},
                    {"kind": "file", "filename": null, "mediaType": "image/png",
                     "size": null, "url": "/files/1"},
                ],
            })
        );
        let msg = message(&Message::agent(vec![Part::text("x")]), |_| no_url());
        assert_eq!(serde_json::to_value(&msg).unwrap()["role"], "ROLE_AGENT");
    }
}
