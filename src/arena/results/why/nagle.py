"""Nagle's algorithm meeting the client's delayed ACK.

A server that leaves TCP_NODELAY off and writes a response in two sends (headers, then body) holds
the second send until the client acknowledges the first; a Linux client delays that ACK by about
40 ms (its delayed-ACK floor, TCP_DELACK_MIN). So each request on a kept-alive connection waits some
40-48 ms outside the app, whatever the app took. Found where the time outside the app, on average and
at the median, sits in that band at a low load (at a high one, queueing hides it); confirmed where the
server's accepted connections were read with TCP_NODELAY off (sockets.py), and never claimed where
they were read with it on."""

from __future__ import annotations

from typing import Sequence

from arena.results.aggregate import Cell
from arena.results.why.finding import Evidence, Finding

KEY, NAME = "nagle", "Nagle's algorithm x delayed ACK (TCP_NODELAY off)"
SHOWN_IN = "Latency decomposition: outside the app"  # where the report shows its evidence
THRESHOLDS = {
    "stall_ms": (36.0, 52.0),  # the delayed-ACK floor (40 ms) and what rides on it
    "most_clients": 8,  # a closed load above this many clients queues: the band no longer shows it
    "healthy_outside_ms": 5.0,  # a cell this far below the band is the same server without the stall
}
GENERIC = ("https://datatracker.ietf.org/doc/html/rfc896",
           "set TCP_NODELAY on the connections the server accepts (its option, where it has one), or send "
           "each response in one write")
# servers known upstream to leave it off, from how many processes on, and why: (processes, reference, the
# change that avoids it)
UPSTREAM = {
    "uvicorn": (2, "https://github.com/Kludex/uvicorn/issues/3149",
                "uvicorn --workers N binds the listener itself with proto 0, so asyncio never sets TCP_NODELAY "
                "on what it accepts: run one worker a uvicorn (--workers 1, more instances beside it), or a "
                "uvicorn whose listener sets IPPROTO_TCP (pull request #3155)"),
    "gunicorn-uvicorn": (1, "https://github.com/Kludex/uvicorn/issues/3149",
                         "gunicorn hands uvicorn's worker a listener with proto 0, so asyncio never sets "
                         "TCP_NODELAY on what it accepts: serve with uvicorn --workers 1 instances, or a uvicorn "
                         "whose worker sets it (pull request #3155)"),
}


def _outside(cell: Cell) -> tuple[float, float] | None:
    """(mean ms outside the app, p50 ms less the mean time in the app and its queue), or None."""
    d = cell.decomposition
    if not d or d.get("outside the app") is None or cell.p50_us.median is None:
        return None
    inside = sum(v for k, v in d.items() if v and k != "outside the app")
    return d["outside the app"], cell.p50_us.median / 1000 - inside


def detect(cell: Cell, cells: Sequence[Cell]) -> Finding | None:
    lo, hi = THRESHOLDS["stall_ms"]
    if cell.model == "closed" and cell.level > THRESHOLDS["most_clients"]:
        return None
    seen = _outside(cell)
    if seen is None or not all(lo <= v <= hi for v in seen):
        return None
    read = [r.resources for r in cell.valid_runs if r.resources and r.resources.nodelay_checked]
    checked, off = sum(r.nodelay_checked for r in read), sum(r.nodelay_off or 0 for r in read)
    if checked and not off:
        return None  # every connection read had TCP_NODELAY on: not this, whatever the 40 ms is
    if off:
        confidence = f"confirmed: {off} of the {checked} accepted connections read had TCP_NODELAY off"
    else:
        why = next((r.resources.nodelay_unchecked for r in cell.valid_runs if r.resources and r.resources.nodelay_unchecked),
                   "the server's sockets were not read")
        confidence = f"likely, from the timing alone (not confirmed: {why})"
    outside, at_p50 = seen
    healthy = []  # the same server and workload without the stall: what is left outside the app
    for c in cells:
        other = _outside(c) if c.server == cell.server and c.workload == cell.workload else None
        if other is not None and other[0] < THRESHOLDS["healthy_outside_ms"]:
            healthy.append(other[0])
    base = min(healthy) if healthy else 0.0
    stall = outside - base
    lost = None
    response, x = cell.response_ms.median, cell.throughput.median
    if cell.model == "closed" and response and x and response > stall:
        lost = cell.level / ((response - stall) / 1000) - x
    known = UPSTREAM.get(cell.server)
    reference, fix = known[1:] if known and (cell.processes or 1) >= known[0] else GENERIC
    evidence = (Evidence("mean time outside the app", outside, "ms"), Evidence("p50 less the app", at_p50, "ms"),
                Evidence("Linux's delayed-ACK floor", 40, "ms"),
                *((Evidence("a healthy configuration's time outside the app", base, "ms"),) if healthy else ()))
    return Finding(KEY, NAME, cell.label, cell.workload, cell.level_label, evidence, stall, stall, lost, confidence,
                   reference, fix)
