//! HTTP/1.1 responses on the wire, parsed incrementally.
//!
//! The parser never stores a body: it counts body bytes (Content-Length, chunked, or until the
//! connection closes) and keeps only what the recorder needs from the head: the status,
//! `Server-Timing` durations, `X-Arena-Pid` and whether the server will close the connection. A
//! `text/event-stream` body's events are counted as they arrive (sse), and its timing comment kept.

use crate::sse::Events;

/// What the recorder needs from one response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Head {
    pub status: u16,
    /// The `Server-Timing` header's value as sent (several headers joined by ", "); empty when
    /// absent. The recorder reads every metric in it (parse_server_timing).
    pub timing: Vec<u8>,
    pub pid: Option<u32>,
    /// The server will close the connection after this response.
    pub close: bool,
    /// A `text/event-stream` response: the events it held (counted by `Parser::events` as they came).
    pub events: Option<u32>,
    /// With `Parser::keep` (a session's step): the head as received, and the body's first
    /// `MAX_KEPT_BODY` bytes, for its cookies and captures. Empty otherwise.
    pub raw: Vec<u8>,
    pub body: Vec<u8>,
}

/// Most body bytes kept for a session's captures (a capture looks no further).
pub const MAX_KEPT_BODY: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    Head,
    HeadTooLarge,
    ContentLength,
    Chunk,
    /// The connection closed in the middle of a response.
    Truncated,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    /// Bytes still to come.
    Length(u64),
    /// Chunked transfer coding: where in the chunk grammar we are.
    Chunk(Chunk),
    /// No length: the body ends when the server closes the connection.
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// A chunk-size line (hex size, optional `;extensions`, CRLF) comes next: httparse's
    /// `parse_chunk_size` reads it once it is whole; until then its bytes stay unused.
    Size,
    Data(u64),
    DataCr,
    DataLf,
    /// After the last (zero) chunk: trailer lines until an empty one.
    Trailer { line_len: u32 },
    Done,
}

/// Incremental parser for one connection's responses.
#[derive(Debug, Default)]
pub struct Parser {
    head: Option<Head>,
    body: Option<Body>,
    /// Body bytes of the response being read.
    pub body_bytes: u64,
    /// The last response's Server-Timing buffer, given back (`recycle`) to hold the next one's: no
    /// allocation per response.
    spare: Vec<u8>,
    /// Keep the next response's head and body (`Head::raw`, `Head::body`): a session's step.
    pub keep: bool,
    kept: Vec<u8>,
    /// The response being read is a stream of server-sent events: its events so far.
    sse: Option<Events>,
}

/// Largest response head accepted (status line and headers).
pub const MAX_HEAD: usize = 64 * 1024;

/// One step of parsing.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// More bytes are needed; the first `usize` bytes of `buf` were used (the rest, part of an
    /// unfinished head, must be fed again with more bytes appended).
    More(usize),
    /// A whole response ended after `usize` bytes of `buf`; what follows belongs to the next one.
    Done(Head, usize),
}

impl Parser {
    /// Feed bytes; `head_request` tells that the request was HEAD (no body follows).
    pub fn feed(&mut self, buf: &[u8], head_request: bool) -> Result<Step, Malformed> {
        let mut used = 0;
        if self.head.is_none() {
            loop {
                let Some((head, body, n)) = parse_head(&buf[used..], head_request, &mut self.spare)? else {
                    if buf.len() - used > MAX_HEAD {
                        return Err(Malformed::HeadTooLarge);
                    }
                    return Ok(Step::More(used));
                };
                let mut head = head;
                if self.keep && head.status >= 200 {
                    head.raw = buf[used..used + n].to_vec();
                    self.kept.clear();
                }
                used += n;
                if head.status >= 200 {
                    self.sse = head.events.map(|_| Events::default());
                    self.head = Some(head);
                    self.body = Some(body);
                    self.body_bytes = 0;
                    break;
                } // else a 1xx interim response (100 Continue): the real one follows
            }
        }
        used += self.body_step(&buf[used..])?;
        if matches!(self.body, Some(Body::Length(0) | Body::Chunk(Chunk::Done))) {
            self.body = None;
            return Ok(Step::Done(self.take_head(), used));
        }
        Ok(Step::More(used))
    }

    /// The finished response's head, with its kept body and its events.
    fn take_head(&mut self) -> Head {
        let mut head = self.head.take().expect("head parsed");
        if self.keep {
            head.body = std::mem::take(&mut self.kept);
        }
        head.events = self.sse.take().map(|e| e.count);
        head
    }

    /// The events of the stream being read so far (0: none, or not a stream).
    pub fn events(&self) -> u32 {
        self.sse.as_ref().map_or(0, |e| e.count)
    }


    /// Give back a finished response's head: its Server-Timing buffer holds the next one's.
    pub fn recycle(&mut self, head: Head) {
        self.spare = head.timing;
    }

    /// The connection closed: a response delimited by the close ends here; a partly received one
    /// is truncated. Returns the finished head, if any.
    pub fn eof(&mut self) -> Result<Option<Head>, Malformed> {
        match (self.head.is_some(), self.body.take()) {
            (false, _) => Ok(None),
            (true, Some(Body::UntilClose)) => Ok(Some(self.take_head())),
            _ => {
                self.head = None;
                Err(Malformed::Truncated)
            }
        }
    }

    fn body_step(&mut self, buf: &[u8]) -> Result<usize, Malformed> {
        match self.body.as_mut().expect("in a body") {
            Body::Length(left) => {
                let take = (*left).min(buf.len() as u64);
                *left -= take;
                self.body_data(&buf[..take as usize]);
                Ok(take as usize)
            }
            Body::UntilClose => {
                self.body_data(buf);
                Ok(buf.len())
            }
            Body::Chunk(state) => {
                let (mut state, mut i) = (*state, 0);
                while i < buf.len() && state != Chunk::Done {
                    state = match state {
                        Chunk::Size => match chunk_size(&buf[i..])? {
                            None => break, // the rest of the line is still to come
                            Some((n, size)) => {
                                i += n;
                                if size == 0 { Chunk::Trailer { line_len: 0 } } else { Chunk::Data(size) }
                            }
                        },
                        Chunk::Data(left) => {
                            let take = left.min((buf.len() - i) as u64);
                            self.body_data(&buf[i..i + take as usize]);
                            i += take as usize;
                            if left == take { Chunk::DataCr } else { Chunk::Data(left - take) }
                        }
                        s => {
                            i += 1;
                            chunk_byte(s, buf[i - 1])?
                        }
                    };
                }
                self.body = Some(Body::Chunk(state));
                Ok(i)
            }
        }
    }

    /// Body bytes: counted, kept for a session's captures (`keep`, up to MAX_KEPT_BODY), and read
    /// for a stream's events.
    fn body_data(&mut self, data: &[u8]) {
        self.body_bytes += data.len() as u64;
        if self.keep && self.kept.len() < MAX_KEPT_BODY {
            self.kept.extend_from_slice(&data[..data.len().min(MAX_KEPT_BODY - self.kept.len())]);
        }
        if let (Some(events), Some(head)) = (self.sse.as_mut(), self.head.as_mut()) {
            events.scan(data, &mut head.timing);
        }
    }
}

/// A whole chunk-size line at the start of `buf`: its length and the size, or None while its CRLF
/// has not come (refused past MAX_HEAD). httparse reads an empty size as 0; RFC 9112 wants a digit.
fn chunk_size(buf: &[u8]) -> Result<Option<(usize, u64)>, Malformed> {
    if buf.first().is_some_and(|b| !b.is_ascii_hexdigit()) {
        return Err(Malformed::Chunk);
    }
    match httparse::parse_chunk_size(buf) {
        Ok(httparse::Status::Complete(done)) => Ok(Some(done)),
        Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD => Ok(None),
        _ => Err(Malformed::Chunk),
    }
}

/// The chunked grammar (RFC 9112 section 7.1) one byte at a time, after chunk data and in trailers.
fn chunk_byte(state: Chunk, b: u8) -> Result<Chunk, Malformed> {
    Ok(match state {
        Chunk::DataCr if b == b'\r' => Chunk::DataLf,
        Chunk::DataLf if b == b'\n' => Chunk::Size,
        Chunk::Trailer { line_len } => match b {
            b'\n' if line_len == 0 => Chunk::Done,
            b'\n' => Chunk::Trailer { line_len: 0 },
            b'\r' => Chunk::Trailer { line_len },
            _ if line_len as usize > MAX_HEAD => return Err(Malformed::Chunk),
            _ => Chunk::Trailer { line_len: line_len + 1 },
        },
        _ => return Err(Malformed::Chunk),
    })
}

/// ``spare``: a buffer for the Server-Timing value (taken only once the head is complete).
fn parse_head(buf: &[u8], head_request: bool, spare: &mut Vec<u8>) -> Result<Option<(Head, Body, usize)>, Malformed> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let n = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(Malformed::Head),
    };
    let status = resp.code.ok_or(Malformed::Head)?;
    let mut timing = std::mem::take(spare);
    timing.clear();
    let mut head = Head { status, close: resp.version == Some(0), timing, ..Head::default() };
    let mut length: Option<u64> = None;
    let mut chunked = false;
    for h in resp.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            let v = parse_u64(trim(h.value)).ok_or(Malformed::ContentLength)?;
            if length.is_some_and(|l| l != v) {
                return Err(Malformed::ContentLength);
            }
            length = Some(v);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = last_token(h.value).eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in h.value.split(|b| *b == b',') {
                let t = trim(token);
                if t.eq_ignore_ascii_case(b"close") {
                    head.close = true;
                } else if t.eq_ignore_ascii_case(b"keep-alive") && resp.version == Some(0) {
                    head.close = false;
                }
            }
        } else if name.eq_ignore_ascii_case(b"server-timing") {
            if !head.timing.is_empty() {
                head.timing.extend_from_slice(b", ");
            }
            head.timing.extend_from_slice(h.value);
        } else if name.eq_ignore_ascii_case(b"x-arena-pid") {
            head.pid = parse_u64(trim(h.value)).and_then(|p| u32::try_from(p).ok());
        } else if name.eq_ignore_ascii_case(b"content-type") {
            let media = trim(h.value.split(|b| *b == b';').next().unwrap_or_default());
            head.events = media.eq_ignore_ascii_case(b"text/event-stream").then_some(0);
        }
    }
    let no_body = head_request || status < 200 || status == 204 || status == 304;
    let body = if no_body {
        Body::Length(0)
    } else if chunked {
        Body::Chunk(Chunk::Size)
    } else if let Some(len) = length {
        Body::Length(len)
    } else {
        head.close = true;
        Body::UntilClose
    };
    Ok(Some((head, body, n)))
}

/// Longest metric name kept: a longer one is counted as dropped.
pub const MAX_TIMING_NAME: usize = 64;

/// `queue;dur=1.5, app;dur=12.25;desc="x"`: calls `each(name, µs)` for every metric with a
/// non-negative duration (a metric without one, `io`, has nothing to record). Names are tokens
/// (RFC 9110), compared without case by the recorder.
pub fn parse_server_timing(value: &[u8], mut each: impl FnMut(&[u8], u64)) {
    for entry in value.split(|b| *b == b',') {
        let mut parts = entry.split(|b| *b == b';');
        let name = trim(parts.next().unwrap_or_default());
        if name.is_empty() {
            continue;
        }
        let mut dur = None;
        for param in parts {
            let param = trim(param);
            if param.len() > 4 && param[..4].eq_ignore_ascii_case(b"dur=") {
                if let Some(ms) = std::str::from_utf8(&param[4..]).ok().and_then(|s| s.trim_matches('"').parse::<f64>().ok()) {
                    if ms.is_finite() && ms >= 0.0 {
                        dur = Some((ms * 1000.0).round() as u64);
                    }
                }
            }
        }
        if let Some(us) = dur {
            each(name, us);
        }
    }
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !c.is_ascii_whitespace()).map_or(start, |e| e + 1);
    &b[start..end]
}

fn last_token(value: &[u8]) -> &[u8] {
    trim(value.rsplit(|b| *b == b',').next().unwrap_or_default())
}

fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `wire` in pieces of `piece` bytes the way a connection does (unconsumed bytes stay
    /// in the buffer and get more appended); return every finished response and its body length.
    fn parse_all(wire: &[u8], piece: usize, head_request: bool) -> Result<Vec<(Head, u64)>, Malformed> {
        let mut parser = Parser::default();
        let (mut buf, mut out) = (Vec::new(), Vec::new());
        for chunk in wire.chunks(piece.max(1)) {
            buf.extend_from_slice(chunk);
            loop {
                match parser.feed(&buf, head_request)? {
                    Step::More(n) => {
                        buf.drain(..n);
                        break;
                    }
                    Step::Done(head, n) => {
                        out.push((head, parser.body_bytes));
                        buf.drain(..n);
                        if buf.is_empty() {
                            break;
                        }
                    }
                }
            }
        }
        if let Some(head) = parser.eof()? {
            out.push((head, parser.body_bytes));
        }
        Ok(out)
    }

    const PLAIN: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer-Timing: app;dur=1.5, cpu;dur=0.25\r\nX-Arena-Pid: 42\r\n\r\nhello";
    const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nTrailer: x\r\n\r\n";

    #[test]
    fn content_length_in_every_split() {
        for piece in 1..=PLAIN.len() {
            let got = parse_all(PLAIN, piece, false).unwrap();
            assert_eq!(got.len(), 1, "piece {piece}");
            let (head, body) = &got[0];
            assert_eq!((head.status, *body, head.pid, head.close), (200, 5, Some(42), false));
            assert_eq!(head.timing, b"app;dur=1.5, cpu;dur=0.25");
        }
    }

    #[test]
    fn chunked_with_extensions_and_trailers_in_every_split() {
        for piece in 1..=CHUNKED.len() {
            let got = parse_all(CHUNKED, piece, false).unwrap();
            assert_eq!(got.len(), 1, "piece {piece}");
            assert_eq!(got[0].1, 5 + 26);
        }
    }

    #[test]
    fn pipelined_responses_are_told_apart() {
        let wire = [PLAIN, CHUNKED, PLAIN].concat();
        for piece in [1, 7, 64, wire.len()] {
            let got = parse_all(&wire, piece, false).unwrap();
            assert_eq!(got.iter().map(|(_, b)| *b).collect::<Vec<_>>(), vec![5, 31, 5], "piece {piece}");
        }
        // one feed with both: Done reports exactly where the first ends
        let mut p = Parser::default();
        assert_eq!(p.feed(&wire, false).unwrap(), Step::Done(parse_all(PLAIN, 999, false).unwrap()[0].0.clone(), PLAIN.len()));
    }

    #[test]
    fn interim_1xx_head_and_bodiless_statuses() {
        let wire = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n";
        let got = parse_all(wire, 3, false).unwrap();
        assert_eq!(got.iter().map(|(h, b)| (h.status, *b)).collect::<Vec<_>>(), vec![(204, 0), (304, 0)]);
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
        assert_eq!(parse_all(head, 5, true).unwrap()[0].1, 0);
    }

    #[test]
    fn a_body_without_length_ends_at_close() {
        let wire = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nsome bytes";
        let got = parse_all(wire, 4, false).unwrap();
        assert_eq!((got[0].0.status, got[0].1, got[0].0.close), (200, 10, true));
        let kept = parse_all(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", 9, false).unwrap();
        assert!(!kept[0].0.close);
        let closing = parse_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 9, false).unwrap();
        assert!(closing[0].0.close);
    }

    #[test]
    fn malformed_responses_are_errors() {
        assert_eq!(parse_all(b"HTTP/1.1 2x0 OK\r\n\r\n", 99, false), Err(Malformed::Head));
        assert_eq!(parse_all(b"SMTP ready\r\n\r\n", 99, false), Err(Malformed::Head));
        assert_eq!(parse_all(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 99, false), Err(Malformed::ContentLength));
        assert_eq!(parse_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 99, false),
                   Err(Malformed::ContentLength));
        let chunked = |body: &[u8]| parse_all(&[b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".as_slice(), body].concat(), 7, false);
        assert_eq!(chunked(b"zz\r\n"), Err(Malformed::Chunk));
        assert_eq!(chunked(b"\r\n"), Err(Malformed::Chunk)); // no digit: not a size of 0
        assert_eq!(chunked(b"10000000000000000\r\n"), Err(Malformed::Chunk)); // 17 hex digits
        assert_eq!(chunked(b"3x\r\nabc\r\n0\r\n\r\n"), Err(Malformed::Chunk));
        assert_eq!(chunked(b"3\rabc\r\n0\r\n\r\n"), Err(Malformed::Chunk));
        assert_eq!(chunked(&[b"3;".as_slice(), &vec![b'e'; MAX_HEAD + 1]].concat()), Err(Malformed::Chunk));
        assert_eq!(chunked(b"3 ; e=1\r\nabc\r\n0\r\n\r\n").unwrap()[0].1, 3); // whitespace before the extension
        assert_eq!(parse_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", 99, false), Err(Malformed::Truncated));
        let huge = [b"HTTP/1.1 200 OK\r\nX: ".as_slice(), &vec![b'a'; MAX_HEAD + 10]].concat();
        assert_eq!(parse_all(&huge, 4096, false), Err(Malformed::HeadTooLarge));
    }

    #[test]
    fn server_timing_values() {
        let mut seen = Vec::new();
        parse_server_timing(b"queue;dur=0.5, app;desc=\"x\";dur=12.3456, CPU;dur=1e1, io, cpuwall;dur=-1, sql.active_record;dur=9, ;dur=3",
                            |name, us| seen.push((String::from_utf8(name.to_vec()).unwrap(), us)));
        // io has no duration, cpuwall's is negative, the last has no name: nothing to record
        assert_eq!(seen, [("queue".into(), 500), ("app".into(), 12346), ("CPU".into(), 10000),
                          ("sql.active_record".into(), 9000)]);
    }

    #[test]
    fn a_recycled_timing_buffer_holds_only_the_next_responses_value() {
        let mut parser = Parser::default();
        let first = b"HTTP/1.1 200 OK\r\nServer-Timing: app;dur=2.5, sql.query;dur=1\r\nContent-Length: 0\r\n\r\n";
        let Ok(Step::Done(head, _)) = parser.feed(first, false) else { panic!("one whole response") };
        let capacity = head.timing.capacity();
        parser.recycle(head);
        let Ok(Step::Done(head, _)) = parser.feed(b"HTTP/1.1 200 OK\r\nServer-Timing: db;dur=1\r\nContent-Length: 0\r\n\r\n", false)
        else { panic!("one whole response") };
        assert_eq!((head.timing.as_slice(), head.timing.capacity()), (b"db;dur=1".as_slice(), capacity));
        parser.recycle(head);
        let Ok(Step::Done(head, _)) = parser.feed(b"HTTP/1.1 204 No Content\r\n\r\n", false) else { panic!() };
        assert!(head.timing.is_empty());
    }

    #[test]
    fn a_streams_events_are_counted_as_they_come_and_its_timing_comment_joins_the_heads() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nServer-Timing: queue;dur=1\r\n\
                     Transfer-Encoding: chunked\r\n\r\n12\r\nid: 1\ndata: abcd\n\n\r\n\
                     12\r\nid: 2\ndata: abcd\n\n\r\n1c\r\n: server-timing app;dur=90\n\n\r\n0\r\n\r\n";
        for piece in 1..=wire.len() {
            let got = parse_all(wire, piece, false).unwrap();
            assert_eq!((got[0].0.events, got[0].0.timing.as_slice()), (Some(2), b"queue;dur=1, app;dur=90".as_slice()), "piece {piece}");
        }
        let mut parser = Parser::default();
        let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
        assert_eq!(parser.feed(&[head.as_slice(), b"data: 1\n\ndata: 2\n\nda"].concat(), false), Ok(Step::More(head.len() + 20)));
        assert_eq!(parser.events(), 2); // counted before the stream ends (at the close)
        assert_eq!(parse_all(PLAIN, 9, false).unwrap()[0].0.events, None); // not a stream
    }

    #[test]
    fn several_server_timing_headers_are_joined() {
        let wire = b"HTTP/1.1 200 OK\r\nServer-Timing: app;dur=2\r\nContent-Length: 0\r\nserver-timing: db;dur=1\r\n\r\n";
        let (head, _) = parse_all(wire, 7, false).unwrap().remove(0);
        assert_eq!(head.timing, b"app;dur=2, db;dur=1");
    }
}
