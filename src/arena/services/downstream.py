"""A downstream HTTP service, the "external API" an app calls: a fast server of the catalog running
a subject app, so a call is a real socket round trip. Its latency and size come from the subject's
``/work?io_ms=&io_dist=&sigma=&bytes=`` (spec.md), with the service's distribution as the default
the servers are told (``ARENA_API_DIST``, ``ARENA_API_SIGMA``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from arena.servers import catalog
from arena.servers.launch import RunningServer, ServerSpec, start
from arena.services.fields import Field, read

ASYNC = tuple(name for name, s in catalog.CATALOG.items() if s.model == "async" and "asgi" in s.apps)


@dataclass(frozen=True)
class DownstreamSettings:
    server: str = "uvicorn"  # an async server: its waits overlap, as a real API's do
    processes: int = 1
    distribution: str = "fixed"  # of the latency: fixed, exp or lognormal (the subject's io_dist)
    sigma: float = 1.0  # lognormal's shape


FIELDS = (
    Field("server", str, lambda v: v in ASYNC, f"an async server serving ASGI ({', '.join(ASYNC)})"),
    Field("processes", int, lambda v: 1 <= v <= 64, "a whole number from 1 to 64"),
    Field("distribution", str, lambda v: v in ("fixed", "exp", "lognormal"), "\"fixed\", \"exp\" or \"lognormal\""),
    Field("sigma", (int, float), lambda v: 0 <= v <= 4, "a number from 0 to 4"),
)


def settings(given: dict[str, Any], where: str = "services.http.") -> DownstreamSettings:
    return DownstreamSettings(**read(given, FIELDS, where))


@dataclass
class RunningDownstream:
    settings: DownstreamSettings
    server: RunningServer

    kind = "http"

    @property
    def procset(self):
        return self.server.procset

    @property
    def startup_s(self) -> float:
        return self.server.startup_s

    @property
    def env(self) -> dict[str, str]:
        return {"ARENA_API_URL": self.server.url, "ARENA_API_DIST": self.settings.distribution,
                "ARENA_API_SIGMA": f"{self.settings.sigma:g}"}

    def describe(self) -> str:
        """What ran, the same every time it runs with these settings (stored with each run)."""
        s = self.settings
        return (f"downstream HTTP: {s.server} {self.server.version or ''} x {s.processes} ({s.distribution} latency"
                + (f", sigma {s.sigma:g}" if s.distribution == "lognormal" else "") + ")")

    @property
    def address(self) -> str:
        return self.server.url

    def stop(self) -> None:
        self.server.stop()

    def __enter__(self) -> "RunningDownstream":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_downstream(s: DownstreamSettings, cpus: list[int] | None = None) -> RunningDownstream:
    app = "asgi"
    knobs = catalog.knobs_for(catalog.CATALOG[s.server], catalog.APPS[app])
    return RunningDownstream(s, start(ServerSpec(s.server, app, processes=s.processes if "processes" in knobs else None,
                                                 cpus=cpus)))
