//! One run: start the worker threads, merge their interval series as they go, account the
//! generator's own CPU, and combine the workers' results.

use std::io::{self, Write};
use std::sync::atomic::AtomicU64;
use std::sync::mpsc;

use hdrhistogram::Histogram;

use crate::engine::{mono_ns, Config, Worker};
use crate::record::{histogram, ConnStat, Phase, SeriesMerger, SeriesPoint};

pub struct Outcome {
    pub started_at: f64,
    pub warmup: Phase,
    pub measured: Phase,
    pub series: Vec<SeriesPoint>,
    pub schedule_lag: Histogram<u64>,
    pub unsent: u64,
    pub in_flight: u64,
    /// The measured window, ns since start: from the end of the warm-up to its end.
    pub window_ns: (u64, u64),
    pub wall_s: f64,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    pub interrupted: bool,
    /// The most connections open at once (all threads), and the first reason one could not be
    /// opened on the generator's side.
    pub peak_connections: usize,
    pub open_failure: Option<String>,
    /// The run's hard bound cut the wait for answers still in flight.
    pub cut: bool,
    /// The longest time a worker's loop woke past its own deadline (ns): the generator not running.
    pub loop_late_ns: u64,
    /// Answers whose session's capture was not found, by (session, capture), all threads.
    pub missed: std::collections::BTreeMap<(String, String), u64>,
    /// Kept-alive connections' own measured latencies (all threads), and those opened untracked.
    pub connections: Vec<ConnStat>,
    pub untracked: u64,
}

fn rusage() -> (f64, f64) {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(u.ru_utime), secs(u.ru_stime))
}

pub fn run(cfg: &Config) -> io::Result<Outcome> {
    let started_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let (user0, sys0) = rusage();
    let start = mono_ns();
    let issued = AtomicU64::new(0);
    let (tx, rx) = mpsc::channel();
    let (results, series) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|id| {
                let (tx, issued) = (tx.clone(), &issued);
                s.spawn(move || Worker::new(cfg, id, start, issued, tx)?.run())
            })
            .collect();
        drop(tx);
        let mut merger = SeriesMerger::new(cfg.threads, cfg.interval_ns as f64 / 1e9);
        let mut live_sent = 0;
        for part in rx {
            merger.add(part); // until every worker has finished and dropped its sender
            if cfg.live && merger.points.len() > live_sent {
                let mut err = std::io::stderr().lock();
                for p in &merger.points[live_sent..] {
                    let _ = writeln!(err, "{}", serde_json::to_string(p).expect("a point serializes"));
                }
                live_sent = merger.points.len();
            }
        }
        let results: Vec<_> = handles.into_iter().map(|h| h.join().expect("worker thread panicked")).collect();
        (results, merger.finish())
    });
    let wall_s = (mono_ns() - start) as f64 / 1e9;
    let (user1, sys1) = rusage();
    let mut out = Outcome {
        started_at, warmup: Phase::default(), measured: Phase::default(), series, schedule_lag: histogram(),
        unsent: 0, in_flight: 0, window_ns: (cfg.warmup_ns, cfg.warmup_ns), wall_s, cpu_user_s: user1 - user0,
        cpu_system_s: sys1 - sys0, interrupted: crate::engine::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed),
        peak_connections: 0, open_failure: None, cut: false, loop_late_ns: 0, missed: Default::default(),
        connections: Vec::new(), untracked: 0,
    };
    let (mut issue_end, mut last_done) = (0, 0);
    for r in results {
        let r = r?;
        out.warmup.merge(&r.warmup);
        out.measured.merge(&r.measured);
        out.schedule_lag.add(&r.schedule_lag).expect("same bounds");
        out.unsent += r.unsent;
        out.in_flight += r.in_flight;
        issue_end = issue_end.max(r.issue_end_ns);
        last_done = last_done.max(r.last_done_ns);
        out.peak_connections += r.peak_conns;
        out.open_failure = out.open_failure.or(r.open_failure);
        out.cut |= r.cut;
        out.loop_late_ns = out.loop_late_ns.max(r.loop_late_ns);
        for (key, n) in r.missed {
            *out.missed.entry(key).or_default() += n;
        }
        out.connections.extend(r.connections);
        out.untracked += r.untracked;
    }
    // A run bounded by time measures its schedule's window; one bounded by count (or cut short)
    // measures until its last answer.
    let end = match cfg.stop.end_ns {
        Some(end) if issue_end >= end && !out.interrupted => end,
        _ => issue_end.max(last_done),
    };
    out.window_ns = (cfg.warmup_ns, end.max(cfg.warmup_ns));
    Ok(out)
}
