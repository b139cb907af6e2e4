"""Recommend processes x threads per server: every candidate of a grid predicted by the model,
kept when it meets the p99 target and the memory budget, ranked by throughput. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Collection

from arena.model import simulated
from arena.model.calibrate import Calibration
from arena.model.capacity import highest_rate
from arena.model.server import Prediction, capacity
from arena.model.verify import predict
from arena.servers import catalog
from arena.results.aggregate import Cell
from arena.results.answer import Goal

THREADS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32)
SIM_REQUESTS = 10_000  # per replication and grid point: a grid of 100 at 3 levels in about a minute on 2 cores
POOLS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)  # database connections per process tried (up to the threads)


@dataclass(frozen=True)
class Candidate:
    server: str
    processes: int
    threads: int | None
    predicted: Prediction
    memory_mib: float | None
    fits: bool
    why_not: str
    pool: int | None = None  # database connections per process (where the workload queries one)

    @property
    def name(self) -> str:
        return (f"{self.server} p={self.processes}" + (f" t={self.threads}" if self.threads else "")
                + (f" pool={self.pool}" if self.pool is not None else ""))


def grid(server: str, cores: float, knobs: Collection[str] | None = None) -> list[tuple[int, int | None]]:
    """Processes 1 .. 4 x cores (at least 8) x the thread counts the server has a knob for (``knobs``:
    those that apply to the app it serves, where some apply to one interface only; default all)."""
    knobs = catalog.get_server(server).knobs if knobs is None else knobs
    procs = range(1, max(8, int(4 * cores)) + 1) if "processes" in knobs else [1]
    threads: tuple[int | None, ...] = THREADS if "threads" in knobs else (None,)
    return [(p, t) for p in procs for t in threads]


def pools(cal: Calibration, threads: int | None, given: list[int] | None = None) -> list[int | None]:
    """The pool sizes tried with ``threads`` per process: ``given``, or POOLS up to the threads and
    the threads themselves; [None] where the workload does not query a database."""
    if not cal.db_ms:
        return [None]
    if given:
        return list(given)
    most = threads or max(POOLS)
    return sorted({k for k in POOLS if k <= most} | {most})


def candidates(cal: Calibration, model: str, level: float, goal: Goal, cores: float | None = None,
               pool: list[int] | None = None, sim: bool = False, map_fn: Callable = map) -> list[Candidate]:
    """Every grid point of ``cal.server`` (processes x threads, and pool sizes where the workload
    queries a database), predicted by the mean-value model or, ``sim``, by the simulator (each point
    through ``map_fn``: a process pool's map spreads them over the cores), best first: those that
    fit the ``goal``'s limits (p99, memory: Goal's judgement) and the database's (processes x pool
    within its max_connections) by
    predicted throughput (to 0.1 req/s), then lower p99 (to 0.1 ms), then the smaller pool, then
    less memory; then the rest."""
    if cores is not None and cores != cal.cores:
        cal = replace(cal, cores=cores)
    points = [(cal, p, t, k, model, level, goal, sim)
              for p, t in grid(cal.server, cal.usable_cores) for k in pools(cal, cal.config(p, t).threads, pool)]
    out = list(map_fn(_candidate_of, points))
    out.sort(key=lambda c: (not c.fits, -round(c.predicted.throughput, 1), round(c.predicted.p99_ms, 1),
                            c.pool or 0, c.memory_mib if c.memory_mib is not None else math.inf))
    return out


def _candidate_of(args: tuple) -> Candidate:
    return _candidate(*args)


def _candidate(cal: Calibration, p: int, t: int | None, pool: int | None, model: str, level: float, goal: Goal,
               sim: bool = False) -> Candidate:
    """One configuration predicted, and why it does not fit the limits (empty: it fits)."""
    pred = (simulated.predict(cal, p, t, model, level, pool, requests=SIM_REQUESTS).prediction if sim
            else predict(cal, p, t, model, level, pool))
    config = cal.config(p, t, pool)
    mem = cal.memory_mib(config.processes, config.threads)
    why = []
    if pred.overloaded:
        why.append("overloaded")
    if not goal.p99_within(pred.p99_ms):
        why.append(f"p99 {pred.p99_ms:.0f} ms > {goal.p99_ms:g}")
    if mem is not None and not goal.memory_within(mem):
        why.append(f"memory {mem:.0f} MiB > {goal.memory_mib:g}")
    limit = cal.db_max_connections
    if pool is not None and limit is not None and config.processes * pool > limit:
        why.append(f"processes x pool {config.processes * pool} > max_connections {limit}")
    return Candidate(cal.server, config.processes, t, pred, mem, not why, "; ".join(why), pool)


def verified(chosen: list[Candidate], cells: list[Cell]) -> list[tuple[Candidate, Cell, float | None]]:
    """Each candidate that was run, with its cells (more than one where the experiment's entry grids a
    setting the recommendation does not choose) and the relative error of its predicted throughput
    (None where no run of the cell is valid)."""
    out = []
    for c in chosen:
        for cell in cells:
            if (cell.server == c.server and (cell.processes or 1) == c.processes and (cell.threads or None) == c.threads
                    and (c.pool is None or cell.pool == c.pool)):
                measured = cell.throughput.median
                out.append((c, cell, (c.predicted.throughput - measured) / measured if measured else None))
    return out


SLO_SIM_REQUESTS = 4000  # per simulated rate of a capacity search: about 35 ms each here


def open_p99(cal: Calibration, processes: int | None, threads: int | None, rate: float, pool: int | None = None,
             sim: bool = False) -> float:
    """The predicted p99 (ms) at an open ``rate``: the mean-value model's or, ``sim``, the simulator's
    (SLO_SIM_REQUESTS, one replication: as a capacity search asks it)."""
    if sim:
        return simulated.predict(cal, processes, threads, "open", rate, pool, requests=SLO_SIM_REQUESTS,
                                 replications=1).prediction.p99_ms
    return predict(cal, processes, threads, "open", rate, pool).p99_ms


def saturation(cal: Calibration, processes: int | None, threads: int | None, pool: int | None = None) -> float:
    """The open rate (req/s) at which the configuration saturates: every slot busy."""
    return capacity(cal.workload_model(), cal.config(processes, threads, pool))


def slo_capacity(cal: Calibration, processes: int, threads: int | None, goal: Goal,
                 pool: int | None = None, sim: bool = False) -> float:
    """The highest open rate (req/s) whose predicted p99 keeps within the ``goal``'s latency target
    (0: none), by the mean-value model or, ``sim``, the simulator (its p99 is the closer: model/instance_sim.py)."""
    return highest_rate(lambda rate: open_p99(cal, processes, threads, rate, pool, sim), goal.p99_within,
                        saturation(cal, processes, threads, pool), steps=10 if sim else 12)
