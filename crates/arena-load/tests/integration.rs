//! arena-load against a small in-process server whose behaviour is known exactly.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use arena_load::cli::{config, Args};
use arena_load::output::document;
use arena_load::run::run;
use clap::Parser;
use serde_json::Value;

#[derive(Clone, Copy)]
enum Mode {
    /// Answer after `delay`, with Content-Length or chunked.
    Answer { delay: Duration, chunked: bool },
    /// Read the request and never answer.
    Silent,
    /// Answer with bytes that are not HTTP.
    Garbage,
    /// Read the request and close the connection.
    Hangup,
    /// Answer at once with status 200 for /a and 201 for anything else.
    ByPath,
    /// Write these bytes after the request, then close the connection.
    Raw(&'static [u8]),
    /// Answer every request at once with this status (and an empty body).
    Status(u16),
    /// Accept a connection and close it at once, without reading.
    AcceptClose,
    /// A stream of server-sent events, chunked: a comment at once, then `events` events, the first
    /// after `first`, the others `every` apart, then a comment with the stream's Server-Timing.
    Stream { events: u32, first: Duration, every: Duration },
}

/// Serve on a free loopback port, one thread per connection; returns the base URL.
fn server(mode: Mode) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            if matches!(mode, Mode::AcceptClose) {
                drop(stream);
                continue;
            }
            std::thread::spawn(move || serve(stream, mode));
        }
    });
    url
}

fn serve(mut s: TcpStream, mode: Mode) {
    let _ = s.set_nodelay(true);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // one request head (the generator sends no bodies here)
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let close = head.contains("connection: close");
        let status = if head.starts_with("get /a ") { 200 } else { 201 };
        buf.drain(..end);
        match mode {
            Mode::Silent => std::thread::sleep(Duration::from_secs(3600)),
            Mode::Hangup | Mode::AcceptClose => return,
            Mode::Raw(bytes) => {
                let _ = s.write_all(bytes);
                return;
            }
            Mode::Status(code) => {
                let resp = format!("HTTP/1.1 {code} X\r\nContent-Length: 0\r\n\r\n");
                if s.write_all(resp.as_bytes()).is_err() || close {
                    return;
                }
            }
            Mode::ByPath => {
                let resp = format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n");
                if s.write_all(resp.as_bytes()).is_err() || close {
                    return;
                }
            }
            Mode::Garbage => {
                let _ = s.write_all(b"this is not http\r\n\r\n");
                return;
            }
            Mode::Stream { events, first, every } => {
                let chunk = |text: &str| format!("{:x}\r\n{text}\r\n", text.len());
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nServer-Timing: queue;dur=0.25\r\n\
                            Transfer-Encoding: chunked\r\n\r\n";
                if s.write_all(format!("{head}{}", chunk(": stream\n\n")).as_bytes()).is_err() {
                    return;
                }
                for i in 1..=events {
                    std::thread::sleep(if i == 1 { first } else { every });
                    if s.write_all(chunk(&format!("id: {i}\ndata: token\n\n")).as_bytes()).is_err() {
                        return;
                    }
                }
                let end = format!("{}0\r\n\r\n", chunk(": server-timing app;dur=99, cpu;dur=2\n\n"));
                if s.write_all(end.as_bytes()).is_err() || close {
                    return;
                }
            }
            Mode::Answer { delay, chunked } => {
                std::thread::sleep(delay);
                let timing = format!("Server-Timing: app;dur={:.3}, cpu;dur=0.5\r\nX-Arena-Pid: 4242\r\n", delay.as_secs_f64() * 1e3);
                let resp = if chunked {
                    format!("HTTP/1.1 200 OK\r\n{timing}Transfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n3\r\nefg\r\n0\r\n\r\n")
                } else {
                    format!("HTTP/1.1 200 OK\r\n{timing}Content-Length: 7\r\n\r\nabcdefg")
                };
                if s.write_all(resp.as_bytes()).is_err() || close {
                    return;
                }
            }
        }
    }
}

fn load(url: &str, flags: &[&str]) -> Value {
    let mut argv = vec!["arena-load", url];
    argv.extend_from_slice(flags);
    let args = Args::try_parse_from(&argv).unwrap();
    let cfg = config(&args).unwrap();
    let outcome = run(&cfg).unwrap();
    serde_json::to_value(document(&cfg, url, &outcome)).unwrap()
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn closed_model_measures_a_known_delay() {
    let url = server(Mode::Answer { delay: Duration::from_millis(20), chunked: false });
    let r = load(&url, &["-c", "4", "-d", "1500ms", "--warmup", "200ms"]);
    let m = &r["measured"];
    let p50 = n(&m["latency"]["response_time"]["percentiles"]["50"]);
    assert!((20_000..=20_500).contains(&p50), "p50 {p50} us for a 20 ms server");
    let done = n(&m["requests"]["completed"]);
    assert!((270..=305).contains(&done), "{done} answers: 4 connections x 1.5 s / 20 ms = 300");
    assert_eq!(n(&m["status"]["200"]), done);
    assert_eq!(n(&m["workers"]["4242"]), done);
    assert_eq!(n(&m["requests"]["errors"]), 0);
    assert_eq!(n(&m["latency"]["connect_time"]["count"]), 0, "connections opened in the warm-up are reused");
    assert_eq!(n(&r["warmup"]["latency"]["connect_time"]["count"]), 4);
    assert_eq!(n(&m["server_timing"]["cpu"]["percentiles"]["50"]), 500);
    let series = r["series"].as_array().unwrap();
    assert!(series.len() >= 2 && n(&series[0]["completed"]) >= 180, "{series:?}");
}

#[test]
fn chunked_bodies_and_a_connection_per_request() {
    let url = server(Mode::Answer { delay: Duration::from_millis(1), chunked: true });
    let r = load(&url, &["-c", "2", "-n", "200", "--no-keepalive"]);
    let m = &r["measured"];
    assert_eq!(n(&m["requests"]["completed"]), 200);
    assert_eq!(n(&m["requests"]["errors"]), 0);
    assert_eq!(n(&m["latency"]["connect_time"]["count"]), 200, "one connection per request");
}

#[test]
fn open_model_sends_on_schedule() {
    let url = server(Mode::Answer { delay: Duration::from_millis(2), chunked: false });
    let r = load(&url, &["-r", "500", "-d", "1s"]);
    let m = &r["measured"];
    assert_eq!(n(&m["requests"]["issued"]), 500);
    assert_eq!(n(&m["requests"]["completed"]), 500);
    assert!((m["rate"]["achieved_rps"].as_f64().unwrap() - 500.0).abs() < 5.0);
    // on a busy 2-core machine a few wake-ups are late; the typical one is not
    let lag = n(&r["generator"]["schedule_lag"]["percentiles"]["50"]);
    assert!(lag < 1000, "schedule lag p50 {lag} us");
    assert_eq!(r["generator"]["saturated"], false);
}

#[test]
fn requests_waiting_for_a_connection_count_from_their_intended_time() {
    // one connection, a 50 ms server, 100 arrivals/s: a queue builds in the generator
    let url = server(Mode::Answer { delay: Duration::from_millis(50), chunked: false });
    let r = load(&url, &["-r", "100", "-c", "1", "-d", "1s", "--timeout", "2s"]);
    let m = &r["measured"];
    let sent = n(&m["requests"]["sent"]);
    assert!((19..=22).contains(&sent), "{sent}: one connection serves 20 a second");
    assert_eq!(n(&m["requests"]["issued"]), 100);
    assert!(n(&m["requests"]["unsent"]) >= 70, "the rest never left the generator and are reported");
    let p99 = n(&m["latency"]["response_time"]["percentiles"]["99"]);
    let service = n(&m["latency"]["service_time"]["percentiles"]["99"]);
    assert!(p99 > 600_000 && service < p99 / 3, "response p99 {p99} us includes the wait, service p99 {service} does not");
}

#[test]
fn errors_are_classified() {
    let refused = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        drop(l);
        url
    };
    let cases = [
        (refused, vec!["-c", "1", "-n", "3"], "refused"),
        (server(Mode::Silent), vec!["-c", "1", "-n", "2", "--timeout", "100ms"], "response_timeout"),
        (server(Mode::Garbage), vec!["-c", "1", "-n", "3"], "malformed"),
        (server(Mode::Hangup), vec!["-c", "1", "-n", "3"], "reset"),
    ];
    for (url, flags, kind) in cases {
        let r = load(&url, &flags);
        let e = &r["measured"]["errors"];
        assert!(n(&e[kind]) >= 1, "{kind}: {e}");
        assert_eq!(n(&r["measured"]["requests"]["errors"]), n(&e[kind]), "only {kind}: {e}");
        assert_eq!(n(&r["measured"]["requests"]["completed"]), 0);
    }
}

fn binary(url: &str, flags: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_arena-load"))
        .arg(url)
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn sigint_ends_the_run_and_keeps_the_result() {
    let url = server(Mode::Answer { delay: Duration::from_millis(5), chunked: false });
    let child = binary(&url, &["-c", "2", "-d", "60s"]);
    std::thread::sleep(Duration::from_millis(700));
    let t = Instant::now();
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "took {:?} to stop", t.elapsed());
    assert_eq!(out.status.code(), Some(130)); // interrupted: the partial result is written all the same
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["interrupted"], true);
    assert!(n(&doc["measured"]["requests"]["completed"]) > 50);
}

#[test]
fn start_at_begins_the_run_at_that_time_and_no_later_than_a_bound() {
    let url = server(Mode::Answer { delay: Duration::from_millis(1), chunked: false });
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let at = now + 0.6;
    let out = binary(&url, &["-c", "1", "-d", "200ms", "--start-at", &format!("{at:.6}")]).wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let started = doc["started_at"].as_f64().unwrap();
    assert!(started >= at && started - at < 0.05, "started {:.4} s after --start-at", started - at);
    // a time beyond the bound is refused, not waited for
    let out = Command::new(env!("CARGO_BIN_EXE_arena-load"))
        .args([url.as_str(), "-d", "1s", "--start-at", &format!("{:.0}", now + 2.0 * arena_load::cli::MAX_START_WAIT_S)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr).unwrap().contains("--start-at"));
}

#[test]
fn bad_flags_exit_2_with_one_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_arena-load")).args(["http://10.0.0.1/", "-d", "1s"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not a loopback address"));
    let out = Command::new(env!("CARGO_BIN_EXE_arena-load")).args(["http://127.0.0.1:1/", "--rate"]).output().unwrap();
    assert_eq!((out.status.code(), String::from_utf8(out.stderr).unwrap().lines().count()), (Some(2), 1));
}

#[test]
fn a_weighted_mix_is_drawn_by_weight() {
    let url = server(Mode::ByPath);
    let dir = std::env::temp_dir().join(format!("arena-load-mix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mix = dir.join("mix.json");
    std::fs::write(&mix, r#"[{"weight": 3, "path": "/a"}, {"weight": 1, "method": "GET", "path": "/b", "headers": {"X-T": "1"}}]"#).unwrap();
    let r = load(&url, &["-c", "2", "-n", "4000", "--mix", mix.to_str().unwrap()]);
    let status = &r["measured"]["status"];
    let (a, b) = (n(&status["200"]), n(&status["201"]));
    assert_eq!(a + b, 4000);
    let share = a as f64 / 4000.0;
    assert!((share - 0.75).abs() < 0.03, "share of /a {share}: weights 3:1"); // sd 0.007
    assert_eq!(r["config"]["mix"].as_array().unwrap().len(), 2);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn think_time_paces_each_closed_user() {
    let url = server(Mode::Answer { delay: Duration::from_millis(0), chunked: false });
    let r = load(&url, &["-c", "2", "-d", "1s", "--think", "50ms"]);
    let done = n(&r["measured"]["requests"]["completed"]);
    assert!((36..=42).contains(&done), "{done}: 2 users x 1 s / 50 ms think = 40");
    assert_eq!(r["config"]["think_ms"], 50.0);
}

#[test]
fn several_threads_share_the_load_and_one_series() {
    let url = server(Mode::Answer { delay: Duration::from_millis(2), chunked: false });
    let closed = load(&url, &["-c", "4", "-t", "2", "-d", "1s"]);
    assert_eq!(n(&closed["measured"]["latency"]["connect_time"]["count"]), 4, "2 connections per thread");
    let open = load(&url, &["-r", "600", "-t", "3", "-d", "1s"]);
    let m = &open["measured"];
    assert_eq!(n(&m["requests"]["issued"]), 600, "each thread's share of the schedule adds up");
    assert_eq!(n(&m["requests"]["completed"]), 600);
    let series = open["series"].as_array().unwrap();
    let in_series: u64 = series.iter().map(|p| n(&p["completed"])).sum();
    assert_eq!(in_series, 600, "every thread's part of every interval is merged: {series:?}");
}

#[test]
fn a_count_bounded_open_run_sends_every_request_it_issued() {
    // one connection, a 20 ms server, 100 arrivals/s: requests queue for the connection, and the
    // ones still queued when the 30th is issued must still be sent
    let url = server(Mode::Answer { delay: Duration::from_millis(20), chunked: false });
    let r = load(&url, &["-r", "100", "-c", "1", "-n", "30"]);
    let m = &r["measured"]["requests"];
    assert_eq!((n(&m["issued"]), n(&m["sent"]), n(&m["completed"]), n(&m["unsent"])), (30, 30, 30, 0));
}

#[test]
fn live_prints_each_interval_while_running() {
    use std::io::BufRead;
    let url = server(Mode::Answer { delay: Duration::from_millis(2), chunked: false });
    let started = Instant::now();
    let mut child = binary(&url, &["-c", "2", "-d", "2s", "--interval", "500ms", "--live"]);
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut lines = Vec::new();
    for line in stderr.lines() {
        lines.push((started.elapsed(), line.unwrap()));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let series = doc["series"].as_array().unwrap();
    // a line per completed interval (a last one cut by the end comes only with the result), each a
    // point of the result's series, the first long before the end
    assert!(lines.len() + 1 >= series.len() && lines.len() <= series.len(), "{lines:?}");
    for (_, line) in &lines {
        assert!(series.contains(&serde_json::from_str::<Value>(line).unwrap()), "{line}");
    }
    assert!(lines[0].0 < Duration::from_millis(1500), "first line after {:?}", lines[0].0);
    assert!(n(&series[0]["completed"]) > 10);
}


#[test]
fn a_body_that_ends_with_the_close_is_a_response_and_a_cut_one_is_a_reset() {
    // HTTP/1.0 without Content-Length: the body ends when the server closes (data and FIN arrive
    // together: the read must go on to the end of the stream, not wait for another edge)
    const WHOLE: &[u8] = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello, until the close";
    let url = server(Mode::Raw(WHOLE));
    let r = load(&url, &["-c", "2", "-d", "1s", "--timeout", "3s"]);
    let m = &r["measured"];
    assert!(n(&m["requests"]["completed"]) > 50, "{}", m["requests"]);
    assert_eq!((n(&m["errors"]["response_timeout"]), n(&m["requests"]["errors"])), (0, 0));
    assert_eq!(n(&m["bytes"]["received"]), n(&m["requests"]["completed"]) * WHOLE.len() as u64); // whole responses
    // a close in the middle of a declared body, or before a chunked body's last chunk: resets
    for raw in [&b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part of it"[..],
                &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n"[..]] {
        let url = server(Mode::Raw(raw));
        let r = load(&url, &["-c", "2", "-d", "1s", "--timeout", "3s"]);
        let e = &r["measured"]["errors"];
        assert!(n(&e["reset"]) > 50 && n(&e["response_timeout"]) == 0, "{}", e);
        assert_eq!(n(&r["measured"]["requests"]["completed"]), 0);
    }
}

#[test]
fn answers_outside_the_expected_statuses_are_errors_and_the_exit_status_says_so() {
    let url = server(Mode::Status(404));
    // at a rate, as below: a closed loop against answers this fast can saturate the generator first
    let out = binary(&url, &["-r", "200", "-c", "2", "-d", "500ms"]).wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "an invalid run exits 1");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &doc["measured"];
    assert_eq!(n(&m["requests"]["completed"]), 0);
    assert!(n(&m["errors"]["status"]) > 20 && n(&m["status"]["404"]) == n(&m["errors"]["status"]));
    assert_eq!(n(&m["latency"]["response_time"]["count"]), 0); // errors are kept out of the latencies
    assert_eq!(doc["validity"]["valid"], false);
    assert!(doc["validity"]["reasons"][0].as_str().unwrap().starts_with("no request succeeded"));
    // an app that answers 404 on purpose: told so, the run is valid (at a rate: a closed loop against
    // answers this fast keeps the generator's core busy past its saturation limit on a loaded machine)
    let out = binary(&url, &["-r", "200", "-c", "2", "-d", "500ms", "--expect-status", "404"]).wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(n(&doc["measured"]["requests"]["completed"]) > 20 && doc["validity"]["valid"] == true);
}

#[test]
fn a_run_ends_within_its_bound_whatever_the_target_does() {
    // a server that accepts and closes at once, thousands of connections asked for: the run stops
    // by its end + the longest timeout + 1 s, however the connections fail
    let url = server(Mode::AcceptClose);
    let t = Instant::now();
    let out = binary(&url, &["-c", "5000", "-d", "2s", "--timeout", "3s", "--connect-timeout", "1s"]).wait_with_output().unwrap();
    let took = t.elapsed();
    assert!(took < Duration::from_secs(2 + 3 + 1 + 2), "took {took:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["validity"]["valid"], false); // nothing succeeded, and it says so
    assert_eq!(out.status.code(), Some(1));
}

/// What a link test's server saw of one request: from its first byte to its last, and how long
/// writing the answer took.
struct Seen {
    reading: Duration,
    writing: Duration,
}

/// Serve requests (with a Content-Length body or none) with a body of `body` bytes on a free
/// loopback port, one thread per connection, reporting what each request took on the server's side.
fn link_server(body: usize) -> (String, std::sync::mpsc::Receiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut s = stream;
                let answer = [format!("HTTP/1.1 200 OK\r\nContent-Length: {body}\r\n\r\n").into_bytes(), vec![b'x'; body]].concat();
                let mut buf = Vec::new();
                let mut chunk = [0u8; 65536];
                loop {
                    let mut first = None;
                    let need = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                            let length = head.lines().find_map(|l| l.strip_prefix("content-length:")).map_or(0, |v| v.trim().parse().unwrap());
                            break i + 4 + length;
                        }
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                first.get_or_insert_with(Instant::now);
                                buf.extend_from_slice(&chunk[..n]);
                            }
                        }
                    };
                    while buf.len() < need {
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let reading = first.map_or(Duration::ZERO, |t| t.elapsed());
                    buf.drain(..need);
                    let t = Instant::now();
                    if s.write_all(&answer).is_err() {
                        return;
                    }
                    let _ = tx.send(Seen { reading, writing: t.elapsed() });
                }
            });
        }
    });
    (url, rx)
}

fn p50(r: &Value, hist: &str) -> u64 {
    n(&r["measured"]["latency"][hist]["percentiles"]["50"])
}

#[test]
fn a_far_client_adds_its_round_trips() {
    // a 20 ms server, 10 ms each way: a request on an open connection takes 40 ms
    let url = server(Mode::Answer { delay: Duration::from_millis(20), chunked: false });
    let r = load(&url, &["-c", "2", "-d", "1s", "--warmup", "300ms", "--delay", "10ms"]);
    let p = p50(&r, "response_time");
    assert!((40_000..=41_500).contains(&p), "p50 {p} us: 20 ms + 2 x 10 ms");
    let done = n(&r["measured"]["requests"]["completed"]);
    assert!((44..=51).contains(&done), "{done} answers: 2 connections x 1 s / 40 ms = 50");
    // opening a connection takes the handshake's round trip
    let connect = n(&r["warmup"]["latency"]["connect_time"]["percentiles"]["50"]);
    assert!((20_000..=21_500).contains(&connect), "connect {connect} us: 2 x 10 ms");
    assert_eq!(r["config"]["link"]["delay_ms"], 10.0);
    // a connection per request: the handshake, the request's trip, the answer's trip
    let r = load(&url, &["-c", "2", "-d", "1s", "--delay", "10ms", "--no-keepalive"]);
    let p = p50(&r, "response_time");
    assert!((60_000..=62_000).contains(&p), "p50 {p} us: 20 ms + 4 x 10 ms");
    let connect = p50(&r, "connect_time");
    assert!((20_000..=21_500).contains(&connect), "connect {connect} us: 2 x 10 ms");
}

#[test]
fn a_slow_reader_takes_its_time_and_the_server_feels_it() {
    // 2 MiB at 4 MiB/s: half a second to read, and the server's write waits for the reader
    let (url, seen) = link_server(2048 * 1024);
    let r = load(&url, &["-c", "1", "-n", "3", "--download", "4MiB/s"]);
    assert_eq!(n(&r["measured"]["requests"]["completed"]), 3);
    let p = p50(&r, "response_time");
    // 500 ms of segments plus the loop's timer wake-ups: on a machine running at half speed they
    // added 30 ms, so the bound above allows 60 ms (a cap off by a tenth would still fail it)
    assert!((495_000..=560_000).contains(&p), "p50 {p} us for 2 MiB at 4 MiB/s");
    assert_eq!(r["config"]["link"]["download_bps"], 4 * 1024 * 1024);
    let writes: Vec<Duration> = seen.try_iter().map(|s| s.writing).collect();
    assert_eq!(writes.len(), 3);
    // the kernel buffers part of it (the server's send buffer grows to a few hundred KiB), then
    // the server's write waits for the reader: well over half of the transfer
    assert!(writes.iter().all(|w| *w > Duration::from_millis(250)), "the server's writes: {writes:?}");
    // the same answers read at full speed: the write is over at once
    let r = load(&url, &["-c", "1", "-n", "3"]);
    assert!(p50(&r, "response_time") < 50_000);
    assert!(seen.try_iter().all(|s| s.writing < Duration::from_millis(50)));
}

#[test]
fn a_slow_sender_trickles_its_request() {
    // a 32 KiB body at 64 KiB/s: the server has the whole request half a second after its first byte
    let (url, seen) = link_server(16);
    let body = "b".repeat(32 * 1024);
    let r = load(&url, &["-c", "1", "-n", "2", "-m", "POST", "--body", &body, "--upload", "64KiB/s"]);
    assert_eq!(n(&r["measured"]["requests"]["completed"]), 2);
    let p = p50(&r, "response_time");
    assert!((495_000..=540_000).contains(&p), "p50 {p} us for 32 KiB + its head at 64 KiB/s");
    let reads: Vec<Duration> = seen.try_iter().map(|s| s.reading).collect();
    // the first segment arrives after its own 22 ms on the link
    assert!(reads.len() == 2 && reads.iter().all(|r| (450..=520).contains(&r.as_millis())), "{reads:?}");
}

/// `-o PATH` writes the result and leaves PATH what it was: a regular file replaced whole (no
/// temporary file left beside it), a FIFO still a FIFO (its reader gets the result), a character
/// device still a device, a symlink still a link (its target gets the result).
#[test]
fn the_output_path_stays_what_it_is() {
    use std::os::unix::fs::FileTypeExt;
    let url = server(Mode::Answer { delay: Duration::from_millis(1), chunked: false });
    let dir = std::env::temp_dir().join(format!("arena-load-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |path: &std::path::Path| {
        let out = binary(&url, &["-c", "1", "-n", "5", "-o", path.to_str().unwrap()]).wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    let completed = |text: &str| n(&serde_json::from_str::<Value>(text).unwrap()["measured"]["requests"]["completed"]);

    let file = dir.join("result.json");
    std::fs::write(&file, "old").unwrap();
    write(&file);
    assert_eq!(completed(&std::fs::read_to_string(&file).unwrap()), 5);
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("result.json")], "a temporary file was left");

    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    std::fs::write(&file, "old").unwrap();
    write(&link);
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(completed(&std::fs::read_to_string(&file).unwrap()), 5);

    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = { let fifo = fifo.clone(); std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap()) };
    write(&fifo);
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo()); // first: else the reader waits on
    assert_eq!(completed(&reader.join().unwrap()), 5);

    // a character device of our own (the null device's numbers), where we may make one (root)
    let device = dir.join("null");
    let c = std::ffi::CString::new(device.to_str().unwrap()).unwrap();
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) } == 0 {
        write(&device);
        assert!(std::fs::symlink_metadata(&device).unwrap().file_type().is_char_device());
    } else {
        eprintln!("skipped the character device: mknod needs root");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A site with a login: GET /login sets a `csrftoken` cookie and puts the same token in its form;
/// POST /login wants both (cookie and form field) and answers 303 with a `sid` cookie; GET /me
/// wants the `sid` cookie and answers 202 with the user's id as JSON; GET /posts/<id> answers 204
/// when the id is that user's. Anything else, or a missing token or cookie: 403.
fn login_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let tokens = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(1000));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let tokens = tokens.clone();
            std::thread::spawn(move || serve_login(stream, &tokens));
        }
    });
    url
}

fn serve_login(mut s: TcpStream, tokens: &std::sync::atomic::AtomicU64) {
    let _ = s.set_nodelay(true);
    let (mut buf, mut chunk) = (Vec::new(), [0u8; 4096]);
    loop {
        let (head, body) = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..i]).into_owned();
                let len: usize = head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ")
                    .map(|v| v.trim().parse().unwrap())).unwrap_or(0);
                if buf.len() >= i + 4 + len {
                    let body = String::from_utf8_lossy(&buf[i + 4..i + 4 + len]).into_owned();
                    buf.drain(..i + 4 + len);
                    break (head, body);
                }
            }
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let line = head.lines().next().unwrap_or("").to_string();
        let cookies: Vec<String> = head.lines().filter_map(|l| l.strip_prefix("Cookie: "))
            .flat_map(|v| v.split("; ").map(str::to_string).collect::<Vec<_>>()).collect();
        let cookie = |name: &str| cookies.iter().find_map(|c| c.strip_prefix(&format!("{name}=")).map(str::to_string));
        let (status, extra, body) = if line.starts_with("GET /login ") {
            let t = format!("t{}+/=", tokens.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
            (200, format!("Set-Cookie: csrftoken={}; Path=/\r\n", t.replace(['+', '/', '='], "_")),
             format!(r#"<form><input type="hidden" name="csrf" value="{t}"></form>"#))
        } else if line.starts_with("POST /login ") {
            // the form field is percent-encoded; the cookie held the same token with _ for +/=
            let field = body.strip_prefix("csrf=").and_then(|b| b.split('&').next()).unwrap_or("")
                .replace("%2B", "+").replace("%2F", "/").replace("%3D", "=");
            match cookie("csrftoken") {
                Some(c) if !field.is_empty() && c == field.replace(['+', '/', '='], "_") => {
                    (303, "Location: /me\r\nSet-Cookie: sid=user7; Path=/; HttpOnly\r\n".to_string(), String::new())
                }
                _ => (403, String::new(), String::new()),
            }
        } else if line.starts_with("GET /me ") && cookie("sid").as_deref() == Some("user7") {
            (202, "Content-Type: application/json\r\n".to_string(), r#"{"user": {"id": 7}}"#.to_string())
        } else if line.starts_with("GET /posts/7 ") && cookie("sid").is_some() {
            (204, String::new(), String::new())
        } else {
            (403, String::new(), String::new())
        };
        let resp = format!("HTTP/1.1 {status} X\r\n{extra}Content-Length: {}\r\n\r\n{body}", body.len());
        if s.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

const LOGIN: &str = r#"{"sessions": [{"name": "login", "steps": [
    {"path": "/login", "capture": [{"name": "csrf", "regex": "name=\"csrf\" value=\"([^\"]+)\""}]},
    {"method": "POST", "path": "/login", "headers": {"Content-Type": "application/x-www-form-urlencoded"},
     "body": "csrf={csrf}&user=alice"},
    {"path": "/me", "capture": [{"name": "id", "json": "/user/id"}]},
    {"path": "/posts/{id}"}]}]}"#;

fn mix_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("arena-load-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mix = dir.join("mix.json");
    std::fs::write(&mix, text).unwrap();
    mix
}

#[test]
fn a_session_logs_in_with_its_cookie_and_a_captured_token_in_either_model() {
    let url = login_server();
    let mix = mix_file("session", LOGIN);
    for flags in [vec!["-c", "3", "-n", "400"], vec!["-r", "100", "-d", "1s"]] {
        let mut all = flags.clone();
        all.extend(["--mix", mix.to_str().unwrap()]);
        let r = load(&url, &all);
        let (m, status) = (&r["measured"], &r["measured"]["status"]);
        assert_eq!(n(&m["requests"]["errors"]), 0, "{flags:?}: {m}");
        assert!(status.get("403").is_none(), "{flags:?}: {status}");
        // every step in its order: a session's later steps only after its earlier ones
        let (form, login, me, post) = (n(&status["200"]), n(&status["303"]), n(&status["202"]), n(&status["204"]));
        assert!(form >= login && login >= me && me >= post && form - post <= 3 * 4, "{flags:?}: {status}");
        assert!(post > 20, "{flags:?}: {status}");
        // (in this process the server's threads count as the generator's CPU: only the errors' verdict holds)
        assert!(!r["validity"]["reasons"].to_string().contains("error"), "{flags:?}: {}", r["validity"]);
    }
    // without the jar's cookie the same form post is refused: the server checks what it says
    let bare = mix_file("bare", r#"[{"method": "POST", "path": "/login", "body": "csrf=t1&user=a"}]"#);
    let r = load(&url, &["-c", "1", "-n", "5", "--mix", bare.to_str().unwrap()]);
    assert_eq!(n(&r["measured"]["status"]["403"]), 5);
    for m in [mix, bare] {
        std::fs::remove_dir_all(m.parent().unwrap()).unwrap();
    }
}

#[test]
fn a_capture_that_never_matches_is_an_error_of_its_request_named_in_the_verdict() {
    let url = login_server();
    let mix = mix_file("missed", &LOGIN.replace(r#"name=\"csrf\""#, r#"name=\"token\""#));
    let r = load(&url, &["-c", "2", "-n", "50", "--mix", mix.to_str().unwrap()]);
    let m = &r["measured"];
    // each session ends at its first step: 50 answers, each an error of class capture
    assert_eq!((n(&m["errors"]["capture"]), n(&m["requests"]["errors"]), n(&m["status"]["200"])), (50, 50, 50));
    assert!(m["status"].get("303").is_none());
    assert_eq!(r["captures_missed"], serde_json::json!([{"session": "login", "capture": "csrf", "answers": 50}]));
    let reasons = r["validity"]["reasons"].to_string();
    assert!(reasons.contains("session 'login': capture 'csrf' not found in 50 answers"), "{reasons}");
    std::fs::remove_dir_all(mix.parent().unwrap()).unwrap();
}

#[test]
fn bad_sessions_are_one_line_naming_the_session_step_and_key() {
    for (text, want) in [
        (r#"{"sessions": [{"name": "s", "steps": []}]}"#, "session 0 (s): steps: must be 1 to 100 requests"),
        (r#"{"sessions": [{"name": "s", "steps": [{"path": "/", "capture": [{"name": "a", "regex": "("}]}]}]}"#,
         "session 0 (s): step 0: capture a: regex '(' does not compile"),
        (r#"{"sessions": [{"name": "s", "think": "soon", "steps": [{"path": "/"}]}]}"#, "session 0 (s): think: must be a duration"),
        (r#"[{"path": "/", "capture": [{"name": "a", "regex": "x"}]}]"#, "entry 0: capture: only a session's step captures"),
        (r#"{"requests": [], "session": []}"#, "unknown field `session`"),
    ] {
        let mix = mix_file("bad", text);
        let argv = ["arena-load", "http://127.0.0.1:1/", "-n", "1", "--mix", mix.to_str().unwrap()];
        let err = config(&Args::try_parse_from(argv).unwrap()).err().unwrap();
        assert!(err.contains(want) && !err.contains('\n'), "{text}: {err}");
        std::fs::remove_dir_all(mix.parent().unwrap()).unwrap();
    }
}

#[test]
fn each_kept_alive_connection_has_its_own_latencies_and_a_slow_one_stands_out() {
    // the first connection accepted is answered after 40 ms, the others at once
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for (i, stream) in listener.incoming().flatten().enumerate() {
            let delay = if i == 0 { Duration::from_millis(40) } else { Duration::ZERO };
            std::thread::spawn(move || serve(stream, Mode::Answer { delay, chunked: false }));
        }
    });
    let r = load(&url, &["-c", "5", "-d", "1s", "--warmup", "200ms"]);
    let pc = &r["per_connection"];
    let (requests, p50, p99) = (pc["requests"].as_array().unwrap(), pc["p50_us"].as_array().unwrap(), pc["p99_us"].as_array().unwrap());
    assert_eq!((requests.len(), p50.len(), p99.len(), n(&pc["untracked"])), (5, 5, 5, 0), "{pc}");
    // in the order they opened: the first is the slow one, with a fortieth of the others' requests or so
    assert!(n(&p50[0]) >= 35_000 && n(&p99[0]) >= 35_000, "{pc}");
    assert!(p50[1..].iter().all(|v| n(v) < 10_000), "{pc}");
    assert!(requests[1..].iter().all(|v| n(v) > 5 * n(&requests[0])), "{pc}");
    let total: u64 = requests.iter().map(n).sum();
    assert_eq!(total, n(&r["measured"]["requests"]["completed"]));
    // a connection per request has no connection of its own to tell
    let closing = load(&url, &["-c", "2", "-n", "20", "--no-keepalive"]);
    assert!(closing.get("per_connection").is_none(), "{closing}");
}

#[test]
fn a_streams_first_byte_events_gaps_and_last_event_are_timed_as_they_arrive() {
    // a comment at once, the first event after 60 ms, then four 30 ms apart: 180 ms in all
    let url = server(Mode::Stream { events: 5, first: Duration::from_millis(60), every: Duration::from_millis(30) });
    let r = load(&url, &["-c", "2", "-n", "6", "--events", "5"]);
    let m = &r["measured"];
    assert_eq!(n(&m["requests"]["completed"]), 6, "{m}");
    let st = &m["streams"];
    assert_eq!((n(&st["count"]), n(&st["events"])), (6, 30), "{st}");
    let p = |name: &str, q: &str| n(&st[name]["percentiles"][q]) as f64 / 1000.0;
    assert!(p("first_byte", "100") < 15.0, "the head and comment leave at once: {}", p("first_byte", "100"));
    assert!((60.0..75.0).contains(&p("first_event", "50")), "first event {} ms", p("first_event", "50"));
    assert_eq!(n(&st["event_gap"]["count"]), 6 * 4);
    assert!((29.0..40.0).contains(&p("event_gap", "50")), "gap {} ms", p("event_gap", "50"));
    assert!((180.0..200.0).contains(&p("last_event", "50")), "last event {} ms", p("last_event", "50"));
    // the closing comment's timing joins the head's
    assert_eq!(n(&m["server_timing"]["app"]["count"]), 6);
    assert_eq!(n(&m["server_timing"]["queue"]["count"]), 6);
    assert_eq!(n(&st["others_response_time"]["count"]), 0, "every answer was a stream");
    // a stream that should have held more is an error, kept out of the stream times and latencies
    let r = load(&url, &["-c", "1", "-n", "2", "--events", "6"]);
    let m = &r["measured"];
    assert_eq!((n(&m["errors"]["short"]), n(&m["requests"]["completed"])), (2, 0), "{m}");
    assert_eq!(n(&m["streams"]["count"]), 0);
    // a plain answer has no streams at all
    let plain = load(&server(Mode::Answer { delay: Duration::from_millis(1), chunked: true }), &["-c", "1", "-n", "3"]);
    assert!(plain["measured"].get("streams").is_none());
}
