"""Thresholds: pass/fail criteria on an experiment's cells, as k6 has them (``p99 < 200ms``,
``errors < 0.1%``, ``throughput > 500``), for CI. Each is checked on every cell it applies to, at the
cell's median over its valid runs; a cell without valid runs is not judged (its runs' flags say
why). Pure."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Callable

from arena.results.aggregate import FIGURES, Cell

DURATION = {"ms": 1, "s": 1000, "us": 0.001}
UNITS: dict[str, dict[str, float]] = {  # how a threshold may write each figure's value, in its unit (FIGURES)
    "p50": DURATION, "p90": DURATION, "p99": DURATION, "throughput": {"req/s": 1, "": 1}, "errors": {"%": 1},
    "memory": {"MiB": 1, "GiB": 1024},
}
FORM = re.compile(r"\s*([a-z0-9]+)\s*(<=|>=|<|>)\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z%/]*)\s*")
OPS: dict[str, Callable[[float, float], bool]] = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__,
                                                  ">=": float.__ge__}


@dataclass(frozen=True)
class Threshold:
    figure: str
    op: str
    value: float  # in the figure's unit (aggregate.FIGURES)
    text: str  # as written
    server: str | None = None  # only this server entry's configurations (their keys), None: every one
    configs: frozenset[str] = frozenset()

    def applies(self, cell: Cell) -> bool:
        if self.server is None:
            return True
        if not self.configs:
            return cell.server == self.server
        return cell.config.removesuffix(f" as {shlex.quote(cell.label)}") in self.configs  # an A/A twin's too

    def holds(self, cell: Cell) -> bool | None:
        """Whether the cell's median meets it (None: the cell has no such figure)."""
        v = median(self.figure, cell)
        return None if v is None else OPS[self.op](float(v), self.value)


def median(figure: str, cell: Cell) -> float | None:
    """The cell's median of ``figure``, in its unit (aggregate.FIGURES)."""
    return FIGURES[figure][1](cell).median


def parse(text: str) -> Threshold:
    """"p99 < 200ms" -> a Threshold (ValueError saying what is allowed)."""
    m = FORM.fullmatch(text) if isinstance(text, str) else None
    if not m or m.group(1) not in UNITS:
        raise ValueError(f"must be a threshold such as \"p99 < 200ms\", \"errors < 0.1%\", \"throughput > 500\" "
                         f"or \"memory < 512MiB\" (figures: {', '.join(UNITS)})")
    figure, op, number, unit = m.groups()
    units = UNITS[figure]
    if unit not in units and not (unit == "" and figure in ("p50", "p90", "p99", "memory")):
        raise ValueError(f"{figure}: unit {unit or '(none)'!r} is not one of {', '.join(u for u in units if u)}")
    return Threshold(figure, op, float(number) * units.get(unit, 1), text.strip())


@dataclass(frozen=True)
class Outcome:
    threshold: Threshold
    cell: Cell
    value: float | None
    passed: bool | None  # None: not judged (no such figure)


def evaluate(cells: list[Cell], thresholds: list[Threshold]) -> list[Outcome]:
    """Every threshold on every cell with valid runs it applies to."""
    return [Outcome(t, c, median(t.figure, c), t.holds(c)) for t in thresholds for c in cells
            if c.valid and t.applies(c)]


def failed(outcomes: list[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.passed is False]
