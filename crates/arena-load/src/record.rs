//! What a run records: HDR histograms (µs, 3 significant digits), counts per status and error
//! class, requests per server process, and per-interval summaries. Nothing is stored per request:
//! memory is the same for a minute or an hour.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::response::{parse_server_timing, Head, MAX_TIMING_NAME};

/// Histograms cover 1 µs to 1 hour at 3 significant digits (values are clamped into that range).
pub const SIGFIG: u8 = 3;
pub const MAX_US: u64 = 3_600_000_000;
/// At most this many distinct X-Arena-Pid values are counted one by one (the rest are summed).
pub const MAX_WORKERS: usize = 4096;
/// At most this many distinct Server-Timing metric names get a histogram; values of further names
/// are counted as dropped.
pub const MAX_TIMING_METRICS: usize = 32;

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, SIGFIG).expect("valid histogram bounds")
}

/// Most connections whose own latencies a run keeps (bounded memory: about 2 KiB each).
pub const MAX_TRACKED_CONNECTIONS: usize = 4096;

/// One kept-alive connection's measured requests: how many, and their response times at one
/// significant digit (enough to tell a connection served in milliseconds from one kept waiting for
/// seconds, in a tenth of a full histogram's memory).
#[derive(Debug, Clone)]
pub struct ConnStat {
    pub response: Histogram<u32>,
}

impl Default for ConnStat {
    fn default() -> ConnStat {
        ConnStat { response: Histogram::new_with_bounds(1, MAX_US, 1).expect("valid histogram bounds") }
    }
}

/// A histogram in HdrHistogram's compressed V2 encoding, base64 (what `encodeIntoCompressedByteBuffer`
/// and base64 give in the Java and Python libraries, and what a .hlog line holds).
pub fn encode(h: &Histogram<u64>) -> String {
    use base64::Engine as _;
    use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut bytes).expect("serializing to memory");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Nanoseconds -> whole microseconds, at least 1 (the histogram's lowest value).
pub fn us(ns: u64) -> u64 {
    (ns / 1000).max(1)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Refused,
    ConnectTimeout,
    Reset,
    ResponseTimeout,
    Malformed,
    /// An answer whose status is not in the expected set.
    Status,
    /// The generator could not open a connection on its own side (descriptors, ports).
    Local,
    /// A session's answer without a value one of its next steps needs (a capture not found).
    Capture,
    /// A stream that ended with fewer events than `--events` expects.
    Short,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ErrorCounts {
    pub refused: u64,
    pub connect_timeout: u64,
    pub reset: u64,
    pub response_timeout: u64,
    pub malformed: u64,
    pub status: u64,
    pub local: u64,
    pub capture: u64,
    pub short: u64,
}

impl ErrorCounts {
    pub fn add(&mut self, kind: ErrorKind) {
        *match kind {
            ErrorKind::Refused => &mut self.refused,
            ErrorKind::ConnectTimeout => &mut self.connect_timeout,
            ErrorKind::Reset => &mut self.reset,
            ErrorKind::ResponseTimeout => &mut self.response_timeout,
            ErrorKind::Malformed => &mut self.malformed,
            ErrorKind::Status => &mut self.status,
            ErrorKind::Local => &mut self.local,
            ErrorKind::Capture => &mut self.capture,
            ErrorKind::Short => &mut self.short,
        } += 1;
    }

    pub fn total(&self) -> u64 {
        self.refused + self.connect_timeout + self.reset + self.response_timeout + self.malformed + self.status + self.local
            + self.capture + self.short
    }

    fn merge(&mut self, o: &ErrorCounts) {
        self.refused += o.refused;
        self.connect_timeout += o.connect_timeout;
        self.reset += o.reset;
        self.response_timeout += o.response_timeout;
        self.malformed += o.malformed;
        self.status += o.status;
        self.local += o.local;
        self.capture += o.capture;
        self.short += o.short;
    }
}

/// The streams of a phase (responses of `text/event-stream`, answered with an expected status and
/// every event expected): times from the intended start, as a response's, to the first byte, the
/// first event and the last; and the gaps between events as they arrived.
#[derive(Debug, Clone)]
pub struct Streams {
    pub count: u64,
    pub events: u64,
    pub first_byte: Histogram<u64>,
    pub first_event: Histogram<u64>,
    pub last_event: Histogram<u64>,
    /// Between one event and the next (events read together: 1 µs apart). Every stream's, as they
    /// came, a broken one's too.
    pub gap: Histogram<u64>,
    /// The streams' response times (to their last byte): the phase's less these are the other
    /// answers', each kind reported apart where a mix holds both.
    pub response: Histogram<u64>,
}

impl Default for Streams {
    fn default() -> Streams {
        Streams { count: 0, events: 0, first_byte: histogram(), first_event: histogram(), last_event: histogram(),
                  gap: histogram(), response: histogram() }
    }
}

/// When a stream's first byte, first event and last event reached the client (monotonic ns; 0:
/// none came).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamTimes {
    pub first_byte: u64,
    pub first_event: u64,
    pub last_event: u64,
}

impl Streams {
    /// The response times of the phase's answers that were not streams.
    pub fn others(&self, all: &Histogram<u64>) -> Histogram<u64> {
        let mut rest = all.clone();
        rest.subtract(&self.response).expect("a part of the whole");
        rest
    }

    pub fn record(&mut self, intended_ns: u64, done_ns: u64, times: StreamTimes, events: u32) {
        self.count += 1;
        self.events += u64::from(events);
        self.response.saturating_record(us(done_ns.saturating_sub(intended_ns)));
        self.first_byte.saturating_record(us(times.first_byte.saturating_sub(intended_ns)));
        if events > 0 {
            self.first_event.saturating_record(us(times.first_event.saturating_sub(intended_ns)));
            self.last_event.saturating_record(us(times.last_event.saturating_sub(intended_ns)));
        }
    }

    fn merge(&mut self, o: &Streams) {
        self.count += o.count;
        self.events += o.events;
        for (a, b) in [(&mut self.first_byte, &o.first_byte), (&mut self.first_event, &o.first_event),
                       (&mut self.last_event, &o.last_event), (&mut self.gap, &o.gap), (&mut self.response, &o.response)] {
            a.add(b).expect("same bounds");
        }
    }
}

/// One phase of a run (warm-up or measured).
#[derive(Debug, Clone)]
pub struct Phase {
    /// From the intended send time (open model: the schedule; closed: when the connection was
    /// free to send) to the last byte of the response.
    pub response: Histogram<u64>,
    /// From the first byte written to the last byte of the response.
    pub service: Histogram<u64>,
    pub connect: Histogram<u64>,
    /// Actual send minus intended send: waiting for the generator or for a free connection.
    pub send_lag: Histogram<u64>,
    /// Server-Timing: a histogram per metric name (lower-cased), in the order first seen.
    pub timing: Vec<(Vec<u8>, Histogram<u64>)>,
    /// Server-Timing values not kept: their name was too long or came after MAX_TIMING_METRICS others.
    pub timing_dropped: u64,
    pub status: BTreeMap<u16, u64>,
    pub errors: ErrorCounts,
    pub workers: BTreeMap<u32, u64>,
    pub workers_other: u64,
    /// Requests the schedule issued (their intended time fell in this phase).
    pub issued: u64,
    pub sent: u64,
    /// Responses received, any status.
    pub completed: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub streams: Streams,
}

impl Default for Phase {
    fn default() -> Phase {
        Phase {
            response: histogram(),
            service: histogram(),
            connect: histogram(),
            send_lag: histogram(),
            timing: Vec::new(),
            timing_dropped: 0,
            status: BTreeMap::new(),
            errors: ErrorCounts::default(),
            workers: BTreeMap::new(),
            workers_other: 0,
            issued: 0,
            sent: 0,
            completed: 0,
            bytes_sent: 0,
            bytes_received: 0,
            streams: Streams::default(),
        }
    }
}

impl Phase {
    pub fn record_response(&mut self, intended_ns: u64, sent_ns: u64, done_ns: u64, head: &Head, bytes: u64) {
        self.completed += 1;
        self.bytes_received += bytes;
        self.response.saturating_record(us(done_ns.saturating_sub(intended_ns)));
        self.service.saturating_record(us(done_ns.saturating_sub(sent_ns)));
        *self.status.entry(head.status).or_default() += 1;
        parse_server_timing(&head.timing, |name, v| {
            if let Some(h) = self.timing_for(name) {
                h.saturating_record(v.max(1));
            }
        });
        if let Some(pid) = head.pid {
            if self.workers.len() < MAX_WORKERS || self.workers.contains_key(&pid) {
                *self.workers.entry(pid).or_default() += 1;
            } else {
                self.workers_other += 1;
            }
        }
    }

    /// The histogram of metric `name` (any case), made on first sight while there is room; None
    /// (and counted as dropped) otherwise.
    fn timing_for(&mut self, name: &[u8]) -> Option<&mut Histogram<u64>> {
        match self.timing.iter().position(|(n, _)| n.eq_ignore_ascii_case(name)) {
            Some(i) => Some(&mut self.timing[i].1),
            None if name.len() <= MAX_TIMING_NAME && self.timing.len() < MAX_TIMING_METRICS => {
                self.timing.push((name.to_ascii_lowercase(), histogram()));
                self.timing.last_mut().map(|(_, h)| h)
            }
            None => {
                self.timing_dropped += 1;
                None
            }
        }
    }

    /// An answer that is not a success (its status is not expected, or it lacks what its session
    /// captures): counted by status and as an error of `kind`, not as a completed request, and
    /// kept out of the latency histograms.
    pub fn record_unexpected(&mut self, status: u16, bytes: u64, kind: ErrorKind) {
        self.bytes_received += bytes;
        *self.status.entry(status).or_default() += 1;
        self.errors.add(kind);
    }

    pub fn merge(&mut self, o: &Phase) {
        for (a, b) in [(&mut self.response, &o.response), (&mut self.service, &o.service),
                       (&mut self.connect, &o.connect), (&mut self.send_lag, &o.send_lag)] {
            a.add(b).expect("same bounds");
        }
        self.timing_dropped += o.timing_dropped;
        for (name, h) in &o.timing {
            match self.timing_for(name) {
                Some(mine) => mine.add(h).expect("same bounds"),
                None => self.timing_dropped += h.len().saturating_sub(1), // timing_for counted one
            }
        }
        for (k, v) in &o.status {
            *self.status.entry(*k).or_default() += v;
        }
        self.errors.merge(&o.errors);
        for (k, v) in &o.workers {
            *self.workers.entry(*k).or_default() += v;
        }
        self.workers_other += o.workers_other;
        self.issued += o.issued;
        self.sent += o.sent;
        self.completed += o.completed;
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
        self.streams.merge(&o.streams);
    }
}

/// One worker's share of one interval of the measured phase, sent to the merging thread.
#[derive(Debug)]
pub struct IntervalPart {
    pub index: u64,
    pub response: Histogram<u64>,
    pub completed: u64,
    pub errors: u64,
    pub sent: u64,
    /// The interval's completions per server process (X-Arena-Pid), at most MAX_WORKERS of them:
    /// what each process served by when (a soak fits its memory against them).
    pub workers: BTreeMap<u32, u64>,
}

impl IntervalPart {
    pub fn new(index: u64) -> IntervalPart {
        IntervalPart { index, response: histogram(), completed: 0, errors: 0, sent: 0, workers: BTreeMap::new() }
    }

    pub fn count_worker(&mut self, pid: Option<u32>) {
        if let Some(pid) = pid {
            if self.workers.len() < MAX_WORKERS || self.workers.contains_key(&pid) {
                *self.workers.entry(pid).or_default() += 1;
            }
        }
    }
}

/// One point of the per-interval series.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SeriesPoint {
    /// Start of the interval, seconds since the end of the warm-up.
    pub t: f64,
    pub sent: u64,
    pub completed: u64,
    pub errors: u64,
    pub p50_us: Option<u64>,
    pub p90_us: Option<u64>,
    pub p99_us: Option<u64>,
    pub max_us: Option<u64>,
    /// The interval's response-time histogram, encoded (`encode`): a per-interval .hlog, or
    /// several load hosts' intervals merged exactly.
    pub hdr: String,
    /// Its completions per server process (pid -> count), where the server names its processes.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub workers: BTreeMap<String, u64>,
}

/// Merges the parts of each interval from every worker; an interval is summarized (and its
/// histogram dropped) as soon as all workers have sent their part.
pub struct SeriesMerger {
    workers: usize,
    interval_s: f64,
    open: BTreeMap<u64, (usize, IntervalPart)>,
    pub points: Vec<SeriesPoint>,
}

impl SeriesMerger {
    pub fn new(workers: usize, interval_s: f64) -> SeriesMerger {
        SeriesMerger { workers, interval_s, open: BTreeMap::new(), points: Vec::new() }
    }

    pub fn add(&mut self, part: IntervalPart) {
        let index = part.index;
        let entry = self.open.entry(index).or_insert_with(|| (0, IntervalPart::new(index)));
        entry.0 += 1;
        entry.1.response.add(&part.response).expect("same bounds");
        entry.1.completed += part.completed;
        entry.1.errors += part.errors;
        entry.1.sent += part.sent;
        for (pid, n) in &part.workers {
            *entry.1.workers.entry(*pid).or_default() += n;
        }
        if entry.0 == self.workers {
            let (_, done) = self.open.remove(&index).expect("present");
            self.points.push(self.summarize(done));
        }
    }

    /// Summarize what is left (a worker ended early, e.g. interrupted) and return the series.
    pub fn finish(mut self) -> Vec<SeriesPoint> {
        let rest: Vec<_> = std::mem::take(&mut self.open).into_values().collect();
        for (_, part) in rest {
            let p = self.summarize(part);
            self.points.push(p);
        }
        self.points.sort_by(|a, b| a.t.total_cmp(&b.t));
        self.points
    }

    fn summarize(&self, part: IntervalPart) -> SeriesPoint {
        let h = &part.response;
        let q = |x: f64| (h.len() > 0).then(|| h.value_at_quantile(x));
        SeriesPoint {
            t: part.index as f64 * self.interval_s,
            sent: part.sent,
            completed: part.completed,
            errors: part.errors,
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            max_us: (h.len() > 0).then(|| h.max()),
            hdr: encode(h),
            workers: part.workers.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_is_recorded_from_its_intended_time() {
        let mut p = Phase::default();
        let head = Head { status: 200, timing: b"queue;dur=0.1, app;dur=0.9".to_vec(), pid: Some(7), close: false, ..Head::default() };
        // intended at 0, sent 2 ms late, answered 5 ms after the send
        p.record_response(0, 2_000_000, 7_000_000, &head, 10);
        assert_eq!(p.response.max(), p.response.highest_equivalent(7000));
        assert_eq!(p.service.max(), p.service.highest_equivalent(5000));
        assert_eq!((p.completed, p.status[&200], p.workers[&7], p.bytes_received), (1, 1, 1, 10));
        let names: Vec<_> = p.timing.iter().map(|(n, h)| (String::from_utf8(n.clone()).unwrap(), h.len())).collect();
        assert_eq!(names, [("queue".into(), 1), ("app".into(), 1)]);
    }

    #[test]
    fn every_server_timing_name_is_kept_up_to_the_bound_and_merged_by_name() {
        let head = |t: &str| Head { status: 200, timing: t.as_bytes().to_vec(), pid: None, close: false, ..Head::default() };
        let mut a = Phase::default();
        a.record_response(0, 0, 1000, &head("sql.active_record;dur=2, App;dur=5"), 0);
        let mut b = Phase::default();
        b.record_response(0, 0, 1000, &head("app;dur=7"), 0);
        for i in 0..MAX_TIMING_METRICS + 3 {
            b.record_response(0, 0, 1000, &head(&format!("m{i};dur=1")), 0);
        }
        b.record_response(0, 0, 1000, &head(&format!("{};dur=1", "x".repeat(MAX_TIMING_NAME + 1))), 0);
        assert_eq!((b.timing.len(), b.timing_dropped), (MAX_TIMING_METRICS, 3 + 1 + 1));
        a.merge(&b);
        let app = a.timing.iter().find(|(n, _)| n == b"app").map(|(_, h)| h.len());
        assert_eq!(app, Some(2), "App and app are one metric");
        // a's 2 names and b's 32 (app among them): 33 distinct, 32 kept; the 33rd's value is dropped
        assert_eq!((a.timing.len(), a.timing_dropped), (MAX_TIMING_METRICS, 5 + 1));
    }

    #[test]
    fn series_merges_every_workers_part_before_summarizing() {
        let mut m = SeriesMerger::new(2, 1.0);
        let mut a = IntervalPart::new(0);
        a.response.record(1000).unwrap();
        a.completed = 1;
        let mut b = IntervalPart::new(0);
        for v in [2000, 3000, 100_000] {
            b.response.record(v).unwrap();
        }
        b.completed = 3;
        a.count_worker(Some(7));
        b.count_worker(Some(7));
        b.count_worker(Some(8));
        b.count_worker(None);
        m.add(a);
        assert!(m.points.is_empty(), "one part of two is not a summary");
        m.add(b);
        let p = &m.points[0];
        // below 2048 a 3-digit histogram is exact; 100000 is kept to within 0.1%
        assert_eq!((p.completed, p.p50_us, p.max_us.map(|v| v / 100)), (4, Some(2000), Some(1000)));
        let per: Vec<_> = p.workers.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(per, [("7", 2), ("8", 1)], "each process's completions, summed over the parts");
        m.add(IntervalPart::new(1)); // an interval where nothing completed (a stall) is kept
        let series = m.finish();
        assert_eq!(series.len(), 2);
        assert_eq!((series[1].completed, series[1].p99_us), (0, None));
    }
}
