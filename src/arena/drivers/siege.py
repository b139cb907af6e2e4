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
import resource
import subprocess
import tempfile
import time
from pathlib import Path

from arena.drivers.native import LoadSpec
from arena.drivers.result import Histogram, LoadResult, Phase
from arena.errors import ArenaError

RC = """verbose = false
json_output = true
benchmark = true
protocol = HTTP/1.1
connection = {connection}
logging = false
show-logfile = false
"""


def build_argv(spec: LoadSpec, seconds: float, rc: Path) -> list[str]:
    """Pure: siege's command line (its -t is whole seconds here: NS)."""
    if spec.rate is not None:
        raise ArenaError("driver = \"siege\": siege has only the closed model (load.model = \"closed\")")
    if spec.requests is not None:
        raise ArenaError("driver = \"siege\": this driver runs for a duration, not a request count (use duration)")
    if spec.method != "GET":
        raise ArenaError("driver = \"siege\": this driver sends GET requests only")
    argv = ["siege", "-R", str(rc), "-b", "-j", "-c", str(spec.connections or 1), "-t", f"{max(1, math.ceil(seconds))}S"]
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
    util = cpu_s / wall_s if cpu_s is not None and wall_s else None
    return LoadResult(
        tool="siege", tool_version=config.get("version"), model="closed", url=url, connections=connections, rate=None,
        interrupted=False, measured=measured, warmup=None, series=[], generator_cpu_s=cpu_s, generator_utilization=util,
        cpu_per_request_us=cpu_s * 1e6 / n if cpu_s is not None and n else None, schedule_lag=None,
        saturated=None if util is None else util > 0.9,
        saturation_reasons=[f"siege CPU {util:.0%} busy"] if util is not None and util > 0.9 else [],
        config={k: v for k, v in config.items() if k != "version"}, raw={"tool": "siege", "summary": d},
    )


def run(spec: LoadSpec, cpus: list[int] | None = None) -> LoadResult:
    """Warm-up run (discarded), then the measured run, each pinned to ``cpus``."""
    if spec.warmup_s > 0:
        _run_once(spec, spec.warmup_s, cpus)
    return _run_once(spec, spec.duration_s or 10.0, cpus)


def _run_once(spec: LoadSpec, seconds: float, cpus: list[int] | None) -> LoadResult:
    with tempfile.TemporaryDirectory(prefix="arena-siege-") as home:
        rc = Path(home) / "siegerc"
        rc.write_text(RC.format(connection="keep-alive" if spec.keep_alive else "close"))
        argv = build_argv(spec, seconds, rc)
        env = {**os.environ, "HOME": home}
        before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()  # siege's own CPU, by difference
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                    env=env, preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        except FileNotFoundError:
            raise ArenaError("driver = \"siege\": siege is not installed (apt-get install -y siege)") from None
        limit = max(1, math.ceil(seconds)) + spec.timeout_s + 30
        try:
            out, err = proc.communicate(timeout=limit)
        except BaseException as e:  # overran its own limits, or Arena was interrupted: end it
            proc.kill()
            proc.communicate()
            if isinstance(e, subprocess.TimeoutExpired):
                raise ArenaError(f"siege: still running {limit:.0f} s after its time limit; killed") from None
            raise
        after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic() - t0
        version = subprocess.run(["siege", "-V"], capture_output=True, text=True, env=env)
    if proc.returncode not in (0, 255) and not out.strip():
        raise ArenaError(f"siege: {err.decode(errors='replace').strip().splitlines()[-1] if err.strip() else proc.returncode}")
    v = (version.stdout + version.stderr).split()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return parse(out.decode(errors="replace"), url=spec.url, connections=spec.connections or 1, cpu_s=cpu, wall_s=wall,
                 config={"driver": "siege", "argv": argv, "version": v[1] if len(v) > 1 else None})
