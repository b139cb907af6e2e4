"""Every detector over an experiment's cells, once (why/__init__.py)."""

from __future__ import annotations

from typing import Sequence

from arena.results.aggregate import Cell
from arena.results.why import backlog, churn, gc, keepalive, loop, nagle, oom, pinned, restarts, throttling
from arena.results.why.finding import Finding, Unchecked, Why

# The detectors, registered once: each module's KEY, NAME, THRESHOLDS, SHOWN_IN (where the report
# shows its evidence) and detect(cell, cells); the report reads them from here (shown_in).
DETECTORS = (nagle, throttling, oom, restarts, churn, backlog, gc, loop, keepalive, pinned)


def shown_in(key: str) -> str:
    """Where the report shows the evidence of the pathology ``key``."""
    return next(d.SHOWN_IN for d in DETECTORS if d.KEY == key)


def diagnose(cells: Sequence[Cell]) -> Why:
    """Every detector over every cell, once."""
    found, unchecked = [], []
    for detector in DETECTORS:
        for cell in cells:
            got = detector.detect(cell, cells)
            if isinstance(got, Finding):
                found.append(got)
            elif isinstance(got, Unchecked):
                unchecked.append(got)
    return Why(tuple(found), tuple(unchecked))
