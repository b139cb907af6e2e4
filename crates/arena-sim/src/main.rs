//! arena-sim: one replication of one app server, event by event, as `arena.model.sim`'s
//! `_InstanceSim` does it in Python, step for step and in the same floating-point order, so that
//! both give the same numbers to the bit (the tests check it); this one about a hundred times
//! faster. Python draws the requests' demands (its seeded generator) and reads the results.
//!
//! Input (stdin): one line of JSON (`Job`), then the demands as little-endian arrays of
//! `requests` values each: cpu, io (f64 seconds), db and db_cpu (f64, where `has_db` and
//! `has_db_cpu`), gaps (f64, where `has_gaps`: an open load's spacing), bind (i64: the process
//! each request's connection is bound to at random).
//! Output (stdout): cpu_s and throttled_s (one f64 each), then arrived, start, done (f64 each) and
//! proc_of (i64), each `requests` values long. Several jobs may follow one another; each gets its output in turn.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};

use serde::Deserialize;

#[derive(Deserialize)]
struct Job {
    processes: usize,
    threads: Option<i64>,
    cores: f64,
    gil: bool,
    shared_accept: bool,
    blocking_io: bool,
    inline: i64, // 0 when the load is open or the way out and back is longer than the inline wait
    least_busy: bool,
    pool: Option<i64>,
    db_cores: Option<f64>,
    #[serde(default)]
    quota: Option<f64>,
    #[serde(default = "default_period")]
    period: f64,
    outside: f64,
    clients: Option<usize>,
    requests: usize,
    has_db: bool,
    has_db_cpu: bool,
    has_gaps: bool,
}

fn default_period() -> f64 {
    0.1
}

const UNBOUNDED: i64 = 1 << 30;
const ARRIVE: u8 = 0;
const CPU_DONE: u8 = 1;
const DB_CPU_DONE: u8 = 2;
const DB_DONE: u8 = 3;
const IO_DONE: u8 = 4;
const RESUMED: u8 = 5;
const CORES_SERVER: u8 = 10;
const CORES_DB: u8 = 11;
const BURST_END: u8 = 0; // what a pool's event is
const QUOTA_OUT: u8 = 1;
const PERIOD_END: u8 = 2;

/// An entry of a min-heap ordered by a time, then by a tie-breaker (Python's tuple order).
#[derive(Clone, Copy)]
struct Entry {
    t: f64,
    tie: i64,
    kind: u8,
    r: i64,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        // reversed: BinaryHeap pops the greatest, the simulation wants the earliest
        o.t.partial_cmp(&self.t).unwrap_or(Ordering::Equal).then(o.tie.cmp(&self.tie))
    }
}

/// Cores shared by the runnable bursts (processor sharing): one clock of attained CPU, a heap of
/// the bursts' ends on it, and a CPU quota's periods where there is one (instance_sim.py `_Cores`).
struct Cores {
    cores: f64,
    event: u8,
    tags: BinaryHeap<Entry>, // t: attained at its end; tie: the request
    kind: Vec<u8>,
    attained: f64,
    since: f64,
    version: i64,
    quota: f64, // CPU-seconds a period (infinite: no quota)
    period: f64,
    period_end: f64,
    used: f64,
    throttled_s: f64,
    throttled: bool,
    next_is: u8,
}

impl Cores {
    fn new(cores: f64, event: u8, requests: usize, quota: Option<f64>, period: f64) -> Self {
        let quota = match quota {
            Some(q) => q * period,
            None => f64::INFINITY,
        };
        Cores {
            cores,
            event,
            tags: BinaryHeap::new(),
            kind: vec![0; requests],
            attained: 0.0,
            since: 0.0,
            version: 0,
            quota,
            period,
            period_end: period,
            used: 0.0,
            throttled_s: 0.0,
            throttled: false,
            next_is: BURST_END,
        }
    }
    fn rate(&self) -> f64 {
        if self.throttled {
            return 0.0;
        }
        if self.tags.is_empty() {
            return 1.0;
        }
        let share = self.cores / self.tags.len() as f64;
        if share < 1.0 { share } else { 1.0 }
    }
    /// The CPUs the runnable bursts take (or would, unthrottled): one each, at most the cores.
    fn running(&self) -> f64 {
        let n = self.tags.len() as f64;
        if n < self.cores { n } else { self.cores }
    }
    fn advance(&mut self, t: f64) {
        if self.throttled {
            self.throttled_s += (t - self.since) * self.running();
        } else {
            self.attained += (t - self.since) * self.rate();
            if !self.tags.is_empty() && self.quota < f64::INFINITY {
                self.used += (t - self.since) * self.running();
            }
        }
        self.since = t;
        if self.quota < f64::INFINITY && t >= self.period_end {
            self.used = 0.0;
            self.throttled = false;
            self.period_end = self.period * ((t / self.period).floor() + 1.0);
            if self.period_end <= t {
                self.period_end += self.period;
            }
        }
    }
    fn add(&mut self, r: usize, seconds: f64, kind: u8) {
        self.tags.push(Entry { t: self.attained + seconds, tie: r as i64, kind: 0, r: 0 });
        self.kind[r] = kind;
    }
    fn next_event(&mut self, t: f64) -> f64 {
        if self.throttled {
            self.next_is = PERIOD_END;
            return self.period_end;
        }
        let end = t + (self.tags.peek().unwrap().t - self.attained) / self.rate();
        self.next_is = BURST_END;
        if self.quota == f64::INFINITY {
            return end;
        }
        let left = self.quota - self.used;
        let out = t + (if left > 0.0 { left } else { 0.0 }) / self.running();
        if end <= out && end <= self.period_end {
            return end;
        }
        if self.period_end <= out {
            self.next_is = PERIOD_END;
            return self.period_end;
        }
        self.next_is = QUOTA_OUT;
        out
    }
    fn pop(&mut self) -> (usize, u8) {
        let r = self.tags.pop().unwrap().tie as usize;
        (r, self.kind[r])
    }
}

struct Sim {
    job: Job,
    cpu: Vec<f64>,
    io: Vec<f64>,
    db: Option<Vec<f64>>,
    db_cpu: Option<Vec<f64>>,
    gaps: Option<Vec<f64>>,
    bind: Vec<i64>,
    events: BinaryHeap<Entry>,
    seq: i64,
    arrived: Vec<f64>,
    start: Vec<f64>,
    done: Vec<f64>,
    proc_of: Vec<i64>,
    let_go: Vec<bool>,
    client_of: Vec<usize>,
    free_threads: Vec<i64>,
    shared: VecDeque<usize>,
    waiting: Vec<VecDeque<usize>>,
    gil_held: Vec<bool>,
    gil_queue: Vec<VecDeque<usize>>,
    conns: Vec<i64>,
    conn_queue: Vec<VecDeque<usize>>,
    pools: Vec<Cores>, // [the server's cores, the database's where it has its own]
    db_pool: usize,
    process_of_client: Vec<i64>,
    held_for: Vec<i64>,
    in_row: Vec<i64>,
    issued: usize,
    cpu_s: f64,
}

impl Sim {
    fn run(&mut self) {
        let outside = self.job.outside;
        if let Some(clients) = self.job.clients {
            for c in 0..clients.min(self.job.requests) {
                self.issue(outside / 2.0, c);
            }
        } else {
            let first = self.gaps.as_ref().unwrap()[0];
            self.issue(first, 0);
        }
        while let Some(e) = self.events.pop() {
            let (t, mut kind, mut r) = (e.t, e.kind, e.r);
            if kind == CORES_SERVER || kind == CORES_DB {
                let p = if kind == CORES_SERVER { 0 } else { 1 };
                if r != self.pools[p].version {
                    continue;
                }
                self.pools[p].advance(t);
                if self.pools[p].next_is != BURST_END {
                    // the quota ran out, or a period ended (advance began the next)
                    if self.pools[p].next_is == QUOTA_OUT {
                        self.pools[p].throttled = true;
                    }
                    self.schedule(p, t);
                    continue;
                }
                let (rr, kk) = self.pools[p].pop();
                r = rr as i64;
                kind = kk;
                self.schedule(p, t);
            }
            let r = r as usize;
            match kind {
                ARRIVE => self.arrive(r, t),
                CPU_DONE => self.cpu_done(r, t),
                DB_CPU_DONE => self.db_cpu_done(r, t),
                DB_DONE => self.db_done(r, t),
                _ => self.answer(r, t, kind),
            }
        }
    }

    fn arrive(&mut self, r: usize, t: f64) {
        self.arrived[r] = t - self.job.outside / 2.0;
        if self.gaps.is_some() && self.issued < self.job.requests {
            let next = t + self.gaps.as_ref().unwrap()[self.issued];
            self.issue(next, 0);
        }
        let c = self.client_of[r];
        if self.job.inline != 0 && self.held_for[c] >= 0 {
            let p = self.held_for[c] as usize;
            self.held_for[c] = -1;
            self.free_threads[p] += 1;
            self.begin(r, p, t);
            return;
        }
        let p = self.process_for(r);
        if self.free_threads[p] > 0 {
            self.begin(r, p, t);
        } else {
            self.queue_of(p).push_back(r);
        }
    }

    fn cpu_done(&mut self, r: usize, t: f64) {
        let p = self.proc_of[r] as usize;
        self.cpu_s += self.cpu[r];
        if !self.job.blocking_io && (self.db.is_some() || self.io[r] > 0.0) {
            self.let_go[r] = true;
            self.release_gil(p, t);
        }
        if self.db.is_none() {
            self.after_db(r, t);
        } else if self.conns[p] > 0 {
            self.conns[p] -= 1;
            self.query(r, t);
        } else {
            self.conn_queue[p].push_back(r);
        }
    }

    fn db_cpu_done(&mut self, r: usize, t: f64) {
        if self.db_pool == 0 {
            self.cpu_s += self.db_cpu.as_ref().unwrap()[r];
        }
        let at = t + self.db.as_ref().unwrap()[r];
        self.at(at, DB_DONE, r as i64);
    }

    fn db_done(&mut self, r: usize, t: f64) {
        let p = self.proc_of[r] as usize;
        if let Some(next) = self.conn_queue[p].pop_front() {
            self.query(next, t);
        } else {
            self.conns[p] += 1;
        }
        self.after_db(r, t);
    }

    fn answer(&mut self, r: usize, t: f64, kind: u8) {
        let p = self.proc_of[r] as usize;
        if kind == IO_DONE && self.let_go[r] && self.job.gil && self.gil_held[p] {
            self.gil_queue[p].push_back(r);
            return;
        }
        if !self.let_go[r] || kind == RESUMED {
            self.release_gil(p, t);
        }
        let outside = self.job.outside;
        self.done[r] = t + outside / 2.0;
        if self.job.clients.is_some() {
            let c = self.client_of[r];
            self.in_row[c] += 1;
            let inline = self.job.inline;
            if inline != 0 && self.issued < self.job.requests && (self.in_row[c] < inline || self.queue_of(p).is_empty()) {
                self.held_for[c] = p as i64;
                self.issue(self.done[r] + outside / 2.0, c);
                return;
            }
            self.in_row[c] = 0;
            self.issue(self.done[r] + outside / 2.0, c);
        }
        self.free_threads[p] += 1;
        if let Some(next) = self.queue_of(p).pop_front() {
            self.begin(next, p, t);
        }
    }

    fn at(&mut self, t: f64, kind: u8, r: i64) {
        self.seq += 1;
        self.events.push(Entry { t, tie: self.seq, kind, r });
    }

    fn issue(&mut self, t: f64, client: usize) {
        if self.issued < self.job.requests {
            self.client_of[self.issued] = client;
            self.at(t, ARRIVE, self.issued as i64);
            self.issued += 1;
        }
    }

    fn begin(&mut self, r: usize, p: usize, t: f64) {
        self.free_threads[p] -= 1;
        self.proc_of[r] = p as i64;
        self.start[r] = t;
        self.want_gil(r, t);
    }

    fn want_gil(&mut self, r: usize, t: f64) {
        let p = self.proc_of[r] as usize;
        if self.job.gil && self.gil_held[p] {
            self.gil_queue[p].push_back(r);
            return;
        }
        self.gil_held[p] = true;
        self.want_core(0, r, CPU_DONE, t);
    }

    fn want_core(&mut self, pool: usize, r: usize, kind: u8, t: f64) {
        let seconds = if kind == CPU_DONE { self.cpu[r] } else { self.db_cpu.as_ref().unwrap()[r] };
        self.pools[pool].advance(t);
        self.pools[pool].add(r, seconds, kind);
        self.schedule(pool, t);
    }

    fn schedule(&mut self, pool: usize, t: f64) {
        self.pools[pool].version += 1;
        if !self.pools[pool].tags.is_empty() {
            let end = self.pools[pool].next_event(t);
            let (event, version) = (self.pools[pool].event, self.pools[pool].version);
            self.at(end, event, version);
        }
    }

    fn release_gil(&mut self, p: usize, t: f64) {
        if let Some(r) = self.gil_queue[p].pop_front() {
            if self.let_go[r] {
                self.at(t, RESUMED, r as i64);
            } else {
                self.want_core(0, r, CPU_DONE, t);
            }
        } else {
            self.gil_held[p] = false;
        }
    }

    fn queue_of(&mut self, p: usize) -> &mut VecDeque<usize> {
        if self.job.shared_accept { &mut self.shared } else { &mut self.waiting[p] }
    }

    fn query(&mut self, r: usize, t: f64) {
        if self.db_cpu.is_some() {
            let pool = self.db_pool;
            self.want_core(pool, r, DB_CPU_DONE, t);
        } else {
            let at = t + self.db.as_ref().unwrap()[r];
            self.at(at, DB_DONE, r as i64);
        }
    }

    fn after_db(&mut self, r: usize, t: f64) {
        let at = t + self.io[r];
        self.at(at, IO_DONE, r as i64);
    }

    /// Python's max(range(n), key=...): the first of the greatest.
    fn first_max<K: PartialOrd>(n: usize, key: impl Fn(usize) -> K) -> usize {
        let mut best = 0;
        for j in 1..n {
            if key(j) > key(best) {
                best = j;
            }
        }
        best
    }

    fn process_for(&mut self, r: usize) -> usize {
        let n = self.job.processes;
        if self.job.shared_accept {
            return Self::first_max(n, |j| self.free_threads[j]);
        }
        if self.job.clients.is_none() {
            return self.bind[r] as usize;
        }
        let c = self.client_of[r];
        if self.process_of_client[c] < 0 {
            self.process_of_client[c] = if self.job.least_busy {
                Self::first_max(n, |j| (self.free_threads[j], -(self.waiting[j].len() as i64))) as i64
            } else {
                self.bind[r]
            };
        }
        self.process_of_client[c] as usize
    }
}

fn read_f64s(input: &mut impl Read, n: usize) -> io::Result<Vec<f64>> {
    let mut bytes = vec![0u8; n * 8];
    input.read_exact(&mut bytes)?;
    Ok(bytes.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect())
}

fn read_i64s(input: &mut impl Read, n: usize) -> io::Result<Vec<i64>> {
    let mut bytes = vec![0u8; n * 8];
    input.read_exact(&mut bytes)?;
    Ok(bytes.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect())
}

fn simulate(job: Job, input: &mut impl Read) -> io::Result<Sim> {
    let n = job.requests;
    let cpu = read_f64s(input, n)?;
    let io_ = read_f64s(input, n)?;
    let db = if job.has_db { Some(read_f64s(input, n)?) } else { None };
    let db_cpu = if job.has_db_cpu { Some(read_f64s(input, n)?) } else { None };
    let gaps = if job.has_gaps { Some(read_f64s(input, n)?) } else { None };
    let bind = read_i64s(input, n)?;
    let procs = job.processes;
    let clients = job.clients.unwrap_or(0);
    let mut pools = vec![Cores::new(job.cores, CORES_SERVER, n, job.quota, job.period)];
    let db_pool = match job.db_cores {
        Some(c) => {
            pools.push(Cores::new(c, CORES_DB, n, None, job.period));
            1
        }
        None => 0,
    };
    let mut sim = Sim {
        cpu,
        io: io_,
        db,
        db_cpu,
        gaps,
        bind,
        events: BinaryHeap::new(),
        seq: 0,
        arrived: vec![0.0; n],
        start: vec![0.0; n],
        done: vec![0.0; n],
        proc_of: vec![0; n],
        let_go: vec![false; n],
        client_of: vec![0; n],
        free_threads: vec![job.threads.unwrap_or(UNBOUNDED); procs],
        shared: VecDeque::new(),
        waiting: (0..procs).map(|_| VecDeque::new()).collect(),
        gil_held: vec![false; procs],
        gil_queue: (0..procs).map(|_| VecDeque::new()).collect(),
        conns: vec![job.pool.unwrap_or(UNBOUNDED); procs],
        conn_queue: (0..procs).map(|_| VecDeque::new()).collect(),
        pools,
        db_pool,
        process_of_client: vec![-1; clients],
        held_for: vec![-1; clients],
        in_row: vec![0; clients],
        issued: 0,
        cpu_s: 0.0,
        job,
    };
    sim.run();
    Ok(sim)
}

fn main() -> io::Result<()> {
    let mut input = BufReader::with_capacity(1 << 20, io::stdin().lock());
    let mut out = BufWriter::with_capacity(1 << 20, io::stdout().lock());
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let job: Job = serde_json::from_str(&line).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let sim = simulate(job, &mut input)?;
        out.write_all(&sim.cpu_s.to_le_bytes())?;
        out.write_all(&sim.pools[0].throttled_s.to_le_bytes())?;
        for column in [&sim.arrived, &sim.start, &sim.done] {
            for v in column.iter() {
                out.write_all(&v.to_le_bytes())?;
            }
        }
        for v in sim.proc_of.iter() {
            out.write_all(&v.to_le_bytes())?;
        }
        out.flush()?;
    }
}
