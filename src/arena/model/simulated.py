"""The simulator as a predictor: a calibrated server (model/calibrate.py) and a configuration become
one simulated instance (model/instance_sim.py), whose replications give the same figures as the mean-value
model's (server.Prediction), tails included. Pure and seeded.

What the calibration gives the simulator (Calibration.work):
- CPU per request: the app's own CPU as its lowest load's Server-Timing distribution (the stored
  HDR histogram read as a quantile function, runs averaged), moved to the server's CPU per request (the
  server's own work is a constant added to the app's); without the app's figures, a lognormal of
  that mean and the measured variability (exponential where none was measured);
- I/O, the database's part (a pooled connection held for the database's CPU and the query's other
  time) and the time outside the server: their calibrated means, the I/O and the query with the
  shape of their Server-Timing distributions;
- the accept discipline from the server's catalog entry: one shared queue, connections that stay
  with the process that accepted them, and Puma's inline requests on a kept-alive connection
  (servers.catalog.Server.inline_requests), where the clients kept their connections open. Where
  the catalog does not know it, ``learn`` finds it: of the disciplines a server can have, the one
  whose simulated p99 is closest to the measured p99 at one measured level with queueing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from arena import stats
from arena.model.calibrate import Calibration, Discipline
from arena.model.server import Prediction, binding, capacity, predict_open
from arena.model.sim import summarize
from arena.model.instance_sim import Instance, simulate_instances

REQUESTS = 20_000  # simulated requests per replication: about 200 beyond the p99
REPLICATIONS = 3


# The disciplines a server whose kept-alive connections stay with a process can have, simplest first
DISCIPLINES = (Discipline("race"), Discipline("least-busy"), Discipline("race", 10), Discipline("least-busy", 10))
ASSUMED = Discipline("race", source="assumed: neither in the catalog nor learned (no measured level with queueing)")


def discipline_of(cal: Calibration) -> Discipline:
    """The calibration's learned discipline, else the catalog's, else the assumed one."""
    return cal.discipline or Discipline.of_catalog(cal.server) or ASSUMED


def instance(cal: Calibration, processes: int | None, threads: int | None, pool: int | None = None,
             keep_alive: bool | None = None) -> Instance:
    """The configuration as the simulator's server, with its accept discipline (discipline_of)
    where the connections reaching it stay open (``keep_alive``; None: as at the calibration)."""
    c = cal.config(processes, threads, pool)
    d = discipline_of(cal)
    kept = (cal.keep_alive if keep_alive is None else keep_alive) and c.routing == "per-process"
    return Instance(c.processes, c.threads, cal.cores, gil=c.gil, accept="per-process" if kept else "shared",
                    blocking_io=cal.blocking_io, inline=d.inline if kept else 0, least_busy=d.accept == "least-busy",
                    pool=c.pool if cal.db_ms else None, db_cores=c.db_cores, quota=cal.quota, period=cal.period_s)


def discipline(inst: Instance, source: str = "") -> str:
    """How the simulated server takes its requests, in words (``source``: where that is known from)."""
    if inst.accept == "shared":
        return "one shared accept queue"
    inline = f"; a thread serves up to {inst.inline} requests in a row on a kept-alive connection" if inst.inline else ""
    who = "the least busy" if inst.least_busy else "the first to take it"
    known = f" [{source}]" if source else ""
    return f"each connection stays with the process that accepted it ({who}){inline}{known}"


def learn(cal: Calibration, cells: list, always: bool = False, requests: int = REQUESTS // 4,
          replications: int = 2) -> Calibration:
    """Where the server's catalog entry does not give its discipline (or ``always``, to check the
    learning against it): ``cal`` with the discipline (of DISCIPLINES) whose simulated p99 is nearest the measured p99
    at one measured level: the lowest closed level above the calibration's at which ``cells`` of
    its server and workload ran on kept-alive connections to the server itself (no front), the
    first where requests queue, so that the heavier loads a sizing question asks about are
    predicted, not fitted (and where saturation's own pathologies do not yet dominate the tail).
    Unchanged where there is no such level. Nearest by the geometric mean of the ratios' distances
    from 1 (exp of the mean |ln(simulated / measured)|): a p99 twice too high and one half too low
    are equally wrong, where a percentage error caps the one at 100% and not the other. Ties go to
    the simpler."""
    if not always and Discipline.of_catalog(cal.server) is not None:
        return cal
    mine = [c for c in cells if c.server == cal.server and c.workload == cal.workload and c.model == "closed"
            and c.front is None and c.p99_us.median and c.runs[0].kept_alive]
    levels = sorted({c.level for c in mine})
    if len(levels) < 2 or cal.config(None, None).routing != "per-process":
        return cal
    level = levels[1]
    at = [c for c in mine if c.level == level]

    def factor(d: Discipline) -> float:
        trial = replace(cal, discipline=d)
        return stats.geometric_error([(predict(trial, c.processes, c.threads, "closed", level, c.pool, keep_alive=True,
                                               requests=requests, replications=replications).prediction.p99_ms,
                                       c.p99_us.median / 1000) for c in at])

    factors = {d: factor(d) for d in DISCIPLINES}
    best = min(factors, key=factors.__getitem__)
    others = ", ".join(f"{d.short} x{f:.2f}" for d, f in factors.items() if d != best)
    configurations = f"{len(at)} configuration{'s' * (len(at) > 1)}"
    return replace(cal, discipline=replace(
        best, learned_at=level,
        source=f"learned at c={level:g} from {configurations}: p99 off by x{factors[best]:.2f} ({others})"))


def discipline_text(cal: Calibration) -> str:
    """The server's accept discipline in short, and where it is known from."""
    if cal.config(None, None).routing != "per-process":
        return "one shared accept queue (catalog)"
    d = discipline_of(cal)
    return f"{d.short} ({d.source})"


@dataclass(frozen=True)
class Simulated:
    """A prediction by simulation, with the 95% interval of its p99 over the replications, and the
    time its CPU quota held it back (ms a second, summed over the CPUs, as cpu.stat counts it; None:
    not simulated, an open load beyond capacity)."""

    prediction: Prediction
    p99_lo_ms: float
    p99_hi_ms: float
    instance: Instance
    throttled_ms_per_s: float | None = None


def predict(cal: Calibration, processes: int | None, threads: int | None, model: str, level: float,
            pool: int | None = None, *, keep_alive: bool | None = None, arrival: str = "constant",
            requests: int = REQUESTS, replications: int = REPLICATIONS, seed: int = 1) -> Simulated:
    """The configuration simulated at a closed load of ``level`` clients or an open one of ``level``
    requests/s (``arrival``: "constant" spacing, arena-load's default, or "poisson"), its
    connections kept alive or not (``keep_alive``; None: as at the calibration). An open load at or beyond the server's capacity (the mean-value model's, exact for
    throughput) is overloaded, as the mean-value model says: no steady state to simulate."""
    inst = instance(cal, processes, threads, pool, keep_alive)
    w, config = cal.work(), cal.config(processes, threads, pool)
    wl = cal.workload_model()
    if model == "open" and level >= capacity(wl, config):
        return Simulated(predict_open(wl, config, level), math.inf, math.inf, inst)  # its overload answer
    load = dict(clients=int(level)) if model == "closed" else dict(rate=level, arrival=arrival)
    runs = simulate_instances(inst, w, [seed + k for k in range(replications)], requests=requests, **load)
    s = summarize(runs)
    skip = int(requests * 0.1)
    span = sum(float((r.arrivals + r.responses).max() - r.arrivals.min()) for r in runs)
    x = s.throughput.mean
    cpu_util = min(1.0, sum(r.cpu_s for r in runs) / span / config.cores)
    busy = sum(r.in_service_s for r in runs) / span
    queued = x * s.wait_mean.mean
    mean_ms = float(np.mean([r.responses[skip:].mean() for r in runs])) * 1000
    p99 = s.response["p99"]
    return Simulated(Prediction(level, x, mean_ms, s.response["p50"].mean * 1000, p99.mean * 1000, cpu_util, busy, queued,
                                binding(wl, config, cpu_util, busy, queued, x)),
                     p99.lo * 1000, p99.hi * 1000, inst, sum(r.throttled_s for r in runs) / span * 1000)
