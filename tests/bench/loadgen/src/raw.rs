//! The load generator's HTTP/1.1 client: one request in flight per
//! connection, written from bytes prepared once per run, its answer read
//! with `httparse` into a buffer the connection keeps.
//!
//! A general client (hyper's, as this tool used before) builds a request
//! and a header map, and spawns a task per connection; on the load's one
//! core that cost capped a cheap GET at about 110,000 requests a second,
//! about what the servers under test reached. This client does the least a
//! closed loop needs, so the rate a run reports is the server's.

use std::ops::Range;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What one answer was; its body is read with [`Conn::body`].
pub struct Answer {
    pub status: u16,
    /// The server will close the connection (or has): open a new one.
    pub close: bool,
    body: Body,
}

enum Body {
    /// The body lies in the read buffer, as sent (`content-length`).
    InPlace(Range<usize>),
    /// The body was chunked; its decoded bytes are in `Conn::decoded`.
    Decoded,
}

/// One connection's buffers, kept across requests and reconnects.
#[derive(Default)]
pub struct Conn {
    buf: Vec<u8>,
    /// Bytes of `buf` read from the socket.
    filled: usize,
    /// Bytes of `buf` the last answer used, dropped before the next.
    used: usize,
    decoded: Vec<u8>,
}

impl Conn {
    /// Forget what a closed connection left behind.
    pub fn reset(&mut self) {
        self.filled = 0;
        self.used = 0;
    }

    /// The body of `answer`, the last one [`Conn::exchange`] returned.
    pub fn body(&self, answer: &Answer) -> &[u8] {
        match &answer.body {
            Body::InPlace(r) => &self.buf[r.clone()],
            Body::Decoded => &self.decoded,
        }
    }

    /// Writes `request` and reads its whole answer.
    pub async fn exchange(
        &mut self,
        stream: &mut TcpStream,
        request: &[u8],
    ) -> Result<Answer, String> {
        if self.used > 0 {
            self.buf.copy_within(self.used..self.filled, 0);
            self.filled -= self.used;
            self.used = 0;
        }
        stream
            .write_all(request)
            .await
            .map_err(|e| format!("write: {e}"))?;
        let (head, status, length, chunked, close) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut parsed = httparse::Response::new(&mut headers);
            match parsed.parse(&self.buf[..self.filled]) {
                Ok(httparse::Status::Complete(head)) => {
                    let status = parsed.code.unwrap_or(0);
                    let mut length = None;
                    let mut chunked = false;
                    let mut close = parsed.version == Some(0);
                    for h in parsed.headers.iter() {
                        if h.name.eq_ignore_ascii_case("content-length") {
                            length = std::str::from_utf8(h.value)
                                .ok()
                                .and_then(|v| v.trim().parse::<usize>().ok());
                            if length.is_none() {
                                return Err("a content-length that is not a number".into());
                            }
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            chunked = contains_token(h.value, b"chunked");
                        } else if h.name.eq_ignore_ascii_case("connection") {
                            close = contains_token(h.value, b"close");
                        }
                    }
                    break (head, status, length, chunked, close);
                }
                Ok(httparse::Status::Partial) => self.fill(stream).await?,
                Err(e) => return Err(format!("answer: {e}")),
            }
        };
        if chunked {
            let end = self.dechunk(stream, head).await?;
            self.used = end;
            return Ok(Answer {
                status,
                close,
                body: Body::Decoded,
            });
        }
        let bodiless = status == 204 || status == 304 || (100..200).contains(&status);
        let end = match length {
            _ if bodiless => head,
            Some(n) => {
                while self.filled < head + n {
                    self.fill(stream).await?;
                }
                head + n
            }
            // Neither a length nor chunks: the body runs to the close.
            None => loop {
                match self.read_some(stream).await? {
                    0 => break self.filled,
                    _ => continue,
                }
            },
        };
        self.used = end;
        Ok(Answer {
            status,
            close: close || (length.is_none() && !bodiless),
            body: Body::InPlace(head..end),
        })
    }

    /// Decodes a chunked body that starts at `at` into `decoded`; returns
    /// where the answer ends in `buf`.
    async fn dechunk(&mut self, stream: &mut TcpStream, mut at: usize) -> Result<usize, String> {
        self.decoded.clear();
        loop {
            let line = loop {
                match find(&self.buf[at..self.filled], b"\r\n") {
                    Some(i) => break at..at + i,
                    None => self.fill(stream).await?,
                }
            };
            let size = std::str::from_utf8(&self.buf[line.clone()])
                .ok()
                .map(|l| l.split(';').next().unwrap_or("").trim())
                .and_then(|l| usize::from_str_radix(l, 16).ok())
                .ok_or("a chunk size that is not hexadecimal")?;
            at = line.end + 2;
            if size == 0 {
                // Trailers, if any, end with an empty line.
                loop {
                    match find(&self.buf[at..self.filled], b"\r\n") {
                        Some(0) => return Ok(at + 2),
                        Some(i) => at += i + 2,
                        None => self.fill(stream).await?,
                    }
                }
            }
            while self.filled < at + size + 2 {
                self.fill(stream).await?;
            }
            self.decoded.extend_from_slice(&self.buf[at..at + size]);
            at += size + 2;
        }
    }

    /// Reads more of the answer; a close before it is whole is an error.
    async fn fill(&mut self, stream: &mut TcpStream) -> Result<(), String> {
        match self.read_some(stream).await? {
            0 => Err("the server closed the connection mid-answer".into()),
            _ => Ok(()),
        }
    }

    async fn read_some(&mut self, stream: &mut TcpStream) -> Result<usize, String> {
        if self.filled == self.buf.len() {
            let grown = (self.buf.len() * 2).max(16 * 1024);
            self.buf.resize(grown, 0);
        }
        let n = stream
            .read(&mut self.buf[self.filled..])
            .await
            .map_err(|e| format!("read: {e}"))?;
        self.filled += n;
        Ok(n)
    }
}

/// Where `needle` first occurs in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}
