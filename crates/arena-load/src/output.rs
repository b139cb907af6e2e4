//! The result document (schemas/load-result.schema.json, `schema_version` 2).
//!
//! Histograms travel in HdrHistogram's standard compressed form (the V2 encoding, deflated, then
//! base64: what `encodeIntoCompressedByteBuffer` + base64 gives in the Java and Python libraries),
//! so any HdrHistogram library can load and merge them. Common percentiles are precomputed by
//! nearest rank (the hdrhistogram crate's `value_at_quantile`): the value at quantile q of N values
//! is the smallest v with at least ceil(q * N) values (and at least one) at or below it, reported as
//! the highest value equivalent to v at the histogram's precision. Arena's Python side uses the
//! same rule (src/arena/stats.py).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::engine::{Arrival, Config, Model};
use crate::record::{encode, ErrorCounts, Phase, SeriesPoint};
use crate::run::Outcome;

pub const SCHEMA_VERSION: u32 = 2;
/// Generator CPU busier than this fraction of its threads' time: the generator limited the run.
pub const SATURATED_UTILIZATION: f64 = 0.9;
/// Open model: the loop took most requests (p90) from the schedule this late (µs): it could not
/// keep up. (A tail of late wake-ups, a preemption, is not saturation: an overloaded loop is late
/// for nearly every request.)
pub const SATURATED_SCHEDULE_LAG_US: u64 = 1000;
pub const SATURATED_SCHEDULE_LAG_QUANTILE: f64 = 0.9;
/// A loop that wakes this long past the deadline it set was not running (SIGSTOP, a CPU it did not
/// get): what its connections saw in that time is the generator's pause, not the target's. A
/// scheduler's time slice is milliseconds; 100 ms is no slice.
pub const GENERATOR_PAUSE_NS: u64 = 100_000_000;
pub const PERCENTILES: [(&str, f64); 8] =
    [("50", 0.5), ("75", 0.75), ("90", 0.9), ("95", 0.95), ("99", 0.99), ("99.9", 0.999), ("99.99", 0.9999), ("100", 1.0)];

#[derive(Serialize)]
pub struct Document {
    pub schema: &'static str,
    pub schema_version: u32,
    pub tool: Tool,
    pub started_at: f64,
    pub config: ConfigOut,
    pub interrupted: bool,
    pub measured: PhaseOut,
    pub warmup: Option<PhaseOut>,
    pub series: Vec<SeriesPoint>,
    pub generator: Generator,
    /// Answers in which a session's capture was not found (each an error of class capture).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub captures_missed: Vec<Missed>,
    /// Each kept-alive connection's own measured requests (None: a connection per request).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_connection: Option<PerConnection>,
    pub validity: Validity,
}

/// Kept-alive connections side by side, in the order they opened: how many measured requests
/// each had and their response times' p50 and p99 (µs, at one significant digit), for those with
/// at least one; `untracked`: connections opened past MAX_TRACKED_CONNECTIONS.
#[derive(Serialize)]
pub struct PerConnection {
    pub requests: Vec<u64>,
    pub p50_us: Vec<u64>,
    pub p99_us: Vec<u64>,
    pub untracked: u64,
}

impl PerConnection {
    fn of(stats: &[crate::record::ConnStat], untracked: u64) -> PerConnection {
        let used: Vec<_> = stats.iter().filter(|s| s.response.len() > 0).collect();
        PerConnection {
            requests: used.iter().map(|s| s.response.len()).collect(),
            p50_us: used.iter().map(|s| s.response.value_at_quantile(0.5)).collect(),
            p99_us: used.iter().map(|s| s.response.value_at_quantile(0.99)).collect(),
            untracked,
        }
    }
}

#[derive(Serialize)]
pub struct Missed {
    pub session: String,
    pub capture: String,
    pub answers: u64,
}

/// arena-load's own verdict on the run (its exit status follows it: 1 when invalid).
#[derive(Serialize)]
pub struct Validity {
    pub valid: bool,
    pub reasons: Vec<String>,
}

#[derive(Serialize)]
pub struct Tool {
    pub name: &'static str,
    pub version: &'static str,
}

#[derive(Serialize)]
pub struct ConfigOut {
    pub url: String,
    pub model: &'static str,
    pub connections: usize,
    pub rate: Option<f64>,
    pub arrival: Option<&'static str>,
    pub think_ms: Option<f64>,
    pub duration_s: Option<f64>,
    pub requests: Option<u64>,
    pub warmup_s: f64,
    pub keep_alive: bool,
    /// The emulated client link (null: off).
    pub link: Option<LinkOut>,
    pub request_start: bool,
    pub connect_timeout_s: f64,
    pub timeout_s: f64,
    pub interval_s: f64,
    pub threads: usize,
    pub seed: u64,
    pub mix: Vec<MixOut>,
    pub expect_status: String,
    pub max_error_rate: f64,
    /// The events each stream should hold (--events; null: not said).
    pub events: Option<u32>,
}

#[derive(Serialize)]
pub struct LinkOut {
    pub delay_ms: f64,
    pub upload_bps: Option<u64>,
    pub download_bps: Option<u64>,
}

#[derive(Serialize)]
pub struct MixOut {
    pub weight: u32,
    pub method: String,
    pub target: String,
}

#[derive(Serialize)]
pub struct PhaseOut {
    pub duration_s: f64,
    pub requests: Requests,
    pub rate: Rates,
    pub status: BTreeMap<String, u64>,
    pub errors: ErrorCounts,
    pub workers: BTreeMap<String, u64>,
    pub workers_other: u64,
    pub bytes: Bytes,
    pub latency: Latency,
    pub server_timing: BTreeMap<String, Hist>,
    /// Server-Timing values not kept (a name too long, or past the bound on distinct names).
    pub server_timing_dropped: u64,
    /// Streams of server-sent events, where any was answered (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<StreamsOut>,
}

#[derive(Serialize)]
pub struct StreamsOut {
    pub count: u64,
    pub events: u64,
    pub first_byte: Hist,
    pub first_event: Hist,
    pub event_gap: Hist,
    pub last_event: Hist,
    /// The other answers' response times (those that were not streams), apart from the streams'.
    pub others_response_time: Hist,
}

#[derive(Serialize)]
pub struct Requests {
    pub issued: u64,
    pub sent: u64,
    pub completed: u64,
    pub errors: u64,
    pub unsent: u64,
    pub in_flight: u64,
}

#[derive(Serialize)]
pub struct Rates {
    pub offered_rps: f64,
    pub sent_rps: f64,
    pub achieved_rps: f64,
}

#[derive(Serialize)]
pub struct Bytes {
    pub sent: u64,
    pub received: u64,
}

#[derive(Serialize)]
pub struct Latency {
    pub response_time: Hist,
    pub service_time: Hist,
    pub connect_time: Hist,
    pub send_lag: Hist,
}

#[derive(Serialize)]
pub struct Hist {
    pub unit: &'static str,
    pub count: u64,
    pub min: Option<u64>,
    pub max: Option<u64>,
    pub mean: Option<f64>,
    pub stdev: Option<f64>,
    pub percentiles: BTreeMap<&'static str, u64>,
    pub hdr: String,
}

#[derive(Serialize)]
pub struct Generator {
    pub threads: usize,
    pub wall_s: f64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    pub cpu_per_request_us: Option<f64>,
    pub utilization: f64,
    pub schedule_lag: Option<Hist>,
    pub saturated: bool,
    pub saturation_reasons: Vec<String>,
    /// The most connections open at once, and why one could not be opened here (if so).
    pub peak_connections: usize,
    pub open_failure: Option<String>,
    /// The run's hard bound (end + longest timeout + 1 s) cut the wait for answers in flight.
    pub cut_at_bound: bool,
    /// The longest time the generator's loop did not run past its own deadline (ms).
    pub paused_ms: f64,
    /// Beyond this pause (ms) the generator counts itself saturated: GENERATOR_PAUSE_NS, stated so
    /// a reader judges by this build's limit rather than a copy of it.
    pub pause_limit_ms: f64,
}

pub fn hist(h: &Histogram<u64>) -> Hist {
    let some = h.len() > 0;
    Hist {
        unit: "us",
        count: h.len(),
        min: some.then(|| h.min()),
        max: some.then(|| h.max()),
        mean: some.then(|| h.mean()),
        stdev: some.then(|| h.stdev()),
        percentiles: if some { PERCENTILES.iter().map(|(k, q)| (*k, h.value_at_quantile(*q))).collect() } else { BTreeMap::new() },
        hdr: encode(h),
    }
}

fn phase(p: &Phase, duration_s: f64, unsent: u64, in_flight: u64) -> PhaseOut {
    let per_s = |n: u64| if duration_s > 0.0 { n as f64 / duration_s } else { 0.0 };
    PhaseOut {
        duration_s,
        requests: Requests { issued: p.issued, sent: p.sent, completed: p.completed, errors: p.errors.total(), unsent, in_flight },
        rate: Rates { offered_rps: per_s(p.issued), sent_rps: per_s(p.sent), achieved_rps: per_s(p.completed) },
        status: p.status.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        errors: p.errors,
        workers: p.workers.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        workers_other: p.workers_other,
        bytes: Bytes { sent: p.bytes_sent, received: p.bytes_received },
        latency: Latency { response_time: hist(&p.response), service_time: hist(&p.service),
                           connect_time: hist(&p.connect), send_lag: hist(&p.send_lag) },
        server_timing: p.timing.iter().map(|(name, h)| (String::from_utf8_lossy(name).into_owned(), hist(h))).collect(),
        server_timing_dropped: p.timing_dropped,
        streams: (p.streams.count > 0 || p.errors.short > 0).then(|| {
            let s = &p.streams;
            StreamsOut { count: s.count, events: s.events, first_byte: hist(&s.first_byte), first_event: hist(&s.first_event),
                         event_gap: hist(&s.gap), last_event: hist(&s.last_event),
                         others_response_time: hist(&s.others(&p.response)) }
        }),
    }
}

/// Why the generator itself may have been the bottleneck (empty: it was not): its CPU busy beyond
/// SATURATED_UTILIZATION, or, in the open model (`schedule_lag` given), arrivals taken late at
/// the SATURATED_SCHEDULE_LAG_QUANTILE.
pub fn saturation(utilization: f64, schedule_lag: Option<&Histogram<u64>>, loop_late_ns: u64) -> Vec<String> {
    let mut reasons = Vec::new();
    if loop_late_ns > GENERATOR_PAUSE_NS {
        reasons.push(format!("the generator did not run for {} ms (it was stopped, or starved of CPU)",
                             loop_late_ns / 1_000_000));
    }
    if utilization > SATURATED_UTILIZATION {
        reasons.push(format!("generator CPU {:.0}% busy (limit {:.0}%)", utilization * 100.0, SATURATED_UTILIZATION * 100.0));
    }
    if let Some(lags) = schedule_lag.filter(|h| h.len() > 0) {
        let lag = lags.value_at_quantile(SATURATED_SCHEDULE_LAG_QUANTILE);
        if lag > SATURATED_SCHEDULE_LAG_US {
            reasons.push(format!("schedule lag p90 {lag} us (limit {SATURATED_SCHEDULE_LAG_US} us)"));
        }
    }
    reasons
}

pub fn document(cfg: &Config, url: &str, out: &Outcome) -> Document {
    let measured_s = (out.window_ns.1 - out.window_ns.0) as f64 / 1e9;
    let total_requests = out.warmup.sent + out.measured.sent;
    let utilization = (out.cpu_user_s + out.cpu_system_s) / (out.wall_s * cfg.threads as f64).max(1e-9);
    let open = matches!(cfg.model, Model::Open { .. });
    let reasons = saturation(utilization, open.then_some(&out.schedule_lag), out.loop_late_ns);
    let (connections, rate, arrival, think) = match cfg.model {
        Model::Closed { connections, think_ns } => (connections, None, None, Some(think_ns as f64 / 1e6)),
        Model::Open { rate, arrival, max_connections } => (max_connections, Some(rate), Some(match arrival {
            Arrival::Constant => "constant",
            Arrival::Poisson => "poisson",
            Arrival::Schedule => "schedule",
        }), None),
    };
    Document {
        schema: "arena-load-result",
        schema_version: SCHEMA_VERSION,
        tool: Tool { name: "arena-load", version: env!("CARGO_PKG_VERSION") },
        started_at: out.started_at,
        config: ConfigOut {
            url: url.to_string(), model: if open { "open" } else { "closed" }, connections, rate, arrival,
            think_ms: think,
            duration_s: cfg.stop.end_ns.map(|e| (e - cfg.warmup_ns) as f64 / 1e9), requests: cfg.stop.requests,
            warmup_s: cfg.warmup_ns as f64 / 1e9, keep_alive: cfg.keep_alive,
            link: cfg.link.is_on().then(|| LinkOut {
                delay_ms: cfg.link.delay_ns as f64 / 1e6,
                upload_bps: (cfg.link.upload_bps > 0).then_some(cfg.link.upload_bps),
                download_bps: (cfg.link.download_bps > 0).then_some(cfg.link.download_bps),
            }),
            request_start: cfg.request_start,
            connect_timeout_s: cfg.connect_timeout_ns as f64 / 1e9, timeout_s: cfg.response_timeout_ns as f64 / 1e9,
            interval_s: cfg.interval_ns as f64 / 1e9, threads: cfg.threads, seed: cfg.seed,
            mix: cfg.templates.iter().map(|t| MixOut { weight: t.weight, method: t.method.clone(), target: t.target.clone() }).collect(),
            expect_status: cfg.expect.describe(), max_error_rate: cfg.max_error_rate, events: cfg.events,
        },
        interrupted: out.interrupted,
        measured: phase(&out.measured, measured_s, out.unsent, out.in_flight),
        warmup: (cfg.warmup_ns > 0).then(|| phase(&out.warmup, cfg.warmup_ns as f64 / 1e9, 0, 0)),
        series: out.series.clone(),
        generator: Generator {
            threads: cfg.threads,
            wall_s: out.wall_s,
            cpu_user_s: out.cpu_user_s,
            cpu_system_s: out.cpu_system_s,
            cpu_per_request_us: (total_requests > 0)
                .then(|| (out.cpu_user_s + out.cpu_system_s) * 1e6 / total_requests as f64),
            utilization,
            schedule_lag: open.then(|| hist(&out.schedule_lag)),
            saturated: !reasons.is_empty(),
            saturation_reasons: reasons.clone(),
            paused_ms: out.loop_late_ns as f64 / 1e6,
            pause_limit_ms: GENERATOR_PAUSE_NS as f64 / 1e6,
            peak_connections: out.peak_connections,
            open_failure: out.open_failure.clone(),
            cut_at_bound: out.cut,
        },
        per_connection: cfg.keep_alive.then(|| PerConnection::of(&out.connections, out.untracked)),
        captures_missed: out.missed.iter()
            .map(|((session, capture), n)| Missed { session: session.clone(), capture: capture.clone(), answers: *n })
            .collect(),
        validity: validity(cfg, out, &reasons),
    }
}

/// Why the run cannot be trusted (none: it can): the generator saturated, no request succeeded,
/// errors beyond `max_error_rate` of the answered requests, or connections it could not open on
/// its own side.
pub fn validity(cfg: &Config, out: &Outcome, saturation: &[String]) -> Validity {
    let m = &out.measured;
    let mut reasons: Vec<String> = saturation.iter().map(|r| format!("generator saturated: {r}")).collect();
    let errors = m.errors.total();
    let share = 100.0 * errors as f64 / (m.completed + errors).max(1) as f64;
    let too_many = errors as f64 > cfg.max_error_rate * (m.completed + errors) as f64;
    if m.completed == 0 {
        reasons.push(format!("no request succeeded ({errors} errors)"));
    } else if too_many {
        reasons.push(format!("errors {share:.1}% of the answered requests (limit {:.1}%)", 100.0 * cfg.max_error_rate));
    }
    if too_many {
        // what a session looked for and did not find: the likeliest cause of its errors
        reasons.extend(out.missed.iter().map(|((session, capture), n)| {
            format!("session '{session}': capture '{capture}' not found in {n} answers")
        }));
    }
    if let Some(why) = &out.open_failure {
        reasons.push(format!("could not open every connection asked for: {} requests failed here ({why}); \
                              most open at once: {}", m.errors.local + out.warmup.errors.local, out.peak_connections));
    }
    Validity { valid: reasons.is_empty(), reasons }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::histogram;

    #[test]
    fn saturation_by_cpu_or_by_late_arrivals_in_the_open_model_only() {
        assert!(saturation(0.5, None, 0).is_empty());
        assert_eq!(saturation(0.95, None, 0), vec!["generator CPU 95% busy (limit 90%)".to_string()]);
        let mut late = histogram();
        for _ in 0..100 {
            late.record(5_000).unwrap(); // every arrival taken 5 ms late
        }
        let reasons = saturation(0.5, Some(&late), 0);
        assert_eq!(reasons.len(), 1);
        assert!(reasons[0].starts_with("schedule lag p90 50"), "{reasons:?}");
        let mut punctual = histogram();
        for _ in 0..95 {
            punctual.record(20).unwrap();
        }
        for _ in 0..5 {
            punctual.record(50_000).unwrap(); // a few preemptions: a tail, not saturation
        }
        assert!(saturation(0.5, Some(&punctual), 0).is_empty());
        assert!(saturation(0.5, Some(&histogram()), 0).is_empty()); // no arrivals: nothing to judge
        // the loop woke 0.8 s past its deadline: the generator was not running, not the target slow
        assert_eq!(saturation(0.1, None, 800_000_000),
                   vec!["the generator did not run for 800 ms (it was stopped, or starved of CPU)".to_string()]);
        assert!(saturation(0.1, None, 20_000_000).is_empty()); // a scheduler's slice: no pause
    }
}

/// Write the result to `path` as the user pointed at it. A regular file (or a new path) is
/// replaced atomically: the bytes go to a temporary file beside it, renamed over it, so a reader
/// never sees half a result. Anything else is written in place and stays what it is: a character
/// device (`/dev/null`, `/dev/stdout`), a FIFO (a reader at its other end), a symlink (written
/// through, like a shell's `>`: the link stays a link and nothing is created beside its target).
pub fn write_result(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => {
            let mut f = std::fs::OpenOptions::new().write(true).truncate(m.file_type().is_symlink()).open(path)?;
            f.write_all(bytes)
        }
        Ok(_) => replace(path, bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => replace(path, bytes),
        Err(e) => Err(e),
    }
}

/// A temporary file of its own beside `path` (never one that exists), then renamed over it.
fn replace(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.partial", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
