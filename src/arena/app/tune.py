"""``arena tune``: from an app, its CPUs, its memory limit and its latency target to a configuration
to deploy, measured, within a time budget.

1. Calibrate: per server, a few short runs at one client (1x1, processes at the core count, 1 x
   CALIBRATION_THREADS where it has threads) give the model its figures (model/calibrate.py);
2. predict: every processes x threads of each server's grid (model/recommend.py) that fits the memory
   limit, ranked by its capacity within the p99 target as the simulator predicts it (its p99 is the
   closer; about 10 ms a rate tried), or by the model's throughput at the load given;
3. race the best RACE of them, the model learning from each round (a configuration it ranked low
   may join), and find the finalists' capacity to FINAL_WITHIN (model/search.py) on the real server.

Every run is stored as it ends, in one experiment whose definition is the request (its name a hash
of it), so the same ``arena tune`` again resumes: the search asks for runs by contender, level and
repetition, and the ones stored are not made again. ``[load] find = "capacity"`` in an experiment
file runs the same capacity search for each of its configurations (``search_capacities``).
"""

from __future__ import annotations

import hashlib
import json
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from arena.app.storage import open_store, results
from arena.app.predict import over_the_cpus
from arena.errors import ArenaError, NotMeasured
from arena.limits import Limits
from arena.model.calibrate import Calibration, Observation, calibrate
from arena.model.estimate import START_S
from arena.model.observe import observations
from arena.model.contenders import contenders_of, key_for, key_of, learner, race_field, with_reach
from arena.model.recommend import grid
from arena.app.measurer import Stored
from arena.model.capacity import Ask, Key
from arena.model.search import Contender, Tuning, search
from arena.plan.experiment import Experiment, Level, ServerConfig, Workload
from arena.plan.parse import goal_table, parse_experiment
from arena.results.aggregate import Figure
from arena.results.answer import Goal
from arena.results.runs import Run
from arena.results.why.diagnose import diagnose
from arena.results.why.finding import Why
from arena.runner import Event, Seams, idle_memory_mib
from arena.servers import catalog
from arena.servers.cgroup import limits_problem

DURATION_S = 3.0  # measured per run: short, the search repeats where it matters
WARMUP_S = 1.0
BUDGET_S = 600.0
ERROR_PCT = 1.0  # errors allowed at a capacity unless the goal says
CALIBRATION_THREADS = 4
FINAL_WITHIN = 0.02  # the finalists' capacity is bracketed this narrow (hi / lo - 1): 2%, where 5% told too little apart
CALIBRATION = Level("closed", 1)


@dataclass(frozen=True)
class Request:
    """What the user asks ``arena tune`` for."""

    server_cpus: tuple[int, ...]
    load_cpus: tuple[int, ...]
    p99_ms: float
    memory_mib: float | None = None
    error_pct: float = ERROR_PCT
    servers: tuple[str, ...] = ()  # () = every installed server that serves the app
    load: Level | None = None  # a fixed load; None: capacity
    app: str | None = None  # a subject app or the user's config.ru / module:callable; None: the subjects
    app_options: dict = field(default_factory=dict)  # chdir, venv, interface, health, warmup, ready_timeout
    path: str | None = None
    mix: str | None = None
    budget_s: float = BUDGET_S
    duration_s: float = DURATION_S
    warmup_s: float = WARMUP_S
    name: str | None = None
    processes: tuple[int, ...] = ()  # only these process counts (): the model's grid
    threads: tuple[int, ...] = ()  # only these thread counts (): the model's grid
    limits: Limits = Limits()  # a container's CPU quota and memory limit, each run measured under them
    profile: tuple[str, ...] = ()  # access logs whose arrival shape the open loads follow (capacity under it)

    @property
    def goal(self) -> Goal:
        return Goal(self.p99_ms, self.memory_mib, self.error_pct)

    @property
    def cores(self) -> float:
        """The CPU the server gets: its CPUs, or a smaller quota over them (the model's cores)."""
        cpus = float(len(self.server_cpus))
        return cpus if self.limits.cpu is None else min(cpus, self.limits.cpu)

    @property
    def memory_bound(self) -> tuple[float, str] | None:
        """What a configuration's memory must keep within, and the flag that says so: the goal's PSS
        budget (--memory-max) or the container's hard limit (--memory-limit), the smaller; None: neither."""
        given = ((self.memory_mib, "--memory-max"), (self.limits.memory_mib, "--memory-limit"))
        bounds = [(m, flag) for m, flag in given if m is not None]
        return min(bounds) if bounds else None


@dataclass(frozen=True)
class Chosen:
    key: Key
    name: str
    server: str
    processes: int | None
    threads: int | None
    app: object  # subjects.App
    throughput: float | None  # median at the level it is judged at (its capacity, or the load given)
    p99_ms: Figure  # there
    memory_mib: float | None  # median PSS there
    level: Level | None


@dataclass(frozen=True)
class Tuned:
    request: Request
    experiment: str
    store: str
    calibrations: dict[str, Calibration]
    left_out: dict[str, str]  # server -> why it was not tuned
    contenders: list[Contender]  # every grid point that fits, best predicted first
    grid_points: int  # grid points predicted (fitting the memory limit or not)
    tuning: Tuning
    chosen: Chosen | None
    names: dict[Key, str]
    elapsed_s: float
    calibration_runs: int
    why: Why = Why()  # the known pathologies found in the runs it made (results/why)


# ---------------------------------------------------------------------- the experiment it is stored as


def definition(req: Request, servers: Sequence[str], cores: float) -> dict:
    """The request as an experiment definition: its servers with their grids, the goal, the layout."""
    entries = []
    for name in servers:
        s = catalog.get_server(name)
        entry: dict = {"server": name, "app": _app_value(req, s)}
        points = space(req, name, cores) + _calibration_points(req, name, cores)
        procs = sorted({p for p, _ in points if "processes" in knobs(req, name)})
        threads = sorted({t for _, t in points if t is not None})
        if procs:
            entry["processes"] = procs
        if threads:
            entry["threads"] = threads
        entries.append({**entry, **req.limits.entry})
    goal = goal_table(req.goal)
    workload = ({"mix": str(Path(req.mix).resolve())} if req.mix else {"path": req.path} if req.path else
                {"path": "/"} if _users(req) else {})  # the subjects' /work is not a user's app's
    load = ({"model": "open", "find": "capacity"} if req.load is None else
            {"model": "closed", "concurrency": int(req.load.value)} if req.load.model == "closed" else
            {"model": "open", "rates": req.load.value})
    if req.profile:
        load["profile"] = [str(Path(f).resolve()) for f in req.profile]
    body = {"driver": "arena-load", "duration": f"{req.duration_s:g}s", "warmup": f"{req.warmup_s:g}s",
            "repetitions": 1, "seed": 1, "goal": goal, "workload": workload, "load": load, "servers": entries,
            "layout": {"server_cpus": ",".join(map(str, req.server_cpus)), "load_cpus": ",".join(map(str, req.load_cpus)),
                       **({"share": True} if set(req.server_cpus) & set(req.load_cpus) else {})}}
    name = req.name or "tune-" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:8]
    return {"name": name, "description": f"arena tune: {req.goal} on CPUs {body['layout']['server_cpus']}", **body}


def space(req: Request, server: str, cores: float) -> list[tuple[int, int | None]]:
    """The processes x threads of ``server`` tune considers: the model's grid (model/recommend.py),
    with the request's own process and thread counts where it gives them and the server has the knob."""
    have = knobs(req, server)
    default = grid(server, cores, have)
    procs = list(req.processes) if req.processes and "processes" in have else sorted({p for p, _ in default})
    threads = list(req.threads) if req.threads and "threads" in have else sorted({t for _, t in default},
                                                                                 key=lambda t: t or 0)
    return [(p, t) for p in procs for t in threads]


def knobs(req: Request, server: str) -> frozenset[str]:
    """The knobs of ``server`` serving the request's app: some apply to one interface only (granian's
    threads to WSGI), so an ASGI app's grid has no thread counts there."""
    s = catalog.get_server(server)
    return frozenset(catalog.knobs_for_interface(s, _interface(req, s)))


def _interface(req: Request, s: catalog.Server) -> str:
    """The interface ``s`` serves the request's app by: a subject's own, rack for a config.ru, else the
    one given or found by importing the app (the command line's), else the server's first Python one."""
    from arena.subjects import APPS

    if req.app is None or req.app in APPS:
        return APPS[req.app or s.apps[0]].interface
    if _rack(req):
        return "rack"
    return req.app_options.get("interface") or next((i for i in s.interfaces if i != "rack"), s.interfaces[0])


def _app_value(req: Request, s: catalog.Server) -> object:
    """An entry's app: the subject the server serves first, or the user's (a table with how it is run)."""
    if req.app is None:
        return s.apps[0]
    from arena.subjects import APPS

    if req.app in APPS:
        return req.app
    table: dict = {_interface(req, s): str(Path(req.app).resolve()) if _rack(req) else req.app}
    opts = req.app_options
    chdir = opts.get("chdir") or (None if _rack(req) else ".")
    for key, value in (("chdir", chdir), ("venv", opts.get("venv")), ("health", opts.get("health"))):
        if value:
            table[key] = str(Path(value).resolve()) if key != "health" else value
    if opts.get("warmup"):
        table["warmup"] = list(opts["warmup"])
    if opts.get("ready_timeout_s"):
        table["ready_timeout"] = f"{opts['ready_timeout_s']:g}s"
    return table


def _users(req: Request) -> bool:
    """Whether the request's app is a user's own (not a built-in subject)."""
    from arena.subjects import APPS

    return req.app is not None and req.app not in APPS


def _rack(req: Request) -> bool:
    """Whether the request's app is a user's Rack app: a config.ru, or a directory holding one (the
    command line resolved it: its interface)."""
    return req.app is not None and (req.app.endswith(".ru") or req.app_options.get("interface") == "rack")


def _calibration_points(req: Request, server: str, cores: float) -> list[tuple[int, int | None]]:
    """1x1, processes at the core count (at least 2: memory per process needs two counts), and 1 x
    CALIBRATION_THREADS where the server has threads for the app."""
    have = knobs(req, server)
    one_thread = 1 if "threads" in have else None
    points = [(1, one_thread)]
    if "processes" in have:
        points.append((max(2, int(cores)), one_thread))
    if "threads" in have:
        points.append((1, CALIBRATION_THREADS))
    return points


def servers_for(req: Request) -> tuple[list[str], dict[str, str]]:
    """The servers to tune (asked for, or every installed one serving the app) and why others are not."""
    wanted = list(req.servers) or list(catalog.CATALOG)
    out, left = [], {}
    for name in wanted:
        s = catalog.get_server(name)
        if not catalog.available(s, Path(req.app_options["venv"]) / "bin" if req.app_options.get("venv") else None):
            left[name] = f"not installed ({s.install_hint})"
        elif req.app is not None and _rack(req) != (s.language == "ruby"):
            left[name] = f"serves {', '.join(s.interfaces)}, not this app"
        elif req.app_options.get("interface") and req.app_options["interface"] not in s.interfaces:
            left[name] = f"serves {', '.join(s.interfaces)}, not this {req.app_options['interface']} app"
        else:
            out.append(name)
    return out, left


def experiment(req: Request, servers: list[str], left: dict[str, str]) -> Experiment:
    """The tune's experiment, each server that cannot serve the app left out (``left``, with why)."""
    cores = req.cores
    for name in list(servers):
        try:
            parse_experiment(definition(req, [name], cores), "arena tune")
        except ArenaError as e:
            servers.remove(name)
            left[name] = str(e).partition("servers[0].app = ")[2] or str(e)
    if not servers:
        raise ArenaError("arena tune: no server to tune: " + "; ".join(f"{k}: {v}" for k, v in left.items()))
    return parse_experiment(definition(req, servers, cores), "arena tune")


# ---------------------------------------------------------------------- the use case


def tune(req: Request, store_path: str, on_event: Callable[[Event], None] = lambda e: None,
         on_step: Callable[[str], None] = lambda s: None, seams: Seams = Seams(),
         clock: Callable[[], float] = time.monotonic) -> Tuned:
    start = clock()
    problem = limits_problem(req.limits)
    if problem:  # before any server starts
        raise ArenaError(f"arena tune: {req.limits.keys}: {problem}")
    servers, left = servers_for(req)
    exp = experiment(req, servers, left)
    cores = req.cores
    measurer = Stored(exp, store_path, seams, on_event, {key_of(c): (c, exp.workloads[0]) for c in exp.servers}, on_step)
    names = {key_of(c): c.name for c in exp.servers}

    run_s = START_S + req.warmup_s + req.duration_s
    _memory_first(req, exp, servers, left, seams, lambda text: measurer.say("calibration", text))

    # 1. calibrate
    asks = [Ask(key_for(s, p, t), CALIBRATION, 1, "tune: calibration") for s in servers
            for p, t in _calibration_points(req, s, cores)]
    missing = [a for a in asks if not measurer.samples(a.key, a.level)]
    if len(missing) * run_s > req.budget_s:
        raise ArenaError(f"--budget {req.budget_s:g}s: calibrating {len(servers)} server(s) takes {len(missing)} runs "
                         f"(about {len(missing) * run_s:.0f} s); give a larger --budget or fewer --servers")
    measurer.say("calibration", f"calibration: {len(asks)} run(s) at 1 client ({len(asks) - len(missing)} stored)")
    began = clock()
    measurer.measure(missing)
    if missing:  # the runs' own time here, not the estimate: the budget then fits what it can hold
        run_s = max(req.warmup_s + req.duration_s, (clock() - began) / len(missing))
    calibrations = _calibrate(exp, measurer, servers, left, lambda text: measurer.say("calibration", text))
    if not calibrations:  # its runs failed or were invalid: a measurement that failed, not bad input
        raise NotMeasured("arena tune: no server could be calibrated: " + "; ".join(f"{k}: {v}" for k, v in left.items()))
    _memory_check(req, calibrations, left)

    # 2. predict (a capacity search in the simulator for each: over the CPUs; the model's figure at a
    # fixed load is a formula, computed here)
    with over_the_cpus() if req.load is None else nullcontext(map) as map_fn:
        contenders, points = contenders_of(calibrations, lambda s: space(req, s, cores), names, req.goal, req.load,
                                           req.memory_bound[0] if req.memory_bound else None, map_fn)
        raced = race_field(contenders)
        others = [c for c in contenders if c not in raced]
        if req.load is None:
            others = with_reach(others, raced, calibrations, req.goal, map_fn)
    measurer.say("predict", f"predicted {points} configurations ({len(contenders)} fit the limits); the best {len(raced)} "
                            "to race")

    # 3. race and find capacity
    spent = clock() - start
    tuning = search(raced, exp.goal, req.load, measurer, budget_s=max(0.0, req.budget_s - spent), run_s=run_s,
                    clock=clock, threshold=exp.goal.threshold, on_step=lambda s: measurer.say(s.stage, s.text),
                    others=others, learn=learner(calibrations, contenders),
                    within=FINAL_WITHIN)
    chosen = _chosen(tuning, measurer, exp, names)
    measurer.say("choice", f"chosen: {chosen.name}" if chosen else f"no configuration chosen ({tuning.stopped})")
    with open_store(store_path) as store:
        why = diagnose(results(store, exp.name).cells)
    return Tuned(req, exp.name, store_path, calibrations, left, contenders, points, tuning, chosen, names,
                 clock() - start, len(asks), why)


def calibration_observations(runs: Sequence[Run], workloads: dict[str, Workload]) -> list[Observation]:
    """What tune calibrates the model from: its runs at one client (CALIBRATION), as observations,
    of an experiment with ``workloads`` (by name)."""
    return observations([r for r in runs if r.model == CALIBRATION.model and r.level == CALIBRATION.value],
                        workloads)


def _calibrate(exp: Experiment, measurer: Stored, servers: list[str], left: dict[str, str],
               on_step: Callable[[str], None]) -> dict[str, Calibration]:
    obs = calibration_observations(measurer.runs(), {w.name: w for w in exp.workloads})
    out = {}
    for s in servers:
        try:
            out[s] = calibrate(obs, s)
        except ValueError as e:
            flags = sorted({f for r in measurer.runs() if r.server == s and not r.valid for f in r.flags})
            left[s] = f"could not be calibrated: {e}" + (f" (its runs: {'; '.join(flags)})" if flags else "")
            on_step(f"{s}: left out: {left[s]}")
    return out


def _memory_first(req: Request, exp: Experiment, servers: list[str], left: dict[str, str], seams: Seams,
                  say: Callable[[str], None]) -> None:
    """Before any run, with a memory bound: each server started idle at 1x1 (its PSS, the least it
    takes, measured without the container's limits: a hard limit below it would kill it while it
    starts); one above the bound is left out, and a bound below every one is bad input (exit 2)."""
    if req.memory_bound is None:
        return
    idle = {}
    for s in list(servers):
        config = next(c for c in exp.servers if c.server == s and (c.processes or 1) == 1 and (c.threads or 1) == 1)
        try:
            idle[s] = idle_memory_mib(exp, config, seams)
        except ArenaError as e:
            left[s] = f"did not start: {str(e).splitlines()[0]}"
            servers.remove(s)
            continue
        say(f"{s}: 1x1 idle takes {idle[s]:.0f} MiB PSS")
    for s in _over_memory(req, idle, len(servers), left, "one process idle", "one idle process"):
        servers.remove(s)


def _over_memory(req: Request, one: dict[str, float], candidates: int, left: dict[str, str], what: str,
                 below: str) -> set[str]:
    """The servers whose one process (``one``: MiB) is above the memory bound, each said in ``left``;
    where that is every one of the ``candidates``, bad input."""
    bound, flag = req.memory_bound
    over = {s for s, m in one.items() if m > bound}
    for s in over:
        left[s] = f"{what} takes {one[s]:.0f} MiB > {flag} {bound:g} MiB"
    if over and len(over) == candidates:
        least = min(one, key=one.get)
        raise ArenaError(f"{flag} {bound:g}MiB: below {below} of every server tried (the "
                         f"smallest: {least} 1x1 at {one[least]:.0f} MiB PSS)")
    return over


def _memory_check(req: Request, calibrations: dict[str, Calibration], left: dict[str, str]) -> None:
    """A memory bound below one process of every server: said now, before the search."""
    if req.memory_bound is None:
        return
    one = {s: m for s, c in calibrations.items() if (m := c.memory_mib(1, 1)) is not None}
    for s in _over_memory(req, one, len(calibrations), left, "one process", "one process"):
        del calibrations[s]


def _chosen(t: Tuning, measurer: Stored, exp: Experiment, names: dict[Key, str]) -> Chosen | None:
    if t.choice is None:
        return None
    level = t.load or (Level("open", t.capacities[t.choice].lo) if t.choice in t.capacities else t.race_level)
    got = [s for s in measurer.samples(t.choice, level) if s.valid] if level else []
    config, _ = measurer.points[t.choice]
    return Chosen(t.choice, names[t.choice], config.server, config.processes, config.threads,
                  _app_of(exp, config), Figure.of([s.throughput for s in got]).median,
                  Figure.of([s.p99_ms for s in got]), Figure.of([s.memory_mib for s in got]).median, level)


def _app_of(exp: Experiment, config: ServerConfig):
    from arena.subjects import APPS

    return config.user_app or APPS[config.app]


