"""Out of memory: the kernel killed the server's processes at the container's memory limit.

The cgroup's memory.events counts the kills (memory.oom_control's oom_kill in cgroup v1); a run with
one is invalid (validity's first cause), and a server that starts a worker in the killed one's place
serves on with fewer warm workers and its requests in flight lost. Found in every cell where a run's
cgroup counted one."""

from __future__ import annotations

from typing import Sequence

from arena.limits import MiB
from arena.results.aggregate import Cell
from arena.results.why.finding import Evidence, Finding, counting

KEY, NAME = "oom", "OOM kills at the container's memory limit"
SHOWN_IN = "Comparison table: the invalid runs' flags"  # where the report shows its evidence
THRESHOLDS = {"least_kills": 1}
REFERENCE = "https://docs.kernel.org/admin-guide/cgroup-v2.html#memory-interface-files"


def detect(cell: Cell, cells: Sequence[Cell]) -> Finding | None:
    hit, kills = counting(cell, "oom_kills", THRESHOLDS["least_kills"])
    if not hit:
        return None
    limit = hit[0].launched.limits.memory_mib
    peaks = [r.resources.memory_peak_bytes for r in hit if r.resources.memory_peak_bytes]
    evidence = [Evidence("processes killed", kills, ""), Evidence("runs with a kill", len(hit), f"of {len(cell.runs)}")]
    if limit is not None:
        evidence.append(Evidence("memory limit", limit, "MiB"))
    if peaks:
        evidence.append(Evidence("peak", max(peaks) / MiB, "MiB"))
    fix = ("raise the memory limit above what the set grows to, or restart workers before they reach it (gunicorn "
           "max_requests, Puma's worker killer: arena soak tells the growth per request), or run fewer processes")
    return Finding(KEY, NAME, cell.label, cell.workload, cell.level_label, tuple(evidence), None, None, None,
                   "measured: the cgroup's memory events", REFERENCE, fix)
