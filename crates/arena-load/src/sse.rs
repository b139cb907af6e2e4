//! Server-sent events (the HTML standard's `text/event-stream`) counted as a body's bytes arrive,
//! without keeping them: a blank line ends a block, and a block with a `data` field is an event.
//! A comment line `: server-timing <metrics>` (the subject apps close a stream with one: its own
//! timing, which a head sent before the stream could not carry) is kept as Server-Timing.

/// The comment whose value is a stream's own Server-Timing.
const TIMING: &[u8] = b": server-timing ";
/// Most bytes of Server-Timing kept from a stream's comments (the rest is dropped).
const MAX_TIMING: usize = 4096;

#[derive(Debug, Clone, Default)]
pub struct Events {
    /// Events dispatched so far.
    pub count: u32,
    /// Bytes of the line being read, and its first ones (enough to tell its field).
    line_len: usize,
    start: [u8; 16],
    /// The block being read has a `data` field.
    data: bool,
    /// The last byte was a CR: an LF right after it ends no second line.
    after_cr: bool,
    /// The line is a `: server-timing ` comment: its value goes to the Server-Timing kept.
    timing: bool,
}

impl Events {
    /// Read `bytes` of the stream; a timing comment's value is appended to `timing` (", " between).
    pub fn scan(&mut self, bytes: &[u8], timing: &mut Vec<u8>) {
        for &b in bytes {
            if std::mem::take(&mut self.after_cr) && b == b'\n' {
                continue;
            }
            if b == b'\r' || b == b'\n' {
                self.after_cr = b == b'\r';
                self.end_line();
                continue;
            }
            if self.line_len < self.start.len() {
                self.start[self.line_len] = b;
            }
            self.line_len += 1;
            if self.timing && timing.len() < MAX_TIMING {
                timing.push(b);
            } else if self.line_len == TIMING.len() && self.start == TIMING {
                self.timing = true;
                if !timing.is_empty() {
                    timing.extend_from_slice(b", ");
                }
            }
        }
    }

    fn end_line(&mut self) {
        let line = &self.start[..self.line_len.min(self.start.len())];
        if self.line_len == 0 {
            self.count += u32::from(std::mem::take(&mut self.data));
        } else if line.starts_with(b"data:") || (self.line_len == 4 && line == b"data") {
            self.data = true;
        }
        self.line_len = 0;
        self.timing = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(stream: &[u8], piece: usize) -> (u32, Vec<u8>) {
        let (mut events, mut timing) = (Events::default(), Vec::new());
        for part in stream.chunks(piece) {
            events.scan(part, &mut timing);
        }
        (events.count, timing)
    }

    #[test]
    fn events_are_blocks_with_data_in_every_split_and_line_ending() {
        let stream = b": stream\n\nid: 1\ndata: a\n\nid: 2\nevent: x\ndata\ndata: b\n\nid: 3\n\n: server-timing app;dur=5, cpu;dur=1\n\n";
        for piece in 1..=stream.len() {
            assert_eq!(scan(stream, piece), (2, b"app;dur=5, cpu;dur=1".to_vec()), "piece {piece}");
        }
        let crlf: Vec<u8> = String::from_utf8_lossy(stream).replace('\n', "\r\n").into_bytes();
        let cr: Vec<u8> = String::from_utf8_lossy(stream).replace('\n', "\r").into_bytes();
        for piece in [1, 2, 3, 7, 500] {
            assert_eq!(scan(&crlf, piece).0, 2, "CRLF, piece {piece}");
            assert_eq!(scan(&cr, piece).0, 2, "CR, piece {piece}");
        }
    }

    #[test]
    fn a_block_not_ended_is_no_event_and_a_datum_field_is_no_data() {
        assert_eq!(scan(b"data: a\n\ndata: b\n", 3).0, 1);
        assert_eq!(scan(b"datum: a\n\ndata:\n\n", 3).0, 1);
        let (_, timing) = scan(b": server-timing a;dur=1\n\n: server-timing b;dur=2\n\n: server-timingless\n\n", 5);
        assert_eq!(timing, b"a;dur=1, b;dur=2");
        assert!(scan(&[b": server-timing ".as_slice(), &vec![b'x'; 10_000], b"\n\n"].concat(), 999).1.len() <= MAX_TIMING);
    }
}
