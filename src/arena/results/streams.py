"""Streams held: each configuration's most concurrent streams of server-sent events within the goal
(a closed load's level: that many streams open at once, a new one started as one ends), what a held
stream costs in memory (the slope of PSS over the streams held) and what an event costs in the
server's CPU. Pure.

A stream is judged by its own figures: the p99 of the time to its first event and of the gaps
between its events (the goal's first_event_ms and event_gap_ms); the goal's p99 applies to the
ordinary requests of a mix beside the streams (a stream's whole length is no latency), and not at
all where every request was a stream."""

from __future__ import annotations

from dataclasses import dataclass, replace

from arena import stats
from arena.results.aggregate import MiB, Cell, Figure
from arena.results.answer import Check, Goal


@dataclass(frozen=True)
class Held:
    label: str
    workload: str
    held: float | None  # the most streams held at once within the goal (None: not the fewest tried)
    tried: tuple[float, ...]  # the levels measured, fewest first
    why_not: str | None  # at the level after ``held`` (or the fewest): the first limit it broke
    first_event_p99_ms: float | None  # at ``held`` (at the fewest tried where none was held)
    event_gap_p99_ms: float | None
    others_p99_ms: float | None  # a mix's ordinary requests beside the streams (None: none)
    pss_per_stream_mib: float | None  # the slope of the median PSS over the streams held (two levels or more)
    cpu_per_event_ms: float | None  # at ``held``: the server's CPU over the window per event received


def check(cell: Cell, goal: Goal) -> Check:
    """Whether a cell of streams keeps within the goal: its streams' figures, and the goal's p99 on the
    other requests (where there are any)."""
    ordinary = cell.others_p99_ms.n > 0
    goal = goal if ordinary else replace(goal, p99_ms=None)

    def figure(name: str) -> Figure:
        return {"p99": cell.others_p99_ms, "memory": cell.pss_bytes.scaled(MiB), "errors": cell.error_pct,
                "first_event_p99": cell.first_event_p99_ms, "event_gap_p99": cell.event_gap_p99_ms}[name]

    return goal.check_figures(figure)


def held(cells: list[Cell], goal: Goal) -> list[Held]:
    """Each configuration and workload whose closed runs answered streams: the most streams held
    within the goal, counting up from the fewest tried until one level breaks it."""
    groups: dict[tuple[str, str], list[Cell]] = {}
    for c in cells:
        if c.model == "closed" and c.streams:
            groups.setdefault((c.label, c.workload), []).append(c)
    out = []
    for (label, workload), mine in groups.items():
        mine.sort(key=lambda c: c.level)
        kept, why_not = None, None
        for c in mine:
            verdict = check(c, goal)
            if not verdict.within:
                why_not = verdict.why_not
                break
            kept = c
        at = kept or mine[0]
        out.append(Held(label, workload, kept.level if kept else None, tuple(c.level for c in mine), why_not,
                        at.first_event_p99_ms.median, at.event_gap_p99_ms.median, at.others_p99_ms.median,
                        _slope([(c.level, c.pss_bytes.median / MiB) for c in mine if c.pss_bytes.median is not None]),
                        _cpu_per_event_ms(at)))
    return out


def _slope(points: list[tuple[float, float]]) -> float | None:
    """How much y grows per x (stats.slope; None with fewer than two distinct x)."""
    if len({x for x, _ in points}) < 2:
        return None
    return stats.slope([x for x, _ in points], [y for _, y in points])


def _cpu_per_event_ms(cell: Cell) -> float | None:
    each = [1000 * r.cpu_s / r.figures.streams.events for r in cell.valid_runs
            if r.cpu_s is not None and r.figures and r.figures.streams and r.figures.streams.events]
    return stats.median(each) if each else None

