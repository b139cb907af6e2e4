"""A plan split into shards (``arena run --shard i/N``), one per job of a job array, merged back
with ``arena merge``. Pure.

Every shard plans the whole experiment with the same seed, then keeps its share: the server starts
(groups) dealt out by estimated time, the longest first, each to the shard with the least so far
(ties: the lowest index), so the shards take about equally long; within a shard the groups keep the
plan's shuffled order. The shares are disjoint and together the whole plan, whatever the index each
job is given.

``--shard auto`` reads the job array's own variables: Slurm's SLURM_ARRAY_TASK_ID (less
SLURM_ARRAY_TASK_MIN) and SLURM_ARRAY_TASK_COUNT; ``--shard auto/N`` takes N shards and the index
from a Kubernetes Indexed Job's JOB_COMPLETION_INDEX (0-based), else Slurm's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from arena.plan.experiment import Group

FORMS = "i/N (1 <= i <= N), auto (a Slurm array) or auto/N (a Kubernetes Indexed Job of N completions)"
MOST = 10_000


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse(text: str, env: Mapping[str, str]) -> Shard:
    """``i/N``, ``auto`` or ``auto/N`` -> a Shard (ValueError saying what is allowed and why not)."""
    m = re.fullmatch(r"\s*(auto|\d+)\s*(?:/\s*(\d+))?\s*", text or "")
    if not m or (m.group(1) != "auto" and m.group(2) is None):
        raise ValueError(f"must be {FORMS}, got '{text}'")
    count = int(m.group(2)) if m.group(2) else None
    if m.group(1) != "auto":
        index = int(m.group(1))
    elif count is not None and "JOB_COMPLETION_INDEX" in env:
        index = _int(env, "JOB_COMPLETION_INDEX") + 1
    elif "SLURM_ARRAY_TASK_ID" in env:
        index = _int(env, "SLURM_ARRAY_TASK_ID") - (_int(env, "SLURM_ARRAY_TASK_MIN") if "SLURM_ARRAY_TASK_MIN" in env else 0) + 1
        if count is None:
            if "SLURM_ARRAY_TASK_COUNT" not in env:
                raise ValueError("auto: SLURM_ARRAY_TASK_COUNT is not set (give auto/N)")
            count = _int(env, "SLURM_ARRAY_TASK_COUNT")
    else:
        raise ValueError(f"{text}: neither JOB_COMPLETION_INDEX (a Kubernetes Indexed Job, with auto/N) nor "
                         "SLURM_ARRAY_TASK_ID (a Slurm array) is set")
    if count is None or not 1 <= count <= MOST:
        raise ValueError(f"must have 1 to {MOST} shards, got '{text}'")
    if not 1 <= index <= count:
        raise ValueError(f"shard {index} of {count}: the index must be from 1 to {count} (got '{text}')")
    return Shard(index, count)


def _int(env: Mapping[str, str], name: str) -> int:
    value = env[name]
    if not re.fullmatch(r"\d+", value.strip()):
        raise ValueError(f"{name}={value!r} is not a whole number")
    return int(value)


def shares(groups: Sequence[Group], count: int, cost: Callable[[Group], float]) -> list[list[Group]]:
    """The plan's groups dealt into ``count`` shares of about equal estimated time (longest first to
    the least loaded; ties to the lowest index), each in the plan's order."""
    load = [0.0] * count
    owner: dict[int, int] = {}
    for i in sorted(range(len(groups)), key=lambda i: (-cost(groups[i]), i)):
        k = min(range(count), key=lambda s: (load[s], s))
        owner[i] = k
        load[k] += cost(groups[i])
    return [[g for i, g in enumerate(groups) if owner[i] == k] for k in range(count)]


def share(groups: Sequence[Group], shard: Shard, cost: Callable[[Group], float]) -> list[Group]:
    """This shard's groups (``shares``)."""
    return shares(groups, shard.count, cost)[shard.index - 1]
