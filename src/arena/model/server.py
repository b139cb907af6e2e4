"""An app server as a queueing network, solved by MVA. Pure. (References: arena.model.queueing.)

The server (P processes x T threads on C cores) is a flow-equivalent server [QSP ch. 8]:

- inside, m requests in service (m <= P x T) share a CPU station whose rate with j requests
  computing is min(j, C, G(j)) times one core: C cores, and one GIL/GVL per process, so at most as
  many CPU bursts at once as processes hold them. G(j) is the expected number of distinct
  processes among j requests placed evenly at random, at most T in each (a GIL-free runtime: no
  cap). Where that is never more than one server (one process with its GIL, or at most one core
  for no more processes than CPUs: a quota over them) the CPU is a FCFS server whose service time's
  variability (cpu_cv2) enters by [Rei79]'s residual-time approximation; otherwise exact
  load-dependent MVA (exponential service), which is also processor sharing's, whatever the service
  time's distribution [BCMP75]: more processes than CPUs take turns on them by the kernel's time
  slices (CFS's few milliseconds), not a burst at a time. I/O is a
  delay inside the process (it holds a thread, not a core or the GIL); a non-yielding call in an
  event loop (``blocking_io``) holds its process like CPU, but no core;
- ``inner_throughput(m)`` is that network's throughput with m requests in it;
- outside, the closed load (N clients, think time Z, and the time outside the server's threads:
  network, kernel, parsing before the app) sees one load-dependent station of rate
  inner_throughput(min(n, P x T)) for n requests present: requests beyond P x T wait in the accept
  queue (a shared one: Unicorn, gunicorn sync, Passenger's core), exact MVA again;
- per-process routing (a keep-alive connection stays with the process that accepted it: Puma's
  cluster, gunicorn gthread, uvicorn workers) splits the clients evenly among P single-process
  servers that share the cores (each sees what the others leave: a fixed point, by bisection);
- a database phase (``db_ms``: the time a request holds a pooled connection) is one more
  station inside: the pool and the database together, load dependent. With j requests in that phase
  spread over the processes, connections_busy(j) hold a connection (each process at most ``pool``),
  and they complete at the database's rate for that many connections: its CPU (``db_cpu_ms``) on its
  own cores with the rest of the query as a delay (exact MVA of the database alone), or, where it
  shares the server's cores, k connections serving k at a time while its CPU joins the server's CPU
  station (the pool is then a semaphore of ``pool`` in front of the query's non-CPU time);
- open load: a birth-death chain with arrival rate lambda and the same state-dependent service
  rates [Kle75 §3], overloaded when lambda >= the rate with every thread busy.

Latency percentiles: an arriving request sees the population of the others (the arrival
theorem for the closed model, PASTA for the open one); given n ahead of it, it waits for
n - P x T + 1 departures at the full rate (an Erlang; with a measured service time, as variable as
the departures of busy servers: departures_cv2), then spends the in-server time for the
population it joins: its own service time, plus the contention (a sum of exponential parts, one
per other request in service). The wait and the contention are fitted by a shifted gamma on two
moments; the service time is the measured distribution where the demand carries one
(``Demand.service``: then the response time's distribution is the mixture of waits convolved with
it, queueing.convolved_quantiles), else fixed at its mean (a floor). The quantiles are roots of
the mixture's CDF. This is an approximation: the means are exact for the model, the percentiles
are not; but a request alone (one client) has exactly its service time's percentiles. A server
whose threads serve ``inline`` requests in a row on one kept-alive connection (Puma) gives the
whole wait to the first of each run of them (_latency_parts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from arena.model.queueing import (ShiftedGamma, Station, birth_death, convolved_quantiles, mixture_quantile, mva,
                                  service_cv2)
from arena.model.solve import root

UNBOUNDED_THREADS = 10_000  # async servers: no thread cap below the clients' own count
INLINE_WAIT_S = 0.2  # how long a thread waits for a connection's next request (Puma 5.6's FAST_TRACK_KA_TIMEOUT)


@dataclass(frozen=True)
class Demand:
    """What one request demands of a server, the model's input (a plan's Workload is what is sent)."""

    cpu_ms: float  # CPU per request in the server's processes (app and server), holds a core (and the GIL)
    io_ms: float  # waits that release core and GIL (sleeps, network calls), the database's apart
    outside_ms: float = 0.0  # per request outside the server's threads: network, kernel, parsing
    blocking_io: bool = False  # the wait holds the process (a non-yielding call in an event loop)
    cpu_cv2: float = 1.0  # squared coefficient of variation of the CPU per request (1: exponential)
    db_ms: float = 0.0  # per request holding a pooled database connection (its queries), at no contention
    db_cpu_ms: float = 0.0  # of that, the database's own CPU (its processes')
    # a request's own time in the server when alone (CPU, database, I/O), seconds: its quantiles at
    # queueing.SERVICE_AT, measured; empty: fixed at the means above
    service: tuple[float, ...] = ()


@dataclass(frozen=True)
class Config:
    processes: int
    threads: int | None  # per process; None: unbounded (an event loop serving every connection)
    cores: float
    gil: bool = True
    routing: str = "shared"  # "shared" accept queue, or "per-process" (connections stay with a process)
    pool: int | None = None  # database connections per process; None: as many as it has threads
    db_cores: float | None = None  # the database's own cores; None: it shares the server's
    cpus: float | None = None  # the CPUs the cores are a quota over, where fewer cores than CPUs; None: the cores
    # requests a thread serves in a row on one kept-alive connection while the others wait (Puma's
    # max_fast_inline), under closed load whose next request comes within INLINE_WAIT_S; 0: none
    inline: int = 0

    @property
    def slots(self) -> int:
        return self.processes * (self.threads or UNBOUNDED_THREADS)


def server_cpu_s(w: Demand, db_cores: float | None) -> float:
    """CPU per request on the server's cores: its own, and the database's where it shares them
    (``db_cores`` None)."""
    return (w.cpu_ms + (w.db_cpu_ms if db_cores is None else 0.0)) / 1000


@dataclass(frozen=True)
class Prediction:
    load: float  # clients (closed) or requests/s (open)
    throughput: float  # requests/s
    mean_ms: float  # response time seen by the client (outside time included)
    p50_ms: float
    p99_ms: float
    cpu_utilization: float  # of the cores given
    busy_slots: float  # mean requests in service inside the server
    queued: float  # mean requests waiting for a thread
    binding: str  # what limits throughput at this load
    overloaded: bool = False


def _gil_parallelism(j: int, processes: int, threads: int | None, gil: bool) -> float:
    """Expected number of distinct processes among j requests in service, each process holding at
    most ``threads`` of them, spread evenly at random: P (1 - C(PT - T, j) / C(PT, j)) (without a
    thread cap: P (1 - (1 - 1/P)^j)). With a GIL that is how many can compute at once."""
    if not gil:
        return float(j)
    if processes == 1:
        return 1.0
    if threads is None:
        return processes * (1 - (1 - 1 / processes) ** j)
    slots = processes * threads
    if j > slots - threads:  # every process holds at least one
        return float(processes)
    none = 1.0  # C(PT - T, j) / C(PT, j): a given process holds none of the j
    for i in range(j):
        none *= (slots - threads - i) / (slots - i)
    return processes * (1 - none)


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def connections_busy(j: int, processes: int, threads: int | None, pool: int | None) -> float:
    """Expected connections in use when j requests want one, spread evenly at random over the
    processes (at most ``threads`` in each; without a thread cap, each request's process drawn
    uniformly), each process holding at most ``pool``: P E[min(j_p, pool)], j_p hypergeometric
    (binomial without a cap). E[min(X, K)] = K - sum over i < K of (K - i) P(X = i)."""
    if pool is None or (threads is not None and pool >= threads) or j <= pool:
        return float(j)
    if processes == 1:
        return float(min(j, pool))
    short = 0.0
    for i in range(pool):
        if threads is None:
            log_p = _log_comb(j, i) + i * math.log(1 / processes) + (j - i) * math.log(1 - 1 / processes)
        else:
            slots = processes * threads
            if i > threads or j - i > slots - threads:
                continue
            log_p = _log_comb(threads, i) + _log_comb(slots - threads, j - i) - _log_comb(slots, j)
        short += (pool - i) * math.exp(log_p)
    return processes * (pool - short)


def _database_rates(w: Demand, db_cores: float, most: int) -> list[float]:
    """Queries per second a database on its own ``db_cores`` completes with k = 1..most connections
    busy: exact MVA of its CPU (load dependent) and the rest of a query's time (the wire, the
    driver) as a delay."""
    db_s, cpu_s = w.db_ms / 1000, min(w.db_cpu_ms, w.db_ms) / 1000
    if cpu_s <= 0:
        return [k / db_s for k in range(1, most + 1)]
    stations = [Station("db-cpu", cpu_s, "ld", tuple(min(float(k), db_cores) for k in range(1, most + 1)))]
    if db_s > cpu_s:
        stations.append(Station("db-wire", db_s - cpu_s, "delay"))
    return [p.throughput for p in mva(stations, most)]


def _pool_station(w: Demand, processes: int, threads: int | None, pool: int | None, db_cores: float | None,
                  population: int) -> Station | None:
    """The pool and the database as one load-dependent station [QSP ch. 8]: with j requests in their
    database phase (holding a connection or waiting for one), connections_busy(j) of them are
    served. Sharing the server's cores, the database's CPU is in the server's CPU station and each
    busy connection serves the rest of the query at once (rate multiplier: the connections busy); on
    its own cores, at the database's rate for that many connections (interpolated between whole
    numbers)."""
    shared = db_cores is None
    hold = (w.db_ms - (w.db_cpu_ms if shared else 0.0)) / 1000
    if hold <= 0:
        return None
    busy = [connections_busy(j, processes, threads, pool) for j in range(1, population + 1)]
    if shared:
        return Station("pool", hold, "ld", tuple(busy))
    rates = _database_rates(w, db_cores, max(1, math.ceil(max(busy))))

    def rate(k: float) -> float:
        lo = max(1, math.floor(k))
        hi = min(lo + 1, len(rates))
        return rates[lo - 1] + (k - lo) * (rates[hi - 1] - rates[lo - 1])

    return Station("pool", hold, "ld", tuple(max(1e-9, rate(k) * hold) for k in busy))


@lru_cache(maxsize=256)
def inner_throughput(w: Demand, processes: int, threads: int | None, cores: float, gil: bool,
                     population: int, pool: int | None = None, db_cores: float | None = None,
                     cpus: float | None = None) -> tuple[float, ...]:
    """Throughput (requests/s) of the server's inside with m = 1..population requests in service
    (``cpus``: the CPUs ``cores`` is a quota over; None: the cores)."""
    cpu_s, io_s = server_cpu_s(w, db_cores), w.io_ms / 1000
    timeshared = processes > math.ceil(cpus or cores)  # more processes than CPUs: the kernel's time slices
    single = min(cores, 1.0) if gil and processes == 1 else cores if cores <= 1 and not timeshared else None
    if single is not None:  # one CPU burst at a time: a FCFS server, its service's variability counts
        stations = [Station("cpu", cpu_s / single, "queue", cv2=w.cpu_cv2)]
    else:  # several at once: exact load-dependent MVA (exponential service)
        alpha = tuple(max(1e-9, min(float(j), cores, _gil_parallelism(j, processes, threads, gil)))
                      for j in range(1, population + 1))
        stations = [Station("cpu", cpu_s, "ld", alpha)]
    if io_s > 0:
        if w.blocking_io:  # holds its process like a GIL section, but no core
            io_alpha = tuple(_gil_parallelism(j, processes, threads, True) for j in range(1, population + 1))
            stations.append(Station("io", io_s, "ld", io_alpha))
        else:
            stations.append(Station("io", io_s, "delay"))
    database = _pool_station(w, processes, threads, pool, db_cores, population)
    if database is not None:
        stations.append(database)
    if cpu_s <= 0 and io_s <= 0 and database is None:
        raise ValueError("a workload needs some CPU or I/O time")
    return tuple(p.throughput for p in mva(stations, population))


def _inner(w: Demand, c: Config, population: int) -> tuple[float, ...]:
    return inner_throughput(w, c.processes, c.threads, float(c.cores), c.gil, population, c.pool, c.db_cores, c.cpus)


def _fes_rates(w: Demand, c: Config, limit: int) -> list[float]:
    """Service rate of the server with n = 1..limit requests present (capped at its slots)."""
    inside = min(limit, c.slots)
    rates = _inner(w, c, inside)
    return [rates[min(n, inside) - 1] for n in range(1, limit + 1)]


def _latency_parts(w: Demand, c: Config, rates: list[float], seen: list[float],
                   inline: int = 0) -> list[tuple[float, ShiftedGamma]]:
    """The response time of an arrival that finds n = 0.. others present (probabilities ``seen``), less
    its own service time where the demand gives that as a distribution (``Demand.service``).
    ``inline``: requests a thread serves in a row on one connection. Then the first of a
    connection's k requests waits for the k requests of each connection ahead of it, and the other
    k - 1 follow it at once: the wait of FCFS, mean conserved (the server does the same work at the
    same rates), becomes a mixture of none (probability (k-1)/k) and k times as many departures (1/k)."""
    floor = (w.cpu_ms + w.io_ms + w.db_ms) / 1000
    shift = w.outside_ms / 1000 + (0.0 if w.service else floor)
    slots = c.slots
    full = rates[min(slots, len(rates)) - 1]
    spread = departures_cv2(w.service, slots)
    parts = []
    for n, prob in enumerate(seen):
        if prob < 1e-12:
            continue
        inside = min(n + 1, slots, len(rates))
        in_server = inside / rates[inside - 1]  # Little's law inside, at the population it joins
        extra = max(0.0, in_server - floor)  # behind the others' bursts: a sum of inside - 1 equal parts
        contention = extra ** 2 / max(1, inside - 1)
        waits = max(0, n + 1 - slots)
        if waits and inline > 1:
            parts.append((prob * (inline - 1) / inline, ShiftedGamma(shift, extra, contention)))
            prob, waits = prob / inline, waits * inline
        parts.append((prob, ShiftedGamma(shift, waits / full + extra, waits * spread / full ** 2 + contention)))
    return parts


def departures_cv2(service: tuple[float, ...], slots: int) -> float:
    """The squared coefficient of variation of the time between departures of ``slots`` busy
    servers whose service times are ``service`` (quantiles at queueing.SERVICE_AT; empty: exponential,
    1): QNA's departures of a G/G/m station [Whi83] with every server busy (utilization 1,
    as while requests wait), c_d^2 = 1 + (c_s^2 - 1) / sqrt(m): one server gives its service's own,
    and many tend to a Poisson stream."""
    if not service:
        return 1.0
    return 1 + (service_cv2(service) - 1) / math.sqrt(slots)


def binding(w: Demand, c: Config, cpu_util: float, busy: float, queued: float, x: float) -> str:
    if cpu_util > 0.9 * min(c.cores, c.processes if c.gil else c.cores) / c.cores:
        if c.gil and c.processes < c.cores:
            return f"GIL: {c.processes} process(es) < {c.cores:g} cores"
        shared = " (with the database's)" if w.db_cpu_ms and c.db_cores is None else ""
        return f"CPU: {c.cores:g} core(s) busy{shared}"
    if c.pool is not None and w.db_ms > 0 and (c.threads is None or c.pool < c.threads):
        if x * w.db_ms / 1000 > 0.9 * c.processes * c.pool:
            return f"pool: {c.pool} connection(s) per process busy, threads wait for one"
    if queued > 0.1 * max(busy, 1) and c.threads is not None:
        return f"threads: all {c.slots} busy, requests queue for one"
    if w.blocking_io and busy > 0.9 * c.processes:
        return "event loop: blocking I/O holds each process"
    return "load: the server is not full at this load"


def _closed(w: Demand, c: Config, clients: int, think_ms: float):
    """The closed network solved: (its last MVA point, the marginals an arrival sees, the rates)."""
    rates = _fes_rates(w, c, clients)
    server = Station("server", 1.0, "ld", tuple(rates))
    points = mva([server], clients, think=think_ms / 1000 + w.outside_ms / 1000)
    seen = points[-2].marginals["server"] if clients > 1 else [1.0]  # the arrival theorem: N - 1 others
    return points[-1], seen, rates


def predict_closed(w: Demand, c: Config, clients: int, think_ms: float = 0.0, latency: bool = True) -> Prediction:
    """Closed load of ``clients`` connections with ``think_ms`` between a response and the next
    request (``latency`` False: its p50 and p99 left out, NaN: a throughput's error needs neither)."""
    if c.routing == "per-process" and c.processes > 1:
        return _split(w, c, clients, think_ms, latency)
    point, seen, rates = _closed(w, c, clients, think_ms)
    inline = c.inline if (think_ms + w.outside_ms) / 1000 <= INLINE_WAIT_S else 0
    return _prediction(w, c, clients, point.throughput, point.response + w.outside_ms / 1000,
                       point.marginals["server"], seen, rates, latency, inline)


def _split(w: Demand, c: Config, clients: int, think_ms: float, latency: bool) -> Prediction:
    """Per-process routing: the clients split evenly among P single-process servers that share the
    cores. A process with n of the N clients sees the cores the others leave it: C minus their CPU
    utilization, (1 - n/N) of the total throughput X times the CPU per request (at least a sliver).
    X is the fixed point of X = sum of the processes' throughputs, found by Brent's method
    (solve.root; the right side falls as X grows, so there is one). Processes with as many clients
    behave alike: each size is solved once."""
    share = [clients // c.processes + (1 if i < clients % c.processes else 0) for i in range(c.processes)]
    sizes = {n: share.count(n) for n in set(share) if n > 0}
    cpu_s = server_cpu_s(w, c.db_cores)

    def alone(n: int, total: float) -> Config:
        free = c.cores - total * (1 - n / clients) * cpu_s
        return replace(c, processes=1, cores=round(min(max(0.02, free), c.cores), 6), routing="shared")

    def served(total: float) -> float:
        return sum(k * _closed(w, alone(n, total), n, think_ms)[0].throughput for n, k in sizes.items())

    most = served(0.0)  # with the cores all to itself, each process does its most
    x = root(lambda total: served(total) - total, 0.0, most, xtol=1e-6, rtol=1e-6) if most > 0 else 0.0
    preds = {n: predict_closed(w, alone(n, x), n, think_ms, latency) for n in sizes}
    total = sum(k * preds[n].throughput for n, k in sizes.items())
    mean = sum(k * preds[n].throughput * preds[n].mean_ms for n, k in sizes.items()) / total
    heavy = preds[max(sizes)]
    util = min(1.0, total * cpu_s / c.cores)
    busy = sum(k * preds[n].busy_slots for n, k in sizes.items())
    queued = sum(k * preds[n].queued for n, k in sizes.items())
    return Prediction(clients, total, mean, heavy.p50_ms, heavy.p99_ms, util, busy, queued,
                      binding(w, c, util, busy, queued, total))


def _prediction(w: Demand, c: Config, load: float, x: float, response_s: float, marginal: list[float],
                seen: list[float], rates: list[float], latency: bool = True, inline: int = 0) -> Prediction:
    slots = c.slots
    busy = sum(min(n, slots) * p for n, p in enumerate(marginal))
    queued = sum(max(0, n - slots) * p for n, p in enumerate(marginal))
    cpu_util = min(1.0, x * server_cpu_s(w, c.db_cores) / c.cores)
    p50_ms = p99_ms = math.nan
    if latency:
        parts = _latency_parts(w, c, rates, seen, inline)
        if w.service:
            p50_ms, p99_ms = (v * 1000 for v in convolved_quantiles(parts, w.service, (0.5, 0.99)))
        else:
            p50_ms, p99_ms = mixture_quantile(parts, 0.5) * 1000, mixture_quantile(parts, 0.99) * 1000
    return Prediction(load, x, response_s * 1000, p50_ms, p99_ms, cpu_util, busy, queued,
                      binding(w, c, cpu_util, busy, queued, x))


def capacity(w: Demand, c: Config) -> float:
    """The most requests/s the server can answer: its rate with every slot busy."""
    n = min(c.slots, 4096)
    if c.routing == "per-process" and c.processes > 1:
        one = replace(c, processes=1, cores=c.cores / c.processes, routing="shared")
        return c.processes * capacity(w, one)
    return _inner(w, c, n)[-1]


def predict_open(w: Demand, c: Config, rate: float, latency: bool = True) -> Prediction:
    """Open load of ``rate`` requests/s (Poisson arrivals) against the flow-equivalent server
    (``latency`` as predict_closed's)."""
    cap = capacity(w, c)
    if rate >= cap:
        return Prediction(rate, cap, math.inf, math.inf, math.inf, min(1.0, cap * server_cpu_s(w, c.db_cores) / c.cores),
                          float(c.slots), math.inf, f"overloaded: {rate:g} req/s >= capacity {cap:.1f} req/s",
                          overloaded=True)
    if c.routing == "per-process" and c.processes > 1:
        one = replace(c, processes=1, cores=c.cores / c.processes, routing="shared")
        p = predict_open(w, one, rate / c.processes, latency)
        return Prediction(rate, rate, p.mean_ms, p.p50_ms, p.p99_ms, p.cpu_utilization, p.busy_slots * c.processes,
                          p.queued * c.processes, p.binding)
    # states 0..K: exact up to the slots, then a geometric tail at the full rate, cut where it is negligible
    slots = min(c.slots, 4096)
    full = capacity(w, c)
    rho = rate / full
    tail = int(math.ceil(math.log(1e-12) / math.log(rho))) if rho > 0 else 0
    k = slots + min(tail, 200_000)
    inner = _inner(w, c, slots)
    rates = [inner[min(n, slots) - 1] for n in range(1, k + 1)]
    pi = birth_death([rate] * k, rates)
    mean_n = sum(n * p for n, p in enumerate(pi))
    response = mean_n / rate + w.outside_ms / 1000  # Little's law
    return _prediction(w, c, rate, rate, response, pi, pi, rates, latency)
