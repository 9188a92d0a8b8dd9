//! Server-sent events from a peer: the SSE framing (`data:` lines, possibly
//! several per event, events ended by a blank line, `:` comments, any line
//! ending) and the stream of decoded events built on it.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use futures::Stream;

use super::operation::{decode_event, rest_event, rpc_event};
use super::{Binding, ClientError, Endpoint, error};
use crate::a2a::types::StreamResponse;

/// The events of a streaming call, in the internal v1.0 shapes. It ends when
/// the peer closes the stream (or after a 0.3 `final` event); an error is
/// its last item.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<StreamResponse, ClientError>> + Send>>;

/// The largest event (and the largest unfinished line) accepted.
const MAX_EVENT_BYTES: usize = 16 << 20;

/// Splits SSE bytes into the data of each event.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buf: Vec<u8>,
    data: Option<String>,
}

impl SseParser {
    /// Feeds bytes; returns the data of every event they complete.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, ClientError> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(i) = self.buf[start..]
            .iter()
            .position(|b| *b == b'\n' || *b == b'\r')
        {
            let end = start + i;
            // A `\r` at the very end may be the first half of `\r\n`.
            if self.buf[end] == b'\r' && end + 1 == self.buf.len() {
                break;
            }
            let next = if self.buf[end] == b'\r' && self.buf[end + 1] == b'\n' {
                end + 2
            } else {
                end + 1
            };
            let line = std::str::from_utf8(&self.buf[start..end])
                .map_err(|_| ClientError::Protocol("an event stream line is not UTF-8".into()))?
                .to_owned();
            start = next;
            if let Some(d) = self.line(&line)? {
                out.push(d);
            }
        }
        self.buf.drain(..start);
        if self.buf.len() > MAX_EVENT_BYTES {
            return Err(too_large());
        }
        Ok(out)
    }

    /// At the end of the body: an event the peer did not end with a blank
    /// line is still delivered.
    pub(crate) fn finish(&mut self) -> Result<Option<String>, ClientError> {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            let line = String::from_utf8(rest)
                .map_err(|_| ClientError::Protocol("an event stream line is not UTF-8".into()))?;
            if let Some(d) = self.line(line.trim_end_matches('\r'))? {
                return Ok(Some(d));
            }
        }
        Ok(self.data.take().filter(|d| !d.is_empty()))
    }

    fn line(&mut self, line: &str) -> Result<Option<String>, ClientError> {
        if line.is_empty() {
            // An event whose data is empty is not dispatched (as in browsers).
            return Ok(self.data.take().filter(|d| !d.is_empty()));
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        // `event:`, `id:`, `retry:` and comments (empty field) carry nothing A2A uses.
        if field == "data" {
            let data = match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d
                }
                None => self.data.insert(String::new()),
            };
            data.push_str(value);
            if data.len() > MAX_EVENT_BYTES {
                return Err(too_large());
            }
        }
        Ok(None)
    }
}

fn too_large() -> ClientError {
    ClientError::Protocol(format!(
        "an event is larger than {} MiB",
        MAX_EVENT_BYTES >> 20
    ))
}

/// Turns one event's data into an event of the endpoint's dialect. The data
/// stays text until its dialect's decoder reads it (a 1.0 event straight
/// into its type).
fn event(data: &str, ep: &Endpoint) -> Result<(StreamResponse, bool), ClientError> {
    let answer = match ep.binding {
        Binding::JsonRpc => rpc_event(data)?,
        // An HTTP+JSON stream may end with an error in its status-body shape.
        Binding::HttpJson => rest_event(data)?,
    };
    decode_event(answer, ep)
}

struct Reader {
    resp: Option<reqwest::Response>,
    parser: SseParser,
    pending: VecDeque<String>,
    ep: Endpoint,
    url: String,
    idle: Duration,
}

/// The events of an open `text/event-stream` answer. Waiting longer than
/// `idle` for the next bytes (events or keep-alive comments) is a timeout.
pub(crate) fn events(
    resp: reqwest::Response,
    ep: Endpoint,
    url: String,
    idle: Duration,
) -> EventStream {
    let reader = Reader {
        resp: Some(resp),
        parser: SseParser::default(),
        pending: VecDeque::new(),
        ep,
        url,
        idle,
    };
    Box::pin(futures::stream::unfold(reader, |mut r| async move {
        loop {
            if let Some(data) = r.pending.pop_front() {
                return match event(&data, &r.ep) {
                    Ok((ev, last)) => {
                        if last {
                            r.resp = None;
                            r.pending.clear();
                        }
                        Some((Ok(ev), r))
                    }
                    Err(e) => {
                        r.resp = None;
                        r.pending.clear();
                        Some((Err(e), r))
                    }
                };
            }
            let resp = r.resp.as_mut()?;
            let chunk = match tokio::time::timeout(r.idle, resp.chunk()).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    r.resp = None;
                    return Some((Err(error::transport_error(e, &r.url)), r));
                }
                Err(_) => {
                    r.resp = None;
                    return Some((Err(ClientError::Timeout(r.url.clone())), r));
                }
            };
            let parsed = match chunk {
                Some(bytes) => r.parser.push(&bytes),
                None => {
                    r.resp = None;
                    r.parser.finish().map(|d| d.into_iter().collect())
                }
            };
            match parsed {
                Ok(ds) => r.pending.extend(ds),
                Err(e) => {
                    r.resp = None;
                    return Some((Err(e), r));
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<String> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(p.push(c).unwrap());
        }
        out.extend(p.finish().unwrap());
        out
    }

    #[test]
    fn events_are_split_by_blank_lines_with_any_line_ending() {
        assert_eq!(
            all(&[b"data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\ndata:{\"c\":3}\r\r"]),
            ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]
        );
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        assert_eq!(all(&[b"data: {\"a\":\ndata:  1}\n\n"]), ["{\"a\":\n 1}"]);
    }

    #[test]
    fn comments_and_other_fields_are_ignored() {
        assert_eq!(
            all(&[b": keep-alive\n\nevent: message\nid: 7\nretry: 10\ndata: x\n\n"]),
            ["x"]
        );
    }

    #[test]
    fn chunks_may_split_anywhere_even_inside_crlf() {
        let text = b"data: one\r\n\r\ndata: two\r\n\r\n";
        for cut in 0..text.len() {
            let got = all(&[&text[..cut], &text[cut..]]);
            assert_eq!(got, ["one", "two"], "cut at {cut}");
        }
    }

    #[test]
    fn an_unterminated_last_event_is_delivered() {
        assert_eq!(all(&[b"data: last"]), ["last"]);
        assert!(all(&[b": only a comment"]).is_empty());
    }

    #[test]
    fn an_event_with_empty_data_is_not_dispatched() {
        assert!(all(&[b"data\n\ndata:\n\n"]).is_empty());
        assert_eq!(all(&[b"data\ndata: x\n\n"]), ["\nx"]);
    }
}
