"""Ranking and the answer, read from cells. Pure.

The ranking: for each configuration (and workload), its load level of highest median throughput
among the levels that keep within the limits (median p99, median PSS). The answer, which the
report and ``arena show`` open with: the best configuration overall and per server, what binds it
(read from its measurements), how sure that is (intervals of the medians, and whether the
runner-up can be told apart), and which runs were left out and why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

from arena.results.aggregate import MiB, Cell, workloads
from arena.results.runs import Failure
from arena.cpus import cpu_list


@dataclass(frozen=True)
class Limits:
    p99_ms: float | None = None
    memory_mib: float | None = None

    def __str__(self) -> str:
        parts = [f"p99 <= {self.p99_ms:g} ms" if self.p99_ms is not None else "",
                 f"PSS <= {self.memory_mib:g} MiB" if self.memory_mib is not None else ""]
        return ", ".join(p for p in parts if p) or "none"

    def why_not(self, cell: Cell) -> str | None:
        """Why ``cell`` does not keep within the limits (None: it does)."""
        p99, pss = cell.p99_us.median, cell.pss_bytes.median
        if self.p99_ms is not None and (p99 is None or p99 / 1000 > self.p99_ms):
            return "p99" if p99 is not None else "no p99"
        if self.memory_mib is not None and (pss is None or pss / MiB > self.memory_mib):
            return "memory" if pss is not None else "no memory figure"
        return None


def ranking(cells: list[Cell], limits: Limits = Limits()) -> tuple[list[Cell], list[Cell]]:
    """(best cell per server, every configuration's best cell best first), per workload in order:
    a configuration's best cell is its level of highest median throughput within the limits."""
    best: dict[tuple[str, str, str], Cell] = {}
    for c in cells:
        if c.throughput.median is None or limits.why_not(c):
            continue
        key = (c.config, c.label, c.workload)
        if key not in best or c.throughput.median > best[key].throughput.median:
            best[key] = c
    order = workloads(cells)
    eligible = sorted(best.values(), key=lambda c: (order.index(c.workload), -c.throughput.median))
    per_server: dict[tuple[str, str], Cell] = {}
    for c in eligible:
        per_server.setdefault((c.workload, c.server), c)
    return list(per_server.values()), eligible


def binding(cell: Cell) -> str:
    """What limits this cell's throughput, read from its measurements: the server's CPUs (busy
    85%+ of the window), the GIL/GVL (a quarter of the response time or more waiting for it),
    threads (a quarter or more queueing for a free one while the CPUs idle), or the load itself
    (an open load served in full, or a closed one with no queueing: more clients would be served)."""
    runs = cell.valid_runs
    if not runs:
        return "unknown (no valid run)"
    cores = len(cpu_list(str(runs[0].environment.server_cpus or "1"), "server_cpus"))
    busy = [r.resources.cpu_cores for r in runs if r.resources and r.resources.cpu_cores is not None]
    cpu = sorted(busy)[len(busy) // 2] / cores if busy else None
    cpu_text = f"CPU {100 * cpu:.0f}% of {cores} core(s)" if cpu is not None else "CPU not accounted"
    d = cell.decomposition or {}
    response = sum(v for v in d.values() if v)
    if cell.model == "open" and cell.throughput.median is not None and cell.throughput.median >= 0.95 * cell.level:
        return f"the load: all of the offered {cell.level:g} req/s served ({cpu_text})"
    if cpu is not None and cpu >= 0.85:
        return f"CPU: {100 * cpu:.0f}% of {cores} core(s) busy"
    if response and (d.get("GIL/CPU wait") or 0) >= 0.25 * response:
        return f"the GIL/GVL: {d['GIL/CPU wait']:.1f} of {response:.1f} ms waiting for it ({cpu_text})"
    if response and (d.get("queue") or 0) >= 0.25 * response:
        return f"threads: {d['queue']:.1f} of {response:.1f} ms queueing for a free one ({cpu_text})"
    return f"the load: little queueing, more clients would be served ({cpu_text})"


@dataclass(frozen=True)
class Pick:
    """A best configuration, what binds it, and how it compares with the runner-up."""

    cell: Cell
    binds: str
    runner_up: Cell | None
    distinguishable: bool | None  # None: no runner-up


@dataclass(frozen=True)
class Answer:
    workload: str
    limits: Limits
    overall: Pick | None  # None: nothing keeps within the limits
    per_server: list[Pick]
    left_out: dict[str, int]  # reason -> invalid runs (each run once, under its first reason)
    excluded: dict[str, int]  # limit -> configurations with no level within it
    repetitions: tuple[int, int]  # fewest and most valid repetitions behind a cell
    failed: dict[str, int] = field(default_factory=dict)  # why -> runs that could not be made (Failure.reason)


def _pick(ranked: list[Cell]) -> Pick:
    best, rest = ranked[0], ranked[1:]
    runner = rest[0] if rest else None
    return Pick(best, binding(best), runner, None if runner is None else not best.throughput.overlaps(runner.throughput))


def _reason(flag: str) -> str:
    """A validity flag without its run's figures: "errors 2.0% of requests ..." -> "errors"."""
    for key in ("generator saturated", "errors", "throughput drifted", "no answer", "the server died", "processes"):
        if key in flag:
            return {"processes": "a server process exited"}.get(key, key)
    return flag


def answers(cells: list[Cell], limits: Limits = Limits(), failures: Sequence[Failure] = ()) -> list[Answer]:
    """The answer for each workload (each counting the runs of it that could not be made, ``failures``)."""
    out = []
    per_server_all, eligible_all = ranking(cells, limits)
    for w in sorted(set(workloads(cells)) | {f.workload for f in failures}, key=_order(cells)):
        mine = [c for c in cells if c.workload == w]
        eligible = [c for c in eligible_all if c.workload == w]
        picks = []
        for best in (c for c in per_server_all if c.workload == w):
            same = [c for c in eligible if c.server == best.server]
            picks.append(_pick(same))
        left = Counter(_reason(r.flags[0]) for c in mine for r in c.runs if not r.valid and r.flags)
        configs = {c.config for c in mine}
        within = {c.config for c in eligible}
        excluded = Counter()
        for config in configs - within:
            reasons = {limits.why_not(c) for c in mine if c.config == config and c.throughput.median is not None}
            excluded[" and ".join(sorted(r for r in reasons if r)) or "no valid run"] += 1
        reps = [c.valid for c in mine if c.valid]
        failed = Counter(f.reason for f in failures if f.workload == w)
        out.append(Answer(w, limits, _pick(eligible) if eligible else None, picks, dict(left), dict(excluded),
                          (min(reps), max(reps)) if reps else (0, 0), dict(failed)))
    return out


def _order(cells: list[Cell]) -> Callable[[str], tuple[int, str]]:
    """Workloads in the cells' order, then any that only failed, by name."""
    known = workloads(cells)
    return lambda w: (known.index(w) if w in known else len(known), w)


def answer_lines(a: Answer, many: bool) -> list[str]:
    """The answer in plain sentences (the report renders them as HTML, ``arena show`` as text)."""
    head = f"Workload {a.workload}: " if many else ""
    lines = []
    if a.overall is None:
        lines.append(f"{head}no configuration keeps within the limits ({a.limits}).")
    else:
        lines.append(f"{head}best: {_describe(a.overall)}")
        if len(a.per_server) > 1:
            lines += [f"best of {p.cell.server}: {_describe(p)}" for p in a.per_server]
    lo, hi = a.repetitions
    lines.append(f"Limits: {a.limits}. Medians of {lo}" + (f" to {hi}" if hi != lo else "") +
                 " valid repetitions; intervals are 95% intervals of the median (order statistics) with 6+ "
                 "repetitions, else the range of the repetitions.")
    if a.left_out:
        lines.append("Left out (invalid runs): " + ", ".join(f"{n} for {k}" for k, n in sorted(a.left_out.items())) + ".")
    if a.failed:
        lines += [f"Left out (not run): {n} run{'s' * (n > 1)}, {why}" for why, n in sorted(a.failed.items())]
    if not a.left_out and not a.failed:
        lines.append("No run was left out: every run was valid.")
    if a.excluded:
        lines.append("Configurations with no level within the limits: "
                     + ", ".join(f"{n} ({k})" for k, n in sorted(a.excluded.items())) + ".")
    return lines


def _interval_text(cell: Cell) -> str:
    iv = cell.throughput.interval
    if iv is None:
        return "one valid repetition: no interval"
    return f"{'range' if iv.is_range else '95% interval'} {iv.lo:.1f}..{iv.hi:.1f}"


def _describe(p: Pick) -> str:
    c = p.cell
    p99 = c.p99_us.median
    text = (f"{c.label} at {c.level_label}: {c.throughput.median:.1f} req/s ({_interval_text(c)}), "
            f"p99 {'-' if p99 is None else f'{p99 / 1000:.1f} ms'}; binds: {p.binds}")
    if p.runner_up is not None:
        r = p.runner_up
        text += (f"; runner-up {r.label} at {r.level_label} ({r.throughput.median:.1f} req/s) is "
                 + ("distinguishable: the intervals do not overlap" if p.distinguishable
                    else "not distinguishable: the intervals overlap"))
    return text
