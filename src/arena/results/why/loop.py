"""Event-loop blocking: a call that waited without yielding held an ASGI server's event loop.

An event loop runs one callback at a time: a request that calls something blocking (a synchronous
database driver, ``requests``, ``time.sleep``, a file read) holds every other request of the process
until it returns, although the process uses no CPU meanwhile. Arena's ASGI subject and its timing
around a user's ASGI app report ``loop`` in Server-Timing (arena_wrap.LoopLag): the loop's blocked time while the request was in flight, less its own blocking
waits, on the requests that met some (so the metric's count is how many did). Found where at least
``least_share`` of the requests waited behind one and their wait at p99 was ``least_ms`` or more;
its cost at p99 is that wait."""

from __future__ import annotations

from typing import Sequence

from arena.results.aggregate import Cell
from arena.results.why.finding import Evidence, Finding

KEY, NAME = "loop", "Event-loop blocking by a call that does not yield"
SHOWN_IN = "each run's Server-Timing loop (arena show --runs)"  # where the report shows its evidence
THRESHOLDS = {"least_share": 0.01, "least_ms": 5.0}
REFERENCE = "https://docs.python.org/3/library/asyncio-dev.html#running-blocking-code"
FIX = ("run the blocking call in a thread (await asyncio.to_thread(...), or loop.run_in_executor) or use an "
       "async client for it (an async database driver, httpx.AsyncClient); or serve a blocking app with a "
       "threaded WSGI server")


def detect(cell: Cell, cells: Sequence[Cell]) -> Finding | None:
    runs = [r for r in cell.runs if r.figures and r.figures.completed and (r.figures.timing_ms or {}).get("loop")]
    met = [(h, r.figures.completed) for r in runs if (h := r.load.measured.server_timing.get("loop")) is not None]
    if not met:
        return None
    share = sum(h.count for h, _ in met) / sum(n for _, n in met)
    p99 = max(h.p("99") or 0 for h, _ in met) / 1000
    if share < THRESHOLDS["least_share"] or p99 < THRESHOLDS["least_ms"]:
        return None
    mean = sum(r.figures.timing_ms["loop"] for r in runs) / len(runs)  # ms a request, over every request
    evidence = (Evidence("requests that waited behind a blocked loop", 100 * share, "%"),
                Evidence("their wait p99", p99, "ms"), Evidence("wait per request", mean, "ms on average"))
    return Finding(KEY, NAME, cell.label, cell.workload, cell.level_label, evidence, mean, p99, None,
                   "measured: the event loop's timer ran late while the process used no CPU, during each "
                   "request's flight (Arena's timing)", REFERENCE, FIX)
