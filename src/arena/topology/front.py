"""The front's lifecycle (nginx or HAProxy): confined in its own process set on declared CPUs, its
config, logs and sockets in its own temp dir, ready when a request through it reaches one of the
instances, stopped gracefully then killed, and nothing left after a crash, Ctrl-C or SIGTERM (a
launch.Confined: the runner's and the CLI's stops reach it; a dead Arena's is reaped by the next)."""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

from arena.errors import ArenaError
from arena.http_client import Client, free_port
from arena.servers import launch
from arena.servers.cgroup import ProcessSet, create
from arena.topology import Topology, haproxy, nginx

READY_TIMEOUT_S = 15.0
GRACE_S = 5.0
# the graceful stop: nginx's SIGQUIT finishes the requests in flight; HAProxy's SIGUSR1 is its soft stop
STOP_SIGNAL = {"nginx": signal.SIGQUIT, "haproxy": signal.SIGUSR1}
MODULES = {"nginx": nginx, "haproxy": haproxy}


@lru_cache(maxsize=None)
def version(kind: str) -> str | None:
    """The installed version of ``kind`` ("1.22.1", "2.6.12-1+deb12u4"), or None when it is not installed."""
    module = MODULES[kind]
    if shutil.which(module.VERSION_ARGV[0]) is None:
        return None
    try:
        out = subprocess.run(module.VERSION_ARGV, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(module.VERSION, out.stdout + out.stderr)
    return found[1] if found else None


@dataclass(eq=False)
class RunningFront(launch.Confined):
    kind: str  # "nginx" | "haproxy"
    topology: Topology
    proc: subprocess.Popen
    procset: ProcessSet
    workdir: Path
    host: str
    port: int
    argv: list[str]
    version: str | None
    startup_s: float = 0.0
    stopped: bool = False
    killed: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "front.log"

    @property
    def requests_log(self) -> Path:
        """HAProxy's request lines (its stdout)."""
        return self.workdir / "requests.log"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        return launch.log_tail(self.log_path, lines)

    def stop_how(self) -> tuple[int, float]:
        return STOP_SIGNAL[self.kind], GRACE_S

    def describe(self) -> str:
        return f"{self.kind} {self.version or ''}".strip()

    def window(self, since: float, until: float, instances: int) -> dict:
        """The balancer's figures for requests accepted in [since, until) (unix times); {} for a proxy."""
        if self.kind != "haproxy":
            return {}
        try:
            text = self.requests_log.read_text(errors="replace")
        except OSError:
            return {}
        return haproxy.window_figures(haproxy.parse_log(text), since, until, instances)


def start_front(t: Topology, upstreams: list[str], cpus: list[int] | None, host: str,
                reached: Callable[[int], bool], health: str, port: int | None = None) -> RunningFront:
    """Start ``t``'s front on ``port`` (default: a free one) before ``upstreams`` (addresses:
    "127.0.0.1:8000" or a socket's path) and return it once GET ``health`` through it answers below
    400 from a process ``reached`` says is one of the instances' (by its X-Arena-Pid)."""
    kind = t.front
    if kind is None:
        raise ArenaError("topology: no front to start")
    if version(kind) is None:
        raise ArenaError(f"topology: {kind} is not installed (make install: Debian's {kind})")
    launch.reap_before_start()
    procset = create(kind, cpus)
    workdir = Path(tempfile.mkdtemp(prefix=f"{procset.name}-"))  # named after its set: reaped with it
    module = MODULES[kind]
    workers = len(cpus) if cpus else 1
    port = port or free_port(host)
    try:
        if kind == "nginx":
            text = nginx.config(t, host, port, upstreams[0], workdir, workers, "root" if os.geteuid() == 0 else None)
        else:
            limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # the hard limit: HAProxy raises its own to it
            text = haproxy.config(t, host, port, upstreams, workdir, workers, haproxy.max_connections(limit))
        (workdir / module.CONFIG).write_text(text)
        argv = module.argv(workdir)
        with open(workdir / "front.log", "ab") as log, open(workdir / "requests.log", "ab") as requests:
            started_at = time.monotonic()
            proc = launch.spawn(argv, procset.preexec(), stdin=subprocess.DEVNULL,
                                stdout=requests if kind == "haproxy" else log, stderr=log, cwd=workdir,
                                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TZ": "UTC", "HOME": str(workdir),
                                     **procset.env()})
    except BaseException:
        launch.abandon(procset, workdir)
        raise
    running = RunningFront(kind, t, proc, procset, workdir, host, port, argv, version(kind))
    launch._live.add(running)
    launch.ready_or_stopped(running, lambda: _wait_ready(running, health, reached), keep_log=False)
    running.startup_s = time.monotonic() - started_at
    return running


def _wait_ready(front: RunningFront, health: str, reached: Callable[[int], bool]) -> None:
    def attempt() -> str | None:
        with Client(front.host, front.port, timeout=2) as client:
            reply = client.get(health)
        pid = int(reply.headers.get("x-arena-pid", "0"))
        return None if reply.status < 400 and reached(pid) else f"GET {health} answered {reply.status} from pid {pid}"

    launch.poll_ready(front.kind, READY_TIMEOUT_S, front.proc.poll, attempt, f"GET {health}")
