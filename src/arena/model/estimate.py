"""How long an experiment takes here, before it runs: every run's warm-up and measured time and every
server start; a study's request-bounded runs by the throughput the model expects."""

from __future__ import annotations

from arena.model.calibrate import server_config
from arena.model.server import Demand, predict_closed
from arena.plan.expand import plan
from arena.plan.experiment import Experiment, Group, RunSpec, ServerConfig

START_S = 4.0  # a typical start (ready + settled), a first start's 1 s idle probe and the stop, for estimates


def estimate_s(exp: Experiment) -> float:
    """Rough wall time of a whole experiment: every run's warm-up and measured time, every server
    start. A run bounded by a request count takes its duration if one is given; in a study file
    (``[reproduce]``), the requests over the throughput the model expects here (the server's CPUs,
    the original's work per request), at most a timeout per request and client; else nothing (its
    time depends on the server)."""
    return sum(group_s(exp, g) for g in plan(exp))


def group_s(exp: Experiment, g: Group) -> float:
    """Rough wall time of one server start and its runs (estimate_s)."""
    return START_S + sum(exp.warmup_s + (exp.duration_s or _requests_s(exp, g.config, run)) for run in g.runs)


def _requests_s(exp: Experiment, c: ServerConfig, run: RunSpec) -> float:
    work = exp.reproduce.work_of(run.workload.name) if exp.reproduce else None
    if not exp.requests or work is None or run.level.model != "closed":
        return 0.0
    x = predict_closed(Demand(work.cpu_ms, work.io_ms),
                       server_config(c.server, c.processes, c.threads, float(len(exp.server_cpus))),
                       int(run.level.value)).throughput
    return min(exp.requests / max(x, 1e-9), exp.requests / run.level.value * exp.timeout_s)
