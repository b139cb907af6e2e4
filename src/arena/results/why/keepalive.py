"""Keep-alive unfairness: the server serves some kept-alive connections before others.

Puma 5 serves a connection that already sent a request before one that has not: a thread goes on
reading the next request of the connection it just answered, and a busy server closes a connection
after max_fast_inline (10) requests, so the client that reconnects waits in the listen queue behind
every kept-alive connection, for seconds, while those are answered in milliseconds. The run's own
percentiles blur it into a tail. arena-load keeps each kept-alive connection's own latencies
(results/load_result.py ConnectionSpread): found where the worst tenth of the connections, by their own
p99, sits ``least_ratio`` times above the others' median p99, or ``least_ratio_fastest`` times
above the fastest quarter's, and ``least_ms`` beyond it, over ``least_connections`` connections or
more that were kept alive (the group it is set against carried ``least_requests`` requests each at
the median: a server that closes every connection keeps none alive to be unfair with, and its slow
connections are another finding's, a full listen queue's), in most of a cell's runs. The fastest
quarter, because where more than half the connections are starved (452 connections of 200
clients, each reconnect waiting seconds) the others' median is a starved one too (6.3 s against
5.2 s, while the fastest quarter had 31 ms); against it a fair server's spread is wider, being the
maxima of a few draws each (an exponential's worst tenth sits 8 times above its fastest quarter at
two requests a connection, 3.3 times at nine), hence its own, larger ratio. Its cost at p99 is the
gap."""

from __future__ import annotations

from typing import Sequence

from arena.results.aggregate import Cell
from arena.results.why.finding import Evidence, Finding

KEY, NAME = "keepalive", "Keep-alive unfairness: some connections served before others"
SHOWN_IN = "each run's Connections line: the worst tenth against the others (arena show --runs)"  # where the report shows its evidence
THRESHOLDS = {"least_ratio": 4.0, "least_ratio_fastest": 50.0, "least_ms": 50.0, "least_connections": 10,
              "least_requests": 2}
REFERENCE = "https://github.com/puma/puma/issues/3487"
FIX = {  # by server: the change that avoids it
    "puma": "Puma 6.5 or later serves kept-alive connections in turn (puma#3506); on Puma 5, put nginx in front so "
            "Puma sees few, evenly used connections, or size the threads for the connections a process holds",
}
GENERAL = ("a server that takes kept-alive connections in turn, or a proxy in front that holds the clients' "
           "connections and keeps few to the server")


def _unfair(spread) -> tuple[str, float, float] | None:
    """The connections the worst tenth is unfair against, over enough connections: the others, else
    the fastest quarter (where kept), as (which, their median p99 in us, their requests per
    connection); None: fair, or too few to tell."""
    if spread.connections < THRESHOLDS["least_connections"]:
        return None
    groups = [("the others", spread.rest_p99_us, spread.rest_requests, THRESHOLDS["least_ratio"])]
    if spread.fastest_p99_us is not None:
        groups.append(("the fastest quarter", spread.fastest_p99_us, spread.fastest_requests,
                       THRESHOLDS["least_ratio_fastest"]))
    for which, p99_us, requests, ratio in groups:
        if (requests >= THRESHOLDS["least_requests"] and spread.worst_p99_us >= ratio * p99_us
                and spread.worst_p99_us - p99_us >= THRESHOLDS["least_ms"] * 1000):
            return which, p99_us, requests
    return None


def detect(cell: Cell, cells: Sequence[Cell]) -> Finding | None:
    spreads = [s for r in cell.valid_runs if r.figures and (s := r.figures.connection_spread) is not None]
    unfair = sorted(((s, first) for s in spreads if (first := _unfair(s))), key=lambda u: u[0].worst_p99_us)
    if not spreads or 2 * len(unfair) <= len(spreads):
        return None
    s, (which, first_p99_us, first_requests) = unfair[len(unfair) // 2]  # the median run of those showing it
    evidence = (Evidence("connections", s.connections, ""),
                Evidence("the worst tenth's own p99", s.worst_p99_us / 1000, "ms"),
                Evidence("those served first: median p99", first_p99_us / 1000, "ms"),
                Evidence("requests per connection, the worst tenth", s.worst_requests, ""),
                Evidence("those served first", first_requests, ""))
    return Finding(KEY, NAME, cell.label, cell.workload, cell.level_label, evidence, None,
                   (s.worst_p99_us - first_p99_us) / 1000, None,
                   f"measured: each kept-alive connection's own latencies (arena-load), in {len(unfair)} of "
                   f"{len(spreads)} runs; served first: {which}", REFERENCE, FIX.get(cell.server, GENERAL))
