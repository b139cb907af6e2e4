"""HAProxy as the balancer in front of a fleet of instances: its config (pure), its command, and
its request log read back (pure).

Each request is logged to its stdout (HAProxy's ``log stdout``), one line per request: when it was
accepted, the instance that served it, and its timers: Tw, the time it waited in HAProxy's queues
(for a free connection slot under ``maxconn``), Tc, connecting to the instance, Tr, the instance's
response time (to the response headers), Ta, the whole request; and its status. Per instance and for
the balancer, requests and queue time then come from the measured window's lines."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from dataclasses import dataclass
from pathlib import Path

from arena import stats
from arena.topology import Topology

CONFIG = "haproxy.cfg"
TIMEOUT_S = 300  # in the queue and to the instances: a run's own timeout decides, not the balancer's
# %tr: when the request was received, to the ms, in local time (HAProxy runs with TZ=UTC); not %Ts,
# which on a keep-alive connection is when the previous response ended
LOG_FORMAT = "%tr %s %Tw %Tc %Tr %Ta %ST"
LINE = re.compile(r"^(\S+) (\S+) (-?\d+) (-?\d+) (-?\d+) (-?\d+) (\d+)$")


def config(t: Topology, host: str, port: int, instances: list[str], workdir: Path, threads: int,
           max_connections: int) -> str:
    """Pure: haproxy.cfg for ``t``: listen on host:port, balance over ``instances`` ("127.0.0.1:8000"
    or a unix socket's absolute path), named i0, i1, ..., with ``threads`` threads, at most
    ``max_connections`` at once (each takes two file descriptors: max_connections(), below)."""
    limit = f" maxconn {t.maxconn}" if t.maxconn is not None else ""
    servers = "".join(f"    server i{n} {address}{limit}\n" for n, address in enumerate(instances))
    bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return (
        "# written by Arena\n"
        "global\n"
        f"    maxconn {max_connections}\n"
        f"    nbthread {threads}\n"
        f"    stats socket {workdir}/stats.sock mode 600 level admin\n"
        "    log stdout format raw local0 info\n"
        "defaults\n"
        "    mode http\n"
        "    log global\n"
        "    timeout connect 5s\n"
        f"    timeout client {TIMEOUT_S}s\n"
        f"    timeout server {TIMEOUT_S}s\n"
        f"    timeout queue {TIMEOUT_S}s\n"
        "    timeout http-keep-alive 75s\n"
        "frontend arena\n"
        f"    bind {bind}\n"
        f"    log-format \"{LOG_FORMAT}\"\n"
        "    default_backend instances\n"
        "backend instances\n"
        f"    balance {t.balance}\n"
        f"{servers}")


def max_connections(open_files: int) -> int:
    """Pure: the most client connections HAProxy can hold under a limit of ``open_files`` (a client's
    and an instance's descriptor each, and some to spare), at most 100000."""
    return max(1, min(100_000, (open_files - 100) // 2))


def argv(workdir: Path) -> list[str]:
    return ["haproxy", "-db", "-f", str(workdir / CONFIG)]


VERSION_ARGV = ["haproxy", "-v"]  # "HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/"
VERSION = r"version (\S+)"


@dataclass(frozen=True)
class Logged:
    received_s: float  # unix time
    instance: str  # i0, i1, ... ("<NOSRV>" when none served it)
    queue_ms: int  # Tw (-1: it never reached a queue)
    connect_ms: int
    response_ms: int
    total_ms: int
    status: int


def parse_log(text: str) -> list[Logged]:
    """Pure: the request lines of HAProxy's log (other lines are left out)."""
    out = []
    for line in text.splitlines():
        m = LINE.match(line.strip())
        if m:
            try:
                received = datetime.strptime(m[1], "%d/%b/%Y:%H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()
            except ValueError:
                continue
            out.append(Logged(received, m[2], int(m[3]), int(m[4]), int(m[5]), int(m[6]), int(m[7])))
    return out


def _mean(values: list[int]) -> float | None:
    return sum(values) / len(values) if values else None


def window_figures(lines: list[Logged], since: float, until: float, instances: int) -> dict:
    """Pure: requests received in [since, until) (unix times): per instance, how many it served, their
    mean queue time and mean response time (to the headers); for the balancer, the queue time's mean,
    p50, p99 and max (ms; of the requests that reached a queue: a timer of -1 is one not reached)."""
    inside = [x for x in lines if since <= x.received_s < until]
    waited = [x.queue_ms for x in inside if x.queue_ms >= 0]
    per = []
    for n in range(instances):
        mine = [x for x in inside if x.instance == f"i{n}"]
        per.append({"instance": f"i{n}", "requests": len(mine),
                    "queue_ms_mean": _mean([x.queue_ms for x in mine if x.queue_ms >= 0]),
                    "response_ms_mean": _mean([x.response_ms for x in mine if x.response_ms >= 0])})
    return {"requests": len(inside), "unserved": sum(1 for x in inside if not x.instance.startswith("i")),
            "queue_ms": {"mean": _mean(waited),
                         "p50": stats.quantile(waited, 0.5) if waited else None,
                         "p99": stats.quantile(waited, 0.99) if waited else None,
                         "max": max(waited, default=None)},
            "instances": per}
