//! HTTP/1.1 on the wire: requests rendered once into bytes, responses parsed incrementally.
//!
//! The parser never stores a body: it counts body bytes (Content-Length, chunked, or until the
//! connection closes) and keeps only what the recorder needs from the head: the status,
//! `Server-Timing` durations, `X-Arena-Pid` and whether the server will close the connection.

use std::fmt::Write as _;

use crate::session::User;

/// One request of the mix. A fixed request is rendered once: `head` ends just before the blank
/// line, so a per-send `X-Request-Start` (or a session's `Cookie`) header can be appended without
/// re-rendering. A request whose path or body draws values (`/posts/{id:1..10000}`), or that uses
/// a value its session captured (`{csrf}`), is rendered at each send from `fields`.
#[derive(Debug, Clone)]
pub struct Template {
    pub weight: u32,
    pub method: String,
    pub target: String,
    pub head: Vec<u8>,
    pub body: Vec<u8>,
    /// HEAD responses have no body whatever their Content-Length says.
    pub is_head: bool,
    /// `http://host[:port]`: a session's cookies are matched against this origin and the target.
    origin: String,
    fields: Option<Fields>,
}

/// A part of a templated path or body.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Lit(Vec<u8>),
    /// `{name:lo..hi}`: a value drawn uniformly from lo..=hi into `slot`.
    Draw { slot: usize, lo: u64, hi: u64 },
    /// `{name:hex:N}`, `{name:token:N}`, `{name:uuid}`: a random token drawn into `slot` (its seed).
    Token(usize),
    /// `{name}`: the value the same request drew for `name` earlier (in its path or body).
    Ref(usize),
    /// `{name}`: the value its session captured as `name` from an earlier answer, encoded for
    /// where it goes.
    Capture(usize, Encode),
}

/// How a captured value is written where it goes: percent-encoded in a path, a query or a form
/// body; escaped inside a JSON string; as it is in a header or any other body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Encode {
    Raw,
    Url,
    Json,
}

impl Encode {
    /// A body's encoding, from its Content-Type.
    pub fn for_body(headers: &[(String, String)]) -> Encode {
        let kind = headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("content-type")).map(|(_, v)| v.to_ascii_lowercase());
        match kind.as_deref() {
            Some(k) if k.contains("x-www-form-urlencoded") => Encode::Url,
            Some(k) if k.contains("json") => Encode::Json,
            _ => Encode::Raw,
        }
    }

    /// Bytes `push` writes for `value`.
    fn len(self, value: &str) -> usize {
        match self {
            Encode::Raw => value.bytes().filter(|b| !b.is_ascii_control()).count(),
            Encode::Url => value.bytes().map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { 1 } else { 3 }).sum(),
            Encode::Json => serde_json::to_string(value).expect("a string serializes").len() - 2,
        }
    }

    fn push(self, value: &str, out: &mut Vec<u8>) {
        match self {
            // a header value holds no control character (a captured CR or LF would end it)
            Encode::Raw => out.extend(value.bytes().filter(|b| !b.is_ascii_control())),
            Encode::Url => {
                for b in value.bytes() {
                    if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                        out.push(b);
                    } else {
                        out.extend_from_slice(&[b'%', HEX_UPPER[usize::from(b >> 4)], HEX_UPPER[usize::from(b & 15)]]);
                    }
                }
            }
            Encode::Json => {
                let quoted = serde_json::to_string(value).expect("a string serializes");
                out.extend_from_slice(&quoted.as_bytes()[1..quoted.len() - 1]);
            }
        }
    }
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

/// How a drawn value is written: a whole number, or a token of random characters (a hex or
/// base64url string of N characters, or a version 4 UUID): the ids of apps whose URLs are not
/// numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    Number,
    Hex(usize),
    Word(usize),
    Uuid,
}

/// Most values one request may draw; the largest value one may hold; the longest token.
pub const MAX_FIELDS: usize = 16;
pub const MAX_VALUE: u64 = 1_000_000_000_000_000;
pub const MAX_TOKEN: usize = 64;

const HEX: &[u8; 16] = b"0123456789abcdef";
const WORD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

impl Shape {
    /// Characters written for ``value``.
    fn len(self, value: u64) -> usize {
        match self {
            Shape::Number => digits(value),
            Shape::Hex(n) | Shape::Word(n) => n,
            Shape::Uuid => 36,
        }
    }

    /// ``value`` written: a number in decimal, a token from its seed (the same seed, the same token).
    fn push(self, value: u64, out: &mut Vec<u8>) {
        match self {
            Shape::Number => push_decimal(out, value),
            Shape::Hex(n) => push_token(out, value, n, HEX, 4),
            Shape::Word(n) => push_token(out, value, n, WORD, 6),
            Shape::Uuid => {
                let mut hex = Vec::with_capacity(32);
                push_token(&mut hex, value, 32, HEX, 4);
                hex[12] = b'4'; // version 4 (random)
                hex[16] = b"89ab"[(value >> 60) as usize & 3]; // RFC 4122's variant
                for (i, part) in [&hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..]].iter().enumerate() {
                    if i > 0 {
                        out.push(b'-');
                    }
                    out.extend_from_slice(part);
                }
            }
        }
    }
}

/// ``n`` characters of ``alphabet`` (2^bits of them), from a generator seeded with ``seed``.
fn push_token(out: &mut Vec<u8>, seed: u64, n: usize, alphabet: &[u8], bits: u32) {
    let mut rng = crate::pacer::SplitMix64::new(seed);
    let (mut word, mut left) = (0u64, 0u32);
    for _ in 0..n {
        if left < bits {
            word = rng.next_u64();
            left = 64;
        }
        out.push(alphabet[(word & ((1 << bits) - 1)) as usize]);
        word >>= bits;
        left -= bits;
    }
}

/// A request rendered at each send: the request line's start, the templated target, the rest of
/// the head (without Content-Length; its header values may use captures), and the templated body.
#[derive(Debug, Clone)]
struct Fields {
    target: Vec<Piece>,
    rest: Vec<Piece>,
    body: Vec<Piece>,
    length: bool,
    shapes: Vec<Shape>, // how each slot's value is written
}

/// Where a text is parsed: the values its session captured before (by name), how one is encoded
/// there, and whether the text may draw values of its own (a header's may not).
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub captures: &'a [String],
    pub encode: Encode,
    pub draws: bool,
}

impl Scope<'_> {
    /// A path or body without a session's captures.
    pub const PLAIN: Scope<'static> = Scope { captures: &[], encode: Encode::Raw, draws: true };
}

/// Parse `text` into pieces: `{name:lo..hi}` draws a whole number, `{name:hex:N}`,
/// `{name:token:N}` and `{name:uuid}` a token, `{name}` repeats a value drawn before it or, failing
/// that, uses a value the session captured; any other brace is text (a JSON body keeps its own).
/// `names` holds the names drawn so far in this request and how each is written (the path is
/// parsed before the body).
pub fn parse_pieces(text: &str, names: &mut Vec<(String, Shape)>, scope: Scope) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut lit = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let found = after.find('}').and_then(|close| field(&after[..close]).map(|f| (close, f)));
        let piece = match found {
            Some((close, (name, Spec::Range(lo, hi)))) if scope.draws => Some(draw(name, lo, hi, &after[..close], names)?),
            Some((close, (name, Spec::Token(shape)))) if scope.draws => Some(token(name, shape, &after[..close], names)?),
            Some((_, (name, Spec::Ref))) => names.iter().position(|(n, _)| n == name).map(Piece::Ref)
                .or_else(|| scope.captures.iter().position(|n| n == name).map(|i| Piece::Capture(i, scope.encode))),
            _ => None,
        };
        match (found, piece) {
            (Some((close, _)), Some(piece)) => {
                lit.extend_from_slice(&rest.as_bytes()[..open]);
                if !lit.is_empty() {
                    out.push(Piece::Lit(std::mem::take(&mut lit)));
                }
                out.push(piece);
                rest = &after[close + 1..];
            }
            _ => {
                // not a field ({word} with no value drawn before it is text too)
                lit.extend_from_slice(&rest.as_bytes()[..open + 1]);
                rest = after;
            }
        }
    }
    lit.extend_from_slice(rest.as_bytes());
    if !lit.is_empty() {
        out.push(Piece::Lit(lit));
    }
    Ok(out)
}

/// `{name:lo..hi}`: a new value of the request, checked.
fn draw(name: &str, lo: u64, hi: u64, inner: &str, names: &mut Vec<(String, Shape)>) -> Result<Piece, String> {
    if lo > hi || hi > MAX_VALUE {
        return Err(format!("{{{inner}}}: a range runs from a low to a high whole number, at most {MAX_VALUE}"));
    }
    Ok(Piece::Draw { slot: slot(name, Shape::Number, inner, names)?, lo, hi })
}

/// `{name:hex:N}`, `{name:token:N}`, `{name:uuid}`: a new token of the request, checked.
fn token(name: &str, shape: Shape, inner: &str, names: &mut Vec<(String, Shape)>) -> Result<Piece, String> {
    if let Shape::Hex(n) | Shape::Word(n) = shape {
        if n == 0 || n > MAX_TOKEN {
            return Err(format!("{{{inner}}}: a token is 1 to {MAX_TOKEN} characters long"));
        }
    }
    Ok(Piece::Token(slot(name, shape, inner, names)?))
}

/// The slot of a new value named `name`.
fn slot(name: &str, shape: Shape, inner: &str, names: &mut Vec<(String, Shape)>) -> Result<usize, String> {
    if names.iter().any(|(n, _)| n == name) {
        return Err(format!("{{{inner}}}: {name} is drawn twice (repeat it as {{{name}}})"));
    }
    if names.len() == MAX_FIELDS {
        return Err(format!("{{{inner}}}: at most {MAX_FIELDS} values per request"));
    }
    names.push((name.to_string(), shape));
    Ok(names.len() - 1)
}

/// What a field asks for.
enum Spec {
    Range(u64, u64),
    Token(Shape),
    Ref,
}

/// `name:lo..hi`, `name:hex:N`, `name:token:N`, `name:uuid`, or `name` (a repeat); anything else:
/// not a field.
fn field(inner: &str) -> Option<(&str, Spec)> {
    let (name, range) = match inner.split_once(':') {
        Some((name, range)) => (name, Some(range)),
        None => (inner, None),
    };
    let mut chars = name.chars();
    let ident = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ident {
        return None;
    }
    let digits = |s: &str, most: usize| !s.is_empty() && s.len() <= most && s.bytes().all(|b| b.is_ascii_digit());
    match range {
        None => Some((name, Spec::Ref)),
        Some("uuid") => Some((name, Spec::Token(Shape::Uuid))),
        Some(r) => {
            if let Some((kind, n)) = r.split_once(':') {
                if !digits(n, 2) {
                    return None;
                }
                let n = n.parse().ok()?;
                return match kind {
                    "hex" => Some((name, Spec::Token(Shape::Hex(n)))),
                    "token" => Some((name, Spec::Token(Shape::Word(n)))),
                    _ => None,
                };
            }
            let (lo, hi) = r.split_once("..")?;
            if !digits(lo, 19) || !digits(hi, 19) {
                return None;
            }
            Some((name, Spec::Range(lo.parse().ok()?, hi.parse().ok()?)))
        }
    }
}

fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

impl Template {
    /// A request of the mix; its target and body may draw values (parse_pieces), and its target,
    /// header values and body may use the values `captures` names (its session's, captured by the
    /// steps before it).
    pub fn new(weight: u32, method: &str, host: &str, target: &str, headers: &[(String, String)], body: &[u8],
               keep_alive: bool, captures: &[String]) -> Result<Template, String> {
        let mut names = Vec::new();
        let target_pieces = parse_pieces(target, &mut names, Scope { captures, encode: Encode::Url, draws: true })?;
        let body_scope = Scope { captures, encode: Encode::for_body(headers), draws: true };
        let body_pieces = match std::str::from_utf8(body) {
            Ok(text) => parse_pieces(text, &mut names, body_scope)?,
            Err(_) => vec![Piece::Lit(body.to_vec())],
        };
        let length = !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH");
        let mut rest = String::new();
        let _ = write!(rest, " HTTP/1.1\r\nHost: {host}\r\nUser-Agent: arena-load\r\n");
        for (name, value) in headers {
            let _ = write!(rest, "{name}: {value}\r\n");
        }
        let tail = if keep_alive { "" } else { "Connection: close\r\n" };
        let rest_pieces = parse_pieces(&format!("{rest}{tail}"), &mut names,
                                       Scope { captures, encode: Encode::Raw, draws: false })?;
        let is_head = method.eq_ignore_ascii_case("HEAD");
        let base = Template { weight, method: method.to_string(), target: target.to_string(), head: Vec::new(),
                              body: body.to_vec(), is_head, origin: format!("http://{host}"), fields: None };
        let fixed = |pieces: &[Piece]| pieces.iter().all(|p| matches!(p, Piece::Lit(_)));
        if !names.is_empty() || ![&target_pieces, &rest_pieces, &body_pieces].iter().all(|p| fixed(p)) {
            let mut start = method.as_bytes().to_vec();
            start.push(b' ');
            let shapes = names.iter().map(|(_, shape)| *shape).collect();
            return Ok(Template { head: start, fields: Some(Fields { target: target_pieces, rest: rest_pieces,
                                                                    body: body_pieces, length, shapes }),
                                 ..base });
        }
        let mut head = format!("{method} {target}{rest}");
        if length {
            let _ = write!(head, "Content-Length: {}\r\n", body.len());
        }
        head.push_str(tail);
        Ok(Template { head: head.into_bytes(), ..base })
    }

    /// Whether the request is rendered at each send (it draws values or uses captured ones).
    pub fn templated(&self) -> bool {
        self.fields.is_some()
    }

    /// Append the request to `out`; with `stamp_us`, an `X-Request-Start: t=<µs since epoch>` header.
    /// A templated request draws its values from `rng`. A session's request (`user`) takes its
    /// captured values and its cookie jar's `Cookie` header from the user, and tells it its URL.
    pub fn render(&self, stamp_us: Option<u64>, rng: &mut crate::pacer::SplitMix64, user: Option<&mut User>,
                  out: &mut Vec<u8>) {
        out.extend_from_slice(&self.head);
        let Some(f) = &self.fields else {
            if let Some(user) = user {
                self.cookies(&self.target, user, out);
            }
            finish_head(stamp_us, out);
            out.extend_from_slice(&self.body);
            return;
        };
        let mut values = [0u64; MAX_FIELDS];
        for piece in f.target.iter().chain(&f.body) {
            match *piece {
                Piece::Draw { slot, lo, hi } => values[slot] = lo + rng.next_u64() % (hi - lo + 1),
                Piece::Token(slot) => values[slot] = rng.next_u64(),
                _ => {}
            }
        }
        let captured = user.as_deref().map_or(&[][..], User::values);
        let target_at = out.len();
        push_pieces(&f.target, &values, &f.shapes, captured, out);
        let target_end = out.len();
        push_pieces(&f.rest, &values, &f.shapes, captured, out);
        if f.length {
            let len: usize = f.body.iter().map(|p| match p {
                Piece::Lit(b) => b.len(),
                Piece::Draw { slot, .. } | Piece::Token(slot) | Piece::Ref(slot) => f.shapes[*slot].len(values[*slot]),
                Piece::Capture(i, encode) => encode.len(captured_value(captured, *i)),
            }).sum();
            out.extend_from_slice(b"Content-Length: ");
            push_decimal(out, len as u64);
            out.extend_from_slice(b"\r\n");
        }
        let url = user.is_some().then(|| self.url(&String::from_utf8_lossy(&out[target_at..target_end]))).flatten();
        if let (Some(user), Some(url)) = (user.as_deref(), &url) {
            user.cookie_header(url, out);
        }
        finish_head(stamp_us, out);
        push_pieces(&f.body, &values, &f.shapes, captured, out);
        if let (Some(user), Some(url)) = (user, url) {
            user.sent(url);
        }
    }

    /// The URL of a request to `target`: a session's cookies are matched against it.
    fn url(&self, target: &str) -> Option<url::Url> {
        url::Url::parse(&format!("{}{target}", self.origin)).ok()
    }

    /// A fixed request of a session's: its `Cookie` header, and the user told where it goes.
    fn cookies(&self, target: &str, user: &mut User, out: &mut Vec<u8>) {
        if let Some(url) = self.url(target) {
            user.cookie_header(&url, out);
            user.sent(url);
        }
    }
}

fn finish_head(stamp_us: Option<u64>, out: &mut Vec<u8>) {
    if let Some(us) = stamp_us {
        out.extend_from_slice(b"X-Request-Start: t=");
        push_decimal(out, us);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// ``captured``: the session's values by capture index (a step is sent only once the captures it
/// uses were found, so each is there).
fn push_pieces(pieces: &[Piece], values: &[u64; MAX_FIELDS], shapes: &[Shape], captured: &[Option<String>],
               out: &mut Vec<u8>) {
    for p in pieces {
        match p {
            Piece::Lit(b) => out.extend_from_slice(b),
            Piece::Draw { slot, .. } | Piece::Token(slot) | Piece::Ref(slot) => shapes[*slot].push(values[*slot], out),
            Piece::Capture(i, encode) => encode.push(captured_value(captured, *i), out),
        }
    }
}

fn captured_value(captured: &[Option<String>], i: usize) -> &str {
    captured.get(i).and_then(Option::as_deref).unwrap_or("")
}

fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

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

    /// The finished response's head, with its kept body.
    fn take_head(&mut self) -> Head {
        let mut head = self.head.take().expect("head parsed");
        if self.keep {
            head.body = std::mem::take(&mut self.kept);
        }
        head
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
                self.body_bytes += take;
                keep_body(&mut self.kept, self.keep, &buf[..take as usize]);
                Ok(take as usize)
            }
            Body::UntilClose => {
                self.body_bytes += buf.len() as u64;
                keep_body(&mut self.kept, self.keep, buf);
                Ok(buf.len())
            }
            Body::Chunk(state) => {
                let mut i = 0;
                while i < buf.len() && *state != Chunk::Done {
                    *state = match *state {
                        Chunk::Size => match chunk_size(&buf[i..])? {
                            None => break, // the rest of the line is still to come
                            Some((n, size)) => {
                                i += n;
                                if size == 0 { Chunk::Trailer { line_len: 0 } } else { Chunk::Data(size) }
                            }
                        },
                        Chunk::Data(left) => {
                            let take = left.min((buf.len() - i) as u64);
                            self.body_bytes += take;
                            keep_body(&mut self.kept, self.keep, &buf[i..i + take as usize]);
                            i += take as usize;
                            if left == take { Chunk::DataCr } else { Chunk::Data(left - take) }
                        }
                        s => {
                            i += 1;
                            chunk_byte(s, buf[i - 1])?
                        }
                    };
                }
                Ok(i)
            }
        }
    }
}

/// Body bytes, kept for a session's captures (`keep`), up to MAX_KEPT_BODY.
fn keep_body(kept: &mut Vec<u8>, keep: bool, data: &[u8]) {
    if keep && kept.len() < MAX_KEPT_BODY {
        kept.extend_from_slice(&data[..data.len().min(MAX_KEPT_BODY - kept.len())]);
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
    fn several_server_timing_headers_are_joined() {
        let wire = b"HTTP/1.1 200 OK\r\nServer-Timing: app;dur=2\r\nContent-Length: 0\r\nserver-timing: db;dur=1\r\n\r\n";
        let (head, _) = parse_all(wire, 7, false).unwrap().remove(0);
        assert_eq!(head.timing, b"app;dur=2, db;dur=1");
    }

    #[test]
    fn templates_render_once_and_stamp_per_send() {
        let mut rng = crate::pacer::SplitMix64::new(1);
        let t = Template::new(1, "POST", "127.0.0.1:8080", "/work?cpu_ms=1", &[("X-A".into(), "b".into())], b"{}", false, &[])
            .unwrap();
        assert!(!t.templated());
        let mut out = Vec::new();
        t.render(Some(1_700_000_000_123_456), &mut rng, None, &mut out);
        assert_eq!(String::from_utf8(out).unwrap(),
                   "POST /work?cpu_ms=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: arena-load\r\nX-A: b\r\n\
                    Content-Length: 2\r\nConnection: close\r\nX-Request-Start: t=1700000000123456\r\n\r\n{}");
        let mut out = Vec::new();
        Template::new(1, "GET", "h", "/", &[], b"", true, &[]).unwrap().render(None, &mut rng, None, &mut out);
        assert_eq!(out, b"GET / HTTP/1.1\r\nHost: h\r\nUser-Agent: arena-load\r\n\r\n");
    }

    fn drawn(t: &Template, rng: &mut crate::pacer::SplitMix64) -> String {
        let mut out = Vec::new();
        t.render(None, rng, None, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn templates_draw_values_in_their_ranges_each_send_and_repeat_them_by_name() {
        let body = br#"{"title": "post {n:1..9}", "again": "{n}", "keep": {"x": "{word}"}}"#;
        let t = Template::new(1, "POST", "h", "/posts/{id:5..7}/c?n={n2:10..10}", &[], body, true, &[]).unwrap();
        assert!(t.templated());
        let mut rng = crate::pacer::SplitMix64::new(42);
        let mut ids = std::collections::BTreeSet::new();
        for _ in 0..300 {
            let text = drawn(&t, &mut rng);
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            let id: u64 = head["POST /posts/".len()..].split('/').next().unwrap().parse().unwrap();
            assert!((5..=7).contains(&id));
            ids.insert(id);
            assert!(head.starts_with(&format!("POST /posts/{id}/c?n=10 HTTP/1.1\r\n")), "{head}");
            let n = &body[r#"{"title": "post "#.len()..][..1];
            assert_eq!(body, format!(r#"{{"title": "post {n}", "again": "{n}", "keep": {{"x": "{{word}}"}}}}"#));
            assert!(head.ends_with(&format!("\r\nContent-Length: {}", body.len())), "{head}");
        }
        assert_eq!(ids.into_iter().collect::<Vec<_>>(), vec![5, 6, 7]); // every value of the range is drawn
        // the same seed draws the same requests
        let (mut a, mut b) = (crate::pacer::SplitMix64::new(7), crate::pacer::SplitMix64::new(7));
        assert!((0..20).all(|_| drawn(&t, &mut a) == drawn(&t, &mut b)));
    }

    #[test]
    fn tokens_are_drawn_in_their_shape_each_send_and_repeated_by_name() {
        let body = br#"{"session": "{s:token:22}", "again": "{s}"}"#;
        let t = Template::new(1, "PUT", "h", "/files/{f:uuid}/v/{v:hex:12}", &[], body, true, &[]).unwrap();
        let mut rng = crate::pacer::SplitMix64::new(3);
        let mut files = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let text = drawn(&t, &mut rng);
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            let path = head["PUT /files/".len()..].split(' ').next().unwrap();
            let (uuid, hex) = path.split_once("/v/").unwrap();
            let groups: Vec<_> = uuid.split('-').map(str::len).collect();
            assert_eq!(groups, vec![8, 4, 4, 4, 12], "{uuid}");
            assert!(uuid.bytes().all(|b| b == b'-' || HEX.contains(&b)) && &uuid[14..15] == "4", "{uuid}");
            assert!("89ab".contains(&uuid[19..20]), "{uuid}");
            assert!(hex.len() == 12 && hex.bytes().all(|b| HEX.contains(&b)), "{hex}");
            let s = &body[r#"{"session": ""#.len()..][..22];
            assert!(s.bytes().all(|b| WORD.contains(&b)), "{s}");
            assert_eq!(body, format!(r#"{{"session": "{s}", "again": "{s}"}}"#));
            assert!(head.ends_with(&format!("\r\nContent-Length: {}", body.len())), "{head}");
            files.insert(uuid.to_string());
        }
        assert_eq!(files.len(), 200); // a fresh one at each send
        let mut names = Vec::new();
        assert!(parse_pieces("/a/{t:hex:0}", &mut names, Scope::PLAIN).unwrap_err().contains("1 to 64 characters"));
        let mut names = Vec::new();
        assert!(parse_pieces("/a/{t:token:65}", &mut names, Scope::PLAIN).unwrap_err().contains("{t:token:65}"));
        let mut names = Vec::new();
        assert_eq!(parse_pieces("/a/{t:base32:8}", &mut names, Scope::PLAIN).unwrap(), vec![Piece::Lit(b"/a/{t:base32:8}".to_vec())]);
    }

    #[test]
    fn a_sessions_request_uses_its_captures_encoded_for_their_place_and_its_cookies() {
        let captures = ["csrf".to_string(), "id".to_string()];
        let form = [("Content-Type".to_string(), "application/x-www-form-urlencoded".to_string()),
                    ("X-CSRF-Token".to_string(), "{csrf}".to_string())];
        let t = Template::new(1, "POST", "h:1", "/posts/{id}/edit?t={csrf}", &form, b"token={csrf}&title={x}", true,
                              &captures).unwrap();
        assert!(t.templated());
        let mut user = User::default();
        user.begin(2);
        user.sent(url::Url::parse("http://h:1/").unwrap());
        let head = Head { raw: b"HTTP/1.1 200 OK\r\nSet-Cookie: sid=9; Path=/posts\r\n\r\n".to_vec(),
                          body: br#"{"csrf": "a+b/c=\"\r\n", "id": 7}"#.to_vec(), ..Head::default() };
        let caps = [(0, crate::session::Capture::new("csrf", None, Some("/csrf"), None).unwrap()),
                    (1, crate::session::Capture::new("id", None, Some("/id"), None).unwrap())];
        user.answer(&head, &caps).unwrap();
        let mut out = Vec::new();
        t.render(None, &mut crate::pacer::SplitMix64::new(1), Some(&mut user), &mut out);
        let text = String::from_utf8(out).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("POST /posts/7/edit?t=a%2Bb%2Fc%3D%22%0D%0A HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("\r\nX-CSRF-Token: a+b/c=\"\r\n"), "{head}"); // a header holds no CR or LF
        assert!(head.ends_with("\r\nCookie: sid=9"), "{head}");
        assert_eq!(body, "token=a%2Bb%2Fc%3D%22%0D%0A&title={x}"); // {x}: neither drawn nor captured
        assert!(head.contains(&format!("\r\nContent-Length: {}\r\n", body.len())), "{head}");
        // in a JSON body a captured value is escaped inside its string
        let json = [("Content-Type".to_string(), "application/json".to_string())];
        let t = Template::new(1, "POST", "h:1", "/p", &json, br#"{"t": "{csrf}"}"#, true, &captures).unwrap();
        let mut out = Vec::new();
        t.render(None, &mut crate::pacer::SplitMix64::new(1), Some(&mut user), &mut out);
        let text = String::from_utf8(out).unwrap();
        let body = text.split_once("\r\n\r\n").unwrap().1;
        assert_eq!(serde_json::from_str::<serde_json::Value>(body).unwrap()["t"], "a+b/c=\"\r\n");
        assert!(text.contains(&format!("Content-Length: {}\r\n", body.len())));
        assert!(!text.contains("Cookie:")); // /p is outside the cookie's path
    }

    #[test]
    fn bad_templates_are_refused_with_the_field() {
        let mut names = Vec::new();
        assert!(parse_pieces("/a/{id:9..1}", &mut names, Scope::PLAIN).unwrap_err().contains("{id:9..1}"));
        let mut names = Vec::new();
        assert!(parse_pieces("/a/{id:1..2}/{id:1..2}", &mut names, Scope::PLAIN).unwrap_err().contains("drawn twice"));
        let mut names = Vec::new();
        assert_eq!(parse_pieces("/a/{x}{1:2..3}{", &mut names, Scope::PLAIN).unwrap(), vec![Piece::Lit(b"/a/{x}{1:2..3}{".to_vec())]);
    }
}
