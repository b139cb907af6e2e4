"""The answer, read from cells. Pure (cells in, an :class:`Answer` per workload out).

The goal: a latency target (p99), a memory budget (PSS) and an error limit, from the experiment's
``[goal]`` with the command's flags over it. A configuration's standing is its load level of highest
median throughput among the levels that keep within the goal. The best is the configuration of
highest median throughput so placed; every other is compared with it (stats.compare: the ratio of
throughput and of p99, each with its 95% interval and a verdict), and those not shown to be worse are
**tied for best**: the answer names that group, never one winner it cannot tell apart. One with too
few valid runs on a side for an interval (fewer than two) is neither: it is **undecided**, said apart,
never counted as tied (a single run at 6% of the best's throughput is no tie). Without a
latency target the answer leads with the Pareto front of throughput, p99 and memory (the cells no
other beats on all three), since "most throughput" alone ignores latency. A cell meets a limit when
its interval of the median does; one that meets it at the median only is said to.

``arena show`` (text and --json), ``recommend`` and the report render these answers; none computes
its own.
"""

from __future__ import annotations

import math
import shlex
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from arena import stats
from arena.cpus import cpu_list
from arena.results.aggregate import FIGURES, QUOTA_WAIT, Cell, Figure, workloads
from arena.results.runs import Failure


@dataclass(frozen=True)
class Goal:
    """What a configuration must keep within: p99 (ms), memory (PSS, MiB), errors (% of requests) and,
    where it serves streams of server-sent events, the p99 of the time to their first event and of the
    gaps between their events (ms); None: no limit. ``threshold``: the smallest difference worth
    calling one (stats.compare)."""

    p99_ms: float | None = None
    memory_mib: float | None = None
    error_pct: float | None = None
    threshold: float = stats.THRESHOLD
    first_event_ms: float | None = None
    event_gap_ms: float | None = None

    @property
    def latency(self) -> bool:
        return self.p99_ms is not None

    def over(self, **given: float | None) -> "Goal":
        """This goal with each limit ``given`` (not None) in place of its own: flags over a file's."""
        return replace(self, **{k: v for k, v in given.items() if v is not None})

    def check(self, cell: Cell) -> "Check":
        """Whether ``cell`` keeps within the goal: at its medians, and surely (by their intervals)."""
        return self.check_figures(lambda name: FIGURES[name][1](cell))

    def p99_within(self, p99_ms: float | None) -> bool:
        """Whether a p99 (ms), measured or predicted, keeps within the latency target (always, without
        one; never, without a figure). The one comparison of the target with a figure: a cell's
        (check), a capacity search's runs at a rate (model/search.passes) and its stops, the model's
        candidates and capacities (model/recommend.py), tune's race all ask it."""
        return self.p99_ms is None or p99_ms is not None and p99_ms <= self.p99_ms

    def memory_within(self, mib: float | None) -> bool:
        """Whether a memory figure (PSS, MiB) keeps within the budget (always, without one)."""
        return self.memory_mib is None or mib is not None and mib <= self.memory_mib

    def errors_within(self, pct: float | None) -> bool:
        """Whether an error share (% of the requests) keeps within the limit (always, without one)."""
        return self.error_pct is None or pct is not None and pct <= self.error_pct

    def check_figures(self, figure_of: Callable[[str], Figure]) -> "Check":
        """Whether the figures ``figure_of(name)`` gives ("p99" in ms, "memory" in MiB, "errors" in % of
        requests, "first_event_p99" and "event_gap_p99" in ms; asked for the limits set only) keep
        within the goal: at their medians, and surely (by their intervals). The one judgement of a
        goal's figures: a cell's (check), the runs of a capacity search at one rate (model/search.passes)."""
        median_only = []
        for name, most, within in (("p99", self.p99_ms, self.p99_within), ("memory", self.memory_mib, self.memory_within),
                                   ("errors", self.error_pct, self.errors_within),
                                   ("first_event_p99", self.first_event_ms, lambda v: v <= self.first_event_ms),
                                   ("event_gap_p99", self.event_gap_ms, lambda v: v <= self.event_gap_ms)):
            if most is None:
                continue
            figure = figure_of(name)
            if figure.median is None:
                return Check(False, f"no {name} figure")
            if not within(figure.median):
                return Check(False, name)
            if figure.interval is None or not within(figure.interval.hi):
                median_only.append(name)
        return Check(True, None, tuple(median_only))

    def __str__(self) -> str:
        parts = [f"p99 <= {self.p99_ms:g} ms" if self.p99_ms is not None else "",
                 f"PSS <= {self.memory_mib:g} MiB" if self.memory_mib is not None else "",
                 f"errors <= {self.error_pct:g}%" if self.error_pct is not None else "",
                 f"first event p99 <= {self.first_event_ms:g} ms" if self.first_event_ms is not None else "",
                 f"event gap p99 <= {self.event_gap_ms:g} ms" if self.event_gap_ms is not None else ""]
        return ", ".join(p for p in parts if p) or "none"


@dataclass(frozen=True)
class Check:
    within: bool  # at the medians
    why_not: str | None = None  # the first limit it breaks ("p99", "memory", "errors", "no p99 figure")
    median_only: tuple[str, ...] = ()  # limits met at the median while the interval reaches beyond (or no interval)


def standings(cells: list[Cell], goal: Goal = Goal()) -> list[Cell]:
    """Every configuration's best cell within the goal (its level of highest median throughput), best
    first, per workload in the cells' order. Of equal throughput (to 0.1 req/s: an open load every
    one serves in full), the lower median p99 first, then the less memory: never the file's order."""
    best: dict[tuple[str, str, str], Cell] = {}
    for c in cells:
        if c.throughput.median is None or not goal.check(c).within:
            continue
        key = (c.config, c.label, c.workload)
        if key not in best or c.throughput.median > best[key].throughput.median:
            best[key] = c
    order = workloads(cells)
    return sorted(best.values(), key=lambda c: (order.index(c.workload), -round(c.throughput.median, 1),
                                                 _or_last(c.p99_us.median), _or_last(c.pss_bytes.median)))


def _or_last(v: float | None) -> float:
    return math.inf if v is None else v


def binding(cell: Cell) -> str:
    """What limits this cell's throughput, read from its measurements: the server's CPUs (busy 85%+
    of the window; of its CPU quota, where that is fewer cores); the wait for the quota's next period
    (a quarter of the response time or more); the GIL/GVL (a quarter or more waiting for it, where a
    process runs more than one thread) or, with one thread a process, a core (naming the services
    that share the machine); a free thread or worker process to take the request (a quarter or more
    queueing); or the load itself (an open load served in full, or little queueing)."""
    runs = cell.valid_runs
    if not runs:
        return "unknown (no valid run)"
    cores = len(cpu_list(str(runs[0].environment.server_cpus or "1"), "server_cpus"))
    quota = runs[0].launched.limits.cpu
    quota = quota if quota is not None and quota < cores else None  # a quota below its CPUs holds it back
    busy = [r.resources.cpu_cores for r in runs if r.resources and r.resources.cpu_cores is not None]
    cpu = sorted(busy)[len(busy) // 2] / (quota or cores) if busy else None
    held = f", throttled {cell.throttled_ms_per_s.median or 0:.0f} ms a second" if quota else ""
    cpu_text = ("CPU not accounted" if cpu is None else
                f"CPU {100 * cpu:.0f}% of its {quota:g}-core quota{held}" if quota else
                f"CPU {100 * cpu:.0f}% of {cores} core(s)")
    d = cell.decomposition or {}
    response = sum(v for v in d.values() if v)
    threaded = (cell.threads or 1) > 1
    if cell.model == "open" and cell.throughput.median is not None and cell.throughput.median >= 0.95 * cell.level:
        return f"the load: all of the offered {cell.level:g} req/s served ({cpu_text})"
    if cpu is not None and cpu >= 0.85:
        return (f"CPU: {100 * cpu:.0f}% of its {quota:g}-core quota busy{held}" if quota else
                f"CPU: {100 * cpu:.0f}% of {cores} core(s) busy")
    wait, queue, held_ms = d.get("GIL/CPU wait") or 0, d.get("queue") or 0, d.get(QUOTA_WAIT) or 0
    if response and held_ms >= 0.25 * response:
        return f"the CPU quota: {held_ms:.1f} of {response:.1f} ms held back for its next period, at least ({cpu_text})"
    if response and wait >= 0.25 * response:
        if threaded:
            return f"the GIL/GVL: {wait:.1f} of {response:.1f} ms waiting for it ({cpu_text})"
        shared = f", shared with {', '.join(sorted(cell.service_cores))}" if cell.service_cores else ""
        return f"a core: {wait:.1f} of {response:.1f} ms waiting for one{shared} ({cpu_text})"
    if response and queue >= 0.25 * response:
        free = "thread" if threaded else "worker"
        return f"{free}s: {queue:.1f} of {response:.1f} ms queueing for a free one ({cpu_text})"
    return f"the load: little queueing, more clients would be served ({cpu_text})"


@dataclass(frozen=True)
class Pick:
    """A configuration's best cell, what binds it, and how it keeps within the goal."""

    cell: Cell
    binds: str
    check: Check


@dataclass(frozen=True)
class Versus:
    """Configuration ``cell`` against ``base``: throughput and p99, each a ratio cell / base with its
    interval and verdict from ``cell``'s side (None where a side has no such figure)."""

    cell: Cell
    base: Cell
    throughput: stats.Comparison | None
    p99: stats.Comparison | None

    @property
    def verdict(self) -> str:
        return self.throughput.verdict if self.throughput else stats.UNDECIDED


def versus(cell: Cell, base: Cell, threshold: float = stats.THRESHOLD) -> Versus:
    def one(figure: Callable[[Any], float | None], higher: bool) -> stats.Comparison | None:
        a = [v for v in map(figure, cell.valid_runs) if v]
        b = [v for v in map(figure, base.valid_runs) if v]
        return stats.compare(a, b, higher, threshold) if a and b else None

    return Versus(cell, base, one(lambda r: r.throughput, True), one(lambda r: r.p99_us, False))


def pareto(cells: list[Cell], threshold: float = stats.THRESHOLD) -> list[Cell]:
    """The cells (configuration at a level, valid runs only) that no other beats on all of throughput
    (higher), p99 and memory (lower; left out where a cell has no memory figure): one beats another
    when it is no worse on each by more than ``threshold`` and better on one by more than it.
    Highest throughput first."""
    import numpy as np

    pts = [c for c in cells if c.throughput.median and c.p99_us.median]
    memory = all(c.pss_bytes.median for c in pts)
    # each figure the higher the better, a row per cell
    f = np.array([[c.throughput.median, -c.p99_us.median] + ([-c.pss_bytes.median] if memory else [])
                  for c in pts], dtype=float).reshape(len(pts), 2 + memory)
    # another is worse on a figure below c's less the threshold, better above c's plus it
    lows, highs = (f - threshold * np.abs(f)).tolist(), (f + threshold * np.abs(f)).tolist()
    columns = [np.ascontiguousarray(f[:, k]) for k in range(f.shape[1])]
    front = []
    for c, low, high in zip(pts, lows, highs):  # every other against c at once, a figure at a time
        no_worse, better = columns[0] >= low[0], columns[0] > high[0]
        for col, lo, hi in zip(columns[1:], low[1:], high[1:]):
            no_worse &= col >= lo
            better |= col > hi
        if not (no_worse & better).any():
            front.append(c)
    return sorted(front, key=lambda c: -c.throughput.median)


def twins(cells: list[Cell], threshold: float = stats.THRESHOLD) -> list[Versus]:
    """Each A/A pair (one configuration under two labels, plan ServerConfig.twin) at each level, the
    later listed against the first."""
    base: dict[tuple, Cell] = {}
    out = []
    for c in cells:
        suffix = f" as {shlex.quote(c.label)}"
        if not c.config.endswith(suffix) or not c.valid:
            continue
        key = (c.config.removesuffix(suffix), c.workload, c.model, c.level)
        if key in base:
            out.append(versus(c, base[key], threshold))
        else:
            base[key] = c
    return out


@dataclass(frozen=True)
class Answer:
    workload: str
    goal: Goal
    best: Pick | None  # None: nothing keeps within the goal
    tied: tuple[Versus, ...]  # configurations not shown worse than the best (an interval says so), each against it
    beaten: tuple[Versus, ...]  # the others within the goal, each shown worse than the best
    per_server: tuple[Pick, ...]
    pareto: tuple[Cell, ...]
    twins: tuple[Versus, ...]  # A/A pairs
    left_out: dict[str, int]  # reason -> invalid runs (each run once, under its first reason)
    excluded: dict[str, int]  # limit -> configurations with no level within it
    repetitions: tuple[int, int]  # fewest and most valid repetitions behind a cell
    failed: dict[str, int] = field(default_factory=dict)  # why -> runs that could not be made (Failure.reason)
    undecided: tuple[Versus, ...] = ()  # compared without an interval (under two valid runs a side): not tied
    others: tuple[Versus, ...] = ()  # tied, undecided and beaten together, in their standing (best placed first)

    @property
    def placed(self) -> list[Cell]:
        """The cells within the goal in their standing: the best, then the others."""
        return ([self.best.cell] if self.best else []) + [v.cell for v in self.others]

    @property
    def comparisons(self) -> tuple[Versus, ...]:
        """Every comparison made, each pair once (an A/A pair compared as best and tied is not repeated)."""
        def pair(v: Versus) -> frozenset:
            return frozenset(((v.cell.config, v.cell.level), (v.base.config, v.base.level)))

        made = self.others
        done = {pair(v) for v in made}
        return made + tuple(v for v in self.twins if pair(v) not in done)


def answer(cells: list[Cell], workload: str, goal: Goal = Goal(), failures: Sequence[Failure] = ()) -> Answer:
    """The answer for one workload (counting the runs of it that could not be made, ``failures``)."""
    mine = [c for c in cells if c.workload == workload]
    placed = standings(mine, goal)
    best = placed[0] if placed else None
    compared = [versus(c, best, goal.threshold) for c in placed[1:]] if best else []
    def thin(v: Versus) -> bool:  # no interval of the ratio: too few valid runs on a side to compare
        return v.throughput is None or v.throughput.ratio.lo is None

    undecided = tuple(v for v in compared if v.verdict != stats.WORSE and thin(v))
    tied = tuple(v for v in compared if v.verdict != stats.WORSE and not thin(v))
    beaten = tuple(v for v in compared if v.verdict == stats.WORSE)
    per_server: dict[str, Cell] = {}
    for c in placed:
        per_server.setdefault(c.server, c)
    left = Counter(r.flags[0].kind for c in mine for r in c.runs if not r.valid and r.flags)
    excluded: Counter = Counter()
    within = {c.config for c in placed}
    for config in dict.fromkeys(c.config for c in mine):
        if config not in within:
            reasons = {goal.check(c).why_not for c in mine if c.config == config and c.throughput.median is not None}
            excluded[" and ".join(sorted(r for r in reasons if r)) or "no valid run"] += 1
    reps = [c.valid for c in mine if c.valid]
    pick = lambda c: Pick(c, binding(c), goal.check(c))  # noqa: E731
    return Answer(workload, goal, pick(best) if best else None, tied, beaten,
                  tuple(pick(c) for c in per_server.values()), tuple(pareto(mine, goal.threshold)),
                  tuple(twins(mine, goal.threshold)), dict(left), dict(excluded),
                  (min(reps), max(reps)) if reps else (0, 0), dict(Counter(f.reason for f in failures
                                                                            if f.workload == workload)),
                  undecided, tuple(compared))


def answers(cells: list[Cell], goal: Goal = Goal(), failures: Sequence[Failure] = ()) -> list[Answer]:
    """The answer for each workload: the cells' workloads in order, then any that only failed."""
    known = workloads(cells)
    names = sorted(set(known) | {f.workload for f in failures}, key=lambda w: (known.index(w) if w in known else len(known), w))
    return [answer(cells, w, goal, failures) for w in names]
