"""Garbage-collection pauses: the process's collector stopped the request.

A collection holds the GIL (Python) or the GVL (Ruby): every thread of the process waits for it,
and a full collection of a large heap takes tens of milliseconds. Arena's timing around a user's
app reports ``gc`` in Server-Timing, the process's time in the collector while the request was in
flight, on the requests that met one (so the metric's count is how many did). Found where at least
``least_share`` of the requests met a collection (enough to reach the p99) and their GC time at
p99 was ``least_ms`` or more; its cost at p99 is that time."""

from __future__ import annotations

from typing import Sequence

from arena.results.aggregate import Cell
from arena.results.why.finding import Evidence, Finding

KEY, NAME = "gc", "Garbage-collection pauses"
SHOWN_IN = "each run's Server-Timing gc (arena show --runs)"  # where the report shows its evidence
THRESHOLDS = {"least_share": 0.01, "least_ms": 5.0}
FIX = {  # by the server's language: the change that avoids it, and the reference
    "python": ("freeze what the app loads before it serves (gc.freeze() after the import, in gunicorn's --preload "
               "or post_fork), raise the collector's thresholds (gc.set_threshold), or keep fewer container "
               "objects alive between requests", "https://docs.python.org/3/library/gc.html#gc.freeze"),
    "ruby": ("size the heap for the app's working set (RUBY_GC_HEAP_INIT_SLOTS, RUBY_GC_HEAP_GROWTH_FACTOR) or "
             "allocate fewer objects per request", "https://docs.ruby-lang.org/en/3.1/GC.html"),
}


def detect(cell: Cell, cells: Sequence[Cell]) -> Finding | None:
    # every run, valid or not: pauses this long can make a run's throughput drift, and flagged so
    runs = [r for r in cell.runs if r.figures and (r.figures.timing_ms or {}).get("gc")]
    if not runs:
        return None
    met = [(r.load.measured.server_timing.get("gc"), r.figures.completed) for r in runs]
    met = [(h, n) for h, n in met if h is not None and n]
    if not met:
        return None
    share = sum(h.count for h, _ in met) / sum(n for _, n in met)
    p99 = max(h.p("99") or 0 for h, _ in met) / 1000
    worst = max(h.max or 0 for h, _ in met) / 1000
    if share < THRESHOLDS["least_share"] or p99 < THRESHOLDS["least_ms"]:
        return None
    mean = sum(r.figures.timing_ms["gc"] for r in runs) / len(runs)  # ms a request, over every request
    fix, reference = FIX.get(runs[0].launched.language or "", FIX["python"])  # gc comes from Arena's wrappers
    evidence = (Evidence("requests that met a collection", 100 * share, "%"),
                Evidence("their GC time p99", p99, "ms"), Evidence("max", worst, "ms"),
                Evidence("GC per request", mean, "ms on average"))
    return Finding(KEY, NAME, cell.label, cell.workload, cell.level_label, evidence, mean, p99, None,
                   "measured: the process's time in the collector while each request was in flight "
                   "(Arena's timing around the app)", reference, fix)
