//! When requests are meant to be sent, and when a run stops: pure functions of time and counts.
//!
//! The open model gives every request an *intended* send time fixed in advance by the schedule
//! (constant spacing or Poisson arrivals), independent of how the server answers. Latency is
//! measured from that time, so a stalled server cannot hide its stall by slowing the generator
//! down (the "coordinated omission" of closed-loop tools). After a stall every request whose time
//! has passed is due at once: the pacer catches up, it never skips or shifts the schedule.

use std::sync::Arc;

/// A schedule of intended send times, in nanoseconds since the start of the run.
#[derive(Debug, Clone)]
pub enum Pacer {
    /// Request `i` is due at `offset + i / rate`.
    Constant { rate: f64, offset_ns: f64, taken: u64 },
    /// Exponentially distributed gaps with mean `1 / rate` (a Poisson process).
    Poisson { rate: f64, next_ns: f64, rng: SplitMix64 },
    /// Given times (a traffic profile: `--schedule`), this thread's every `step`-th from `next`.
    Schedule { times: Arc<Vec<u64>>, next: usize, step: usize },
}

impl Pacer {
    /// `rate` in requests per second; `offset_ns` shifts the whole schedule (to interleave threads).
    pub fn constant(rate: f64, offset_ns: f64) -> Pacer {
        assert!(rate > 0.0 && rate.is_finite());
        Pacer::Constant { rate, offset_ns, taken: 0 }
    }

    pub fn poisson(rate: f64, seed: u64) -> Pacer {
        assert!(rate > 0.0 && rate.is_finite());
        let mut rng = SplitMix64::new(seed);
        let first = rng.exponential(1e9 / rate);
        Pacer::Poisson { rate, next_ns: first, rng }
    }

    /// Thread `id` of `threads`: the times `id`, `id + threads`, ... of a sorted schedule (ns).
    pub fn schedule(times: Arc<Vec<u64>>, id: usize, threads: usize) -> Pacer {
        assert!(threads > 0);
        Pacer::Schedule { times, next: id, step: threads }
    }

    /// The intended send time of the next request (past a schedule's end: never).
    pub fn peek(&self) -> u64 {
        match self {
            Pacer::Constant { rate, offset_ns, taken } => (offset_ns + *taken as f64 * 1e9 / rate) as u64,
            Pacer::Poisson { next_ns, .. } => *next_ns as u64,
            Pacer::Schedule { times, next, .. } => times.get(*next).copied().unwrap_or(u64::MAX),
        }
    }

    /// Take the next request's intended time if it is due at `now_ns`.
    pub fn take_due(&mut self, now_ns: u64) -> Option<u64> {
        let t = self.peek();
        if t > now_ns {
            return None;
        }
        match self {
            Pacer::Constant { taken, .. } => *taken += 1,
            Pacer::Poisson { rate, next_ns, rng } => *next_ns += rng.exponential(1e9 / *rate),
            Pacer::Schedule { next, step, .. } => *next += *step,
        }
        Some(t)
    }
}

/// When a run ends: after a duration and/or a number of measured requests (at least one is set).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stop {
    /// End of the run in ns since its start (warm-up included), if time-bounded.
    pub end_ns: Option<u64>,
    /// Measured requests to issue, if count-bounded.
    pub requests: Option<u64>,
}

impl Stop {
    /// Whether a request issued at `at_ns`, when `measured_issued` measured ones were already
    /// issued, would fall outside the run.
    pub fn done(&self, at_ns: u64, measured_issued: u64) -> bool {
        self.end_ns.is_some_and(|end| at_ns >= end) || self.requests.is_some_and(|n| measured_issued >= n)
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): a small, fast, well-distributed seeded generator, so
/// schedules and mixes are repeatable from `--seed`.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Exponential with the given mean (inverse transform; 1 - u is in (0, 1]).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.next_f64()).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(p: &mut Pacer, until_ns: u64) -> Vec<u64> {
        std::iter::from_fn(|| p.take_due(until_ns)).collect()
    }

    #[test]
    fn constant_schedule_is_exact_and_does_not_drift() {
        let mut p = Pacer::constant(1000.0, 0.0);
        let times = drain(&mut p, 1_000_000_000 - 1);
        assert_eq!(times.len(), 1000);
        assert_eq!(&times[..3], &[0, 1_000_000, 2_000_000]);
        // a million requests later the schedule is still exactly i / rate (no accumulated error)
        let mut p = Pacer::constant(3.0, 0.0);
        let last = drain(&mut p, 1_000_000 * 1_000_000_000 / 3).pop().unwrap();
        assert_eq!(last, 333_333_333_333_333);
    }

    #[test]
    fn nothing_is_due_before_its_time_and_everything_past_is_due_after_a_stall() {
        let mut p = Pacer::constant(100.0, 5_000_000.0);
        assert_eq!(p.take_due(4_999_999), None);
        assert_eq!(p.take_due(5_000_000), Some(5_000_000));
        // the generator was stalled for 1 s: the 100 requests of that second are all due now,
        // each with its own intended time (catch-up, never a shifted schedule)
        let due = drain(&mut p, 1_005_000_000);
        assert_eq!(due.len(), 100);
        assert_eq!(due[0], 15_000_000);
        assert!(due.windows(2).all(|w| w[1] - w[0] == 10_000_000));
        assert_eq!(p.peek(), 1_015_000_000); // 101 taken: the next is the 102nd
    }

    #[test]
    fn a_given_schedule_is_split_over_the_threads_and_kept_to_its_times() {
        let times = Arc::new(vec![0, 5, 5, 7, 100, 101, 2_000]);
        let mut a = Pacer::schedule(times.clone(), 0, 2);
        let mut b = Pacer::schedule(times, 1, 2);
        assert_eq!(drain(&mut a, 100), vec![0, 5, 100]);
        assert_eq!(drain(&mut b, 100), vec![5, 7]);
        assert_eq!((a.peek(), b.peek()), (2_000, 101));
        assert_eq!(drain(&mut b, u64::MAX - 1), vec![101]);
        assert_eq!(b.peek(), u64::MAX); // past its end: nothing more is ever due
    }

    #[test]
    fn poisson_schedule_has_the_rate_and_exponential_gaps() {
        let mut p = Pacer::poisson(10_000.0, 42);
        let times = drain(&mut p, 100 * 1_000_000_000);
        let n = times.len() as f64;
        assert!((n - 1_000_000.0).abs() < 4_000.0, "{n} arrivals in 100 s at 10k/s"); // sd = 1000
        let gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        assert!((mean - 100_000.0).abs() < 500.0, "mean gap {mean}");
        assert!((var.sqrt() / mean - 1.0).abs() < 0.01, "exponential: sd = mean"); // cv of 1
        let short = gaps.iter().filter(|g| **g < 100_000.0).count() as f64 / gaps.len() as f64;
        assert!((short - (1.0 - (-1.0f64).exp())).abs() < 0.005, "P(gap < mean) = 1 - 1/e");
    }

    #[test]
    fn poisson_is_repeatable_from_its_seed() {
        let a = drain(&mut Pacer::poisson(500.0, 7), 1_000_000_000);
        let b = drain(&mut Pacer::poisson(500.0, 7), 1_000_000_000);
        let c = drain(&mut Pacer::poisson(500.0, 8), 1_000_000_000);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn stop_by_time_or_count_whichever_first() {
        let both = Stop { end_ns: Some(10), requests: Some(3) };
        assert!(!both.done(9, 2));
        assert!(both.done(10, 0) && both.done(0, 3));
        let time_only = Stop { end_ns: Some(10), requests: None };
        assert!(!time_only.done(9, u64::MAX - 1));
    }

    #[test]
    fn splitmix_matches_the_reference_sequence() {
        // Seed 1234567: Rosetta Code, "Pseudo-random numbers/Splitmix64" (from the reference C code).
        let mut r = SplitMix64::new(1234567);
        assert_eq!(r.next_u64(), 6457827717110365317);
        assert_eq!(r.next_u64(), 3203168211198807973);
        assert_eq!(r.next_u64(), 9817491932198370423);
    }
}
