"""An experiment as values: its server configurations, load levels, workloads, runs and their
groups. Pure data, read from a file by plan/parse.py (the TOML reader: its keys, one-line refusals)
and planned into runs by plan/expand.py; this module reads no file, starts nothing and asks nothing
of the machine (an import-linter contract in pyproject.toml holds it: no reader, driver, server or
service)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from arena.clients import Clients
from arena.limits import Limits
from arena.results.answer import Goal
from arena.results.runs import level_label
from arena.topology import BARE, Topology

if TYPE_CHECKING:
    from arena.mix import Mix
    from arena.plan.study import Reproduction
    from arena.results.thresholds import Threshold
    from arena.services import ServiceSpec
    from arena.subjects import App


def settings_text(settings: Mapping[str, object]) -> str:
    """The one way a configuration's settings are written in its name: "preload=true yjit=false"."""
    return " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in settings.items())


@dataclass(frozen=True)
class ServerConfig:
    """One point of a server's knob grid."""

    server: str
    app: str
    processes: int | None = None
    threads: int | None = None
    connections: int | None = None
    label: str | None = None
    pool: int | None = None  # database connections per process (the app's ARENA_POOL); None: the app's default
    user_app: App | None = None  # a user's app (``app`` is its name); None: the built-in subject ``app``
    settings: tuple[tuple[str, bool | int | str], ...] = ()  # named settings (catalog.Option), in the server's order
    env: tuple[tuple[str, str], ...] = ()  # declared variables, by name
    options: tuple[str, ...] = ()  # raw server flags
    topology: Topology = BARE  # what stands before the server: a proxy, or a balancer and N instances
    twin: bool = False  # listed again under another label (an A/A test): the label is part of its identity
    limits: Limits = Limits()  # a container's CPU quota and memory limit on its process set

    @property
    def key(self) -> str:
        """The configuration's identity (stored runs are keyed by it): server, app, knobs, pool,
        limits, settings, declared variables and raw flags, each shown only when set; for a twin (the
        same configuration under two labels), its label too."""
        parts = [f"{k[0]}={v}" for k, v in (("processes", self.processes), ("threads", self.threads),
                                            ("connections", self.connections)) if v is not None]
        parts += [f"pool={self.pool}"] if self.pool is not None else []
        parts += [self.limits.text] if self.limits.any else []
        parts += [settings_text(dict(self.settings))] if self.settings else []
        parts += [f"{k}={shlex.quote(v)}" for k, v in self.env]
        parts += [f"options={shlex.quote(shlex.join(self.options))}"] if self.options else []
        parts += [self.topology.text] if self.topology.front else []
        parts += [f"as {shlex.quote(self.label or '')}"] if self.twin else []
        return f"{self.server}[{self.app}]" + "".join(f" {p}" for p in parts)

    @property
    def name(self) -> str:
        return self.label or self.key


@dataclass(frozen=True)
class Level:
    model: str  # "closed": value = concurrency; "open": value = arrivals per second
    value: float

    @property
    def key(self) -> str:
        """The level's part of a stored run key (kept as it is: stores hold it)."""
        return f"c={int(self.value)}" if self.model == "closed" else f"r={self.value:g}"

    @property
    def label(self) -> str:
        return level_label(self.model, self.value)


@dataclass(frozen=True)
class Workload:
    path: str  # the request target, query included
    method: str = "GET"
    name: str = "default"
    expect_status: str | None = None  # the statuses that count as success, e.g. "2xx,404" (None: 2xx and 3xx)
    mix_file: str | None = None  # a request mix file (arena.mix) instead of one path: as written in the experiment
    mix: Mix | None = field(default=None, compare=False)  # that file, read (None where only the definition is at hand)
    clients: Clients = Clients()  # keep-alive or not, and how far and slow the clients are
    levels: tuple[Level, ...] = ()  # its own load levels (a workload's ``load``); empty: the experiment's
    events: int | None = None  # the events each stream of server-sent events it answers should hold (fewer: an error)

    @property
    def blocking_io(self) -> bool:
        """Whether the request's I/O wait holds its process (the subject contract's ``io=block``:
        a call that does not yield to the event loop or the other green threads)."""
        from urllib.parse import parse_qs, urlsplit

        return "block" in parse_qs(urlsplit(self.path).query).get("io", [])


@dataclass(frozen=True)
class Cluster:
    """``[cluster]``: the load comes from a Dask cluster's load hosts (drivers/cluster.py); the server
    runs ``here`` (listening on ``server_host``, an address of this machine the load hosts reach) or
    on the cluster's ``worker`` offering the arena-server resource (app/remote.py: the experiment's
    runs are made there, its address found then)."""

    address: str  # the Dask scheduler's, tcp://ip:port
    server_host: str | None  # None: the server's worker's address
    server: str = "here"  # "here" or "worker"


@dataclass(frozen=True)
class Experiment:
    name: str
    file: str
    description: str
    driver: str
    servers: tuple[ServerConfig, ...]
    levels: tuple[Level, ...]
    workloads: tuple[Workload, ...]
    duration_s: float | None
    requests: int | None
    warmup_s: float
    repetitions: int
    seed: int
    reuse_server: bool
    request_start: bool
    timeout_s: float
    error_threshold: float
    drift_threshold: float
    speed_threshold: float  # a run whose every speed check ran this much slower than usual is invalid (speed.py)
    others_threshold: float  # a run whose CPUs others took more than this share of is invalid (speed.others_cores)
    server_cpus: tuple[int, ...]
    load_cpus: tuple[int, ...]
    source: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    services: tuple[ServiceSpec, ...] = ()  # started before the servers, stopped after them
    service_cpus: tuple[int, ...] = ()  # where they run (default: the servers' CPUs, as on one box)
    load_threads: int = 1  # the load tool's threads (wrk -t; arena-load's workers)
    arrival: str = "constant"  # how an open model's requests are spaced ([load] arrival; results.run_setup.ARRIVALS)
    profile: tuple[str, ...] = ()  # [load] profile: access logs whose arrival times the open model follows
    profile_window: str | None = None  # [load] window: busiest:10m or first:30s of them
    reproduce: Reproduction | None = None  # the published study this file reproduces ([reproduce])
    goal: Goal = Goal()  # what the answer must keep within ([goal]); flags override it
    thresholds: tuple[Threshold, ...] = ()  # pass/fail criteria for CI (thresholds = [...]), on each cell
    find: str | None = None  # "capacity": each configuration's capacity is searched ([load] find); levels are ()
    find_from: float | None = None  # the rate that search starts from (None: from a closed-loop run)
    cluster: Cluster | None = None  # several load hosts ([cluster]); None: arena-load here
    path: str = ""  # the file it was read from, resolved when read ("" for one no file holds: arena tune's)
    # a soak ([load] soak): each process's PSS is sampled every this many seconds over the run's
    # window, which is the soak's length (duration); None: not a soak
    soak_every_s: float | None = None

    @property
    def shared(self) -> bool:
        """Whether the server and the load generator share CPUs ([layout] share = true): every run is
        marked (results.runs.SHARED), and the generator's CPU is not another process's on them."""
        return bool(set(self.server_cpus) & set(self.load_cpus)) and self.cluster is None


@dataclass(frozen=True)
class RunSpec:
    """One measured run: a server configuration at one load level, one repetition (and, where an
    earlier attempt at it was invalid, which retake)."""

    config: ServerConfig
    level: Level
    repetition: int
    workload: Workload = Workload("/")
    retake: int = 0
    why: str = field(default="", compare=False)  # a run beyond the plan: why it was taken (arena run --until-decided)

    @property
    def cell(self) -> tuple[str, str, str, float]:
        """The cell it is a repetition of: configuration, workload, load model and level."""
        return self.config.key, self.workload.name, self.level.model, self.level.value

    @property
    def key(self) -> str:
        where = "" if self.workload.name == "default" else f" {self.workload.name}"
        return f"{self.config.key}{where} {self.level.key} #{self.repetition}" + (f" retake {self.retake}" if self.retake else "")


@dataclass(frozen=True)
class Group:
    """Runs that share one server start: one configuration, one repetition, its load levels (and
    workloads)."""

    config: ServerConfig
    repetition: int
    runs: tuple[RunSpec, ...]
