"""Sharded sweeps: a plan's shares (plan/shard.py) are disjoint and whole."""

import pytest

from arena.app.experiments import plan_file
from arena.plan.experiment import Group, ServerConfig
from arena.plan.shard import Shard, parse, shares
from test_runner_seams import experiment_file


def test_a_shard_is_given_as_i_of_n_or_read_from_the_job_array():
    assert parse("2/4", {}) == Shard(2, 4)
    assert parse("auto/3", {"JOB_COMPLETION_INDEX": "0"}) == Shard(1, 3)  # Kubernetes: 0-based
    slurm = {"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "5", "SLURM_ARRAY_TASK_COUNT": "4"}
    assert parse("auto", slurm) == Shard(3, 4)
    for bad, why in (("5/4", "the index must be from 1 to 4"), ("0/4", "the index must be from 1 to 4"),
                     ("2", "must be i/N"), ("auto", "neither JOB_COMPLETION_INDEX"), ("1/0", "must have 1 to")):
        with pytest.raises(ValueError, match=why):
            parse(bad, {})
    with pytest.raises(ValueError, match="JOB_COMPLETION_INDEX='x' is not a whole number"):
        parse("auto/2", {"JOB_COMPLETION_INDEX": "x"})


def test_shares_are_disjoint_whole_in_plan_order_and_balanced_by_time():
    groups = [Group(ServerConfig("puma", "rack", threads=t), 1, ()) for t in range(1, 11)]
    cost = {g: float(i % 4 + 1) for i, g in enumerate(groups)}  # 1, 2, 3, 4, 1, 2, ...
    parts = shares(groups, 3, cost.__getitem__)
    assert sorted((g for p in parts for g in p), key=groups.index) == groups  # each group once
    assert all(p == sorted(p, key=groups.index) for p in parts)  # the plan's (shuffled) order kept
    loads = [sum(cost[g] for g in p) for p in parts]
    assert max(loads) - min(loads) <= max(cost.values())  # longest first to the least loaded
    assert shares(groups, 3, cost.__getitem__) == parts  # the same on every job


def test_the_shards_dry_runs_are_disjoint_and_together_the_whole_plan(tmp_path):
    f = experiment_file(tmp_path, "1, 4")
    whole = {r.key for g in plan_file(str(f)).groups for r in g.runs}
    shards = [{r.key for g in plan_file(str(f), Shard(i, 3)).groups for r in g.runs} for i in (1, 2, 3)]
    assert set().union(*shards) == whole and sum(map(len, shards)) == len(whole)
