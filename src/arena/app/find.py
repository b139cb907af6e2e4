"""``arena run`` of a file with ``[load] find = "capacity"``: each configuration's capacity for each
workload searched (model/search.py, one contender at a time), from ``[load] rates`` where given,
else from a closed run with every slot busy (``saturation_start``); the runs made through the store
(app/measurer.py), the capacities read back from them by the analysis."""

from __future__ import annotations

import math
import time
from typing import Callable

from arena.app.measurer import Stored
from arena.model.calibrate import server_config
from arena.model.capacity import Ask, Key, Measurer
from arena.model.estimate import START_S
from arena.model.search import Contender, search
from arena.plan.experiment import Experiment, Level
from arena.runner import Event, RunCounts, Seams


SATURATION_MOST = 256  # clients of the closed run a capacity search starts from, at most
FIND_FROM = 0.9  # a capacity search without a rate given starts at this share of that run's throughput


def search_capacities(exp: Experiment, store_path: str, on_event: Callable[[Event], None] = lambda e: None,
                      on_step: Callable[[str], None] = lambda s: None, seams: Seams = Seams(),
                      clock: Callable[[], float] = time.monotonic) -> RunCounts:
    """Search every configuration's capacity for every workload (model/search.py), from ``[load]
    rates`` where given, else from ``saturation_start``. Returns the runner's counts of its runs;
    the capacities are read back from the stored runs by the analysis."""
    points = {(c.key, w.name): (c, w) for w in exp.workloads for c in exp.servers}
    measurer = Stored(exp, store_path, seams, on_event, points, on_step)
    run_s = START_S + exp.warmup_s + (exp.duration_s or 0.0)

    for key, (config, workload) in points.items():
        name = config.name + ("" if len(exp.workloads) == 1 else f" {workload.name}")
        start = exp.find_from
        if start is None:
            level, start = saturation_start(measurer, key, config.server, config.processes, config.threads,
                                            len(exp.server_cpus))
            if start is None:
                measurer.say("capacity", f"{name}: no run at {level.label} answered: no capacity searched")
                continue
        search([Contender(key, name, start)], exp.goal, None, measurer, budget_s=math.inf, run_s=run_s,
               clock=clock, on_step=lambda s: measurer.say(s.stage, s.text))
    return measurer.counts


def saturation_start(measurer: Measurer, key: Key, server: str, processes: int | None, threads: int | None,
                     cores: int) -> tuple[Level, float | None]:
    """Where a capacity search with no rate given starts: FIND_FROM x the throughput of one closed run
    with every slot of the configuration busy (its processes x threads clients, at most
    SATURATION_MOST), that run's level with it (None: the run answered nothing)."""
    slots = server_config(server, processes, threads, float(cores)).slots
    level = Level("closed", max(1, min(SATURATION_MOST, slots)))
    measurer.measure([Ask(key, level, 1, "capacity: the closed run it starts from")])
    samples = measurer.samples(key, level)
    # only where the search starts, so an invalid run serves too: overloaded with every slot busy, a
    # server's throughput drifts between the run's halves (gunicorn-gthread p=2 t=24 and t=32 on one
    # CPU: 31-38%)
    got = [s.throughput for s in samples if s.valid and s.throughput] or [s.throughput for s in samples if s.throughput]
    return level, FIND_FROM * got[0] if got else None
