"""Two experiments compared cell by cell (a release against the last one): for each cell both hold,
throughput, p50, p99 and memory as ratios new / base with their intervals and verdicts (stats.compare:
the decision rule of every answer), and the rules that fail a build (``--fail-on``). Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from arena import stats
from arena.results.aggregate import FIGURES, MiB, Cell
from arena.results.runs import SHARED, Run

# the figures compared (aggregate.FIGURES: unit, which way is better) -> a run's value, in that unit
COMPARED: dict[str, Callable[[Run], float | None]] = {
    "throughput": lambda r: r.throughput,
    "p50": lambda r: r.p50_us and r.p50_us / 1000,
    "p99": lambda r: r.p99_us and r.p99_us / 1000,
    "memory": lambda r: r.pss_bytes and r.pss_bytes / MiB,
}


@dataclass(frozen=True)
class Change:
    """One figure of one cell: its medians in the base and the new experiment and their comparison."""

    cell: str  # the configuration, workload and level, as shown
    figure: str
    base: float | None
    new: float | None
    comparison: stats.Comparison | None  # None where a side has no valid value


def cell_name(c: Cell, many: bool) -> str:
    return f"{c.label}" + (f" [{c.workload}]" if many else "") + f" at {c.level_label}"


def changes(base: list[Cell], new: list[Cell], threshold: float = stats.THRESHOLD) -> tuple[list[Change], list[str]]:
    """Each cell both experiments hold (the same configuration, workload and load level), figure by
    figure; and the cells only one of them holds (said, never compared)."""
    before = {c.cell: c for c in base}
    many = len({c.workload for c in base + new}) > 1
    out, alone = [], []
    for c in new:
        b = before.pop(c.cell, None)
        if b is None:
            alone.append(f"only in the new: {cell_name(c, many)}")
            continue
        if shared(b) != shared(c):  # the generator's cost is in one side's figures only
            alone.append(f"not compared: {cell_name(c, many)} ran with the server and the load sharing CPUs in the "
                         f"{'new' if shared(c) else 'base'} only ({SHARED})")
            continue
        for name, value in COMPARED.items():
            higher = FIGURES[name][2]
            a_vals = [v for v in map(value, c.valid_runs) if v]
            b_vals = [v for v in map(value, b.valid_runs) if v]
            out.append(Change(cell_name(c, many), name, stats.median(b_vals) if b_vals else None,
                              stats.median(a_vals) if a_vals else None,
                              stats.compare(a_vals, b_vals, higher, threshold) if a_vals and b_vals else None))
    alone += [f"only in the base: {cell_name(c, many)}" for c in before.values()]
    return out, alone


def shared(c: Cell) -> bool:
    """Whether the cell's runs shared their CPUs with the load generator (results.runs.Run.shared)."""
    return any(r.shared for r in c.runs)


@dataclass(frozen=True)
class Rule:
    """``figure`` may not change by more than ``limit`` (a share, signed: +0.10 is 10% up) in its bad
    direction: "p99>+10%" fails when p99 rose beyond 10%, "throughput<-5%" when throughput fell beyond 5%."""

    figure: str
    op: str  # ">" or "<"
    limit: float
    text: str

    def broken_by(self, ch: Change) -> bool:
        """Whether ``ch`` breaks the rule: the comparison declares a difference (its interval excludes
        1 beyond the practical threshold) and the ratio itself is beyond the limit. An undecided
        comparison breaks nothing: too few runs to say."""
        c = ch.comparison
        if ch.figure != self.figure or c is None or c.verdict not in (stats.BETTER, stats.WORSE):
            return False
        change = c.ratio.value - 1
        return change > self.limit if self.op == ">" else change < self.limit


RULE = re.compile(rf"\s*({'|'.join(COMPARED)})\s*([<>])\s*([+-]?\d+(?:\.\d+)?)\s*%\s*")


def rules(text: str) -> list[Rule]:
    """``--fail-on "p99>+10%,throughput<-5%"`` -> its rules (ValueError naming the part it cannot read)."""
    out = []
    for part in text.split(","):
        m = RULE.fullmatch(part)
        if not m:
            raise ValueError(f"{part.strip()!r} is not a rule such as \"p99>+10%\" or \"throughput<-5%\" "
                             f"(figures: {', '.join(COMPARED)})")
        figure, op, limit = m.group(1), m.group(2), float(m.group(3)) / 100
        higher = FIGURES[figure][2]
        bad, sign = ("<", "-") if higher else (">", "+")
        if op != bad or (limit > 0 if higher else limit < 0):
            raise ValueError(f"{part.strip()!r} would fail on {figure} getting better: {figure} is better "
                             f"{'higher' if higher else 'lower'}, so its rule is {figure}{bad}{sign}N% (it fails "
                             f"when {figure} {'falls' if higher else 'rises'} beyond N%)")
        out.append(Rule(figure, op, limit, part.strip()))
    return out


def broken(found: list[Change], given: list[Rule]) -> list[tuple[Rule, Change]]:
    return [(r, ch) for r in given for ch in found if r.broken_by(ch)]
