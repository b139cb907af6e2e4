"""Plan and run an experiment file into a store: the one place that decides where its runs are made
(here, on the cluster's server host, or as a capacity search)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from arena.app.find import search_capacities
from arena.app.storage import open_store
from arena.errors import ArenaError
from arena.model.estimate import estimate_s, group_s
from arena.plan.expand import plan
from arena.plan.shard import Shard
from arena.plan.experiment import Experiment, Group
from arena.plan.parse import Overrides, load_experiment
from arena.runner import Event, RunCounts, Seams, plan_groups, run_experiment
from arena.servers.cgroup import limits_problem


@dataclass(frozen=True)
class Planned:
    experiment: Experiment
    groups: list[Group]  # server starts, in the order they will run
    estimate_s: float
    shard: Shard | None = None  # this share of the plan (arena run --shard i/N)
    starts: int = 0  # with a shard: the server starts of the whole plan


def plan_file(path: str, shard: Shard | None = None, server_here: bool = False,
              overrides: Overrides = Overrides()) -> Planned:
    """Read and check an experiment file and plan it (nothing runs): the whole plan, or a shard's share
    (``server_here``: on the cluster's server host, whose CPUs the server's are; ``overrides``: what
    the command's flags set over the file)."""
    exp = load_experiment(path, server_here, overrides)
    if shard is None:
        return Planned(exp, plan_groups(exp), estimate_s(exp))
    mine = plan_groups(exp, shard)
    return Planned(exp, mine, sum(group_s(exp, g) for g in mine), shard, len(plan(exp)))


def refuse_limits(exp: Experiment) -> None:
    """Refuse, before any server starts, a file whose limits this machine cannot set (the one line
    names the controller it lacks)."""
    for c in exp.servers:
        problem = limits_problem(c.limits)
        if problem:
            raise ArenaError(f"{exp.file}: {c.limits.keys} ({c.name}): {problem}")


def run_file(path: str, store_path: str, on_plan: Callable[[Planned], None] = lambda p: None,
             on_event: Callable[[Event], None] = lambda e: None, dry_run: bool = False,
             seams: Seams = Seams(), retake_invalid: bool = False,
             on_step: Callable[[str], None] = lambda s: None, shard: Shard | None = None,
             server_host: str | None = None, overrides: Overrides = Overrides()) -> RunCounts | None:
    """Read and plan the experiment file, hand the plan to ``on_plan``, then (unless ``dry_run``)
    run what of it the store does not hold yet (resume), and with ``retake_invalid`` each run whose
    stored attempts are all invalid once more (runner.run_experiment). With ``[load] find =
    "capacity"``, each configuration's capacity is searched instead (app/find.py search_capacities),
    each step of the search told to ``on_step``; the capacities found are the experiment's analysis'
    (app/analysis.py). With ``[cluster] server = "worker"``, the runs are made on the cluster's
    server host (app/remote.py), which runs this with its own address as ``server_host``."""
    planned = plan_file(path, shard, server_here=server_host is not None, overrides=overrides)
    cluster = planned.experiment.cluster
    if server_host is not None and cluster is not None:  # on the server's host: its servers listen here
        planned = replace(planned, experiment=replace(planned.experiment,
                                                      cluster=replace(cluster, server="here", server_host=server_host)))
    on_plan(planned)
    if dry_run:
        return None
    if planned.experiment.cluster is not None and planned.experiment.cluster.server == "worker":
        from arena.app.remote import run_on_server_host

        if overrides != Overrides():  # the server's host reads the file itself
            raise ArenaError(f"{path}: its runs are made on [cluster]'s server host, which reads the file as it is: "
                             "set [layout] share and the servers' limits there, not by flags")

        exp = planned.experiment
        return run_on_server_host(path, exp.name, store_path, exp.cluster.address, on_event, retake_invalid, shard,
                                  run=run_file)
    if shard is not None and planned.experiment.find:
        raise ArenaError(f"--shard {shard}: {path} searches capacities ([load] find): a search is not sharded")
    refuse_limits(planned.experiment)
    if planned.experiment.find == "capacity":
        return search_capacities(planned.experiment, store_path, on_event, on_step, seams)
    with open_store(store_path, write=True) as store:
        return run_experiment(planned.experiment, store, on_event, seams, retake_invalid, shard=shard)
