"""A configuration's capacity under a goal, pure: how a rate is judged (``passes``: the medians of its
valid runs within the goal), where the capacity lies among the rates tried (``bracket``), which rate
to try next (up by UP or down by DOWN while one end is missing, then halving the bracket in log space
until it is within ``within``), when going down is hopeless (``least_p99``), the model's own capacity
by bisection (``highest_rate``), and the capacity the stored runs show (``capacities``). The race
and the search that use them: model/search.py. A measurer (``Measurer``) makes the runs asked for."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from arena import stats
from arena.plan.experiment import Level
from arena.results.aggregate import MiB, Figure, error_pct
from arena.results.answer import Goal
from arena.results.runs import Run

UP, DOWN = 1.3, 0.7  # bracketing steps while one end is missing
WITHIN = 0.05  # a bracket this narrow (hi / lo - 1) is capacity found
FLOOR = 1 / 64  # below this share of the first rate tried, nothing meets the goal
CONFIRM = 3  # runs at the capacity found

Key = tuple  # a contender: (server, processes, threads)


@dataclass(frozen=True)
class Sample:
    """One stored run as the search sees it."""

    valid: bool
    throughput: float | None
    p99_ms: float | None
    error_pct: float | None
    memory_mib: float | None
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ask:
    key: Key
    level: Level
    repetition: int
    why: str


class Measurer(Protocol):
    def measure(self, asks: Sequence[Ask]) -> None:
        """Make the runs asked for that are not stored yet (a run that fails to start is left out)."""

    def samples(self, key: Key, level: Level) -> list[Sample]:
        """Every stored run of the contender at the level, in repetition order."""


@dataclass(frozen=True)
class Capacity:
    key: Key
    lo: float | None  # the highest rate that passed (None: none did)
    hi: float | None  # the lowest rate above it that failed (None: none did)
    runs_at_lo: int
    confirmed: bool  # CONFIRM runs at ``lo``, passing at their median
    p99_ms: Figure | None  # p99 at ``lo`` over its runs
    probes: tuple[tuple[float, bool, int], ...]  # (rate, passed, runs) in rate order

    @property
    def width(self) -> float | None:
        """hi / lo - 1 (None: an end is missing)."""
        return None if self.lo is None or self.hi is None else self.hi / self.lo - 1


def rounded(rate: float) -> float:
    """A rate to three significant figures: readable, and the same key on every resume."""
    if rate <= 0:
        return 0.0
    digits = 2 - int(math.floor(math.log10(rate)))
    return float(round(rate, digits))


def highest_rate(p99_at: Callable[[float], float], within: Callable[[float], bool], top: float,
                 steps: int = 12) -> float:
    """The highest rate in (0, ``top``) whose ``p99_at(rate)`` is ``within`` the target (Goal.p99_within), by bisection
    (``steps`` halvings: 12 is 1/4096 of ``top``; p99 grows with the rate); 0 where even top / 1000
    does not. The highest rate the halvings can reach is tried first: where it keeps within the
    target, so does every lower one, and it is their answer without them (a target loose beside the
    service time is met up to saturation: one simulation in place of eleven)."""
    lo, hi = 0.0, top
    for _ in range(steps):
        lo = (lo + hi) / 2
    if within(p99_at(lo)):
        return lo
    if not within(p99_at(top * 1e-3)):
        return 0.0
    lo, hi = 0.0, top
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if within(p99_at(mid)) else (lo, mid)
    return lo


def passes(samples: Sequence[Sample], goal: Goal) -> bool:
    """Whether a rate keeps within the goal (Goal.check_figures): the medians of its valid runs' p99,
    memory and error share."""
    valid = [s for s in samples if s.valid and s.p99_ms is not None]
    if not valid:
        return False
    of = {"p99": lambda: [s.p99_ms for s in valid], "memory": lambda: [s.memory_mib for s in valid],
          "errors": lambda: [s.error_pct or 0.0 for s in valid]}
    return goal.check_figures(lambda name: Figure.of(of[name]())).within


def bracket(history: dict[float, bool]) -> tuple[float | None, float | None]:
    """(highest passing rate below the lowest failing one, that failing rate) of the rates tried."""
    failing = [r for r, ok in history.items() if not ok]
    hi = min(failing) if failing else None
    passing = [r for r, ok in history.items() if ok and (hi is None or r < hi)]
    return (max(passing) if passing else None), hi


def next_rate(history: dict[float, bool], start: float, within: float = WITHIN) -> float | None:
    """The next rate to try (None: the bracket is within ``within``, or even the floor failed)."""
    lo, hi = bracket(history)
    if lo is None and hi is None:
        return rounded(start)
    if lo is None:
        r = rounded(hi * DOWN)
        return None if r < start * FLOOR or r in history else r
    if hi is None:
        return rounded(lo * UP)
    if hi / lo - 1 <= within:
        return None
    r = rounded(math.sqrt(lo * hi))
    return None if r in history else r  # rounding met a rate tried: as narrow as the rates go


def least_p99(points: Sequence[tuple[float, float]]) -> float:
    """A lower bound on the p99 at every rate below the lowest of ``points`` ((rate, median p99)):
    p99 grows with the rate, the faster the nearer saturation (a convex curve), so the line through
    the lowest point and the next at twice its rate or more, drawn on to rate 0, keeps below the curve
    there (-inf without such a pair). Where it is beyond the target, no lower rate meets it."""
    if not points:
        return -math.inf
    (r0, p0), *rest = sorted(points)
    up = [(r, p) for r, p in rest if r >= 2 * r0]
    if not up or not math.isfinite(up[0][1]) or not math.isfinite(p0):
        return -math.inf
    r1, p1 = up[0]
    return p0 - (p1 - p0) * r0 / (r1 - r0)


def values(samples: Sequence[Sample], figure: str) -> list[float]:
    return [v for v in (getattr(s, figure) for s in samples if s.valid) if v is not None and v > 0]


def median_text(samples: Sequence[Sample], figure: str) -> str:
    vs = values(samples, figure)
    if not vs:
        return "no valid run"
    return f"p99 {stats.median(vs):.0f} ms" if figure == "p99_ms" else f"{stats.median(vs):.1f} req/s"


def median_or(samples: Sequence[Sample], figure: str, higher: bool) -> float:
    """A sort key: the median of the figure, best first; no value sorts last."""
    vs = values(samples, figure)
    if not vs:
        return math.inf
    m = stats.median(vs)
    return -m if higher else m


def out_of_reach(measurer: Measurer, keys: Sequence[Key], rates: Sequence[float], goal: Goal) -> float | None:
    """Going down with every run beyond the goal: the least p99 any of ``keys`` can have below the open
    ``rates`` tried (``least_p99`` of each one's median p99s; inf where no run there was valid), where
    it is beyond the target (None: a lower rate may still meet it)."""
    if goal.p99_ms is None:
        return None
    least = math.inf
    for k in keys:
        got = {r: measurer.samples(k, Level("open", r)) for r in rates}
        least = min(least, least_p99([(r, median_or(s, "p99_ms", False)) for r, s in got.items() if s]))
    return None if goal.p99_within(least) else least


def probe_text(samples: Sequence[Sample], ok: bool) -> str:
    return f"{median_text(samples, 'p99_ms')} over {len(samples)} run(s): {'within' if ok else 'beyond'} the goal"


def result(key: Key, history: dict[float, bool], measurer: Measurer) -> Capacity:
    return capacity_of(key, {r: measurer.samples(key, Level("open", r)) for r in history}, history)


def capacity_of(key: Key, runs: dict[float, list[Sample]], judged: dict[float, bool]) -> Capacity:
    """The capacity the runs at each open rate show (``judged``: whether each rate passed)."""
    lo, hi = bracket(judged)
    at = runs[lo] if lo is not None else []
    probes = tuple((r, judged[r], len(runs[r])) for r in sorted(judged))
    return Capacity(key, lo, hi, len(at), lo is not None and len(at) >= CONFIRM and judged[lo],
                    Figure.of(values(at, "p99_ms")) if at else None, probes)


def capacities(runs: Sequence[Run], goal: Goal) -> dict[tuple[str, str], Capacity]:
    """Each configuration's capacity (by configuration key and workload) from its stored runs at open
    rates, each rate judged on all of them (``passes``): what a search found, read back."""
    by: dict[tuple[str, str], dict[float, list[Sample]]] = {}
    for r in sorted(runs, key=lambda r: r.repetition):
        if r.model == "open":
            by.setdefault((r.config, r.workload), {}).setdefault(r.level, []).append(sample_of(r))
    return {k: capacity_of(k, rates, {rate: passes(s, goal) for rate, s in rates.items()}) for k, rates in by.items()}


def sample_of(r: Run) -> Sample:
    """A stored run as the search sees it."""
    return Sample(r.valid, r.throughput, r.p99_us / 1000 if r.p99_us else None, error_pct(r),
                  r.pss_bytes / MiB if r.pss_bytes else None, tuple(r.flags))
