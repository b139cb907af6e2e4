"""What the model's tests and benches share and Arena itself does not use: a measurer whose runs
come from a known truth (``Modelled``), the M/M/c figures the queueing formulas are checked
against (``mmc``), and the model-guided choice benches/model_check.py scores (``guided_choice``)."""

from __future__ import annotations

import math
import random
from typing import Callable, Sequence

from arena.model.queueing import OpenResult, allen_cunneen
from arena.model.recommend import Candidate
from arena.model.capacity import Ask, Key, Sample
from arena.plan.experiment import Level


def mmc(arrival_rate: float, service_s: float, servers: int) -> OpenResult:
    """M/M/c: Poisson arrivals, exponential service of mean ``service_s`` [Kle75]: Allen-Cunneen's
    G/G/c with both squared coefficients of variation 1, where it is exact."""
    return allen_cunneen(arrival_rate, service_s, servers, 1.0, 1.0)


def guided_choice(ranked: list[Candidate], measured: dict[tuple[int, int | None], float], budget: int) -> tuple[
        tuple[int, int | None] | None, list[tuple[int, int | None]]]:
    """A model-guided search over a measured grid: run (here: look up) the model's top ``budget``
    configurations that were measured, keep the best measured among them. Returns it and the
    configurations it ran."""
    ran = list(dict.fromkeys((c.processes, c.threads) for c in ranked if (c.processes, c.threads) in measured))[:budget]
    if not ran:
        return None, []
    return max(ran, key=lambda k: measured[k]), ran


class Modelled:
    """A measurer whose runs come from ``truth(key, level) -> (p99 ms, throughput)`` (the simulator,
    say), each p99 times a log-normal factor of spread ``noise`` seeded by the run itself (``seed``,
    contender, level, repetition: a run has the same noise whatever was asked before it, so two
    searches over one truth differ by what they ask, not by luck); a p99 of inf is an invalid run
    (overload). Each run moves its own clock (``clock()``) by ``run_s``: the search's budget is
    then kept in simulated time. The search judged against a known truth."""

    def __init__(self, truth: Callable[[Key, Level], tuple[float, float]], noise: float = 0.0, seed: int = 1,
                 run_s: float = 8.0, memory_mib: Callable[[Key], float] = lambda k: 40.0):
        self.truth, self.noise, self.seed, self.run_s, self.memory_mib = truth, noise, seed, run_s, memory_mib
        self.stored: dict[tuple[Key, Level], list[Sample]] = {}
        self.made = 0
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def measure(self, asks: Sequence[Ask]) -> None:
        for a in asks:
            have = self.stored.setdefault((a.key, a.level), [])
            if a.repetition != len(have) + 1:
                raise ValueError(f"asked for run {a.repetition} of {a.key} at {a.level.label} with {len(have)} stored")
            p99, x = self.truth(a.key, a.level)
            ok = math.isfinite(p99)
            rng = random.Random(f"{self.seed}|{a.key}|{a.level.model}|{a.level.value!r}|{a.repetition}")
            p99 *= rng.lognormvariate(0, self.noise) if self.noise and ok else 1.0
            have.append(Sample(ok, x, p99 if ok else None, 0.0, self.memory_mib(a.key)))
            self.made += 1
            self.now += self.run_s

    def samples(self, key: Key, level: Level) -> list[Sample]:
        return list(self.stored.get((key, level), []))
