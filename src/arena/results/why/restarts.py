"""Worker timeouts and restarts: the server killed its own workers and started others in their place.

A pre-forking server's master kills a worker that stays silent past its timeout (gunicorn's
WORKER TIMEOUT: a sync worker busy with one slow request says nothing) or that served its
max_requests, and starts another: the requests it held are lost, the new one starts cold. Found where
processes of the server's set were gone by a run's end with as many started in their place; the
server's log says why, in the lines kept with the run (``CAUSES``: what each line means, the change
that avoids it). An OOM kill is the oom detector's."""

from __future__ import annotations

import re
from typing import Sequence

from arena.results.aggregate import Cell
from arena.results.why.finding import Evidence, Finding, counting

KEY, NAME = "restarts", "Workers killed and restarted by the server"
SHOWN_IN = "Comparison table: the invalid runs' flags"  # where the report shows its evidence
THRESHOLDS = {"least_replaced": 1}
CAUSES = (  # (what the server's log says, the cause, the change that avoids it, the reference)
    (re.compile(r"WORKER TIMEOUT"), "gunicorn's worker timeout",
     "raise gunicorn's --timeout (worker_timeout; 30 s) above the slowest request, or serve slow requests with a "
     "worker that keeps telling the master it is alive while it waits (gthread, gevent)",
     "https://docs.gunicorn.org/en/stable/settings.html#timeout"),
    (re.compile(r"Terminating timed out worker"), "Puma's worker timeout",
     "raise Puma's worker_timeout above the slowest request, or make the request yield",
     "https://github.com/puma/puma/blob/master/docs/restart.md"),
    (re.compile(r"Autorestarting worker after current request|max.requests", re.IGNORECASE), "max_requests",
     "raise max_requests, or give it a jitter (gunicorn --max-requests-jitter) so workers do not restart together",
     "https://docs.gunicorn.org/en/stable/settings.html#max-requests"),
)
UNKNOWN = ("a cause its log does not name", "read the server's log around the run (arena serve shows it live)",
           "https://docs.gunicorn.org/en/stable/design.html#server-model")


def detect(cell: Cell, cells: Sequence[Cell]) -> Finding | None:
    hit, _ = counting(cell, "replaced", THRESHOLDS["least_replaced"])
    hit = [r for r in hit if not r.resources.oom_kills]  # the oom detector's
    if not hit:
        return None
    replaced = sum(r.resources.replaced for r in hit)
    log = "\n".join(r.resources.replaced_log or "" for r in hit)
    said = next(((pattern, *rest) for pattern, *rest in CAUSES if pattern.search(log)), None)
    line = next((x.strip() for x in log.splitlines() if said and said[0].search(x)), None)
    cause, fix, reference = said[1:] if said else UNKNOWN
    evidence = [Evidence("workers replaced", replaced, f"in {len(hit)} of {len(cell.runs)} runs")]
    errors = [r.figures.errors for r in hit if r.figures]
    if errors:
        evidence.append(Evidence("errors", sum(errors), "in those runs"))
    confidence = (f"measured: the process set's pids; the server's log: \"{line[:160]}\"" if line
                  else "measured: the process set's pids (the log names no cause)")
    return Finding(KEY, f"{NAME}: {cause}", cell.label, cell.workload, cell.level_label, tuple(evidence), None, None,
                   None, confidence, reference, fix)
