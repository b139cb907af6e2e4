"""The native driver: runs arena-load (crates/arena-load) on the load CPUs, validates its JSON
against schemas/load-result.schema.json and returns a LoadResult."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from arena import paths
from arena.drivers.external import child_setup
from arena.results.load_result import ConnectionSpread, Histogram, LoadResult, Phase, SeriesPoint, Streams
from arena.drivers.spec import Capabilities, LoadSpec
from arena.results.run_setup import ARRIVALS, SCHEDULE
from arena.errors import ArenaError, DriverFailed, Terminated, forking, stop_if_asked
from arena.servers.cgroup import owned_name

SCHEMA = paths.schema("load-result.schema.json")


EXIT_WITH_RESULT = (0, 1, 130)  # arena-load's exit statuses that come with a result file


def binary() -> Path:
    """$ARENA_LOAD_BIN, else the checkout's build, else arena-load on PATH (cargo install)."""
    path = paths.built("arena-load", "ARENA_LOAD_BIN") or paths.CHECKOUT / "target" / "release" / "arena-load"
    if not os.access(path, os.X_OK):
        raise ArenaError(f"arena-load: no binary at {path}; build it with `make build` (or `cargo install --locked "
                         "--path crates/arena-load`, or set ARENA_LOAD_BIN)")
    return path


CAPABILITIES = Capabilities("arena-load", models=("closed", "open"), bounds=("duration", "requests"),
                            methods=("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"), bodies=True,
                            keep_alive_off=True, live=True, server_timing=True, balance=True, hdr=True,
                            expect_status=True, mixes=True, link=True, arrivals=(*ARRIVALS, SCHEDULE))


def build_argv(spec: LoadSpec, exe: Path, output: Path, mix_json: Path | None = None,
               schedule_txt: Path | None = None) -> list[str]:
    """Pure: the arena-load command line for ``spec``; its mix (if any) written as ``mix_json``, its
    schedule (if any) as ``schedule_txt``."""
    argv = [str(exe), spec.url, "-o", str(output), "--warmup", f"{spec.warmup_s}s", "-t", str(spec.threads),
            "-m", spec.method, "--connect-timeout", f"{spec.connect_timeout_s}s", "--timeout", f"{spec.timeout_s}s",
            "--interval", f"{spec.interval_s}s", "--seed", str(spec.seed)]
    duration = spec.duration_s if spec.duration_s is not None or spec.requests is not None else 10.0
    if duration is not None:
        argv += ["-d", f"{duration}s"]
    if spec.requests is not None:
        argv += ["-n", str(spec.requests)]
    if spec.connections is not None:
        argv += ["-c", str(spec.connections)]
    if spec.schedule is not None:
        argv += ["--schedule", str(schedule_txt)]
    elif spec.rate is not None:
        argv += ["-r", str(spec.rate), "--arrival", spec.arrival]
    elif spec.think_ms:
        argv += ["--think", f"{spec.think_ms}ms"]
    for h in spec.headers:
        argv += ["-H", h]
    if spec.body is not None:
        argv += ["--body", spec.body]
    if spec.mix is not None:
        argv += ["--mix", str(mix_json)]
    if spec.expect_status is not None:
        argv += ["--expect-status", spec.expect_status]
    if spec.start_at is not None:
        argv += ["--start-at", f"{spec.start_at:.6f}"]
    if spec.events is not None:
        argv += ["--events", str(spec.events)]
    if spec.delay_s:
        argv += ["--delay", f"{spec.delay_s * 1e6:.0f}us"]
    argv += [a for flag, bps in (("--upload", spec.upload_bps), ("--download", spec.download_bps)) if bps
             for a in (flag, str(bps))]
    argv += [flag for flag, on in (("--no-keepalive", not spec.keep_alive), ("--request-start", spec.request_start),
                                   ("--allow-remote", spec.allow_remote)) if on]
    return argv


def run(spec: LoadSpec, cpus: list[int] | None = None, live: Callable[[SeriesPoint], None] | None = None,
        started: Callable[[subprocess.Popen], None] | None = None) -> LoadResult:
    """Run arena-load pinned to ``cpus`` and return its result; ``live`` gets each interval of the
    series as soon as arena-load has it (``--live``: one JSON line per interval on its stderr);
    ``started`` gets its process as soon as it runs (a load host's, to be stopped by its pid).

    If Arena is interrupted meanwhile (Ctrl-C, which arena-load also receives, or SIGTERM), arena-load
    is asked to stop, its partial result is still read and returned with ``interrupted`` set; a
    second interruption kills it. The request to stop is SIGTERM: after a terminal's Ctrl-C
    arena-load's one-shot SIGINT handler is spent, and another SIGINT would kill it unwritten."""
    exe = binary()
    with tempfile.TemporaryDirectory(prefix=owned_name("load") + "-") as tmp:  # reaped if Arena dies
        out, mix_json, schedule_txt = Path(tmp) / "result.json", Path(tmp) / "mix.json", Path(tmp) / "schedule.txt"
        if spec.mix is not None:
            mix_json.write_text(json.dumps(spec.mix.arena_load()))
        if spec.schedule is not None:
            schedule_txt.write_text("".join(f"{t:.6f}\n" for t in spec.schedule))
        argv = build_argv(spec, exe, out, mix_json, schedule_txt) + (["--live"] if live else [])
        with forking():
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    preexec_fn=child_setup(cpus))
        if started is not None:
            started(proc)
        messages: list[str] = []
        reader = threading.Thread(target=_read_stderr, args=(proc.stderr, live, messages), daemon=True)
        reader.start()
        stopped_by: BaseException | None = None
        try:
            stop_if_asked()  # a signal during the fork (errors.forking): stop arena-load as below
            proc.wait()
        except BaseException as e:
            stopped_by = e
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait()
            except BaseException:
                proc.kill()
                proc.wait()
                raise
        reader.join()
        if isinstance(stopped_by, Terminated):
            raise stopped_by  # SIGTERM ends Arena (exit 143): the partial result is not wanted
        # 0: valid; 1: invalid, and 130: interrupted, both with their result written (Arena judges
        # the run itself); anything else: no result
        if proc.returncode not in EXIT_WITH_RESULT or not out.exists():
            errors = [m for m in messages if m.startswith("arena-load: error: ")] or messages
            if proc.returncode < 0:  # killed: whatever it said before is not why
                raise DriverFailed(f"arena-load was killed by {signal.Signals(-proc.returncode).name} "
                                   "during the run: no result")
            raise ArenaError(errors[-1].removeprefix("arena-load: error: ") if errors
                             else f"arena-load exited {proc.returncode}")
        doc = json.loads(out.read_text())
    validate(doc)
    result = parse(doc)
    if stopped_by is not None and not result.interrupted:
        # Ctrl-C reached Arena while arena-load was already past its window (it wrote a whole result):
        # the user still asked to stop; never swallow it
        raise stopped_by
    return result


def _read_stderr(stream, live: Callable[[SeriesPoint], None] | None, messages: list[str]) -> None:
    """arena-load's stderr: live series points (JSON lines) to ``live``, anything else kept."""
    for raw in stream:
        line = raw.decode("utf-8", "replace").strip()
        if live and line.startswith("{"):
            try:
                live(SeriesPoint.of(json.loads(line)))
                continue
            except (ValueError, TypeError):
                pass
        if line:
            messages.append(line)
    stream.close()


@lru_cache(maxsize=1)
def _validator():
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    return jsonschema.Draft202012Validator(schema)


def validate(doc: dict[str, Any]) -> None:
    errors = sorted(_validator().iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        where = "/".join(map(str, e.path)) or "(top)"
        raise ArenaError(f"arena-load result: {where}: {e.message} ({len(errors)} schema errors)")


def _phase(p: dict[str, Any]) -> Phase:
    lat = p["latency"]
    return Phase(
        duration_s=p["duration_s"], issued=p["requests"]["issued"], sent=p["requests"]["sent"],
        completed=p["requests"]["completed"], errors=p["requests"]["errors"], unsent=p["requests"]["unsent"],
        in_flight=p["requests"]["in_flight"], offered_rps=p["rate"]["offered_rps"], achieved_rps=p["rate"]["achieved_rps"],
        status={int(k): v for k, v in p["status"].items()}, error_counts=dict(p["errors"]),
        workers={int(k): v for k, v in p["workers"].items()}, bytes_sent=p["bytes"]["sent"],
        bytes_received=p["bytes"]["received"], response_time=Histogram.from_json(lat["response_time"]),
        service_time=Histogram.from_json(lat["service_time"]), connect_time=Histogram.from_json(lat["connect_time"]),
        send_lag=Histogram.from_json(lat["send_lag"]),
        server_timing={k: Histogram.from_json(v) for k, v in p["server_timing"].items()},
        server_timing_dropped=p["server_timing_dropped"], streams=Streams.of(p.get("streams"), Histogram.from_json),
    )


def parse(doc: dict[str, Any]) -> LoadResult:
    """A validated arena-load document -> LoadResult."""
    g, c = doc["generator"], doc["config"]
    return LoadResult(
        tool="arena-load", tool_version=doc["tool"]["version"], model=c["model"], url=c["url"],
        connections=c["connections"], rate=c["rate"], interrupted=doc["interrupted"], measured=_phase(doc["measured"]),
        warmup=_phase(doc["warmup"]) if doc["warmup"] else None,
        series=[SeriesPoint.of(p) for p in doc["series"]],
        generator_cpu_s=g["cpu_user_s"] + g["cpu_system_s"], generator_utilization=g["utilization"],
        cpu_per_request_us=g["cpu_per_request_us"],
        schedule_lag=Histogram.from_json(g["schedule_lag"]) if g["schedule_lag"] else None,
        saturated=g["saturated"], saturation_reasons=list(g["saturation_reasons"]), config=c, raw=doc,
        open_failure=g["open_failure"], generator_paused_ms=g.get("paused_ms"),
        generator_pause_limit_ms=g.get("pause_limit_ms"),
        connection_spread=ConnectionSpread.of(doc.get("per_connection")),
    )
