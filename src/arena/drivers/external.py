"""What the drivers of the studies' own tools (ab, wrk, siege) share: running the tool pinned to
the load CPUs with its own CPU time and a hard time limit, a warm-up as a separate discarded run,
and the generator fields of a LoadResult."""

from __future__ import annotations

import os
import resource
import subprocess
import time
from dataclasses import dataclass
from typing import Callable

from arena.drivers.native import LoadSpec
from arena.drivers.result import LoadResult
from arena.errors import ArenaError

SATURATED_UTILIZATION = 0.9  # as arena-load's own rule


@dataclass
class ToolRun:
    stdout: str
    stderr: str
    returncode: int
    cpu_s: float  # the tool's user + system CPU
    wall_s: float


def run_tool(tool: str, argv: list[str], *, cpus: list[int] | None, limit_s: float, install: str,
             env: dict[str, str] | None = None) -> ToolRun:
    """Run ``argv`` pinned to ``cpus``; kill it if it outlives ``limit_s`` or Arena is interrupted."""
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()  # its own CPU, by difference
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                                preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    except FileNotFoundError:
        raise ArenaError(f"driver = \"{tool}\": {tool} is not installed ({install})") from None
    try:
        out, err = proc.communicate(timeout=limit_s)
    except BaseException as e:
        proc.kill()
        proc.communicate()
        if isinstance(e, subprocess.TimeoutExpired):
            raise ArenaError(f"{tool}: still running after {limit_s:.0f} s, past its own time limit; killed") from None
        raise
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return ToolRun(out.decode(errors="replace"), err.decode(errors="replace"), proc.returncode, cpu,
                   time.monotonic() - t0)


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
