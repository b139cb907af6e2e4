"""Running an experiment: each group of runs shares one server start; every run is warm-up ->
measure while probing -> validity check -> saved at once. Finished runs are skipped (resume).

What touches the machine comes in through :class:`Seams` (the server launcher, the drivers, the
resource probe; defaults: the real ones), so tests drive every path here, resume, a server that
does not start or dies, a driver that fails, with deterministic fakes.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import threading
import time
from functools import partial
from dataclasses import asdict, dataclass, field, replace
from contextlib import ExitStack
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from arena import __version__ as arena_version
from arena import sockets, speed as machine_speed
from arena.cpus import format_cpu_list
from arena.drivers import DRIVERS, cluster as cluster_driver
from arena.drivers.spec import LoadSpec
from arena.errors import ArenaError, NotSaved, stop_if_asked
from arena.limits import MiB, Limits
from arena.plan.expand import plan
from arena.plan.shard import Shard, share
from arena.model.estimate import group_s
from arena.plan.experiment import Experiment, Group, RunSpec, ServerConfig
from arena.plan.reader import parse_duration
from arena.probe import Probe, sample_once
from arena.results.load_result import LoadResult, SeriesPoint, to_dict
from arena.results.resources import ResourceResult
from arena.results.runs import Database
from arena.results.store import Store, rescue
from arena.results.validity import Flag, OutOfMemory, validity_flags
from arena.servers import catalog
from arena.servers.launch import RunningServer, ServerSpec, known_version, start
from arena.sockets import NoDelay
from arena.services import start_service
from arena.topology.deployment import start_deployment
from arena.topology.front import version as front_version
from arena.traffic.profile import parse_window, schedule
from arena.traffic.read import profile_times


@dataclass(frozen=True)
class Seams:
    """Where the runner meets the machine. ``launch(spec)`` starts a server and returns a running
    one (a context manager with ``url``, ``procset``, ``alive()``); ``drivers`` maps a driver's name to
    its ``run(spec, cpus, live)``; ``probe(procset, interval)`` makes a resource probe;
    ``idle_s``: how long each start is probed idle; ``speed(cpus)``: the machine's speed check (ms);
    ``cpu_busy(cpus)``: the CPUs' busy seconds since boot (the kernel's counters); ``speed_sample``:
    the one-unit check taken every half second during a run (None: none)."""

    launch: Callable[[ServerSpec], RunningServer] = start
    drivers: Mapping[str, Callable[..., LoadResult]] = field(
        default_factory=lambda: {name: d.run for name, d in DRIVERS.items()})
    probe: Callable[..., Probe] = Probe
    idle_s: float = 1.0
    start_service: Callable[..., Any] = start_service
    speed: Callable[[list[int]], float] = machine_speed.check_ms
    cpu_busy: Callable[[list[int]], float] = machine_speed.busy_s
    speed_sample: Callable[[list[int]], float] | None = partial(machine_speed.check_ms, trials=1)  # None: not during runs
    cluster: Callable[..., LoadResult] = cluster_driver.run  # ``run(spec, address)``: an experiment's [cluster]
    nodelay: Callable[[list[int], int], NoDelay] = sockets.nodelay  # TCP_NODELAY on the server's connections
    listen_overflows: Callable[[], tuple[int, int] | None] = sockets.listen_overflows  # the kernel's, since boot


@dataclass
class Event:
    """Progress, for whoever shows it: one per run done, skipped or failed, and "live" ones while a run goes."""

    kind: str  # "run" | "skipped" | "failed" | "live" (a run in progress)
    index: int  # runs handled so far, this one included
    total: int
    run: RunSpec
    result: LoadResult | None = None
    flags: list[Flag] | None = None
    message: str = ""
    point: SeriesPoint | None = None  # "live": one interval of the run in progress
    db: Database | None = None  # "run" with a database: its connections and refusals
    shared: bool = False  # "run": its server and the load generator shared CPUs ([layout] share)
    resources: ResourceResult | None = None  # "run": what the server's process set used (and a quota held back)


# ---------------------------------------------------------------------- environment


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ruby_version() -> str | None:
    try:
        out = subprocess.run(["ruby", "-e", "print RUBY_VERSION"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def environment(exp: Experiment) -> dict:
    """What the results depend on besides the experiment file."""
    fronts = sorted({c.topology.front for c in exp.servers if c.topology.front})
    return {
        "host": platform.node(), "cpu_model": _cpu_model(), "cpus": os.cpu_count(), "kernel": platform.release(),
        "python": platform.python_version(), "ruby": _ruby_version(), "arena": arena_version,
        "server_cpus": format_cpu_list(exp.server_cpus), "load_cpus": format_cpu_list(exp.load_cpus),
        **({"service_cpus": format_cpu_list(exp.service_cpus)} if exp.services else {}),
        "servers": dict(_server_version(c) for c in exp.servers),
        **({"fronts": {f: front_version(f) for f in fronts}} if fronts else {}),
        **({"cluster": exp.cluster.address, "server_host": exp.cluster.server_host} if exp.cluster else {}),
    }


def _server_version(c) -> tuple[str, str | None]:
    """A configuration's server and its version as it runs the configuration's app (named with where
    the version comes from when that is the app's own environment: a --venv, a Gemfile.lock)."""
    version, source = known_version(catalog.get_server(c.server), c.user_app or c.app)
    return (f"{c.server} ({source})" if source else c.server), version


# ---------------------------------------------------------------------- running


def load_spec(exp: Experiment, run: RunSpec, url: str) -> LoadSpec:
    closed = run.level.model == "closed"
    clients = run.workload.clients
    timed = {} if closed or not exp.profile else dict(schedule=profile_schedule(exp, run.level.value))
    return LoadSpec(
        url=url + run.workload.path, method=run.workload.method, expect_status=run.workload.expect_status,
        events=run.workload.events,
        mix=run.workload.mix,
        connections=int(run.level.value) if closed else None, rate=None if closed else run.level.value,
        arrival=exp.arrival, duration_s=exp.duration_s, requests=exp.requests, warmup_s=exp.warmup_s, keep_alive=clients.keep_alive,
        delay_s=clients.delay_s, upload_bps=clients.upload_bps, download_bps=clients.download_bps,
        request_start=exp.request_start, timeout_s=exp.timeout_s, seed=exp.seed + run.repetition,
        threads=exp.load_threads, **timed)


def profile_schedule(exp: Experiment, rate: float) -> list[float]:
    """The send times of a run at ``rate`` under the experiment's profile: the logs' arrivals in its
    window scaled to that mean rate, repeated to cover the warm-up and the measured time."""
    kind, length = parse_window(exp.profile_window, parse_duration) if exp.profile_window else (None, None)
    s = schedule(profile_times(exp.profile), rate=rate, window_kind=kind, window_s=length, seed=exp.seed)
    return s.repeated(exp.warmup_s + (exp.duration_s or 0.0)).tolist()


class Measured(NamedTuple):
    result: LoadResult
    resources: ResourceResult  # the server's
    flags: list[Flag]
    services: dict[str, ResourceResult]  # each service's (and the front's), by kind
    speed_ms: float | None  # the faster of the machine's speed checks around the run (speed.Reference.judged)
    window: tuple[float, float] | None = None  # the probed window (unix times)
    others_cores: float | None = None  # cores others than Arena took on the run's CPUs over the window


class _Window:
    """The measured window's instruments: the server's probe (each process's memory over time for a
    soak) and each service's, the machine's speed sampler, the CPUs' busy seconds and Arena's own at
    each end, and TCP_NODELAY on the server's accepted connections at its start."""

    def __init__(self, exp: Experiment, server: RunningServer, seams: Seams, services: Mapping[str, Any],
                 cpus: list[int], sampled: bool):
        self.server, self.seams, self.cpus = server, seams, cpus
        soak = exp.soak_every_s is not None
        self.probes = {"": seams.probe(server.procset, interval=exp.soak_every_s, per_process=True) if soak
                       else seams.probe(server.procset, interval=0.5),
                       **{kind: seams.probe(svc.procset, interval=0.5) for kind, svc in services.items()}}
        self.sampler = machine_speed.Sampler(cpus, check=seams.speed_sample) if sampled and seams.speed_sample else None
        self.stopped: dict[str, ResourceResult] = {}
        self.nodelay: list[NoDelay] = []
        self.times: list[float] = []
        self.busy: list[float] = []  # the CPUs' busy seconds and Arena's own CPU seconds, at each end
        self.checks: list = []  # the speed sampler's checks over the window

    def start(self) -> None:
        self.times.append(time.time())
        self.busy.extend((self.seams.cpu_busy(self.cpus), _own_cpu_s()))
        for p in self.probes.values():
            p.start()
        if self.sampler:
            self.sampler.start()
        if isinstance(self.server, RunningServer):  # the app server's own connections (behind a front: the front's)
            self.nodelay.append(self.seams.nodelay(self.server.procset.pids(), self.server.port))

    def stop(self) -> None:
        if self.sampler:
            self.checks.extend(self.sampler.stop())
        for k, p in self.probes.items():
            if p.started:
                self.stopped[k] = p.stop()
        self.busy.extend((self.seams.cpu_busy(self.cpus), _own_cpu_s()))
        self.times.append(time.time())

    def drive(self, exp: Experiment, run: RunSpec, live: Callable[[SeriesPoint], None] | None) -> LoadResult:
        """The run's load, the window started at the end of the warm-up and stopped at the end of the
        measured duration (bounded by a request count: probed until the driver returned)."""
        timers = [threading.Timer(exp.warmup_s, self.start)]
        if exp.duration_s is not None and exp.requests is None:
            timers.append(threading.Timer(exp.warmup_s + exp.duration_s, self.stop))
        for t in timers:
            t.start()
        try:
            spec = load_spec(exp, run, self.server.url)
            result = (self.seams.cluster(spec, exp.cluster.address) if exp.cluster
                      else self.seams.drivers[exp.driver](spec, cpus=list(exp.load_cpus), live=live))
        finally:
            for t in timers:
                t.cancel()
                t.join()
            if self.sampler:
                self.sampler.stop()  # where the driver failed before the window ended (a second stop is harmless)
        if not self.stopped:
            if not self.probes[""].started:
                self.start()
            self.stop()
        return result


def measure(exp: Experiment, run: RunSpec, server: RunningServer,
            live: Callable[[SeriesPoint], None] | None = None,
            seams: Seams = Seams(), services: Mapping[str, Any] = {},
            reference: machine_speed.Reference | None = None) -> Measured:
    """One run on a ready server: the probe covers the measured window, from the end of the warm-up
    to the end of the measured duration (not the drain of late answers after it: their CPU would be
    charged to the window's requests). A run bounded by a request count is probed until it ends. (The
    external tools run their warm-up as a separate run and start late by their own start-up time:
    for them the window is approximate.)
    ``live`` gets the run's per-second figures while it runs, where the driver can give them.
    Each service (by kind) is probed over the same window as the server. With a ``reference``, the
    machine's speed is checked on the server's and services' CPUs before and after the run, and a run
    in a spell of a slower machine is flagged. Over the window, the kernel's counters of those CPUs
    less the CPU of Arena's groups (and of Arena itself) say what others took of them: a run they
    took more than the experiment's others_threshold of is flagged. An OOM kill its cgroup counts from
    the warm-up on makes the run invalid, its first cause."""
    cpus = sorted(set(exp.server_cpus) | set(exp.service_cpus))
    checks = [seams.speed(cpus)] if reference is not None else []
    before = stable_pids(server)
    events0 = server.procset.memory_events()  # from the warm-up on: an OOM kill in it spoils the run too
    w = _Window(exp, server, seams, services, cpus, reference is not None)
    turned_away = seams.listen_overflows()  # from the warm-up on: a closed load connects in it
    result = w.drive(exp, run, live)
    checks += w.checks
    resources, lost, oom = _after(exp, run, server, w, seams, before, events0, turned_away)
    if reference is not None:
        checks.append(seams.speed(cpus))
    # sharing the server's CPUs ([layout] share), the generator is Arena's own there, not a neighbour:
    # its CPU over the window (its run's CPU, prorated from warm-up and measured time to the window)
    mine = 0.0
    if exp.shared and result.generator_cpu_s and len(w.times) == 2:
        ran_s = exp.warmup_s + (result.measured.duration_s or 0.0)
        mine = result.generator_cpu_s * min(1.0, (w.times[1] - w.times[0]) / ran_s) if ran_s > 0 else 0.0
    others = _others_cores(w.busy, [resources, *w.stopped.values()], w.times, mine)
    flags = validity_flags(result, error_threshold=exp.error_threshold, drift_threshold=exp.drift_threshold,
                           server_died=not server.alive(), processes_lost=(len(lost), len(before)) if lost else None,
                           slowdown=reference.slowdown(*checks) if checks else None,
                           speed_threshold=exp.speed_threshold, requests=exp.requests, others_threshold=exp.others_threshold,
                           others_share=None if others is None else others / len(cpus), oom=oom)
    return Measured(result, resources, flags, w.stopped, machine_speed.Reference.judged(*checks) if checks else None,
                    (w.times[0], w.times[-1]) if len(w.times) == 2 else None, others)


def _after(exp: Experiment, run: RunSpec, server: RunningServer, w: _Window, seams: Seams, before: set[int],
           events0, turned_away) -> tuple[ResourceResult, set[int], OutOfMemory | None]:
    """The server's resources over the window, with what the run did to it: TCP_NODELAY read at the
    start, the listen queue's overflows, the processes replaced (with its log's words on why) and
    the kernel's OOM kills; (resources, the processes lost, the OOM kill if any)."""
    resources = w.stopped.pop("")
    if w.nodelay:
        read = w.nodelay[0]
        resources = replace(resources, nodelay_checked=read.checked, nodelay_off=read.off,
                            nodelay_unchecked=read.unchecked)
    after, events = set(server.procset.pids()), server.procset.memory_events()
    lost = before - after
    now_away = seams.listen_overflows()
    if turned_away is not None and now_away is not None and not exp.cluster:  # a cluster's load comes from elsewhere
        resources = replace(resources, listen_overflows=now_away[0] - turned_away[0],
                            listen_drops=now_away[1] - turned_away[1])
    replaced = min(len(lost), len(after - before))
    if replaced or lost:  # why, in the server's own words, where it says (a worker timeout, a kill)
        resources = replace(resources, replaced=replaced, replaced_log=server.log_tail(REPLACED_LOG_LINES))
    kills = 0 if events is None or events0 is None else (events - events0).oom_kills
    oom = OutOfMemory(kills, len(before), tuple(sorted(lost)), len(after - before), run.config.limits.memory_mib,
                      resources.memory_peak_bytes) if kills else None
    return resources, lost, oom


REPLACED_LOG_LINES = 200  # of the server's log (its last 8 KiB at most), kept with a run whose processes were replaced


def _own_cpu_s() -> float:
    """Arena's own CPU seconds (this process and its threads: the probes, the runner) so far."""
    t = os.times()
    return t.user + t.system


def _others_cores(busy: list[float], groups: list[ResourceResult], window: list[float],
                  generator_s: float = 0.0) -> float | None:
    """Cores others than Arena kept busy on the run's CPUs over the window (speed.others_cores), from
    the counters read at its ends (``busy``: CPUs' busy, Arena's own, at the start then the end), the
    CPU of Arena's groups over it and ``generator_s``, the load generator's where it shares them; None
    where a group's CPU is not accounted."""
    if len(busy) != 4 or len(window) != 2 or any(g.cpu_s is None for g in groups):
        return None
    cpus_s, own_s = busy[2] - busy[0], busy[3] - busy[1]
    return machine_speed.others_cores(cpus_s, own_s + generator_s + sum(g.cpu_s for g in groups), window[1] - window[0])


def idle_cpu_cores(server: RunningServer, seams: Seams = Seams()) -> float | None:
    """The server's CPU use with no load (cores): its timers, reactors and helpers, over ``idle_s``
    after a start. Stored with each run of the configuration, so calibration can tell the cost of a
    request from the cost of being up; probed at the configuration's first start in an experiment
    (its later starts, repetitions and a search's probes, take the stored figure: a second each)."""
    probe = seams.probe(server.procset, interval=max(seams.idle_s, 0.01)).start()
    time.sleep(seams.idle_s)
    return probe.stop().cpu_cores


def stable_pids(server: RunningServer) -> set[int]:
    """The server's processes present in two readings 50 ms apart: its workers, not the helpers a
    server runs for a moment (Passenger runs `ps` every few seconds)."""
    first = set(server.procset.pids())
    time.sleep(0.05)
    return first & set(server.procset.pids())


def database_figures(pg: Any, pool: int | None, processes: int | None, mark: int | None) -> Database:
    """The run's :class:`Database` figures; ``pg``: the running database (None: none), ``mark``:
    where its log stood when the run began."""
    if pg is None:
        return Database()
    refused, first = pg.refusals(mark) if mark is not None else (None, None)
    return Database(None if pool is None else (processes or 1) * pool, pg.settings.max_connections, refused, first)


def row(run: RunSpec, exp: Experiment, m: Measured, env: dict, started_at: float, reused: bool,
        idle_cpu_cores: float | None = None, db: Database = Database(), launch: dict | None = None,
        topology: dict | None = None) -> dict:
    """The stored row of a run; ``launch``: how its server was started (RunningServer.described());
    ``topology``: the front's figures over the run's window (Deployment.window)."""
    result, resources, flags = m.result, m.resources, m.flags
    rt = result.measured.response_time
    c = run.config
    return {
        "run_key": run.key, "config": c.key, "label": c.name, "server": c.server, "app": c.app,
        "workload": run.workload.name,
        "processes": c.processes, "threads": c.threads, "connections": c.connections, "model": run.level.model,
        "level": run.level.value, "repetition": run.repetition, "driver": exp.driver, "started_at": started_at,
        "server_reused": int(reused), "valid": int(not flags), "flags": flags, "flag_kinds": [f.kind for f in flags],
        "throughput": result.measured.achieved_rps, "p50_us": rt.p("50") if rt else None,
        "p90_us": rt.p("90") if rt else None, "p99_us": rt.p("99") if rt else None, "errors": result.measured.errors,
        "cpu_s": resources.cpu_s, "pss_bytes": resources.pss_bytes, "uss_bytes": resources.uss_bytes,
        "load": to_dict(result), "resources": asdict(replace(resources, idle_cpu_cores=idle_cpu_cores)),
        "environment": env, "services": {kind: asdict(res) for kind, res in m.services.items()},
        "pool": c.pool, "db_connections": db.connections, "db_max_connections": db.max_connections,
        "db_refused": db.refused, "db_refused_first": db.refused_first, "speed_ms": m.speed_ms, "others_cores": m.others_cores,
        "why": run.why or None, "launch": launch or {},
        "topology": topology or {},
    }


def plan_groups(exp: Experiment, shard: Shard | None = None) -> list[Group]:
    """The experiment's server starts in the order they run: the whole plan, or a shard's share of
    it (plan/shard.py, dealt by each group's estimated time)."""
    whole = plan(exp)
    return whole if shard is None else share(whole, shard, partial(group_s, exp))


def run_experiment(exp: Experiment, store: Store, on_event: Callable[[Event], None] = lambda e: None,
                   seams: Seams = Seams(), retake_invalid: bool = False,
                   extra: Mapping[tuple, tuple[int, str]] | None = None,
                   chosen: Sequence[Group] | None = None, shard: Shard | None = None) -> RunCounts:
    """Run every run of ``exp`` not yet in ``store`` (with ``retake_invalid``, also each run whose
    every stored attempt is invalid: once more, stored beside them as its next retake; nothing stored
    is replaced). With ``extra`` (a cell, RunSpec.cell -> its next repetition and why), only those
    runs beyond the plan, each stored with why it was taken. With ``shard``, only its share of the plan
    (plan/shard.py: arena run --shard i/N). With ``chosen``, those runs (arena tune's,
    each with why), in that order, whatever the plan holds. Returns what it did with them (RunCounts)."""
    file = exp.path or exp.file  # stored resolved: its paths resolve from anywhere
    experiment_id = store.experiment_id(exp.name, file, exp.source)
    saver = Saver(store, experiment_id, {"name": exp.name, "file": file, "definition": exp.source})
    stored = store.done_keys(experiment_id)
    whole = plan_groups(exp, shard)
    groups = retakes(whole, stored) if retake_invalid else whole
    if extra:
        groups = beyond(exp, extra)
    if chosen is not None:
        groups = list(chosen)
    done = set(stored)
    total = sum(len(g.runs) for g in groups)
    env = environment(exp)
    progress = _Progress(total, on_event)
    todo = {g: [r for r in g.runs if r.key not in done] for g in groups}
    reference = machine_speed.Reference(store.speed_checks(experiment_id))
    idle: dict[str, float | None] = dict(store.idle_cores(experiment_id))  # by configuration, probed once
    with ExitStack() as stack:
        services: dict[str, Any] = {}
        if any(todo.values()):  # services only when something will run
            try:
                for spec in exp.services:
                    services[spec.kind] = stack.enter_context(seams.start_service(spec, list(exp.service_cpus)))
            except ArenaError as e:
                for r in (r for g in groups for r in g.runs):
                    if r.key in done:
                        progress.emit("skipped", r)
                    else:  # not a run: the next `arena run` tries again
                        failed(saver, progress, r, "service", f"service {spec.kind} did not start", e)
                return progress.counts
            env["services"] = {kind: svc.describe() for kind, svc in services.items()}
        for group in groups:
            for r in group.runs:
                if r.key in done:
                    progress.emit("skipped", r)
            if todo[group]:
                _run_group(exp, group, todo[group], saver, env, progress, seams, idle, services, reference)
    return progress.counts


def failed(saver: "Saver", progress: "_Progress", run: RunSpec, stage: str, what: str,
           error: ArenaError, tail: str | None = None) -> None:
    """A run that could not be made: stored with why (results/runs.py Failure; not a run, so the next
    ``arena run`` tries it again), then reported."""
    reason = f"{what}: {str(error).splitlines()[0]}"
    c = run.config
    saver.failure({
        "run_key": run.key, "config": c.key, "label": c.name, "server": c.server, "app": c.app,
        "workload": run.workload.name, "processes": c.processes, "threads": c.threads, "connections": c.connections,
        "model": run.level.model, "level": run.level.value, "repetition": run.repetition, "failed_at": time.time(),
        "stage": stage, "reason": reason, "log_tail": getattr(error, "log_tail", "") if tail is None else tail,
        "log_path": getattr(error, "log_path", None)})
    progress.emit("failed", run, message=reason)


@dataclass(frozen=True)
class Saver:
    """Where an experiment's runs go as they end: the store, one transaction each; a run the store
    cannot take (NotSaved: a full disk, a read-only one, the store removed) is kept in a file beside
    it (results/store.py rescue) and the experiment stops, saying how to bring it in."""

    store: Store
    experiment_id: int
    experiment: dict  # name, file, definition: what arena import needs to file the rows

    def run(self, values: dict) -> None:
        self._save(self.store.save_run, values, "runs", "the run just measured")

    def failure(self, values: dict) -> None:
        self._save(self.store.save_failure, values, "failures", "the failed run")

    def _save(self, save: Callable[[int, dict], None], values: dict, kind: str, what: str) -> None:
        try:
            save(self.experiment_id, values)
        except NotSaved as e:
            kept = rescue(self.store.path, self.experiment, **{kind: [values]})
            raise NotSaved(f"{e}; {what} is kept in {kept}: bring it in with: arena import {kept} "
                           f"--store {self.store.path}") from None


RETAKE = re.compile(r" retake \d+$")  # what RunSpec.key adds for a retake


def beyond(exp: Experiment, extra: Mapping[tuple, tuple[int, str]]) -> list[Group]:
    """The runs beyond the plan that ``extra`` asks for (a cell -> its next repetition and why), grouped
    by server start as the plan groups them, in the plan's shuffled order."""
    most = max(rep for rep, _ in extra.values())
    out = []
    for g in plan(replace(exp, repetitions=most)):
        runs = tuple(replace(r, why=extra[r.cell][1]) for r in g.runs
                     if r.cell in extra and extra[r.cell][0] == r.repetition)
        if runs:
            out.append(replace(g, runs=runs))
    return out


def retakes(groups: list[Group], stored: dict[str, bool]) -> list[Group]:
    """The plan with each run whose stored attempts are all invalid turned into its next retake
    (a run never stored, or with a valid attempt, stays as it is)."""
    attempts: dict[str, list[bool]] = {}  # a run's key -> whether each of its stored attempts is valid
    for key, valid in stored.items():
        attempts.setdefault(RETAKE.sub("", key), []).append(valid)

    def next_take(r: RunSpec) -> RunSpec:
        mine = attempts.get(r.key, [])
        return replace(r, retake=len(mine)) if mine and not any(mine) else r

    return [replace(g, runs=tuple(next_take(r) for r in g.runs)) for g in groups]


@dataclass(frozen=True)
class RunCounts:
    """What an invocation did with the runs it was given: ``done`` (run and saved), ``skipped``
    (already in the store), ``failed`` (not run: its server did not start, died before it, or its
    driver failed; stored as a failure, so the next ``arena run`` tries it again), and of the done,
    ``invalid`` (saved with validity flags). Counts of several invocations add up."""

    done: int = 0
    skipped: int = 0
    failed: int = 0
    invalid: int = 0

    def __add__(self, other: RunCounts) -> RunCounts:
        return RunCounts(self.done + other.done, self.skipped + other.skipped, self.failed + other.failed,
                         self.invalid + other.invalid)


# an event's kind -> the count it adds to
COUNTED = {"run": RunCounts(done=1), "skipped": RunCounts(skipped=1), "failed": RunCounts(failed=1)}


@dataclass
class _Progress:
    """Counts and events, in step: each run handled is counted once and reported once."""

    total: int
    on_event: Callable[[Event], None]
    counts: RunCounts = RunCounts()
    index: int = 0

    def emit(self, kind: str, run: RunSpec, **details) -> None:
        self.index += 1
        self.counts += COUNTED[kind]
        self.on_event(Event(kind, self.index, self.total, run, **details))

    def live(self, run: RunSpec, point: SeriesPoint) -> None:
        self.on_event(Event("live", self.index + 1, self.total, run, point=point))


def idle_memory_mib(exp: Experiment, config: ServerConfig, seams: Seams = Seams()) -> float:
    """The PSS (MiB) of ``config`` started and idle, the least it takes: measured without the
    container's limits (a hard limit below it would kill it while it starts), then stopped."""
    with seams.launch(server_spec(exp, replace(config, limits=Limits()), {})) as running:
        return sample_once(running.procset).pss / MiB


def server_spec(exp: Experiment, c: ServerConfig, services: Mapping[str, Any]) -> ServerSpec:
    """How a configuration's server is started: its knobs and settings on the experiment's server
    CPUs, with the services' addresses (and its database pool) in its environment."""
    addresses = {k: v for svc in services.values() for k, v in svc.env.items()}
    if c.pool is not None:
        addresses["ARENA_POOL"] = str(c.pool)
    return ServerSpec(c.server, c.user_app or c.app, c.processes, c.threads, c.connections, cpus=list(exp.server_cpus),
                      env={**addresses, **dict(c.env)}, settings=dict(c.settings), options=c.options, limits=c.limits,
                      **({"host": exp.cluster.server_host} if exp.cluster else {}))


def _run_group(exp: Experiment, group: Group, todo: list[RunSpec], saver: "Saver", env: dict,
               progress: _Progress, seams: Seams, idle: dict[str, float | None],
               services: Mapping[str, Any] = {}, reference: machine_speed.Reference | None = None) -> None:
    """One server start and its runs. ``idle``: each configuration's idle CPU, by key; one not there
    yet is probed at this start and kept there for the experiment's next starts of it."""
    c = group.config
    spec = server_spec(exp, c, services)
    try:
        server = (start_deployment(spec, c.topology, list(exp.service_cpus), seams.launch) if c.topology.front
                  else seams.launch(spec))
    except ArenaError as e:
        for r in todo:
            failed(saver, progress, r, "start", "the server did not start", e)
        return
    pg = services.get("postgres")
    measured = {**services, c.topology.front: server.front} if c.topology.front else services
    with server:
        if c.key not in idle:
            idle[c.key] = idle_cpu_cores(server, seams)
        for n, r in enumerate(todo):
            stop_if_asked()  # a Ctrl-C or SIGTERM whose exception was lost (errors.ask_to_stop): no next run
            if not server.alive():  # the rest of this start cannot run on a dead server
                died = ArenaError("its processes exited")
                for rest in todo[n:]:
                    failed(saver, progress, rest, "server died",
                           "not run: the server died during an earlier run of its start", died, server.log_tail())
                return
            started_at = time.time()

            def live(point: SeriesPoint, r: RunSpec = r) -> None:
                if exp.duration_s is None or point.t < exp.duration_s:  # not the late answers after the window
                    progress.live(r, point)

            mark = pg.log_mark() if pg is not None else None
            try:
                m = measure(exp, r, server, live=live, seams=seams, services=measured, reference=reference)
            except ArenaError as e:
                stop_if_asked()  # the driver failed because the signal stopped it too: not a failure to keep
                failed(saver, progress, r, "driver", "the driver failed", e)
                continue
            if m.result.interrupted:
                raise KeyboardInterrupt  # a partial run is not kept: the next `arena run` redoes it
            stop_if_asked()  # a run measured while a stop was asked for is not kept either
            db = database_figures(pg, c.pool, getattr(server, "knobs", {}).get("processes"), mark)
            front = server.window(*m.window) if c.topology.front and m.window else {}
            saver.run(row(r, exp, m, env, started_at, reused=n > 0, idle_cpu_cores=idle[c.key], db=db,
                          launch=server.described(), topology=front))
            progress.emit("run", r, result=m.result, flags=m.flags, db=db, shared=exp.shared, resources=m.resources)
            if m.flags:
                progress.counts += RunCounts(invalid=1)
