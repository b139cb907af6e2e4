"""Capacity searches on the real servers: the search of model/search.py, its runs made by the runner
into the store (``Stored``). ``[load] find = "capacity"`` in an experiment file searches each of its
configurations' capacity (``capacities``).

Every run is stored as it ends, keyed by configuration, level and repetition, so the same search
again resumes: the runs stored are not made again.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from arena.app.experiments import open_store, results
from arena.model.calibrate import server_config
from arena.model.estimate import START_S
from arena.model.search import Ask, Capacity, Contender, Key, Sample, search
from arena.plan.experiment import Experiment, Group, Level, RunSpec, ServerConfig, Workload
from arena.results.aggregate import MiB, error_pct
from arena.results.runs import Failure, Run
from arena.runner import Event, Seams, run_experiment


# ---------------------------------------------------------------------- measuring through the store


class Stored:
    """The search's measurer: runs made by the runner into the store, read back as samples. A
    contender is a configuration of the experiment serving one of its workloads (``points``)."""

    def __init__(self, exp: Experiment, store_path: str, seams: Seams, on_event: Callable[[Event], None],
                 points: dict[Key, tuple[ServerConfig, Workload]]):
        self.exp, self.store_path, self.seams, self.on_event, self.points = exp, store_path, seams, on_event, points
        self.counts = {"run": 0, "skipped": 0, "failed": 0, "invalid": 0}
        self._load()

    def measure(self, asks: Sequence[Ask]) -> None:
        groups = []
        for a in asks:
            config, workload = self.points[a.key]
            groups.append(Group(config, a.repetition, (RunSpec(config, a.level, a.repetition, workload, why=a.why),)))
        with open_store(self.store_path, write=True) as store:
            got = run_experiment(self.exp, store, self.on_event, self.seams, chosen=groups)
        for k, n in got.items():
            self.counts[k] += n
        self._load()

    def samples(self, key: Key, level: Level) -> list[Sample]:
        config, workload = self.points[key]
        return self._by.get((config.key, workload.name, level.model, level.value), [])

    def runs(self) -> list[Run]:
        return self._runs

    def _load(self) -> None:
        with open_store(self.store_path, write=True) as store:
            store.experiment_id(self.exp.name, self.exp.file, self.exp.source)
            res = results(store, self.exp.name)
        self._runs = res.runs
        by: dict[tuple, list[tuple[int, Sample]]] = {}
        for r in res.runs:
            by.setdefault(r.cell, []).append((r.repetition, sample(r)))
        for f in res.failures:  # a run that could not be made takes its repetition, invalid
            by.setdefault(f.cell, []).append((f.repetition, failed_sample(f)))
        self._by = {k: [s for _, s in sorted(v, key=lambda x: x[0])] for k, v in by.items()}


def key_of(c: ServerConfig) -> Key:
    return c.server, c.processes, c.threads


def sample(r: Run) -> Sample:
    return Sample(r.valid, r.throughput, r.p99_us / 1000 if r.p99_us else None, error_pct(r),
                  r.pss_bytes / MiB if r.pss_bytes else None, tuple(r.flags))


def failed_sample(f: Failure) -> Sample:
    return Sample(False, None, None, None, None, (f"{f.stage}: {f.reason}",))


# ---------------------------------------------------------------------- [load] find = "capacity"


SATURATION_MOST = 256  # clients of the closed run a capacity search starts from, at most


@dataclass(frozen=True)
class Found:
    """Each configuration's capacity in an experiment with ``[load] find = "capacity"``."""

    counts: dict[str, int]  # runs: "run", "skipped", "failed", "invalid" (runner.run_experiment's)
    capacities: list[tuple[str, str, Capacity | None, str]]  # configuration, workload, capacity, why none


def capacities(exp: Experiment, store_path: str, on_event: Callable[[Event], None] = lambda e: None,
               on_step: Callable[[str], None] = lambda s: None, seams: Seams = Seams(),
               clock: Callable[[], float] = time.monotonic) -> Found:
    """Every configuration's capacity for every workload: the search (model/search.py) from
    ``[load] rates`` where given, else from 0.9 x the throughput of one closed run with every slot of
    the configuration busy (its processes x threads clients, at most SATURATION_MOST)."""
    points = {(c.key, w.name): (c, w) for w in exp.workloads for c in exp.servers}
    measurer = Stored(exp, store_path, seams, on_event, points)
    run_s = START_S + exp.warmup_s + (exp.duration_s or 0.0)
    out = []
    for key, (config, workload) in points.items():
        name = config.name + ("" if len(exp.workloads) == 1 else f" {workload.name}")
        start = exp.find_from
        if start is None:
            level = Level("closed", _saturation(config, len(exp.server_cpus)))
            measurer.measure([Ask(key, level, 1, "capacity: the closed run it starts from")])
            got = [s.throughput for s in measurer.samples(key, level) if s.valid and s.throughput]
            if not got:
                out.append((config.name, workload.name, None, f"no valid run at {level.label} to start from"))
                continue
            start = 0.9 * got[0]
        t = search([Contender(key, name, start)], exp.goal, None, measurer, budget_s=math.inf, run_s=run_s,
                   clock=clock, on_step=lambda step: on_step(step.text))
        cap = t.capacities.get(key)
        out.append((config.name, workload.name, cap, "" if cap and cap.lo is not None else "no rate kept within the goal"))
    return Found(dict(measurer.counts), out)


def _saturation(config: ServerConfig, cores: int) -> int:
    slots = server_config(config.server, config.processes, config.threads, float(cores)).slots
    return max(1, min(SATURATION_MOST, slots))
