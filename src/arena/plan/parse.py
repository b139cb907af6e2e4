"""Experiment files (TOML) -> a validated, typed Experiment (plan/experiment.py's values; its runs:
plan/expand.py).

The file's shape is checked once, against schemas/experiment.schema.json (plan/schema.py); what
the schema cannot say is checked here as each key is read (plan/reader.py): a server's own knobs and
settings (the catalog), the apps it serves, this machine's CPUs, what the driver can do, keys that
depend on each other. Every refusal is one line naming the file and the line, the key, the value
and what is allowed. The format is shown in scenarios/quick.toml.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from arena import speed as machine_speed
from arena.errors import ArenaError
from arena.results import validity
from arena.cpus import cpu_list, format_cpu_list, parse_cpu_list
from arena.services import KINDS, ServiceSpec, check_settings
from arena.subjects.user import measured_health
from arena.clients import Clients, clients as read_clients
from arena.mix import load_mix
from arena.plan.study import reproduction
from arena.results.answer import Goal
from arena.results.run_setup import ARRIVALS, SCHEDULE
from arena.traffic.profile import parse_window, schedule
from arena.traffic.read import profile_times
from arena.results.thresholds import Threshold, parse as parse_threshold
from arena.stats import THRESHOLD
from arena.plan.reader import (MAX_DURATION_S, MAX_TIMEOUT_S, MAX_WARMUP_S, KeyProblem, Reader, element,
                               parse_duration, show_value)
from arena.plan.grid import server_grid, twins
from arena.plan.schema import check as check_schema
from arena.topology import instance_cpus
from arena.plan.experiment import Cluster, Experiment, Level, ServerConfig, Workload


MODELS = ("closed", "open")
UNNAMED = "(stored definition)"  # how errors name a stored definition whose file is not known
# The experiment's keys that set the validity rules' thresholds (results/validity.py RULES), and their
# defaults
VALIDITY_DEFAULTS = {"error_threshold": validity.ERROR_THRESHOLD, "drift_threshold": validity.DRIFT_THRESHOLD,
                     "others_threshold": validity.OTHERS_MAX, "speed_threshold": machine_speed.THRESHOLD}


SHARE_ADVICE = ("this machine has one CPU; the server and the load need their own, or share it knowingly: "
                "[layout] share = true in the experiment, or --share-cpus (each run is then marked: its figures "
                "include the generator's cost)")


def default_layout(available: list[int], share: bool = False) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Server CPUs and load CPUs that never overlap: the load gets the first CPU (a quarter of them
    on larger machines), the server the rest. One CPU alone cannot be split: with ``share`` both get
    it, else an error that says how to share it."""
    if len(available) < 2:
        if share:
            return tuple(available), tuple(available)
        raise ArenaError(f"layout: {SHARE_ADVICE}")
    n_load = max(1, len(available) // 4)
    return tuple(available[n_load:]), tuple(available[:n_load])


@dataclass(frozen=True)
class Overrides:
    """What a command's flags set over an experiment file, as if the file said it (and stored so):
    ``share`` (--share-cpus) its [layout] share = true; ``servers``, keys set on every [[servers]]
    entry (--cpu-limit, --cpu-period, --memory-limit: cpu_limit, cpu_period, memory_limit)."""

    share: bool = False
    servers: tuple[tuple[str, Any], ...] = ()

    def apply(self, data: dict[str, Any]) -> None:
        if self.share:
            layout = data.setdefault("layout", {})
            if isinstance(layout, dict):
                layout["share"] = True
        if self.servers:
            for entry in data.get("servers") or []:
                if isinstance(entry, dict):
                    entry.update(self.servers)


def load_experiment(path: str | Path, server_here: bool = False, overrides: Overrides = Overrides()) -> Experiment:
    """The experiment file at ``path`` read and checked (``server_here``: see parse_experiment), with
    what ``overrides`` sets over it."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except FileNotFoundError:
        raise ArenaError(f"{file}: no such experiment file") from None
    except IsADirectoryError:
        raise ArenaError(f"{file}: is a directory, not an experiment file") from None
    except UnicodeDecodeError as e:
        raise ArenaError(f"{file}: not UTF-8 text (byte {e.start}: {e.reason}); TOML files are UTF-8") from None
    except OSError as e:
        raise ArenaError(f"{file}: cannot read it ({e.strerror})") from None
    except tomllib.TOMLDecodeError as e:
        raise ArenaError(f"{file}: not valid TOML: {e}") from None
    overrides.apply(data)
    try:
        return replace(parse_experiment(data, file, server_here), path=str(Path(path).resolve()))
    except KeyProblem as e:
        raise e.at(text) from None


def parse_experiment(data: dict[str, Any], file: str, server_here: bool = False) -> Experiment:
    """The experiment ``data`` (read from ``file``) checked and typed. The CPUs of [layout] must be
    this machine's where they are used on it: with [cluster], the load's are the load hosts', and with
    server = "worker" the server's are its worker's, checked when that host reads the file
    (``server_here``: this is that host)."""
    later = check_schema(data, file)  # the shape; a problem the reader says better (with the catalog) comes back
    top = Reader(file, data)
    name = top.string("name") or Path(file).stem
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name):  # the file's name: the schema checks a given one
        raise top.fail("name", name, "must be 1-64 letters, digits, '.', '_' or '-'")
    default_app = top.get("app")
    default_topology = top.subtable("topology")
    from arena.drivers import DRIVERS  # here, not where the file is imported: reading a store needs no driver

    driver = top.string("driver", "arena-load", tuple(DRIVERS))

    workloads = _workloads(top, read_mix=True)
    names = [w.name for w in workloads]
    if len(set(names)) != len(names):
        raise top.fail("workloads", names, "each workload needs its own name")

    load = Reader(file, top.subtable("load"), "load.")
    find, find_from = _find(load)
    levels = [] if find else _levels(load)
    open_model = (find is not None or any(lv.model == "open" for lv in levels)
                  or any(lv.model == "open" for w in workloads for lv in w.levels))
    arrival = _arrival(load, open_model)
    profile, window = _profile(load, open_model)
    if profile:
        arrival = SCHEDULE

    servers, thresholds = _servers(top, default_app, default_topology, workloads)
    soak_s, soak_every = _soak(load, find)
    duration, requests = _length(top, soak_s)

    _check_driver(top, driver, levels or [Level("open", 1.0)], requests is not None, workloads, arrival)
    goal = _goal(top)
    if find and goal.p99_ms is None:
        raise load.fail("find", "capacity", "needs the latency target it is the capacity for: [goal] p99_max")
    if find and requests is not None:
        raise top.fail("requests", requests, "a capacity search runs for a duration: give duration, not requests")

    cluster = _cluster(top, driver)
    server_cpus, load_cpus, services, service_cpus = _placement(top, servers, cluster, server_here)

    exp = Experiment(
        name=name, file=file, description=top.string("description", ""), driver=driver, servers=tuple(servers),
        levels=tuple(levels), workloads=tuple(workloads), duration_s=duration, requests=requests,
        warmup_s=top.duration("warmup", "2s", MAX_WARMUP_S), repetitions=top.integer("repetitions", 3, 1, 100),
        seed=top.integer("seed", 1, 0, 2**63 - 1), reuse_server=top.boolean("reuse_server", True),
        request_start=top.boolean("request_start", True),
        timeout_s=top.duration("timeout", "30s", MAX_TIMEOUT_S), error_threshold=top.number("error_threshold", VALIDITY_DEFAULTS["error_threshold"], 0, 1),
        drift_threshold=top.number("drift_threshold", VALIDITY_DEFAULTS["drift_threshold"], 0, 10),
        speed_threshold=top.number("speed_threshold", VALIDITY_DEFAULTS["speed_threshold"], 0, 10),
        others_threshold=top.number("others_threshold", VALIDITY_DEFAULTS["others_threshold"], 0, 1),
        server_cpus=server_cpus, load_cpus=load_cpus,
        services=services, service_cpus=service_cpus,
        load_threads=top.integer("load_threads", 1, 1, 256),
        reproduce=reproduction(data["reproduce"], set(names), top.fail) if "reproduce" in data else None,
        goal=goal, thresholds=tuple(thresholds), source=data, find=find, find_from=find_from,
        cluster=cluster, soak_every_s=soak_every, arrival=arrival, profile=profile, profile_window=window,
    )
    if later is not None:  # the reader let it pass: the schema's word stands
        raise later
    return exp


def _servers(top: Reader, default_app: Any, default_topology: dict[str, Any],
             workloads: list[Workload]) -> tuple[list[ServerConfig], list[Threshold]]:
    """Every [[servers]] entry's grid of configurations (each once: the same one in two entries is a
    mistake), its twins (an A/A test) and each label once; and the thresholds, the file's and each
    entry's (on its own configurations)."""
    servers: list[ServerConfig] = []
    entry_of: dict[ServerConfig, int] = {}
    thresholds = _thresholds(top, None)
    for i, raw in enumerate(top.table["servers"]):
        grid = server_grid(Reader(top.file, raw, f"servers[{i}]."), default_app, default_topology)
        thresholds += _thresholds(Reader(top.file, raw, f"servers[{i}]."), grid)
        for c in grid:
            if c in entry_of:  # never merged silently: one of them is a mistake
                raise top.fail(f"servers[{i}]", c.name, f"this configuration is in servers[{entry_of[c]}] too "
                                                        f"({c.key}); keep one")
            entry_of[c] = i
            servers.append(c)
    servers = [replace(c, user_app=measured_health(c.user_app, _measured_get(workloads[0]))) if c.user_app else c
               for c in servers]
    servers = twins(top, servers)
    seen: dict[str, ServerConfig] = {}
    for c in servers:
        if c.name in seen and seen[c.name] != c:
            raise top.fail("servers", c.name, f"two configurations have this label ({seen[c.name].key} and {c.key}); "
                                              "each needs its own, or their runs would be merged into one row")
        seen[c.name] = c
    return servers, thresholds


def _length(top: Reader, soak_s: float | None) -> tuple[float | None, int | None]:
    """A run's length: (duration, requests): a soak's, or ``duration`` (10 s by default), or ``requests``."""
    data = top.table
    if soak_s is not None and ("duration" in data or "requests" in data):
        key = "duration" if "duration" in data else "requests"
        raise top.fail(key, data[key], "a soak's length is [load] soak: give one or the other")
    duration = soak_s or top.duration("duration", None if "requests" in data else "10s", MAX_DURATION_S)
    if duration == 0:
        raise top.fail("duration", data.get("duration"), "must be above 0")
    return duration, top.integer("requests", None, 1, 10**12)


def _placement(top: Reader, servers: list[ServerConfig], cluster: Cluster | None, server_here: bool
               ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[ServiceSpec, ...], tuple[int, ...]]:
    """Where everything runs ([layout]): the server's CPUs, the load's, the services and theirs; a
    database pool needs its database, and a fleet's instances their CPUs."""
    lay = Reader(top.file, top.subtable("layout"), "layout.")
    server_local = server_here or cluster is None or cluster.server == "here"  # the server's CPUs are this machine's
    server_cpus, load_cpus = _layout(lay, server_local, cluster is None)
    services = _services(top)
    entries = top.table["servers"]
    pooled = next((i for i, raw in enumerate(entries) if raw.get("pool") is not None), None)
    if pooled is not None and not any(s.kind == "postgres" for s in services):
        raise Reader(top.file, entries[pooled], f"servers[{pooled}].").fail(
            "pool", entries[pooled]["pool"], "sizes the database pool: declare [[services]] kind = \"postgres\"")
    service_cpus = _cpus(lay, "service_cpus", server_local) or server_cpus
    if set(service_cpus) & set(load_cpus) and not lay.boolean("share", False):  # the server's never do, but shared
        raise lay.fail("service_cpus", lay.get("service_cpus"), "must not overlap load_cpus")
    if server_local or lay.get("server_cpus") is not None:  # else the server host's default layout, checked there
        for c in servers:
            try:
                instance_cpus(list(server_cpus), c.topology)
            except ArenaError as e:
                raise top.fail("servers", c.name, str(e)) from None
    return server_cpus, load_cpus, services, service_cpus


def workloads_of(definition: dict[str, Any], file: str = UNNAMED) -> dict[str, Workload]:
    """The workloads of an experiment's (stored) definition by name, read as the experiment reader
    reads them, without the parts that depend on the machine (the CPU layout)."""
    return {w.name: w for w in _workloads(Reader(file, definition), read_mix=False)}


def _thresholds(r: Reader, grid: list[ServerConfig] | None) -> list[Threshold]:
    """``thresholds = ["p99 < 200ms", ...]`` of the experiment, or of a server entry (``grid``: its
    configurations, which alone its thresholds apply to)."""
    raw = r.get("thresholds")
    if raw is None:
        return []
    if not isinstance(raw, list) or not raw:
        raise r.fail("thresholds", raw, 'must be a list such as ["p99 < 200ms", "errors < 0.1%"]')
    out = []
    for i, text in enumerate(raw):
        try:
            t = parse_threshold(text)
        except ValueError as e:
            raise r.fail(element("thresholds", raw, i), text, str(e)) from None
        out.append(t if grid is None else replace(t, server=grid[0].server, configs=frozenset(c.key for c in grid)))
    return out


def thresholds_of(definition: dict[str, Any], file: str = UNNAMED) -> list[Threshold]:
    """The thresholds of an experiment's (stored) definition. A server entry's apply to the
    configurations it expands to; where that cannot be read here (its app moved), to its server."""
    top = Reader(file, definition)
    out = _thresholds(top, None)
    for i, raw in enumerate(definition.get("servers") or []):
        r = Reader(file, raw, f"servers[{i}].")
        if not isinstance(raw, dict) or raw.get("thresholds") is None:
            continue
        try:
            out += _thresholds(r, server_grid(r, definition.get("app"), definition.get("topology") or {}))
        except ArenaError:
            out += [replace(t, server=raw.get("server")) for t in _thresholds(r, None)]
    return out


def goal_of(definition: dict[str, Any], file: str = UNNAMED) -> Goal:
    """The goal of an experiment's (stored) definition ([goal]; none: no limits)."""
    return _goal(Reader(file, definition))


def _cluster(top: Reader, driver: str) -> Cluster | None:
    """``[cluster]``: address (a Dask scheduler, tcp://ip:port), server_host (default: the
    scheduler's host: where this machine's server listens for the load hosts)."""
    if "cluster" not in top.table:
        return None
    r = Reader(top.file, top.subtable("cluster"), "cluster.")
    address = r.string("address", "")
    m = re.fullmatch(r"tcp://([0-9.]+|\[[0-9a-fA-F:]+\]):(\d{1,5})", address)
    if not m or not _ip(m.group(1).strip("[]")):
        raise r.fail("address", address or None, "a Dask scheduler's address, tcp://IP:PORT")
    where = r.string("server", "here", ("here", "worker"))
    server_host = r.string("server_host", m.group(1).strip("[]") if where == "here" else None)
    if where == "worker" and "server_host" in r.table:
        raise r.fail("server_host", server_host, "not with server = \"worker\": the server listens on its worker's address")
    if server_host is not None and not _ip(server_host):
        raise r.fail("server_host", server_host, "an IP address of this machine that the load hosts reach")
    if driver != "arena-load":
        raise top.fail("driver", driver, "several load hosts ([cluster]) run arena-load: driver = \"arena-load\"")
    return Cluster(address, server_host, where)


def _ip(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


def _goal(top: Reader) -> Goal:
    """``[goal]``: p99_max (a duration), memory_max (a size: PSS), error_max (a share of the requests),
    threshold (the smallest difference worth calling one); for streams of server-sent events,
    first_event_p99_max and event_gap_p99_max (durations)."""
    g = Reader(top.file, top.subtable("goal"), "goal.")
    p99, first, gap = (g.duration(key, None, MAX_TIMEOUT_S) for key in ("p99_max", "first_event_p99_max",
                                                                          "event_gap_p99_max"))
    for key, value in (("p99_max", p99), ("first_event_p99_max", first), ("event_gap_p99_max", gap)):
        if value == 0:
            raise g.fail(key, g.table[key], "must be above 0")
    error = g.share("error_max")
    ms = (lambda s: None if s is None else 1000 * s)
    return Goal(ms(p99), g.size_mib("memory_max"), None if error is None else 100 * error,
                g.number("threshold", THRESHOLD, 0, 1), ms(first), ms(gap))


def goal_table(goal: Goal) -> dict[str, Any]:
    """The [goal] table that reads back as ``goal`` (_goal): what a definition made from a Goal object
    (arena tune's) stores, typed as the reader takes numbers (seconds, MiB, a share): no text made to
    be parsed again."""
    table: dict[str, Any] = {}
    if goal.p99_ms is not None:
        table["p99_max"] = goal.p99_ms / 1000
    if goal.error_pct is not None:
        table["error_max"] = goal.error_pct / 100
    if goal.memory_mib is not None:
        table["memory_max"] = goal.memory_mib
    if goal.threshold != THRESHOLD:
        table["threshold"] = goal.threshold
    for key, ms in (("first_event_p99_max", goal.first_event_ms), ("event_gap_p99_max", goal.event_gap_ms)):
        if ms is not None:
            table[key] = ms / 1000
    return table


def _workloads(top: Reader, read_mix: bool) -> list[Workload]:
    """The [workload] or [[workloads]] of an experiment, each with its clients: the [clients]
    table (keep_alive at the top level is its default) and a workload's own ``clients`` over it."""
    default = _clients(top, "clients", Clients(keep_alive=top.boolean("keep_alive", True)))
    if "workloads" in top.table:
        return [_workload(Reader(top.file, w, f"workloads[{i}]."), named=True, read_mix=read_mix, clients=default)
                for i, w in enumerate(top.table["workloads"])]
    return [_workload(Reader(top.file, top.subtable("workload"), "workload."), named=False, read_mix=read_mix,
                      clients=default)]


def _clients(r: Reader, key: str, default: Clients) -> Clients:
    """A clients table under ``key`` of ``r`` over ``default`` (plan.clients reads it)."""
    cl = Reader(r.file, r.subtable(key), f"{r.prefix}{key}.")
    return read_clients(cl.table, default, cl.fail, lambda k, most: cl.duration(k, None, most))


def _find(ld: Reader) -> tuple[str | None, float | None]:
    """``[load] find = "capacity"``: each configuration's capacity is searched (the highest open rate
    within [goal] p99_max) instead of fixed levels; ``rates``, if given, is where the search starts."""
    if "find" not in ld.table:
        return None, None
    ld.unknown({"model", "find", "rates", "arrival", "profile", "window"})
    ld.string("find", None, ("capacity",))
    if ld.string("model", "open", MODELS) != "open":
        raise ld.fail("model", ld.get("model"), "must be \"open\" with find = \"capacity\" (a capacity is a rate)")
    start = ld.get("rates")
    if start is not None and not (isinstance(start, (int, float)) and not isinstance(start, bool) and 0 < start <= 1e7):
        raise ld.fail("rates", start, "with find = \"capacity\": the rate the search starts from, one number above 0")
    return "capacity", None if start is None else float(start)


SOAK_LEAST_S = 30.0  # a soak shorter than this tells no growth from the start's
SOAK_EVERY_S = (1.0, 60.0)  # how often a soak samples each process: at least every minute


def _soak(ld: Reader, find: str | None) -> tuple[float | None, float | None]:
    """``[load] soak = "10m"``: one long run at each level, each process's PSS sampled every
    ``soak_every`` (5 s by default); (its length, the sampling interval), or (None, None)."""
    if "soak" not in ld.table:
        if "soak_every" in ld.table:
            raise ld.fail("soak_every", ld.get("soak_every"), "applies to a soak: give soak = \"10m\" too")
        return None, None
    if find:
        raise ld.fail("soak", ld.get("soak"), "a soak runs at given levels, not with find = \"capacity\"")
    soak = ld.duration("soak", None, MAX_DURATION_S)
    if soak is None or soak < SOAK_LEAST_S:
        raise ld.fail("soak", ld.get("soak"), f"must be a duration of at least {SOAK_LEAST_S:g}s, such as \"10m\"")
    every = ld.duration("soak_every", "5s", SOAK_EVERY_S[1])
    if every < SOAK_EVERY_S[0] or every * 3 > soak:
        raise ld.fail("soak_every", ld.get("soak_every"), f"must be a duration from {SOAK_EVERY_S[0]:g}s to "
                                                          f"{SOAK_EVERY_S[1]:g}s, a third of the soak at most")
    return soak, every


def _arrival(ld: Reader, open_model: bool) -> str:
    """``[load] arrival``: how the open model's requests are spaced (results.run_setup.ARRIVALS)."""
    if "arrival" in ld.table and not open_model:
        raise ld.fail("arrival", ld.get("arrival"), "applies to model = \"open\" (a closed model's clients "
                                                    "send when answered)")
    return ld.string("arrival", ARRIVALS[0], ARRIVALS)


def _profile(ld: Reader, open_model: bool) -> tuple[tuple[str, ...], str | None]:
    """``[load] profile = "access.log"`` (or a list of logs, relative to the experiment file) and its
    ``window``: the open model sends at the logs' arrival times, scaled to each level's mean rate
    (traffic.profile); (the logs' paths, the window) or ((), None)."""
    raw = ld.get("profile")
    if raw is None:
        if "window" in ld.table:
            raise ld.fail("window", ld.get("window"), "applies to a profile: give profile = \"access.log\" too")
        return (), None
    if not open_model:
        raise ld.fail("profile", raw, "applies to model = \"open\": its rates are the profile's mean rates")
    if "arrival" in ld.table:
        raise ld.fail("arrival", ld.get("arrival"), "a profile sends at its log's times: give arrival or profile")
    names = raw if isinstance(raw, list) else [raw]
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ld.fail("profile", raw, "must be an access log's path, or a list of them")
    paths = []
    for name in names:
        where = Path(ld.file).resolve().parent / name
        if not where.is_file():
            raise ld.fail("profile", raw, f"{where}: no such log file")
        paths.append(str(where))
    window = ld.string("window")
    kind = length = None
    if window is not None:
        try:
            kind, length = parse_window(window, parse_duration)
        except ValueError as e:
            raise ld.fail("window", window, str(e)) from None
    try:  # read now, not when the first run's load starts: a log that is none is bad input
        times = profile_times(tuple(paths))
    except ArenaError as e:
        raise ld.fail("profile", raw, str(e)) from None
    try:
        schedule(times, window_kind=kind, window_s=length)
    except ValueError as e:
        raise ld.fail("window", window, str(e)) from None
    return tuple(paths), window


def _levels(ld: Reader) -> list[Level]:
    """A ``[load]`` table (or a workload's ``load``): the model and its levels."""
    model = ld.string("model", "closed", MODELS)
    if model == "closed":
        if "rates" in ld.table:
            raise ld.fail("rates", ld.get("rates"), "applies to model = \"open\" (closed uses concurrency)")
        return [Level("closed", c) for c in ld.counts("concurrency", 1, 100_000) if c is not None] or [Level("closed", 10)]
    if "concurrency" in ld.table:
        raise ld.fail("concurrency", ld.get("concurrency"), "applies to model = \"closed\" (open uses rates)")
    rates = ld.get("rates")
    if rates is None:
        raise ld.fail("rates", rates, "must be a number of requests per second above 0, or a list of them")
    return [Level("open", float(r)) for r in dict.fromkeys(rates if isinstance(rates, list) else [rates])]


def _check_driver(top: Reader, driver: str, levels: list[Level], requests: bool, workloads: list[Workload],
                  arrival: str) -> None:
    """Refuse, now and not after the first server start, what the driver cannot run."""
    from arena.drivers import DRIVERS

    caps = DRIVERS[driver].capabilities
    for i, w in enumerate(workloads):
        model = (w.levels or levels)[0].model
        asked = dict(model=model, requests=requests, method=w.method, keep_alive=w.clients.keep_alive,
                     expect_status=w.expect_status, mix=w.mix_file is not None, link=w.clients.link,
                     arrival=arrival)
        found = caps.problems(**asked)
        if found:
            key, value, why = found[0]
            able = [name for name, d in DRIVERS.items() if not d.capabilities.problems(**asked)]
            where = f"workload.{key}" if key in ("method", "expect_status", "mix") else key
            if key == "load.model" and w.levels:
                where = f"workloads[{i}].load.model"  # the workload's own load
            if key == "load.arrival" and value == SCHEDULE:
                where, value = "load.profile", "a profile"  # what the file says
            raise top.fail(where, value, f"driver \"{driver}\": {why} (drivers that can: {', '.join(able) or 'none'})")


def _workload(r: Reader, named: bool, read_mix: bool = True, clients: Clients = Clients()) -> Workload:
    """A [workload] table: one request (``path``, ``method``) or a request mix file (``mix``, read
    relative to the experiment file unless ``read_mix`` is off: a stored definition's file may be gone).
    A named workload may have its own ``clients`` over the experiment's, and its own ``load``."""
    own = Reader(r.file, r.subtable("load"), f"{r.prefix}load.")
    for key in ("soak", "soak_every", "arrival", "profile", "window"):
        if key in own.table:
            raise own.fail(key, own.get(key), "applies to the experiment's [load] only")
    levels = tuple(_levels(own)) if "load" in r.table else ()
    if "clients" in r.table:
        clients = _clients(r, "clients", clients)
    expect = r.string("expect_status")  # its shape is the schema's; a range must also run upwards
    if expect is not None and any(len(p) == 7 and p[:3] > p[4:] for p in (p.strip() for p in expect.split(","))):
        raise r.fail("expect_status", expect, "a range runs from the lower status to the higher, such as \"200-204\"")
    path = r.string("path", "/work?cpu_ms=5&io_ms=10")
    name = r.string("name") if named else "default"
    mix_file, mix = r.string("mix"), None
    if mix_file is not None:
        for key in ("path", "method"):
            if key in r.table:
                raise r.fail(key, r.get(key), "a workload is one request (path, method) or a mix file, not both")
        if read_mix:
            where = Path(r.file).resolve().parent / mix_file
            try:
                mix = load_mix(where)
            except ArenaError as e:
                raise r.fail("mix", mix_file, str(e).removeprefix(f"--mix {where}: ").removeprefix(f"{where}: ")) from None
        return Workload("/", mix.methods[0] if mix else "GET", name, expect, mix_file, mix, clients, levels,
                        r.integer("events", None, 1, 100_000))
    return Workload(path, r.string("method", "GET", ("GET", "POST", "HEAD")), name, expect, clients=clients,
                    levels=levels, events=r.integer("events", None, 1, 100_000))


def _measured_get(w: Workload) -> str | None:
    """What a workload measures as a GET (its path, or its mix's first GET): a user's app's health path
    where none is given."""
    if w.mix is not None:
        return w.mix.first_get()
    return w.path if w.method == "GET" and w.mix_file is None else None


def _services(top: Reader) -> tuple[ServiceSpec, ...]:
    """[[services]]: each a kind (postgres, http) and its settings, checked now; one of each kind."""
    raw = top.get("services", [])
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise top.fail("services", raw, "must be [[services]] tables, each with a kind")
    out = []
    for i, table in enumerate(raw):
        r = Reader(top.file, table, f"services[{i}].")
        kind = r.string("kind", None, KINDS)
        if kind is None:
            raise r.fail("kind", None, f"must be one of {', '.join(KINDS)}")
        settings = {k: v for k, v in table.items() if k != "kind"}
        check_settings(kind, settings, f"{top.file}: services[{i}].")
        if any(s.kind == kind for s in out):
            raise r.fail("kind", kind, "is already declared (one service of each kind)")
        out.append(ServiceSpec(kind, settings))
    return tuple(out)


def _cpus(r: Reader, key: str, here: bool) -> tuple[int, ...]:
    """The CPU list of [layout] ``key`` (() where not given), checked against this machine's CPUs where
    it is used ``here``, else its form only."""
    v = r.get(key)
    if v is None:
        return ()
    try:
        return tuple((parse_cpu_list if here else cpu_list)(str(v), flag=f"{r.file}: layout.{key}"))
    except ArenaError as e:
        raise ArenaError(str(e).replace(f"layout.{key}: ", f"layout.{key} = {show_value(v)}: ", 1)) from None


def _layout(r: Reader, server_here: bool, load_here: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(server CPUs, load CPUs): those given (_cpus), or the default layout of this machine's."""
    available = sorted(os.sched_getaffinity(0))
    picked = {key: _cpus(r, key, here) for key, here in (("server_cpus", server_here), ("load_cpus", load_here))
              if r.get(key) is not None}
    share = r.boolean("share", False)
    if len(picked) == 1:
        raise r.fail(next(iter(picked)), r.get(next(iter(picked))), "set both server_cpus and load_cpus, or neither")
    if not picked:
        return default_layout(available, share)
    server, load = picked["server_cpus"], picked["load_cpus"]
    overlap = set(server) & set(load)
    if overlap and not share:
        raise r.fail("load_cpus", r.get("load_cpus"), f"must not overlap server_cpus (both have {format_cpu_list(overlap)}), "
                                                      "unless share = true: the generator's cost then counts in the figures")
    return server, load


