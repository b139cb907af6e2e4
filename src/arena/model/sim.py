"""A discrete-event simulator of fleets behind a balancer: the tails a mean-value model misses.

Pure and seeded (numbers in, numbers out). A fleet is ``instances`` copies of a server that each
serve ``slots`` requests at a time (a single-threaded dyno: 1) in arrival order; a balancer hands
every arrival to one instance by its policy, HAProxy's (topology.POLICIES: roundrobin, leastconn,
random, random(2), the power of two choices), or holds it in its own queue until any slot of any
instance is free (``central``: HAProxy with ``maxconn = slots``, Rap Genius's "intelligent"
router). Least connections counts what an instance holds, waiting and in service, so with one slot
it is the join-the-shortest-queue policy.

Each instance's slots are a FIFO multi-server queue, so a request's start is the later of its
arrival and its instance's earliest free slot: the simulation needs no event list beyond a heap of
free times per instance (and, for the policies that look at the instances, a heap of the
completions still ahead of each arrival; least connections looks at every instance, so it costs
O(instances) per request). Checked against M/M/c (Erlang C) and M/G/1 (Pollaczek-Khinchine) in the
tests.

One instance (simulate_instance) is an event simulation of processes, threads, GILs and cores.
Statistics over replications (summarize) use arena.stats' rules: nearest-rank percentiles and
Student's t intervals of the mean.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from arena import stats
from arena.errors import ArenaError
from arena.topology import POLICIES

FLEET_POLICIES = (*POLICIES, "central")


# ---------------------------------------------------------------------- service times


@dataclass(frozen=True)
class Dist:
    """A service-time distribution in seconds, clipped to [lo, hi].

    kind: "fixed" (a), "exp" (mean a), "lognormal" (mean a, sigma b), "weibull" (shape a, median b)."""

    kind: str
    a: float
    b: float = 0.0
    lo: float = 0.0
    hi: float = math.inf

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            x = np.full(n, self.a)
        elif self.kind == "exp":
            x = rng.exponential(self.a, n)
        elif self.kind == "lognormal":  # mean a: mu = ln a - sigma^2 / 2
            x = rng.lognormal(math.log(self.a) - self.b**2 / 2, self.b, n)
        elif self.kind == "weibull":  # median b = scale * ln(2)^(1/shape)
            x = self.b / math.log(2) ** (1 / self.a) * rng.weibull(self.a, n)
        else:
            raise ValueError(self.kind)
        return np.clip(x, self.lo, self.hi)

    @property
    def text(self) -> str:
        ms = lambda s: f"{s * 1e3:g} ms"  # noqa: E731
        body = {"fixed": lambda: ms(self.a), "exp": lambda: f"exponential, mean {ms(self.a)}",
                "lognormal": lambda: f"lognormal, mean {ms(self.a)}, sigma {self.b:g}",
                "weibull": lambda: f"Weibull, shape {self.a:g}, median {ms(self.b)}"}[self.kind]()
        clip = f", clipped to {ms(self.lo)} .. {ms(self.hi)}" if self.lo > 0 or self.hi < math.inf else ""
        return body + clip




@dataclass(frozen=True)
class Empirical:
    """A measured distribution in seconds, as its quantile function: (probability, value) points,
    linear between them (a stored run's Server-Timing percentiles, its minimum at 0 and maximum at
    1), shifted by ``shift`` and scaled by ``scale``."""

    points: tuple[tuple[float, float], ...]
    shift: float = 0.0
    scale: float = 1.0

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        qs, vs = zip(*self.points)
        return np.maximum(0.0, np.interp(rng.random(n), qs, vs) * self.scale + self.shift)

    @property
    def mean(self) -> float:
        qs, vs = np.array(self.points).T
        return float(np.sum(np.diff(qs) * (vs[1:] + vs[:-1]) / 2)) * self.scale + self.shift

    def with_mean(self, mean: float) -> "Empirical":
        """The same shape moved to ``mean``: shifted where that adds (a constant part of it, such as
        the server's own CPU besides the app's), scaled down where it takes away."""
        base = Empirical(self.points)
        have = base.mean
        if have <= 0:
            return Empirical(((0.0, mean), (1.0, mean)))
        return Empirical(self.points, shift=mean - have) if mean >= have else Empirical(self.points, scale=mean / have)


Sampler = Dist | Empirical  # what a simulated phase draws its times from


DIST_FORM = ('"fixed:20ms", "exp:mean=20ms", "lognormal:mean=50ms,sigma=1.5" or "weibull:shape=0.46,median=50ms", '
             'optionally ",min=10ms,max=30s"')


def parse_dist(text: str) -> Dist:
    """A distribution as written on the command line (DIST_FORM); ArenaError naming what is wrong."""
    from arena.plan.reader import parse_duration

    bad = ArenaError(f"must be a distribution such as {DIST_FORM}, got '{text}'")
    kind, _, rest = text.partition(":")
    params: dict[str, str] = {}
    for part in filter(None, rest.split(",")):
        key, eq, value = part.partition("=")
        if not eq:
            key, value = "value", key
        params[key.strip()] = value.strip()
    times = {k: parse_duration(v) for k, v in params.items() if k in ("value", "mean", "median", "min", "max")}
    if any(v is None for v in times.values()):
        raise bad
    lo, hi = times.pop("min", 0.0), times.pop("max", math.inf)
    try:
        if kind == "fixed" and set(params) - {"min", "max"} == {"value"}:
            d = Dist("fixed", times["value"], lo=lo, hi=hi)
        elif kind == "exp" and set(params) - {"min", "max"} == {"mean"}:
            d = Dist("exp", times["mean"], lo=lo, hi=hi)
        elif kind == "lognormal" and set(params) - {"min", "max"} == {"mean", "sigma"}:
            d = Dist("lognormal", times["mean"], float(params["sigma"]), lo, hi)
        elif kind == "weibull" and set(params) - {"min", "max"} == {"shape", "median"}:
            d = Dist("weibull", float(params["shape"]), times["median"], lo, hi)
        else:
            raise bad
    except ValueError:
        raise bad from None
    if d.a <= 0 or d.b < 0 or (d.kind in ("lognormal", "weibull") and d.b <= 0) or lo > hi:
        raise bad
    return d


# ---------------------------------------------------------------------- the fleet


@dataclass(frozen=True)
class SimRun:
    """One replication: per request, when it arrived, how long it queued and its response time."""

    arrivals: np.ndarray
    waits: np.ndarray
    responses: np.ndarray
    served: np.ndarray  # requests per instance

    @property
    def throughput(self) -> float:
        done = self.arrivals + self.responses
        return len(done) / (done.max() - self.arrivals.min()) if len(done) > 1 else 0.0


def simulate_fleet(instances: int, policy: str, rate: float, service: Sampler, requests: int, *,
                   slots: int = 1, seed: int = 1, arrival: str = "poisson") -> SimRun:
    """``requests`` arrivals at ``rate`` per second (``arrival``: "poisson", or "constant" spacing
    as arena-load's open model sends by default), each served for a draw of ``service`` by the
    instance the policy picks (or, for ``central``, by the first free slot of any)."""
    if policy not in FLEET_POLICIES:
        raise ArenaError(f"policy: must be one of {', '.join(FLEET_POLICIES)}, got '{policy}'")
    rng = np.random.default_rng(seed)
    arrivals = (np.arange(1, requests + 1) / rate if arrival == "constant"
                else np.cumsum(rng.exponential(1 / rate, requests)))
    work = service.draw(rng, requests)
    picks = rng.integers(0, instances, size=(requests, 2))  # drawn up front: one stream per use
    waits = np.empty(requests)
    where = np.empty(requests, dtype=np.int64)  # the instance that served each
    if policy == "central":
        free = [(0.0, j) for j in range(instances * slots)]  # one FIFO queue before every slot of the fleet
        for i in range(requests):
            at, j = free[0]
            start = max(arrivals[i], at)
            heapq.heapreplace(free, (start + work[i], j))
            waits[i], where[i] = start - arrivals[i], j // slots
        return SimRun(arrivals, waits, waits + work, np.bincount(where, minlength=instances))
    slots_free = [[0.0] * slots for _ in range(instances)]  # each a heap of its slots' free times
    ahead: list[list[float]] = [[] for _ in range(instances)]  # each a heap of its completions still to come

    def holding(k: int, now: float) -> int:
        h = ahead[k]
        while h and h[0] <= now:
            heapq.heappop(h)
        return len(h)

    for i in range(requests):
        now = arrivals[i]
        if policy == "random":
            k = int(picks[i, 0])
        elif policy == "roundrobin":
            k = i % instances
        elif policy == "random(2)":
            a, b = int(picks[i, 0]), int(picks[i, 1])
            k = a if holding(a, now) <= holding(b, now) else b
        else:  # leastconn: the fewest held, the lowest index among equals (HAProxy's order)
            k = min(range(instances), key=lambda j: (holding(j, now), j))
        start = max(now, slots_free[k][0])
        done = start + work[i]
        heapq.heapreplace(slots_free[k], done)
        heapq.heappush(ahead[k], done)
        waits[i], where[i] = start - now, k
    return SimRun(arrivals, waits, waits + work, np.bincount(where, minlength=instances))


# ---------------------------------------------------------------------- replications


@dataclass(frozen=True)
class Mean:
    """A statistic over replications: their mean and its 95% confidence interval (Student's t)."""

    mean: float
    interval: stats.Interval

    @property
    def lo(self) -> float:
        return self.interval.lo

    @property
    def hi(self) -> float:
        return self.interval.hi

    @staticmethod
    def of(values: list[float]) -> "Mean":
        m, lo, hi = stats.mean_interval(values)
        return Mean(m, stats.Interval(lo, hi, "Student's t", 0.95))


QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999))


@dataclass(frozen=True)
class Summary:
    throughput: Mean
    wait_mean: Mean
    response: dict[str, Mean]  # by QUANTILES' names
    wait: dict[str, Mean]
    replications: int


def _percentiles(values: np.ndarray) -> dict[str, float]:
    """QUANTILES of ``values`` by nearest rank (stats.rank), sorted once."""
    ordered = np.sort(values)
    return {name: float(ordered[stats.rank(q, len(ordered)) - 1]) for name, q in QUANTILES}


def summarize(runs: list[SimRun], warmup: float = 0.1) -> Summary:
    """Statistics over replications, each without its first ``warmup`` share of requests (the
    system starting empty)."""
    kept = [(r, int(len(r.waits) * warmup)) for r in runs]
    responses = [_percentiles(r.responses[skip:]) for r, skip in kept]
    waits = [_percentiles(r.waits[skip:]) for r, skip in kept]

    return Summary(
        throughput=Mean.of([r.throughput for r in runs]),
        wait_mean=Mean.of([float(r.waits[skip:].mean()) for r, skip in kept]),
        response={name: Mean.of([p[name] for p in responses]) for name, _ in QUANTILES},
        wait={name: Mean.of([p[name] for p in waits]) for name, _ in QUANTILES},
        replications=len(runs))


def fleet(instances: int, policy: str, rate: float, service: Sampler, requests: int, *, slots: int = 1,
          replications: int = 5, seed: int = 1, arrival: str = "poisson") -> Summary:
    """``replications`` independent runs (seeds seed, seed + 1, ...), summarized."""
    return summarize([simulate_fleet(instances, policy, rate, service, requests, slots=slots, seed=seed + r,
                                     arrival=arrival)
                      for r in range(replications)])


def instances_for(target_wait_s: float, policy: str, rate: float, service: Sampler, requests: int, *,
                  slots: int = 1, replications: int = 3, seed: int = 1, arrival: str = "poisson", lo: int = 1,
                  hi: int = 100_000) -> int | None:
    """The fewest instances whose mean queue time under ``policy`` is at most ``target_wait_s``
    (bisection; the mean wait falls as instances are added), or None beyond ``hi``."""
    def ok(n: int) -> bool:
        return fleet(n, policy, rate, service, requests, slots=slots, replications=replications,
                     seed=seed, arrival=arrival).wait_mean.mean <= target_wait_s

    if not ok(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo



# ---------------------------------------------------------------------- one instance


UNBOUNDED = 1 << 30  # an event loop's "threads": as many requests in service as arrive
CORES_SERVER, CORES_DB = 10, 11  # the event of a burst's end on the server's cores, on the database's


class _Cores:
    """Cores as the kernel shares them among runnable threads (CFS, idealized as processor sharing):
    n bursts on c cores each advance at min(1, c / n) seconds of CPU per second, so a burst's wall
    time stretches with the bursts beside it, and c need not be whole (a cgroup's CPU quota).

    All running bursts advance alike, so one clock serves them: ``attained``, the CPU each has had
    since the pool began; a burst ends when the clock reaches its tag, the clock at its start plus
    its CPU (a heap of tags: O(log n) per event)."""

    __slots__ = ("attained", "cores", "event", "kind", "since", "tags", "version")

    def __init__(self, cores: float, event: int):
        self.cores, self.event = cores, event
        self.tags: list[tuple[float, int]] = []  # heap of (attained at its end, request)
        self.kind: dict[int, int] = {}  # request -> the event its burst's end is
        self.attained = self.since = 0.0
        self.version = 0  # of the forecast end: a change in the sharing voids the one in the event list

    def rate(self) -> float:
        return min(1.0, self.cores / len(self.tags)) if self.tags else 1.0

    def advance(self, t: float) -> None:
        self.attained += (t - self.since) * self.rate()
        self.since = t

    def add(self, r: int, seconds: float, kind: int) -> None:
        heapq.heappush(self.tags, (self.attained + seconds, r))
        self.kind[r] = kind

    def first_end(self, t: float) -> float:
        return t + (self.tags[0][0] - self.attained) / self.rate()

    def pop(self) -> tuple[int, int]:
        r = heapq.heappop(self.tags)[1]
        return r, self.kind.pop(r)


@dataclass(frozen=True)
class Instance:
    """One app server: ``processes`` x ``threads`` (None: an event loop, unbounded) on ``cores``,
    a GIL per process (``gil``: off for a runtime without one).

    ``accept``: "shared" (one accept queue: any process with a free thread takes the next request,
    as Unicorn, gunicorn sync and Passenger do) or "per-process" (a kept-alive connection stays with
    the process that accepted it: the one that won the race to accept it, at random, or,
    ``least_busy``, the one with the most free threads when it arrived; each process takes its
    waiting requests in arrival order). ``inline``: the requests a thread serves
    in a row on one kept-alive connection, waiting up to ``inline_wait_s`` for its next request,
    before it hands the connection back and takes a waiting one; it keeps going past that while
    nobody waits (Puma 5.6: max_fast_inline 10 and FAST_TRACK_KA_TIMEOUT 0.2 s; 0: every request
    joins the queue). ``blocking_io``: the I/O wait holds the process (its GIL), as a call that does
    not yield to the event loop. ``pool``: database connections per process (None: no limit);
    ``db_cores``: the database's own cores (None: it computes on the server's)."""

    processes: int
    threads: int | None
    cores: float
    gil: bool = True
    accept: str = "shared"
    blocking_io: bool = False
    inline: int = 0
    inline_wait_s: float = 0.2
    least_busy: bool = False
    pool: int | None = None
    db_cores: float | None = None


@dataclass(frozen=True)
class Work:
    """A request's demands, in order: CPU (under the GIL, on a core); then, where it queries a
    database, a pooled connection held for ``db_cpu`` on the database's cores and ``db`` more (the
    query's other time); then an I/O wait. ``outside``: time on the way to and from the server (the
    client, the network), outside every queue."""

    cpu: Sampler
    io: Sampler
    outside: float = 0.0
    db: Sampler | None = None
    db_cpu: Sampler | None = None


@dataclass(frozen=True)
class InstanceRun(SimRun):
    """A replication of one server, with what it used: CPU seconds on the server's cores and the
    time requests spent in service (holding a thread)."""

    cpu_s: float = 0.0
    in_service_s: float = 0.0


def simulate_instance(inst: Instance, work: Work, *, clients: int | None = None, rate: float | None = None,
                      arrival: str = "poisson", requests: int, seed: int = 1) -> InstanceRun:
    """``requests`` through one instance, from ``clients`` closed-loop users on kept-alive
    connections (each sends its next request when its answer is back) or arrivals at ``rate``
    (``arrival``: "poisson", or "constant" spacing as arena-load's open model sends by default; each
    bound to a process at random where connections stay with one); response times include
    ``work.outside``. Cores are shared by the runnable bursts (_Cores); a process's CPU bursts take
    its GIL in turn (FIFO, whole bursts: the switch interval is left out), and a request that let go
    of the GIL for its wait (I/O, a query) takes it back, in the same queue, before it answers, as a
    Python or Ruby thread must to run the code that writes its response."""
    if (clients is None) == (rate is None):
        raise ValueError("give clients or rate")
    rng = np.random.default_rng(seed)
    # Python lists, not arrays: the loop below indexes them one element at a time
    cpu, io = work.cpu.draw(rng, requests).tolist(), work.io.draw(rng, requests).tolist()
    db = work.db.draw(rng, requests).tolist() if work.db is not None else None
    db_cpu = work.db_cpu.draw(rng, requests).tolist() if work.db_cpu is not None and db is not None else None
    bind = rng.integers(0, inst.processes, requests).tolist()
    gaps = (None if not rate else [1 / rate] * requests if arrival == "constant"
            else rng.exponential(1 / rate, requests).tolist())
    threads = inst.threads or UNBOUNDED
    shared_accept = inst.accept == "shared"
    inline = inst.inline if clients is not None and work.outside <= inst.inline_wait_s else 0

    events: list = []  # (time, seq, kind, request)
    seq = 0

    def at(t: float, kind: int, r: int) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, r))

    ARRIVE, CPU_DONE, DB_CPU_DONE, DB_DONE, IO_DONE, RESUMED = range(6)
    arrival = [0.0] * requests
    start = [0.0] * requests
    done = [0.0] * requests
    proc_of = [0] * requests
    let_go = [False] * requests  # it let go of its process's GIL for its wait (and needs it back to answer)
    client_of = [0] * requests
    free_threads = [threads] * inst.processes
    shared: deque = deque()
    waiting: list[deque] = [deque() for _ in range(inst.processes)]
    gil_held = [False] * inst.processes
    gil_queue: list[deque] = [deque() for _ in range(inst.processes)]
    conns = [inst.pool or UNBOUNDED] * inst.processes
    conn_queue: list[deque] = [deque() for _ in range(inst.processes)]
    # the database's CPU on its own cores or the server's
    server_cores = _Cores(inst.cores, CORES_SERVER)
    db_cores = server_cores if inst.db_cores is None else _Cores(inst.db_cores, CORES_DB)
    n_clients = clients or 0
    process_of_client = [-1] * n_clients  # the process its connection stays with
    held_for = [-1] * n_clients  # the process whose thread waits for its next request (Puma's fast inline)
    in_row = [0] * n_clients  # requests served in a row on its connection by one thread
    issued = 0
    cpu_s = 0.0

    def issue(t: float, client: int) -> None:
        nonlocal issued
        if issued < requests:
            client_of[issued] = client
            at(t, ARRIVE, issued)
            issued += 1

    def begin(r: int, p: int, t: float) -> None:
        free_threads[p] -= 1
        proc_of[r], start[r] = p, t
        want_gil(r, t)

    def want_gil(r: int, t: float) -> None:
        p = proc_of[r]
        if inst.gil and gil_held[p]:
            gil_queue[p].append(r)
            return
        gil_held[p] = True
        want_core(server_cores, r, CPU_DONE, t)

    def want_core(pool: _Cores, r: int, kind: int, t: float) -> None:
        pool.advance(t)
        pool.add(r, cpu[r] if kind == CPU_DONE else db_cpu[r], kind)
        schedule(pool, t)

    def schedule(pool: _Cores, t: float) -> None:
        """The next burst to end, at the pool's present sharing (any earlier forecast is void)."""
        pool.version += 1
        if pool.tags:
            at(pool.first_end(t), pool.event, pool.version)

    def release_gil(p: int, t: float) -> None:
        if gil_queue[p]:  # the GIL passes to the next waiter: a CPU burst, or a request back from its wait
            r = gil_queue[p].popleft()
            if let_go[r]:
                at(t, RESUMED, r)
            else:
                want_core(server_cores, r, CPU_DONE, t)
        else:
            gil_held[p] = False

    def queue_of(p: int) -> deque:
        return shared if shared_accept else waiting[p]

    def query(r: int, t: float) -> None:
        """A pooled connection held for the database's CPU, then the rest of the query."""
        if db_cpu is not None:
            want_core(db_cores, r, DB_CPU_DONE, t)
        else:
            at(t + db[r], DB_DONE, r)

    def after_db(r: int, t: float) -> None:
        at(t + io[r], IO_DONE, r)

    def process_for(r: int) -> int:
        if shared_accept:  # the process with the most free threads takes it
            return max(range(inst.processes), key=lambda j: free_threads[j])
        if clients is None:
            return bind[r]
        c = client_of[r]
        if process_of_client[c] < 0:  # accepted by whichever process wins the race, then it stays there
            if inst.least_busy:  # the process with the most free threads takes it
                process_of_client[c] = max(range(inst.processes), key=lambda j: (free_threads[j], -len(waiting[j])))
            else:
                process_of_client[c] = bind[r]
        return process_of_client[c]

    if clients is not None:
        for c in range(min(clients, requests)):
            issue(work.outside / 2, c)
    else:
        issue(gaps[0], 0)
    while events:
        t, _, kind, r = heapq.heappop(events)
        if kind == CORES_SERVER or kind == CORES_DB:  # a burst ends, if nothing changed the sharing since
            pool = server_cores if kind == CORES_SERVER else db_cores
            if r != pool.version:
                continue
            pool.advance(t)
            r, kind = pool.pop()
            schedule(pool, t)
        if kind == ARRIVE:
            arrival[r] = t - work.outside / 2  # the client sent it half the outside time earlier
            if gaps is not None and issued < requests:
                issue(t + gaps[issued], 0)
            c = client_of[r]
            if inline and held_for[c] >= 0:  # its connection's thread has waited for it
                p, held_for[c] = held_for[c], -1
                free_threads[p] += 1
                begin(r, p, t)
                continue
            p = process_for(r)
            if free_threads[p] > 0:
                begin(r, p, t)
            else:
                queue_of(p).append(r)
        elif kind == CPU_DONE:
            p = proc_of[r]
            cpu_s += cpu[r]
            if not inst.blocking_io and (db is not None or io[r] > 0):
                let_go[r] = True
                release_gil(p, t)
            if db is None:
                after_db(r, t)
            elif conns[p] > 0:
                conns[p] -= 1
                query(r, t)
            else:
                conn_queue[p].append(r)
        elif kind == DB_CPU_DONE:
            if db_cores is server_cores:
                cpu_s += db_cpu[r]
            at(t + db[r], DB_DONE, r)
        elif kind == DB_DONE:  # the connection passes to the next waiter of the process
            p = proc_of[r]
            if conn_queue[p]:
                query(conn_queue[p].popleft(), t)
            else:
                conns[p] += 1
            after_db(r, t)
        else:  # IO_DONE, or RESUMED: the answer leaves; the thread takes the next waiter
            p = proc_of[r]
            if kind == IO_DONE and let_go[r] and inst.gil and gil_held[p]:
                gil_queue[p].append(r)  # to take the GIL back (zero time: no CPU burst is modelled here)
                continue
            if not let_go[r] or kind == RESUMED:
                release_gil(p, t)
            done[r] = t + work.outside / 2
            if clients is not None:
                c = client_of[r]
                in_row[c] += 1
                if inline and issued < requests and (in_row[c] < inline or not queue_of(p)):
                    held_for[c] = p  # the thread waits for the same connection's next request
                    issue(done[r] + work.outside / 2, c)
                    continue
                in_row[c] = 0
                issue(done[r] + work.outside / 2, c)
            free_threads[p] += 1
            if queue_of(p):
                begin(queue_of(p).popleft(), p, t)
    arrivals, starts, dones = np.array(arrival), np.array(start), np.array(done)
    waits = starts - (arrivals + work.outside / 2)
    served = np.bincount(proc_of, minlength=inst.processes)
    in_service = float((dones - starts).sum() - requests * work.outside / 2)
    return InstanceRun(arrivals, waits, dones - arrivals, served, cpu_s, in_service)


def instance(inst: Instance, work: Work, *, clients: int | None = None, rate: float | None = None,
             arrival: str = "poisson", requests: int = 20_000, replications: int = 5, seed: int = 1) -> Summary:
    """``replications`` runs of one instance, summarized (the first 10% of each left out)."""
    return summarize([simulate_instance(inst, work, clients=clients, rate=rate, arrival=arrival, requests=requests,
                                        seed=seed + k)
                      for k in range(replications)])
