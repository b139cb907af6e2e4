"""Services an app depends on, started before the servers and stopped after them, each with the
same guarantees as a server: its own process set (cgroup) on declared CPUs, its own temp dir, a log
file, a ready check, a graceful stop then a kill, nothing left after a crash, Ctrl-C or SIGTERM of
Arena, and what a dead Arena left reaped by the next one (its names carry the owner's pid).

- postgres.py: a fresh PostgreSQL cluster (initdb in a temp dir, run as an unprivileged user), seeded
  with a deterministic table before any server starts;
- downstream.py: a downstream HTTP service (a fast server of the catalog running a subject app), so
  an "external API" call is a real socket round trip with a chosen latency distribution and size.

A running service hands the servers its address as environment variables (``env``)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from arena.errors import ArenaError

KINDS = ("postgres", "http")


@dataclass(frozen=True)
class ServiceSpec:
    """A service to start: its kind and its settings (checked by the kind's own ``settings``)."""

    kind: str
    settings: dict[str, Any] = field(default_factory=dict)


def check_settings(kind: str, given: dict[str, Any], where: str) -> None:
    """Refuse, in one line naming ``where`` and the key, a setting the kind does not take or a bad value."""
    if kind == "postgres":
        from arena.services.postgres import settings
    else:
        from arena.services.downstream import settings
    settings(given, where)


@contextlib.contextmanager
def started_services(kinds: Iterable[str], cpus: list[int] | None,
                     on_start: Callable[[Any], None] = lambda s: None) -> Iterator[dict[str, str]]:
    """Start a service of each kind (default settings), in order; yield the environment that points
    servers at them; stop them all on the way out."""
    with contextlib.ExitStack() as stack:
        env: dict[str, str] = {}
        for kind in dict.fromkeys(kinds):
            svc = stack.enter_context(start_service(ServiceSpec(kind), cpus))
            on_start(svc)
            env.update(svc.env)
        yield env


def start_service(spec: ServiceSpec, cpus: list[int] | None):
    """Start one service and return it once it is ready (a context manager that stops it)."""
    if spec.kind == "postgres":
        from arena.services.postgres import start_postgres, settings

        return start_postgres(settings(spec.settings), cpus)
    if spec.kind == "http":
        from arena.services.downstream import settings, start_downstream

        return start_downstream(settings(spec.settings), cpus)
    raise ArenaError(f"service: unknown kind '{spec.kind}' (kinds: {', '.join(KINDS)})")
