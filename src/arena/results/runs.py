"""A stored run as a typed value: the store decodes each row once into a :class:`Run`, whose load
result, resources, environment and flags are objects. Everything downstream (aggregation, the
report, the model's calibration) reads these, never the store's columns or JSON keys."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable

from arena.cpus import cpu_list
from arena.results.load_result import LoadFigures, LoadResult, from_dict, to_dict
from arena.results.run_setup import Launch, LoadSettings, Window
from arena.results.resources import ResourceResult
from arena.results.validity import Flag


SHARED = "shared CPU: figures include the generator's cost"  # a run whose server and load shared CPUs


def _known(cls, d: dict[str, Any]) -> dict[str, Any]:
    """The keys of ``d`` that ``cls`` has (stores written by older versions may lack or add some)."""
    names = _field_names(cls)
    return {k: v for k, v in d.items() if k in names}


@functools.cache
def _field_names(cls) -> frozenset[str]:
    """A dataclass's field names, worked out once (dataclasses.fields() builds them anew on each call:
    a sixth of reading a 10,000-run store)."""
    return frozenset(f.name for f in dataclasses.fields(cls))


def level_label(model: str, value: float) -> str:
    """The one display name of a load level, everywhere Arena shows one: "c=8" (closed model, 8
    connections) or "100 req/s" (open model, offered arrivals per second)."""
    return f"c={int(value)}" if model == "closed" else f"{value:g} req/s"


@dataclass(frozen=True)
class Environment:
    """What a run depended on besides its experiment file."""

    cpu_model: str | None = None
    cpus: int | None = None
    host: str | None = None  # the machine's name (runs of a sharded experiment come from several)
    kernel: str | None = None
    python: str | None = None
    ruby: str | None = None
    arena: str | None = None
    server_cpus: str | None = None  # CPU lists as "1" or "2-3"
    load_cpus: str | None = None
    service_cpus: str | None = None  # where the services ran (absent: no services, or their default, the server's)
    servers: dict[str, str | None] = field(default_factory=dict)  # server name -> version
    services: dict[str, str] = field(default_factory=dict)  # service kind -> what ran (version, settings)
    fronts: dict[str, str | None] = field(default_factory=dict)  # proxy or balancer -> version
    cluster: str | None = None  # the Dask scheduler the load hosts came from ([cluster]; each host is in the load)
    server_host: str | None = None  # the address the server listened on for them

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Environment":
        return cls(**_known(cls, d))


def resources_from_json(d: dict[str, Any]) -> ResourceResult | None:
    """The probe's result as stored (None for a run stored without one)."""
    if not d or "window_s" not in d:
        return None
    return ResourceResult(**_known(ResourceResult, d))


@dataclass(frozen=True)
class Database:
    """What a run asked of the database and what it refused: the connections the server's processes
    may open together (processes x pool), the database's max_connections, and the connections it
    refused during the run (from its own log) with the first refusal's message."""

    connections: int | None = None
    max_connections: int | None = None
    refused: int | None = None
    refused_first: str | None = None

    @property
    def over_limit(self) -> bool:
        return None not in (self.connections, self.max_connections) and self.connections > self.max_connections

    def note(self) -> str | None:
        """One line where the database refused connections or could be asked for more than it
        allows; None otherwise."""
        asked = (f"processes x pool = {self.connections} > max_connections {self.max_connections}"
                 if self.over_limit else None)
        if self.refused:
            why = f" ({asked})" if asked else ""
            return f"the database refused {self.refused} connection(s){why}: {self.refused_first}"
        return f"{asked}: the database may refuse connections" if asked else None


@dataclass(frozen=True)
class Placement:
    """Where in an experiment a run (or a cell of runs) is: a configuration at a workload and load
    level."""

    config: str  # ServerConfig.key: the configuration's identity
    label: str  # ServerConfig.name: what the configuration is called where it is shown
    server: str
    app: str
    workload: str
    processes: int | None
    threads: int | None
    connections: int | None
    model: str  # "closed" | "open"
    level: float

    @property
    def level_label(self) -> str:
        return level_label(self.model, self.level)

    @property
    def cell(self) -> tuple[str, str, str, float]:
        """The cell it is (or belongs to): configuration, workload, load model and level (as
        plan's RunSpec.cell)."""
        return self.config, self.workload, self.model, self.level


@dataclass(frozen=True)
class Run(Placement):
    """One measured run as stored: its place in the experiment and what was measured."""

    id: int
    run_key: str
    repetition: int
    driver: str
    started_at: float
    server_reused: bool
    valid: bool
    flags: tuple[Flag, ...]
    throughput: float | None
    p50_us: int | None
    p90_us: int | None
    p99_us: int | None
    errors: int | None
    cpu_s: float | None
    pss_bytes: int | None
    uss_bytes: int | None
    figures: LoadFigures | None  # what its cell reads of its load result (None: no load result)
    resources: ResourceResult | None
    environment: Environment
    services: dict[str, ResourceResult] = field(default_factory=dict)  # by kind, over the run's window
    pool: int | None = None  # database connections per process (None: the app's default)
    db_connections: int | None = None  # processes x pool: what the server may open at once
    db_max_connections: int | None = None  # the database's max_connections
    db_refused: int | None = None  # connections the database refused during the run (its log)
    db_refused_first: str | None = None  # the first refusal's message
    speed_ms: float | None = None  # the machine's speed check around the run (speed.py; lower is faster)
    others_cores: float | None = None  # cores others than Arena took on the run's CPUs over its window (speed.py)
    why: str | None = None  # a run beyond the plan: why it was taken (arena run --until-decided)
    launch: dict[str, Any] = field(default_factory=dict)  # how the server was started: argv, cwd, env
    # the front's figures over the run's window (a balancer: requests and queue time, in all and per
    # instance: topology.haproxy.window_figures); {} for a bare server or a proxy
    topology: dict[str, Any] = field(default_factory=dict)
    # its load result (None: none), or what decodes it when it is first read (Run.load): reading a
    # store decodes no run's load result that nothing reads (show reads LoadFigures)
    stored_load: LoadResult | Callable[[], LoadResult | None] | None = field(default=None, repr=False, compare=False)

    @property
    def load(self) -> LoadResult | None:
        """The run's load result as the store gave it (results/store.py Store.runs: the analysis's
        summary or the whole), decoded the first time it is read."""
        got = self.stored_load
        if callable(got):
            got = got()
            object.__setattr__(self, "stored_load", got)  # decoded once; the text it came from is let go
        return got

    @property
    def throttled_ms(self) -> float | None:
        """The time its process set waited for the next CFS period under its CPU quota, over the
        run's window, summed over its CPUs as the kernel counts it (0 without a quota; None where
        no cpu controller counted it, or the run is older)."""
        r = self.resources
        return None if r is None or r.cpu_throttled_s is None else r.cpu_throttled_s * 1000

    @property
    def shared(self) -> bool:
        """Whether the server and the load generator shared CPUs ([layout] share = true): its figures
        include the generator's cost, and it is never compared with a run on disjoint CPUs."""
        e = self.environment
        if not e.server_cpus or not e.load_cpus or e.cluster:
            return False
        return bool(set(cpu_list(e.server_cpus)) & set(cpu_list(e.load_cpus)))

    @property
    def launched(self) -> Launch:
        """How the server (or deployment) was started, read by attribute (the stored ``launch``)."""
        return Launch.of(self.launch)

    @property
    def settings(self) -> LoadSettings:
        """What the load tool was asked to do (its result's config), read by attribute."""
        return LoadSettings.of(self.load.config if self.load else None)

    @property
    def window(self) -> Window | None:
        """A balancer's figures over the run's window (None: a bare server or a proxy)."""
        return Window.of(self.topology)

    @property
    def kept_alive(self) -> bool:
        """Whether the connections reaching the server stayed open between requests: the clients' own
        before a bare server; nginx's upstream keep-alive behind it; HAProxy keeps them by default."""
        front = self.launched.topology
        if front is not None and front.proxy:
            return front.upstream_keepalive
        if front is not None and front.balancer:
            return True
        return self.settings.keep_alive

    @property
    def arrival(self) -> str:
        """An open load's arrivals: "constant" spacing (the drivers' default) or "poisson"."""
        return self.settings.arrival

    @property
    def database(self) -> Database:
        return Database(self.db_connections, self.db_max_connections, self.db_refused, self.db_refused_first)

    def to_json(self) -> dict[str, Any]:
        """The run as plain JSON (arena export): its columns and its documents as stored."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("figures", "stored_load")}
        d.update(flags=list(self.flags), flag_kinds=[f.kind for f in self.flags], load=to_dict(self.load) if self.load else None,
                 resources=dataclasses.asdict(self.resources) if self.resources else None,
                 environment=dataclasses.asdict(self.environment), server_reused=int(self.server_reused),
                 services={k: dataclasses.asdict(v) for k, v in self.services.items()},
                 valid=int(self.valid), throttled_ms=self.throttled_ms)
        return d


@dataclass(frozen=True)
class Failure(Placement):
    """A run that could not be made, as stored: where it was in the experiment, and why. Not a run:
    it has no figures, and the next ``arena run`` tries it again."""

    run_key: str
    repetition: int
    failed_at: float
    stage: str  # "start" (its server did not start), "service", "driver", "server died" (in an earlier run)
    reason: str  # one line: what failed, and the exception it ended in
    log_tail: str = ""  # the last lines of the server's log
    log_path: str | None = None  # where the whole log was kept

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


FAILURE_COLUMNS = tuple(f.name for f in dataclasses.fields(Failure))


def _flags(texts: list[str], kinds: list[str]) -> tuple[Flag, ...]:
    """A run's stored flags with their kinds; a flag stored without one is its own kind."""
    return tuple(Flag(text, kinds[i] if i < len(kinds) else text) for i, text in enumerate(texts))


def decode(row: dict[str, Any], documents: dict[str, Any]) -> Run:
    """A store row (its plain columns) and its parsed JSON documents -> Run. Its ``load`` may be a
    function that gives the parsed document when called (decoded when the run's load is read)."""
    plain = {k: row[k] for k in ("id", "run_key", "config", "label", "server", "app", "workload", "processes",
                                 "threads", "connections", "model", "level", "repetition", "driver", "started_at",
                                 "throughput", "p50_us", "p90_us", "p99_us", "errors", "cpu_s", "pss_bytes",
                                 "uss_bytes", "pool", "db_connections", "db_max_connections", "db_refused",
                                 "db_refused_first", "speed_ms", "others_cores", "why")}
    load, figures = documents["load"], documents.get("figures")
    if callable(load):
        stored = functools.partial(_decoded, load)
    else:
        stored = from_dict(load) if load else None
        if figures is None and stored is not None:
            figures = LoadFigures.of(stored)
    return Run(**plain, server_reused=bool(row["server_reused"]), valid=bool(row["valid"]),
               flags=_flags(documents["flags"], documents["flag_kinds"]),
               figures=LoadFigures.from_json(figures) if isinstance(figures, dict) else figures,
               resources=resources_from_json(documents["resources"]),
               environment=_environment(documents["environment"]),
               services={k: r for k, r in ((k, resources_from_json(v)) for k, v in documents["services"].items()) if r},
               launch=documents["launch"] or {}, topology=documents.get("topology") or {}, stored_load=stored)


def _environment(doc: Environment | dict[str, Any] | None) -> Environment:
    """A run's environment: as the store's reader made it (one object for the runs that share it), or
    from its document."""
    return doc if isinstance(doc, Environment) else Environment.from_json(doc or {})


def _decoded(parse: Callable[[], dict[str, Any] | None]) -> LoadResult | None:
    load = parse()
    return from_dict(load) if load else None


def schema_problem(doc: Any, definition: str) -> str | None:
    """The first way ``doc`` is not what schemas/run.schema.json's ``definition`` describes ("rescue":
    a rescue file; "export": ``arena export --format json``), in words: where (a run by its position
    and key, the field), the value and what is wrong; None where it is right."""
    import json

    import jsonschema
    from jsonschema.exceptions import best_match

    from arena.paths import schema

    whole = json.loads(schema("run.schema.json").read_text())
    error = best_match(jsonschema.Draft202012Validator({**whole, "$ref": f"#/$defs/{definition}"}).iter_errors(doc))
    if error is None:
        return None
    path = list(error.absolute_path)
    at = next((i for i, p in enumerate(path) if isinstance(p, int)), None)
    what, field = "", ".".join(str(p) for p in path)
    if at is not None and at <= 1:
        rows = doc[path[0]] if at == 1 else doc
        row = rows[path[at]]
        kind = "failure" if path[:1] == ["failures"] or isinstance(row, dict) and row.get("failed") else "run"
        key = row.get("run_key") if isinstance(row, dict) else None
        what = f"{kind} {path[at] + 1}" + (f" ({key})" if isinstance(key, str) else "")
        field = ".".join(str(p) for p in path[at + 1:])
    value = json.dumps(error.instance, default=str)
    value = value if len(value) <= 60 else value[:57] + "..."
    if error.validator == "required":
        text = error.message.replace("is a required property", "is missing")
    else:  # jsonschema starts its message with the value's Python repr: shown as JSON instead
        text = value + " " + error.message.removeprefix(repr(error.instance)).strip()
    return ", ".join(x for x in (what, field) if x) + (": " if what or field else "") + text
