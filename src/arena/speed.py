"""The machine around each run, judged by evidence from the run's own time. Two things make a run
on a shared machine not comparable with the others:

- **others on its CPUs**: a process that is not Arena's (a neighbour, a cron job) takes time on the
  server's CPUs during the run. The kernel's per-CPU counters (busy and stolen time, psutil's
  cpu_times) over the measured window, less the CPU of Arena's own groups there (the server's, the
  services', Arena itself), is that time, exactly, from the run's own window (``busy_s``).
- **a slower machine**: cores that run slower for a spell (a sibling hyper-thread, frequency, a
  hypervisor) make every request cost more CPU. The speed check below times a fixed unit of work
  before and after the run and every half second during it (``Sampler``); a run is judged slow
  only when all its checks agree (the fastest of them is slow), against the experiment's usual
  figure (``Reference``, the median), not its fastest. One check is a poor witness: on a 2-CPU
  virtual machine single checks of an idle core came out in two states 1.6x apart, changing within
  a second and unrelated to the runs' throughput; judged one or two at a time against the fastest
  ever, they flagged a quarter of the runs of an idle machine.

The check is a fixed unit of interpreter work (integer arithmetic, building and walking a few
hundred small dicts through JSON: what an interpreted server does with a core), run on each of the
given CPUs by a thread pinned there, in the thread's own CPU time (what a spell makes every request
cost more of; a core merely shared with the server's or the database's leftover work does not
count, as wall time would), the fastest of a few trials. It takes about 10 ms a CPU.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

_DATA = [{"id": i, "name": f"item {i}", "tags": ["a", "b", str(i)], "score": i * 0.5} for i in range(300)]
TRIALS = 5
# a run whose every check ran more than this much slower than usual is invalid: twice as slow. The
# checks of an idle 2-CPU virtual machine sit in two states 1.6x apart; at 30% a twentieth of its
# runs were flagged while their throughput was within 4% of the rest (benches/speed_check.py).
THRESHOLD = 1.0
MIN_REFERENCE = 3  # checks before a slowdown is judged: fewer give no usual speed to judge by


def _unit() -> float:
    start = time.thread_time()
    total = 0
    for i in range(20_000):
        total += i * i % 7
    json.loads(json.dumps(_DATA))
    return time.thread_time() - start


def check_ms(cpus: list[int] | tuple[int, ...], trials: int = TRIALS) -> float:
    """The slowest of the CPUs: on each, the fastest of ``trials`` units of work (milliseconds).
    The calling thread is pinned to each CPU in turn and given back its own CPUs after."""
    own = os.sched_getaffinity(0)
    slowest = 0.0
    try:
        for cpu in sorted(set(cpus)) or sorted(own):
            os.sched_setaffinity(0, {cpu})
            slowest = max(slowest, min(_unit() for _ in range(trials)) * 1000)
    finally:
        os.sched_setaffinity(0, own)
    return slowest


def busy_s(cpus: list[int] | tuple[int, ...]) -> float:
    """Seconds the given CPUs have been busy in processes (user, nice, system) or stolen by the
    hypervisor since boot, summed: the kernel's per-CPU counters (/proc/stat, psutil). Not their
    interrupt time: the kernel counts it apart from any process and any cgroup, and during a run it is
    the run's own packets (1-3% of the server's CPU at 400-600 requests a second over loopback here),
    which no group of Arena's accounts and which would read as a neighbour's."""
    import psutil

    per = psutil.cpu_times(percpu=True)
    return sum(t.user + t.nice + t.system + getattr(t, "steal", 0.0) for t in (per[c] for c in cpus if c < len(per)))


def others_cores(busy_delta_s: float, arena_cpu_s: float, window_s: float) -> float:
    """Cores that processes other than Arena's kept busy on the run's CPUs over its window: their busy
    time less Arena's own groups' CPU (never below 0: the counters tick in 10 ms steps)."""
    return max(0.0, busy_delta_s - arena_cpu_s) / window_s if window_s > 0 else 0.0


class Sampler:
    """Speed checks of one unit each on ``cpus`` every ``every_s`` seconds, in a thread of its own (it
    pins itself), from ``start`` until ``stop``: the run's own time, at a cost of about 2 ms a CPU each."""

    def __init__(self, cpus: list[int], every_s: float = 0.5, check: Callable[[list[int]], float] | None = None):
        self.cpus, self.every_s = cpus, every_s
        self.check = check or (lambda c: check_ms(c, trials=1))
        self.checks: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="arena-speed", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.checks.append(self.check(self.cpus))

    def start(self) -> "Sampler":
        self._thread.start()
        return self

    def stop(self) -> list[float]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return self.checks


@dataclass
class Reference:
    """The experiment's usual speed: the median of its runs' figures so far (the stored runs' and this
    invocation's). A run's figure is the fastest of its checks (before, during and after it): a run
    is slow only when every check of it was, and ``slowdown`` is how much slower than usual that
    fastest check ran (0.4: 40% slower). Its figure then joins the reference."""

    checks: list[float] = field(default_factory=list)

    def slowdown(self, *checks: float) -> float:
        """How much slower than usual the run's machine ran (0 while fewer than MIN_REFERENCE runs)."""
        judged = self.judged(*checks)
        usual = statistics.median(self.checks) if len(self.checks) >= MIN_REFERENCE else None
        self.checks.append(judged)
        return 0.0 if usual is None else judged / usual - 1

    @staticmethod
    def judged(*checks: float) -> float:
        """The figure a run's checks are judged (and stored) by: the fastest of them."""
        return min(checks)
