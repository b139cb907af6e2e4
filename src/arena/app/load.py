"""Load at a URL with arena-load: ``arena load``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

import psutil

from arena.atomic import write_file
from arena.drivers import cluster as cluster_driver, native
from arena.results.load_result import LoadResult, to_dict
from arena.results.validity import DRIFT_THRESHOLD, ERROR_THRESHOLD, Flag, validity_flags
from arena.drivers.spec import LoadSpec
from arena.cpus import format_cpu_list
from arena.errors import ArenaError
from arena.results.runs import SHARED


@dataclass(frozen=True)
class Loaded:
    result: LoadResult
    flags: list[Flag]  # why the run cannot be trusted (the rules of an experiment's runs)
    shared: list[int] = field(default_factory=list)  # CPUs the generator shared with the server (--share-cpus)


def load(spec: LoadSpec, cpus: list[int] | None = None, json_path: str | None = None,
         cluster: str | None = None, share: bool = False) -> Loaded:
    """Drive ``spec`` with arena-load pinned to ``cpus`` and judge the run as an experiment's runs
    are judged; with ``json_path``, also write its JSON result there (refused before the load when
    the file cannot be written); with ``cluster`` (a Dask scheduler's address), from its load hosts
    together (drivers/cluster.py)."""
    if json_path is not None:
        try:
            open(json_path, "a").close()
        except OSError as e:
            raise ArenaError(f"--json {json_path}: cannot write it ({e.strerror})") from None
    before = serving(spec.url)
    shared = sorted(set(cpus or ()) & server_cpus(before))
    if shared and not share:
        raise ArenaError(f"--cpus {format_cpu_list(cpus)}: the server at {spec.url} may run on CPU(s) "
                         f"{format_cpu_list(shared)} too: keep the generator apart, or share them knowingly "
                         f"(--share-cpus: {SHARED})")
    result = cluster_driver.run(spec, cluster, cpus=cpus) if cluster else native.run(spec, cpus=cpus)
    if json_path is not None:  # arena-load's document; from several hosts, the merged result and each host's
        doc = ({"merged": to_dict(replace(result, raw=None)), "hosts": result.raw["hosts"]} if result.hosts
               else result.raw)
        write_file(json_path, json.dumps(doc, indent=1), "--json")
    lost = [p for p in before if not _alive(p)]
    flags = validity_flags(result, error_threshold=ERROR_THRESHOLD, drift_threshold=DRIFT_THRESHOLD,
                           server_died=bool(before) and len(lost) == len(before),
                           processes_lost=(len(lost), len(before)) if lost and len(lost) < len(before) else None)
    return Loaded(result, flags, shared)


def server_cpus(processes: list[psutil.Process]) -> set[int]:
    """The CPUs the server's processes may run on (their affinity); none where it cannot be read."""
    found: set[int] = set()
    for p in processes:
        try:
            found |= set(p.cpu_affinity())
        except (psutil.Error, OSError):
            pass
    return found


def serving(url: str) -> list[psutil.Process]:
    """The processes of the server at ``url`` when it listens on this machine: those holding its
    listening socket, and their children (a server's workers). An experiment's run is judged by its
    server's processes; so is ``arena load``'s, where it can find them. [] where it cannot."""
    parts = urlsplit(url)
    port = parts.port or 80

    def listens(p: psutil.Process) -> bool:
        return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
                   for c in p.net_connections(kind="inet"))

    try:  # the system's table names one holder of a shared socket (a worker, say): climb to the first
        holders = {c.pid for c in psutil.net_connections(kind="inet")
                   if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid}
        found = {}
        for pid in holders:
            top = psutil.Process(pid)
            while (parent := top.parent()) is not None and parent.pid != 1 and listens(parent):
                top = parent
            for q in (top, *top.children(recursive=True)):
                found[q.pid] = q
    except (psutil.Error, OSError, ValueError):
        return []
    return list(found.values())


def _alive(p: psutil.Process) -> bool:
    """Still the same process (psutil compares its start time: a reused pid is not it)."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
