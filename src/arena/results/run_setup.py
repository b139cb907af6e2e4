"""How a run was set up, read by attribute from what is stored with it: the server's launch (its
command, and for a deployment its topology, front and instances), the load's settings (the load
tool's config) and a balancer's figures over the run's window. Each ``of`` reads a stored JSON
document once, with the defaults older stores imply; the documents themselves are stored and
exported as they were written. Value types: no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from arena.limits import Limits


@dataclass(frozen=True)
class TopologyLaunch:
    """What stood before the server (plan's Topology.describe, as stored)."""

    proxy: str | None = None
    balancer: str | None = None
    instances: int = 1
    upstream: str = "tcp"  # how the front reached the server: "tcp" or "unix"
    upstream_keepalive: bool = True  # a proxy's connections to the server kept open

    @classmethod
    def of(cls, d: Mapping[str, Any] | None) -> "TopologyLaunch | None":
        if not d:
            return None
        return cls(d.get("proxy"), d.get("balancer"), int(d.get("instances") or 1), d.get("upstream") or "tcp",
                   bool(d.get("upstream_keepalive", True)))


@dataclass(frozen=True)
class FrontLaunch:
    kind: str  # "nginx" | "haproxy"
    version: str | None = None


@dataclass(frozen=True)
class InstanceLaunch:
    address: str | None
    cpus: str | None  # the instance's CPU list, None: every server CPU


@dataclass(frozen=True)
class Launch:
    """How the server (or the deployment) was started, as stored with each run."""

    argv: tuple[str, ...] = ()
    cwd: str | None = None
    version: str | None = None
    version_from: str | None = None  # where the version came from, when not Arena's own environment
    topology: TopologyLaunch | None = None  # None: a bare server
    front: FrontLaunch | None = None
    instances: tuple[InstanceLaunch, ...] = ()
    limits: Limits = Limits()  # a container's CPU quota and memory limit (none in older stores)
    keep_alive: bool = True  # whether the server keeps a client's connection between requests (catalog's)
    language: str | None = None  # the server's: "python" or "ruby" (None in older stores)
    model: str | None = None  # its concurrency model (catalog.MODELS; None in older stores)
    knobs: Mapping[str, int | None] = field(default_factory=dict)  # as given (None: the server's own default)

    @property
    def threads(self) -> int | None:
        """The requests it serves at once, a thread each, where it spends a thread on each (the process,
        thread and hybrid models): processes x threads per process; None for an event loop, or where a
        knob was left to the server's own default."""
        if self.model not in ("process", "thread", "hybrid"):
            return None
        counts = [self.knobs.get(k, 1) for k in ("processes", "threads")]
        return None if None in counts else counts[0] * counts[1]

    @classmethod
    def of(cls, d: Mapping[str, Any] | None) -> "Launch":
        d = d or {}
        front, limits = d.get("front"), d.get("limits") or {}
        return cls(tuple(d.get("argv") or ()), d.get("cwd"), d.get("version"), d.get("version_from"),
                   TopologyLaunch.of(d.get("topology")),
                   FrontLaunch(front["kind"], front.get("version")) if front else None,
                   tuple(InstanceLaunch(i.get("address"), i.get("cpus")) for i in d.get("instances") or ()),
                   Limits(**limits), d.get("keep_alive", True), d.get("language"), d.get("model"),
                   dict(d.get("knobs") or {}))


ARRIVALS = ("constant", "poisson")  # how an open model spaces its sends: evenly, or as a Poisson process
SCHEDULE = "schedule"  # an open model sent at given times (a traffic profile: arena load --profile)


@dataclass(frozen=True)
class LoadSettings:
    """What a load tool was asked to do, from its result's config (the defaults of a tool that does
    not say: connections kept alive, constant arrivals, one-second intervals, no emulated link)."""

    keep_alive: bool = True
    arrival: str = "constant"  # an open load's arrivals: one of ARRIVALS, or SCHEDULE
    interval_s: float = 1.0  # the per-interval series' step
    link_delay_s: float = 0.0  # the emulated client link: one-way delay
    upload_bps: int | None = None
    download_bps: int | None = None

    @classmethod
    def of(cls, config: Mapping[str, Any] | None) -> "LoadSettings":
        c = config or {}
        link = c.get("link") or {}
        return cls(bool(c.get("keep_alive", True)), c.get("arrival") or "constant", float(c.get("interval_s") or 1.0),
                   (link.get("delay_ms") or 0) / 1e3, link.get("upload_bps"), link.get("download_bps"))


@dataclass(frozen=True)
class Window:
    """A balancer's figures over a run's window (topology/haproxy.py window_figures, as stored)."""

    requests: int
    queue_ms_mean: float | None
    queue_ms_p99: float | None
    served: tuple[int, ...]  # requests each instance served, i0 first

    @classmethod
    def of(cls, d: Mapping[str, Any] | None) -> "Window | None":
        if not d or not d.get("instances"):
            return None
        q = d.get("queue_ms") or {}
        return cls(int(d.get("requests") or 0), q.get("mean"), q.get("p99"),
                   tuple(int(i["requests"]) for i in d["instances"]))
