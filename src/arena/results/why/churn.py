"""Connection churn: the clients asked for keep-alive, and the server closed their connections anyway.

Each request then pays a new connection (a handshake, and a fresh accept in the server) before it is
sent: a server whose keep-alive timeout is shorter than the gap between a client's requests, one
that closes after a number of requests a connection, or one that does not keep connections at all.
Found where arena-load opened a connection for at least ``least_share`` of the requests in the
measured window, keep-alive asked (a closed load's clients open theirs in the warm-up and keep
them). Its cost: the connect time, per request, at the share that paid it."""

from __future__ import annotations

from typing import Sequence

from arena.results.aggregate import Cell
from arena.results.why.finding import Evidence, Finding

KEY, NAME = "churn", "Connection churn: keep-alive asked, connections closed"
SHOWN_IN = "each run's connect time (arena show --runs)"  # where the report shows its evidence
# connections opened per request answered: half or more (a server that closes after a number of requests
# a connection, or when it is busy, as Puma does after 10 in a row with others waiting, costs little)
THRESHOLDS = {"least_share": 0.5}
REFERENCE = "https://www.rfc-editor.org/rfc/rfc9112#section-9.3"
SETTING = {  # the server's setting that keeps connections open longer, as Arena's option names it
    "gunicorn-gthread": "keepalive_timeout (gunicorn --keep-alive; 2 s by default)",
    "gunicorn-gevent": "keepalive_timeout (gunicorn --keep-alive; 2 s by default)",
    "puma": "keepalive_timeout (puma persistent_timeout; 20 s by default)",
    "thin": "keepalive_timeout (thin --timeout)",
    "thin-threaded": "keepalive_timeout (thin --timeout)",
}


def detect(cell: Cell, cells: Sequence[Cell]) -> Finding | None:
    runs = [r for r in cell.valid_runs if r.figures and r.figures.connections is not None]
    if not runs or not runs[0].launched.keep_alive:
        return None  # a server that keeps no connection by design (unicorn, gunicorn's sync worker)
    opened, answered = sum(r.figures.connections for r in runs), sum(r.figures.completed for r in runs)
    if not answered or opened < THRESHOLDS["least_share"] * answered or not all(r.kept_alive for r in runs):
        return None
    share = opened / answered
    connects = [r.load.measured.connect_time for r in runs if r.load.measured.connect_time is not None]
    connect_ms = (sum(h.mean * h.count for h in connects if h.mean is not None) / sum(h.count for h in connects) / 1000
                  if connects and sum(h.count for h in connects) else None)
    evidence = [Evidence("connections opened per request", share, ""),
                Evidence("connections opened", opened, f"for {answered} requests")]
    if connect_ms is not None:
        evidence.append(Evidence("connect time", connect_ms, "ms on average"))
    setting = SETTING.get(cell.server, "its keep-alive timeout and its requests per connection")
    fix = (f"keep the connections open: raise the server's {setting} above the gap between a client's requests, "
           "and its requests per connection, if it bounds them")
    return Finding(KEY, NAME, cell.label, cell.workload, cell.level_label, tuple(evidence),
                   None if connect_ms is None else connect_ms * min(1.0, share), None, None,
                   f"measured: arena-load opened {opened} connections for {answered} answers, keep-alive asked",
                   REFERENCE, fix)
