"""One instance simulated: an event simulation of a server's processes, threads, GILs and cores (and a
database's, and a CFS quota's periods), run by its compiled engine, arena-sim (crates/arena-sim: the
same steps in Rust, the same numbers to the bit, about ten times faster a call) where it is built,
else here in Python. Pure and seeded. The fleet and the statistics over replications: model/sim.py."""

from __future__ import annotations

import heapq
import json
import math
import os
import subprocess
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from arena import paths
from arena.errors import ArenaError
from arena.model.server import INLINE_WAIT_S
from arena.model.sim import Sampler, SimRun, Summary, summarize

UNBOUNDED = 1 << 30  # an event loop's "threads": as many requests in service as arrive
CORES_SERVER, CORES_DB = 10, 11  # the event of a pool of cores (a burst's end...), the server's, the database's
BURST_END, QUOTA_OUT, PERIOD_END = range(3)  # what a pool's event is


class _Cores:
    """Cores as the kernel shares them among runnable threads (CFS, idealized as processor sharing):
    n bursts on c cores each advance at min(1, c / n) seconds of CPU per second, so a burst's wall
    time stretches with the bursts beside it, and c need not be whole.

    All running bursts advance alike, so one clock serves them: ``attained``, the CPU each has had
    since the pool began; a burst ends when the clock reaches its tag, the clock at its start plus
    its CPU (a heap of tags: O(log n) per event).

    Under a CPU quota (CFS bandwidth control: a cgroup's cpu.max), the runnable bursts draw on
    ``quota`` seconds of CPU each ``period``, in parallel (min(n, c) CPU-seconds a second); when it
    is spent, every burst stops until the period ends and the quota is whole again. The CPUs held
    back meanwhile (one a runnable burst, at most c) add up to ``throttled_s``, as cpu.stat's
    throttled time sums its runqueues'. Periods begin at 0. The pool's next event is a burst's end,
    the quota running out, or the period's end (``next_is``), whichever comes first."""

    __slots__ = ("attained", "cores", "event", "kind", "next_is", "period", "period_end", "quota", "since", "tags",
                 "throttled", "throttled_s", "used", "version")

    def __init__(self, cores: float, event: int, quota: float | None = None, period: float = 0.1):
        self.cores, self.event = cores, event
        self.tags: list[tuple[float, int]] = []  # heap of (attained at its end, request)
        self.kind: dict[int, int] = {}  # request -> the event its burst's end is
        self.attained = self.since = 0.0
        self.version = 0  # of the forecast end: a change in the sharing voids the one in the event list
        self.quota = math.inf if quota is None else quota * period  # CPU-seconds a period
        self.period, self.period_end = period, period
        self.used = self.throttled_s = 0.0  # CPU-seconds of this period; CPU-seconds held back in all
        self.throttled = False
        self.next_is = BURST_END

    def rate(self) -> float:
        if self.throttled:
            return 0.0
        return min(1.0, self.cores / len(self.tags)) if self.tags else 1.0

    def advance(self, t: float) -> None:
        if self.throttled:
            self.throttled_s += (t - self.since) * min(len(self.tags), self.cores)
        else:
            self.attained += (t - self.since) * self.rate()
            if self.tags and self.quota < math.inf:
                self.used += (t - self.since) * min(len(self.tags), self.cores)
        self.since = t
        if self.quota < math.inf and t >= self.period_end:  # a new period: the quota whole again
            self.used, self.throttled = 0.0, False
            self.period_end = self.period * (math.floor(t / self.period) + 1.0)
            if self.period_end <= t:
                self.period_end += self.period

    def add(self, r: int, seconds: float, kind: int) -> None:
        heapq.heappush(self.tags, (self.attained + seconds, r))
        self.kind[r] = kind

    def next_event(self, t: float) -> float:
        """When the pool's next event is, from ``t`` at its present sharing (and which, in ``next_is``)."""
        if self.throttled:
            self.next_is = PERIOD_END
            return self.period_end
        end = t + (self.tags[0][0] - self.attained) / self.rate()
        self.next_is = BURST_END
        if self.quota == math.inf:
            return end
        out = t + max(0.0, self.quota - self.used) / min(len(self.tags), self.cores)
        if end <= out and end <= self.period_end:
            return end
        if self.period_end <= out:
            self.next_is = PERIOD_END
            return self.period_end
        self.next_is = QUOTA_OUT
        return out

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
    ``db_cores``: the database's own cores (None: it computes on the server's). ``quota``: a
    container's CPU quota over the ``cores``, in cores of CPU time each ``period`` seconds (None:
    none), as CFS bandwidth control enforces it (_Cores); the database's CPU on the server's cores
    draws on it too, where it has no cores of its own (one pool: an approximation, as a database
    runs in a cgroup of its own)."""

    processes: int
    threads: int | None
    cores: float
    gil: bool = True
    accept: str = "shared"
    blocking_io: bool = False
    inline: int = 0
    inline_wait_s: float = INLINE_WAIT_S
    least_busy: bool = False
    pool: int | None = None
    db_cores: float | None = None
    quota: float | None = None
    period: float = 0.1


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
    throttled_s: float = 0.0  # CPU-seconds its quota held back (summed over the CPUs, as cpu.stat's)


def simulate_instance(inst: Instance, work: Work, *, clients: int | None = None, rate: float | None = None,
                      arrival: str = "poisson", requests: int, seed: int = 1) -> InstanceRun:
    """``requests`` through one instance, from ``clients`` closed-loop users on kept-alive
    connections (each sends its next request when its answer is back) or arrivals at ``rate``
    (``arrival``: "poisson", or "constant" spacing as arena-load's open model sends by default; each
    bound to a process at random where connections stay with one); response times include
    ``work.outside``. Cores are shared by the runnable bursts (_Cores); a process's CPU bursts take
    its GIL in turn (FIFO, whole bursts: the switch interval is left out), and a request that let go
    of the GIL for its wait (I/O, a query) takes it back, in the same queue, before it answers, as a
    Python or Ruby thread must to run the code that writes its response (_InstanceSim)."""
    return simulate_instances(inst, work, [seed], clients=clients, rate=rate, arrival=arrival, requests=requests)[0]


def simulate_instances(inst: Instance, work: Work, seeds: list[int], *, clients: int | None = None,
                       rate: float | None = None, arrival: str = "poisson", requests: int) -> list[InstanceRun]:
    """One replication (simulate_instance) per seed, in order. arena-sim's are started side by
    side and then waited for: the replications of a simulation take the machine's cores."""
    if (clients is None) == (rate is None):
        raise ValueError("give clients or rate")
    sims = [_InstanceSim(inst, work, clients, rate, arrival, requests, seed) for seed in seeds]
    compiled = paths.built("arena-sim", "ARENA_SIM_BIN")
    if compiled is None or not os.access(compiled, os.X_OK):
        return [sim.run() for sim in sims]
    answers = []
    try:
        for sim in sims:
            answers.append(sim.start_compiled(compiled))
    finally:  # those started are waited for, whatever stopped the others
        runs = [answer() for answer in answers]
    return runs


ARRIVE, CPU_DONE, DB_CPU_DONE, DB_DONE, IO_DONE, RESUMED = range(6)  # a request's events (CORES_*: a pool's)


class _InstanceSim:
    """One replication of one instance, event by event. A request's way through the server is its
    steps, each a method run at its event: ``arrive`` (a free thread of the process its connection
    is bound to, or its queue), ``cpu_done`` (its CPU burst ended: it lets go of the GIL for its
    wait and takes a pooled connection, or waits for one), ``db_cpu_done`` and ``db_done`` (the
    query), and ``answer`` (its wait is over: it takes the GIL back, the answer leaves, its thread
    takes the next waiter or, on a kept-alive connection, waits for the same client's next
    request). The rest are what the steps share: the event list, the GIL, the cores, the pools."""

    __slots__ = ("arrived", "bind", "client_of", "clients", "conn_queue", "conns", "cpu", "cpu_s", "db", "db_cores",
                 "db_cpu", "done", "events", "free_threads", "gaps", "gil_held", "gil_queue", "held_for", "in_row",
                 "inline", "inst", "io", "issued", "let_go", "proc_of", "process_of_client", "requests", "seq",
                 "server_cores", "shared", "shared_accept", "start", "waiting", "work")

    def __init__(self, inst: Instance, work: Work, clients: int | None, rate: float | None, arrival: str,
                 requests: int, seed: int):
        self.inst, self.work, self.clients, self.requests = inst, work, clients, requests
        rng = np.random.default_rng(seed)
        # arrays, as arena-sim reads them; run() makes them lists, which its steps index faster
        self.cpu, self.io = work.cpu.draw(rng, requests), work.io.draw(rng, requests)
        self.db = work.db.draw(rng, requests) if work.db is not None else None
        self.db_cpu = work.db_cpu.draw(rng, requests) if work.db_cpu is not None and self.db is not None else None
        self.bind = rng.integers(0, inst.processes, requests)
        self.gaps = (None if not rate else np.full(requests, 1 / rate) if arrival == "constant"
                     else rng.exponential(1 / rate, requests))
        self.shared_accept = inst.accept == "shared"
        self.inline = inst.inline if clients is not None and work.outside <= inst.inline_wait_s else 0
        self.events: list = []  # (time, seq, kind, request)
        self.seq = 0
        self.arrived = [0.0] * requests
        self.start = [0.0] * requests
        self.done = [0.0] * requests
        self.proc_of = [0] * requests
        self.let_go = [False] * requests  # it let go of its process's GIL for its wait (and needs it back to answer)
        self.client_of = [0] * requests
        self.free_threads = [inst.threads or UNBOUNDED] * inst.processes
        self.shared: deque = deque()
        self.waiting: list[deque] = [deque() for _ in range(inst.processes)]
        self.gil_held = [False] * inst.processes
        self.gil_queue: list[deque] = [deque() for _ in range(inst.processes)]
        self.conns = [inst.pool or UNBOUNDED] * inst.processes
        self.conn_queue: list[deque] = [deque() for _ in range(inst.processes)]
        # the database's CPU on its own cores or the server's
        self.server_cores = _Cores(inst.cores, CORES_SERVER, inst.quota, inst.period)
        self.db_cores = self.server_cores if inst.db_cores is None else _Cores(inst.db_cores, CORES_DB)
        n_clients = clients or 0
        self.process_of_client = [-1] * n_clients  # the process its connection stays with
        self.held_for = [-1] * n_clients  # the process whose thread waits for its next request (Puma's fast inline)
        self.in_row = [0] * n_clients  # requests served in a row on its connection by one thread
        self.issued = 0
        self.cpu_s = 0.0

    # ------------------------------------------------------------------ the run

    def run(self) -> InstanceRun:
        work = self.work
        self.cpu, self.io, self.db, self.db_cpu, self.bind, self.gaps = (
            None if a is None else a.tolist() for a in (self.cpu, self.io, self.db, self.db_cpu, self.bind, self.gaps))
        if self.clients is not None:
            for c in range(min(self.clients, self.requests)):
                self.issue(work.outside / 2, c)
        else:
            self.issue(self.gaps[0], 0)
        events, server_cores, db_cores = self.events, self.server_cores, self.db_cores
        arrive, cpu_done, db_cpu_done, db_done, answer = (self.arrive, self.cpu_done, self.db_cpu_done, self.db_done,
                                                          self.answer)
        while events:
            t, _, kind, r = heapq.heappop(events)
            if kind == CORES_SERVER or kind == CORES_DB:  # a burst ends, if nothing changed the sharing since
                pool = server_cores if kind == CORES_SERVER else db_cores
                if r != pool.version:
                    continue
                pool.advance(t)
                if pool.next_is != BURST_END:  # the quota ran out, or a period ended (advance began the next)
                    if pool.next_is == QUOTA_OUT:
                        pool.throttled = True
                    self.schedule(pool, t)
                    continue
                r, kind = pool.pop()
                self.schedule(pool, t)
            if kind == ARRIVE:
                arrive(r, t)
            elif kind == CPU_DONE:
                cpu_done(r, t)
            elif kind == DB_CPU_DONE:
                db_cpu_done(r, t)
            elif kind == DB_DONE:
                db_done(r, t)
            else:  # IO_DONE, or RESUMED
                answer(r, t, kind)
        return self._result(np.array(self.arrived), np.array(self.start), np.array(self.done), self.proc_of,
                            self.cpu_s, self.server_cores.throttled_s)

    def start_compiled(self, binary: Path) -> Callable[[], InstanceRun]:
        """The same replication by arena-sim (crates/arena-sim: these steps in Rust, in the same
        order and arithmetic, so the same numbers to the bit; about ten times faster a call),
        started: this one's demands in; the call returned waits for its requests' times."""
        n, work = self.requests, self.work
        job = {"processes": self.inst.processes, "threads": self.inst.threads, "cores": float(self.inst.cores),
               "gil": self.inst.gil, "shared_accept": self.shared_accept, "blocking_io": self.inst.blocking_io,
               "inline": self.inline, "least_busy": self.inst.least_busy, "pool": self.inst.pool,
               "db_cores": None if self.inst.db_cores is None else float(self.inst.db_cores),
               "quota": None if self.inst.quota is None else float(self.inst.quota), "period": float(self.inst.period),
               "outside": float(work.outside), "clients": self.clients, "requests": n,
               "has_db": self.db is not None, "has_db_cpu": self.db_cpu is not None, "has_gaps": self.gaps is not None}
        # in and out through files in memory: a megabyte each way, where a pipe takes it 64 KiB a poll
        got, err = open(os.memfd_create("arena-sim-out"), "w+b"), open(os.memfd_create("arena-sim-err"), "w+b")
        try:
            with open(os.memfd_create("arena-sim-in"), "w+b") as into:
                into.write(json.dumps(job).encode() + b"\n")
                for a in (self.cpu, self.io, self.db, self.db_cpu, self.gaps):
                    if a is not None:
                        into.write(a.astype("<f8", copy=False).tobytes())
                into.write(self.bind.astype("<i8", copy=False).tobytes())
                into.seek(0)
                proc = subprocess.Popen([str(binary)], stdin=into, stdout=got, stderr=err)
        except BaseException:
            got.close(), err.close()
            raise

        def answer() -> InstanceRun:
            with got, err:
                code = proc.wait()
                got.seek(0), err.seek(0)
                out, why = got.read(), err.read()
            if code != 0 or len(out) != 8 * (2 + 4 * n):
                raise ArenaError(f"{binary}: the simulation failed (exit {code}: "
                                 f"{why.decode(errors='replace').strip()[-300:]})")
            cpu_s, throttled_s = (float(v) for v in np.frombuffer(out, "<f8", 2))
            arrived, start, finished = (np.frombuffer(out, "<f8", n, 8 * (2 + k * n)) for k in range(3))
            return self._result(arrived.copy(), start.copy(), finished.copy(),
                                np.frombuffer(out, "<i8", n, 8 * (2 + 3 * n)), cpu_s, throttled_s)
        return answer

    def _result(self, arrivals: np.ndarray, starts: np.ndarray, dones: np.ndarray, proc_of, cpu_s: float,
                throttled_s: float) -> InstanceRun:
        outside = self.work.outside
        waits = starts - (arrivals + outside / 2)
        served = np.bincount(proc_of, minlength=self.inst.processes)
        in_service = float((dones - starts).sum() - self.requests * outside / 2)
        return InstanceRun(arrivals, waits, dones - arrivals, served, cpu_s, in_service, throttled_s)

    # ------------------------------------------------------------------ a request's steps

    def arrive(self, r: int, t: float) -> None:
        self.arrived[r] = t - self.work.outside / 2  # the client sent it half the outside time earlier
        if self.gaps is not None and self.issued < self.requests:
            self.issue(t + self.gaps[self.issued], 0)
        c = self.client_of[r]
        if self.inline and self.held_for[c] >= 0:  # its connection's thread has waited for it
            p, self.held_for[c] = self.held_for[c], -1
            self.free_threads[p] += 1
            self.begin(r, p, t)
            return
        p = self.process_for(r)
        if self.free_threads[p] > 0:
            self.begin(r, p, t)
        else:
            self.queue_of(p).append(r)

    def cpu_done(self, r: int, t: float) -> None:
        p = self.proc_of[r]
        self.cpu_s += self.cpu[r]
        if not self.inst.blocking_io and (self.db is not None or self.io[r] > 0):
            self.let_go[r] = True
            self.release_gil(p, t)
        if self.db is None:
            self.after_db(r, t)
        elif self.conns[p] > 0:
            self.conns[p] -= 1
            self.query(r, t)
        else:
            self.conn_queue[p].append(r)

    def db_cpu_done(self, r: int, t: float) -> None:
        if self.db_cores is self.server_cores:
            self.cpu_s += self.db_cpu[r]
        self.at(t + self.db[r], DB_DONE, r)

    def db_done(self, r: int, t: float) -> None:
        """The connection passes to the next waiter of the process."""
        p = self.proc_of[r]
        if self.conn_queue[p]:
            self.query(self.conn_queue[p].popleft(), t)
        else:
            self.conns[p] += 1
        self.after_db(r, t)

    def answer(self, r: int, t: float, kind: int) -> None:
        """IO_DONE, or RESUMED (it has the GIL back): the answer leaves; the thread takes the next waiter."""
        p = self.proc_of[r]
        if kind == IO_DONE and self.let_go[r] and self.inst.gil and self.gil_held[p]:
            self.gil_queue[p].append(r)  # to take the GIL back (zero time: no CPU burst is modelled here)
            return
        if not self.let_go[r] or kind == RESUMED:
            self.release_gil(p, t)
        outside = self.work.outside
        self.done[r] = t + outside / 2
        if self.clients is not None:
            c = self.client_of[r]
            self.in_row[c] += 1
            if self.inline and self.issued < self.requests and (self.in_row[c] < self.inline or not self.queue_of(p)):
                self.held_for[c] = p  # the thread waits for the same connection's next request
                self.issue(self.done[r] + outside / 2, c)
                return
            self.in_row[c] = 0
            self.issue(self.done[r] + outside / 2, c)
        self.free_threads[p] += 1
        if self.queue_of(p):
            self.begin(self.queue_of(p).popleft(), p, t)

    # ------------------------------------------------------------------ what the steps share

    def at(self, t: float, kind: int, r: int) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, r))

    def issue(self, t: float, client: int) -> None:
        if self.issued < self.requests:
            self.client_of[self.issued] = client
            self.at(t, ARRIVE, self.issued)
            self.issued += 1

    def begin(self, r: int, p: int, t: float) -> None:
        self.free_threads[p] -= 1
        self.proc_of[r], self.start[r] = p, t
        self.want_gil(r, t)

    def want_gil(self, r: int, t: float) -> None:
        p = self.proc_of[r]
        if self.inst.gil and self.gil_held[p]:
            self.gil_queue[p].append(r)
            return
        self.gil_held[p] = True
        self.want_core(self.server_cores, r, CPU_DONE, t)

    def want_core(self, pool: _Cores, r: int, kind: int, t: float) -> None:
        pool.advance(t)
        pool.add(r, self.cpu[r] if kind == CPU_DONE else self.db_cpu[r], kind)
        self.schedule(pool, t)

    def schedule(self, pool: _Cores, t: float) -> None:
        """The next burst to end, at the pool's present sharing (any earlier forecast is void)."""
        pool.version += 1
        if pool.tags:
            self.at(pool.next_event(t), pool.event, pool.version)

    def release_gil(self, p: int, t: float) -> None:
        if self.gil_queue[p]:  # the GIL passes to the next waiter: a CPU burst, or a request back from its wait
            r = self.gil_queue[p].popleft()
            if self.let_go[r]:
                self.at(t, RESUMED, r)
            else:
                self.want_core(self.server_cores, r, CPU_DONE, t)
        else:
            self.gil_held[p] = False

    def queue_of(self, p: int) -> deque:
        return self.shared if self.shared_accept else self.waiting[p]

    def query(self, r: int, t: float) -> None:
        """A pooled connection held for the database's CPU, then the rest of the query."""
        if self.db_cpu is not None:
            self.want_core(self.db_cores, r, DB_CPU_DONE, t)
        else:
            self.at(t + self.db[r], DB_DONE, r)

    def after_db(self, r: int, t: float) -> None:
        self.at(t + self.io[r], IO_DONE, r)

    def process_for(self, r: int) -> int:
        inst = self.inst
        if self.shared_accept:  # the process with the most free threads takes it
            return max(range(inst.processes), key=lambda j: self.free_threads[j])
        if self.clients is None:
            return self.bind[r]
        c = self.client_of[r]
        if self.process_of_client[c] < 0:  # accepted by whichever process wins the race, then it stays there
            if inst.least_busy:  # the process with the most free threads takes it
                self.process_of_client[c] = max(range(inst.processes),
                                                key=lambda j: (self.free_threads[j], -len(self.waiting[j])))
            else:
                self.process_of_client[c] = self.bind[r]
        return self.process_of_client[c]


def instance(inst: Instance, work: Work, *, clients: int | None = None, rate: float | None = None,
             arrival: str = "poisson", requests: int = 20_000, replications: int = 5, seed: int = 1) -> Summary:
    """``replications`` runs of one instance, summarized (the first 10% of each left out)."""
    return summarize(simulate_instances(inst, work, [seed + k for k in range(replications)], clients=clients,
                                        rate=rate, arrival=arrival, requests=requests))
