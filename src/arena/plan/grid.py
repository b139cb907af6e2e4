"""An experiment's ``[[servers]]`` entries -> the grid of server configurations each spans: its
knobs, settings, declared variables, raw flags, pool, topology and limits, each a value or a list
(a grid axis), every combination a ServerConfig; an entry's app (a built-in subject or the user's
own); the same configuration listed twice (an A/A test). Each refusal one line naming the file, the
entry's key, the value and what is allowed."""

from __future__ import annotations

import itertools
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from arena.errors import ArenaError, did_you_mean
from arena.limits import LEAST_MEMORY_MIB, PERIOD_RANGE_S, PERIOD_S, Limits, cpu_problem, memory_problem, period_problem
from arena.plan.experiment import ServerConfig
from arena.plan.reader import MAX_TIMEOUT_S, Reader, element, parse_duration, parse_size_mib
from arena.servers import catalog
from arena.subjects import APPS, App
from arena.subjects.user import INTERFACES, user_app
from arena.topology import Topology, topology, value_problem

SERVER_KEYS = {"server", "app", "label", "processes", "threads", "connections", "pool", "options", "env", "topology",
               "thresholds", "cpu_limit", "cpu_period", "memory_limit"}
USER_APP_KEYS = {*INTERFACES, "chdir", "venv", "health", "ready_timeout", "warmup", "name"}


def _app(r: Reader, value: Any, entry: catalog.Server) -> App:
    """A configuration's app: a built-in subject's name; a user's config.ru or module:callable (a
    string); or a table naming one (``rack``, ``wsgi`` or ``asgi``) with how it is run. Paths are
    relative to the experiment file's directory."""
    base = Path(r.file).resolve().parent
    if isinstance(value, str) and value in APPS:
        app = APPS[value]
    elif isinstance(value, str):
        try:
            app = user_app(value, base=base, serves=entry.interfaces)
        except ArenaError as e:
            raise r.fail("app", value, str(e).removeprefix("--app: ").removeprefix("--")) from None
    elif isinstance(value, dict):
        t = Reader(r.file, value, f"{r.prefix}app.")
        t.unknown(USER_APP_KEYS)
        given = [k for k in INTERFACES if k in value]
        if len(given) != 1:
            raise r.fail("app", value, "a table names one of rack = \"config.ru\", wsgi = \"module:callable\" or "
                                       "asgi = \"module:callable\"")
        warmup = t.get("warmup", [])
        if not isinstance(warmup, list) or not all(isinstance(p, str) for p in warmup):
            raise t.fail("warmup", warmup, "must be a list of paths")
        try:
            app = user_app(t.string(given[0]), base=base, interface=given[0], chdir=t.string("chdir"),
                           venv=t.string("venv"), health=t.string("health"),
                           ready_timeout_s=t.duration("ready_timeout", None, MAX_TIMEOUT_S), warmup=warmup,
                           name=t.string("name"), serves=entry.interfaces, flag=f"--{given[0]}")
        except ArenaError as e:
            raise r.fail("app", value, str(e).removeprefix("--")) from None
    else:
        raise r.fail("app", value, f"must be a built-in app ({', '.join(APPS)}), a config.ru path, module:callable "
                                   "or a table")
    if app.interface not in entry.interfaces:
        raise r.fail("app", value, f"{entry.name} cannot serve it (a {app.interface} app; it serves: "
                                   f"{', '.join(entry.interfaces)})")
    return app


def twins(top: Reader, servers: list[ServerConfig]) -> list[ServerConfig]:
    """The configurations, those listed more than once under different labels marked as twins (an A/A
    test: each runs as its own cell, so one configuration can be compared with itself)."""
    by_key: dict[str, list[ServerConfig]] = {}
    for c in servers:
        by_key.setdefault(c.key, []).append(c)
    for same in (v for v in by_key.values() if len(v) > 1):
        unlabeled = next((c for c in same if c.label is None), None)
        if unlabeled is not None:
            other = next(c for c in same if c is not unlabeled)
            raise top.fail("servers", unlabeled.key, f"is the same configuration as {other.name!r}: give each a "
                                                     "label to run it twice (an A/A test), or keep one")
    return [replace(c, twin=True) if len(by_key[c.key]) > 1 else c for c in servers]


def server_grid(r: Reader, default_app: Any, default_topology: dict[str, Any] = {}) -> list[ServerConfig]:
    name = r.get("server")
    if not isinstance(name, str) or name not in catalog.CATALOG:
        raise r.fail("server", name, f"unknown server ({did_you_mean(name, catalog.CATALOG)}servers: "
                                     f"{', '.join(catalog.CATALOG)})")
    entry = catalog.CATALOG[name]
    allowed = SERVER_KEYS | set(catalog.options_for(entry))
    for key in r.table:  # another server's setting: say which this one has
        if key not in allowed and any(key in catalog.options_for(s) for s in catalog.CATALOG.values()):
            raise r.fail(key, r.table[key], catalog.setting_problem(entry, key, r.table[key]))
    resolved = _app(r, r.get("app", default_app or entry.apps[0]), entry)
    app, user = resolved.name, resolved if resolved.user else None
    knobs = catalog.knobs_for(entry, resolved)
    axes = {}
    for knob in ("processes", "threads", "connections"):
        if r.get(knob) is not None and knob not in knobs:
            raise r.fail(knob, r.get(knob), f"{name} serving {app} has no {knob} knob (its knobs: {', '.join(knobs) or 'none'})")
        values = r.counts(knob, 1, (knobs[knob].hi or catalog.KNOB_MAX[knob]) if knob in knobs else 1)
        axes[knob] = values
    label = r.string("label")
    pools = _pool_axis(r)
    default_threads = knobs["threads"].default if "threads" in knobs else None
    settings, env, options = _settings_axis(r, entry), _env_axis(r), _options_axis(r)
    topologies = _topology_axis(r, entry, default_topology)
    grid = itertools.product(axes["processes"], axes["threads"], axes["connections"], pools, settings, env, options,
                             topologies, _limits_axis(r))
    configs = list(dict.fromkeys(ServerConfig(name, app, p, t, c, None, _pool(pool, t or default_threads or 1), user,
                                              st, ev, op, tp, limits=lim)
                                 for p, t, c, pool, st, ev, op, tp, lim in grid))
    if label is not None:
        configs = [replace(c, label=label if len(configs) == 1 else f"{label} {c.key.split('] ', 1)[-1]}")
                   for c in configs]
    return configs


def _limits_axis(r: Reader) -> list[Limits]:
    """``cpu_limit`` (cores of CPU time per period: 0.5, 1.5, or "none"), ``cpu_period`` (1 ms to
    1 s; 100 ms by default) and ``memory_limit`` (a size, or "none"), each a value or a list (a grid
    axis): every combination. A quota above this machine's cores could never bind."""
    cores = os.cpu_count() or 1

    def number(x: Any) -> float | None:
        return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x <= cores else None

    def period(x: Any) -> float | None:
        s = parse_duration(x)
        return s if s is not None and PERIOD_RANGE_S[0] <= s <= PERIOD_RANGE_S[1] else None

    def size(x: Any) -> float | None:
        mib = parse_size_mib(x)
        return mib if mib is not None and memory_problem(mib) is None else None

    cpu = r.axis("cpu_limit", number, f'must be a number of cores above 0 and at most this machine\'s {cores} '
                                      '(0.5, 1.5), or "none"', none=True)
    periods = r.axis("cpu_period", period, 'must be a duration from 1ms to 1s, such as "100ms"')
    memory = r.axis("memory_limit", size, f'must be a size of at least {LEAST_MEMORY_MIB:g}MiB (the smallest a '
                                         'container runtime sets) such as "512MiB" or "1GiB", or "none"', none=True)
    if problem := period_problem(periods != [None], any(c is not None for c in cpu), "cpu_limit"):
        raise r.fail("cpu_period", r.get("cpu_period"), problem)
    for c in cpu:
        for p in periods:
            if c is not None and (problem := cpu_problem(c, PERIOD_S if p is None else p)):
                raise r.fail("cpu_limit", c, problem)
    return list(dict.fromkeys(Limits(c, p if c is not None and p is not None else PERIOD_S, m)
                              for c in cpu for p in periods for m in memory))


def _axis(v: Any) -> list[Any]:
    """A grid axis: a list of values, or one value (an axis of one)."""
    return list(v) if isinstance(v, list) else [v]


def _settings_axis(r: Reader, entry: catalog.Server) -> list[tuple[tuple[str, Any], ...]]:
    """The named settings (``preload = [false, true]``, ``yjit = true``): every combination, each
    setting checked against the server's options and in their order."""
    names = [o for o in catalog.options_for(entry) if o in r.table]
    axes = []
    for o in names:
        values = _axis(r.get(o))
        for i, v in enumerate(values or [None]):
            problem = catalog.setting_problem(entry, o, v)
            if problem:
                raise r.fail(element(o, r.get(o), i) if values else o, v if values else r.get(o),
                             problem + ("" if isinstance(r.get(o), list) else ", or a list of them"))
        axes.append(list(dict.fromkeys(catalog.options_for(entry)[o].check(v) for v in values)))
    return [tuple(zip(names, combo)) for combo in itertools.product(*axes)]


def _topology_axis(r: Reader, entry: catalog.Server, default: dict[str, Any]) -> list[Topology]:
    """``topology = { proxy = "nginx", buffering = [true, false] }`` (over the file's ``[topology]``,
    key by key): every combination, each value and each combination checked (topology.topology)."""
    own = r.get("topology", {})
    if not isinstance(own, dict):
        raise r.fail("topology", own, "must be a table, e.g. topology = { proxy = \"nginx\" }")
    table = {**default, **own}

    def where(key: str) -> Reader:  # the entry's own table, or the file's [topology]
        return Reader(r.file, table, f"{r.prefix}topology." if key in own else "topology.")

    for n, value in table.items():
        for v in _axis(value) or [None]:
            problem = value_problem(n, v)
            if problem:
                raise where(n).fail(n, value, problem + ("" if isinstance(value, list) else ", or a list of them"))
    out = []
    for combo in itertools.product(*(dict.fromkeys(_axis(v)) for v in table.values())):
        given = dict(zip(table, combo))
        try:
            out.append(topology(given, entry, catalog.unix_servers()))
        except ArenaError as e:
            key, _, why = str(e).partition(": ")
            raise where(key).fail(key, given.get(key), why) from None
    return list(dict.fromkeys(out))


def _env_axis(r: Reader) -> list[tuple[tuple[str, str], ...]]:
    """``env = { NAME = "value" }``, a list of values being an axis (``env.RUBY_YJIT_ENABLE = ["0", "1"]``)."""
    from arena.servers.launch import env_problem  # here: reading a store starts no server

    table = r.get("env", {})
    if not isinstance(table, dict):
        raise r.fail("env", table, "must be a table of variables: env = { NAME = \"value\" }")
    names = sorted(table)
    for n in names:
        for v in _axis(table[n]) or [None]:
            problem = env_problem(n, v)
            if problem:
                raise Reader(r.file, table, f"{r.prefix}env.").fail(n, table[n], problem)
    return [tuple(zip(names, combo)) for combo in itertools.product(*(dict.fromkeys(_axis(table[n])) for n in names))]


def _options_axis(r: Reader) -> list[tuple[str, ...]]:
    """``options``: raw flags appended to the server's command, a list of strings; a list of such
    lists is an axis."""
    v = r.get("options", [])
    sets = v if v and all(isinstance(x, list) for x in v) else [v]
    return list(dict.fromkeys(tuple(flags) for flags in sets))


def _pool_axis(r: Reader) -> list[int | str | None]:
    """``pool``: a size, "threads" or "threads/2", or a list of them (a grid axis); absent: [None]."""
    v = r.get("pool")
    if v is None:
        return [None]
    return list(dict.fromkeys(v if isinstance(v, list) else [v]))


def _pool(rule: int | str | None, threads: int) -> int | None:
    """A pool rule for a configuration with ``threads`` threads per process -> its size."""
    if rule == "threads":
        return threads
    if rule == "threads/2":
        return max(1, threads // 2)
    return rule
