"""Listen-queue overflow: connections the kernel turned away because the server's accept queue was full.

A server takes connections off its listen queue (its backlog) as fast as its processes accept them;
when the queue is full the kernel drops the client's SYN (ListenOverflows, ListenDrops), and the
client sends it again after 1 s, then 3 s more: a connection that should take a fraction of a
millisecond takes a second or four. Found where the kernel's counters rose while a run's load ran (in
Arena's network namespace: its load is the only one there), with the connect times that paid for it."""

from __future__ import annotations

from typing import Sequence

from arena.results.aggregate import Cell
from arena.results.why.finding import Evidence, Finding, counting

KEY, NAME = "backlog", "Listen-queue overflow: connections dropped at a full accept queue"
SHOWN_IN = "each run's connect time (arena show --runs)"  # where the report shows its evidence
THRESHOLDS = {"least_overflows": 1, "syn_retry_ms": 900.0}  # a connect this long waited a SYN retransmit
REFERENCE = "https://man7.org/linux/man-pages/man2/listen.2.html"


def detect(cell: Cell, cells: Sequence[Cell]) -> Finding | None:
    hit, overflows = counting(cell, "listen_overflows", THRESHOLDS["least_overflows"])
    if not hit:
        return None
    drops = sum(r.resources.listen_drops or 0 for r in hit)
    evidence = [Evidence("overflows", overflows, f"in {len(hit)} of {len(cell.runs)} runs"), Evidence("drops", drops, "")]
    connects = [r.load.measured.connect_time for r in hit if r.load and r.load.measured.connect_time]
    worst = max((h.max for h in connects if h.max is not None), default=None)
    slow = max((h.p("99") for h in connects if h.p("99") is not None), default=None)
    waited = slow is not None and slow / 1000 >= THRESHOLDS["syn_retry_ms"]
    if slow is not None:
        evidence.append(Evidence("connect time p99", slow / 1000, "ms"))
    if worst is not None:
        evidence.append(Evidence("connect time max", worst / 1000, "ms"))
    confidence = ("measured: the kernel's ListenOverflows rose while the load ran"
                  + ("; connections waited a SYN retransmit (1 s or more)" if waited else ""))
    fix = ("raise the server's listen backlog (gunicorn and uvicorn --backlog, 2048 by default; Puma's backlog), "
           "within the kernel's net.core.somaxconn that caps it, or run more processes so the queue drains faster")
    return Finding(KEY, NAME, cell.label, cell.workload, cell.level_label, tuple(evidence), None,
                   slow / 1000 if waited else None, None, confidence, REFERENCE, fix)
