//! Sessions: a virtual user's requests in order, each user with its own cookie jar (Set-Cookie
//! kept and sent back, expiry honoured: cookie_store's RFC 6265 rules) and the values it captured
//! from earlier answers (a form's CSRF token, the id of a post it created), used by later requests
//! as `{name}`.
//!
//! A plain mix is sessions of one step each, without a jar: the engine keeps a user's state only
//! for a session that needs it (`Session::stateful`).

use cookie_store::CookieStore;
use regex::Regex;

use crate::response::Head;
use crate::source::Plan;

/// Where a captured value is found in an answer.
#[derive(Debug, Clone)]
pub struct Capture {
    pub name: String,
    /// A header's value (by name, without case) instead of the body.
    header: Option<String>,
    find: Find,
}

#[derive(Debug, Clone)]
enum Find {
    /// The regex's first group (or its whole match, without a group).
    Regex(Regex),
    /// A JSON pointer (RFC 6901) into the body: a string as it is, any other value as JSON.
    Pointer(String),
    /// The header's whole value.
    Whole,
}

/// Longest value kept from one capture.
pub const MAX_CAPTURED: usize = 64 * 1024;

impl Capture {
    /// A capture named `name` by `regex` or by the JSON pointer `json` (one of them; in a header,
    /// neither takes the header's whole value).
    pub fn new(name: &str, regex: Option<&str>, json: Option<&str>, header: Option<&str>) -> Result<Capture, String> {
        let mut chars = name.chars();
        if !(chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')) {
            return Err(format!("name: must be a name such as csrf or post_id, got '{}'", name.escape_debug()));
        }
        let find = match (regex, json) {
            (Some(_), Some(_)) => return Err(format!("{name}: give regex or json, not both")),
            (Some(r), None) => Find::Regex(Regex::new(r).map_err(|e| {
                format!("{name}: regex '{}' does not compile: {}", r.escape_debug(), e.to_string().lines().last().unwrap_or(""))
            })?),
            (None, Some(p)) if p.is_empty() || p.starts_with('/') => {
                if header.is_some() {
                    return Err(format!("{name}: a JSON pointer reads the body, not a header"));
                }
                Find::Pointer(p.to_string())
            }
            (None, Some(p)) => return Err(format!("{name}: json must be a JSON pointer such as /id, got '{}'", p.escape_debug())),
            (None, None) if header.is_some() => Find::Whole,
            (None, None) => return Err(format!("{name}: give regex or json (or header, for a header's value)")),
        };
        Ok(Capture { name: name.to_string(), header: header.map(str::to_string), find })
    }

    /// The value in an answer (its head as received and its body), if found.
    pub fn find(&self, raw_head: &[u8], body: &[u8]) -> Option<String> {
        let text = match &self.header {
            Some(name) => header_values(raw_head, name).into_iter().next()?,
            None => String::from_utf8_lossy(body).into_owned(),
        };
        let found = match &self.find {
            Find::Whole => Some(text),
            Find::Regex(re) => re.captures(&text).map(|c| c.get(1).or_else(|| c.get(0)).map_or("", |m| m.as_str()).to_string()),
            Find::Pointer(p) => {
                let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
                doc.pointer(p).map(|v| match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
            }
        };
        found.filter(|v| v.len() <= MAX_CAPTURED)
    }
}

/// The values of the headers named `name` (without case) in a head as received.
fn header_values(raw_head: &[u8], name: &str) -> Vec<String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    if !matches!(resp.parse(raw_head), Ok(httparse::Status::Complete(_))) {
        return Vec::new();
    }
    resp.headers.iter().filter(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| String::from_utf8_lossy(h.value).into_owned()).collect()
}

/// A step of a session: its request (an index into the mix's templates) and what it captures.
#[derive(Debug, Clone)]
pub struct Step {
    pub template: usize,
    /// (index into the session's `names`, capture)
    pub captures: Vec<(usize, Capture)>,
}

/// A sequence of requests one virtual user makes, drawn by weight at each user's start.
#[derive(Debug, Clone)]
pub struct Session {
    pub name: String,
    pub plan: Plan,
    pub steps: Vec<Step>,
    /// Every value the session captures, in the order its steps declare them.
    pub names: Vec<String>,
    /// Whether its users keep state (a jar, captured values): a session of more than one step, or
    /// one that captures.
    pub stateful: bool,
}

impl Session {
    pub fn new(name: String, weight: u32, think_ns: Option<u64>, steps: Vec<Step>, names: Vec<String>) -> Session {
        let stateful = steps.len() > 1 || !names.is_empty();
        let plan = Plan { weight, steps: steps.iter().map(|s| s.template).collect(), think_ns };
        Session { name, plan, steps, names, stateful }
    }

    /// A plain request of the mix: a session of one step, without state.
    pub fn single(template: usize, weight: u32) -> Session {
        Session::new(String::new(), weight, None, vec![Step { template, captures: Vec::new() }], Vec::new())
    }
}

/// One virtual user's state: its cookie jar and the values it captured in this session.
#[derive(Debug, Default)]
pub struct User {
    jar: CookieStore,
    values: Vec<Option<String>>,
    /// The URL of the request on the wire: Set-Cookie's default path and domain come from it.
    url: Option<url::Url>,
}

impl User {
    /// A new session: an empty jar, nothing captured.
    pub fn begin(&mut self, names: usize) {
        self.jar.clear();
        self.values.clear();
        self.values.resize(names, None);
        self.url = None;
    }

    /// The captured values, by index into the session's names.
    pub fn values(&self) -> &[Option<String>] {
        &self.values
    }

    /// A request to `url`: append its `Cookie` header (when the jar holds cookies for it) to `out`.
    pub fn cookie_header(&self, url: &url::Url, out: &mut Vec<u8>) {
        let mut first = true;
        for (name, value) in self.jar.get_request_values(url) {
            out.extend_from_slice(if first { b"Cookie: " } else { b"; " });
            out.extend_from_slice(name.as_bytes());
            out.push(b'=');
            out.extend_from_slice(value.as_bytes());
            first = false;
        }
        if !first {
            out.extend_from_slice(b"\r\n");
        }
    }

    /// The request on the wire is to `url` (its answer's cookies are read against it).
    pub fn sent(&mut self, url: url::Url) {
        self.url = Some(url);
    }

    /// An answer to this user's request: keep its cookies, then find its step's captures. Err: the
    /// name of the first capture not found.
    pub fn answer(&mut self, head: &Head, captures: &[(usize, Capture)]) -> Result<(), String> {
        if let Some(url) = &self.url {
            for value in header_values(&head.raw, "set-cookie") {
                let _ = self.jar.parse(&value, url); // a cookie the rules refuse is not kept, as in a browser
            }
        }
        for (index, capture) in captures {
            match capture.find(&head.raw, &head.body) {
                Some(value) => self.values[*index] = Some(value),
                None => return Err(capture.name.clone()),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str, body: &str) -> Head {
        Head { status: 200, raw: raw.as_bytes().to_vec(), body: body.as_bytes().to_vec(), ..Head::default() }
    }

    #[test]
    fn captures_by_regex_json_pointer_and_header() {
        let form = r#"<form><input type="hidden" name="csrfmiddlewaretoken" value="aB3+/x="></form>"#;
        let raw = "HTTP/1.1 303 See Other\r\nLocation: /posts/1234\r\nContent-Length: 0\r\n\r\n";
        let csrf = Capture::new("csrf", Some(r#"name="csrfmiddlewaretoken" value="([^"]+)""#), None, None).unwrap();
        assert_eq!(csrf.find(raw.as_bytes(), form.as_bytes()).as_deref(), Some("aB3+/x="));
        let id = Capture::new("id", None, Some("/post/id"), None).unwrap();
        assert_eq!(id.find(b"", br#"{"post": {"id": 42, "tags": ["a"]}}"#).as_deref(), Some("42"));
        let tags = Capture::new("tags", None, Some("/post/tags/0"), None).unwrap();
        assert_eq!(tags.find(b"", br#"{"post": {"id": 42, "tags": ["a"]}}"#).as_deref(), Some("a"));
        assert_eq!(id.find(b"", b"not json"), None);
        let location = Capture::new("post", Some(r"/posts/(\d+)"), None, Some("location")).unwrap();
        assert_eq!(location.find(raw.as_bytes(), b"").as_deref(), Some("1234"));
        let whole = Capture::new("where", None, None, Some("Location")).unwrap();
        assert_eq!(whole.find(raw.as_bytes(), b"").as_deref(), Some("/posts/1234"));
        let no_group = Capture::new("n", Some(r"\d+"), None, None).unwrap();
        assert_eq!(no_group.find(b"", b"page 17 of 20").as_deref(), Some("17"));
        assert_eq!(csrf.find(raw.as_bytes(), b"<form></form>"), None);
    }

    #[test]
    fn bad_captures_are_one_line_naming_the_capture() {
        assert!(Capture::new("1x", Some("a"), None, None).unwrap_err().starts_with("name: must be a name"));
        assert!(Capture::new("a", Some("("), None, None).unwrap_err().starts_with("a: regex '(' does not compile"));
        assert_eq!(Capture::new("a", Some("x"), Some("/x"), None).unwrap_err(), "a: give regex or json, not both");
        assert!(Capture::new("a", None, Some("id"), None).unwrap_err().contains("JSON pointer such as /id"));
        assert!(Capture::new("a", None, None, None).unwrap_err().contains("give regex or json"));
        for bad in ["(", "[a-", "x{2,1}"] {
            let e = Capture::new("a", Some(bad), None, None).unwrap_err();
            assert!(e.starts_with(&format!("a: regex '{bad}' does not compile")) && !e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn the_jar_keeps_sends_and_expires_cookies_per_user() {
        let mut user = User::default();
        user.begin(1);
        let url = |target: &str| url::Url::parse(&format!("http://127.0.0.1:8080{target}")).unwrap();
        let mut out = Vec::new();
        user.cookie_header(&url("/login"), &mut out);
        user.sent(url("/login"));
        assert!(out.is_empty()); // nothing in the jar yet
        let raw = "HTTP/1.1 200 OK\r\nSet-Cookie: csrftoken=abc; Path=/; SameSite=Lax\r\n\
                   Set-Cookie: sessionid=s1; Path=/; HttpOnly\r\nSet-Cookie: admin=1; Path=/admin\r\n\
                   Set-Cookie: gone=1; Max-Age=0\r\nContent-Length: 0\r\n\r\n";
        user.answer(&head(raw, ""), &[]).unwrap();
        user.cookie_header(&url("/posts/1?x=2"), &mut out);
        let sent = String::from_utf8(out.clone()).unwrap();
        assert!(sent.starts_with("Cookie: ") && sent.ends_with("\r\n"), "{sent}");
        let mut names: Vec<&str> = sent["Cookie: ".len()..sent.len() - 2].split("; ").collect();
        names.sort_unstable();
        assert_eq!(names, ["csrftoken=abc", "sessionid=s1"]); // /admin's path and the expired one are not sent
        // a later answer replaces and deletes
        user.answer(&head("HTTP/1.1 200 OK\r\nSet-Cookie: sessionid=s2; Path=/\r\n\
                           Set-Cookie: csrftoken=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT\r\n\r\n", ""), &[]).unwrap();
        out.clear();
        user.cookie_header(&url("/"), &mut out);
        assert_eq!(out, b"Cookie: sessionid=s2\r\n");
        // a new session starts with an empty jar
        user.begin(1);
        out.clear();
        user.cookie_header(&url("/"), &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn an_answer_fills_the_captures_and_names_the_first_missing_one() {
        let mut user = User::default();
        user.begin(2);
        user.sent(url::Url::parse("http://127.0.0.1:1/").unwrap());
        let caps = vec![(1, Capture::new("token", None, Some("/token"), None).unwrap())];
        user.answer(&head("HTTP/1.1 200 OK\r\n\r\n", r#"{"token": "t-1"}"#), &caps).unwrap();
        assert_eq!(user.values(), [None, Some("t-1".to_string())]);
        assert_eq!(user.answer(&head("HTTP/1.1 200 OK\r\n\r\n", "{}"), &caps), Err("token".to_string()));
    }
}
