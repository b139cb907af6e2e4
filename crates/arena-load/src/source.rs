//! Which request comes next, and when: the request source the event loop asks. Pure: no sockets,
//! no clock of its own (every call is given `now`), nothing recorded.
//!
//! Requests come in sessions: a user draws a session by weight, then sends its steps one after
//! the other, each when the one before was answered (after the session's think time). A plain mix
//! is sessions of one request each. The open model starts a session at each of a [`Pacer`]'s
//! arrivals (intended send times fixed in advance), and its user ends with it; the closed model
//! has `users`, each starting its next session when its last one ended, after a think time.
//! Either way a request is issued only while the [`Stop`] rule allows it: before the run's end
//! and, for measured requests, until the count shared by all threads is reached.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::pacer::{Pacer, SplitMix64, Stop};

/// A request the source issued: when it was meant to be sent, which template, whether it falls
/// in the warm-up, and whose it is (the user, its session and the step in it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub intended: u64,
    pub template: usize,
    pub warm: bool,
    pub user: u32,
    pub session: u32,
    pub step: u32,
}

/// A session as the source sees it: its weight, its steps' templates and its think time between
/// steps (None: the run's).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub weight: u32,
    pub steps: Vec<usize>,
    pub think_ns: Option<u64>,
}

pub struct Source<'a> {
    pacer: Option<Pacer>,
    think_ns: u64,
    stop: Stop,
    warmup_ns: u64,
    /// Users thinking: (time their next request is due, a tie-breaker, the user).
    thinking: BinaryHeap<Reverse<(u64, u64, u32)>>,
    seq: u64,
    rng: SplitMix64,
    plans: Vec<Plan>,
    cumulative: Vec<u64>,
    /// Each user's place: (session, step) of its next request, or None before its next session.
    users: Vec<Option<(u32, u32)>>,
    /// Open model: users whose session ended, free for the next arrival.
    free: Vec<u32>,
    /// Measured requests issued by every thread together (for a count-bounded stop).
    measured_issued: &'a AtomicU64,
    issuing: bool,
    issue_end: Option<u64>,
}

impl<'a> Source<'a> {
    /// An open-model source (`pacer`) or a closed one (`pacer` None, `think_ns` between a user's
    /// sessions, and between steps where a session does not say). `plans`: the mix's sessions.
    pub fn new(pacer: Option<Pacer>, think_ns: u64, stop: Stop, warmup_ns: u64, plans: Vec<Plan>, seed: u64,
               measured_issued: &'a AtomicU64) -> Source<'a> {
        let mut total = 0;
        let cumulative = plans.iter().map(|p| { total += u64::from(p.weight); total }).collect();
        Source { pacer, think_ns, stop, warmup_ns, thinking: BinaryHeap::new(), seq: 0, rng: SplitMix64::new(seed),
                 plans, cumulative, users: Vec::new(), free: Vec::new(), measured_issued, issuing: true, issue_end: None }
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

    /// Closed model: the `users` first requests, at 0.
    pub fn start(&mut self, users: usize) -> Vec<Request> {
        self.users = vec![None; users];
        (0..users as u32).filter_map(|u| self.issue(0, u)).collect()
    }

    /// User `user`'s next request, intended at `at`, if the stop rule allows it: the next step of its
    /// session, or the first of a session drawn by weight.
    fn issue(&mut self, at: u64, user: u32) -> Option<Request> {
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
        let (session, step) = match self.users[user as usize] {
            Some(place) => place,
            None => {
                let session = if self.cumulative.len() <= 1 {
                    0
                } else {
                    let x = self.rng.next_u64() % self.cumulative.last().copied().unwrap_or(1);
                    self.cumulative.partition_point(|c| *c <= x)
                };
                (session as u32, 0)
            }
        };
        self.users[user as usize] = Some((session, step));
        let template = self.plans[session as usize].steps[step as usize];
        Some(Request { intended: at, template, warm, user, session, step })
    }

    /// Open model: a new user for an arrival at `at`, and its session's first request.
    fn arrive(&mut self, at: u64) -> Option<Request> {
        let user = self.free.pop().unwrap_or_else(|| {
            self.users.push(None);
            self.users.len() as u32 - 1
        });
        let req = self.issue(at, user);
        if req.is_none() {
            self.free.push(user);
        }
        req
    }

    /// Every request due by `now`, in order: users whose think time is over, then the pacer's
    /// arrivals. `lag(ns)` hears how late each arrival is taken (the generator's schedule lag).
    pub fn due(&mut self, now: u64, mut lag: impl FnMut(u64), mut out: impl FnMut(Request)) {
        while let Some(Reverse((t, _, user))) = self.thinking.peek().copied() {
            if t > now {
                break;
            }
            self.thinking.pop();
            if let Some(req) = self.issue(t, user) {
                out(req);
            }
        }
        while self.issuing {
            let Some(t) = self.pacer.as_mut().and_then(|p| p.take_due(now)) else { break };
            lag(now - t);
            if let Some(req) = self.arrive(t) {
                out(req);
            }
        }
    }

    /// `req` ended at `now`, answered as its session needs (`ok`) or not: its user's next request
    /// if it is due at once (no think time). The next step follows an answer that is `ok`; after
    /// the last step, or a failed one, the session ends: a closed user starts its next one, an open
    /// one ends with it. With a think time the user waits and [`Source::due`] issues it later.
    pub fn answered(&mut self, now: u64, req: &Request, ok: bool) -> Option<Request> {
        let plan = &self.plans[req.session as usize];
        let think = if ok && (req.step as usize) + 1 < plan.steps.len() {
            self.users[req.user as usize] = Some((req.session, req.step + 1));
            plan.think_ns.unwrap_or(self.think_ns)
        } else {
            self.users[req.user as usize] = None;
            if self.pacer.is_some() {
                self.free.push(req.user);
                return None;
            }
            self.think_ns
        };
        if think == 0 {
            return self.issue(now, req.user);
        }
        if self.issuing {
            self.seq += 1;
            self.thinking.push(Reverse((now + think, self.seq, req.user)));
        }
        None
    }

    /// The next time the source has something to issue, or must stop (None: nothing pending).
    pub fn next_wake(&self) -> Option<u64> {
        let arrivals = self.pacer.as_ref().filter(|_| self.issuing).map(Pacer::peek);
        let thinking = self.thinking.peek().map(|Reverse((t, _, _))| *t);
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

    fn plain(weights: &[u32]) -> Vec<Plan> {
        weights.iter().enumerate().map(|(i, w)| Plan { weight: *w, steps: vec![i], think_ns: None }).collect()
    }

    #[test]
    fn open_source_issues_the_pacers_arrivals_with_their_lag_and_stops_at_the_end() {
        let count = AtomicU64::new(0);
        let stop = Stop { end_ns: Some(1_000_000_000), requests: None };
        let mut s = Source::new(Some(Pacer::constant(10.0, 0.0)), 0, stop, 200_000_000, plain(&[1]), 1, &count);
        let (reqs, lags) = collect(&mut s, 250_000_000);
        assert_eq!(reqs.iter().map(|r| (r.intended, r.warm, r.user)).collect::<Vec<_>>(),
                   vec![(0, true, 0), (100_000_000, true, 1), (200_000_000, false, 2)]);
        assert_eq!(lags, vec![250_000_000, 150_000_000, 50_000_000]);
        assert_eq!(s.next_wake(), Some(300_000_000));
        assert_eq!(s.answered(300_000_000, &reqs[1], true), None); // arrivals do not depend on answers
        let (reqs, _) = collect(&mut s, 2_000_000_000);
        assert_eq!(reqs.len(), 7); // 0.3 .. 0.9 s; the arrival at 1.0 s is past the end
        assert_eq!(reqs[0].user, 1); // the user whose session ended is the next arrival's
        assert!(!s.issuing() && s.issue_end() == Some(1_000_000_000) && s.next_wake().is_none());
    }

    #[test]
    fn closed_users_issue_on_answers_after_their_think_time() {
        let count = AtomicU64::new(0);
        let stop = Stop { end_ns: Some(10_000), requests: None };
        let mut s = Source::new(None, 100, stop, 0, plain(&[1]), 1, &count);
        let first = s.start(1)[0];
        assert_eq!((first.intended, first.warm), (0, false));
        assert_eq!(s.answered(50, &first, true), None); // thinking until 150
        assert_eq!(s.next_wake(), Some(150));
        assert!(collect(&mut s, 149).0.is_empty());
        assert_eq!(collect(&mut s, 160).0, vec![Request { intended: 150, template: 0, warm: false, user: 0, session: 0, step: 0 }]);
        let mut no_think = Source::new(None, 0, stop, 0, plain(&[1]), 1, &count);
        let first = no_think.start(1)[0];
        assert_eq!(no_think.answered(70, &first, true).map(|r| r.intended), Some(70));
        no_think.halt(80);
        assert_eq!(no_think.answered(90, &first, true), None);
    }

    #[test]
    fn a_request_count_is_shared_by_every_source_and_counts_measured_requests_only() {
        let count = AtomicU64::new(0);
        let stop = Stop { end_ns: None, requests: Some(3) };
        let mut a = Source::new(None, 0, stop, 100, plain(&[1]), 1, &count);
        let mut b = Source::new(None, 0, stop, 100, plain(&[1]), 2, &count);
        assert!(a.start(1)[0].warm && b.start(1).iter().all(|r| r.warm)); // warm-up: not counted
        assert!(a.issue(100, 0).is_some() && b.issue(100, 0).is_some() && a.issue(101, 0).is_some());
        assert_eq!(b.issue(102, 0), None); // the fourth measured request of the two together
        assert!(!b.issuing() && a.issuing());
        assert_eq!(a.issue(103, 0), None);
    }

    #[test]
    fn sessions_follow_the_weights_and_the_seed() {
        let count = AtomicU64::new(0);
        let stop = Stop { end_ns: None, requests: None };
        let mut s = Source::new(None, 0, stop, 0, plain(&[1, 3]), 7, &count);
        let mut req = s.start(1)[0];
        let mut picks = vec![req.template];
        for i in 1..40_000 {
            req = s.answered(i, &req, true).unwrap();
            picks.push(req.template);
        }
        let share = picks.iter().filter(|t| **t == 1).count() as f64 / picks.len() as f64;
        assert!((share - 0.75).abs() < 0.01, "{share}");
        let mut again = Source::new(None, 0, stop, 0, plain(&[1, 3]), 7, &count);
        let mut req = again.start(1)[0];
        assert!((1..100).all(|i| {
            req = again.answered(i, &req, true).unwrap();
            req.template == picks[i as usize]
        }));
    }

    #[test]
    fn a_session_sends_its_steps_in_order_with_its_think_time_and_ends_at_a_failure() {
        let count = AtomicU64::new(0);
        let stop = Stop { end_ns: None, requests: None };
        let plans = vec![Plan { weight: 1, steps: vec![4, 5, 6], think_ns: Some(10) }];
        let mut s = Source::new(None, 1000, stop, 0, plans.clone(), 1, &count);
        let first = s.start(2);
        assert_eq!(first.iter().map(|r| (r.user, r.template, r.step)).collect::<Vec<_>>(), [(0, 4, 0), (1, 4, 0)]);
        assert_eq!(s.answered(5, &first[0], true), None); // the session's think time, not the run's
        let (next, _) = collect(&mut s, 15);
        assert_eq!(next.iter().map(|r| (r.intended, r.user, r.template, r.step)).collect::<Vec<_>>(), [(15, 0, 5, 1)]);
        s.answered(20, &next[0], true);
        let (last, _) = collect(&mut s, 30);
        assert_eq!((last[0].template, last[0].step), (6, 2));
        // after the last step the user's next session begins after the run's think time
        assert_eq!(s.answered(40, &last[0], true), None);
        assert!(collect(&mut s, 1039).0.is_empty());
        assert_eq!(collect(&mut s, 1040).0.iter().map(|r| (r.template, r.step)).collect::<Vec<_>>(), [(4, 0)]);
        // a failed step ends the session: user 1 starts afresh, not at step 1
        s.answered(50, &first[1], false);
        assert_eq!(collect(&mut s, 1050).0.iter().map(|r| (r.user, r.step)).collect::<Vec<_>>(), [(1, 0)]);
        // open model: each arrival is a session; its steps follow its answers
        let mut open = Source::new(Some(Pacer::constant(1e9, 0.0)), 0, stop, 0, plans, 1, &count);
        let (arrived, _) = collect(&mut open, 0);
        assert_eq!(arrived.iter().map(|r| (r.user, r.step)).collect::<Vec<_>>(), [(0, 0)]);
        assert_eq!(open.answered(1, &arrived[0], true), None); // thinking 10 ns
        let (due, _) = collect(&mut open, 11);
        assert!(due.contains(&Request { intended: 11, template: 5, warm: false, user: 0, session: 0, step: 1 }), "{due:?}");
    }
}
