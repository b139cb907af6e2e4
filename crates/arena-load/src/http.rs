//! HTTP/1.1 requests on the wire: each template rendered once into bytes (a fixed request) or at
//! each send (one that draws values or uses its session's captures and cookies). Responses are
//! response.rs's.

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::Head;

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
