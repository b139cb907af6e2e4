//! The event loop: each worker thread drives its connections on one mio poll.
//!
//! Requests come from one of two sources, and everything after that is shared:
//! - open model: the pacer's schedule; a due request waits in `pending` until a connection is
//!   free (an idle keep-alive one, or a new one while under the cap);
//! - closed model: each of N "users" issues its next request when its previous one ended (plus
//!   the think time), so `pending` holds at most one request per user.
//! A request's latency counts from its intended time in both: in the closed model that is the
//! moment its user was ready.
//!
//! Wake-ups come from socket readiness and from one timerfd set to the next due time, so send
//! times are kept to the microsecond, not to epoll's millisecond timeout.
//!
//! Slow or far clients (`Link`) are emulated here, per connection, since loopback has no network
//! to shape: a new connection waits out the handshake's round trip and its request's one-way trip
//! before it is opened (the server accepts it with its request, as over a real network); every
//! other request waits one delay before its first byte is written; the request is written and the
//! response read in segments, each at the link's rate, with a small receive buffer so the server's
//! writes stall as they would behind a slow reader; a complete response is taken in one delay after
//! its last byte was read. With the link off none of these paths runs.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::mpsc::Sender;

use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use crate::http::Template;
use crate::response::{Head, Malformed, Parser, Step};
use crate::pacer::{Pacer, SplitMix64, Stop};
use crate::session::{Session, User};
use crate::source::{Request, Source};
use crate::record::{histogram, us, ConnStat, ErrorKind, IntervalPart, Phase, StreamTimes, MAX_TRACKED_CONNECTIONS};

/// Set by SIGINT/SIGTERM: workers stop issuing, stop waiting, and report what they have.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    Constant,
    Poisson,
    /// At the times of `Config::schedule` (a traffic profile).
    Schedule,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Model {
    /// `connections` users, each sending its next request `think_ns` after the previous answer.
    Closed { connections: usize, think_ns: u64 },
    /// Arrivals at `rate` per second; at most `max_connections` connections are opened.
    Open { rate: f64, arrival: Arrival, max_connections: usize },
}

/// A slow or far client: a one-way delay (each way) and caps on the bytes per second it sends and
/// reads (0: no cap). All zero: the link is off.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Link {
    pub delay_ns: u64,
    pub upload_bps: u64,
    pub download_bps: u64,
}

impl Link {
    pub fn is_on(&self) -> bool {
        *self != Link::default()
    }

    /// How long `bytes` take at `bps` bytes per second (0: no cap, no time).
    fn transfer_ns(bytes: usize, bps: u64) -> u64 {
        if bps == 0 { 0 } else { (bytes as u128 * 1_000_000_000 / bps as u128) as u64 }
    }
}

/// Bytes moved at once on a capped link (a TCP segment's payload on Ethernet).
pub const SEGMENT: usize = 1448;
/// A capped reader's socket receive buffer (the kernel doubles it): small, so the server's writes
/// stall once a few segments wait unread, as behind a real slow reader.
pub const SLOW_RCVBUF: usize = 8 * 1024;

#[derive(Debug, Clone)]
pub struct Config {
    pub addr: SocketAddr,
    pub templates: Vec<Template>,
    /// The mix's sessions (a plain mix: one per template, of one step), over `templates`.
    pub sessions: Vec<Session>,
    pub model: Model,
    pub warmup_ns: u64,
    /// Ends of the run, warm-up included (`end_ns`), and measured requests to issue.
    pub stop: Stop,
    pub keep_alive: bool,
    /// The emulated client link (off by default).
    pub link: Link,
    pub request_start: bool,
    pub connect_timeout_ns: u64,
    pub response_timeout_ns: u64,
    pub interval_ns: u64,
    pub threads: usize,
    pub seed: u64,
    /// The statuses that count as success; any other answer is an error (class "status").
    pub expect: StatusSet,
    /// Errors beyond this share of the answered requests make the run invalid.
    pub max_error_rate: f64,
    /// The events a stream should hold (fewer: an error of class "short").
    pub events: Option<u32>,
    /// Print each completed interval of the series on stderr (one JSON line) while running.
    pub live: bool,
    /// The open model's intended send times (ns since the start, sorted) with Arrival::Schedule.
    pub schedule: Arc<Vec<u64>>,
}

/// A set of HTTP statuses as inclusive ranges: "2xx,3xx" is [(200, 299), (300, 399)].
#[derive(Debug, Clone, PartialEq)]
pub struct StatusSet(pub Vec<(u16, u16)>);

impl StatusSet {
    pub fn contains(&self, status: u16) -> bool {
        self.0.iter().any(|(lo, hi)| (*lo..=*hi).contains(&status))
    }

    /// "2xx,3xx", "200-204", "404": classes, ranges or single statuses, comma-separated.
    pub fn parse(text: &str) -> Result<StatusSet, String> {
        let mut out = Vec::new();
        for part in text.split(',').map(str::trim) {
            let bad = || format!("'{part}' is not a status (100-599), a class such as 2xx, or a range such as 200-204");
            let range = if let Some(class) = part.strip_suffix("xx") {
                let c: u16 = class.parse().map_err(|_| bad())?;
                (c * 100, c * 100 + 99)
            } else if let Some((a, b)) = part.split_once('-') {
                (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?)
            } else {
                let v: u16 = part.parse().map_err(|_| bad())?;
                (v, v)
            };
            if !(100..=599).contains(&range.0) || !(100..=599).contains(&range.1) || range.0 > range.1 {
                return Err(bad());
            }
            out.push(range);
        }
        Ok(StatusSet(out))
    }

    /// As given on the command line, for the result document.
    pub fn describe(&self) -> String {
        self.0.iter().map(|(lo, hi)| match (lo, hi) {
            (lo, hi) if lo == hi => lo.to_string(),
            (lo, hi) if lo % 100 == 0 && *hi == lo + 99 => format!("{}xx", lo / 100),
            (lo, hi) => format!("{lo}-{hi}"),
        }).collect::<Vec<_>>().join(",")
    }
}

/// What one worker hands back.
pub struct WorkerResult {
    pub warmup: Phase,
    pub measured: Phase,
    /// Open model: how late the loop took each request from the schedule (its own lateness).
    pub schedule_lag: Histogram<u64>,
    /// Due but never sent when the run ended.
    pub unsent: u64,
    /// Sent but unanswered when the run ended (interrupted, or no time left to wait).
    pub in_flight: u64,
    pub peak_conns: usize,
    pub open_failure: Option<String>,
    /// Whether the hard bound (the end, plus the longest timeout, plus HARD_MARGIN_NS) cut the
    /// wait for answers still in flight.
    pub cut: bool,
    /// The longest time the loop woke past the deadline it had set (ns): the generator itself not
    /// running (stopped, or starved of CPU), whatever the target did.
    pub loop_late_ns: u64,
    /// When this worker stopped issuing (ns since start).
    pub issue_end_ns: u64,
    /// Time of the last measured completion (ns since start).
    pub last_done_ns: u64,
    /// Answers whose session's capture was not found, by (session, capture).
    pub missed: std::collections::BTreeMap<(String, String), u64>,
    /// Each kept-alive connection's measured requests, in the order they opened (up to this
    /// worker's share of MAX_TRACKED_CONNECTIONS), and how many more opened untracked.
    pub connections: Vec<ConnStat>,
    pub untracked: u64,
}

/// Monotonic nanoseconds (the clock the timerfd runs on).
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn epoch_us() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

const TIMER: Token = Token(usize::MAX);
/// Timeouts are checked and idle intervals closed this often.
const HOUSEKEEPING_NS: u64 = 10_000_000;
/// Past a time-bounded run's end and its longest timeout, how long answers are still waited for.
pub const HARD_MARGIN_NS: u64 = 1_000_000_000;
const READ_BUF: usize = 8 * 1024;

/// A one-shot timer on CLOCK_MONOTONIC at absolute times.
struct TimerFd(OwnedFd);

impl TimerFd {
    fn new() -> io::Result<TimerFd> {
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(TimerFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn set_abs(&self, mono_ns: u64) {
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: (mono_ns / 1_000_000_000) as i64, tv_nsec: (mono_ns % 1_000_000_000) as i64 },
        };
        unsafe { libc::timerfd_settime(self.0.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
    }

    fn clear(&self) {
        let mut buf = [0u8; 8];
        unsafe { libc::read(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    }

    fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    req: Request,
    sent: u64,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum State {
    Connecting,
    Idle,
    Writing,
    Reading,
    /// Link on: the response is read in full and reaches the client when the delay is over.
    Delivering,
}

/// A response read in full, waiting out the link's delay.
struct Delivery {
    flight: InFlight,
    head: Head,
    bytes: u64,
    close: bool,
    /// A stream's times (`head.events` says whether it is one).
    times: StreamTimes,
}

struct Conn {
    stream: TcpStream,
    state: State,
    connect_start: u64,
    /// Connect or response deadline (0: none).
    deadline: u64,
    /// The request to send once connected, or the one on the wire.
    req: Option<Request>,
    flight: Option<InFlight>,
    wbuf: Vec<u8>,
    wpos: usize,
    rbuf: Vec<u8>,
    rlen: usize,
    parser: Parser,
    /// Bytes received for the request on the wire.
    rbytes: u64,
    /// Whether WRITABLE is registered (only while connecting or after a short write).
    writable_interest: bool,
    /// Link on: when the bytes moved so far have crossed the link (the next segment moves after).
    link_at: u64,
    /// Link on: the link waited for the other side (the server's socket was full, or empty):
    /// its clock restarts at the next move instead of catching up.
    link_idle: bool,
    /// Link on: the wake-up set for this connection (0: none).
    wake: u64,
    /// Link on: opened after the handshake and its request's trip were waited out.
    dialed: bool,
    /// Link on: the peer closed while a response was still being taken in.
    peer_closed: bool,
    done: Option<Delivery>,
    /// Its own latencies' index in the worker's `connections` (None: not tracked).
    stat: Option<usize>,
    /// The response on the wire: when its first byte came, and, a stream, its events' (and how
    /// many of them were seen).
    times: StreamTimes,
    seen_events: u32,
}

impl Conn {
    /// A request is on it: waiting for the connection, on the wire, or being delivered.
    fn busy(&self) -> bool {
        self.req.is_some() || self.flight.is_some() || self.done.is_some()
    }
}

pub struct Worker<'a> {
    cfg: &'a Config,
    start: u64,
    poll: Poll,
    timer: TimerFd,
    conns: Vec<Option<Conn>>,
    free_slots: Vec<usize>,
    idle: Vec<usize>,
    open_conns: usize,
    max_conns: usize,
    pending: VecDeque<Request>,
    /// Link on: connections due to open (at, asked at, request), in order, each counted open.
    dialing: VecDeque<(u64, u64, Request)>,
    /// Link on: connections' wake-ups (at, slot); an entry no longer its connection's `wake` is stale.
    wakes: BinaryHeap<Reverse<(u64, usize)>>,
    /// Which request comes next and when (pacer or closed users, think time, the stop rule).
    source: Source<'a>,
    /// Draws the values of templated requests (`/posts/{id:1..10000}`), seeded from --seed.
    values: SplitMix64,
    /// The state of each user of a session that keeps one (its jar and captures), by user.
    users: Vec<User>,
    /// Answers whose session's capture was not found, by session and capture name.
    missed: std::collections::BTreeMap<(String, String), u64>,
    /// Kept-alive connections' own latencies (see WorkerResult), and the cap on how many.
    connections: Vec<ConnStat>,
    untracked: u64,
    most_tracked: usize,
    /// The deadline the timerfd is armed for (0: none): re-arming costs a syscall and, in a VM,
    /// an exit to the hypervisor, so it is done only when the deadline changes.
    armed: u64,
    warmup: Phase,
    measured: Phase,
    schedule_lag: Histogram<u64>,
    interval: IntervalPart,
    intervals: Sender<IntervalPart>,
    unsent: u64,
    last_done: u64,
    /// The most connections open at once, and the first reason a connection could not be opened
    /// on this side (descriptors, ports), if any.
    peak_conns: usize,
    open_failure: Option<String>,
}

impl<'a> Worker<'a> {
    pub fn new(cfg: &'a Config, id: usize, start: u64, issued_measured: &'a AtomicU64,
               intervals: Sender<IntervalPart>) -> io::Result<Worker<'a>> {
        let threads = cfg.threads as f64;
        let (pacer, max_conns, users, think_ns) = match cfg.model {
            Model::Open { rate, arrival, max_connections } => {
                let share = rate / threads;
                let pacer = match arrival {
                    // threads interleave: thread k is offset by k / rate
                    Arrival::Constant => Pacer::constant(share, id as f64 * 1e9 / rate),
                    Arrival::Poisson => Pacer::poisson(share, cfg.seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                    Arrival::Schedule => Pacer::schedule(cfg.schedule.clone(), id, cfg.threads),
                };
                (Some(pacer), split(max_connections, cfg.threads, id).max(1), 0, 0)
            }
            Model::Closed { connections, think_ns } => {
                let n = split(connections, cfg.threads, id);
                (None, n, n, think_ns)
            }
        };
        let poll = Poll::new()?;
        let timer = TimerFd::new()?;
        poll.registry().register(&mut SourceFd(&timer.raw()), TIMER, Interest::READABLE)?;
        let plans = cfg.sessions.iter().map(|s| s.plan.clone()).collect();
        let source = Source::new(pacer, think_ns, cfg.stop, cfg.warmup_ns, plans, cfg.seed.wrapping_add(1 + id as u64),
                                 issued_measured);
        let mut w = Worker {
            cfg, start, poll, timer, conns: Vec::new(), free_slots: Vec::new(), idle: Vec::new(),
            open_conns: 0, max_conns, pending: VecDeque::new(), dialing: VecDeque::new(), wakes: BinaryHeap::new(),
            source, armed: 0,
            values: SplitMix64::new(cfg.seed ^ 0x7E3A_11C5_D1B5_4A32u64.wrapping_mul(2 + id as u64)),
            users: Vec::new(), missed: Default::default(), connections: Vec::new(), untracked: 0,
            most_tracked: split(MAX_TRACKED_CONNECTIONS, cfg.threads, id),
            warmup: Phase::default(), measured: Phase::default(), schedule_lag: histogram(),
            interval: IntervalPart::new(0), intervals, unsent: 0, last_done: 0, peak_conns: 0, open_failure: None,
        };
        for req in w.source.start(users) {
            w.enqueue(req);
        }
        Ok(w)
    }

    fn now(&self) -> u64 {
        mono_ns() - self.start
    }

    /// Queue a request the source issued, counting it in its phase.
    fn enqueue(&mut self, req: Request) {
        self.phase(req.warm).issued += 1;
        self.pending.push_back(req);
    }

    pub fn run(mut self) -> io::Result<WorkerResult> {
        let mut events = Events::with_capacity(1024);
        let mut next_housekeeping = 0;
        // Whatever the target does, a time-bounded run ends by its end plus the longest timeout
        // plus a margin: a request still unanswered then is reported in flight, not waited for.
        let hard_end = self.cfg.stop.end_ns
            .map(|end| end + self.cfg.response_timeout_ns.max(self.cfg.connect_timeout_ns) + HARD_MARGIN_NS);
        let mut cut = false;
        let (mut loop_late, mut last_deadline) = (0, None);
        loop {
            let now = self.now();
            // how far past the deadline it set the loop woke, read with the clock it reads anyway (the
            // events handled since count too: a loop busy that long is saturated all the same)
            if let Some(d) = last_deadline.take() {
                loop_late = loop_late.max((self.start + now).saturating_sub(d));
            }
            if hard_end.is_some_and(|h| now >= h) {
                cut = self.conns.iter().flatten().any(Conn::busy);
                break;
            }
            let past_end = self.cfg.stop.end_ns.is_some_and(|end| now >= end);
            if self.source.issuing() && (past_end || INTERRUPTED.load(Ordering::Relaxed)) {
                self.source.halt(now); // think times not yet over: those requests are never issued
            }
            self.release_due(now);
            if self.cfg.link.is_on() {
                self.wake_due(now);
            }
            self.dispatch(now);
            if now >= next_housekeeping {
                self.housekeeping(now);
                next_housekeeping = now + HOUSEKEEPING_NS;
            }
            if !self.source.issuing() {
                let interrupted = INTERRUPTED.load(Ordering::Relaxed);
                if past_end || interrupted {
                    // the time is up: what is due but not sent is reported, not sent late
                    self.unsent += self.pending.len() as u64;
                    self.pending.clear();
                } // else the count is reached: what was issued is still sent
                let busy = !self.dialing.is_empty() || self.conns.iter().flatten().any(Conn::busy);
                if interrupted || (self.pending.is_empty() && !busy) {
                    break;
                }
            }
            let link = [self.dialing.front().map(|d| d.0), self.wakes.peek().map(|w| w.0.0)];
            let wake = [self.source.next_wake(), Some(next_housekeeping), hard_end].into_iter().chain(link).flatten().min()
                .expect("housekeeping is always set");
            let deadline = self.start + wake.max(now + 1);
            if deadline != self.armed {
                self.timer.set_abs(deadline);
                self.armed = deadline;
            }
            last_deadline = Some(deadline);
            match self.poll.poll(&mut events, None) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for event in events.iter() {
                if event.token() == TIMER {
                    self.timer.clear();
                    self.armed = 0; // fired: a one-shot timer is disarmed
                    continue;
                }
                let closed = event.is_read_closed() || event.is_error();
                self.on_event(event.token().0, event.is_writable(), event.is_readable() || closed, closed);
            }
        }
        let end = self.now();
        let in_flight = self.conns.iter().flatten().filter(|c| c.flight.is_some() || c.done.is_some()).count() as u64;
        // requests still waiting for their connection to open were issued but never sent
        self.unsent += self.conns.iter().flatten().filter(|c| c.req.is_some()).count() as u64 + self.dialing.len() as u64;
        let index = self.interval_index(end.max(self.cfg.warmup_ns));
        self.close_intervals_before(index + 1);
        Ok(WorkerResult {
            warmup: self.warmup, measured: self.measured, schedule_lag: self.schedule_lag, unsent: self.unsent,
            in_flight, loop_late_ns: loop_late, issue_end_ns: self.source.issue_end().unwrap_or(end),
            last_done_ns: self.last_done, peak_conns: self.peak_conns, open_failure: self.open_failure, cut,
            missed: self.missed, connections: self.connections, untracked: self.untracked,
        })
    }

    /// Move requests whose time has come into `pending`, recording how late each arrival was taken.
    fn release_due(&mut self, now: u64) {
        let (lag, pending, warmup, measured) = (&mut self.schedule_lag, &mut self.pending, &mut self.warmup, &mut self.measured);
        self.source.due(now, |late| lag.saturating_record(us(late)), |req| {
            if req.warm { warmup.issued += 1 } else { measured.issued += 1 }
            pending.push_back(req);
        });
    }

    /// Give pending requests to idle connections, opening new ones while under the cap.
    fn dispatch(&mut self, now: u64) {
        // Only what was pending on entry: a request queued by a failure during this call (a closed
        // user retrying after an immediate refusal) waits for the next turn of the loop, with a
        // fresh clock, instead of spinning here.
        for _ in 0..self.pending.len() {
            let Some(req) = self.pending.front().copied() else { break };
            if let Some(slot) = self.idle.pop() {
                self.pending.pop_front();
                self.send(slot, req, now);
            } else if self.open_conns < self.max_conns {
                self.pending.pop_front();
                self.connect(req, now);
            } else {
                break; // the request waits in the generator: its wait counts (it is in send_lag)
            }
        }
    }

    fn connect(&mut self, req: Request, now: u64) {
        let delay = self.cfg.link.delay_ns;
        if delay > 0 {
            // the handshake's round trip, then the request's one-way trip: the server sees the
            // connection when its request arrives, as over a real network
            self.dialing.push_back((now + 3 * delay, now, req));
            self.open_conns += 1;
            self.peak_conns = self.peak_conns.max(self.open_conns);
            return;
        }
        self.open(req, now, now);
    }

    /// Open a connection for `req`, asked for at `began` (with a delay, the dial waited since then,
    /// its request's trip included).
    fn open(&mut self, req: Request, began: u64, now: u64) {
        let stream = match if self.cfg.link.download_bps > 0 { slow_reader(self.cfg.addr) } else { TcpStream::connect(self.cfg.addr) } {
            Ok(s) => s,
            Err(e) => {
                let kind = match e.raw_os_error() {
                    _ if e.kind() == io::ErrorKind::ConnectionRefused => ErrorKind::Refused,
                    // the generator's own limits, not the server's answer: out of descriptors,
                    // ports or buffers
                    Some(libc::EMFILE | libc::ENFILE | libc::EADDRNOTAVAIL | libc::ENOBUFS | libc::ENOMEM) => {
                        self.open_failure.get_or_insert_with(|| e.to_string());
                        ErrorKind::Local
                    }
                    _ => ErrorKind::Reset,
                };
                self.fail(req, kind, now);
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        let slot = self.free_slots.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let mut conn = Conn {
            stream, state: State::Connecting, connect_start: began, deadline: now + self.cfg.connect_timeout_ns,
            req: Some(req), flight: None, wbuf: Vec::with_capacity(512), wpos: 0, rbuf: vec![0; READ_BUF], rlen: 0,
            parser: Parser::default(), rbytes: 0, writable_interest: true,
            link_at: 0, link_idle: false, wake: 0, dialed: self.cfg.link.delay_ns > 0, peer_closed: false, done: None,
            stat: None, times: StreamTimes::default(), seen_events: 0,
        };
        // a kept-alive connection's own latencies, up to the cap (a connection per request has none)
        if self.cfg.keep_alive {
            if self.connections.len() < self.most_tracked {
                conn.stat = Some(self.connections.len());
                self.connections.push(ConnStat::default());
            } else {
                self.untracked += 1;
            }
        }
        if let Err(_e) = self.poll.registry().register(&mut conn.stream, Token(slot), Interest::READABLE | Interest::WRITABLE) {
            self.fail(req, ErrorKind::Reset, now);
            self.free_slots.push(slot);
            return;
        }
        self.conns[slot] = Some(conn);
        self.open_conns += 1;
        self.peak_conns = self.peak_conns.max(self.open_conns);
    }

    /// `closed`: the peer closed (or the socket failed). Edge-triggered: this event is the only
    /// notice, so whatever reads or writes it calls for must run to the end of the stream now.
    fn on_event(&mut self, slot: usize, writable: bool, readable: bool, closed: bool) {
        let now = self.now();
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else { return };
        match conn.state {
            State::Connecting => {
                if !(writable || readable) {
                    return;
                }
                match conn.stream.take_error() {
                    Ok(None) if conn.stream.peer_addr().is_ok() => {
                        // a dialed connection's wait held its request's trip too: not the connect's
                        let trip = if conn.dialed { self.cfg.link.delay_ns } else { 0 };
                        let took = (now - conn.connect_start).saturating_sub(trip);
                        let warm = conn.req.is_some_and(|r| r.warm);
                        self.phase(warm).connect.saturating_record(us(took));
                        let req = self.conns[slot].as_mut().and_then(|c| c.req.take()).expect("a connection opens for a request");
                        self.set_interest(slot, false);
                        self.send(slot, req, now);
                    }
                    Ok(None) => {} // not connected yet
                    Ok(Some(e)) | Err(e) => {
                        let kind = if e.kind() == io::ErrorKind::ConnectionRefused { ErrorKind::Refused } else { ErrorKind::Reset };
                        self.drop_conn(slot, Some(kind), now);
                    }
                }
            }
            State::Writing if writable || closed => self.write(slot, now),
            State::Reading if readable => self.read(slot, now, closed),
            State::Delivering => conn.peer_closed |= closed,
            State::Idle if readable => {
                // the server closed an idle keep-alive connection (or sent bytes unasked)
                let mut probe = [0u8; 1];
                match conn.stream.read(&mut probe) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    _ => self.drop_conn(slot, None, now),
                }
            }
            _ => {}
        }
    }

    fn set_interest(&mut self, slot: usize, writable: bool) {
        let conn = self.conns[slot].as_mut().expect("live");
        if conn.writable_interest != writable {
            let interest = if writable { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
            let _ = self.poll.registry().reregister(&mut conn.stream, Token(slot), interest);
            conn.writable_interest = writable;
        }
    }

    fn send(&mut self, slot: usize, req: Request, now: u64) {
        let stamp = self.cfg.request_start.then(epoch_us);
        let template = &self.cfg.templates[req.template];
        let session = &self.cfg.sessions[req.session as usize];
        let user = if session.stateful {
            let u = req.user as usize;
            if self.users.len() <= u {
                self.users.resize_with(u + 1, User::default);
            }
            if req.step == 0 {
                self.users[u].begin(session.names.len());
            }
            Some(&mut self.users[u])
        } else {
            None
        };
        let conn = self.conns[slot].as_mut().expect("live");
        conn.wbuf.clear();
        conn.wpos = 0;
        conn.parser.keep = session.stateful;
        template.render(stamp, &mut self.values, user, &mut conn.wbuf);
        conn.flight = Some(InFlight { req, sent: now });
        conn.rbytes = 0;
        conn.times = StreamTimes::default();
        conn.seen_events = 0;
        conn.state = State::Writing;
        conn.deadline = now + self.cfg.response_timeout_ns;
        // the request's one-way trip (a dialed connection waited it out before opening)
        conn.link_at = now + if std::mem::take(&mut conn.dialed) { 0 } else { self.cfg.link.delay_ns };
        conn.link_idle = false;
        let bytes = conn.wbuf.len() as u64;
        let phase = self.phase(req.warm);
        phase.sent += 1;
        phase.bytes_sent += bytes;
        phase.send_lag.saturating_record(us(now.saturating_sub(req.intended)));
        if !req.warm {
            self.interval_at(now).sent += 1;
        }
        self.write(slot, now);
    }

    fn write(&mut self, slot: usize, now: u64) {
        let link = self.cfg.link;
        let conn = self.conns[slot].as_mut().expect("live");
        while conn.wpos < conn.wbuf.len() {
            let mut end = conn.wbuf.len();
            if link.is_on() {
                // a segment reaches the server when it has crossed the link
                if std::mem::take(&mut conn.link_idle) {
                    conn.link_at = now;
                }
                if link.upload_bps > 0 {
                    end = end.min(conn.wpos + SEGMENT);
                }
                let due = conn.link_at + Link::transfer_ns(end - conn.wpos, link.upload_bps);
                if now < due {
                    return self.wake_at(slot, due);
                }
            }
            match conn.stream.write(&conn.wbuf[conn.wpos..end]) {
                Ok(0) => return self.drop_conn(slot, Some(ErrorKind::Reset), now),
                Ok(n) => {
                    conn.wpos += n;
                    conn.link_at += Link::transfer_ns(n, link.upload_bps);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    conn.link_idle = true;
                    return self.set_interest(slot, true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.drop_conn(slot, Some(ErrorKind::Reset), now),
            }
        }
        conn.state = State::Reading;
        conn.link_idle = true; // until the answer's first bytes
        self.set_interest(slot, false);
    }

    fn read(&mut self, slot: usize, now: u64, closed: bool) {
        let link = self.cfg.link;
        loop {
            let conn = self.conns[slot].as_mut().expect("live");
            if conn.rlen == conn.rbuf.len() {
                conn.rbuf.resize(conn.rbuf.len() * 2, 0); // only an unfinished head needs room
            }
            let mut room = conn.rbuf.len() - conn.rlen;
            if link.download_bps > 0 {
                // one segment at a time, each once the one before has crossed the link
                conn.peer_closed |= closed;
                let due = conn.link_at;
                if now < due {
                    return self.wake_at(slot, due);
                }
                room = room.min(SEGMENT);
            }
            let n = match conn.stream.read(&mut conn.rbuf[conn.rlen..conn.rlen + room]) {
                Ok(0) => return self.on_eof(slot, now),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    conn.link_idle = true;
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return self.drop_conn(slot, Some(ErrorKind::Reset), now),
            };
            conn.rlen += n;
            conn.rbytes += n as u64;
            if link.download_bps > 0 {
                let start = if std::mem::take(&mut conn.link_idle) { now } else { conn.link_at };
                conn.link_at = start + Link::transfer_ns(n, link.download_bps);
            }
            // what reaches the client now (a far client's one-way delay later)
            let at = now + link.delay_ns;
            if conn.times.first_byte == 0 {
                conn.times.first_byte = at;
            }
            let head_request = conn.flight.is_some_and(|f| self.cfg.templates[f.req.template].is_head);
            let step = conn.parser.feed(&conn.rbuf[..conn.rlen], head_request);
            let events = match &step {
                Ok(Step::Done(head, _)) => head.events.unwrap_or(0),
                _ => conn.parser.events(),
            };
            if events > conn.seen_events {
                self.saw_events(slot, events, at);
            }
            let conn = self.conns[slot].as_mut().expect("live");
            match step {
                Err(_) => return self.drop_conn(slot, Some(ErrorKind::Malformed), now),
                Ok(Step::More(used)) => {
                    conn.rbuf.copy_within(used..conn.rlen, 0);
                    conn.rlen -= used;
                    if conn.rbuf.len() > crate::response::MAX_HEAD * 2 {
                        return self.drop_conn(slot, Some(ErrorKind::Malformed), now);
                    }
                    // a short read means the socket is drained: wait for the next edge, unless the
                    // peer has closed (no edge will come: read on to the end of the stream)
                    if n < room && !(closed || conn.peer_closed) {
                        conn.link_idle = true;
                        return;
                    }
                }
                Ok(Step::Done(head, used)) => {
                    let leftover = conn.rlen - used;
                    conn.rlen = 0;
                    if leftover > 0 {
                        // bytes after a complete response that we did not ask for
                        return self.drop_conn(slot, Some(ErrorKind::Malformed), now);
                    }
                    let flight = conn.flight.take().expect("a response answers a request");
                    let delivery = Delivery { flight, bytes: conn.rbytes, close: head.close || !self.cfg.keep_alive, head,
                                              times: conn.times };
                    return self.deliver(slot, delivery, now);
                }
            }
        }
    }

    /// A stream's events up to `events` arrived at `at`: the first is its first event; each one
    /// after that is a gap since the one before (events read together are 1 µs apart).
    fn saw_events(&mut self, slot: usize, events: u32, at: u64) {
        let conn = self.conns[slot].as_mut().expect("live");
        let warm = conn.flight.is_some_and(|f| f.req.warm);
        let (seen, last) = (conn.seen_events, conn.times.last_event);
        if seen == 0 {
            conn.times.first_event = at;
        }
        conn.seen_events = events;
        conn.times.last_event = at;
        let gaps = &mut self.phase(warm).streams.gap;
        if seen > 0 {
            gaps.saturating_record(us(at.saturating_sub(last)));
        }
        gaps.saturating_record_n(1, u64::from(events - seen - 1)); // those after the first read with it
    }

    /// A response read in full: the request is done (with the link on, once the last segment has
    /// crossed and the delay is over), then its connection closes or goes idle for the next.
    fn deliver(&mut self, slot: usize, delivery: Delivery, now: u64) {
        if self.cfg.link.is_on() {
            let conn = self.conns[slot].as_mut().expect("live");
            let at = conn.link_at.max(now) + self.cfg.link.delay_ns;
            if now < at {
                conn.state = State::Delivering;
                conn.deadline = 0;
                conn.done = Some(delivery);
                return self.wake_at(slot, at);
            }
        }
        self.finish(slot, delivery, now);
    }

    /// The response has reached the client: record it, then close the connection or give it the
    /// next request.
    fn finish(&mut self, slot: usize, delivery: Delivery, now: u64) {
        let Delivery { flight, head, bytes, close, times } = delivery;
        let stat = self.conns[slot].as_ref().and_then(|c| c.stat);
        self.complete(flight, now, &head, bytes, stat, times);
        let Some(conn) = self.conns[slot].as_mut() else { return };
        conn.parser.recycle(head);
        if close || conn.peer_closed {
            self.drop_conn(slot, None, now);
        } else {
            conn.state = State::Idle;
            conn.deadline = 0;
            if conn.rbuf.len() > READ_BUF {
                conn.rbuf.truncate(READ_BUF);
                conn.rbuf.shrink_to_fit();
            }
            self.idle.push(slot);
            // send the next request now, not after the rest of this batch of events:
            // the server should not sit idle while we read other connections
            self.dispatch(now);
        }
    }

    /// Link on: wake connection `slot` at `at` (a later call replaces an earlier one).
    fn wake_at(&mut self, slot: usize, at: u64) {
        let conn = self.conns[slot].as_mut().expect("live");
        if conn.wake != at {
            conn.wake = at;
            self.wakes.push(Reverse((at, slot)));
        }
    }

    /// Link on: open the connections and move the bytes whose time has come.
    fn wake_due(&mut self, now: u64) {
        while self.dialing.front().is_some_and(|d| d.0 <= now) {
            let (_, began, req) = self.dialing.pop_front().expect("peeked");
            self.open_conns -= 1; // counted while dialing; open() counts it again
            self.open(req, began, now);
        }
        while self.wakes.peek().is_some_and(|w| w.0.0 <= now) {
            let Reverse((at, slot)) = self.wakes.pop().expect("peeked");
            let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut).filter(|c| c.wake == at) else { continue };
            conn.wake = 0;
            match conn.state {
                State::Writing => self.write(slot, now),
                State::Reading => self.read(slot, now, false),
                State::Delivering => {
                    let delivery = conn.done.take().expect("a delivery is waiting");
                    self.finish(slot, delivery, now);
                }
                State::Connecting | State::Idle => {}
            }
        }
    }

    fn on_eof(&mut self, slot: usize, now: u64) {
        let conn = self.conns[slot].as_mut().expect("live");
        match conn.parser.eof() {
            Ok(Some(head)) => {
                let flight = conn.flight.take().expect("in a response");
                let delivery = Delivery { flight, head, bytes: conn.rbytes, close: true, times: conn.times };
                self.deliver(slot, delivery, now);
            }
            Ok(None) | Err(Malformed::Truncated) => self.drop_conn(slot, Some(ErrorKind::Reset), now),
            Err(_) => self.drop_conn(slot, Some(ErrorKind::Malformed), now),
        }
    }

    /// `stat`: the connection's own latencies, where it has them.
    fn complete(&mut self, flight: InFlight, now: u64, head: &crate::response::Head, bytes: u64, stat: Option<usize>,
                times: StreamTimes) {
        let req = flight.req;
        let expected = self.cfg.expect.contains(head.status);
        let short = head.events.zip(self.cfg.events).is_some_and(|(got, want)| got < want);
        if !expected || short {
            // an answer, but not a success: an error of its own class, kept out of the latencies
            let kind = if expected { ErrorKind::Short } else { ErrorKind::Status };
            self.phase(req.warm).record_unexpected(head.status, bytes, kind);
            if !req.warm {
                self.interval_at(now).errors += 1;
            }
            return self.next_for_user(now, req, false);
        }
        let session = &self.cfg.sessions[req.session as usize];
        if session.stateful {
            let captures = &session.steps[req.step as usize].captures;
            if let Err(name) = self.users[req.user as usize].answer(head, captures) {
                // what the session's next steps need is not in the answer: an error of this request
                *self.missed.entry((session.name.clone(), name)).or_default() += 1;
                self.phase(req.warm).record_unexpected(head.status, bytes, ErrorKind::Capture);
                if !req.warm {
                    self.interval_at(now).errors += 1;
                }
                return self.next_for_user(now, req, false);
            }
        }
        let phase = self.phase(flight.req.warm);
        phase.record_response(flight.req.intended, flight.sent, now, head, bytes);
        if let Some(events) = head.events {
            phase.streams.record(flight.req.intended, now, times, events);
        }
        if !flight.req.warm {
            self.last_done = now;
            if let Some(i) = stat {
                self.connections[i].response.saturating_record(us(now.saturating_sub(flight.req.intended)));
            }
            let part = self.interval_at(now);
            part.completed += 1;
            part.response.saturating_record(us(now.saturating_sub(flight.req.intended)));
            part.count_worker(head.pid);
        }
        self.next_for_user(now, req, true);
    }

    /// The user whose request just ended (`ok`: answered as its session needs) issues its next
    /// one: the session's next step, or a closed user's next session (after think time).
    fn next_for_user(&mut self, now: u64, req: Request, ok: bool) {
        if let Some(next) = self.source.answered(now, &req, ok) {
            self.enqueue(next);
        }
    }

    /// A request failed before it could be sent or answered.
    fn fail(&mut self, req: Request, kind: ErrorKind, now: u64) {
        self.phase(req.warm).errors.add(kind);
        if !req.warm {
            self.interval_at(now).errors += 1;
        }
        self.next_for_user(now, req, false);
    }

    /// Close a connection; with `error`, the request on it (if any) failed with that error.
    fn drop_conn(&mut self, slot: usize, error: Option<ErrorKind>, now: u64) {
        let Some(mut conn) = self.conns[slot].take() else { return };
        let _ = self.poll.registry().deregister(&mut conn.stream);
        self.open_conns -= 1;
        self.free_slots.push(slot);
        if conn.state == State::Idle {
            self.idle.retain(|s| *s != slot); // only an idle connection is in the list (O(n): rare)
        }
        let lost = conn.flight.or(conn.done.map(|d| d.flight)).map(|f| f.req).or(conn.req);
        match (lost, error) {
            (Some(req), Some(kind)) => self.fail(req, kind, now),
            // closed with a request but no error to blame (an idle close raced our send): retry it
            (Some(req), None) => self.pending.push_front(req),
            _ => {}
        }
    }

    fn housekeeping(&mut self, now: u64) {
        for slot in 0..self.conns.len() {
            let Some(conn) = self.conns[slot].as_ref() else { continue };
            if conn.deadline != 0 && now >= conn.deadline {
                let kind = if conn.state == State::Connecting { ErrorKind::ConnectTimeout } else { ErrorKind::ResponseTimeout };
                self.drop_conn(slot, Some(kind), now);
            }
        }
        if now >= self.cfg.warmup_ns {
            let index = self.interval_index(now);
            self.close_intervals_before(index);
        }
    }

    fn interval_index(&self, at: u64) -> u64 {
        at.saturating_sub(self.cfg.warmup_ns) / self.cfg.interval_ns
    }

    /// The current interval's part, after sending any finished ones (empty ones included).
    fn interval_at(&mut self, at: u64) -> &mut IntervalPart {
        let index = self.interval_index(at);
        self.close_intervals_before(index);
        &mut self.interval
    }

    fn close_intervals_before(&mut self, index: u64) {
        while self.interval.index < index {
            let next = IntervalPart::new(self.interval.index + 1);
            let done = std::mem::replace(&mut self.interval, next);
            let _ = self.intervals.send(done);
        }
    }

    fn phase(&mut self, warm: bool) -> &mut Phase {
        if warm { &mut self.warmup } else { &mut self.measured }
    }
}

/// A connection (being opened) whose receive buffer holds a few Ethernet-sized segments, set
/// before the handshake so the server sends segments of that size and stalls once they wait
/// unread (on loopback's 64 KiB segments a small window would stall on the kernel's timers).
fn slow_reader(addr: SocketAddr) -> io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM.nonblocking().cloexec(),
                                      Some(socket2::Protocol::TCP))?;
    socket.set_recv_buffer_size(SLOW_RCVBUF)?;
    socket.set_tcp_mss(SEGMENT as u32)?;
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(TcpStream::from_std(socket.into()))
}

/// Thread `id`'s share of `total` split over `threads` (the first ones take the remainder).
pub fn split(total: usize, threads: usize, id: usize) -> usize {
    total / threads + usize::from(id < total % threads)
}
