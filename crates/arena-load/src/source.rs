//! Which request comes next, and when: the request source the event loop asks. Pure: no sockets,
//! no clock of its own (every call is given `now`), nothing recorded.
//!
//! The open model takes requests from a [`Pacer`] (intended send times fixed in advance); the
//! closed model has `users`, each issuing its next request when its previous one ends, after a
//! think time. Either way a request is issued only while the [`Stop`] rule allows it: before the
//! run's end and, for measured requests, until the count shared by all threads is reached. Each
//! request draws its template from the mix's weights with a seeded generator.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::pacer::{Pacer, SplitMix64, Stop};

/// A request the source issued: when it was meant to be sent, which template, and whether it
/// falls in the warm-up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub intended: u64,
    pub template: usize,
    pub warm: bool,
}

pub struct Source<'a> {
    pacer: Option<Pacer>,
    think_ns: u64,
    stop: Stop,
    warmup_ns: u64,
    /// Closed users thinking: (time their next request is due, a tie-breaker).
    thinking: BinaryHeap<Reverse<(u64, u64)>>,
    seq: u64,
    rng: SplitMix64,
    cumulative: Vec<u64>,
    /// Measured requests issued by every thread together (for a count-bounded stop).
    measured_issued: &'a AtomicU64,
    issuing: bool,
    issue_end: Option<u64>,
}

impl<'a> Source<'a> {
    /// An open-model source (`pacer`) or a closed one (`pacer` None, `think_ns` between a user's
    /// answer and its next request). `weights`: the mix's template weights.
    pub fn new(pacer: Option<Pacer>, think_ns: u64, stop: Stop, warmup_ns: u64, weights: &[u32], seed: u64,
               measured_issued: &'a AtomicU64) -> Source<'a> {
        let mut total = 0;
        let cumulative = weights.iter().map(|w| { total += u64::from(*w); total }).collect();
        Source { pacer, think_ns, stop, warmup_ns, thinking: BinaryHeap::new(), seq: 0, rng: SplitMix64::new(seed),
                 cumulative, measured_issued, issuing: true, issue_end: None }
    }

    /// Whether the source still issues requests.
    pub fn issuing(&self) -> bool {
        self.issuing
    }

    /// When the source stopped issuing (None: it still does).
    pub fn issue_end(&self) -> Option<u64> {
        self.issue_end
    }

    /// Stop issuing at `now` (the time is up, or the run was interrupted). Users still thinking
    /// never issue their next request.
    pub fn halt(&mut self, now: u64) {
        if self.issuing {
            self.issuing = false;
            self.issue_end = Some(now);
        }
        self.thinking.clear();
    }

    /// A new request intended at `at`, if the stop rule allows it.
    pub fn issue(&mut self, at: u64) -> Option<Request> {
        if !self.issuing {
            return None;
        }
        let warm = at < self.warmup_ns;
        // only measured requests count towards a request count (and only when there is one)
        let before = if warm || self.stop.requests.is_none() { 0 } else { self.measured_issued.fetch_add(1, Ordering::Relaxed) };
        if self.stop.done(at, before) {
            self.halt(at);
            return None;
        }
        let template = if self.cumulative.len() <= 1 {
            0
        } else {
            let x = self.rng.next_u64() % self.cumulative.last().copied().unwrap_or(1);
            self.cumulative.partition_point(|c| *c <= x)
        };
        Some(Request { intended: at, template, warm })
    }

    /// Every request due by `now`, in order: users whose think time is over, then the pacer's
    /// arrivals. `lag(ns)` hears how late each arrival is taken (the generator's schedule lag).
    pub fn due(&mut self, now: u64, mut lag: impl FnMut(u64), mut out: impl FnMut(Request)) {
        while let Some(Reverse((t, _))) = self.thinking.peek().copied() {
            if t > now {
                break;
            }
            self.thinking.pop();
            if let Some(req) = self.issue(t) {
                out(req);
            }
        }
        while self.issuing {
            let Some(t) = self.pacer.as_mut().and_then(|p| p.take_due(now)) else { break };
            lag(now - t);
            if let Some(req) = self.issue(t) {
                out(req);
            }
        }
    }

    /// Closed model: a user's request ended at `now`; its next request, if it is due at once (no
    /// think time). With a think time the user waits and [`Source::due`] issues it later. Open
    /// model: None (arrivals do not depend on answers).
    pub fn answered(&mut self, now: u64) -> Option<Request> {
        if self.pacer.is_some() {
            return None;
        }
        if self.think_ns == 0 {
            return self.issue(now);
        }
        if self.issuing {
            self.seq += 1;
            self.thinking.push(Reverse((now + self.think_ns, self.seq)));
        }
        None
    }

    /// The next time the source has something to issue, or must stop (None: nothing pending).
    pub fn next_wake(&self) -> Option<u64> {
        let arrivals = self.pacer.as_ref().filter(|_| self.issuing).map(Pacer::peek);
        let thinking = self.thinking.peek().map(|Reverse((t, _))| *t);
        let end = self.stop.end_ns.filter(|_| self.issuing);
        [arrivals, thinking, end].into_iter().flatten().min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(s: &mut Source, now: u64) -> (Vec<Request>, Vec<u64>) {
        let (mut reqs, mut lags) = (Vec::new(), Vec::new());
        s.due(now, |l| lags.push(l), |r| reqs.push(r));
        (reqs, lags)
    }

    #[test]
    fn open_source_issues_the_pacers_arrivals_with_their_lag_and_stops_at_the_end() {
        let count = AtomicU64::new(0);
        let stop = Stop { end_ns: Some(1_000_000_000), requests: None };
        let mut s = Source::new(Some(Pacer::constant(10.0, 0.0)), 0, stop, 200_000_000, &[1], 1, &count);
        let (reqs, lags) = collect(&mut s, 250_000_000);
        assert_eq!(reqs.iter().map(|r| (r.intended, r.warm)).collect::<Vec<_>>(),
                   vec![(0, true), (100_000_000, true), (200_000_000, false)]);
        assert_eq!(lags, vec![250_000_000, 150_000_000, 50_000_000]);
        assert_eq!(s.next_wake(), Some(300_000_000));
        assert_eq!(s.answered(300_000_000), None); // arrivals do not depend on answers
        let (reqs, _) = collect(&mut s, 2_000_000_000);
        assert_eq!(reqs.len(), 7); // 0.3 .. 0.9 s; the arrival at 1.0 s is past the end
        assert!(!s.issuing() && s.issue_end() == Some(1_000_000_000) && s.next_wake().is_none());
    }

    #[test]
    fn closed_users_issue_on_answers_after_their_think_time() {
        let count = AtomicU64::new(0);
        let stop = Stop { end_ns: Some(10_000), requests: None };
        let mut s = Source::new(None, 100, stop, 0, &[1], 1, &count);
        let first = s.issue(0).unwrap();
        assert_eq!((first.intended, first.warm), (0, false));
        assert_eq!(s.answered(50), None); // thinking until 150
        assert_eq!(s.next_wake(), Some(150));
        assert!(collect(&mut s, 149).0.is_empty());
        assert_eq!(collect(&mut s, 160).0, vec![Request { intended: 150, template: 0, warm: false }]);
        let mut no_think = Source::new(None, 0, stop, 0, &[1], 1, &count);
        assert_eq!(no_think.answered(70).map(|r| r.intended), Some(70));
        no_think.halt(80);
        assert_eq!(no_think.answered(90), None);
    }

    #[test]
    fn a_request_count_is_shared_by_every_source_and_counts_measured_requests_only() {
        let count = AtomicU64::new(0);
        let stop = Stop { end_ns: None, requests: Some(3) };
        let mut a = Source::new(None, 0, stop, 100, &[1], 1, &count);
        let mut b = Source::new(None, 0, stop, 100, &[1], 2, &count);
        assert!(a.issue(0).unwrap().warm && b.issue(50).unwrap().warm); // warm-up: not counted
        assert!(a.issue(100).is_some() && b.issue(100).is_some() && a.issue(101).is_some());
        assert_eq!(b.issue(102), None); // the fourth measured request of the two together
        assert!(!b.issuing() && a.issuing());
        assert_eq!(a.issue(103), None);
    }

    #[test]
    fn templates_follow_the_weights_and_the_seed() {
        let count = AtomicU64::new(0);
        let stop = Stop { end_ns: None, requests: None };
        let mut s = Source::new(None, 0, stop, 0, &[1, 3], 7, &count);
        let picks: Vec<usize> = (0..40_000).map(|i| s.issue(i).unwrap().template).collect();
        let share = picks.iter().filter(|t| **t == 1).count() as f64 / picks.len() as f64;
        assert!((share - 0.75).abs() < 0.01, "{share}");
        let mut again = Source::new(None, 0, stop, 0, &[1, 3], 7, &count);
        assert!((0..100).all(|i| again.issue(i).unwrap().template == picks[i as usize]));
    }
}
