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

from arena.drivers.result import Histogram, LoadResult, Phase, SeriesPoint
from arena.drivers.spec import Capabilities, LoadSpec
from arena.errors import ArenaError

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "schemas" / "load-result.schema.json"


def binary() -> Path:
    path = Path(os.environ.get("ARENA_LOAD_BIN", ROOT / "target" / "release" / "arena-load"))
    if not os.access(path, os.X_OK):
        raise ArenaError(f"arena-load: no binary at {path}; build it with `make build`")
    return path


CAPABILITIES = Capabilities("arena-load", models=("closed", "open"), bounds=("duration", "requests"),
                            methods=("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"), bodies=True,
                            keep_alive_off=True, live=True, server_timing=True, balance=True, hdr=True)


def build_argv(spec: LoadSpec, exe: Path, output: Path) -> list[str]:
    """Pure: the arena-load command line for ``spec``."""
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
    if spec.rate is not None:
        argv += ["-r", str(spec.rate), "--arrival", spec.arrival]
    elif spec.think_ms:
        argv += ["--think", f"{spec.think_ms}ms"]
    for h in spec.headers:
        argv += ["-H", h]
    if spec.body is not None:
        argv += ["--body", spec.body]
    if spec.mix_file is not None:
        argv += ["--mix", spec.mix_file]
    argv += [flag for flag, on in (("--no-keepalive", not spec.keep_alive), ("--request-start", spec.request_start),
                                   ("--allow-remote", spec.allow_remote)) if on]
    return argv


def run(spec: LoadSpec, cpus: list[int] | None = None,
        live: Callable[[SeriesPoint], None] | None = None) -> LoadResult:
    """Run arena-load pinned to ``cpus`` and return its result; ``live`` gets each interval of the
    series as soon as arena-load has it (``--live``: one JSON line per interval on its stderr).

    If Arena is interrupted meanwhile (Ctrl-C, which arena-load also receives, or SIGTERM), arena-load
    is asked to stop, its partial result is still read and returned with ``interrupted`` set; a
    second interruption kills it. The request to stop is SIGTERM: after a terminal's Ctrl-C
    arena-load's one-shot SIGINT handler is spent, and another SIGINT would kill it unwritten."""
    exe = binary()
    with tempfile.TemporaryDirectory(prefix="arena-load-") as tmp:
        out = Path(tmp) / "result.json"
        argv = build_argv(spec, exe, out) + (["--live"] if live else [])
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        messages: list[str] = []
        reader = threading.Thread(target=_read_stderr, args=(proc.stderr, live, messages), daemon=True)
        reader.start()
        try:
            proc.wait()
        except BaseException:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait()
            except BaseException:
                proc.kill()
                proc.wait()
                raise
        reader.join()
        if proc.returncode != 0:
            raise ArenaError(messages[-1].removeprefix("arena-load: error: ") if messages
                             else f"arena-load exited {proc.returncode}")
        doc = json.loads(out.read_text())
    validate(doc)
    return parse(doc)


def _read_stderr(stream, live: Callable[[SeriesPoint], None] | None, messages: list[str]) -> None:
    """arena-load's stderr: live series points (JSON lines) to ``live``, anything else kept."""
    for raw in stream:
        line = raw.decode("utf-8", "replace").strip()
        if live and line.startswith("{"):
            try:
                live(SeriesPoint(**json.loads(line)))
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
    )


def parse(doc: dict[str, Any]) -> LoadResult:
    """A validated arena-load document -> LoadResult."""
    g, c = doc["generator"], doc["config"]
    return LoadResult(
        tool="arena-load", tool_version=doc["tool"]["version"], model=c["model"], url=c["url"],
        connections=c["connections"], rate=c["rate"], interrupted=doc["interrupted"], measured=_phase(doc["measured"]),
        warmup=_phase(doc["warmup"]) if doc["warmup"] else None,
        series=[SeriesPoint(**p) for p in doc["series"]],
        generator_cpu_s=g["cpu_user_s"] + g["cpu_system_s"], generator_utilization=g["utilization"],
        cpu_per_request_us=g["cpu_per_request_us"],
        schedule_lag=Histogram.from_json(g["schedule_lag"]) if g["schedule_lag"] else None,
        saturated=g["saturated"], saturation_reasons=list(g["saturation_reasons"]), config=c, raw=doc,
    )
