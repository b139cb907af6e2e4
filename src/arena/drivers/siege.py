"""siege as a driver, to reproduce the studies that used it.

siege is closed-loop (``-c`` users, ``-b``: no delay between requests). Its figures come from its
JSON summary (``-j``): transactions, elapsed time, the mean, shortest and longest response time (in
seconds with two decimals: 10 ms resolution), failures. It gives no percentiles and no per-request
record, so those stay empty. siege gets its own HOME (it writes $HOME/.siege on first run) and an rc
file that sets keep-alive or close and turns its log file off.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from pathlib import Path

from arena.drivers.external import failure, generator_fields, run_tool, with_warmup
from arena.drivers.spec import Capabilities, LoadSpec
from arena.results.load_result import Histogram, LoadResult, Phase
from arena.errors import ArenaError
from arena.servers.cgroup import owned_name

RC = """verbose = false
json_output = true
benchmark = true
protocol = HTTP/1.1
connection = {connection}
timeout = {timeout}
logging = false
show-logfile = false
"""


CAPABILITIES = Capabilities("siege", models=("closed",), bounds=("duration", "requests"), methods=("GET",), bodies=False,
                            keep_alive_off=True, live=False, server_timing=False, balance=False, hdr=False)


def build_argv(spec: LoadSpec, seconds: float | None, rc: Path) -> list[str]:
    """Pure: siege's command line: for ``seconds`` (its -t, whole seconds here: NS), or, with none, for
    the spec's requests (-r: repetitions per user, so the requests rounded up to a multiple of the users)."""
    CAPABILITIES.check(spec)
    users = spec.connections or 1
    bound = (["-t", f"{max(1, math.ceil(seconds))}S"] if seconds is not None
             else ["-r", str(math.ceil((spec.requests or users) / users))])
    argv = ["siege", "-R", str(rc), "-b", "-j", "-c", str(users), *bound]
    for h in spec.headers:
        argv += ["-H", h]
    return argv + [spec.url]


def parse(stdout: str, *, url: str, connections: int, cpu_s: float | None, wall_s: float | None,
          config: dict) -> LoadResult:
    start = stdout.find("{")
    try:
        d = json.loads(stdout[start:stdout.rindex("}") + 1]) if start >= 0 else None
    except ValueError:
        d = None
    if not d or "transactions" not in d:
        last = stdout.strip().splitlines()[-1] if stdout.strip() else "no output"
        raise ArenaError(f"siege: no result in its output ({last})")
    n, us = d["transactions"], lambda s: round(s * 1e6)
    rt = Histogram(n, us(d["shortest_transaction"]) if n else None, us(d["longest_transaction"]) if n else None,
                   us(d["response_time"]) if n else None, None, {}, None)
    measured = Phase(
        duration_s=d["elapsed_time"], issued=None, sent=None, completed=d["successful_transactions"],
        errors=d["failed_transactions"], unsent=None, in_flight=None, offered_rps=None,
        achieved_rps=d["transaction_rate"], status={}, error_counts={"failed": d["failed_transactions"]}, workers={},
        bytes_sent=None, bytes_received=round(d["data_transferred"] * 2**20), response_time=rt, service_time=rt,
        connect_time=None, send_lag=None, server_timing={},
    )
    return LoadResult(
        tool="siege", tool_version=config.get("version"), model="closed", url=url, connections=connections, rate=None,
        interrupted=False, measured=measured, warmup=None, series=[], schedule_lag=None,
        **generator_fields("siege", cpu_s, wall_s, n),
        config={k: v for k, v in config.items() if k != "version"}, raw={"tool": "siege", "summary": d},
    )


def run(spec: LoadSpec, cpus: list[int] | None = None) -> LoadResult:
    return with_warmup(spec, lambda sp, seconds: _run_once(sp, seconds, cpus))


def _run_once(spec: LoadSpec, seconds: float | None, cpus: list[int] | None) -> LoadResult:
    if seconds is None and spec.requests is None:
        seconds = 10.0
    with tempfile.TemporaryDirectory(prefix=owned_name("siege") + "-") as home:  # reaped if Arena dies
        rc = Path(home) / "siegerc"
        rc.write_text(RC.format(connection="keep-alive" if spec.keep_alive else "close",
                                timeout=max(1, math.ceil(spec.timeout_s))))
        argv = build_argv(spec, seconds, rc)
        env = {**os.environ, "HOME": home}  # siege writes $HOME/.siege
        # a request-bounded run: each user's repetition may take up to the timeout; past that, siege is
        # stopped (SIGINT: it prints its report) and the run answered fewer requests than asked
        stop_s = None if seconds is not None else request_bound_s(spec)
        most_s = seconds if seconds is not None else stop_s
        done = run_tool("siege", argv, cpus=cpus, limit_s=max(1, math.ceil(most_s)) + spec.timeout_s + 30,
                        install="apt-get install -y siege", env=env, stop_s=stop_s)
        version = subprocess.run(["siege", "-V"], capture_output=True, text=True, env=env)
    if done.returncode not in (0, 255) and "{" not in done.stdout:
        raise failure("siege", done)
    v = (version.stdout + version.stderr).split()
    config = {"driver": "siege", "argv": argv, "version": v[1] if len(v) > 1 else None}
    if done.stopped:
        config["stopped_at_s"] = stop_s
    return parse(done.stdout, url=spec.url, connections=spec.connections or 1, cpu_s=done.cpu_s, wall_s=done.wall_s,
                 config=config)


def request_bound_s(spec: LoadSpec) -> float:
    """How long a request-bounded siege run may take: each user's repetitions, a timeout each."""
    return math.ceil((spec.requests or 1) / (spec.connections or 1)) * spec.timeout_s
