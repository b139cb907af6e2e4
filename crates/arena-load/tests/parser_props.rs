//! Properties of the response parser, over generated inputs (proptest; bounded, so it runs in
//! `make test`): whatever bytes arrive, however they are split, the parser never panics and never
//! reads past a response; a well-formed response is parsed the same whole or in pieces.

use arena_load::response::{Malformed, Parser, Step};
use proptest::prelude::*;

/// Feed `pieces` one after another as a connection would (an unfinished head is fed again with
/// the next bytes appended). The first complete response's status and the bytes it used, or the
/// first error; `Ok(None)`: more bytes needed.
fn parse_pieces(pieces: &[Vec<u8>]) -> Result<Option<(u16, u64, usize)>, Malformed> {
    let mut parser = Parser::default();
    let mut pending: Vec<u8> = Vec::new();
    let mut consumed = 0;
    for piece in pieces {
        pending.extend_from_slice(piece);
        match parser.feed(&pending, false)? {
            Step::More(used) => {
                assert!(used <= pending.len());
                consumed += used;
                pending.drain(..used);
            }
            Step::Done(head, used) => {
                assert!(used <= pending.len(), "used {used} of {} bytes", pending.len());
                return Ok(Some((head.status, parser.body_bytes, consumed + used)));
            }
        }
    }
    Ok(None)
}

fn split(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    at.sort_unstable();
    let mut out = Vec::new();
    let mut last = 0;
    for c in at.into_iter().chain([bytes.len()]) {
        out.push(bytes[last..c].to_vec());
        last = c;
    }
    out
}

/// A well-formed response: its bytes, its status and its body's length.
fn response() -> impl Strategy<Value = (Vec<u8>, u16, u64)> {
    (200u16..600, proptest::collection::vec(1usize..40, 0..6), any::<bool>(),
     proptest::collection::vec(("[A-Za-z][A-Za-z0-9-]{0,15}", "[ -~]{0,30}"), 0..5))
        .prop_filter("no body by definition", |(status, ..)| *status != 204 && *status != 304)
        .prop_map(|(status, chunks, chunked, headers)| {
            let mut head = format!("HTTP/1.1 {status} Whatever\r\n");
            for (name, value) in &headers {
                let lower = name.to_ascii_lowercase();
                if !["content-length", "transfer-encoding", "connection"].contains(&lower.as_str()) {
                    head += &format!("{name}: {}\r\n", value.trim());
                }
            }
            let body: Vec<u8> = chunks.iter().flat_map(|n| std::iter::repeat_n(b'x', *n)).collect();
            let mut bytes = Vec::new();
            if chunked {
                head += "Transfer-Encoding: chunked\r\n\r\n";
                bytes.extend_from_slice(head.as_bytes());
                for n in &chunks {
                    bytes.extend_from_slice(format!("{n:x};ext=1\r\n").as_bytes());
                    bytes.extend(std::iter::repeat_n(b'x', *n));
                    bytes.extend_from_slice(b"\r\n");
                }
                bytes.extend_from_slice(b"0\r\nTrailer: t\r\n\r\n");
            } else {
                head += &format!("Content-Length: {}\r\n\r\n", body.len());
                bytes.extend_from_slice(head.as_bytes());
                bytes.extend_from_slice(&body);
            }
            (bytes, status, body.len() as u64)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600),
                                   cuts in proptest::collection::vec(any::<usize>(), 0..8)) {
        let _ = parse_pieces(&split(&bytes, &cuts));
        let mut p = Parser::default();
        let _ = p.feed(&bytes, true);
        let _ = p.eof();
    }

    #[test]
    fn mangled_responses_never_panic(resp in response(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
                                     cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
        let (mut bytes, _, _) = resp;
        for (i, b) in flips {
            let i = i % bytes.len();
            bytes[i] = b;
        }
        let _ = parse_pieces(&split(&bytes, &cuts));
    }

    #[test]
    fn a_response_is_read_the_same_whole_or_in_pieces(resp in response(),
                                                      cuts in proptest::collection::vec(any::<usize>(), 0..10),
                                                      next in proptest::collection::vec(any::<u8>(), 0..40)) {
        let (bytes, status, body) = resp;
        let whole = parse_pieces(&[bytes.clone()]);
        prop_assert_eq!(whole, Ok(Some((status, body, bytes.len()))));
        prop_assert_eq!(parse_pieces(&split(&bytes, &cuts)), Ok(Some((status, body, bytes.len()))));
        // bytes after a response (the next one, pipelined) are never taken as part of it
        let mut more = bytes.clone();
        more.extend_from_slice(&next);
        prop_assert_eq!(parse_pieces(&[more]), Ok(Some((status, body, bytes.len()))));
    }

    #[test]
    fn a_close_ends_only_a_body_without_length(resp in response(), cut in any::<usize>()) {
        let (bytes, _, _) = resp;
        let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let cut = head_end + cut % (bytes.len() - head_end).max(1);
        if cut < bytes.len() {
            let mut p = Parser::default();
            let _ = p.feed(&bytes[..cut], false);
            prop_assert_eq!(p.eof(), Err(Malformed::Truncated)); // declared length or chunks unfinished
        }
    }
}

#[test]
fn a_body_until_the_close_ends_there() {
    let mut p = Parser::default();
    assert_eq!(p.feed(b"HTTP/1.0 200 OK\r\n\r\nsome bytes", false), Ok(Step::More(29)));
    assert_eq!(p.eof().map(|h| h.map(|h| (h.status, h.close))), Ok(Some((200, true))));
}
