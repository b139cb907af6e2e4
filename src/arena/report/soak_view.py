"""A soak's answer in sentences (results/soak.py computes it): each worker's growth per 1,000
requests with its interval, the processes that came and went, and, at the run's memory limit, when
the set reaches it and the max_requests that keeps it under."""

from __future__ import annotations

from arena.limits import memory_text
from arena.results.soak import PER, Soak
from arena.servers import catalog


def soak_lines(s: Soak) -> list[str]:
    head = (f"Soak of {s.label} at {s.level} over {s.window_s:.0f} s: the processes took {s.first_mib:.0f} MiB, "
            f"then {s.last_mib:.0f} MiB")
    head += f" (an invalid run: {s.flag})" if s.flag else ""
    told = [w for w in s.workers if w.growth is not None]
    if not told:
        return [head + "; too few samples to tell a worker's growth (at least 3 a worker: a longer soak, or a "
                       "shorter soak_every)."]
    lines = [head + f"; each worker grows {s.growth:.3g} MiB per {PER:,} requests (the median worker)."]
    for w in told:
        g, lo, hi = w.growth
        zero = " (not told apart from no growth)" if lo <= 0 <= hi else ""
        lines.append(f"  worker pid {w.pid}: {g:.3g} MiB per {PER:,} requests [{lo:.3g}, {hi:.3g}]{zero}, over "
                     f"{w.requests:,.0f} requests, {w.points[0][1]:.0f} -> {w.points[-1][1]:.0f} MiB PSS")
    if s.started or s.gone:
        lines.append(f"  the server started {s.started} process(es) during it and {s.gone} of those it began with "
                     "were gone by its end (a worker replaced: its max_requests, or an OOM kill)")
    to_limit, most = s.requests_to_limit(), s.max_requests()
    if to_limit is not None and most is not None:
        each = to_limit / max(1, len(s.workers))
        restart = (f"max_requests = {most} keeps them under it, a tenth spare" if "max_requests" in
                   catalog.options_for(catalog.get_server(s.server)) else
                   f"restarting each worker after about {most:,} requests keeps them under it, a tenth spare "
                   f"({s.server} has no max_requests of its own)")
        lines.append(f"  at its {memory_text(s.limit_mib)} limit: the processes' PSS reaches it after about "
                     f"{to_limit:,.0f} more requests (about {each:,.0f} a worker), when the kernel kills one (it "
                     f"charges their page cache too: sooner); {restart}")
    return lines
