"""An Experiment -> its runs, grouped by server start, in a randomized (seeded) order."""

from __future__ import annotations

import random

from arena.plan.experiment import Experiment, Group, RunSpec


def plan(exp: Experiment) -> list[Group]:
    """Every run of ``exp``, grouped by server start, in a randomized (seeded) order.

    Groups (configuration x repetition) are shuffled so that drift on the machine does not line
    up with one configuration; within a group the load levels run in ascending order (one server
    start serves them, each level with its own warm-up). Without ``reuse_server`` every run is its
    own group.
    """
    groups = []
    for rep in range(1, exp.repetitions + 1):
        for config in exp.servers:
            runs = tuple(RunSpec(config, level, rep, wl) for wl in exp.workloads
                         for level in sorted(wl.levels or exp.levels, key=lambda lv: lv.value))
            if exp.reuse_server:
                groups.append(Group(config, rep, runs))
            else:
                groups += [Group(config, rep, (run,)) for run in runs]
    random.Random(exp.seed).shuffle(groups)
    return groups
