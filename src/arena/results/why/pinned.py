"""Threads pinned by streams: a thread-per-request server spends a thread on each stream for the
stream's whole life, so streams beyond its threads wait for one.

Puma, gunicorn's sync and gthread workers, Unicorn, waitress and Passenger serve one request a
thread (or a process): a stream of server-sent events holds it from the first byte to the last. With
more streams open at once than the server has threads, the others queue until a stream ends, and
their first event comes a stream's length later (an event loop holds a coroutine, not a thread).
Found in a cell of streams held at once (a closed load) beyond the server's threads (processes x
threads, as it was started) where the first event's p99 exceeds the configuration's at its fewest
streams by ``least_ms`` and by ``least_ratio`` times; the evidence is the threads, the streams
waiting for one, and the first event's p99 against the fewest's. Its cost at p99 is the growth."""

from __future__ import annotations

from typing import Sequence

from arena.results.aggregate import Cell
from arena.results.why.finding import Evidence, Finding

KEY, NAME = "pinned", "Threads pinned by streams"
SHOWN_IN = "each level's first-event p99 against the fewest streams' (arena show's streams held)"
THRESHOLDS = {"least_ms": 50.0, "least_ratio": 2.0}
REFERENCE = "https://github.com/puma/puma/blob/master/docs/architecture.md"
FIX = ("serve the streams from an event loop (an ASGI server such as uvicorn, or gunicorn's gevent worker) or "
       "give the server a thread for each stream held at once; keep streams apart from ordinary requests")


def detect(cell: Cell, cells: Sequence[Cell]) -> Finding | None:
    if not cell.streams or cell.model != "closed" or cell.first_event_p99_ms.median is None:
        return None
    threads = cell.valid_runs[0].launched.threads
    if threads is None or cell.level <= threads:
        return None
    mine = [c for c in cells if (c.config, c.workload, c.model) == (cell.config, cell.workload, cell.model)
            and c.streams and c.first_event_p99_ms.median is not None]
    fewest = min(mine, key=lambda c: c.level)
    if fewest.level >= cell.level:
        return None
    p99, base = cell.first_event_p99_ms.median, fewest.first_event_p99_ms.median
    if p99 - base < THRESHOLDS["least_ms"] or p99 < THRESHOLDS["least_ratio"] * base:
        return None
    waiting = cell.level - threads
    evidence = (Evidence("threads", threads, "held by streams"), Evidence("streams waiting for one", waiting, ""),
                Evidence("first event p99", p99, "ms"), Evidence(f"at {fewest.level:g} streams", base, "ms"))
    return Finding(KEY, NAME, cell.label, cell.workload, cell.level_label, evidence, None, p99 - base, None,
                   f"likely: {cell.level:g} streams held at once on {threads} threads, a thread each for a stream's "
                   "whole life; the others wait for one to end (the first event's p99 grew by about that wait)",
                   REFERENCE, FIX)
