//! Command-line arguments -> a validated engine Config. Every refusal is one line naming the
//! flag, the value and what is allowed.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;

use crate::engine::{Arrival, Config, Link, Model, StatusSet};
use crate::http::Template;
use crate::session::{Capture, Session, Step};
use crate::pacer::Stop;

#[derive(Parser, Debug)]
#[command(name = "arena-load", version, about = "HTTP/1.1 load generator: open (arrival rate) or closed \
(N connections) model, HDR histograms, JSON result on stdout or --output")]
pub struct Args {
    /// Target, http://host[:port]/path?query (loopback only unless --allow-remote)
    pub url: String,
    /// Closed model: connections (default 10). Open model: the most connections opened (default 1000)
    #[arg(short = 'c', long)]
    pub connections: Option<usize>,
    /// Open model: arrivals per second (without it the model is closed)
    #[arg(short = 'r', long)]
    pub rate: Option<f64>,
    /// Open model arrivals: constant spacing or poisson
    #[arg(long, default_value = "constant")]
    pub arrival: String,
    /// Open model at given times instead of a rate: a file of send times in seconds from the start,
    /// one per line, ascending (a traffic profile: arena load --profile writes one)
    #[arg(long, conflicts_with_all = ["rate", "arrival"])]
    pub schedule: Option<PathBuf>,
    /// Measured duration, e.g. 10s, 500ms, 2m (after the warm-up)
    #[arg(short = 'd', long)]
    pub duration: Option<String>,
    /// Measured requests to issue
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,
    /// Warm-up before the measured period; its results are kept apart
    #[arg(long, default_value = "0s")]
    pub warmup: String,
    /// Closed model: pause between an answer and the connection's next request
    #[arg(long, default_value = "0s")]
    pub think: String,
    /// Worker threads, each with its own event loop
    #[arg(short = 't', long, default_value_t = 1)]
    pub threads: usize,
    /// Request method
    #[arg(short = 'm', long, default_value = "GET")]
    pub method: String,
    /// Extra request header "Name: value" (repeatable)
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Request body
    #[arg(long)]
    pub body: Option<String>,
    /// JSON file with a weighted request mix: [{"weight": 2, "method": "GET", "path": "/a", "headers": {}, "body": ""}],
    /// or {"requests": [...], "sessions": [{"name": "login", "weight": 1, "think": "1s", "steps": [{"path": "/login",
    /// "capture": [{"name": "csrf", "regex": "name=\"csrf\" value=\"([^\"]+)\""}]}, {"method": "POST", ...}]}]}:
    /// each user draws a session by weight and sends its steps in order, with its own cookie jar,
    /// a later step using a captured value as {csrf}. In the open model, --rate is sessions started per second
    #[arg(long)]
    pub mix: Option<PathBuf>,
    /// A new connection for every request (Connection: close)
    #[arg(long)]
    pub no_keepalive: bool,
    /// Emulate a far client: this one-way delay before each request reaches the server and before
    /// each response reaches the client (a new connection also waits out the handshake's round trip)
    #[arg(long, default_value = "0s")]
    pub delay: String,
    /// Emulate a slow client's upload: bytes per second sent, e.g. 64KiB/s (default: no cap)
    #[arg(long)]
    pub upload: Option<String>,
    /// Emulate a slow client's download: bytes per second read, e.g. 256KiB/s, with a small receive
    /// buffer so the server's writes stall behind it (default: no cap)
    #[arg(long)]
    pub download: Option<String>,
    /// Stamp each request with X-Request-Start: t=<µs since epoch> at its real send time
    #[arg(long)]
    pub request_start: bool,
    #[arg(long, default_value = "5s")]
    pub connect_timeout: String,
    /// Response timeout, from the send
    #[arg(long, default_value = "30s")]
    pub timeout: String,
    /// Length of the per-interval series' intervals
    #[arg(long, default_value = "1s")]
    pub interval: String,
    /// Seed of the Poisson schedule and of the mix draws
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the JSON result here instead of stdout
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Allow a target that is not a loopback address
    #[arg(long)]
    pub allow_remote: bool,
    /// Begin at this time, in seconds since the epoch (a load host released with others): wait
    /// for it before the run; a time already past begins at once
    #[arg(long)]
    pub start_at: Option<f64>,
    /// Print each interval of the series on stderr as one JSON line as soon as it is complete
    #[arg(long)]
    pub live: bool,
    /// The statuses that count as success: classes, ranges or statuses, e.g. 2xx,3xx or 200-204,404.
    /// Any other answer is an error (class "status").
    #[arg(long, default_value = "2xx,3xx")]
    pub expect_status: String,
    /// The run is invalid (exit 1) when errors pass this share of the answered requests
    #[arg(long, default_value_t = 0.01)]
    pub max_error_rate: f64,
    /// The events each stream of server-sent events should hold: one that ends with fewer is an
    /// error (class "short"). A text/event-stream answer's times are recorded either way.
    #[arg(long)]
    pub events: Option<u32>,
}

/// The longest --start-at may make arena-load wait: a run is always bounded in time.
pub const MAX_START_WAIT_S: f64 = 3600.0;

/// `10s`, `250ms`, `2m`, `1.5s`, `100us`, or a plain number of seconds.
pub fn parse_duration(flag: &str, text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, scale) = [("us", 1e3), ("ms", 1e6), ("s", 1e9), ("m", 60e9), ("h", 3600e9)]
        .iter()
        .find_map(|(suffix, scale)| t.strip_suffix(suffix).filter(|n| !n.ends_with(['m', 'u'])).map(|n| (n, *scale)))
        .unwrap_or((t, 1e9));
    match num.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() && v * scale < 1e18 => Ok((v * scale) as u64),
        _ => Err(format!("{flag}: must be a duration such as 10s, 500ms or 2m, got '{text}'")),
    }
}

/// `64KiB/s`, `1.5MB/s`, `2000B/s` or a plain number of bytes per second (`/s` may be left out);
/// KB and MB are powers of 1000, KiB and MiB of 1024.
pub fn parse_rate(flag: &str, text: &str) -> Result<u64, String> {
    let t = text.trim();
    let t = t.strip_suffix("/s").unwrap_or(t).trim_end();
    let (num, scale) = [("KiB", 1024.0), ("MiB", 1048576.0), ("GiB", 1073741824.0), ("KB", 1e3), ("MB", 1e6), ("GB", 1e9), ("B", 1.0)]
        .iter()
        .find_map(|(suffix, scale)| t.strip_suffix(suffix).map(|n| (n.trim_end(), *scale)))
        .unwrap_or((t, 1.0));
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && v * scale >= 1.0 && v * scale < 1e15 => Ok((v * scale) as u64),
        _ => Err(format!("{flag}: must be bytes per second of at least 1, such as 64KiB/s, 1.5MB/s or 2000, got '{text}'")),
    }
}

#[derive(Debug)]
pub struct Target {
    pub addr: SocketAddr,
    pub host_header: String,
    pub path: String,
}

pub fn parse_url(url: &str, allow_remote: bool) -> Result<Target, String> {
    parse_url_with_hosts(url, allow_remote, &std::fs::read_to_string("/etc/hosts").unwrap_or_default())
}

/// A name that stays on this machine, found without asking DNS: `localhost` and `*.localhost`
/// (RFC 6761), or a name `hosts` (the text of /etc/hosts) maps to a loopback address.
fn loopback_name(host: &str, hosts: &str) -> Option<std::net::IpAddr> {
    let host = host.to_ascii_lowercase();
    for line in hosts.lines() {
        let mut fields = line.split('#').next().unwrap_or("").split_whitespace();
        let Some(ip) = fields.next().and_then(|a| a.parse::<std::net::IpAddr>().ok()) else { continue };
        if ip.is_loopback() && fields.any(|name| name.eq_ignore_ascii_case(&host)) {
            return Some(ip);
        }
    }
    (host == "localhost" || host.ends_with(".localhost")).then_some(std::net::IpAddr::from([127, 0, 0, 1]))
}

pub fn parse_url_with_hosts(url: &str, allow_remote: bool, hosts: &str) -> Result<Target, String> {
    // the url crate would drop CR, LF and tab silently: refuse them instead
    if url.bytes().any(|b| b.is_ascii_control()) {
        return Err(format!("URL: must not hold control characters such as CR or LF (percent-encode them), got '{}'",
                           url.escape_debug()));
    }
    let parsed = url::Url::parse(url).map_err(|e| match e {
        url::ParseError::RelativeUrlWithoutBase => format!("URL: must start with http://, got '{url}'"),
        e => format!("URL: {e} in '{url}'"),
    })?;
    match parsed.scheme() {
        "http" => {}
        "https" => return Err(format!("URL: https is not supported (plain HTTP/1.1), got '{url}'")),
        _ => return Err(format!("URL: must start with http://, got '{url}'")),
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!("URL: user information is not sent (use --header 'Authorization: ...'), got '{url}'"));
    }
    let port = parsed.port_or_known_default().expect("http has a default port");
    // the request target: the path and query as the url crate normalizes them (percent-encoded,
    // dot segments removed), without the fragment, which is never sent
    let path = match parsed.query() {
        Some(q) => format!("{}?{q}", parsed.path()),
        None => parsed.path().to_string(),
    };
    let host_header = match parsed.port() {
        Some(p) => format!("{}:{p}", parsed.host_str().unwrap_or_default()),
        None => parsed.host_str().unwrap_or_default().to_string(),
    };
    let host = match parsed.host() {
        Some(url::Host::Domain(d)) => d.to_string(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err(format!("URL: no host in '{url}'")),
    };
    let host = host.as_str();
    // Without --allow-remote a name is never resolved (a DNS query would leave the machine): an
    // address is checked as it is, a name only as localhost or as /etc/hosts maps it.
    let addrs: Vec<SocketAddr> = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) if !allow_remote => {
            let ip = loopback_name(host, hosts).ok_or_else(|| format!(
                "URL: '{host}' is not a loopback name (localhost, or one /etc/hosts maps to 127.0.0.0/8 or ::1) and is \
                 not looked up; pass --allow-remote to load another host"))?;
            vec![SocketAddr::new(ip, port)]
        }
        Err(_) => (host, port).to_socket_addrs().map_err(|e| format!("URL: cannot resolve '{host}': {e}"))?.collect(),
    };
    let addr = *addrs.first().ok_or_else(|| format!("URL: '{host}' has no address"))?;
    if !allow_remote && !addrs.iter().all(|a| a.ip().is_loopback()) {
        return Err(format!("URL: {} is not a loopback address (127.0.0.0/8, ::1); pass --allow-remote to load another host", addr.ip()));
    }
    Ok(Target { addr, host_header, path })
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct MixEntry {
    #[serde(default = "one")]
    weight: u32,
    #[serde(default = "get")]
    method: String,
    path: String,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    body: String,
    /// A session's step: values to capture from its answer.
    #[serde(default)]
    capture: Vec<CaptureEntry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CaptureEntry {
    name: String,
    regex: Option<String>,
    json: Option<String>,
    header: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionEntry {
    name: String,
    #[serde(default = "one")]
    weight: u32,
    think: Option<String>,
    steps: Vec<MixEntry>,
}

/// A mix file's object form (its other form is a bare list of requests).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct MixFile {
    #[serde(default)]
    requests: Vec<MixEntry>,
    #[serde(default)]
    sessions: Vec<SessionEntry>,
}

/// Most steps in one session.
const MAX_STEPS: usize = 100;

fn one() -> u32 {
    1
}

fn get() -> String {
    "GET".into()
}

fn header(flag: &str, text: &str) -> Result<(String, String), String> {
    if text.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
        return Err(format!("{flag}: must not hold control characters such as CR or LF, got '{}'", text.escape_debug()));
    }
    match text.split_once(':') {
        Some((n, v)) if !n.trim().is_empty() && n.trim().bytes().all(|b| b.is_ascii_graphic()) => {
            Ok((n.trim().to_string(), v.trim().to_string()))
        }
        _ => Err(format!("{flag}: must be 'Name: value', got '{text}'")),
    }
}

/// A request target goes on the request line as it is: no space, CR, LF or other control byte
/// (they would end the line and inject headers). Percent-encode them instead.
fn plain(flag: &str, target: &str) -> Result<(), String> {
    if target.bytes().all(|b| b.is_ascii_graphic() || b >= 0x80) {
        Ok(())
    } else {
        Err(format!("{flag}: the path must not hold spaces or control characters (percent-encode them), got '{}'",
                    target.escape_debug()))
    }
}

fn method(flag: &str, m: &str) -> Result<(), String> {
    if !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase()) {
        Ok(())
    } else {
        Err(format!("{flag}: must be an HTTP method such as GET or POST, got '{m}'"))
    }
}

pub fn config(a: &Args) -> Result<Config, String> {
    if let Some(at) = a.start_at {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        if !at.is_finite() || at > now + MAX_START_WAIT_S {
            return Err(format!("--start-at: must be a time (seconds since the epoch) within the next {MAX_START_WAIT_S} s, got {at}"));
        }
    }
    let target = parse_url(&a.url, a.allow_remote)?;
    let keep_alive = !a.no_keepalive;
    let mut headers = Vec::new();
    for h in &a.headers {
        headers.push(header("--header", h)?);
    }
    method("--method", &a.method)?;
    let (templates, sessions) = match &a.mix {
        None => (vec![Template::new(1, &a.method, &target.host_header, &target.path, &headers,
                                    a.body.as_deref().unwrap_or("").as_bytes(), keep_alive, &[])
            .map_err(|e| format!("URL or --body: {e}"))?], vec![Session::single(0, 1)]),
        Some(file) => read_mix(file, &target.host_header, &headers, keep_alive)?,
    };
    if !(1..=256).contains(&a.threads) {
        return Err(format!("--threads: must be from 1 to 256, got '{}'", a.threads));
    }
    let schedule = a.schedule.as_deref().map(read_schedule).transpose()?;
    let rate = match &schedule {
        Some(times) => Some(schedule_rate(times)),
        None => a.rate,
    };
    let model = match rate {
        Some(rate) if !(rate > 0.0 && rate <= 10_000_000.0) => {
            return Err(format!("--rate: must be a number of requests per second above 0 (at most 1e7), got '{rate}'"));
        }
        Some(rate) => Model::Open {
            rate,
            arrival: match a.arrival.as_str() {
                _ if schedule.is_some() => Arrival::Schedule,
                "constant" => Arrival::Constant,
                "poisson" => Arrival::Poisson,
                other => return Err(format!("--arrival: must be 'constant' or 'poisson', got '{other}'")),
            },
            max_connections: a.connections.unwrap_or(1000),
        },
        None => Model::Closed { connections: a.connections.unwrap_or(10), think_ns: parse_duration("--think", &a.think)? },
    };
    let conns = match model {
        Model::Open { max_connections, .. } => max_connections,
        Model::Closed { connections, .. } => connections,
    };
    if conns < a.threads || conns > 1_000_000 {
        return Err(format!("--connections: must be from --threads ({}) to 1000000, got '{conns}'", a.threads));
    }
    let warmup_ns = parse_duration("--warmup", &a.warmup)?;
    let duration = a.duration.as_deref().map(|d| parse_duration("--duration", d)).transpose()?;
    if duration.is_none() && a.requests.is_none() {
        return Err("--duration or --requests: one of them is required (a load must stop by itself)".into());
    }
    if duration == Some(0) || a.requests == Some(0) {
        return Err("--duration/--requests: must be above 0".into());
    }
    let interval_ns = parse_duration("--interval", &a.interval)?;
    if interval_ns < 1_000_000 {
        return Err(format!("--interval: must be at least 1ms, got '{}'", a.interval));
    }
    let connect_timeout_ns = parse_duration("--connect-timeout", &a.connect_timeout)?;
    let response_timeout_ns = parse_duration("--timeout", &a.timeout)?;
    if connect_timeout_ns == 0 || response_timeout_ns == 0 {
        return Err("--connect-timeout/--timeout: must be above 0".into());
    }
    let link = Link {
        delay_ns: parse_duration("--delay", &a.delay)?,
        upload_bps: a.upload.as_deref().map(|r| parse_rate("--upload", r)).transpose()?.unwrap_or(0),
        download_bps: a.download.as_deref().map(|r| parse_rate("--download", r)).transpose()?.unwrap_or(0),
    };
    if link.delay_ns > 60_000_000_000 {
        return Err(format!("--delay: must be at most 60s, got '{}'", a.delay));
    }
    let expect = StatusSet::parse(&a.expect_status).map_err(|e| format!("--expect-status: {e}"))?;
    if !(0.0..=1.0).contains(&a.max_error_rate) {
        return Err(format!("--max-error-rate: must be a share from 0 to 1, got '{}'", a.max_error_rate));
    }
    if a.events == Some(0) {
        return Err("--events: must be at least 1 (a stream of no events is not one), got '0'".into());
    }
    Ok(Config {
        addr: target.addr,
        templates,
        sessions,
        model,
        warmup_ns,
        stop: Stop { end_ns: duration.map(|d| warmup_ns + d), requests: a.requests },
        keep_alive,
        link,
        request_start: a.request_start,
        connect_timeout_ns,
        response_timeout_ns,
        interval_ns,
        threads: a.threads,
        seed: a.seed,
        expect,
        max_error_rate: a.max_error_rate,
        events: a.events,
        live: a.live,
        schedule: Arc::new(schedule.unwrap_or_default()),
    })
}

/// A `--mix` file's templates and sessions (a plain request: a session of one step).
fn read_mix(file: &std::path::Path, host: &str, headers: &[(String, String)], keep_alive: bool)
            -> Result<(Vec<Template>, Vec<Session>), String> {
    let name = file.display();
    let text = std::fs::read_to_string(file).map_err(|e| format!("--mix {name}: cannot read: {e}"))?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("--mix {name}: {e}"))?;
    let (requests, entries) = if doc.is_array() {
        (serde_json::from_value(doc).map_err(|e| format!("--mix {name}: {e}"))?, Vec::new())
    } else {
        let full: MixFile = serde_json::from_value(doc).map_err(|e| format!("--mix {name}: {e}"))?;
        (full.requests, full.sessions)
    };
    let (mut templates, mut sessions) = (Vec::new(), Vec::new());
    for (i, e) in requests.iter().enumerate() {
        let at = format!("--mix {name}: entry {i}");
        if !e.capture.is_empty() {
            return Err(format!("{at}: capture: only a session's step captures (declare it in sessions)"));
        }
        if e.weight > 0 {
            templates.push(template(e, &at, host, headers, keep_alive, &[])?);
            sessions.push(Session::single(templates.len() - 1, e.weight));
        }
    }
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("--mix {name}: session {i} ({})", entry.name.escape_debug());
        if entry.steps.is_empty() || entry.steps.len() > MAX_STEPS {
            return Err(format!("{at}: steps: must be 1 to {MAX_STEPS} requests"));
        }
        let think_ns = entry.think.as_deref().map(|t| parse_duration(&format!("{at}: think"), t)).transpose()?;
        let (mut names, mut steps) = (Vec::<String>::new(), Vec::new());
        for (k, e) in entry.steps.iter().enumerate() {
            let at = format!("{at}: step {k}");
            // a step uses what the steps before it captured
            templates.push(template(e, &at, host, headers, keep_alive, &names)?);
            let mut captures = Vec::new();
            for c in &e.capture {
                let capture = Capture::new(&c.name, c.regex.as_deref(), c.json.as_deref(), c.header.as_deref())
                    .map_err(|err| format!("{at}: capture {err}"))?;
                let index = names.iter().position(|n| *n == c.name).unwrap_or_else(|| {
                    names.push(c.name.clone());
                    names.len() - 1
                });
                captures.push((index, capture));
            }
            steps.push(Step { template: templates.len() - 1, captures });
        }
        if entry.weight > 0 {
            sessions.push(Session::new(entry.name.clone(), entry.weight, think_ns, steps, names));
        }
    }
    if sessions.is_empty() {
        return Err(format!("--mix {name}: must hold at least one request or session with a weight above 0"));
    }
    Ok((templates, sessions))
}

/// One request of a mix file, checked.
fn template(e: &MixEntry, at: &str, host: &str, headers: &[(String, String)], keep_alive: bool, captures: &[String])
            -> Result<Template, String> {
    method(&format!("{at}: method"), &e.method)?;
    if !e.path.starts_with('/') {
        return Err(format!("{at}: path must start with /, got '{}'", e.path.escape_debug()));
    }
    plain(&format!("{at}: path"), &e.path)?;
    for (k, v) in &e.headers {
        header(&format!("{at}: headers"), &format!("{k}: {v}"))?;
    }
    let mut hs = headers.to_vec();
    hs.extend(e.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
    Template::new(e.weight, &e.method, host, &e.path, &hs, e.body.as_bytes(), keep_alive, captures)
        .map_err(|err| format!("{at}: {err}"))
}

/// Most send times a schedule may hold.
const MAX_SCHEDULE: usize = 100_000_000;

/// A schedule file: send times in seconds from the start, one per line, ascending -> ns.
fn read_schedule(path: &std::path::Path) -> Result<Vec<u64>, String> {
    let name = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("--schedule {name}: cannot read it ({e})"))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let t: f64 = line.trim().parse().map_err(|_| format!("--schedule {name}: line {}: not a number of seconds", i + 1))?;
        if !(t >= 0.0 && t < 1e7) {
            return Err(format!("--schedule {name}: line {}: a time from 0 to 1e7 seconds, got {t}", i + 1));
        }
        let ns = (t * 1e9).round() as u64;
        if out.last().is_some_and(|&last| ns < last) {
            return Err(format!("--schedule {name}: line {}: times must not go back ({t} s after a later one)", i + 1));
        }
        out.push(ns);
        if out.len() > MAX_SCHEDULE {
            return Err(format!("--schedule {name}: more than {MAX_SCHEDULE} send times"));
        }
    }
    if out.is_empty() {
        return Err(format!("--schedule {name}: no send times in it"));
    }
    Ok(out)
}

/// A schedule's mean rate (per second), as the result reports it: its sends over its span (at
/// least a second).
fn schedule_rate(times: &[u64]) -> f64 {
    let span = (times[times.len() - 1] - times[0]) as f64 / 1e9;
    times.len() as f64 / span.max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Result<Config, String> {
        let mut argv = vec!["arena-load"];
        argv.extend_from_slice(extra);
        config(&Args::try_parse_from(argv).map_err(|e| e.to_string())?)
    }

    #[test]
    fn a_schedule_file_is_an_open_model_at_its_times() {
        let dir = std::env::temp_dir().join(format!("arena-load-schedule-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (good, back, empty) = (dir.join("good"), dir.join("back"), dir.join("empty"));
        std::fs::write(&good, "0\n0.25\n\n0.25\n1.5\n3\n").unwrap();
        std::fs::write(&back, "0\n2\n1\n").unwrap();
        std::fs::write(&empty, "\n").unwrap();
        let cfg = args(&["http://127.0.0.1:1/", "--schedule", good.to_str().unwrap(), "-d", "4s"]).unwrap();
        assert_eq!(*cfg.schedule, vec![0, 250_000_000, 250_000_000, 1_500_000_000, 3_000_000_000]);
        assert_eq!(cfg.model, Model::Open { rate: 5.0 / 3.0, arrival: Arrival::Schedule, max_connections: 1000 });
        let e = args(&["http://127.0.0.1:1/", "--schedule", back.to_str().unwrap(), "-d", "4s"]).unwrap_err();
        assert!(e.ends_with("line 3: times must not go back (1 s after a later one)"), "{e}");
        let e = args(&["http://127.0.0.1:1/", "--schedule", empty.to_str().unwrap(), "-d", "4s"]).unwrap_err();
        assert!(e.ends_with("no send times in it"), "{e}");
        assert!(args(&["http://127.0.0.1:1/", "--schedule", good.to_str().unwrap(), "-r", "5", "-d", "1s"]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("-d", "10s"), Ok(10_000_000_000));
        assert_eq!(parse_duration("-d", "250ms"), Ok(250_000_000));
        assert_eq!(parse_duration("-d", "1.5"), Ok(1_500_000_000));
        assert_eq!(parse_duration("-d", "2m"), Ok(120_000_000_000));
        assert_eq!(parse_duration("-d", "100us"), Ok(100_000));
        assert_eq!(parse_duration("-d", "soon"), Err("-d: must be a duration such as 10s, 500ms or 2m, got 'soon'".into()));
        assert!(parse_duration("-d", "-1s").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("--download", "64KiB/s"), Ok(65_536));
        assert_eq!(parse_rate("--download", "1.5MB/s"), Ok(1_500_000));
        assert_eq!(parse_rate("--download", "2000"), Ok(2000));
        assert_eq!(parse_rate("--download", "256 KiB"), Ok(262_144));
        assert_eq!(parse_rate("--upload", "10B/s"), Ok(10));
        for bad in ["fast", "0", "-1KB/s", "0.5B/s", "1Kb/s"] {
            assert_eq!(parse_rate("--upload", bad),
                       Err(format!("--upload: must be bytes per second of at least 1, such as 64KiB/s, 1.5MB/s or 2000, got '{bad}'")));
        }
    }

    #[test]
    fn targets_must_be_loopback_unless_allowed() {
        let t = parse_url("http://127.0.0.1:8080/work?cpu_ms=1", false).unwrap();
        assert_eq!((t.addr.port(), t.host_header.as_str(), t.path.as_str()), (8080, "127.0.0.1:8080", "/work?cpu_ms=1"));
        assert_eq!(parse_url("http://[::1]:81", false).unwrap().path, "/");
        assert_eq!(parse_url("http://localhost:9?x=1", false).unwrap().path, "/?x=1");
        assert_eq!(parse_url("http://10.1.2.3/", false).err().unwrap(),
                   "URL: 10.1.2.3 is not a loopback address (127.0.0.0/8, ::1); pass --allow-remote to load another host");
        assert!(parse_url("http://10.1.2.3/", true).is_ok());
        assert!(parse_url("https://127.0.0.1/", false).unwrap_err().starts_with("URL: https is not supported"));
        assert!(parse_url("127.0.0.1:80", false).unwrap_err().starts_with("URL: must start with http://"));
        assert!(parse_url("ftp://127.0.0.1/", false).unwrap_err().starts_with("URL: must start with http://"));
        assert_eq!(parse_url("http://127.0.0.1:99999/", false).unwrap_err(), "URL: invalid port number in 'http://127.0.0.1:99999/'");
        assert!(parse_url("http://u:p@127.0.0.1/", false).unwrap_err().starts_with("URL: user information is not sent"));
    }

    #[test]
    fn the_request_target_is_the_normalized_path_and_query() {
        let t = parse_url("http://127.0.0.1:80/a/../b c?q=1 2#part", false).unwrap();
        assert_eq!((t.path.as_str(), t.host_header.as_str(), t.addr.port()), ("/b%20c?q=1%202", "127.0.0.1", 80));
        let t = parse_url("http://[::1]:8080/?", false).unwrap();
        assert_eq!((t.path.as_str(), t.host_header.as_str()), ("/?", "[::1]:8080"));
    }

    #[test]
    fn a_name_is_refused_without_being_resolved_unless_the_hosts_file_maps_it_to_loopback() {
        let hosts = "127.0.0.1 localhost\n::1 ip6-localhost\n127.0.1.1 app.test # a name of this machine\n10.0.0.5 db\n";
        let t = parse_url_with_hosts("http://app.test:8080/", false, hosts).unwrap();
        assert_eq!(t.addr, "127.0.1.1:8080".parse().unwrap());
        assert_eq!(parse_url_with_hosts("http://IP6-LOCALHOST:81/", false, hosts).unwrap().addr, "[::1]:81".parse().unwrap());
        // localhost is loopback by definition (RFC 6761), with or without a hosts entry
        assert_eq!(parse_url_with_hosts("http://localhost:9/", false, "").unwrap().addr, "127.0.0.1:9".parse().unwrap());
        assert_eq!(parse_url_with_hosts("http://api.localhost:9/", false, "").unwrap().addr.ip().to_string(), "127.0.0.1");
        // a name mapped elsewhere, or not at all: refused, and never looked up (no DNS query leaves)
        for url in ["http://db/", "http://example.com/", "http://arena.invalid/"] {
            let e = parse_url_with_hosts(url, false, hosts).unwrap_err();
            assert!(e.contains("is not a loopback name") && e.contains("not looked up"), "{e}");
        }
    }

    #[test]
    fn expected_statuses() {
        let s = StatusSet::parse("2xx,3xx").unwrap();
        assert!(s.contains(200) && s.contains(399) && !s.contains(400) && !s.contains(199));
        let custom = StatusSet::parse("200-204, 404").unwrap();
        assert!(custom.contains(204) && custom.contains(404) && !custom.contains(205));
        assert_eq!(custom.describe(), "200-204,404");
        assert_eq!(s.describe(), "2xx,3xx");
        assert!(StatusSet::parse("204-200").is_err() && StatusSet::parse("").is_err() && StatusSet::parse("6xx").is_err());
    }

    #[test]
    fn flags_make_the_model() {
        let c = args(&["http://127.0.0.1:1/", "-d", "2s", "--warmup", "1s"]).unwrap();
        assert_eq!(c.model, Model::Closed { connections: 10, think_ns: 0 });
        assert_eq!(c.stop, Stop { end_ns: Some(3_000_000_000), requests: None });
        let o = args(&["http://127.0.0.1:1/", "-r", "500", "--arrival", "poisson", "-n", "100", "-c", "50"]).unwrap();
        assert_eq!(o.model, Model::Open { rate: 500.0, arrival: Arrival::Poisson, max_connections: 50 });
        assert!(!o.link.is_on());
        let slow = args(&["http://127.0.0.1:1/", "-d", "1s", "--delay", "20ms", "--download", "256KiB/s"]).unwrap();
        assert_eq!(slow.link, Link { delay_ns: 20_000_000, upload_bps: 0, download_bps: 262_144 });
    }

    #[test]
    fn bad_flags_are_one_line_naming_the_flag() {
        for (argv, want) in [
            (vec!["http://127.0.0.1:1/"], "--duration or --requests: one of them is required"),
            (vec!["http://127.0.0.1:1/", "-d", "1s", "-r", "0"], "--rate: must be a number of requests per second above 0"),
            (vec!["http://127.0.0.1:1/", "-d", "1s", "-r", "10", "--arrival", "burst"], "--arrival: must be 'constant' or 'poisson', got 'burst'"),
            (vec!["http://127.0.0.1:1/", "-d", "1s", "-c", "2", "-t", "4"], "--connections: must be from --threads (4) to 1000000, got '2'"),
            (vec!["http://127.0.0.1:1/", "-d", "1s", "-H", "nocolon"], "--header: must be 'Name: value', got 'nocolon'"),
            (vec!["http://127.0.0.1:1/", "-d", "1s", "-m", "get"], "--method: must be an HTTP method"),
            (vec!["http://127.0.0.1:1/", "-d", "x"], "--duration: must be a duration"),
            (vec!["http://127.0.0.1:1/a\r\nX-Injected: 1", "-d", "1s"], "URL: must not hold control characters such as CR or LF"),
            (vec!["http://127.0.0.1:1/", "-d", "1s", "-H", "A: b\r\nC: d"], "--header: must not hold control characters"),
            (vec!["http://127.0.0.1:1/", "-d", "1s", "--expect-status", "2xx,9xx"], "--expect-status: '9xx' is not a status"),
            (vec!["http://127.0.0.1:1/", "-d", "1s", "--max-error-rate", "2"], "--max-error-rate: must be a share from 0 to 1"),
            (vec!["http://127.0.0.1:1/", "-d", "1s", "--delay", "2m"], "--delay: must be at most 60s, got '2m'"),
            (vec!["http://127.0.0.1:1/", "-d", "1s", "--download", "slow"], "--download: must be bytes per second"),
        ] {
            let err = args(&argv).unwrap_err();
            assert!(err.starts_with(want) && !err.contains('\n'), "{argv:?}: {err}");
        }
    }
}
