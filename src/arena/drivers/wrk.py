"""wrk as a driver, to reproduce the studies that used it.

wrk is closed-loop only and measures each request from its own send (service time at the
concurrency). Its figures are read exactly through a Lua ``done()`` hook (wrk's documented
scripting API: the summary and latency.min/max/mean/stdev/percentile), not from the rounded text.
wrk cannot export its latency distribution, so the result carries wrk's own percentiles (wrk's
rank rule, not Arena's) and no HDR encoding, no per-second series, no connect time. Its error
classes are its own: connect, read, write, timeout; non-2xx/3xx answers are counted apart.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import tempfile
from pathlib import Path

from arena.drivers.external import failure, generator_fields, run_tool, with_warmup
from arena.drivers.spec import Capabilities, LoadSpec
from arena.results.load_result import PERCENTILES, Histogram, LoadResult, Phase
from arena.errors import ArenaError
from arena.servers.cgroup import owned_name

MARK = "ARENA-WRK-RESULT "

# Prints one JSON line after wrk's report. Latency values are microseconds.
DONE_SCRIPT = """
done = function(summary, latency, requests)
  local p = {}
  for _, q in ipairs({%s}) do
    p[#p + 1] = string.format('"%%s": %%d', q, latency:percentile(tonumber(q)))
  end
  local e = summary.errors
  io.write(string.format('%s{"duration_us": %%d, "requests": %%d, "bytes": %%d, ' ..
    '"errors": {"connect": %%d, "read": %%d, "write": %%d, "status": %%d, "timeout": %%d}, ' ..
    '"latency": {"min": %%d, "max": %%d, "mean": %%f, "stdev": %%f, "percentiles": {%%s}}}\\n',
    summary.duration, summary.requests, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.max, latency.mean, latency.stdev, table.concat(p, ", ")))
end
""" % (", ".join(f'"{name}"' for name, _ in PERCENTILES if name != "100"), MARK)  # wrk's percentile(100) is 0: max


CAPABILITIES = Capabilities("wrk", models=("closed",), bounds=("duration",), methods=("GET",), bodies=False,
                            keep_alive_off=False, live=False, server_timing=False, balance=False, hdr=False)


def build_argv(spec: LoadSpec, seconds: float, script: Path) -> list[str]:
    """Pure: wrk's command line for a closed run of ``seconds`` (wrk's -d is whole seconds)."""
    CAPABILITIES.check(spec)
    conns = spec.connections or 1
    argv = ["wrk", "-t", str(min(spec.threads, conns)), "-c", str(conns), "-d", f"{max(1, math.ceil(seconds))}s",
            "--timeout", f"{max(1, math.ceil(spec.timeout_s))}s", "-s", str(script)]
    for h in spec.headers:
        argv += ["-H", h]
    return argv + [spec.url]


def parse(stdout: str, *, url: str, connections: int, cpu_s: float | None, wall_s: float | None,
          config: dict) -> LoadResult:
    line = next((ln for ln in stdout.splitlines() if ln.startswith(MARK)), None)
    if line is None:
        last = stdout.strip().splitlines()[-1] if stdout.strip() else "no output"
        raise ArenaError(f"wrk: no result in its output ({last})")
    d = json.loads(line[len(MARK):])
    lat, errs = d["latency"], d["errors"]
    n = d["requests"]
    hist = Histogram(n, lat["min"] if n else None, lat["max"] if n else None, lat["mean"] if n else None,
                     lat["stdev"] if n else None, {**lat["percentiles"], "100": lat["max"]} if n else {}, None)
    duration = d["duration_us"] / 1e6
    # answers that are not 2xx/3xx are errors of class "status"; wrk's latencies include them
    errors = {k: errs[k] for k in ("connect", "read", "write", "timeout", "status")}
    ok = n - errs["status"]
    measured = Phase(
        duration_s=duration, issued=None, sent=None, completed=ok, errors=sum(errors.values()), unsent=None,
        in_flight=None, offered_rps=None, achieved_rps=ok / duration if duration else 0.0, status={},
        error_counts=errors, workers={}, bytes_sent=None, bytes_received=d["bytes"], response_time=hist,
        service_time=hist, connect_time=None, send_lag=None, server_timing={},
    )
    m = re.search(r"^wrk (?:debian/)?([\d.]+)", config.get("version", ""), re.M)
    return LoadResult(
        tool="wrk", tool_version=m.group(1) if m else None, model="closed", url=url, connections=connections,
        rate=None, interrupted=False, measured=measured, warmup=None, series=[], schedule_lag=None,
        **generator_fields("wrk", cpu_s, wall_s, n),
        config={**{k: v for k, v in config.items() if k != "version"}, "non_2xx_3xx": errs["status"]},
        raw={"tool": "wrk", "stdout": stdout},
    )


def run(spec: LoadSpec, cpus: list[int] | None = None) -> LoadResult:
    return with_warmup(spec, lambda sp, seconds: _run_once(sp, seconds or 10.0, cpus))


def _run_once(spec: LoadSpec, seconds: float, cpus: list[int] | None) -> LoadResult:
    with tempfile.TemporaryDirectory(prefix=owned_name("wrk") + "-") as tmp:  # reaped if Arena dies
        script = Path(tmp) / "done.lua"
        script.write_text(DONE_SCRIPT)
        argv = build_argv(spec, seconds, script)
        done = run_tool("wrk", argv, cpus=cpus, limit_s=max(1, math.ceil(seconds)) + spec.timeout_s + 30,
                        install="apt-get install -y wrk")
    if done.returncode != 0:
        raise failure("wrk", done)
    version = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout
    return parse(done.stdout, url=spec.url, connections=spec.connections or 1, cpu_s=done.cpu_s, wall_s=done.wall_s,
                 config={"driver": "wrk", "argv": argv, "version": version})
