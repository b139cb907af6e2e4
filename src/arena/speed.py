"""The machine's speed, checked before and after each run: a shared machine has spells when its
cores run slower (a neighbour on the same host, a sibling hyper-thread, frequency): every request
then costs more CPU, and a run taken in such a spell is not comparable with the others. The
server's CPU per request says so only afterwards and mixed with the configuration's own effects;
this check says it directly.

The check is a fixed unit of interpreter work (integer arithmetic, building and walking a few
hundred small dicts through JSON: what an interpreted server does with a core), run on each of the
given CPUs by a thread pinned there, in the thread's own CPU time (what a spell makes every request
cost more of; a core merely shared with the server's or the database's leftover work does not
count, as wall time would), the fastest of a few trials. It takes about 10 ms a CPU.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

_DATA = [{"id": i, "name": f"item {i}", "tags": ["a", "b", str(i)], "score": i * 0.5} for i in range(300)]
TRIALS = 5
THRESHOLD = 0.3  # a run whose machine ran more than this much slower than at its best is invalid


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


@dataclass
class Reference:
    """The fastest check of an experiment so far (its stored runs' and this invocation's): the machine
    at its best. ``slowdown`` of a run's checks is how much slower than that it ran (0.4: 40% slower),
    the slower of the checks before and after the run counting, and its checks join the reference."""

    fastest_ms: float | None = None

    def slowdown(self, before_ms: float, after_ms: float) -> float:
        self.fastest_ms = min(x for x in (self.fastest_ms, before_ms, after_ms) if x is not None)
        return max(before_ms, after_ms) / self.fastest_ms - 1
