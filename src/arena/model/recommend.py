"""Recommend processes x threads per server: every candidate of a grid predicted by the model,
kept when it meets the p99 target and the memory budget, ranked by throughput. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from arena.model.calibrate import Calibration, server_config
from arena.model.server import Prediction
from arena.model.verify import predict
from arena.servers import catalog
from arena.results.aggregate import Cell

THREADS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32)


@dataclass(frozen=True)
class Candidate:
    server: str
    processes: int
    threads: int | None
    predicted: Prediction
    memory_mib: float | None
    fits: bool
    why_not: str

    @property
    def name(self) -> str:
        return f"{self.server} p={self.processes}" + (f" t={self.threads}" if self.threads else "")


def grid(server: str, cores: float) -> list[tuple[int, int | None]]:
    """Processes 1 .. 4 x cores (at least 8) x the thread counts the server has a knob for."""
    s = catalog.get_server(server)
    procs = range(1, max(8, int(4 * cores)) + 1) if "processes" in s.knobs else [1]
    threads: tuple[int | None, ...] = THREADS if "threads" in s.knobs else (None,)
    return [(p, t) for p in procs for t in threads]


def candidates(cal: Calibration, model: str, level: float, p99_max_ms: float | None,
               memory_max_mib: float | None, cores: float | None = None) -> list[Candidate]:
    """Every grid point of ``cal.server``, best first: those that fit the limits, by predicted
    throughput (to 0.1 req/s), then lower p99, then less memory; then the rest."""
    if cores is not None and cores != cal.cores:
        cal = replace(cal, cores=cores)
    out = []
    for p, t in grid(cal.server, cal.cores):
        pred = predict(cal, p, t, model, level)
        config = server_config(cal.server, p, t, cal.cores)
        mem = cal.memory_mib(config.processes, config.threads)
        why = []
        if pred.overloaded:
            why.append("overloaded")
        if p99_max_ms is not None and not pred.p99_ms <= p99_max_ms:
            why.append(f"p99 {pred.p99_ms:.0f} ms > {p99_max_ms:g}")
        if memory_max_mib is not None and mem is not None and mem > memory_max_mib:
            why.append(f"memory {mem:.0f} MiB > {memory_max_mib:g}")
        out.append(Candidate(cal.server, config.processes, t, pred, mem, not why, "; ".join(why)))
    out.sort(key=lambda c: (not c.fits, -round(c.predicted.throughput, 1), c.predicted.p99_ms,
                            c.memory_mib if c.memory_mib is not None else math.inf))
    return out


def guided_choice(ranked: list[Candidate], measured: dict[tuple[int, int | None], float], budget: int) -> tuple[
        tuple[int, int | None] | None, list[tuple[int, int | None]]]:
    """A model-guided search over a measured grid: run (here: look up) the model's top ``budget``
    configurations that were measured, keep the best measured among them. Returns it and the
    configurations it ran."""
    ran = [(c.processes, c.threads) for c in ranked if (c.processes, c.threads) in measured][:budget]
    if not ran:
        return None, []
    return max(ran, key=lambda k: measured[k]), ran


def verified(chosen: list[Candidate], cells: list[Cell]) -> list[tuple[Candidate, Cell, float]]:
    """Each candidate that was run, with its cell and the relative error of its predicted throughput."""
    out = []
    for c in chosen:
        cell = next((x for x in cells if x.server == c.server and (x.processes or 1) == c.processes
                     and (x.threads or None) == c.threads), None)
        if cell is not None and cell.throughput.median:
            measured = cell.throughput.median
            out.append((c, cell, (c.predicted.throughput - measured) / measured))
    return out
