"""The catalog as data, and one server in the foreground."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

from arena.errors import ArenaError
from arena.http_client import port_free
from arena.servers import catalog
from arena.servers.cgroup import survivors
from arena.servers.launch import RunningServer, ServerSpec, start
from arena.services import started_services


@dataclass(frozen=True)
class ServerInfo:
    server: catalog.Server
    available: bool
    version: str | None


def servers() -> list[ServerInfo]:
    """Every server Arena knows, whether it is installed here, and its version."""
    return [ServerInfo(s, catalog.available(s), catalog.version(s.name)) for s in catalog.CATALOG.values()]


@dataclass(frozen=True)
class Stopped:
    server: str
    port: int


def serve(spec: ServerSpec, on_ready: Callable[[RunningServer], None] = lambda s: None,
          services: list[str] = (), on_service: Callable[[object], None] = lambda s: None) -> Stopped:
    """Start the ``services`` (kinds) and one server pointed at them, tell ``on_service`` and
    ``on_ready``, keep them until Ctrl-C (KeyboardInterrupt), stop them and check that nothing of the
    server is left. A server that exits by itself is an error with its log's tail."""
    with started_services(services, spec.cpus, on_service) as env:
        return _serve(replace(spec, env={**spec.env, **env}), on_ready)


def _serve(spec: ServerSpec, on_ready: Callable[[RunningServer], None]) -> Stopped:
    running = start(spec)
    with running:
        try:  # from the ready message on, Ctrl-C is the normal way to end `arena serve`
            on_ready(running)
            while running.alive() or running.procset.pids():
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        else:
            raise ArenaError(f"{running.server.name} exited by itself (code {running.proc.returncode}); "
                             f"last lines of its log:\n{running.log_tail()}")
    left = survivors(running.procset.name)
    if left or not port_free(running.host, running.port):
        raise ArenaError(f"stop: {running.server.name} left processes {left} or port {running.port} taken")
    return Stopped(running.server.name, running.port)
