"""The model as use cases: calibrate from a stored experiment, predict a configuration, recommend
one per server under limits, and verify recommendations on the real servers."""

from __future__ import annotations

import hashlib
import math
import json
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

from arena import stats
from arena.app.analysis import GoalFlags, analyse
from arena.app.storage import Results, open_store, results
from arena.errors import ArenaError
from arena.limits import Limits
from arena.model import simulated
from arena.model.calibrate import Calibration
from arena.results.aggregate import Figure
from arena.model.simulated import Simulated
from arena.model.recommend import Candidate, candidates, verified
from arena.model.server import Config, Prediction
from arena.model.verify import matching, measured, predict as predict_one
from arena.plan.parse import parse_experiment
from arena.results.runs import level_label
from arena.results.aggregate import Cell
from arena.results.answer import Answer, Goal, answer
from arena.results.why.diagnose import diagnose
from arena.results.why.finding import Finding, Why
from arena.runner import Event, Seams, run_experiment
from arena.servers import catalog
from arena.servers.cgroup import die_with_parent


@dataclass(frozen=True)
class Load:
    model: str  # "closed" | "open"
    level: float

    @property
    def label(self) -> str:
        return level_label(self.model, self.level)


@contextmanager
def over_the_cpus(chunksize: int = 4) -> Iterator[Callable]:
    """A ``map`` that spreads its calls over the CPUs this process may use (a process pool: the
    simulator is pure Python), for as long as the block goes. Its workers leave Ctrl-C to this
    process, which then drops what is queued and waits only for the calls under way; they end
    with it, however it ends."""
    workers = ProcessPoolExecutor(len(os.sched_getaffinity(0)), initializer=_pool_worker)
    try:
        yield partial(workers.map, chunksize=chunksize)
    finally:
        workers.shutdown(wait=True, cancel_futures=True)


def _pool_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent()


def _computed(compute):
    """The model's answer, or a one-line error where the numbers are beyond what it can compute."""
    try:
        return compute()
    except (ArithmeticError, ValueError) as e:
        raise ArenaError(f"the model cannot compute this configuration with these figures ({type(e).__name__}: {e})") from None


def calibration(res: Results, server: str, workload: str | None = None, why: Why | None = None) -> Calibration:
    """``server``'s calibration from the experiment's lowest-load runs (``why``: the pathologies found
    in them, where the caller's analysis has them; else found here)."""
    if not any(r.server == server for r in res.runs):
        have = sorted({r.server for r in res.runs})
        raise ArenaError(f"--server {server}: experiment {res.name} has no runs of it (it has: {', '.join(have)})")
    if workload is not None and not any(r.workload == workload for r in res.runs):
        raise ArenaError(f"--workload {workload}: not a workload of {res.name} "
                         f"(it has: {', '.join(sorted({r.workload for r in res.runs}))})")
    from arena.model.calibrate import calibrate

    try:  # not from the cells a pathology explains: the model would learn the stall as the server's work
        leave_out = (why if why is not None else diagnose(res.cells)).unmodelled()
        return calibrate(res.observations(leave_out), server, workload)
    except ValueError as e:
        raise ArenaError(f"experiment {res.name}: cannot calibrate {server}: {e}") from None


def for_simulation(cal: Calibration, res: Results | None) -> Calibration:
    """``cal`` with its accept discipline learned from the experiment's runs where the server's
    catalog entry does not give it (simulated.learn)."""
    return cal if res is None else simulated.learn(cal, res.cells)


def given_calibration(server: str, cores: float, cpu_ms: float, io_ms: float, outside_ms: float = 0.0,
                      blocking_io: bool = False, cpu_cv2: float = 1.0, db_ms: float = 0.0,
                      db_cpu_ms: float = 0.0, db_cores: float | None = None) -> Calibration:
    """A calibration from figures the user gives instead of measured runs."""
    return Calibration(server, "given", cores, Figure.given(cpu_ms), Figure.given(io_ms), Figure.given(outside_ms),
                       app_cpu_ms=None, gil_wait_ms=None, app_other_ms=None, blocking_io=blocking_io,
                       cpu_cv2=Figure.given(cpu_cv2), memory_base_mib=None, memory_per_process_mib=None,
                       memory_per_thread_mib=None, db_ms=Figure.given(db_ms) if db_ms else None,
                       db_cpu_ms=Figure.given(db_cpu_ms) if db_ms else None, db_cores=db_cores)


@dataclass(frozen=True)
class Predicted:
    load: Load
    prediction: Prediction  # the mean-value model's
    measured: float | None  # median throughput of the experiment's valid runs of this configuration
    simulated: Simulated | None = None  # the simulator's (predict(sim=True))
    measured_p99_ms: float | None = None  # median p99 of those runs
    throughput_range: tuple[float, float] | None = None  # over the calibration's intervals (None: no interval)
    p99_range_ms: tuple[float, float] | None = None  # the same, with the simulator's spread where it ran
    # pathologies found where it was measured that add a told time at p99 (the model knows none of
    # them): its error is also given with each one's time taken out
    explained: tuple[Finding, ...] = ()


def _corners(cal: Calibration) -> tuple[Calibration, Calibration] | None:
    """The calibration at the low and at the high end of the intervals of the work per request (CPU,
    I/O, outside time, the database's): the most and the least favourable the measurements allow.
    None where the CPU figure has no interval (one run, or figures given)."""
    if cal.cpu_ms.interval is None:
        return None

    def end(f: Figure | None, high: bool) -> Figure | None:
        iv = f.interval if f is not None else None
        return f if iv is None else Figure.given(iv.hi if high else iv.lo)

    return tuple(replace(cal, cpu_ms=end(cal.cpu_ms, high), io_ms=end(cal.io_ms, high),
                         outside_ms=end(cal.outside_ms, high), db_ms=end(cal.db_ms, high),
                         db_cpu_ms=end(cal.db_cpu_ms, high)) for high in (False, True))


def _ranges(cal: Calibration, compute: Callable[[Calibration], Prediction], point: Prediction,
            sim: Simulated | None) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """(throughput, p99 ms) ranges of a prediction: the model at the calibration's two corners (its
    intervals' ends), which hold the point; the simulator's p99 interval over its replications widened
    by the same factors. None where the calibration has no interval."""
    corners = _corners(cal)
    if corners is None:
        return None, None if sim is None else (sim.p99_lo_ms, sim.p99_hi_ms)
    ends = [compute(c) for c in corners] + [point]
    tp = (min(e.throughput for e in ends), max(e.throughput for e in ends))
    p99 = (min(e.p99_ms for e in ends), max(e.p99_ms for e in ends))
    if sim is not None and point.p99_ms > 0 and math.isfinite(sim.p99_lo_ms):
        p99 = (sim.p99_lo_ms * p99[0] / point.p99_ms, sim.p99_hi_ms * p99[1] / point.p99_ms)
    return tp, p99


def extrapolations(res: Results | None, cal: Calibration, processes: int | None, threads: int | None,
                   loads: list[Load], cores: float | None, measured_cores: float) -> list[str]:
    """Where a prediction reaches beyond what the experiment measured of this server and workload
    (processes, threads, cores, load): each said, since the model is checked only inside that range."""
    if res is None:
        return ["from given figures: nothing measured to check the model against"]
    mine = [c for c in res.cells if c.server == cal.server and c.workload == cal.workload and c.valid]
    out = []
    for name, asked, seen in (("processes", processes, [c.processes or 1 for c in mine]),
                              ("threads", threads, [c.threads for c in mine if c.threads])):
        if asked is not None and seen and asked > max(seen):
            out.append(f"{name} {asked}: beyond the {max(seen)} measured")
    if cores and abs(cores - measured_cores) > 1e-9:
        out.append(f"cores {cores:g}: the runs had {measured_cores:g}")
    for x in loads:
        levels = [c.level for c in mine if c.model == x.model]
        if levels and x.level > max(levels):
            out.append(f"load {x.label}: beyond the highest measured, {Load(x.model, max(levels)).label}")
        elif not levels:
            out.append(f"load {x.label}: no {x.model} load was measured")
    return out


@dataclass(frozen=True)
class Predictions:
    calibration: Calibration
    config: Config
    rows: list[Predicted]
    calibrated: bool  # from an experiment (else from given figures)
    extrapolated: list[str] = field(default_factory=list)  # where it reaches beyond what was measured


def predict(cal: Calibration, processes: int | None, threads: int | None, loads: list[Load],
            res: Results | None = None, cores: float | None = None, pool: int | None = None,
            db_cores: float | None = None, sim: bool = False, quota: float | None = None) -> Predictions:
    """The model's figures for one configuration at each load (and, ``sim``, the simulator's),
    beside what the experiment measured for it (where it ran). With no loads given, the
    experiment's own levels. Under a container's CPU ``quota`` over the cores the mean-value model
    takes the quota as cores where it is fewer, and the simulator runs too: its CFS periods give the
    throttled time and the stalls in the p99."""
    catalog.get_server(cal.server)  # a one-line error for an unknown name
    measured_cores = cal.cores
    if cores:
        cal = replace(cal, cores=cores)
    if quota is not None:
        cal, sim = replace(cal, quota=quota), True
    if db_cores:
        cal = replace(cal, db_cores=db_cores)
    if pool is not None and not cal.db_ms:
        raise ArenaError(f"--pool: workload {cal.workload} does not query a database (no Server-Timing db in its runs)"
                         if res is not None else "--pool: give --db-ms too (the time a request holds a connection)")
    seen: dict[tuple[str, float], float] = {}
    tails: dict[tuple[str, float], float] = {}
    found: dict[tuple[str, float], tuple[Finding, ...]] = {}
    if res is not None:
        seen = measured(res.cells, cal, processes, threads, pool)
        tails = measured(res.cells, cal, processes, threads, pool, figure="p99")
        why = diagnose(res.cells)
        for c in matching(res.cells, cal, processes, threads, pool):
            found[(c.model, c.level)] = tuple(f for f in why.of(c.label, c.workload) if f.level == c.level_label
                                              and f.without(tails.get((c.model, c.level))) is not None)
        if not loads:
            loads = [Load(c.model, c.level) for c in res.cells
                     if c.server == cal.server and c.workload == cal.workload and c.valid]
            loads = sorted(set(loads), key=lambda x: (x.model, x.level))
    if not loads:
        raise ArenaError("--concurrency or --rate: give the load levels to predict")
    if sim:
        cal = for_simulation(cal, res)
    rows = []
    for x in loads:
        one = lambda c: _computed(lambda: predict_one(c, processes, threads, x.model, x.level, pool))  # noqa: E731
        point = one(cal)
        simulation = _computed(lambda: simulated.predict(cal, processes, threads, x.model, x.level, pool)) if sim else None
        rows.append(Predicted(x, point, seen.get((x.model, x.level)), simulation, tails.get((x.model, x.level)),
                              *_ranges(cal, one, point, simulation), found.get((x.model, x.level), ())))
    return Predictions(cal, cal.config(processes, threads, pool), rows, res is not None,
                       extrapolations(res, cal, processes, threads, loads, cores, measured_cores))


@dataclass(frozen=True)
class ServerChoice:
    server: str
    calibration: Calibration
    cores: float
    shown: list[Candidate]  # the best that fit, else the best of all
    fits: list[Candidate]


@dataclass(frozen=True)
class Recommendation:
    """For one workload at one load: what the experiment measured within the goal there (the answer
    from those cells alone: the best, the group tied with it), then the model's best candidates per
    server."""

    load: Load
    goal: Goal
    workload: str
    measured: Answer  # the experiment's cells at this load
    per_server: list[ServerChoice]
    container: Limits = Limits()  # a container's limits it is made for, and verified under
    why: Why = Why()  # the known pathologies found in the experiment's cells at this load (results/why)

    @property
    def p99_max_ms(self) -> float | None:
        return self.goal.p99_ms

    @property
    def memory_max_mib(self) -> float | None:
        return self.goal.memory_mib

    @property
    def best(self) -> Candidate | None:
        tops = [s.fits[0] for s in self.per_server if s.fits]
        return max(tops, key=lambda c: c.predicted.throughput) if tops else None


def recommend(res: Results, load: Load, goal: Goal = Goal(), cores: float | None = None,
              servers: list[str] | None = None, top: int = 3, pool: list[int] | None = None, sim: bool = False,
              workload: str | None = None, container: Limits = Limits(), why: Why | None = None) -> Recommendation:
    """For ``workload`` (default: the experiment's first): the cells measured at ``load`` within the
    goal, and per server of the experiment (or ``servers``) the best processes x threads (x pool, where
    the workload queries a database; ``pool``: only these sizes) the model predicts under the goal at
    ``load`` (``sim``: the simulator predicts, its grid points spread over this machine's CPUs). Under
    a ``container``'s limits the model's cores are its quota where that is fewer, and its memory limit
    bounds a configuration's memory as the goal's does, whichever is smaller."""
    workload = workload or next((c.workload for c in res.cells), "default")
    names = servers or list(dict.fromkeys(r.server for r in res.runs if r.workload == workload))
    bounds = [m for m in (goal.memory_mib, container.memory_mib) if m is not None]
    bounded = replace(goal, memory_mib=min(bounds) if bounds else None)  # judged as the goal's: Goal.memory_within
    why = why if why is not None else diagnose(res.cells)  # once, for every server's calibration
    out = []
    for server in names:
        cal = calibration(res, server, workload, why)
        cal = replace(cal, cores=cores or cal.cores, quota=container.cpu)
        if bounded.memory_mib and cal.memory_per_process_mib is None:
            flag = "--memory-max" if bounded.memory_mib == goal.memory_mib else "--memory-limit"
            raise ArenaError(f"{flag}: {server} has no memory figures in {res.name}")
        cpus = cal.usable_cores
        if pool and not cal.db_ms:
            raise ArenaError(f"--pool: {server}'s workload {cal.workload} does not query a database "
                             "(no Server-Timing db in its runs)")
        if sim:
            cal = for_simulation(cal, res)
            with over_the_cpus() as map_fn:
                ranked = _computed(lambda: candidates(cal, load.model, load.level, bounded, None, pool, sim=True,
                                                      map_fn=map_fn))
        else:
            ranked = _computed(lambda: candidates(cal, load.model, load.level, bounded, None, pool))
        fits = [c for c in ranked if c.fits]
        out.append(ServerChoice(server, cal, cpus, (fits or ranked)[:top], fits[:top]))
    here = [c for c in res.cells if c.model == load.model and c.level == load.level and c.server in names]
    at = level_label(load.model, load.level)  # the pathologies found at this load, of this workload
    found = Why(tuple(f for f in why.found if f.workload == workload and f.level == at))
    return Recommendation(load, goal, workload, answer(here, workload, goal), out, container, found)


def recommendations(store_path: str, experiment: str, load: Load, flags: GoalFlags = GoalFlags(), cores: float | None = None,
                    servers: list[str] | None = None, top: int = 3, pool: list[int] | None = None, sim: bool = False,
                    workload: str | None = None, container: Limits = Limits()) -> tuple[Results, list[Recommendation]]:
    """``arena recommend``: the experiment's results and, for ``workload`` (default: each of its
    workloads), the recommendation calibrated from them under its goal with the goal ``flags`` give
    over it, within a ``container``'s limits."""
    res = load_experiment_results(store_path, experiment)
    analysis = analyse(res, flags)
    chosen = [analysis.answer(workload).workload] if workload else [a.workload for a in analysis.answers
                                                                    if any(c.workload == a.workload for c in res.cells)]
    return res, [recommend(res, load, analysis.goal, cores, servers, top, pool, sim, w, container, analysis.why)
                 for w in chosen]


@dataclass(frozen=True)
class Verification:
    experiment: str
    pairs: list[tuple[Candidate, Cell, float | None]]  # candidate, its cell, relative error of throughput (None: no valid run)

    @property
    def mape(self) -> float | None:
        return stats.mape([(c.predicted.throughput, cell.throughput.median) for c, cell, err in self.pairs
                           if err is not None])

    @property
    def unmeasured(self) -> list[Cell]:
        """The cells with no valid run: nothing to compare."""
        return [cell for _, cell, err in self.pairs if err is None]


def verify(res: Results, rec: Recommendation, store_path: str, on_event: Callable[[Event], None] = lambda e: None,
           seams: Seams = Seams()) -> Verification:
    """Run the recommended candidates on the real servers, as one stored experiment (resumable),
    and compare predicted with measured."""
    chosen = [c for s in rec.per_server for c in s.fits]
    if not chosen:
        raise ArenaError("--verify: no candidate keeps within the limits; nothing to verify")
    exp = verification_experiment(res, rec.load, chosen, rec.container)
    with open_store(store_path, write=True) as store:
        run_experiment(exp, store, on_event, seams)
        done = results(store, exp.name)
    return Verification(exp.name, verified(chosen, done.cells))


RECOMMENDED_KNOBS = ("processes", "threads", "pool")


def verification_experiment(res: Results, load: Load, chosen: list[Candidate], container: Limits = Limits()):
    """The experiment that runs ``chosen`` at ``load``: each candidate is its server's entry of the
    original experiment (its app, settings, environment, options and limits as given there) with the
    recommended processes, threads and pool, and the ``container``'s limits where given; everything
    else as the original, one repetition. Paths resolve against the original experiment file, so a
    user's app and mix file are found again."""
    entries = res.definition.document.get("servers", [])
    servers = []
    for c in chosen:
        entry = next((e for e in entries if e.get("server") == c.server), {"server": c.server})
        servers.append({**{k: v for k, v in entry.items() if k not in (*RECOMMENDED_KNOBS, "label")},
                        "processes": c.processes, **({"threads": c.threads} if c.threads else {}),
                        **({"pool": c.pool} if c.pool is not None else {}), **container.entry})
    model, level = load.model, load.level
    load_table = {"model": model, "concurrency" if model == "closed" else "rates": [int(level) if model == "closed" else level]}
    data = {k: v for k, v in res.definition.document.items() if k not in ("servers", "load", "name", "description", "repetitions")}
    digest = hashlib.sha1(json.dumps([servers, load_table], sort_keys=True).encode()).hexdigest()[:8]
    data.update(name=f"{res.name}-verify-{digest}"[:64], servers=servers, load=load_table, repetitions=1,
                description=f"arena recommend --verify of {res.name}")
    own = res.definition.file
    file = own if own and Path(own).is_file() else f"(arena recommend --verify {res.name})"
    return parse_experiment(data, file)


def load_experiment_results(store_path: str, name: str) -> Results:
    with open_store(store_path) as store:
        return results(store, name)


@dataclass(frozen=True)
class Given:
    """Figures the user gives instead of an experiment to calibrate from (ms per request)."""

    cpu_ms: float | None
    io_ms: float | None
    outside_ms: float = 0.0
    blocking_io: bool = False
    cpu_cv2: float = 1.0
    db_ms: float = 0.0  # holding a pooled database connection
    db_cpu_ms: float = 0.0  # of that, the database's CPU


def prediction(server: str, processes: int | None, threads: int | None, loads: list[Load], *,
               store_path: str | None = None, experiment: str | None = None, workload: str | None = None,
               given: Given | None = None, cores: float | None = None, pool: int | None = None,
               db_cores: float | None = None, sim: bool = False, quota: float | None = None) -> Predictions:
    """``arena predict``: calibrated from an experiment's runs, or from given figures; under a
    container's CPU ``quota`` (predict's)."""
    entry = catalog.get_server(server)
    for name, value in (("processes", processes), ("threads", threads)):
        if value is not None and name not in entry.knobs:  # never a silent 1 where more was asked
            have = ", ".join(entry.knobs) or "none"
            raise ArenaError(f"--{name}: {server} has no {name} knob (its knobs: {have})")
    asked = given is not None and (given.cpu_ms is not None or given.io_ms is not None or given.db_ms)
    if experiment is not None:
        if asked:
            raise ArenaError("--cpu-ms/--io-ms/--db-ms: give them without an experiment (with one, they come from its runs)")
        res = load_experiment_results(store_path or "arena.db", experiment)
        cal = calibration(res, server, workload)
        return predict(cal, processes, threads, loads, res, cores, pool, db_cores, sim, quota)
    if given is None or given.cpu_ms is None or given.io_ms is None:
        raise ArenaError("--cpu-ms and --io-ms: both are needed without an experiment to calibrate from")
    if given.db_cpu_ms > given.db_ms:
        raise ArenaError(f"--db-cpu-ms {given.db_cpu_ms:g}: must be at most --db-ms ({given.db_ms:g}): it is part of it")
    cores = cores or 1.0
    cal = given_calibration(server, cores, given.cpu_ms, given.io_ms, given.outside_ms, given.blocking_io,
                            given.cpu_cv2, given.db_ms, given.db_cpu_ms, db_cores)
    return predict(cal, processes, threads, loads, None, cores, pool, sim=sim, quota=quota)

