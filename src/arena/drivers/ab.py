"""ApacheBench (ab) as a driver, to reproduce the studies that used it.

ab has only the closed model and no warm-up: a warm-up is a separate ab run whose result is
discarded. Its time limit is in whole seconds, so durations are rounded up. Latency comes from ab's own per-request record (``-g``: start time, connect, total,
in whole milliseconds), so the histograms hold ab's data at ab's resolution; percentiles use
Arena's one definition. What ab cannot give stays empty: per-status counts (ab counts only
non-2xx), Server-Timing, per-process balance, service time apart from response time.
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path

from arena.drivers.external import failure, generator_fields, histogram, per_second, run_tool, with_warmup
from arena.drivers.spec import Capabilities, LoadSpec
from arena.results.load_result import LoadResult, Phase
from arena.errors import ArenaError
from arena.servers.cgroup import owned_name

CAPABILITIES = Capabilities("ab", models=("closed",), bounds=("duration", "requests"), methods=("GET", "HEAD"),
                            bodies=False, keep_alive_off=True, live=False, server_timing=False, balance=False, hdr=True)
MAX_REQUESTS = 50_000_000  # ab needs -n with -t; the time limit ends the run first


def build_argv(spec: LoadSpec, seconds: float | None, gnuplot: Path) -> list[str]:
    """Pure: ab's command line for a closed run of ``seconds`` (or spec.requests requests)."""
    CAPABILITIES.check(spec)
    argv = ["ab", "-q", "-r", "-c", str(spec.connections or 1), "-s", str(max(1, round(spec.timeout_s))),
            "-g", str(gnuplot)]
    if spec.keep_alive:
        argv.append("-k")
    if seconds is not None:
        # ab's -t is whole seconds (and 0 would mean no limit): round up, at least 1
        argv += ["-t", str(max(1, math.ceil(seconds))), "-n", str(spec.requests or MAX_REQUESTS)]
    else:
        argv += ["-n", str(spec.requests)]
    for h in spec.headers:
        argv += ["-H", h]
    if spec.method == "HEAD":
        argv.append("-i")
    return argv + [spec.url if spec.url.count("/") > 2 else spec.url + "/"]


def _field(text: str, label: str, cast=float):
    m = re.search(rf"^{re.escape(label)}:\s+([0-9.]+)", text, re.M)
    return cast(m.group(1)) if m else None


def parse(stdout: str, gnuplot_tsv: str, *, url: str, connections: int, cpu_s: float | None,
          wall_s: float | None, config: dict) -> LoadResult:
    """ab's report and its -g file -> LoadResult."""
    complete = _field(stdout, "Complete requests", int)
    if complete is None:
        raise ArenaError(f"ab: no result in its output: {stdout.strip().splitlines()[-1] if stdout.strip() else 'empty'}")
    failed = re.search(r"^Failed requests:\s+(\d+)(?:\s*\n\s+\(Connect: (\d+), Receive: (\d+), Length: (\d+), "
                       r"Exceptions: (\d+)\))?", stdout, re.M)
    connect_err, receive_err, _length, exceptions = (int(g) if g else 0 for g in (failed.groups()[1:] if failed else (0,) * 4))
    non2xx = _field(stdout, "Non-2xx responses", int) or 0
    duration = _field(stdout, "Time taken for tests") or 0.0
    rps = _field(stdout, "Requests per second") or 0.0
    sent_bytes = _field(stdout, "Total body sent", int)

    rows = [line.split("\t") for line in gnuplot_tsv.splitlines()[1:] if line.strip()]
    t0 = min((int(r[1]) for r in rows), default=0)
    # starttime  seconds  ctime  dtime  ttime  wait  (milliseconds); ab counts no failure per request
    series = per_second((int(r[1]) - t0, int(r[4]) * 1000, False) for r in rows)
    # ab's own classes: it cannot tell a refused connection from a reset (both land in receive or
    # exceptions), so they are kept as ab reports them. Length mismatches (a body whose length
    # differs from the first) are not errors for dynamic bodies: reported, not counted.
    # Answers that are not 2xx are errors of class "status" (ab cannot tell 3xx from 4xx): they are
    # in ab's complete count and its latencies, which cannot be split.
    errors = {"connect": connect_err, "receive": receive_err, "exceptions": exceptions, "status": non2xx}
    rt = histogram(int(r[4]) * 1000 for r in rows)
    measured = Phase(
        duration_s=duration, issued=None, sent=None, completed=complete - non2xx, errors=sum(errors.values()), unsent=None,
        in_flight=None, offered_rps=None, achieved_rps=rps, status={}, error_counts=errors, workers={},
        bytes_sent=sent_bytes, bytes_received=_field(stdout, "Total transferred", int), response_time=rt,
        service_time=rt, connect_time=histogram(int(r[2]) * 1000 for r in rows), send_lag=None, server_timing={},
    )
    return LoadResult(
        tool="ab", tool_version=_version(stdout), model="closed", url=url, connections=connections, rate=None,
        interrupted=False, measured=measured, warmup=None, series=series, schedule_lag=None,
        **generator_fields("ab", cpu_s, wall_s, complete),
        config={**config, "non_2xx": non2xx, "length_mismatches": _length},
        raw={"tool": "ab", "stdout": stdout},
    )


def _version(stdout: str) -> str | None:
    m = re.search(r"ApacheBench, Version ([\w.<>$-]+)", stdout)
    return m.group(1) if m else None


def run(spec: LoadSpec, cpus: list[int] | None = None) -> LoadResult:
    return with_warmup(spec, lambda sp, seconds: _run_once(sp, seconds, cpus))


def _run_once(spec: LoadSpec, seconds: float | None, cpus: list[int] | None) -> LoadResult:
    with tempfile.TemporaryDirectory(prefix=owned_name("ab") + "-") as tmp:  # reaped if Arena dies
        gnuplot = Path(tmp) / "requests.tsv"
        argv = build_argv(spec, seconds, gnuplot)
        limit = (max(1, math.ceil(seconds)) if seconds is not None else 3600) + spec.timeout_s + 30
        done = run_tool("ab", argv, cpus=cpus, limit_s=limit, install="apt-get install -y apache2-utils")
        if done.returncode != 0:
            raise failure("ab", done)
        tsv = gnuplot.read_text() if gnuplot.exists() else ""
    return parse(done.stdout, tsv, url=spec.url, connections=spec.connections or 1, cpu_s=done.cpu_s,
                 wall_s=done.wall_s, config={"driver": "ab", "argv": argv})
