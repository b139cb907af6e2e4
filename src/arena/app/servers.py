"""The catalog as data, and one server in the foreground."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

from arena.errors import ArenaError, clear_stop
from arena.http_client import port_free
from arena.servers import catalog
from arena.servers.cgroup import survivors
from arena.servers.launch import RunningServer, ServerSpec, start
from arena.services import started_services
from arena.topology import BARE, Topology
from arena.topology.deployment import Deployment, start_deployment
from arena.topology.front import RunningFront


@dataclass(frozen=True)
class ServerInfo:
    server: catalog.Server
    available: bool
    version: str | None


@dataclass(frozen=True)
class Unused:
    """A variable of the caller's environment that servers read, and Arena does not pass."""

    variable: str
    value: str
    knob: str | None  # the knob it would set ("processes", "threads"); None: another of their settings
    servers: tuple[str, ...]


def unused_environment(environ: dict[str, str]) -> list[Unused]:
    """The variables servers read set in ``environ``: their knobs' (WEB_CONCURRENCY, RAILS_MAX_THREADS)
    and their other settings' (GUNICORN_CMD_ARGS, PUMA_*: catalog.Server.reads_env). A server gets
    exactly the environment its configuration declares, never the caller's, so these are not used."""
    found: dict[tuple[str, str | None], list[str]] = {}
    for s in catalog.CATALOG.values():
        for name, knob in s.knobs.items():
            if knob.env and environ.get(knob.env):
                found.setdefault((knob.env, name), []).append(s.name)
        for pattern in s.reads_env:
            for var in sorted(environ):
                if environ[var] and (var.startswith(pattern[:-1]) if pattern.endswith("*") else var == pattern):
                    found.setdefault((var, None), []).append(s.name)
    return [Unused(var, environ[var], knob, tuple(names)) for (var, knob), names in found.items()]


def servers() -> list[ServerInfo]:
    """Every server Arena knows, whether it is installed here, and its version."""
    return [ServerInfo(s, catalog.available(s), catalog.version(s.name)) for s in catalog.CATALOG.values()]


@dataclass(frozen=True)
class Stopped:
    server: str
    port: int


def serve(spec: ServerSpec, on_ready: Callable[[RunningServer | Deployment], None] = lambda s: None,
          services: list[str] = (), on_service: Callable[[object], None] = lambda s: None,
          topology: Topology = BARE) -> Stopped:
    """Start the ``services`` (kinds) and one server pointed at them (or ``topology``'s instances of
    it behind its front, the front on the server's CPUs), tell ``on_service`` and ``on_ready``, keep
    them until Ctrl-C (KeyboardInterrupt), stop them and check that nothing is left. A server or
    front that exits by itself is an error with its log's tail."""
    with started_services(services, spec.cpus, on_service) as env:
        return _serve(replace(spec, env={**spec.env, **env}), on_ready, topology)


def _serve(spec: ServerSpec, on_ready: Callable[[RunningServer | Deployment], None], topology: Topology) -> Stopped:
    running = start_deployment(spec, topology, spec.cpus) if topology.front else start(spec)
    parts = running.parts if topology.front else [running]
    with running:
        try:  # from the ready message on, Ctrl-C is the normal way to end `arena serve`
            on_ready(running)
            while all(p.alive() or p.procset.pids() for p in parts):
                time.sleep(0.2)
        except KeyboardInterrupt:
            clear_stop()  # acted on: this Ctrl-C ends `arena serve` as it should, it is no interruption
        else:
            dead = next(p for p in parts if not (p.alive() or p.procset.pids()))
            name = dead.kind if isinstance(dead, RunningFront) else spec.server
            raise ArenaError(f"{name} exited by itself (code {dead.proc.returncode}); "
                             f"last lines of its log:\n{dead.log_tail()}")
    left = [pid for p in parts for pid in survivors(p.procset.name)]
    if left or not port_free(running.host, running.port):
        raise ArenaError(f"stop: {spec.server} left processes {left} or port {running.port} taken")
    return Stopped(spec.server, running.port)
