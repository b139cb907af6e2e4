"""What the drivers of the studies' own tools (ab, wrk, siege, JMeter) share: running the tool
pinned to the load CPUs with its own CPU time and a hard time limit, a warm-up as a separate
discarded run, the generator fields of a LoadResult, and histograms and per-second series from a
tool's per-request record (ab's -g file, JMeter's JTL)."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from arena.drivers.spec import LoadSpec
from arena.results.load_result import Histogram, LoadResult, SeriesPoint
from arena.errors import ArenaError, forking, stop_if_asked
from arena.servers.cgroup import die_with_parent
from arena.stats import quantile

SATURATED_UTILIZATION = 0.9  # as arena-load's own rule


def child_setup(cpus: list[int] | None) -> Callable[[], None]:
    """Between fork and exec of a load generator: pin it to ``cpus`` and have it stopped if Arena
    dies (it must not outlive a killed Arena)."""
    def setup() -> None:
        if cpus:
            os.sched_setaffinity(0, cpus)
        die_with_parent()

    return setup


@dataclass
class ToolRun:
    stdout: str
    stderr: str
    returncode: int
    cpu_s: float  # the tool's user + system CPU
    wall_s: float
    stopped: bool = False  # asked to stop (SIGINT) at its stop time: its output is what it had done


def run_tool(tool: str, argv: list[str], *, cpus: list[int] | None, limit_s: float, install: str,
             env: dict[str, str] | None = None, cwd: str | None = None, stop_s: float | None = None) -> ToolRun:
    """Run ``argv`` pinned to ``cpus``; kill it if it outlives ``limit_s`` or Arena is interrupted.
    With ``stop_s``: a tool still running then gets SIGINT, Ctrl-C's signal, on which it stops and
    prints what it has done (siege's report), until ``limit_s``."""
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()  # its own CPU, by difference
    try:
        with forking():
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                                    cwd=cwd, preexec_fn=child_setup(cpus))
    except FileNotFoundError:
        raise ArenaError(f"driver = \"{tool}\": {tool} is not installed ({install})") from None
    stopped = False
    try:
        try:
            stop_if_asked()  # a signal during the fork (errors.forking): the tool is killed below
            out, err = proc.communicate(timeout=limit_s if stop_s is None else stop_s)
        except subprocess.TimeoutExpired:
            if stop_s is None:
                raise
            proc.send_signal(signal.SIGINT)
            stopped = True
            out, err = proc.communicate(timeout=max(1.0, limit_s - stop_s))
    except BaseException as e:
        proc.kill()
        proc.communicate()
        if isinstance(e, subprocess.TimeoutExpired):
            raise ArenaError(f"{tool}: still running after {limit_s:.0f} s, past its own time limit; killed") from None
        raise
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return ToolRun(out.decode(errors="replace"), err.decode(errors="replace"), proc.returncode, cpu,
                   time.monotonic() - t0, stopped)


def failure(tool: str, run: ToolRun) -> ArenaError:
    lines = (run.stderr.strip() or run.stdout.strip()).splitlines()
    return ArenaError(f"{tool}: {lines[-1] if lines else f'exited with {run.returncode}'}")


def with_warmup(spec: LoadSpec, once: Callable[[LoadSpec, float | None], LoadResult]) -> LoadResult:
    """The tool has no warm-up of its own: a separate run of ``spec.warmup_s`` first, discarded."""
    if spec.warmup_s > 0:
        once(spec, spec.warmup_s)
    return once(spec, spec.duration_s if spec.requests is None else None)


def generator_fields(tool: str, cpu_s: float | None, wall_s: float | None, completed: int) -> dict:
    """LoadResult's generator fields from the tool's CPU time (None when unknown)."""
    util = cpu_s / wall_s if cpu_s is not None and wall_s else None
    busy = util is not None and util > SATURATED_UTILIZATION
    return {
        "generator_cpu_s": cpu_s, "generator_utilization": util,
        "cpu_per_request_us": cpu_s * 1e6 / completed if cpu_s is not None and completed else None,
        "saturated": None if util is None else busy,
        "saturation_reasons": [f"{tool} CPU {util:.0%} busy"] if busy else [],
    }


def histogram(values_us: Iterable[int]) -> Histogram:
    """An HDR histogram (1 us .. 1 h, 3 significant digits) of a tool's per-request times."""
    from hdrh.histogram import HdrHistogram

    h = HdrHistogram(1, 3_600_000_000, 3)
    for v in values_us:
        h.record_value(max(1, v))
    return Histogram.of_hdr(h)


def per_second(records: Iterable[tuple[float, int, bool]]) -> list[SeriesPoint]:
    """(seconds since the run began, response time in us, failed) per request -> one point per second
    of the requests that started in it."""
    seconds: dict[int, list[tuple[int, bool]]] = {}
    for t, us, failed in records:
        seconds.setdefault(int(t), []).append((us, failed))
    series = []
    for second in sorted(seconds):
        vals = sorted(us for us, _ in seconds[second])
        series.append(SeriesPoint(float(second), None, len(vals), sum(f for _, f in seconds[second]),
                                  quantile(vals, 0.5), quantile(vals, 0.9), quantile(vals, 0.99), vals[-1]))
    return series
